# Runs the `rml` tool once for a CTest test and checks what it did:
#   -DPROGRAM=<rml> -DARGS=<;-list> -DEXIT_CODE=<n>
#   [-DEXPECTED=<file>]      stdout must equal the file, after every `latency: ...` line
#                            becomes `latency: <time>` (timings are not reproducible) and every
#                            `  sha256 <hex>` line `  sha256 <digest>` (the expected files are
#                            NumPy's numbers to four digits; test_cli.py checks the digests)
#   [-DSTDOUT_REGEX=<re>]    stdout must match
#   [-DSTDERR_REGEX=<re>]    stderr must match. Whatever else: with EXIT_CODE 1 stderr must be
#                            exactly `rml: INVALID_ARGUMENT: ...` and `Run 'rml ... --help' for
#                            more information.`; with another non-zero code it must end with one
#                            `rml: <CODE_NAME>: ...` line
execute_process(COMMAND ${PROGRAM} ${ARGS} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
set(context "rml ${ARGS}\n--- stdout\n${out}--- stderr\n${err}")
if(NOT "${rc}" STREQUAL "${EXIT_CODE}")
  message(FATAL_ERROR "exited with ${rc}, expected ${EXIT_CODE}\n${context}")
endif()
if(DEFINED EXPECTED)
  string(REGEX REPLACE "(^|\n)latency: [^\n]*" "\\1latency: <time>" masked "${out}")
  string(REGEX REPLACE "\n  sha256 [0-9a-f]+\n" "\n  sha256 <digest>\n" masked "${masked}")
  file(READ "${EXPECTED}" expected)
  if(NOT masked STREQUAL expected)
    message(FATAL_ERROR "stdout differs from ${EXPECTED}\n--- expected\n${expected}${context}")
  endif()
endif()
if(DEFINED STDOUT_REGEX AND NOT out MATCHES "${STDOUT_REGEX}")
  message(FATAL_ERROR "stdout does not match '${STDOUT_REGEX}'\n${context}")
endif()
if(EXIT_CODE STREQUAL "1" AND NOT err MATCHES "^rml: INVALID_ARGUMENT: [^\n]+\nRun 'rml( [a-z]+)? --help' for more information\\.\n$")
  message(FATAL_ERROR "stderr is not a usage error (message, then the pointer to --help)\n${context}")
elseif(NOT EXIT_CODE MATCHES "^[01]$" AND NOT err MATCHES "(^|\n)rml: [A-Z_]+: [^\n]+\n$")
  message(FATAL_ERROR "stderr does not end with an `rml: <CODE_NAME>: message` line\n${context}")
endif()
if(DEFINED STDERR_REGEX AND NOT err MATCHES "${STDERR_REGEX}")
  message(FATAL_ERROR "stderr does not match '${STDERR_REGEX}'\n${context}")
endif()
