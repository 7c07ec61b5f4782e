// What the calls consume, and what a refusal leaves.
#include <stdexcept>

#include "surgery.hpp"

using namespace surgery;

int main() {
  std::vector<rml::GraphPart> parts;
  parts.push_back({"encoder", trace_graph(rectify, "x", "h")});
  parts.push_back({"head", trace_graph(twice, "h", "y")});
  const std::vector<rml::Connection> connections = {{{"encoder", "h"}, {"head", "h"}}};
  const Node relu = parts[0].graph.find_nodes(rml::OpCode::Relu).front();  // a view taken before

  // A merge consumes every part's graph, and a view into one refuses from then on.
  const rml::MergedGraph merged = rml::merge(parts, connections).value();
  std::printf("%s | %zu %zu\n", io(merged.graph).c_str(), parts[0].graph.input_names().size(),
              parts[1].graph.input_names().size());  // x -> y | 0 0
  print_refusal(relu.check());
  // INVALID_ARGUMENT | the node 'Relu_1' is no longer in its graph: that graph no longer exists (a merge,
  // a split or an extract consumed it, or it was destroyed or assigned over)

  // A refused merge leaves every part as it was.
  std::vector<rml::GraphPart> again;
  again.push_back({"encoder", trace_graph(rectify, "x", "h")});
  again.push_back({"head", trace_graph(twice, "h", "y")});
  const std::vector<rml::Connection> wrong = {{{"encoder", "h"}, {"head", "z"}}};
  print_refusal(rml::merge(again, wrong).error());
  // INVALID_ARGUMENT | merge: part 'head' has no input 'z'
  if (const rml::Status status = again[0].graph.finalize(); !status.ok()) return print_refusal(status), 1;
  print_refusal(rml::merge(again, connections).error());
  // FAILED_PRECONDITION | merge: part 'encoder' is finalized; merge before finalize()
  std::printf("%s | %s\n", io(again[0].graph).c_str(), io(again[1].graph).c_str());  // x -> h | h -> y

  // A partition function that throws: split refuses with its failure, and the graph stays as it was.
  Graph pooled = trace_graph(pool, "x", "y");
  const auto refuse_neg = [](const Node& node) -> std::string {
    if (node.op_code() == rml::OpCode::Neg) throw rml::Error(rml::Code::invalid_argument, "no part for Neg");
    return "first";
  };
  print_refusal(rml::split(pooled, refuse_neg).error());
  // INVALID_ARGUMENT | split: the partition function failed on the node 'Neg_3': no part for Neg
  std::printf("%s\n", io(pooled).c_str());  // x -> y

  // Any other exception comes back as INTERNAL.
  const auto throws_other = [](const Node&) -> std::string { throw std::runtime_error("out of ideas"); };
  print_refusal(rml::split(pooled, throws_other).error());
  // INTERNAL | split: the partition function failed on the node 'Relu_1': out of ideas
  return 0;
}
