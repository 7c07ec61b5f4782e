# Compares two files of a saved model byte for byte, except the random pair id save_graph writes into
# each pair (`"pair": "<32 hex>"` in the JSON, `"rml.pair":"<32 hex>"` in the safetensors header; see
# docs/format.md, "The pair binding"), which differs between any two saves.
# Usage: cmake -DA=<file> -DB=<file> -P compare_models.cmake
# The id's 32 digits are 32 ASCII bytes, so 64 digits of the HEX reading, after `"pair": "` or `"rml.pair":"`.
string(REPEAT "[0-9a-f][0-9a-f]" 32 id)
foreach(side A B)
  file(READ "${${side}}" hex HEX)
  string(REGEX REPLACE "(2270616972223a2022|22726d6c2e70616972223a22)${id}22" "\\1<pair>22" hex "${hex}")
  set(${side}_hex "${hex}")
endforeach()
if(NOT A_hex STREQUAL B_hex)
  message(FATAL_ERROR "${A} and ${B} differ (beyond their pair ids)")
endif()
