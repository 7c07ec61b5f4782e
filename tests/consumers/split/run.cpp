// A translation unit that only declares rml's kernels: loads a model, runs it on its reference
// input and compares the result with the reference (NumPy's output, stored with the model).
#include <cmath>
#include <cstdio>
#include <string>

#include <rml/rml.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL_STEM\n", argv[0]);
    return 1;
  }
  const std::string stem = argv[1];
  auto graph = rml::load_graph(stem);
  if (!graph.ok()) {
    std::fprintf(stderr, "%s\n", graph.error().to_string().c_str());
    return 2;
  }
  const rml::GraphDef& def = graph->def();
  std::printf("rml consumer: %zu values, %zu constants, %zu nodes\n", def.values.size(), def.constants.size(),
              def.nodes.size());
  auto executor = rml::Executor::create(*graph, {.threads = 2});
  auto reference = rml::SafetensorsReader::open(stem + ".expected.safetensors");
  if (!executor.ok() || !reference.ok()) {
    std::fprintf(stderr, "%s%s\n", executor.status().to_string().c_str(), reference.status().to_string().c_str());
    return 2;
  }
  const rml::Tensor x = reference->get("x").value();
  auto y = executor->run({&x, 1});
  if (!y.ok()) {
    std::fprintf(stderr, "%s\n", y.error().to_string().c_str());
    return 2;
  }
  const auto got = y->front().span<float>();
  const auto want = reference->get("y").value().span<float>();
  bool close = got.size() == want.size();
  for (std::size_t i = 0; close && i < got.size(); ++i) close = std::fabs(got[i] - want[i]) <= 1e-5f;
  std::printf("rml consumer: the model's output %s the reference within 1e-5\n", close ? "matches" : "does not match");
  return close ? 0 : 3;
}
