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

/// Scratch bytes conv2d needs: one im2col matrix [cg * kh * kw, oh * ow].
inline std::size_t conv_scratch_bytes(const Conv2dPlan& p) noexcept {
  if (conv_is_pointwise(p) || conv_is_depthwise(p)) return 0;
  return static_cast<std::size_t>(p.cg * p.kh * p.kw * p.oh * p.ow) * sizeof(float);
}

/// col[(ci * kh + ky) * kw + kx][oy * ow + ox] = x[ci][iy][ix], 0 in the padding; rows [r0, r1).
inline void im2col(const Conv2dPlan& p, const float* x, float* col, std::int64_t r0, std::int64_t r1) {
  const std::int64_t plane = p.oh * p.ow;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t kx = r % p.kw, ky = (r / p.kw) % p.kh, ci = r / (p.kw * p.kh);
    float* dst = col + r * plane;
    const std::int64_t shift_x = kx * p.dilation_w - p.pad_left;
    const ValidRange vx = valid_outputs(p.ow, p.stride_w, shift_x, p.w);
    for (std::int64_t oy = 0; oy < p.oh; ++oy) {
      float* d = dst + oy * p.ow;
      const std::int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      if (iy < 0 || iy >= p.h) {
        std::fill(d, d + p.ow, 0.0f);
        continue;
      }
      const float* src = x + (ci * p.h + iy) * p.w + shift_x;
      std::fill(d, d + vx.begin, 0.0f);
      if (p.stride_w == 1) {
        std::copy(src + vx.begin, src + vx.end, d + vx.begin);
      } else {
        for (std::int64_t ox = vx.begin; ox < vx.end; ++ox) d[ox] = src[ox * p.stride_w];
      }
      std::fill(d + vx.end, d + p.ow, 0.0f);
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
        const float* src = x + (oy * p.stride_h - p.pad_top + ky * p.dilation_h) * p.w + shift_x;
        float* dst = y + oy * p.ow;
        if (p.stride_w == 1) {
          for (std::int64_t ox = vx.begin; ox < vx.end; ++ox) dst[ox] += wv * src[ox];
        } else {
          for (std::int64_t ox = vx.begin; ox < vx.end; ++ox) dst[ox] += wv * src[ox * p.stride_w];
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
  const bool pointwise = conv_is_pointwise(p);
  float* col = reinterpret_cast<float*>(args.scratch);
  for (std::int64_t n = 0; n < p.n; ++n) {
    for (std::int64_t g = 0; g < p.groups; ++g) {
      const float* xg = x + (n * p.c + g * p.cg) * plane_in;
      const float* rhs = xg;
      if (!pointwise) {
        parallel_ranges(args.pool, kdim, 8, [&](std::int64_t r0, std::int64_t r1) { im2col(p, xg, col, r0, r1); });
        rhs = col;
      }
      Epilogue eg{epi.bias ? epi.bias + g * p.og : nullptr, epi.chain};
      gemm(w + g * p.og * kdim, rhs, y + (n * p.o + g * p.og) * plane_out, p.og, kdim, plane_out, args.pool, &eg,
           BiasAlong::rows);
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
