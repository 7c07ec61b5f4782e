# Tests of the `rml` command-line tool (examples/rml/), label `cli`: each runs one subcommand on
# tests/data/torch_mlp or a small fixture under tests/cli/data/ and checks its exit code, its
# stdout (a committed expected file or a pattern) and, on failure, its `rml: CODE: message` line.
# Included from tests/CMakeLists.txt; the tool is only built with RML_BUILD_EXAMPLES.
if(NOT RML_BUILD_EXAMPLES)
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

# The command line itself.
rml_cli_test(help STDOUT "^usage: rml <command>" ARGS help)
rml_cli_test(no_command EXIT 1 STDERR "^rml: INVALID_ARGUMENT: no command given" ARGS "")
rml_cli_test(unknown_command EXIT 1 STDERR "unknown command 'frobnicate'" ARGS frobnicate)
rml_cli_test(unknown_option EXIT 1 STDERR "rml info: unknown option --fast" ARGS info tests/data/torch_mlp --fast)
rml_cli_test(missing_option_value EXIT 1 STDERR "--threads needs a value" ARGS run tests/data/torch_mlp --threads)

# info
rml_cli_test(info EXPECTED info_torch_mlp.txt ARGS info tests/data/torch_mlp)
rml_cli_test(info.json_path EXPECTED info_torch_mlp.txt ARGS info tests/data/torch_mlp.json)
rml_cli_test(info.missing EXIT 2 STDERR "^rml: NOT_FOUND: tests/cli/data/missing.json: no such file"
             ARGS info ${data}/missing)
rml_cli_test(info.two_models EXIT 1 STDERR "rml info takes 1 argument, got 2" ARGS info ${mlp} ${mlp})

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
rml_cli_test(run.zeros EXPECTED run_torch_mlp_zeros.txt ARGS run tests/data/torch_mlp)
rml_cli_test(run.unknown_input EXIT 1 STDERR "--input z: the model has no such input \\(inputs: x\\)"
             ARGS run tests/data/torch_mlp --input z=${data}/x.npy)
rml_cli_test(run.bad_input_syntax EXIT 1 STDERR "--input takes name=file" ARGS run tests/data/torch_mlp --input x)
rml_cli_test(run.wrong_shape EXIT 2 STDERR "^rml: INVALID_ARGUMENT: run: input 0 \\(\"x\"\\) must be f32 \\[2, 12\\], got f32 \\[3, 12\\]"
             ARGS run tests/data/torch_mlp --input x=${data}/x_3x12.npy)
rml_cli_test(run.truncated_npy EXIT 2 STDERR "^rml: DATA_LOSS: tests/cli/data/x_truncated.npy: truncated"
             ARGS run tests/data/torch_mlp --input x=${data}/x_truncated.npy)
rml_cli_test(run.f16_npy EXIT 3 STDERR "^rml: UNSUPPORTED: tests/cli/data/x_f16.npy: dtype '<f2'"
             ARGS run tests/data/torch_mlp --input x=${data}/x_f16.npy)
rml_cli_test(run.missing_npy EXIT 2 STDERR "^rml: NOT_FOUND: tests/cli/data/missing.npy: "
             ARGS run tests/data/torch_mlp --input x=${data}/missing.npy)
rml_cli_test(run.bad_extension EXIT 1 STDERR "the file must be .npy or .safetensors"
             ARGS run tests/data/torch_mlp --input x=${data}/bad_shape.json)
rml_cli_test(run.bad_threads EXIT 1 STDERR "--threads takes an integer >= 1, not 'many'"
             ARGS run tests/data/torch_mlp --threads many)

# bench
rml_cli_test(bench STDOUT "model: 8 operators, [0-9]+ kernel steps, arena [0-9.]+ [KMG]?i?B\nruns: 3 after one warm-up; threads: 1\nlatency: min [0-9.]+ [um]s, median [0-9.]+ [um]s, mean [0-9.]+ [um]s, max [0-9.]+ [um]s\nthroughput: [0-9.]+ runs/s\n$"
             ARGS bench tests/data/torch_mlp --iterations 3 --threads 1)
rml_cli_test(bench.zero_iterations EXIT 1 STDERR "--iterations takes an integer >= 1, not '0'"
             ARGS bench tests/data/torch_mlp --iterations 0)

# convert: rml-graph -> MessagePack -> rml-graph gives what rml-graph -> rml-graph gives, and the
# MessagePack model runs like the original.
rml_cli_test(convert.to_msgpack SETUP rml_cli_msgpack IN_BUILD_DIR STDOUT "^wrote mlp.msgpack\n$"
             ARGS convert ${mlp} mlp.msgpack)
rml_cli_test(convert.from_msgpack SETUP rml_cli_converted REQUIRES rml_cli_msgpack IN_BUILD_DIR
             STDOUT "^wrote from_msgpack.json \\+ from_msgpack.safetensors\n$" ARGS convert mlp.msgpack from_msgpack)
rml_cli_test(convert.to_json SETUP rml_cli_converted IN_BUILD_DIR STDOUT "^wrote direct.json \\+ direct.safetensors\n$"
             ARGS convert ${mlp} direct)
foreach(ext json safetensors)
  # The same bytes but for the random pair id binding each JSON to its weights (docs/format.md).
  add_test(NAME cli.convert.same_${ext}
           COMMAND "${CMAKE_COMMAND}" -DA=from_msgpack.${ext} -DB=direct.${ext}
                   -P "${PROJECT_SOURCE_DIR}/cmake/compare_models.cmake"
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
rml_cli_test(extract.no_outputs EXIT 1 STDERR "rml extract needs --outputs" ARGS extract ${mlp} never --inputs x)

# version and help
rml_cli_test(version STDOUT "^rml ${PROJECT_VERSION}\n$" ARGS --version)
rml_cli_test(help_option STDOUT "^usage: rml <command>" ARGS --help)
rml_cli_test(version.extra_argument EXIT 1 STDERR "rml version takes 0 arguments, got 1" ARGS version now)
# NaN is left out of min/max/mean and counted; infinities are values.
rml_cli_test(run.nan_and_inf EXPECTED run_log.txt ARGS run ${data}/log --input x=${data}/log_input.npy)
