// Node, Value and Edge: light views into a Graph, and the display names (`Relu_1`, `Sum_2_0`) of
// the things that have no name of their own.
//
// Views are only handed out for a graph that passes the gate (Graph::validate): on one that does
// not, the listing members are empty and the lookups return the gate's error. A view holds a weak
// reference to the graph's body and the body's edit epoch when it was taken. Once the graph is consumed (merge, split,
// extract), destroyed, assigned over, or edited structurally, the view's accessors that need the graph refuse with
// INVALID_ARGUMENT. Its kind, name and op code are copied into the view and stay readable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rml/core/status.hpp"
#include "rml/ir/graph.hpp"
#include "rml/ir/ops.hpp"

namespace rml {

namespace detail {

/// Where a value comes from: a graph input, a constant, or output `port` of operator `index`.
struct ValueSource {
  enum class Kind : std::uint8_t { none, input, constant, node };
  Kind kind = Kind::none;
  std::uint32_t index = 0;  ///< input position, constant position, or operator index
  std::uint32_t port = 0;
};

/// The source of every value of `def`, by value id (ids out of range are ignored).
inline std::vector<ValueSource> value_sources(const GraphDef& def) {
  std::vector<ValueSource> src(def.values.size());
  const auto set = [&](ValueId v, ValueSource s) {
    if (v < src.size() && src[v].kind == ValueSource::Kind::none) src[v] = s;
  };
  for (std::size_t i = 0; i < def.inputs.size(); ++i)
    set(def.inputs[i], {ValueSource::Kind::input, static_cast<std::uint32_t>(i), 0});
  for (std::size_t i = 0; i < def.constants.size(); ++i)
    set(def.constants[i].value, {ValueSource::Kind::constant, static_cast<std::uint32_t>(i), 0});
  for (std::size_t n = 0; n < def.nodes.size(); ++n)
    for (std::size_t p = 0; p < def.nodes[n].outputs.size(); ++p)
      set(def.nodes[n].outputs[p],
          {ValueSource::Kind::node, static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(p)});
  return src;
}

/// The op code of a node, or `OpCode::count_` for an op the table does not know.
inline OpCode node_op_code(const NodeDef& node) noexcept { return find_op(node.op).value_or(OpCode::count_); }

/// An operator's name: its own, or `<OpCode>_<i>` with `i` its position in nodes() (inputs first).
inline std::string op_display_name(const GraphDef& def, std::size_t op_index) {
  const NodeDef& n = def.nodes[op_index];
  if (!n.name.empty()) return n.name;
  const OpCode code = node_op_code(n);
  std::string s = code == OpCode::count_ ? n.op : std::string(op_code_name(code));
  return s + "_" + std::to_string(def.inputs.size() + op_index);
}

/// A value's name: its own, or `<node>_<port>` for an operator's output, `input_<i>` for an
/// unnamed graph input and `const_<id>` for an unnamed constant.
inline std::string value_display_name(const GraphDef& def, ValueId v, const ValueSource& src) {
  if (v < def.values.size() && !def.values[v].name.empty()) return def.values[v].name;
  switch (src.kind) {
    case ValueSource::Kind::node:
      return op_display_name(def, src.index) + "_" + std::to_string(src.port);
    case ValueSource::Kind::input:
      return "input_" + std::to_string(src.index);
    case ValueSource::Kind::constant:
      return "const_" + std::to_string(v);
    case ValueSource::Kind::none:
      break;
  }
  return "v" + std::to_string(v);
}

inline std::string value_display_name(const GraphDef& def, ValueId v) {
  const auto src = value_sources(def);
  return value_display_name(def, v, v < src.size() ? src[v] : ValueSource{});
}

/// The message of a view into a graph that no longer holds it.
inline Status stale_view(std::string_view what, std::string_view name, bool edited) {
  std::string m = "the " + std::string(what) + " '" + std::string(name) + "' is no longer in its graph: ";
  if (edited)
    m += "the graph was edited after the view was taken (take views again after optimize(), merge() or "
         "mutable_def())";
  else
    m += "that graph no longer exists (a merge, a split or an extract consumed it, or it was destroyed or "
         "assigned over)";
  return invalid_argument(std::move(m));
}

/// The body a view points into, if the graph still holds what the view saw.
inline Result<std::shared_ptr<const GraphBody>> lock_view(const std::weak_ptr<GraphBody>& body, std::uint64_t epoch,
                                                          std::string_view what, std::string_view name) {
  auto b = body.lock();
  if (!b || !b->consumed_by.empty()) return stale_view(what, name, false);
  if (b->epoch != epoch) return stale_view(what, name, true);
  return std::shared_ptr<const GraphBody>(std::move(b));
}

struct ViewAccess;

}  // namespace detail

/// A view of a graph input (NodeKind::input) or an operator (NodeKind::op).
class Node {
 public:
  [[nodiscard]] NodeKind kind() const noexcept { return kind_; }
  /// The input's name, the operator's name, or `<OpCode>_<i>`.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// The operator's code; `OpCode::count_` for an input or an op the table does not know.
  [[nodiscard]] OpCode op_code() const noexcept { return code_; }
  /// The position in Graph::nodes().
  [[nodiscard]] std::size_t index() const noexcept { return position_; }
  /// OK while the graph still holds this node; INVALID_ARGUMENT otherwise.
  [[nodiscard]] Status check() const { return lock().status(); }

  /// Input `i` of an operator. INVALID_ARGUMENT for a stale view; OUT_OF_RANGE for a bad index.
  [[nodiscard]] Result<Value> input(std::size_t i) const;
  /// Output `i` (an input node has one output, the input value). Errors as input().
  [[nodiscard]] Result<Value> output(std::size_t i) const;
  [[nodiscard]] Result<std::vector<Value>> inputs() const;
  [[nodiscard]] Result<std::vector<Value>> outputs() const;
  /// The operator's definition (op, attributes, origin, device). INVALID_ARGUMENT for an input node.
  [[nodiscard]] Result<NodeDef> def() const;

  friend bool operator==(const Node& a, const Node& b) noexcept {
    return a.position_ == b.position_ && !a.body_.owner_before(b.body_) && !b.body_.owner_before(a.body_);
  }

 private:
  friend struct detail::ViewAccess;
  Node() = default;
  [[nodiscard]] Result<std::shared_ptr<const detail::GraphBody>> lock() const {
    return detail::lock_view(body_, epoch_, "node", name_);
  }
  /// The operator index, for an operator node.
  [[nodiscard]] std::size_t op_index(const GraphDef& def) const noexcept { return position_ - def.inputs.size(); }

  std::weak_ptr<detail::GraphBody> body_;
  std::uint64_t epoch_ = 0;
  std::uint32_t position_ = 0;
  NodeKind kind_ = NodeKind::input;
  OpCode code_ = OpCode::count_;
  std::string name_;
};

/// A view of a value: a graph input, a constant or an operator's output.
class Value {
 public:
  [[nodiscard]] ValueId id() const noexcept { return id_; }
  /// Its own name, or `<node>_<port>`.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const TensorType& type() const noexcept { return type_; }
  [[nodiscard]] bool is_constant() const noexcept { return constant_; }
  [[nodiscard]] Status check() const { return lock().status(); }
  /// The node that produces the value (an input node for a graph input). INVALID_ARGUMENT for a
  /// stale view; NOT_FOUND for a constant, which no node produces.
  [[nodiscard]] Result<Node> producer() const;
  /// The operators that read the value, in order.
  [[nodiscard]] Result<std::vector<Node>> consumers() const;

  friend bool operator==(const Value& a, const Value& b) noexcept {
    return a.id_ == b.id_ && !a.body_.owner_before(b.body_) && !b.body_.owner_before(a.body_);
  }

 private:
  friend struct detail::ViewAccess;
  Value() = default;
  [[nodiscard]] Result<std::shared_ptr<const detail::GraphBody>> lock() const {
    return detail::lock_view(body_, epoch_, "value", name_);
  }

  std::weak_ptr<detail::GraphBody> body_;
  std::uint64_t epoch_ = 0;
  ValueId id_ = 0;
  TensorType type_;
  bool constant_ = false;
  std::string name_;
};

/// A view of one operator input: `value`, produced by `from`, read by `to` at input `port`.
class Edge {
 public:
  [[nodiscard]] const Node& from() const noexcept { return from_; }
  [[nodiscard]] const Node& to() const noexcept { return to_; }
  [[nodiscard]] const Value& value() const noexcept { return value_; }
  [[nodiscard]] std::size_t port() const noexcept { return port_; }
  [[nodiscard]] Status check() const { return to_.check(); }

 private:
  friend struct detail::ViewAccess;
  Edge(Node from, Node to, Value value, std::size_t port)
      : from_(std::move(from)), to_(std::move(to)), value_(std::move(value)), port_(port) {}
  Node from_, to_;
  Value value_;
  std::size_t port_;
};

namespace detail {

/// Builds views; the only place that sees their insides.
struct ViewAccess {
  static Node node(const std::shared_ptr<const GraphBody>& body, std::size_t position) {
    const GraphDef& def = body->def;
    Node n;
    n.body_ = std::const_pointer_cast<GraphBody>(body);
    n.epoch_ = body->epoch;
    n.position_ = static_cast<std::uint32_t>(position);
    if (position < def.inputs.size()) {
      n.kind_ = NodeKind::input;
      n.name_ = value_display_name(def, def.inputs[position],
                                   {ValueSource::Kind::input, static_cast<std::uint32_t>(position), 0});
    } else {
      n.kind_ = NodeKind::op;
      n.code_ = node_op_code(def.nodes[position - def.inputs.size()]);
      n.name_ = op_display_name(def, position - def.inputs.size());
    }
    return n;
  }
  static Value value(const std::shared_ptr<const GraphBody>& body, ValueId id, const ValueSource& src) {
    Value v;
    v.body_ = std::const_pointer_cast<GraphBody>(body);
    v.epoch_ = body->epoch;
    v.id_ = id;
    if (id < body->def.values.size()) v.type_ = body->def.values[id].type;
    v.constant_ = src.kind == ValueSource::Kind::constant;
    v.name_ = value_display_name(body->def, id, src);
    return v;
  }
  static Value value(const std::shared_ptr<const GraphBody>& body, ValueId id) {
    const auto src = value_sources(body->def);
    return value(body, id, id < src.size() ? src[id] : ValueSource{});
  }
  static Edge edge(Node from, Node to, Value value, std::size_t port) {
    return {std::move(from), std::move(to), std::move(value), port};
  }
  static Result<std::shared_ptr<const GraphBody>> lock(const Node& n) { return n.lock(); }
  static Result<std::shared_ptr<const GraphBody>> lock(const Value& v) { return v.lock(); }
  /// The body a view points into, or null; for calls that check a view belongs to their graph.
  static std::shared_ptr<GraphBody> raw_body(const Value& v) { return v.body_.lock(); }
  static std::shared_ptr<GraphBody> raw_body(const Node& n) { return n.body_.lock(); }
};

/// The position in nodes() of the node producing `src` (an input node or an operator).
inline std::size_t producer_position(const GraphDef& def, const ValueSource& src) {
  return src.kind == ValueSource::Kind::input ? src.index : def.inputs.size() + src.index;
}

}  // namespace detail

inline Result<Value> Node::input(std::size_t i) const {
  RML_ASSIGN_OR_RETURN(auto body, lock());
  if (kind_ == NodeKind::input) return out_of_range("node '" + name_ + "' is a graph input; it has no inputs");
  const NodeDef& n = body->def.nodes[op_index(body->def)];
  if (i >= n.inputs.size())
    return out_of_range("node '" + name_ + "' has " + std::to_string(n.inputs.size()) + " inputs; no input " +
                        std::to_string(i));
  return detail::ViewAccess::value(body, n.inputs[i]);
}

inline Result<Value> Node::output(std::size_t i) const {
  RML_ASSIGN_OR_RETURN(auto body, lock());
  const GraphDef& def = body->def;
  if (kind_ == NodeKind::input) {
    if (i != 0) return out_of_range("input node '" + name_ + "' has one output; no output " + std::to_string(i));
    return detail::ViewAccess::value(body, def.inputs[position_]);
  }
  const NodeDef& n = def.nodes[op_index(def)];
  if (i >= n.outputs.size())
    return out_of_range("node '" + name_ + "' has " + std::to_string(n.outputs.size()) + " outputs; no output " +
                        std::to_string(i));
  return detail::ViewAccess::value(body, n.outputs[i]);
}

inline Result<std::vector<Value>> Node::inputs() const {
  RML_ASSIGN_OR_RETURN(auto body, lock());
  std::vector<Value> out;
  if (kind_ == NodeKind::input) return out;
  const auto src = detail::value_sources(body->def);
  for (ValueId v : body->def.nodes[op_index(body->def)].inputs)
    out.push_back(detail::ViewAccess::value(body, v, src[v]));
  return out;
}

inline Result<std::vector<Value>> Node::outputs() const {
  RML_ASSIGN_OR_RETURN(auto body, lock());
  const GraphDef& def = body->def;
  const auto src = detail::value_sources(def);
  std::vector<Value> out;
  if (kind_ == NodeKind::input) {
    out.push_back(detail::ViewAccess::value(body, def.inputs[position_], src[def.inputs[position_]]));
    return out;
  }
  for (ValueId v : def.nodes[op_index(def)].outputs) out.push_back(detail::ViewAccess::value(body, v, src[v]));
  return out;
}

inline Result<NodeDef> Node::def() const {
  RML_ASSIGN_OR_RETURN(auto body, lock());
  if (kind_ == NodeKind::input) return invalid_argument("node '" + name_ + "' is a graph input, not an operator");
  return body->def.nodes[op_index(body->def)];
}

inline Result<Node> Value::producer() const {
  RML_ASSIGN_OR_RETURN(auto body, lock());
  const auto src = detail::value_sources(body->def);
  const detail::ValueSource& s = src[id_];
  if (s.kind == detail::ValueSource::Kind::constant || s.kind == detail::ValueSource::Kind::none)
    return not_found("value '" + name_ + "' is a constant; no node produces it");
  return detail::ViewAccess::node(body, detail::producer_position(body->def, s));
}

inline Result<std::vector<Node>> Value::consumers() const {
  RML_ASSIGN_OR_RETURN(auto body, lock());
  const GraphDef& def = body->def;
  std::vector<Node> out;
  for (std::size_t n = 0; n < def.nodes.size(); ++n) {
    for (ValueId v : def.nodes[n].inputs) {
      if (v == id_) {
        out.push_back(detail::ViewAccess::node(body, def.inputs.size() + n));
        break;
      }
    }
  }
  return out;
}

// ---- Graph's view members ----

inline std::vector<Node> Graph::nodes() const {
  std::vector<Node> out;
  if (!body_ || !validate().ok()) return out;
  const std::size_t count = def().inputs.size() + def().nodes.size();
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) out.push_back(detail::ViewAccess::node(body_, i));
  return out;
}

namespace detail {

/// `name` split at its last `_` into a stem and a number (`Relu_12` -> `Relu`, 12), if it has one.
inline std::optional<std::pair<std::string_view, std::size_t>> split_index_suffix(std::string_view name) {
  const std::size_t underscore = name.rfind('_');
  if (underscore == std::string_view::npos || underscore + 1 == name.size() || name.size() - underscore > 10)
    return std::nullopt;
  std::size_t n = 0;
  for (char c : name.substr(underscore + 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::size_t>(c - '0');
  }
  return std::make_pair(name.substr(0, underscore), n);
}

/// The position in nodes() of the node shown as `name`, or nothing. Own names are compared as
/// they are; a `<OpCode>_<i>` name is checked at position i only, so a lookup allocates nothing.
inline std::optional<std::size_t> find_node_position(const GraphDef& def, const std::vector<ValueSource>& src,
                                                     std::string_view name) {
  for (std::size_t i = 0; i < def.inputs.size(); ++i)
    if (value_display_name(def, def.inputs[i], src[def.inputs[i]]) == name) return i;
  for (std::size_t i = 0; i < def.nodes.size(); ++i)
    if (def.nodes[i].name == name) return def.inputs.size() + i;
  if (const auto parts = split_index_suffix(name)) {
    const std::size_t position = parts->second;
    if (position >= def.inputs.size() && position < def.inputs.size() + def.nodes.size() &&
        def.nodes[position - def.inputs.size()].name.empty() &&
        op_display_name(def, position - def.inputs.size()) == name)
      return position;
  }
  return std::nullopt;
}

}  // namespace detail

inline Result<Node> Graph::node(std::string_view name) const {
  RML_RETURN_IF_ERROR(validate());
  if (body_) {
    const auto src = detail::value_sources(def());
    if (const auto position = detail::find_node_position(def(), src, name))
      return detail::ViewAccess::node(body_, *position);
  }
  return not_found("graph '" + this->name() + "' has no node named '" + std::string(name) + "'");
}

inline std::vector<Node> Graph::find_nodes(OpCode code) const {
  std::vector<Node> out;
  if (!body_ || !validate().ok()) return out;
  for (std::size_t i = 0; i < def().nodes.size(); ++i)
    if (detail::node_op_code(def().nodes[i]) == code)
      out.push_back(detail::ViewAccess::node(body_, def().inputs.size() + i));
  return out;
}

inline std::vector<Value> Graph::values() const {
  std::vector<Value> out;
  if (!body_ || !validate().ok()) return out;
  const auto src = detail::value_sources(def());
  out.reserve(src.size());
  for (ValueId v = 0; v < src.size(); ++v) out.push_back(detail::ViewAccess::value(body_, v, src[v]));
  return out;
}

inline Result<Value> Graph::value(std::string_view name) const {
  RML_RETURN_IF_ERROR(validate());
  if (body_) {
    const GraphDef& d = def();
    const auto src = detail::value_sources(d);
    for (ValueId v = 0; v < src.size(); ++v)
      if (d.values[v].name == name) return detail::ViewAccess::value(body_, v, src[v]);
    // An unnamed value: `<node>_<port>`, `input_<i>` or `const_<id>`.
    if (const auto parts = detail::split_index_suffix(name)) {
      std::optional<ValueId> v;
      if (const auto position = detail::find_node_position(d, src, parts->first);
          position && *position >= d.inputs.size() &&
          parts->second < d.nodes[*position - d.inputs.size()].outputs.size())
        v = d.nodes[*position - d.inputs.size()].outputs[parts->second];
      else if (parts->first == "input" && parts->second < d.inputs.size())
        v = d.inputs[parts->second];
      else if (parts->first == "const" && parts->second < src.size())
        v = static_cast<ValueId>(parts->second);
      if (v && *v < src.size() && detail::value_display_name(d, *v, src[*v]) == name)
        return detail::ViewAccess::value(body_, *v, src[*v]);
    }
  }
  return not_found("graph '" + this->name() + "' has no value named '" + std::string(name) + "'");
}

inline std::vector<Edge> Graph::edges() const {
  std::vector<Edge> out;
  if (!body_ || !validate().ok()) return out;
  const GraphDef& d = def();
  const auto src = detail::value_sources(d);
  for (std::size_t n = 0; n < d.nodes.size(); ++n) {
    for (std::size_t p = 0; p < d.nodes[n].inputs.size(); ++p) {
      const ValueId v = d.nodes[n].inputs[p];
      if (v >= src.size()) continue;
      const auto& s = src[v];
      if (s.kind != detail::ValueSource::Kind::input && s.kind != detail::ValueSource::Kind::node) continue;
      out.push_back(detail::ViewAccess::edge(detail::ViewAccess::node(body_, detail::producer_position(d, s)),
                                             detail::ViewAccess::node(body_, d.inputs.size() + n),
                                             detail::ViewAccess::value(body_, v, s), p));
    }
  }
  return out;
}

namespace detail {

/// The display names of `ids` (a graph's inputs or outputs); `?` for an id out of range.
inline std::vector<std::string> display_names(const GraphDef& def, const std::vector<ValueId>& ids) {
  std::vector<std::string> out;
  if (ids.empty()) return out;
  const auto src = value_sources(def);
  out.reserve(ids.size());
  for (ValueId v : ids) out.push_back(v < src.size() ? value_display_name(def, v, src[v]) : "?");
  return out;
}

}  // namespace detail

inline std::vector<std::string> Graph::input_names() const {
  if (!validate().ok()) return {};
  return detail::display_names(def(), def().inputs);
}

inline std::vector<std::string> Graph::output_names() const {
  if (!validate().ok()) return {};
  return detail::display_names(def(), def().outputs);
}

}  // namespace rml
