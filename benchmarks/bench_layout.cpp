// What a blocked channel layout (NCHWc, c the SIMD width) would buy a 1x1 convolution, measured before
// building it (issue 14, item 2): ResNet-50's 1x1 convolutions on 56 x 56 and 28 x 28, at batch 1, one
// thread, through rml's own product as the executor runs them (conv.hpp: the weights packed, the
// input read in place as B, tiles of 512 positions) against a small NCHWc kernel written here (not
// a library path): x as [K / c][P][c], the weights as [O / 4c][K][4c], y as [O / c][P][c], a tile of
// kRows positions by four packets of output channels, one multiply-add per input channel in order.
//
// Each shape runs warm (its operands left in the caches by the run before) and cold (64 MB written
// first, then the input written as the step before it would): in a model, a step's input comes
// from the step before and its weights from memory. Both kernels alternate within each of three
// rounds; the figures are medians of the rounds' medians, the share of the FMA peak measured in the
// same run. The VMs this runs on are noisy: compare within a row.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "rml/exec/kernels/sgemm.hpp"

#include "bench_common.hpp"

namespace {

namespace sgemm = rml::detail::sgemm;
using Packet = sgemm::Packet;
using Floats = std::vector<float, Eigen::aligned_allocator<float>>;
constexpr std::int64_t kC = sgemm::kLanes;
/// Positions per tile: 6 x 4 accumulators and 4 weight packets fill AVX-512's 32 registers; half as
/// many where there are 16.
constexpr int kRows = sgemm::kMr / 2;

/// y[g] (output channels [4c g, 4c (g + 1))) at positions [p0, p0 + R).
template <int R>
void blocked_tile(const float* x, std::int64_t positions, std::int64_t depth, const float* w, float* y,
                  std::int64_t p0) {
  using Eigen::internal::pload;
  using Eigen::internal::pmadd;
  using Eigen::internal::pset1;
  using Eigen::internal::pstore;
  Packet acc[R][4];
  for (auto& row : acc)
    for (Packet& a : row) a = pset1<Packet>(0.0f);
  for (std::int64_t kb = 0; kb < depth / kC; ++kb) {
    const float* xb = x + (kb * positions + p0) * kC;
    const float* wb = w + kb * kC * 4 * kC;
    for (std::int64_t c = 0; c < kC; ++c) {
      const Packet w0 = pload<Packet>(wb + c * 4 * kC), w1 = pload<Packet>(wb + c * 4 * kC + kC),
                   w2 = pload<Packet>(wb + c * 4 * kC + 2 * kC), w3 = pload<Packet>(wb + c * 4 * kC + 3 * kC);
      RML_UNROLL
      for (int r = 0; r < R; ++r) {
        const Packet a = pset1<Packet>(xb[r * kC + c]);
        acc[r][0] = pmadd(a, w0, acc[r][0]);
        acc[r][1] = pmadd(a, w1, acc[r][1]);
        acc[r][2] = pmadd(a, w2, acc[r][2]);
        acc[r][3] = pmadd(a, w3, acc[r][3]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < 4; ++i) pstore(y + (i * positions + p0 + r) * kC, acc[r][i]);
}

void blocked_conv(const float* x, std::int64_t positions, std::int64_t depth, std::int64_t out, const float* w,
                  float* y) {
  for (std::int64_t g = 0; g < out / (4 * kC); ++g) {
    const float* wg = w + g * depth * 4 * kC;
    float* yg = y + g * 4 * positions * kC;
    std::int64_t p = 0;
    for (; p + kRows <= positions; p += kRows) blocked_tile<kRows>(x, positions, depth, wg, yg, p);
    for (; p < positions; ++p) blocked_tile<1>(x, positions, depth, wg, yg, p);
  }
}

struct Shape {
  const char* name;
  std::int64_t out, depth, positions;
};

}  // namespace

int main() {
  // ResNet-50's 1x1 convolutions that the executor runs through this product (planes above 256
  // positions; on 14 x 14 and 7 x 7 it runs them turned around, a different product).
  const Shape shapes[] = {{"layer1 256 -> 64, 56x56", 64, 256, 3136},
                          {"layer1 64 -> 256, 56x56", 256, 64, 3136},
                          {"layer2 512 -> 128, 28x28", 128, 512, 784},
                          {"layer2 128 -> 512, 28x28", 512, 128, 784}};
  const double peak = rml_bench::fma_peak(1);
  std::printf("1x1 convolutions, 1 thread, SIMD width %lld, FMA peak %.1f GFLOP/s; us, medians of 3 rounds\n\n",
              static_cast<long long>(kC), peak);
  std::printf("| shape | caches | rml NCHW in place | %%peak | NCHWc kernel | %%peak | in place / NCHWc | max rel diff |\n");
  std::printf("|---|---|--:|--:|--:|--:|--:|--:|\n");
  std::vector<float> junk(std::size_t{64} << 18);
  for (const Shape& s : shapes) {
    const std::int64_t o = s.out, k = s.depth, n = s.positions, cols = 512;
    if (o % (4 * kC) != 0 || k % kC != 0) {  // the NCHWc kernel takes whole blocks only
      std::printf("| %s | - | not a whole number of %lld-channel blocks | | | | | |\n", s.name,
                  static_cast<long long>(kC));
      continue;
    }
    Floats x(k * n), w(o * k), y(o * n), xc(k * n), wc(o * k), yc(o * n), packed(sgemm::packed_floats(o, k)),
        panel(sgemm::kPanelFloats);
    for (std::int64_t i = 0; i < k * n; ++i) x[i] = static_cast<float>(std::sin(0.1 * i));
    for (std::int64_t i = 0; i < o * k; ++i) w[i] = static_cast<float>(0.05 * std::cos(0.07 * i));
    for (std::int64_t c = 0; c < k; ++c)
      for (std::int64_t p = 0; p < n; ++p) xc[((c / kC) * n + p) * kC + c % kC] = x[c * n + p];
    for (std::int64_t r = 0; r < o; ++r)
      for (std::int64_t c = 0; c < k; ++c) wc[(r / (4 * kC)) * k * 4 * kC + c * 4 * kC + r % (4 * kC)] = w[r * k + c];
    sgemm::pack_a(w.data(), k, o, k, packed.data());
    const auto in_place = [&] {
      for (std::int64_t i0 = 0; i0 < n; i0 += cols)
        sgemm::multiply(packed.data(), k, sgemm::StridedRows{x.data() + i0, n}, std::min(cols, n - i0), y.data() + i0,
                        n, 0, o, false, panel.data());
    };
    const auto blocked = [&] { blocked_conv(xc.data(), n, k, o, wc.data(), yc.data()); };
    in_place(), blocked();
    double diff = 0;
    for (std::int64_t r = 0; r < o; ++r)
      for (std::int64_t p = 0; p < n; ++p) {
        const double a = y[r * n + p], b = yc[((r / kC) * n + p) * kC + r % kC];
        diff = std::max(diff, std::abs(a - b) / std::max(1e-3, std::abs(a)));
      }
    for (const bool cold : {false, true}) {
      const auto time = [&](const auto& f, Floats& input) {
        std::vector<double> t;
        for (int rep = 0; rep < 15; ++rep) {
          if (cold) {
            for (std::size_t i = 0; i < junk.size(); i += 16) junk[i] += 1.0f;
            for (std::size_t i = 0; i < input.size(); i += 16) input[i] += 0.0f;
          }
          const auto t0 = std::chrono::steady_clock::now();
          f();
          t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        }
        return rml_bench::median(t);
      };
      std::vector<double> a, b;
      for (int round = 0; round < 3; ++round) a.push_back(time(in_place, x)), b.push_back(time(blocked, xc));
      const double ta = rml_bench::median(a), tb = rml_bench::median(b), flop = 2.0 * o * k * n;
      std::printf("| %s | %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.1e |\n", s.name, cold ? "cold" : "warm", ta,
                  100 * flop / ta / 1e3 / peak, tb, 100 * flop / tb / 1e3 / peak, ta / tb, diff);
    }
  }
}
