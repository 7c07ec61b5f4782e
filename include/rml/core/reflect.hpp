// Field descriptors: each reflected struct lists its fields once, and generic algorithms walk them.
//
//   struct ValueDef {
//     std::string name;
//     TensorType type;
//     static constexpr auto fields() {
//       return std::tuple{rml::field("name", &ValueDef::name), rml::field("type", &ValueDef::type)};
//     }
//   };
//
// A derived struct concatenates: `std::tuple_cat(Base::fields(), std::tuple{field("x", &D::x)})`.
// The names are wire keys (MessagePack, debug output, difference paths): never rename one, only add.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "rml/core/small_vector.hpp"

namespace rml {

/// One field: its wire name and a pointer to the member.
template <typename Class, typename Member>
struct Field {
  using class_type = Class;
  using member_type = Member;
  std::string_view name;
  Member Class::*member;
};

/// `field("name", &T::name)`: a descriptor for `fields()`.
template <typename Class, typename Member>
constexpr Field<Class, Member> field(std::string_view name, Member Class::*member) noexcept {
  return {name, member};
}

/// A type with a `static constexpr auto fields()` returning a tuple of Field.
template <typename T>
concept Reflected = requires { T::fields(); };

/// The number of fields of a reflected type.
template <Reflected T>
inline constexpr std::size_t field_count_v = std::tuple_size_v<decltype(T::fields())>;

/// Calls `f(name, member)` for each field of `obj`, in declaration order.
template <Reflected T, typename F>
constexpr void for_each_field(T& obj, F&& f) {
  std::apply([&](const auto&... fd) { (f(fd.name, obj.*(fd.member)), ...); }, std::remove_cv_t<T>::fields());
}

/// Calls `f(name, a_member, b_member)` for each field of two objects of one type.
template <Reflected T, typename F>
constexpr void for_each_field_pair(T& a, T& b, F&& f) {
  std::apply([&](const auto&... fd) { (f(fd.name, a.*(fd.member), b.*(fd.member)), ...); },
             std::remove_cv_t<T>::fields());
}

/// Like for_each_field, stopping at the first call that returns false; returns false if one did.
template <Reflected T, typename F>
constexpr bool all_fields(T& obj, F&& f) {
  return std::apply([&](const auto&... fd) { return (f(fd.name, obj.*(fd.member)) && ...); },
                    std::remove_cv_t<T>::fields());
}

namespace detail {

// Checks at compile time that field names are unique within a type.
template <typename Tuple, std::size_t... I>
constexpr bool unique_field_names(const Tuple& t, std::index_sequence<I...>) {
  const std::string_view names[] = {std::string_view{}, std::get<I>(t).name...};
  constexpr std::size_t n = sizeof...(I);
  for (std::size_t i = 1; i <= n; ++i)
    for (std::size_t j = i + 1; j <= n; ++j)
      if (names[i] == names[j]) return false;
  return true;
}

}  // namespace detail

/// True when the field names of T are distinct; use in a static_assert next to the struct.
template <Reflected T>
constexpr bool has_unique_field_names() {
  return detail::unique_field_names(T::fields(), std::make_index_sequence<field_count_v<T>>{});
}

// ---- type categories the generic algorithms dispatch on ----

template <typename T>
struct is_vector : std::false_type {};
template <typename T, typename A>
struct is_vector<std::vector<T, A>> : std::true_type {};
template <typename T, std::size_t N>
struct is_vector<SmallVector<T, N>> : std::true_type {};

template <typename T>
struct is_optional : std::false_type {};
template <typename T>
struct is_optional<std::optional<T>> : std::true_type {};

template <typename T>
struct is_map : std::false_type {};
template <typename K, typename V, typename C, typename A>
struct is_map<std::map<K, V, C, A>> : std::true_type {};
template <typename K, typename V, typename H, typename E, typename A>
struct is_map<std::unordered_map<K, V, H, E, A>> : std::true_type {};

template <typename T>
struct is_shared_ptr : std::false_type {};
template <typename T>
struct is_shared_ptr<std::shared_ptr<T>> : std::true_type {};

template <typename T>
struct is_variant : std::false_type {};
template <typename... T>
struct is_variant<std::variant<T...>> : std::true_type {};

}  // namespace rml
