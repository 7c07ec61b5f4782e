# Finds rml's dependencies. Shared by the build tree and the installed rmlConfig.cmake.
include(CMakeFindDependencyMacro)

if(NOT TARGET Eigen3::Eigen)
  find_dependency(Eigen3 3.4 NO_MODULE)
endif()
if(NOT TARGET simdjson::simdjson)
  find_dependency(simdjson)
endif()

# msgpack-cxx's package is `msgpack` with target `msgpackc-cxx` up to 5.x and `msgpack-cxx`
# with target `msgpack-cxx` from 6.x.
if(NOT TARGET msgpack-cxx AND NOT TARGET msgpackc-cxx)
  find_package(msgpack-cxx QUIET CONFIG)
  if(NOT msgpack-cxx_FOUND)
    find_dependency(msgpack CONFIG)
  endif()
endif()
if(TARGET msgpack-cxx)
  set(RML_MSGPACK_TARGET msgpack-cxx)
elseif(TARGET msgpackc-cxx)
  set(RML_MSGPACK_TARGET msgpackc-cxx)
else()
  message(FATAL_ERROR "rml: msgpack-cxx not found (install libmsgpack-cxx-dev, or msgpack-cxx from your package manager)")
endif()

set(THREADS_PREFER_PTHREAD_FLAG ON)
find_dependency(Threads)
