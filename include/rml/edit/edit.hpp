// Graph surgery in one include: trace and rml::ops, merge, min_value_cut, split, extract, optimize,
// finalize and run, and the definitions of Graph's editing members.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "rml/edit/cut.hpp"
#include "rml/edit/hooks.hpp"
#include "rml/edit/merge.hpp"
#include "rml/edit/ops.hpp"
#include "rml/edit/optimize.hpp"
#include "rml/edit/run.hpp"
#include "rml/edit/split.hpp"
#include "rml/edit/stages.hpp"
#include "rml/edit/trace.hpp"
#include "rml/ir/graph.hpp"

namespace rml::detail {

/// Graph's editing members forward here (see the templates in rml/ir/graph.hpp).
struct GraphEditor {
  static Result<ValueCut> min_value_cut(const Graph& graph, const CutOptions& options = {}) {
    return rml::min_value_cut(graph, options);
  }
  static Result<std::vector<Rename>> merge_into(Graph& first, Graph& second,
                                                const std::vector<std::pair<std::string, std::string>>& io_map) {
    return detail::merge_into(first, second, io_map);
  }
  static Status optimize(Graph& graph) { return optimize_graph(graph); }
  static Status finalize(Graph& graph) { return finalize_graph(graph); }
  static Result<std::vector<Tensor>> run(const Graph& graph, const std::vector<Tensor>& inputs) {
    return run_graph(graph, inputs);
  }
};

}  // namespace rml::detail
