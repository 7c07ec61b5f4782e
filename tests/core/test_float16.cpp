// rml::f16 and rml::bf16 conversions: f16 against NumPy's float16 (tests/data/float16, written by
// gen_float16.py) over every bit pattern and every tie, bf16 against a reference written from the
// format's definition in double arithmetic.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "rml/core/float16.hpp"
#include "rml/io/safetensors.hpp"

using namespace rml;

namespace {

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

/// The f32 inputs gen_float16.py derives: per positive finite f16 value, the midpoint to the next
/// value (65520 after the largest), then the f32 below it and the one above it.
std::vector<float> tie_inputs() {
  std::vector<float> v;
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {
    const float lo = static_cast<float>(f16::from_bits(static_cast<std::uint16_t>(h)));
    const float hi = h == 0x7bff ? 65536.0f : static_cast<float>(f16::from_bits(static_cast<std::uint16_t>(h + 1)));
    const float mid = (lo + hi) / 2;  // exact: 12 significant bits
    v.push_back(mid);
    v.push_back(std::nextafter(mid, 0.0f));
    v.push_back(std::nextafter(mid, INFINITY));
  }
  return v;
}

/// bf16 of x, rounded to nearest with ties to even, from the definition: 8 significant bits,
/// spacing 2^(e-8) for x in [2^(e-1), 2^e), never below 2^-133; at or past 2^128, infinity.
/// NaN: quiet, with the top 7 payload bits kept (rml's rule).
std::uint16_t bf16_reference(float x) {
  const std::uint32_t u = bits(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const double a = std::fabs(static_cast<double>(x));
  if (a == 0) return sign;
  if (std::isinf(a)) return sign | 0x7f80u;
  int e = 0;
  std::frexp(a, &e);
  const double q = std::ldexp(1.0, std::max(e - 8, -133));
  const double r = std::nearbyint(a / q) * q;  // the default rounding mode: ties to even
  if (r >= std::ldexp(1.0, 128)) return sign | 0x7f80u;
  return static_cast<std::uint16_t>(sign | (bits(static_cast<float>(r)) >> 16));
}

SafetensorsReader table() {
  return SafetensorsReader::open(std::filesystem::path(RML_TEST_DATA_DIR) / "float16" / "float16.safetensors").value();
}

}  // namespace

TEST_CASE("f16 -> f32 matches NumPy for all 65536 bit patterns, NaN payloads included") {
  const Tensor want = table().get("f16_to_f32").value();
  const auto w = want.span<float>();
  REQUIRE(w.size() == 65536);
  int mismatches = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float got = static_cast<float>(f16::from_bits(static_cast<std::uint16_t>(h)));
    if (bits(got) != bits(w[h]) && ++mismatches <= 5) FAIL_CHECK("pattern " << h);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("f32 -> f16 matches NumPy on every tie and its neighbours, and round-trips every pattern") {
  const Tensor want = table().get("f32_to_f16").value();
  const auto w = want.span<f16>();
  const std::vector<float> in = tie_inputs();
  REQUIRE(w.size() == in.size());
  int mismatches = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::uint16_t got = f16(in[i]).bits, neg = f16(-in[i]).bits;
    // NumPy rounds -x to -(x rounded): checked through the same table.
    if ((got != w[i].bits || neg != (w[i].bits | 0x8000u)) && ++mismatches <= 5)
      FAIL_CHECK("input " << in[i] << ": " << got << " != " << w[i].bits);
  }
  CHECK(mismatches == 0);
  // Every non-NaN pattern survives f16 -> f32 -> f16 (subnormals, zeros and infinities included).
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto b = static_cast<std::uint16_t>(h);
    if ((b & 0x7c00u) == 0x7c00u && (b & 0x03ffu)) continue;
    if (f16(static_cast<float>(f16::from_bits(b))).bits != b && ++mismatches <= 5) FAIL_CHECK("pattern " << h);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("f32 NaN -> f16: quiet, top payload bits kept (NumPy agrees on quiet NaNs)") {
  // rml sets the quiet bit as the hardware conversion (vcvtps2ph) does; NumPy keeps a signalling
  // NaN signalling, so only quiet NaNs are compared with it.
  const Tensor in = table().get("nan_in").value(), want = table().get("nan_to_f16").value();
  const auto x = in.span<float>();
  const auto w = want.span<f16>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    INFO("input bits ", bits(x[i]));
    CHECK(f16(x[i]).bits == w[i].bits);
  }
  const float signalling = std::bit_cast<float>(0x7f800001u);
  CHECK(f16(signalling).bits == 0x7e00u);
  CHECK(f16(std::bit_cast<float>(0xff802000u)).bits == 0xfe01u);
}

TEST_CASE("bf16 conversions match a reference from the format's definition") {
  // bf16 -> f32 is the top half: every pattern.
  for (std::uint32_t h = 0; h < 65536; ++h)
    REQUIRE(bits(static_cast<float>(bf16::from_bits(static_cast<std::uint16_t>(h)))) == h << 16);
  // f32 -> bf16 on every tie between consecutive bf16 values and the f32 on either side of it,
  // both signs, then on a million f32 patterns from a fixed generator.
  int mismatches = 0;
  auto check = [&](std::uint32_t u) {
    const float x = std::bit_cast<float>(u);
    if (bf16(x).bits != bf16_reference(x) && ++mismatches <= 5)
      FAIL_CHECK("input bits " << u << ": " << bf16(x).bits << " != " << bf16_reference(x));
  };
  for (std::uint32_t h = 0; h < 0x7f80; ++h)
    for (std::uint32_t s : {0u, 0x80000000u})
      for (std::uint32_t d : {0x7fffu, 0x8000u, 0x8001u}) check(s | ((h << 16) + d));
  std::uint64_t state = 0x2545F4914F6CDD1Dull;
  for (int i = 0; i < 1000000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    check(static_cast<std::uint32_t>(state >> 32));
  }
  CHECK(mismatches == 0);
  CHECK(bf16(std::bit_cast<float>(0x7f800001u)).bits == 0x7fc0u);  // a signalling NaN is quieted
}
