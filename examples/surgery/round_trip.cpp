// split then merge: the parts join back into a graph that computes what the source computed.
#include "surgery.hpp"

using namespace surgery;

int main() {
  Graph pooled = trace_graph(pool, "x", "y");
  rml::SplitGraph split = rml::split(pooled, pooled.min_value_cut().value()).value();
  // The parts merge back into the source's inputs and outputs, by name, with its operators named <part>/<name>.
  rml::MergedGraph merged = rml::merge(split.parts, split.connections).value();
  std::printf("%s | %s\n", labels(merged.graph).c_str(), io(merged.graph).c_str());
  // x before/Relu before/Sum after/Neg | x -> y

  if (const rml::Status status = merged.graph.finalize(); !status.ok()) return print_refusal(status), 1;
  Graph traced = trace_graph(pool, "x", "y");  // the same model traced again, for comparison
  if (const rml::Status status = traced.finalize(); !status.ok()) return print_refusal(status), 1;
  std::printf("%s | %s\n", values(merged.graph.run({input()}).value().front()).c_str(),
              values(traced.run({input()}).value().front()).c_str());  // -4 -5 | -4 -5
  return 0;
}
