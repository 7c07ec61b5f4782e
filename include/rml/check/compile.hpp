// compile_op: one function per op decides the output types and the kernel plan (SPEC §5).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "rml/check/kernel.hpp"
#include "rml/core/checked.hpp"
#include "rml/core/linkage.hpp"
#include "rml/core/shape.hpp"
#include "rml/core/status.hpp"
#include "rml/ir/attrs.hpp"
#include "rml/ir/graph.hpp"
#include "rml/ir/ops.hpp"

namespace rml {

/// What compile_op decides for a node: its output types and the kernel that computes them.
struct CompiledOp {
  std::vector<TensorType> outputs;
  Kernel kernel;
};

namespace detail {

/// compile_op without the message prefix and without the node's output count. The inputs' types
/// must have sizes that fit (the gate checks every value's); so do the outputs', checked here
/// once more for every rule.
RML_SPLIT_API Result<CompiledOp> compile_node(const NodeDef& node, std::span<const TensorType> in);

}  // namespace detail

/// Decides a node's output types and its kernel plan from its input types.
/// UNSUPPORTED for an unknown op; INVALID_ARGUMENT for a wrong arity, dtype, attribute (unknown,
/// missing, wrong kind, out of range), incompatible shapes, or a node listing the wrong number of
/// outputs. Messages start with the op (`conv2d: ...`) or, for a named node, `node "fc1" (conv2d): ...`.
RML_SPLIT_API Result<CompiledOp> compile_op(const NodeDef& node, std::span<const TensorType> inputs);

}  // namespace rml

#if RML_SPLIT_DEFINED
#include "rml/check/detail/compile_impl.hpp"
#endif
