"""Conan 2 recipe for rml, a header-only C++20 library for neural-network inference graphs.

    conan create .                      # package the checkout into the local cache, then build test_package/
    # consumer conanfile.txt: [requires] rml/0.1.0  [generators] CMakeDeps CMakeToolchain
    # consumer CMakeLists.txt: find_package(rml REQUIRED)  target_link_libraries(app PRIVATE rml::rml)

rml compiles nothing: package() copies the headers, and package_info() describes the target
rml::rml (Eigen, simdjson, msgpack-cxx, threads, MSGPACK_NO_BOOST) that CMakeDeps and
PkgConfigDeps generate. docs/packaging.md says what has been tested.
"""
import os

from conan import ConanFile
from conan.tools.build import check_min_cppstd
from conan.tools.files import copy
from conan.tools.layout import basic_layout


class RmlConan(ConanFile):
    name = "rml"
    version = "0.1.0"  # keep equal to project(VERSION) in CMakeLists.txt (a CTest test checks)
    description = "Header-only C++20 library for neural-network inference graphs"
    license = "MIT"
    url = "https://github.com/rml-project/rml"  # the recipe lives in the project's repository
    homepage = "https://github.com/rml-project/rml"  # = project(HOMEPAGE_URL) in CMakeLists.txt (checked)
    topics = ("neural-networks", "inference", "onnx", "safetensors", "header-only")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    exports_sources = "include/*", "LICENSE"
    no_copy_source = True
    # rml uses msgpack-cxx with MSGPACK_NO_BOOST; do not pull Boost in for it.
    default_options = {"msgpack-cxx/*:use_boost": False}

    def layout(self):
        basic_layout(self, src_folder=".")

    def requirements(self):
        self.requires("eigen/3.4.0")
        self.requires("simdjson/3.0.1")
        self.requires("msgpack-cxx/6.1.0")

    def package_id(self):
        self.info.clear()

    def validate(self):
        check_min_cppstd(self, 20)

    def package(self):
        copy(self, "LICENSE", src=self.source_folder, dst=os.path.join(self.package_folder, "licenses"))
        copy(self, "*.hpp", src=os.path.join(self.source_folder, "include"),
             dst=os.path.join(self.package_folder, "include"))

    def package_info(self):
        self.cpp_info.set_property("cmake_file_name", "rml")
        self.cpp_info.set_property("cmake_target_name", "rml::rml")
        self.cpp_info.set_property("pkg_config_name", "rml")
        self.cpp_info.bindirs = []
        self.cpp_info.libdirs = []
        self.cpp_info.defines = ["MSGPACK_NO_BOOST"]
        self.cpp_info.requires = ["eigen::eigen", "simdjson::simdjson", "msgpack-cxx::msgpack-cxx"]
        if self.settings.os in ("Linux", "FreeBSD"):
            self.cpp_info.system_libs = ["pthread"]
