// The definitions behind rml/edit/split.hpp. Included by that header wherever RML_SPLIT_DEFINED
// is 1 (see rml/core/linkage.hpp).
#pragma once

#include "rml/edit/split.hpp"

namespace rml {

namespace detail {

RML_SPLIT_API Result<SplitGraph> split_by_parts(Graph& graph, const std::vector<std::uint32_t>& part_of,
                                                const std::vector<std::string>& names, std::vector<PartSources>* io) {
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
RML_SPLIT_API Status check_splittable(const Graph& graph, std::string_view call) {
  if (graph.consumed())
    return invalid_argument(std::string(call) + ": the graph is empty: a merge, a split or an extract consumed it");
  if (graph.finalized())
    return failed_precondition(std::string(call) + ": the graph is finalized; " + std::string(call) +
                               " before finalize()");
  return check_structure(graph, call);
}
}  // namespace detail
RML_SPLIT_API Result<SplitGraph> split(Graph& graph, const ValueCut& cut) {
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
RML_SPLIT_API Result<Graph> extract(Graph& graph, const std::vector<Value>& inputs, const std::vector<Value>& outputs) {
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
