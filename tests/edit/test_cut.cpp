// min_value_cut against brute force over every down-closed operator set, on random small DAGs.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "edit/random_graphs.hpp"
#include "rml/edit/edit.hpp"

using namespace rml;

namespace {

// Bytes crossing a partition, computed from scratch: a value produced before and read after, or
// a graph input read on both sides; constants never.
std::uint64_t brute_cost(const GraphDef& def, std::uint32_t before_mask) {
  const auto before = [&](std::size_t op) { return ((before_mask >> op) & 1U) != 0; };
  std::uint64_t bytes = 0;
  for (ValueId v = 0; v < def.values.size(); ++v) {
    bool is_input = false, is_constant = false;
    std::int64_t producer = -1;
    for (ValueId in : def.inputs) is_input = is_input || in == v;
    for (const ConstantDef& c : def.constants) is_constant = is_constant || c.value == v;
    for (std::size_t n = 0; n < def.nodes.size(); ++n)
      for (ValueId out : def.nodes[n].outputs)
        if (out == v) producer = static_cast<std::int64_t>(n);
    bool read_before = false, read_after = false;
    for (std::size_t n = 0; n < def.nodes.size(); ++n)
      for (ValueId in : def.nodes[n].inputs)
        if (in == v) (before(n) ? read_before : read_after) = true;
    const bool crosses = is_constant ? false
                         : is_input  ? read_before && read_after
                                     : producer >= 0 && before(static_cast<std::size_t>(producer)) && read_after;
    if (crosses) bytes += static_cast<std::uint64_t>(def.values[v].type.shape.numel()) * 4;
  }
  return bytes;
}

bool down_closed(const GraphDef& def, std::uint32_t mask) {
  for (std::size_t n = 0; n < def.nodes.size(); ++n) {
    if (((mask >> n) & 1U) == 0) continue;
    for (ValueId in : def.nodes[n].inputs)
      for (std::size_t p = 0; p < def.nodes.size(); ++p)
        for (ValueId out : def.nodes[p].outputs)
          if (out == in && ((mask >> p) & 1U) == 0) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("min_value_cut equals brute force over all down-closed sets on 1500 random DAGs") {
  std::mt19937 rng(20261129);
  int checked = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    const GraphDef def = rml_test::random_dag(rng, 2 + trial % 11);
    std::uint64_t best = UINT64_MAX;
    const std::uint32_t full = (1U << def.nodes.size()) - 1;
    for (std::uint32_t mask = 1; mask < full; ++mask)
      if (down_closed(def, mask)) best = std::min(best, brute_cost(def, mask));
    Graph graph(def);
    const auto cut = graph.min_value_cut();
    REQUIRE_MESSAGE(cut.ok(), cut.error().to_string());
    INFO("trial " << trial << ": " << to_debug_string(def));
    CHECK(cut->bytes == best);
    // The cut's own partition is admissible and costs what it says.
    std::uint32_t mask = 0;
    for (const Node& n : cut->before) mask |= 1U << (n.index() - def.inputs.size());
    CHECK(mask != 0);
    CHECK(mask != full);
    CHECK(down_closed(def, mask));
    CHECK(brute_cost(def, mask) == cut->bytes);
    CHECK(cut->exact);
    ++checked;
  }
  CHECK(checked == 1500);
}

TEST_CASE("min_value_cut is deterministic and prefers the smallest before-set on ties") {
  // x -> relu -> relu -> relu: every cut costs the same 24 bytes.
  std::mt19937 rng(7);
  GraphDef def;
  def.values.push_back({"x", {DType::f32, {2, 3}}});
  def.inputs = {0};
  for (ValueId i = 0; i < 3; ++i) {
    def.values.push_back({"", {DType::f32, {2, 3}}});
    def.nodes.push_back({"relu", {i}, {i + 1}, "", {}, std::nullopt, {}});
  }
  def.outputs = {3};
  Graph graph(def);
  const ValueCut a = graph.min_value_cut().value();
  const ValueCut b = graph.min_value_cut().value();
  REQUIRE(a.before.size() == 1);
  CHECK(a.before[0].name() == "Relu_1");
  CHECK(b.before.size() == 1);
  CHECK(a.bytes == 24);
}

TEST_CASE("min_value_cut refusals") {
  GraphDef def;
  def.values = {{"x", {DType::f32, {2}}}, {"y", {DType::f32, {2}}}};
  def.inputs = {0};
  def.outputs = {1};
  def.nodes.push_back({"relu", {0}, {1}, "", {}, std::nullopt, {}});
  Graph one(def);
  const auto r = one.min_value_cut();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Code::invalid_argument);
  CHECK(r.error().message() == "min_value_cut: the graph has 1 operators; a cut needs one on each side");

  def.nodes.push_back({"relu", {7}, {1}, "", {}, std::nullopt, {}});
  Graph broken(def);
  CHECK(broken.min_value_cut().error().code() == Code::invalid_argument);

  std::mt19937 rng(3);
  Graph g(rml_test::random_dag(rng, 6));
  CutOptions bad;
  bad.min_flops_before = 0.9;
  bad.max_flops_before = 0.1;
  CHECK(g.min_value_cut(bad).error().code() == Code::invalid_argument);
}

TEST_CASE("CutOptions bounds the share of FLOPs before the cut") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    Graph graph(rml_test::random_dag(rng, 8));
    CutOptions options;
    options.min_flops_before = 0.3;
    options.max_flops_before = 0.7;
    const auto cut = graph.min_value_cut(options);
    if (!cut.ok()) {
      CHECK(cut.error().code() == Code::invalid_argument);  // no prefix lands in the band
      continue;
    }
    CHECK(cut->flops_before >= 0.3);
    CHECK(cut->flops_before <= 0.7);
    const ValueCut free = graph.min_value_cut().value();
    CHECK(cut->bytes >= free.bytes);  // a bound never makes the cut cheaper
  }
}

TEST_CASE("min_value_cut on a 20k-operator layered graph cuts at a bottleneck") {
  // Two wide halves joined by one narrow value: the narrow value is the cut.
  const GraphDef def = rml_test::layered_graph(20000, /*width=*/4, /*bottleneck_at=*/10000);
  Graph graph(def);
  const ValueCut cut = graph.min_value_cut().value();
  REQUIRE(cut.values.size() == 1);
  CHECK(cut.bytes == 4);
  CHECK(cut.values[0].name() == "bottleneck");
}
