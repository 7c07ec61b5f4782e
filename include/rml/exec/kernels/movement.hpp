// Data movement: copy/reshape, strided copies (transpose, slice, expand), pad, concat, gather, cast.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "rml/exec/kernels/common.hpp"

namespace rml::detail {

/// A float -> i32 or i64: truncation toward zero, saturating at the integer's range; NaN becomes 0.
template <typename I, typename F>
constexpr I saturate_to(F v) noexcept {
  // 2^31 or 2^63, exact in float and double.
  constexpr F limit = static_cast<F>(std::uint64_t{1} << std::numeric_limits<I>::digits);
  if (v != v) return 0;
  if (v >= limit) return std::numeric_limits<I>::max();
  if (v <= -limit) return std::numeric_limits<I>::min();
  return static_cast<I>(v);
}

/// An integer as the nearest float with the low bit made sticky ("round to odd" at 24 bits), so
/// that rounding it once more to f16 or bf16 gives the integer correctly rounded (no double
/// rounding). Exact below 2^24.
constexpr float int_to_float_odd(std::int64_t v) noexcept {
  const bool neg = v < 0;
  std::uint64_t u = neg ? std::uint64_t{0} - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
  int shift = 0;
  while ((u >> shift) >= (std::uint64_t{1} << 24)) ++shift;
  std::uint64_t m = u >> shift;
  if (shift && (u & ((std::uint64_t{1} << shift) - 1))) m |= 1;  // sticky
  float f = static_cast<float>(m);                               // exact: m < 2^24
  for (int i = 0; i < shift; ++i) f *= 2.0f;
  return neg ? -f : f;
}

/// One element of dtype From as dtype To, as `cast` defines it: floats to integers truncate
/// toward zero and saturate (NaN is 0); integers to narrower integers wrap (two's complement, as
/// NumPy's astype); anything to bool is `x != 0` (NaN is true); bool is 0 or 1; every value is
/// rounded once, to nearest even, to a float type.
template <typename To, typename From>
constexpr To convert(From x) noexcept {
  if constexpr (std::is_same_v<To, From>)
    return x;
  else if constexpr (std::is_same_v<To, bool>)
    return load(x) != compute_type_t<From>{};
  else if constexpr (std::is_same_v<From, bool>)
    return store<To>(x ? 1.0f : 0.0f);
  else if constexpr (std::is_integral_v<To>) {
    if constexpr (std::is_integral_v<From>)
      return static_cast<To>(x);  // modular since C++20
    else
      return saturate_to<To>(load(x));
  } else if constexpr (std::is_integral_v<From>) {
    if constexpr (std::is_same_v<To, float>)
      return static_cast<float>(x);
    else
      return To(int_to_float_odd(x));
  } else {
    return store<To>(load(x));  // f16 and bf16 widen exactly; one rounding to To
  }
}

/// f32 -> i32 (the pad value, and callers before the other dtypes).
constexpr std::int32_t saturate_to_i32(float v) noexcept { return saturate_to<std::int32_t>(v); }

template <typename T>
Status copy_kernel(const Kernel& kernel, const KernelArgs& args) {
  const auto n = static_cast<std::size_t>(kernel.as<CopyPlan>().nbytes);
  if (n != 0 && args.out[0] != args.in[0]) std::memcpy(args.out[0], args.in[0], n);
  return {};
}

/// dst[dst_offset + sum idx * dst_strides] = src[src_offset + sum idx * src_strides] over `dims`;
/// either side may be contiguous (strides = nullptr).
template <typename T>
void strided_copy(const Dims& dims, const T* src, const std::int64_t* src_strides, T* dst,
                  const std::int64_t* dst_strides) {
  const std::size_t r = dims.size();
  std::int64_t n = 1;
  for (std::int64_t d : dims) n *= d;
  if (n == 0) return;
  const std::int64_t len = dims.back();
  const std::int64_t si = src_strides ? src_strides[r - 1] : 1, di = dst_strides ? dst_strides[r - 1] : 1;
  SmallIndex idx(r);
  std::int64_t so = 0, dof = 0;
  for (std::int64_t row = 0; row < n / len; ++row) {
    const T* s = src + so;
    T* d = dst + dof;
    if (si == 1 && di == 1) std::copy(s, s + len, d);
    else if (si == 0 && di == 1) std::fill_n(d, len, *s);  // a broadcast row
    else
      for (std::int64_t i = 0; i < len; ++i) d[i * di] = s[i * si];
    so += src_strides ? 0 : len;
    dof += dst_strides ? 0 : len;
    for (std::size_t k = r - 1; k-- > 0;) {
      if (src_strides) so += src_strides[k];
      if (dst_strides) dof += dst_strides[k];
      if (++idx[k] < dims[k]) break;
      if (src_strides) so -= idx[k] * src_strides[k];
      if (dst_strides) dof -= idx[k] * dst_strides[k];
      idx[k] = 0;
    }
  }
}

template <typename T>
Status strided_copy_kernel(const Kernel& kernel, const KernelArgs& args) {
  const auto& p = kernel.as<StridedCopyPlan>();
  if (p.n == 0) return {};
  strided_copy<T>(p.dims, in_ptr<T>(args, 0) + p.in_offset, p.in_strides.data(), out_ptr<T>(args), nullptr);
  return {};
}

template <typename T>
Status pad_kernel(const Kernel& kernel, const KernelArgs& args) {
  const auto& p = kernel.as<PadPlan>();
  T* y = out_ptr<T>(args);
  // The attribute is a double; it is cast as an f64 value would be (ints: truncated, saturated).
  T value;
  if constexpr (std::is_same_v<T, bool>)
    value = p.value != 0;
  else if constexpr (std::is_integral_v<T>)
    value = saturate_to<T>(p.value);
  else
    value = store<T>(static_cast<float>(p.value));
  std::fill_n(y, p.out_n, value);
  strided_copy<T>(p.dims, in_ptr<T>(args, 0), nullptr, y + p.out_offset, p.out_strides.data());
  return {};
}

template <typename T>
Status concat_kernel(const Kernel& kernel, const KernelArgs& args) {
  const auto& p = kernel.as<ConcatPlan>();
  T* y = out_ptr<T>(args);
  for (std::int64_t o = 0; o < p.outer; ++o) {
    T* row = y + o * p.row;
    for (std::size_t i = 0; i < p.chunks.size(); ++i) {
      const std::int64_t c = p.chunks[i];
      const T* src = in_ptr<T>(args, i) + o * c;
      row = std::copy(src, src + c, row);
    }
  }
  return {};
}

template <typename T, typename Index>
Status gather_rows(const GatherPlan& p, const KernelArgs& args) {
  const T* x = in_ptr<T>(args, 0);
  const auto* indices = in_ptr<Index>(args, 1);
  // Every index is checked before anything is read: the one failure the checker cannot see.
  for (std::int64_t j = 0; j < p.count; ++j) {
    const std::int64_t v = indices[j];
    if (v < -p.axis || v >= p.axis)
      return out_of_range("index " + std::to_string(v) + " (at position " + std::to_string(j) +
                          ") is out of range for an axis of size " + std::to_string(p.axis));
  }
  T* y = out_ptr<T>(args);
  for (std::int64_t o = 0; o < p.outer; ++o) {
    for (std::int64_t j = 0; j < p.count; ++j) {
      const std::int64_t v = indices[j] < 0 ? indices[j] + p.axis : indices[j];
      const T* src = x + (o * p.axis + v) * p.inner;
      std::copy(src, src + p.inner, y + (o * p.count + j) * p.inner);
    }
  }
  return {};
}

template <typename T>
Status gather_kernel(const Kernel& kernel, const KernelArgs& args) {
  const auto& p = kernel.as<GatherPlan>();
  return p.wide_indices ? gather_rows<T, std::int64_t>(p, args) : gather_rows<T, std::int32_t>(p, args);
}

template <typename T>
Status cast_kernel(const Kernel& kernel, const KernelArgs& args) {
  const auto& p = kernel.as<CastPlan>();
  const T* x = in_ptr<T>(args, 0);
  visit_dtype(p.to, [&](auto to) {
    using To = dtype_type_t<decltype(to)::value>;
    To* y = out_ptr<To>(args);
    for (std::int64_t i = 0; i < p.n; ++i) y[i] = convert<To>(x[i]);
  });
  return {};
}

}  // namespace rml::detail
