// infer_types: compiles every node of a graph in order and checks each recorded type (SPEC §5).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "rml/check/compile.hpp"
#include "rml/core/status.hpp"
#include "rml/ir/graph.hpp"

namespace rml {

namespace detail {

/// `v12`'s printed name: its own, or `v<id>` when it has none.
inline std::string value_label(const GraphDef& g, ValueId id) {
  if (id < g.values.size() && !g.values[id].name.empty()) return g.values[id].name;
  return "v" + std::to_string(id);
}

/// `node 3 (matmul)` or `node 3 (matmul, layers.2 at model.py:41)`.
inline std::string node_label(const GraphDef& g, std::size_t index) {
  const NodeDef& node = g.nodes[index];
  std::string s = "node " + std::to_string(index) + " (" + node.op;
  if (node.origin) {
    const std::string where = node.origin->to_string();
    if (!where.empty()) s += ", " + where;
  }
  return s + ")";
}

/// Compiles node `i` of `g` against the types in `types`, checking its ids first; on success
/// the node's outputs have been checked against their recorded types. `defined` tracks which
/// values exist so far.
inline Result<CompiledOp> compile_graph_node(const GraphDef& g, std::size_t i, std::vector<std::uint8_t>& defined,
                                             std::vector<TensorType>& scratch) {
  const NodeDef& node = g.nodes[i];
  const std::string label = node_label(g, i);
  scratch.clear();
  for (std::size_t k = 0; k < node.inputs.size(); ++k) {
    const ValueId id = node.inputs[k];
    if (id >= g.values.size())
      return invalid_argument(label + ": input " + std::to_string(k) + " is value " + std::to_string(id) +
                              ", but the graph has " + std::to_string(g.values.size()) + " values");
    if (!defined[id])
      return invalid_argument(label + ": input " + std::to_string(k) + " reads " + value_label(g, id) +
                              " before it is defined");
    scratch.push_back(g.values[id].type);
  }
  auto compiled = compile_node(node, scratch);
  if (!compiled.ok()) return compiled.error().with_prefix(label + ": ");
  if (node.outputs.size() != compiled->outputs.size())
    return invalid_argument(label + ": lists " + std::to_string(node.outputs.size()) + " outputs but produces " +
                            std::to_string(compiled->outputs.size()));
  for (std::size_t k = 0; k < node.outputs.size(); ++k) {
    const ValueId id = node.outputs[k];
    if (id >= g.values.size())
      return invalid_argument(label + ": output " + std::to_string(k) + " is value " + std::to_string(id) +
                              ", but the graph has " + std::to_string(g.values.size()) + " values");
    if (defined[id]) return invalid_argument(label + ": output " + value_label(g, id) + " is already defined");
    const TensorType& got = compiled->outputs[k];
    if (got != g.values[id].type)
      return invalid_argument(label + " produces " + got.to_string() + " but " + value_label(g, id) +
                              " is recorded as " + g.values[id].type.to_string());
    defined[id] = 1;
  }
  return compiled;
}

/// Marks the graph's inputs and constants defined, checking ids and constant data.
inline Status define_sources(const GraphDef& g, std::vector<std::uint8_t>& defined) {
  defined.assign(g.values.size(), 0);
  for (std::size_t k = 0; k < g.inputs.size(); ++k) {
    const ValueId id = g.inputs[k];
    if (id >= g.values.size()) return invalid_argument("inputs[" + std::to_string(k) + "] is out of range");
    if (defined[id]) return invalid_argument("graph input " + value_label(g, id) + " is listed twice");
    defined[id] = 1;
  }
  for (std::size_t k = 0; k < g.constants.size(); ++k) {
    const ConstantDef& c = g.constants[k];
    if (c.value >= g.values.size()) return invalid_argument("constants[" + std::to_string(k) + "] is out of range");
    if (defined[c.value]) return invalid_argument("constant " + value_label(g, c.value) + " is already defined");
    if (!c.data.defined() || c.data.type() != g.values[c.value].type)
      return invalid_argument("constant " + value_label(g, c.value) + " holds " +
                              (c.data.defined() ? c.data.type().to_string() : std::string("no data")) +
                              " but is recorded as " + g.values[c.value].type.to_string());
    defined[c.value] = 1;
  }
  return {};
}

inline Status check_outputs(const GraphDef& g, const std::vector<std::uint8_t>& defined) {
  for (std::size_t k = 0; k < g.outputs.size(); ++k) {
    const ValueId id = g.outputs[k];
    if (id >= g.values.size()) return invalid_argument("outputs[" + std::to_string(k) + "] is out of range");
    if (!defined[id]) return invalid_argument("graph output " + value_label(g, id) + " is never defined");
  }
  return {};
}

}  // namespace detail

/// Checks every node of `graph` in order and returns the type of every value (by id).
/// UNSUPPORTED for an unknown op; INVALID_ARGUMENT for any op, arity, attribute or shape error,
/// an id out of range or read before it is defined, and a recorded type that differs from the
/// inferred one: `node 3 (matmul) produces f32 [2, 16] but v12 is recorded as f32 [2, 8]`.
inline Result<std::vector<TensorType>> infer_types(const GraphDef& graph) {
  std::vector<std::uint8_t> defined;
  RML_RETURN_IF_ERROR(detail::define_sources(graph, defined));
  std::vector<TensorType> scratch;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    auto compiled = detail::compile_graph_node(graph, i, defined, scratch);
    if (!compiled.ok()) return compiled.error();
  }
  RML_RETURN_IF_ERROR(detail::check_outputs(graph, defined));
  std::vector<TensorType> types;
  types.reserve(graph.values.size());
  for (const ValueDef& v : graph.values) types.push_back(v.type);
  return types;
}

/// infer_types over a Graph's definition.
inline Result<std::vector<TensorType>> infer_types(const Graph& graph) { return infer_types(graph.def()); }

}  // namespace rml
