// Elementwise kernels: unary ops (and fused chains of them), binary ops and where under
// NumPy broadcasting without materialising the broadcast.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>

#include "rml/exec/kernels/common.hpp"
#include "rml/exec/kernels/convert16.hpp"

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

/// A unary op on one integer element (i32, i64): neg and abs wrap (the minimum stays itself).
template <OpCode Op, typename I>
constexpr I int_unary(I v) noexcept {
  if constexpr (Op == OpCode::Neg)
    return wrap_neg(v);
  else if constexpr (Op == OpCode::Abs)
    return v < 0 ? wrap_neg(v) : v;
  else if constexpr (Op == OpCode::Relu)
    return v > 0 ? v : I{0};
  else
    static_assert(dependent_false<I>, "rml: no integer kernel for this unary op");
}

/// `x[0, m)` rounded to T and widened back, in place, through `rounded` (m values of T).
template <typename T>
void round_through(float* x, T* rounded, std::int64_t m) noexcept {
  narrow_n(x, rounded, m);
  widen_n(rounded, x, m);
}

/// The chain over f32 values `x[0, m)` as 16-bit ops run it: each op computed by the f32 code and
/// its result rounded to T before the next (the last op's rounding is the caller's narrow_n).
/// `rounded` holds m values of T.
template <typename T>
void half_chain_steps(std::span<const UnaryStep> chain, float* x, T* rounded, std::int64_t m) {
  for (std::size_t s = 0; s < chain.size(); ++s) {
    unary_apply(chain[s], x, x, m);
    if (s + 1 < chain.size()) round_through(x, rounded, m);
  }
}

/// The 16-bit floats: blocks widened to f32 on the stack, each step of the chain computed by the
/// f32 code and its result rounded to T, as if each op ran alone.
template <typename T>
void unary_chain_half(std::span<const UnaryStep> chain, const T* x, T* y, std::int64_t n) {
  constexpr std::int64_t block = 1024;
  float buf[block];
  T rounded[block];
  for (std::int64_t b = 0; b < n; b += block) {
    const std::int64_t len = std::min(block, n - b);
    widen_n(x + b, buf, len);
    half_chain_steps(chain, buf, rounded, len);
    narrow_n(buf, y + b, len);
  }
}

template <OpCode Op, typename T>
Status unary_kernel(const Kernel& k, const KernelArgs& a) {
  const auto& p = k.as<UnaryPlan>();
  const UnaryStep self{Op, p.gelu_tanh};
  // A fused chain (see the executor) arrives as the epilogue; otherwise the op alone.
  std::span<const UnaryStep> chain(&self, 1);
  if (a.epilogue && !a.epilogue->chain.empty()) chain = a.epilogue->chain;
  const T* x = in_ptr<T>(a, 0);
  T* y = out_ptr<T>(a);
  if constexpr (std::is_same_v<T, float>) {
    parallel_ranges(a.pool, p.n, work_grain(1),
                    [&](std::int64_t b, std::int64_t e) { unary_chain(chain, x + b, y + b, e - b); });
  } else if constexpr (is_half_v<T>) {
    parallel_ranges(a.pool, p.n, work_grain(1),
                    [&](std::int64_t b, std::int64_t e) { unary_chain_half(chain, x + b, y + b, e - b); });
  } else if constexpr (Op == OpCode::LogicalNot) {
    for (std::int64_t i = 0; i < p.n; ++i) y[i] = !x[i];
  } else {
    for (std::int64_t i = 0; i < p.n; ++i) y[i] = int_unary<Op>(x[i]);
  }
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

/// `base` to the power `exp` on integers by squaring, each product wrapping as mul does. A negative
/// exponent sets `fault` bit 4 and gives 0 (NumPy refuses it too; ONNX leaves it undefined).
template <typename I>
constexpr I int_pow(I base, I exp, int& fault) noexcept {
  if (exp < 0) {
    fault |= 4;
    return I{0};
  }
  I result{1};
  for (auto e = static_cast<std::make_unsigned_t<I>>(exp); e != 0; e >>= 1) {
    if (e & 1u) result = wrap_mul(result, base);
    if (e > 1u) base = wrap_mul(base, base);
  }
  return result;
}

/// A binary op on one pair of elements of any dtype but f32 (which runs through BinaryOp): the
/// 16-bit floats computed in f32, integers wrapping, comparisons giving bool. Integer div sets
/// `fault` (1: by zero, 2: overflow) and gives 0; integer pow sets 4 for a negative exponent.
template <OpCode Op, typename C>
constexpr auto scalar_binary(C a, C b, int& fault) noexcept {
  if constexpr (Op == OpCode::Equal)
    return a == b;
  else if constexpr (Op == OpCode::Less)
    return a < b;
  else if constexpr (Op == OpCode::Greater)
    return a > b;
  else if constexpr (Op == OpCode::LogicalAnd)
    return a && b;
  else if constexpr (Op == OpCode::LogicalOr)
    return a || b;
  else if constexpr (std::is_floating_point_v<C>) {
    if constexpr (Op == OpCode::Add)
      return a + b;
    else if constexpr (Op == OpCode::Sub)
      return a - b;
    else if constexpr (Op == OpCode::Mul)
      return a * b;
    else if constexpr (Op == OpCode::Div)
      return a / b;
    else if constexpr (Op == OpCode::Pow)
      return std::pow(a, b);
    else if constexpr (Op == OpCode::Maximum)
      return nan_max(a, b);
    else if constexpr (Op == OpCode::Minimum)
      return nan_min(a, b);
    else
      static_assert(dependent_false<C>, "rml: no binary kernel for this op");
  } else {
    if constexpr (Op == OpCode::Add)
      return wrap_add(a, b);
    else if constexpr (Op == OpCode::Sub)
      return wrap_sub(a, b);
    else if constexpr (Op == OpCode::Mul)
      return wrap_mul(a, b);
    else if constexpr (Op == OpCode::Maximum)
      return std::max(a, b);
    else if constexpr (Op == OpCode::Minimum)
      return std::min(a, b);
    else if constexpr (Op == OpCode::Pow)
      return int_pow(a, b, fault);
    else if constexpr (Op == OpCode::Div) {
      // Truncation toward zero (C++ and ONNX); the two quotients C++ leaves undefined are errors.
      if (b == 0) {
        fault |= 1;
        return C{0};
      }
      if (b == -1 && a == std::numeric_limits<C>::min()) {
        fault |= 2;
        return C{0};
      }
      return static_cast<C>(a / b);
    } else
      static_assert(dependent_false<C>, "rml: no integer kernel for this binary op");
  }
}

template <OpCode Op>
inline constexpr bool is_comparison_v = Op == OpCode::Equal || Op == OpCode::Less || Op == OpCode::Greater;

/// `z = f(x, y)` one element at a time under the broadcast walk, each operand widened by load() and
/// the result stored as Out; `f(a, b, fault)` may set bits of `fault`. Returns the bits any element set.
template <typename T, typename Out, typename F>
int broadcast_elements(const BroadcastPlan& p, const KernelArgs& args, const F& f) {
  const T* x = in_ptr<T>(args, 0);
  const T* y = in_ptr<T>(args, 1);
  Out* z = out_ptr<Out>(args);
  const std::int64_t len = p.dims.back();
  const std::int64_t sx = p.strides[0].back(), sy = p.strides[1].back();
  std::atomic<int> faults{0};
  if (p.n == 0) return 0;
  parallel_ranges(args.pool, p.n / len, work_grain(len), [&](std::int64_t b, std::int64_t e) {
    int fault = 0;
    for_each_row<2>(p, b, e, [&](const std::array<std::int64_t, 2>& off, std::int64_t o) {
      const T* xa = x + off[0];
      const T* ya = y + off[1];
      for (std::int64_t i = 0; i < len; ++i) z[o + i] = store<Out>(f(load(xa[i * sx]), load(ya[i * sy]), fault));
    });
    if (fault) faults.fetch_or(fault, std::memory_order_relaxed);
  });
  return faults.load();
}

/// Every dtype but f32: one element at a time under the same broadcast walk.
template <OpCode Op, typename T>
Status binary_kernel_any(const BroadcastPlan& p, const KernelArgs& args) {
  using Out = std::conditional_t<is_comparison_v<Op>, bool, T>;
  const int f =
      broadcast_elements<T, Out>(p, args, [](auto a, auto b, int& fault) { return scalar_binary<Op>(a, b, fault); });
  if (f & 4) return invalid_argument("integer pow with a negative exponent");
  if (f & 1) return invalid_argument("integer division by zero");
  if (f & 2)
    return out_of_range("integer division overflows (the minimum of " + std::string(dtype_name(dtype_of_v<T>)) +
                        " by -1)");
  return {};
}

/// `out[0, n) = op(x, y)` through Eigen, each operand a run of n (`*_run`: its stride along the
/// innermost dimension is 1) or the one scalar at its pointer (stride 0).
template <OpCode Op>
void binary_run(const float* x, bool x_run, const float* y, bool y_run, float* out, std::int64_t n) {
  ArrayMap z(out, n);
  if (x_run && y_run)
    z = BinaryOp<Op>::apply(ConstArrayMap(x, n), ConstArrayMap(y, n));
  else if (x_run)
    z = BinaryOp<Op>::apply(ConstArrayMap(x, n), Eigen::ArrayXf::Constant(n, *y));
  else if (y_run)
    z = BinaryOp<Op>::apply(Eigen::ArrayXf::Constant(n, *x), ConstArrayMap(y, n));
  else
    z = BinaryOp<Op>::apply(Eigen::ArrayXf::Constant(n, *x), Eigen::ArrayXf::Constant(n, *y));
}

/// A broadcast binary op whose innermost dimension is a run or a scalar in each operand (stride 1
/// or 0), over the threads: `run(xa, ya, o, n)` computes z[o, o + n) from x and y at xa and ya, and
/// `after(b, e)` then runs over the outputs [b, e) a thread computed. A single run (operands of one
/// shape, or one a scalar) splits into ranges of it: for an activation, whole planes but at most one
/// (the split rule above run_parts); several rows split into ranges of rows.
template <typename In, typename Run, typename After>
void binary_rows(const BroadcastPlan& p, const ThreadPool* pool, const In* x, const In* y, const Run& run,
                 const After& after) {
  if (p.n == 0) return;
  const std::int64_t len = p.dims.back(), rows = p.n / len;
  const std::int64_t sx = p.strides[0].back(), sy = p.strides[1].back();
  if (rows == 1) {
    parallel_ranges(pool, p.n, work_grain(1), [&](std::int64_t b, std::int64_t e) {
      run(x + (sx ? b : 0), y + (sy ? b : 0), b, e - b);
      after(b, e);
    });
    return;
  }
  parallel_ranges(pool, rows, work_grain(len), [&](std::int64_t b, std::int64_t e) {
    for_each_row<2>(
        p, b, e, [&](const std::array<std::int64_t, 2>& off, std::int64_t o) { run(x + off[0], y + off[1], o, len); });
    after(b * len, e * len);
  });
}

/// f32: runs through Eigen (vectorised), with a fused chain applied over each thread's outputs.
template <OpCode Op>
Status binary_kernel_f32(const BroadcastPlan& p, const KernelArgs& args) {
  float* z = out_ptr<float>(args);
  const bool sx = p.strides[0].back() != 0, sy = p.strides[1].back() != 0;
  const bool fused = args.epilogue && !args.epilogue->chain.empty();
  binary_rows(
      p, args.pool, in_ptr<float>(args, 0), in_ptr<float>(args, 1),
      [&](const float* xa, const float* ya, std::int64_t o, std::int64_t n) { binary_run<Op>(xa, sx, ya, sy, z + o, n); },
      [&](std::int64_t b, std::int64_t e) {
        if (fused) unary_chain(args.epilogue->chain, z + b, z + b, e - b);
      });
  return {};
}

/// f16 and bf16: blocks of each run widened to f32, the f32 op run over them as binary_kernel_f32
/// runs it, the result rounded once.
template <OpCode Op, typename T>
Status binary_kernel_half(const BroadcastPlan& p, const KernelArgs& args) {
  T* z = out_ptr<T>(args);
  const bool sx = p.strides[0].back() != 0, sy = p.strides[1].back() != 0;
  const auto run = [&](const T* xa, const T* ya, std::int64_t o, std::int64_t n) {
    constexpr std::int64_t block = 512;
    float bx[block], by[block], out[block];
    if (!sx) bx[0] = load(*xa);
    if (!sy) by[0] = load(*ya);
    for (std::int64_t i = 0; i < n; i += block) {
      const std::int64_t m = std::min(block, n - i);
      if (sx) widen_n(xa + i, bx, m);
      if (sy) widen_n(ya + i, by, m);
      binary_run<Op>(bx, sx, by, sy, out, m);
      narrow_n(out, z + o + i, m);
    }
  };
  binary_rows(p, args.pool, in_ptr<T>(args, 0), in_ptr<T>(args, 1), run, [](std::int64_t, std::int64_t) {});
  return {};
}

/// A 16-bit step's fused residual add and chain, over its results `v[0, n)` in f32 before they are
/// rounded to T (the caller's narrow_n rounds the last op): `v = chain(round(v) + residual)`, every
/// op's result rounded to T, as binary_kernel_half and unary_chain_half round them when the ops run
/// alone (the same bits). `residual` is the residual widened to f32 (laid out as v), or null; the
/// chain may be empty. Block by block, so each block's ops run in L1; callers pass runs of a few
/// hundred values at least (a call per 56-wide output row had cost ResNet-18's bf16 convolutions
/// more than the passes it replaced).
template <typename T>
void half_epilogue(float* v, const float* residual, std::span<const UnaryStep> chain, std::int64_t n) {
  constexpr std::int64_t block = 256;
  T rounded[block];
  for (std::int64_t i = 0; i < n; i += block) {
    const std::int64_t m = std::min(block, n - i);
    float* x = v + i;
    round_through(x, rounded, m);  // the step's own op
    if (residual) {
      binary_run<OpCode::Add>(x, true, residual + i, true, x, m);
      if (!chain.empty()) round_through(x, rounded, m);
    }
    half_chain_steps(chain, x, rounded, m);
  }
}

/// half_epilogue with the residual in its 16-bit type (laid out as v), widened block by block.
template <typename T>
void half_epilogue(float* v, const T* residual, std::span<const UnaryStep> chain, std::int64_t n) {
  if (!residual) return half_epilogue<T>(v, static_cast<const float*>(nullptr), chain, n);
  constexpr std::int64_t block = 1024;
  float wide[block];
  for (std::int64_t i = 0; i < n; i += block) {
    const std::int64_t m = std::min(block, n - i);
    widen_n(residual + i, wide, m);
    half_epilogue<T>(v + i, static_cast<const float*>(wide), chain, m);
  }
}

constexpr bool is_run_or_scalar(std::int64_t innermost_stride) noexcept {
  return innermost_stride == 0 || innermost_stride == 1;
}

template <OpCode Op, typename T>
Status binary_kernel(const Kernel& k, const KernelArgs& args) {
  const auto& p = k.as<BroadcastPlan>();
  if constexpr (std::is_same_v<T, float>)
    return binary_kernel_f32<Op>(p, args);
  else if constexpr (is_half_v<T> &&
                     (Op == OpCode::Add || Op == OpCode::Sub || Op == OpCode::Mul || Op == OpCode::Div ||
                      Op == OpCode::Pow || Op == OpCode::Maximum || Op == OpCode::Minimum))
    return is_run_or_scalar(p.strides[0].back()) && is_run_or_scalar(p.strides[1].back())
               ? binary_kernel_half<Op, T>(p, args)
               : binary_kernel_any<Op, T>(p, args);
  else
    return binary_kernel_any<Op, T>(p, args);
}

/// The remainder of `a / b`: with `Fmod`, C's (the dividend's sign; std::fmod for floats), else the
/// divisor's sign (Python's `%`, ONNX Mod with fmod = 0), for integers only. An integer remainder by
/// zero sets `fault` and gives 0; MIN mod -1 is 0 (C++ leaves MIN % -1 undefined).
template <bool Fmod, typename C>
C mod_scalar(C a, C b, int& fault) noexcept {
  if constexpr (std::is_floating_point_v<C>) {
    return std::fmod(a, b);
  } else {
    if (b == 0) {
      fault = 1;
      return C{0};
    }
    if (b == -1) return C{0};
    C r = static_cast<C>(a % b);
    // |r| < |b| and r, b of opposite signs: r + b cannot overflow.
    if constexpr (!Fmod)
      if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
    return r;
  }
}

template <bool Fmod, typename T>
Status mod_rows(const BroadcastPlan& p, const KernelArgs& args) {
  if (broadcast_elements<T, T>(p, args, [](auto a, auto b, int& fault) { return mod_scalar<Fmod>(a, b, fault); }))
    return invalid_argument("integer mod by zero");
  return {};
}

/// mod over every numeric dtype (floats with fmod only: compile_op refuses the other), one element
/// at a time under the broadcast walk; 16-bit floats computed in f32 (fmod is exact, so one rounding).
template <typename T>
Status mod_kernel(const Kernel& k, const KernelArgs& args) {
  const auto& p = k.as<BroadcastPlan>();
  if (p.fmod) return mod_rows<true, T>(p, args);
  if constexpr (std::is_integral_v<T>)
    return mod_rows<false, T>(p, args);
  else
    return internal_error("mod on floats without fmod");
}

/// where over condition elements of type Cond (bool, or an f32 mask: nonzero is true).
template <typename Cond, typename T>
Status where_rows(const BroadcastPlan& p, const KernelArgs& args) {
  const Cond* c = in_ptr<Cond>(args, 0);
  const T* x = in_ptr<T>(args, 1);
  const T* y = in_ptr<T>(args, 2);
  T* z = out_ptr<T>(args);
  const std::int64_t len = p.dims.back();
  const std::int64_t sc = p.strides[0].back(), sx = p.strides[1].back(), sy = p.strides[2].back();
  if (p.n == 0) return {};
  for_each_row<3>(p, 0, p.n / len, [&](const std::array<std::int64_t, 3>& off, std::int64_t o) {
    const Cond* cr = c + off[0];
    const T* xr = x + off[1];
    const T* yr = y + off[2];
    for (std::int64_t i = 0; i < len; ++i) z[o + i] = cr[i * sc] != Cond{} ? xr[i * sx] : yr[i * sy];
  });
  return {};
}

template <typename T>
Status where_kernel(const Kernel& k, const KernelArgs& args) {
  const auto& p = k.as<BroadcastPlan>();
  if (p.bool_condition) return where_rows<bool, T>(p, args);
  return where_rows<float, T>(p, args);
}

}  // namespace rml::detail
