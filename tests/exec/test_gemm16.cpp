// The 16-bit GEMM's portable path: VDPBF16PS's semantics by hand (the SIMD path is held to the
// same bits in tests/exec/simd/), and every micro-tile shape against a float64 reference.
#include <doctest/doctest.h>

#include <cmath>

#include "gemm16_check.hpp"

using namespace gemm16_check;

TEST_CASE("gemm16: dot_pair computes VDPBF16PS (odd element first, one FMA each, DAZ and FTZ)") {
  for (const DotCase& c : dot_cases()) {
    INFO(c.what);
    CHECK(std::bit_cast<std::uint32_t>(g16::dot_pair(c.acc, c.a, c.b)) == std::bit_cast<std::uint32_t>(c.want));
  }
}

TEST_CASE_TEMPLATE("gemm16: every micro-tile shape, odd depth and k blocks match float64", T, bf16, f16) {
  // Rows 1..kMr+3 and columns 1..2 panels + 1 cover every micro-kernel and partial panel; depth 601
  // has 301 bf16 steps, past one block of 256.
  for (std::int64_t m : {1, 5, 8, 11}) {
    for (std::int64_t n : {1, 16, 17, 33}) {
      for (std::int64_t k : {1, 2, 7, 601}) {
        INFO("m ", m, " n ", n, " k ", k);
        std::mt19937 rng(7);
        std::normal_distribution<float> normal;
        std::vector<std::uint16_t> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
        for (auto& v : a) v = T(normal(rng)).bits;
        for (auto& v : b) v = T(normal(rng)).bits;
        const auto panels = g16::pack_panels<T>(b.data(), k, n, false);
        const std::int64_t steps = g16::steps_of<T>(k);
        g16::Product<T> p;
        p.rows = {a.data(), k};
        p.m = m, p.k = k, p.n = n, p.nb = 1;  // one panel a column block: the most blocks
        std::vector<T> out(static_cast<std::size_t>(m * n));
        p.out = out.data(), p.ldo = n, p.portable = true;
        std::vector<std::byte> scratch(g16::thread_scratch<T>(steps, 1, false));
        const std::int64_t stride = g16::panel_u16<T>(steps);
        g16::run(
            p, [&](std::int64_t j0, std::int64_t, std::uint16_t*) { return panels.data() + j0 * stride; }, false,
            scratch.data(), 1, nullptr);
        int bad = 0;
        for (std::int64_t r = 0; r < m; ++r)
          for (std::int64_t c = 0; c < n; ++c) {
            double want = 0;
            for (std::int64_t i = 0; i < k; ++i)
              want += static_cast<double>(static_cast<float>(T::from_bits(a[static_cast<std::size_t>(r * k + i)]))) *
                      static_cast<float>(T::from_bits(b[static_cast<std::size_t>(i * n + c)]));
            const double got = static_cast<float>(out[static_cast<std::size_t>(r * n + c)]);
            const double ulp = std::is_same_v<T, bf16> ? 0x1p-8 : 0x1p-11;
            if (std::abs(got - want) > ulp * std::abs(want) + 1e-5 * std::sqrt(double(k)) * (1 + std::abs(want))) ++bad;
          }
        CHECK(bad == 0);
      }
    }
  }
}
