// Random graphs for the edit tests: small DAGs for brute force, large layered graphs.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "rml/ir/graph.hpp"

namespace rml_test {

/// A DAG of `ops` operators over 1-3 graph inputs and 0-2 constants: each operator reads 1-3
/// earlier values (fan-out arises), some produce two outputs, and 1-3 values are graph outputs.
/// Types are f32 vectors of 1-8 elements; ops are named after real ones but not type-correct
/// (cuts do not type-check).
inline rml::GraphDef random_dag(std::mt19937& rng, std::size_t ops) {
  using rml::ValueId;
  rml::GraphDef def;
  const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const auto add_value = [&](std::string name) {
    def.values.push_back({std::move(name), {rml::DType::f32, {static_cast<std::int64_t>(1 + pick(8))}}});
    return static_cast<ValueId>(def.values.size() - 1);
  };
  const std::size_t inputs = 1 + pick(3), constants = pick(3);
  for (std::size_t i = 0; i < inputs; ++i) def.inputs.push_back(add_value("in" + std::to_string(i)));
  for (std::size_t i = 0; i < constants; ++i) {
    rml::ConstantDef c;
    c.value = add_value("w" + std::to_string(i));
    c.data = rml::Tensor::zeros(def.values[c.value].type);
    c.inline_data = true;
    def.constants.push_back(c);
  }
  std::vector<ValueId> available;
  for (ValueId v = 0; v < def.values.size(); ++v) available.push_back(v);
  for (std::size_t n = 0; n < ops; ++n) {
    rml::NodeDef node;
    node.op = n % 3 == 0 ? "add" : (n % 3 == 1 ? "relu" : "concat");
    const std::size_t reads = 1 + pick(3);
    // Prefer recent values so that chains form, but reach back sometimes.
    for (std::size_t r = 0; r < reads; ++r) {
      const std::size_t back = pick(2) ? pick(std::min<std::size_t>(3, available.size())) : pick(available.size());
      node.inputs.push_back(available[available.size() - 1 - back]);
    }
    const std::size_t outs = pick(5) == 0 ? 2 : 1;
    for (std::size_t o = 0; o < outs; ++o) {
      node.outputs.push_back(add_value(""));
      available.push_back(node.outputs.back());
    }
    def.nodes.push_back(std::move(node));
  }
  const std::size_t outputs = 1 + pick(3);
  for (std::size_t o = 0; o < outputs; ++o) {
    const ValueId v = def.nodes[def.nodes.size() - 1 - pick(std::min<std::size_t>(def.nodes.size(), 3))].outputs[0];
    bool seen = false;
    for (ValueId w : def.outputs) seen = seen || w == v;
    if (!seen) def.outputs.push_back(v);
  }
  return def;
}

/// A chain of `layers` steps, each `width` parallel relus of f32 [16] values whose sums feed the
/// next step; at step `bottleneck_at` everything is summed into one f32 [1] value named
/// `bottleneck`, then expanded back out.
inline rml::GraphDef layered_graph(std::size_t ops, std::size_t width, std::size_t bottleneck_at) {
  using rml::ValueId;
  rml::GraphDef def;
  const auto add_value = [&](std::string name, std::int64_t n) {
    def.values.push_back({std::move(name), {rml::DType::f32, {n}}});
    return static_cast<ValueId>(def.values.size() - 1);
  };
  def.inputs.push_back(add_value("x", 16));
  ValueId current = def.inputs[0];
  bool bottleneck_done = false;
  while (def.nodes.size() + width + 2 <= ops) {
    if (!bottleneck_done && def.nodes.size() >= bottleneck_at) {
      const ValueId b = add_value("bottleneck", 1);
      def.nodes.push_back({"sum", {current}, {b}, "", {}, std::nullopt, {}});
      current = add_value("", 16);
      def.nodes.push_back({"expand", {b}, {current}, "", {{"shape", std::vector<std::int64_t>{16}}}, std::nullopt, {}});
      bottleneck_done = true;
      continue;
    }
    std::vector<ValueId> branch;
    for (std::size_t w = 0; w < width; ++w) {
      branch.push_back(add_value("", 16));
      def.nodes.push_back({"relu", {current}, {branch.back()}, "", {}, std::nullopt, {}});
    }
    const ValueId joined = add_value("", 16);
    def.nodes.push_back({"concat", branch, {joined}, "", {}, std::nullopt, {}});
    current = joined;
  }
  def.outputs.push_back(current);
  return def;
}

}  // namespace rml_test
