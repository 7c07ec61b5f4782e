# Tests of the `rml` command-line tool (examples/rml/), label `cli`: each runs one subcommand on
# tests/data/torch_mlp or a small fixture under tests/cli/data/ and checks its exit code, its
# stdout (a committed expected file or a pattern) and, on failure, its `rml: CODE: message` line.
# test_cli.py checks the --json outputs, random inputs, --save/--compare, percentiles and SHA-256
# against NumPy and hashlib. Included from tests/CMakeLists.txt; the tool is only built with
# RML_BUILD_EXAMPLES and CLI11 (examples/rml/CMakeLists.txt).
if(NOT RML_BUILD_EXAMPLES)
  return()
endif()
find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  return()
endif()

set(_rml_cli_dir "${CMAKE_CURRENT_LIST_DIR}")
set(_rml_cli_work "${CMAKE_CURRENT_BINARY_DIR}/cli")
file(MAKE_DIRECTORY "${_rml_cli_work}")

# rml_cli_test(<name> [EXIT <code>] [EXPECTED <file>] [STDOUT <regex>] [STDERR <regex>]
#              [IN_BUILD_DIR] [SETUP <fixture>] [REQUIRES <fixtures>...] ARGS <args>...)
# Runs `rml <args>` from the source tree (or from the scratch directory with IN_BUILD_DIR).
function(rml_cli_test name)
  cmake_parse_arguments(ARG "IN_BUILD_DIR" "EXIT;EXPECTED;STDOUT;STDERR;SETUP" "REQUIRES;ARGS" ${ARGN})
  if(NOT DEFINED ARG_EXIT)
    set(ARG_EXIT 0)
  endif()
  set(checks)
  if(ARG_EXPECTED)
    list(APPEND checks "-DEXPECTED=${_rml_cli_dir}/expected/${ARG_EXPECTED}")
  endif()
  if(DEFINED ARG_STDOUT)
    list(APPEND checks "-DSTDOUT_REGEX=${ARG_STDOUT}")
  endif()
  if(DEFINED ARG_STDERR)
    list(APPEND checks "-DSTDERR_REGEX=${ARG_STDERR}")
  endif()
  set(dir "${PROJECT_SOURCE_DIR}")
  if(ARG_IN_BUILD_DIR)
    set(dir "${_rml_cli_work}")
  endif()
  add_test(NAME cli.${name}
           COMMAND "${CMAKE_COMMAND}" "-DPROGRAM=$<TARGET_FILE:rml_cli>" "-DARGS=${ARG_ARGS}" -DEXIT_CODE=${ARG_EXIT}
                   ${checks} -P "${_rml_cli_dir}/run_cli.cmake"
           WORKING_DIRECTORY "${dir}")
  set_tests_properties(cli.${name} PROPERTIES LABELS cli)
  if(ARG_SETUP)
    set_tests_properties(cli.${name} PROPERTIES FIXTURES_SETUP ${ARG_SETUP})
  endif()
  if(ARG_REQUIRES)
    set_tests_properties(cli.${name} PROPERTIES FIXTURES_REQUIRED "${ARG_REQUIRES}")
  endif()
endfunction()

set(mlp "${PROJECT_SOURCE_DIR}/tests/data/torch_mlp")
set(x_ref "x=tests/data/torch_mlp.expected.safetensors")
set(x_abs "x=${PROJECT_SOURCE_DIR}/tests/data/torch_mlp.expected.safetensors")
set(data "tests/cli/data")

# The command line itself. A usage error is `rml: INVALID_ARGUMENT: message` and a pointer to
# --help (run_cli.cmake checks both lines for every test with EXIT 1).
rml_cli_test(help STDOUT "^rml: inspect.*\nUsage: rml \\[OPTIONS\\] SUBCOMMAND" ARGS help)
rml_cli_test(help_option STDOUT "^rml: inspect.*\nUsage: rml \\[OPTIONS\\] SUBCOMMAND" ARGS --help)
rml_cli_test(no_command EXIT 1 STDERR "^rml: INVALID_ARGUMENT: no command given\nRun 'rml --help'" ARGS "")
rml_cli_test(unknown_command EXIT 1 STDERR "unknown command 'frobnicate'" ARGS frobnicate)
rml_cli_test(unknown_option EXIT 1 STDERR "rml: INVALID_ARGUMENT: The following argument was not expected: --fast\nRun 'rml info --help'"
             ARGS info tests/data/torch_mlp --fast)
rml_cli_test(missing_option_value EXIT 1 STDERR "--threads" ARGS run tests/data/torch_mlp --threads)
# Every command's --help and -h print its usage and exit 0; `rml help <command>` too.
foreach(cmd info check run bench convert cut merge extract dot)
  rml_cli_test(help.${cmd} STDOUT "\nUsage: rml ${cmd} \\[OPTIONS\\]" ARGS ${cmd} --help)
  rml_cli_test(help.${cmd}.h STDOUT "\nUsage: rml ${cmd} \\[OPTIONS\\]" ARGS ${cmd} -h)
  rml_cli_test(help.topic.${cmd} STDOUT "\nUsage: rml ${cmd} \\[OPTIONS\\]" ARGS help ${cmd})
endforeach()
rml_cli_test(help.unknown_topic EXIT 1 STDERR "help: unknown command 'nope'" ARGS help nope)

# info
rml_cli_test(info EXPECTED info_torch_mlp.txt ARGS info tests/data/torch_mlp)
rml_cli_test(info.json_path EXPECTED info_torch_mlp.txt ARGS info tests/data/torch_mlp.json)
rml_cli_test(info.missing EXIT 2 STDERR "^rml: NOT_FOUND: tests/cli/data/missing.json: no such file"
             ARGS info ${data}/missing)
rml_cli_test(info.two_models EXIT 1 STDERR "The following argument was not expected: " ARGS info ${mlp} ${mlp})

# check
rml_cli_test(check STDOUT "^ok: 8 operators and 15 values check\n$" ARGS check tests/data/torch_mlp)
rml_cli_test(check.bad_shape EXIT 2
             STDERR "^rml: INVALID_ARGUMENT: node 1 \\(add\\) produces f32 \\[2, 4\\] but y is recorded as f32 \\[2, 3\\]"
             ARGS check ${data}/bad_shape)
rml_cli_test(check.unknown_op EXIT 3 STDERR "^rml: UNSUPPORTED: node 0 \\(frobnicate\\)" ARGS check ${data}/unknown_op)
rml_cli_test(check.newer_version EXIT 3 STDERR "^rml: UNSUPPORTED: .*newer_version.json: version: 2 is newer"
             ARGS check ${data}/newer_version)

# dot
rml_cli_test(dot EXPECTED dot_torch_mlp.dot ARGS dot tests/data/torch_mlp)
rml_cli_test(dot.missing EXIT 2 STDERR "^rml: NOT_FOUND: " ARGS dot ${data}/missing)

# run: outputs against NumPy's (tests/cli/gen_data.py)
rml_cli_test(run EXPECTED run_torch_mlp.txt ARGS run tests/data/torch_mlp --input ${x_ref} --threads 1)
rml_cli_test(run.two_threads EXPECTED run_torch_mlp.txt ARGS run tests/data/torch_mlp --input=${x_ref} --threads=2)
rml_cli_test(run.npy EXPECTED run_torch_mlp_npy.txt ARGS run tests/data/torch_mlp --input x=${data}/x.npy)
rml_cli_test(run.npy_f64 STDOUT "first 8: -0.1581 -0.2341 0.1301" ARGS run tests/data/torch_mlp --input x=${data}/x_f64.npy)
# Inputs not given are seeded random (test_cli.py checks them against the documented generator).
rml_cli_test(run.random STDOUT "^input x: f32 \\[2, 12\\] from random \\(seed 5\\)\noutput y: f32 \\[2, 4\\]\n  min "
             STDERR "^note: input x: f32 \\[2, 12\\] random, uniform in .-1, 1\\), seed 5\n$" ARGS run tests/data/torch_mlp --seed 5)
rml_cli_test(run.unknown_input EXIT 1 STDERR "--input z: the model has no such input \\(inputs: x\\)"
             ARGS run tests/data/torch_mlp --input z=${data}/x.npy)
rml_cli_test(run.bad_input_syntax EXIT 1 STDERR "--input takes NAME=FILE" ARGS run tests/data/torch_mlp --input x)
rml_cli_test(run.wrong_shape EXIT 2 STDERR "^rml: INVALID_ARGUMENT: run: input 0 \\(\"x\"\\) must be f32 \\[2, 12\\], got f32 \\[3, 12\\]"
             ARGS run tests/data/torch_mlp --input x=${data}/x_3x12.npy)
rml_cli_test(run.truncated_npy EXIT 2 STDERR "^rml: DATA_LOSS: tests/cli/data/x_truncated.npy: truncated"
             ARGS run tests/data/torch_mlp --input x=${data}/x_truncated.npy)
rml_cli_test(run.f16_npy STDOUT "first 8: -0.1581 -0.234 0.13 "
             ARGS run tests/data/torch_mlp --input x=${data}/x_f16.npy)  # widened exactly to the f32 input
rml_cli_test(run.missing_npy EXIT 2 STDERR "^rml: NOT_FOUND: tests/cli/data/missing.npy: "
             ARGS run tests/data/torch_mlp --input x=${data}/missing.npy)
rml_cli_test(run.bad_extension EXIT 1 STDERR "the file must be .npy or .safetensors"
             ARGS run tests/data/torch_mlp --input x=${data}/bad_shape.json)
rml_cli_test(run.bad_threads EXIT 1 STDERR "--threads: 'many' is not an integer"
             ARGS run tests/data/torch_mlp --threads many)
# --winograd picks the 3x3 transform (python/tests/test_bindings.py shows each option takes its own
# path); every choice still matches the reference, and a transform rml lacks is a usage error.
rml_cli_test(run.winograd_f4 STDOUT "\ncompare output: ok "
             ARGS run tests/data/zoo/cnn_b1 --inputs tests/data/zoo/cnn_b1.expected.safetensors
                  --compare tests/data/zoo/cnn_b1.expected.safetensors --rtol 1e-4 --atol 1e-4 --winograd F4)
rml_cli_test(run.bad_winograd EXIT 1 STDERR "--winograd: f3 not in \\{off,f2,f4\\}" ARGS run tests/data/torch_mlp --winograd f3)

# bench
set(_rml_cli_t "[0-9.]+ [um]s")
rml_cli_test(bench STDOUT "^model: 8 operators, [0-9]+ kernel steps, arena [0-9.]+ [KMG]?i?B\nruns: 3 after 2 warm-up; threads: 1; [0-9.]+ s\nlatency: p50 ${_rml_cli_t}, p90 ${_rml_cli_t}, p99 ${_rml_cli_t}; min ${_rml_cli_t}, mean ${_rml_cli_t}, max ${_rml_cli_t}\nthroughput: [0-9.]+ runs/s\n$"
             ARGS bench tests/data/torch_mlp --runs 3 --warmup 2 --threads 1 --input x=${data}/x.npy)
rml_cli_test(bench.iterations STDOUT "\nruns: 4 after 1 warm-up" ARGS bench tests/data/torch_mlp --iterations 4)
rml_cli_test(bench.zero_runs EXIT 1 STDERR "--runs: 0 is below 1" ARGS bench tests/data/torch_mlp --runs 0)
rml_cli_test(bench.bad_duration EXIT 1 STDERR "--duration: 'soon' is not a number" ARGS bench tests/data/torch_mlp --duration soon)
# --profile: the MLP's three layers are three fused steps (matmul, bias add, relu); the two slowest listed.
rml_cli_test(bench.profile
             STDOUT "\nprofile: 3 kernel steps, ${_rml_cli_t} per run in all; the 2 slowest:\n +${_rml_cli_t} +[0-9.]+%  matmul \\+[12] +node [036] +-> f32 \\[2, [0-9]+\\]\n +${_rml_cli_t} +[0-9.]+%  matmul \\+[12] +node [036] +-> f32 \\[2, [0-9]+\\]\n$"
             ARGS bench tests/data/torch_mlp --runs 3 --threads 1 --profile 2)
rml_cli_test(bench.profile_json STDOUT "\"profile\": .\n +.\n +\"op\": \"matmul\",\n +\"first_node\": 0,\n +\"nodes\": 3,"
             ARGS bench tests/data/torch_mlp --runs 3 --threads 1 --profile 1 --json)
rml_cli_test(bench.bad_profile EXIT 1 STDERR "--profile: 0 is below 1" ARGS bench tests/data/torch_mlp --profile 0)
# --parallel-min-work: at 2 threads the MLP's three small steps stay on one thread by default, and
# none does at 0.
rml_cli_test(bench.serial_steps STDOUT "\"steps\": 3,\n +\"serial_steps\": 3,"
             ARGS bench tests/data/torch_mlp --runs 2 --threads 2 --json)
rml_cli_test(bench.parallel_min_work STDOUT "\"steps\": 3,\n +\"serial_steps\": 0,"
             ARGS bench tests/data/torch_mlp --runs 2 --threads 2 --parallel-min-work 0 --json)
rml_cli_test(bench.bad_parallel_min_work EXIT 1 STDERR "--parallel-min-work: -1 is below 0"
             ARGS bench tests/data/torch_mlp --parallel-min-work -1)

# convert: rml-graph -> MessagePack -> rml-graph gives what rml-graph -> rml-graph gives, and the
# MessagePack model runs like the original.
rml_cli_test(convert.to_msgpack SETUP rml_cli_msgpack IN_BUILD_DIR STDOUT "^wrote mlp.msgpack\n$"
             ARGS convert ${mlp} mlp.msgpack)
rml_cli_test(convert.from_msgpack SETUP rml_cli_converted REQUIRES rml_cli_msgpack IN_BUILD_DIR
             STDOUT "^wrote from_msgpack.json \\+ from_msgpack.safetensors\n$" ARGS convert mlp.msgpack from_msgpack)
rml_cli_test(convert.to_json SETUP rml_cli_converted IN_BUILD_DIR STDOUT "^wrote direct.json \\+ direct.safetensors\n$"
             ARGS convert ${mlp} direct)
foreach(ext json safetensors)
  # The same bytes, pair id included: the id binding each JSON to its weights is a hash of the
  # contents (docs/format.md, "The pair binding"), so the two routes must write identical files.
  add_test(NAME cli.convert.same_${ext}
           COMMAND "${CMAKE_COMMAND}" -E compare_files from_msgpack.${ext} direct.${ext}
           WORKING_DIRECTORY "${_rml_cli_work}")
  set_tests_properties(cli.convert.same_${ext} PROPERTIES LABELS cli FIXTURES_REQUIRED rml_cli_converted)
endforeach()
rml_cli_test(convert.run_msgpack EXPECTED run_torch_mlp.txt REQUIRES rml_cli_msgpack
             ARGS run "${_rml_cli_work}/mlp.msgpack" --input ${x_ref})
rml_cli_test(convert.missing EXIT 2 STDERR "^rml: NOT_FOUND: " ARGS convert ${data}/missing out)
rml_cli_test(convert.corrupt_msgpack EXIT 2 STDERR "^rml: DATA_LOSS: tests/cli/data/truncated.msgpack: "
             ARGS convert ${data}/truncated.msgpack "${_rml_cli_work}/never")

# cut, then merge the parts back: the merged model computes what NumPy computes.
rml_cli_test(cut SETUP rml_cli_cut IN_BUILD_DIR EXPECTED cut_torch_mlp.txt ARGS cut ${mlp} mlp)
rml_cli_test(cut.one_operator EXIT 2 STDERR "^rml: INVALID_ARGUMENT: .*operators" ARGS cut ${data}/tiny_relu tiny)
rml_cli_test(merge SETUP rml_cli_merged REQUIRES rml_cli_cut IN_BUILD_DIR EXPECTED merge_torch_mlp.txt
             ARGS merge mlp.before mlp.after merged --connect a.MatMul_7_0=b.MatMul_7_0)
rml_cli_test(merge.run EXPECTED run_torch_mlp.txt REQUIRES rml_cli_merged
             ARGS run "${_rml_cli_work}/merged" --input ${x_ref})
rml_cli_test(merge.bad_connect EXIT 1 STDERR "--connect takes a.<output>=b.<input>, not 'c.y=b.x'"
             ARGS merge ${mlp} ${mlp} "${_rml_cli_work}/never" --connect c.y=b.x)
rml_cli_test(merge.no_such_output EXIT 2 STDERR "^rml: INVALID_ARGUMENT: merge: .*nope"
             ARGS merge ${mlp} ${mlp} "${_rml_cli_work}/never" --connect a.nope=b.x)

# extract the first layer
rml_cli_test(extract SETUP rml_cli_extracted IN_BUILD_DIR EXPECTED extract_torch_mlp.txt
             ARGS extract ${mlp} layer0 --inputs x --outputs Relu_3_0)
rml_cli_test(extract.check REQUIRES rml_cli_extracted IN_BUILD_DIR STDOUT "^ok: 3 operators and 6 values check\n$"
             ARGS check layer0)
rml_cli_test(extract.no_such_value EXIT 1 STDERR "--outputs nope: " ARGS extract ${mlp} never --outputs nope)
rml_cli_test(extract.no_outputs EXIT 1 STDERR "--outputs is required" ARGS extract ${mlp} never --inputs x)

# version and help
rml_cli_test(version STDOUT "^rml ${PROJECT_VERSION}\n$" ARGS --version)
rml_cli_test(version.command STDOUT "^rml ${PROJECT_VERSION}\n$" ARGS version)
rml_cli_test(version.extra_argument EXIT 1 STDERR "The following argument was not expected: now" ARGS version now)
# NaN is left out of min/max/mean and counted; infinities are values.
rml_cli_test(run.nan_and_inf EXPECTED run_log.txt ARGS run ${data}/log --input x=${data}/log_input.npy)

# Exit code 4: outputs outside the tolerance of --compare (random inputs against the reference
# outputs of other inputs); within a tolerance wide enough they pass.
rml_cli_test(run.compare_mismatch EXIT 4 STDERR "\nrml: MISMATCH: y\\[[0-9], [0-9]\\]: got [-0-9.e]+, expected [-0-9.e]+ \\(abs error"
             STDOUT "\ncompare y: MISMATCH " ARGS run tests/data/torch_mlp --compare tests/data/torch_mlp.expected.safetensors)
rml_cli_test(run.compare_wide STDOUT "\ncompare y: ok \\(max abs error " ARGS run tests/data/torch_mlp --atol 1
             --compare tests/data/torch_mlp.expected.safetensors)
rml_cli_test(run.compare_reference STDOUT "\ncompare y: ok \\(max abs error [0-9.e-]+, max rel error [0-9.e-]+\\)\n"
             ARGS run tests/data/torch_mlp --inputs tests/data/torch_mlp.expected.safetensors
             --compare tests/data/torch_mlp.expected.safetensors)
rml_cli_test(run.inputs_missing EXIT 2 STDERR "^rml: NOT_FOUND: tests/cli/data/missing.safetensors"
             ARGS run tests/data/torch_mlp --inputs ${data}/missing.safetensors)
rml_cli_test(run.inputs_none EXIT 2 STDERR "^rml: NOT_FOUND: tests/data/torch_mlp.safetensors: no tensor is named after an input of the model or input.<k> \\(inputs: x\\)\n$"
             ARGS run tests/data/torch_mlp --inputs tests/data/torch_mlp.safetensors)
rml_cli_test(convert.bad_out EXIT 1 STDERR "OUT: 'out/' names no file" ARGS convert ${mlp} out/)

# The tool's SHA-256 against FIPS 180-2's vectors (a few lines of C++ beside the tool's header).
add_executable(rml_cli_sha256_test "${_rml_cli_dir}/sha256_test.cpp")
target_include_directories(rml_cli_sha256_test PRIVATE "${PROJECT_SOURCE_DIR}/examples/rml")
if(TARGET rml_warnings)
  target_link_libraries(rml_cli_sha256_test PRIVATE rml_warnings)
endif()
add_test(NAME cli.sha256 COMMAND rml_cli_sha256_test)
set_tests_properties(cli.sha256 PROPERTIES LABELS cli)

# The machine-readable outputs against NumPy and hashlib (Debian's /usr/bin/python3 has NumPy).
set(_rml_cli_python /usr/bin/python3)
if(NOT EXISTS "${_rml_cli_python}")
  find_package(Python3 QUIET COMPONENTS Interpreter)
  set(_rml_cli_python "${Python3_EXECUTABLE}")
endif()
execute_process(COMMAND "${_rml_cli_python}" -c "import numpy" RESULT_VARIABLE _rml_cli_numpy OUTPUT_QUIET ERROR_QUIET)
if(_rml_cli_numpy EQUAL 0)
  foreach(case info check run_random seed int_inputs file_inputs positional_names compare bench cut usage_errors
               new_dtypes)
    add_test(NAME cli.py.${case}
             COMMAND "${_rml_cli_python}" "${_rml_cli_dir}/test_cli.py" $<TARGET_FILE:rml_cli> "${PROJECT_SOURCE_DIR}"
                     "${_rml_cli_work}/py_${case}" ${case})
    set_tests_properties(cli.py.${case} PROPERTIES LABELS cli)
  endforeach()
else()
  message(WARNING "rml: no Python with NumPy; the tests cli.py.* are not registered")
endif()
