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

/// f32 -> i32: truncation toward zero, saturating at the i32 range; NaN becomes 0.
constexpr std::int32_t saturate_to_i32(float v) noexcept {
  if (v != v) return 0;
  if (v >= 2147483648.0f) return std::numeric_limits<std::int32_t>::max();
  if (v <= -2147483648.0f) return std::numeric_limits<std::int32_t>::min();
  return static_cast<std::int32_t>(v);
}

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
  T value;
  if constexpr (std::is_same_v<T, float>) value = static_cast<float>(p.value);
  else value = saturate_to_i32(static_cast<float>(p.value));
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

template <typename T>
Status gather_kernel(const Kernel& kernel, const KernelArgs& args) {
  const auto& p = kernel.as<GatherPlan>();
  const T* x = in_ptr<T>(args, 0);
  const auto* indices = in_ptr<std::int32_t>(args, 1);
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
Status cast_kernel(const Kernel& kernel, const KernelArgs& args) {
  const auto& p = kernel.as<CastPlan>();
  const T* x = in_ptr<T>(args, 0);
  if (p.to == dtype_of_v<T>) {
    std::copy(x, x + p.n, out_ptr<T>(args));
  } else if (p.to == DType::i32) {
    auto* y = out_ptr<std::int32_t>(args);
    for (std::int64_t i = 0; i < p.n; ++i) y[i] = saturate_to_i32(static_cast<float>(x[i]));
  } else {
    auto* y = out_ptr<float>(args);
    for (std::int64_t i = 0; i < p.n; ++i) y[i] = static_cast<float>(x[i]);
  }
  return {};
}

}  // namespace rml::detail
