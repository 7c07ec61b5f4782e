# Stands in for msgpack-cxx 6.x's CMake package — package `msgpack-cxx`, target `msgpack-cxx` —
# over whatever msgpack-cxx headers the compiler finds, so the 6.x spelling can be tested here.
if(NOT TARGET msgpack-cxx)
  add_library(msgpack-cxx INTERFACE IMPORTED)
  set_target_properties(msgpack-cxx PROPERTIES INTERFACE_COMPILE_DEFINITIONS MSGPACK_DEFAULT_API_VERSION=3)
endif()
set(msgpack-cxx_VERSION 6.1.0)
