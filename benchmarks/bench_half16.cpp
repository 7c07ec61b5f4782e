// 16-bit matmul and conv2d with constant weights against f32, in one process: a BERT-size Linear
// (128 rows, 768 -> 3072 and 3072 -> 768) and ResNet's 3x3 64-channel convolution at 56x56, each in
// f32, bf16 (VDPBF16PS where the build has AVX-512 BF16) and f16 (widened in the micro-kernel), and
// bf16 with its weights widened to f32 at create (the f32 GEMM fed 16-bit operands, for reference).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "rml/exec/executor.hpp"

namespace {

rml::Tensor random_tensor(rml::DType dtype, const rml::Shape& shape) {
  std::vector<float> v(static_cast<std::size_t>(shape.numel()));
  unsigned s = 12345;
  for (float& x : v) x = static_cast<float>((s = s * 1103515245u + 12345u) >> 8) / 16777216.0f - 0.5f;
  rml::Tensor t = rml::Tensor::zeros(dtype, shape);
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (dtype == rml::DType::bf16)
      t.mutable_data<rml::bf16>()[i] = rml::bf16(v[i]);
    else if (dtype == rml::DType::f16)
      t.mutable_data<rml::f16>()[i] = rml::f16(v[i]);
    else
      t.mutable_data<float>()[i] = v[i];
  }
  return t;
}

rml::Graph one_node(const std::string& op, rml::DType dt, rml::Shape x, rml::Shape w, rml::Shape y,
                    rml::Attrs attrs = {}) {
  rml::GraphDef g;
  g.values = {{"x", {dt, x}}, {"w", {dt, w}}, {"y", {dt, y}}};
  g.inputs = {0};
  g.outputs = {2};
  g.constants.push_back({1, "w", random_tensor(dt, w), false});
  rml::NodeDef n;
  n.op = op;
  n.inputs = {0, 1};
  n.outputs = {2};
  n.attrs = std::move(attrs);
  g.nodes.push_back(n);
  return rml::Graph(std::move(g));
}

constexpr rml::DType kTypes[] = {rml::DType::f32, rml::DType::bf16, rml::DType::f16, rml::DType::bf16};

/// range(0): 0 f32, 1 bf16, 2 f16, 3 bf16 widened at create; range(1): threads.
void run(benchmark::State& state, const rml::Graph& graph, const rml::Shape& x, double flops) {
  rml::ExecutorOptions options;
  options.threads = static_cast<int>(state.range(1));
  options.widen_16bit_weights = state.range(0) == 3;
  auto exec = rml::Executor::create(graph, options).value();
  std::vector<rml::Tensor> in{random_tensor(kTypes[state.range(0)], x)};
  std::vector<rml::Tensor> out{rml::Tensor::zeros(exec.output_type(0))};
  for (auto _ : state) {
    auto st = exec.run_into(in, out);
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
  }
  state.SetLabel(state.range(0) == 3 ? std::string("bf16 widened")
                                     : std::string(rml::dtype_name(kTypes[state.range(0)])));
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void BM_Linear(benchmark::State& state) {
  const std::int64_t m = 128, k = state.range(2), n = state.range(3);
  const rml::DType dt = kTypes[state.range(0)];
  run(state, one_node("matmul", dt, {m, k}, {k, n}, {m, n}), {m, k}, 2.0 * double(m * k * n));
}

void BM_Conv3x3(benchmark::State& state) {
  const std::int64_t c = 64, h = 56;
  const rml::DType dt = kTypes[state.range(0)];
  const rml::Attrs attrs{{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}};
  run(state, one_node("conv2d", dt, {1, c, h, h}, {c, c, 3, 3}, {1, c, h, h}, attrs), {1, c, h, h},
      2.0 * double(c * 9 * c * h * h));
}

}  // namespace

BENCHMARK(BM_Linear)
    ->ArgsProduct({{0, 1, 2, 3}, {1, 2}, {768}, {3072}})
    ->ArgsProduct({{0, 1, 2}, {1}, {3072}, {768}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Conv3x3)->ArgsProduct({{0, 1, 2, 3}, {1, 2}})->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
