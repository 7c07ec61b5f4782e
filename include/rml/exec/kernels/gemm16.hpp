// 16-bit GEMM over constant weights kept 16-bit: bf16 through VDPBF16PS (or its exact emulation),
// f16 widened to f32 inside the micro-kernel (F16C/AVX-512 or exact integer code); f32 accumulation,
// the epilogue in f32, the output rounded once to the 16-bit type.
//
// Layout. A product is out[r, c] = sum_k R[r, k] P[k, c] over rows r (the "row operand", one
// 32-bit broadcast per step) and columns c (the "panel operand", 16 lanes a vector):
//   - a step is a pair of k for bf16 (k = 2s, 2s + 1; an odd k is padded with a zero), one k for f16;
//   - the row operand holds per row and step 4 bytes: the bf16 pair (k = 2s in the low half) or
//     the f32 value of an f16 element;
//   - the panel operand is panels of 16 columns; panel j, step s, lane l, element e is the u16 at
//     ((j * steps + s) * 16 + l) * E + e, E = 2 (bf16) or 1 (f16), zero past k or past the columns.
// VDPBF16PS computes, per f32 lane j: acc += a[2j+1] b[2j+1], then acc += a[2j] b[2j], each as an f32
// FMA (one rounding, to nearest even) with denormal inputs (the accumulator included) read as zero
// and a denormal result flushed to zero, whatever MXCSR says. dot_pair() is that, in plain C++; every
// output is the fold of its steps in order from 0, so both paths give the same bits.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "rml/exec/kernels/common.hpp"
#include "rml/exec/kernels/convert16.hpp"
#include "rml/exec/kernels/elementwise.hpp"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__AVX512BF16__) && defined(__AVX512F__)
#define RML_GEMM16_BF16_SIMD 1
#else
#define RML_GEMM16_BF16_SIMD 0
#endif
#if defined(__AVX512F__)
#define RML_GEMM16_F16_SIMD 1
#else
#define RML_GEMM16_F16_SIMD 0
#endif

namespace rml::detail::g16 {

inline constexpr std::int64_t kLanes = 16;
inline constexpr int kMr = 8;                      ///< rows of the micro-kernel
inline constexpr int kNp = 2;                      ///< panels of the micro-kernel (2 x 16 columns)
inline constexpr std::int64_t kMb = 64;            ///< rows per block (the f32 accumulator tile)
inline constexpr std::int64_t kKc = 256;           ///< steps per block of depth
inline constexpr std::int64_t kPanelL2 = 1 << 19;  ///< bytes of panels a column block may hold

/// u16 per step and lane: 2 for bf16 (pairs), 1 for f16.
template <typename T>
inline constexpr std::int64_t kElems = std::is_same_v<T, bf16> ? 2 : 1;

/// Steps of a depth k.
template <typename T>
constexpr std::int64_t steps_of(std::int64_t k) noexcept {
  return (k + kElems<T> - 1) / kElems<T>;
}

/// A denormal f32 as a zero of its sign (DAZ/FTZ).
inline float flush(float x) noexcept {
  const auto u = std::bit_cast<std::uint32_t>(x);
  return (u & 0x7f800000u) == 0 ? std::bit_cast<float>(u & 0x80000000u) : x;
}
inline float bf16_float(std::uint32_t bits16) noexcept { return std::bit_cast<float>(bits16 << 16); }

/// One lane of VDPBF16PS: the odd element first, then the even one (see the top of the file).
inline float dot_pair(float acc, std::uint32_t a_pair, std::uint32_t b_pair) noexcept {
  acc = flush(acc);
  acc = flush(std::fma(flush(bf16_float(a_pair >> 16)), flush(bf16_float(b_pair >> 16)), acc));
  return flush(std::fma(flush(bf16_float(a_pair & 0xffffu)), flush(bf16_float(b_pair & 0xffffu)), acc));
}

inline std::uint32_t load_u32(const std::byte* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline std::uint32_t load_pair(const std::uint16_t* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 16);
}

/// The micro-kernel's operands: MR rows of `a` (4 bytes a step, row stride `lda` bytes), NP
/// panels of `b` (u16, panel stride `ldb` u16, already at the first step), `steps` steps, into the
/// f32 tile `c` (row stride `ldc` floats), which holds the sums so far when `load`.
struct MicroArgs {
  const std::byte* a;
  std::int64_t lda;
  const std::uint16_t* b;
  std::int64_t ldb;
  std::int64_t steps;
  float* c;
  std::int64_t ldc;
  bool load;
};

/// Portable micro-kernel: the same fold per output as the SIMD one.
template <typename T, int MR, int NP>
void micro_portable(const MicroArgs& m) {
  constexpr std::int64_t E = kElems<T>;
  for (int r = 0; r < MR; ++r) {
    float acc[NP * kLanes];
    for (int i = 0; i < NP * kLanes; ++i) acc[i] = m.load ? m.c[r * m.ldc + i] : 0.0f;
    const std::byte* arow = m.a + r * m.lda;
    for (std::int64_t s = 0; s < m.steps; ++s) {
      const std::uint32_t av = load_u32(arow + 4 * s);
      for (int q = 0; q < NP; ++q) {
        const std::uint16_t* bp = m.b + q * m.ldb + s * kLanes * E;
        float* aq = acc + q * kLanes;
        if constexpr (E == 2) {
          for (std::int64_t l = 0; l < kLanes; ++l) aq[l] = dot_pair(aq[l], av, load_pair(bp + 2 * l));
        } else {
          const float af = std::bit_cast<float>(av);
          for (std::int64_t l = 0; l < kLanes; ++l) aq[l] = std::fma(af, f16::to_float(bp[l]), aq[l]);
        }
      }
    }
    std::copy_n(acc, NP * kLanes, m.c + r * m.ldc);
  }
}

#if RML_GEMM16_BF16_SIMD
template <int MR, int NP>
void micro_bf16_simd(const MicroArgs& m) {
  __m512 acc[MR][NP];
  for (int r = 0; r < MR; ++r)
    for (int q = 0; q < NP; ++q)
      acc[r][q] = m.load ? _mm512_loadu_ps(m.c + r * m.ldc + q * kLanes) : _mm512_setzero_ps();
  for (std::int64_t s = 0; s < m.steps; ++s) {
    __m512bh bv[NP];
    for (int q = 0; q < NP; ++q) bv[q] = (__m512bh)_mm512_loadu_si512(m.b + q * m.ldb + s * 2 * kLanes);
    for (int r = 0; r < MR; ++r) {
      const auto av = (__m512bh)_mm512_set1_epi32(static_cast<int>(load_u32(m.a + r * m.lda + 4 * s)));
      for (int q = 0; q < NP; ++q) acc[r][q] = _mm512_dpbf16_ps(acc[r][q], av, bv[q]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int q = 0; q < NP; ++q) _mm512_storeu_ps(m.c + r * m.ldc + q * kLanes, acc[r][q]);
}
#endif

#if RML_GEMM16_F16_SIMD
template <int MR, int NP>
void micro_f16_simd(const MicroArgs& m) {
  __m512 acc[MR][NP];
  for (int r = 0; r < MR; ++r)
    for (int q = 0; q < NP; ++q)
      acc[r][q] = m.load ? _mm512_loadu_ps(m.c + r * m.ldc + q * kLanes) : _mm512_setzero_ps();
  for (std::int64_t s = 0; s < m.steps; ++s) {
    __m512 bv[NP];
    for (int q = 0; q < NP; ++q)
      bv[q] = _mm512_maskz_cvtph_ps(0xffff,
                                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m.b + q * m.ldb + s * kLanes)));
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(std::bit_cast<float>(load_u32(m.a + r * m.lda + 4 * s)));
      for (int q = 0; q < NP; ++q) acc[r][q] = _mm512_fmadd_ps(av, bv[q], acc[r][q]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int q = 0; q < NP; ++q) _mm512_storeu_ps(m.c + r * m.ldc + q * kLanes, acc[r][q]);
}
#endif

using MicroFn = void (*)(const MicroArgs&);

/// The SIMD micro-kernel of (T, MR, NP) in this build, or null.
template <typename T, int MR, int NP>
constexpr MicroFn simd_fn() {
  if constexpr (std::is_same_v<T, bf16>) {
#if RML_GEMM16_BF16_SIMD
    return &micro_bf16_simd<MR, NP>;
#else
    return nullptr;
#endif
  } else {
#if RML_GEMM16_F16_SIMD
    return &micro_f16_simd<MR, NP>;
#else
    return nullptr;
#endif
  }
}

/// Whether this build has a SIMD micro-kernel for T.
template <typename T>
inline constexpr bool has_simd = std::is_same_v<T, bf16> ? RML_GEMM16_BF16_SIMD != 0 : RML_GEMM16_F16_SIMD != 0;

template <typename T, int NP, int... R>
MicroFn pick_micro(int rows, bool simd, std::integer_sequence<int, R...>) {
  MicroFn fn = nullptr;
  ((rows == R + 1 ? (void)(fn = simd ? simd_fn<T, R + 1, NP>() : &micro_portable<T, R + 1, NP>) : void()), ...);
  return fn;
}

/// The micro-kernel for `rows` in [1, kMr] and `panels` in [1, kNp]; `portable` forces the plain
/// C++ one (the tests compare the two).
template <typename T>
MicroFn micro(int rows, int panels, bool portable) {
  const bool simd = !portable && has_simd<T>;
  const auto seq = std::make_integer_sequence<int, kMr>{};
  return panels == 2 ? pick_micro<T, 2>(rows, simd, seq) : pick_micro<T, 1>(rows, simd, seq);
}

/// The row operand: `m` rows of `k` 16-bit elements of type T, row stride `ld` elements.
struct Rows {
  const std::uint16_t* data = nullptr;
  std::int64_t ld = 0;
};

/// Rows [r0, r1), steps [s0, s1) of `rows` as the micro-kernel reads them: in place (bf16 with an
/// even depth and stride: the pairs are there already) or written to `buf`, a pair padded with a
/// zero past depth `k` (bf16) or widened to f32 (f16). Sets `lda` (bytes).
template <typename T>
const std::byte* row_block(const Rows& rows, std::int64_t k, std::int64_t r0, std::int64_t r1, std::int64_t s0,
                           std::int64_t s1, std::uint32_t* buf, std::int64_t& lda) {
  if constexpr (std::is_same_v<T, bf16>) {
    if (k % 2 == 0 && rows.ld % 2 == 0) {
      lda = rows.ld * 2;
      return reinterpret_cast<const std::byte*>(rows.data + r0 * rows.ld + 2 * s0);
    }
  }
  const std::int64_t w = s1 - s0;
  lda = w * 4;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::uint16_t* src = rows.data + r * rows.ld;
    std::uint32_t* dst = buf + (r - r0) * w;
    if constexpr (std::is_same_v<T, bf16>) {
      const std::int64_t full = std::min(s1, k / 2);  // whole pairs
      for (std::int64_t s = s0; s < full; ++s) dst[s - s0] = load_pair(src + 2 * s);
      for (std::int64_t s = std::max(full, s0); s < s1; ++s) dst[s - s0] = src[2 * s];  // the odd tail, high half 0
    } else {
      widen_n(reinterpret_cast<const f16*>(src + s0), reinterpret_cast<float*>(dst), w);
    }
  }
  return reinterpret_cast<const std::byte*>(buf);
}

/// u16 of one panel over `steps` steps.
template <typename T>
constexpr std::int64_t panel_u16(std::int64_t steps) noexcept {
  return steps * kLanes * kElems<T>;
}

/// Panels per column block: as many as keep a block's panels within kPanelL2, at most 16.
template <typename T>
constexpr std::int64_t column_block(std::int64_t steps, std::int64_t panels) noexcept {
  const std::int64_t bytes = std::max<std::int64_t>(panel_u16<T>(steps) * 2, 1);
  const std::int64_t nb = std::clamp<std::int64_t>(kPanelL2 / bytes, 1, 16);
  // Whole micro-kernel widths (kNp panels), unless the product has fewer panels than that.
  return std::min(nb > kNp ? nb / kNp * kNp : nb, std::max<std::int64_t>(panels, 1));
}

/// Scratch bytes of one thread: the f32 tile, a row block, and (when the panels are made per
/// run) one column block of panels; each rounded to 64 bytes.
template <typename T>
constexpr std::size_t thread_scratch(std::int64_t steps, std::int64_t nb, bool panels_per_run) noexcept {
  const auto line = [](std::int64_t bytes) { return static_cast<std::size_t>((bytes + 63) / 64 * 64); };
  return line(kMb * nb * kLanes * 4) + line(kMb * kKc * 4) + (panels_per_run ? line(nb * panel_u16<T>(steps) * 2) : 0);
}

/// One product: out[r, c] = round(sum_k R[r, k] P[k, c] + bias) for r < m, c < n, then a fused
/// residual add and chain over the rounded outputs, each op rounded as if it ran alone (half_epilogue).
template <typename T>
struct Product {
  Rows rows;
  std::int64_t m = 0, k = 0, n = 0;
  std::int64_t nb = 1;  ///< panels per column block (column_block)
  T* out = nullptr;
  std::int64_t ldo = 0;
  const T* bias = nullptr;
  bool bias_along_rows = false;
  std::span<const UnaryStep> chain;
  const T* residual = nullptr;  ///< laid out as `out` (row stride ldo), or null
  bool portable = false;
  /// With wrap > 0 the columns are positions over rows `wrap` wide of which the first `keep` are
  /// outputs: column c is output column (c / wrap) * keep + c % wrap, and dropped when c % wrap >= keep
  /// (a convolution computed over its zero-padded input's width).
  std::int64_t wrap = 0, keep = 0;
};

/// Adds the bias to rows [r0, r1), columns [c0, c1) of the f32 tile `acc` (row stride `ldc`, column
/// c0 first), runs the fused residual add and chain (half_epilogue) over each row of the tile at
/// once, and rounds them into the output. `row` and `res` hold c1 - c0 floats.
template <typename T>
void finish(const Product<T>& p, const float* acc, std::int64_t ldc, std::int64_t r0, std::int64_t r1, std::int64_t c0,
            std::int64_t c1, float* row, float* res) {
  const std::int64_t len = c1 - c0;
  const bool fused = p.residual || !p.chain.empty();
  // Calls f(at, i, count) for each run of the row's columns that are outputs: `count` of them from
  // the row's column i, at output offset `at` (of row r).
  const auto runs = [&](std::int64_t r, const auto& f) {
    if (p.wrap == 0) return f(r * p.ldo + c0, std::int64_t{0}, len);
    for (std::int64_t c = c0; c < c1;) {  // one output row's part at a time
      const std::int64_t y = c / p.wrap, x = c % p.wrap, next = std::min(c1, (y + 1) * p.wrap);
      if (x < p.keep) f(r * p.ldo + y * p.keep + x, c - c0, std::min(p.keep, x + next - c) - x);
      c = next;
    }
  };
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* a = acc + (r - r0) * ldc;
    if (p.bias && p.bias_along_rows) {
      const float b = load(p.bias[r]);
      for (std::int64_t i = 0; i < len; ++i) row[i] = a[i] + b;
    } else if (p.bias) {
      for (std::int64_t i = 0; i < len; ++i) row[i] = a[i] + load(p.bias[c0 + i]);
    } else {
      std::copy_n(a, len, row);
    }
    if (fused) {
      // The residual widened under the row's columns (zero under the dropped ones), then the fused
      // ops over the whole row.
      if (p.residual) {
        if (p.wrap != 0) std::fill_n(res, len, 0.0f);
        runs(r, [&](std::int64_t at, std::int64_t i, std::int64_t count) { widen_n(p.residual + at, res + i, count); });
      }
      half_epilogue<T>(row, p.residual ? static_cast<const float*>(res) : nullptr, p.chain, len);
    }
    runs(r, [&](std::int64_t at, std::int64_t i, std::int64_t count) { narrow_n(row + i, p.out + at, count); });
  }
}

/// Runs product `p`. `panels(j0, count, buf)` returns column block [j0, j0 + count) of the panel
/// operand (panel stride panel_u16(steps)), reading or writing `buf`. `scratch` holds `parts` x
/// thread_scratch bytes (`panels_per_run` as given to it), split over at most `parts` threads.
template <typename T, typename Panels>
void run(const Product<T>& p, const Panels& panels, bool panels_per_run, std::byte* scratch, std::int64_t parts,
         const ThreadPool* pool) {
  const std::int64_t steps = steps_of<T>(p.k), npanels = (p.n + kLanes - 1) / kLanes;
  const std::int64_t nb = p.nb, ldc = nb * kLanes, pstride = panel_u16<T>(steps);
  const std::int64_t col_blocks = (npanels + nb - 1) / nb, row_blocks = (p.m + kMb - 1) / kMb;
  const std::int64_t tasks = col_blocks * row_blocks;
  if (tasks == 0) return;
  const std::size_t per = thread_scratch<T>(steps, nb, panels_per_run);
  const std::int64_t work = p.m * p.n * std::max<std::int64_t>(p.k, 1);
  const std::int64_t threads = pool ? std::min<std::int64_t>(pool->threads(), parts) : 1;
  const std::int64_t n_parts = std::clamp<std::int64_t>(std::min(tasks, work / (std::int64_t{1} << 17)), 1, threads);
  const auto part = [&](std::int64_t id) {
    std::byte* mine = scratch + static_cast<std::size_t>(id) * per;
    auto* acc = reinterpret_cast<float*>(mine);
    auto* rowbuf = reinterpret_cast<std::uint32_t*>(mine + (kMb * ldc * 4 + 63) / 64 * 64);
    auto* panelbuf = reinterpret_cast<std::uint16_t*>(reinterpret_cast<std::byte*>(rowbuf) + kMb * kKc * 4);
    float row[16 * kLanes], res[16 * kLanes];
    std::int64_t have = -1;  // the column block in panelbuf
    const std::uint16_t* block = nullptr;
    for (std::int64_t t = part_begin(tasks, id, n_parts); t < part_begin(tasks, id + 1, n_parts); ++t) {
      const std::int64_t jb = t / row_blocks, ib = t % row_blocks;
      const std::int64_t j0 = jb * nb, jn = std::min(nb, npanels - j0);
      if (jb != have) block = panels(j0, jn, panelbuf), have = jb;
      const std::int64_t r0 = ib * kMb, r1 = std::min(p.m, r0 + kMb);
      for (std::int64_t s0 = 0; s0 < steps; s0 += kKc) {
        const std::int64_t s1 = std::min(steps, s0 + kKc);
        std::int64_t lda = 0;
        const std::byte* a = row_block<T>(p.rows, p.k, r0, r1, s0, s1, rowbuf, lda);
        for (std::int64_t r = r0; r < r1; r += kMr) {
          const int mr = static_cast<int>(std::min<std::int64_t>(kMr, r1 - r));
          for (std::int64_t j = 0; j < jn; j += kNp) {
            const int np = static_cast<int>(std::min<std::int64_t>(kNp, jn - j));
            micro<T>(mr, np,
                     p.portable)(MicroArgs{a + (r - r0) * lda, lda, block + j * pstride + s0 * kLanes * kElems<T>,
                                           pstride, s1 - s0, acc + (r - r0) * ldc + j * kLanes, ldc, s0 > 0});
          }
        }
      }
      if (steps == 0) std::fill_n(acc, kMb * ldc, 0.0f);
      finish(p, acc, ldc, r0, r1, j0 * kLanes, std::min(p.n, (j0 + jn) * kLanes), row, res);
    }
  };
  run_parts(pool, n_parts, part);
}

/// Packs B (row-major [k, n] of T; with `transposed`, B^T as stored, [n, k]) as panels.
template <typename T>
std::vector<std::uint16_t> pack_panels(const std::uint16_t* b, std::int64_t k, std::int64_t n, bool transposed) {
  constexpr std::int64_t E = kElems<T>;
  const std::int64_t steps = steps_of<T>(k), npanels = (n + kLanes - 1) / kLanes;
  std::vector<std::uint16_t> out(static_cast<std::size_t>(npanels * panel_u16<T>(steps)), 0);
  for (std::int64_t j = 0; j < npanels; ++j)
    for (std::int64_t s = 0; s < steps; ++s)
      for (std::int64_t l = 0; l < kLanes; ++l)
        for (std::int64_t e = 0; e < E; ++e) {
          const std::int64_t kk = s * E + e, c = j * kLanes + l;
          if (kk < k && c < n)
            out[static_cast<std::size_t>(((j * steps + s) * kLanes + l) * E + e)] =
                transposed ? b[c * k + kk] : b[kk * n + c];
        }
  return out;
}

}  // namespace rml::detail::g16
