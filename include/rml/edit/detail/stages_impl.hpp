// The definitions behind rml/edit/stages.hpp. Included by that header wherever RML_SPLIT_DEFINED
// is 1 (see rml/core/linkage.hpp).
#pragma once

#include "rml/edit/stages.hpp"

namespace rml {

namespace detail {

inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  return a > std::numeric_limits<std::uint64_t>::max() - b ? std::numeric_limits<std::uint64_t>::max() : a + b;
}

/// The bytes crossing a cut before operator p, for every p in [0, n]: a value crosses when it is
/// born before p (graph inputs at -1, operator outputs at their producer) and needed at or after
/// p (its last reader; n for a graph output). Constants never cross.
struct CutProfile {
  std::vector<std::int64_t> born, needed;  // per value
  std::vector<bool> crosses;               // per value: crosses some position (not a constant, needed > born)
  std::vector<std::uint64_t> bytes;        // per position 0..n
};

inline CutProfile cut_profile(const GraphDef& def) {
  const auto n = static_cast<std::int64_t>(def.nodes.size());
  CutProfile p;
  p.born.assign(def.values.size(), 0);
  p.needed.assign(def.values.size(), -1);
  std::vector<bool> carried(def.values.size(), false);
  for (ValueId v : def.inputs) p.born[v] = -1, carried[v] = true;
  for (std::size_t i = 0; i < def.nodes.size(); ++i)
    for (ValueId v : def.nodes[i].outputs) p.born[v] = static_cast<std::int64_t>(i), carried[v] = true;
  for (std::size_t i = 0; i < def.nodes.size(); ++i)
    for (ValueId v : def.nodes[i].inputs) p.needed[v] = std::max(p.needed[v], static_cast<std::int64_t>(i));
  for (ValueId v : def.outputs) p.needed[v] = n;
  p.crosses.assign(def.values.size(), false);
  for (ValueId v = 0; v < def.values.size(); ++v) p.crosses[v] = carried[v] && p.needed[v] > p.born[v];
  // A value crosses positions born + 1 .. needed: add its size at the first, remove it after the last.
  p.bytes.assign(def.nodes.size() + 1, 0);
  std::vector<std::uint64_t> delta_add(def.nodes.size() + 2, 0), delta_remove(def.nodes.size() + 2, 0);
  for (ValueId v = 0; v < def.values.size(); ++v) {
    if (!p.crosses[v]) continue;
    const auto size = static_cast<std::uint64_t>(def.values[v].type.checked_nbytes().value_or(0));
    delta_add[static_cast<std::size_t>(p.born[v] + 1)] += size;
    delta_remove[static_cast<std::size_t>(p.needed[v] + 1)] += size;
  }
  std::uint64_t live = 0;
  for (std::size_t pos = 0; pos <= def.nodes.size(); ++pos) {
    live += delta_add[pos];
    live -= delta_remove[pos];
    p.bytes[pos] = live;
  }
  return p;
}

}  // namespace detail
RML_SPLIT_API Result<StagePlan> plan_stages(const Graph& graph, const StageOptions& options) {
  const GraphDef& def = graph.def();
  RML_RETURN_IF_ERROR(detail::check_structure(def, "plan_stages"));
  const std::size_t n = def.nodes.size(), k = options.stages;
  if (k == 0 || k > n)
    return invalid_argument("plan_stages: cannot cut " + std::to_string(n) + " operators into " + std::to_string(k) +
                            " non-empty stages");
  std::vector<double> cost(n);
  if (options.op_cost.empty()) {
    for (std::size_t i = 0; i < n; ++i) cost[i] = estimate_flops(def, def.nodes[i]);
  } else {
    if (options.op_cost.size() != n)
      return invalid_argument("plan_stages: op_cost has " + std::to_string(options.op_cost.size()) + " entries for " +
                              std::to_string(n) + " operators");
    for (std::size_t i = 0; i < n; ++i)
      if (!std::isfinite(options.op_cost[i]) || options.op_cost[i] < 0)
        return invalid_argument("plan_stages: op_cost[" + std::to_string(i) + "] (operator '" +
                                detail::op_display_name(def, i) + "') must be finite and >= 0");
    cost = options.op_cost;
  }
  std::vector<double> prefix(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + cost[i];
  const detail::CutProfile profile = detail::cut_profile(def);
  const auto allowed = [&](std::size_t q) { return profile.bytes[q] <= options.max_cut_bytes; };

  // Phase 1: best[j][p], the smallest largest stage over j stages covering operators [0, p).
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(k + 1, std::vector<double>(n + 1, kInf));
  for (std::size_t p = 1; p <= n; ++p) best[1][p] = prefix[p];
  for (std::size_t j = 2; j <= k; ++j)
    for (std::size_t p = j; p <= n; ++p)
      for (std::size_t q = j - 1; q < p; ++q)
        if (best[j - 1][q] < kInf && allowed(q))
          best[j][p] = std::min(best[j][p], std::max(best[j - 1][q], prefix[p] - prefix[q]));
  const double limit = best[k][n];
  if (!(limit < kInf))
    return invalid_argument("plan_stages: no " + std::to_string(k) +
                            "-stage split of the operator order keeps every cut within " +
                            std::to_string(options.max_cut_bytes) + " bytes");

  // Phase 2: among the plans whose every stage costs at most `limit`, the fewest bytes crossing.
  constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();
  std::vector<std::vector<std::uint64_t>> bytes(k + 1, std::vector<std::uint64_t>(n + 1, kNone));
  std::vector<std::vector<std::size_t>> from(k + 1, std::vector<std::size_t>(n + 1, 0));
  for (std::size_t p = 1; p <= n; ++p)
    if (prefix[p] <= limit) bytes[1][p] = 0;
  for (std::size_t j = 2; j <= k; ++j)
    for (std::size_t p = j; p <= n; ++p)
      for (std::size_t q = j - 1; q < p; ++q) {
        if (bytes[j - 1][q] == kNone || !allowed(q) || prefix[p] - prefix[q] > limit) continue;
        const std::uint64_t total = detail::saturating_add(bytes[j - 1][q], profile.bytes[q]);
        if (total < bytes[j][p]) bytes[j][p] = total, from[j][p] = q;
      }

  StagePlan plan;
  plan.bounds.assign(k + 1, 0);
  plan.bounds[k] = n;
  for (std::size_t j = k; j > 1; --j) plan.bounds[j - 1] = from[j][plan.bounds[j]];
  plan.carried.resize(k + 1);
  plan.carried[0] = def.inputs;
  plan.carried[k] = def.outputs;
  for (std::size_t s = 0; s < k; ++s) {
    plan.stage_cost.push_back(prefix[plan.bounds[s + 1]] - prefix[plan.bounds[s]]);
    plan.max_stage_cost = std::max(plan.max_stage_cost, plan.stage_cost.back());
  }
  for (std::size_t s = 1; s < k; ++s) {
    const auto at = static_cast<std::int64_t>(plan.bounds[s]);
    for (ValueId v = 0; v < def.values.size(); ++v)
      if (profile.crosses[v] && profile.born[v] < at && at <= profile.needed[v]) plan.carried[s].push_back(v);
    plan.cut_bytes.push_back(profile.bytes[plan.bounds[s]]);
    plan.total_cut_bytes = detail::saturating_add(plan.total_cut_bytes, plan.cut_bytes.back());
  }
  return plan;
}
RML_SPLIT_API Result<StageSplit> split_stages(Graph& graph, const StageOptions& options) {
  RML_RETURN_IF_ERROR(detail::check_splittable(graph, "split_stages"));
  RML_ASSIGN_OR_RETURN(StagePlan plan, plan_stages(graph, options));
  const std::size_t k = plan.stage_cost.size();
  std::vector<std::uint32_t> stage_of(graph.def().nodes.size());
  std::vector<std::string> names;
  for (std::size_t s = 0; s < k; ++s) {
    names.push_back("stage" + std::to_string(s));
    for (std::size_t i = plan.bounds[s]; i < plan.bounds[s + 1]; ++i) stage_of[i] = static_cast<std::uint32_t>(s);
  }
  std::vector<detail::PartSources> io;
  RML_ASSIGN_OR_RETURN(SplitGraph parts, detail::split_by_parts(graph, stage_of, names, &io));
  StageSplit result;
  result.plan = std::move(plan);
  result.connections = std::move(parts.connections);
  for (std::size_t s = 0; s < k; ++s)  // contiguous intervals depend only backwards: parts keep stage order
    result.stages.push_back({std::move(parts.parts[s].graph), std::move(io[s].inputs), std::move(io[s].outputs)});
  return result;
}
}  // namespace rml
