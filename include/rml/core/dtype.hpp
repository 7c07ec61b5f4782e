// DType: the element types rml computes with, and their traits.
#pragma once

#include "rml/core/config.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace rml {

/// Element types. The numbers are stored in files: append only, before `count_`.
enum class DType : std::uint8_t {
  f32 = 0,
  i32 = 1,
  count_,
};

inline constexpr std::size_t dtype_count = static_cast<std::size_t>(DType::count_);

/// `"f32"` / `"i32"`.
constexpr std::string_view dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::i32: return "i32";
    case DType::count_: break;
  }
  return "?";
}

/// Bytes per element.
constexpr std::size_t element_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::i32: return 4;
    case DType::count_: break;
  }
  return 0;
}

/// The dtype named `"f32"` or `"i32"`, or nothing.
constexpr std::optional<DType> parse_dtype(std::string_view name) noexcept {
  if (name == "f32") return DType::f32;
  if (name == "i32") return DType::i32;
  return std::nullopt;
}

/// Maps a DType to its C++ element type; a DType without a row is a compile error.
template <DType D>
struct DTypeTraits;
template <>
struct DTypeTraits<DType::f32> {
  using type = float;
};
template <>
struct DTypeTraits<DType::i32> {
  using type = std::int32_t;
};
template <DType D>
using dtype_type_t = typename DTypeTraits<D>::type;

/// The DType of a C++ element type.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct DTypeOf<std::int32_t> {
  static constexpr DType value = DType::i32;
};
template <typename T>
inline constexpr DType dtype_of_v = DTypeOf<T>::value;

static_assert(element_size(DType::f32) == sizeof(float), "rml: f32 must be a 4-byte float");
static_assert(element_size(DType::i32) == sizeof(std::int32_t));

/// Calls `f(std::integral_constant<DType, D>{})` for the runtime dtype; returns what f returns.
template <typename F>
constexpr decltype(auto) visit_dtype(DType dtype, F&& f) {
  if (dtype == DType::i32) return f(std::integral_constant<DType, DType::i32>{});
  return f(std::integral_constant<DType, DType::f32>{});
}

}  // namespace rml
