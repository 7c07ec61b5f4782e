// Eager ops, trace errors, finalize/run, devices, optimize, and the split -> merge round trip on
// random traced graphs: what the parts compute together is what the source computed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "rml/core/equal.hpp"
#include "rml/edit/edit.hpp"
#include "rml/exec/edit_hooks.hpp"
#include "rml/io/graph_io.hpp"
#include "rml/io/safetensors.hpp"

using namespace rml;

namespace {

Tensor random_tensor(std::mt19937& rng, Shape shape) {
  std::normal_distribution<float> d(0.0F, 1.0F);
  std::vector<float> v(static_cast<std::size_t>(shape.numel()));
  for (float& e : v) e = d(rng);
  return Tensor::from_vector<float>(v, std::move(shape));
}

// A random model over two f32 [4, 8] inputs: unary and binary ops, broadcast constants, matmuls
// with constant weights, reshape round trips, repeated subexpressions and dead branches.
TraceFunction random_model(std::uint32_t seed) {
  return [seed](const std::vector<Tensor>& in) {
    std::mt19937 rng(seed);
    const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    std::vector<Tensor> live = in;
    const auto operand = [&] { return live[live.size() - 1 - pick(std::min<std::size_t>(live.size(), 4))]; };
    const std::size_t steps = 3 + pick(10);
    for (std::size_t s = 0; s < steps; ++s) {
      const Tensor a = operand(), b = operand();
      switch (pick(10)) {
        case 0:
          live.push_back(ops::relu(a));
          break;
        case 1:
          live.push_back(ops::tanh(a));
          break;
        case 2:
          live.push_back(ops::add(a, b));
          break;
        case 3:
          live.push_back(ops::mul(a, random_tensor(rng, {8})));
          break;
        case 4:
          live.push_back(ops::add(ops::matmul(a, random_tensor(rng, {8, 8})), random_tensor(rng, {8})));
          break;
        case 5:
          live.push_back(ops::reshape(ops::neg(ops::reshape(a, {32})), {4, 8}));
          break;
        case 6:
          live.push_back(ops::add(ops::relu(a), ops::relu(a)));
          break;  // CSE fodder
        case 7:
          live.push_back(ops::copy(ops::maximum(a, b)));
          break;
        case 8:
          (void)ops::sigmoid(a);
          live.push_back(ops::sub(a, b));
          break;  // a dead branch
        default:
          live.push_back(ops::expand(ops::sum(a, {1}, true), {4, 8}));
          break;
      }
    }
    std::vector<Tensor> out = {live.back()};
    if (pick(2)) out.push_back(live[live.size() / 2]);
    return out;
  };
}

Graph random_graph(std::uint32_t seed) {
  return trace(random_model(seed), {{"a", DType::f32, {4, 8}}, {"b", DType::f32, {4, 8}}}, "random").value();
}

std::vector<Tensor> run(Graph graph, const std::vector<Tensor>& inputs) {
  const Status finalized = graph.finalize();
  REQUIRE_MESSAGE(finalized.ok(), finalized.to_string());
  auto out = graph.run(inputs);
  REQUIRE_MESSAGE(out.ok(), out.error().to_string());
  return *out;
}

// `inputs`, given in the order of `names`, reordered to follow `graph`'s inputs (a split and merge
// keeps input names, not necessarily their order).
std::vector<Tensor> by_input_name(const Graph& graph, const std::vector<std::string>& names,
                                  const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out;
  for (const std::string& name : graph.input_names())
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) out.push_back(inputs[i]);
  REQUIRE(out.size() == inputs.size());
  return out;
}

void check_close(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].type() == b[i].type());
    const auto x = a[i].to_vector<float>(), y = b[i].to_vector<float>();
    for (std::size_t k = 0; k < x.size(); ++k) REQUIRE(std::fabs(x[k] - y[k]) <= 1e-4F * (1.0F + std::fabs(x[k])));
  }
}

}  // namespace

TEST_CASE("eager ops compute at once") {
  const Tensor x = Tensor::from_vector<float>({1, -2, 3, -4}, {2, 2});
  CHECK(ops::relu(x).to_vector<float>() == std::vector<float>{1, 0, 3, 0});
  CHECK(ops::add(x, x).to_vector<float>() == std::vector<float>{2, -4, 6, -8});
  CHECK(ops::matmul(x, x).to_vector<float>() == std::vector<float>{-5, 6, -9, 10});
  CHECK(ops::sum(x, {1}, true).shape() == Shape{2, 1});
  CHECK(ops::argmax(x, 1).to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 0});
  const Tensor n = Tensor::from_vector<std::int32_t>({-7, 7, -7, 7}, {4});
  const Tensor d = Tensor::from_vector<std::int32_t>({3, -3, -3, 3}, {4});
  CHECK(ops::mod(n, d).to_vector<std::int32_t>() == std::vector<std::int32_t>{2, -2, -1, 1});
  CHECK(ops::mod(n, d, true).to_vector<std::int32_t>() == std::vector<std::int32_t>{-1, 1, -1, 1});
  CHECK(ops::pow(d, Tensor::from_vector<std::int32_t>({3}, {1})).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{27, -27, -27, 27});
  CHECK_THROWS_AS((void)ops::mod(n, Tensor::from_vector<std::int32_t>({0}, {1})), Error);
  const Tensor bad = Tensor::from_vector<float>({1, 2, 3}, {3});
  CHECK_THROWS_AS((void)ops::add(x, bad), Error);
  try {
    (void)ops::matmul(x, bad);
  } catch (const Error& e) {
    CHECK(e.code() == Code::invalid_argument);
    CHECK(std::string(e.what()).find("matmul") != std::string::npos);
  }
}

TEST_CASE("trace: type errors come back as its result; other exceptions as INTERNAL") {
  const auto typed = trace([](const std::vector<Tensor>& x) { return std::vector<Tensor>{ops::add(x[0], x[1])}; },
                           {{"a", DType::f32, {2, 3}}, {"b", DType::f32, {4}}});
  REQUIRE_FALSE(typed.ok());
  CHECK(typed.error().code() == Code::invalid_argument);
  CHECK(typed.error().message().rfind("trace: add", 0) == 0);
  const auto thrown = trace([](const std::vector<Tensor>&) -> std::vector<Tensor> { throw std::runtime_error("boom"); },
                            {{"a", DType::f32, {2}}});
  CHECK(thrown.error().code() == Code::internal);
  CHECK(thrown.error().message() == "trace: the function threw: boom");
  CHECK(trace([](const std::vector<Tensor>& x) { return x; }, {{"a", DType::f32, {2}}, {"a", DType::f32, {2}}})
            .error()
            .code() == Code::invalid_argument);
  // A symbolic tensor kept past its trace refuses.
  Tensor leaked;
  REQUIRE(trace(
              [&](const std::vector<Tensor>& x) {
                leaked = x[0];
                return std::vector<Tensor>{ops::relu(x[0])};
              },
              {{"a", DType::f32, {2}}})
              .ok());
  CHECK_THROWS_AS((void)ops::relu(leaked), Error);
  // An input returned as it is comes out through a copy, under the output's name.
  const Graph identity =
      trace([](const std::vector<Tensor>& x) { return x; }, {{"a", DType::f32, {2}}}, "id", {"b"}).value();
  CHECK(identity.output_names() == std::vector<std::string>{"b"});
  CHECK(identity.def().nodes.size() == 1);
}

TEST_CASE("finalize and run; finalized graphs refuse merge, split, extract and optimize") {
  Graph g = trace([](const std::vector<Tensor>& x) { return std::vector<Tensor>{ops::relu(x[0])}; },
                  {{"x", DType::f32, {2}}}, "t", {"y"})
                .value();
  CHECK(g.run({Tensor::from_vector<float>({1, -1}, {2})}).error().code() == Code::failed_precondition);
  REQUIRE(g.finalize().ok());
  CHECK(g.run({Tensor::from_vector<float>({1, -1}, {2})}).value()[0].to_vector<float>() == std::vector<float>{1, 0});
  CHECK(g.optimize().code() == Code::failed_precondition);
  CHECK(split(g, [](const Node&) { return std::string("a"); }).error().message() ==
        "split: the graph is finalized; split before finalize()");
  CHECK(extract(g, {}, {g.node("x")->output(0).value()}).error().code() == Code::failed_precondition);
  CHECK(g.to(Device::cpu(1)).code() == Code::failed_precondition);
  Graph h = trace([](const std::vector<Tensor>& x) { return std::vector<Tensor>{ops::neg(x[0])}; },
                  {{"y", DType::f32, {2}}}, "t", {"z"})
                .value();
  CHECK(g.merge(h, {{"y", "y"}}).error().message() == "merge: this graph is finalized; merge before finalize()");
}

TEST_CASE("a graph merged across cpu:0 and cpu:1 runs in two stages") {
  std::vector<GraphPart> parts;
  parts.push_back({"encoder", trace([](const std::vector<Tensor>& x) { return std::vector<Tensor>{ops::relu(x[0])}; },
                                    {{"x", DType::f32, {2, 3}}}, "t", {"h"})
                                  .value()});
  parts.push_back({"head", trace([](const std::vector<Tensor>& x) { return std::vector<Tensor>{ops::add(x[0], x[0])}; },
                                 {{"h", DType::f32, {2, 3}}}, "t", {"y"})
                               .value()});
  REQUIRE(parts[1].graph.to(Device::cpu(1)).ok());
  MergedGraph merged = merge(parts, {{{"encoder", "h"}, {"head", "h"}}}).value();
  REQUIRE(merged.graph.finalize().ok());
  const Tensor x = Tensor::from_vector<float>({1, -2, 3, -4, 5, -6}, {2, 3});
  CHECK(merged.graph.run({x}).value()[0].to_vector<float>() == std::vector<float>{2, 0, 6, 0, 10, 0});
}

TEST_CASE("split -> merge computes what the source computed, on 120 random traced graphs") {
  std::mt19937 rng(5);
  int round_trips = 0, refused = 0;
  for (std::uint32_t seed = 0; seed < 120; ++seed) {
    const std::vector<Tensor> inputs = {random_tensor(rng, {4, 8}), random_tensor(rng, {4, 8})};
    Graph source = random_graph(seed);
    const std::vector<Tensor> expected = run(source, inputs);
    Graph graph = random_graph(seed);
    const std::vector<std::string> in_names = graph.input_names(), out_names = graph.output_names();
    Result<SplitGraph> parts = Status(Code::internal, "unset");
    if (seed % 2 == 0 && graph.def().nodes.size() >= 2) {
      parts = split(graph, graph.min_value_cut().value());
    } else {
      std::mt19937 assign(seed);
      const GraphDef before = graph.def();
      parts = split(graph, [&](const Node&) { return std::string(1, static_cast<char>('a' + assign() % 3)); });
      if (!parts.ok()) {
        CHECK(parts.error().code() == Code::invalid_argument);  // parts in a cycle
        CHECK(assert_structural_equal(graph.def(), before).ok());
        ++refused;
        continue;
      }
    }
    REQUIRE_MESSAGE(parts.ok(), parts.error().to_string());
    MergedGraph merged = merge(parts->parts, parts->connections).value();
    std::vector<std::string> merged_inputs = merged.graph.input_names(), sorted_inputs = in_names;
    std::sort(merged_inputs.begin(), merged_inputs.end());
    std::sort(sorted_inputs.begin(), sorted_inputs.end());
    CHECK(merged_inputs == sorted_inputs);
    std::vector<std::string> merged_outputs = merged.graph.output_names(), sorted_outputs = out_names;
    std::sort(merged_outputs.begin(), merged_outputs.end());
    std::sort(sorted_outputs.begin(), sorted_outputs.end());
    CHECK(merged_outputs == sorted_outputs);
    // Outputs by name (a split may list them in another order).
    std::vector<Tensor> got = run(merged.graph, by_input_name(merged.graph, in_names, inputs)), by_name;
    for (const std::string& name : out_names)
      for (std::size_t i = 0; i < merged_outputs.size(); ++i)
        if (merged.graph.output_names()[i] == name) by_name.push_back(got[i]);
    check_close(by_name, expected);
    ++round_trips;
  }
  CHECK(round_trips >= 60);
  MESSAGE(round_trips << " round trips, " << refused << " cyclic partitions refused");
}

TEST_CASE("optimize preserves outputs on 120 random traced graphs and never grows them") {
  std::mt19937 rng(9);
  for (std::uint32_t seed = 0; seed < 120; ++seed) {
    const std::vector<Tensor> inputs = {random_tensor(rng, {4, 8}), random_tensor(rng, {4, 8})};
    Graph graph = random_graph(seed);
    const std::vector<Tensor> expected = run(random_graph(seed), inputs);
    const std::size_t nodes_before = graph.def().nodes.size();
    const auto names = graph.output_names();
    REQUIRE(graph.optimize().ok());
    CHECK(graph.def().nodes.size() <= nodes_before);
    CAPTURE(seed);
    CHECK(graph.output_names() == names);
    check_close(run(graph, inputs), expected);
  }
}

TEST_CASE("optimize: dead code, CSE, identities, constant folding, bias before its matmul") {
  Graph g = trace(
                [](const std::vector<Tensor>& x) {
                  const Tensor w = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
                  (void)ops::exp(x[0]);                                              // dead
                  const Tensor a = ops::relu(x[0]), b = ops::relu(x[0]);             // common subexpression
                  const Tensor c = ops::copy(ops::reshape(ops::add(a, b), {2, 2}));  // identities
                  const Tensor bias = ops::neg(ops::sum(x[0], {0}, false));          // computed after the matmul below
                  const Tensor m = ops::matmul(c, w);
                  return std::vector<Tensor>{ops::add(m, ops::relu(bias))};
                },
                {{"x", DType::f32, {2, 2}}}, "t", {"y"})
                .value();
  const Tensor x = Tensor::from_vector<float>({1, -2, 3, 4}, {2, 2});
  const std::vector<Tensor> expected = run(g, {x});
  REQUIRE(g.optimize().ok());
  std::vector<std::string> ops_left;
  for (const NodeDef& n : g.def().nodes) ops_left.push_back(n.op);
  CAPTURE(to_debug_string(ops_left));
  CHECK(ops_left == std::vector<std::string>{"relu", "add", "sum", "neg", "relu", "matmul", "add"});
  check_close(run(g, {x}), expected);

  // A node reading only constants folds into a constant.
  GraphDef def;
  def.values = {{"x", {DType::f32, {2}}}, {"c", {DType::f32, {2}}}, {"", {DType::f32, {2}}}, {"y", {DType::f32, {2}}}};
  def.inputs = {0};
  def.constants.push_back({1, "c", Tensor::from_vector<float>({-1, 2}, {2}), true});
  def.nodes.push_back({"relu", {1}, {2}, "", {}, std::nullopt, {}});
  def.nodes.push_back({"add", {0, 2}, {3}, "", {}, std::nullopt, {}});
  def.outputs = {3};
  Graph folded(def);
  REQUIRE(folded.optimize().ok());
  REQUIRE(folded.def().nodes.size() == 1);
  REQUIRE(folded.def().constants.size() == 1);
  CHECK(folded.def().constants[0].data.to_vector<float>() == std::vector<float>{0, 2});
}

// ---- the model zoo: split -> merge and optimize against PyTorch's recorded outputs ----

namespace {

struct ZooCase {
  Graph graph;
  std::vector<Tensor> inputs, expected;
};

ZooCase load_zoo(const std::string& stem) {
  const std::filesystem::path dir = std::filesystem::path(RML_TEST_DATA_DIR) / "zoo";
  ZooCase c{load_graph(dir / (stem + ".json")).value(), {}, {}};
  std::string reference = stem;
  if (reference.size() > 5 && reference.substr(reference.size() - 5) == "_onnx") reference.resize(reference.size() - 5);
  const auto expected = SafetensorsReader::open(dir / (reference + ".expected.safetensors")).value();
  for (std::size_t i = 0; i < c.graph.def().inputs.size(); ++i)
    c.inputs.push_back(expected.get("input." + std::to_string(i)).value());
  for (std::size_t i = 0; i < c.graph.def().outputs.size(); ++i)
    c.expected.push_back(expected.get("output." + std::to_string(i)).value());
  return c;
}

// Outputs of `graph` (run after finalize), reordered to follow `names`.
std::vector<Tensor> run_by_name(Graph graph, const ZooCase& c, const std::vector<std::string>& names) {
  const std::vector<std::string> order = graph.output_names();
  const std::vector<Tensor> out = run(graph, by_input_name(graph, c.graph.input_names(), c.inputs));
  std::vector<Tensor> result;
  for (const std::string& name : names)
    for (std::size_t i = 0; i < order.size(); ++i)
      if (order[i] == name) result.push_back(out[i]);
  return result;
}

void check_reference(const std::vector<Tensor>& got, const std::vector<Tensor>& expected) {
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    REQUIRE(got[i].shape() == expected[i].shape());
    if (got[i].dtype() != DType::f32) {
      CHECK(got[i].equal(expected[i]));
      continue;
    }
    const auto a = got[i].to_vector<float>(), b = expected[i].to_vector<float>();
    for (std::size_t k = 0; k < a.size(); ++k) REQUIRE(std::fabs(a[k] - b[k]) <= 1e-3F + 1e-3F * std::fabs(b[k]));
  }
}

}  // namespace

TEST_CASE("zoo: split at the cheapest cut, by halves, merge back, optimize: PyTorch's outputs") {
  const std::filesystem::path dir = std::filesystem::path(RML_TEST_DATA_DIR) / "zoo";
  std::vector<std::string> stems;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file.size() > 5 && file.substr(file.size() - 5) == ".json") stems.push_back(file.substr(0, file.size() - 5));
  }
  std::sort(stems.begin(), stems.end());
  REQUIRE(stems.size() >= 8);
  for (const std::string& stem : stems) {
    CAPTURE(stem);
    ZooCase c = load_zoo(stem);
    const std::vector<std::string> names = c.graph.output_names();
    check_reference(run_by_name(c.graph, c, names), c.expected);

    Graph at_cut = c.graph;
    const ValueCut cut = at_cut.min_value_cut().value();
    SplitGraph two = split(at_cut, cut).value();
    check_reference(run_by_name(merge(two.parts, two.connections).value().graph, c, names), c.expected);

    Graph halves = c.graph;
    const std::size_t half = halves.def().inputs.size() + halves.def().nodes.size() / 2;
    SplitGraph by_position =
        split(halves, [&](const Node& n) { return std::string(n.index() < half ? "a" : "b"); }).value();
    check_reference(run_by_name(merge(by_position.parts, by_position.connections).value().graph, c, names), c.expected);

    Graph optimized = c.graph;
    REQUIRE(optimized.optimize().ok());
    CHECK(optimized.def().nodes.size() <= c.graph.def().nodes.size());
    check_reference(run_by_name(optimized, c, names), c.expected);
  }
}
