# Conformance suite: the exporters' Python tests, the model zoo and the ONNX backend node tests (included from
# tests/CMakeLists.txt, so CMAKE_CURRENT_SOURCE_DIR is tests/). Needs Debian's /usr/bin/python3 with torch,
# torchvision, onnx, numpy and pytest, and libonnx-testdata for the node tests.
find_program(RML_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT RML_PYTHON3)
  message(STATUS "rml conformance: /usr/bin/python3 not found; exporter and conformance tests skipped")
  return()
endif()

set(rml_conformance_dir "${CMAKE_CURRENT_BINARY_DIR}/conformance")
set(rml_python_env "PYTHONDONTWRITEBYTECODE=1")

# The exporters' own tests (pytest): safetensors writer, NumPy reference, PyTorch and ONNX lowering, zoo fixtures.
set(rml_exporter_tests test_safetensors.py test_reference.py test_torch_export.py test_onnx_export.py)
list(TRANSFORM rml_exporter_tests PREPEND "${PROJECT_SOURCE_DIR}/python/tests/")
add_test(NAME python_exporters COMMAND ${RML_PYTHON3} -m pytest -q -p no:cacheprovider ${rml_exporter_tests})
set_tests_properties(python_exporters PROPERTIES LABELS "python;conformance" ENVIRONMENT "${rml_python_env}"
                                                 TIMEOUT 300)

# Fixtures: the large zoo models (ResNet-18, MobileNetV2) and the converted ONNX node tests, built at test time.
add_test(NAME zoo_generate_large
         COMMAND ${RML_PYTHON3} "${CMAKE_CURRENT_SOURCE_DIR}/zoo/gen_zoo.py" --generated --out "${rml_conformance_dir}/zoo")
set_tests_properties(zoo_generate_large PROPERTIES FIXTURES_SETUP rml_zoo_large LABELS "conformance"
                                                   ENVIRONMENT "${rml_python_env}" TIMEOUT 300)
add_test(NAME zoo_generate_half
         COMMAND ${RML_PYTHON3} "${CMAKE_CURRENT_SOURCE_DIR}/zoo/gen_zoo.py" --half --out "${rml_conformance_dir}/zoo16")
set_tests_properties(zoo_generate_half PROPERTIES FIXTURES_SETUP rml_zoo_half LABELS "conformance"
                                                  ENVIRONMENT "${rml_python_env}" TIMEOUT 300)
add_test(NAME onnx_nodes_convert
         COMMAND ${RML_PYTHON3} "${CMAKE_CURRENT_SOURCE_DIR}/conformance/convert_node_tests.py"
                 --out "${rml_conformance_dir}/onnx_nodes")
set_tests_properties(onnx_nodes_convert PROPERTIES FIXTURES_SETUP rml_onnx_nodes LABELS "conformance"
                                                   ENVIRONMENT "${rml_python_env}" TIMEOUT 300)

# The C++ side: every exported model and converted case run by the executor.
if(EXISTS "${PROJECT_SOURCE_DIR}/include/rml/exec/executor.hpp")
  add_executable(rml_tests_conformance "${CMAKE_CURRENT_SOURCE_DIR}/conformance/test_conformance.cpp"
                                       $<TARGET_OBJECTS:rml_doctest_main> $<TARGET_OBJECTS:rml_test_implementation>)
  target_link_libraries(rml_tests_conformance PRIVATE rml::rml_split doctest::doctest rml_warnings)
  target_compile_definitions(rml_tests_conformance PRIVATE RML_TEST_DATA_DIR="${RML_TEST_DATA_DIR}"
                                                           RML_TEST_BUILD_DIR="${RML_TEST_BUILD_DIR}")
  add_test(NAME conformance_zoo_small COMMAND rml_tests_conformance --no-version=true "--test-case=zoo: committed*")
  add_test(NAME conformance_zoo_large COMMAND rml_tests_conformance --no-version=true "--test-case=zoo: generated*")
  add_test(NAME conformance_zoo_half COMMAND rml_tests_conformance --no-version=true "--test-case=zoo: 16-bit*")
  add_test(NAME conformance_onnx_nodes COMMAND rml_tests_conformance --no-version=true "--test-case=onnx node tests")
  set_tests_properties(conformance_zoo_small conformance_zoo_large conformance_zoo_half conformance_onnx_nodes
                       PROPERTIES LABELS "conformance" TIMEOUT 300)
  set_tests_properties(conformance_zoo_large PROPERTIES FIXTURES_REQUIRED rml_zoo_large)
  set_tests_properties(conformance_onnx_nodes PROPERTIES FIXTURES_REQUIRED rml_onnx_nodes)
  set_tests_properties(conformance_zoo_half PROPERTIES FIXTURES_REQUIRED rml_zoo_half)
endif()
