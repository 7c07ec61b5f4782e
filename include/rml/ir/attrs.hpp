// AttrReader: a node's attributes checked against its op's schema, read with the table's defaults.
#pragma once

#include <charconv>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "rml/core/status.hpp"
#include "rml/ir/graph.hpp"
#include "rml/ir/ops.hpp"

namespace rml {

/// The kind name of a stored attribute (`int`, `float`, `bool`, `string`, `ints`, `floats`).
inline std::string_view attr_value_kind_name(const AttrValue& v) noexcept {
  // Alternatives in AttrValue's order.
  static constexpr AttrKind kinds[] = {AttrKind::integer, AttrKind::number,   AttrKind::boolean,
                                       AttrKind::string,  AttrKind::integers, AttrKind::numbers};
  return attr_kind_name(kinds[v.index()]);
}

/// Reads the attributes of one node. `bind` checks them all against the op's schema first
/// (unknown, missing, wrong kind), so the getters cannot fail: an absent optional attribute
/// yields the table's default.
class AttrReader {
 public:
  /// INVALID_ARGUMENT for an unknown attribute, a missing required one, or one of the wrong kind.
  static Result<AttrReader> bind(OpCode op, const Attrs& attrs) {
    for (const auto& [name, value] : attrs) {
      const AttrSpec* spec = find_attr(op, name);
      if (!spec) return invalid_argument("unknown attribute '" + name + "'" + known_list(op));
      if (!accepts(spec->kind, value))
        return invalid_argument("attribute '" + name + "' must be " + std::string(attr_kind_name(spec->kind)) +
                                ", got " + std::string(attr_value_kind_name(value)));
    }
    for (const AttrSpec& spec : op_info(op).attrs)
      if (spec.required && attrs.find(spec.name) == attrs.end())
        return invalid_argument("missing required attribute '" + std::string(spec.name) + "'");
    return AttrReader(op, attrs);
  }

  /// True when the node sets `name` (a computed default needs to know).
  [[nodiscard]] bool has(std::string_view name) const { return attrs_->find(name) != attrs_->end(); }

  [[nodiscard]] std::int64_t get_int(std::string_view name) const {
    if (const AttrValue* v = find(name)) return std::get<std::int64_t>(*v);
    const auto v = parse_ints(fallback(name));
    return v.empty() ? 0 : v[0];
  }
  [[nodiscard]] double get_float(std::string_view name) const {
    if (const AttrValue* v = find(name))
      return v->index() == 0 ? static_cast<double>(std::get<std::int64_t>(*v)) : std::get<double>(*v);
    return parse_float(fallback(name));
  }
  [[nodiscard]] bool get_bool(std::string_view name) const {
    if (const AttrValue* v = find(name)) return std::get<bool>(*v);
    return fallback(name) == "true";
  }
  [[nodiscard]] std::string_view get_string(std::string_view name) const {
    if (const AttrValue* v = find(name)) return std::get<std::string>(*v);
    return fallback(name);
  }
  [[nodiscard]] std::vector<std::int64_t> get_ints(std::string_view name) const {
    if (const AttrValue* v = find(name)) {
      if (const auto* ints = std::get_if<std::vector<std::int64_t>>(v)) return *ints;
      return {};  // an empty float list (checked by bind)
    }
    return parse_ints(fallback(name));
  }
  [[nodiscard]] std::vector<double> get_floats(std::string_view name) const {
    if (const AttrValue* v = find(name)) {
      if (const auto* ints = std::get_if<std::vector<std::int64_t>>(v)) return {ints->begin(), ints->end()};
      return std::get<std::vector<double>>(*v);
    }
    return {};
  }

 private:
  AttrReader(OpCode op, const Attrs& attrs) : op_(op), attrs_(&attrs) {}

  static bool accepts(AttrKind kind, const AttrValue& v) {
    switch (kind) {
      case AttrKind::integer: return v.index() == 0;
      case AttrKind::number: return v.index() == 0 || v.index() == 1;
      case AttrKind::boolean: return v.index() == 2;
      case AttrKind::string: return v.index() == 3;
      case AttrKind::integers:
        return v.index() == 4 || (v.index() == 5 && std::get<std::vector<double>>(v).empty());
      case AttrKind::numbers: return v.index() == 4 || v.index() == 5;
    }
    return false;
  }
  static std::string known_list(OpCode op) {
    const auto specs = op_info(op).attrs;
    if (specs.empty()) return std::string(" (") + std::string(op_name(op)) + " takes none)";
    std::string s = std::string(" (") + std::string(op_name(op)) + " takes ";
    for (std::size_t i = 0; i < specs.size(); ++i) s += (i ? ", " : "") + std::string(specs[i].name);
    return s + ")";
  }
  // Defaults are written as the docs print them: `1`, `-1`, `0.5`, `[1, 1]`.
  static std::vector<std::int64_t> parse_ints(std::string_view text) {
    std::vector<std::int64_t> out;
    const char* p = text.data();
    const char* end = p + text.size();
    while (p < end) {
      std::int64_t x = 0;
      auto [next, ec] = std::from_chars(p, end, x);
      if (ec == std::errc()) {
        out.push_back(x);
        p = next;
      } else {
        ++p;
      }
    }
    return out;
  }
  static double parse_float(std::string_view text) {
    double x = 0;
    std::from_chars(text.data(), text.data() + text.size(), x);
    return x;
  }
  [[nodiscard]] const AttrValue* find(std::string_view name) const {
    auto it = attrs_->find(name);
    return it == attrs_->end() ? nullptr : &it->second;
  }
  // A computed default (`strides` = kernel) is the op rule's business: the getters give 0 / empty.
  [[nodiscard]] std::string_view fallback(std::string_view name) const {
    const AttrSpec* spec = find_attr(op_, name);
    return spec && !spec->computed ? spec->fallback : std::string_view{};
  }

  OpCode op_;
  const Attrs* attrs_;
};

}  // namespace rml
