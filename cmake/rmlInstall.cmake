# Install rules: headers, the rml::rml target, rmlConfig.cmake and a pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/rml" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS rml EXPORT rmlTargets)
install(EXPORT rmlTargets NAMESPACE rml:: DESTINATION "${CMAKE_INSTALL_DATADIR}/cmake/rml")

configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/rmlConfig.cmake.in"
                              "${PROJECT_BINARY_DIR}/rmlConfig.cmake"
                              INSTALL_DESTINATION "${CMAKE_INSTALL_DATADIR}/cmake/rml")
write_basic_package_version_file("${PROJECT_BINARY_DIR}/rmlConfigVersion.cmake"
                                 COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/rmlConfig.cmake" "${PROJECT_BINARY_DIR}/rmlConfigVersion.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/rmlDependencies.cmake"
        DESTINATION "${CMAKE_INSTALL_DATADIR}/cmake/rml")

configure_file("${PROJECT_SOURCE_DIR}/cmake/rml.pc.in" "${PROJECT_BINARY_DIR}/rml.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/rml.pc" DESTINATION "${CMAKE_INSTALL_DATADIR}/pkgconfig")
