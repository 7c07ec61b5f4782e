// DType: the element types rml computes with, and their traits.
#pragma once

#include "rml/core/config.hpp"
#include "rml/core/float16.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace rml {

/// Element types. The numbers are stored in files: append only, before `count_`.
enum class DType : std::uint8_t {
  f32 = 0,
  i32 = 1,
  f16 = 2,   ///< IEEE binary16; computed in f32, each result rounded back (ties to even)
  bf16 = 3,  ///< bfloat16; computed in f32 likewise
  i64 = 4,
  boolean = 5,  ///< one byte, 0 or 1; named "bool" in files
  count_,
};

inline constexpr std::size_t dtype_count = static_cast<std::size_t>(DType::count_);

/// The dtype's name in files and messages: `"f32"`, `"i32"`, `"f16"`, `"bf16"`, `"i64"`, `"bool"`.
constexpr std::string_view dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::i32:
      return "i32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::i64:
      return "i64";
    case DType::boolean:
      return "bool";
    case DType::count_:
      break;
  }
  return "?";
}

/// Bytes per element.
constexpr std::size_t element_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::i32:
      return 4;
    case DType::f16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::i64:
      return 8;
    case DType::boolean:
      return 1;
    case DType::count_:
      break;
  }
  return 0;
}

/// f32, f16 and bf16.
constexpr bool is_float_dtype(DType dtype) noexcept {
  return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16;
}
/// f16 and bf16: stored in 16 bits, computed in f32.
constexpr bool is_half_dtype(DType dtype) noexcept { return dtype == DType::f16 || dtype == DType::bf16; }
/// i32 and i64.
constexpr bool is_integer_dtype(DType dtype) noexcept { return dtype == DType::i32 || dtype == DType::i64; }

/// The dtype of that name (see dtype_name), or nothing.
constexpr std::optional<DType> parse_dtype(std::string_view name) noexcept {
  for (std::size_t i = 0; i < static_cast<std::size_t>(DType::count_); ++i)
    if (dtype_name(static_cast<DType>(i)) == name) return static_cast<DType>(i);
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
template <>
struct DTypeTraits<DType::f16> {
  using type = f16;
};
template <>
struct DTypeTraits<DType::bf16> {
  using type = bf16;
};
template <>
struct DTypeTraits<DType::i64> {
  using type = std::int64_t;
};
template <>
struct DTypeTraits<DType::boolean> {
  using type = bool;
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
template <>
struct DTypeOf<f16> {
  static constexpr DType value = DType::f16;
};
template <>
struct DTypeOf<bf16> {
  static constexpr DType value = DType::bf16;
};
template <>
struct DTypeOf<std::int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::boolean;
};
template <typename T>
inline constexpr DType dtype_of_v = DTypeOf<T>::value;

static_assert(element_size(DType::f32) == sizeof(float), "rml: f32 must be a 4-byte float");
static_assert(element_size(DType::i32) == sizeof(std::int32_t));
static_assert(element_size(DType::i64) == sizeof(std::int64_t));
static_assert(element_size(DType::boolean) == sizeof(bool), "rml: bool must be one byte");

/// The type a kernel computes in for elements of type T: f32 for the 16-bit floats, T otherwise.
template <typename T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<f16> {
  using type = float;
};
template <>
struct ComputeType<bf16> {
  using type = float;
};
template <typename T>
using compute_type_t = typename ComputeType<T>::type;

/// Calls `f(std::integral_constant<DType, D>{})` for the runtime dtype; returns what f returns.
/// An out-of-range dtype (which validation refuses before any visit) is visited as f32.
template <typename F>
constexpr decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::i32:
      return f(std::integral_constant<DType, DType::i32>{});
    case DType::f16:
      return f(std::integral_constant<DType, DType::f16>{});
    case DType::bf16:
      return f(std::integral_constant<DType, DType::bf16>{});
    case DType::i64:
      return f(std::integral_constant<DType, DType::i64>{});
    case DType::boolean:
      return f(std::integral_constant<DType, DType::boolean>{});
    case DType::f32:
    case DType::count_:
      break;
  }
  return f(std::integral_constant<DType, DType::f32>{});
}

}  // namespace rml
