// matmul: row-major GEMM through Eigen, split over the pool by rows or columns, with a fused
// epilogue (bias, activation chain) applied to each block while it is still in cache.
#pragma once

#include <algorithm>
#include <cstdint>

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

/// C[m, n] = A[m, k] @ B[k, n], all row-major and contiguous, then the epilogue.
inline void gemm(const float* a, const float* b, float* c, std::int64_t m, std::int64_t k, std::int64_t n,
                 const ThreadPool* pool, const Epilogue* epi, BiasAlong along) {
  using Stride = Eigen::OuterStride<>;
  using ConstBlock = Eigen::Map<const RowMatrix, 0, Stride>;
  using Block = Eigen::Map<RowMatrix, 0, Stride>;
  if (m == 0 || n == 0) return;
  const bool has_epilogue = epi && !epi->empty();
  const auto block = [&](std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
    Block out(c + r0 * n + c0, r1 - r0, c1 - c0, Stride(n));
    if (k == 0) {
      out.setZero();
    } else {
      ConstBlock lhs(a + r0 * k, r1 - r0, k, Stride(k));
      ConstBlock rhs(b + c0, k, c1 - c0, Stride(n));
      out.noalias() = lhs * rhs;
    }
    if (has_epilogue) apply_epilogue(*epi, along, c, n, r0, r1, c0, c1);
  };
  // Enough work per part to pay for a hand-off; split the longer side.
  const std::int64_t flops = m * n * std::max<std::int64_t>(k, 1);
  const std::int64_t threads = pool ? pool->threads() : 1;
  if (threads <= 1 || flops < (1 << 18)) return block(0, m, 0, n);
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

/// Offset of batch `i` (row-major over `dims`) along `strides`.
inline std::int64_t batch_offset(std::int64_t i, const std::vector<std::int64_t>& dims,
                                 const std::vector<std::int64_t>& strides) {
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
  const float* b = args.packed ? args.packed : in_ptr<float>(args, 1);
  float* c = out_ptr<float>(args);
  std::int64_t batches = 1;
  for (std::int64_t d : p.batch_dims) batches *= d;
  const auto one = [&](std::int64_t i, const ThreadPool* pool) {
    gemm(a + batch_offset(i, p.batch_dims, p.a_batch_strides), b + batch_offset(i, p.batch_dims, p.b_batch_strides),
         c + i * p.m * p.n, p.m, p.k, p.n, pool, args.epilogue, BiasAlong::columns);
  };
  const std::int64_t threads = args.pool ? args.pool->threads() : 1;
  if (batches >= threads && threads > 1) {
    // Many small products: one thread per batch range.
    parallel_ranges(args.pool, batches, 1, [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t i = b0; i < b1; ++i) one(i, nullptr);
    });
  } else {
    for (std::int64_t i = 0; i < batches; ++i) one(i, args.pool);
  }
  return {};
}

}  // namespace rml::detail
