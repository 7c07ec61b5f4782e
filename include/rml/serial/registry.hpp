// The type registry: how a `shared_ptr<Base>` holding a derived object is written and restored.
//
//   struct Relu : Expr { std::shared_ptr<Expr> x; static constexpr auto fields() {...} };
//   RML_REGISTER_TYPE(Relu, Expr);        // one line, at namespace scope, in a header or a .cpp
//
// The writer names the object's most-derived type (`"type": "Relu"`); the reader finds that name
// among the types registered for the field's Base and makes one. An unknown name is an error that
// names it. A non-polymorphic reflected type needs no registration.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeindex>

#include "rml/core/equal.hpp"
#include "rml/core/reflect.hpp"
#include "rml/serial/detail/common.hpp"
#include "rml/serial/reader.hpp"
#include "rml/serial/writer.hpp"

namespace rml {

/// Registers `Derived` under `name` for `shared_ptr<Derived>` and `shared_ptr<Base>` for each
/// listed base. Returns true, so it can initialise an inline variable. Call it before any
/// (de)serialization, e.g. during static initialisation; registering is not thread-safe.
template <typename Derived, typename... Bases>
bool register_type(std::string_view name) {
  static_assert(Reflected<Derived>, "rml: register_type: the type needs `static constexpr auto fields()`");
  static_assert(std::is_default_constructible_v<Derived>, "rml: register_type: the type needs a default constructor");
  static_assert((std::is_base_of_v<Bases, Derived> && ...), "rml: register_type: list only base classes of the type");
  detail::write_registry()[std::type_index(typeid(Derived))] = detail::WriteEntry{
      std::string(name),
      [](detail::SerialWriter& w, const void* p) { w.write_struct(*static_cast<const Derived*>(p)); }};
  const auto add = [&]<typename Base>() {
    detail::read_registry<Base>()[std::string(name)] = detail::ReadEntry<Base>{
        &typeid(Derived), []() -> std::shared_ptr<void> { return std::make_shared<Derived>(); },
        [](void* p) -> Base* { return static_cast<Derived*>(p); },
        [](detail::SerialReader& r, void* p) { return r.read_struct(*static_cast<Derived*>(p)); }, sizeof(Derived)};
  };
  add.template operator()<Derived>();
  (add.template operator()<Bases>(), ...);
  register_polymorphic<Derived>(name);  // structural_equal compares it by its dynamic type
  return true;
}

}  // namespace rml

/// `RML_REGISTER_TYPE(MyNode, Base1, ...)`: registers MyNode under the name `"MyNode"` for
/// `shared_ptr<MyNode>` and `shared_ptr<Base1>`...; use at namespace scope. Each translation unit
/// that sees it registers again (an idempotent overwrite), so it may sit in a header.
#define RML_REGISTER_TYPE(Type, ...)                                            \
  namespace {                                                                   \
  [[maybe_unused]] const bool RML_DETAIL_CONCAT(rml_registered_, __COUNTER__) = \
      ::rml::register_type<Type __VA_OPT__(, ) __VA_ARGS__>(#Type);             \
  }                                                                             \
  static_assert(true, "")
