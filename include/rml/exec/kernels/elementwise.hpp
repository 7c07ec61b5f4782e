// Elementwise kernels: unary ops (and fused chains of them), binary ops and where under
// NumPy broadcasting without materialising the broadcast.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>

#include "rml/exec/kernels/common.hpp"

namespace rml::detail {

inline constexpr float kSqrtHalf = 0.70710678118654752440f;
inline constexpr float kSqrtTwoOverPi = 0.79788456080286535588f;

/// y = erf(scale * x) over n floats (y may equal x): the Taylor series to x^11 below |x| = 0.5 (keeps
/// the relative error small near 0), else Abramowitz and Stegun's 7.1.26 (absolute error under 1.5e-7):
/// 1 - t (a1 + t (a2 + ... )) exp(-x^2) with t = 1 / (1 + p |x|), and erf's sign. Both branches run as
/// vectorised Eigen expressions over a chunk on the stack; the choice between them and the sign are one
/// plain loop (Eigen 3.4 vectorises neither select() nor sign(), which made the whole expression scalar).
inline void erf_into(const float* x, float* y, std::int64_t n, float scale = 1.0f) {
  constexpr std::int64_t kChunk = 256;
  alignas(64) float a_buf[kChunk], x2_buf[kChunk], series_buf[kChunk], tail_buf[kChunk];
  for (std::int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const std::int64_t len = std::min(kChunk, n - i0);
    ArrayMap a(a_buf, len), x2(x2_buf, len), series(series_buf, len), t(tail_buf, len);
    a = ConstArrayMap(x + i0, len) * scale;
    x2 = a * a;
    series = 1.1283791670955126f * a *
             (1.0f + x2 * (-1.0f / 3.0f + x2 * (0.1f + x2 * (-1.0f / 42.0f + x2 * (1.0f / 216.0f - x2 / 1320.0f)))));
    t = (1.0f + 0.3275911f * a.abs()).inverse();
    t = 1.0f - t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f)))) *
                   (-x2).exp();
    float* out = y + i0;
    for (std::int64_t i = 0; i < len; ++i)
      out[i] = std::fabs(a_buf[i]) < 0.5f ? series_buf[i] : std::copysign(tail_buf[i], a_buf[i]);
  }
}

/// y = 0.5 x (1 + erf(x / sqrt 2)), exact GELU, over n floats (y may equal x).
inline void gelu_erf_into(const float* x, float* y, std::int64_t n) {
  constexpr std::int64_t kChunk = 256;
  alignas(64) float e_buf[kChunk];
  for (std::int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const std::int64_t len = std::min(kChunk, n - i0);
    erf_into(x + i0, e_buf, len, kSqrtHalf);
    ArrayMap(y + i0, len) = 0.5f * ConstArrayMap(x + i0, len) * (1.0f + ConstArrayMap(e_buf, len));
  }
}

/// maximum and minimum as rml defines them: NaN if either operand is NaN.
inline float nan_max(float x, float y) noexcept { return std::isnan(x) || std::isnan(y) ? x + y : std::max(x, y); }
inline float nan_min(float x, float y) noexcept { return std::isnan(x) || std::isnan(y) ? x + y : std::min(x, y); }

/// y = op(x) over n floats (for a binary step, op(x, scalar)); y may equal x. Vectorised through Eigen.
inline void unary_apply(UnaryStep s, const float* x, float* y, std::int64_t n) {
  ConstArrayMap a(x, n);
  ArrayMap b(y, n);
  switch (s.op) {
    case OpCode::Neg: b = -a; return;
    case OpCode::Abs: b = a.abs(); return;
    case OpCode::Relu: b = a.max(0.0f); return;
    case OpCode::Sigmoid: b = (1.0f + (-a).exp()).inverse(); return;
    case OpCode::Tanh: b = a.tanh(); return;
    case OpCode::Exp: b = a.exp(); return;
    case OpCode::Log: b = a.log(); return;
    case OpCode::Sqrt: b = a.sqrt(); return;
    case OpCode::Rsqrt: b = a.sqrt().inverse(); return;
    case OpCode::Reciprocal: b = a.inverse(); return;
    case OpCode::Sin: b = a.sin(); return;
    case OpCode::Cos: b = a.cos(); return;
    case OpCode::Silu: b = a / (1.0f + (-a).exp()); return;
    case OpCode::Erf: erf_into(x, y, n); return;
    case OpCode::Gelu:
      if (s.gelu_tanh) {
        b = 0.5f * a * (1.0f + (kSqrtTwoOverPi * (a + 0.044715f * a * a * a)).tanh());
      } else {
        gelu_erf_into(x, y, n);
      }
      return;
    // A binary op with a constant scalar operand, fused by the executor: the binary kernels'
    // arithmetic and NaN rules exactly.
    case OpCode::Add:
      b = a + s.scalar;
      return;
    case OpCode::Mul:
      b = a * s.scalar;
      return;
    case OpCode::Sub:
      if (s.scalar_left)
        b = s.scalar - a;
      else
        b = a - s.scalar;
      return;
    case OpCode::Div:
      if (s.scalar_left)
        b = s.scalar / a;
      else
        b = a / s.scalar;
      return;
    case OpCode::Maximum:
      b = a.unaryExpr([c = s.scalar](float v) { return nan_max(v, c); });
      return;
    case OpCode::Minimum:
      b = a.unaryExpr([c = s.scalar](float v) { return nan_min(v, c); });
      return;
    default: return;  // not unary: compile_op never plans it here
  }
}

/// Applies a chain of unary ops block by block, so the data passes through memory once.
inline void unary_chain(std::span<const UnaryStep> chain, const float* x, float* y, std::int64_t n) {
  constexpr std::int64_t block = 2048;
  for (std::int64_t b = 0; b < n; b += block) {
    const std::int64_t len = std::min(block, n - b);
    const float* src = x + b;
    for (const UnaryStep& s : chain) {
      unary_apply(s, src, y + b, len);
      src = y + b;
    }
  }
}

template <OpCode Op, typename T>
Status unary_kernel(const Kernel& k, const KernelArgs& a) {
  const auto& p = k.as<UnaryPlan>();
  const UnaryStep self{Op, p.gelu_tanh};
  // A fused chain (see the executor) arrives as the epilogue; otherwise the op alone.
  std::span<const UnaryStep> chain(&self, 1);
  if (a.epilogue && !a.epilogue->chain.empty()) chain = a.epilogue->chain;
  const float* x = in_ptr<float>(a, 0);
  float* y = out_ptr<float>(a);
  parallel_ranges(a.pool, p.n, work_grain(1),
                  [&](std::int64_t b, std::int64_t e) { unary_chain(chain, x + b, y + b, e - b); });
  return {};
}

/// `out = op(a, b)` over Eigen array expressions (maps or constants).
template <OpCode Op>
struct BinaryOp {
  template <typename A, typename B>
  static auto apply(const A& a, const B& b) {
    if constexpr (Op == OpCode::Add) return a + b;
    else if constexpr (Op == OpCode::Sub) return a - b;
    else if constexpr (Op == OpCode::Mul) return a * b;
    else if constexpr (Op == OpCode::Div) return a / b;
    else if constexpr (Op == OpCode::Pow) return a.binaryExpr(b, [](float x, float y) { return std::pow(x, y); });
    else if constexpr (Op == OpCode::Maximum)
      return a.binaryExpr(b, [](float x, float y) { return nan_max(x, y); });
    else if constexpr (Op == OpCode::Minimum)
      return a.binaryExpr(b, [](float x, float y) { return nan_min(x, y); });
    else if constexpr (Op == OpCode::Equal) return (a == b).template cast<float>();
    else if constexpr (Op == OpCode::Less) return (a < b).template cast<float>();
    else if constexpr (Op == OpCode::Greater) return (a > b).template cast<float>();
    else static_assert(dependent_false<A>, "rml: no binary kernel for this op");
  }
};

/// Walks the collapsed output dims except the last; calls `inner(offsets..., out_offset)` per row.
template <std::size_t N, typename F>
void for_each_row(const BroadcastPlan& p, std::int64_t row_begin, std::int64_t row_end, const F& inner) {
  const std::size_t r = p.dims.size();
  const std::int64_t len = p.dims.back();
  std::array<std::int64_t, N> off{};
  SmallIndex idx(r);
  // Position at row_begin.
  std::int64_t rem = row_begin;
  for (std::size_t d = r - 1; d-- > 0;) {
    idx[d] = rem % p.dims[d];
    rem /= p.dims[d];
    for (std::size_t i = 0; i < N; ++i) off[i] += idx[d] * p.strides[i][d];
  }
  for (std::int64_t row = row_begin; row < row_end; ++row) {
    inner(off, row * len);
    for (std::size_t d = r - 1; d-- > 0;) {
      for (std::size_t i = 0; i < N; ++i) off[i] += p.strides[i][d];
      if (++idx[d] < p.dims[d]) break;
      for (std::size_t i = 0; i < N; ++i) off[i] -= idx[d] * p.strides[i][d];
      idx[d] = 0;
    }
  }
}

template <OpCode Op, typename T>
Status binary_kernel(const Kernel& k, const KernelArgs& args) {
  const auto& p = k.as<BroadcastPlan>();
  const float* x = in_ptr<float>(args, 0);
  const float* y = in_ptr<float>(args, 1);
  float* z = out_ptr<float>(args);
  const std::int64_t len = p.dims.back();
  const std::int64_t sx = p.strides[0].back(), sy = p.strides[1].back();
  // The innermost dimension is vector-vector, vector-scalar or scalar-vector (or scalar-scalar).
  auto row = [&](const std::array<std::int64_t, 2>& off, std::int64_t o) {
    ArrayMap out(z + o, len);
    const float* xa = x + off[0];
    const float* ya = y + off[1];
    if (sx && sy) out = BinaryOp<Op>::apply(ConstArrayMap(xa, len), ConstArrayMap(ya, len));
    else if (sx) out = BinaryOp<Op>::apply(ConstArrayMap(xa, len), Eigen::ArrayXf::Constant(len, *ya));
    else if (sy) out = BinaryOp<Op>::apply(Eigen::ArrayXf::Constant(len, *xa), ConstArrayMap(ya, len));
    else out = BinaryOp<Op>::apply(Eigen::ArrayXf::Constant(len, *xa), Eigen::ArrayXf::Constant(len, *ya));
  };
  if (p.n == 0) return {};
  const std::int64_t rows = p.n / len;
  const bool fused = args.epilogue && !args.epilogue->chain.empty();
  parallel_ranges(args.pool, rows, work_grain(len), [&](std::int64_t b, std::int64_t e) {
    for_each_row<2>(p, b, e, row);
    if (fused) unary_chain(args.epilogue->chain, z + b * len, z + b * len, (e - b) * len);
  });
  return {};
}

template <typename T>
Status where_kernel(const Kernel& k, const KernelArgs& args) {
  const auto& p = k.as<BroadcastPlan>();
  const float* c = in_ptr<float>(args, 0);
  const float* x = in_ptr<float>(args, 1);
  const float* y = in_ptr<float>(args, 2);
  float* z = out_ptr<float>(args);
  const std::int64_t len = p.dims.back();
  const std::int64_t sc = p.strides[0].back(), sx = p.strides[1].back(), sy = p.strides[2].back();
  if (p.n == 0) return {};
  for_each_row<3>(p, 0, p.n / len, [&](const std::array<std::int64_t, 3>& off, std::int64_t o) {
    const float* cr = c + off[0];
    const float* xr = x + off[1];
    const float* yr = y + off[2];
    for (std::int64_t i = 0; i < len; ++i) z[o + i] = cr[i * sc] != 0.0f ? xr[i * sx] : yr[i * sy];
  });
  return {};
}

}  // namespace rml::detail
