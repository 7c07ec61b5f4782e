// The plain types of one kernel call (fused epilogue, buffers, the kernel function's signature),
// without Eigen: the executor's run loop needs them whether or not the kernels are in this TU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "rml/check/kernel.hpp"
#include "rml/core/status.hpp"
#include "rml/exec/thread_pool.hpp"

namespace rml::detail {

/// A unary op applied after a producing kernel (fused activation), or one link of a unary chain.
struct UnaryStep {
  OpCode op = OpCode::Relu;
  bool gelu_tanh = false;
  /// For a binary op fused with a constant scalar operand (`minimum(x, 6)`, `x * 0.5`, `1 - x`):
  /// that operand, and whether it is the left one.
  float scalar = 0.0f;
  bool scalar_left = false;
};

/// Work fused into a producer's output: `out = chain(out + bias + residual)`. For matmul the bias
/// is a row vector (one value per column), for conv2d one value per output channel. The residual
/// (conv2d only) is a tensor laid out as the output, added element by element. A 16-bit step's
/// residual holds the step's own type (the kernel casts the pointer back), and its epilogue rounds
/// after every op (kernels/elementwise.hpp's half_epilogue).
struct Epilogue {
  const float* bias = nullptr;
  std::span<const UnaryStep> chain;  ///< owned by the executor's step
  const float* residual = nullptr;
  [[nodiscard]] bool empty() const noexcept { return bias == nullptr && chain.empty() && residual == nullptr; }
};

/// The scratch each part of a step has to itself (a part: one of the ranges a kernel splits its work
/// into, run as index q of a parallel_for): part q's at base + q * stride, 64-byte aligned.
///
/// At several threads the executor keeps one such region per part for the whole program, so part q
/// of every step uses the same bytes. The caller always runs part 0 and a worker part 1
/// (Workers::parallel_for), so those bytes are in the cache of the core that writes them next.
/// Carved from each step's own scratch instead, part 0 of one step wrote where part 1 of the step
/// before had, and its lines first came over from the other core. ResNet-18 at 2 threads took 0.92
/// of the time with its convolutions' parts in such regions (docs/ops.md, "Which thread writes what").
struct PartScratch {
  std::byte* base = nullptr;
  std::size_t stride = 0;
  [[nodiscard]] float* floats(std::int64_t q) const noexcept {
    return reinterpret_cast<float*>(base + static_cast<std::size_t>(q) * stride);
  }
};

/// The buffers of one kernel call. Inputs and outputs are in the node's order; `scratch` holds
/// `scratch_bytes(kernel)` bytes, 64-byte aligned, and `parts` the regions of the steps that plan
/// scratch per part (Step::part_bytes; none for the others).
struct KernelArgs {
  std::span<const std::byte* const> in;
  std::span<std::byte* const> out;
  const ThreadPool* pool = nullptr;
  std::byte* scratch = nullptr;
  const Epilogue* epilogue = nullptr;
  const void* packed = nullptr;  ///< constant weights the executor packed for this kernel, or null
  PartScratch parts;
};

using KernelFn = Status (*)(const Kernel&, const KernelArgs&);

}  // namespace rml::detail
