# The exec area's thread-safety tests again on their own, labelled for the ThreadSanitizer preset
# (`ctest --preset tsan -L tsan-ok`): one executor run from many threads, and every op case at 2
# threads (the threads_* cases split each parallel kernel across the pool), and the shared pool's cases.
if(TARGET rml_tests_exec)
  add_test(NAME exec_concurrency COMMAND rml_tests_exec --no-version=true --test-case=*concurrent*)
  add_test(NAME exec_ops_threads COMMAND rml_tests_exec --no-version=true "--test-case=every op matches NumPy*")
  # The shared thread pool: executors sharing workers, limited handles, start failures.
  add_test(NAME exec_thread_pool COMMAND rml_tests_exec --no-version=true "--test-case=thread pool*")
  set_tests_properties(exec_concurrency exec_ops_threads exec_thread_pool PROPERTIES LABELS "tsan-ok;exec")
endif()

# The kernels again, compiled for this machine's own vector ISA (-march=native): the dev build's
# baseline x86-64 flags give SSE's 4-float packets, so rml's GEMM tiles (kernels/sgemm.hpp) and the
# other SIMD paths are checked here at the widths the build machine has (AVX2's 8 or AVX-512's 16):
# the GEMM's own cases and every op's NumPy cases. Every rml translation unit of this executable,
# the implementation one included, is compiled with the same flags (one definition of each kernel).
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag(-march=native rml_has_march_native)
if(TARGET rml_tests_exec AND rml_has_march_native AND NOT CMAKE_CROSSCOMPILING)
  add_executable(rml_tests_exec_native "${CMAKE_CURRENT_SOURCE_DIR}/exec/test_sgemm.cpp"
                                       "${CMAKE_CURRENT_SOURCE_DIR}/exec/test_ops.cpp"
                                       "${CMAKE_CURRENT_SOURCE_DIR}/exec/simd/convert16_check.cpp"
                                       "${CMAKE_CURRENT_SOURCE_DIR}/support/implementation.cpp"
                                       $<TARGET_OBJECTS:rml_doctest_main>)
  target_link_libraries(rml_tests_exec_native PRIVATE rml::rml_split doctest::doctest rml_warnings)
  target_include_directories(rml_tests_exec_native PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
  # GCC 12 warns inside its own AVX-512 intrinsics headers ((maybe-)uninitialized) at these flags.
  target_compile_options(rml_tests_exec_native PRIVATE -march=native -Wno-uninitialized -Wno-maybe-uninitialized)
  target_compile_definitions(rml_tests_exec_native PRIVATE RML_TEST_DATA_DIR="${RML_TEST_DATA_DIR}"
                                                           RML_TEST_BUILD_DIR="${RML_TEST_BUILD_DIR}")
  add_test(NAME exec_native COMMAND rml_tests_exec_native --no-version=true)
  set_tests_properties(exec_native PROPERTIES LABELS "unit;exec")
endif()

# The 16-bit GEMM's SIMD micro-kernels held to the portable path's bits: one program built with the
# AVX-512 BF16 flags (whatever the preset's), skipped (exit 77) on a CPU without them.
check_cxx_compiler_flag("-mavx512bf16" RML_HAVE_AVX512BF16_FLAG)
if(TARGET rml_tests_exec AND RML_HAVE_AVX512BF16_FLAG)
  add_executable(rml_tests_gemm16_simd ${CMAKE_CURRENT_LIST_DIR}/simd/gemm16_simd.cpp)
  target_link_libraries(rml_tests_gemm16_simd PRIVATE rml::rml doctest::doctest rml_warnings)
  target_include_directories(rml_tests_gemm16_simd PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  # GCC 12 warns of the undefined source operand inside its own AVX-512 intrinsics (as Eigen uses them).
  target_compile_options(rml_tests_gemm16_simd PRIVATE -mavx512f -mavx512bf16 -mavx512vl -mavx512bw -mfma -mf16c
                                                       -Wno-uninitialized -Wno-maybe-uninitialized)
  add_test(NAME exec_gemm16_simd COMMAND rml_tests_gemm16_simd --no-version=true)
  set_tests_properties(exec_gemm16_simd PROPERTIES LABELS "unit;exec" SKIP_RETURN_CODE 77)
endif()

# The 16-bit conversions' AVX2 + F16C path (8 lanes), which -march=native on an AVX-512 machine
# never builds: their test alone with those flags, skipped (exit 77) on a CPU without them.
check_cxx_compiler_flag("-mavx2 -mf16c" RML_HAVE_F16C_FLAG)
if(TARGET rml_tests_exec AND RML_HAVE_F16C_FLAG)
  add_executable(rml_tests_convert16_avx2 ${CMAKE_CURRENT_LIST_DIR}/simd/convert16_check.cpp
                                          ${CMAKE_CURRENT_LIST_DIR}/simd/convert16_avx2_main.cpp)
  target_link_libraries(rml_tests_convert16_avx2 PRIVATE rml::rml doctest::doctest rml_warnings)
  target_compile_options(rml_tests_convert16_avx2 PRIVATE -mavx2 -mf16c -mfma -mno-avx512f)
  add_test(NAME exec_convert16_avx2 COMMAND rml_tests_convert16_avx2 --no-version=true)
  set_tests_properties(exec_convert16_avx2 PROPERTIES LABELS "unit;exec" SKIP_RETURN_CODE 77)
endif()
