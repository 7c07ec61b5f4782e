// The attention block as one kernel: softmax(Q K^T * scale + mask) V, recognised at Executor::create
// (rml/exec/detail/program_builder.hpp, fuse_attention) and run per (batch, block of query rows)
// without materialising the [batch..., Sq, Sk] score tensor.
#pragma once

#include <algorithm>
#include <cstdint>

#include "rml/exec/kernels/common.hpp"
#include "rml/exec/kernels/matmul.hpp"

namespace rml::detail {

/// One operand of the block read in place: element [b..., r, c] of the logical matrix is at
/// base + sum(b_i * batch[i]) + r * row + c * col. `batch` has one entry per leading dim of the
/// scores (0 where the operand broadcasts). The transposes around Q, K, V and the output are
/// absorbed into these strides when the innermost stride stays 1.
struct AttentionOperand {
  Dims batch;
  std::int64_t row = 0, col = 1;
};

/// out = softmax(mask(scale(Q @ K^T))) @ V over the last axis, with
///   Q [b..., sq, d], K as K^T [b..., d, sk] (or K [b..., sk, d] when `k_rows`), V [b..., sk, dv],
///   the mask broadcast to [b..., sq, sk]; inputs Q, K, V[, mask], all f32 but a bool condition.
/// The mask is added (`add`), or is where's condition: the scores replaced by `fill` where it is
/// true (`fill_true`: where(c, fill, s)) or false (`fill_false`: where(c, s, fill)).
struct AttentionPlan {
  enum class Scale : std::uint8_t { none, mul, div };
  enum class Mask : std::uint8_t { none, add, fill_true, fill_false };
  Dims batch_dims;  ///< the scores' leading dims
  std::int64_t batches = 1, sq = 0, sk = 0, d = 0, dv = 0;
  AttentionOperand q, k, v, mask, out;
  bool k_rows = false;  ///< K read as rows [sk, d] (K^T's rows have stride 1 along d)
  Scale scale_kind = Scale::none;
  float scale = 1.0f;
  Mask mask_kind = Mask::none;
  bool bool_condition = false;  ///< where's condition is bool (else f32: nonzero is true)
  float fill = 0.0f;
  std::int64_t block_rows = 1;  ///< query rows per work item
  int threads = 1;              ///< scratch holds one score block per thread

  [[nodiscard]] std::int64_t block_floats() const noexcept { return block_rows * sk; }
};

inline Status attention_kernel(const Kernel&, const KernelArgs& args) {
  using Stride = Eigen::OuterStride<>;
  using ConstBlock = Eigen::Map<const RowMatrix, 0, Stride>;
  using Block = Eigen::Map<RowMatrix, 0, Stride>;
  const auto& p = *static_cast<const AttentionPlan*>(args.packed);
  const float* q = in_ptr<float>(args, 0);
  const float* k = in_ptr<float>(args, 1);
  const float* v = in_ptr<float>(args, 2);
  const std::byte* mask = p.mask_kind != AttentionPlan::Mask::none ? args.in[3] : nullptr;
  const std::int64_t mask_bytes = p.bool_condition ? 1 : std::int64_t{sizeof(float)};
  float* out = out_ptr<float>(args);
  auto* scratch = reinterpret_cast<float*>(args.scratch);
  const std::int64_t blocks = (p.sq + p.block_rows - 1) / p.block_rows;
  const std::int64_t items = p.batches * blocks;
  const std::int64_t threads = std::min<std::int64_t>(args.pool ? args.pool->threads() : 1, p.threads);
  const std::int64_t parts = std::clamp<std::int64_t>(items, 1, threads);
  const auto item = [&](std::int64_t i, float* s) {
    const std::int64_t b = i / blocks, r0 = (i % blocks) * p.block_rows;
    const std::int64_t rows = std::min(p.block_rows, p.sq - r0);
    Eigen::Map<RowMatrix> scores(s, rows, p.sk);
    const ConstBlock qb(q + batch_offset(b, p.batch_dims, p.q.batch) + r0 * p.q.row, rows, p.d, Stride(p.q.row));
    const float* kb = k + batch_offset(b, p.batch_dims, p.k.batch);
    if (p.k_rows)
      scores.noalias() = qb * ConstBlock(kb, p.sk, p.d, Stride(p.k.col)).transpose();
    else
      scores.noalias() = qb * ConstBlock(kb, p.d, p.sk, Stride(p.k.row));
    const std::byte* mb =
        mask ? mask + (batch_offset(b, p.batch_dims, p.mask.batch) + r0 * p.mask.row) * mask_bytes : nullptr;
    for (std::int64_t r = 0; r < rows; ++r) {
      ArrayMap z(s + r * p.sk, p.sk);
      // The unfused ops' arithmetic in their order: scale, mask, then softmax_kernel's row.
      if (p.scale_kind == AttentionPlan::Scale::mul)
        z *= p.scale;
      else if (p.scale_kind == AttentionPlan::Scale::div)
        z /= p.scale;
      if (mb && p.mask_kind == AttentionPlan::Mask::add) {
        const auto* m = reinterpret_cast<const float*>(mb) + r * p.mask.row;
        // A mask is a contiguous value: its column stride is 1, or 0 where it broadcasts across keys.
        if (p.mask.col == 1)
          z += ConstArrayMap(m, p.sk);
        else
          z += m[0];
      } else if (mb) {
        // where: the test where_kernel makes (a bool, or an f32 that is nonzero).
        const bool when = p.mask_kind == AttentionPlan::Mask::fill_true;
        const std::byte* m = mb + r * p.mask.row * mask_bytes;
        for (std::int64_t c = 0; c < p.sk; ++c) {
          const std::byte* e = m + c * p.mask.col * mask_bytes;
          const bool cond =
              p.bool_condition ? *reinterpret_cast<const bool*>(e) : *reinterpret_cast<const float*>(e) != 0.0f;
          if (cond == when) z[c] = p.fill;
        }
      }
      z = (z - z.maxCoeff()).exp();
      z /= z.sum();
    }
    Block ob(out + batch_offset(b, p.batch_dims, p.out.batch) + r0 * p.out.row, rows, p.dv, Stride(p.out.row));
    ob.noalias() = scores * ConstBlock(v + batch_offset(b, p.batch_dims, p.v.batch), p.sk, p.dv, Stride(p.v.row));
  };
  // Part j owns score block j of the scratch; parallel_ranges over `parts` (<= threads) items of grain 1
  // hands each part to one call.
  parallel_ranges(args.pool, parts, 1, [&](std::int64_t j0, std::int64_t j1) {
    for (std::int64_t j = j0; j < j1; ++j) {
      float* s = scratch + j * p.block_floats();
      for (std::int64_t i = items * j / parts, e = items * (j + 1) / parts; i < e; ++i) item(i, s);
    }
  });
  return {};
}

}  // namespace rml::detail
