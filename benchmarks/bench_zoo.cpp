// Zoo latency: rml's executor against ONNX Runtime (onnxruntime-node) and PyTorch eager, per model, batch and
// thread count, with the ratios rml/ORT and rml/PyTorch printed at the end (peers measured in the same run).
//
// Every figure is a median of single-run latencies (after warm-up runs). The fixtures are the zoo's
// (tests/zoo/gen_zoo.py, run here with --keep-onnx into $RML_ZOO_DIR, default ./bench_zoo); rml runs the
// PyTorch-route export (<model>_b<batch>.json), ORT runs the .onnx file torch.onnx.export wrote for it.
// ORT needs $RML_ORT_DIR: a directory where `npm install --ignore-scripts onnxruntime-node` was run.
// See docs/exporters.md.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "rml/exec/executor.hpp"
#include "rml/io/graph_io.hpp"
#include "rml/io/safetensors.hpp"

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kModels = {"mlp", "cnn", "transformer", "gpt", "resnet18", "mobilenet_v2"};
constexpr int kRuns = 30;

std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

fs::path zoo_dir() { return fs::absolute(env_or("RML_ZOO_DIR", "bench_zoo")); }

/// One loaded model: executor, inputs and preallocated outputs (run_into allocates nothing).
struct Loaded {
  rml::Executor exec;
  std::vector<rml::Tensor> inputs, outputs;
};

Loaded load(const std::string& stem, int threads) {
  const fs::path dir = zoo_dir();
  auto graph = rml::load_graph(dir / stem).value();
  auto exec = rml::Executor::create(graph, rml::ExecutorOptions{threads}).value();
  auto reader = rml::SafetensorsReader::open(dir / (stem + ".expected.safetensors")).value();
  Loaded l{std::move(exec), {}, {}};
  for (std::size_t i = 0;; ++i) {
    auto t = reader.get("input." + std::to_string(i));
    if (!t.ok()) break;
    l.inputs.push_back(t->clone());
  }
  for (std::size_t i = 0; i < graph.def().outputs.size(); ++i)
    l.outputs.push_back(rml::Tensor::zeros(l.exec.output_type(i)));
  return l;
}

void bm_rml(benchmark::State& state, const std::string& stem, int threads) {
  static std::map<std::pair<std::string, int>, std::unique_ptr<Loaded>> cache;  // one executor per config
  auto& slot = cache[{stem, threads}];
  if (!slot) {
    slot = std::make_unique<Loaded>(load(stem, threads));
    for (int i = 0; i < 3; ++i) (void)slot->exec.run_into(slot->inputs, slot->outputs);  // warm-up
  }
  for (auto _ : state) {
    auto status = slot->exec.run_into(slot->inputs, slot->outputs);
    if (!status.ok()) state.SkipWithError(status.to_string().c_str());
  }
}

using Key = std::tuple<std::string, int>;  // (stem, threads)

/// Records the median of each benchmark's repetitions (in ms) while printing as usual.
class MedianReporter : public benchmark::ConsoleReporter {
 public:
  std::map<Key, double> medians;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      if (run.run_type != Run::RT_Aggregate || run.aggregate_name != "median") continue;
      // Names look like rml/<stem>/threads:<t>/...
      std::string name = run.benchmark_name();
      auto a = name.find('/'), b = name.find('/', a + 1);
      const std::string stem = name.substr(a + 1, b - a - 1);
      const int threads = std::atoi(name.c_str() + name.find("threads:") + 8);
      medians[{stem, threads}] = run.GetAdjustedRealTime() * (run.time_unit == benchmark::kMicrosecond ? 1e-3 : 1.0);
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

/// Runs a peer command; parses lines `<stem> <threads> <median ms>` (lines starting with # are echoed).
std::map<Key, double> run_peer(const std::string& command, std::string& banner) {
  std::map<Key, double> out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char line[512];
  while (std::fgets(line, sizeof line, pipe)) {
    if (line[0] == '#') {
      banner += line;
      continue;
    }
    std::istringstream in(line);
    std::string stem;
    int threads = 0;
    double ms = 0;
    if (in >> stem >> threads >> ms) out[{stem, threads}] = ms;
  }
  if (pclose(pipe) != 0) banner += "# peer failed: " + command + "\n";
  return out;
}

std::string shell_quote(const std::string& s) { return "'" + s + "'"; }

}  // namespace

int main(int argc, char** argv) {
  const fs::path dir = zoo_dir();
  const std::string source = RML_SOURCE_DIR;
  if (!fs::exists(dir / "resnet18_b1.onnx")) {
    std::cout << "generating the zoo into " << dir << " ...\n" << std::flush;
    const std::string cmd = "/usr/bin/python3 " + shell_quote(source + "/tests/zoo/gen_zoo.py") +
                            " --keep-onnx --out " + shell_quote(dir.string()) + " > /dev/null";
    if (std::system(cmd.c_str()) != 0) {
      std::cerr << "bench_zoo: zoo generation failed: " << cmd << "\n";
      return 1;
    }
  }
  std::vector<std::string> stems;
  for (const auto& m : kModels)
    for (int b : {1, 2}) stems.push_back(m + "_b" + std::to_string(b));
  for (const auto& stem : stems)
    for (int threads : {1, 2})
      benchmark::RegisterBenchmark(("rml/" + stem + "/threads:" + std::to_string(threads)).c_str(), bm_rml, stem,
                                   threads)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->Iterations(1)
          ->Repetitions(kRuns)
          ->ReportAggregatesOnly(true);
  benchmark::Initialize(&argc, argv);
  MedianReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);

  std::string all;
  for (const auto& s : stems) all += " " + s;
  std::string banner;
  std::map<Key, double> ort, torch;
  const std::string ort_dir = env_or("RML_ORT_DIR", "");
  for (int threads : {1, 2}) {
    const std::string t = std::to_string(threads), runs = std::to_string(kRuns);
    if (!ort_dir.empty()) {
      auto r = run_peer("NODE_PATH=" + shell_quote(ort_dir + "/node_modules") + " node " +
                            shell_quote(source + "/benchmarks/peers/zoo_ort.js") + " " + shell_quote(dir.string()) +
                            " " + t + " " + runs + all,
                        banner);
      ort.insert(r.begin(), r.end());
    }
    auto r = run_peer("/usr/bin/python3 " + shell_quote(source + "/benchmarks/peers/zoo_torch.py") + " --threads " + t +
                          " --runs " + runs + all,
                      banner);
    torch.insert(r.begin(), r.end());
  }
  if (ort_dir.empty()) banner += "# ONNX Runtime skipped: set RML_ORT_DIR (see docs/exporters.md)\n";

  std::cout << "\n" << banner;
  std::printf("%-16s %3s %10s %10s %8s %10s %9s\n", "model", "thr", "rml ms", "ORT ms", "rml/ORT", "torch ms",
              "rml/torch");
  for (const auto& stem : stems) {
    for (int threads : {1, 2}) {
      const Key key{stem, threads};
      if (!reporter.medians.count(key)) continue;
      const double r = reporter.medians[key];
      auto cell = [&](const std::map<Key, double>& peer, bool ratio) {
        auto it = peer.find(key);
        char buf[32];
        if (it == peer.end()) return std::string("-");
        std::snprintf(buf, sizeof buf, ratio ? "%.2f" : "%.3f", ratio ? r / it->second : it->second);
        return std::string(buf);
      };
      std::printf("%-16s %3d %10.3f %10s %8s %10s %9s\n", stem.c_str(), threads, r, cell(ort, false).c_str(),
                  cell(ort, true).c_str(), cell(torch, false).c_str(), cell(torch, true).c_str());
    }
  }
  return 0;
}
