// Connects a part on the CPU to a part on the accelerator Device::gpu() finds. This build has no
// accelerator, so the program says so and exits with status 3; across_cpus.cpp runs the same
// moves between two CPU devices.
#include "surgery.hpp"

using namespace surgery;

int main() {
  const rml::Device accelerator = rml::Device::gpu();  // the CPU on a host with no accelerator
  if (accelerator.is_cpu()) {
    std::printf("BLOCKED: this section needs an accelerator\n");
    return 3;
  }
  // The encoder computes on the CPU, and the head serves on the accelerator.
  const auto two_parts = [&accelerator] {
    std::vector<rml::GraphPart> parts;
    parts.push_back({"encoder", trace_graph(rectify, "x", "h")});
    parts.push_back({"head", trace_graph(twice, "h", "y")});
    (void)parts[1].graph.to(accelerator);
    return parts;
  };
  const std::vector<rml::Connection> connections = {{{"encoder", "h"}, {"head", "h"}}};

  // CrossDevice::move, the default: the merged graph moves h onto the head's device.
  std::vector<rml::GraphPart> parts = two_parts();
  rml::MergedGraph merged = rml::merge(parts, connections).value();
  if (const rml::Status status = merged.graph.finalize(); !status.ok()) return print_refusal(status), 1;
  std::printf("%s\n", values(merged.graph.run({input()}).value().front()).c_str());  // 2 0 6 0 10 0

  // CrossDevice::refuse: a connection between two devices refuses the merge.
  rml::MergeOptions refuse;
  refuse.cross_device = rml::CrossDevice::refuse;
  parts = two_parts();
  std::printf("%s\n", std::string(rml::merge(parts, connections, refuse).error().code_name()).c_str());
  std::printf("%s | %s\n", io(parts[0].graph).c_str(), io(parts[1].graph).c_str());  // x -> h | h -> y
  return 0;
}
