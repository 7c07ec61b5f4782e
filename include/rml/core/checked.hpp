// Checked int64 arithmetic for shapes and sizes: every product or sum of dimensions, strides and
// byte counts that an attacker can choose goes through these, so an overflow is an answer
// (nothing) instead of undefined behaviour.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>

namespace rml {

/// `a * b`, or nothing when it overflows int64.
[[nodiscard]] constexpr std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// `a + b`, or nothing when it overflows int64.
[[nodiscard]] constexpr std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// `a - b`, or nothing when it overflows int64.
[[nodiscard]] constexpr std::optional<std::int64_t> checked_sub(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// The product of the non-zero entries of `dims`, or nothing when one is negative or that product
/// overflows int64. Requiring it to fit even when another dimension is 0 means every partial
/// product of a valid shape (a stride, a merged run of dimensions) fits too.
[[nodiscard]] constexpr std::optional<std::int64_t> checked_extent(std::span<const std::int64_t> dims) noexcept {
  std::int64_t n = 1;
  for (std::int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (d == 0) continue;
    const auto m = checked_mul(n, d);
    if (!m) return std::nullopt;
    n = *m;
  }
  return n;
}

/// The product of `dims` (the element count of a shape), or nothing when checked_extent refuses.
[[nodiscard]] constexpr std::optional<std::int64_t> checked_product(std::span<const std::int64_t> dims) noexcept {
  const auto extent = checked_extent(dims);
  if (!extent) return std::nullopt;
  for (std::int64_t d : dims)
    if (d == 0) return 0;
  return extent;
}

/// `n` as a size_t when it is non-negative and fits (always on 64-bit targets).
[[nodiscard]] constexpr std::optional<std::size_t> to_size(std::int64_t n) noexcept {
  if (n < 0 || static_cast<std::uint64_t>(n) > std::numeric_limits<std::size_t>::max()) return std::nullopt;
  return static_cast<std::size_t>(n);
}

/// `a + b` over sizes, or nothing on overflow.
[[nodiscard]] constexpr std::optional<std::size_t> checked_add_size(std::size_t a, std::size_t b) noexcept {
  std::size_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace rml
