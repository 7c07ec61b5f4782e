// run_node: compile one node against concrete tensors and run its kernel at once (eager ops).
#pragma once

#include <span>
#include <vector>

#include "rml/core/linkage.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"
#include "rml/ir/graph.hpp"

namespace rml {

/// Compiles `node` against the inputs' types and runs it single-threaded; `node.inputs` and
/// `node.outputs` are not consulted (the tensors are the inputs). Returns the outputs.
/// UNSUPPORTED / INVALID_ARGUMENT as compile_op (also for an input without data);
/// OUT_OF_RANGE for a gather index outside its axis.
RML_SPLIT_API Result<std::vector<Tensor>> run_node(const NodeDef& node, std::span<const Tensor> inputs);

}  // namespace rml

#if RML_SPLIT_DEFINED
#include "rml/exec/detail/implementation.hpp"
#endif
