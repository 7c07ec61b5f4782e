// rml's own f32 GEMM for products with one packed operand: C[rows, cols] = A[rows, depth] B[depth, cols].
// A is packed in blocks of kMr rows, depth-major inside a block, so the micro-kernel broadcasts its
// kMr values of one depth step from one cache line (or, for a convolution's turned-around product,
// read in place where a block's rows lie side by side at every depth step); B is read in place, kNr floats of a row at a time,
// through an accessor that gives the address of row k (a strided matrix, or rows at arbitrary
// offsets as a stride-1 convolution reads its padded input). The micro-kernel keeps a kMr x kNr tile
// of C in registers: 2 x kMr accumulators of one SIMD packet each, two packet loads of B and kMr
// broadcasts of A per depth step. With AVX-512 that is 24 accumulators over 32 registers.
//
// Measured against Eigen's block-panel kernel on the shapes of ResNet's 3x3 convolutions and a
// BERT-size layer's products (benchmarks/bench_kernels.cpp, 1 thread, AMD EPYC with AVX-512): this
// kernel reaches 75-95 % of the measured FMA peak where Eigen's reaches 55-65 %, which is why rml
// carries it instead of calling Eigen for these products.
//
// Every element of C is a sum over the depth in order, one FMA per step, in blocks of kDepth steps
// added to C: the same operands give the same bits at any thread count and any split.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

// Fully unrolls the loop that follows (its trip count a constant, at most 32), so arrays indexed by
// its counter become registers.
#if defined(__GNUC__)
#define RML_UNROLL _Pragma("GCC unroll 32")
#else
#define RML_UNROLL
#endif
// Asks for the cache line at an address into L2, to be read soon (prefetcht1 on x86; the other
// hints measured the same on ResNet-50's weights), or into L1 (prefetcht0: lines asked for a short
// way ahead, kStreamAhead); a lambda's body inlined where it is called.
#if defined(__GNUC__)
#define RML_PREFETCH(p) __builtin_prefetch((p), 0, 2)
#define RML_PREFETCH_L1(p) __builtin_prefetch((p), 0, 3)
#define RML_INLINE_LAMBDA __attribute__((always_inline))
#else
#define RML_PREFETCH(p) ((void)(p))
#define RML_PREFETCH_L1(p) ((void)(p))
#define RML_INLINE_LAMBDA
#endif

namespace rml::detail::sgemm {

using Packet = Eigen::internal::packet_traits<float>::type;
inline constexpr std::int64_t kLanes = Eigen::internal::packet_traits<float>::size;
/// Columns of C per micro-tile: two packets.
inline constexpr std::int64_t kNr = 2 * kLanes;
/// Rows of C per micro-tile: as many as the registers hold beside B's two packets and a broadcast.
#if defined(EIGEN_VECTORIZE_AVX512) || defined(EIGEN_VECTORIZE_NEON)
inline constexpr std::int64_t kMr = 12;
#else
inline constexpr std::int64_t kMr = 6;
#endif
/// Depth steps per pass over C: a kNr-wide panel of B that deep stays in L1.
inline constexpr std::int64_t kDepth = 256;

// B is read through an accessor: at(k, j) is the address of B[k, j], and the kNr floats from it
// are B[k, j..j + kNr) whenever j is a multiple of kNr.

/// B row-major at a constant row stride.
struct StridedRows {
  const float* base;
  std::int64_t stride;
  [[nodiscard]] const float* at(std::int64_t k, std::int64_t j) const noexcept { return base + k * stride + j; }
};

/// B's rows at per-row offsets from a base.
struct OffsetRows {
  const float* base;
  const std::int64_t* offset;
  [[nodiscard]] const float* at(std::int64_t k, std::int64_t j) const noexcept { return base + offset[k] + j; }
};

/// B stacked from two row-major matrices at one row stride: rows [0, split) from `first`, the rest
/// from `second` (a 1x1 convolution and the projection added to it, run as one product over both
/// inputs: conv_pair.hpp).
struct StackedRows {
  const float* first;
  const float* second;
  std::int64_t split, stride;
  [[nodiscard]] const float* at(std::int64_t k, std::int64_t j) const noexcept {
    return (k < split ? first + k * stride : second + (k - split) * stride) + j;
  }
};

/// B packed by pack_b: panel after panel of kNr columns, each `depth` rows of kNr floats.
struct PanelRows {
  const float* base;
  std::int64_t depth;
  /// Where the panels read one after another from `base` end, when they stream from memory (one
  /// or two row blocks of A): `multiply` then asks for B's lines kStreamAhead bytes ahead of its reads.
  const float* stream_end = nullptr;
  [[nodiscard]] const float* at(std::int64_t k, std::int64_t j) const noexcept { return base + j * depth + k * kNr; }
};

/// Floats of B packed for `depth` x `cols`: whole panels of kNr columns.
constexpr std::int64_t packed_b_floats(std::int64_t depth, std::int64_t cols) noexcept {
  return (cols + kNr - 1) / kNr * kNr * depth;
}

/// Packs B (`depth` x `cols`; element (k, j) at b[k * ldk + j * ldj]) into panels for PanelRows, the
/// columns past `cols` zero.
inline void pack_b(const float* b, std::int64_t ldk, std::int64_t ldj, std::int64_t depth, std::int64_t cols,
                   float* out) {
  for (std::int64_t j0 = 0; j0 < cols; j0 += kNr) {
    const std::int64_t n = std::min(kNr, cols - j0);
    for (std::int64_t k = 0; k < depth; ++k, out += kNr) {
      for (std::int64_t j = 0; j < n; ++j) out[j] = b[k * ldk + (j0 + j) * ldj];
      std::fill(out + n, out + kNr, 0.0f);
    }
  }
}

/// Floats of A packed for `rows` rows of `depth`: whole blocks of kMr rows.
constexpr std::int64_t packed_floats(std::int64_t rows, std::int64_t depth) noexcept {
  return (rows + kMr - 1) / kMr * kMr * depth;
}

/// Packs A (`rows` x `depth`, row r at a + r * lda) into `out` (packed_floats(rows, depth) floats):
/// block b holds rows [b * kMr, (b + 1) * kMr) as [depth][kMr], rows past the end zero.
inline void pack_a(const float* a, std::int64_t lda, std::int64_t rows, std::int64_t depth, float* out) {
  for (std::int64_t r0 = 0; r0 < rows; r0 += kMr) {
    const std::int64_t n = std::min(kMr, rows - r0);
    for (std::int64_t k = 0; k < depth; ++k) {
      float* dst = out + k * kMr;
      for (std::int64_t r = 0; r < n; ++r) dst[r] = a[(r0 + r) * lda + k];
      for (std::int64_t r = n; r < kMr; ++r) dst[r] = 0.0f;
    }
    out += kMr * depth;
  }
}

/// Depth step k of A (`rows` values, a[r] in row r) into A packed for `rows` x `depth` as pack_a
/// lays it out, rows past `rows` zero: one column of A at a time, so threads may pack disjoint steps.
inline void pack_a_row(const float* a, std::int64_t rows, std::int64_t depth, std::int64_t k, float* out) {
  for (std::int64_t r0 = 0; r0 < rows; r0 += kMr) {
    float* dst = out + r0 * depth + k * kMr;
    const std::int64_t n = std::min(kMr, rows - r0);
    std::copy_n(a + r0, n, dst);
    std::fill(dst + n, dst + kMr, 0.0f);
  }
}

// A is read through an accessor too: at(k) is the address of the row block's value in row 0 at depth
// step k, and its rows follow contiguously.

/// A packed by pack_a: one block of kMr rows, depth-major.
struct PackedBlock {
  const float* base;
  [[nodiscard]] const float* at(std::int64_t k) const noexcept { return base + k * kMr; }
};

/// A read in place: depth step k's rows at `base + offset[k]`, as a convolution's taps read a
/// padded input at a constant offset per step (rows are consecutive output positions).
struct OffsetBlock {
  const float* base;
  const std::int64_t* offset;
  [[nodiscard]] const float* at(std::int64_t k) const noexcept { return base + offset[k]; }
};

/// A read in place from two inputs stacked (StackedRows as A): depth step k's rows at
/// `first + k * stride`, or past `split` at `second + (k - split) * stride`.
struct StackedBlock {
  const float* first;
  const float* second;
  std::int64_t split, stride;
  [[nodiscard]] const float* at(std::int64_t k) const noexcept {
    return k < split ? first + k * stride : second + (k - split) * stride;
  }
};

/// What a tile of C takes on as it is stored after its last depth block, where a pass over C would
/// otherwise follow (a layer's bias, residual and activation): `v = C + bias + residual`, each term
/// where it is set, then either a clamp `min(max(v, lo), hi)` (ReLU, ReLU6, clip) or SiLU
/// `v / (1 + e^-v)`. The operations and their order are those of that pass (matmul.hpp's
/// apply_epilogue, elementwise.hpp's unary_apply), so a clamp gives the same bits, and SiLU the same
/// bits where the pass took a packet (its scalar tails call std::exp); with lo = -inf and hi = +inf
/// the clamp leaves every value as it is. The pointers are relative to the tile: row r's bias is
/// row_bias[r], column j's col_bias[j], element (r, j)'s residual residual[r * ldc + j], with C's row
/// stride.
struct Finish {
  const float* row_bias = nullptr;
  const float* col_bias = nullptr;
  const float* residual = nullptr;
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  bool silu = false;  ///< SiLU in place of the clamp

  /// This finish for the tile at row r and column j of C (row stride ldc).
  [[nodiscard]] Finish at(std::int64_t r, std::int64_t j, std::int64_t ldc) const noexcept {
    return {row_bias ? row_bias + r : nullptr, col_bias ? col_bias + j : nullptr,
            residual ? residual + r * ldc + j : nullptr, lo, hi, silu};
  }
  /// Element (r, j) of the tile, a packet P of columns [j, j + its size), with the sums and the
  /// clamp: all but SiLU (whose clamp changes nothing). Always inlined: a call per packet, passing
  /// it through memory, made a 16 -> 96-channel 1x1 convolution 1.7x slower.
  template <typename P>
  [[nodiscard]] EIGEN_ALWAYS_INLINE P sums_and_clamp(P v, std::int64_t r, std::int64_t j,
                                                     std::int64_t ldc) const noexcept {
    using Eigen::internal::padd;
    using Eigen::internal::ploadu;
    using Eigen::internal::pset1;
    if (row_bias) v = padd(v, pset1<P>(row_bias[r]));
    if (col_bias) v = padd(v, ploadu<P>(col_bias + j));
    if (residual) v = padd(v, ploadu<P>(residual + r * ldc + j));
    // Eigen's ReLU, a.max(0), is pmax(a, 0), and pmin(a, c) picks as nan_min(a, c) does (a NaN a kept).
    return Eigen::internal::pmin(Eigen::internal::pmax(v, pset1<P>(lo)), pset1<P>(hi));
  }
  /// Element (r, j) of the tile, all of it: a packet P, or one value.
  template <typename P>
  [[nodiscard]] EIGEN_ALWAYS_INLINE P apply(P v, std::int64_t r, std::int64_t j, std::int64_t ldc) const noexcept {
    using Eigen::internal::padd;
    using Eigen::internal::pdiv;
    using Eigen::internal::pexp;
    using Eigen::internal::pnegate;
    using Eigen::internal::pset1;
    v = sums_and_clamp(v, r, j, ldc);
    // unary_apply's SiLU, a / (1 + (-a).exp()), packet by packet.
    return silu ? pdiv(v, padd(pset1<P>(1.0f), pexp(pnegate(v)))) : v;
  }
  [[nodiscard]] EIGEN_ALWAYS_INLINE float sums_and_clamp(float v, std::int64_t r, std::int64_t j,
                                                         std::int64_t ldc) const noexcept {
    if (row_bias) v += row_bias[r];
    if (col_bias) v += col_bias[j];
    if (residual) v += residual[r * ldc + j];
    v = v < lo ? lo : v;  // std::max(v, lo), as Eigen's scalar max
    return hi < v ? hi : v;
  }
  [[nodiscard]] float apply(float v, std::int64_t r, std::int64_t j, std::int64_t ldc) const noexcept {
    v = sums_and_clamp(v, r, j, ldc);
    return silu ? v / (1.0f + std::exp(-v)) : v;
  }
};

/// SiLU in place over rows [0, rows) and columns [0, cols) of a block at row stride ldc: unary_apply's
/// expression, a / (1 + (-a).exp()), a packet at a time, the last packet of a row overlapping the one
/// before (computed first, from the values not yet rewritten); rows under a packet value by value.
/// (An Eigen expression over each short row ran most values through its scalar tails, one std::exp
/// call each, and made EfficientNet's SiLU convolutions on 14 x 14 planes 1.3x slower than a pass.)
EIGEN_DONT_INLINE inline void silu_rows(float* c, std::int64_t ldc, std::int64_t rows, std::int64_t cols) {
  using Eigen::internal::padd;
  using Eigen::internal::pdiv;
  using Eigen::internal::pexp;
  using Eigen::internal::ploadu;
  using Eigen::internal::pnegate;
  using Eigen::internal::pset1;
  using Eigen::internal::pstoreu;
  const auto silu = [](Packet v) { return pdiv(v, padd(pset1<Packet>(1.0f), pexp(pnegate(v)))); };
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = c + r * ldc;
    if (cols < kLanes) {
      for (std::int64_t j = 0; j < cols; ++j) row[j] = row[j] / (1.0f + std::exp(-row[j]));
      continue;
    }
    const Packet last = silu(ploadu<Packet>(row + cols - kLanes));
    for (std::int64_t j = 0; j + kLanes <= cols; j += kLanes) pstoreu(row + j, silu(ploadu<Packet>(row + j)));
    pstoreu(row + cols - kLanes, last);
  }
}

/// Cache lines a tile asks for as it runs, one per depth step from its first (two when they are more
/// than its steps): the next block of an operand streamed from memory, so its lines are on their
/// way while this block computes.
struct Prefetch {
  const char* lines = nullptr;
  std::int64_t count = 0;
  /// Into L1 (prefetcht0) rather than L2: lines asked for a short distance ahead of their reads.
  bool near = false;
  /// Lines [first, first + count) of the `bytes` from `data`, clipped to them.
  [[nodiscard]] static Prefetch part(const void* data, std::int64_t bytes, std::int64_t first,
                                     std::int64_t count) noexcept {
    const std::int64_t total = (bytes + 63) / 64;
    first = std::min(first, total);
    return {static_cast<const char*>(data) + first * 64, std::min(count, total - first)};
  }
};

/// C[0..MR, 0..NP * kLanes) (+)= A block (MR rows, depth steps [k0, k0 + kc)) times B's rows
/// [k0, k0 + kc) from column `col`: NP packets of columns, two (kNr) or one (a last panel that holds
/// no more). Stores rows [0, rows) and columns [0, cols) of the tile.
template <int MR, int NP = 2, typename Block, typename Rows>
inline void micro_tile(const Block& a, const Rows& b, std::int64_t col, std::int64_t k0, std::int64_t kc, float* c,
                       std::int64_t ldc, bool accumulate, std::int64_t rows, std::int64_t cols,
                       const Finish* fin = nullptr, Prefetch pf = {}) {
  using Eigen::internal::padd;
  using Eigen::internal::ploadu;
  using Eigen::internal::pmadd;
  using Eigen::internal::pset1;
  using Eigen::internal::pstoreu;
  Packet lo[MR], hi[MR];
  RML_UNROLL
  for (int r = 0; r < MR; ++r) lo[r] = hi[r] = pset1<Packet>(0.0f);
  const auto step = [&](std::int64_t k) RML_INLINE_LAMBDA {
    const float* ak = a.at(k);
    const float* bk = b.at(k, col);
    const Packet b0 = ploadu<Packet>(bk);
    if constexpr (NP == 2) {
      const Packet b1 = ploadu<Packet>(bk + kLanes);
      RML_UNROLL
      for (int r = 0; r < MR; ++r) {
        const Packet ar = pset1<Packet>(ak[r]);
        lo[r] = pmadd(ar, b0, lo[r]);
        hi[r] = pmadd(ar, b1, hi[r]);
      }
    } else {
      RML_UNROLL
      for (int r = 0; r < MR; ++r) lo[r] = pmadd(pset1<Packet>(ak[r]), b0, lo[r]);
    }
  };
  // The steps that ask for lines, then the rest: a test in one loop (a branch or a pointer picked
  // per step) made BERT-size products 5-10 % slower where nothing was asked for. A share of more
  // lines than the tile has steps is asked two lines a step: one row block streaming a panel of B
  // reads two lines a step, and at one line a step it had asked for only the first half of the next
  // block (a 4 x 4608 by 4608 x 512 product, B cold: 5-10 % faster asking for all of it).
  std::int64_t k = k0;
  const auto ask = [&](const char* line) RML_INLINE_LAMBDA {
    if (pf.near)
      RML_PREFETCH_L1(line);
    else
      RML_PREFETCH(line);
  };
  if (pf.count > kc) {
    const std::int64_t pairs = std::min(kc, pf.count / 2);
    for (; k < k0 + pairs; ++k) {
      ask(pf.lines + (k - k0) * 128);
      ask(pf.lines + (k - k0) * 128 + 64);
      step(k);
    }
    if (pf.count % 2 != 0 && k < k0 + kc) {
      ask(pf.lines + pairs * 128);
      step(k++);
    }
  } else {
    for (const std::int64_t asking = k0 + std::min(kc, pf.count); k < asking; ++k) {
      ask(pf.lines + (k - k0) * 64);
      step(k);
    }
  }
  for (; k < k0 + kc; ++k) step(k);
  // Loops over the tile's rows run to the constant MR, so they unroll and the accumulators stay in
  // registers (a loop bounded by `rows` made GCC keep them on the stack through the depth loop).
  if (cols == NP * kLanes) {
    RML_UNROLL
    for (int r = 0; r < MR; ++r) {
      if (r >= rows) continue;
      float* cr = c + r * ldc;
      if (accumulate) {
        lo[r] = padd(lo[r], ploadu<Packet>(cr));
        if constexpr (NP == 2) hi[r] = padd(hi[r], ploadu<Packet>(cr + kLanes));
      }
      if (fin) {
        lo[r] = fin->sums_and_clamp(lo[r], r, 0, ldc);
        if constexpr (NP == 2) hi[r] = fin->sums_and_clamp(hi[r], r, kLanes, ldc);
      }
      pstoreu(cr, lo[r]);
      if constexpr (NP == 2) pstoreu(cr + kLanes, hi[r]);
    }
    // SiLU out of line, over the stored tile (in L1): with a std::exp call inside this kernel (its
    // scalar path), a ReLU6 1x1 convolution ran 1.3-1.7x slower, a call clobbering every vector
    // register; whether an inlined packet exp would also cost was not measured apart from that.
    if (fin && fin->silu) silu_rows(c, ldc, rows, cols);
    return;
  }
  alignas(64) float tile[kNr];
  RML_UNROLL
  for (int r = 0; r < MR; ++r) {
    if (r >= rows) continue;
    pstoreu(tile, lo[r]);
    if constexpr (NP == 2) pstoreu(tile + kLanes, hi[r]);
    float* cr = c + r * ldc;
    for (std::int64_t j = 0; j < cols; ++j) cr[j] = accumulate ? cr[j] + tile[j] : tile[j];
    if (fin)
      for (std::int64_t j = 0; j < cols; ++j) cr[j] = fin->sums_and_clamp(cr[j], r, j, ldc);
  }
  if (fin && fin->silu) silu_rows(c, ldc, rows, cols);
}

/// One row block of kMr packed rows, `rows` of them valid: a tile with as few register rows as
/// cover them (the packed block is zero past them).
template <int NP = 2, typename Block, typename Rows>
inline void row_block(const Block& a, const Rows& b, std::int64_t col, std::int64_t k0, std::int64_t kc, float* c,
                      std::int64_t ldc, bool accumulate, std::int64_t rows, std::int64_t cols,
                      const Finish* fin = nullptr, Prefetch pf = {}) {
  if (rows > 8)
    micro_tile<kMr, NP>(a, b, col, k0, kc, c, ldc, accumulate, rows, cols, fin, pf);
  else if (rows > 4)
    micro_tile<(kMr < 8 ? kMr : 8), NP>(a, b, col, k0, kc, c, ldc, accumulate, rows, cols, fin, pf);
  else if (rows > 2)
    micro_tile<4, NP>(a, b, col, k0, kc, c, ldc, accumulate, rows, cols, fin, pf);
  else if (rows > 1)
    micro_tile<2, NP>(a, b, col, k0, kc, c, ldc, accumulate, rows, cols, fin, pf);
  else
    micro_tile<1, NP>(a, b, col, k0, kc, c, ldc, accumulate, rows, cols, fin, pf);
}

/// A tile of exactly `rows` (1..kMr) register rows, for an A read in place, which holds no values
/// past its rows: C[0..rows, 0..cols) (+)= A's rows times B's whole panel at column `col` (B
/// readable in whole panels).
template <int NP = 2, typename Block, typename Rows>
inline void exact_rows(const Block& a, const Rows& b, std::int64_t col, std::int64_t k0, std::int64_t kc, float* c,
                       std::int64_t ldc, bool accumulate, std::int64_t rows, std::int64_t cols, Prefetch pf = {}) {
  // A last panel of a packet's columns or fewer takes one packet a depth step, not two, half of
  // them zeros: EfficientNet-B0's 672 -> 112-channel 1x1 convolutions onto 14 x 14 (3.5 panels) had
  // taken the time of 128 channels, 302 us at 1 thread, and take 266 (ORT's kernel 258).
  if constexpr (NP == 2)
    if (cols <= kLanes) return exact_rows<1>(a, b, col, k0, kc, c, ldc, accumulate, rows, cols, pf);
  const auto tile = [&]<int MR>(std::integral_constant<int, MR>) {
    micro_tile<MR, NP>(a, b, col, k0, kc, c, ldc, accumulate, MR, cols, nullptr, pf);
  };
  switch (rows) {
    case 1: return tile(std::integral_constant<int, 1>{});
    case 2: return tile(std::integral_constant<int, 2>{});
    case 3: return tile(std::integral_constant<int, 3>{});
    case 4: return tile(std::integral_constant<int, 4>{});
    case 5: return tile(std::integral_constant<int, 5>{});
#if !defined(EIGEN_VECTORIZE_AVX512) && !defined(EIGEN_VECTORIZE_NEON)
    default: return tile(std::integral_constant<int, 6>{});
#else
    case 6: return tile(std::integral_constant<int, 6>{});
    case 7: return tile(std::integral_constant<int, 7>{});
    case 8: return tile(std::integral_constant<int, 8>{});
    case 9: return tile(std::integral_constant<int, 9>{});
    case 10: return tile(std::integral_constant<int, 10>{});
    case 11: return tile(std::integral_constant<int, 11>{});
    default: return tile(std::integral_constant<int, 12>{});
#endif
  }
}

/// How far ahead of its reads a product streaming packed panels of B from memory (one or two row
/// blocks of A: a convolution turned around on a plane of a few positions, a matmul of a few rows)
/// asks for them, into L1. ResNet-18's 512-channel 3 x 3 convolutions on 2 x 2 planes, whose 9.4 MB
/// of weights each are read once a run from memory, took 365-370 us at 1 thread asking for the
/// next depth block (32 KB ahead) into L2, and 304-322 asking for 8-16 KB ahead into L1; the whole
/// model (the zoo's, at 64 x 64) 0.89-0.92 of its time at 8-16 KB, 0.94-0.95 at 24-32 KB. A plain
/// loop reading 4.8 MB after 16 MB of other writes went from 35 to 50 GB/s asking 8-16 KB ahead.
inline constexpr std::int64_t kStreamAhead = 16 * 1024;
/// Row blocks of A up to which `multiply` streams packed panels of B one after another. Streaming
/// over two took ResNet-18's 256-channel 3 x 3 convolutions on 4 x 4 planes (16 positions) from
/// 165 to 145 us at 1 thread; over six (8 x 8 planes) changed nothing.
inline constexpr std::int64_t kStreamRowBlocks = 2;

/// Floats of scratch `multiply` needs for a partial last panel of B.
inline constexpr std::int64_t kPanelFloats = kDepth * kNr;

/// Bytes of a depth block of B that still stay in L2 beside A's blocks: up to this, `multiply` keeps
/// the block in L2 and streams A once; past it, it keeps each panel of B in L1 and streams A per panel.
inline constexpr std::int64_t kResidentBytes = 256 * 1024;

/// C[r0..r1, 0..cols) = A (packed, rows [r0, r1), `depth` deep) times B[depth, cols], row
/// stride `ldc`. Row blocks start at multiples of kMr (r0 must be one). When `b_padded`, B's rows and
/// C's rows are readable and writable up to the next multiple of kNr columns and whole panels are
/// computed; otherwise only `cols` columns of C are stored, and unless `b_whole` (B readable up to
/// whole panels, as PanelRows is) the last partial panel of B is first copied into `panel`
/// (kPanelFloats floats, zero-padded). With `finish` (its pointers relative to C's element (0, 0)),
/// every tile is finished as it is stored after the last depth block; when `b_padded`, the whole
/// panels are, so its column bias and residual must then be readable that far too.
template <typename Rows>
void multiply(const float* a, std::int64_t depth, const Rows& b, std::int64_t cols, float* c, std::int64_t ldc,
              std::int64_t r0, std::int64_t r1, bool b_padded, float* panel, bool b_whole = false,
              const Finish* finish = nullptr) {
  if (depth == 0) {
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t j = 0; j < cols; ++j) c[r * ldc + j] = finish ? finish->apply(0.0f, r, j, ldc) : 0.0f;
    return;
  }
  if constexpr (std::is_same_v<Rows, PanelRows>) {
    // One or two row blocks (a turned-around product over a few positions, B the weights; A's
    // blocks and a panel's depth block then share L1): each panel runs through its whole depth
    // before the next, so B streams from memory in one contiguous run per panel rather than a depth
    // block of every panel in turn (each block a new stream for the hardware prefetcher, 590 KB
    // past the last one in a 4608-deep panel), asked for kStreamAhead bytes ahead. Each output
    // still sums its depth blocks in order: the same bits.
    if (r1 - r0 <= kStreamRowBlocks * kMr && cols > kNr) {
      const float* end = b.at(0, (cols + kNr - 1) / kNr * kNr);
      for (std::int64_t j = 0; j < cols; j += kNr) {
        const Finish at = finish ? finish->at(0, j, ldc) : Finish{};
        multiply(a, depth, PanelRows{b.at(0, j), depth, end}, std::min(kNr, cols - j), c + j, ldc, r0, r1, b_padded,
                 panel, b_whole, finish ? &at : nullptr);
      }
      return;
    }
  }
  // Columns read from B in whole panels.
  const std::int64_t whole = b_padded || b_whole ? (cols + kNr - 1) / kNr * kNr : cols / kNr * kNr;
  for (std::int64_t k0 = 0; k0 < depth; k0 += kDepth) {
    const std::int64_t kc = std::min(kDepth, depth - k0);
    // A partial last panel: B's columns copied and zero-padded, rows [k0, k0 + kc) at panel[k - k0].
    if (whole < cols) {
      for (std::int64_t k = 0; k < kc; ++k) {
        float* dst = panel + k * kNr;
        std::copy_n(b.at(k0 + k, whole), cols - whole, dst);
        std::fill(dst + (cols - whole), dst + kNr, 0.0f);
      }
    }
    const bool resident = kc * cols * static_cast<std::int64_t>(sizeof(float)) <= kResidentBytes;
    // The operand packed at create (the weights: B when it comes in packed panels, else A) streams
    // from memory when a model's weights are past the caches, so each tile asks for a share of its
    // next block while this one computes: for A, the next row block, over that block's tiles when
    // B stays resident, else (A read once per panel) all by the one tile; for B, the same panel's
    // next depth block, over the row blocks.
    const std::int64_t panels = (cols + kNr - 1) / kNr, row_blocks = (r1 - r0 + kMr - 1) / kMr;
    const std::int64_t next_kc = std::min(kDepth, depth - k0 - kc);
    const std::int64_t a_share = resident ? (kc * kMr * 4 / 64 + panels - 1) / panels : kc * kMr * 4 / 64;
    const std::int64_t b_share = (next_kc * kNr * 4 / 64 + row_blocks - 1) / row_blocks;
    const auto prefetch = [&](std::int64_t rb, std::int64_t j) {
      if constexpr (std::is_same_v<Rows, PanelRows>) {
        if (b.stream_end != nullptr) {
          // The lines kStreamAhead bytes past each step's, into L1, on to the last panel's end.
          const float* now = b.at(k0, j);
          const std::int64_t ahead = kStreamAhead / 4, left = b.stream_end - now - ahead;
          if (left <= 0 || rb != r0) return Prefetch{};  // the first row block asks for them all
          return Prefetch{reinterpret_cast<const char*>(now + ahead), (std::min(kc * kNr, left) * 4 + 63) / 64, true};
        }
        return Prefetch::part(b.at(k0 + kc, j), next_kc * kNr * 4, (rb - r0) / kMr * b_share, b_share);
      } else {
        const std::int64_t bytes = rb + kMr < r1 ? kc * kMr * 4 : 0;
        return Prefetch::part(a + (rb + kMr) * depth + k0 * kMr, bytes, resident ? j / kNr * a_share : 0, a_share);
      }
    };
    const auto tile = [&](std::int64_t rb, std::int64_t j) {
      const float* ab = a + rb * depth;
      float* cb = c + rb * ldc + j;
      const std::int64_t valid = std::min(kMr, r1 - rb);
      Finish at;
      const Finish* fin = nullptr;
      if (finish && k0 + kc == depth) at = finish->at(rb, j, ldc), fin = &at;
      const Prefetch pf = prefetch(rb, j);
      // A last panel of one packet of columns at most computes that packet alone (Winograd's
      // 98-tile chunks at 2 threads had spent a quarter of their products on a panel of 2 columns).
      const bool one_packet = cols - j <= kLanes;
      const std::int64_t stored = one_packet ? (b_padded ? kLanes : cols - j) : b_padded ? kNr : std::min(kNr, cols - j);
      if (j < whole) {
        if (one_packet)
          row_block<1>(PackedBlock{ab}, b, j, k0, kc, cb, ldc, k0 > 0, valid, stored, fin, pf);
        else
          row_block(PackedBlock{ab}, b, j, k0, kc, cb, ldc, k0 > 0, valid, stored, fin, pf);
      } else {
        // The copied panel holds depth steps [k0, k0 + kc) from its row 0: A from the same step.
        const PackedBlock at_k0{ab + k0 * kMr};
        if (one_packet)
          row_block<1>(at_k0, StridedRows{panel, kNr}, 0, 0, kc, cb, ldc, k0 > 0, valid, stored, fin, pf);
        else
          row_block(at_k0, StridedRows{panel, kNr}, 0, 0, kc, cb, ldc, k0 > 0, valid, stored, fin, pf);
      }
    };
    if (resident) {
      for (std::int64_t rb = r0; rb < r1; rb += kMr)
        for (std::int64_t j = 0; j < cols; j += kNr) tile(rb, j);
    } else {
      for (std::int64_t j = 0; j < cols; j += kNr)
        for (std::int64_t rb = r0; rb < r1; rb += kMr) tile(rb, j);
    }
  }
}

}  // namespace rml::detail::sgemm
