// The torch_mlp fixture at batch 2, end to end (run_into), against PyTorch eager measured in the
// same run by benchmarks/peers/torch_mlp.py at the same thread count; prints PyTorch / rml.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "rml/exec/executor.hpp"
#include "rml/io/graph_io.hpp"
#include "rml/io/safetensors.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kData = fs::path(RML_SOURCE_DIR) / "tests" / "data";

void BM_MlpBatch2(benchmark::State& state) {
  auto graph = rml::load_graph(kData / "torch_mlp").value();
  auto exec = rml::Executor::create(graph, {static_cast<int>(state.range(0))}).value();
  auto reader = rml::SafetensorsReader::open(kData / "torch_mlp.expected.safetensors").value();
  std::vector<rml::Tensor> in{reader.get("x").value().clone()};
  std::vector<rml::Tensor> out{rml::Tensor::zeros(exec.output_type(0))};
  for (auto _ : state) {
    auto st = exec.run_into(in, out);
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
  }
}
BENCHMARK(BM_MlpBatch2)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

/// Keeps each benchmark's time per iteration (µs) while printing as usual.
class Recorder : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> us;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs)
      if (!r.error_occurred && r.run_type == Run::RT_Iteration)
        us[r.benchmark_name()] = r.real_accumulated_time * 1e6 / static_cast<double>(r.iterations);
    ConsoleReporter::ReportRuns(runs);
  }
};

/// PyTorch eager's median latency in µs, or a negative number when the peer did not run.
double torch_us(int threads) {
  const std::string cmd = "/usr/bin/python3 " + (fs::path(RML_SOURCE_DIR) / "benchmarks/peers/torch_mlp.py").string() +
                          " --threads " + std::to_string(threads);
  std::FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  double us = -1;
  if (std::fscanf(p, "%lf", &us) != 1) us = -1;
  pclose(p);
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Recorder rec;
  benchmark::RunSpecifiedBenchmarks(&rec);
  std::printf("\nMLP batch 2 (12-16-16-4), median latency:\n");
  for (int threads : {1, 2}) {
    const std::string name = "BM_MlpBatch2/" + std::to_string(threads);
    const double peer = torch_us(threads);
    if (!rec.us.count(name)) continue;
    if (peer < 0) {
      std::printf("  %d thread(s): rml %.3f us; PyTorch peer did not run\n", threads, rec.us[name]);
      continue;
    }
    std::printf("  %d thread(s): rml %.3f us, PyTorch eager %.3f us -> rml is %.1fx faster\n", threads, rec.us[name],
                peer, peer / rec.us[name]);
  }
  benchmark::Shutdown();
  return 0;
}
