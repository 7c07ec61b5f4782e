// split (at a cut or by a partition function) and extract: graphs cut into parts that merge joins back.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rml/core/linkage.hpp"
#include "rml/core/status.hpp"
#include "rml/edit/cut.hpp"
#include "rml/edit/detail/common.hpp"
#include "rml/edit/merge.hpp"
#include "rml/ir/graph.hpp"

namespace rml {

/// The parts of a split, in an order every connection runs forward in, and the connections
/// that merge(parts, connections) needs to join them back.
struct SplitGraph {
  std::vector<GraphPart> parts;
  std::vector<Connection> connections;
};

namespace detail {

/// For one part of a split: the value of the source graph behind each of its inputs and outputs.
struct PartSources {
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
};

/// Splits `graph` given each operator's part (`part_of`, indices into `names`). Parts are put in
/// an order every connection runs forward in (stable: earliest named first). Consumes `graph`.
/// With `io`, also tells for each part (in the result's order) which source values its inputs
/// and outputs carry.
RML_SPLIT_API Result<SplitGraph> split_by_parts(Graph& graph, const std::vector<std::uint32_t>& part_of,
                                                const std::vector<std::string>& names,
                                                std::vector<PartSources>* io = nullptr);

/// Refuses a graph that split or extract cannot take.
RML_SPLIT_API Status check_splittable(const Graph& graph, std::string_view call);

/// OK when `view` is a current view into `graph`.
template <typename View>
Status check_view_of(const Graph& graph, const View& view, std::string_view call, std::string_view what) {
  RML_RETURN_IF_ERROR(ViewAccess::lock(view).status().with_prefix(std::string(call) + ": "));
  if (ViewAccess::raw_body(view) != graph.body_ptr())
    return invalid_argument(std::string(call) + ": the " + std::string(what) + " '" + view.name() +
                            "' belongs to another graph");
  return {};
}

}  // namespace detail

/// Splits `graph` at `cut` into parts `before` (the operators of cut.before, or, for a cut built
/// by hand with only values, their producers and everything they depend on) and `after`.
/// Consumes `graph`.
///
/// Errors: INVALID_ARGUMENT for a consumed or malformed graph, a cut taken from another graph or
/// before the graph changed, a before-set an operator after it feeds, or a cut that leaves no
/// operator on one side; FAILED_PRECONDITION for a finalized graph.
RML_SPLIT_API Result<SplitGraph> split(Graph& graph, const ValueCut& cut);

/// Splits `graph` by `partition`, which names each operator's part (non-empty, no `/` or `.`);
/// it is asked once per operator, in nodes() order. Parts come in an order every connection runs
/// forward in; a graph input goes with the first part that reads it. Consumes `graph`.
///
/// Errors: the status of an `Error` the function throws (prefixed with the node); INTERNAL for any
/// other exception; INVALID_ARGUMENT for a bad part name, parts that depend on each other in a
/// cycle, or a consumed or malformed graph; FAILED_PRECONDITION for a finalized graph.
template <typename Partition>
requires std::invocable<Partition&, const Node&> Result<SplitGraph> split(Graph& graph, Partition&& partition) {
  RML_RETURN_IF_ERROR(detail::check_splittable(graph, "split"));
  const GraphDef& def = graph.def();
  if (def.nodes.empty()) return invalid_argument("split: the graph has no operators");
  std::vector<std::uint32_t> part_of(def.nodes.size());
  std::vector<std::string> names;
  std::unordered_map<std::string, std::uint32_t> index;
  // The function is the caller's code and may reach the graph being split: held here, the body
  // outlives an assignment over `graph`, and its epoch tells whether the function edited it.
  const std::shared_ptr<detail::GraphBody> body = graph.body_ptr();
  const std::uint64_t epoch = body->epoch;
  const std::size_t node_count = def.nodes.size();
  for (std::size_t i = 0; i < node_count; ++i) {
    const Node node = detail::ViewAccess::node(body, def.inputs.size() + i);
    std::string part;
    const std::string where = "split: the partition function failed on the node '" + node.name() + "': ";
    try {
      part = std::string(partition(node));
    } catch (const Error& e) {
      return e.status().with_prefix(where);
    } catch (const std::exception& e) {
      return internal_error(where + e.what());
    } catch (...) {
      return internal_error(where + "it threw something that is not a std::exception");
    }
    if (graph.body_ptr() != body || body->epoch != epoch || !body->consumed_by.empty() || body->finalized)
      return failed_precondition("split: the partition function changed the graph being split (on the node '" +
                                 node.name() +
                                 "'): it edited, consumed, finalized or replaced it; a partition "
                                 "function must only read the node it is given");
    if (part.empty() || part.find_first_of("/.") != std::string::npos)
      return invalid_argument("split: the partition function put '" + node.name() + "' in the part '" + part +
                              "'; a part's name must be non-empty and hold no '/' or '.'");
    const auto [it, added] = index.emplace(part, static_cast<std::uint32_t>(names.size()));
    if (added) names.push_back(part);
    part_of[i] = it->second;
  }
  return detail::split_by_parts(graph, part_of, names);
}

/// The operators computing `outputs` from `inputs`, as a graph of their own: a graph input keeps
/// its name, any other input value becomes an input named after it; an output keeps its graph
/// output name, or is named after its value. Consumes `graph` and so frees the weights it leaves out.
///
/// Errors: INVALID_ARGUMENT for no outputs, a view from another graph or a stale one, a value
/// listed twice as an input, or an output that depends on a graph input not among `inputs`;
/// FAILED_PRECONDITION for a finalized graph.
RML_SPLIT_API Result<Graph> extract(Graph& graph, const std::vector<Value>& inputs, const std::vector<Value>& outputs);

}  // namespace rml

#if RML_SPLIT_DEFINED
#include "rml/edit/detail/split_impl.hpp"
#endif
