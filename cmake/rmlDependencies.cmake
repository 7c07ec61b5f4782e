# Finds rml's dependencies: Eigen3, simdjson, msgpack-cxx and Threads. Shared by the build tree
# (included from the top-level CMakeLists.txt) and the installed rmlConfig.cmake; sets
# RML_MSGPACK_TARGET to the msgpack-cxx target name the found version provides.
#
# Loaded by find_package(rml) it uses find_dependency, which forwards QUIET/REQUIRED and, on a
# miss, marks rml not found (rml_FOUND FALSE) and returns here instead of failing the consumer's
# configure. In rml's own build every dependency is required.
include(CMakeFindDependencyMacro)

if(CMAKE_FIND_PACKAGE_NAME STREQUAL "rml")
  macro(_rml_find_dependency)
    find_dependency(${ARGV})
  endmacro()
else()
  macro(_rml_find_dependency)
    find_package(${ARGV} REQUIRED)
  endmacro()
endif()

if(NOT TARGET Eigen3::Eigen)
  _rml_find_dependency(Eigen3 3.4 NO_MODULE)
endif()
if(NOT TARGET simdjson::simdjson)
  _rml_find_dependency(simdjson)
endif()

# msgpack-cxx's package is `msgpack` with target `msgpackc-cxx` up to 5.x, and `msgpack-cxx`
# with target `msgpack-cxx` from 6.x. Try the new spelling first, quietly.
if(NOT TARGET msgpack-cxx AND NOT TARGET msgpackc-cxx)
  find_package(msgpack-cxx QUIET CONFIG)
  if(NOT msgpack-cxx_FOUND)
    _rml_find_dependency(msgpack CONFIG)
  endif()
endif()
if(TARGET msgpack-cxx)
  set(RML_MSGPACK_TARGET msgpack-cxx)
elseif(TARGET msgpackc-cxx)
  set(RML_MSGPACK_TARGET msgpackc-cxx)
elseif(CMAKE_FIND_PACKAGE_NAME STREQUAL "rml")
  set(rml_FOUND FALSE)
  set(rml_NOT_FOUND_MESSAGE "rml needs msgpack-cxx: its package provides neither target msgpack-cxx nor msgpackc-cxx")
  return()
else()
  message(FATAL_ERROR "rml: msgpack-cxx was found but provides neither target msgpack-cxx (6.x) nor msgpackc-cxx "
                      "(4.x-5.x); install libmsgpack-cxx-dev, or msgpack-cxx from your package manager")
endif()

set(THREADS_PREFER_PTHREAD_FLAG ON)
_rml_find_dependency(Threads)
