# The Python bindings' suite: the seed's Python programs ported to rml (output compared line by line with
# python/examples/expected/) and the bindings' pytest file. Registered only when the extension target exists;
# tests/ is configured before python/, so python/CMakeLists.txt includes this file again once it has made it.
if(NOT TARGET rml_python)
  return()
endif()
get_property(_rml_python_suite_done GLOBAL PROPERTY RML_PYTHON_SUITE_REGISTERED)
if(_rml_python_suite_done)
  return()
endif()
set_property(GLOBAL PROPERTY RML_PYTHON_SUITE_REGISTERED TRUE)

# The build tree's package first, then python/ for the exporters (rml_export) and tests/zoo for the zoo models.
set(_rml_py_path "${RML_PYTHON_PACKAGE_DIR}/..:${PROJECT_SOURCE_DIR}/python:${PROJECT_SOURCE_DIR}/tests/zoo")
set(_rml_py_env "PYTHONPATH=${_rml_py_path}" "PYTHONDONTWRITEBYTECODE=1" "OMP_NUM_THREADS=1")
set(_rml_py_examples "${PROJECT_SOURCE_DIR}/python/examples")

foreach(example get_the_graphs side_by_side pipeline merge_into split_at_a_cut split_by_a_function extract
                round_trip consumption across_cpus across_devices)
  set(_exit 0)
  if(example STREQUAL "across_devices")
    set(_exit 3)  # no accelerator in this build: the program prints its BLOCKED line and exits with 3
  endif()
  add_test(NAME python.example.${example}
           COMMAND ${Python3_EXECUTABLE} "${_rml_py_examples}/run_example.py" "${_rml_py_examples}/${example}.py"
                   "${_rml_py_examples}/expected/${example}.txt" ${_exit})
  set_tests_properties(python.example.${example} PROPERTIES LABELS "python;example" ENVIRONMENT "${_rml_py_env}"
                                                            TIMEOUT 120)
endforeach()

# --noconftest: python/tests/conftest.py puts the source python/ first on the path, whose rml/ has no extension.
add_test(NAME python.bindings
         COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider --noconftest
                 "${PROJECT_SOURCE_DIR}/python/tests/test_bindings.py"
                 "${PROJECT_SOURCE_DIR}/python/tests/test_file_safety.py")
set_tests_properties(python.bindings PROPERTIES LABELS "python" ENVIRONMENT "${_rml_py_env};RML_REQUIRE_BINDINGS=1"
                                                TIMEOUT 300)

# rml.InferenceSession: good and bad feeds, zero copies, run_into (python/tests/test_session.py).
add_test(NAME python.session
         COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider --noconftest
                 "${PROJECT_SOURCE_DIR}/python/tests/test_session.py")
set_tests_properties(python.session PROPERTIES LABELS "python" TIMEOUT 300
                     ENVIRONMENT "${_rml_py_env};RML_REQUIRE_BINDINGS=1;RML_TEST_DATA=${PROJECT_SOURCE_DIR}/tests/data")

# `pip install .` into a fresh venv, offline, and the installed package runs a model. It compiles the
# extension once more (about as long as the rml_python target).
add_test(NAME python.pip_install
         COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/pip_install
                 -DPYTHON=${Python3_EXECUTABLE} "-DLAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}"
                 -P "${CMAKE_CURRENT_LIST_DIR}/pip_install.cmake")
set_tests_properties(python.pip_install PROPERTIES LABELS "python" TIMEOUT 1200)

# `cmake --install` of the python component gives a package that imports and computes.
add_test(NAME python.install
         COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DPREFIX=${CMAKE_CURRENT_BINARY_DIR}/python_install
                 -DPACKAGE_DIR=${RML_PYTHON_INSTALL_DIR} -DPYTHON=${Python3_EXECUTABLE}
                 -P "${CMAKE_CURRENT_LIST_DIR}/install_and_import.cmake")
set_tests_properties(python.install PROPERTIES LABELS "python" TIMEOUT 120)
