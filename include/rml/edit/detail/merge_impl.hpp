// The definitions behind rml/edit/merge.hpp. Included by that header wherever RML_SPLIT_DEFINED
// is 1 (see rml/core/linkage.hpp).
#pragma once

#include "rml/edit/merge.hpp"

namespace rml {

namespace detail {

/// A part's interface: display names of its inputs and outputs, and every value's source.
struct PartIo {
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<ValueSource> sources;

  explicit PartIo(const GraphDef& def) : sources(value_sources(def)) {
    for (ValueId v : def.inputs) inputs.push_back(value_display_name(def, v, sources[v]));
    for (ValueId v : def.outputs) outputs.push_back(value_display_name(def, v, sources[v]));
  }
  static std::size_t find(const std::vector<std::string>& names, const std::string& name) {
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return i;
    return names.size();
  }
};

/// A `copy` of value `from` onto `device`, appended to `out`; returns the copy's value.
inline ValueId append_device_copy(GraphDef& out, ValueId from, const TensorType& type, const Device& device,
                                  std::string value_name, std::string node_name) {
  const auto copied = static_cast<ValueId>(out.values.size());
  out.values.push_back({std::move(value_name), type});
  NodeDef copy;
  copy.op = "copy";
  copy.inputs = {from};
  copy.outputs = {copied};
  copy.name = std::move(node_name);
  copy.device = device;
  out.nodes.push_back(std::move(copy));
  return copied;
}

/// Moves the constants and operators of `part` into `out`, renumbering values through `remap`
/// (already holding the part's inputs). `value_name(v)` names each new value, `node_name(i)`
/// each operator; `tensor_name` renames the stored tensor of a constant.
template <typename ValueName, typename NodeName, typename TensorName>
void append_part_body(GraphDef& out, GraphDef& part, std::vector<ValueId>& remap, ValueName&& value_name,
                      NodeName&& node_name, TensorName&& tensor_name) {
  const auto define = [&](ValueId v) {
    remap[v] = static_cast<ValueId>(out.values.size());
    out.values.push_back({value_name(v), std::move(part.values[v].type)});  // `part` is consumed
    return remap[v];
  };
  for (ConstantDef& c : part.constants) {
    ConstantDef moved = std::move(c);
    moved.value = define(moved.value);
    if (!moved.tensor.empty()) moved.tensor = tensor_name(moved.tensor);
    out.constants.push_back(std::move(moved));
  }
  for (std::size_t i = 0; i < part.nodes.size(); ++i) {
    NodeDef n = std::move(part.nodes[i]);
    n.name = node_name(i, n);
    for (ValueId& v : n.inputs) v = remap[v];
    for (ValueId& v : n.outputs) v = define(v);
    out.nodes.push_back(std::move(n));
  }
}

}  // namespace detail
RML_SPLIT_API Result<MergedGraph> merge(std::vector<GraphPart>& parts, const std::vector<Connection>& connections,
                                        MergeOptions options) {
  using detail::PartIo;
  const std::size_t part_count = parts.size();
  if (part_count == 0) return invalid_argument("merge: no parts to merge");

  // ---- check everything ----
  std::unordered_map<std::string, std::size_t> part_index;
  for (std::size_t p = 0; p < part_count; ++p) {
    const GraphPart& part = parts[p];
    if (part.name.empty() || part.name.find('/') != std::string::npos)
      return invalid_argument("merge: part " + std::to_string(p) + " is named '" + part.name +
                              "'; a part's name must be non-empty and hold no '/'");
    if (!part_index.emplace(part.name, p).second)
      return invalid_argument("merge: two parts are named '" + part.name + "'");
    if (part.graph.consumed())
      return invalid_argument("merge: part '" + part.name +
                              "' is empty: a merge, a split or an extract consumed its graph");
    if (part.graph.finalized())
      return failed_precondition("merge: part '" + part.name + "' is finalized; merge before finalize()");
    RML_RETURN_IF_ERROR(detail::check_structure(part.graph.def(), "merge: part '" + part.name + "'"));
  }
  std::vector<PartIo> io;
  io.reserve(part_count);
  for (const GraphPart& part : parts) io.emplace_back(part.graph.def());

  struct Link {
    std::size_t from_part, from_output, to_part, to_input;
    bool copy;
  };
  std::vector<Link> links;
  std::vector<std::vector<std::size_t>> fed_by(part_count);  // per input: link index + 1, 0 = none
  std::vector<std::vector<bool>> output_connected(part_count);
  for (std::size_t p = 0; p < part_count; ++p) {
    fed_by[p].assign(io[p].inputs.size(), 0);
    output_connected[p].assign(io[p].outputs.size(), false);
  }
  for (const Connection& c : connections) {
    const auto from = part_index.find(c.from.part);
    if (from == part_index.end())
      return invalid_argument("merge: connection " + c.to_string() + " names no part '" + c.from.part + "'");
    const auto to = part_index.find(c.to.part);
    if (to == part_index.end())
      return invalid_argument("merge: connection " + c.to_string() + " names no part '" + c.to.part + "'");
    const std::size_t fp = from->second, tp = to->second;
    const std::size_t fo = PartIo::find(io[fp].outputs, c.from.name);
    if (fo == io[fp].outputs.size())
      return invalid_argument("merge: part '" + c.from.part + "' has no output '" + c.from.name + "'");
    const std::size_t ti = PartIo::find(io[tp].inputs, c.to.name);
    if (ti == io[tp].inputs.size())
      return invalid_argument("merge: part '" + c.to.part + "' has no input '" + c.to.name + "'");
    if (fp == tp)
      return invalid_argument("merge: connection " + c.to_string() + " feeds part '" + c.from.part + "' into itself");
    if (fed_by[tp][ti] != 0)
      return invalid_argument("merge: input '" + c.to.part + "." + c.to.name + "' is fed by two connections");
    const GraphDef& fdef = parts[fp].graph.def();
    const GraphDef& tdef = parts[tp].graph.def();
    const ValueId fv = fdef.outputs[fo], tv = tdef.inputs[ti];
    if (fdef.values[fv].type != tdef.values[tv].type)
      return invalid_argument("merge: connection " + c.to_string() + " joins " + fdef.values[fv].type.to_string() +
                              " to " + tdef.values[tv].type.to_string() +
                              "; the two ends must agree in dtype and shape");
    const Device fd = detail::value_device(fdef, parts[fp].graph.device(), io[fp].sources[fv]);
    const Device td = parts[tp].graph.device();
    if (fd != td && options.cross_device == CrossDevice::refuse)
      return invalid_argument("merge: connection " + c.to_string() + " joins " + fd.to_string() + " to " +
                              td.to_string() + ", which CrossDevice::Refuse refuses; merge with CrossDevice::Move " +
                              "to copy the value across");
    fed_by[tp][ti] = links.size() + 1;
    output_connected[fp][fo] = true;
    links.push_back({fp, fo, tp, ti, fd != td});
  }

  // Parts in an order every connection runs forward in; among ready parts, the earliest given.
  std::vector<std::size_t> order;
  {
    std::vector<std::size_t> pending(part_count, 0);
    std::vector<std::vector<std::size_t>> next(part_count);
    for (const Link& l : links) {
      ++pending[l.to_part];
      next[l.from_part].push_back(l.to_part);
    }
    std::vector<bool> placed(part_count, false);
    while (order.size() < part_count) {
      std::size_t ready = part_count;
      for (std::size_t p = 0; p < part_count && ready == part_count; ++p)
        if (!placed[p] && pending[p] == 0) ready = p;
      if (ready == part_count) {
        std::string cycle;
        for (std::size_t p = 0; p < part_count; ++p)
          if (!placed[p]) cycle += (cycle.empty() ? "'" : ", '") + parts[p].name + "'";
        return invalid_argument("merge: the connections form a cycle through parts " + cycle);
      }
      placed[ready] = true;
      order.push_back(ready);
      for (std::size_t q : next[ready]) --pending[q];
    }
  }

  // Input and output names: which parts use each unconnected name.
  std::unordered_map<std::string, std::vector<std::pair<std::size_t, NameKind>>> users;
  for (std::size_t p = 0; p < part_count; ++p) {
    for (std::size_t i = 0; i < io[p].inputs.size(); ++i)
      if (fed_by[p][i] == 0) users[io[p].inputs[i]].emplace_back(p, NameKind::input);
    for (std::size_t o = 0; o < io[p].outputs.size(); ++o)
      if (!output_connected[p][o]) users[io[p].outputs[o]].emplace_back(p, NameKind::output);
  }
  const auto collides = [&](const std::string& name) {
    const auto& u = users[name];
    for (const auto& [p, kind] : u)
      if (p != u.front().first) return true;
    return false;
  };
  if (options.io_names == IoNames::keep) {
    for (std::size_t p = 0; p < part_count; ++p) {
      for (const auto* names : {&io[p].inputs, &io[p].outputs}) {
        for (const std::string& name : *names) {
          if (!collides(name)) continue;
          const auto& u = users[name];
          std::size_t other = 0;
          while (u[other].first == u.front().first) ++other;
          const std::string a = parts[u.front().first].name, b = parts[u[other].first].name;
          const std::string what =
              u.front().second == u[other].second
                  ? "parts '" + a + "' and '" + b + "' both have " +
                        (u.front().second == NameKind::input ? "an input" : "an output") + " named '" + name + "'"
                  : "part '" + a + "' has " + (u.front().second == NameKind::input ? "an input" : "an output") +
                        " and part '" + b + "' " + (u[other].second == NameKind::input ? "an input" : "an output") +
                        " named '" + name + "'";
          return invalid_argument("merge: " + what +
                                  ", which IoNames::Keep keeps; merge with IoNames::PrefixOnCollision or "
                                  "PrefixAlways");
        }
      }
    }
  }
  const auto io_name = [&](std::size_t p, const std::string& name) {
    const bool prefix = options.io_names == IoNames::prefix_always ||
                        (options.io_names == IoNames::prefix_on_collision && collides(name));
    return prefix ? parts[p].name + "/" + name : name;
  };
  // Two different values must not end up under one name.
  {
    std::unordered_map<std::string, std::pair<std::size_t, ValueId>> taken;
    for (std::size_t p = 0; p < part_count; ++p) {
      const GraphDef& def = parts[p].graph.def();
      const auto claim = [&](const std::string& name, ValueId v) -> Status {
        const auto [it, fresh] = taken.emplace(io_name(p, name), std::make_pair(p, v));
        if (!fresh && it->second != std::make_pair(p, v))
          return invalid_argument("merge: the merged graph would have two values named '" + it->first + "'");
        return {};
      };
      for (std::size_t i = 0; i < io[p].inputs.size(); ++i)
        if (fed_by[p][i] == 0) RML_RETURN_IF_ERROR(claim(io[p].inputs[i], def.inputs[i]));
      for (std::size_t o = 0; o < io[p].outputs.size(); ++o)
        if (!output_connected[p][o]) RML_RETURN_IF_ERROR(claim(io[p].outputs[o], def.outputs[o]));
    }
  }

  // ---- build (nothing below fails) ----
  MergedGraph merged;
  std::size_t total_nodes = 0, total_values = 0;
  for (const GraphPart& part : parts) {
    total_nodes += part.graph.def().nodes.size();
    total_values += part.graph.def().values.size();
  }
  merged.renames.reserve(total_nodes + 8);
  for (std::size_t p = 0; p < part_count; ++p) {
    for (std::size_t i = 0; i < io[p].inputs.size(); ++i) {
      const std::string to = io_name(p, io[p].inputs[i]);
      if (fed_by[p][i] == 0 && to != io[p].inputs[i])
        merged.renames.push_back({parts[p].name, NameKind::input, io[p].inputs[i], to});
    }
  }
  for (std::size_t p = 0; p < part_count; ++p) {
    for (std::size_t o = 0; o < io[p].outputs.size(); ++o) {
      const std::string to = io_name(p, io[p].outputs[o]);
      if (!output_connected[p][o] && to != io[p].outputs[o])
        merged.renames.push_back({parts[p].name, NameKind::output, io[p].outputs[o], to});
    }
  }
  for (std::size_t p = 0; p < part_count; ++p) {
    const GraphDef& def = parts[p].graph.def();
    for (std::size_t i = 0; i < def.nodes.size(); ++i) {
      std::string from = detail::op_display_name(def, i);
      std::string to = parts[p].name + "/" + from;
      merged.renames.push_back({parts[p].name, NameKind::node, std::move(from), std::move(to)});
    }
  }

  GraphDef out;
  out.name = parts[0].graph.def().name;
  out.producer = parts[0].graph.def().producer;
  const Device device = parts[0].graph.device();
  out.nodes.reserve(total_nodes + links.size());
  out.values.reserve(total_values + links.size());
  std::vector<std::vector<ValueId>> remap(part_count);
  std::vector<std::vector<ValueId>> merged_input(part_count);
  // Node renames follow the input and output renames, part by part: each part's first one.
  std::vector<std::size_t> first_node_rename(part_count, 0);
  std::size_t node_rename = 0;
  while (node_rename < merged.renames.size() && merged.renames[node_rename].kind != NameKind::node) ++node_rename;
  for (std::size_t p = 0; p < part_count; ++p) {
    first_node_rename[p] = node_rename;
    node_rename += parts[p].graph.def().nodes.size();
  }
  for (std::size_t p : order) {
    GraphDef& def = parts[p].graph.body_ptr()->def;
    for (const auto& [k, v] : def.metadata) out.metadata.emplace(k, v);
    remap[p].assign(def.values.size(), detail::kNoValue);
    merged_input[p].assign(def.inputs.size(), detail::kNoValue);
    std::unordered_map<ValueId, std::string> output_name;
    for (std::size_t o = 0; o < def.outputs.size(); ++o)
      if (!output_connected[p][o]) output_name.emplace(def.outputs[o], io_name(p, io[p].outputs[o]));
    for (std::size_t i = 0; i < def.inputs.size(); ++i) {
      const ValueId v = def.inputs[i];
      if (fed_by[p][i] == 0) {
        remap[p][v] = merged_input[p][i] = static_cast<ValueId>(out.values.size());
        out.values.push_back({io_name(p, io[p].inputs[i]), def.values[v].type});
        continue;
      }
      const Link& l = links[fed_by[p][i] - 1];
      const ValueId src = remap[l.from_part][parts[l.from_part].graph.def().outputs[l.from_output]];
      remap[p][v] = l.copy ? detail::append_device_copy(out, src, def.values[v].type, parts[p].graph.device(),
                                                        parts[p].name + "/" + io[p].inputs[i],
                                                        parts[p].name + "/Copy_" + io[p].inputs[i])
                           : src;
    }
    const std::string prefix = parts[p].name + "/";
    detail::append_part_body(
        out, def, remap[p],
        [&](ValueId v) {
          if (auto it = output_name.find(v); it != output_name.end()) return it->second;
          if (!def.values[v].name.empty()) return prefix + def.values[v].name;
          // A connected output keeps its part's name for it, so the merged graph still says where it came from.
          for (std::size_t o = 0; o < def.outputs.size(); ++o)
            if (def.outputs[o] == v) return prefix + io[p].outputs[o];
          return std::string();
        },
        [&](std::size_t i, const NodeDef&) { return merged.renames[first_node_rename[p] + i].to; },
        [&](const std::string& tensor) { return prefix + tensor; });
  }
  for (std::size_t p = 0; p < part_count; ++p) {
    for (ValueId v : merged_input[p])
      if (v != detail::kNoValue) out.inputs.push_back(v);
    const GraphDef& def = parts[p].graph.def();
    for (std::size_t o = 0; o < def.outputs.size(); ++o)
      if (!output_connected[p][o]) out.outputs.push_back(remap[p][def.outputs[o]]);
  }
  for (GraphPart& part : parts) detail::consume(part.graph, "merge");
  RML_ASSIGN_OR_RETURN(merged.graph, detail::checked_result(std::move(out), "merge"));
  merged.graph.body_ptr()->device = device;  // the nodes keep their own parts' devices
  return merged;
}
namespace detail {

RML_SPLIT_API Result<std::vector<Rename>> merge_into(Graph& first, Graph& second,
                                                     const std::vector<std::pair<std::string, std::string>>& io_map) {
  if (first.body_ptr() == second.body_ptr()) return invalid_argument("merge: a graph cannot be merged into itself");
  if (first.consumed() || second.consumed())
    return invalid_argument(std::string("merge: ") + (first.consumed() ? "this" : "the second") +
                            " graph is empty: a merge, a split or an extract consumed it");
  if (first.finalized() || second.finalized())
    return failed_precondition(std::string("merge: ") + (first.finalized() ? "this" : "the second") +
                               " graph is finalized; merge before finalize()");
  RML_RETURN_IF_ERROR(check_structure(first.def(), "merge"));
  RML_RETURN_IF_ERROR(check_structure(second.def(), "merge: the second graph"));
  const PartIo io1(first.def()), io2(second.def());
  std::vector<std::size_t> fed_by(io2.inputs.size(), 0);  // io_map index + 1
  std::vector<bool> output_connected(io1.outputs.size(), false);
  for (std::size_t k = 0; k < io_map.size(); ++k) {
    const auto& [out_name, in_name] = io_map[k];
    const std::size_t o = PartIo::find(io1.outputs, out_name);
    if (o == io1.outputs.size()) return invalid_argument("merge: this graph has no output '" + out_name + "'");
    const std::size_t i = PartIo::find(io2.inputs, in_name);
    if (i == io2.inputs.size()) return invalid_argument("merge: the second graph has no input '" + in_name + "'");
    if (fed_by[i] != 0) return invalid_argument("merge: input '" + in_name + "' is fed by two connections");
    const TensorType& a = first.def().values[first.def().outputs[o]].type;
    const TensorType& b = second.def().values[second.def().inputs[i]].type;
    if (a != b)
      return invalid_argument("merge: connection " + out_name + " -> " + in_name + " joins " + a.to_string() + " to " +
                              b.to_string() + "; the two ends must agree in dtype and shape");
    fed_by[i] = k + 1;
    for (std::size_t oo = 0; oo < io1.outputs.size(); ++oo)
      if (io1.outputs[oo] == out_name) output_connected[oo] = true;
  }

  // ---- build (nothing below fails) ----
  GraphDef& out = first.body_ptr()->def;
  GraphDef& def = second.body_ptr()->def;
  materialize_node_names(out);  // second's inputs may shift first's operators in nodes()
  std::vector<ValueId> kept_outputs;
  for (std::size_t o = 0; o < out.outputs.size(); ++o) {
    if (!output_connected[o]) {
      kept_outputs.push_back(out.outputs[o]);
      continue;
    }
    // A connected output is the merged graph's no longer: it gives up its name unless still listed.
    ValueDef& v = out.values[out.outputs[o]];
    bool listed = false;
    for (std::size_t oo = 0; oo < out.outputs.size(); ++oo)
      listed = listed || (!output_connected[oo] && out.outputs[oo] == out.outputs[o]);
    for (ValueId in : out.inputs) listed = listed || in == out.outputs[o];
    if (!listed && v.name == io1.outputs[o]) v.name.clear();
  }
  NameSet names, tensors;
  for (const ValueDef& v : out.values)
    if (!v.name.empty()) names.insert(v.name);
  for (const NodeDef& n : out.nodes) names.insert(n.name);
  for (const ConstantDef& c : out.constants) tensors.insert(c.tensor);

  std::vector<Rename> renames;
  const auto take = [&](NameKind kind, const std::string& name) {
    std::string to = names.fresh(name);
    if (to != name) renames.push_back({"second", kind, name, to});
    return to;
  };
  std::vector<ValueId> remap(def.values.size(), kNoValue);
  std::vector<std::string> input_name(io2.inputs.size());
  for (std::size_t i = 0; i < io2.inputs.size(); ++i)
    if (fed_by[i] == 0) input_name[i] = take(NameKind::input, io2.inputs[i]);
  std::unordered_map<ValueId, std::string> output_name;
  for (std::size_t o = 0; o < io2.outputs.size(); ++o)
    if (!output_name.count(def.outputs[o])) output_name.emplace(def.outputs[o], take(NameKind::output, io2.outputs[o]));
  std::vector<std::string> node_name(def.nodes.size());
  for (std::size_t i = 0; i < def.nodes.size(); ++i) node_name[i] = take(NameKind::node, op_display_name(def, i));

  for (std::size_t i = 0; i < def.inputs.size(); ++i) {
    const ValueId v = def.inputs[i];
    if (fed_by[i] == 0) {
      remap[v] = static_cast<ValueId>(out.values.size());
      out.values.push_back({input_name[i], def.values[v].type});
      out.inputs.push_back(remap[v]);
      continue;
    }
    const std::size_t o = PartIo::find(io1.outputs, io_map[fed_by[i] - 1].first);
    const ValueId src = out.outputs[o];
    const Device from = value_device(out, first.device(), io1.sources[src]);
    remap[v] = from == second.device()
                   ? src
                   : append_device_copy(out, src, def.values[v].type, second.device(), names.fresh(io2.inputs[i]),
                                        names.fresh("Copy_" + io2.inputs[i]));
  }
  append_part_body(
      out, def, remap,
      [&](ValueId v) {
        if (auto it = output_name.find(v); it != output_name.end()) return it->second;
        return def.values[v].name.empty() ? std::string() : names.fresh(def.values[v].name);
      },
      [&](std::size_t i, const NodeDef&) { return node_name[i]; },
      [&](const std::string& tensor) { return tensors.fresh(tensor); });
  out.outputs = std::move(kept_outputs);
  for (ValueId v : def.outputs) out.outputs.push_back(remap[v]);
  for (const auto& [k, v] : def.metadata) out.metadata.emplace(k, v);
  ++first.body_ptr()->epoch;
  consume(second, "merge");
  if (const Status s = first.validate(); !s.ok())
    return internal_error("merge: produced a graph that fails validation (a bug in rml): " + s.message());
  return renames;
}
}  // namespace detail
}  // namespace rml
