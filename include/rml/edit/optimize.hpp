// Graph::optimize: identity removal, constant folding, common subexpression elimination, dead code
// elimination, and scheduling that lets the executor fuse.
//
// The executor fuses at create time: a matmul with the `add` of a row-vector bias that alone reads
// it (when the bias is computed before the matmul), and chains of unary ops after a matmul, a
// convolution, a binary op or another unary op. The op set has no fused ops, so optimize's part of
// "fusion" is to arrange the graph for those patterns: a bias computed after its matmul is
// scheduled before it, and CSE / identity removal drop the extra readers that would block a fusion.
// Every rewrite keeps the graph's inputs, outputs and their names, and what the graph computes
// (constant folding runs the same kernels, so results are bit-identical).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "rml/core/equal.hpp"
#include "rml/core/linkage.hpp"
#include "rml/core/status.hpp"
#include "rml/edit/detail/common.hpp"
#include "rml/edit/hooks.hpp"
#include "rml/ir/graph.hpp"
#include "rml/ir/ops.hpp"

namespace rml {

namespace detail {
/// Graph::optimize.
RML_SPLIT_API Status optimize_graph(Graph& graph);

}  // namespace detail

}  // namespace rml

#if RML_SPLIT_DEFINED
#include "rml/edit/detail/optimize_impl.hpp"
#endif
