// The executor: the MLP fixture, input/output checks, fusion, the arena, threads, and that
// run_into allocates nothing in steady state.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <thread>
#include <vector>

#include "rml/exec/eager.hpp"
#include "rml/exec/executor.hpp"
#include "rml/io/graph_io.hpp"
#include "rml/io/safetensors.hpp"

// Counts heap allocations made through operator new while `counting` is set. This executable
// holds only rml's exec tests, so replacing the global operator new here is safe.
namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
void* counted(std::size_t n, std::size_t align) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (n == 0) n = 1;
  void* p = align <= alignof(std::max_align_t) ? std::malloc(n) : std::aligned_alloc(align, (n + align - 1) / align * align);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // the replacements pair malloc with free
#endif
void* operator new(std::size_t n) { return counted(n, 0); }
void* operator new[](std::size_t n) { return counted(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return counted(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted(n, static_cast<std::size_t>(a)); }
// The nothrow forms too, so every new pairs with the delete below (simdjson uses new (nothrow)[]).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try { return counted(n, 0); } catch (...) { return nullptr; }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try { return counted(n, 0); } catch (...) { return nullptr; }
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try { return counted(n, static_cast<std::size_t>(a)); } catch (...) { return nullptr; }
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try { return counted(n, static_cast<std::size_t>(a)); } catch (...) { return nullptr; }
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

using namespace rml;
namespace fs = std::filesystem;

namespace {

Graph mlp() { return load_graph(fs::path(RML_TEST_DATA_DIR) / "torch_mlp").value(); }

Tensor expected_mlp(const char* name) {
  auto reader = SafetensorsReader::open(fs::path(RML_TEST_DATA_DIR) / "torch_mlp.expected.safetensors").value();
  return reader.get(name).value();
}

TensorType f32(Shape s) { return {DType::f32, std::move(s)}; }

/// The steps of tests/data/ops case `name` at `threads` threads (which of its nodes fused).
std::size_t ops_case_steps(const std::string& name, int threads) {
  const auto g = load_graph(fs::path(RML_TEST_DATA_DIR) / "ops" / name).value();
  return Executor::create(g, {threads}).value().step_count();
}

/// `count` pseudo-random floats in [-0.5, 0.5), reproducible from `seed`.
std::vector<float> values(std::int64_t count, unsigned seed) {
  std::vector<float> v(static_cast<std::size_t>(count));
  for (float& x : v) x = static_cast<float>((seed = seed * 1103515245u + 12345u) >> 9) / 8388608.0f - 0.5f;
  return v;
}

/// x [64, 64] -> add c0 -> add c1 -> ... (n adds of [64] rows: a binary op joins its producer's step
/// only when its other operand is a constant scalar).
Graph add_chain(int n) {
  GraphDef g;
  g.values.push_back({"x", f32({64, 64})});
  g.inputs = {0};
  ValueId prev = 0;
  for (int i = 0; i < n; ++i) {
    g.values.push_back({"", f32({64})});
    const auto c = static_cast<ValueId>(g.values.size() - 1);
    g.constants.push_back({c, "", Tensor::from_vector(std::vector<float>(64, 1.0f), Shape{64}), false});
    g.values.push_back({"", f32({64, 64})});
    const auto out = static_cast<ValueId>(g.values.size() - 1);
    NodeDef node;
    node.op = "add";
    node.inputs = {prev, c};
    node.outputs = {out};
    g.nodes.push_back(node);
    prev = out;
  }
  g.values[prev].name = "y";
  g.outputs = {prev};
  return Graph(std::move(g));
}

}  // namespace

TEST_CASE("the MLP fixture matches its reference output") {
  const Tensor x = expected_mlp("x"), y = expected_mlp("y");
  for (int threads : {1, 2, 0}) {
    auto exec = Executor::create(mlp(), {threads});
    REQUIRE_MESSAGE(exec.ok(), exec.error().to_string());
    // matmul + bias add + relu fuse into one step per layer.
    CHECK(exec->step_count() == 3);
    auto out = exec->run({x});
    REQUIRE_MESSAGE(out.ok(), out.error().to_string());
    REQUIRE(out->size() == 1);
    REQUIRE((*out)[0].type() == y.type());
    const auto got = (*out)[0].span<float>(), want = y.span<float>();
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 1e-5f * (1 + std::abs(want[i])));
  }
}

TEST_CASE("run checks its inputs and run_into its outputs, naming them") {
  auto exec = Executor::create(mlp(), {1}).value();
  const Tensor x = expected_mlp("x");
  CHECK(exec.run({}).error().to_string() == "INVALID_ARGUMENT: run: the graph takes 1 inputs, got 0");
  CHECK(exec.run({x, x}).error().to_string() == "INVALID_ARGUMENT: run: the graph takes 1 inputs, got 2");
  CHECK(exec.run({Tensor::zeros(f32({3, 12}))}).error().to_string() ==
        "INVALID_ARGUMENT: run: input 0 (\"x\") must be f32 [2, 12], got f32 [3, 12]");
  CHECK(exec.run({Tensor::zeros(DType::i32, {2, 12})}).error().to_string() ==
        "INVALID_ARGUMENT: run: input 0 (\"x\") must be f32 [2, 12], got i32 [2, 12]");
  CHECK(exec.run({Tensor()}).error().to_string() ==
        "INVALID_ARGUMENT: run: input 0 (\"x\") must be f32 [2, 12], got no data");
  std::vector<Tensor> outs;
  CHECK(exec.run_into(std::vector{x}, outs).to_string() == "INVALID_ARGUMENT: run_into: expects 1 outputs, got 0");
  outs = {Tensor::zeros(f32({2, 5}))};
  CHECK(exec.run_into(std::vector{x}, outs).to_string() ==
        "INVALID_ARGUMENT: run_into: output 0 (\"y\") must be a writable f32 [2, 4] tensor, got f32 [2, 5]");
}

TEST_CASE("profile times every kernel step, named by the nodes it runs") {
  const Tensor x = expected_mlp("x");
  for (int threads : {1, 2}) {
    const auto exec = Executor::create(mlp(), {threads}).value();
    const auto steps = exec.profile({x}, 3);
    REQUIRE_MESSAGE(steps.ok(), steps.error().to_string());
    // Nodes: matmul, add, relu per hidden layer, then matmul and add; each layer is one step.
    REQUIRE(steps->size() == exec.step_count());
    const std::size_t first[] = {0, 3, 6}, count[] = {3, 3, 2};
    double total = 0;
    for (std::size_t i = 0; i < steps->size(); ++i) {
      const StepTime& s = (*steps)[i];
      CHECK(s.op == OpCode::MatMul);
      CHECK(s.first_node == first[i]);
      CHECK(s.node_count == count[i]);
      CHECK(s.seconds >= 0);
      total += s.seconds;
    }
    CHECK(steps->back().output == f32({2, 4}));
    CHECK(total > 0);
  }
  const auto exec = Executor::create(mlp(), {1}).value();
  CHECK(exec.profile({x}, 0).error().to_string() == "INVALID_ARGUMENT: profile: runs must be at least 1, got 0");
  CHECK(exec.profile({Tensor::zeros(f32({3, 12}))}, 1).error().to_string() ==
        "INVALID_ARGUMENT: run: input 0 (\"x\") must be f32 [2, 12], got f32 [3, 12]");
}

TEST_CASE("create refuses a graph that does not check, with infer_types' message") {
  GraphDef g = mlp().def();
  g.values[14].type = f32({2, 5});
  CHECK(Executor::create(Graph(g)).error().to_string() ==
        "INVALID_ARGUMENT: node 7 (add, layers.4 at mlp.py:12) produces f32 [2, 4] but y is recorded as f32 [2, 5]");
}

TEST_CASE("at 2 threads, the parts of every convolution step write the same two part regions") {
  // 3x3 on 32x32 (Winograd over two tile ranges at 2 threads), relu, 3x3 stride 2 onto 16x16 and a
  // 1x1: their parts write the regions the program keeps for part 0 and part 1, which no
  // intermediate and no step's scratch overlaps. At 1 thread each part follows its step's scratch.
  const std::int64_t c = 32, h = 32;
  GraphDef g;
  g.values = {{"x", f32({1, c, h, h})},    {"w1", f32({c, c, 3, 3})},  {"", f32({1, c, h, h})},
              {"", f32({1, c, h, h})},     {"w2", f32({64, c, 3, 3})}, {"", f32({1, 64, 16, 16})},
              {"w3", f32({64, 64, 1, 1})}, {"y", f32({1, 64, 16, 16})}};
  g.inputs = {0};
  g.outputs = {7};
  g.constants = {{1, "", Tensor::from_vector(values(c * c * 9, 1), Shape{c, c, 3, 3}), false},
                 {4, "", Tensor::from_vector(values(64 * c * 9, 2), Shape{64, c, 3, 3}), false},
                 {6, "", Tensor::from_vector(values(64 * 64, 3), Shape{64, 64, 1, 1}), false}};
  NodeDef conv1, relu, conv2, conv3;
  conv1.op = conv2.op = conv3.op = "conv2d";
  conv1.inputs = {0, 1}, conv1.outputs = {2};
  conv1.attrs["pads"] = conv2.attrs["pads"] = std::vector<std::int64_t>{1, 1, 1, 1};
  relu.op = "relu", relu.inputs = {2}, relu.outputs = {3};
  conv2.inputs = {3, 4}, conv2.outputs = {5};
  conv2.attrs["strides"] = std::vector<std::int64_t>{2, 2};
  conv3.inputs = {5, 6}, conv3.outputs = {7};
  g.nodes = {conv1, relu, conv2, conv3};
  const auto program =
      detail::build_program(g, {.threads = 2, .budget = std::size_t{1} << 30, .parallel_min_work = 0}).value();
  const detail::Program& p = *program;
  REQUIRE(p.steps.size() == 3);
  std::int64_t regions = 0;
  for (const detail::Step& s : p.steps) {
    CHECK(s.part_bytes <= p.part_stride);
    regions = std::max(regions, s.part_count);
  }
  CHECK(p.steps[0].part_count == 2);  // the two tile ranges
  CHECK(p.steps[0].part_bytes > 0);
  CHECK(p.part_stride % 64 == 0);
  REQUIRE(regions == 2);
  const std::size_t begin = p.part_offset, end = p.part_offset + 2 * p.part_stride;
  CHECK(end <= p.arena_bytes);
  const auto apart = [&](std::size_t at, std::size_t bytes) { return at + bytes <= begin || at >= end; };
  for (const detail::Step& s : p.steps) {
    if (s.scratch_bytes) CHECK(apart(s.scratch_offset, s.scratch_bytes));
    if (s.part_count == 0) continue;
    CHECK(s.part_offset == p.part_offset);
    CHECK(s.part_stride == p.part_stride);
  }
  for (std::size_t v = 0; v < p.types.size(); ++v)
    if (p.home[v] == detail::ValueHome::arena)
      CHECK(apart(p.slot[v], static_cast<std::size_t>(*p.types[v].checked_nbytes())));
  // At 1 thread there are no regions: every part's scratch is its step's.
  const auto one = detail::build_program(g, {.threads = 1, .budget = std::size_t{1} << 30, .parallel_min_work = 0});
  CHECK(one.value()->part_stride == 0);
  for (const detail::Step& s : one.value()->steps) {
    if (s.part_count == 0) continue;
    CHECK(s.part_offset >= s.scratch_offset);
    CHECK(s.part_offset + s.part_count * s.part_stride <= s.scratch_offset + s.scratch_bytes);
  }
}

TEST_CASE("the arena reuses buffers along a chain") {
  auto exec = Executor::create(add_chain(10), {1}).value();
  CHECK(exec.step_count() == 10);
  // Nine intermediates of 16 KiB live two at a time; the output goes straight to the caller.
  CHECK(exec.intermediate_bytes() == 9 * 64 * 64 * 4);
  CHECK(exec.arena_bytes() == 2 * 64 * 64 * 4);
  auto out = exec.run({Tensor::from_vector(std::vector<float>(64 * 64, 0.5f), Shape{64, 64})}).value();
  for (float v : out[0].span<float>()) REQUIRE(v == 10.5f);
}

TEST_CASE("run_into allocates nothing in steady state") {
  const Tensor x = expected_mlp("x");
  for (int threads : {1, 2}) {
    auto exec = Executor::create(mlp(), {threads}).value();
    std::vector<Tensor> in{x}, out{Tensor::zeros(exec.output_type(0))};
    REQUIRE(exec.run_into(in, out).ok());  // the first run creates the workspace
    allocations = 0;
    counting = true;
    Status st;
    for (int i = 0; i < 10; ++i) st = exec.run_into(in, out);
    counting = false;
    CHECK(st.ok());
    CHECK(allocations.load() == 0);
  }
}

namespace {

/// Runs `exec` from 8 threads, `runs` times each; counts results that differ from a lone run.
void hammer(const Executor& exec, const std::vector<Tensor>& inputs, int runs) {
  const Tensor want = exec.run(inputs).value()[0];
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < runs; ++i) {
        auto out = exec.run(inputs);
        if (!out.ok()) ++failures;
        else if (!(*out)[0].equal(want)) ++mismatches;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures.load() == 0);
  CHECK(mismatches.load() == 0);
}

}  // namespace

TEST_CASE("concurrent runs on one executor give identical outputs") {
  hammer(Executor::create(mlp(), {2}).value(), {expected_mlp("x")}, 200);
  // A matmul big enough to split over the executor's pool: runs share the pool and the packed weights.
  GraphDef g;
  g.values = {{"x", f32({64, 256})}, {"w", f32({256, 128})}, {"", f32({64, 128})}, {"y", f32({64, 128})}};
  g.inputs = {0};
  g.outputs = {3};
  std::vector<float> w(256 * 128), x(64 * 256);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 5) * 0.5f - 1.0f;
  g.constants = {{1, "", Tensor::from_vector(w, Shape{256, 128}), false}};
  NodeDef mm;
  mm.op = "matmul";
  mm.inputs = {0, 1};
  mm.outputs = {2};
  NodeDef relu;
  relu.op = "relu";
  relu.inputs = {2};
  relu.outputs = {3};
  g.nodes = {mm, relu};
  hammer(Executor::create(Graph(g), {.threads = 2, .parallel_min_work = 0}).value(),
         {Tensor::from_vector(x, Shape{64, 256})}, 25);
}

TEST_CASE("gather reports a bad index as OUT_OF_RANGE and reads nothing out of bounds") {
  NodeDef node;
  node.op = "gather";
  const Tensor data = Tensor::from_vector(std::vector<float>{1, 2, 3}, Shape{3});
  auto bad = run_node(node, std::vector{data, Tensor::from_vector(std::vector<std::int32_t>{0, -4}, Shape{2})});
  CHECK(bad.error().to_string() ==
        "OUT_OF_RANGE: gather: index -4 (at position 1) is out of range for an axis of size 3");
  auto ok = run_node(node, std::vector{data, Tensor::from_vector(std::vector<std::int32_t>{-1, 0}, Shape{2})});
  REQUIRE(ok.ok());
  CHECK((*ok)[0].to_vector<float>() == std::vector<float>{3, 1});
}

TEST_CASE("run_node refuses what compile_op refuses") {
  NodeDef node;
  node.op = "exp";
  CHECK(run_node(node, std::vector{Tensor::zeros(DType::i32, {2})}).error().to_string() ==
        "INVALID_ARGUMENT: exp: does not compute on i32 (input 0 is i32 [2]; takes f32, f16 or bf16)");
  CHECK(run_node(node, std::vector{Tensor()}).error().to_string() == "INVALID_ARGUMENT: exp: input 0 holds no data");
}

TEST_CASE("a constant matmul with bias and relu over several packed blocks matches a plain loop") {
  // 37 x 700 @ 700 x 150 + bias, relu: several depth blocks, and column blocks split over threads.
  const std::int64_t m = 37, k = 700, n = 150;
  const auto a = values(m * k, 1), b = values(k * n, 2), bias = values(n, 3);
  GraphDef g;
  g.values = {{"x", f32({m, k})}, {"w", f32({k, n})}, {"b", f32({n})}, {"", f32({m, n})}, {"", f32({m, n})},
              {"y", f32({m, n})}};
  g.inputs = {0};
  g.outputs = {5};
  g.constants = {{1, "", Tensor::from_vector(b, Shape{k, n}), false},
                 {2, "", Tensor::from_vector(bias, Shape{n}), false}};
  auto node = [&](std::string op, std::vector<ValueId> in, ValueId out) {
    NodeDef nd;
    nd.op = std::move(op);
    nd.inputs = std::move(in);
    nd.outputs = {out};
    g.nodes.push_back(nd);
  };
  node("matmul", {0, 1}, 3);
  node("add", {3, 2}, 4);
  node("relu", {4}, 5);
  for (int threads : {1, 2}) {
    auto exec = Executor::create(Graph(g), {.threads = threads, .parallel_min_work = 0}).value();
    CHECK(exec.step_count() == 1);
    const auto y = exec.run({Tensor::from_vector(a, Shape{m, k})}).value()[0].to_vector<float>();
    int bad = 0;
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double want = bias[static_cast<std::size_t>(j)];
        for (std::int64_t d = 0; d < k; ++d)
          want += static_cast<double>(a[static_cast<std::size_t>(i * k + d)]) * b[static_cast<std::size_t>(d * n + j)];
        want = std::max(want, 0.0);
        if (std::abs(y[static_cast<std::size_t>(i * n + j)] - want) > 1e-5 * std::sqrt(double(k)) * (1 + std::abs(want)))
          ++bad;
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("conv2d over several im2col tiles, with fused relu, matches a plain loop") {
  // 16 900 output positions of 18 im2col rows: more than one tile, so tiles split over threads.
  const std::int64_t c = 2, h = 130, w = 130, o = 3;
  const auto x = values(c * h * w, 7), wt = values(o * c * 9, 8), bias = values(o, 9);
  GraphDef g;
  g.values = {{"x", f32({1, c, h, w})}, {"w", f32({o, c, 3, 3})}, {"b", f32({o})}, {"", f32({1, o, h, w})},
              {"y", f32({1, o, h, w})}};
  g.inputs = {0};
  g.outputs = {4};
  g.constants = {{1, "", Tensor::from_vector(wt, Shape{o, c, 3, 3}), false},
                 {2, "", Tensor::from_vector(bias, Shape{o}), false}};
  NodeDef conv;
  conv.op = "conv2d";
  conv.inputs = {0, 1, 2};
  conv.outputs = {3};
  conv.attrs["pads"] = std::vector<std::int64_t>{1, 1, 1, 1};
  NodeDef relu;
  relu.op = "relu";
  relu.inputs = {3};
  relu.outputs = {4};
  g.nodes = {conv, relu};
  auto at = [&](std::int64_t ci, std::int64_t iy, std::int64_t ix) -> double {
    if (iy < 0 || iy >= h || ix < 0 || ix >= w) return 0.0;
    return x[static_cast<std::size_t>((ci * h + iy) * w + ix)];
  };
  for (int threads : {1, 2}) {
    auto exec = Executor::create(Graph(g), {.threads = threads, .parallel_min_work = 0}).value();
    CHECK(exec.step_count() == 1);
    const auto y = exec.run({Tensor::from_vector(x, Shape{1, c, h, w})}).value()[0].to_vector<float>();
    int bad = 0;
    for (std::int64_t oc = 0; oc < o; ++oc) {
      for (std::int64_t oy = 0; oy < h; ++oy) {
        for (std::int64_t ox = 0; ox < w; ++ox) {
          double want = bias[static_cast<std::size_t>(oc)];
          for (std::int64_t ci = 0; ci < c; ++ci)
            for (std::int64_t ky = 0; ky < 3; ++ky)
              for (std::int64_t kx = 0; kx < 3; ++kx)
                want += at(ci, oy + ky - 1, ox + kx - 1) * wt[static_cast<std::size_t>(((oc * c + ci) * 3 + ky) * 3 + kx)];
          want = std::max(want, 0.0);
          if (std::abs(y[static_cast<std::size_t>((oc * h + oy) * w + ox)] - want) > 1e-5 * (1 + std::abs(want))) ++bad;
        }
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("the layer-norm chain runs as one step, and not when an intermediate has another reader") {
  // The cases' outputs are checked against NumPy by test_ops; here, which of them fused.
  for (int threads : {1, 2}) {
    CHECK(ops_case_steps("fused_layer_norm", threads) == 1);          // mean ... rsqrt, mul, weight, bias
    CHECK(ops_case_steps("fused_layer_norm_pow_div", threads) == 1);  // pow 2, sqrt, div, weight [1, 1, 33]
    CHECK(ops_case_steps("fused_layer_norm_bias_only", threads) == 1);
    CHECK(ops_case_steps("fused_layer_norm_width1", threads) == 1);
    CHECK(ops_case_steps("threads_fused_layer_norm", threads) == 1);
    // sub's output is also negated into a second output: the 9 ops run as 8 steps (only rsqrt joins
    // the add before it, as any unary op joins its producer).
    CHECK(ops_case_steps("layer_norm_unfused_reader", threads) == 8);
  }
}

TEST_CASE("a 16-bit convolution runs its residual add and activations as one step") {
  // The cases' outputs are checked against NumPy (rounded after each op) by test_ops; here, that they fused.
  for (const std::string t : {"f16", "bf16"})
    for (int threads : {1, 2}) {
      INFO(t, " at ", threads, " threads");
      CHECK(ops_case_steps(t + "_conv2d_residual_relu", threads) == 1);
      CHECK(ops_case_steps(t + "_conv2d_strided_residual_relu_neg", threads) == 1);
      CHECK(ops_case_steps(t + "_conv2d_exact_residual_exp", threads) == 1);
      CHECK(ops_case_steps("threads_" + t + "_conv2d_winograd_residual_relu", threads) == 1);
      CHECK(ops_case_steps("threads_" + t + "_conv2d_tiles_residual_sigmoid", threads) == 1);
    }
}

TEST_CASE("a per-channel product before a 1x1 convolution runs inside it, and only where that pays") {
  // The cases' outputs are checked against NumPy by test_ops; here, which products were absorbed.
  for (int threads : {1, 2}) {
    INFO(threads, " threads");
    // mean, fc1 + silu, fc2 + sigmoid, then the product, projection and residual add as one step.
    CHECK(ops_case_steps("threads_channel_scale_tiles", threads) == 4);
    CHECK(ops_case_steps("threads_channel_scale_turned", threads) == 1);  // product, projection, relu
    CHECK(ops_case_steps("channel_scale_batch2", threads) == 1);
    CHECK(ops_case_steps("channel_scale_per_image", threads) == 2);  // each image has its own scales
    CHECK(ops_case_steps("channel_scale_wide", threads) == 2);       // 16 output channels, 36 positions
  }
}

TEST_CASE("a matmul by the transpose of a constant packs the constant as stored and skips the transpose") {
  for (int threads : {1, 2}) {
    CHECK(ops_case_steps("matmul_transposed_weight", threads) == 1);  // transpose absorbed, bias fused
    CHECK(ops_case_steps("threads_matmul_transposed_weight", threads) == 1);
    CHECK(ops_case_steps("matmul_transposed_weight_shared", threads) == 2);  // the transpose is an output: it runs
  }
}

TEST_CASE("steps with little work run on the calling thread; parallel_min_work 0 lets every step split") {
  // torch_mlp: three small steps (a few thousand multiply-adds each).
  const auto serial = [](int threads, std::int64_t min_work) {
    return Executor::create(mlp(), {.threads = threads, .parallel_min_work = min_work}).value().serial_step_count();
  };
  const auto steps = Executor::create(mlp(), {.threads = 2}).value().step_count();
  CHECK(serial(2, ExecutorOptions{}.parallel_min_work) == steps);
  CHECK(serial(2, 0) == 0);
  CHECK(serial(1, ExecutorOptions{}.parallel_min_work) == 0);  // one thread: no pool to spare
  const auto product_serial = [](std::int64_t m, std::int64_t k, std::int64_t n) {
    GraphDef g;
    g.values = {{"x", f32({m, k})}, {"w", f32({k, n})}, {"y", f32({m, n})}};
    g.inputs = {0};
    g.outputs = {2};
    g.constants = {{1, "", Tensor::from_vector(values(k * n, 2), Shape{k, n}), false}};
    NodeDef mm;
    mm.op = "matmul";
    mm.inputs = {0, 1};
    mm.outputs = {2};
    g.nodes.push_back(mm);
    return Executor::create(Graph(g), {.threads = 2}).value().serial_step_count();
  };
  // The packed matmul of 64 x 1024 x 256 (16.8 M multiply-adds) is above the default and splits;
  // so does 8 x 256 x 256 (512 K, which the default of 2^20 kept on one thread), not 2 x 256 x 256.
  CHECK(product_serial(64, 1024, 256) == 0);
  CHECK(product_serial(8, 256, 256) == 0);
  CHECK(product_serial(2, 256, 256) == 1);
  // One row by a B beyond L2 (ResNet-18's classifier, 512 K multiply-adds, 2 MB of B) counts 4 per
  // element of B, and splits; one row by a 256 x 256 B (256 KB) stays on one thread.
  CHECK(product_serial(1, 512, 1000) == 0);
  CHECK(product_serial(1, 256, 256) == 1);
}

TEST_CASE("the zoo transformer's layer norms and attention block fuse as both exporters emit them") {
  // Two nn.LayerNorm per model, 9 ops each: 45 nodes ran as 32 steps before the chain was fused, and
  // 18 before the attention block was.
  const auto steps = [](const char* stem) {
    const auto g = load_graph(fs::path(RML_TEST_DATA_DIR) / "zoo" / stem).value();
    return Executor::create(g, {.threads = 2}).value().step_count();
  };
  // PyTorch route (45 nodes): the Q, K, V and output transposes, both matmuls and the softmax, 8 steps,
  // run as one.
  CHECK(steps("transformer_b1") == 11);
  // ONNX route (47 nodes; 35 steps unfused, 21 with the layer norms fused): Q is divided by the scale
  // before the product, so its transpose and div run on their own; K's and V's transposes, the matmuls,
  // the softmax and the output's transpose, 6 steps, run as one.
  CHECK(steps("transformer_b1_onnx") == 16);
}
