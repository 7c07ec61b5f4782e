// matmul: row-major GEMM through Eigen, split over the pool by rows or columns, with a fused
// epilogue (bias, activation chain) applied to each block while it is still in cache; a GEMV per
// row for a few rows; and GEBP over weights packed once for a constant right-hand side.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "rml/exec/kernels/common.hpp"
#include "rml/exec/kernels/elementwise.hpp"

namespace rml::detail {

/// Where a GEMM's bias runs along: matmul adds one value per column, conv2d one per row.
enum class BiasAlong : std::uint8_t { columns, rows };

/// `out = chain(c + bias)` over rows [r0, r1) and columns [c0, c1) of a row-major m x n block.
inline void apply_epilogue(const Epilogue& e, BiasAlong along, float* c, std::int64_t ldc, std::int64_t r0,
                           std::int64_t r1, std::int64_t c0, std::int64_t c1) {
  for (std::int64_t r = r0; r < r1; ++r) {
    float* row = c + r * ldc + c0;
    const std::int64_t len = c1 - c0;
    if (e.bias) {
      ArrayMap out(row, len);
      if (along == BiasAlong::columns) out += ConstArrayMap(e.bias + c0, len);
      else out += e.bias[r];
    }
    if (!e.chain.empty()) unary_chain(e.chain, row, row, len);
  }
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
  if (m >= n || m >= 16 * threads) {
    parallel_ranges(pool, m, 4, [&](std::int64_t r0, std::int64_t r1) { block(r0, r1, 0, n); });
  } else {
    // Column blocks stay multiples of 16 so each part keeps whole SIMD panels.
    const std::int64_t panels = (n + 15) / 16;
    parallel_ranges(pool, panels, 1, [&](std::int64_t p0, std::int64_t p1) {
      block(0, m, p0 * 16, std::min(n, p1 * 16));
    });
  }
}

// Pre-packed GEMM for matmuls with a constant right-hand side: the weights are packed once, at
// Executor::create, into the panels Eigen's block-panel kernel (GEBP) reads, so a run packs only
// its activations. Row-major C[m, n] = A[m, k] B[k, n] is Eigen's column-major
// C^T[n, m] = B^T[n, k] A^T[k, m]: the weights are GEBP's left-hand side.
namespace gebp {
using Index = Eigen::Index;
using Traits = Eigen::internal::gebp_traits<float, float>;
using ConstMapper = Eigen::internal::const_blas_data_mapper<float, Index, Eigen::ColMajor>;
using ResMapper = Eigen::internal::blas_data_mapper<float, Index, Eigen::ColMajor, Eigen::Unaligned, 1>;
using PackLhs = Eigen::internal::gemm_pack_lhs<float, Index, ConstMapper, Traits::mr, Traits::LhsProgress,
                                               typename Traits::LhsPacket4Packing, Eigen::ColMajor>;
using PackRhs = Eigen::internal::gemm_pack_rhs<float, Index, ConstMapper, Traits::nr, Eigen::ColMajor>;
using RowMajorMapper = Eigen::internal::const_blas_data_mapper<float, Index, Eigen::RowMajor>;
using PackLhsRowMajor = Eigen::internal::gemm_pack_lhs<float, Index, RowMajorMapper, Traits::mr, Traits::LhsProgress,
                                                       typename Traits::LhsPacket4Packing, Eigen::RowMajor>;
using PackRhsRowMajor = Eigen::internal::gemm_pack_rhs<float, Index, RowMajorMapper, Traits::nr, Eigen::RowMajor>;
using Kernel = Eigen::internal::gebp_kernel<float, float, Index, ResMapper, Traits::mr, Traits::nr, false, false>;
}  // namespace gebp

/// A constant B [k, n] packed as GEBP left-hand panels, blocked `mc` columns of C by `kc` of depth;
/// block(i, d) is the offset of the block at column i, depth d.
struct PackedWeights {
  std::int64_t k = 0, n = 0, m = 0;  ///< m: the activation rows the blocking was chosen for
  std::int64_t kc = 0, mc = 0, nc = 0;
  std::vector<float, Eigen::aligned_allocator<float>> panels;

  [[nodiscard]] std::int64_t block(std::int64_t i2, std::int64_t k2) const noexcept {
    return i2 * k + std::min(mc, n - i2) * k2;
  }
  /// Scratch a run needs: the activations packed as GEBP right-hand panels.
  [[nodiscard]] std::size_t scratch_bytes() const noexcept { return static_cast<std::size_t>(k * m) * sizeof(float); }
};

/// Packs `b` (row-major [k, n]; with `b_transposed`, given as B^T, row-major [n, k], as a Linear
/// layer stores it) for products with `m` activation rows on `threads` threads.
inline std::shared_ptr<const PackedWeights> pack_weights(const float* b, std::int64_t k, std::int64_t n,
                                                         std::int64_t m, int threads, bool b_transposed = false) {
  auto w = std::make_shared<PackedWeights>();
  w->k = k, w->n = n, w->m = m;
  gebp::Index kc = k, mc = n, nc = m;
  Eigen::internal::computeProductBlockingSizes<float, float, 1>(kc, mc, nc, gebp::Index{1});
  // Enough column blocks for every thread to get one.
  if (threads > 1 && mc * threads > n) {
    const gebp::Index step = gebp::Traits::mr;
    mc = std::max<gebp::Index>(step, (n / threads + step - 1) / step * step);
  }
  w->kc = kc, w->mc = mc, w->nc = nc;
  w->panels.resize(static_cast<std::size_t>(k * n));
  const gebp::ConstMapper lhs(b, n);      // B^T, column-major [n, k]
  const gebp::RowMajorMapper lhs_t(b, k);  // B^T as stored, row-major [n, k]
  for (std::int64_t i2 = 0; i2 < n; i2 += mc) {
    const std::int64_t rows = std::min<std::int64_t>(mc, n - i2);
    for (std::int64_t k2 = 0; k2 < k; k2 += kc) {
      float* block = w->panels.data() + w->block(i2, k2);
      const std::int64_t depth = std::min<std::int64_t>(kc, k - k2);
      if (b_transposed) gebp::PackLhsRowMajor()(block, lhs_t.getSubMapper(i2, k2), depth, rows);
      else gebp::PackLhs()(block, lhs.getSubMapper(i2, k2), depth, rows);
    }
  }
  return w;
}

/// C[m, n] = A[m, k] @ B (packed), then the epilogue. `scratch` holds w.scratch_bytes(). A is
/// row-major; with `a_transposed` it is given as A^T, row-major [k, m] (conv2d's im2col matrix).
inline void packed_gemm(const PackedWeights& w, const float* a, float* c, float* scratch, const ThreadPool* pool,
                        const Epilogue* epi, bool a_transposed = false) {
  const std::int64_t m = w.m, k = w.k, n = w.n, kc = w.kc, mc = w.mc, nc = w.nc;
  // The activations as GEBP right-hand panels, block (k2, j2) at k2 * m + depth(k2) * j2.
  const auto pack = [&](float* block, std::int64_t k2, std::int64_t j2, std::int64_t depth, std::int64_t cols) {
    if (a_transposed) {
      gebp::PackRhsRowMajor()(block, gebp::RowMajorMapper(a, m).getSubMapper(k2, j2), depth, cols);
    } else {
      gebp::PackRhs()(block, gebp::ConstMapper(a, k).getSubMapper(k2, j2), depth, cols);  // A^T, column-major [k, m]
    }
  };
  for (std::int64_t k2 = 0; k2 < k; k2 += kc) {
    const std::int64_t depth = std::min(kc, k - k2);
    for (std::int64_t j2 = 0; j2 < m; j2 += nc)
      pack(scratch + k2 * m + depth * j2, k2, j2, depth, std::min(nc, m - j2));
  }
  std::fill(c, c + m * n, 0.0f);
  const gebp::ResMapper res(c, n);  // C^T, column-major [n, m]
  const bool has_epilogue = epi && !epi->empty();
  const std::int64_t blocks = (n + mc - 1) / mc;
  // Column blocks were sized at packing for every thread to get one; a small product stays whole.
  parallel_ranges(pool, blocks, work_grain(mc * k * m, 1, kGemmPartFlops), [&](std::int64_t b0, std::int64_t b1) {
    gebp::Kernel kernel;
    for (std::int64_t blk = b0; blk < b1; ++blk) {
      const std::int64_t i2 = blk * mc, rows = std::min(mc, n - i2);
      for (std::int64_t k2 = 0; k2 < k; k2 += kc) {
        const std::int64_t depth = std::min(kc, k - k2);
        for (std::int64_t j2 = 0; j2 < m; j2 += nc)
          kernel(res.getSubMapper(i2, j2), w.panels.data() + w.block(i2, k2), scratch + k2 * m + depth * j2, rows, depth,
                 std::min(nc, m - j2), 1.0f);
      }
      if (has_epilogue) apply_epilogue(*epi, BiasAlong::columns, c, n, 0, m, i2, i2 + rows);
    }
  });
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
