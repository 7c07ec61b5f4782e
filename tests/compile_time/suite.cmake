# compile_time (label `compile-time`): what a translation unit that includes <rml/rml.hpp> and runs
# a model (the split consumer's run.cpp) costs, with the kernels in it (the default) and without
# (RML_SEPARATE_KERNELS), next to one that includes <Eigen/Dense>, compiled in the same run at -O2
# (see measure.py). It prints times and
# peak memory and fails only if a build or a run fails or computes a wrong result: a timing
# threshold on a shared machine would fail for reasons that are not rml's.
#
# Included from tests/CMakeLists.txt. Not registered in sanitizer builds (it would measure the
# sanitizers) nor with compilers that do not take GCC's flags.
if(CMAKE_CXX_FLAGS MATCHES "-fsanitize" OR NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  return()
endif()
find_package(Python3 QUIET COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(WARNING "rml: no Python interpreter; the test compile_time is not registered")
  return()
endif()
set(RML_COMPILE_TIME_ROUNDS 1 CACHE STRING "Interleaved rounds the compile_time test times (it prints medians)")

# The compile line a consumer's build would produce for rml::rml, with '|' between items.
set(_rml_ct_targets rml Eigen3::Eigen simdjson::simdjson ${RML_MSGPACK_TARGET})
set(_rml_ct_includes "")
set(_rml_ct_defines "")
foreach(target ${_rml_ct_targets})
  list(APPEND _rml_ct_includes "$<TARGET_PROPERTY:${target},INTERFACE_INCLUDE_DIRECTORIES>")
  list(APPEND _rml_ct_defines "$<TARGET_PROPERTY:${target},INTERFACE_COMPILE_DEFINITIONS>")
endforeach()

add_test(NAME compile_time
         COMMAND Python3::Interpreter "${CMAKE_CURRENT_LIST_DIR}/measure.py" --cxx "${CMAKE_CXX_COMPILER}"
                 --work "${CMAKE_CURRENT_BINARY_DIR}/compile_time" --model "${PROJECT_SOURCE_DIR}/tests/data/torch_mlp"
                 --user-tu "${PROJECT_SOURCE_DIR}/tests/consumers/split/run.cpp"
                 --impl-tu "${PROJECT_SOURCE_DIR}/tests/consumers/split/kernels.cpp"
                 --rounds ${RML_COMPILE_TIME_ROUNDS} "--flags=-O2|-pthread"
                 "--include-dirs=$<JOIN:${_rml_ct_includes},|>" "--defines=$<JOIN:${_rml_ct_defines},|>"
                 "--libs=$<TARGET_LINKER_FILE:simdjson::simdjson>|-pthread"
                 "--implicit-include-dirs=$<JOIN:${CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES},|>")
# Not RUN_SERIAL: the ratio it prints is of CPU time, which other tests on the other core move
# little (wall time they do move); running alone cost CI a core for its whole duration.
set_tests_properties(compile_time PROPERTIES LABELS compile-time TIMEOUT 1800)
