"""Builds the `rml` Python package (python/rml + the extension rml._rml) and `rml_export`.

    pip install --no-build-isolation .        # offline, with Debian's python3-setuptools and pybind11-dev

The extension is one translation unit (python/src/rml_module.cpp) over rml's headers; it is compiled here
directly, optimised (-O2, NDEBUG, no debug info), without CMake. Headers are found with pkg-config
(eigen3, simdjson, pybind11) and the Python module `pybind11` when it is installed; CPPFLAGS and LDFLAGS
in the environment are honoured as setuptools always does, for dependencies elsewhere.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def version() -> str:
    with open(os.path.join(ROOT, "include", "rml", "version.hpp"), encoding="utf-8") as f:
        text = f.read()
    parts = [re.search(rf"#define RML_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def pkg_config(flag: str, package: str) -> list[str]:
    try:
        out = subprocess.run(["pkg-config", flag, package], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return shlex.split(out)


def include_dirs() -> list[str]:
    dirs = [os.path.join(ROOT, "include")]
    for package, fallback in (("eigen3", "/usr/include/eigen3"), ("simdjson", None), ("pybind11", None)):
        found = [f[2:] for f in pkg_config("--cflags-only-I", package) if f.startswith("-I")]
        dirs += found or ([fallback] if fallback and os.path.isdir(fallback) else [])
    try:
        import pybind11  # the PyPI package, when present; Debian's pybind11-dev puts the headers in /usr/include

        dirs.append(pybind11.get_include())
    except ImportError:
        pass
    return dirs


def libraries() -> tuple[list[str], list[str]]:
    flags = pkg_config("--libs", "simdjson") or ["-lsimdjson"]
    return [f[2:] for f in flags if f.startswith("-l")], [f[2:] for f in flags if f.startswith("-L")]


class BuildExt(build_ext):
    """Drops the interpreter's `-g` (debug info quadruples the module and its compile time)."""

    def build_extensions(self):
        for attr in ("compiler_so", "compiler_cxx", "linker_so"):
            command = getattr(self.compiler, attr, None)
            if command:
                setattr(self.compiler, attr, [a for a in command if a not in ("-g", "-Wstrict-prototypes")])
        super().build_extensions()


libs, lib_dirs = libraries()
extension = Extension(
    "rml._rml",
    sources=[os.path.relpath(os.path.join(ROOT, "python", "src", "rml_module.cpp"), ROOT)],
    include_dirs=include_dirs(),
    define_macros=[("MSGPACK_NO_BOOST", None), ("NDEBUG", None)],
    libraries=libs,
    library_dirs=lib_dirs,
    extra_compile_args=["-std=c++20", "-O2", "-fvisibility=hidden", "-pthread"],
    extra_link_args=["-pthread"],
    language="c++",
)

setup(version=version(), ext_modules=[extension], cmdclass={"build_ext": BuildExt})
