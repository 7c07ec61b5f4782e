// The two 16-bit float storage types: IEEE binary16 (`f16`) and bfloat16 (`bf16`).
//
// Both are storage only. rml computes on them in f32 and rounds each result back to the storage
// type, to nearest with ties to even, as PyTorch's CPU kernels do. The conversions below are
// exact integer code, so every build (any -march, any compiler) rounds the same way; a kernel
// that uses F16C or AVX-512 BF16 instructions must agree with them bit for bit.
#pragma once

#include <bit>
#include <cstdint>

namespace rml {

/// IEEE 754 binary16: 1 sign bit, 5 exponent bits, 10 mantissa bits.
struct f16 {
  std::uint16_t bits = 0;

  constexpr f16() noexcept = default;
  /// The nearest binary16 to `x` (ties to even); out of range gives ±inf, NaN stays NaN.
  constexpr explicit f16(float x) noexcept : bits(from_float(x)) {}
  constexpr explicit operator float() const noexcept { return to_float(bits); }

  static constexpr f16 from_bits(std::uint16_t b) noexcept {
    f16 h;
    h.bits = b;
    return h;
  }
  static constexpr std::uint16_t from_float(float x) noexcept;
  static constexpr float to_float(std::uint16_t h) noexcept;
};

/// bfloat16: the top half of an f32 (1 sign bit, 8 exponent bits, 7 mantissa bits).
struct bf16 {
  std::uint16_t bits = 0;

  constexpr bf16() noexcept = default;
  /// The nearest bfloat16 to `x` (ties to even); NaN stays NaN (quiet).
  constexpr explicit bf16(float x) noexcept : bits(from_float(x)) {}
  constexpr explicit operator float() const noexcept { return to_float(bits); }

  static constexpr bf16 from_bits(std::uint16_t b) noexcept {
    bf16 h;
    h.bits = b;
    return h;
  }
  static constexpr std::uint16_t from_float(float x) noexcept {
    const auto u = std::bit_cast<std::uint32_t>(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
    // Adding 0x7fff plus the kept low bit rounds to nearest, ties to even; a carry into the
    // exponent is the correct rounding (up to inf for the largest finite values).
    return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  static constexpr float to_float(std::uint16_t h) noexcept {
    return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
  }
};

static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2, "rml: 16-bit floats must be 2 bytes");

constexpr std::uint16_t f16::from_float(float x) noexcept {
  const auto u = std::bit_cast<std::uint32_t>(x);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u)  // inf, or NaN kept quiet with its top payload bits
    return static_cast<std::uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x0200u | ((a >> 13) & 0x03ffu) : 0u));
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (a >= 0x38800000u) {                                                   // normal: >= 2^-14
    // Rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest, ties to even.
    const std::uint32_t r = a - 0x38000000u + 0x0fffu + ((a >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (r >> 13));
  }
  // Subnormal result: the value in units of 2^-24 is the 24-bit significand shifted right by
  // 126 - exponent; round what is shifted out to nearest, ties to even.
  const std::uint32_t e = a >> 23;
  if (e < 102) return sign;  // below 2^-25: rounds to zero (2^-25 itself is a tie, to even 0)
  const std::uint32_t full = (a & 0x007fffffu) | 0x00800000u;
  const std::uint32_t shift = 126 - e;  // 14..24
  std::uint32_t q = full >> shift;
  const std::uint32_t rest = full & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u))) ++q;
  return static_cast<std::uint16_t>(sign | q);
}

constexpr float f16::to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x03ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in f32
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) | sign);
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

}  // namespace rml
