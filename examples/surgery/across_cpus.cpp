// Connects graphs on two CPU devices, cpu(0) and cpu(1): distinct devices with their own
// workspaces and thread pools, so the moves and refusals across devices run for real here.
#include "surgery.hpp"

using namespace surgery;

int main() {
  const rml::Device second_cpu = rml::Device::cpu(1);
  // The encoder computes on cpu:0, and the head serves on cpu:1.
  const auto two_parts = [&second_cpu] {
    std::vector<rml::GraphPart> parts;
    parts.push_back({"encoder", trace_graph(rectify, "x", "h")});
    parts.push_back({"head", trace_graph(twice, "h", "y")});
    if (!parts[1].graph.to(second_cpu).ok()) std::printf("to() refused\n");
    return parts;
  };
  const std::vector<rml::Connection> connections = {{{"encoder", "h"}, {"head", "h"}}};

  // CrossDevice::move, the default: the merged graph copies h onto the head's device.
  std::vector<rml::GraphPart> parts = two_parts();
  rml::MergedGraph merged = rml::merge(parts, connections).value();
  std::printf("%s | %s\n", labels(merged.graph).c_str(), io(merged.graph).c_str());
  // x encoder/Relu head/Copy head/Add | x -> y
  for (const Node& node : merged.graph.nodes()) {
    if (node.kind() == NodeKind::op)
      std::printf("%s on %s\n", node.name().c_str(), node.def()->device.to_string().c_str());
  }
  // encoder/Relu_1 on cpu:0
  // head/Copy_h on cpu:1
  // head/Add_1 on cpu:1
  if (const rml::Status status = merged.graph.finalize(); !status.ok()) return print_refusal(status), 1;
  std::printf("%s\n", values(merged.graph.run({input()}).value().front()).c_str());  // 2 0 6 0 10 0

  // CrossDevice::refuse: a connection between two devices refuses the merge, naming both.
  rml::MergeOptions refuse;
  refuse.cross_device = rml::CrossDevice::refuse;
  parts = two_parts();
  print_refusal(rml::merge(parts, connections, refuse).error());
  // INVALID_ARGUMENT | merge: connection encoder.h -> head.h joins cpu:0 to cpu:1, which CrossDevice::Refuse
  // refuses; merge with CrossDevice::Move to copy the value across
  std::printf("%s | %s\n", io(parts[0].graph).c_str(), io(parts[1].graph).c_str());  // x -> h | h -> y
  return 0;
}
