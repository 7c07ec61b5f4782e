// Structural equality (optionally up to a renaming of values and nodes) and a debug printer,
// written once over field descriptors.
#pragma once

#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#if defined(__GNUG__)
#include <cxxabi.h>
#endif

#include "rml/core/reflect.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"

namespace rml {

class Graph;  // rml/ir/graph.hpp; compared and printed through its def()

namespace detail {

class EqualContext;

/// How structural_equal and to_debug_string reach the fields of an object held through a
/// `shared_ptr<Base>` whose dynamic type is a class derived from Base: by its dynamic type.
/// rml::register_type (RML_REGISTER_TYPE, rml/serial/registry.hpp) fills it for every type it
/// registers; register_polymorphic below does it for a type that is not serialized.
struct PolymorphicEntry {
  std::string name;
  bool (*equal)(const void* a, const void* b, EqualContext& ctx);  // most-derived pointers, same type
  void (*print)(std::string& out, const void* p);
};

inline std::map<std::type_index, PolymorphicEntry>& polymorphic_registry() {
  static std::map<std::type_index, PolymorphicEntry> registry;
  return registry;
}

inline const PolymorphicEntry* find_polymorphic(const std::type_info& type) {
  const auto& registry = polymorphic_registry();
  const auto it = registry.find(std::type_index(type));
  return it == registry.end() ? nullptr : &it->second;
}

/// A dynamic type's registered name, or its C++ name.
inline std::string type_label(const std::type_info& type) {
  if (const PolymorphicEntry* e = find_polymorphic(type)) return e->name;
#if defined(__GNUG__)
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  if (status == 0 && demangled) {
    std::string name(demangled);
    std::free(demangled);
    return name;
  }
#endif
  return type.name();
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Debug printing

namespace detail {

template <typename T>
void debug_print(std::string& out, const T& v);

inline void debug_print_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      static const char hex[] = "0123456789abcdef";
      out += "\\u00";
      out += hex[(c >> 4) & 0xF];
      out += hex[c & 0xF];
      continue;
    }
    out += c;
  }
  out += '"';
}

template <typename T>
void debug_print(std::string& out, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    out += v ? "true" : "false";
  } else if constexpr (std::is_same_v<T, DType>) {
    out += dtype_name(v);
  } else if constexpr (std::is_enum_v<T>) {
    out += std::to_string(static_cast<std::int64_t>(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    char buf[40];  // to_chars: the shortest text that reads back, in any locale
    out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  } else if constexpr (std::is_arithmetic_v<T>) {
    out += std::to_string(v);
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    debug_print_string(out, std::string_view(v));
  } else if constexpr (std::is_same_v<T, Graph>) {
    debug_print(out, v.def());
  } else if constexpr (std::is_same_v<T, Tensor>) {
    out += "Tensor(" + v.type().to_string() + (v.is_symbolic() ? ", symbolic)" : ")");
  } else if constexpr (Reflected<T>) {
    out += '{';
    bool first = true;
    for_each_field(v, [&](std::string_view name, const auto& m) {
      if (!first) out += ", ";
      first = false;
      out += name;
      out += ": ";
      debug_print(out, m);
    });
    out += '}';
  } else if constexpr (is_vector<T>::value) {
    out += '[';
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) out += ", ";
      debug_print(out, v[i]);
    }
    out += ']';
  } else if constexpr (is_optional<T>::value) {
    if (v)
      debug_print(out, *v);
    else
      out += "null";
  } else if constexpr (is_map<T>::value) {
    out += '{';
    bool first = true;
    for (const auto& [k, val] : v) {
      if (!first) out += ", ";
      first = false;
      debug_print(out, k);
      out += ": ";
      debug_print(out, val);
    }
    out += '}';
  } else if constexpr (is_shared_ptr<T>::value) {
    if (!v) {
      out += "null";
      return;
    }
    if constexpr (std::is_polymorphic_v<typename T::element_type>) {
      const auto& object = *v;
      const std::type_info& type = typeid(object);
      if (type != typeid(typename T::element_type)) {
        const PolymorphicEntry* entry = find_polymorphic(type);
        out += type_label(type);
        if (entry)
          entry->print(out, dynamic_cast<const void*>(v.get()));
        else
          out += "{...}";
        return;
      }
    }
    debug_print(out, *v);
  } else if constexpr (is_variant<T>::value) {
    std::visit([&](const auto& x) { debug_print(out, x); }, v);
  } else {
    static_assert(sizeof(T) == 0, "rml: to_debug_string: this field type has no printer; reflect it with fields()");
  }
}

}  // namespace detail

/// A one-line rendering of any reflected value: `{name: "x", type: {dtype: f32, shape: {dims: [2]}}}`.
template <typename T>
std::string to_debug_string(const T& value) {
  std::string out;
  detail::debug_print(out, value);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Structural equality

/// How structural_equal compares.
struct EqualOptions {
  /// Compare up to a consistent renaming: a string field called `name` of a list element (a
  /// graph's `values[i].name` and `nodes[i].name`) matches through a one-to-one mapping of names,
  /// one mapping per element type, instead of by spelling. An empty name matches only an empty name.
  bool map_names = false;
};

namespace detail {

template <typename T>
std::string short_repr(const T& v) {
  std::string s = to_debug_string(v);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// The state of one comparison. The path to a difference is collected only once one is found,
// while the recursion unwinds, so equal inputs cost no string work.
class EqualContext {
 public:
  EqualContext(const EqualOptions& options, bool explain) : options_(options), explain_(explain) {}

  [[nodiscard]] const EqualOptions& options() const noexcept { return options_; }

  bool differ(const std::string& what) {
    if (explain_) what_ = what;
    return false;
  }
  template <typename F>
  bool differ_lazy(F&& what) {
    if (explain_) what_ = what();
    return false;
  }
  bool in_field(std::string_view name) { return push("." + std::string(name)); }
  bool in_index(std::size_t i) { return push("[" + std::to_string(i) + "]"); }
  template <typename K>
  bool in_key(const K& key) {
    return explain_ ? push("[" + short_repr(key) + "]") : false;
  }

  /// Checks `a` and `b` against the renaming of names of list elements of type `owner`.
  bool same_name(const std::type_info& owner, const std::string& a, const std::string& b) {
    if (a.empty() || b.empty()) {
      if (a.empty() && b.empty()) return true;
      return differ_lazy(
          [&] { return short_repr(a) + " != " + short_repr(b) + " (an empty name matches only itself)"; });
    }
    Renaming& r = renamings_[std::type_index(owner)];
    const std::string& a_maps_to = r.forward.try_emplace(a, b).first->second;
    const std::string& b_maps_from = r.backward.try_emplace(b, a).first->second;
    if (a_maps_to == b && b_maps_from == a) return true;
    return differ_lazy([&] {
      return short_repr(a) + " != " + short_repr(b) + " (" +
             (a_maps_to != b ? short_repr(a) + " maps to " + short_repr(a_maps_to)
                             : short_repr(b_maps_from) + " maps to " + short_repr(b)) +
             ")";
    });
  }

  /// `not structurally equal: nodes[3].inputs[1]: 5 != 6`.
  [[nodiscard]] std::string message() const {
    std::string path;
    for (auto it = path_.rbegin(); it != path_.rend(); ++it) path += *it;
    if (!path.empty() && path[0] == '.') path.erase(0, 1);
    return "not structurally equal: " + (path.empty() ? std::string("<root>") : path) + ": " + what_;
  }

 private:
  struct Renaming {
    std::unordered_map<std::string, std::string> forward, backward;
  };
  bool push(std::string segment) {
    if (explain_) path_.push_back(std::move(segment));
    return false;
  }

  const EqualOptions& options_;
  bool explain_;
  std::string what_;
  std::vector<std::string> path_;  // innermost first
  std::map<std::type_index, Renaming> renamings_;
};

template <typename T>
bool equal_at(const T& a, const T& b, EqualContext& ctx);

// A reflected struct, field by field; `list_element` says whether it sits in a vector (then its
// `name` field is subject to EqualOptions::map_names).
template <Reflected T>
bool equal_struct(const T& a, const T& b, EqualContext& ctx, bool list_element) {
  const bool rename = list_element && ctx.options().map_names;
  return std::apply(
      [&](const auto&... fd) {
        const auto one = [&](const auto& f) {
          using M = std::remove_cvref_t<decltype(a.*(f.member))>;
          bool same;
          if constexpr (std::is_same_v<M, std::string>) {
            same = rename && f.name == "name" ? ctx.same_name(typeid(T), a.*(f.member), b.*(f.member))
                                              : equal_at(a.*(f.member), b.*(f.member), ctx);
          } else {
            same = equal_at(a.*(f.member), b.*(f.member), ctx);
          }
          return same || ctx.in_field(f.name);
        };
        return (one(fd) && ...);
      },
      T::fields());
}

template <typename T>
bool equal_at(const T& a, const T& b, EqualContext& ctx) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a == b || (std::isnan(a) && std::isnan(b))) return true;
    return ctx.differ_lazy([&] { return short_repr(a) + " != " + short_repr(b); });
  } else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::string>) {
    if (a == b) return true;
    return ctx.differ_lazy([&] { return short_repr(a) + " != " + short_repr(b); });
  } else if constexpr (std::is_same_v<T, Graph>) {
    return equal_at(a.def(), b.def(), ctx);
  } else if constexpr (std::is_same_v<T, Tensor>) {
    if (a.type() != b.type()) return ctx.differ(a.type().to_string() + " != " + b.type().to_string());
    if (a.is_symbolic() != b.is_symbolic()) return ctx.differ("symbolic != concrete");
    if (a.defined() != b.defined()) return ctx.differ(a.defined() ? "data != no data" : "no data != data");
    if (!a.defined() || a.nbytes() == 0) return true;
    if (a.raw_data() == b.raw_data() || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0) return true;
    const std::size_t es = element_size(a.dtype());
    for (std::size_t i = 0; i < a.nbytes(); i += es)
      if (std::memcmp(a.raw_data() + i, b.raw_data() + i, es) != 0)
        return ctx.differ("tensor data differs at element " + std::to_string(i / es));
    return ctx.differ("tensor data differs");
  } else if constexpr (Reflected<T>) {
    return equal_struct(a, b, ctx, false);
  } else if constexpr (is_vector<T>::value) {
    if (a.size() != b.size()) return ctx.differ("size " + std::to_string(a.size()) + " != " + std::to_string(b.size()));
    for (std::size_t i = 0; i < a.size(); ++i) {
      bool same;
      if constexpr (Reflected<typename T::value_type>)
        same = equal_struct(a[i], b[i], ctx, true);
      else
        same = equal_at<typename T::value_type>(a[i], b[i], ctx);
      if (!same) return ctx.in_index(i);
    }
    return true;
  } else if constexpr (is_optional<T>::value) {
    if (a.has_value() != b.has_value()) return ctx.differ(a ? "value != null" : "null != value");
    return !a || equal_at(*a, *b, ctx);
  } else if constexpr (is_map<T>::value) {
    if (a.size() != b.size()) return ctx.differ("size " + std::to_string(a.size()) + " != " + std::to_string(b.size()));
    for (const auto& entry : a) {
      auto it = b.find(entry.first);
      if (it == b.end())
        return ctx.differ_lazy([&] { return "key " + short_repr(entry.first) + " missing on the right"; });
      if (!equal_at(entry.second, it->second, ctx)) return ctx.in_key(entry.first);
    }
    return true;
  } else if constexpr (is_shared_ptr<T>::value) {
    if (!a || !b) {
      if (!a && !b) return true;
      return ctx.differ(a ? "object != null" : "null != object");
    }
    if (a.get() == b.get()) return true;
    if constexpr (std::is_polymorphic_v<typename T::element_type>) {
      // Compare the dynamic types, then every field of the dynamic type, not only the Base's.
      const auto& oa = *a;
      const auto& ob = *b;
      const std::type_info& ta = typeid(oa);
      const std::type_info& tb = typeid(ob);
      if (ta != tb) return ctx.differ_lazy([&] { return "type " + type_label(ta) + " != " + type_label(tb); });
      if (ta != typeid(typename T::element_type)) {
        const PolymorphicEntry* entry = find_polymorphic(ta);
        if (!entry)
          return ctx.differ_lazy([&] {
            return "type " + type_label(ta) + " is not registered, so its fields are unknown (RML_REGISTER_TYPE)";
          });
        return entry->equal(dynamic_cast<const void*>(a.get()), dynamic_cast<const void*>(b.get()), ctx);
      }
    }
    return equal_at(*a, *b, ctx);
  } else if constexpr (is_variant<T>::value) {
    if (a.index() != b.index())
      return ctx.differ("alternative " + std::to_string(a.index()) + " != " + std::to_string(b.index()));
    return std::visit(
        [&](const auto& x) {
          using X = std::decay_t<decltype(x)>;
          return equal_at(x, *std::get_if<X>(&b), ctx);
        },
        a);
  } else {
    static_assert(sizeof(T) == 0, "rml: structural_equal: this field type is not comparable; reflect it with fields()");
    return false;
  }
}

}  // namespace detail

/// Lets structural_equal and to_debug_string see every field of `Derived` when it is held through
/// a `shared_ptr` to one of its bases, naming it `name` in messages. RML_REGISTER_TYPE does this
/// for every type it registers for serialization; call this for a type that is not serialized.
template <Reflected Derived>
void register_polymorphic(std::string_view name) {
  detail::polymorphic_registry()[std::type_index(typeid(Derived))] = detail::PolymorphicEntry{
      std::string(name),
      [](const void* a, const void* b, detail::EqualContext& ctx) {
        return detail::equal_struct(*static_cast<const Derived*>(a), *static_cast<const Derived*>(b), ctx, false);
      },
      [](std::string& out, const void* p) { detail::debug_print(out, *static_cast<const Derived*>(p)); }};
}

/// True when `a` and `b` hold the same fields, recursively (tensors compare dtype, shape, bytes;
/// a Graph compares its def(); an object behind a `shared_ptr<Base>` compares its dynamic type
/// and, for a type derived from Base, every field of that type). With `options.map_names`,
/// graphs compare up to renaming of values and nodes.
template <typename T>
bool structural_equal(const T& a, const T& b, const EqualOptions& options = {}) {
  detail::EqualContext ctx(options, false);
  return detail::equal_at(a, b, ctx);
}

/// OK when structurally equal; otherwise INVALID_ARGUMENT naming the first difference by path,
/// e.g. `not structurally equal: nodes[3].inputs[1]: 5 != 6`.
template <typename T>
Status assert_structural_equal(const T& a, const T& b, const EqualOptions& options = {}) {
  detail::EqualContext ctx(options, true);
  if (detail::equal_at(a, b, ctx)) return {};
  return invalid_argument(ctx.message());
}

}  // namespace rml
