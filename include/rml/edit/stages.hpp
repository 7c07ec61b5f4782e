// plan_stages and split_stages: a graph cut into k pipeline stages at k-1 value cuts, the largest
// stage's estimated cost as small as the operator order allows.
//
// The model. A pipeline runs its stages one after the other on every micro-batch; the graph's
// inputs enter at the first stage and its outputs leave from the last, so a value crosses the cut
// between stages s and s+1 when it is a graph input or computed at or before stage s, and is read
// after it or is a graph output. Constants never cross (every stage keeps the weights it reads);
// a value crosses a cut once however many later operators read it.
//
// What is exact and what is not. Stages are contiguous intervals of the graph's operator order
// (which the format makes topological). Over those, plan_stages is exact: it minimises the
// largest stage cost, then, among the plans that reach it, the total bytes crossing the cuts,
// with every cut within `max_cut_bytes` (a dynamic programme over the k-1 cut positions,
// O(k * n^2) for n operators). The order itself is a heuristic: a split into down-closed sets
// that no interval of this order expresses (e.g. two independent branches, one per stage, with
// the branches interleaved in the order) is not considered. tests/edit/test_stages.cpp measures
// the gap against brute force over all down-closed stage assignments; docs/distributed.md
// gives the numbers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "rml/core/linkage.hpp"
#include "rml/core/status.hpp"
#include "rml/edit/cut.hpp"
#include "rml/edit/detail/common.hpp"
#include "rml/edit/split.hpp"
#include "rml/ir/graph.hpp"

namespace rml {

/// What plan_stages balances and bounds.
struct StageOptions {
  /// How many stages (k >= 1, at most one per operator).
  std::size_t stages = 2;
  /// Each operator's cost, in nodes order (finite, >= 0): measured times, say. Empty: the
  /// estimate_flops of each operator.
  std::vector<double> op_cost;
  /// No cut may carry more bytes than this.
  std::uint64_t max_cut_bytes = std::numeric_limits<std::uint64_t>::max();
};

/// Where the stages begin and what crosses between them. Values are ids of the planned graph.
struct StagePlan {
  /// k + 1 operator indices: stage s holds the operators [bounds[s], bounds[s + 1]).
  std::vector<std::size_t> bounds;
  /// k: the summed cost of each stage's operators.
  std::vector<double> stage_cost;
  /// k + 1 lists: what flows into stage s (carried[0]: the graph inputs in order; carried[s] for
  /// 0 < s < k: the values crossing the cut before stage s, by id; carried[k]: the graph outputs
  /// in order, which leave the last stage).
  std::vector<std::vector<ValueId>> carried;
  /// k - 1: the bytes of carried[1..k-1].
  std::vector<std::uint64_t> cut_bytes;
  /// The largest stage cost, and the total of cut_bytes.
  double max_stage_cost = 0.0;
  std::uint64_t total_cut_bytes = 0;
};

/// One stage of a split: its graph, and the planned graph's value behind each of its inputs and
/// outputs (an output may name the same value twice: as a graph output and as a value handed on).
struct Stage {
  Graph graph;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
};

/// The stages of split_stages, in pipeline order, with the plan they follow and the connections
/// that merge(parts, connections) needs to join them back (parts named `stage0`, `stage1`, ...).
struct StageSplit {
  std::vector<Stage> stages;
  std::vector<Connection> connections;
  StagePlan plan;
};

/// Plans k stages of `graph`: contiguous intervals of its operator order, each non-empty, the
/// largest stage cost as small as possible, then the total bytes crossing the cuts, with no cut
/// above options.max_cut_bytes. Deterministic: ties go to the earliest cuts.
///
/// Errors: INVALID_ARGUMENT for a malformed graph, stages = 0 or more stages than operators, an
/// op_cost of the wrong length or with a negative or non-finite entry, or no plan within the bound.
RML_SPLIT_API Result<StagePlan> plan_stages(const Graph& graph, const StageOptions& options = {});

/// Splits `graph` into the stages of plan_stages(graph, options). Consumes `graph`.
///
/// Errors: those of plan_stages; INVALID_ARGUMENT for a consumed graph; FAILED_PRECONDITION for a
/// finalized one.
RML_SPLIT_API Result<StageSplit> split_stages(Graph& graph, const StageOptions& options = {});

}  // namespace rml

#if RML_SPLIT_DEFINED
#include "rml/edit/detail/stages_impl.hpp"
#endif
