// The gate: one structural check of a GraphDef that every way into rml goes through (the JSON
// and MessagePack readers, Graph's checked entry points, the surgery calls and the executor).
// What passes it can be indexed without bounds checks: every id is in range, every value is
// defined exactly once before it is read, every type has a byte size that fits in int64, and
// every constant's storage holds the bytes its type says (a bool constant's each 0 or 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"
#include "rml/ir/graph.hpp"

namespace rml {

namespace detail {

/// `value 3 (w)`: a value as the gate's messages name it.
inline std::string gate_value_label(const GraphDef& def, ValueId id) {
  const std::string& name = def.values[id].name;
  return "value " + std::to_string(id) + (name.empty() ? "" : " (" + name + ")");
}

/// The first control character of `text` (below 0x20, or 0x7f), or nothing. Names are printed in
/// messages, DOT files and terminals; a control character in one is an attack, not a name.
inline bool has_control_char(std::string_view text) noexcept {
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
  }
  return false;
}

/// Where a value is defined, for messages (`inputs[0]`, `constants[2]`, `nodes[3].outputs[0]`).
struct GateDefinition {
  enum Kind : std::uint8_t { none, input, constant, node } kind = none;
  std::uint32_t index = 0;
  std::uint32_t port = 0;
  [[nodiscard]] std::string str() const {
    switch (kind) {
      case input:
        return "inputs[" + std::to_string(index) + "]";
      case constant:
        return "constants[" + std::to_string(index) + "]";
      case node:
        return "nodes[" + std::to_string(index) + "].outputs[" + std::to_string(port) + "]";
      case none:
        break;
    }
    return "nothing";
  }
};

inline Status gate_fail(const std::string& where, const std::string& what) {
  return invalid_argument(where + ": " + what);
}

/// A value's type: a dtype rml has, no negative dimension, a byte size that int64 holds.
inline Status validate_value_type(const ValueDef& value, const std::string& where) {
  if (static_cast<std::size_t>(value.type.dtype) >= dtype_count)
    return gate_fail(where + ".dtype",
                     "dtype " + std::to_string(static_cast<unsigned>(value.type.dtype)) + " is not a dtype rml knows");
  const Shape& shape = value.type.shape;
  for (std::size_t d = 0; d < shape.rank(); ++d)
    if (shape[d] < 0)
      return gate_fail(where + ".shape[" + std::to_string(d) + "]",
                       "dimension " + std::to_string(shape[d]) + " is negative");
  if (!value.type.checked_nbytes())
    return gate_fail(where + ".shape", shape.to_string() + " overflows the size of a tensor");
  return {};
}

/// A constant's data: a concrete tensor of exactly the value's type whose storage holds its bytes.
inline Status validate_constant_data(const GraphDef& def, const ConstantDef& c, const std::string& where) {
  const TensorType& want = def.values[c.value].type;
  if (c.data.is_symbolic() || !c.data.defined())
    return gate_fail(where, gate_value_label(def, c.value) + " has no data");
  if (c.data.type() != want)
    return gate_fail(where, "holds " + c.data.type().to_string() + " but " + gate_value_label(def, c.value) +
                                " is recorded as " + want.to_string());
  const Status storage = c.data.check_storage();
  if (!storage.ok()) return gate_fail(where + ".data", storage.message());
  if (want.dtype == DType::boolean) {  // kernels read these bytes as bool: anything but 0 or 1 is UB there
    const auto bytes = c.data.bytes();
    for (std::size_t i = 0; i < bytes.size(); ++i)
      if (const auto b = std::to_integer<unsigned>(bytes[i]); b > 1)
        return gate_fail(where + ".data", gate_value_label(def, c.value) + " is bool but its byte " +
                                              std::to_string(i) + " is " + std::to_string(b) + ", not 0 or 1");
  }
  return {};
}

}  // namespace detail

/// The gate. OK when `def` is a graph rml can index safely; INVALID_ARGUMENT naming the place
/// (`nodes[3].inputs[1]: ...`, the same paths as the JSON reader's) otherwise. It checks:
///  - at most 2^32 - 1 values; every value a known dtype, non-negative dimensions, and a byte size
///    (element count x element size, in checked int64) that fits;
///  - every id (inputs, outputs, constants, node inputs and outputs) in range;
///  - every value defined exactly once, as an input, a constant or a node output, and before any
///    node reads it (nodes in topological order);
///  - every constant's data: a concrete tensor of its value's type whose storage holds
///    dtype x shape bytes at an offset aligned for its elements, and a bool constant's bytes 0 or 1;
///  - every node: a non-empty op and at least one output. Arity against the op table is the type
///    checker's (compile_op): the gate is structure only, so surgery works on graphs that do not
///    type-check;
///  - names (graph, values, nodes, ops) free of control characters.
/// It does not type-check (that is infer_types): an unknown op or wrong shapes pass.
inline Status validate_graph(const GraphDef& def) {
  using detail::gate_fail;
  using detail::gate_value_label;
  using Def = detail::GateDefinition;
  const std::size_t nv = def.values.size();
  if (nv > std::numeric_limits<ValueId>::max()) return invalid_argument("values: more values than ids can number");
  if (detail::has_control_char(def.name)) return gate_fail("name", "holds a control character");
  for (std::size_t v = 0; v < nv; ++v) {
    const std::string where = "values[" + std::to_string(v) + "]";
    if (detail::has_control_char(def.values[v].name)) return gate_fail(where + ".name", "holds a control character");
    RML_RETURN_IF_ERROR(detail::validate_value_type(def.values[v], where));
  }
  const auto in_range = [&](ValueId id, const std::string& where) -> Status {
    if (id >= nv)
      return gate_fail(where, "value id " + std::to_string(id) + " is out of range (the graph has " +
                                  std::to_string(nv) + " values)");
    return {};
  };
  std::vector<Def> defined(nv);
  const auto define = [&](ValueId id, Def d, const std::string& where) -> Status {
    RML_RETURN_IF_ERROR(in_range(id, where));
    if (defined[id].kind != Def::none)
      return gate_fail(where, gate_value_label(def, id) + " is already defined by " + defined[id].str());
    defined[id] = d;
    return {};
  };
  for (std::size_t i = 0; i < def.inputs.size(); ++i)
    RML_RETURN_IF_ERROR(
        define(def.inputs[i], {Def::input, static_cast<std::uint32_t>(i), 0}, "inputs[" + std::to_string(i) + "]"));
  for (std::size_t i = 0; i < def.constants.size(); ++i) {
    const std::string where = "constants[" + std::to_string(i) + "]";
    RML_RETURN_IF_ERROR(in_range(def.constants[i].value, where + ".value"));
    RML_RETURN_IF_ERROR(define(def.constants[i].value, {Def::constant, static_cast<std::uint32_t>(i), 0}, where));
    RML_RETURN_IF_ERROR(detail::validate_constant_data(def, def.constants[i], where));
  }
  for (std::size_t n = 0; n < def.nodes.size(); ++n) {
    const NodeDef& node = def.nodes[n];
    const std::string where = "nodes[" + std::to_string(n) + "]";
    if (node.op.empty()) return gate_fail(where + ".op", "is empty");
    if (detail::has_control_char(node.op)) return gate_fail(where + ".op", "holds a control character");
    if (detail::has_control_char(node.name)) return gate_fail(where + ".name", "holds a control character");
    if (node.outputs.empty()) return gate_fail(where + ".outputs", "a node must produce at least one value");
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      const std::string at = where + ".inputs[" + std::to_string(k) + "]";
      RML_RETURN_IF_ERROR(in_range(node.inputs[k], at));
      if (defined[node.inputs[k]].kind == Def::none)
        return gate_fail(at, gate_value_label(def, node.inputs[k]) +
                                 " is read before it is defined (nodes must be in topological order)");
    }
    for (std::size_t k = 0; k < node.outputs.size(); ++k)
      RML_RETURN_IF_ERROR(define(node.outputs[k],
                                 {Def::node, static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(k)},
                                 where + ".outputs[" + std::to_string(k) + "]"));
  }
  for (std::size_t i = 0; i < def.outputs.size(); ++i)
    RML_RETURN_IF_ERROR(in_range(def.outputs[i], "outputs[" + std::to_string(i) + "]"));
  for (std::size_t v = 0; v < nv; ++v)
    if (defined[v].kind == Def::none)
      return gate_fail("values[" + std::to_string(v) + "]",
                       gate_value_label(def, static_cast<ValueId>(v)) +
                           " is never defined (not an input, a constant or a node output)");
  return {};
}

// ---- Graph's checked state ----

inline Status Graph::validate() const {
  if (!body_) return {};
  const detail::GraphBody& b = *body_;
  if (b.valid_epoch.load(std::memory_order_acquire) == b.epoch) return {};
  RML_RETURN_IF_ERROR(validate_graph(b.def));
  b.valid_epoch.store(b.epoch, std::memory_order_release);
  return {};
}

inline Result<Graph> Graph::from_def(GraphDef def) {
  RML_RETURN_IF_ERROR(validate_graph(def));
  Graph g(std::move(def));
  g.body_->valid_epoch.store(g.body_->epoch, std::memory_order_release);
  return g;
}

}  // namespace rml
