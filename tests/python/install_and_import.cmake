# Installs the python component of BUILD_DIR under PREFIX and imports rml from there with PYTHON.
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --component python --prefix "${PREFIX}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install failed:\n${out}\n${err}")
endif()
set(check "import rml, sys; assert rml.__file__.startswith(sys.argv[1]), rml.__file__; ")
string(APPEND check "print(rml.relu([1.0, -1.0]).tolist())")
execute_process(COMMAND ${CMAKE_COMMAND} -E env "PYTHONPATH=${PREFIX}/${PACKAGE_DIR}" "${PYTHON}" -c "${check}" "${PREFIX}"
                WORKING_DIRECTORY "${PREFIX}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out STREQUAL "[1.0, 0.0]\n")
  message(FATAL_ERROR "the installed rml does not import or compute (exit ${rc}):\n${out}\n${err}")
endif()
