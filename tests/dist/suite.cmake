# The MPI pipeline (rml/dist/mpi.hpp), run as real processes under mpiexec. Registered only when
# rml::mpi exists (find_package(MPI) found MPI). Label `mpi`; never run under the sanitizers.
if(NOT TARGET rml::mpi OR NOT MPIEXEC_EXECUTABLE OR CMAKE_CXX_FLAGS MATCHES "-fsanitize")
  return()  # no MPI, or a sanitizer build (Open MPI under ASan/TSan reports its own allocations)
endif()

add_executable(rml_tests_dist "${CMAKE_CURRENT_SOURCE_DIR}/dist/check_pipeline.cpp")
target_link_libraries(rml_tests_dist PRIVATE rml::mpi rml_warnings)

# Open MPI refuses to run as root without these, and 3 ranks on 2 cores need --oversubscribe.
set(rml_mpi_env "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
set(rml_zoo "${RML_TEST_DATA_DIR}/zoo")
set(rml_large_zoo "${CMAKE_CURRENT_BINARY_DIR}/conformance/zoo")

# rml_add_mpi_test(<name> <ranks> <args>...)
function(rml_add_mpi_test name ranks)
  add_test(NAME ${name} COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe ${MPIEXEC_NUMPROC_FLAG} ${ranks}
                                $<TARGET_FILE:rml_tests_dist> ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS "mpi" ENVIRONMENT "${rml_mpi_env}" TIMEOUT 60 RESOURCE_LOCK mpi)
endfunction()

rml_add_mpi_test(mpi_gpt_identical_2 2 identical "${rml_zoo}/gpt_b1" 8)
rml_add_mpi_test(mpi_gpt_identical_3 3 identical "${rml_zoo}/gpt_b1" 8)
rml_add_mpi_test(mpi_stream_100_3 3 identical "${rml_zoo}/cnn_b1" 100)
rml_add_mpi_test(mpi_wrong_model 3 wrong-model "${rml_zoo}/mlp_b1" "${rml_zoo}/mlp_b2")
rml_add_mpi_test(mpi_fail_mid_stream 3 fail-at "${rml_zoo}/cnn_b1" 1 50)
rml_add_mpi_test(mpi_bad_input 2 bad-input "${rml_zoo}/cnn_b1" 50)
rml_add_mpi_test(mpi_hung_rank 3 hang "${rml_zoo}/cnn_b1" 1 5)
# A rank that exits or is killed (SIGKILL) mid-stream: by default mpiexec then ends the whole job
# (observed: within ~1 s, the others terminated with no Status); with orte_abort_on_non_zero_status 0
# the survivors run on, time out, report, and exit without MPI_Finalize (MpiSession::abandon), which
# would otherwise wait for the dead rank forever. That second case is the one tested.
foreach(how die kill)
  add_test(NAME mpi_${how}_rank
           COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --mca orte_abort_on_non_zero_status 0 ${MPIEXEC_NUMPROC_FLAG} 3
                   $<TARGET_FILE:rml_tests_dist> ${how} "${rml_zoo}/cnn_b1" 1 5)
  # mpiexec exits 0 here whatever the ranks return, so the survivors' own verdicts decide.
  set_tests_properties(mpi_${how}_rank PROPERTIES LABELS "mpi" ENVIRONMENT "${rml_mpi_env}" TIMEOUT 60
                                                  RESOURCE_LOCK mpi FAIL_REGULAR_EXPRESSION "FAILED"
                                                  PASS_REGULAR_EXPRESSION "rank [02]: survived.*rank [02]: survived")
endforeach()
if(TARGET rml_tests_conformance)  # ResNet-18 is generated at test time by the conformance suite
  rml_add_mpi_test(mpi_resnet18_identical_2 2 identical "${rml_large_zoo}/resnet18_b1" 4)
  rml_add_mpi_test(mpi_resnet18_identical_3 3 identical "${rml_large_zoo}/resnet18_b1" 4)
  set_tests_properties(mpi_resnet18_identical_2 mpi_resnet18_identical_3 PROPERTIES FIXTURES_REQUIRED rml_zoo_large)
endif()

# The example: a 3-stage CNN over 24 micro-batches, checked bitwise against one process.
if(RML_BUILD_EXAMPLES)  # the target is defined later, in examples/distributed
  add_test(NAME mpi_example_pipeline
           COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe ${MPIEXEC_NUMPROC_FLAG} 3 $<TARGET_FILE:distributed_pipeline>
                   "${rml_zoo}/cnn_b1" --micro-batches 24)
  set_tests_properties(mpi_example_pipeline PROPERTIES LABELS "mpi;example" ENVIRONMENT "${rml_mpi_env}" TIMEOUT 60
                                            RESOURCE_LOCK mpi PASS_REGULAR_EXPRESSION "bitwise equal to one process: yes")
endif()

# The tool: `mpirun -np 2 rml run --pipeline 2` on the MLP with PyTorch's recorded input, compared
# with PyTorch's recorded output (exit 4 on a mismatch); rank 1 prints nothing.
if(RML_BUILD_EXAMPLES)
  set(rml_mlp "${RML_TEST_DATA_DIR}/torch_mlp")
  add_test(NAME mpi_cli_pipeline
           COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe ${MPIEXEC_NUMPROC_FLAG} 2 $<TARGET_FILE:rml_cli> run
                   --pipeline 2 "${rml_mlp}" --inputs "${rml_mlp}.expected.safetensors"
                   --compare "${rml_mlp}.expected.safetensors" --atol 1e-5 --rtol 1e-4)
  set_tests_properties(mpi_cli_pipeline PROPERTIES LABELS "mpi;cli" ENVIRONMENT "${rml_mpi_env}" TIMEOUT 60
                                        RESOURCE_LOCK mpi PASS_REGULAR_EXPRESSION "output y:.*latency"
                                        FAIL_REGULAR_EXPRESSION "rml: [A-Z_]+:")
endif()
