// infer_types: compiles every node of a graph in order and checks each recorded type (SPEC §5).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "rml/check/compile.hpp"
#include "rml/core/status.hpp"
#include "rml/ir/graph.hpp"
#include "rml/ir/validate.hpp"

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

/// Compiles node `i` of `g` (a graph that passed the gate) against its input types; on success
/// the node's outputs have been checked against their recorded types and marked in `defined`.
inline Result<CompiledOp> compile_graph_node(const GraphDef& g, std::size_t i, std::vector<std::uint8_t>& defined,
                                             std::vector<TensorType>& scratch) {
  const NodeDef& node = g.nodes[i];
  scratch.clear();
  for (const ValueId id : node.inputs) scratch.push_back(g.values[id].type);
  auto compiled = compile_node(node, scratch);
  if (!compiled.ok()) return compiled.error().with_prefix(node_label(g, i) + ": ");
  if (node.outputs.size() != compiled->outputs.size())
    return invalid_argument(node_label(g, i) + ": lists " + std::to_string(node.outputs.size()) +
                            " outputs but produces " + std::to_string(compiled->outputs.size()));
  for (std::size_t k = 0; k < node.outputs.size(); ++k) {
    const ValueId id = node.outputs[k];
    const TensorType& got = compiled->outputs[k];
    if (got != g.values[id].type)
      return invalid_argument(node_label(g, i) + " produces " + got.to_string() + " but " + value_label(g, id) +
                              " is recorded as " + g.values[id].type.to_string());
    defined[id] = 1;
  }
  return compiled;
}

/// Runs the gate (validate_graph) over `g`, then marks its inputs and constants defined.
inline Status define_sources(const GraphDef& g, std::vector<std::uint8_t>& defined) {
  RML_RETURN_IF_ERROR(validate_graph(g));
  defined.assign(g.values.size(), 0);
  for (const ValueId id : g.inputs) defined[id] = 1;
  for (const ConstantDef& c : g.constants) defined[c.value] = 1;
  return {};
}

/// Every graph output is defined: the gate has checked it; kept so that a walk reads as a whole.
inline Status check_outputs(const GraphDef& g, const std::vector<std::uint8_t>& defined) {
  for (const ValueId id : g.outputs)
    if (!defined[id]) return internal_error("graph output " + value_label(g, id) + " was not computed");
  return {};
}

}  // namespace detail

/// Runs the gate (validate_graph: ids, definitions, sizes, constants, arity), then checks every
/// node in order and returns the type of every value (by id). INVALID_ARGUMENT for what the gate
/// refuses (naming the place: `nodes[2].inputs[0]: ...`); UNSUPPORTED for an unknown op;
/// INVALID_ARGUMENT for any attribute or shape error and for a recorded type that differs from
/// the inferred one: `node 3 (matmul) produces f32 [2, 16] but v12 is recorded as f32 [2, 8]`.
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
