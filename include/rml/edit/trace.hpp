// trace: build a graph by running C++ code on symbolic tensors; the engine behind rml::ops.
//
// A symbolic tensor names a value of the graph being traced. An op given one records a node
// (checked by compile_op, so a type error surfaces at the line that wrote it); an op given only
// concrete tensors computes at once through the executor hook. A concrete tensor mixed into a
// traced op becomes a constant of the graph.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "rml/check/compile.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"
#include "rml/edit/hooks.hpp"
#include "rml/ir/graph.hpp"
#include "rml/ir/ops.hpp"

namespace rml {

namespace detail {

/// The graph a trace is building.
struct TraceState {
  GraphDef def;
  bool open = true;
};

/// A value of a graph being traced: what a symbolic Tensor carries.
struct SymbolicValue {
  std::shared_ptr<TraceState> trace;
  ValueId id = 0;
};

}  // namespace detail

/// One input of a trace: its name, dtype and shape.
struct TensorSpec {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
};

/// What trace calls: inputs in, outputs out.
using TraceFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

namespace detail {

/// Records or runs `op` on `inputs`; throws Error on a type error, a closed trace, mixed traces,
/// or (eager) a run failure.
inline std::vector<Tensor> apply_op(std::string_view op, std::span<const Tensor> inputs, Attrs attrs = {}) {
  NodeDef node;
  node.op = std::string(op);
  node.attrs = std::move(attrs);
  std::shared_ptr<TraceState> trace;
  for (const Tensor& t : inputs) {
    if (!t.is_symbolic()) continue;
    const auto& s = t.symbolic_value()->trace;
    if (trace && trace != s)
      throw Error(Code::invalid_argument, std::string(op) + ": the inputs come from two different traces");
    trace = s;
  }
  if (!trace) {
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (!inputs[i].defined())
        throw Error(Code::invalid_argument, std::string(op) + ": input " + std::to_string(i) + " holds no data");
    const ExecHooks* hooks = require_exec_hooks(std::string("ops::") + std::string(op)).value();
    return hooks->eager(node, inputs).value();
  }
  if (!trace->open)
    throw Error(Code::failed_precondition, std::string(op) + ": the trace this tensor belongs to has ended");
  GraphDef& def = trace->def;
  std::vector<TensorType> types;
  types.reserve(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    types.push_back(t.type());
    if (t.is_symbolic()) {
      node.inputs.push_back(t.symbolic_value()->id);
      continue;
    }
    if (!t.defined())
      throw Error(Code::invalid_argument, std::string(op) + ": input " + std::to_string(i) + " holds no data");
    const auto id = static_cast<ValueId>(def.values.size());
    def.values.push_back({"", t.type()});
    ConstantDef c;
    c.value = id;
    c.data = t;
    c.inline_data = t.numel() <= 16;
    if (!c.inline_data) c.tensor = "const." + std::to_string(id);  // inline data has no stored name
    def.constants.push_back(std::move(c));
    node.inputs.push_back(id);
  }
  const std::optional<OpCode> code = find_op(op);
  node.outputs.assign(code ? op_info(*code).outputs : 1, 0);
  CompiledOp compiled = compile_op(node, types).value();
  std::vector<Tensor> outputs;
  for (std::size_t o = 0; o < compiled.outputs.size(); ++o) {
    const auto id = static_cast<ValueId>(def.values.size());
    def.values.push_back({"", compiled.outputs[o]});
    node.outputs[o] = id;
    outputs.push_back(Tensor::symbolic(compiled.outputs[o], std::make_shared<SymbolicValue>(SymbolicValue{trace, id})));
  }
  def.nodes.push_back(std::move(node));
  return outputs;
}

inline Tensor apply_op1(std::string_view op, std::span<const Tensor> inputs, Attrs attrs = {}) {
  return std::move(apply_op(op, inputs, std::move(attrs)).front());
}

}  // namespace detail

/// Calls `fn` on symbolic tensors built from `signature` and records every op it applies, as
/// written (nothing optimized). Outputs are named `output_names` (default `output_<i>`).
///
/// Errors: INVALID_ARGUMENT for a bad signature (empty or repeated name, bad shape), outputs that
/// do not match `output_names` or come from another trace; the status of an `Error` that `fn`
/// throws (an op's type error); INTERNAL for any other exception.
inline Result<Graph> trace(const TraceFunction& fn, const std::vector<TensorSpec>& signature,
                           std::string name = "traced", const std::vector<std::string>& output_names = {}) {
  auto state = std::make_shared<detail::TraceState>();
  GraphDef& def = state->def;
  def.name = std::move(name);
  def.producer = "rml::trace";
  std::unordered_set<std::string> seen;
  std::vector<Tensor> inputs;
  for (std::size_t i = 0; i < signature.size(); ++i) {
    const TensorSpec& spec = signature[i];
    if (spec.name.empty() || !seen.insert(spec.name).second)
      return invalid_argument("trace: input " + std::to_string(i) + " needs a name of its own, got '" + spec.name +
                              "'");
    TensorType type{spec.dtype, spec.shape};
    if (!type.checked_nbytes() || spec.dtype >= DType::count_)
      return invalid_argument("trace: input '" + spec.name + "' has the invalid type " + type.to_string());
    const auto id = static_cast<ValueId>(def.values.size());
    def.values.push_back({spec.name, type});
    def.inputs.push_back(id);
    inputs.push_back(Tensor::symbolic(type, std::make_shared<detail::SymbolicValue>(detail::SymbolicValue{state, id})));
  }
  std::vector<Tensor> outputs;
  try {
    outputs = fn(inputs);
  } catch (const Error& e) {
    state->open = false;
    return e.status().with_prefix("trace: ");
  } catch (const std::exception& e) {
    state->open = false;
    return internal_error(std::string("trace: the function threw: ") + e.what());
  }
  state->open = false;
  if (!output_names.empty() && output_names.size() != outputs.size())
    return invalid_argument("trace: the function returned " + std::to_string(outputs.size()) + " outputs for " +
                            std::to_string(output_names.size()) + " output names");
  std::unordered_set<std::string> out_seen;
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    const Tensor& t = outputs[o];
    std::string out_name = output_names.empty() ? "output_" + std::to_string(o) : output_names[o];
    if (out_name.empty() || !out_seen.insert(out_name).second || (seen.count(out_name) && !output_names.empty()))
      return invalid_argument("trace: output " + std::to_string(o) + " needs a name of its own, got '" + out_name +
                              "'");
    if (!t.is_symbolic() || t.symbolic_value()->trace != state)
      return invalid_argument("trace: output " + std::to_string(o) + " ('" + out_name +
                              "') is not a value of this trace; return what the ops computed from the inputs");
    ValueId v = t.symbolic_value()->id;
    // An input, or a value already returned under another name, is returned through a copy.
    if (!def.values[v].name.empty()) {
      NodeDef copy;
      copy.op = "copy";
      copy.inputs = {v};
      v = static_cast<ValueId>(def.values.size());
      def.values.push_back({"", def.values[copy.inputs[0]].type});
      copy.outputs = {v};
      def.nodes.push_back(std::move(copy));
    }
    def.values[v].name = std::move(out_name);
    def.outputs.push_back(v);
  }
  return Graph(std::move(def));
}

}  // namespace rml
