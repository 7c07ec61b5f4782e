// conv2d (im2col + GEMM; 1x1 convs straight to GEMM; a direct depthwise path) and max/avg pooling.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "rml/exec/kernels/common.hpp"
#include "rml/exec/kernels/matmul.hpp"

namespace rml::detail {

/// floor(a / b) and ceil(a / b) for b > 0 and any sign of a.
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept { return a >= 0 ? a / b : -((-a + b - 1) / b); }
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

/// Output positions per im2col tile on `threads` threads: one tile per thread when each gets at
/// least 256 positions (each thread then runs im2col and a GEMM on its own columns), otherwise
/// a single tile whose GEMM splits over the threads. More tiles than threads would only make
/// Eigen pack the weights once more per tile.
inline std::int64_t conv_tile(const Conv2dPlan& p, std::int64_t threads) noexcept {
  const std::int64_t plane = std::max<std::int64_t>(p.oh * p.ow, 1);
  const std::int64_t per = (plane + threads - 1) / threads;
  return threads > 1 && per >= 256 ? std::min(plane, (per + 15) / 16 * 16) : plane;
}

/// Scratch bytes conv2d needs on `threads` threads: one im2col tile per thread that has one.
inline std::size_t conv_scratch_bytes(const Conv2dPlan& p, int threads) noexcept {
  if (conv_is_pointwise(p) || conv_is_depthwise(p)) return 0;
  const std::int64_t tile = conv_tile(p, threads), plane = std::max<std::int64_t>(p.oh * p.ow, 1);
  const std::int64_t tiles = std::min<std::int64_t>((plane + tile - 1) / tile, threads);
  return static_cast<std::size_t>(p.cg * p.kh * p.kw * tile * tiles) * sizeof(float);
}

/// Columns [p0, p1) of the im2col matrix of one group's input `x`, into `col` (row stride p1 - p0):
/// col[(ci * kh + ky) * kw + kx][p - p0] = x[ci][iy][ix] at output position p, 0 in the padding.
inline void im2col(const Conv2dPlan& p, const float* x, float* col, std::int64_t p0, std::int64_t p1) {
  const std::int64_t rows = p.cg * p.kh * p.kw, len = p1 - p0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t kx = r % p.kw, ky = (r / p.kw) % p.kh, ci = r / (p.kw * p.kh);
    const std::int64_t shift_x = kx * p.dilation_w - p.pad_left;
    const ValidRange vx = valid_outputs(p.ow, p.stride_w, shift_x, p.w);
    for (std::int64_t oy = p0 / p.ow; oy * p.ow < p1; ++oy) {
      // The part of output row oy inside [p0, p1), as ox in [a, b); d[j] is ox = a + j.
      const std::int64_t base = oy * p.ow;
      const std::int64_t a = std::max(p0 - base, std::int64_t{0}), b = std::min(p1 - base, p.ow);
      float* d = col + r * len + (base + a - p0);
      const std::int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      if (iy < 0 || iy >= p.h) {
        std::fill(d, d + (b - a), 0.0f);
        continue;
      }
      const float* row = x + (ci * p.h + iy) * p.w;  // input x at ox: row[ox * stride_w + shift_x]
      const std::int64_t va = std::clamp(vx.begin, a, b), vb = std::clamp(vx.end, va, b);
      std::fill(d, d + (va - a), 0.0f);
      if (p.stride_w == 1) {
        std::copy(row + va + shift_x, row + vb + shift_x, d + (va - a));
      } else {
        for (std::int64_t ox = va; ox < vb; ++ox) d[ox - a] = row[ox * p.stride_w + shift_x];
      }
      std::fill(d + (vb - a), d + (b - a), 0.0f);
    }
  }
}

/// One channel plane of a depthwise convolution, computed directly.
inline void depthwise_plane(const Conv2dPlan& p, const float* x, const float* w, float bias, float* y) {
  std::fill(y, y + p.oh * p.ow, bias);
  for (std::int64_t ky = 0; ky < p.kh; ++ky) {
    for (std::int64_t kx = 0; kx < p.kw; ++kx) {
      const float wv = w[ky * p.kw + kx];
      const std::int64_t shift_x = kx * p.dilation_w - p.pad_left;
      const ValidRange vx = valid_outputs(p.ow, p.stride_w, shift_x, p.w);
      const ValidRange vy = valid_outputs(p.oh, p.stride_h, ky * p.dilation_h - p.pad_top, p.h);
      for (std::int64_t oy = vy.begin; oy < vy.end; ++oy) {
        const float* row = x + (oy * p.stride_h - p.pad_top + ky * p.dilation_h) * p.w;
        float* dst = y + oy * p.ow;
        if (p.stride_w == 1) {
          for (std::int64_t ox = vx.begin; ox < vx.end; ++ox) dst[ox] += wv * row[ox + shift_x];
        } else {
          for (std::int64_t ox = vx.begin; ox < vx.end; ++ox) dst[ox] += wv * row[ox * p.stride_w + shift_x];
        }
      }
    }
  }
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
  const std::int64_t plane_in = p.h * p.w, plane_out = p.oh * p.ow, kdim = p.cg * p.kh * p.kw;

  if (conv_is_depthwise(p)) {
    parallel_ranges(args.pool, p.n * p.c, 4, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        const std::int64_t ch = i % p.c;
        float* out = y + i * plane_out;
        depthwise_plane(p, x + i * plane_in, w + ch * p.kh * p.kw, epi.bias ? epi.bias[ch] : 0.0f, out);
        if (!epi.chain.empty()) unary_chain(epi.chain, out, out, plane_out);
      }
    });
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
        for (std::int64_t t = tiles * part / parts; t < tiles * (part + 1) / parts; ++t) {
          const std::int64_t p0 = t * tile, p1 = std::min(plane_out, p0 + tile);
          im2col(p, xg, col, p0, p1);
          gemm(wg, col, yg + p0, p.og, kdim, p1 - p0, plane_out, by_tiles ? nullptr : args.pool, &eg,
               BiasAlong::rows);
        }
      };
      if (parts > 1) args.pool->parallel_for(parts, run_part);
      else run_part(0);
    }
  }
  return {};
}

template <OpCode Op, typename T>
Status pool2d_kernel(const Kernel& kernel, const KernelArgs& args) {
  const auto& p = kernel.as<Pool2dPlan>();
  const float* x = in_ptr<float>(args, 0);
  float* y = out_ptr<float>(args);
  const float full = static_cast<float>(p.kh * p.kw);
  parallel_ranges(args.pool, p.planes, 4, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t plane = b; plane < e; ++plane) {
      const float* in = x + plane * p.h * p.w;
      float* out = y + plane * p.oh * p.ow;
      for (std::int64_t oy = 0; oy < p.oh; ++oy) {
        const std::int64_t y0 = oy * p.stride_h - p.pad_top;
        const std::int64_t ya = std::max<std::int64_t>(y0, 0), yb = std::min(y0 + p.kh, p.h);
        for (std::int64_t ox = 0; ox < p.ow; ++ox) {
          const std::int64_t x0 = ox * p.stride_w - p.pad_left;
          const std::int64_t xa = std::max<std::int64_t>(x0, 0), xb = std::min(x0 + p.kw, p.w);
          float acc = Op == OpCode::MaxPool2d ? -std::numeric_limits<float>::infinity() : 0.0f;
          for (std::int64_t iy = ya; iy < yb; ++iy) {
            for (std::int64_t ix = xa; ix < xb; ++ix) {
              const float v = in[iy * p.w + ix];
              if constexpr (Op == OpCode::MaxPool2d) acc = (v > acc || v != v) ? v : acc;
              else acc += v;
            }
          }
          if constexpr (Op == OpCode::AvgPool2d)
            acc /= p.count_include_pad ? full : static_cast<float>((yb - ya) * (xb - xa));
          out[oy * p.ow + ox] = acc;
        }
      }
    }
  });
  return {};
}

}  // namespace rml::detail
