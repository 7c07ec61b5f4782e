// What the edit calls share: consuming a graph, fresh names, where a value lives.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "rml/ir/graph.hpp"
#include "rml/ir/validate.hpp"

namespace rml::detail {

/// Empties a graph that a call consumed: its views refuse from now on, its weights are released.
inline void consume(Graph& graph, std::string_view by) {
  const auto& body = graph.body_ptr();
  body->def = GraphDef{};
  body->compiled.reset();
  body->consumed_by = std::string(by);
  ++body->epoch;
}

/// Names in use, and the first free `<name>_<n>` (n = 1, 2, ...) for a name that is taken.
class NameSet {
 public:
  [[nodiscard]] bool contains(const std::string& name) const { return names_.count(name) != 0; }
  void insert(std::string name) { names_.insert(std::move(name)); }
  /// `name` if free, else the first free `<name>_<n>`; the result is then taken.
  std::string fresh(const std::string& name) {
    if (names_.insert(name).second) return name;
    for (std::size_t n = 1;; ++n) {
      std::string candidate = name + "_" + std::to_string(n);
      if (names_.insert(candidate).second) return candidate;
    }
  }

 private:
  std::unordered_set<std::string> names_;
};

/// The device a value of `def` sits on: its producer's device, or the graph's for an input or a
/// constant (`Graph::to` places both the graph and every node).
inline Device value_device(const GraphDef& def, const Device& graph_device, const ValueSource& src) {
  if (src.kind == ValueSource::Kind::node) return def.nodes[src.index].device;
  return graph_device;
}

/// The readers of every value: for value v, the operator indices reading it (once per operator).
inline std::vector<std::vector<std::uint32_t>> value_readers(const GraphDef& def) {
  std::vector<std::vector<std::uint32_t>> readers(def.values.size());
  for (std::uint32_t n = 0; n < def.nodes.size(); ++n)
    for (ValueId v : def.nodes[n].inputs)
      if (v < readers.size() && (readers[v].empty() || readers[v].back() != n)) readers[v].push_back(n);
  return readers;
}

/// A copy of `def` in which every unnamed operator carries its display name (`Relu_1`), so the
/// name survives moving the node to another position or graph.
inline void materialize_node_names(GraphDef& def) {
  for (std::size_t i = 0; i < def.nodes.size(); ++i)
    if (def.nodes[i].name.empty()) def.nodes[i].name = op_display_name(def, i);
}

/// INVALID_ARGUMENT unless `def` passes the gate (validate_graph: every id in range, every value
/// defined once before it is read, sizes and constants sound): what the edit calls rely on.
inline Status check_structure(const GraphDef& def, std::string_view call) {
  return validate_graph(def).with_prefix(std::string(call) + ": the graph is malformed: ");
}

/// The same for a Graph, using the result of its last check when nothing changed since.
inline Status check_structure(const Graph& graph, std::string_view call) {
  return graph.validate().with_prefix(std::string(call) + ": the graph is malformed: ");
}

/// `def`, built by a surgery call from graphs that passed the gate, as a checked Graph. A result
/// the gate refuses is a bug of the call: INTERNAL, naming it.
inline Result<Graph> checked_result(GraphDef def, std::string_view call) {
  auto g = Graph::from_def(std::move(def));
  if (!g.ok())
    return internal_error(std::string(call) +
                          ": produced a graph that fails validation (a bug in rml): " + g.error().message());
  return g;
}

}  // namespace rml::detail
