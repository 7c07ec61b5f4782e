// Kernel throughput against a standalone Eigen GEMM of the same size, measured in the same run:
// matmul 64x1024x1024, ResNet-18's 3x3 convolutions at batch 1 (as GEMMs of O x 9C x HW), and
// the executor's per-node overhead on a chain of 1000 tiny elementwise nodes. The ratios are
// printed at the end (target: >= 0.85 of Eigen; <= 100 ns per node).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "rml/exec/executor.hpp"

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

rml::Tensor random_tensor(rml::Shape shape) {
  std::vector<float> v(static_cast<std::size_t>(shape.numel()));
  unsigned s = 12345;
  for (float& x : v) x = static_cast<float>((s = s * 1103515245u + 12345u) >> 8) / 16777216.0f - 0.5f;
  return rml::Tensor::from_vector(v, std::move(shape));
}

/// One node `op(x, constant w)` with x as the input.
rml::Graph one_node(const std::string& op, rml::Shape x, rml::Shape w, rml::Shape y, rml::Attrs attrs = {}) {
  rml::GraphDef g;
  g.values = {{"x", {rml::DType::f32, x}}, {"w", {rml::DType::f32, w}}, {"y", {rml::DType::f32, y}}};
  g.inputs = {0};
  g.outputs = {2};
  g.constants.push_back({1, "w", random_tensor(w), false});
  rml::NodeDef n;
  n.op = op;
  n.inputs = {0, 1};
  n.outputs = {2};
  n.attrs = std::move(attrs);
  g.nodes.push_back(n);
  return rml::Graph(std::move(g));
}

/// RML_WINOGRAD=off|f2|f4 picks the 3x3 convolution path (ExecutorOptions::winograd; default f2).
rml::Winograd winograd_from_env() {
  const char* v = std::getenv("RML_WINOGRAD");
  const std::string s = v ? v : "f2";
  return s == "off" ? rml::Winograd::off : s == "f4" ? rml::Winograd::f4 : rml::Winograd::f2;
}

void run_graph(benchmark::State& state, const rml::Graph& graph, rml::Shape x_shape, int threads) {
  rml::ExecutorOptions options{threads};
  options.winograd = winograd_from_env();
  auto exec = rml::Executor::create(graph, options).value();
  std::vector<rml::Tensor> in{random_tensor(std::move(x_shape))};
  std::vector<rml::Tensor> out{rml::Tensor::zeros(exec.output_type(0))};
  for (auto _ : state) {
    auto st = exec.run_into(in, out);
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
  }
}

void flops_counter(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

// C[m, n] = A[m, k] B[k, n], row-major, Eigen alone.
void BM_EigenGemm(benchmark::State& state) {
  const auto m = state.range(0), k = state.range(1), n = state.range(2);
  RowMatrix a = RowMatrix::Random(m, k), b = RowMatrix::Random(k, n), c(m, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  flops_counter(state, 2.0 * static_cast<double>(m * k * n));
}

void BM_MatMul(benchmark::State& state) {
  const auto m = state.range(0), k = state.range(1), n = state.range(2);
  run_graph(state, one_node("matmul", {m, k}, {k, n}, {m, n}), {m, k}, static_cast<int>(state.range(3)));
  flops_counter(state, 2.0 * static_cast<double>(m * k * n));
}

// 3x3, stride 1, pad 1, C -> C channels at H x H, batch 1.
void BM_Conv3x3(benchmark::State& state) {
  const auto c = state.range(0), h = state.range(1);
  const rml::Attrs attrs{{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}};
  run_graph(state, one_node("conv2d", {1, c, h, h}, {c, c, 3, 3}, {1, c, h, h}, attrs), {1, c, h, h},
            static_cast<int>(state.range(2)));
  flops_counter(state, 2.0 * static_cast<double>(c * 9 * c * h * h));
}

// 1000 nodes `x = x + c` on 8 floats: what a kernel call costs beyond its arithmetic.
void BM_Chain1000(benchmark::State& state) {
  constexpr int kNodes = 1000;
  rml::GraphDef g;
  const rml::TensorType t{rml::DType::f32, {8}};
  g.values = {{"x", t}, {"c", t}};
  g.inputs = {0};
  g.constants.push_back({1, "c", random_tensor({8}), false});
  rml::ValueId last = 0;
  for (int i = 0; i < kNodes; ++i) {
    rml::NodeDef n;
    n.op = "add";
    n.inputs = {last, 1};
    last = static_cast<rml::ValueId>(g.values.size());
    g.values.push_back({"", t});
    n.outputs = {last};
    g.nodes.push_back(n);
  }
  g.outputs = {last};
  run_graph(state, rml::Graph(std::move(g)), {8}, 1);
  state.counters["ns/node"] = benchmark::Counter(static_cast<double>(kNodes),
                                                 benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert,
                                                 benchmark::Counter::kIs1000);
}

BENCHMARK(BM_EigenGemm)->Args({64, 1024, 1024})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MatMul)->Args({64, 1024, 1024, 1})->Args({64, 1024, 1024, 2})->Unit(benchmark::kMicrosecond);
// ResNet-18's 3x3 convolutions as GEMMs: O x 9C times 9C x HW.
BENCHMARK(BM_EigenGemm)
    ->Args({64, 576, 3136})
    ->Args({128, 1152, 784})
    ->Args({256, 2304, 196})
    ->Args({512, 4608, 49})
    ->Unit(benchmark::kMicrosecond);
// The same layers at the zoo's 64x64 input: small planes, where the output channels become the
// GEMM's rows.
BENCHMARK(BM_EigenGemm)
    ->Args({64, 576, 256})
    ->Args({128, 1152, 64})
    ->Args({256, 2304, 16})
    ->Args({512, 4608, 4})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Conv3x3)
    ->Args({64, 16, 1})
    ->Args({128, 8, 1})
    ->Args({256, 4, 1})
    ->Args({512, 2, 1})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Conv3x3)
    ->Args({64, 56, 1})
    ->Args({128, 28, 1})
    ->Args({256, 14, 1})
    ->Args({512, 7, 1})
    ->Args({64, 56, 2})
    ->Args({512, 7, 2})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Chain1000)->Unit(benchmark::kMicrosecond);

/// Keeps each benchmark's wall and CPU time per iteration (ns) while printing as usual.
class Recorder : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> ns, cpu_ns;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred || r.run_type != Run::RT_Iteration) continue;
      ns[r.benchmark_name()] = r.real_accumulated_time * 1e9 / static_cast<double>(r.iterations);
      cpu_ns[r.benchmark_name()] = r.cpu_accumulated_time * 1e9 / static_cast<double>(r.iterations);
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Recorder rec;
  benchmark::RunSpecifiedBenchmarks(&rec);
  // Wall-clock and main-thread CPU time; on a machine shared with other work the CPU-time ratio
  // is the steadier one for single-threaded runs (for 2 threads only the wall clock means anything).
  auto ratio = [&](const std::string& eigen, const std::string& ours, const char* label) {
    if (!rec.ns.count(eigen) || !rec.ns.count(ours)) return;
    std::printf("  %-52s wall %.2f   cpu %.2f\n", label, rec.ns[eigen] / rec.ns[ours],
                rec.cpu_ns[eigen] / rec.cpu_ns[ours]);
  };
  std::printf("\nrml / Eigen GEMM throughput (same shapes, this run; target >= 0.85):\n");
  const std::string g = "BM_EigenGemm/", mm = "BM_MatMul/", cv = "BM_Conv3x3/";
  ratio(g + "64/1024/1024", mm + "64/1024/1024/1", "matmul 64x1024x1024, 1 thread");
  ratio(g + "64/1024/1024", mm + "64/1024/1024/2", "matmul 64x1024x1024, 2 threads (vs 1-thread Eigen)");
  ratio(g + "64/576/3136", cv + "64/56/1", "conv3x3 64ch 56x56, 1 thread");
  ratio(g + "128/1152/784", cv + "128/28/1", "conv3x3 128ch 28x28, 1 thread");
  ratio(g + "256/2304/196", cv + "256/14/1", "conv3x3 256ch 14x14, 1 thread");
  ratio(g + "512/4608/49", cv + "512/7/1", "conv3x3 512ch 7x7, 1 thread");
  ratio(g + "64/576/256", cv + "64/16/1", "conv3x3 64ch 16x16, 1 thread");
  ratio(g + "128/1152/64", cv + "128/8/1", "conv3x3 128ch 8x8, 1 thread");
  ratio(g + "256/2304/16", cv + "256/4/1", "conv3x3 256ch 4x4, 1 thread");
  ratio(g + "512/4608/4", cv + "512/2/1", "conv3x3 512ch 2x2, 1 thread");
  ratio(g + "64/576/3136", cv + "64/56/2", "conv3x3 64ch 56x56, 2 threads (vs 1-thread Eigen)");
  ratio(g + "512/4608/49", cv + "512/7/2", "conv3x3 512ch 7x7, 2 threads (vs 1-thread Eigen)");
  if (rec.ns.count("BM_Chain1000"))
    std::printf("\nexecutor overhead per node (chain of 1000 adds on 8 floats; target <= 100 ns): wall %.1f ns, "
                "cpu %.1f ns\n", rec.ns["BM_Chain1000"] / 1000.0, rec.cpu_ns["BM_Chain1000"] / 1000.0);
  benchmark::Shutdown();
  return 0;
}
