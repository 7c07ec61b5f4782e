// Splits a graph by a function that names each operator's part.
#include "surgery.hpp"

using namespace surgery;

int main() {
  Graph pooled = trace_graph(pool, "x", "y");
  // Each operator's part, by its op code. split asks once per operator, in nodes() order.
  const auto by_code = [](const Node& node) -> std::string {
    if (node.op_code() == rml::OpCode::Relu) return "rectify";
    if (node.op_code() == rml::OpCode::Sum) return "pool";
    return "negate";
  };
  rml::SplitGraph split = rml::split(pooled, by_code).value();
  for (const rml::GraphPart& part : split.parts) {  // in an order every connection runs forward in
    std::printf("%s: %s | %s\n", part.name.c_str(), labels(part.graph).c_str(), io(part.graph).c_str());
  }
  // rectify: x Relu | x -> Relu_1_0
  // pool: Relu_1_0 Sum | Relu_1_0 -> Sum_2_0
  // negate: Sum_2_0 Neg | Sum_2_0 -> y
  for (const rml::Connection& connection : split.connections) std::printf("%s\n", connection.to_string().c_str());
  // rectify.Relu_1_0 -> pool.Relu_1_0
  // pool.Sum_2_0 -> negate.Sum_2_0
  return 0;
}
