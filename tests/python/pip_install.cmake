# `pip install .` of the repository into a fresh venv (Debian's interpreter, --system-site-packages for NumPy),
# offline (--no-index, --no-build-isolation), then the installed package runs the MLP fixture against
# PyTorch's output (tests/python/pip_check.py). The sources are copied first (what MANIFEST.in ships),
# so the build writes nothing into the checkout and a file missing from the set fails here.
# Usage: cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<dir> -DPYTHON=<python3> [-DLAUNCHER=ccache] -P pip_install.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/src/python")
foreach(item include LICENSE README.md setup.py pyproject.toml MANIFEST.in)
  file(COPY "${SOURCE_DIR}/${item}" DESTINATION "${WORK_DIR}/src")
endforeach()
foreach(item rml rml_export src)
  file(COPY "${SOURCE_DIR}/python/${item}" DESTINATION "${WORK_DIR}/src/python" PATTERN "__pycache__" EXCLUDE)
endforeach()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (exit ${rc}):\n${out}\n${err}")
  endif()
  set(out "${out}${err}" PARENT_SCOPE)
endfunction()

# Without a pip of its own: the system's pip (python3-pip) runs inside it through --system-site-packages.
run("venv" "${PYTHON}" -m venv --system-site-packages --without-pip "${WORK_DIR}/venv")
set(env "")
if(LAUNCHER)
  set(env "CC=${LAUNCHER} c++" "CXX=${LAUNCHER} c++")  # the build's compiler cache, when it has one
endif()
run("pip install" ${CMAKE_COMMAND} -E env ${env} "${WORK_DIR}/venv/bin/python" -m pip install -v --no-index
    --no-build-isolation --disable-pip-version-check "${WORK_DIR}/src")
# The extension is optimised: the last -O flag of its compile line is -O2, and it has no -g.
string(REGEX MATCH "[^\n]* -c [^\n]*rml_module\\.cpp[^\n]*" compile_line "${out}")
string(REGEX MATCHALL " -O[0-3sg]" levels "${compile_line}")
list(LENGTH levels count)
if(count EQUAL 0 OR compile_line MATCHES " -g ")
  message(FATAL_ERROR "the extension is not compiled optimised:\n${compile_line}")
endif()
list(GET levels -1 level)
if(NOT level STREQUAL " -O2")
  message(FATAL_ERROR "the extension is compiled at${level}:\n${compile_line}")
endif()
run("the installed package" ${CMAKE_COMMAND} -E chdir "${WORK_DIR}" "${WORK_DIR}/venv/bin/python"
    "${SOURCE_DIR}/tests/python/pip_check.py" "${WORK_DIR}/venv" "${SOURCE_DIR}/tests/data")
message(STATUS "${out}")
