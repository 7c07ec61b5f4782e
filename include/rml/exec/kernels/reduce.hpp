// Reductions (sum, mean, max, min), softmax and argmax.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "rml/exec/kernels/common.hpp"
#include "rml/exec/kernels/convert16.hpp"

namespace rml::detail {

template <OpCode Op>
struct Reducer {
  static constexpr float init() noexcept {
    if constexpr (Op == OpCode::Max) return -std::numeric_limits<float>::infinity();
    else if constexpr (Op == OpCode::Min) return std::numeric_limits<float>::infinity();
    else return 0.0f;
  }
  static float combine(float acc, float v) noexcept {
    if constexpr (Op == OpCode::Max) return (v > acc || v != v) ? v : acc;
    else if constexpr (Op == OpCode::Min) return (v < acc || v != v) ? v : acc;
    else return acc + v;
  }
  /// A contiguous run, vectorised.
  static float row(const float* x, std::int64_t n) {
    ConstArrayMap a(x, n);
    if (n == 0) return init();
    if constexpr (Op == OpCode::Max) return a.hasNaN() ? std::numeric_limits<float>::quiet_NaN() : a.maxCoeff();
    else if constexpr (Op == OpCode::Min) return a.hasNaN() ? std::numeric_limits<float>::quiet_NaN() : a.minCoeff();
    else return a.sum();
  }
  /// acc[i] = combine(acc[i], x[i]) over n lanes, vectorised.
  static void lanes(float* acc, const float* x, std::int64_t n) {
    ArrayMap a(acc, n);
    ConstArrayMap b(x, n);
    if constexpr (Op == OpCode::Max || Op == OpCode::Min)
      a = a.binaryExpr(b, [](float p, float q) { return combine(p, q); });
    else a += b;
  }
};

/// Walks the input once in order, calling `f(i, o)` for input element i and the output o it
/// reduces into.
template <typename F>
void for_each_reduced(const ReducePlan& p, const F& f) {
  const std::size_t rank = p.dims.size();
  SmallIndex idx(rank);
  std::int64_t n = 1;
  for (std::int64_t d : p.dims) n *= d;
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t o = 0;
    for (std::size_t d = 0; d < rank; ++d)
      if (!p.reduced[d]) o = o * p.dims[d] + idx[d];
    f(i, o);
    for (std::size_t d = rank; d-- > 0;) {
      if (++idx[d] < p.dims[d]) break;
      idx[d] = 0;
    }
  }
}

/// A 16-bit reduction of whole runs (ReducePlan::simple) into the f32 accumulators `acc`, each run
/// widened a block at a time. Rows (inner == 1) split over the threads: a sum or mean adds each
/// block's vectorised sum; max and min combine element by element in order, as the general walk
/// does (a NaN's payload kept). Lanes (inner > 1) combine one reduced row after another.
template <OpCode Op, typename T>
void reduce_half_runs(const ReducePlan& p, const T* x, float* acc, const ThreadPool* pool) {
  using R = Reducer<Op>;
  constexpr std::int64_t block = 1024;
  if (p.inner == 1) {
    parallel_ranges(pool, p.outer, work_grain(p.reduce), [&](std::int64_t b, std::int64_t e) {
      float buf[block];
      for (std::int64_t o = b; o < e; ++o) {
        float total = acc[o];
        for (std::int64_t i = 0; i < p.reduce; i += block) {
          const std::int64_t m = std::min(block, p.reduce - i);
          widen_n(x + o * p.reduce + i, buf, m);
          if constexpr (Op == OpCode::Max || Op == OpCode::Min)
            for (std::int64_t j = 0; j < m; ++j) total = R::combine(total, buf[j]);
          else
            total += R::row(buf, m);
        }
        acc[o] = total;
      }
    });
    return;
  }
  float buf[block];
  for (std::int64_t o = 0; o < p.outer; ++o)
    for (std::int64_t r = 0; r < p.reduce; ++r)
      for (std::int64_t i = 0; i < p.inner; i += block) {
        const std::int64_t m = std::min(block, p.inner - i);
        widen_n(x + (o * p.reduce + r) * p.inner + i, buf, m);
        R::lanes(acc + o * p.inner + i, buf, m);
      }
}

/// The reductions on every dtype but f32, in one walk over the input: integers accumulate in their
/// own type (sum wraps), the 16-bit floats in f32 accumulators in `scratch` (one per output),
/// each output rounded once at the end.
template <OpCode Op, typename T>
Status reduce_any(const ReducePlan& p, const KernelArgs& args) {
  using Acc = compute_type_t<T>;
  const T* x = in_ptr<T>(args, 0);
  T* y = out_ptr<T>(args);
  Acc* acc = nullptr;
  if constexpr (is_half_v<T>)
    acc = reinterpret_cast<Acc*>(args.scratch);
  else
    acc = y;
  Acc init{};
  if constexpr (Op == OpCode::Max || Op == OpCode::Min) {
    if constexpr (std::is_integral_v<Acc>)
      init = Op == OpCode::Max ? std::numeric_limits<Acc>::min() : std::numeric_limits<Acc>::max();
    else
      init = Reducer<Op>::init();
  }
  std::fill(acc, acc + p.out_n, init);
  const auto walk = [&] {
    for_each_reduced(p, [&](std::int64_t i, std::int64_t o) {
      const Acc v = load(x[i]);
      if constexpr (std::is_integral_v<Acc>) {
        if constexpr (Op == OpCode::Max)
          acc[o] = std::max(acc[o], v);
        else if constexpr (Op == OpCode::Min)
          acc[o] = std::min(acc[o], v);
        else
          acc[o] = wrap_add(acc[o], v);
      } else {
        acc[o] = Reducer<Op>::combine(acc[o], v);
      }
    });
  };
  if constexpr (is_half_v<T>) {
    if (p.simple)
      reduce_half_runs<Op>(p, x, acc, args.pool);
    else
      walk();
  } else {
    walk();
  }
  if constexpr (is_half_v<T>) {
    const float scale = Op == OpCode::Mean && p.count ? 1.0f / static_cast<float>(p.count) : 1.0f;
    for (std::int64_t i = 0; i < p.out_n; ++i) {
      float v = acc[i];
      if constexpr (Op == OpCode::Mean) v = p.count ? v * scale : std::numeric_limits<float>::quiet_NaN();
      y[i] = store<T>(v);
    }
  }
  return {};
}

template <OpCode Op, typename T>
Status reduce_kernel(const Kernel& kernel, const KernelArgs& args) {
  using R = Reducer<Op>;
  const auto& p = kernel.as<ReducePlan>();
  if constexpr (!std::is_same_v<T, float>) return reduce_any<Op, T>(p, args);
  const float* x = in_ptr<float>(args, 0);
  float* y = out_ptr<float>(args);
  if (p.simple) {
    if (p.inner == 1) {
      parallel_ranges(args.pool, p.outer, work_grain(p.reduce),
                      [&](std::int64_t b, std::int64_t e) {
                        for (std::int64_t o = b; o < e; ++o) y[o] = R::row(x + o * p.reduce, p.reduce);
                      });
    } else {
      for (std::int64_t o = 0; o < p.outer; ++o) {
        float* acc = y + o * p.inner;
        std::fill(acc, acc + p.inner, R::init());
        for (std::int64_t r = 0; r < p.reduce; ++r) R::lanes(acc, x + (o * p.reduce + r) * p.inner, p.inner);
      }
    }
  } else {
    // Several reduced runs: walk the input once, mapping each element to its output.
    std::fill(y, y + p.out_n, R::init());
    for_each_reduced(p, [&](std::int64_t i, std::int64_t o) { y[o] = R::combine(y[o], x[i]); });
  }
  if constexpr (Op == OpCode::Mean) {
    const float scale = 1.0f / static_cast<float>(p.count);
    for (std::int64_t i = 0; i < p.out_n; ++i) y[i] = p.count ? y[i] * scale : std::numeric_limits<float>::quiet_NaN();
  }
  return {};
}

template <typename T>
Status softmax_kernel(const Kernel& kernel, const KernelArgs& args) {
  const auto& p = kernel.as<AxisPlan>();
  const float* x = in_ptr<float>(args, 0);
  float* y = out_ptr<float>(args);
  if (p.axis == 0) return {};
  parallel_ranges(args.pool, p.outer, work_grain(p.axis * p.inner, 8), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t o = b; o < e; ++o) {
      const float* in = x + o * p.axis * p.inner;
      float* out = y + o * p.axis * p.inner;
      if (p.inner == 1) {
        ConstArrayMap a(in, p.axis);
        ArrayMap z(out, p.axis);
        z = (a - a.maxCoeff()).exp();
        z /= z.sum();
        continue;
      }
      // Along a non-last axis: lanes of the inner dimension, in chunks that stay on the stack, each
      // pass over the axis's rows vectorised across the chunk's lanes.
      constexpr std::int64_t kChunk = 256;
      for (std::int64_t j0 = 0; j0 < p.inner; j0 += kChunk) {
        const std::int64_t len = std::min(kChunk, p.inner - j0);
        float max_buf[kChunk], sum_buf[kChunk];
        ArrayMap m(max_buf, len), sum(sum_buf, len);
        m = ConstArrayMap(in + j0, len);
        for (std::int64_t r = 1; r < p.axis; ++r) m = m.max(ConstArrayMap(in + r * p.inner + j0, len));
        sum.setZero();
        for (std::int64_t r = 0; r < p.axis; ++r) {
          ArrayMap z(out + r * p.inner + j0, len);
          z = (ConstArrayMap(in + r * p.inner + j0, len) - m).exp();
          sum += z;
        }
        sum = sum.inverse();
        for (std::int64_t r = 0; r < p.axis; ++r) ArrayMap(out + r * p.inner + j0, len) *= sum;
      }
    }
  });
  return {};
}

/// argmax writing indices of type Index (i32, or i64 with output_dtype "i64").
template <typename T, typename Index>
Status argmax_rows(const AxisPlan& p, const KernelArgs& args) {
  const T* x = in_ptr<T>(args, 0);
  auto* y = out_ptr<Index>(args);
  for (std::int64_t o = 0; o < p.outer; ++o) {
    for (std::int64_t j = 0; j < p.inner; ++j) {
      const T* in = x + o * p.axis * p.inner + j;
      std::int64_t best = 0;
      compute_type_t<T> bv = load(in[0]);
      // First maximum wins; a NaN counts as the maximum (NumPy).
      for (std::int64_t r = 1; r < p.axis && bv == bv; ++r) {
        const compute_type_t<T> v = load(in[r * p.inner]);
        if (v > bv || v != v) {
          bv = v;
          best = r;
        }
      }
      y[o * p.inner + j] = static_cast<Index>(best);
    }
  }
  return {};
}

template <typename T>
Status argmax_kernel(const Kernel& kernel, const KernelArgs& args) {
  const auto& p = kernel.as<AxisPlan>();
  return p.wide_output ? argmax_rows<T, std::int64_t>(p, args) : argmax_rows<T, std::int32_t>(p, args);
}

}  // namespace rml::detail
