# Install rules: headers, the rml::rml and rml::rml_split targets, rmlConfig.cmake (+ version file)
# and rml.pc.
# Everything rml installs is architecture independent, so it all goes under share/.
# All of it is component `rml`; with RML_INSTALL off (rml as a subproject) the component is left out of a
# plain `cmake --install`, and the rules exist only so that rml::rml is in an export set.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(RML_INSTALL_CMAKEDIR "${CMAKE_INSTALL_DATADIR}/cmake/rml" CACHE STRING "Where rmlConfig.cmake is installed")
set(RML_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_DATADIR}/pkgconfig" CACHE STRING "Where rml.pc is installed")
mark_as_advanced(RML_INSTALL_CMAKEDIR RML_INSTALL_PKGCONFIGDIR)
set(_rml_component COMPONENT rml)
if(NOT RML_INSTALL)
  list(APPEND _rml_component EXCLUDE_FROM_ALL)
endif()

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/rml" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" ${_rml_component})
install(TARGETS rml rml_split EXPORT rmlTargets ${_rml_component})
install(EXPORT rmlTargets NAMESPACE rml:: DESTINATION "${RML_INSTALL_CMAKEDIR}" ${_rml_component})

configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/rmlConfig.cmake.in"
                              "${PROJECT_BINARY_DIR}/rmlConfig.cmake"
                              INSTALL_DESTINATION "${RML_INSTALL_CMAKEDIR}")
write_basic_package_version_file("${PROJECT_BINARY_DIR}/rmlConfigVersion.cmake"
                                 COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/rmlConfig.cmake" "${PROJECT_BINARY_DIR}/rmlConfigVersion.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/rmlDependencies.cmake"
        DESTINATION "${RML_INSTALL_CMAKEDIR}" ${_rml_component})

# rml.pc: relocatable (paths relative to the .pc file). Eigen and simdjson ship pkg-config files
# (eigen3, simdjson; simdjson's brings -lsimdjson). msgpack-cxx ships one only in some versions:
# require it when pkg-config knows it, otherwise pass its include directory unless the compiler
# searches it anyway.
if(IS_ABSOLUTE "${RML_INSTALL_PKGCONFIGDIR}")
  set(_rml_pc_dir "${RML_INSTALL_PKGCONFIGDIR}")
else()
  set(_rml_pc_dir "${CMAKE_INSTALL_PREFIX}/${RML_INSTALL_PKGCONFIGDIR}")
endif()
file(RELATIVE_PATH RML_PC_PREFIX_FROM_PCDIR "${_rml_pc_dir}" "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/$" "" RML_PC_PREFIX_FROM_PCDIR "${RML_PC_PREFIX_FROM_PCDIR}")
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(RML_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(RML_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()

set(RML_PC_REQUIRES "eigen3 simdjson")
set(RML_PC_CFLAGS "")
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(RML_PC_MSGPACK QUIET msgpack-cxx)
endif()
if(RML_PC_MSGPACK_FOUND)
  string(APPEND RML_PC_REQUIRES " msgpack-cxx")
else()
  get_target_property(_rml_msgpack_includes ${RML_MSGPACK_TARGET} INTERFACE_INCLUDE_DIRECTORIES)
  list(REMOVE_DUPLICATES _rml_msgpack_includes)
  foreach(dir IN LISTS _rml_msgpack_includes)
    if(dir AND NOT dir MATCHES "\\$<" AND NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
      string(APPEND RML_PC_CFLAGS " -I${dir}")
    endif()
  endforeach()
  # The msgpack-cxx CMake targets define the API version; pkg-config users get the same.
  get_target_property(_rml_msgpack_defs ${RML_MSGPACK_TARGET} INTERFACE_COMPILE_DEFINITIONS)
  foreach(def IN LISTS _rml_msgpack_defs)
    if(def MATCHES "^MSGPACK_")
      string(APPEND RML_PC_CFLAGS " -D${def}")
    endif()
  endforeach()
endif()
configure_file("${PROJECT_SOURCE_DIR}/cmake/rml.pc.in" "${PROJECT_BINARY_DIR}/rml.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/rml.pc" DESTINATION "${RML_INSTALL_PKGCONFIGDIR}" ${_rml_component})
