// conv2d (im2col + rml's GEMM; 1x1 convs straight to it; Winograd for 3x3 stride 1; a direct depthwise path)
// and max/avg pooling.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "rml/core/checked.hpp"
#include "rml/exec/kernels/common.hpp"
#include "rml/exec/kernels/matmul.hpp"
#include "rml/exec/kernels/sgemm.hpp"
#include "rml/exec/kernels/transpose.hpp"
#include "rml/exec/kernels/winograd.hpp"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace rml::detail {

/// floor(a / b) and ceil(a / b) for b > 0 and any sign of a.
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) noexcept { return -floor_div(-a, b); }

/// The outputs o in [0, count) whose input position `o * stride + shift` lies in [0, size).
struct ValidRange {
  std::int64_t begin, end;
};
constexpr ValidRange valid_outputs(std::int64_t count, std::int64_t stride, std::int64_t shift,
                                   std::int64_t size) noexcept {
  const std::int64_t b = std::max<std::int64_t>(0, ceil_div(-shift, stride));
  const std::int64_t e = std::min(count, floor_div(size - 1 - shift, stride) + 1);
  return {b, std::max(b, e)};
}

/// Whether conv2d reads its input directly as the GEMM's right-hand side (1x1, stride 1, no pad).
inline bool conv_is_pointwise(const Conv2dPlan& p) noexcept {
  return p.kh == 1 && p.kw == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 && p.pad_left == 0 &&
         p.oh == p.h && p.ow == p.w;
}
inline bool conv_is_depthwise(const Conv2dPlan& p) noexcept { return p.cg == 1 && p.og == 1; }
/// A 1x1 convolution with a stride whose every output position reads inside the input (no padding):
/// a 1x1 convolution over the input's positions at that stride (ResNet's downsampling projections).
inline bool conv_is_strided_pointwise(const Conv2dPlan& p) noexcept {
  return p.kh == 1 && p.kw == 1 && (p.stride_h > 1 || p.stride_w > 1) && p.pad_top == 0 && p.pad_left == 0 &&
         p.oh > 0 && p.ow > 0 && (p.oh - 1) * p.stride_h < p.h && (p.ow - 1) * p.stride_w < p.w;
}
/// A zero-padded copy of a convolution's input split by stride phase, [cg][sh][sw][hp][wp]: phase
/// (py, px) of channel ci holds the padded input's rows py + i * sh and columns px + j * sw. Output
/// position (oy, ox) at im2col row k reads the copy at offset(p, k) + oy * wp + ox, over all phases
/// when the kernel reads every phase (stride 1, or an undilated kernel at least as wide as its
/// stride); the last wp - ow positions of each row read into the next and are dropped. The f32
/// implicit, direct and gathered runs and bf16's 16-bit GEMM (half16.hpp) read their inputs so.
struct PhaseLayout {
  std::int64_t sh, sw, hp, wp;
  bool every_phase;
  explicit PhaseLayout(const Conv2dPlan& p) noexcept
      : sh(p.stride_h),
        sw(p.stride_w),
        hp(p.oh + (p.kh - 1) * p.dilation_h / p.stride_h),
        wp(p.ow + (p.kw - 1) * p.dilation_w / p.stride_w),
        every_phase((sh == 1 || (p.dilation_h == 1 && p.kh >= sh)) && (sw == 1 || (p.dilation_w == 1 && p.kw >= sw))) {}
  /// Where im2col row k (= (ci * kh + ky) * kw + kx) starts in the copy.
  [[nodiscard]] std::int64_t offset(const Conv2dPlan& p, std::int64_t k) const noexcept {
    const std::int64_t kx = k % p.kw, ky = (k / p.kw) % p.kh, ci = k / (p.kw * p.kh);
    const std::int64_t ty = ky * p.dilation_h, tx = kx * p.dilation_w;
    const std::int64_t phase = (ci * sh + ty % sh) * sw + tx % sw;
    return (phase * hp + ty / sh) * wp + tx / sw;
  }
};

/// The stride-1 convolution over the subsampled input that a strided 1x1 one is.
inline Conv2dPlan subsampled_plan(const Conv2dPlan& p) noexcept {
  Conv2dPlan q = p;
  q.h = p.oh, q.w = p.ow, q.stride_h = q.stride_w = 1, q.dilation_h = q.dilation_w = 1;
  return q;
}

/// Output positions per im2col tile on `threads` threads: one tile per thread when each gets at
/// least 256 positions (each thread then runs im2col and a GEMM on its own columns), otherwise
/// a single tile whose GEMM splits over the threads. More tiles than threads would only make
/// Eigen pack the weights once more per tile.
inline std::int64_t conv_tile(const Conv2dPlan& p, std::int64_t threads) noexcept {
  const std::int64_t plane = std::max<std::int64_t>(p.oh * p.ow, 1);
  const std::int64_t per = (plane + threads - 1) / threads;
  return threads > 1 && per >= 256 ? std::min(plane, (per + 15) / 16 * 16) : plane;
}

/// Rows [r0, r1) and columns [p0, p1) of the im2col matrix of one group's input `x`, into `col`
/// (row stride `ld`, by default p1 - p0): col[r - r0][p - p0] = x[ci][iy][ix] for row
/// r = (ci * kh + ky) * kw + kx at output position p, and 0 in the padding.
inline void im2col(const Conv2dPlan& p, const float* x, float* col, std::int64_t r0, std::int64_t r1, std::int64_t p0,
                   std::int64_t p1, std::int64_t ld = 0) {
  // Rows of small planes are a few floats long: plain loops per segment (GCC still compiles the zero
  // runs as memset calls; copy_run does the copies elsewhere, and the fills have no such helper yet).
  const std::int64_t len = p1 - p0;
  if (ld == 0) ld = len;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t kx = r % p.kw, ky = (r / p.kw) % p.kh, ci = r / (p.kw * p.kh);
    const std::int64_t shift_x = kx * p.dilation_w - p.pad_left;
    const ValidRange vx = valid_outputs(p.ow, p.stride_w, shift_x, p.w);
    for (std::int64_t oy = p0 / p.ow; oy * p.ow < p1; ++oy) {
      // The part of output row oy inside [p0, p1), as ox in [a, b); d[ox - a] is output column ox.
      const std::int64_t base = oy * p.ow;
      const std::int64_t a = std::max(p0 - base, std::int64_t{0}), b = std::min(p1 - base, p.ow);
      float* d = col + (r - r0) * ld + (base + a - p0);
      const std::int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      if (iy < 0 || iy >= p.h) {
        for (std::int64_t ox = a; ox < b; ++ox) d[ox - a] = 0.0f;
        continue;
      }
      const float* row = x + (ci * p.h + iy) * p.w;  // input x at ox: row[ox * stride_w + shift_x]
      const std::int64_t va = std::clamp(vx.begin, a, b), vb = std::clamp(vx.end, va, b);
      for (std::int64_t ox = a; ox < va; ++ox) d[ox - a] = 0.0f;
      if (p.stride_w == 1) {
        for (std::int64_t ox = va; ox < vb; ++ox) d[ox - a] = row[ox + shift_x];
      } else {
        for (std::int64_t ox = va; ox < vb; ++ox) d[ox - a] = row[ox * p.stride_w + shift_x];
      }
      for (std::int64_t ox = vb; ox < b; ++ox) d[ox - a] = 0.0f;
    }
  }
}

/// dst[j] = src[j * stride] for j in [0, n). Stride 1 is copy_run; stride 2 a constant stride, which
/// compilers vectorise as two loads and a permute per vector. A store through a computed index
/// instead, which GCC made a scatter, once took half of a 3x3 stride-2 max pool.
inline void copy_strided(const float* src, std::int64_t stride, std::int64_t n, float* dst) {
  if (stride == 1) {
    // copy_run, not an Eigen assignment (Eigen peels up to 15 scalar stores to align the
    // destination, and padded copies start one or two floats past a cache line) nor a memcpy call
    // per row (a 56x56 depthwise layer: 132-136 -> 130-135 us, 94.3-94.6 -> 91.5-93.3 us at 112x112).
    copy_run(src, n, dst);
  } else if (stride == 2) {
    for (std::int64_t j = 0; j < n; ++j) dst[j] = src[2 * j];
  } else {
    for (std::int64_t j = 0; j < n; ++j) dst[j] = src[j * stride];
  }
}

/// The even and odd floats of src, in one pass over it: even[j] = src[2 * j] for j < n_even and
/// odd[j] = src[2 * j + 1] for j < n_odd (two strided copies would read src twice).
inline void deinterleave(const float* src, std::int64_t n_even, std::int64_t n_odd, float* even, float* odd) {
  // Blocks of 16 pairs (a row of a 56-wide plane is two; a loop GCC vectorised itself checked the
  // pointers for overlap and ran scalar tails, which cost more than the copy).
  const std::int64_t both = std::min(n_even, n_odd);
  std::int64_t j = 0;
  if (overlapping_blocks<16>(both, [&](std::int64_t j0) { deinterleave16(src + 2 * j0, even + j0, odd + j0); }))
    j = both;
  for (; j < both; ++j) {
    even[j] = src[2 * j];
    odd[j] = src[2 * j + 1];
  }
  for (; j < n_even; ++j) even[j] = src[2 * j];
  for (; j < n_odd; ++j) odd[j] = src[2 * j + 1];
}

/// Splits a row into its even and odd columns (column c at c / 2 + (c % 2) * half, half = (w + 1) / 2)
/// so that a stride-2 tap reads contiguous floats: see split_offset.
inline void split_row(const float* row, std::int64_t w, float* split) {
  const std::int64_t half = (w + 1) / 2;
  deinterleave(row, half, w / 2, split, split + half);
}
/// Where input column 2 * ox + shift of a split row is: split[split_offset(shift, w) + ox].
constexpr std::int64_t split_offset(std::int64_t shift, std::int64_t w) noexcept {
  const std::int64_t odd = shift & 1;  // an odd column is in the second half
  return odd * ((w + 1) / 2) + (shift - odd) / 2;
}
/// Rows up to this wide are split on the stack.
inline constexpr std::int64_t kMaxSplitRow = 1024;

/// A clamping activation (ReLU, ReLU6, clip) that a depthwise convolution applies as it stores its
/// outputs: min(max(v, lo), hi), with Eigen's max and min as sgemm::Finish (the same bits as the
/// pass after it would give); -inf and +inf, which change nothing, when the step has none.
struct Clamp {
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  template <typename Expr>
  [[nodiscard]] auto operator()(const Expr& v) const {
    return v.max(lo).min(hi);
  }
};

/// What every output row of a depthwise convolution or a pool shares: per kernel column kx, the
/// input shift and the output columns whose input lies inside the row. Computed once per call,
/// not per plane and row (kernels wider than kMaxKw compute the rest on demand).
class TapColumns {
 public:
  TapColumns(std::int64_t kw, std::int64_t dilation, std::int64_t pad_left, std::int64_t stride, std::int64_t ow,
             std::int64_t w) noexcept
      : dilation_(dilation), pad_left_(pad_left), stride_(stride), ow_(ow), w_(w) {
    for (std::int64_t kx = 0; kx < std::min(kw, kMaxKw); ++kx) valid_[kx] = compute(kx);
  }
  [[nodiscard]] std::int64_t shift(std::int64_t kx) const noexcept { return kx * dilation_ - pad_left_; }
  [[nodiscard]] ValidRange valid(std::int64_t kx) const noexcept { return kx < kMaxKw ? valid_[kx] : compute(kx); }

 private:
  static constexpr std::int64_t kMaxKw = 16;
  [[nodiscard]] ValidRange compute(std::int64_t kx) const noexcept {
    return valid_outputs(ow_, stride_, shift(kx), w_);
  }
  std::int64_t dilation_, pad_left_, stride_, ow_, w_;
  ValidRange valid_[kMaxKw] = {};
};

/// One channel plane of a depthwise convolution, computed directly: row by row, so each output row
/// stays in L1 while every tap adds its input row to it (contiguous, vectorised, for stride 1). A
/// stride-2 row is first split into its even and odd columns so its taps are contiguous as well.
inline void depthwise_plane(const Conv2dPlan& p, const TapColumns& cols, const float* x, const float* w, float bias,
                            float* y) {
  float split[kMaxSplitRow];
  const bool split_rows = p.stride_w == 2 && p.w <= kMaxSplitRow;
  for (std::int64_t oy = 0; oy < p.oh; ++oy) {
    float* dst = y + oy * p.ow;
    for (std::int64_t ox = 0; ox < p.ow; ++ox) dst[ox] = bias;
    for (std::int64_t ky = 0; ky < p.kh; ++ky) {
      const std::int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      if (iy < 0 || iy >= p.h) continue;
      const float* row = x + iy * p.w;
      if (split_rows) split_row(row, p.w, split);
      for (std::int64_t kx = 0; kx < p.kw; ++kx) {
        const float wv = w[ky * p.kw + kx];
        const std::int64_t shift_x = cols.shift(kx);
        const ValidRange vx = cols.valid(kx);
        if (p.stride_w == 1) {
          for (std::int64_t ox = vx.begin; ox < vx.end; ++ox) dst[ox] += wv * row[ox + shift_x];
        } else if (split_rows) {
          const std::int64_t at = split_offset(shift_x, p.w);
          for (std::int64_t ox = vx.begin; ox < vx.end; ++ox) dst[ox] += wv * split[at + ox];
        } else {
          for (std::int64_t ox = vx.begin; ox < vx.end; ++ox) dst[ox] += wv * row[ox * p.stride_w + shift_x];
        }
      }
    }
  }
}

/// The padded input extent a depthwise convolution's taps read: rows and columns.
inline std::int64_t padded_extent_h(const Conv2dPlan& p) {
  return (p.oh - 1) * p.stride_h + (p.kh - 1) * p.dilation_h + 1;
}
inline std::int64_t padded_extent_w(const Conv2dPlan& p) {
  return (p.ow - 1) * p.stride_w + (p.kw - 1) * p.dilation_w + 1;
}

/// Depthwise convolution of one channel plane through registers, for rows of at least kChunk
/// outputs: the plane is first copied into a zero-padded buffer whose rows are split by column
/// phase (column c at phase c % stride_w, index c / stride_w), so that every tap of a run of kChunk
/// outputs reads kChunk contiguous floats; each run then sums its kh * kw taps in registers and is
/// stored once. No bounds are checked inside: the padding holds the zeros, and slack after each
/// phase keeps the last run's reads inside the buffer.
struct DepthwiseRows {
  static constexpr std::int64_t kChunk = 16;
  /// The padded plane's scratch per thread, at most 4 MB (a 1000 x 1000 plane); larger planes run
  /// row by row through memory (depthwise_plane).
  static constexpr std::int64_t kMaxFloats = std::int64_t{1} << 20;
  static constexpr std::int64_t kMaxKw = 64;
  static constexpr std::int64_t kMaxStride = 8;
  /// Floats per phase of a padded row: the columns of that phase, then a run's slack.
  static std::int64_t phase_len(const Conv2dPlan& p) {
    return (padded_extent_w(p) + p.stride_w - 1) / p.stride_w + kChunk;
  }
  static std::int64_t row_len(const Conv2dPlan& p) { return p.stride_w * phase_len(p); }
  /// Saturates: each extent fits (they are at most the padded input's), their product may not.
  static std::int64_t floats(const Conv2dPlan& p) {
    return checked_mul(padded_extent_h(p), row_len(p)).value_or(std::numeric_limits<std::int64_t>::max());
  }
  static bool suits(const Conv2dPlan& p) {
    return p.ow >= kChunk && p.oh > 0 && p.kw <= kMaxKw && p.stride_w <= kMaxStride && floats(p) <= kMaxFloats;
  }
};

/// Runs of output columns [ox, ox + kChunk) of output rows [oy, oy + R) of one plane, from its
/// padded copy: R independent sums, so consecutive multiply-adds do not wait on each other.
template <int R>
void depthwise_rows_block(const Conv2dPlan& p, const float* padded, const std::int64_t* tap_offset, const float* w,
                          float bias, const Clamp& clamp, float* y, std::int64_t oy) {
  using Run = Eigen::Array<float, DepthwiseRows::kChunk, 1>;
  constexpr std::int64_t C = DepthwiseRows::kChunk;
  const std::int64_t row_len = DepthwiseRows::row_len(p), row_step = p.stride_h * row_len;
  // Whole runs only: the last one starts at ow - C (ow >= C) and recomputes a few outputs, which
  // come out the same, rather than storing a partial run.
  for (std::int64_t ox0 = 0; ox0 < p.ow; ox0 += C) {
    const std::int64_t ox = std::min(ox0, p.ow - C);
    Run acc[R];
    for (int r = 0; r < R; ++r) acc[r] = Run::Constant(bias);
    for (std::int64_t ky = 0; ky < p.kh; ++ky) {
      const float* row = padded + (oy * p.stride_h + ky * p.dilation_h) * row_len + ox;
      for (std::int64_t kx = 0; kx < p.kw; ++kx) {
        const float wv = w[ky * p.kw + kx];
        const float* src = row + tap_offset[kx];
        for (int r = 0; r < R; ++r) acc[r] += wv * Eigen::Map<const Run>(src + r * row_step);
      }
    }
    for (int r = 0; r < R; ++r) Eigen::Map<Run>{y + (oy + r) * p.ow + ox} = clamp(acc[r]);
  }
}

/// Whether a depthwise convolution's kernel is one the row and interleaved paths unroll: 3x3 or 5x5
/// (MobileNet's and EfficientNet's), at stride 1 or 2, undilated. (The interleaved path dispatches
/// on it inline, per row: through with_unrolled_kernel GCC stopped inlining its block, 24 -> 36 us
/// on a 14x14 step.)
inline bool depthwise_unrolled(const Conv2dPlan& p) noexcept {
  return p.kh == p.kw && (p.kh == 3 || p.kh == 5) && p.stride_h == p.stride_w && p.stride_h <= 2 && p.dilation_h == 1 &&
         p.dilation_w == 1;
}
/// Calls f.template operator()<K, S>() for the unrolled kernel of plan p (depthwise_unrolled(p)).
template <typename F>
void with_unrolled_kernel(const Conv2dPlan& p, const F& f) {
  if (p.kh == 3)
    p.stride_h == 1 ? f.template operator()<3, 1>() : f.template operator()<3, 2>();
  else
    p.stride_h == 1 ? f.template operator()<5, 1>() : f.template operator()<5, 2>();
}

/// depthwise_rows_block for a KH x KW kernel with row stride SH and no row dilation, R output rows
/// at once: each input row's runs are loaded once per kernel column and added into every output row
/// that reads them ((R - 1) * SH + KH rows of loads where the generic block loads R * KH), with the
/// weights held in registers. Each output sums its taps in the generic block's order.
template <int KH, int KW, int SH, int R>
void depthwise_rows_fixed(const Conv2dPlan& p, const float* padded, const std::int64_t* tap_offset, const float* w,
                          float bias, const Clamp& clamp, float* y, std::int64_t oy) {
  using Run = Eigen::Array<float, DepthwiseRows::kChunk, 1>;
  constexpr std::int64_t C = DepthwiseRows::kChunk;
  constexpr int kInRows = (R - 1) * SH + KH;
  const std::int64_t row_len = DepthwiseRows::row_len(p);
  std::int64_t offset[KW];
  float wk[KH * KW];
  for (int kx = 0; kx < KW; ++kx) offset[kx] = tap_offset[kx];
  for (int k = 0; k < KH * KW; ++k) wk[k] = w[k];
  const float* base = padded + oy * SH * row_len;
  for (std::int64_t ox0 = 0; ox0 < p.ow; ox0 += C) {
    const std::int64_t ox = std::min(ox0, p.ow - C);  // whole runs, as in depthwise_rows_block
    Run acc[R];
    RML_UNROLL
    for (int r = 0; r < R; ++r) acc[r] = Run::Constant(bias);
    RML_UNROLL
    for (int i = 0; i < kInRows; ++i) {
      const float* row = base + i * row_len + ox;
      RML_UNROLL
      for (int kx = 0; kx < KW; ++kx) {
        const Run v = Eigen::Map<const Run>(row + offset[kx]);
        RML_UNROLL
        for (int r = 0; r < R; ++r) {
          const int ky = i - r * SH;
          if (ky >= 0 && ky < KH) acc[r] += wk[ky * KW + kx] * v;
        }
      }
    }
    RML_UNROLL
    for (int r = 0; r < R; ++r) Eigen::Map<Run>{y + (oy + r) * p.ow + ox} = clamp(acc[r]);
  }
}

/// Output rows [oy, oy1) by depthwise_rows_fixed: blocks of R rows, the last overlapping the one
/// before (its rows come out the same), or one row at a time when there are fewer than R. Calls
/// ready(end) before the rows [oy, end) are computed.
template <int KH, int KW, int SH, typename Ready>
void depthwise_rows_fixed_range(const Conv2dPlan& p, const float* padded, const std::int64_t* tap_offset,
                                const float* w, float bias, const Clamp& clamp, float* y, std::int64_t oy,
                                std::int64_t oy1, const Ready& ready) {
  // Eight rows of one run each where a run is at most two packets (AVX-512, AVX), else four.
  constexpr int R = DepthwiseRows::kChunk / sgemm::kLanes <= 2 ? 8 : 4;
  if (oy1 - oy >= R) {
    for (; oy + R <= oy1; oy += R) {
      ready(oy + R);
      depthwise_rows_fixed<KH, KW, SH, R>(p, padded, tap_offset, w, bias, clamp, y, oy);
    }
    ready(oy1);
    if (oy < oy1) depthwise_rows_fixed<KH, KW, SH, R>(p, padded, tap_offset, w, bias, clamp, y, oy1 - R);
    return;
  }
  for (; oy < oy1; ++oy) {
    ready(oy + 1);
    depthwise_rows_fixed<KH, KW, SH, 1>(p, padded, tap_offset, w, bias, clamp, y, oy);
  }
}

/// Whether a depthwise convolution by rows reads its input in place (depthwise_in_place_block)
/// rather than through a padded copy of each plane: its unrolled kernels (3x3 and 5x5 at stride 1
/// or 2), where a masked load reads the columns a run's taps read past the ends of a row (AVX-512).
inline bool depthwise_reads_in_place(const Conv2dPlan& p) noexcept {
#if defined(__AVX512F__)
  return depthwise_unrolled(p) && DepthwiseRows::kChunk == sgemm::kLanes;
#else
  (void)p;
  return false;
#endif
}

#if defined(__AVX512F__)
/// Output rows [oy, oy + R) of one plane of a K x K depthwise convolution at stride S (1 or 2),
/// its taps read from the input itself: output (oy + r, ox) sums the taps (ky, kx) over input row
/// (oy + r) * S + ky - pad_top and column ox * S + kx - pad_left, a run of kChunk outputs (one
/// packet) at a time. Each input row's packet for kernel column kx is formed once and added into
/// every output row that reads it, as depthwise_rows_fixed does: at stride 1 a load; at stride 2
/// the even or odd floats of two loads (one permute), the pair from column 2 * ox + kx - pad_left
/// rounded down to an even tap serving taps kx and kx + 1. A run whose loads reach past either end
/// of a row loads with masks (zeros there), and rows above or below the input add zeros: the taps,
/// their order and their zeros are those of the padded copy. `AllRows`: every input row the block
/// reads is inside the input.
///
/// That copy (a plane copied in as its rows come up, split into even and odd columns at stride 2,
/// then read from L1) had taken a third of the time of a 144-channel 56 x 56 layer's planes,
/// read warm, and 60 % of a 96-channel 112 x 112 stride-2 one's.
template <int K, int S, int R, bool AllRows>
void depthwise_in_place_block(const Conv2dPlan& p, const float* x, const float* w, float bias, const Clamp& clamp,
                              float* y, std::int64_t oy) {
  using Eigen::internal::pmadd;
  using Eigen::internal::pmax;
  using Eigen::internal::pmin;
  using Eigen::internal::pset1;
  using Eigen::internal::pstoreu;
  using P = sgemm::Packet;
  static_assert(S == 1 || S == 2);
  constexpr std::int64_t C = DepthwiseRows::kChunk;
  constexpr int kInRows = (R - 1) * S + K;
  // Floats a run's loads span from its first tap's column: K at stride 1; at stride 2 two packets
  // from each even tap.
  constexpr std::int64_t kSpan = S == 1 ? C + K - 1 : (K - 1) / 2 * 2 + 2 * C;
  // The plan's sizes as locals: stores through y could otherwise change them, for all GCC knows.
  const std::int64_t w_in = p.w, h_in = p.h, ow = p.ow, pad_left = p.pad_left, iy0 = oy * S - p.pad_top;
  // Input row iy0 + i's first column, as an address (a run's first tap may read before it; masks
  // keep those lanes unread); 0 for a row outside the input. Blocks inside the input read row i at
  // a stride from the first instead (through an array of rows GCC moved the addresses between
  // vector and integer registers, and the block ran 1.3x slower).
  std::uintptr_t row[AllRows ? 1 : kInRows];
  if constexpr (!AllRows) {
    for (int i = 0; i < kInRows; ++i) {
      const std::int64_t iy = iy0 + i;
      row[i] = iy >= 0 && iy < h_in ? reinterpret_cast<std::uintptr_t>(x + iy * w_in) : 0;
    }
  } else {
    row[0] = reinterpret_cast<std::uintptr_t>(x + iy0 * w_in);
  }
  const P lo = pset1<P>(clamp.lo), hi = pset1<P>(clamp.hi), zero = pset1<P>(0.0f);
  P wk[K * K];
  for (int k = 0; k < K * K; ++k) wk[k] = pset1<P>(w[k]);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  // The lanes l of a packet from column `first` with 0 <= first + l < w.
  const auto lanes_inside = [&](std::int64_t first) {
    const ValidRange v = valid_outputs(C, 1, first, w_in);
    const std::int64_t a = std::min(v.begin, C);  // past C only when no lane is inside
    return static_cast<__mmask16>(((std::uint32_t{1} << v.end) - 1) & ~((std::uint32_t{1} << a) - 1));
  };
  const auto run = [&]<bool Masked>(std::int64_t ox) RML_INLINE_LAMBDA {
    const std::int64_t c0 = ox * S - pad_left;
    // Per load of a row: its column offset from c0 and its mask.
    constexpr int kLoads = S == 1 ? K : (K + 1) / 2 * 2;
    const auto load_at = [](int q) { return S == 1 ? q : q / 2 * 2 + q % 2 * C; };
    __mmask16 mask[kLoads] = {};
    if constexpr (Masked)
      for (int q = 0; q < kLoads; ++q) mask[q] = lanes_inside(c0 + load_at(q));
    P acc[R];
    RML_UNROLL
    for (int r = 0; r < R; ++r) acc[r] = pset1<P>(bias);
    RML_UNROLL
    for (int i = 0; i < kInRows; ++i) {
      const auto load = [&](int q) RML_INLINE_LAMBDA {
        const std::int64_t column = (AllRows ? i * w_in : 0) + c0 + load_at(q);
        if (!AllRows && row[i] == 0) return zero;
        if constexpr (Masked) {
          // Unsigned arithmetic: the address may lie before the row (masked lanes only).
          const std::uintptr_t at = row[AllRows ? 0 : i] + static_cast<std::uintptr_t>(column * std::int64_t{4});
          return _mm512_maskz_loadu_ps(mask[q], reinterpret_cast<const void*>(at));
        } else if constexpr (AllRows) {
          return _mm512_loadu_ps(x + iy0 * w_in + column);  // inside the input
        } else {
          return _mm512_loadu_ps(reinterpret_cast<const float*>(row[i]) + column);
        }
      };
      P pair_lo = zero, pair_hi = zero;
      RML_UNROLL
      for (int kx = 0; kx < K; ++kx) {
        P v;
        if constexpr (S == 1) {
          v = load(kx);
        } else {
          if (kx % 2 == 0) pair_lo = load(kx), pair_hi = load(kx + 1);  // columns from c0 + kx, two packets
          v = _mm512_permutex2var_ps(pair_lo, kx % 2 == 0 ? even : odd, pair_hi);
        }
        RML_UNROLL
        for (int r = 0; r < R; ++r) {
          const int ky = i - r * S;
          if (ky >= 0 && ky < K) acc[r] = pmadd(wk[ky * K + kx], v, acc[r]);
        }
      }
    }
    RML_UNROLL
    for (int r = 0; r < R; ++r) pstoreu(y + (oy + r) * ow + ox, pmin(pmax(acc[r], lo), hi));
  };
  for (std::int64_t ox0 = 0; ox0 < ow; ox0 += C) {
    const std::int64_t ox = std::min(ox0, ow - C);  // whole runs, as in depthwise_rows_block
    const std::int64_t c0 = ox * S - pad_left;
    if (c0 < 0 || c0 + kSpan > w_in)
      run.template operator()<true>(ox);
    else
      run.template operator()<false>(ox);
  }
}

/// One plane by depthwise_in_place_block: blocks of 8 rows, the last overlapping the one before,
/// or one row at a time on planes of fewer rows.
template <int K, int S>
void depthwise_in_place(const Conv2dPlan& p, const float* x, const float* w, float bias, const Clamp& clamp, float* y) {
  const auto block = [&]<int R>(std::int64_t oy) {
    const std::int64_t iy0 = oy * S - p.pad_top;
    if (iy0 >= 0 && iy0 + (R - 1) * S + K <= p.h)
      depthwise_in_place_block<K, S, R, true>(p, x, w, bias, clamp, y, oy);
    else
      depthwise_in_place_block<K, S, R, false>(p, x, w, bias, clamp, y, oy);
  };
  if (overlapping_blocks<8>(p.oh, [&](std::int64_t oy) { block.template operator()<8>(oy); })) return;
  for (std::int64_t oy = 0; oy < p.oh; ++oy) block.template operator()<1>(oy);
}
#endif

/// One plane, through `padded`, whose padding (every float the plane does not set) is zero: the
/// caller zero-fills it once for all the planes it runs (depthwise_padded); or in place.
inline void depthwise_rows(const Conv2dPlan& p, const float* x, const float* w, float bias, const Clamp& clamp,
                           float* y, float* padded) {
#if defined(__AVX512F__)
  if (depthwise_reads_in_place(p)) {
    with_unrolled_kernel(p, [&]<int K, int S>() { depthwise_in_place<K, S>(p, x, w, bias, clamp, y); });
    return;
  }
#endif
  const std::int64_t hp = padded_extent_h(p), wp = padded_extent_w(p);
  const std::int64_t lp = DepthwiseRows::phase_len(p), row_len = DepthwiseRows::row_len(p), sw = p.stride_w;
  // Padded column c is input column c - pad_left; phase ph holds the columns c = ph + i * sw, and
  // those inside the input are i in [lo, hi) (the same for every row).
  std::int64_t lo[DepthwiseRows::kMaxStride], hi[DepthwiseRows::kMaxStride];
  for (std::int64_t ph = 0; ph < sw; ++ph) {
    const std::int64_t count = ph < wp ? (wp - ph + sw - 1) / sw : 0;
    lo[ph] = std::min(count, std::max<std::int64_t>(0, ceil_div(p.pad_left - ph, sw)));
    hi[ph] = std::max(lo[ph], std::min(count, ceil_div(p.pad_left + p.w - ph, sw)));
  }
  // At stride 2, one pass over each row where the two phases' first columns are adjacent in it.
  const std::int64_t pe = p.pad_left % 2, even_src = sw == 2 ? pe + lo[pe] * 2 - p.pad_left : 0;
  const bool even_odd = sw == 2 && (1 - pe) + lo[1 - pe] * 2 - p.pad_left == even_src + 1;
  // The input rows are copied in as the output rows that read them come up, so a block of outputs
  // reads rows just written (in L1) and the copy's loads overlap the block before's arithmetic.
  const std::int64_t r_end = std::min({hp, p.pad_top + p.h, (p.oh - 1) * p.stride_h + (p.kh - 1) * p.dilation_h + 1});
  std::int64_t next = p.pad_top;  // the next row to copy
  const auto ready = [&](std::int64_t oy_end) {               // copies the rows that outputs before oy_end read
    const std::int64_t need = std::min(r_end, (oy_end - 1) * p.stride_h + (p.kh - 1) * p.dilation_h + 1);
    for (; next < need; ++next) {
      const float* src = x + (next - p.pad_top) * p.w;  // padded column c is src[c - pad_left]
      float* dst = padded + next * row_len;
      if (even_odd) {  // the input's even columns go to phase pe, its odd ones to the other
        deinterleave(even_src + src, hi[pe] - lo[pe], hi[1 - pe] - lo[1 - pe], dst + pe * lp + lo[pe],
                     dst + (1 - pe) * lp + lo[1 - pe]);
        continue;
      }
      for (std::int64_t ph = 0; ph < sw; ++ph)
        copy_strided(src + ph + lo[ph] * sw - p.pad_left, sw, hi[ph] - lo[ph], dst + ph * lp + lo[ph]);
    }
  };
  // Per kernel column, where its taps start within a padded row (phase, then index).
  std::int64_t tap_offset[DepthwiseRows::kMaxKw];
  for (std::int64_t kx = 0; kx < p.kw; ++kx) {
    const std::int64_t c = kx * p.dilation_w;
    tap_offset[kx] = c % sw * lp + c / sw;
  }
  if (depthwise_unrolled(p)) {
    with_unrolled_kernel(p, [&]<int K, int S>() {
      depthwise_rows_fixed_range<K, K, S>(p, padded, tap_offset, w, bias, clamp, y, 0, p.oh, ready);
    });
    return;
  }
  std::int64_t oy = 0;
  for (; oy + 4 <= p.oh; oy += 4) {
    ready(oy + 4);
    depthwise_rows_block<4>(p, padded, tap_offset, w, bias, clamp, y, oy);
  }
  for (; oy < p.oh; ++oy) {
    ready(oy + 1);
    depthwise_rows_block<1>(p, padded, tap_offset, w, bias, clamp, y, oy);
  }
}

/// Depthwise convolution of up to kLanes channels at once, for planes whose rows are too short to
/// vectorise along: the channels are interleaved into a zero-padded [hp, wp, kLanes] copy, so every
/// tap of every output position is one multiply-add over kLanes channels with no bounds to check.
struct DepthwiseLanes {
  static constexpr std::int64_t kLanes = 16;
  static constexpr std::int64_t kMaxPadded = 1536;  ///< padded positions the stack buffer holds
  /// Whether plan p runs interleaved: short output rows, a padded plane that fits, a small kernel.
  static bool suits(const Conv2dPlan& p) {
    return p.ow < 2 * kLanes && p.oh > 0 && p.ow > 0 && padded_extent_h(p) * padded_extent_w(p) <= kMaxPadded &&
           p.kh * p.kw <= 49;
  }
};

/// Whether a depthwise convolution runs by rows (DepthwiseRows), and the floats of one padded
/// plane it then takes per thread (rounded to whole cache lines). A 3 x 3 one at stride 1 that reads
/// in place takes that path from 16 outputs a row (one run) on: MobileNetV2's 192-channel ones on
/// 28 x 28, interleaved, had spent most of their time transposing channels in and out, and run
/// 0.76 of that time in place (1 and 2 threads). A 5 x 5 one on 28 x 28 (EfficientNet-B0's 240
/// channels), whose transposes are shared by 25 taps, ran 1.14-1.15x slower in place: it stays.
inline bool depthwise_by_rows(const Conv2dPlan& p) {
  const bool in_place = depthwise_reads_in_place(p) && p.kh == 3 && p.stride_w == 1;
  return DepthwiseRows::suits(p) && (!DepthwiseLanes::suits(p) || in_place);
}
/// Whether it runs interleaved (DepthwiseLanes).
inline bool depthwise_by_lanes(const Conv2dPlan& p) { return DepthwiseLanes::suits(p) && !depthwise_by_rows(p); }
/// Whether it runs by rows through a padded copy of each plane, the scratch below.
inline bool depthwise_padded(const Conv2dPlan& p) { return depthwise_by_rows(p) && !depthwise_reads_in_place(p); }
inline std::int64_t depthwise_rows_floats(const Conv2dPlan& p) { return (DepthwiseRows::floats(p) + 15) / 16 * 16; }

/// Scratch bytes conv2d needs on `threads` threads: one im2col tile per thread that has one, or
/// for a depthwise convolution that runs by rows, one padded plane per thread.
inline std::size_t conv_scratch_bytes(const Conv2dPlan& p, int threads) noexcept {
  if (conv_is_depthwise(p))
    return depthwise_padded(p) ? static_cast<std::size_t>(depthwise_rows_floats(p) * std::max(threads, 1)) * 4 : 0;
  if (conv_is_pointwise(p)) return 0;
  const std::int64_t tile = conv_tile(p, threads), plane = std::max<std::int64_t>(p.oh * p.ow, 1);
  const std::int64_t tiles = std::min<std::int64_t>((plane + tile - 1) / tile, threads);
  return static_cast<std::size_t>(p.cg * p.kh * p.kw * tile * tiles) * sizeof(float);
}

// Eigen's packet types carry alignment attributes that GCC drops (and warns of) when one is a class
// template's argument, as PacketBlock's; the attributes do not matter there.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
#endif
/// Interleaves or de-interleaves `count` positions of kLanes channels by square blocks of P's
/// lanes, the last block of a row overlapping the one before: `In` writes dst[i * kLanes + l] =
/// src[l * plane + i], else dst[l * plane + i] = src[i * kLanes + l]. False, doing nothing, when
/// the row is under one block.
template <typename P, bool In>
bool transpose_lanes(const float* src, std::int64_t plane, std::int64_t count, float* dst) {
  constexpr std::int64_t L = DepthwiseLanes::kLanes;
  constexpr int S = Eigen::internal::unpacket_traits<P>::size;
  static_assert(L % S == 0);
  return overlapping_blocks<S>(count, [&](std::int64_t i) {
    for (std::int64_t cb = 0; cb < L; cb += S) {
      if constexpr (In)
        transpose_block<P>(src + cb * plane + i, plane, dst + i * L + cb, L);
      else
        transpose_block<P>(src + i * L + cb, L, dst + cb * plane + i, plane);
    }
  });
}

/// transpose_lanes with the widest packet whose square fits the row: full, half or quarter packets
/// (a 7-wide row of MobileNet's last planes takes two 4 x 4 blocks a channel quad).
template <bool In>
bool transpose_lanes_any(const float* src, std::int64_t plane, std::int64_t count, float* dst) {
  using P = sgemm::Packet;
  using Half = typename Eigen::internal::unpacket_traits<P>::half;
  using Quarter = typename Eigen::internal::unpacket_traits<Half>::half;
  return transpose_lanes<P, In>(src, plane, count, dst) || transpose_lanes<Half, In>(src, plane, count, dst) ||
         transpose_lanes<Quarter, In>(src, plane, count, dst);
}

/// Channels [c0, c0 + lanes) of one image (x and y point at channel c0's planes; w at its weights).
/// `Full` is lanes == kLanes: the interleaving into the padded copy and out of it runs as SIMD
/// transposes of square blocks (transpose_lanes_any), else element by element.
template <bool Full>
void depthwise_lanes(const Conv2dPlan& p, const float* x, const float* w, const float* bias, const Clamp& clamp,
                     std::int64_t lanes, float* y) {
  using Eigen::internal::pload;
  using Eigen::internal::ploadu;
  using Eigen::internal::pmadd;
  using Eigen::internal::pmax;
  using Eigen::internal::pmin;
  using Eigen::internal::pset1;
  using Eigen::internal::pstore;
  using Eigen::internal::pstoreu;
  using sgemm::Packet;
  constexpr std::int64_t L = DepthwiseLanes::kLanes;
  constexpr int PS = static_cast<int>(sgemm::kLanes);
  constexpr int NP = static_cast<int>(L) / PS;  // packets per position
  static_assert(L % PS == 0);
  const std::int64_t n = Full ? L : lanes;
  const std::int64_t hp = padded_extent_h(p), wp = padded_extent_w(p), taps = p.kh * p.kw;
  const std::int64_t plane_in = p.h * p.w, plane_out = p.oh * p.ow;
  alignas(64) float padded[DepthwiseLanes::kMaxPadded * L];
  alignas(64) float wt[49 * L] = {};
  alignas(64) float b[L] = {};
  alignas(64) float row_out[2 * L * L];  // one output row, [ox][lane] (suits: ow < 2 * kLanes)
  for (std::int64_t t = 0; t < taps; ++t)
    for (std::int64_t l = 0; l < n; ++l) wt[t * L + l] = w[l * taps + t];
  if (bias)
    for (std::int64_t l = 0; l < n; ++l) b[l] = bias[l];
  // In: input row iy of the n channels into padded row iy + pad_top, [position][lane]; only the
  // border (and the lanes past n) is zeroed.
  const std::int64_t y0 = std::max<std::int64_t>(p.pad_top, 0), y1 = std::max(y0, std::min(hp, p.h + p.pad_top));
  const std::int64_t x0 = std::min(std::max<std::int64_t>(p.pad_left, 0), wp);
  const std::int64_t x1 = std::max(x0, std::min(wp, p.w + p.pad_left));
  std::fill_n(padded, y0 * wp * L, 0.0f);
  std::fill(padded + y1 * wp * L, padded + hp * wp * L, 0.0f);
  for (std::int64_t yy = y0; yy < y1; ++yy) {
    const float* src = x + (yy - p.pad_top) * p.w + (x0 - p.pad_left);  // channel 0, column x0
    float* dst = padded + (yy * wp + x0) * L;
    const std::int64_t count = x1 - x0;
    std::fill_n(padded + yy * wp * L, x0 * L, 0.0f);
    std::fill(dst + count * L, padded + (yy + 1) * wp * L, 0.0f);
    if constexpr (Full) {
      if (transpose_lanes_any<true>(src, plane_in, count, dst)) continue;
    }
    for (std::int64_t i = 0; i < count; ++i) {
      for (std::int64_t l = 0; l < n; ++l) dst[i * L + l] = src[l * plane_in + i];
      for (std::int64_t l = n; l < L; ++l) dst[i * L + l] = 0.0f;
    }
  }
  // Positions [ox, ox + B) of output row oy into row_out: B independent sums per packet, so the
  // multiply-adds of one tap do not wait on each other. With the kernel (KH x KW at stride S, no
  // dilation) fixed, each padded column a row of taps reads is loaded once and added into every
  // position that reads it, and the loops unroll; KH = 0 takes the plan's kernel.
  const auto run = [&]<int B, int KH, int KW, int S>(std::int64_t oy, std::int64_t ox) {
    Packet acc[B][NP];
    for (int q = 0; q < NP; ++q) {
      const Packet bq = pload<Packet>(b + q * PS);
      RML_UNROLL
      for (int k = 0; k < B; ++k) acc[k][q] = bq;
    }
    if constexpr (KH > 0) {
      for (int ky = 0; ky < KH; ++ky) {
        const float* row = padded + ((oy * S + ky) * wp + ox * S) * L;
        RML_UNROLL
        for (int j = 0; j < (B - 1) * S + KW; ++j) {
          RML_UNROLL
          for (int q = 0; q < NP; ++q) {
            const Packet v = pload<Packet>(row + j * L + q * PS);
            RML_UNROLL
            for (int k = 0; k < B; ++k) {
              const int kx = j - k * S;
              if (kx >= 0 && kx < KW) acc[k][q] = pmadd(pload<Packet>(wt + (ky * KW + kx) * L + q * PS), v, acc[k][q]);
            }
          }
        }
      }
    } else {
      for (std::int64_t ky = 0; ky < p.kh; ++ky) {
        const float* row = padded + ((oy * p.stride_h + ky * p.dilation_h) * wp + ox * p.stride_w) * L;
        for (std::int64_t kx = 0; kx < p.kw; ++kx) {
          const float* tap = row + kx * p.dilation_w * L;
          const float* wk = wt + (ky * p.kw + kx) * L;
          for (int q = 0; q < NP; ++q) {
            const Packet wq = pload<Packet>(wk + q * PS);
            for (int k = 0; k < B; ++k)
              acc[k][q] = pmadd(wq, pload<Packet>(tap + k * p.stride_w * L + q * PS), acc[k][q]);
          }
        }
      }
    }
    const Packet lo = pset1<Packet>(clamp.lo), hi = pset1<Packet>(clamp.hi);
    for (int k = 0; k < B; ++k)
      for (int q = 0; q < NP; ++q) pstore(row_out + (ox + k) * L + q * PS, pmin(pmax(acc[k][q], lo), hi));
  };
  constexpr int kBlock = NP >= 8 ? 1 : 8 / NP;  // eight accumulators
  // A row in blocks of kBlock positions, the last overlapping the one before (row_out takes the
  // same sums twice), or of 4 when the row is shorter, or one by one.
  const auto row_blocks = [&]<int KH, int KW, int S>(std::int64_t oy) {
    const auto block = [&]<int B>(std::int64_t ox) { run.template operator()<B, KH, KW, S>(oy, ox); };
    if (overlapping_blocks<kBlock>(p.ow, [&](std::int64_t ox) { block.template operator()<kBlock>(ox); })) return;
    if (overlapping_blocks<4>(p.ow, [&](std::int64_t ox) { block.template operator()<4>(ox); })) return;
    for (std::int64_t ox = 0; ox < p.ow; ++ox) block.template operator()<1>(ox);
  };
  const bool fixed = depthwise_unrolled(p);
  for (std::int64_t oy = 0; oy < p.oh; ++oy) {
    if (!fixed)
      row_blocks.template operator()<0, 0, 0>(oy);
    else if (p.kh == 3)
      p.stride_h == 1 ? row_blocks.template operator()<3, 3, 1>(oy) : row_blocks.template operator()<3, 3, 2>(oy);
    else
      p.stride_h == 1 ? row_blocks.template operator()<5, 5, 1>(oy) : row_blocks.template operator()<5, 5, 2>(oy);
    // Out: row_out [ox][lane] into the n output planes' row oy.
    float* out = y + oy * p.ow;
    if constexpr (Full) {
      if (transpose_lanes_any<false>(row_out, plane_out, p.ow, out)) continue;
    }
    for (std::int64_t i = 0; i < p.ow; ++i)
      for (std::int64_t l = 0; l < n; ++l) out[l * plane_out + i] = row_out[i * L + l];
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// Max pools whose windows are 2x2 (no padding) or 3x3 with one row and column of padding before
/// (ResNet's), at stride 2, on planes of even width with half as many output columns:
/// max_pool_s2_rows runs them.
inline int max_pool_s2_kernel(const Pool2dPlan& p) noexcept {
  if (p.stride_h != 2 || p.stride_w != 2 || p.w % 2 != 0 || p.ow != p.w / 2 || p.w > kMaxSplitRow) return 0;
  if (p.kh == 2 && p.kw == 2 && p.pad_top == 0 && p.pad_left == 0) return 2;
  if (p.kh == 3 && p.kw == 3 && p.pad_top == 1 && p.pad_left == 1) return 3;
  return 0;
}

/// One plane of a max pool max_pool_s2_kernel takes (K its window), a band
/// of rows at a time, each step one loop over the whole band: the window's rows folded into one per
/// output row, the band split into its even and odd columns in one pass, then output column ox is
/// the even column ox with the odd ones ox and, for K = 3, ox - 1. Row by row, the general path ran
/// a handful of short loops per output row, and took 8 us on a 32 x 32 x 32 input where ONNX
/// Runtime took 2.
///
/// Output rows [oy0, oy1) of `out` (the whole output plane) from input rows held at `in`: plane
/// row y at in + (y - row0) * ld, which must hold every row those output rows read (a whole plane:
/// row0 0 and ld p.w; a fused convolution's band of rows: see pooled_conv2d).
template <int K>
void max_pool_s2_rows(const Pool2dPlan& p, const float* in, std::int64_t ld, std::int64_t row0, float* out,
                      std::int64_t oy0, std::int64_t oy1) {
  constexpr std::int64_t kBand = 4096;  // floats of folded rows a band holds
  alignas(64) float folded[kBand], even[kBand / 2], odd[kBand / 2];
  const auto fold = [](float acc, float v) { return (v > acc || v != v) ? v : acc; };  // NaN wins
  const std::int64_t w = p.w, ow = p.ow, band = std::max<std::int64_t>(1, kBand / w);
  for (std::int64_t b0 = oy0; b0 < oy1; b0 += band) {
    const std::int64_t rows = std::min(oy1, b0 + band) - b0, n = rows * ow;
    for (std::int64_t r = 0; r < rows; ++r) {
      // The window's rows inside the plane: every window holds one at least (pads < kernel).
      const std::int64_t y0 = (b0 + r) * 2 - p.pad_top;
      const std::int64_t ya = std::max<std::int64_t>(y0, 0), yb = std::min<std::int64_t>(y0 + K, p.h);
      float* __restrict dst = folded + r * w;
      const float* __restrict r0 = in + (ya - row0) * ld;
      const float* __restrict r1 = r0 + ld;
      const float* __restrict r2 = r1 + ld;
      if (yb - ya == 1) {
        copy_run(r0, w, dst);
      } else if (yb - ya == 2) {
        for (std::int64_t i = 0; i < w; ++i) dst[i] = fold(r0[i], r1[i]);
      } else {
        for (std::int64_t i = 0; i < w; ++i) dst[i] = fold(fold(r0[i], r1[i]), r2[i]);
      }
    }
    deinterleave(folded, n, n, even, odd);
    float* __restrict o = out + b0 * ow;
    for (std::int64_t j = 0; j < n; ++j) o[j] = fold(even[j], odd[j]);
    if constexpr (K == 3) {
      // The odd column before, over the band as one run; a row's first output has none (the
      // padding), so it is set again after.
      for (std::int64_t j = 1; j < n; ++j) o[j] = fold(o[j], odd[j - 1]);
      for (std::int64_t r = 0; r < rows; ++r) o[r * ow] = fold(even[r * ow], odd[r * ow]);
    }
  }
}

// Pre-packed convolution for constant weights (every conv2d but depthwise ones). Per group and
// image, row-major Y[og, plane] = W[og, kdim] X[kdim, plane] through rml's GEMM (kernels/sgemm.hpp):
// the weights are its packed operand, packed once at Executor::create, and X is read in place one
// tile of output positions at a time. A 1x1 convolution reads the input itself. Other convolutions
// whose every input row and column is read read a zero-padded copy of the input (no im2col): for
// stride 1, over the padded width, row k of X is the padded input shifted by a constant offset, so
// the GEMM runs over `oh * padded width` positions into a tile and the few that fall in the padding
// are dropped when the tile is copied out. For stride s the padded copy is split by phase first
// (rows py, py + s, ... and columns px, px + s, ... of it in a plane of their own): a tap then reads
// one phase plane at stride 1, and again row k of X is a constant shift. The copy is the size of
// the input, where an im2col matrix holds kh * kw / s^2 copies of it (12 for a 7x7 stride-2 stem).
// The remaining convolutions (kernels narrower than their stride, dilated strided ones, wide
// padding) im2col each tile into L2 first.

/// Constant conv2d weights packed for sgemm, and how a run splits its work: tiles of `cols` output
/// positions, or, when the positions are too few for every thread to get a tile, blocks of output
/// channels over one shared im2col matrix. On planes smaller than two GEMM panels (deep layers)
/// the product is turned around, Y^T[plane, og] = X^T W^T, so the channels fill whole panels: the
/// weights are then packed as B (W_g^T in panels of channels), and the parts split the channels.
struct PackedConvWeights {
  std::int64_t kdim = 0, og = 0;
  std::int64_t cols = 0;    ///< output positions per tile, a multiple of sgemm::kNr
  std::int64_t parts = 1;   ///< threads the run splits over
  bool split_rows = false;  ///< each part takes a range of output channels, not of tiles
  bool pointwise = false;   ///< a 1x1 convolution: X is the input itself
  bool transposed = false;  ///< the channels are the GEMM's columns (small planes)
  /// Per group: W_g packed by sgemm::pack_a, or W_g^T packed by sgemm::pack_b when transposed.
  std::vector<float, Eigen::aligned_allocator<float>> a;
  /// Implicit runs read X from the padded input, split by stride phase: [cg][sh][sw][hp][wp], phase
  /// (py, px) holding the padded input's rows py + i * sh and columns px + j * sw (one phase at
  /// stride 1). Per row k of X (ci, ky, kx), k_offset[k] is the offset of its first element.
  bool implicit = false;
  /// Transposed runs whose Xᵀ the GEMM reads in place (sgemm::OffsetBlock), one output row at a
  /// time: from the padded input as implicit runs lay it out, or a 1x1 convolution's input itself.
  bool direct = false;
  /// Direct runs not 1x1 whose parts take bands of output rows over every channel panel, rather
  /// than channel panels over every row (see pack_conv_weights).
  bool by_rows = false;
  /// Direct 1x1 runs whose parts take ranges of the positions over every channel panel, rather
  /// than channel panels over every position (see pack_conv_weights).
  bool by_positions = false;
  /// Transposed runs whose output rows are too short to read in place: Xᵀ packed from the padded
  /// input (gather_transposed_x) rather than through im2col.
  bool gathered = false;
  /// A 1x1 convolution paired with the projection added to it (conv_pair.hpp): its depth rows
  /// [0, stacked) read the first input, the rest the second; 0 for every other run.
  std::int64_t stacked = 0;
  std::int64_t hp = 0, wp = 0, sh = 1, sw = 1;
  std::int64_t planes = 0;  ///< cg * sh * sw
  std::vector<std::int64_t> k_offset;
  /// GEMM columns per image and group: the output positions, or `oh * wp` when implicit.
  std::int64_t positions = 0;
  /// Floats of the subsampled input a strided 1x1 convolution runs over (conv_is_strided_pointwise);
  /// everything else is packed for subsampled_plan.
  std::int64_t subsampled = 0;
  /// Set when the convolution runs through Winograd instead (kernels/winograd.hpp).
  std::shared_ptr<const WinogradWeights> winograd;
  /// A max pool fused after an implicit run (fuse_max_pool), when pool_band is set: the run then
  /// computes bands of output rows into a tile per part and pools them from there, and the step's
  /// output is the pool's (see pooled_conv2d).
  Pool2dPlan pool;
  std::int64_t pool_band = 0;  ///< pool output rows per band; 0 when no pool is fused
  std::int64_t pool_ldc = 0;   ///< floats from one output channel's rows in the tile to the next's

  [[nodiscard]] std::int64_t group_floats() const noexcept {
    return transposed ? sgemm::packed_b_floats(kdim, og) : sgemm::packed_floats(og, kdim);
  }
  [[nodiscard]] const float* group(std::int64_t g) const noexcept { return a.data() + g * group_floats(); }
  /// Transposed runs: floats of X^T packed once for the parts (gathered runs pack a copy each, in
  /// their own scratch) and of Y^T [positions, og] (direct runs hold one panel's in each part's own).
  [[nodiscard]] std::int64_t packed_x_floats() const noexcept {
    return transposed && !direct && !gathered ? packed_x_copy_floats() : 0;
  }
  [[nodiscard]] std::int64_t packed_x_copy_floats() const noexcept {
    return round16(sgemm::packed_floats(positions, kdim));
  }
  [[nodiscard]] std::int64_t yt_floats() const noexcept { return transposed && !direct ? round16(positions * og) : 0; }
  /// Direct runs: one part's sums of one panel of output channels over its positions, [positions,
  /// kNr], transposed into the output once the panel's last depth block is done.
  [[nodiscard]] std::int64_t panel_sums_floats() const noexcept { return direct ? round16(positions * sgemm::kNr) : 0; }
  /// Floats of the X tile a part fills: im2col [kdim, cols]; the result tile [og, cols] when
  /// implicit; nothing for 1x1 convolutions, which read the input.
  [[nodiscard]] std::int64_t tile_floats() const noexcept {
    if (implicit) return round16(og * cols);
    return pointwise ? 0 : round16(kdim * cols);
  }
  /// Floats per part: its tile and sgemm's panel for a partial last panel.
  [[nodiscard]] std::int64_t part_floats() const noexcept { return tile_floats() + sgemm::kPanelFloats; }
  /// Floats of the padded input the parts share (implicit runs; direct and gathered ones not 1x1 pad
  /// a copy each, in their own scratch).
  [[nodiscard]] std::int64_t padded_floats() const noexcept { return implicit ? padded_copy_floats() : 0; }
  /// Floats of one padded input: its planes, and slack for the last positions' whole panels (the
  /// furthest read is the largest row offset plus the positions rounded up to a panel, past the
  /// planes' end when the last phase's taps start in its first rows).
  [[nodiscard]] std::int64_t padded_copy_floats() const noexcept {
    const std::int64_t furthest = *std::max_element(k_offset.begin(), k_offset.end());
    return round16(std::max(planes * hp * wp, furthest + (positions + sgemm::kNr - 1) / sgemm::kNr * sgemm::kNr));
  }
  /// Floats of the shared im2col matrix of a run split by rows (1x1 convolutions read the input;
  /// transposed runs im2col into the packed X^T directly).
  [[nodiscard]] std::int64_t shared_floats() const noexcept {
    return split_rows && !pointwise ? round16(kdim * positions) : 0;
  }
  /// Bytes of the scratch the parts share: the subsampled input, the padded input, the im2col
  /// matrix, X^T and Y^T, each present only for the runs above that use it.
  [[nodiscard]] std::size_t scratch_bytes() const noexcept {
    if (winograd) return 0;
    const std::int64_t floats = subsampled + padded_floats() + shared_floats() + packed_x_floats() + yt_floats();
    return static_cast<std::size_t>(floats) * sizeof(float);
  }
  /// Floats of one part's own scratch (PartScratch): with a pool fused, the tile of its band's rows;
  /// else a padded copy of the input (direct and gathered runs not 1x1), the panel sums (direct)
  /// and X^T (gathered), or its tile and sgemm's panel for a partial last panel (transposed runs
  /// read B in whole panels, and need none).
  [[nodiscard]] std::int64_t own_floats() const noexcept {
    if (pool_band) return round16(og * pool_ldc);
    std::int64_t floats = (direct || gathered) && !pointwise ? padded_copy_floats() : 0;
    floats += panel_sums_floats();
    if (gathered) floats += packed_x_copy_floats();
    if (!transposed) floats += split_rows ? sgemm::kPanelFloats : part_floats();
    return floats;
  }
  /// Bytes of one part's own scratch, and the parts a run uses (0 when they need none).
  [[nodiscard]] std::size_t part_bytes() const noexcept {
    return winograd ? winograd->part_bytes() : static_cast<std::size_t>(own_floats()) * sizeof(float);
  }
  [[nodiscard]] std::int64_t part_count() const noexcept {
    if (winograd) return winograd->copies();
    return own_floats() > 0 ? parts : 0;
  }

 private:
  static constexpr std::int64_t round16(std::int64_t n) noexcept { return (n + 15) / 16 * 16; }
};

/// Packs conv2d weights `w` ([o, cg, kh, kw]) for runs of plan `p` on `threads` threads; as
/// Winograd weights when `winograd` allows it and it pays (winograd_weights_for). `stacked`: a 1x1
/// convolution paired with its projection, the first `stacked` input channels a's (conv_pair.hpp).
inline std::shared_ptr<const PackedConvWeights> pack_conv_weights(const Conv2dPlan& plan, const float* w, int threads,
                                                                  Winograd winograd = Winograd::f2,
                                                                  std::int64_t stacked = 0) {
  auto pw = std::make_shared<PackedConvWeights>();
  pw->stacked = stacked;
  // A strided 1x1 convolution runs as a 1x1 one over its input subsampled first (a copy of the
  // positions it reads), not through im2col: ResNet-50's 1024 -> 2048 projection onto 7 x 7 took
  // 1.29-1.36 -> 0.88 ms at 1 thread with its weights cold, its 512 -> 1024 one onto 14 x 14
  // 1.12-1.14 -> 0.98-1.06 ms.
  const bool subsample = conv_is_strided_pointwise(plan);
  const Conv2dPlan p = subsample ? subsampled_plan(plan) : plan;
  if (subsample) pw->subsampled = (p.n * p.c * p.h * p.w + 15) / 16 * 16;
  if ((pw->winograd = winograd_weights_for(p, w, threads, winograd))) return pw;
  const std::int64_t kdim = p.cg * p.kh * p.kw, plane = std::max<std::int64_t>(p.oh * p.ow, 1);
  pw->kdim = kdim, pw->og = p.og, pw->pointwise = conv_is_pointwise(p);
  // A small convolution stays on one thread: a hand-off would cost more than its share. With too
  // few positions for every thread to get a tile, the threads split the output channels instead.
  const std::int64_t nr = sgemm::kNr;
  const bool split = threads > 1 && plane * kdim * p.og * p.groups >= 2 * kGemmPartFlops;
  // The padded input is read when the kernel reads every phase and the phase width wastes at most a
  // quarter of the work.
  const PhaseLayout layout(p);
  const std::int64_t sh = layout.sh, sw = layout.sw, hp = layout.hp, wp = layout.wp;
  const bool every_phase = layout.every_phase;
  // Also turned around, on planes up to 16x16 (32x32 for kernels wider than 1x1): convolutions that
  // read at least 96 values per output and the turned-around product can read in place, and 1x1
  // convolutions that narrow the channels.
  // Each weight panel then streams once while the input, read in place, stays in L2, and no
  // padded width is computed (MobileNetV2's 14x14 projections: 89 -> 62 us for 384 -> 64, 173 ->
  // 141 us for 576 -> 96; ResNet-50's 256 -> 1024 on 14x14: 498 -> 465-493 us at 1 thread, 296 ->
  // 271-275 at 2, its 512 -> 1024 projection 1095 -> 920 us; the 3x32x32 CNN's 32 -> 64 3x3 on
  // 16x16 51 -> 44 us, ResNet's 128 -> 256 stride-2 3x3 onto 14x14 660-720 -> 575-620 us, its
  // 64 -> 128 one onto 28x28 595 -> 557-562 us, 316-366 -> 298-310 at 2 threads; ResNet's 7x7
  // stem onto 112x112 ran 1.15x slower turned around, 1x1 ones on 28x28 within 3 %). Shallower
  // widening 1x1 ones, 64 -> 384 and 24 -> 144, ran 1.2x slower that way at 2 threads, where the
  // threads split the channels.
  const bool pointwise = conv_is_pointwise(p);
  const bool reads_in_place = pointwise || (every_phase && 2 * p.ow >= sgemm::kMr);
  const bool small_plane = (kdim >= 96 && reads_in_place && plane <= (pointwise ? 256 : 1024)) ||
                           (pointwise && plane <= 256 && p.og <= kdim);
  pw->transposed = (plane < 2 * nr || small_plane) && p.og >= nr;
  // Small planes keep to tiles of positions while every thread gets two: a split of the channels
  // would have every thread read the whole im2col matrix, nine times the input for a 3x3 kernel,
  // and half of it from the other core (a 32->64-channel 3x3 convolution onto 16x16 took 82-110 us
  // at 2 threads that way, 58 us by tiles).
  // So do 1x1 convolutions that widen the channels into an output that fits in L2 (the parts share
  // the narrow input): each thread then writes a contiguous range of channels, the planes the
  // depthwise step after it reads on the same core, where a split of the positions had each thread
  // write half of every plane. MobileNetV2 at 2 threads (one process, alternated): its 32 -> 192
  // 1x1 steps onto 28 x 28 took 89-96 -> 44-58 us, its 64 -> 384 ones onto 14 x 14 65-69 -> 42-45,
  // the depthwise steps after them 37-63 -> 24-58; the model 0.95-0.97 of its time,
  // EfficientNet-B0 0.98, ResNet-18 0.98 (its downsampling 1x1 steps), ResNet-50 1.00. Larger
  // outputs keep the positions split: the 16 -> 96 step onto 112 x 112 (4.8 MB) took 362 -> 481 us
  // by channels, each thread reading all of its 0.8 MB input.
  const auto l2 = static_cast<std::int64_t>(Eigen::l2CacheSize());
  const bool widens_into_l2 = pointwise && p.og > kdim && p.og * plane * std::int64_t{sizeof(float)} <= l2;
  pw->split_rows =
      !pw->transposed && split && p.og >= 2 * sgemm::kMr && ((plane + nr - 1) / nr < 2 * threads || widens_into_l2);
  pw->positions = plane;
  // Transposed runs read in place whenever the padded input serves (a tile is part of one output
  // row, so the padded width wastes nothing) and a row holds half a tile's rows at least: a tile of
  // 2 or 4 rows keeps too few sums in flight (MobileNetV2's 1x1 convolutions on 4x4 planes took 22
  // -> 29 us that way at 64x64). A 1x1 convolution's plane is one row: its input is contiguous.
  pw->implicit = !pw->split_rows && !pw->transposed && every_phase && !pw->pointwise && 4 * wp <= 5 * p.ow;
  pw->direct = pw->transposed && reads_in_place;
  pw->gathered = pw->transposed && !pw->direct && every_phase;
  if (pw->implicit || pw->direct || pw->gathered) {
    pw->hp = hp, pw->wp = wp, pw->sh = sh, pw->sw = sw, pw->planes = p.cg * sh * sw;
    if (pw->implicit) pw->positions = p.oh * wp;
    pw->k_offset.resize(static_cast<std::size_t>(kdim));
    for (std::int64_t r = 0; r < kdim; ++r) pw->k_offset[static_cast<std::size_t>(r)] = layout.offset(p, r);
  }
  // Tiles whose X block (depth-blocked by sgemm) stays in half of L2, a whole number of panels;
  // at several threads, enough tiles for each to get one. A product shallower than one depth block
  // keeps its output block there too, so the epilogue's pass after the GEMM reads it from L2: a
  // 16 -> 96-channel 1x1 convolution on 112 x 112 had written 3 MB blocks, and re-read them.
  const std::int64_t panels = (pw->positions + nr - 1) / nr;
  // A paired run deeper than one block keeps its output block there as well, for the depth blocks
  // after the first to add to: ResNet-50's 384-deep pair onto 28 x 28 (its second stage's exit)
  // took 1185-1221 us at 2 threads in tiles of 13 panels (an 850 KB output block), 1029 in tiles
  // of 5 (in-model profiles, two runs against one; 1-thread runs level).
  const bool keeps_output = kdim < sgemm::kDepth || stacked > 0;
  const std::int64_t block_rows = std::min(kdim, sgemm::kDepth) + (keeps_output ? p.og : 0);
  std::int64_t tile_panels = std::max<std::int64_t>(1, l2 / 2 / (block_rows * nr * 4));
  tile_panels = std::min(tile_panels, panels);
  if (pw->transposed) {
    if (split) pw->parts = std::min<std::int64_t>(threads, (p.og + nr - 1) / nr);
  } else if (pw->split_rows) {
    pw->parts = std::min<std::int64_t>(threads, (p.og + sgemm::kMr - 1) / sgemm::kMr);
  } else if (split) {
    // Each thread a range of the panels (part_begin), cut into tiles of at most tile_panels, as
    // many for every thread at an even share (a moved share moves whole panels). Tiles of one
    // width over all of the positions, dealt out whole, had left the parts uneven: ResNet-50's
    // 128 -> 512-channel 1x1 convolutions onto 28 x 28 (25 panels) ran 3 tiles of 5 panels on one
    // thread and 2 on the other.
    const std::int64_t per_thread = (panels + threads - 1) / threads;
    const std::int64_t tiles_per_part = (per_thread + tile_panels - 1) / tile_panels;
    tile_panels = (per_thread + tiles_per_part - 1) / tiles_per_part;
    pw->parts = std::min<std::int64_t>(threads, panels);
  }
  pw->cols = tile_panels * nr;
  // A direct run splits output rows when its padded input outweighs a quarter of its weights and
  // each part gets 7 rows or more: each part then pads only the input rows its band reads (a
  // channel split pads the whole input once per part, half of it written by the other core), and
  // both read all of the weights. ResNet's stride-2 3x3 convolutions onto 28 x 28 and 14 x 14 take
  // bands; onto 7 x 7 their 4.7 MB of weights keep the channel split.
  pw->by_rows = pw->direct && !pw->pointwise && pw->parts > 1 && p.oh >= 7 * pw->parts &&
                p.og * kdim <= 4 * pw->planes * hp * wp;
  // A direct 1x1 run splits its positions when the channel panels do not divide evenly (3 panels
  // on 2 threads had run 2:1), or when it does not widen the channels and each part gets 48
  // positions or more: its parts then read and write the positions their own core did in the
  // steps around it, which split positions too (Winograd's tile ranges, position tiles), and both
  // stream all of the weights. ResNet-50's 14 x 14 blocks at 2 threads: 1024 -> 256 took 357-407
  // us over channel panels and 328-378 over positions, the 3x3 convolution after it 625-739 ->
  // 546-607 us (with Winograd's tile ranges there); 256 -> 1024 with its residual was within the
  // noise then (417-472 -> 438-476 us, when every direct run still wrote one Y^T).
  // 7 x 7 planes keep the channel split, each part then streaming half of their 1-4 MB of weights.
  // So do 1x1 runs that widen the channels: each part then reads the narrow input whole and streams
  // half of the weights, where a range of positions has it stream all of them and write every
  // panel. ResNet-50 at 2 threads, in-model profiles of two builds alternated (medians of six
  // rounds, twice): its 256 -> 1024 steps onto 14 x 14 with their residual took 0.91-0.95 of
  // their time (407-429 -> 379-392 us), the 512 -> 1024 projection 0.94, the 1024 -> 256 ones after
  // them, whose input the other core now wrote half of, 0.94-1.05; the model 0.98-1.00 of its
  // time, MobileNetV2 0.975 and EfficientNet-B0 0.974 (their 96 -> 576 and 112 -> 672 steps
  // onto 14 x 14), ResNet-18 level (1.01, within the noise).
  const std::int64_t og_panels = (p.og + nr - 1) / nr;
  pw->by_positions = pw->direct && pw->pointwise && pw->parts > 1 &&
                     (og_panels % pw->parts != 0 || (plane >= 48 * pw->parts && p.og <= kdim));
  const std::int64_t per_group = pw->group_floats();
  pw->a.resize(static_cast<std::size_t>(p.groups * per_group));
  for (std::int64_t g = 0; g < p.groups; ++g) {
    const float* wg = w + g * p.og * kdim;
    float* dst = pw->a.data() + g * per_group;
    if (!pw->transposed) {
      sgemm::pack_a(wg, kdim, p.og, kdim, dst);
      continue;
    }
    sgemm::pack_b(wg, 1, kdim, kdim, p.og, dst);  // W_g^T [kdim, og] in panels, contiguous per panel
  }
  return pw;
}

/// Rows [y0, y1) of every phase plane of every channel of the padded input for implicit runs
/// ([cg, sh, sw, hp, wp]), and, with the last row, the zeros after the last plane up to
/// pw.padded_copy_floats(). Phase (py, px) row i column j is input (i * sh + py - pad_top, j * sw + px -
/// pad_left), zero outside the input.
inline void pad_input(const Conv2dPlan& p, const PackedConvWeights& pw, const float* xg, float* padded, std::int64_t y0,
                      std::int64_t y1) {
  for (std::int64_t c = 0; c < p.cg; ++c)
    for (std::int64_t py = 0; py < pw.sh; ++py)
      for (std::int64_t px = 0; px < pw.sw; ++px) {
        const std::int64_t shift = px - p.pad_left;
        const ValidRange vx = valid_outputs(pw.wp, pw.sw, shift, p.w);  // the columns inside the input
        float* plane = padded + ((c * pw.sh + py) * pw.sw + px) * pw.hp * pw.wp;
        for (std::int64_t i = y0; i < y1; ++i) {
          float* row = plane + i * pw.wp;
          const std::int64_t iy = i * pw.sh + py - p.pad_top;
          if (iy < 0 || iy >= p.h || vx.begin >= vx.end) {
            std::fill_n(row, pw.wp, 0.0f);
            continue;
          }
          const float* src = xg + (c * p.h + iy) * p.w;
          std::fill_n(row, vx.begin, 0.0f);
          copy_strided(src + vx.begin * pw.sw + shift, pw.sw, vx.end - vx.begin, row + vx.begin);
          std::fill(row + vx.end, row + pw.wp, 0.0f);
        }
      }
  if (y1 == pw.hp) std::fill(padded + pw.planes * pw.hp * pw.wp, padded + pw.padded_copy_floats(), 0.0f);
}

/// X^T of a gathered run ([plane, kdim], packed as sgemm::pack_a lays it out) from the padded
/// input: output position (oy, ox) at depth step k is padded[k_offset[k] + oy * wp + ox], so the
/// positions of one output row lie side by side there, and each block of kMr positions is a few
/// runs of floats per step (a masked load and store each with AVX-512, copy_run otherwise).
/// Through im2col, a row of X at a time and scattered into the blocks, the 2304 x 16 X^T of a
/// 256-channel 3x3 convolution onto 4 x 4 took 115 us; this way 8 us (30 us without AVX-512).
inline void gather_transposed_x(const Conv2dPlan& p, const PackedConvWeights& pw, const float* padded, float* out) {
  constexpr std::int64_t mr = sgemm::kMr;
  const std::int64_t plane = p.oh * p.ow;
  for (std::int64_t b0 = 0; b0 < plane; b0 += mr) {
    const std::int64_t n = std::min(mr, plane - b0);
    // The block's positions as runs along output rows: from src in the phase plane to dst in the block.
    struct Run {
      std::int64_t src, dst, len;
    };
    std::array<Run, mr> runs{};
    int count = 0;
    for (std::int64_t q = b0; q < b0 + n;) {
      const std::int64_t len = std::min(p.ow - q % p.ow, b0 + n - q);
      runs[count++] = {q / p.ow * pw.wp + q % p.ow, q - b0, len};
      q += len;
    }
    float* dst = out + b0 * pw.kdim;
#if defined(__AVX512F__)
    std::array<__mmask16, mr> masks{};
    for (int i = 0; i < count; ++i) masks[i] = static_cast<__mmask16>((1u << runs[i].len) - 1);
    const auto past = static_cast<__mmask16>(((1u << mr) - 1) & ~((1u << n) - 1));  // rows past the plane
    for (std::int64_t k = 0; k < pw.kdim; ++k, dst += mr) {
      const float* src = padded + pw.k_offset[static_cast<std::size_t>(k)];
      for (int i = 0; i < count; ++i)
        _mm512_mask_storeu_ps(dst + runs[i].dst, masks[i], _mm512_maskz_loadu_ps(masks[i], src + runs[i].src));
      if (past) _mm512_mask_storeu_ps(dst, past, _mm512_setzero_ps());
    }
#else
    for (std::int64_t k = 0; k < pw.kdim; ++k, dst += mr) {
      const float* src = padded + pw.k_offset[static_cast<std::size_t>(k)];
      for (int i = 0; i < count; ++i) copy_run(src + runs[i].src, runs[i].len, dst + runs[i].dst);
      std::fill(dst + n, dst + mr, 0.0f);
    }
#endif
  }
}

/// GEMM columns [i0, i0 + n) (output positions, over the padded width when implicit) and output
/// channels [r0, r1) of one group of one image: yg = epilogue(W_g xg) over that block. `tile` holds
/// pw.tile_floats() and `panel` sgemm::kPanelFloats. A paired run's X is xg's rows stacked on
/// `second`'s (pw.stacked).
inline void packed_conv_block(const Conv2dPlan& p, const PackedConvWeights& pw, const float* wg, const float* xg,
                              const float* padded, float* yg, std::int64_t i0, std::int64_t n, std::int64_t r0,
                              std::int64_t r1, float* tile, float* panel, const Epilogue& epi,
                              const float* second = nullptr) {
  const std::int64_t plane = p.oh * p.ow, kdim = pw.kdim;
  std::int64_t first = i0, last = i0 + n;  // the output positions the block holds
  // The epilogue runs as the GEMM stores its tiles when it can (sgemm::Finish), else in a pass after.
  std::optional<sgemm::Finish> finish = epi.empty() ? std::nullopt : finish_of(epi, BiasAlong::rows);
  if (pw.implicit) {
    // Whole panels into the tile (the padded input has slack for them), then the positions inside
    // the output width copied out; the rest read the padding's far side. The tile is laid out over
    // the padded width, so a residual (laid out as the output) is added after the copy.
    if (epi.residual) finish.reset();
    sgemm::multiply(wg, kdim, sgemm::OffsetRows{padded + i0, pw.k_offset.data()}, n, tile, pw.cols, r0, r1, true,
                    panel, false, finish ? &*finish : nullptr);
    const auto valid = [&](std::int64_t q) { return q / pw.wp * p.ow + std::min(q % pw.wp, p.ow); };
    first = valid(i0), last = valid(i0 + n);
    for (std::int64_t oy = i0 / pw.wp; oy * pw.wp < i0 + n; ++oy) {
      const std::int64_t a = std::max(i0 - oy * pw.wp, std::int64_t{0}), b = std::min(i0 + n - oy * pw.wp, p.ow);
      if (a >= b) continue;
      for (std::int64_t o = r0; o < r1; ++o)
        std::copy_n(tile + o * pw.cols + oy * pw.wp + a - i0, b - a, yg + o * plane + oy * p.ow + a);
    }
  } else {
    // X is the input itself ([cg, plane]) for a 1x1 convolution, else the im2col tile.
    if (finish) *finish = finish->at(0, i0, plane);
    const sgemm::Finish* fin = finish ? &*finish : nullptr;
    if (second) {
      const sgemm::StackedRows x{xg + i0, second + i0, pw.stacked, plane};
      sgemm::multiply(wg, kdim, x, n, yg + i0, plane, r0, r1, false, panel, false, fin);
    } else {
      const sgemm::StridedRows x =
          conv_is_pointwise(p) ? sgemm::StridedRows{xg + i0, plane} : sgemm::StridedRows{tile, pw.cols};
      sgemm::multiply(wg, kdim, x, n, yg + i0, plane, r0, r1, false, panel, false, fin);
    }
  }
  if (!epi.empty() && !finish) apply_epilogue(epi, BiasAlong::rows, yg, plane, r0, r1, first, last);
}

/// The parts a run over `pw` splits its output positions into, each a range of every output plane
/// (Winograd's tile ranges, GEMM position tiles); 1 when its parts split output channels instead,
/// or it runs whole on one thread.
inline std::int64_t conv_position_parts(const PackedConvWeights& pw) noexcept {
  if (pw.winograd) return pw.winograd->parts;
  return pw.by_rows || pw.by_positions || (!pw.split_rows && !pw.transposed) ? pw.parts : 1;
}

/// `pw` with max pool `pool` fused after it, or null where the fused run does not apply: an
/// implicit run (one group, not subsampled) whose output the pool reads whole, a pool that
/// max_pool_s2_kernel takes. A band holds up to 8 pool rows, fewer where its tile of convolution
/// rows would fill more than half of L2 (ResNet's stem: 17 rows of 64 channels over a padded width
/// of 115, 490 KB).
inline std::shared_ptr<const PackedConvWeights> with_max_pool(const Conv2dPlan& p, const PackedConvWeights& pw,
                                                              const Pool2dPlan& pool) {
  if (!pw.implicit || pw.winograd || pw.subsampled || pw.pool_band || p.groups != 1 ||
      max_pool_s2_kernel(pool) == 0 || pool.planes != p.n * p.o || pool.h != p.oh || pool.w != p.ow || pool.oh < 1)
    return nullptr;
  auto fused = std::make_shared<PackedConvWeights>(pw);
  const auto row_bytes = static_cast<std::int64_t>(sizeof(float)) * p.og * pw.wp;
  const auto l2 = static_cast<std::int64_t>(Eigen::l2CacheSize());
  fused->pool = pool;
  fused->pool_band = std::clamp<std::int64_t>((l2 / 2 / row_bytes - 1) / 2, 1, 8);
  // The rows a band holds (2 per pool row, and the one before for a 3x3 window), and the whole
  // panels the GEMM stores past them.
  const std::int64_t held = 2 * fused->pool_band + 1;
  fused->pool_ldc = (held * pw.wp + sgemm::kNr + 15) / 16 * 16;
  fused->parts = std::min(pw.parts, pool.oh);
  return fused;
}

/// An implicit run with its max pool fused (pw.pool_band set): part q takes a range of the pool's
/// output rows and, band by band, computes the convolution rows they read into its tile (channel o's rows
/// at o * pw.pool_ldc, over the padded width, the epilogue applied as the GEMM stores them) and
/// pools them from there into `y`; the convolution's output never goes to memory. A 3x3 window's
/// first row is the last one of the band before, moved up rather than computed again; a part's
/// first band computes it. Every output is the unfused pair's: the GEMM sums each position's
/// depth in order, and the pool folds the same values.
inline void pooled_conv2d(const Conv2dPlan& p, const PackedConvWeights& pw, const float* x, float* y, float* scratch,
                          const PartScratch& own, const ThreadPool* pool, const Epilogue& epi) {
  const Pool2dPlan& pp = pw.pool;
  const std::int64_t plane_in = p.h * p.w, pool_plane = pp.oh * pp.ow;
  float* padded = scratch;
  const std::optional<sgemm::Finish> finish = epi.empty() ? std::nullopt : finish_of(epi, BiasAlong::rows);
  // The conv rows pool rows [b0, b1) read.
  const auto first_read = [&](std::int64_t b0) { return std::max<std::int64_t>(0, b0 * 2 - pp.pad_top); };
  const auto end_read = [&](std::int64_t b1) { return std::min(p.oh, (b1 - 1) * 2 - pp.pad_top + pp.kh); };
  for (std::int64_t n = 0; n < p.n; ++n) {
    const float* xn = x + n * p.c * plane_in;
    run_parts(pool, pw.parts, [&](std::int64_t q) {
      pad_input(p, pw, xn, padded, part_begin(pw.hp, q, pw.parts), part_begin(pw.hp, q + 1, pw.parts));
    });
    run_parts(pool, pw.parts, [&](std::int64_t q) {
      float* tile = own.floats(q);
      const std::int64_t py0 = part_begin(pp.oh, q, pw.parts), py1 = part_begin(pp.oh, q + 1, pw.parts);
      std::int64_t row0 = 0, held_end = 0;  // the tile holds conv rows [row0, held_end)
      for (std::int64_t b0 = py0; b0 < py1; b0 += pw.pool_band) {
        const std::int64_t b1 = std::min(py1, b0 + pw.pool_band);
        const std::int64_t need0 = first_read(b0), need1 = end_read(b1);
        if (b0 == py0 || held_end <= need0) {
          row0 = held_end = need0;
        } else {
          // The rows still needed move to the top of the tile, each channel's.
          const std::int64_t keep = held_end - need0;
          for (std::int64_t o = 0; o < p.og; ++o) {
            float* rows = tile + o * pw.pool_ldc;
            std::copy_n(rows + (need0 - row0) * pw.wp, keep * pw.wp, rows);
          }
          row0 = need0;
        }
        if (need1 > held_end) {
          sgemm::multiply(pw.group(0), pw.kdim, sgemm::OffsetRows{padded + held_end * pw.wp, pw.k_offset.data()},
                          (need1 - held_end) * pw.wp, tile + (held_end - row0) * pw.wp, pw.pool_ldc, 0, p.og, true,
                          nullptr, false, finish ? &*finish : nullptr);
          held_end = need1;
        }
        for (std::int64_t o = 0; o < p.og; ++o) {
          float* out = y + (n * p.o + o) * pool_plane;
          if (pp.kh == 2)
            max_pool_s2_rows<2>(pp, tile + o * pw.pool_ldc, pw.wp, row0, out, b0, b1);
          else
            max_pool_s2_rows<3>(pp, tile + o * pw.pool_ldc, pw.wp, row0, out, b0, b1);
        }
      }
    });
  }
}

/// conv2d over weights packed at create, `x` already subsampled when pw.subsampled is set (as the
/// plan `p` then says). `scratch` holds pw.scratch_bytes() less the subsampled input, `own`
/// pw.part_count() regions of pw.part_bytes(). A paired run (pw.stacked, one group) reads its input
/// channels from `x` ([n, stacked, plane]) and `second` ([n, cg - stacked, plane]). `weights`, when
/// set, replaces pw.a (laid out as it is): a 1x1 run's weights scaled for this run (scaled_conv2d_kernel).
inline void packed_conv2d_over(const Conv2dPlan& p, const PackedConvWeights& pw, const float* x, float* y,
                               float* scratch, const PartScratch& own, const ThreadPool* pool, const Epilogue& epi,
                               const float* second = nullptr, const float* weights = nullptr) {
  if (pw.winograd) return winograd_conv2d(p, *pw.winograd, x, y, own, pool, epi);
  if (pw.pool_band) return pooled_conv2d(p, pw, x, y, scratch, own, pool, epi);
  const bool pointwise = pw.pointwise;
  const std::int64_t plane_in = p.h * p.w, plane = p.oh * p.ow;
  const std::int64_t mr = sgemm::kMr;
  // Runs over tiles of positions: part q takes the GEMM panels of positions from
  // part_begin(position_panels, q) to the next part's first, in tiles of at most pw.cols.
  const std::int64_t position_panels = (pw.positions + sgemm::kNr - 1) / sgemm::kNr;
  const auto first_position = [&](std::int64_t part) {
    return std::min(pw.positions, part_begin(position_panels, part, pw.parts) * sgemm::kNr);
  };
  float* padded = scratch;
  float* shared = padded + pw.padded_floats();
  float* packed_x = shared + pw.shared_floats();
  float* yt = packed_x + pw.packed_x_floats();
  for (std::int64_t n = 0; n < p.n; ++n) {
    for (std::int64_t g = 0; g < p.groups; ++g) {
      const float* xg = second ? x + n * pw.stacked * plane_in : x + (n * p.c + g * p.cg) * plane_in;
      const float* xs2 = second ? second + n * (p.c - pw.stacked) * plane_in : nullptr;
      const float* wg = weights ? weights + g * pw.group_floats() : pw.group(g);
      float* yg = y + (n * p.o + g * p.og) * plane;
      if (pw.implicit) {
        // Part q pads the rows from the first its tiles read to the first the next part's read, so
        // it reads the input rows its own core wrote when a convolution wrote them (position
        // tiles); after a kernel that splits channels, half of every band comes from the other core.
        run_parts(pool, pw.parts, [&](std::int64_t q) {
          const auto first_row = [&](std::int64_t part) {
            return part == pw.parts ? pw.hp : first_position(part) / pw.wp;
          };
          pad_input(p, pw, xg, padded, first_row(q), first_row(q + 1));
        });
      }
      const Epilogue eg{epi.bias ? epi.bias + g * p.og : nullptr, epi.chain,
                        epi.residual ? epi.residual + (n * p.o + g * p.og) * plane : nullptr};
      const std::int64_t panels = (p.og + sgemm::kNr - 1) / sgemm::kNr;
      // Output channels [j0, j1) at positions [q0, q1) of a transposed run: the block of Y^T at
      // `src` (row stride ld; its rows positions from q0, its columns channels from j0) into the
      // output, and the epilogue, in the transpose when it can (sgemm::Finish), else in a pass after.
      const std::optional<sgemm::Finish> finish = eg.empty() ? std::nullopt : finish_of(eg, BiasAlong::rows);
      const auto store_block = [&](const float* src, std::int64_t ld, std::int64_t j0, std::int64_t j1, std::int64_t q0,
                                   std::int64_t q1) {
        const std::optional<sgemm::Finish> at = finish ? std::optional(finish->at(j0, q0, plane)) : std::nullopt;
        transpose_matrix(src, ld, q1 - q0, j1 - j0, yg + j0 * plane + q0, plane, at ? &*at : nullptr);
        if (!eg.empty() && !finish) apply_epilogue(eg, BiasAlong::rows, yg, plane, j0, j1, q0, q1);
      };
      if (pw.direct) {
        // Y^T[plane, og] = X^T W_g^T with X^T read in place: the rows of a tile are the positions
        // [ox, ox + kMr) of one output row, at depth step k the padded input (or the input) at
        // k_offset[k] + oy * wp + ox. No packing; each panel of weights streamed once from the
        // packed weights, depth block by depth block, over every row of the part.
        // A 1x1 convolution reads its plane as one row (the input is contiguous); others row by row.
        const std::int64_t rows = pointwise ? 1 : p.oh, row_len = pointwise ? plane : p.ow;
        // The parts take channel panels, or a range of positions each over every panel: a 1x1
        // convolution's range of its one row when pw.by_positions, other convolutions' bands of
        // rows when pw.by_rows.
        const std::int64_t all_tiles = (row_len + mr - 1) / mr;
        const auto run_part = [&](std::int64_t part) {
          const float* base = xg;
          std::int64_t jp0 = 0, jp1 = panels, x0 = 0, x1 = row_len, oy0 = 0, oy1 = rows;
          if (pw.by_positions) {
            x0 = part_begin(all_tiles, part, pw.parts) * mr;
            x1 = std::min(row_len, part_begin(all_tiles, part + 1, pw.parts) * mr);
          } else if (pw.by_rows) {
            oy0 = part_begin(rows, part, pw.parts), oy1 = part_begin(rows, part + 1, pw.parts);
          } else {
            jp0 = part_begin(panels, part, pw.parts), jp1 = part_begin(panels, part + 1, pw.parts);
          }
          if (jp0 >= jp1 || x0 >= x1 || oy0 >= oy1) return;
          if (!pointwise) {
            // Each part pads a copy of its own: of the rows its band reads, or of all of the
            // padded input when every part reads all of it (see gathered runs below): 64-channel
            // 3x3 convolutions onto 16 x 16 took 105 us at 2 threads over one copy padded in bands
            // of rows by both, 65 us this way (128 channels onto 8 x 8: 78 -> 62 us).
            float* padded_own = own.floats(part);
            pad_input(p, pw, xg, padded_own, oy0, oy1 + pw.hp - p.oh);
            base = padded_own;
          }
          // The part's positions in tiles of equal rows: a last tile of one to three rows keeps too few
          // sums in flight for the FMA units (49 = 4 x 12 + 1 took 52 tile rows' time, 5 x ~10 takes 49).
          const std::int64_t row_tiles = (x1 - x0 + mr - 1) / mr;
          const sgemm::PanelRows wt{wg, pw.kdim};
          // Each panel's sums over the part's positions [q0, q1) go to a block of the part's own,
          // [positions, kNr], then into the output through the epilogue once its last depth block
          // is done. One Y^T [positions, og] for every panel had put each tile row on a page of its
          // own for 1024 channels (a row stride of 4 KB), and the part writing the second half of
          // ResNet-50's 256 -> 1024-channel 1x1 convolution on 14 x 14 had taken 1.3x the first's
          // time for the same work (by positions, in turn on one core).
          const std::int64_t q0 = oy0 * row_len + x0, q1 = (oy1 - 1) * row_len + x1;
          float* sums = own.floats(part) + (pointwise ? 0 : pw.padded_copy_floats());
          for (std::int64_t jp = jp0; jp < jp1; ++jp) {
            const std::int64_t j = jp * sgemm::kNr, cols = std::min(sgemm::kNr, p.og - j);
            for (std::int64_t k0 = 0; k0 < pw.kdim; k0 += sgemm::kDepth) {
              const std::int64_t kc = std::min(sgemm::kDepth, pw.kdim - k0);
              // The next block of weights (the panels are one stream, in this loop's order) asked for
              // a share per tile while this one computes: cold weights, as a model streams them from
              // memory, had made ResNet-50's 1x1 convolutions on 7 x 7 1.4x slower than warm ones.
              const float* next = wt.at(k0 + kc, j);
              const std::int64_t next_bytes = (wg + pw.group_floats() - next) * 4;
              const std::int64_t part_tiles = (oy1 - oy0) * row_tiles;
              const std::int64_t share = (kc * sgemm::kNr * 4 / 64 + part_tiles - 1) / part_tiles;
              std::int64_t t = 0;
              for (std::int64_t oy = oy0; oy < oy1; ++oy)
                for (std::int64_t i = 0; i < row_tiles; ++i, ++t) {
                  const std::int64_t a0 = x0 + (x1 - x0) * i / row_tiles, a1 = x0 + (x1 - x0) * (i + 1) / row_tiles;
                  float* c = sums + (oy * row_len + a0 - q0) * sgemm::kNr;
                  const sgemm::Prefetch pf = sgemm::Prefetch::part(next, next_bytes, t * share, share);
                  if (xs2)
                    sgemm::exact_rows(sgemm::StackedBlock{xg + a0, xs2 + a0, pw.stacked, plane}, wt, j, k0, kc, c,
                                      sgemm::kNr, k0 > 0, a1 - a0, cols, pf);
                  else
                    sgemm::exact_rows(sgemm::OffsetBlock{base + oy * pw.wp + a0, pw.k_offset.data()}, wt, j, k0, kc, c,
                                      sgemm::kNr, k0 > 0, a1 - a0, cols, pf);
                }
            }
            store_block(sums, sgemm::kNr, j, j + cols, q0, q1);
          }
        };
        run_parts(pool, pw.parts, run_part);
        continue;
      }
      if (pw.transposed) {
        // Y^T[plane, og] = X^T W_g^T with X^T packed; each part a range of channel panels, which it
        // then transposes into the output and finishes with the epilogue.
        const auto run_part = [&](std::int64_t part, const float* xt) {
          const std::int64_t j0 = part_begin(panels, part, pw.parts) * sgemm::kNr;
          const std::int64_t j1 = std::min(p.og, part_begin(panels, part + 1, pw.parts) * sgemm::kNr);
          if (j0 >= j1) return;
          sgemm::multiply(xt, pw.kdim, sgemm::PanelRows{wg + j0 * pw.kdim, pw.kdim}, j1 - j0, yt + j0, p.og, 0, plane,
                          false, nullptr, true);
          store_block(yt + j0, p.og, j0, j1, 0, plane);
        };
        if (pw.gathered) {
          // Every part pads the input and gathers all of X^T into copies of its own, then runs: a
          // few microseconds of work done twice, where sharing one copy made each thread read what
          // the other core wrote (the two vCPUs of the machine measured on share no L3): 256-channel
          // 3x3 convolutions onto 4 x 4 took 101 us at 2 threads with one X^T, 141 with one padded
          // input as well, and 77 with copies of both (128 at 1 thread).
          run_parts(pool, pw.parts, [&](std::int64_t part) {
            float* padded_own = own.floats(part);
            float* xt = padded_own + pw.padded_copy_floats();
            pad_input(p, pw, xg, padded_own, 0, pw.hp);
            gather_transposed_x(p, pw, padded_own, xt);
            run_part(part, xt);
          });
          continue;
        }
        // Otherwise X^T is im2col'd once, row by row straight into sgemm's A layout, the threads
        // splitting the rows.
        const auto pack_x = [&](std::int64_t k0, std::int64_t k1) {
          alignas(64) float row[2 * sgemm::kNr];  // transposed planes hold fewer positions
          for (std::int64_t k = k0; k < k1; ++k) {
            const float* src = xg + k * plane;
            if (!pointwise) {
              im2col(p, xg, row, k, k + 1, 0, plane);
              src = row;
            }
            sgemm::pack_a_row(src, plane, pw.kdim, k, packed_x);
          }
        };
        if (pw.parts > 1)
          parallel_ranges(pool, pw.kdim, work_grain(plane), pack_x);
        else
          pack_x(0, pw.kdim);
        run_parts(pool, pw.parts, [&](std::int64_t part) { run_part(part, packed_x); });
        continue;
      }
      if (pw.split_rows) {
        // Few positions: one shared X (the input itself for 1x1, else its im2col matrix
        // [kdim, plane], which the threads build by depth rows once each gets 2^16 floats), and each
        // part a range of output-channel blocks over all of it.
        if (!pointwise)
          parallel_ranges(
              pool, pw.kdim, work_grain(plane, 1, std::int64_t{1} << 16),
              [&](std::int64_t k0, std::int64_t k1) { im2col(p, xg, shared + k0 * plane, k0, k1, 0, plane); });
        const std::int64_t blocks = (p.og + mr - 1) / mr;
        const auto run_part = [&](std::int64_t part) {
          const std::int64_t r0 = part_begin(blocks, part, pw.parts) * mr;
          const std::int64_t r1 = std::min(p.og, part_begin(blocks, part + 1, pw.parts) * mr);
          if (r0 >= r1) return;
          const float* xs = pointwise ? xg : shared;
          const sgemm::Finish* fin = finish ? &*finish : nullptr;
          if (xs2)
            sgemm::multiply(wg, pw.kdim, sgemm::StackedRows{xg, xs2, pw.stacked, plane}, plane, yg, plane, r0, r1,
                            false, own.floats(part), false, fin);
          else
            sgemm::multiply(wg, pw.kdim, sgemm::StridedRows{xs, plane}, plane, yg, plane, r0, r1, false,
                            own.floats(part), false, fin);
          if (!eg.empty() && !finish) apply_epilogue(eg, BiasAlong::rows, yg, plane, r0, r1, 0, plane);
        };
        run_parts(pool, pw.parts, run_part);
        continue;
      }
      const auto run_part = [&](std::int64_t part) {
        float* tile = own.floats(part);
        float* panel = tile + pw.tile_floats();
        const std::int64_t end = first_position(part + 1);
        for (std::int64_t i0 = first_position(part); i0 < end; i0 += pw.cols) {
          const std::int64_t cols = std::min(pw.cols, end - i0);
          if (!pointwise && !pw.implicit) im2col(p, xg, tile, 0, pw.kdim, i0, i0 + cols, pw.cols);
          packed_conv_block(p, pw, wg, xg, padded, yg, i0, cols, 0, p.og, tile, panel, eg, xs2);
        }
      };
      run_parts(pool, pw.parts, run_part);
    }
  }
}

/// The input of a strided 1x1 convolution `p` (conv_is_strided_pointwise) at its stride, into `out`
/// ([n, c, oh, ow]), the threads splitting the planes' rows.
inline void subsample_input(const Conv2dPlan& p, const float* x, float* out, const ThreadPool* pool) {
  const std::int64_t rows = p.n * p.c * p.oh;
  parallel_ranges(pool, rows, work_grain(p.ow), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t plane = r / p.oh, oy = r % p.oh;
      copy_strided(x + (plane * p.h + oy * p.stride_h) * p.w, p.stride_w, p.ow, out + r * p.ow);
    }
  });
}

/// conv2d over weights packed at create. `scratch` holds pw.scratch_bytes(), `own` pw.part_count()
/// regions of pw.part_bytes().
inline void packed_conv2d(const Conv2dPlan& p, const PackedConvWeights& pw, const float* x, float* y, float* scratch,
                          const PartScratch& own, const ThreadPool* pool, const Epilogue& epi) {
  if (pw.subsampled == 0) return packed_conv2d_over(p, pw, x, y, scratch, own, pool, epi);
  subsample_input(p, x, scratch, pool);
  packed_conv2d_over(subsampled_plan(p), pw, scratch, y, scratch + pw.subsampled, own, pool, epi);
}

template <typename T>
Status conv2d_kernel(const Kernel& kernel, const KernelArgs& args) {
  const auto& p = kernel.as<Conv2dPlan>();
  const float* x = in_ptr<float>(args, 0);
  const float* w = in_ptr<float>(args, 1);
  float* y = out_ptr<float>(args);
  Epilogue epi;
  if (p.has_bias) epi.bias = in_ptr<float>(args, 2);
  if (args.epilogue) epi.chain = args.epilogue->chain;
  // A residual add is fused only into convolutions over packed weights (ProgramBuilder::fuse_residual).
  if (args.epilogue) epi.residual = args.packed ? args.epilogue->residual : nullptr;
  const std::int64_t plane_in = p.h * p.w, plane_out = p.oh * p.ow, kdim = p.cg * p.kh * p.kw;

  if (conv_is_depthwise(p)) {
    // A clamping chain (ReLU, ReLU6) is applied as the lanes and rows paths store their outputs
    // (15-25 % of a MobileNetV2 depthwise layer as a pass of its own); other chains, and every
    // chain of the plane-by-plane path, in a pass after. SiLU stays a pass here: with it inside the
    // kernels (inline, then out of line after each block of rows) their ReLU6 runs read 20-50 %
    // slower, but the VM swung as much between runs of one binary then, so that is not settled.
    std::optional<sgemm::Finish> fused = finish_of(Epilogue{nullptr, epi.chain, nullptr}, BiasAlong::rows);
    if (fused && fused->silu) fused.reset();
    const Clamp clamp = fused ? Clamp{fused->lo, fused->hi} : Clamp{};
    // Applies the fused activations over planes [from, to) of the output.
    const auto activate = [&](std::int64_t from, std::int64_t to, bool clamped) {
      if (!epi.chain.empty() && !clamped)
        unary_chain(epi.chain, y + from * plane_out, y + from * plane_out, (to - from) * plane_out);
    };
    if (depthwise_by_lanes(p)) {
      constexpr std::int64_t L = DepthwiseLanes::kLanes;
      const std::int64_t groups = (p.c + L - 1) / L;  // per image
      parallel_ranges(
          args.pool, p.n * groups, work_grain(L * plane_out * p.kh * p.kw), [&](std::int64_t b, std::int64_t e) {
            for (std::int64_t i = b; i < e; ++i) {
              const std::int64_t n = i / groups, c0 = i % groups * L, lanes = std::min(L, p.c - c0);
              const float* bias = epi.bias ? epi.bias + c0 : nullptr;
              const std::int64_t first = n * p.c + c0;
              if (lanes == L)
                depthwise_lanes<true>(p, x + first * plane_in, w + c0 * p.kh * p.kw, bias, clamp, L,
                                      y + first * plane_out);
              else
                depthwise_lanes<false>(p, x + first * plane_in, w + c0 * p.kh * p.kw, bias, clamp, lanes,
                                       y + first * plane_out);
              activate(first, first + lanes, fused.has_value());
            }
          });
      return {};
    }
    const TapColumns cols(p.kw, p.dilation_w, p.pad_left, p.stride_w, p.ow, p.w);
    const bool rows = depthwise_by_rows(p);  // else row by row through memory (planes too large)
    const std::int64_t total = p.n * p.c;
    const std::int64_t parts = part_count(args.pool, total, work_grain(plane_out * p.kh * p.kw, 4));
    // Part q pads its planes in its own region (ProgramBuilder::plan_depthwise_parts), or in slice q
    // of the scratch (sized for the threads by conv_scratch_bytes) where the caller has none.
    const auto padded_of = [&](std::int64_t part) {
      float* padded = args.parts.base ? args.parts.floats(part)
                                      : reinterpret_cast<float*>(args.scratch) + part * depthwise_rows_floats(p);
      std::fill_n(padded, DepthwiseRows::floats(p), 0.0f);  // the padding, for every plane
      return padded;
    };
    // Whole planes split over the threads (the split rule above run_parts).
    run_parts(args.pool, parts, [&](std::int64_t part) {
      const std::int64_t b = part_begin(total, part, parts), e = part_begin(total, part + 1, parts);
      // The fused activations run over a few planes at a time (small planes are a few floats).
      std::int64_t pending = b;
      float* padded = rows && depthwise_padded(p) ? padded_of(part) : nullptr;
      for (std::int64_t i = b; i < e; ++i) {
        const std::int64_t ch = i % p.c;
        const float bias = epi.bias ? epi.bias[ch] : 0.0f;
        if (rows)
          depthwise_rows(p, x + i * plane_in, w + ch * p.kh * p.kw, bias, clamp, y + i * plane_out, padded);
        else
          depthwise_plane(p, cols, x + i * plane_in, w + ch * p.kh * p.kw, bias, y + i * plane_out);
        if ((i + 1 - pending) * plane_out >= 4096 || i + 1 == e) {
          activate(pending, i + 1, rows && fused);
          pending = i + 1;
        }
      }
    });
    return {};
  }
  if (args.packed) {
    packed_conv2d(p, *static_cast<const PackedConvWeights*>(args.packed), x, y, reinterpret_cast<float*>(args.scratch),
                  args.parts, args.pool, epi);
    return {};
  }
  const std::int64_t threads = args.pool ? args.pool->threads() : 1;
  const std::int64_t tile = conv_tile(p, threads), tiles = (plane_out + tile - 1) / tile;
  for (std::int64_t n = 0; n < p.n; ++n) {
    for (std::int64_t g = 0; g < p.groups; ++g) {
      const float* xg = x + (n * p.c + g * p.cg) * plane_in;
      const float* wg = w + g * p.og * kdim;
      float* yg = y + (n * p.o + g * p.og) * plane_out;
      const Epilogue eg{epi.bias ? epi.bias + g * p.og : nullptr, epi.chain};
      if (conv_is_pointwise(p)) {
        gemm(wg, xg, yg, p.og, kdim, plane_out, plane_out, args.pool, &eg, BiasAlong::rows);
        continue;
      }
      // Each tile of output positions: im2col into its own scratch, then a GEMM into its columns.
      const bool by_tiles = tiles > 1;
      const std::int64_t parts = std::min(tiles, threads);
      const auto run_part = [&](std::int64_t part) {
        float* col = reinterpret_cast<float*>(args.scratch) + part * kdim * tile;
        for (std::int64_t t = part_begin(tiles, part, parts); t < part_begin(tiles, part + 1, parts); ++t) {
          const std::int64_t p0 = t * tile, p1 = std::min(plane_out, p0 + tile);
          im2col(p, xg, col, 0, kdim, p0, p1);
          gemm(wg, col, yg + p0, p.og, kdim, p1 - p0, plane_out, by_tiles ? nullptr : args.pool, &eg, BiasAlong::rows);
        }
      };
      run_parts(args.pool, parts, run_part);
    }
  }
  return {};
}

/// A squeeze-and-excitation's gate folded into the 1x1 convolution after it: conv(x * s) with s one
/// scale per input channel is conv(x) over the weights scaled per input channel, W'[o][c] =
/// W[o][c] * s[c]. Scaling the weights touches o * c floats where the product x * s reads and
/// writes c * plane (ProgramBuilder::find_channel_scales takes convolutions with 4 * o <= plane).
/// Depth step k of a 1x1 convolution's packed weights is input channel k, in pack_a's blocks of kMr
/// rows or pack_b's panels of kNr columns ([depth][width] each); `out` holds pw.a.size() floats.
inline void scale_packed_depth(const PackedConvWeights& pw, const float* s, float* out) {
  const std::int64_t width = pw.transposed ? sgemm::kNr : sgemm::kMr, block = width * pw.kdim;
  const float* src = pw.a.data();
  const auto total = static_cast<std::int64_t>(pw.a.size());
  for (std::int64_t b = 0; b < total; b += block)
    for (std::int64_t k = 0; k < pw.kdim; ++k) {
      const float scale = s[k];
      const std::int64_t at = b + k * width;
      for (std::int64_t r = 0; r < width; ++r) out[at + r] = src[at + r] * scale;
    }
}

/// Floats of the scaled weights at the front of scaled_conv2d_kernel's scratch (64-byte multiple).
inline std::int64_t scaled_weights_floats(const PackedConvWeights& pw) noexcept {
  return (static_cast<std::int64_t>(pw.a.size()) + 15) / 16 * 16;
}

/// conv2d(x * s) for a 1x1 f32 convolution over packed weights (one group, stride 1, no padding):
/// inputs x, the weights, the bias when the plan has one, then s (c floats, one per input channel,
/// the same for every image). The weights are scaled into the scratch, then the packed run reads them
/// in place of pw.a; its epilogue (bias, residual, chain) is the unscaled convolution's.
inline Status scaled_conv2d_kernel(const Kernel& kernel, const KernelArgs& args) {
  const auto& p = kernel.as<Conv2dPlan>();
  const auto& pw = *static_cast<const PackedConvWeights*>(args.packed);
  float* scaled = reinterpret_cast<float*>(args.scratch);
  scale_packed_depth(pw, in_ptr<float>(args, p.has_bias ? 3 : 2), scaled);
  Epilogue epi;
  if (p.has_bias) epi.bias = in_ptr<float>(args, 2);
  if (args.epilogue) epi.chain = args.epilogue->chain, epi.residual = args.epilogue->residual;
  packed_conv2d_over(p, pw, in_ptr<float>(args, 0), out_ptr<float>(args), scaled + scaled_weights_floats(pw),
                     args.parts, args.pool, epi, nullptr, scaled);
  return {};
}

template <OpCode Op, typename T>
Status pool2d_kernel(const Kernel& kernel, const KernelArgs& args) {
  const auto& p = kernel.as<Pool2dPlan>();
  const float* x = in_ptr<float>(args, 0);
  float* y = out_ptr<float>(args);
  constexpr bool is_max = Op == OpCode::MaxPool2d;
  // Row by row, like depthwise_plane: every kernel column folds a contiguous run of a row into the
  // output row (stride-2 rows split into even and odd columns first). Every window holds at least
  // one input element (the checker requires pads < kernel).
  const auto fold = [](float acc, float v) {
    if constexpr (is_max)
      return (v > acc || v != v) ? v : acc;  // NaN wins, as in NumPy
    else
      return acc + v;
  };
  const TapColumns cols(p.kw, 1, p.pad_left, p.stride_w, p.ow, p.w);
  // Planes [b, e) of the output. Rows up to kMaxSplitRow wide first fold the window's
  // input rows into one (a vectorised pass over contiguous floats), then fold its kernel columns
  // once, from the even and odd halves for stride 2; wider rows fold every tap of every row.
  const int s2_kernel = is_max ? max_pool_s2_kernel(p) : 0;
  const auto pool_planes = [&](std::int64_t b, std::int64_t e) {
    if (s2_kernel) {
      for (std::int64_t plane = b; plane < e; ++plane) {
        const float* in = x + plane * p.h * p.w;
        float* out = y + plane * p.oh * p.ow;
        if (s2_kernel == 2)
          max_pool_s2_rows<2>(p, in, p.w, 0, out, 0, p.oh);
        else
          max_pool_s2_rows<3>(p, in, p.w, 0, out, 0, p.oh);
      }
      return;
    }
    float folded[kMaxSplitRow], split[kMaxSplitRow];
    const bool fold_rows = p.w <= kMaxSplitRow;
    const bool splits = p.stride_w == 2 && p.w <= kMaxSplitRow;
    const auto fold_columns = [&](const float* row, float* dst) {
      const float* src = row;
      if (splits) {
        split_row(row, p.w, split);
        src = split;
      }
      for (std::int64_t kx = 0; kx < p.kw; ++kx) {
        const std::int64_t shift = cols.shift(kx);
        const ValidRange vx = cols.valid(kx);
        if (p.stride_w == 1) {
          for (std::int64_t ox = vx.begin; ox < vx.end; ++ox) dst[ox] = fold(dst[ox], src[ox + shift]);
        } else if (splits) {
          const std::int64_t at = split_offset(shift, p.w);
          for (std::int64_t ox = vx.begin; ox < vx.end; ++ox) dst[ox] = fold(dst[ox], src[at + ox]);
        } else {
          for (std::int64_t ox = vx.begin; ox < vx.end; ++ox) dst[ox] = fold(dst[ox], src[ox * p.stride_w + shift]);
        }
      }
    };
    for (std::int64_t plane = b; plane < e; ++plane) {
      const float* in = x + plane * p.h * p.w;
      float* out = y + plane * p.oh * p.ow;
      for (std::int64_t oy = 0; oy < p.oh; ++oy) {
        float* dst = out + oy * p.ow;
        std::fill_n(dst, p.ow, is_max ? -std::numeric_limits<float>::infinity() : 0.0f);
        const std::int64_t y0 = oy * p.stride_h - p.pad_top;
        const std::int64_t ya = std::max<std::int64_t>(y0, 0), yb = std::min(y0 + p.kh, p.h);
        if (fold_rows) {
          const float* first = in + ya * p.w;
          std::copy_n(first, p.w, folded);
          for (std::int64_t iy = ya + 1; iy < yb; ++iy) {
            const float* row = in + iy * p.w;
            for (std::int64_t i = 0; i < p.w; ++i) folded[i] = fold(folded[i], row[i]);
          }
          fold_columns(folded, dst);
        } else {
          for (std::int64_t iy = ya; iy < yb; ++iy) fold_columns(in + iy * p.w, dst);
        }
        if constexpr (!is_max) {
          if (p.count_include_pad) {
            const float scale = 1.0f / static_cast<float>(p.kh * p.kw);
            for (std::int64_t ox = 0; ox < p.ow; ++ox) dst[ox] *= scale;
          } else {
            for (std::int64_t ox = 0; ox < p.ow; ++ox) {
              const std::int64_t x0 = ox * p.stride_w - p.pad_left;
              const std::int64_t inside = std::min(x0 + p.kw, p.w) - std::max<std::int64_t>(x0, 0);
              dst[ox] /= static_cast<float>((yb - ya) * inside);
            }
          }
        }
      }
    }
  };
  const std::int64_t grain = work_grain(p.oh * p.ow * p.kh * p.kw, 4);
  parallel_ranges(args.pool, p.planes, grain, pool_planes);
  return {};
}

}  // namespace rml::detail
