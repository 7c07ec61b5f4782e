// Traces the three models and runs each once. A finalized graph runs, and merge and split refuse
// it, so the other programs merge and split their graphs before finalize().
#include "surgery.hpp"

using namespace surgery;

int main() {
  Graph encoder = trace_graph(rectify, "x", "h");
  Graph head = trace_graph(twice, "h", "y");
  Graph pooled = trace_graph(pool, "x", "y");
  for (Graph* graph : {&encoder, &head, &pooled}) {
    std::printf("%s | %s\n", labels(*graph).c_str(), io(*graph).c_str());
    if (const rml::Status status = graph->finalize(); !status.ok()) return print_refusal(status), 1;
    std::printf("%s\n", values(graph->run({input()}).value().front()).c_str());
  }
  // x Relu | x -> h
  // 1 0 3 0 5 0
  // h Add | h -> y
  // 2 -4 6 -8 10 -12
  // x Relu Sum Neg | x -> y
  // -4 -5
  return 0;
}
