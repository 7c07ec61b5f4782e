// Graph::finalize and Graph::run: compile through the executor hooks, one executor per device.
//
// A graph whose nodes all sit on one device compiles to one executor. A graph placed on several
// devices (a merge across cpu(0) and cpu(1)) is cut into stages, each a maximal run of
// consecutive nodes on one device, and every stage gets its own executor and arena (workspace).
// Threads come from one pool per device (ThreadPool::shared), so stages alternating between cpu:0
// and cpu:1 use two pools, not one per stage. run() passes values between stages by name; the
// `copy` nodes a merge inserted are where a value changes device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rml/core/status.hpp"
#include "rml/edit/hooks.hpp"
#include "rml/edit/split.hpp"
#include "rml/ir/graph.hpp"

namespace rml {

namespace detail {

/// What finalize() stores in the graph's body.
struct CompiledGraph {
  struct Stage {
    Device device;
    std::shared_ptr<const void> program;
    std::vector<std::string> inputs, outputs;  // by name, for stages of a multi-device graph
  };
  std::vector<Stage> stages;
  std::vector<std::string> inputs, outputs;
};

inline Status finalize_graph(Graph& graph) {
  if (graph.consumed())
    return invalid_argument("finalize: the graph is empty: a merge, a split or an extract consumed it");
  if (graph.finalized()) return {};
  RML_ASSIGN_OR_RETURN(const ExecHooks* hooks, require_exec_hooks("finalize"));
  const GraphDef& def = graph.def();
  auto compiled = std::make_shared<CompiledGraph>();
  bool one_device = true;
  for (const NodeDef& n : def.nodes) one_device = one_device && n.device == def.nodes.front().device;
  if (one_device) {
    auto program = hooks->compile(def, 0);
    if (!program.ok()) return program.error().with_prefix("finalize: ");
    compiled->stages.push_back(
        {def.nodes.empty() ? graph.device() : def.nodes.front().device, std::move(*program), {}, {}});
  } else {
    // Stages: maximal runs of consecutive nodes on one device, always in forward order.
    RML_RETURN_IF_ERROR(check_structure(def, "finalize"));
    std::vector<std::uint32_t> part_of(def.nodes.size());
    std::vector<std::string> names;
    std::vector<Device> devices;
    for (std::size_t i = 0; i < def.nodes.size(); ++i) {
      if (i == 0 || def.nodes[i].device != def.nodes[i - 1].device) {
        names.push_back("stage" + std::to_string(names.size()));
        devices.push_back(def.nodes[i].device);
      }
      part_of[i] = static_cast<std::uint32_t>(names.size() - 1);
    }
    Graph copy = graph;  // shares the weights
    RML_ASSIGN_OR_RETURN(SplitGraph split, split_by_parts(copy, part_of, names));
    for (std::size_t s = 0; s < split.parts.size(); ++s) {
      const Graph& part = split.parts[s].graph;
      auto program = hooks->compile(part.def(), 0);
      if (!program.ok())
        return program.error().with_prefix("finalize: the stage on " + part.device().to_string() + ": ");
      compiled->stages.push_back({part.device(), std::move(*program), part.input_names(), part.output_names()});
    }
    compiled->inputs = graph.input_names();
    compiled->outputs = graph.output_names();
  }
  graph.body_ptr()->compiled = std::move(compiled);
  graph.body_ptr()->finalized = true;
  return {};
}

inline Result<std::vector<Tensor>> run_graph(const Graph& graph, const std::vector<Tensor>& inputs) {
  if (!graph.finalized()) return failed_precondition("run: the graph is not finalized; call finalize() first");
  RML_ASSIGN_OR_RETURN(const ExecHooks* hooks, require_exec_hooks("run"));
  const auto* compiled = static_cast<const CompiledGraph*>(graph.body_ptr()->compiled.get());
  if (compiled->stages.size() == 1) return hooks->run(compiled->stages.front().program.get(), inputs);
  if (inputs.size() != compiled->inputs.size())
    return invalid_argument("run: the graph takes " + std::to_string(compiled->inputs.size()) + " inputs, got " +
                            std::to_string(inputs.size()));
  std::unordered_map<std::string, Tensor> values;
  for (std::size_t i = 0; i < inputs.size(); ++i) values[compiled->inputs[i]] = inputs[i];
  for (const CompiledGraph::Stage& stage : compiled->stages) {
    std::vector<Tensor> in;
    in.reserve(stage.inputs.size());
    for (const std::string& name : stage.inputs) {
      const auto it = values.find(name);
      if (it == values.end()) return internal_error("run: no stage computed the value '" + name + "'");
      in.push_back(it->second);
    }
    RML_ASSIGN_OR_RETURN(auto out, hooks->run(stage.program.get(), in));
    for (std::size_t o = 0; o < out.size(); ++o) values[stage.outputs[o]] = std::move(out[o]);
  }
  std::vector<Tensor> outputs;
  for (const std::string& name : compiled->outputs) {
    const auto it = values.find(name);
    if (it == values.end()) return internal_error("run: no stage computed the output '" + name + "'");
    outputs.push_back(it->second);
  }
  return outputs;
}

}  // namespace detail

}  // namespace rml
