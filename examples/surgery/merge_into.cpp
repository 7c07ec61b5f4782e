// Graph::merge grows a graph in place: it keeps every name, and a name of the second graph that it
// already uses takes the first free <name>_<n>.
#include "surgery.hpp"

using namespace surgery;

int main() {
  Graph first = trace_graph(rectify, "x", "h");
  Graph second = trace_graph(rectify, "x", "h");
  // first's output h feeds second's input x.
  const std::vector<rml::Rename> renames = first.merge(second, {{"h", "x"}}).value();
  std::printf("%s | %s\n", labels(first).c_str(), io(first).c_str());  // x Relu Relu | x -> h
  for (const rml::Rename& rename : renames) {
    std::printf("%s %s %s -> %s\n", rename.part.c_str(), kind_name(rename.kind), rename.from.c_str(),
                rename.to.c_str());
  }
  // second node Relu_1 -> Relu_1_1
  std::printf("%zu %zu\n", second.input_names().size(), second.output_names().size());  // 0 0: second is consumed

  if (const rml::Status status = first.finalize(); !status.ok()) return print_refusal(status), 1;
  std::printf("%s\n", values(first.run({input()}).value().front()).c_str());  // 1 0 3 0 5 0: relu(relu(x))
  return 0;
}
