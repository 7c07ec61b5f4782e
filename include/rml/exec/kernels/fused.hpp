// Kernels for op patterns the program builder recognises at Executor::create and runs as one step
// (rml/exec/detail/program_builder.hpp decides when): the layer-norm chain the exporters emit.
#pragma once

#include <cmath>
#include <cstdint>

#include "rml/exec/kernels/common.hpp"

namespace rml::detail {

/// The layer-norm chain over the last `width` elements of each of `rows` rows:
///   c = x - mean(x);  y = c * rsqrt(mean(c * c) + eps)  (or c / sqrt(...) with `divide`);
///   then y * gamma, then y + beta, when the chain has them (inputs 1 and 2, `width` values each).
/// Each row is one pass of the same float arithmetic the unfused ops do, kept in cache.
struct LayerNormPlan {
  std::int64_t rows = 0, width = 0;
  float eps = 0.0f;
  bool divide = false;     ///< sqrt then div, rather than rsqrt then mul
  bool has_gamma = false;  ///< input 1 (or none)
  bool has_beta = false;   ///< the input after gamma (or none)
};

inline Status layer_norm_kernel(const Kernel&, const KernelArgs& args) {
  const auto& p = *static_cast<const LayerNormPlan*>(args.packed);
  const float* x = in_ptr<float>(args, 0);
  const float* gamma = p.has_gamma ? in_ptr<float>(args, 1) : nullptr;
  const float* beta = p.has_beta ? in_ptr<float>(args, p.has_gamma ? 2 : 1) : nullptr;
  float* y = out_ptr<float>(args);
  const std::int64_t w = p.width;
  // As the mean kernel: a sum times 1 / count (NaN for an empty row, as a mean of nothing is).
  const float inv = 1.0f / static_cast<float>(w);
  const auto mean = [&](const auto& a) { return w ? a.sum() * inv : std::nanf(""); };
  parallel_ranges(args.pool, p.rows, work_grain(4 * w), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      ArrayMap out(y + r * w, w);
      const ConstArrayMap in(x + r * w, w);
      out = in - mean(in);
      const float var = mean(out.square()) + p.eps;
      if (p.divide)
        out /= std::sqrt(var);
      else
        out *= 1.0f / std::sqrt(var);
      if (gamma) out *= ConstArrayMap(gamma, w);
      if (beta) out += ConstArrayMap(beta, w);
    }
  });
  return {};
}

}  // namespace rml::detail
