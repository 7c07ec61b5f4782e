// Which convolution algorithms an executor may use (ExecutorOptions::winograd).
#pragma once

#include <cstdint>

namespace rml {

/// Winograd transforms for 3x3, stride-1, undilated, ungrouped conv2d with constant weights, taken
/// where they pay (docs/ops.md lists which convolutions and the rounding error measured).
enum class Winograd : std::uint8_t {
  off,  ///< every convolution runs the direct (packed GEMM) path
  f2,   ///< F(2x2, 3x3): 2.25x fewer multiply-adds, within the conformance tolerance; the default
  f4,   ///< F(4x4, 3x3): 4x fewer, with a rounding error that can exceed the conformance tolerance
};

}  // namespace rml
