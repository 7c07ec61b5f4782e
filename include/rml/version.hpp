// rml's version.
#pragma once

#include "rml/core/config.hpp"

#define RML_VERSION_MAJOR 0
#define RML_VERSION_MINOR 1
#define RML_VERSION_PATCH 0

namespace rml {

struct Version {
  int major;
  int minor;
  int patch;
};

/// The version of these headers.
inline constexpr Version version{RML_VERSION_MAJOR, RML_VERSION_MINOR, RML_VERSION_PATCH};

}  // namespace rml
