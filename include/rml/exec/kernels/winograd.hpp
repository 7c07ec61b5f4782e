// Winograd F(2x2, 3x3) and F(4x4, 3x3) conv2d: 3x3 kernel, stride 1, no dilation, one group, constant weights.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "rml/exec/conv_algorithm.hpp"
#include "rml/exec/kernels/common.hpp"
#include "rml/exec/kernels/convert16.hpp"
#include "rml/exec/kernels/elementwise.hpp"
#include "rml/exec/kernels/matmul.hpp"
#include "rml/exec/kernels/sgemm.hpp"
#include "rml/exec/kernels/transpose.hpp"

namespace rml::detail {

// Each m x m block of output positions (a tile, m = 2 or 4) is computed from the (m + 2)^2 block of
// input around it: Y = A^T [ sum over channels of (G g G^T) . (B^T d B) ] A (Lavin and Gray, 2015).
// The weights' transform U = G g G^T is made once, at Executor::create. A run transforms its input
// tiles, V = B^T d B, then for each element e of the (m + 2)^2 domain multiplies
// M_e[o, tiles] = U_e[o, c] V_e[c, tiles] (rml's GEMM over U_e packed at create), and transforms M back
// with A^T, adding the bias and the fused activations before the tile is stored. Per output position
// that is (m + 2)^2 / m^2 products of c multiply-adds instead of 9: 2.25x fewer for F(2, 3), 4x for
// F(4, 3), bought with the transforms' extra work and a larger rounding error; F(4, 3)'s can exceed the
// conformance tolerance (docs/ops.md), so F(2, 3) is the default (rml::Winograd).
//
// The transforms run over kLanes tiles at a time, each value a short array across the tiles, so they
// vectorise along the tiles. When a pass holds few tiles, so that whole GEMM panels of them would
// compute a tenth or more past the last tile (a 14 x 14 plane's 49 tiles in 64 columns), the
// products run turned around: M_e^T = V_e^T U_e^T, a row per tile, read in place from V, over panels
// of output channels, then transposed into M. A run takes its tiles in chunks whose transformed
// input and products fill up to four times L2; at several threads each thread takes a range of
// chunks, or, with too few tiles for that, every thread transforms each chunk's input and runs the
// products and outputs of a range of output channels. At 1 thread, a turned pass whose element blocks
// of V overflow L1 runs as two ranges in turn when each range's blocks fit.

/// The transforms of F(m x m, 3 x 3). Each 1-D transform works over kLanes tiles: `x` holds its
/// rows of kLanes values, `xs` floats apart; `r` receives the result rows, `rs` apart.
template <int M>
struct WinogradTransforms;

template <>
struct WinogradTransforms<2> {
  static constexpr double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  /// r = B^T x (4 rows in, 4 out).
  template <std::int64_t L>
  static void input(const float* x, std::int64_t xs, float* r, std::int64_t rs) noexcept {
    for (std::int64_t l = 0; l < L; ++l) {
      const float d0 = x[l], d1 = x[xs + l], d2 = x[2 * xs + l], d3 = x[3 * xs + l];
      r[l] = d0 - d2;
      r[rs + l] = d1 + d2;
      r[2 * rs + l] = d2 - d1;
      r[3 * rs + l] = d1 - d3;
    }
  }
  /// r = A^T x (4 rows in, 2 out).
  template <std::int64_t L>
  static void output(const float* x, std::int64_t xs, float* r, std::int64_t rs) noexcept {
    for (std::int64_t l = 0; l < L; ++l) {
      const float m1 = x[xs + l], m2 = x[2 * xs + l];
      r[l] = x[l] + m1 + m2;
      r[rs + l] = m1 - m2 - x[3 * xs + l];
    }
  }
};

template <>
struct WinogradTransforms<4> {
  static constexpr double G[6][3] = {{1.0 / 4, 0, 0},
                                     {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                     {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                     {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                     {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                     {0, 0, 1}};
  /// r = B^T x (6 rows in, 6 out).
  template <std::int64_t L>
  static void input(const float* x, std::int64_t xs, float* r, std::int64_t rs) noexcept {
    for (std::int64_t l = 0; l < L; ++l) {
      const float d0 = x[l], d1 = x[xs + l], d2 = x[2 * xs + l], d3 = x[3 * xs + l], d4 = x[4 * xs + l],
                  d5 = x[5 * xs + l];
      r[l] = 4.0f * d0 - 5.0f * d2 + d4;
      r[rs + l] = -4.0f * (d1 + d2) + d3 + d4;
      r[2 * rs + l] = 4.0f * (d1 - d2) - d3 + d4;
      r[3 * rs + l] = 2.0f * (d3 - d1) - d2 + d4;
      r[4 * rs + l] = 2.0f * (d1 - d3) - d2 + d4;
      r[5 * rs + l] = 4.0f * d1 - 5.0f * d3 + d5;
    }
  }
  /// r = A^T x (6 rows in, 4 out).
  template <std::int64_t L>
  static void output(const float* x, std::int64_t xs, float* r, std::int64_t rs) noexcept {
    for (std::int64_t l = 0; l < L; ++l) {
      const float m0 = x[l], m1 = x[xs + l], m2 = x[2 * xs + l], m3 = x[3 * xs + l], m4 = x[4 * xs + l],
                  m5 = x[5 * xs + l];
      const float s12 = m1 + m2, d12 = m1 - m2, s34 = m3 + m4, d34 = m3 - m4;
      r[l] = m0 + s12 + s34;
      r[rs + l] = d12 + 2.0f * d34;
      r[2 * rs + l] = s12 + 4.0f * s34;
      r[3 * rs + l] = d12 + 8.0f * d34 + m5;
    }
  }
};

struct WinogradWeights {
  static constexpr std::int64_t kLanes = 16;       ///< tiles each transform runs over at once
  static constexpr std::int64_t kMostChunk = 256;  ///< tiles a pass holds at most

  std::int64_t m = 4;                                ///< output positions per tile side: 2 or 4
  std::int64_t elems = 36;                           ///< elements of the transformed domain, (m + 2)^2
  std::int64_t c = 0, o = 0;                         ///< input and output channels
  std::int64_t tiles_h = 0, tiles_w = 0, tiles = 0;  ///< per image
  std::int64_t total = 0;                            ///< tiles over the batch
  std::int64_t chunk = 0;                            ///< tiles per pass, a multiple of kLanes and sgemm::kNr
  std::int64_t parts = 1;                            ///< tile ranges, run in parallel (at 1 thread in turn)
  std::int64_t threads = 1;                          ///< threads the run was planned for
  bool turned = false;                               ///< products turned around (winograd_products)
  /// Per element e: U_e (row-major [o, c]) packed by sgemm::pack_a, or when turned U_e^T ([c, o]) in
  /// panels of output channels by sgemm::pack_b.
  std::vector<float, Eigen::aligned_allocator<float>> u;
  /// When turned: depth step k's row of an element's V block, k * chunk, as the products read V in place.
  std::vector<std::int64_t> v_rows;

  [[nodiscard]] std::int64_t u_floats() const noexcept {
    return turned ? sgemm::packed_b_floats(c, o) : sgemm::packed_floats(o, c);
  }
  [[nodiscard]] const float* u_of(std::int64_t e) const noexcept { return u.data() + e * u_floats(); }
  /// Floats from one element's [c, chunk] block of V to the next's, and from one [o, chunk] block of
  /// M to the next's: one cache line more than the block. A transform stores (or loads) one tile
  /// group of every element at once; at the block's own size, a multiple of 4 KB for power-of-two
  /// channels, those 16 or 36 lines all fell in one set of L1 and evicted each other.
  [[nodiscard]] std::int64_t v_step() const noexcept { return c * chunk + 16; }
  [[nodiscard]] std::int64_t m_step() const noexcept { return o * chunk + 16; }
  /// Scratch floats per part: the transformed input V [elems, c, chunk] and the products
  /// M [elems, o, chunk], each 64-byte aligned, their elements v_step() and m_step() apart. Rows are
  /// `chunk` long, whole GEMM panels, so the products run over whole panels even for a chunk's last
  /// tiles.
  [[nodiscard]] std::int64_t v_floats() const noexcept { return elems * v_step(); }
  [[nodiscard]] std::int64_t m_floats() const noexcept { return elems * m_step(); }
  /// When turned, the sums of one panel of output channels over a pass's tiles, [chunk, kNr].
  [[nodiscard]] std::int64_t t_floats() const noexcept { return turned ? chunk * sgemm::kNr : 0; }
  /// Floats of one part's scratch: V, M and the turned sums.
  [[nodiscard]] std::int64_t part_floats() const noexcept { return v_floats() + m_floats() + t_floats(); }
  /// Parts' scratch a run holds: one per tile range (one for all at 1 thread, which runs them in
  /// turn), or, with too few tiles for a range per thread, one per thread that takes output channels
  /// of each chunk (winograd_conv2d_m).
  [[nodiscard]] std::int64_t copies() const noexcept {
    return std::max(threads > 1 ? parts : 1, std::min(threads, o_blocks()));
  }
  /// Output channels the products take as one unit: a row block of U_e, or a panel when turned.
  [[nodiscard]] std::int64_t o_unit() const noexcept { return turned ? sgemm::kNr : sgemm::kMr; }
  /// Units of output channels, what the small-plane split hands each thread.
  [[nodiscard]] std::int64_t o_blocks() const noexcept { return (o + o_unit() - 1) / o_unit(); }
  /// Bytes of one part's scratch (PartScratch): a run has no other.
  [[nodiscard]] std::size_t part_bytes() const noexcept {
    return static_cast<std::size_t>(part_floats()) * sizeof(float);
  }
};

/// Whether conv2d plan `p` can run through Winograd (its shape; whether it pays is winograd_pays).
inline bool winograd_applies(const Conv2dPlan& p) noexcept {
  return p.kh == 3 && p.kw == 3 && p.stride_h == 1 && p.stride_w == 1 && p.dilation_h == 1 && p.dilation_w == 1 &&
         p.groups == 1 && p.oh > 0 && p.ow > 0 && p.c > 0 && p.o > 0;
}

/// Whether Winograd with m x m tiles is expected to beat the packed direct path for `p`: channels
/// enough for the products to outweigh the transforms (at least 48 in and out for F(2, 3), 32 for
/// F(4, 3)), tiles that cover at most 1.8x the output plane (rounding up to whole tiles), and at
/// least 16 tiles, which fill at least two thirds of the GEMM panels they are rounded up to (the
/// products run over whole panels of sgemm::kNr tiles). The thresholds come from timing single
/// convolutions (docs/ops.md).
inline bool winograd_pays(const Conv2dPlan& p, std::int64_t m) noexcept {
  const std::int64_t min_channels = m == 2 ? 48 : 32;
  if (!winograd_applies(p) || p.c < min_channels || p.o < min_channels) return false;
  const std::int64_t th = (p.oh + m - 1) / m, tw = (p.ow + m - 1) / m, total = p.n * th * tw;
  const std::int64_t panels = (total + sgemm::kNr - 1) / sgemm::kNr * sgemm::kNr;
  return m * m * th * tw * 10 <= p.oh * p.ow * 18 && total >= 16 && 2 * panels <= 3 * total;
}

/// U = G g G^T of one 3x3 kernel `g` (row-major), in double, as (m + 2)^2 values `u` (row-major).
template <int M>
void winograd_weight_tile(const float* g, double* u) noexcept {
  constexpr int S = M + 2;
  const auto& G = WinogradTransforms<M>::G;
  double t[S][3];  // G g
  for (int i = 0; i < S; ++i)
    for (int j = 0; j < 3; ++j) t[i][j] = G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j];
  for (int i = 0; i < S; ++i)
    for (int j = 0; j < S; ++j) u[i * S + j] = t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2];
}

/// Transforms conv2d weights `w` ([o, c, 3, 3]) into F(m x m, 3 x 3) weights for runs of plan `p` on
/// `threads` threads.
template <int M>
std::shared_ptr<const WinogradWeights> pack_winograd_weights(const Conv2dPlan& p, const float* w, int threads) {
  using W = WinogradWeights;
  constexpr std::int64_t S = M + 2, E = S * S;
  auto ww = std::make_shared<W>();
  ww->m = M, ww->elems = E;
  ww->c = p.c, ww->o = p.o;
  ww->tiles_h = (p.oh + M - 1) / M, ww->tiles_w = (p.ow + M - 1) / M;
  ww->tiles = ww->tiles_h * ww->tiles_w;
  ww->total = p.n * ww->tiles;
  ww->threads = std::max(threads, 1);
  // Chunks whose V and M fill up to four times L2 (a product needs only its element's blocks of them
  // near, and each chunk reads all of U once: a 128-channel 28x28 layer took 737-750 us in chunks
  // that fill L2 and 682-701 us in one), but at least 64 tiles so a product has columns enough for
  // whole panels and each pass over U_e (read from further away when the channels are many) pays.
  const auto l2 = static_cast<std::int64_t>(Eigen::l2CacheSize());
  std::int64_t chunk = 4 * l2 / (static_cast<std::int64_t>(sizeof(float)) * E * (p.c + p.o));
  chunk = std::clamp<std::int64_t>(chunk / W::kLanes * W::kLanes, 64, W::kMostChunk);
  // At several threads, one range of tiles per thread when each gets at least 24; fewer run the
  // small-plane split (winograd_conv2d_m). ResNet-50's 256-channel layers on 14 x 14 (49 tiles)
  // took 625-739 us at 2 threads that way, 546-607 in ranges of 24 and 25 tiles, each thread
  // transforming only its own tiles and reading the input rows its core wrote (ResNet-18 at 64 x 64,
  // whose 16 x 16 planes hold 64 tiles, 2.09-2.14 -> 1.91-1.93 ms in one alternation, within the
  // noise, 2.73-2.80 -> 2.64-2.85, in a slower phase).
  if (ww->threads > 1 && ww->total >= 24 * ww->threads) {
    ww->parts = ww->threads;
    chunk = std::min(chunk, (ww->total + ww->parts - 1) / ww->parts);
  }
  chunk = std::min(chunk, ww->total);
  // Turned around when sgemm::multiply's whole panels of tiles (a last one of one packet where that
  // covers the rest) would compute more than 1/0.9 times the pass's tiles: the turned product
  // computes every tile once and rounds the output channels up to a panel instead. (At 6 % waste, a
  // 28 x 28 plane's 196 tiles in 208 columns at 1 thread, the turned product measured 2-3 % slower.)
  const auto computed = [](std::int64_t n) {
    const std::int64_t rest = n % sgemm::kNr;
    return n - rest + (rest == 0 ? 0 : rest <= sgemm::kLanes ? sgemm::kLanes : sgemm::kNr);
  };
  const std::int64_t o_panels = (p.o + sgemm::kNr - 1) / sgemm::kNr * sgemm::kNr;
  const auto turned_for = [&](std::int64_t n) { return 10 * n * o_panels < 9 * computed(n) * p.o; };
  constexpr std::int64_t step = std::max(W::kLanes, sgemm::kNr);
  const auto rounded = [](std::int64_t n) { return (n + step - 1) / step * step; };
  ww->turned = turned_for(chunk);
  // At 1 thread, a turned pass over every tile whose element blocks of V overflow L1 runs as two
  // tile ranges in turn when each range's block fits: the turned products read an element's V block
  // once per panel of output channels, so it is read from L1 instead of L2. ResNet-18's three
  // 256-channel 14 x 14 layers (49 tiles: a 64 KB block at 1 thread, 32 KB in ranges of 24 and 25)
  // took 0.91-0.94 of their time that way, the whole model 0.991 (median of seven alternations,
  // 0.984-1.013; ResNet-50 0.994; docs/ops.md).
  const auto v_block = [&](std::int64_t n) { return static_cast<std::int64_t>(sizeof(float)) * p.c * rounded(n); };
  const auto l1 = static_cast<std::int64_t>(Eigen::l1CacheSize());
  const std::int64_t half = (ww->total + 1) / 2;
  if (ww->threads == 1 && ww->turned && chunk == ww->total && v_block(chunk) > l1 && v_block(half) <= l1 &&
      turned_for(half)) {
    ww->parts = 2;
    chunk = half;
  }
  ww->chunk = rounded(chunk);
  if (ww->turned) {
    ww->v_rows.resize(static_cast<std::size_t>(p.c));
    for (std::int64_t k = 0; k < p.c; ++k) ww->v_rows[static_cast<std::size_t>(k)] = k * ww->chunk;
  }

  // U_e as row-major [o, c] per element (= U_e^T column-major [c, o]), then packed.
  std::vector<float> u(static_cast<std::size_t>(E * p.c * p.o));
  double tile[E];
  for (std::int64_t oc = 0; oc < p.o; ++oc)
    for (std::int64_t ci = 0; ci < p.c; ++ci) {
      winograd_weight_tile<M>(w + (oc * p.c + ci) * 9, tile);
      for (std::int64_t e = 0; e < E; ++e)
        u[static_cast<std::size_t>((e * p.o + oc) * p.c + ci)] = static_cast<float>(tile[e]);
    }
  ww->u.resize(static_cast<std::size_t>(E * ww->u_floats()));
  for (std::int64_t e = 0; e < E; ++e) {
    const float* ue = u.data() + e * p.o * p.c;
    if (ww->turned)
      sgemm::pack_b(ue, 1, p.c, p.c, p.o, ww->u.data() + e * ww->u_floats());
    else
      sgemm::pack_a(ue, p.c, p.o, p.c, ww->u.data() + e * ww->u_floats());
  }
  return ww;
}

/// A group of up to kLanes consecutive tiles of one tile row: its image, its top-left output
/// position, and how many tiles it holds. Groups start at `t` and never cross a tile row, so their
/// input and output rows are contiguous runs.
struct WinogradGroup {
  std::int64_t count = 0, image = 0, oy = 0, ox = 0;
  WinogradGroup(const WinogradWeights& ww, std::int64_t t, std::int64_t most) noexcept {
    const std::int64_t r = t % ww.tiles, tx = r % ww.tiles_w;
    image = t / ww.tiles, oy = r / ww.tiles_w * ww.m, ox = tx * ww.m;
    count = std::min({WinogradWeights::kLanes, most, ww.tiles_w - tx});
  }
};

/// Input channels [c0, c1) of chunk tiles [t0, t0 + nt) into v ([elems, c, chunk], tile t at t - t0).
/// `x` holds f32, or f16 (or bf16) widened as each row is read.
template <int M, typename T>
void winograd_input(const Conv2dPlan& p, const WinogradWeights& ww, const T* x, std::int64_t t0, std::int64_t nt,
                    std::int64_t c0, std::int64_t c1, float* v) {
  using X = WinogradTransforms<M>;
  constexpr std::int64_t L = WinogradWeights::kLanes, S = M + 2, W = M * L + 2;
  alignas(64) float rows[S * W];  // the group's S input rows, zero outside the input
  alignas(64) float d[S * S * L];
  alignas(64) float tmp[S * S * L];
  // M = 4: a row's even and odd columns (2 L + 1 each, and one more the last split reads), and the
  // odd phases that split gives beyond the six a tile uses.
  alignas(64) float even[2 * L + 2] = {}, odd[2 * L + 2] = {}, unused[L];
  // Channel by channel, each over the chunk's groups: the stores of one channel's transformed tiles
  // run along rows of v, so a line is finished while it is still in L1.
  for (std::int64_t ci = c0; ci < c1; ++ci) {
    const T* plane = x + ci * p.h * p.w;
    for (std::int64_t g0 = 0; g0 < nt;) {
      const WinogradGroup grp(ww, t0 + g0, nt - g0);
      const std::int64_t iy0 = grp.oy - p.pad_top, ix0 = grp.ox - p.pad_left;
      // Columns [ja, jb) of a row buffer lie inside the input (the same for every row).
      const std::int64_t ja = std::clamp<std::int64_t>(-ix0, 0, W), jb = std::clamp<std::int64_t>(p.w - ix0, ja, W);
      const T* image = plane + grp.image * p.c * p.h * p.w;
      for (std::int64_t i = 0; i < S; ++i) {
        float* row = rows + i * W;
        const std::int64_t iy = iy0 + i;
        // A constant-length fill is a few stores inline; the input's run, copy_run (or widen_n).
        if (iy < 0 || iy >= p.h || ja > 0 || jb < W) std::fill_n(row, W, 0.0f);
        if (iy < 0 || iy >= p.h) continue;
        if constexpr (std::is_same_v<T, float>)
          copy_run(image + iy * p.w + ix0 + ja, jb - ja, row + ja);
        else
          widen_n(image + iy * p.w + ix0 + ja, row + ja, jb - ja);
      }
      // d[i][j][l] = row i, column M * l + j: tile l's input (tiles past count read zeros or
      // neighbours; their results are not stored). Column j of every tile is a phase of the row:
      // its even and odd columns (M = 2), or those split again (M = 4), from column j on.
      for (std::int64_t i = 0; i < S; ++i) {
        const float* row = rows + i * W;
        float* di = d + i * S * L;
        if constexpr (M == 2) {
          deinterleave16(row, di, di + L);
          deinterleave16(row + 2, di + 2 * L, di + 3 * L);
        } else {
          static_assert(M == 4 && L == 16 && W == 66);
          deinterleave16(row, even, odd);
          deinterleave16(row + 32, even + 16, odd + 16);
          even[32] = row[64], odd[32] = row[65];
          deinterleave16(even, di, di + 2 * L);
          deinterleave16(even + 2, di + 4 * L, unused);
          deinterleave16(odd, di + L, di + 3 * L);
          deinterleave16(odd + 2, di + 5 * L, unused);
        }
      }
      for (std::int64_t j = 0; j < S; ++j) X::template input<L>(d + j * L, S * L, tmp + j * L, S * L);  // columns
      for (std::int64_t i = 0; i < S; ++i) X::template input<L>(tmp + i * S * L, L, d + i * S * L, L);  // rows
      // All L lanes when the chunk's row has room for them: the lanes past count land where the next
      // group's tiles (or columns no product result is kept for) are written afterwards. The
      // constant-length loop is one packet move; copy_run's run-time length cost 2-3 % of a layer.
      float* dst = v + ci * ww.chunk + g0;
      const std::int64_t step = ww.v_step(), lanes = g0 + L <= ww.chunk ? L : grp.count;
      for (std::int64_t e = 0; e < S * S; ++e) {
        if (lanes == L) {
          for (std::int64_t l = 0; l < L; ++l) dst[e * step + l] = d[e * L + l];
        } else {
          copy_run(d + e * L, lanes, dst + e * step);
        }
      }
      g0 += grp.count;
    }
  }
}

/// Output channels [o0, o1) (o0 a multiple of ww.o_unit()) of the products: m_e [o, chunk] = U_e v_e
/// for every element e over the first nt tiles. Not turned, in whole GEMM panels of tiles (the
/// columns past nt hold whatever v held there, and are never read). Turned, M_e^T = V_e^T U_e^T:
/// tiles of up to kMr rows over every tile, V_e read in place, each panel of output channels
/// through every depth block before the next (its next block asked for a share per tile, as the
/// direct convolutions stream their weights), its [nt, kNr] sums then transposed into m_e. The
/// depth blocks are sgemm::multiply's, summed in the same order: the same bits. `sums` holds
/// ww.t_floats().
inline void winograd_products(const WinogradWeights& ww, const float* v, float* m, float* sums, std::int64_t nt,
                              std::int64_t o0, std::int64_t o1) {
  if (ww.turned) {
    constexpr std::int64_t mr = sgemm::kMr, nr = sgemm::kNr;
    const std::int64_t row_tiles = (nt + mr - 1) / mr;
    const float* u_end = ww.u.data() + ww.u.size();
    for (std::int64_t e = 0; e < ww.elems; ++e) {
      const sgemm::PanelRows ut{ww.u_of(e), ww.c};
      const float* ve = v + e * ww.v_step();
      float* me = m + e * ww.m_step();
      for (std::int64_t j = o0; j < o1; j += nr) {
        for (std::int64_t k0 = 0; k0 < ww.c; k0 += sgemm::kDepth) {
          const std::int64_t kc = std::min(sgemm::kDepth, ww.c - k0);
          // U's next block this run reads: this panel's next depth block, else the next panel's first
          // (the next element's first in [o0, o1) after the last).
          const float* next = k0 + kc < ww.c || j + nr < o1 ? ut.at(k0 + kc, j)
                              : e + 1 < ww.elems            ? ww.u_of(e + 1) + o0 * ww.c
                                                            : u_end;
          const std::int64_t bytes = std::min<std::int64_t>(sgemm::kDepth * nr, u_end - next) * 4;
          const std::int64_t share = (kc * nr * 4 / 64 + row_tiles - 1) / row_tiles;
          for (std::int64_t i = 0; i < row_tiles; ++i) {
            const std::int64_t t0 = nt * i / row_tiles, rows = nt * (i + 1) / row_tiles - t0;
            sgemm::exact_rows(sgemm::OffsetBlock{ve + t0, ww.v_rows.data()}, ut, j, k0, kc, sums + t0 * nr, nr, k0 > 0,
                              rows, nr, sgemm::Prefetch::part(next, bytes, i * share, share));
          }
        }
        transpose_matrix(sums, nr, nt, std::min(nr, o1 - j), me + j * ww.chunk, ww.chunk);
      }
    }
    return;
  }
  for (std::int64_t e = 0; e < ww.elems; ++e)
    sgemm::multiply(ww.u_of(e), ww.c, sgemm::StridedRows{v + e * ww.v_step(), ww.chunk}, nt, m + e * ww.m_step(),
                    ww.chunk, o0, o1, true, nullptr);
}

/// Output channels [o0, o1) of chunk tiles [t0, t0 + nt) from m: A^T m_tile A, the epilogue, and the
/// positions inside the output plane stored to y.
template <int M>
void winograd_output(const Conv2dPlan& p, const WinogradWeights& ww, const float* m, std::int64_t t0, std::int64_t nt,
                     std::int64_t o0, std::int64_t o1, const Epilogue& epi, float* y) {
  using X = WinogradTransforms<M>;
  constexpr std::int64_t L = WinogradWeights::kLanes, S = M + 2, T = M;
  alignas(64) float in[S * S * L] = {};
  alignas(64) float tmp[T * S * L];
  alignas(64) float out[T * T * L];
  alignas(64) float row[T * L];
  const std::int64_t plane = p.oh * p.ow, step = ww.m_step();
  // A clamping chain (ReLU) or SiLU runs inline, with unary_chain's expressions (and bits) but
  // without its call per group and channel.
  const std::optional<sgemm::Finish> act = finish_of(Epilogue{nullptr, epi.chain, nullptr}, BiasAlong::rows);
  const auto activate = [&](float* v, std::int64_t n) {
    if (!act) return unary_chain(epi.chain, v, v, n);
    ArrayMap a(v, n);
    if (act->silu)
      a = a / (1.0f + (-a).exp());
    else
      a = a.max(act->lo).min(act->hi);
  };
  for (std::int64_t g0 = 0; g0 < nt;) {
    const WinogradGroup grp(ww, t0 + g0, nt - g0);
    const std::int64_t rows = std::min(T, p.oh - grp.oy), cols = std::min(T * grp.count, p.ow - grp.ox);
    for (std::int64_t oc = o0; oc < o1; ++oc) {
      // All L lanes when the chunk's row holds them (the lanes past count are transformed and
      // dropped); a group at the row's end, only its own.
      const float* src = m + oc * ww.chunk + g0;
      if (g0 + L <= ww.chunk) {
        for (std::int64_t e = 0; e < S * S; ++e)
          for (std::int64_t l = 0; l < L; ++l) in[e * L + l] = src[e * step + l];
      } else {
        for (std::int64_t e = 0; e < S * S; ++e) copy_run(src + e * step, grp.count, in + e * L);
      }
      for (std::int64_t j = 0; j < S; ++j) X::template output<L>(in + j * L, S * L, tmp + j * L, S * L);   // columns
      for (std::int64_t i = 0; i < T; ++i) X::template output<L>(tmp + i * S * L, L, out + i * T * L, L);  // rows
      if (epi.bias) ArrayMap(out, T * T * L) += epi.bias[oc];
      // A residual is laid out as the output: it is added, and the chain run, per stored row.
      if (!epi.chain.empty() && !epi.residual) activate(out, T * T * L);
      // Output row i of the group: column T * l + j is out[i][j][l]; its first `cols` are inside.
      const std::int64_t at = (grp.image * p.o + oc) * plane + grp.oy * p.ow + grp.ox;
      float* dst = y + at;
      for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t j = 0; j < T; ++j)
          for (std::int64_t l = 0; l < L; ++l) row[T * l + j] = out[(i * T + j) * L + l];
        if (epi.residual) {
          const float* res = epi.residual + at + i * p.ow;
          for (std::int64_t j = 0; j < cols; ++j) row[j] += res[j];
          if (!epi.chain.empty()) activate(row, cols);
        }
        copy_run(row, cols, dst + i * p.ow);
      }
    }
    g0 += grp.count;
  }
}

template <int M, typename T>
void winograd_conv2d_m(const Conv2dPlan& p, const WinogradWeights& ww, const T* x, float* y, const PartScratch& parts,
                       const ThreadPool* pool, const Epilogue& epi) {
  // Tiles [t0, t1) on one thread, with the scratch of part `part`.
  const auto run_range = [&](std::int64_t part, std::int64_t t0, std::int64_t t1) {
    float* v = parts.floats(part);
    float* m = v + ww.v_floats();
    for (std::int64_t c0 = t0; c0 < t1; c0 += ww.chunk) {
      const std::int64_t nt = std::min(ww.chunk, t1 - c0);
      winograd_input<M>(p, ww, x, c0, nt, 0, ww.c, v);
      winograd_products(ww, v, m, m + ww.m_floats(), nt, 0, ww.o);
      winograd_output<M>(p, ww, m, c0, nt, 0, ww.o, epi, y);
    }
  };
  const std::int64_t threads = pool ? std::min<std::int64_t>(pool->threads(), ww.threads) : 1;
  if (ww.parts > 1 && threads >= ww.parts) {
    pool->parallel_for(ww.parts, [&](std::int64_t part) {
      run_range(part, part_begin(ww.total, part, ww.parts), part_begin(ww.total, part + 1, ww.parts));
    });
    return;
  }
  if (threads <= 1) {  // the ranges in turn, in the first part's scratch
    for (std::int64_t part = 0; part < ww.parts; ++part)
      run_range(0, part_begin(ww.total, part, ww.parts), part_begin(ww.total, part + 1, ww.parts));
    return;
  }
  // Too few tiles for a range per thread (small planes): each thread transforms all of a chunk's
  // input into scratch of its own, then runs the products and output transform of a range of output
  // channels, as the kernels around a small plane split its channels. Splitting the
  // input transform by channels too, into one V that every thread then read, had each thread read
  // half of V from the other core: 64-channel layers on 16 x 16 took 93 us at 2 threads that way,
  // more than the 73 of one thread.
  // Each thread runs every chunk in turn: nothing it computes is read by another, so the chunks
  // need no hand-off between them.
  const std::int64_t blocks = ww.o_blocks();
  const std::int64_t out_parts = std::min(threads, blocks);  // at most ww.copies()
  pool->parallel_for(out_parts, [&](std::int64_t q) {
    float* v = parts.floats(q);
    float* m = v + ww.v_floats();
    const std::int64_t o0 = part_begin(blocks, q, out_parts) * ww.o_unit();
    const std::int64_t o1 = std::min(ww.o, part_begin(blocks, q + 1, out_parts) * ww.o_unit());
    for (std::int64_t c0 = 0; c0 < ww.total; c0 += ww.chunk) {
      const std::int64_t nt = std::min(ww.chunk, ww.total - c0);
      winograd_input<M>(p, ww, x, c0, nt, 0, ww.c, v);
      winograd_products(ww, v, m, m + ww.m_floats(), nt, o0, o1);
      winograd_output<M>(p, ww, m, c0, nt, o0, o1, epi, y);
    }
  });
}

/// conv2d through Winograd weights, over an f32 input or a 16-bit one (widened as the input
/// transform reads it; f32 output either way). `parts` holds ww.copies() regions of ww.part_bytes().
template <typename T>
void winograd_conv2d(const Conv2dPlan& p, const WinogradWeights& ww, const T* x, float* y, const PartScratch& parts,
                     const ThreadPool* pool, const Epilogue& epi) {
  if (ww.m == 2)
    winograd_conv2d_m<2>(p, ww, x, y, parts, pool, epi);
  else
    winograd_conv2d_m<4>(p, ww, x, y, parts, pool, epi);
}

/// Winograd weights for plan `p` when `tile` allows it and it pays, else none.
inline std::shared_ptr<const WinogradWeights> winograd_weights_for(const Conv2dPlan& p, const float* w, int threads,
                                                                   Winograd tile) {
  if (tile == Winograd::f4 && winograd_pays(p, 4)) return pack_winograd_weights<4>(p, w, threads);
  if (tile != Winograd::off && winograd_pays(p, 2)) return pack_winograd_weights<2>(p, w, threads);
  return nullptr;
}

}  // namespace rml::detail
