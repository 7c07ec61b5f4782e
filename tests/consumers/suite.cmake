# Every way of consuming rml is a CTest test (label `consumer`): install + find_package,
# add_subdirectory, FetchContent, a meson subproject, pkg-config with a plain compiler line, the
# README's plain `g++ -I...` line, and rml::rml_split (the kernels compiled in one of two translation
# units). Each configures, builds and runs a small project; see consumers/consume.cmake.
#
# Included from tests/CMakeLists.txt. Not registered in sanitizer builds: they test packaging,
# which the sanitizer flags do not change, and the plain build already runs them.
if(CMAKE_CXX_FLAGS MATCHES "-fsanitize")
  return()
endif()

set(_rml_consumer_dir "${CMAKE_CURRENT_LIST_DIR}")
set(_rml_consumer_work "${CMAKE_CURRENT_BINARY_DIR}/consumers")
find_program(RML_MESON_EXECUTABLE meson)
find_program(RML_PKG_CONFIG_EXECUTABLE pkg-config)

function(rml_add_consumer_test kind)
  cmake_parse_arguments(ARG "" "" "FIXTURE_SETUP;FIXTURE_REQUIRED" ${ARGN})
  add_test(NAME consumer.${kind}
           COMMAND "${CMAKE_COMMAND}" -DKIND=${kind} "-DRML_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
                   "-DWORK_DIR=${_rml_consumer_work}/${kind}" "-DPREFIX=${_rml_consumer_work}/prefix"
                   "-DGENERATOR=${CMAKE_GENERATOR}" "-DCXX=${CMAKE_CXX_COMPILER}"
                   "-DMODEL=${PROJECT_SOURCE_DIR}/tests/data/torch_mlp" "-DMESON=${RML_MESON_EXECUTABLE}"
                   -P "${_rml_consumer_dir}/consume.cmake")
  set_tests_properties(consumer.${kind} PROPERTIES LABELS consumer TIMEOUT 300
                                                   SKIP_REGULAR_EXPRESSION "rml-consumer-skip:")
  if(ARG_FIXTURE_SETUP)
    set_tests_properties(consumer.${kind} PROPERTIES FIXTURES_SETUP ${ARG_FIXTURE_SETUP})
  endif()
  if(ARG_FIXTURE_REQUIRED)
    set_tests_properties(consumer.${kind} PROPERTIES FIXTURES_REQUIRED ${ARG_FIXTURE_REQUIRED})
  endif()
endfunction()

rml_add_consumer_test(install FIXTURE_SETUP rml_installed)
rml_add_consumer_test(find_package FIXTURE_REQUIRED rml_installed)
rml_add_consumer_test(split FIXTURE_REQUIRED rml_installed)
rml_add_consumer_test(dependency_lookup.missing FIXTURE_REQUIRED rml_installed)
rml_add_consumer_test(dependency_lookup.msgpack6 FIXTURE_REQUIRED rml_installed)
rml_add_consumer_test(add_subdirectory)
rml_add_consumer_test(plain_include)
rml_add_consumer_test(fetchcontent)
# A CI checkout may belong to another user than the one running the tests; trust this one
# repository (and nothing else) for git's ownership check, for this test only.
set_tests_properties(consumer.fetchcontent PROPERTIES ENVIRONMENT
                     "GIT_CONFIG_COUNT=1;GIT_CONFIG_KEY_0=safe.directory;GIT_CONFIG_VALUE_0=${PROJECT_SOURCE_DIR}")
if(RML_MESON_EXECUTABLE)
  rml_add_consumer_test(meson_subproject)
else()
  message(WARNING "rml: meson not found; the test consumer.meson_subproject is not registered")
endif()
if(RML_PKG_CONFIG_EXECUTABLE)
  rml_add_consumer_test(pkg_config FIXTURE_REQUIRED rml_installed)
else()
  message(WARNING "rml: pkg-config not found; the test consumer.pkg_config is not registered")
endif()

# The Conan recipe and the vcpkg port, checked without Conan or vcpkg (see check_recipes.py).
find_package(Python3 QUIET COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME consumer.recipes COMMAND Python3::Interpreter "${_rml_consumer_dir}/check_recipes.py" "${PROJECT_SOURCE_DIR}")
  set_tests_properties(consumer.recipes PROPERTIES LABELS consumer)
endif()
