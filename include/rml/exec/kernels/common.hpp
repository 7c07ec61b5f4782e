// Helpers every kernel uses: typed access to its buffers, Eigen maps over them, a small multi-index.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "rml/check/kernel.hpp"
#include "rml/core/status.hpp"
#include "rml/exec/detail/kernel_args.hpp"
#include "rml/exec/thread_pool.hpp"

namespace rml::detail {

template <typename T>
const T* in_ptr(const KernelArgs& a, std::size_t i) noexcept {
  return reinterpret_cast<const T*>(a.in[i]);
}
template <typename T>
T* out_ptr(const KernelArgs& a, std::size_t i = 0) noexcept {
  return reinterpret_cast<T*>(a.out[i]);
}

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <typename>
inline constexpr bool dependent_false = false;

/// f16 and bf16: stored in 16 bits, computed in f32.
template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

/// An element as its kernel computes with it (compute_type_t: f32 for the 16-bit floats).
template <typename T>
constexpr compute_type_t<T> load(T v) noexcept {
  if constexpr (is_half_v<T>)
    return static_cast<float>(v);
  else
    return v;
}
/// A computed value as an element of type T: the 16-bit floats round to nearest, ties to even.
template <typename T, typename C>
constexpr T store(C v) noexcept {
  if constexpr (is_half_v<T>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

/// Two's complement wrapping arithmetic for i32 and i64, through the unsigned type (no signed
/// overflow, which C++ leaves undefined; the conversion back is modular since C++20).
template <typename I>
constexpr I wrap_add(I a, I b) noexcept {
  using U = std::make_unsigned_t<I>;
  return static_cast<I>(static_cast<U>(a) + static_cast<U>(b));
}
template <typename I>
constexpr I wrap_sub(I a, I b) noexcept {
  using U = std::make_unsigned_t<I>;
  return static_cast<I>(static_cast<U>(a) - static_cast<U>(b));
}
template <typename I>
constexpr I wrap_mul(I a, I b) noexcept {
  using U = std::make_unsigned_t<I>;
  return static_cast<I>(static_cast<U>(a) * static_cast<U>(b));
}
template <typename I>
constexpr I wrap_neg(I a) noexcept {
  return wrap_sub(I{0}, a);
}

/// A multi-index of `rank` zeros that lives on the stack for ranks up to 12 (kernels must not
/// allocate in steady state; higher ranks are rare and fall back to the heap).
class SmallIndex {
 public:
  explicit SmallIndex(std::size_t rank) : data_(rank <= kInline ? inline_ : (heap_.resize(rank), heap_.data())) {
    std::fill(data_, data_ + std::min(rank, kInline), std::int64_t{0});
  }
  SmallIndex(const SmallIndex&) = delete;
  SmallIndex& operator=(const SmallIndex&) = delete;
  std::int64_t& operator[](std::size_t i) noexcept { return data_[i]; }

 private:
  static constexpr std::size_t kInline = 12;
  std::int64_t inline_[kInline];
  std::vector<std::int64_t> heap_;
  std::int64_t* data_;
};

}  // namespace rml::detail
