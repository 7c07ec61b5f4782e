// Kernel: the plain-data plan compile_op hands to the executor, one struct per op family.
//
// Every shape-dependent number a kernel needs (normalised axes, broadcast strides, conv geometry,
// ...) is resolved here by the checker; the kernels in rml/exec read only these plans and never
// re-derive a shape, so shape rules and kernels cannot drift apart. No Eigen in this header.
#pragma once

#include <cstdint>
#include <variant>
#include <vector>

#include "rml/core/dtype.hpp"
#include "rml/core/shape.hpp"
#include "rml/ir/ops.hpp"

namespace rml {

/// Unary elementwise: `n` elements in, `n` out.
struct UnaryPlan {
  std::int64_t n = 0;
  bool gelu_tanh = false;  ///< gelu with approximate = "tanh"
};

/// Elementwise over broadcast inputs (binary ops, where). The output's dimensions are collapsed:
/// unit dimensions dropped, neighbours that every input walks contiguously merged. `strides[i][d]`
/// is input i's element stride along dims[d], 0 where it broadcasts; along the last dimension it
/// is always 0 or 1, so the innermost loop is vector-vector, vector-scalar or scalar-vector.
struct BroadcastPlan {
  std::int64_t n = 0;           ///< output elements
  Dims dims;                    ///< collapsed output dims (at least one)
  std::vector<Dims> strides;    ///< per input
  bool bool_condition = false;  ///< where: the condition is bool (else an f32 mask)
  bool fmod = false;            ///< mod: the remainder takes the dividend's sign (else the divisor's)
};

/// `C[b] = A[b] @ B[b]` over row-major matrices. Batch dims are broadcast and collapsed; a batch
/// that only `a` has, with `b` shared, is folded into m (one big GEMM).
struct MatMulPlan {
  std::int64_t m = 0, k = 0, n = 0;
  Dims batch_dims;       ///< collapsed output batch dims (may be empty)
  Dims a_batch_strides;  ///< element strides, 0 where broadcast
  Dims b_batch_strides;
  std::int64_t a_numel = 0, b_numel = 0;  ///< the operands' element counts
};

/// conv2d geometry (NCHW). Groups split channels; `cg = c / groups`, `og = o / groups`.
struct Conv2dPlan {
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  std::int64_t o = 0, kh = 0, kw = 0;
  std::int64_t oh = 0, ow = 0;
  std::int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  std::int64_t pad_top = 0, pad_left = 0;
  std::int64_t groups = 1, cg = 0, og = 0;
  bool has_bias = false;
};

/// max/avg pool geometry over `planes = n * c` planes of h x w. Every window holds at least one
/// element of the input (the checker requires pads < kernel).
struct Pool2dPlan {
  std::int64_t planes = 0, h = 0, w = 0;
  std::int64_t kh = 0, kw = 0, oh = 0, ow = 0;
  std::int64_t stride_h = 1, stride_w = 1, pad_top = 0, pad_left = 0;
  bool count_include_pad = true;
};

/// Reduction. The input dims are collapsed into alternating kept/reduced runs; the common case
/// is a single reduced run: `[outer, reduce, inner]` with `simple` set.
struct ReducePlan {
  Dims dims;                          ///< collapsed input dims
  std::vector<std::uint8_t> reduced;  ///< per collapsed dim: 1 when reduced
  std::int64_t outer = 1, reduce = 1, inner = 1;
  bool simple = true;
  std::int64_t out_n = 0;
  std::int64_t count = 1;  ///< elements per output (for mean)
};

/// An op along one axis of `[outer, axis, inner]` (softmax, argmax).
struct AxisPlan {
  std::int64_t outer = 1, axis = 1, inner = 1;
  bool wide_output = false;  ///< argmax: the indices are i64 (else i32)
};

/// out[i] = in[offset + sum_d idx_d * in_strides[d]] over contiguous `dims` (transpose, slice, expand).
struct StridedCopyPlan {
  std::int64_t n = 0;
  Dims dims;
  Dims in_strides;
  std::int64_t in_offset = 0;
};

/// pad: fill `out_n` elements with `value`, then copy the input (contiguous `dims`) to
/// out[offset + sum_d idx_d * out_strides[d]].
struct PadPlan {
  std::int64_t out_n = 0;
  double value = 0;
  Dims dims;
  Dims out_strides;
  std::int64_t out_offset = 0;
};

/// concat: `outer` rows; input i contributes `chunks[i]` contiguous elements to each row.
struct ConcatPlan {
  std::int64_t outer = 1;
  std::vector<std::int64_t> chunks;
  std::int64_t row = 0;  ///< sum of chunks
};

/// gather: data `[outer, axis, inner]`, `count` indices; out `[outer, count, inner]`.
struct GatherPlan {
  std::int64_t outer = 1, axis = 0, inner = 1, count = 0;
  bool wide_indices = false;  ///< indices are i64 (else i32)
};

/// cast from the kernel's dtype to `to`.
struct CastPlan {
  std::int64_t n = 0;
  DType to = DType::f32;
};

/// reshape and copy: the bytes unchanged.
struct CopyPlan {
  std::int64_t nbytes = 0;
};

/// What the executor runs for a node: the op, the dtype its kernel is instantiated for (the
/// dtype of input 0; cast converts it to CastPlan::to), and the family's plan.
struct Kernel {
  OpCode op = OpCode::Copy;
  DType dtype = DType::f32;
  std::variant<CopyPlan, UnaryPlan, BroadcastPlan, MatMulPlan, Conv2dPlan, Pool2dPlan, ReducePlan, AxisPlan,
               StridedCopyPlan, PadPlan, ConcatPlan, GatherPlan, CastPlan>
      plan;

  /// The plan as family P (the op decides the family; asking for another is a bug).
  template <typename P>
  [[nodiscard]] const P& as() const noexcept {
    return *std::get_if<P>(&plan);
  }
};

}  // namespace rml
