// The definitions behind rml/edit/cut.hpp. Included by that header wherever RML_SPLIT_DEFINED
// is 1 (see rml/core/linkage.hpp).
#pragma once

#include "rml/edit/cut.hpp"
#include "rml/edit/detail/maxflow.hpp"

namespace rml {

namespace detail {

/// Bytes crossing when `before[i]` says which operators come first: values produced before and
/// read after, and graph inputs read on both sides. Constants never cross.
inline std::uint64_t crossing_bytes(const GraphDef& def, const std::vector<bool>& before,
                                    std::vector<ValueId>* crossing = nullptr) {
  const auto src = value_sources(def);
  const auto readers = value_readers(def);
  std::uint64_t bytes = 0;
  for (ValueId v = 0; v < def.values.size(); ++v) {
    bool read_before = false, read_after = false;
    for (std::uint32_t r : readers[v]) (before[r] ? read_before : read_after) = true;
    bool crosses = false;
    if (src[v].kind == ValueSource::Kind::node) crosses = before[src[v].index] && read_after;
    if (src[v].kind == ValueSource::Kind::input) crosses = read_before && read_after;
    if (!crosses) continue;
    bytes += static_cast<std::uint64_t>(def.values[v].type.checked_nbytes().value_or(0));
    if (crossing) crossing->push_back(v);
  }
  return bytes;
}

/// The exact minimum over down-closed operator sets with at least one operator on each side.
/// Returns the before-set, or nothing when the graph has fewer than two operators.
inline std::vector<bool> min_cut_partition(const GraphDef& def) {
  const auto n_inputs = static_cast<std::uint32_t>(def.inputs.size());
  const auto n_ops = static_cast<std::uint32_t>(def.nodes.size());
  const auto src = value_sources(def);
  const auto readers = value_readers(def);
  // Vertex numbering: 0 = source, 1 = sink, then inputs, then operators, then read values.
  const auto input_vertex = [&](std::uint32_t i) { return 2 + i; };
  const auto op_vertex = [&](std::uint32_t n) { return 2 + n_inputs + n; };
  std::vector<std::uint32_t> value_vertex(def.values.size(), 0);
  std::uint32_t vertices = 2 + n_inputs + n_ops;
  for (ValueId v = 0; v < def.values.size(); ++v) {
    if (readers[v].empty() || (src[v].kind != ValueSource::Kind::node && src[v].kind != ValueSource::Kind::input))
      continue;
    value_vertex[v] = vertices++;
  }
  // Each value's capacity is its byte size, capped so that the sum of all of them (and so every
  // flow) stays below a quarter of the range: only values of petabytes are capped in practice.
  const auto read_values = static_cast<FlowNetwork::Cap>(vertices - (2 + n_inputs + n_ops));
  const FlowNetwork::Cap per_value =
      std::numeric_limits<FlowNetwork::Cap>::max() / 4 / std::max<FlowNetwork::Cap>(read_values, 1);
  const auto capacity = [&](ValueId v) { return std::min(def.values[v].type.checked_nbytes().value_or(0), per_value); };
  FlowNetwork::Cap finite = 0;
  for (ValueId v = 0; v < def.values.size(); ++v)
    if (value_vertex[v] != 0) finite += capacity(v);
  const FlowNetwork::Cap inf = finite + 1;
  FlowNetwork net(vertices);
  for (ValueId v = 0; v < def.values.size(); ++v) {
    if (value_vertex[v] == 0) continue;
    const std::uint32_t p =
        src[v].kind == ValueSource::Kind::node ? op_vertex(src[v].index) : input_vertex(src[v].index);
    net.add_edge(p, value_vertex[v], capacity(v));
    for (std::uint32_t r : readers[v]) {
      net.add_edge(value_vertex[v], op_vertex(r), inf);
      net.add_edge(op_vertex(r), p, inf);
    }
  }
  // First operators (reading no operator's output) and last ones (read by no operator).
  std::vector<bool> has_op_input(n_ops, false), has_op_reader(n_ops, false);
  for (std::uint32_t n = 0; n < n_ops; ++n) {
    for (ValueId v : def.nodes[n].inputs) {
      if (v < src.size() && src[v].kind == ValueSource::Kind::node) {
        has_op_input[n] = true;
        has_op_reader[src[v].index] = true;
      }
    }
  }
  std::vector<std::uint32_t> firsts, lasts;
  for (std::uint32_t n = 0; n < n_ops; ++n) {
    if (!has_op_input[n]) firsts.push_back(n);
    if (!has_op_reader[n]) lasts.push_back(n);
  }
  std::vector<bool> best;
  if (n_ops < 2) return best;
  const std::uint32_t m1 = firsts.front();  // a DAG has one
  constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> source_edge(n_ops, kNone), sink_edge(n_ops, kNone);
  for (std::uint32_t n : firsts) source_edge[n] = net.add_edge(0, op_vertex(n), 0);
  for (std::uint32_t n : lasts) sink_edge[n] = net.add_edge(op_vertex(n), 1, 0);
  if (sink_edge[m1] == kNone) sink_edge[m1] = net.add_edge(op_vertex(m1), 1, 0);
  net.save();

  FlowNetwork::Cap best_cost = std::numeric_limits<FlowNetwork::Cap>::max();
  const auto try_pair = [&](std::uint32_t before_op, std::uint32_t after_op) {
    if (before_op == after_op) return;
    net.reset();
    net.set_capacity(source_edge[before_op], inf);
    net.set_capacity(sink_edge[after_op], inf);
    const FlowNetwork::Cap cost = net.max_flow(0, 1, best_cost);
    if (cost >= best_cost) return;
    best_cost = cost;
    const auto side = net.source_side(0);
    best.assign(n_ops, false);
    for (std::uint32_t n = 0; n < n_ops; ++n) best[n] = side[op_vertex(n)];
  };
  for (std::uint32_t last : lasts) try_pair(m1, last);
  for (std::size_t i = 1; i < firsts.size(); ++i) try_pair(firsts[i], m1);
  return best;
}

}  // namespace detail

namespace detail {

/// The cheapest prefix of the operator order (always down-closed) whose FLOPs share lies in
/// [lo, hi]; empty when none does. Linear: crossing bytes are updated as each operator moves before.
inline std::vector<bool> best_prefix_cut(const GraphDef& def, const std::vector<double>& flops, double total, double lo,
                                         double hi) {
  const auto src = value_sources(def);
  const auto readers = value_readers(def);
  const std::size_t n_ops = def.nodes.size();
  std::vector<std::uint32_t> after_readers(def.values.size()), before_readers(def.values.size(), 0);
  for (ValueId v = 0; v < def.values.size(); ++v) after_readers[v] = static_cast<std::uint32_t>(readers[v].size());
  // Capped so that the running sum over every value cannot overflow (only petabyte values are).
  const std::int64_t per_value = std::numeric_limits<std::int64_t>::max() / 4 /
                                 std::max<std::int64_t>(static_cast<std::int64_t>(def.values.size()), 1);
  const auto bytes = [&](ValueId v) { return std::min(def.values[v].type.checked_nbytes().value_or(0), per_value); };
  const auto crosses = [&](ValueId v, const std::vector<bool>& before) {
    if (src[v].kind == ValueSource::Kind::node) return before[src[v].index] && after_readers[v] > 0;
    if (src[v].kind == ValueSource::Kind::input) return before_readers[v] > 0 && after_readers[v] > 0;
    return false;
  };
  std::vector<bool> before(n_ops, false), best;
  std::int64_t cost = 0, best_cost = std::numeric_limits<std::int64_t>::max();
  double done = 0;
  for (std::size_t k = 0; k + 1 < n_ops; ++k) {
    const NodeDef& n = def.nodes[k];
    // Remove the terms of every value this operator touches, move it, add them back.
    std::vector<ValueId> touched(n.inputs.begin(), n.inputs.end());
    touched.insert(touched.end(), n.outputs.begin(), n.outputs.end());
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (ValueId v : touched)
      if (crosses(v, before)) cost -= bytes(v);
    before[k] = true;
    for (ValueId v : touched) {
      if (std::find(n.inputs.begin(), n.inputs.end(), v) != n.inputs.end()) --after_readers[v], ++before_readers[v];
    }
    for (ValueId v : touched)
      if (crosses(v, before)) cost += bytes(v);
    done += flops[k];
    const double share = total > 0 ? done / total : 0.0;
    if (share >= lo && share <= hi && cost < best_cost) best_cost = cost, best = before;
  }
  return best;
}

}  // namespace detail
RML_SPLIT_API Result<ValueCut> min_value_cut(const Graph& graph, const CutOptions& options) {
  const GraphDef& def = graph.def();
  RML_RETURN_IF_ERROR(detail::check_structure(graph, "min_value_cut"));
  if (def.nodes.size() < 2)
    return invalid_argument("min_value_cut: the graph has " + std::to_string(def.nodes.size()) +
                            " operators; a cut needs one on each side");
  if (!(options.min_flops_before >= 0.0 && options.min_flops_before <= options.max_flops_before &&
        options.max_flops_before <= 1.0))
    return invalid_argument("min_value_cut: CutOptions must satisfy 0 <= min_flops_before <= max_flops_before <= 1");
  std::vector<double> flops(def.nodes.size());
  double total = 0;
  for (std::size_t i = 0; i < def.nodes.size(); ++i) total += flops[i] = estimate_flops(def, def.nodes[i]);
  const auto share_of = [&](const std::vector<bool>& before) {
    double s = 0;
    for (std::size_t i = 0; i < before.size(); ++i)
      if (before[i]) s += flops[i];
    return total > 0 ? s / total : 0.0;
  };
  ValueCut cut;
  std::vector<bool> before = detail::min_cut_partition(def);
  double share = share_of(before);
  if (share < options.min_flops_before || share > options.max_flops_before) {
    before = detail::best_prefix_cut(def, flops, total, options.min_flops_before, options.max_flops_before);
    if (before.empty())
      return invalid_argument("min_value_cut: no cut puts between " + std::to_string(options.min_flops_before) +
                              " and " + std::to_string(options.max_flops_before) + " of the FLOPs before it");
    share = share_of(before);
    cut.exact = false;
  }
  std::vector<ValueId> crossing;
  cut.bytes = detail::crossing_bytes(def, before, &crossing);
  cut.flops_before = share;
  const auto body = graph.body_ptr();
  const auto src = detail::value_sources(def);
  for (ValueId v : crossing) cut.values.push_back(detail::ViewAccess::value(body, v, src[v]));
  for (std::size_t i = 0; i < before.size(); ++i)
    if (before[i]) cut.before.push_back(detail::ViewAccess::node(body, def.inputs.size() + i));
  return cut;
}
}  // namespace rml
