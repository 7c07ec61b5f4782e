// The fused attention block (kernels/attention.hpp): the cases tests/data/attention/gen_attention.py
// wrote, against NumPy at 1 and 2 threads, and which of them fused (the graph's "steps" metadata).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "rml/exec/executor.hpp"
#include "rml/io/graph_io.hpp"
#include "rml/io/safetensors.hpp"

namespace fs = std::filesystem;
using namespace rml;

namespace {

const fs::path kDir = fs::path(RML_TEST_DATA_DIR) / "attention";

std::vector<std::string> attention_cases() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kDir))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// Empty when every element is within atol + rtol * |want| (NaN matches NaN, an infinity itself).
std::string mismatch(const Tensor& got, const Tensor& want, double rtol, double atol) {
  if (got.type() != want.type()) return "type " + got.type().to_string() + " != " + want.type().to_string();
  const auto g = got.span<float>(), w = want.span<float>();
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double a = g[i], b = w[i];
    if ((std::isnan(a) && std::isnan(b)) || (std::isinf(b) && a == b)) continue;
    if (!(std::abs(a - b) <= atol + rtol * std::abs(b)))
      return "element " + std::to_string(i) + ": " + std::to_string(a) + " != " + std::to_string(b);
  }
  return {};
}

/// The largest |got - want| over finite expected values, for the docs' error figure.
double max_error(const Tensor& got, const Tensor& want) {
  const auto g = got.span<float>(), w = want.span<float>();
  double worst = 0;
  for (std::size_t i = 0; i < w.size(); ++i)
    if (std::isfinite(w[i])) worst = std::max(worst, std::abs(static_cast<double>(g[i]) - w[i]));
  return worst;
}

}  // namespace

TEST_CASE("the attention block matches NumPy, fused where the pattern is exact and unfused otherwise") {
  const auto names = attention_cases();
  REQUIRE(names.size() == 16);
  double worst = 0;  // over the cases that fuse (all but the attn_miss_ near misses)
  for (const auto& name : names) {
    INFO("case ", name);
    const fs::path stem = kDir / name;
    const Graph graph = load_graph(stem).value();
    const auto& meta = graph.def().metadata;
    auto reader = SafetensorsReader::open(fs::path(stem.string() + ".safetensors")).value();
    std::vector<Tensor> inputs, expected;
    for (std::size_t k = 0; k < graph.def().inputs.size(); ++k)
      inputs.push_back(reader.get("input." + std::to_string(k)).value());
    for (std::size_t k = 0; k < graph.def().outputs.size(); ++k)
      expected.push_back(reader.get("expected." + std::to_string(k)).value());
    const double rtol = std::stod(meta.at("rtol")), atol = std::stod(meta.at("atol"));
    for (int threads : {1, 2}) {
      INFO("threads ", threads);
      // parallel_min_work 0: the 2-thread runs split every step however small.
      auto exec = Executor::create(graph, {.threads = threads, .parallel_min_work = 0});
      REQUIRE_MESSAGE(exec.ok(), exec.error().to_string());
      CHECK(exec->step_count() == std::stoul(meta.at("steps")));
      auto out = exec->run(inputs);
      REQUIRE_MESSAGE(out.ok(), out.error().to_string());
      REQUIRE(out->size() == expected.size());
      for (std::size_t k = 0; k < expected.size(); ++k) {
        INFO("output ", k);
        CHECK(mismatch((*out)[k], expected[k], rtol, atol) == "");
        if (name.rfind("attn_miss_", 0) != 0) worst = std::max(worst, max_error((*out)[k], expected[k]));
      }
    }
  }
  MESSAGE("fused attention: largest |rml - NumPy| ", worst);
}

TEST_CASE("the zoo GPT's masked attention fuses as its PyTorch export writes it") {
  // gpt_b1 (58 nodes): the Q, K, V transposes, K's second transpose, both matmuls, the scale, the
  // where(mask, -inf, s) fill, the softmax and the output's transpose, 10 nodes (9 steps unfused, 24 in
  // all), run as one step. Its outputs are checked against PyTorch by the conformance suite.
  const auto g = load_graph(fs::path(RML_TEST_DATA_DIR) / "zoo" / "gpt_b1").value();
  CHECK(Executor::create(g, {.threads = 2}).value().step_count() == 16);
}
