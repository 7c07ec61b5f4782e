// What every kernel receives: the plan's buffers, the thread pool, scratch space and an epilogue.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <Eigen/Core>

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

/// Work fused into a producer's output: `out = chain(out + bias)`. For matmul the bias is a row
/// vector (one value per column), for conv2d one value per output channel.
struct Epilogue {
  const float* bias = nullptr;
  std::span<const UnaryStep> chain;  ///< owned by the executor's step
  [[nodiscard]] bool empty() const noexcept { return bias == nullptr && chain.empty(); }
};

/// The buffers of one kernel call. Inputs and outputs are in the node's order; `scratch` holds
/// `scratch_bytes(kernel)` bytes, 64-byte aligned.
struct KernelArgs {
  std::span<const std::byte* const> in;
  std::span<std::byte* const> out;
  const ThreadPool* pool = nullptr;
  std::byte* scratch = nullptr;
  const Epilogue* epilogue = nullptr;
  const void* packed = nullptr;  ///< constant weights the executor packed for this kernel, or null
};

using KernelFn = Status (*)(const Kernel&, const KernelArgs&);

template <typename T>
const T* in_ptr(const KernelArgs& a, std::size_t i) noexcept {
  return reinterpret_cast<const T*>(a.in[i]);
}
template <typename T>
T* out_ptr(const KernelArgs& a, std::size_t i = 0) noexcept {
  return reinterpret_cast<T*>(a.out[i]);
}

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <typename>
inline constexpr bool dependent_false = false;

/// A multi-index of `rank` zeros that lives on the stack for ranks up to 12 (kernels must not
/// allocate in steady state; higher ranks are rare and fall back to the heap).
class SmallIndex {
 public:
  explicit SmallIndex(std::size_t rank) : data_(rank <= kInline ? inline_ : (heap_.resize(rank), heap_.data())) {
    std::fill(data_, data_ + std::min(rank, kInline), std::int64_t{0});
  }
  SmallIndex(const SmallIndex&) = delete;
  SmallIndex& operator=(const SmallIndex&) = delete;
  std::int64_t& operator[](std::size_t i) noexcept { return data_[i]; }

 private:
  static constexpr std::size_t kInline = 12;
  std::int64_t inline_[kInline];
  std::vector<std::int64_t> heap_;
  std::int64_t* data_;
};

}  // namespace rml::detail
