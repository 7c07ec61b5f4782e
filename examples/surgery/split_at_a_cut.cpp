// Splits a graph at its cheapest cut through values.
#include "surgery.hpp"

using namespace surgery;

int main() {
  Graph pooled = trace_graph(pool, "x", "y");
  // The cheapest cut: the values the nodes before it hand to the nodes after it, and their bytes.
  const rml::ValueCut cut = pooled.min_value_cut().value();
  std::vector<std::string> crossing;
  for (const rml::Value& value : cut.values) crossing.push_back(label(value.producer().value()));
  std::printf("%s %llu\n", join(crossing).c_str(), static_cast<unsigned long long>(cut.bytes));
  // Sum 8: the [2, 1] f32 sums cross, the cheapest value to hand on

  rml::SplitGraph split = rml::split(pooled, cut).value();
  for (const rml::GraphPart& part : split.parts) {
    std::printf("%s: %s | %s\n", part.name.c_str(), labels(part.graph).c_str(), io(part.graph).c_str());
  }
  // before: x Relu Sum | x -> Sum_2_0
  // after: Sum_2_0 Neg | Sum_2_0 -> y
  for (const rml::Connection& connection : split.connections) std::printf("%s\n", connection.to_string().c_str());
  // before.Sum_2_0 -> after.Sum_2_0: a value with no name of its own is named <node>_<port>
  std::printf("%zu\n", pooled.input_names().size());  // 0: the split consumed the graph
  return 0;
}
