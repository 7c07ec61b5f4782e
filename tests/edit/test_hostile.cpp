// Surgery against hostile callers: a partition function that edits, grows, consumes or replaces
// the graph being split, and graphs edited through mutable_def() into something invalid.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "rml/edit/edit.hpp"

using namespace rml;

namespace {

TensorType f32(Shape s) { return {DType::f32, std::move(s)}; }

// x -> relu -> neg -> abs -> y, every value f32 [4].
Graph chain() {
  GraphDef g;
  g.values = {{"x", f32({4})}, {"a", f32({4})}, {"b", f32({4})}, {"y", f32({4})}};
  g.inputs = {0};
  g.outputs = {3};
  const char* ops[] = {"relu", "neg", "abs"};
  for (ValueId i = 0; i < 3; ++i) {
    NodeDef n;
    n.op = ops[i];
    n.inputs = {i};
    n.outputs = {i + 1};
    g.nodes.push_back(std::move(n));
  }
  return Graph(std::move(g));
}

void check_refused(const Result<SplitGraph>& r, const std::string& node) {
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Code::failed_precondition);
  CHECK(r.error().message().find("the partition function changed the graph being split (on the node '" + node) !=
        std::string::npos);
}

}  // namespace

TEST_CASE("split refuses a partition function that changes the graph it splits") {
  SUBCASE("grows it") {
    Graph g = chain();
    auto r = split(g, [&](const Node&) {
      GraphDef& def = g.mutable_def();
      for (int i = 0; i < 1000; ++i) def.nodes.push_back(def.nodes.back());
      return std::string("a");
    });
    check_refused(r, "Relu_1");
  }
  SUBCASE("shrinks it") {
    Graph g = chain();
    auto r = split(g, [&](const Node& n) {
      if (n.index() == 2) g.mutable_def().nodes.clear();
      return std::string(n.index() < 2 ? "a" : "b");
    });
    check_refused(r, "Neg_2");
  }
  SUBCASE("consumes it") {
    Graph g = chain();
    auto r = split(g, [&](const Node&) {
      (void)split(g, [](const Node&) { return std::string("inner"); });
      return std::string("a");
    });
    check_refused(r, "Relu_1");
  }
  SUBCASE("assigns over it") {
    Graph g = chain();
    auto r = split(g, [&](const Node&) {
      g = Graph();
      return std::string("a");
    });
    check_refused(r, "Relu_1");
  }
  SUBCASE("a function that only reads the node splits as asked") {
    Graph g = chain();
    auto r = split(g, [](const Node& n) { return std::string(n.index() < 2 ? "a" : "b"); });
    REQUIRE(r.ok());
    REQUIRE(r->parts.size() == 2);
    CHECK(r->parts[0].graph.def().nodes.size() == 1);
    CHECK(r->parts[1].graph.def().nodes.size() == 2);
    for (const GraphPart& p : r->parts) CHECK(p.graph.validate().ok());
  }
}

TEST_CASE("a graph edited into an invalid one is refused at its next use") {
  Graph g = chain();
  REQUIRE(g.validate().ok());
  CHECK(g.nodes().size() == 4);
  g.mutable_def().nodes[1].inputs = {42};
  const Status s = g.validate();
  CHECK(s.to_string() == "INVALID_ARGUMENT: nodes[1].inputs[0]: value id 42 is out of range (the graph has 4 values)");
  // Views of an invalid graph are empty; lookups return the gate's error.
  CHECK(g.nodes().empty());
  CHECK(g.values().empty());
  CHECK(g.edges().empty());
  CHECK(g.input_names().empty());
  CHECK(g.node("Relu_1").error().to_string() == s.to_string());
  CHECK(g.value("x").error().to_string() == s.to_string());
  // Surgery refuses it, naming the call.
  auto parts = split(g, [](const Node&) { return std::string("a"); });
  REQUIRE_FALSE(parts.ok());
  CHECK(parts.error().message().find("split: the graph is malformed: nodes[1].inputs[0]") == 0);
  CHECK(g.optimize().code() == Code::invalid_argument);
  CHECK(g.finalize().code() == Code::invalid_argument);
  // Repaired, it passes again.
  g.mutable_def().nodes[1].inputs = {1};
  CHECK(g.validate().ok());
  CHECK(g.nodes().size() == 4);

  // Graph::from_def refuses what the constructor would take unchecked.
  GraphDef bad = chain().def();
  bad.outputs = {17};
  CHECK(Graph::from_def(bad).error().code() == Code::invalid_argument);
  bad = chain().def();
  bad.values[2].name = "evil\nname";
  CHECK(Graph::from_def(bad).error().to_string() == "INVALID_ARGUMENT: values[2].name: holds a control character");
}
