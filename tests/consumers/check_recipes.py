#!/usr/bin/env python3
"""Checks the Conan recipe and the vcpkg port without Conan or vcpkg (neither can be installed
here): both parse, name rml at the version CMakeLists.txt and meson.build declare, carry the
license (MIT, as LICENSE says) and the homepage CMakeLists.txt declares, require rml's
dependencies without Boost (msgpack-cxx's Boost option off), and describe the package as the
CMake build does (target rml::rml, MSGPACK_NO_BOOST; the port configures with the options the
consumer.install test uses and finds rmlConfig.cmake where rmlInstall.cmake puts it). The Conan
recipe packages LICENSE and has a test_package; pyproject.toml names the same version source.

Usage: check_recipes.py <rml source dir>; prints one line per failed check and exits 1 if any.
"""
import ast
import json
import os
import re
import sys

ROOT = sys.argv[1]
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


version = re.search(r"project\(rml\s+VERSION\s+([0-9.]+)", read("CMakeLists.txt")).group(1)
homepage = re.search(r'HOMEPAGE_URL\s+"([^"]+)"', read("CMakeLists.txt")).group(1)
check(read("LICENSE").startswith("MIT License"), "LICENSE: no longer the MIT license (update the recipes)")
check(re.search(r"version:\s*'%s'" % re.escape(version), read("meson.build")), "meson.build: version is not " + version)

# conanfile.py: class attributes and the strings its methods use.
tree = ast.parse(read("conanfile.py"), "conanfile.py")
classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
check(len(classes) == 1, "conanfile.py: expected one recipe class")
attrs = {}
calls = []
for node in ast.walk(classes[0]):
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        if isinstance(node.value, ast.Constant):
            attrs[node.targets[0].id] = node.value.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        args = [a.value for a in node.args if isinstance(a, ast.Constant)]
        calls.append((node.func.attr, args))
check(attrs.get("name") == "rml", "conanfile.py: name is not 'rml'")
check(attrs.get("version") == version, "conanfile.py: version %r is not %s" % (attrs.get("version"), version))
check(attrs.get("package_type") == "header-library", "conanfile.py: package_type is not header-library")
requires = [args[0] for name, args in calls if name == "requires" and args]
check("eigen/3.4.0" in requires, "conanfile.py: does not require eigen/3.4.0")
for dep in ("simdjson/", "msgpack-cxx/"):
    check(any(r.startswith(dep) for r in requires), "conanfile.py: does not require " + dep)
properties = {args[0]: args[1] for name, args in calls if name == "set_property" and len(args) == 2}
check(properties.get("cmake_target_name") == "rml::rml", "conanfile.py: cmake_target_name is not rml::rml")
check(properties.get("cmake_file_name") == "rml", "conanfile.py: cmake_file_name is not rml")
check("MSGPACK_NO_BOOST" in read("conanfile.py"), "conanfile.py: MSGPACK_NO_BOOST is not defined for consumers")
for field in ("license", "url", "homepage", "description"):
    check(isinstance(attrs.get(field), str) and attrs[field], "conanfile.py: no " + field)
check(attrs.get("license") == "MIT", "conanfile.py: license is not MIT")
check(attrs.get("homepage") == homepage, "conanfile.py: homepage is not " + homepage)
topics = [n for n in ast.walk(classes[0]) if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "topics"]
check(topics and isinstance(topics[0].value, ast.Tuple) and topics[0].value.elts, "conanfile.py: no topics")
options = [n for n in ast.walk(classes[0])
           if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "default_options"]
check(options and ast.literal_eval(options[0].value).get("msgpack-cxx/*:use_boost") is False,
      "conanfile.py: msgpack-cxx/*:use_boost is not False (Boost would be pulled in)")
check("boost" not in " ".join(requires).lower(), "conanfile.py: requires Boost")
sources = [n for n in ast.walk(classes[0])
           if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "exports_sources"]
check(sources and "LICENSE" in ast.literal_eval(sources[0].value), "conanfile.py: LICENSE is not exported")
copies = [[a.value for a in n.args if isinstance(a, ast.Constant)] for n in ast.walk(classes[0])
          if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "copy"]
check(any("LICENSE" in args for args in copies) and '"licenses"' in read("conanfile.py"),
      "conanfile.py: package() does not copy LICENSE into licenses/")
for part in ("conanfile.py", "CMakeLists.txt", "test_package.cpp"):
    check(os.path.isfile(os.path.join(ROOT, "test_package", part)), "test_package/" + part + " is missing")
test_recipe = read("test_package", "conanfile.py")
for needed in ("tested_reference_str", "CMakeDeps", "def test(self)"):
    check(needed in test_recipe, "test_package/conanfile.py: missing " + needed)
check("find_package(rml REQUIRED" in read("test_package", "CMakeLists.txt") and
      "rml::rml" in read("test_package", "CMakeLists.txt"), "test_package/CMakeLists.txt: does not use rml::rml")

# The vcpkg port.
manifest = json.loads(read("ports", "rml", "vcpkg.json"))
check(manifest.get("name") == "rml", "vcpkg.json: name is not rml")
check(manifest.get("version") == version, "vcpkg.json: version %r is not %s" % (manifest.get("version"), version))
deps = {d if isinstance(d, str) else d.get("name") for d in manifest.get("dependencies", [])}
check(manifest.get("license") == "MIT", "vcpkg.json: license is not MIT")
check(manifest.get("homepage") == homepage, "vcpkg.json: homepage is not " + homepage)
msgpack = [d for d in manifest.get("dependencies", []) if (d if isinstance(d, str) else d.get("name")) == "msgpack"]
check(msgpack and isinstance(msgpack[0], dict) and msgpack[0].get("default-features") is False
      and "boost" not in msgpack[0].get("features", []),
      "vcpkg.json: msgpack must have default-features false and no boost feature")
check("boost" not in {d if isinstance(d, str) else d.get("name") for d in manifest.get("dependencies", [])},
      "vcpkg.json: depends on Boost")
for dep in ("eigen3", "simdjson", "msgpack", "vcpkg-cmake", "vcpkg-cmake-config"):
    check(dep in deps, "vcpkg.json: does not depend on " + dep)
portfile = read("ports", "rml", "portfile.cmake")
for needed in ("vcpkg_cmake_configure(", "-DRML_BUILD_TESTS=OFF", "-DRML_BUILD_EXAMPLES=OFF", "vcpkg_cmake_install()",
               "vcpkg_cmake_config_fixup(", "CONFIG_PATH share/cmake/rml"):
    check(needed in portfile, "portfile.cmake: missing " + needed)
check('"${CMAKE_INSTALL_DATADIR}/cmake/rml"' in read("cmake", "rmlInstall.cmake"),
      "cmake/rmlInstall.cmake no longer installs the config to share/cmake/rml (update the port)")

# pyproject.toml: the Python package takes its version from version.hpp (setup.py) and its homepage from here.
pyproject = read("pyproject.toml")
check('dynamic = ["version"]' in pyproject, "pyproject.toml: the version is not dynamic (setup.py reads version.hpp)")
check(homepage in pyproject, "pyproject.toml: homepage is not " + homepage)
check(re.search(r"#define RML_VERSION_MAJOR %s\b" % version.split(".")[0], read("include", "rml", "version.hpp")),
      "include/rml/version.hpp: major version is not that of CMakeLists.txt")

for failure in failures:
    print("check_recipes: " + failure)
sys.exit(1 if failures else 0)
