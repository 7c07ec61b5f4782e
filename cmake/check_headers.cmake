# Checks rml's layering: every header under include/rml/{core,ir,io,check,edit,serial} must
# preprocess without reaching Eigen (only exec/ may), and rml/rml.hpp must compile alone
# in a fresh translation unit with -Wall -Wextra -Wpedantic -Werror, in the default mode and with
# RML_SEPARATE_KERNELS (where it must reach neither Eigen, nor a kernel, nor simdjson, nor a definition
# header of io, check or edit: see rml/core/linkage.hpp), and
# fails with rml's #error below C++20.
# Usage: cmake -DCXX=<compiler> -DINCLUDE_DIR=<include> -DWORK_DIR=<dir> -P check_headers.cmake
set(failed "")
foreach(area core ir io check edit serial)
  file(GLOB_RECURSE headers "${INCLUDE_DIR}/rml/${area}/*.hpp")
  foreach(header ${headers})
    execute_process(COMMAND ${CXX} -std=c++20 -I${INCLUDE_DIR} -MM -x c++ ${header}
                    OUTPUT_VARIABLE deps ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      list(APPEND failed "${header}: does not preprocess alone:\n${err}")
    elseif(deps MATCHES "[Ee]igen")
      list(APPEND failed "${header}: pulls in Eigen, which only rml/exec may include")
    endif()
  endforeach()
endforeach()

set(extra "")
foreach(dir ${EXTRA_INCLUDES})
  list(APPEND extra -isystem ${dir})
endforeach()
file(MAKE_DIRECTORY ${WORK_DIR})
file(WRITE ${WORK_DIR}/alone.cpp "#include <rml/rml.hpp>\nint main() { return rml::version.major; }\n")
execute_process(COMMAND ${CXX} -std=c++20 -Wall -Wextra -Wpedantic -Werror -I${INCLUDE_DIR} ${extra} -DMSGPACK_NO_BOOST -fsyntax-only
                        ${WORK_DIR}/alone.cpp
                ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  list(APPEND failed "rml/rml.hpp does not compile alone with -Werror:\n${err}")
endif()

# Below C++20 the first error is rml's own #error, not hundreds from deep inside a header.
execute_process(COMMAND ${CXX} -std=c++17 -I${INCLUDE_DIR} ${extra} -DMSGPACK_NO_BOOST -fsyntax-only ${WORK_DIR}/alone.cpp
                ERROR_VARIABLE err RESULT_VARIABLE rc)
string(REGEX MATCH "[^\n]*error[^\n]*" first_error "${err}")
string(REGEX MATCHALL "error:" errors "${err}")
list(LENGTH errors error_count)
if(rc EQUAL 0 OR NOT first_error MATCHES "rml: needs C\\+\\+20" OR error_count GREATER 2)
  list(APPEND failed "rml/rml.hpp with -std=c++17: not stopped by rml's #error (exit ${rc}, ${error_count} errors):\n${err}")
endif()

# A translation unit that only declares the kernels: every header it reads (-M lists system ones too).
execute_process(COMMAND ${CXX} -std=c++20 -I${INCLUDE_DIR} ${extra} -DMSGPACK_NO_BOOST -DRML_SEPARATE_KERNELS -M
                        ${WORK_DIR}/alone.cpp
                OUTPUT_VARIABLE deps ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  list(APPEND failed "rml/rml.hpp does not preprocess with RML_SEPARATE_KERNELS:\n${err}")
else()
  string(REGEX MATCHALL "[^ \\\n]*(/Eigen/|/simdjson.h|rml/exec/kernels/|rml/exec/kernel_table.hpp|rml/exec/detail/(implementation|program_builder|run_node).hpp|rml/(io|check|edit)/detail/(file|[a-z_]+_impl).hpp)[^ \\\n]*" heavy "${deps}")
  if(heavy)
    list(REMOVE_DUPLICATES heavy)
    list(SUBLIST heavy 0 6 heavy)
    string(REPLACE ";" "\n  " heavy "${heavy}")
    list(APPEND failed "rml/rml.hpp with RML_SEPARATE_KERNELS reaches what only the implementation TU may:\n  ${heavy}")
  endif()
endif()
execute_process(COMMAND ${CXX} -std=c++20 -Wall -Wextra -Wpedantic -Werror -I${INCLUDE_DIR} ${extra} -DMSGPACK_NO_BOOST
                        -DRML_SEPARATE_KERNELS -fsyntax-only ${WORK_DIR}/alone.cpp
                ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  list(APPEND failed "rml/rml.hpp does not compile alone with RML_SEPARATE_KERNELS and -Werror:\n${err}")
endif()

if(failed)
  string(REPLACE ";" "\n" text "${failed}")
  message(FATAL_ERROR "${text}")
endif()
message(STATUS "headers: layering, and rml.hpp alone in both kernel modes, OK")
