// Registers the executor with rml/edit: eager ops, constant folding, Graph::finalize and Graph::run.
#pragma once

#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "rml/edit/hooks.hpp"
#include "rml/exec/eager.hpp"
#include "rml/exec/executor.hpp"

namespace rml::detail {

inline constexpr ExecHooks executor_hooks{
    [](const NodeDef& node, std::span<const Tensor> inputs) { return run_node(node, inputs); },
    [](const GraphDef& graph, int threads) -> Result<std::shared_ptr<const void>> {
      ExecutorOptions options;
      options.threads = threads;
      RML_ASSIGN_OR_RETURN(Executor executor, Executor::create(graph, options));
      return std::shared_ptr<const void>(std::make_shared<const Executor>(std::move(executor)));
    },
    [](const void* program, std::span<const Tensor> inputs) {
      return static_cast<const Executor*>(program)->run(inputs);
    },
};

/// Initialised before main() in every program that includes this header.
inline const bool edit_hooks_registered = (exec_hooks.store(&executor_hooks, std::memory_order_release), true);

}  // namespace rml::detail
