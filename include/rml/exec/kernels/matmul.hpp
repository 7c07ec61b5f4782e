// matmul: row-major GEMM through Eigen, split over the pool by rows or columns, with a fused
// epilogue (bias, activation chain) applied to each block while it is still in cache; a GEMV per
// row for a few rows; and rml's GEMM (kernels/sgemm.hpp) for a constant right-hand side.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "rml/exec/kernels/common.hpp"
#include "rml/exec/kernels/elementwise.hpp"
#include "rml/exec/kernels/sgemm.hpp"

namespace rml::detail {

/// Where a GEMM's bias runs along: matmul adds one value per column, conv2d one per row.
enum class BiasAlong : std::uint8_t { columns, rows };

/// `out = chain(c + bias + residual)` over rows [r0, r1) and columns [c0, c1) of a row-major m x n
/// block (the residual, when there is one, at the same offsets from its own base).
inline void apply_epilogue(const Epilogue& e, BiasAlong along, float* c, std::int64_t ldc, std::int64_t r0,
                           std::int64_t r1, std::int64_t c0, std::int64_t c1) {
  for (std::int64_t r = r0; r < r1; ++r) {
    float* row = c + r * ldc + c0;
    const std::int64_t len = c1 - c0;
    ArrayMap out(row, len);
    if (e.bias) {
      if (along == BiasAlong::columns)
        out += ConstArrayMap(e.bias + c0, len);
      else
        out += e.bias[r];
    }
    if (e.residual) out += ConstArrayMap(e.residual + r * ldc + c0, len);
    if (!e.chain.empty()) unary_chain(e.chain, row, row, len);
  }
}

/// The epilogue as sgemm's store-time finish (bias along `along`), when its chain is empty, SiLU
/// alone, or a clamp: at most one ReLU or maximum with a constant, then at most one minimum with a
/// constant (ReLU, ReLU6, clip), neither constant NaN. Other chains keep to apply_epilogue's pass.
inline std::optional<sgemm::Finish> finish_of(const Epilogue& e, BiasAlong along) {
  sgemm::Finish f;
  (along == BiasAlong::rows ? f.row_bias : f.col_bias) = e.bias;
  f.residual = e.residual;
  if (e.chain.size() == 1 && e.chain[0].op == OpCode::Silu) {
    f.silu = true;
    return f;
  }
  bool lower = false, upper = false;
  for (const UnaryStep& s : e.chain) {
    const bool floor = s.op == OpCode::Relu || s.op == OpCode::Maximum;
    if (!(floor ? !lower && !upper : s.op == OpCode::Minimum && !upper) || std::isnan(s.scalar)) return std::nullopt;
    (floor ? f.lo : f.hi) = s.op == OpCode::Relu ? 0.0f : s.scalar;
    (floor ? lower : upper) = true;
  }
  return f;
}

/// Up to this many rows, matmul runs as one GEMV per row.
inline constexpr std::int64_t kGemvRows = 4;

/// The least work (multiply-adds) worth handing to another thread as part of a product.
inline constexpr std::int64_t kGemmPartFlops = std::int64_t{1} << 17;

/// C[m, n] = A[m, k] @ B[k, n], row-major (A and B contiguous, C with row stride `ldc`), then
/// the epilogue.
inline void gemm(const float* a, const float* b, float* c, std::int64_t m, std::int64_t k, std::int64_t n,
                 std::int64_t ldc, const ThreadPool* pool, const Epilogue* epi, BiasAlong along) {
  using Stride = Eigen::OuterStride<>;
  using ConstBlock = Eigen::Map<const RowMatrix, 0, Stride>;
  using Block = Eigen::Map<RowMatrix, 0, Stride>;
  if (m == 0 || n == 0) return;
  const bool has_epilogue = epi && !epi->empty();
  const auto block = [&](std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
    Block out(c + r0 * ldc + c0, r1 - r0, c1 - c0, Stride(ldc));
    if (k == 0) {
      out.setZero();
    } else {
      ConstBlock rhs(b + c0, k, c1 - c0, Stride(n));
      if (r1 - r0 <= kGemvRows) {
        // A few rows: one GEMV per row streams B once, without GEMM's per-call packing of B.
        for (std::int64_t r = r0; r < r1; ++r)
          out.row(r - r0).noalias() = Eigen::Map<const Eigen::RowVectorXf>(a + r * k, k) * rhs;
      } else {
        ConstBlock lhs(a + r0 * k, r1 - r0, k, Stride(k));
        out.noalias() = lhs * rhs;
      }
    }
    if (has_epilogue) apply_epilogue(*epi, along, c, ldc, r0, r1, c0, c1);
  };
  // Enough work per part to pay for a hand-off; split the longer side.
  const std::int64_t flops = m * n * std::max<std::int64_t>(k, 1);
  const std::int64_t threads = pool ? pool->threads() : 1;
  if (threads <= 1 || flops < 2 * kGemmPartFlops) return block(0, m, 0, n);
  // Even parts: Eigen rounds a block's last rows and columns differently from its others, so a
  // split that moved with the threads' share would move bits (Split).
  if (m >= n || m >= 16 * threads) {
    parallel_ranges(
        pool, m, 4, [&](std::int64_t r0, std::int64_t r1) { block(r0, r1, 0, n); }, Split::even);
  } else {
    // Column blocks stay multiples of 16 so each part keeps whole SIMD panels.
    const std::int64_t panels = (n + 15) / 16;
    parallel_ranges(
        pool, panels, 1, [&](std::int64_t p0, std::int64_t p1) { block(0, m, p0 * 16, std::min(n, p1 * 16)); },
        Split::even);
  }
}

// Matmuls with a constant right-hand side run through rml's GEMM (kernels/sgemm.hpp) with the
// roles turned around: the activations are its A operand, packed per run (m x k floats, cheap
// beside the product), and the weights are B, packed once at Executor::create into panels of
// sgemm::kNr columns, each contiguous in memory.

/// A constant B [k, n] packed for products with `m` activation rows, and how a run splits its columns.
struct PackedWeights {
  std::int64_t k = 0, n = 0, m = 0;
  std::int64_t parts = 1;                                      ///< column ranges run in parallel
  std::vector<float, Eigen::aligned_allocator<float>> panels;  ///< B by sgemm::pack_b

  /// Scratch a run needs: the activations packed.
  [[nodiscard]] std::size_t scratch_bytes() const noexcept {
    return static_cast<std::size_t>(sgemm::packed_floats(m, k)) * sizeof(float);
  }
};

/// Columns each part of a packed product takes at a time, so the block it finishes (and applies
/// the epilogue to) is still in cache.
inline constexpr std::int64_t kPackedBlockColumns = 8 * sgemm::kNr;

/// Packs `b` (row-major [k, n]; with `b_transposed`, given as B^T, row-major [n, k], as a Linear
/// layer stores it) for products with `m` activation rows on `threads` threads.
inline std::shared_ptr<const PackedWeights> pack_weights(const float* b, std::int64_t k, std::int64_t n, std::int64_t m,
                                                         int threads, bool b_transposed = false) {
  auto w = std::make_shared<PackedWeights>();
  w->k = k, w->n = n, w->m = m;
  w->panels.resize(static_cast<std::size_t>(sgemm::packed_b_floats(k, n)));
  if (b_transposed)
    sgemm::pack_b(b, 1, k, k, n, w->panels.data());
  else
    sgemm::pack_b(b, n, 1, k, n, w->panels.data());
  // Column ranges of whole panels, one per thread when the product pays for the hand-off.
  const std::int64_t panels = (n + sgemm::kNr - 1) / sgemm::kNr;
  if (threads > 1 && m * n * k >= 2 * kGemmPartFlops) w->parts = std::min<std::int64_t>(threads, panels);
  return w;
}

/// C[m, n] = A[m, k] @ B (packed), then the epilogue. `scratch` holds w.scratch_bytes().
inline void packed_gemm(const PackedWeights& w, const float* a, float* c, float* scratch, const ThreadPool* pool,
                        const Epilogue* epi) {
  const std::int64_t m = w.m, k = w.k, n = w.n, mr = sgemm::kMr;
  float* packed = scratch;
  const std::int64_t blocks = (m + mr - 1) / mr;
  // The activations packed by row blocks (in parallel when the product is split anyway).
  const auto pack = [&](std::int64_t b0, std::int64_t b1) {
    sgemm::pack_a(a + b0 * mr * k, k, std::min(m, b1 * mr) - b0 * mr, k, packed + b0 * mr * k);
  };
  if (w.parts > 1)
    parallel_ranges(pool, blocks, 1, pack);
  else
    pack(0, blocks);
  const bool has_epilogue = epi && !epi->empty();
  // A clamping chain (or none) is finished as the tiles are stored; another chain in a pass after.
  const std::optional<sgemm::Finish> finish = has_epilogue ? finish_of(*epi, BiasAlong::columns) : std::nullopt;
  const std::int64_t panels = (n + sgemm::kNr - 1) / sgemm::kNr;
  const auto run_part = [&](std::int64_t part) {
    const std::int64_t end = std::min(n, part_begin(panels, part + 1, w.parts) * sgemm::kNr);
    for (std::int64_t c0 = part_begin(panels, part, w.parts) * sgemm::kNr; c0 < end; c0 += kPackedBlockColumns) {
      const std::int64_t c1 = std::min(end, c0 + kPackedBlockColumns);
      const std::optional<sgemm::Finish> at = finish ? std::optional(finish->at(0, c0, n)) : std::nullopt;
      sgemm::multiply(packed, k, sgemm::PanelRows{w.panels.data() + c0 * k, k}, c1 - c0, c + c0, n, 0, m, false,
                      nullptr, true, at ? &*at : nullptr);
      if (has_epilogue && !finish) apply_epilogue(*epi, BiasAlong::columns, c, n, 0, m, c0, c1);
    }
  };
  run_parts(pool, w.parts, run_part);
}

/// Offset of batch `i` (row-major over `dims`) along `strides`.
inline std::int64_t batch_offset(std::int64_t i, const Dims& dims, const Dims& strides) {
  std::int64_t off = 0;
  for (std::size_t d = dims.size(); d-- > 0;) {
    off += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return off;
}

template <typename T>
Status matmul_kernel(const Kernel& kernel, const KernelArgs& args) {
  const auto& p = kernel.as<MatMulPlan>();
  const float* a = in_ptr<float>(args, 0);
  const float* b = in_ptr<float>(args, 1);
  float* c = out_ptr<float>(args);
  if (args.packed) {
    packed_gemm(*static_cast<const PackedWeights*>(args.packed), a, c, reinterpret_cast<float*>(args.scratch),
                args.pool, args.epilogue);
    return {};
  }
  std::int64_t batches = 1;
  for (std::int64_t d : p.batch_dims) batches *= d;
  const auto one = [&](std::int64_t i, const ThreadPool* pool) {
    gemm(a + batch_offset(i, p.batch_dims, p.a_batch_strides), b + batch_offset(i, p.batch_dims, p.b_batch_strides),
         c + i * p.m * p.n, p.m, p.k, p.n, p.n, pool, args.epilogue, BiasAlong::columns);
  };
  const std::int64_t threads = args.pool ? args.pool->threads() : 1;
  if (batches >= threads && threads > 1) {
    // Many small products: one thread per batch range, when the batch holds enough work.
    const std::int64_t flops = p.m * p.n * std::max<std::int64_t>(p.k, 1);
    parallel_ranges(args.pool, batches, work_grain(flops, 1, kGemmPartFlops), [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t i = b0; i < b1; ++i) one(i, nullptr);
    });
  } else {
    for (std::int64_t i = 0; i < batches; ++i) one(i, args.pool);
  }
  return {};
}

}  // namespace rml::detail
