// Helpers the benchmarks share: the median of timings and one core's (or several cores') measured f32
// FMA peak, the figure each benchmark's share of the peak is against. Header-only, for the
// benchmark programs (-O3 -march=native); not part of the library.
#pragma once

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

namespace rml_bench {

/// The median of `v` (the mean of the middle two for an even count; 0 when empty).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// ---- FMA peak ---------------------------------------------------------------------------------------------

constexpr int kChains = 16;  // independent accumulators: more than latency x throughput (4 x 2) of any FMA unit

#if defined(__AVX512F__)
constexpr const char* kVectorName = "AVX-512 (16 floats)";
constexpr int kLanes = 16;
#elif defined(__AVX2__) && defined(__FMA__)
constexpr const char* kVectorName = "AVX2 (8 floats)";
constexpr int kLanes = 8;
#else
constexpr const char* kVectorName = "scalar std::fma";
constexpr int kLanes = 1;
#endif

/// `iterations` rounds of kChains independent FMAs on kLanes floats; returns a sum so nothing is elided.
__attribute__((noinline)) inline float fma_chains(long iterations) {
#if defined(__AVX512F__)
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(0.01f * static_cast<float>(i));
  const __m512 m = _mm512_set1_ps(0.999f), a = _mm512_set1_ps(0.001f);
  for (long it = 0; it < iterations; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
#elif defined(__AVX2__) && defined(__FMA__)
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(0.01f * static_cast<float>(i));
  const __m256 m = _mm256_set1_ps(0.999f), a = _mm256_set1_ps(0.001f);
  for (long it = 0; it < iterations; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
  __m256 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float t = 0;
  for (float x : lanes) t += x;
  return t;
#else
  float acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = 0.01f * static_cast<float>(i);
  for (long it = 0; it < iterations; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = std::fma(acc[i], 0.999f, 0.001f);
  float t = 0;
  for (float x : acc) t += x;
  return t;
#endif
}

/// GFLOP/s of `threads` threads running fma_chains at once: the best of 10 tries (about 0.1 s each at one thread).
inline double fma_peak(int threads) {
  constexpr long kIterations = 20'000'000;
  double best = 0;
  volatile float sink = 0;
  for (int attempt = 0; attempt < 10; ++attempt) {
    std::vector<float> sums(static_cast<std::size_t>(threads));
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    for (int t = 1; t < threads; ++t) workers.emplace_back([&sums, t] { sums[t] = fma_chains(kIterations); });
    sums[0] = fma_chains(kIterations);
    for (auto& w : workers) w.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (float s : sums) sink = sink + s;
    const double flops = 2.0 * kChains * kLanes * static_cast<double>(kIterations) * threads;
    best = std::max(best, flops / seconds * 1e-9);
  }
  return best;
}

}  // namespace rml_bench
