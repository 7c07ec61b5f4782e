# vcpkg port for rml, used as an overlay port from this checkout:
#   vcpkg install rml --overlay-ports=<checkout>/ports
# The source is the checkout this file sits in. A registry port would fetch a release instead:
#   vcpkg_from_github(OUT_SOURCE_PATH SOURCE_PATH REPO <owner>/rml REF "v${VERSION}" SHA512 <hash>)
set(VCPKG_BUILD_TYPE release)  # header-only: nothing differs between debug and release
get_filename_component(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)

# The same configure and install as rml's consumer.install CTest test.
vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS -DRML_BUILD_TESTS=OFF -DRML_BUILD_EXAMPLES=OFF -DRML_BUILD_BENCHMARKS=OFF -DRML_INSTALL=ON)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(PACKAGE_NAME rml CONFIG_PATH share/cmake/rml)
vcpkg_fixup_pkgconfig()

file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
