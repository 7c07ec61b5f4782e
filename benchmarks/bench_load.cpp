// Loading rml-graph models: JSON throughput on a 100 k-node graph, and load time against weight
// size (1 MB vs 1 GB of weights; mapped, never copied, so the two should take about as long).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include <rml/io.hpp>

namespace {

// x -> (relu -> add c) x n/2: a chain of n nodes, one small constant.
rml::GraphDef chain(std::size_t n) {
  rml::GraphDef g;
  g.producer = "bench_load";
  const rml::TensorType t{rml::DType::f32, {1, 64}};
  g.values.push_back({"x", t});
  g.values.push_back({"c", t});
  g.inputs = {0};
  g.constants.push_back({1, "c", rml::Tensor::zeros(t), false});
  rml::ValueId last = 0;
  for (std::size_t i = 0; i < n; ++i) {
    rml::NodeDef node;
    node.op = i % 2 ? "add" : "relu";
    node.inputs = i % 2 ? std::vector<rml::ValueId>{last, 1} : std::vector<rml::ValueId>{last};
    const auto out = static_cast<rml::ValueId>(g.values.size());
    g.values.push_back({"v" + std::to_string(out), t});
    node.outputs = {out};
    node.name = "n" + std::to_string(i);
    g.nodes.push_back(std::move(node));
    last = out;
  }
  g.outputs = {last};
  return g;
}

// A graph holding one constant of `bytes` bytes.
rml::GraphDef weights_of(std::int64_t bytes) {
  rml::GraphDef g;
  const rml::TensorType t{rml::DType::f32, {bytes / 4}};
  g.values.push_back({"w", t});
  g.outputs = {0};
  g.constants.push_back({0, "w", rml::Tensor::zeros(t), false});
  return g;
}

const std::filesystem::path dir = std::filesystem::temp_directory_path() / "rml_bench_load";

void BM_ParseJson100k(benchmark::State& state) {
  static const std::filesystem::path stem = [] {
    std::filesystem::create_directories(dir);
    auto p = dir / "chain";
    if (!rml::save_graph(rml::Graph(chain(100'000)), p).ok()) std::abort();
    return p;
  }();
  static const std::string text = [] {
    std::FILE* f = std::fopen((stem.string() + ".json").c_str(), "rb");
    std::string s;
    char buf[1 << 16];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    std::fclose(f);
    return s;
  }();
  auto weights = rml::SafetensorsReader::open(stem.string() + ".safetensors").value();
  for (auto _ : state) {
    auto g = rml::parse_graph(text, &weights);
    if (!g.ok()) state.SkipWithError(g.error().message().c_str());
    benchmark::DoNotOptimize(g);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(text.size()));
  state.counters["nodes/s"] = benchmark::Counter(100'000.0 * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
  state.counters["json_MB"] = static_cast<double>(text.size()) / 1e6;
}
BENCHMARK(BM_ParseJson100k)->Unit(benchmark::kMillisecond);

double load_seconds(const std::filesystem::path& stem, int reps) {
  double best = 1e9;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto g = rml::load_graph(stem);
    const auto t1 = std::chrono::steady_clock::now();
    if (!g.ok()) std::abort();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  return best;
}

void BM_LoadVsWeightSize(benchmark::State& state) {
  std::filesystem::create_directories(dir);
  const auto small = dir / "w1mb";
  const auto large = dir / "w1gb";
  if (!rml::save_graph(rml::Graph(weights_of(1 << 20)), small).ok()) std::abort();
  if (!std::filesystem::exists(large.string() + ".json") &&
      !rml::save_graph(rml::Graph(weights_of(std::int64_t{1} << 30)), large).ok())
    std::abort();
  double t_small = 0;
  double t_large = 0;
  for (auto _ : state) {
    t_small = load_seconds(small, 20);
    t_large = load_seconds(large, 20);
  }
  state.counters["load_1MB_us"] = t_small * 1e6;
  state.counters["load_1GB_us"] = t_large * 1e6;
  state.counters["ratio_1GB/1MB"] = t_large / t_small;
}
BENCHMARK(BM_LoadVsWeightSize)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
