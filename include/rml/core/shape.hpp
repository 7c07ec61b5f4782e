// Shape and TensorType: static dimensions and their printed form `f32 [2, 16]`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rml/core/checked.hpp"
#include "rml/core/dtype.hpp"
#include "rml/core/reflect.hpp"

namespace rml {

/// A shape's dimensions: up to six are held inline, without an allocation.
using Dims = SmallVector<std::int64_t, 6>;

/// A static shape: every dimension >= 0. Row-major; rank 0 is a scalar.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) : dims_(dims) {}
  explicit Shape(Dims dims) : dims_(std::move(dims)) {}
  explicit Shape(const std::vector<std::int64_t>& dims) : dims_(dims) {}

  [[nodiscard]] std::size_t rank() const noexcept { return dims_.size(); }
  [[nodiscard]] bool empty() const noexcept { return dims_.empty(); }
  [[nodiscard]] std::int64_t operator[](std::size_t i) const noexcept { return dims_[i]; }
  std::int64_t& operator[](std::size_t i) noexcept { return dims_[i]; }
  [[nodiscard]] const Dims& dims() const noexcept { return dims_; }
  Dims& dims() noexcept { return dims_; }
  [[nodiscard]] auto begin() const noexcept { return dims_.begin(); }
  [[nodiscard]] auto end() const noexcept { return dims_.end(); }
  void push_back(std::int64_t d) { dims_.push_back(d); }

  /// The element count, or nothing when a dimension is negative or the product of the non-zero
  /// dimensions overflows int64 (checked_extent).
  [[nodiscard]] std::optional<std::int64_t> checked_numel() const noexcept {
    return checked_product(std::span<const std::int64_t>(dims_.data(), dims_.size()));
  }
  /// The element count of a shape already known valid (checked_numel succeeded); 0 for one that
  /// is not, so a caller that skipped the check reads nothing instead of overflowing.
  [[nodiscard]] std::int64_t numel() const noexcept { return checked_numel().value_or(0); }

  /// `[2, 16]`; `[]` for a scalar.
  [[nodiscard]] std::string to_string() const {
    std::string s = "[";
    for (std::size_t i = 0; i < dims_.size(); ++i) {
      if (i) s += ", ";
      s += std::to_string(dims_[i]);
    }
    return s + "]";
  }

  friend bool operator==(const Shape&, const Shape&) = default;

  static constexpr auto fields() { return std::tuple{field("dims", &Shape::dims_)}; }

 private:
  Dims dims_;
};

/// A dtype and a static shape.
struct TensorType {
  DType dtype = DType::f32;
  Shape shape;

  /// `f32 [2, 16]`; a scalar is `f32 []`.
  [[nodiscard]] std::string to_string() const { return std::string(dtype_name(dtype)) + " " + shape.to_string(); }
  /// The byte size, or nothing when the shape is invalid or the size overflows int64.
  /// Like the element count, the size must fit even ignoring zero dimensions (see checked_extent),
  /// so every byte stride of the tensor fits too.
  [[nodiscard]] std::optional<std::int64_t> checked_nbytes() const noexcept {
    const std::span<const std::int64_t> dims(shape.dims().data(), shape.rank());
    const auto extent = checked_extent(dims);
    const auto es = static_cast<std::int64_t>(element_size(dtype));
    if (!extent || es == 0 || !checked_mul(*extent, es)) return std::nullopt;
    return *checked_product(dims) * es;
  }

  friend bool operator==(const TensorType&, const TensorType&) = default;

  static constexpr auto fields() {
    return std::tuple{field("dtype", &TensorType::dtype), field("shape", &TensorType::shape)};
  }
};

/// The element count of `shape`, or nothing when a dimension is negative or it overflows int64.
[[nodiscard]] inline std::optional<std::int64_t> checked_numel(const Shape& shape) noexcept {
  return shape.checked_numel();
}

/// The byte size of `type`, or nothing when its shape is invalid or the size overflows int64.
[[nodiscard]] inline std::optional<std::int64_t> checked_bytes(const TensorType& type) noexcept {
  return type.checked_nbytes();
}

}  // namespace rml
