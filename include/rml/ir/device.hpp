// Device lives in rml/core/device.hpp (tensors report theirs); this header keeps the old path.
#pragma once

#include "rml/core/device.hpp"
