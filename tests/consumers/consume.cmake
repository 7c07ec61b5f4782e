# One consumer test, run as `cmake -P consume.cmake` by CTest: stages a tiny project that uses rml
# in one way (KIND), configures and builds it as a user would, runs it on a model and checks
# what it prints against counts read from the model's JSON.
#
#   -DKIND=install|find_package|add_subdirectory|fetchcontent|meson_subproject|pkg_config|plain_include|
#          split (the kernels in one TU of two: also runs the model)|
#          dependency_lookup.missing|dependency_lookup.msgpack6 (configure only)
#   -DRML_SOURCE_DIR=<rml checkout>   -DWORK_DIR=<scratch directory for this test>
#   -DPREFIX=<install prefix shared by install, find_package and pkg_config>
#   -DGENERATOR=<CMake generator>     -DCXX=<C++ compiler>    -DMODEL=<model stem>
#   -DMESON=<meson executable>        (meson_subproject only)
cmake_minimum_required(VERSION 3.20)

set(here "${CMAKE_CURRENT_LIST_DIR}")
set(src "${WORK_DIR}/src")
set(build "${WORK_DIR}/build")

# Runs a command; on failure prints everything it said and fails the test.
function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${KIND}: ${what} failed (${rc})\ncommand: ${ARGN}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

# Copies the consumer project for KIND and the shared main.cpp into a fresh `src`.
function(stage)
  file(REMOVE_RECURSE "${WORK_DIR}")
  file(MAKE_DIRECTORY "${src}")
  file(COPY "${here}/${KIND}/" DESTINATION "${src}")
  file(COPY "${here}/main.cpp" DESTINATION "${src}")
endfunction()

# A vendored copy of rml at `dest`, as a submodule checkout or a copied release provides it: the
# build files and the headers (rml builds nothing else as a subproject). A copy, not a symlink,
# so that the build tree never contains a link back to the source tree around it.
function(vendor dest)
  file(MAKE_DIRECTORY "${dest}")
  foreach(item CMakeLists.txt meson.build meson_options.txt cmake include)
    file(COPY "${RML_SOURCE_DIR}/${item}" DESTINATION "${dest}")
  endforeach()
endfunction()

function(cmake_build)
  # No build type: no optimisation and no debug info, the fastest build of the consumer.
  step("configure" "${CMAKE_COMMAND}" -S "${src}" -B "${build}" -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX}"
       ${ARGN})
  step("build" "${CMAKE_COMMAND}" --build "${build}")
endfunction()

# The counts the consumer must print, read from the model's JSON by CMake (not by rml), then any
# further lines given.
function(check_consumer program)
  file(READ "${MODEL}.json" json)
  string(JSON values LENGTH "${json}" values)
  string(JSON constants LENGTH "${json}" constants)
  string(JSON nodes LENGTH "${json}" nodes)
  set(expected "rml consumer: ${values} values, ${constants} constants, ${nodes} nodes\n")
  foreach(line ${ARGN})
    string(APPEND expected "${line}\n")
  endforeach()
  step("run" "${program}" "${MODEL}")
  if(NOT step_output STREQUAL expected)
    message(FATAL_ERROR "${KIND}: the consumer printed\n${step_output}but should print\n${expected}")
  endif()
  message(STATUS "${KIND}: ${step_output}")
endfunction()

if(KIND STREQUAL "install")
  # What a package manager's recipe runs (Conan's and vcpkg's recipes pass the same options).
  file(REMOVE_RECURSE "${WORK_DIR}" "${PREFIX}")
  step("configure rml" "${CMAKE_COMMAND}" -S "${RML_SOURCE_DIR}" -B "${build}" -G "${GENERATOR}"
       "-DCMAKE_CXX_COMPILER=${CXX}" -DRML_BUILD_TESTS=OFF -DRML_BUILD_EXAMPLES=OFF "-DCMAKE_INSTALL_PREFIX=${PREFIX}")
  step("build rml" "${CMAKE_COMMAND}" --build "${build}")
  step("install rml" "${CMAKE_COMMAND}" --install "${build}")
  foreach(file include/rml/io/graph_io.hpp share/cmake/rml/rmlConfig.cmake share/cmake/rml/rmlConfigVersion.cmake
               share/cmake/rml/rmlTargets.cmake share/cmake/rml/rmlDependencies.cmake share/pkgconfig/rml.pc)
    if(NOT EXISTS "${PREFIX}/${file}")
      message(FATAL_ERROR "install: ${PREFIX}/${file} is missing")
    endif()
  endforeach()
  file(GLOB_RECURSE installed RELATIVE "${PREFIX}" "${PREFIX}/*")
  list(FILTER installed EXCLUDE REGEX "^(include/rml/|share/cmake/rml/|share/pkgconfig/rml.pc$)")
  if(installed)
    message(FATAL_ERROR "install: unexpected files in the prefix: ${installed}")
  endif()

elseif(KIND STREQUAL "find_package")
  stage()
  cmake_build("-DCMAKE_PREFIX_PATH=${PREFIX}")
  check_consumer("${build}/consumer")

elseif(KIND MATCHES "^dependency_lookup\\.(.*)")
  set(expect "${CMAKE_MATCH_1}")
  set(KIND dependency_lookup)
  stage()
  step("configure" "${CMAKE_COMMAND}" -S "${src}" -B "${build}" -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX}"
       "-DCMAKE_PREFIX_PATH=${PREFIX}" "-DEXPECT=${expect}")
  message(STATUS "${step_output}")

elseif(KIND STREQUAL "add_subdirectory")
  stage()
  vendor("${src}/third_party/rml")
  cmake_build()
  check_consumer("${build}/consumer")
  # A plain install holds the consumer's files only; `--component rml` adds rml's headers and config.
  step("install" "${CMAKE_COMMAND}" --install "${build}" --prefix "${WORK_DIR}/prefix")
  if(NOT EXISTS "${WORK_DIR}/prefix/lib/cmake/app/appTargets.cmake")
    message(FATAL_ERROR "add_subdirectory: the consumer's export set was not installed")
  endif()
  if(EXISTS "${WORK_DIR}/prefix/include/rml")
    message(FATAL_ERROR "add_subdirectory: a plain install of the consumer installed rml's headers")
  endif()
  step("install rml" "${CMAKE_COMMAND}" --install "${build}" --prefix "${WORK_DIR}/prefix" --component rml)
  foreach(file include/rml/rml.hpp share/cmake/rml/rmlTargets.cmake)
    if(NOT EXISTS "${WORK_DIR}/prefix/${file}")
      message(FATAL_ERROR "add_subdirectory: --component rml did not install ${file}")
    endif()
  endforeach()

elseif(KIND STREQUAL "plain_include")
  # The README's plain compiler line, word for word, with the checkout's include/ and this build's compiler.
  file(READ "${RML_SOURCE_DIR}/README.md" readme)
  string(REGEX MATCH "\n(g\\+\\+ -std=c\\+\\+20 [^\n]*app\\.cpp[^\n]*)" found "${readme}")
  if(NOT found)
    message(FATAL_ERROR "plain_include: README.md has no line `g++ -std=c++20 ... app.cpp ...`")
  endif()
  string(REGEX REPLACE " +#.*$" "" line "${CMAKE_MATCH_1}")
  separate_arguments(words UNIX_COMMAND "${line}")
  list(POP_FRONT words)
  list(TRANSFORM words REPLACE "^-Iinclude$" "-I${RML_SOURCE_DIR}/include")
  list(TRANSFORM words REPLACE "^app\\.cpp$" "${here}/main.cpp")
  list(TRANSFORM words REPLACE "^app$" "${build}/consumer")
  file(REMOVE_RECURSE "${WORK_DIR}")
  file(MAKE_DIRECTORY "${build}")
  step("compile (${line})" "${CXX}" ${words})
  check_consumer("${build}/consumer")

elseif(KIND STREQUAL "fetchcontent")
  # FetchContent clones the checkout's HEAD commit, as it would clone a release tag.
  find_program(GIT git)
  if(GIT)
    execute_process(COMMAND "${GIT}" -C "${RML_SOURCE_DIR}" rev-parse --verify HEAD RESULT_VARIABLE rc
                    OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  if(NOT GIT OR NOT rc EQUAL 0)
    message("rml-consumer-skip: ${RML_SOURCE_DIR} is not a git checkout that git can read")
    return()
  endif()
  stage()
  cmake_build("-DRML_GIT_REPOSITORY=${RML_SOURCE_DIR}" "-DRML_GIT_TAG=${head}")
  check_consumer("${build}/consumer")

elseif(KIND STREQUAL "meson_subproject")
  stage()
  vendor("${src}/subprojects/rml")
  # --force-fallback-for: use the subproject even if an rml is installed on the system.
  step("meson setup" "${CMAKE_COMMAND}" -E env "CXX=${CXX}" "${MESON}" setup "${build}" "${src}"
       --force-fallback-for=rml --buildtype=plain)
  if(NOT step_output MATCHES "Executing subproject rml")
    message(FATAL_ERROR "meson_subproject: rml_dep did not come from the subproject:\n${step_output}")
  endif()
  step("meson compile" "${MESON}" compile -C "${build}")
  file(GLOB_RECURSE rml_tests "${build}/subprojects/*rml_tests_*")
  if(rml_tests)
    message(FATAL_ERROR "meson_subproject: rml built its tests as a subproject: ${rml_tests}")
  endif()
  check_consumer("${build}/consumer")

elseif(KIND STREQUAL "split")
  stage()
  cmake_build("-DCMAKE_PREFIX_PATH=${PREFIX}")
  check_consumer("${build}/consumer" "rml consumer: the model's output matches the reference within 1e-5")

elseif(KIND STREQUAL "pkg_config")
  stage()
  file(MAKE_DIRECTORY "${build}")
  step("sh build.sh" "${CMAKE_COMMAND}" -E env "CXX=${CXX}" "PKG_CONFIG_PATH=${PREFIX}/share/pkgconfig"
       "OUT=${build}/consumer" sh "${src}/build.sh")
  check_consumer("${build}/consumer")

else()
  message(FATAL_ERROR "consume.cmake: unknown KIND '${KIND}'")
endif()
