// The hooks through which edit computes (eager ops, constant folding, finalize, run) without
// including the executor: rml/exec/edit_hooks.hpp registers them, rml/rml.hpp includes that.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"
#include "rml/ir/graph.hpp"

namespace rml::detail {

/// What the executor side provides.
struct ExecHooks {
  /// Runs one node on concrete tensors (rml::run_node).
  Result<std::vector<Tensor>> (*eager)(const NodeDef& node, std::span<const Tensor> inputs);
  /// Checks and compiles a graph into an opaque program that `run` takes (rml::Executor::create);
  /// `threads` as ExecutorOptions::threads.
  Result<std::shared_ptr<const void>> (*compile)(const GraphDef& graph, int threads);
  /// Runs a compiled program.
  Result<std::vector<Tensor>> (*run)(const void* program, std::span<const Tensor> inputs);
};

/// Set once the executor's hooks are registered; null before.
inline std::atomic<const ExecHooks*> exec_hooks{nullptr};

/// The registered hooks, or FAILED_PRECONDITION saying which header registers them.
inline Result<const ExecHooks*> require_exec_hooks(std::string_view call) {
  const ExecHooks* hooks = exec_hooks.load(std::memory_order_acquire);
  if (!hooks)
    return failed_precondition(std::string(call) +
                               ": include <rml/rml.hpp> or <rml/exec/edit_hooks.hpp> to run graphs");
  return hooks;
}

}  // namespace rml::detail
