// conv2d (im2col + GEMM; 1x1 convs straight to GEMM; a direct depthwise path) and max/avg pooling.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

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

/// Rows [r0, r1) and columns [p0, p1) of the im2col matrix of one group's input `x`, into `col`
/// (row stride p1 - p0): col[r - r0][p - p0] = x[ci][iy][ix] for row r = (ci * kh + ky) * kw + kx
/// at output position p, and 0 in the padding.
inline void im2col(const Conv2dPlan& p, const float* x, float* col, std::int64_t r0, std::int64_t r1, std::int64_t p0,
                   std::int64_t p1) {
  const std::int64_t len = p1 - p0;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t kx = r % p.kw, ky = (r / p.kw) % p.kh, ci = r / (p.kw * p.kh);
    const std::int64_t shift_x = kx * p.dilation_w - p.pad_left;
    const ValidRange vx = valid_outputs(p.ow, p.stride_w, shift_x, p.w);
    for (std::int64_t oy = p0 / p.ow; oy * p.ow < p1; ++oy) {
      // The part of output row oy inside [p0, p1), as ox in [a, b); d[j] is ox = a + j.
      const std::int64_t base = oy * p.ow;
      const std::int64_t a = std::max(p0 - base, std::int64_t{0}), b = std::min(p1 - base, p.ow);
      float* d = col + (r - r0) * len + (base + a - p0);
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

// Pre-packed convolution for constant weights (every conv2d but depthwise ones). Per group and
// image, row-major Y[og, plane] = W[og, kdim] X[kdim, plane] is Eigen's column-major
// Y^T[plane, og] = X^T[plane, kdim] W^T[kdim, og]: the weights are GEBP's right-hand side, packed
// once at Executor::create, and the input is the left-hand side, built one cache-sized tile of
// output positions at a time (im2col of the tile, then GEBP's packing) so it never leaves L2. A
// 1x1 convolution packs straight from the input, with no im2col at all.

/// Constant conv2d weights as GEBP right-hand panels: per group, `kc`-deep blocks of W_g^T; and
/// how a run splits its work (tiles of `mc` output positions; by columns when there are too few).
struct PackedConvWeights {
  std::int64_t kdim = 0, og = 0;
  std::int64_t kc = 0, mc = 0;
  std::int64_t parts = 1;          ///< threads the run splits over
  bool split_columns = false;      ///< each part takes a range of output channels, not of positions
  std::vector<float, Eigen::aligned_allocator<float>> panels;

  /// The packed block of group g at depth k2 (`min(kc, kdim - k2)` deep, og columns).
  [[nodiscard]] const float* block(std::int64_t g, std::int64_t k2) const noexcept {
    return panels.data() + g * kdim * og + k2 * og;
  }
  /// Floats of scratch per part: an im2col tile and its packed form, each rounded to 64 bytes.
  [[nodiscard]] std::int64_t part_floats() const noexcept { return 2 * ((kc * mc + 15) / 16 * 16); }
  [[nodiscard]] std::size_t scratch_bytes() const noexcept {
    return static_cast<std::size_t>(parts * part_floats()) * sizeof(float);
  }
};

/// Packs conv2d weights `w` ([o, cg, kh, kw]) for runs of plan `p` on `threads` threads.
inline std::shared_ptr<const PackedConvWeights> pack_conv_weights(const Conv2dPlan& p, const float* w, int threads) {
  auto pw = std::make_shared<PackedConvWeights>();
  const std::int64_t kdim = p.cg * p.kh * p.kw, plane = std::max<std::int64_t>(p.oh * p.ow, 1);
  pw->kdim = kdim, pw->og = p.og;
  gebp::Index kc = kdim, mc = plane, nc = p.og;
  Eigen::internal::computeProductBlockingSizes<float, float, 1>(kc, mc, nc, gebp::Index{1});
  // Enough position tiles for every thread to get one; with too few positions for that (deep
  // layers on small planes), the threads split the output channels instead.
  const std::int64_t mr = gebp::Traits::mr;
  const std::int64_t per_thread = ((plane + threads - 1) / threads + mr - 1) / mr * mr;
  if (threads > 1 && per_thread >= 4 * mr) {
    mc = std::min<gebp::Index>(mc, per_thread);
    pw->parts = std::min<std::int64_t>(threads, (plane + mc - 1) / mc);
  } else if (threads > 1 && p.og >= 2 * gebp::Traits::nr) {
    pw->split_columns = true;
    pw->parts = std::min<std::int64_t>(threads, p.og / gebp::Traits::nr);
  }
  pw->kc = kc, pw->mc = std::min<std::int64_t>(mc, plane);
  pw->panels.resize(static_cast<std::size_t>(p.groups * kdim * p.og));
  gebp::PackRhs pack;
  for (std::int64_t g = 0; g < p.groups; ++g) {
    const gebp::ConstMapper rhs(w + g * p.og * kdim, kdim);  // W_g^T, column-major [kdim, og]
    for (std::int64_t k2 = 0; k2 < kdim; k2 += kc)
      pack(const_cast<float*>(pw->block(g, k2)), rhs.getSubMapper(k2, 0), std::min<std::int64_t>(kc, kdim - k2), p.og);
  }
  return pw;
}

/// Output positions [i0, i0 + rows) and channels [j0, j1) of one group of one image:
/// yg = epilogue(W_g xg) over that block. `col` and `packed` hold kc x mc floats each.
inline void packed_conv_block(const Conv2dPlan& p, const PackedConvWeights& pw, std::int64_t g, const float* xg,
                              float* yg, std::int64_t i0, std::int64_t rows, std::int64_t j0, std::int64_t j1,
                              float* col, float* packed, const Epilogue& epi) {
  const std::int64_t plane = p.oh * p.ow, kdim = pw.kdim, kc = pw.kc;
  const bool pointwise = conv_is_pointwise(p);
  for (std::int64_t j = j0; j < j1; ++j) std::fill_n(yg + j * plane + i0, rows, 0.0f);
  const gebp::ResMapper res(yg, plane);  // Y^T, column-major [plane, og]
  gebp::PackLhs pack;
  gebp::Kernel kernel;
  for (std::int64_t k2 = 0; k2 < kdim; k2 += kc) {
    const std::int64_t depth = std::min(kc, kdim - k2);
    if (pointwise) {  // X^T is the input itself, column-major [plane, cg]
      pack(packed, gebp::ConstMapper(xg, plane).getSubMapper(i0, k2), depth, rows);
    } else {
      im2col(p, xg, col, k2, k2 + depth, i0, i0 + rows);
      pack(packed, gebp::ConstMapper(col, rows), depth, rows);
    }
    kernel(res.getSubMapper(i0, j0), packed, pw.block(g, k2) + j0 * depth, rows, depth, j1 - j0, 1.0f);
  }
  if (!epi.empty()) apply_epilogue(epi, BiasAlong::rows, yg, plane, j0, j1, i0, i0 + rows);
}

/// conv2d over weights packed at create. `scratch` holds pw.scratch_bytes().
inline void packed_conv2d(const Conv2dPlan& p, const PackedConvWeights& pw, const float* x, float* y, float* scratch,
                          const ThreadPool* pool, const Epilogue& epi) {
  const std::int64_t plane_in = p.h * p.w, plane = p.oh * p.ow;
  const std::int64_t tiles = (plane + pw.mc - 1) / pw.mc, nr = gebp::Traits::nr;
  for (std::int64_t n = 0; n < p.n; ++n) {
    for (std::int64_t g = 0; g < p.groups; ++g) {
      const float* xg = x + (n * p.c + g * p.cg) * plane_in;
      float* yg = y + (n * p.o + g * p.og) * plane;
      const Epilogue eg{epi.bias ? epi.bias + g * p.og : nullptr, epi.chain};
      const auto run_part = [&](std::int64_t part) {
        float* col = scratch + part * pw.part_floats();
        float* packed = col + pw.part_floats() / 2;
        // Channel ranges stay whole GEBP panels (multiples of nr), so each starts a packed panel.
        std::int64_t j0 = 0, j1 = p.og, t0 = 0, t1 = tiles;
        if (pw.split_columns) {
          const std::int64_t panels = p.og / nr;
          j0 = panels * part / pw.parts * nr;
          j1 = part + 1 == pw.parts ? p.og : panels * (part + 1) / pw.parts * nr;
        } else {
          t0 = tiles * part / pw.parts, t1 = tiles * (part + 1) / pw.parts;
        }
        for (std::int64_t t = t0; t < t1; ++t) {
          const std::int64_t i0 = t * pw.mc;
          packed_conv_block(p, pw, g, xg, yg, i0, std::min(pw.mc, plane - i0), j0, j1, col, packed, eg);
        }
      };
      if (pw.parts > 1 && pool) pool->parallel_for(pw.parts, run_part);
      else for (std::int64_t part = 0; part < pw.parts; ++part) run_part(part);
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
  if (args.packed) {
    packed_conv2d(p, *static_cast<const PackedConvWeights*>(args.packed), x, y, reinterpret_cast<float*>(args.scratch),
                  args.pool, epi);
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
          im2col(p, xg, col, 0, kdim, p0, p1);
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
