// Every op against NumPy: the cases tests/data/ops/gen_ops.py wrote, run by the executor and,
// for single-node graphs, by run_node (eager).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

#include "rml/exec/eager.hpp"
#include "rml/exec/executor.hpp"
#include "rml/exec/kernels/conv.hpp"
#include "rml/exec/kernels/winograd.hpp"
#include "rml/io/graph_io.hpp"
#include "rml/io/safetensors.hpp"

namespace fs = std::filesystem;
using namespace rml;

namespace {

struct OpCase {
  std::string name;
  Graph graph;
  std::vector<Tensor> inputs, expected;
  double rtol = 0, atol = 0;
  std::string error;  // a code name the run must fail with, or empty
};

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(fs::path(RML_TEST_DATA_DIR) / "ops"))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

OpCase load_case(const std::string& name) {
  const fs::path stem = fs::path(RML_TEST_DATA_DIR) / "ops" / name;
  OpCase c;
  c.name = name;
  c.graph = load_graph(stem).value();
  auto reader = SafetensorsReader::open(fs::path(stem.string() + ".safetensors")).value();
  for (std::size_t k = 0; k < c.graph.def().inputs.size(); ++k)
    c.inputs.push_back(reader.get("input." + std::to_string(k)).value());
  for (std::size_t k = 0; k < c.graph.def().outputs.size(); ++k)
    c.expected.push_back(reader.get("expected." + std::to_string(k)).value());
  const auto& meta = c.graph.def().metadata;
  if (auto it = meta.find("error"); it != meta.end()) c.error = it->second;
  if (auto it = meta.find("rtol"); it != meta.end()) c.rtol = std::stod(it->second);
  if (auto it = meta.find("atol"); it != meta.end()) c.atol = std::stod(it->second);
  return c;
}

template <typename T>
std::string compare_exact(const Tensor& got, const Tensor& want) {
  const auto g = got.span<T>(), w = want.span<T>();
  for (std::size_t i = 0; i < w.size(); ++i)
    if (g[i] != w[i])
      return "element " + std::to_string(i) + ": " + std::to_string(g[i]) + " != " + std::to_string(w[i]);
  return {};
}

/// Empty when `got` matches `want` within the case's tolerance; otherwise the first mismatch.
/// Integers and bools compare exactly; f16 and bf16 widened to f32, and bit for bit (sign of zero
/// included) when the tolerance is 0.
std::string compare(const OpCase& c, const Tensor& got, const Tensor& want) {
  if (got.type() != want.type()) return "type " + got.type().to_string() + " != " + want.type().to_string();
  switch (want.dtype()) {
    case DType::i32:
      return compare_exact<std::int32_t>(got, want);
    case DType::i64:
      return compare_exact<std::int64_t>(got, want);
    case DType::boolean:
      return compare_exact<bool>(got, want);
    default:
      break;
  }
  std::vector<float> g, w;
  std::vector<std::uint16_t> gb, wb;  // 16-bit patterns
  if (want.dtype() == DType::f32) {
    g = got.to_vector<float>(), w = want.to_vector<float>();
  } else {
    visit_dtype(want.dtype(), [&](auto d) {
      using H = dtype_type_t<decltype(d)::value>;
      if constexpr (std::is_same_v<H, f16> || std::is_same_v<H, bf16>) {
        for (H h : got.span<H>()) g.push_back(static_cast<float>(h)), gb.push_back(h.bits);
        for (H h : want.span<H>()) w.push_back(static_cast<float>(h)), wb.push_back(h.bits);
      }
    });
  }
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double a = g[i], b = w[i];
    if (std::isnan(b) && std::isnan(a)) continue;
    if (std::isinf(b) && a == b) continue;
    const bool bits_differ = !wb.empty() && c.rtol == 0 && c.atol == 0 && gb[i] != wb[i];
    if (bits_differ || !(std::abs(a - b) <= c.atol + c.rtol * std::abs(b)))
      return "element " + std::to_string(i) + ": " + std::to_string(a) + " != " + std::to_string(b) + " (rtol " +
             std::to_string(c.rtol) + ", atol " + std::to_string(c.atol) + ")";
  }
  return {};
}

void check_outputs(const OpCase& c, const std::vector<Tensor>& outputs, const char* how) {
  REQUIRE(outputs.size() == c.expected.size());
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    INFO(c.name, " ", how, " output ", k);
    CHECK(compare(c, outputs[k], c.expected[k]) == "");
  }
}

}  // namespace

TEST_CASE("every op matches NumPy (executor, 1 and 2 threads)") {
  const auto names = case_names();
  REQUIRE(names.size() > 100);
  for (const auto& name : names) {
    INFO("case ", name);
    const OpCase c = load_case(name);
    // Both executors live at once, so the second's arena cannot be the first's memory, which holds
    // the right values wherever the two lay a buffer out alike: a part that skipped its share of a
    // step could then pass.
    std::vector<Executor> execs;
    for (int threads : {1, 2}) {
      // Every step may split, however small (the threads_* cases are sized to split in each kernel).
      auto exec = Executor::create(c.graph, {.threads = threads, .parallel_min_work = 0});
      REQUIRE_MESSAGE(exec.ok(), exec.error().to_string());
      execs.push_back(std::move(*exec));
    }
    for (int threads : {1, 2}) {
      auto out = execs[static_cast<std::size_t>(threads - 1)].run(c.inputs);
      if (!c.error.empty()) {
        CHECK(out.error().code_name() == c.error);
        continue;
      }
      REQUIRE_MESSAGE(out.ok(), out.error().to_string());
      check_outputs(c, *out, threads == 1 ? "executor x1" : "executor x2");
    }
  }
}

TEST_CASE("two-part splits give the same bits wherever they split") {
  // Executors move each step's split toward the faster thread (thread_pool.hpp, part_share): every
  // kernel must compute each item the same on either side of it. Each case runs at 2 threads with
  // the split forced to a range of shares, and must match the even split bit for bit.
  struct Reset {
    ~Reset() { detail::part_share_for_testing.store(0.0f); }
  } reset;
  int compared = 0;
  for (const auto& name : case_names()) {
    INFO("case ", name);
    const OpCase c = load_case(name);
    if (!c.error.empty()) continue;
    auto exec = Executor::create(c.graph, {.threads = 2, .parallel_min_work = 0});
    REQUIRE_MESSAGE(exec.ok(), exec.error().to_string());
    detail::part_share_for_testing.store(0.5f);
    const auto even = exec->run(c.inputs);
    REQUIRE_MESSAGE(even.ok(), even.error().to_string());
    for (float share : {0.3f, 0.41f, 0.62f, 0.7f}) {
      INFO("share ", share);
      detail::part_share_for_testing.store(share);
      const auto out = exec->run(c.inputs);
      REQUIRE_MESSAGE(out.ok(), out.error().to_string());
      for (std::size_t k = 0; k < out->size(); ++k) {
        const Tensor& a = (*out)[k];
        const Tensor& b = (*even)[k];
        REQUIRE(a.nbytes() == b.nbytes());
        CHECK(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0);
      }
      check_outputs(c, *out, "executor x2, uneven");
    }
    ++compared;
  }
  CHECK(compared > 100);
}

TEST_CASE("3x3 convolutions match NumPy through each Winograd transform and without") {
  // The conv2d_winograd_* cases run through F(2, 3) above (the default); here through the direct path
  // and through F(4, 3), whose rounding error may exceed the suite's tolerance (docs/ops.md): it is
  // held to four times the case's tolerance, which a wrong transform coefficient exceeds by far.
  int ran = 0;
  for (const auto& name : case_names()) {
    if (name.rfind("conv2d_winograd_", 0) != 0) continue;
    INFO("case ", name);
    OpCase c = load_case(name);
    for (int threads : {1, 2}) {
      std::vector<Tensor> runs[3];
      for (Winograd w : {Winograd::off, Winograd::f2, Winograd::f4}) {
        ExecutorOptions options;
        options.threads = threads;
        options.parallel_min_work = 0;  // the 2-thread runs split, as in the cases above
        options.winograd = w;
        auto out = Executor::create(c.graph, options).value().run(c.inputs);
        REQUIRE_MESSAGE(out.ok(), out.error().to_string());
        runs[static_cast<int>(w)] = std::move(*out);
      }
      check_outputs(c, runs[0], threads == 1 ? "direct x1" : "direct x2");
      check_outputs(c, runs[1], threads == 1 ? "F(2, 3) x1" : "F(2, 3) x2");
      OpCase loose = c;
      loose.rtol *= 4, loose.atol *= 4;
      check_outputs(loose, runs[2], threads == 1 ? "F(4, 3) x1" : "F(4, 3) x2");
      // Each transform rounds differently from the direct path: identical outputs would mean the
      // convolution never took it.
      const auto direct = runs[0][0].span<float>();
      for (int k : {1, 2}) {
        const auto got = runs[k][0].span<float>();
        CHECK_FALSE(std::equal(got.begin(), got.end(), direct.begin(), direct.end()));
      }
    }
    ++ran;
  }
  CHECK(ran == 12);
}

TEST_CASE("a turned 14x14 Winograd pass whose V blocks overflow L1 runs as two ranges at 1 thread") {
  // conv2d_winograd_ranges_one_thread_relu's shape: 49 F(2, 3) tiles over 256 channels. One pass of
  // them, rounded up to 64 columns, makes each element's V block 256 * 64 * 4 = 64 KB; a range of 25,
  // rounded up to 32, makes it 32 KB. So the ranges are taken when L1 holds 32 KB but not 64 KB and
  // the products run turned (with AVX2's and AVX-512's panels; SSE's 8-wide ones waste too little).
  Conv2dPlan p;
  p.n = 1, p.c = p.cg = 256, p.h = p.w = p.oh = p.ow = 14, p.o = p.og = 64;
  p.kh = p.kw = 3, p.pad_top = p.pad_left = 1, p.has_bias = true;
  const std::vector<float> w(static_cast<std::size_t>(64 * 256 * 9), 0.5f);
  const auto one = detail::pack_winograd_weights<2>(p, w.data(), 1);
  const auto two = detail::pack_winograd_weights<2>(p, w.data(), 2);
  REQUIRE(one->total == 49);
  const auto l1 = Eigen::l1CacheSize();
  const bool ranges = one->turned && l1 >= 32 * 1024 && l1 < 64 * 1024;
  INFO("L1 ", l1, " bytes, turned ", one->turned);
  CHECK(one->parts == (ranges ? 2 : 1));
  CHECK(one->chunk == (ranges ? 32 : 64));
  CHECK(one->copies() == 1);  // the ranges run in turn in one part's scratch
  // At 2 threads the tiles always split into two ranges run in parallel, each with its own scratch.
  CHECK(two->parts == 2);
  CHECK(two->copies() == 2);
  // The convolution step plans that many parts' scratch (PartScratch), and nothing shared.
  for (int threads : {1, 2}) {
    const auto conv = detail::pack_conv_weights(p, w.data(), threads);
    REQUIRE(conv->winograd);
    CHECK(conv->part_count() == threads);
    CHECK(conv->scratch_bytes() == 0);
  }
}

TEST_CASE("16-bit matmul and conv2d match NumPy with their weights widened at create") {
  int ran = 0;
  for (const auto& name : case_names()) {
    if (name.rfind("f16_", 0) != 0 && name.rfind("bf16_", 0) != 0) continue;
    if (name.find("matmul") == std::string::npos && name.find("conv2d") == std::string::npos) continue;
    INFO("case ", name);
    const OpCase c = load_case(name);
    ExecutorOptions options;
    options.threads = 1;
    options.widen_16bit_weights = true;
    auto exec = Executor::create(c.graph, options);
    REQUIRE_MESSAGE(exec.ok(), exec.error().to_string());
    auto out = exec->run(c.inputs);
    REQUIRE_MESSAGE(out.ok(), out.error().to_string());
    check_outputs(c, *out, "executor x1, weights widened");
    ++ran;
  }
  CHECK(ran == 36);  // every f16_ and bf16_ matmul or conv2d case (the residual ones run unfused here)
}

TEST_CASE("16-bit matmul packs a constant transposed weight as stored, unless its weights are widened") {
  // The outputs are checked against NumPy above; here, that the 16-bit GEMM took the matmul (the
  // transpose is absorbed into its packing: matmul and relu remain) and the widened path did not.
  for (const char* name : {"gemm16_bf16_matmul_linear_relu", "gemm16_f16_matmul_linear_relu"}) {
    INFO("case ", name);
    const Graph graph = load_case(name).graph;
    CHECK(Executor::create(graph, {1}).value().step_count() == 2);
    ExecutorOptions widened;
    widened.widen_16bit_weights = true;
    CHECK(Executor::create(graph, widened).value().step_count() == 3);
  }
}

TEST_CASE("binary ops with a constant scalar fuse into their producer's step") {
  // The outputs are checked against NumPy above; here, that the fusion happened (and did not where
  // the scalar would broadcast the value to a larger shape).
  const std::pair<const char*, std::size_t> cases[] = {
      {"fused_relu6_conv", 1},
      {"fused_scalar_chain", 1},
      {"fused_scalar_nan", 1},
      {"chain_scalar_broadcasts", 2},
      {"fused_relu6_depthwise_lanes", 1},
      {"fused_clip_depthwise_rows", 1},
      {"fused_clip_pointwise_residual", 1},
      {"fused_relu6_transposed_residual", 1},
      {"fused_silu_pointwise", 1},
      {"fused_silu_pointwise_residual", 1},
      {"fused_silu_transposed", 1},
      {"fused_silu_winograd", 1}};
  for (const auto& [name, steps] : cases) {
    INFO("case ", name);
    CHECK(Executor::create(load_case(name).graph, {1}).value().step_count() == steps);
  }
}

TEST_CASE("a residual add fuses into the convolution before it") {
  // The outputs are checked against NumPy above, at 1 and 2 threads; here, that conv2d, add and relu
  // ran as one step, through each packed path, and that a residual that broadcasts stayed an add.
  const std::pair<const char*, std::size_t> cases[] = {{"conv2d_blocked_residual_tiles", 1},
                                                       {"conv2d_blocked_residual_small_plane", 1},
                                                       {"conv2d_blocked_residual_pointwise", 1},
                                                       {"conv2d_blocked_residual_strided", 1},
                                                       {"conv2d_winograd_residual", 1},
                                                       {"conv2d_winograd_residual_left", 1},
                                                       {"conv2d_blocked_residual_broadcast", 2}};
  for (const auto& [name, steps] : cases) {
    INFO("case ", name);
    for (Winograd w : {Winograd::off, Winograd::f2, Winograd::f4}) {
      ExecutorOptions options;
      options.winograd = w;
      CHECK(Executor::create(load_case(name).graph, options).value().step_count() == steps);
    }
  }
}

TEST_CASE("a max pool fuses into the convolution whose output only it reads") {
  // The outputs are checked against NumPy above, at 1 and 2 threads; here, that the convolution,
  // its activation and the pool ran as one step (conv.hpp's pooled_conv2d) at both thread counts.
  // The f16 ones through the f32 kernels (widened_packed_conv2d), rounding only the pool's outputs.
  for (const char* name : {"conv_max_pool_stem_relu_3x3", "conv_max_pool_bias_odd_rows_3x3", "conv_max_pool_relu6_2x2",
                           "f16_conv_max_pool_stem_relu_3x3", "f16_conv_max_pool_bias_2x2"}) {
    INFO("case ", name);
    for (int threads : {1, 2})
      CHECK(Executor::create(load_case(name).graph, {.threads = threads, .parallel_min_work = 0}).value().step_count() ==
            1);
  }
}

TEST_CASE("every single-node case matches NumPy through run_node") {
  int ran = 0;
  for (const auto& name : case_names()) {
    const OpCase c = load_case(name);
    const GraphDef& g = c.graph.def();
    if (g.nodes.size() != 1 || g.outputs != g.nodes[0].outputs) continue;
    INFO("case ", name);
    // The node's inputs, in order: graph inputs are fed, constants come from the graph.
    std::vector<Tensor> args;
    for (ValueId v : g.nodes[0].inputs) {
      const auto in = std::find(g.inputs.begin(), g.inputs.end(), v);
      if (in != g.inputs.end()) {
        args.push_back(c.inputs[static_cast<std::size_t>(in - g.inputs.begin())]);
        continue;
      }
      for (const auto& k : g.constants)
        if (k.value == v) args.push_back(k.data);
    }
    REQUIRE(args.size() == g.nodes[0].inputs.size());
    auto out = run_node(g.nodes[0], args);
    ++ran;
    if (!c.error.empty()) {
      CHECK(out.error().code_name() == c.error);
      continue;
    }
    REQUIRE_MESSAGE(out.ok(), out.error().to_string());
    check_outputs(c, *out, "run_node");
  }
  CHECK(ran > 100);
}

TEST_CASE("erf and exact gelu track the C library's erf across the whole range") {
  // The kernels use a vectorised approximation; the reference is std::erf in double precision.
  std::vector<float> xs;
  for (int i = -60000; i <= 60000; ++i) xs.push_back(static_cast<float>(i) * 1e-4f);
  const Tensor x = Tensor::from_vector(xs, {static_cast<std::int64_t>(xs.size())});
  NodeDef erf_node, gelu_node;
  erf_node.op = "erf", gelu_node.op = "gelu";
  erf_node.inputs = gelu_node.inputs = {0};
  erf_node.outputs = gelu_node.outputs = {1};
  const auto erf_out = run_node(erf_node, std::span(&x, 1));
  const auto gelu_out = run_node(gelu_node, std::span(&x, 1));
  REQUIRE(erf_out.ok());
  REQUIRE(gelu_out.ok());
  const auto e = (*erf_out)[0].span<float>(), g = (*gelu_out)[0].span<float>();
  double worst_abs = 0, worst_rel_small = 0, worst_gelu = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i], want = std::erf(v);
    worst_abs = std::max(worst_abs, std::abs(e[i] - want));
    if (v != 0 && std::abs(v) < 0.5) worst_rel_small = std::max(worst_rel_small, std::abs(e[i] - want) / std::abs(want));
    const double gelu = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    worst_gelu = std::max(worst_gelu, std::abs(g[i] - gelu) / (1 + std::abs(gelu)));  // allclose's measure
  }
  CHECK(worst_abs < 4e-7);
  CHECK(worst_rel_small < 1e-6);
  CHECK(worst_gelu < 1e-6);
  MESSAGE("erf max abs error " << worst_abs << ", max relative error below 0.5 " << worst_rel_small
                               << "; gelu max error / (1 + |gelu|) " << worst_gelu);
}
