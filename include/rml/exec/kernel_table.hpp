// The kernel table: one function per (OpCode, DType) pair the op table allows, built at compile
// time. An allowed pair without a kernel is a compile error, never a runtime abort.
#pragma once

#include <array>
#include <cstddef>
#include <utility>

#include "rml/exec/kernels/common.hpp"
#include "rml/exec/kernels/conv.hpp"
#include "rml/exec/kernels/elementwise.hpp"
#include "rml/exec/kernels/matmul.hpp"
#include "rml/exec/kernels/movement.hpp"
#include "rml/exec/kernels/reduce.hpp"

namespace rml::detail {

/// The kernel of (Op, D). Each op family lists its ops; an op in none of them fails to compile.
template <OpCode Op, DType D>
constexpr KernelFn kernel_for() {
  using T = dtype_type_t<D>;
  if constexpr (is_unary(Op) || Op == OpCode::LogicalNot)
    return &unary_kernel<Op, T>;
  else if constexpr (is_binary(Op) || Op == OpCode::LogicalAnd || Op == OpCode::LogicalOr)
    return &binary_kernel<Op, T>;
  else if constexpr (Op == OpCode::Where)
    return &where_kernel<T>;
  else if constexpr (Op == OpCode::MatMul)
    return &matmul_kernel<T>;
  else if constexpr (Op == OpCode::Conv2d)
    return &conv2d_kernel<T>;
  else if constexpr (Op == OpCode::MaxPool2d || Op == OpCode::AvgPool2d)
    return &pool2d_kernel<Op, T>;
  else if constexpr (Op == OpCode::Sum || Op == OpCode::Mean || Op == OpCode::Max || Op == OpCode::Min)
    return &reduce_kernel<Op, T>;
  else if constexpr (Op == OpCode::Softmax)
    return &softmax_kernel<T>;
  else if constexpr (Op == OpCode::ArgMax)
    return &argmax_kernel<T>;
  else if constexpr (Op == OpCode::Reshape || Op == OpCode::Copy)
    return &copy_kernel<T>;
  else if constexpr (Op == OpCode::Transpose || Op == OpCode::Slice || Op == OpCode::Expand)
    return &strided_copy_kernel<T>;
  else if constexpr (Op == OpCode::Pad)
    return &pad_kernel<T>;
  else if constexpr (Op == OpCode::Concat)
    return &concat_kernel<T>;
  else if constexpr (Op == OpCode::Gather)
    return &gather_kernel<T>;
  else if constexpr (Op == OpCode::Cast)
    return &cast_kernel<T>;
  else
    static_assert(dependent_false<T>, "rml: an op the op table allows has no kernel; add it to kernel_for()");
}

inline Status no_kernel(const Kernel& k, const KernelArgs&) {
  return internal_error("no kernel for " + std::string(op_name(k.op)) + " on " + std::string(dtype_name(k.dtype)));
}

/// A pair the op table rules out gets `no_kernel` and is never instantiated.
template <OpCode Op, DType D>
constexpr KernelFn table_entry() {
  if constexpr (dtype_rule_admits(op_info(Op).dtypes, D))
    return kernel_for<Op, D>();
  else
    return &no_kernel;
}

template <std::size_t Op, std::size_t... D>
constexpr std::array<KernelFn, dtype_count> kernel_row(std::index_sequence<D...>) {
  return {table_entry<static_cast<OpCode>(Op), static_cast<DType>(D)>()...};
}

template <std::size_t... I>
constexpr auto make_kernel_table(std::index_sequence<I...>) {
  return std::array<std::array<KernelFn, dtype_count>, op_count>{
      kernel_row<I>(std::make_index_sequence<dtype_count>{})...};
}

/// kernel_table[op][dtype].
inline constexpr auto kernel_table = make_kernel_table(std::make_index_sequence<op_count>{});

/// The function that runs `k`.
inline KernelFn find_kernel(const Kernel& k) noexcept {
  return kernel_table[static_cast<std::size_t>(k.op)][static_cast<std::size_t>(k.dtype)];
}

/// Scratch bytes a kernel needs beyond its inputs and outputs when run on `threads` threads.
inline std::size_t scratch_bytes(const Kernel& k, int threads) noexcept {
  if (k.op == OpCode::Conv2d) return conv_scratch_bytes(k.as<Conv2dPlan>(), threads);
  // The 16-bit floats reduce into one f32 accumulator per output.
  const bool reduce = k.op == OpCode::Sum || k.op == OpCode::Mean || k.op == OpCode::Max || k.op == OpCode::Min;
  if (reduce && is_half_dtype(k.dtype)) return static_cast<std::size_t>(k.as<ReducePlan>().out_n) * sizeof(float);
  return 0;
}

}  // namespace rml::detail
