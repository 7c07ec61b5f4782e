// widen_n and narrow_n (kernels/convert16.hpp) against load() and store<T>(), which test_float16.cpp
// holds to NumPy: every f16 and bf16 pattern widened, and f32 patterns at a stride of 61 through all
// 2^32 (every exponent, both signs, subnormals, NaN payloads, ties) rounded, in runs whose lengths
// leave the vector loops a tail. Built twice, where the vector paths exist: -march=native
// (exec_native: AVX-512F on an AVX-512 machine) and AVX2 + F16C alone (exec_convert16_avx2). Not in
// the preset's own build: on baseline x86-64 widen_n and narrow_n are load() and store() themselves.
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "rml/exec/kernels/convert16.hpp"

using namespace rml;
using namespace rml::detail;

TEST_CASE_TEMPLATE("convert16: widen_n gives load()'s bits for every pattern", T, f16, bf16) {
  INFO("vector lanes in this build: ", kConvert16Lanes);
  std::vector<T> in(65536);
  for (std::uint32_t h = 0; h < 65536; ++h) in[h] = T::from_bits(static_cast<std::uint16_t>(h));
  for (std::int64_t len : {65536, 65535, 17, 15, 7, 1}) {  // whole vectors; tails; shorter than a vector
    std::vector<float> out(static_cast<std::size_t>(len) + 1, -1.0f);
    widen_n(in.data() + (65536 - len), out.data(), len);
    int mismatches = 0;
    for (std::int64_t i = 0; i < len; ++i) {
      const float want = load(in[static_cast<std::size_t>(65536 - len + i)]);
      if (std::bit_cast<std::uint32_t>(out[static_cast<std::size_t>(i)]) != std::bit_cast<std::uint32_t>(want) &&
          ++mismatches <= 5)
        FAIL_CHECK("pattern " << in[static_cast<std::size_t>(65536 - len + i)].bits);
    }
    CHECK(mismatches == 0);
    CHECK(out.back() == -1.0f);  // nothing written past the run
  }
}

TEST_CASE_TEMPLATE("convert16: narrow_n gives store()'s bits across the f32 patterns", T, f16, bf16) {
  INFO("vector lanes in this build: ", kConvert16Lanes);
  constexpr std::int64_t run = (1 << 20) + 13;
  std::vector<float> in(run);
  std::vector<T> out(run + 1);
  int mismatches = 0;
  std::uint64_t u = 0;
  while (u < (std::uint64_t{1} << 32)) {
    for (std::int64_t i = 0; i < run; ++i, u += 61) {
      const auto bits = static_cast<std::uint32_t>(u);
      std::memcpy(&in[static_cast<std::size_t>(i)], &bits, 4);
    }
    out.back() = T::from_bits(0x1234);
    narrow_n(in.data(), out.data(), run);
    for (std::int64_t i = 0; i < run; ++i) {
      const auto k = static_cast<std::size_t>(i);
      if (out[k].bits != store<T>(in[k]).bits && ++mismatches <= 5)
        FAIL_CHECK("input bits " << std::bit_cast<std::uint32_t>(in[k]));
    }
    CHECK(out.back().bits == 0x1234);
  }
  CHECK(mismatches == 0);
  // The values that decide the rounding, at every position of a vector.
  const std::vector<std::uint32_t> edges = {0x00000000u, 0x80000000u, 0x33000000u, 0x33000001u, 0x387fc000u,
                                            0x38800000u, 0x477fefffu, 0x477ff000u, 0x7f7fffffu, 0x7f800000u,
                                            0xff800000u, 0x7f800001u, 0x7fc00000u, 0xffbfffffu, 0x3f808000u,
                                            0x3f818000u, 0x00000001u, 0x807fffffu};
  std::vector<float> e(edges.size() * 17);
  for (std::size_t i = 0; i < e.size(); ++i) std::memcpy(&e[i], &edges[i % edges.size()], 4);
  std::vector<T> eo(e.size());
  narrow_n(e.data(), eo.data(), static_cast<std::int64_t>(e.size()));
  for (std::size_t i = 0; i < e.size(); ++i) CHECK(eo[i].bits == store<T>(e[i]).bits);
  // Runs shorter than a vector (masked loads and stores with AVX-512BW and VL, else copies on the
  // stack) and ones with a tail (the last vector again, overlapping), nothing written past the run.
  // The offsets step by 5 over the 18 repeating edges, so each edge lands at every place in a run.
  for (std::int64_t len : {1, 7, 15, 17}) {
    for (std::size_t at = 0; at + static_cast<std::size_t>(len) <= e.size(); at += 5) {
      std::vector<T> short_out(static_cast<std::size_t>(len) + 1, T::from_bits(0x1234));
      narrow_n(e.data() + at, short_out.data(), len);
      for (std::int64_t i = 0; i < len; ++i)
        CHECK(short_out[static_cast<std::size_t>(i)].bits == store<T>(e[at + static_cast<std::size_t>(i)]).bits);
      CHECK(short_out.back().bits == 0x1234);
    }
  }
}
