// The main of exec_convert16_avx2: convert16_check.cpp built with -mavx2 -mf16c (widen_n and
// narrow_n's 8-lane path, which a build for an AVX-512 machine never takes), skipped (exit 77)
// on a CPU without those instructions.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "rml/exec/kernels/convert16.hpp"

static_assert(rml::detail::kConvert16Lanes == 8, "rml: this test must be built with AVX2 and F16C, without AVX-512");

int main(int argc, char** argv) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("f16c")) {
    std::puts("skipped: this CPU lacks AVX2 or F16C");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
