// Structural equality and a debug printer, written once over field descriptors.
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "rml/core/reflect.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"

namespace rml {

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
    if (v) debug_print(out, *v);
    else out += "null";
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
    if (v) debug_print(out, *v);
    else out += "null";
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

namespace detail {

template <typename T>
std::string short_repr(const T& v) {
  std::string s = to_debug_string(v);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

inline std::string join_path(const std::string& path, std::string_view name) {
  if (path.empty()) return std::string(name);
  return path + "." + std::string(name);
}

// Returns true when equal; otherwise writes "path: a != b" to *why.
template <typename T>
bool equal_at(const T& a, const T& b, const std::string& path, std::string* why) {
  const auto differ = [&](const std::string& what) {
    if (why) *why = (path.empty() ? std::string("<root>") : path) + ": " + what;
    return false;
  };
  if constexpr (std::is_floating_point_v<T>) {
    if (a == b || (std::isnan(a) && std::isnan(b))) return true;
    return differ(short_repr(a) + " != " + short_repr(b));
  } else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::string>) {
    if (a == b) return true;
    return differ(short_repr(a) + " != " + short_repr(b));
  } else if constexpr (std::is_same_v<T, Tensor>) {
    if (a.type() != b.type()) return differ(a.type().to_string() + " != " + b.type().to_string());
    if (a.is_symbolic() != b.is_symbolic()) return differ("symbolic != concrete");
    if (a.defined() != b.defined()) return differ(a.defined() ? "data != no data" : "no data != data");
    if (!a.defined() || a.nbytes() == 0) return true;
    if (std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0) return true;
    const std::size_t es = element_size(a.dtype());
    for (std::size_t i = 0; i < a.nbytes(); i += es)
      if (std::memcmp(a.raw_data() + i, b.raw_data() + i, es) != 0)
        return differ("tensor data differs at element " + std::to_string(i / es));
    return differ("tensor data differs");
  } else if constexpr (Reflected<T>) {
    bool same = true;
    std::apply(
        [&](const auto&... fd) {
          ((same = same && equal_at(a.*(fd.member), b.*(fd.member), join_path(path, fd.name), why)), ...);
        },
        T::fields());
    return same;
  } else if constexpr (is_vector<T>::value) {
    if (a.size() != b.size()) return differ("size " + std::to_string(a.size()) + " != " + std::to_string(b.size()));
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!equal_at(a[i], b[i], path + "[" + std::to_string(i) + "]", why)) return false;
    return true;
  } else if constexpr (is_optional<T>::value) {
    if (a.has_value() != b.has_value()) return differ(a ? "value != null" : "null != value");
    return !a || equal_at(*a, *b, path, why);
  } else if constexpr (is_map<T>::value) {
    if (a.size() != b.size()) return differ("size " + std::to_string(a.size()) + " != " + std::to_string(b.size()));
    for (const auto& [k, va] : a) {
      auto it = b.find(k);
      if (it == b.end()) return differ("key " + short_repr(k) + " missing on the right");
      if (!equal_at(va, it->second, path + "[" + short_repr(k) + "]", why)) return false;
    }
    return true;
  } else if constexpr (is_shared_ptr<T>::value) {
    if (!a || !b) {
      if (!a && !b) return true;
      return differ(a ? "object != null" : "null != object");
    }
    return a.get() == b.get() || equal_at(*a, *b, path, why);
  } else if constexpr (is_variant<T>::value) {
    if (a.index() != b.index())
      return differ("alternative " + std::to_string(a.index()) + " != " + std::to_string(b.index()));
    return std::visit(
        [&](const auto& x) {
          using X = std::decay_t<decltype(x)>;
          return equal_at(x, *std::get_if<X>(&b), path, why);
        },
        a);
  } else {
    static_assert(sizeof(T) == 0, "rml: structural_equal: this field type is not comparable; reflect it with fields()");
    return false;
  }
}

}  // namespace detail

/// True when `a` and `b` hold the same fields, recursively (tensors compare dtype, shape, bytes).
template <typename T>
bool structural_equal(const T& a, const T& b) {
  return detail::equal_at(a, b, std::string(), nullptr);
}

/// OK when equal; otherwise INVALID_ARGUMENT naming the first difference by path,
/// e.g. `nodes[3].inputs[1]: 5 != 6`.
template <typename T>
Status assert_structural_equal(const T& a, const T& b) {
  std::string why;
  if (detail::equal_at(a, b, std::string(), &why)) return {};
  return invalid_argument("not structurally equal: " + why);
}

}  // namespace rml
