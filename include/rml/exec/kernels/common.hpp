// Helpers every kernel uses: typed access to its buffers, Eigen maps over them, a small multi-index.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
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

/// Calls block(i) at i = 0, B, 2B, ... and, when B does not divide `count`, once more at count - B,
/// overlapping the block before (blocks that write what their inputs give rewrite the same values).
/// Returns false, calling nothing, when `count` is under one block.
template <int B, typename F>
bool overlapping_blocks(std::int64_t count, const F& block) {
  if (count < B) return false;
  for (std::int64_t i = 0; i + B <= count; i += B) block(i);
  if (count % B) block(count - B);
  return true;
}

/// The even and odd floats of src[0, 32): two loads, two shuffles and two stores where the compiler
/// has vector extensions (GCC 12 and Clang), a scalar loop otherwise.
inline void deinterleave16(const float* src, float* even, float* odd) {
#if defined(__GNUC__) && (defined(__clang__) || __GNUC__ >= 12)
  using V = float __attribute__((vector_size(64)));
  V a, b;
  std::memcpy(&a, src, sizeof a);
  std::memcpy(&b, src + 16, sizeof b);
  const V e = __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const V o = __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  std::memcpy(even, &e, sizeof e);
  std::memcpy(odd, &o, sizeof o);
#else
  for (int j = 0; j < 16; ++j) {
    even[j] = src[2 * j];
    odd[j] = src[2 * j + 1];
  }
#endif
}

/// dst[0, n) = src[0, n) for a run of a few dozen floats, without a library call. GCC turns a copy
/// loop into a memcpy call, even one of packets or with a constant bound and a test, and those calls
/// took a quarter of a 28x28 Winograd layer's time. Here each packet starts at min(j, n - S), the
/// last one overlapping the one before, an address no loop idiom matches: the widest packet the run
/// holds (full, half or quarter), and single floats under a quarter packet.
// Eigen's packet types carry alignment attributes that GCC drops (and warns of) when one is a class
// template's argument, as unpacket_traits' is; the attributes do not matter there.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
#endif
inline void copy_run(const float* src, std::int64_t n, float* dst) noexcept {
  const auto packets = [&]<typename P>() {
    constexpr std::int64_t S = Eigen::internal::unpacket_traits<P>::size;
    if (n < S) return false;
    for (std::int64_t j = 0; j < n; j += S) {
      const std::int64_t at = std::min(j, n - S);
      Eigen::internal::pstoreu(dst + at, Eigen::internal::ploadu<P>(src + at));
    }
    return true;
  };
  using P = Eigen::internal::packet_traits<float>::type;
  using Half = typename Eigen::internal::unpacket_traits<P>::half;
  using Quarter = typename Eigen::internal::unpacket_traits<Half>::half;
  if (packets.template operator()<P>() || packets.template operator()<Half>() || packets.template operator()<Quarter>())
    return;
  for (std::int64_t j = 0; j < n; ++j) dst[j] = src[j];
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace rml::detail
