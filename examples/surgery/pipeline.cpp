// Feeds the encoder's output into the head's input: the merged graph computes what running the
// two one after the other computes.
#include "surgery.hpp"

using namespace surgery;

int main() {
  std::vector<rml::GraphPart> parts;
  parts.push_back({"encoder", trace_graph(rectify, "x", "h")});
  parts.push_back({"head", trace_graph(twice, "h", "y")});
  // The encoder's output h feeds the head's input h, and neither is the merged graph's any longer.
  const std::vector<rml::Connection> connections = {{{"encoder", "h"}, {"head", "h"}}};
  rml::MergedGraph merged = rml::merge(parts, connections).value();
  std::printf("%s | %s\n", labels(merged.graph).c_str(), io(merged.graph).c_str());
  // x encoder/Relu head/Add | x -> y

  if (const rml::Status status = merged.graph.optimize(); !status.ok()) return print_refusal(status), 1;
  if (const rml::Status status = merged.graph.finalize(); !status.ok()) return print_refusal(status), 1;
  // The same input through the two graphs one after the other, for comparison.
  Graph encoder = trace_graph(rectify, "x", "h");
  Graph head = trace_graph(twice, "h", "y");
  if (!encoder.finalize().ok() || !head.finalize().ok()) return 1;
  std::printf("%s | %s\n", values(merged.graph.run({input()}).value().front()).c_str(),
              values(head.run(encoder.run({input()}).value()).value().front()).c_str());
  // 2 0 6 0 10 0 | 2 0 6 0 10 0
  return 0;
}
