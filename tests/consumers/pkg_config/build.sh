#!/bin/sh
# Builds the consumer with a plain compiler command line and pkg-config (rml.pc must be on
# PKG_CONFIG_PATH unless rml is installed under a standard prefix).
set -eu
cd "$(dirname "$0")"
${CXX:-c++} -std=c++20 main.cpp $(pkg-config --cflags --libs rml) -o "${OUT:-consumer}"
