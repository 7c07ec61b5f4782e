// Helpers every kernel uses: typed access to its buffers, Eigen maps over them, a small multi-index.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <Eigen/Core>

#include "rml/check/kernel.hpp"
#include "rml/core/status.hpp"
#include "rml/exec/detail/kernel_args.hpp"
#include "rml/exec/thread_pool.hpp"

namespace rml::detail {

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
