// Extracts the operators between two values as a graph of their own.
#include "surgery.hpp"

using namespace surgery;

int main() {
  Graph pooled = trace_graph(pool, "x", "y");
  // The operators between x and the sums: the relu and the sum, not the neg after them.
  const Node sum = pooled.find_nodes(rml::OpCode::Sum).front();
  const std::vector<rml::Value> inputs = {pooled.node("x")->output(0).value()};
  const std::vector<rml::Value> outputs = {sum.output(0).value()};
  Graph pooling = rml::extract(pooled, inputs, outputs).value();
  std::printf("%s | %s\n", labels(pooling).c_str(), io(pooling).c_str());
  // x Relu Sum | x -> Sum_2_0: a graph input keeps its name, and an output with none is named after its value
  std::printf("%zu\n", pooled.input_names().size());  // 0: the extract consumed the graph

  if (const rml::Status status = pooling.finalize(); !status.ok()) return print_refusal(status), 1;
  std::printf("%s\n", values(pooling.run({input()}).value().front()).c_str());  // 4 5: each row's sum of relu(x)
  return 0;
}
