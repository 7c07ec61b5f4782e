// The 16-bit GEMM's SIMD micro-kernels (AVX-512 BF16 for bf16, AVX-512F's vcvtph2ps for f16) against
// the portable path, bit for bit. Built with -mavx512f -mavx512bf16 -mavx512vl -mavx512bw (and -mfma, which
// Eigen requires beside -mavx512f); on a CPU
// without AVX-512 BF16 the program exits 77, which CTest reports as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "gemm16_check.hpp"

using namespace gemm16_check;

static_assert(g16::has_simd<bf16> && g16::has_simd<f16>, "rml: this test must be built with AVX-512 BF16 flags");

TEST_CASE("gemm16 simd: VDPBF16PS gives the hand-computed lanes") {
  for (const DotCase& c : dot_cases()) {
    INFO(c.what);
    // One lane of a 1 x 1 micro-kernel: the pair in row 0 and in panel lane 0 (other lanes zero).
    std::uint16_t panel[32] = {};
    panel[0] = static_cast<std::uint16_t>(c.b & 0xffffu), panel[1] = static_cast<std::uint16_t>(c.b >> 16);
    std::uint32_t a = c.a;
    float acc[16] = {c.acc};
    g16::micro<bf16>(1, 1,
                     false)(g16::MicroArgs{reinterpret_cast<const std::byte*>(&a), 4, panel, 32, 1, acc, 16, true});
    CHECK(std::bit_cast<std::uint32_t>(acc[0]) == std::bit_cast<std::uint32_t>(c.want));
  }
}

TEST_CASE_TEMPLATE("gemm16 simd: the SIMD and portable paths give the same bits", T, bf16, f16) {
  const auto pool = rml::ThreadPool::create(2).value();
  unsigned seed = 1;
  for (std::int64_t m : {1, 3, 8, 13, 70}) {
    for (std::int64_t n : {1, 15, 32, 47, 300}) {
      for (std::int64_t k : {1, 2, 9, 64, 601}) {
        INFO("m ", m, " n ", n, " k ", k);
        const auto simd = product<T>(m, k, n, false, seed, pool.get(), 2);
        const auto portable = product<T>(m, k, n, true, seed, nullptr, 1);
        CHECK(simd == portable);
        ++seed;
      }
    }
  }
}

int main(int argc, char** argv) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512f")) {
    std::puts("skipped: this CPU lacks AVX-512 BF16");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
