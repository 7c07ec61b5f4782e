// Shared by the 16-bit GEMM tests: hand-computed VDPBF16PS cases, and a product run through either
// micro-kernel (portable or SIMD) on the same operands.
#pragma once

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "rml/exec/kernels/gemm16.hpp"

namespace gemm16_check {

using namespace rml;
using namespace rml::detail;

inline std::uint16_t bf(float x) { return bf16(x).bits; }  // exact for the values used here
inline std::uint32_t pair(std::uint16_t even, std::uint16_t odd) { return even | (std::uint32_t{odd} << 16); }

/// One VDPBF16PS lane computed by hand: (accumulator, a pair, b pair, the instruction's result).
struct DotCase {
  const char* what;
  float acc;
  std::uint32_t a, b;
  float want;
};
inline std::vector<DotCase> dot_cases() {
  return {
      // Odd element first: 1 + 2^24 rounds to 2^24 (tie to even), + 1 again to 2^24. Even first
      // would give 1 + 1 + 2^24 = 2^24 + 2.
      {"odd element first", 1.0f, pair(bf(1.0f), bf(1.0f)), pair(bf(1.0f), bf(16777216.0f)), 16777216.0f},
      // One FMA per element: 3 * (1 + 2^-7) exact is 3 + 3 * 2^-7, added to 2^24 rounds once.
      {"each product fused", 0.0f, pair(0, bf(1.0078125f)), pair(0, bf(3.0f)), 3.0234375f},
      // A denormal bf16 input (2^-133) reads as zero: 2^100 * 2^-133 would be 2^-33.
      {"denormal input read as zero", 0.0f, pair(0, bf(0x1p100f)), pair(0, 0x0001), 0.0f},
      // A denormal product (2^-70 * 2^-70 = 2^-140) is flushed to zero.
      {"denormal result flushed", 0.0f, pair(0, bf(0x1p-70f)), pair(0, bf(0x1p-70f)), 0.0f},
      // The first product (odd: 2^-70 * 2^-70 = 2^-140) is flushed before the second (2^-126) is
      // added: 2^-126, where an unflushed 2^-140 would survive in 2^-126 + 2^-140.
      {"first result flushed before the second product", 0.0f, pair(bf(0x1p-63f), bf(0x1p-70f)),
       pair(bf(0x1p-63f), bf(0x1p-70f)), 0x1p-126f},
      // A denormal accumulator reads as zero.
      {"denormal accumulator read as zero", 0x1p-140f, 0, 0, 0.0f},
      // Normal values pass: 2^-63 * 2^-63 = 2^-126, the smallest normal.
      {"smallest normal kept", 0.0f, pair(bf(0x1p-63f), 0), pair(bf(0x1p-63f), 0), 0x1p-126f},
  };
}

/// Random 16-bit operands for an m x k by k x n product of T, some of them tiny (denormal
/// products, for bf16) so the flush is exercised, and the product through `portable` or not.
template <typename T>
std::vector<std::uint16_t> product(std::int64_t m, std::int64_t k, std::int64_t n, bool portable, unsigned seed,
                                   const ThreadPool* pool = nullptr, int threads = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  const auto value = [&](std::int64_t i) {
    float v = normal(rng);
    if (std::is_same_v<T, bf16> && i % 7 == 3) v *= 0x1p-70f;  // products below 2^-126
    return T(v).bits;
  };
  std::vector<std::uint16_t> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = value(static_cast<std::int64_t>(i));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = value(static_cast<std::int64_t>(i) + 1);
  const std::vector<std::uint16_t> panels = g16::pack_panels<T>(b.data(), k, n, false);
  const std::int64_t steps = g16::steps_of<T>(k), npanels = (n + 15) / 16;
  g16::Product<T> p;
  p.rows = {a.data(), k};
  p.m = m, p.k = k, p.n = n, p.nb = g16::column_block<T>(steps, npanels);
  std::vector<T> out(static_cast<std::size_t>(m * n));
  p.out = out.data(), p.ldo = n, p.portable = portable;
  std::vector<std::byte> scratch(static_cast<std::size_t>(threads) * g16::thread_scratch<T>(steps, p.nb, false));
  const std::int64_t stride = g16::panel_u16<T>(steps);
  g16::run(
      p, [&](std::int64_t j0, std::int64_t, std::uint16_t*) { return panels.data() + j0 * stride; }, false,
      scratch.data(), threads, pool);
  std::vector<std::uint16_t> bits;
  for (T v : out) bits.push_back(v.bits);
  return bits;
}

}  // namespace gemm16_check
