// min_value_cut: the cut through a graph's values that hands the fewest bytes from the operators
// before it to those after it, by max-flow / min-cut.
//
// The network. Every graph input and operator is a vertex; so is every value an operator reads
// (constants aside: each side keeps the weights it reads, so they never cross). For a value v
// produced by p and read by c1..ck:
//     p -> v     capacity bytes(v)     (cut when p is before and some reader after: counted once)
//     v -> ci    infinite              (v cannot be "before" while a reader is after ...)
//     ci -> p    infinite              (... and no reader before while its producer is after)
// A finite cut is then exactly a down-closed set of operators (the source side) and its cost the
// bytes of the values it hands over. Both sides must hold an operator: with m1 the first operator
// that reads no other operator's output, every admissible cut either puts m1 before (and then
// some operator nobody reads after) or after (and some other such first operator before), so
// the minimum over those forced pairs is the exact answer. Ties go to the first pair in that
// order and, within a pair, to the smallest source side.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "rml/core/linkage.hpp"
#include "rml/core/status.hpp"
#include "rml/edit/detail/common.hpp"
#include "rml/ir/graph.hpp"

namespace rml {

/// Bounds on the share of the graph's estimated FLOPs computed before the cut, for balanced
/// two-stage pipelines. The defaults bound nothing.
struct CutOptions {
  double min_flops_before = 0.0;
  double max_flops_before = 1.0;
};

/// A cut: the values the operators before it hand to those after it.
struct ValueCut {
  /// The crossing values, by id (graph inputs that operators on both sides read included).
  std::vector<Value> values;
  /// Their total size.
  std::uint64_t bytes = 0;
  /// The operators before the cut, in graph order.
  std::vector<Node> before;
  /// The share of the estimated FLOPs before the cut.
  double flops_before = 0.0;
  /// False when CutOptions bounds excluded the unconstrained optimum and the cut is the best
  /// topological-prefix cut within them instead (then not guaranteed minimal).
  bool exact = true;
};

/// Estimated floating-point operations of one operator of `def`, from the recorded types: 2 x
/// output x reduction depth for matmul and conv2d, the larger of input and output elements for pools
/// and reductions, the output's elements otherwise. What min_value_cut's FLOP bounds and `rml info` use.
[[nodiscard]] inline double estimate_flops(const GraphDef& def, const NodeDef& n) {
  const auto numel = [&](ValueId v) {
    return v < def.values.size() ? static_cast<double>(def.values[v].type.shape.numel()) : 0.0;
  };
  const double out = n.outputs.empty() ? 0.0 : numel(n.outputs[0]);
  const auto dims = [&](std::size_t input) -> const Dims& {
    static const Dims none{};
    return input < n.inputs.size() && n.inputs[input] < def.values.size()
               ? def.values[n.inputs[input]].type.shape.dims()
               : none;
  };
  switch (detail::node_op_code(n)) {
    case OpCode::MatMul: {
      const auto& a = dims(0);
      return 2.0 * out * static_cast<double>(a.empty() ? 1 : a.back());
    }
    case OpCode::Conv2d: {
      const auto& w = dims(1);
      return w.size() == 4 ? 2.0 * out * static_cast<double>(w[1] * w[2] * w[3]) : out;
    }
    case OpCode::MaxPool2d:
    case OpCode::AvgPool2d:
    case OpCode::Sum:
    case OpCode::Mean:
    case OpCode::Max:
    case OpCode::Min:
    case OpCode::Softmax:
    case OpCode::ArgMax:
      return std::max(out, n.inputs.empty() ? 0.0 : numel(n.inputs[0]));
    default:
      return out;
  }
}

/// The cut through values that hands the fewest bytes from the operators before it to those after
/// it; both sides hold at least one operator, a value read by several later operators counts
/// once, constants never cross. Exact (max-flow / min-cut), deterministic on ties.
///
/// Errors: INVALID_ARGUMENT when the graph is malformed, has fewer than two operators, the
/// options are not 0 <= min_flops_before <= max_flops_before <= 1, or no cut meets them.
RML_SPLIT_API Result<ValueCut> min_value_cut(const Graph& graph, const CutOptions& options = {});

}  // namespace rml

#if RML_SPLIT_DEFINED
#include "rml/edit/detail/cut_impl.hpp"
#endif
