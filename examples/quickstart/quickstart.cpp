// Quickstart: load the bundled MLP, check it, run it on its reference input, compare with NumPy.
#include <cmath>
#include <cstdio>
#include <string>

#include <rml/rml.hpp>

int main(int argc, char** argv) {
  const std::string stem = argc > 1 ? argv[1] : RML_SOURCE_DIR "/tests/data/torch_mlp";
  auto graph = rml::load_graph(stem);  // parsed, validated, weights memory-mapped
  if (!graph.ok()) {
    std::fprintf(stderr, "%s\n", graph.status().to_string().c_str());
    return 2;
  }
  auto executor = rml::Executor::create(*graph, {.threads = 1});  // type-checked, planned
  auto reference = rml::SafetensorsReader::open(stem + ".expected.safetensors");
  if (!executor.ok() || !reference.ok()) {
    std::fprintf(stderr, "%s%s\n", executor.status().to_string().c_str(), reference.status().to_string().c_str());
    return 2;
  }
  const rml::Tensor x = reference->get("x").value();
  const rml::Tensor y = executor->run({&x, 1}).value().front();

  std::printf("%zu values, %zu constants, %zu nodes\n", graph->def().values.size(), graph->def().constants.size(),
              graph->def().nodes.size());
  std::printf("%s -> %s\n", x.type().to_string().c_str(), y.type().to_string().c_str());
  const auto expected = reference->get("y").value().span<float>();
  double worst = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) worst = std::fmax(worst, std::fabs(y.span<float>()[i] - expected[i]));
  std::printf("y[0] = %.4f %.4f %.4f %.4f\n", y.span<float>()[0], y.span<float>()[1], y.span<float>()[2],
              y.span<float>()[3]);
  std::printf("matches NumPy within 1e-5: %s\n", worst <= 1e-5 ? "yes" : "no");
  return worst <= 1e-5 ? 0 : 1;
}
