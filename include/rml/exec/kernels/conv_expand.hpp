// A 1x1 expansion and the depthwise convolution that alone reads it, run as one step: the first
// half of MobileNetV2's and EfficientNet's inverted residual blocks, y = dw(act(W x + b)). The
// step takes a strip of output rows and a block of the expanded channels at a time: their planes
// over the strip's input rows computed into the part's own scratch (in L2), the depthwise
// convolution run over them from there. The expanded tensor, six times the block's input, is never
// written out and read back.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "rml/exec/kernels/conv.hpp"

namespace rml::detail {

/// The fused step's constants: the expansion's weights packed as sgemm's A, its bias and activation
/// chain, the depthwise convolution's weights and bias, and the parts the output rows split into.
struct ExpandedDepthwise {
  Conv2dPlan expand;     ///< the 1x1 convolution (conv_is_pointwise)
  Conv2dPlan depthwise;  ///< the depthwise convolution over its output (depthwise_by_rows)
  std::vector<float, Eigen::aligned_allocator<float>> a;  ///< W_e packed by sgemm::pack_a
  std::vector<float> expand_bias;                         ///< zeros when the expansion has none
  std::vector<UnaryStep> expand_chain;
  std::vector<float> dw_weights, dw_bias;  ///< [c, kh, kw] and [c] (zeros when none)
  std::int64_t parts = 1;                  ///< the parts the work splits into, one per thread
  /// The parts take ranges of channels over every row, not bands of rows over every channel.
  bool by_channels = false;
  std::int64_t planes = 0;  ///< floats of a block's expanded planes, in each part's scratch

  /// A part's own scratch: a block's expanded planes, sgemm's panel, then the depthwise
  /// convolution's padded plane (when it reads through one).
  [[nodiscard]] std::int64_t padded_floats() const noexcept {
    return depthwise_padded(depthwise) ? depthwise_rows_floats(depthwise) : 0;
  }
  [[nodiscard]] std::size_t part_bytes() const noexcept {
    return static_cast<std::size_t>(planes + sgemm::kPanelFloats + padded_floats()) * sizeof(float);
  }
};

/// The bytes of expanded planes a block aims for: with the band's input rows streaming past, they
/// stay in L2 (1 MB on the machine measured) until the depthwise convolution has read them.
inline constexpr std::int64_t kExpandBlockBytes = 384 * 1024;

/// Output rows per strip of the fused step: 8 at stride 2 (17 input rows of a 3x3 kernel), 16 at
/// stride 1 (18), a multiple of the depthwise kernel's blocks of rows.
inline std::int64_t strip_rows(const Conv2dPlan& d) noexcept { return d.stride_h == 1 ? 16 : 8; }

/// Whether e (a 1x1 convolution) and d (a depthwise convolution over e's output) run fused: one
/// group, e's output d's input, d by rows (planes at least 16 outputs wide, or too large to
/// interleave; smaller ones fit in L2 unfused).
inline bool expand_depthwise_fits(const Conv2dPlan& e, const Conv2dPlan& d) noexcept {
  return conv_is_pointwise(e) && e.groups == 1 && conv_is_depthwise(d) && d.n == e.n && d.c == e.o && d.h == e.oh &&
         d.w == e.ow && e.c > 0 && e.o > 0 && e.h * e.w > 0 && d.oh * d.ow > 0 && depthwise_by_rows(d);
}

/// The fused step's constants for `threads` (we [e.o, e.c], wd [d.c, kh, kw]; the biases may be
/// null). A part's planes hold kExpandBlockBytes, or sgemm::kMr channels of the longest strip when more.
inline std::shared_ptr<const ExpandedDepthwise> expand_depthwise_weights(
    const Conv2dPlan& e, const float* we, const float* be, std::span<const UnaryStep> chain, const Conv2dPlan& d,
    const float* wd, const float* bd, int threads, bool by_channels) {
  auto f = std::make_shared<ExpandedDepthwise>();
  f->expand = e;
  f->depthwise = d;
  f->a.resize(static_cast<std::size_t>(sgemm::packed_floats(e.o, e.c)));
  sgemm::pack_a(we, e.c, e.o, e.c, f->a.data());
  f->expand_bias.assign(static_cast<std::size_t>(e.o), 0.0f);
  if (be) std::copy_n(be, e.o, f->expand_bias.begin());
  f->expand_chain.assign(chain.begin(), chain.end());
  const std::int64_t taps = d.kh * d.kw;
  f->dw_weights.assign(wd, wd + d.c * taps);
  f->dw_bias.assign(static_cast<std::size_t>(d.c), 0.0f);
  if (bd) std::copy_n(bd, d.c, f->dw_bias.begin());
  f->by_channels = by_channels;
  f->parts = std::clamp<std::int64_t>(threads, 1, by_channels ? (e.o + sgemm::kMr - 1) / sgemm::kMr : d.oh);
  // The most input rows a strip reads (expanded_depthwise_kernel: up to 2 * strip_rows - 1 output rows).
  const std::int64_t strip_in = std::min(d.h, (2 * strip_rows(d) - 2) * d.stride_h + (d.kh - 1) * d.dilation_h + 1);
  const std::int64_t floats = kExpandBlockBytes / static_cast<std::int64_t>(sizeof(float));
  f->planes = (std::max(floats, sgemm::kMr * strip_in * e.w) + 15) / 16 * 16;
  return f;
}

/// The depthwise convolution d restricted to output rows [oy0, oy1), over the input rows they read
/// ([iy0, iy0 + h) of the plan returned): rows outside the input stay padding.
inline Conv2dPlan depthwise_band(const Conv2dPlan& d, std::int64_t oy0, std::int64_t oy1, std::int64_t& iy0) {
  const std::int64_t first = oy0 * d.stride_h - d.pad_top;
  const std::int64_t last = (oy1 - 1) * d.stride_h - d.pad_top + (d.kh - 1) * d.dilation_h;  // inclusive
  iy0 = std::max<std::int64_t>(0, first);
  Conv2dPlan b = d;
  b.h = std::max<std::int64_t>(0, std::min(d.h, last + 1) - iy0);
  b.oh = oy1 - oy0;
  b.pad_top = iy0 - first;
  return b;
}

/// The fused step: input x (the expansion's), weights from args.packed, the depthwise
/// convolution's activation chain (args.epilogue) applied as its rows store when it is a clamp,
/// over each strip of a block's output after it when it is SiLU. The expansion's chain runs as its
/// product stores (SiLU in a pass over the expanded planes).
///
/// Part q takes band q of the output rows (or, by_channels, range q of the channels, over every
/// row), in strips of strip_rows output rows: per strip, for each block of channels, the expansion
/// over the input rows the strip reads (one or two rows either side computed twice), then the
/// depthwise convolution over them. A strip's input rows stay in L2 for all of its blocks, and each
/// block's planes until the depthwise convolution has read them.
///
/// Bands follow the position split of the 1x1 steps around the pair (MobileNetV2's projection
/// after it): each part reads the input rows written on its own core and writes the rows read
/// there next. Where the output goes to a step that splits channels (EfficientNet's squeeze and
/// excitation reads whole planes), the parts take channels. Blocks of channels with no strips, the
/// parts splitting the blocks, had read every input row once per block, half of them from the other
/// core: MobileNetV2's 16 -> 96-channel expansion on 112 x 112 ran 1.12x faster at 2 threads than
/// at 1.
inline Status expanded_depthwise_kernel(const Kernel&, const KernelArgs& args) {
  const auto& f = *static_cast<const ExpandedDepthwise*>(args.packed);
  const Conv2dPlan& e = f.expand;
  const Conv2dPlan& d = f.depthwise;
  const float* x = in_ptr<float>(args, 0);
  float* y = out_ptr<float>(args);
  const std::int64_t plane = e.h * e.w, plane_out = d.oh * d.ow, taps = d.kh * d.kw;
  const std::span<const UnaryStep> chain = args.epilogue ? args.epilogue->chain : std::span<const UnaryStep>{};
  // A clamp as the depthwise rows store (as conv2d_kernel's depthwise path), SiLU in a pass over
  // each block's strip after them: the only chains fuse_depthwise takes.
  const sgemm::Finish after = *finish_of(Epilogue{nullptr, chain, nullptr}, BiasAlong::rows);
  const bool silu_after = after.silu;
  const Clamp clamp = silu_after ? Clamp{} : Clamp{after.lo, after.hi};
  const std::int64_t parts = std::min(f.parts, args.pool ? args.pool->threads() : std::int64_t{1});
  const std::int64_t mr = sgemm::kMr, rows = strip_rows(d);
  // The expansion's bias and chain as its product stores (the bias per block, below), SiLU apart:
  // in a pass over the planes, every value through the packet exp as the unfused product computes
  // it over whole planes, where a strip's last partial panel would run its few columns through
  // std::exp and the bits would depend on where the strips fall.
  sgemm::Finish expand_finish = *finish_of(Epilogue{nullptr, f.expand_chain, nullptr}, BiasAlong::rows);
  const bool expand_silu = expand_finish.silu;
  expand_finish.silu = false;
  run_parts(args.pool, parts, [&](std::int64_t part) {
    std::int64_t oy0 = 0, oy1 = d.oh, ch0 = 0, ch1 = e.o;
    if (f.by_channels) {
      const std::int64_t row_blocks = (e.o + mr - 1) / mr;
      ch0 = part_begin(row_blocks, part, parts) * mr;
      ch1 = std::min(e.o, part_begin(row_blocks, part + 1, parts) * mr);
    } else {
      oy0 = part_begin(d.oh, part, parts), oy1 = part_begin(d.oh, part + 1, parts);
    }
    float* planes = args.parts.floats(part);
    float* panel = planes + f.planes;
    float* padded = f.padded_floats() > 0 ? panel + sgemm::kPanelFloats : nullptr;
    for (std::int64_t n = 0; n < e.n; ++n) {
      // Strips of `rows` output rows (the last up to twice that), each over every block of channels.
      for (std::int64_t sy0 = oy0, sy1 = 0; sy0 < oy1; sy0 = sy1) {
        sy1 = oy1 - sy0 < 2 * rows ? oy1 : sy0 + rows;
        std::int64_t iy0 = 0;
        const Conv2dPlan strip = depthwise_band(d, sy0, sy1, iy0);
        const std::int64_t strip_in = strip.h * e.w, strip_out = strip.oh * d.ow;
        // Channels per block: as many whole row blocks of sgemm as the part's planes hold (at least one).
        const std::int64_t block = std::max(mr, f.planes / std::max<std::int64_t>(strip_in, 1) / mr * mr);
        if (padded) std::fill_n(padded, DepthwiseRows::floats(strip), 0.0f);  // the strip's padding
        for (std::int64_t c0 = ch0; c0 < ch1; c0 += block) {
          const std::int64_t c1 = std::min(ch1, c0 + block);
          // The block's expanded planes over the strip's input rows.
          sgemm::Finish finish = expand_finish;
          finish.row_bias = f.expand_bias.data() + c0;
          if (strip_in > 0) {
            sgemm::multiply(f.a.data() + c0 * e.c, e.c, sgemm::StridedRows{x + n * e.c * plane + iy0 * e.w, plane},
                            strip_in, planes, strip_in, 0, c1 - c0, false, panel, false, &finish);
            if (expand_silu) sgemm::silu_rows(planes, strip_in, c1 - c0, strip_in);
          }
          float* out = y + (n * d.c + c0) * plane_out + sy0 * d.ow;
          for (std::int64_t c = c0; c < c1; ++c)
            depthwise_rows(strip, planes + (c - c0) * strip_in, f.dw_weights.data() + c * taps, f.dw_bias[c], clamp,
                           out + (c - c0) * plane_out, padded);
          if (silu_after) sgemm::silu_rows(out, plane_out, c1 - c0, strip_out);
        }
      }
    }
  });
  return {};
}

}  // namespace rml::detail
