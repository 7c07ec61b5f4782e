// The program every consumer test builds: loads a model through rml and prints its size.
#include <cstdio>

#include <rml/rml.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL_STEM\n", argv[0]);
    return 1;
  }
  auto graph = rml::load_graph(argv[1]);
  if (!graph.ok()) {
    std::fprintf(stderr, "%s\n", graph.error().to_string().c_str());
    return 2;
  }
  const rml::GraphDef& def = graph->def();
  std::printf("rml consumer: %zu values, %zu constants, %zu nodes\n", def.values.size(), def.constants.size(),
              def.nodes.size());
  return 0;
}
