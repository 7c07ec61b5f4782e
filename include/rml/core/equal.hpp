// Structural equality (optionally up to a renaming of values and nodes) and a debug printer,
// written once over field descriptors.
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeindex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rml/core/reflect.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"

namespace rml {

class Graph;  // rml/ir/graph.hpp; compared and printed through its def()

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
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
    out += buf;
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
    if (v)
      debug_print(out, *v);
    else
      out += "null";
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
    return a.get() == b.get() || equal_at(*a, *b, ctx);
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

/// True when `a` and `b` hold the same fields, recursively (tensors compare dtype, shape, bytes;
/// a Graph compares its def()). With `options.map_names`, graphs compare up to renaming of
/// values and nodes.
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
