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
inline Result<SplitGraph> split_by_parts(Graph& graph, const std::vector<std::uint32_t>& part_of,
                                         const std::vector<std::string>& names, std::vector<PartSources>* io = nullptr) {
  const GraphDef& def = graph.def();
  const auto src = value_sources(def);
  const auto readers = value_readers(def);
  const std::size_t part_count = names.size();

  // ---- order the parts ----
  std::vector<std::vector<bool>> depends(part_count, std::vector<bool>(part_count, false));
  for (ValueId v = 0; v < def.values.size(); ++v) {
    if (src[v].kind != ValueSource::Kind::node) continue;
    for (std::uint32_t r : readers[v])
      if (part_of[r] != part_of[src[v].index]) depends[part_of[r]][part_of[src[v].index]] = true;
  }
  std::vector<std::uint32_t> rank(part_count, 0);
  std::vector<std::uint32_t> order;
  std::vector<bool> placed(part_count, false);
  while (order.size() < part_count) {
    std::size_t ready = part_count;
    for (std::size_t p = 0; p < part_count && ready == part_count; ++p) {
      if (placed[p]) continue;
      bool free = true;
      for (std::size_t q = 0; q < part_count && free; ++q) free = !(depends[p][q] && !placed[q]);
      if (free) ready = p;
    }
    if (ready == part_count) {
      std::string cycle;
      for (std::size_t p = 0; p < part_count; ++p)
        if (!placed[p]) cycle += (cycle.empty() ? "'" : ", '") + names[p] + "'";
      return invalid_argument("split: parts " + cycle +
                              " depend on each other in a cycle; no order runs every connection forward");
    }
    placed[ready] = true;
    rank[ready] = static_cast<std::uint32_t>(order.size());
    order.push_back(static_cast<std::uint32_t>(ready));
  }

  // ---- where each value lives, who else reads it ----
  constexpr std::uint32_t kNoPart = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> home(def.values.size(), kNoPart);  // in rank order
  for (ValueId v = 0; v < def.values.size(); ++v) {
    if (src[v].kind == ValueSource::Kind::node) {
      home[v] = rank[part_of[src[v].index]];
    } else if (src[v].kind == ValueSource::Kind::input) {
      home[v] = 0;  // an input nobody reads stays with the first part
      if (!readers[v].empty()) {
        home[v] = kNoPart;
        for (std::uint32_t r : readers[v]) home[v] = std::min(home[v], rank[part_of[r]]);
      }
    }
  }
  std::vector<bool> is_output(def.values.size(), false);
  for (ValueId v : def.outputs) is_output[v] = true;

  SplitGraph result;
  NameSet taken;  // every name of the graph, filled only when a fresh one is needed
  bool taken_filled = false;
  const auto fresh = [&](const std::string& name) {
    if (!taken_filled) {
      for (ValueId v = 0; v < def.values.size(); ++v) taken.insert(value_display_name(def, v, src[v]));
      for (std::size_t i = 0; i < def.nodes.size(); ++i) taken.insert(op_display_name(def, i));
      taken_filled = true;
    }
    return taken.fresh(name);
  };
  // A value read by a later part crosses under its name; a graph output that also crosses does so
  // through a copy of its own, so that the output stays the merged graph's.
  std::vector<std::string> crossing_name(def.values.size());
  std::vector<std::vector<std::uint32_t>> read_in(def.values.size());  // parts (by rank) reading v, not home
  for (ValueId v = 0; v < def.values.size(); ++v) {
    if (home[v] == kNoPart) continue;
    for (std::uint32_t r : readers[v]) {
      const std::uint32_t q = rank[part_of[r]];
      if (q != home[v] && std::find(read_in[v].begin(), read_in[v].end(), q) == read_in[v].end())
        read_in[v].push_back(q);
    }
    std::sort(read_in[v].begin(), read_in[v].end());
    if (read_in[v].empty()) continue;
    const std::string name = value_display_name(def, v, src[v]);
    crossing_name[v] = is_output[v] ? fresh(name) : name;
  }

  // ---- build the parts (nothing below fails) ----
  GraphDef& source = graph.body_ptr()->def;
  std::vector<std::string> node_names(source.nodes.size());
  for (std::size_t i = 0; i < source.nodes.size(); ++i) node_names[i] = op_display_name(source, i);
  std::vector<GraphDef> defs(part_count);
  std::vector<PartSources> sources(part_count);
  std::vector<std::vector<ValueId>> remap(part_count, std::vector<ValueId>(source.values.size(), kNoValue));
  const auto add_value = [&](std::uint32_t q, ValueId v, std::string name) {
    remap[q][v] = static_cast<ValueId>(defs[q].values.size());
    defs[q].values.push_back({std::move(name), source.values[v].type});
    return remap[q][v];
  };
  for (std::uint32_t q = 0; q < part_count; ++q) {
    GraphDef& d = defs[q];
    d.name = source.name;
    d.producer = source.producer;
    d.metadata = source.metadata;
    // Inputs: graph inputs this part owns, in the graph's order, then values other parts hand it, by id.
    for (ValueId v : source.inputs)
      if (home[v] == q) {
        d.inputs.push_back(add_value(q, v, value_display_name(source, v, src[v])));
        sources[q].inputs.push_back(v);
      }
    for (ValueId v = 0; v < source.values.size(); ++v)
      if (std::binary_search(read_in[v].begin(), read_in[v].end(), q)) {
        d.inputs.push_back(add_value(q, v, crossing_name[v]));
        sources[q].inputs.push_back(v);
      }
  }
  for (std::size_t c = 0; c < source.constants.size(); ++c) {
    const ValueId v = source.constants[c].value;
    std::vector<std::uint32_t> parts_reading;
    for (std::uint32_t r : readers[v]) parts_reading.push_back(rank[part_of[r]]);
    std::sort(parts_reading.begin(), parts_reading.end());
    parts_reading.erase(std::unique(parts_reading.begin(), parts_reading.end()), parts_reading.end());
    for (std::uint32_t q : parts_reading) {
      ConstantDef k = source.constants[c];  // shares the tensor's storage
      k.value = add_value(q, v, source.values[v].name);
      defs[q].constants.push_back(std::move(k));
    }
  }
  for (std::size_t i = 0; i < source.nodes.size(); ++i) {
    const std::uint32_t q = rank[part_of[i]];
    NodeDef n = std::move(source.nodes[i]);
    n.name = std::move(node_names[i]);
    for (ValueId& v : n.inputs) v = remap[q][v];
    for (ValueId& v : n.outputs) {
      const ValueId old = v;
      v = add_value(q, old,
                    !crossing_name[old].empty() && !is_output[old] ? crossing_name[old] : source.values[old].name);
    }
    defs[q].nodes.push_back(std::move(n));
  }
  // Outputs: the graph's outputs a part computes, then the values it hands on, by id.
  for (std::uint32_t q = 0; q < part_count; ++q) {
    GraphDef& d = defs[q];
    for (ValueId v : source.outputs) {
      if (home[v] != q) continue;
      const ValueId mine = remap[q][v];
      if (d.values[mine].name.empty()) d.values[mine].name = value_display_name(source, v, src[v]);
      d.outputs.push_back(mine);
      sources[q].outputs.push_back(v);
    }
    for (ValueId v = 0; v < source.values.size(); ++v) {
      if (home[v] != q || read_in[v].empty()) continue;
      ValueId mine = remap[q][v];
      if (is_output[v]) {
        NodeDef copy;
        copy.op = "copy";
        copy.name = fresh("Copy_" + crossing_name[v]);
        copy.inputs = {mine};
        mine = static_cast<ValueId>(d.values.size());
        d.values.push_back({crossing_name[v], source.values[v].type});
        copy.outputs = {mine};
        if (src[v].kind == ValueSource::Kind::node) copy.device = d.nodes.empty() ? Device{} : d.nodes.back().device;
        d.nodes.push_back(std::move(copy));
      }
      d.outputs.push_back(mine);
      sources[q].outputs.push_back(v);
      for (std::uint32_t r : read_in[v])
        result.connections.push_back({{names[order[q]], crossing_name[v]}, {names[order[r]], crossing_name[v]}});
    }
  }
  const Device device = graph.device();
  for (std::uint32_t q = 0; q < part_count; ++q) {
    RML_ASSIGN_OR_RETURN(Graph checked, checked_result(std::move(defs[q]), "split"));
    GraphPart part{names[order[q]], std::move(checked)};
    part.graph.body_ptr()->device = part.graph.def().nodes.empty() ? device : part.graph.def().nodes.front().device;
    result.parts.push_back(std::move(part));
  }
  consume(graph, "split");
  if (io) *io = std::move(sources);
  return result;
}

/// Refuses a graph that split or extract cannot take.
inline Status check_splittable(const Graph& graph, std::string_view call) {
  if (graph.consumed())
    return invalid_argument(std::string(call) + ": the graph is empty: a merge, a split or an extract consumed it");
  if (graph.finalized())
    return failed_precondition(std::string(call) + ": the graph is finalized; " + std::string(call) +
                               " before finalize()");
  return check_structure(graph, call);
}

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
inline Result<SplitGraph> split(Graph& graph, const ValueCut& cut) {
  RML_RETURN_IF_ERROR(detail::check_splittable(graph, "split"));
  const GraphDef& def = graph.def();
  const std::size_t n_inputs = def.inputs.size();
  std::vector<bool> before(def.nodes.size(), false);
  for (const Value& v : cut.values) RML_RETURN_IF_ERROR(detail::check_view_of(graph, v, "split", "value"));
  for (const Node& n : cut.before) {
    RML_RETURN_IF_ERROR(detail::check_view_of(graph, n, "split", "node"));
    if (n.kind() != NodeKind::op)
      return invalid_argument("split: the cut's before-set holds the input '" + n.name() + "'");
    before[n.index() - n_inputs] = true;
  }
  const auto src = detail::value_sources(def);
  if (cut.before.empty()) {
    for (const Value& v : cut.values)
      if (src[v.id()].kind == detail::ValueSource::Kind::node) before[src[v.id()].index] = true;
    for (std::size_t i = def.nodes.size(); i-- > 0;)
      if (before[i])
        for (ValueId v : def.nodes[i].inputs)
          if (src[v].kind == detail::ValueSource::Kind::node) before[src[v].index] = true;
  }
  for (std::size_t i = 0; i < def.nodes.size(); ++i) {
    if (!before[i]) continue;
    for (ValueId v : def.nodes[i].inputs)
      if (src[v].kind == detail::ValueSource::Kind::node && !before[src[v].index])
        return invalid_argument("split: the cut puts '" + detail::op_display_name(def, i) + "' before it but '" +
                                detail::op_display_name(def, src[v].index) + "', which it reads, after it");
  }
  const auto count = static_cast<std::size_t>(std::count(before.begin(), before.end(), true));
  if (count == 0) return invalid_argument("split: the cut leaves no operator before it");
  if (count == before.size()) return invalid_argument("split: the cut leaves no operator after it");
  std::vector<std::uint32_t> part_of(def.nodes.size());
  for (std::size_t i = 0; i < def.nodes.size(); ++i) part_of[i] = before[i] ? 0 : 1;
  return detail::split_by_parts(graph, part_of, {"before", "after"});
}

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
inline Result<Graph> extract(Graph& graph, const std::vector<Value>& inputs, const std::vector<Value>& outputs) {
  RML_RETURN_IF_ERROR(detail::check_splittable(graph, "extract"));
  if (outputs.empty()) return invalid_argument("extract: no outputs to extract");
  const GraphDef& def = graph.def();
  const auto src = detail::value_sources(def);
  std::vector<bool> is_input(def.values.size(), false);
  for (const Value& v : inputs) {
    RML_RETURN_IF_ERROR(detail::check_view_of(graph, v, "extract", "value"));
    if (is_input[v.id()]) return invalid_argument("extract: the value '" + v.name() + "' is listed twice as an input");
    is_input[v.id()] = true;
  }
  for (const Value& v : outputs) RML_RETURN_IF_ERROR(detail::check_view_of(graph, v, "extract", "value"));
  // Walk back from the outputs, stopping at the inputs.
  std::vector<bool> needed_value(def.values.size(), false), needed_node(def.nodes.size(), false);
  std::vector<ValueId> stack;
  for (const Value& v : outputs) stack.push_back(v.id());
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    if (needed_value[v]) continue;
    needed_value[v] = true;
    if (is_input[v]) continue;
    if (src[v].kind == detail::ValueSource::Kind::input)
      return invalid_argument("extract: the outputs depend on the graph input '" +
                              detail::value_display_name(def, v, src[v]) + "', which is not among the inputs");
    if (src[v].kind != detail::ValueSource::Kind::node) continue;
    if (needed_node[src[v].index]) continue;
    needed_node[src[v].index] = true;
    for (ValueId in : def.nodes[src[v].index].inputs) stack.push_back(in);
  }

  // ---- build (nothing below fails) ----
  GraphDef& source = graph.body_ptr()->def;
  GraphDef out;
  out.name = source.name;
  out.producer = source.producer;
  out.metadata = source.metadata;
  std::vector<ValueId> remap(source.values.size(), detail::kNoValue);
  const auto add_value = [&](ValueId v, std::string name) {
    remap[v] = static_cast<ValueId>(out.values.size());
    out.values.push_back({std::move(name), source.values[v].type});
    return remap[v];
  };
  for (const Value& v : inputs) out.inputs.push_back(add_value(v.id(), v.name()));
  for (ConstantDef& c : source.constants) {
    if (!needed_value[c.value] || is_input[c.value]) continue;
    ConstantDef k = std::move(c);
    k.value = add_value(k.value, source.values[k.value].name);
    out.constants.push_back(std::move(k));
  }
  std::vector<std::string> node_names(source.nodes.size());
  for (std::size_t i = 0; i < source.nodes.size(); ++i)
    if (needed_node[i]) node_names[i] = detail::op_display_name(source, i);
  for (std::size_t i = 0; i < source.nodes.size(); ++i) {
    if (!needed_node[i]) continue;
    NodeDef n = std::move(source.nodes[i]);
    n.name = std::move(node_names[i]);
    for (ValueId& v : n.inputs) v = remap[v];
    for (ValueId& v : n.outputs) v = add_value(v, source.values[v].name);
    out.nodes.push_back(std::move(n));
  }
  for (const Value& v : outputs) {
    const ValueId mine = remap[v.id()];
    if (out.values[mine].name.empty()) out.values[mine].name = v.name();
    out.outputs.push_back(mine);
  }
  RML_ASSIGN_OR_RETURN(Graph extracted, detail::checked_result(std::move(out), "extract"));
  extracted.body_ptr()->device = graph.device();
  detail::consume(graph, "extract");
  return extracted;
}

}  // namespace rml
