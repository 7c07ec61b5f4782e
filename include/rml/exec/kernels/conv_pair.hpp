// A 1x1 convolution and the 1x1 projection added to it, run as one product: ResNet's bottleneck
// exits, y = act(W_a x_a + b_a + W_d x_d + b_d), as act([W_a | W_d] [x_a ; x_d] + (b_a + b_d)).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "rml/exec/kernels/conv.hpp"

namespace rml::detail {

/// The pair's weights, packed as one convolution over both inputs' channels (plan.c = a's channels
/// then d's), its two biases summed, and the projection's plan (to subsample a strided one's input).
struct PairedConvWeights {
  Conv2dPlan plan;    ///< the stacked convolution: 1x1, stride 1, a's output
  Conv2dPlan second;  ///< the projection as the graph has it
  std::vector<float> bias;
  std::shared_ptr<const PackedConvWeights> packed;
  /// Floats of the projection's subsampled input (a strided projection), before the run's scratch.
  std::int64_t subsampled = 0;
  [[nodiscard]] std::size_t scratch_bytes() const noexcept {
    return static_cast<std::size_t>(subsampled) * sizeof(float) + packed->scratch_bytes();
  }
};

/// Whether a (the convolution whose output the add reads first) and d (the projection) run as a
/// pair: both 1x1 f32 convolutions of one group onto the same output, a at stride 1 and d at stride
/// 1 or over a subsampled input (conv_is_strided_pointwise).
inline bool conv_pair_fits(const Conv2dPlan& a, const Conv2dPlan& d) noexcept {
  return conv_is_pointwise(a) && (conv_is_pointwise(d) || conv_is_strided_pointwise(d)) && a.groups == 1 &&
         d.groups == 1 && a.n == d.n && a.o == d.o && a.oh == d.oh && a.ow == d.ow && a.og > 0 && a.oh * a.ow > 0 &&
         a.c > 0 && d.c > 0;
}

/// Packs the pair's weights (wa [o, a.c], wd [o, d.c]; the biases may be null) for `threads`.
inline std::shared_ptr<const PairedConvWeights> pair_conv_weights(const Conv2dPlan& a, const float* wa, const float* ba,
                                                                  const Conv2dPlan& d, const float* wd, const float* bd,
                                                                  int threads) {
  auto pair = std::make_shared<PairedConvWeights>();
  pair->second = d;
  Conv2dPlan& p = pair->plan;
  p = a;
  p.c = p.cg = a.c + d.c;
  p.has_bias = true;
  const std::int64_t depth = p.c;
  std::vector<float> w(static_cast<std::size_t>(p.o * depth));
  pair->bias.assign(static_cast<std::size_t>(p.o), 0.0f);
  for (std::int64_t o = 0; o < p.o; ++o) {
    std::copy_n(wa + o * a.c, a.c, w.data() + o * depth);
    std::copy_n(wd + o * d.c, d.c, w.data() + o * depth + a.c);
    // b_a + b_d: the order the unpaired steps add them in (a's sums with its bias, then d's).
    pair->bias[static_cast<std::size_t>(o)] = (ba ? ba[o] : 0.0f) + (bd ? bd[o] : 0.0f);
  }
  pair->packed = pack_conv_weights(p, w.data(), threads, Winograd::off, a.c);
  if (conv_is_strided_pointwise(d)) pair->subsampled = (d.n * d.c * d.oh * d.ow + 15) / 16 * 16;
  return pair;
}

/// The pair's step: inputs x_a and x_d, weights and bias from args.packed, the add's activation chain
/// (args.epilogue) applied as the product stores its tiles.
inline Status paired_conv2d_kernel(const Kernel&, const KernelArgs& args) {
  const auto& pair = *static_cast<const PairedConvWeights*>(args.packed);
  const float* xa = in_ptr<float>(args, 0);
  const float* xd = in_ptr<float>(args, 1);
  float* y = out_ptr<float>(args);
  float* scratch = reinterpret_cast<float*>(args.scratch);
  if (pair.subsampled > 0) {
    subsample_input(pair.second, xd, scratch, args.pool);
    xd = scratch;
    scratch += pair.subsampled;
  }
  const Epilogue epi{pair.bias.data(), args.epilogue ? args.epilogue->chain : std::span<const UnaryStep>{}, nullptr};
  packed_conv2d_over(pair.plan, *pair.packed, xa, y, scratch, args.parts, args.pool, epi, xd);
  return {};
}

}  // namespace rml::detail
