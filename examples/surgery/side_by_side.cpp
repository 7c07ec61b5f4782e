// Merges two graphs side by side under each of the three IoNames modes.
#include "surgery.hpp"

using namespace surgery;

int main() {
  // An encoder and a head that both read an input named x.
  const auto two_parts = [] {
    std::vector<rml::GraphPart> parts;
    parts.push_back({"encoder", trace_graph(rectify, "x", "h")});
    parts.push_back({"head", trace_graph(twice, "x", "y")});
    return parts;
  };

  // IoNames::prefix_on_collision, the default: a name both parts use takes its part's name as a prefix.
  std::vector<rml::GraphPart> parts = two_parts();
  const rml::MergedGraph merged = rml::merge(parts).value();
  std::printf("%s | %s\n", labels(merged.graph).c_str(), io(merged.graph).c_str());
  // encoder/x head/x encoder/Relu head/Add | encoder/x head/x -> h y
  for (const rml::Rename& rename : merged.renames) {  // every name the merge changed
    std::printf("%s %s %s -> %s\n", rename.part.c_str(), kind_name(rename.kind), rename.from.c_str(),
                rename.to.c_str());
  }
  // encoder input x -> encoder/x
  // head input x -> head/x
  // encoder node Relu_1 -> encoder/Relu_1
  // head node Add_1 -> head/Add_1

  // IoNames::prefix_always: every input and output name takes the prefix.
  rml::MergeOptions always;
  always.io_names = rml::IoNames::prefix_always;
  parts = two_parts();
  std::printf("%s\n", io(rml::merge(parts, {}, always).value().graph).c_str());
  // encoder/x head/x -> encoder/h head/y

  // IoNames::keep keeps every name, so it refuses a name both parts use.
  rml::MergeOptions keep;
  keep.io_names = rml::IoNames::keep;
  parts = two_parts();
  if (const auto refused = rml::merge(parts, {}, keep); !refused.ok()) print_refusal(refused.error());
  // INVALID_ARGUMENT | merge: parts 'encoder' and 'head' both have an input named 'x', which IoNames::Keep
  // keeps; merge with IoNames::PrefixOnCollision or PrefixAlways
  std::printf("%s | %s\n", io(parts[0].graph).c_str(), io(parts[1].graph).c_str());
  // x -> h | x -> y: a refused merge leaves every part as it was
  return 0;
}
