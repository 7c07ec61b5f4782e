// Graph surgery at scale: merge, split, extract and min_value_cut on generated graphs of 10 k and
// 100 k operators, and the same merge and extract with onnx.compose.merge_models and
// onnx.utils.Extractor (benchmarks/peers/surgery_onnx.py, run in the same process tree), as ratios.
//
// Graphs: `blocks` repeats relu, neg, add over f32 [1, 16] values (a diamond per block); `line`
// chains relu, neg, tanh. The peer builds the same graphs as ONNX models. Its Extractor is cubic
// (it recurses per node and compares protobufs against a list), so extract is compared at 200
// operators, where it still finishes in seconds.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "rml/edit/edit.hpp"

namespace {

using rml::GraphDef;
using rml::ValueId;

ValueId add_value(GraphDef& def, std::string name) {
  def.values.push_back({std::move(name), {rml::DType::f32, {1, 16}}});
  return static_cast<ValueId>(def.values.size() - 1);
}

void add_node(GraphDef& def, const char* op, std::vector<ValueId> inputs, ValueId output) {
  rml::NodeDef n;
  n.op = op;
  n.inputs = std::move(inputs);
  n.outputs = {output};
  def.nodes.push_back(std::move(n));
}

// `nodes` operators in blocks h = relu(v), n = neg(v), v' = h + n, from `input` to `output`.
GraphDef blocks(std::size_t nodes, const std::string& input, const std::string& output) {
  GraphDef def;
  ValueId current = add_value(def, input);
  def.inputs = {current};
  const std::size_t count = nodes / 3;
  for (std::size_t b = 0; b < count; ++b) {
    const ValueId h = add_value(def, ""), n = add_value(def, "");
    const ValueId v = add_value(def, b + 1 == count ? output : "");
    add_node(def, "relu", {current}, h);
    add_node(def, "neg", {current}, n);
    add_node(def, "add", {h, n}, v);
    current = v;
  }
  def.outputs = {current};
  return def;
}

// `nodes` operators in a line: relu, neg, tanh, ..., from x through v0, v1, ... to y.
GraphDef line(std::size_t nodes) {
  static const char* const kinds[] = {"relu", "neg", "tanh"};
  GraphDef def;
  ValueId current = add_value(def, "x");
  def.inputs = {current};
  for (std::size_t i = 0; i < nodes; ++i) {
    const ValueId v = add_value(def, i + 1 == nodes ? "y" : "v" + std::to_string(i));
    add_node(def, kinds[i % 3], {current}, v);
    current = v;
  }
  def.outputs = {current};
  return def;
}

void BM_merge(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const rml::Graph first(blocks(n / 2, "x", "h")), second(blocks(n / 2, "h_in", "y"));
  const std::vector<rml::Connection> connections = {{{"a", "h"}, {"b", "h_in"}}};
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<rml::GraphPart> parts = {{"a", first}, {"b", second}};
    state.ResumeTiming();
    auto merged = rml::merge(parts, connections);
    if (!merged.ok()) state.SkipWithError(merged.error().message().c_str());
    state.PauseTiming();
    merged = rml::Status(rml::Code::internal, "released outside the timing");
    state.ResumeTiming();
  }
}

void BM_extract(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const rml::Graph source(line(n));
  for (auto _ : state) {
    state.PauseTiming();
    rml::Graph graph = source;
    const rml::Value from = graph.value("v" + std::to_string(n / 4)).value();
    const rml::Value to = graph.value("v" + std::to_string(3 * n / 4)).value();
    state.ResumeTiming();
    auto part = rml::extract(graph, {from}, {to});
    if (!part.ok()) state.SkipWithError(part.error().message().c_str());
    state.PauseTiming();
    part = rml::Status(rml::Code::internal, "released outside the timing");
    state.ResumeTiming();
  }
}

void BM_split(benchmark::State& state) {
  const rml::Graph source(blocks(static_cast<std::size_t>(state.range(0)), "x", "y"));
  for (auto _ : state) {
    state.PauseTiming();
    rml::Graph graph = source;
    const rml::ValueCut cut = graph.min_value_cut().value();
    state.ResumeTiming();
    auto parts = rml::split(graph, cut);
    if (!parts.ok()) state.SkipWithError(parts.error().message().c_str());
    state.PauseTiming();
    parts = rml::Status(rml::Code::internal, "released outside the timing");
    state.ResumeTiming();
  }
}

void BM_min_value_cut(benchmark::State& state) {
  const rml::Graph graph(blocks(static_cast<std::size_t>(state.range(0)), "x", "y"));
  for (auto _ : state) {
    auto cut = graph.min_value_cut();
    if (!cut.ok()) state.SkipWithError(cut.error().message().c_str());
    benchmark::DoNotOptimize(cut);
  }
}

BENCHMARK(BM_merge)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_extract)->Arg(200)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_split)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_min_value_cut)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

// Keeps each run's real time (ms) by name while printing as usual.
class Recorder : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> ms;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) ms[r.benchmark_name()] = r.GetAdjustedRealTime();
    ConsoleReporter::ReportRuns(runs);
  }
};

// The peer's timings in ms by `<what>_<size>`, or empty when python3 or onnx is missing.
std::map<std::string, double> run_peer(const std::string& args) {
  std::map<std::string, double> ms;
  const std::string command =
      "/usr/bin/python3 " RML_SOURCE_DIR "/benchmarks/peers/surgery_onnx.py " + args + " 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return ms;
  char name[64];
  double seconds = 0;
  while (std::fscanf(pipe, "%63s %lf", name, &seconds) == 2) ms[name] = seconds * 1e3;
  pclose(pipe);
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Recorder recorder;
  benchmark::RunSpecifiedBenchmarks(&recorder);
  benchmark::Shutdown();

  std::printf("\nPeer: onnx.compose.merge_models / onnx.utils.Extractor (running...)\n");
  std::fflush(stdout);
  const auto peer = run_peer("merge:10000 merge:100000 extract:200");
  const struct {
    const char* ours;
    const char* theirs;
  } pairs[] = {
      {"BM_merge/10000", "merge_10000"}, {"BM_merge/100000", "merge_100000"}, {"BM_extract/200", "extract_200"}};
  std::printf("%-20s %12s %12s %10s\n", "", "rml ms", "onnx ms", "onnx/rml");
  for (const auto& p : pairs) {
    const auto a = recorder.ms.find(p.ours);
    const auto b = peer.find(p.theirs);
    if (a == recorder.ms.end()) continue;
    if (b == peer.end()) {
      std::printf("%-20s %12.3f %12s %10s\n", p.ours, a->second, "n/a", "n/a");
      continue;
    }
    std::printf("%-20s %12.3f %12.1f %9.0fx\n", p.ours, a->second, b->second, b->second / a->second);
  }
  std::printf("targets: merge and extract of 100k nodes <= 50 ms; min_value_cut of 100k nodes <= 1000 ms\n");
  return 0;
}
