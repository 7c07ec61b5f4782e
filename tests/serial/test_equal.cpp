// Structural equality with options: graphs up to a renaming of values and nodes, Graph handles,
// and difference paths.
#include <doctest/doctest.h>

#include <string>

#include <rml/core/equal.hpp>
#include <rml/ir/graph.hpp>

#include "serial/test_serial_types.hpp"

using namespace rml;
using serial_test::sample_graph;

namespace {

// `g` with every named value and node renamed by `prefix`.
GraphDef renamed(GraphDef g, const std::string& prefix) {
  for (auto& v : g.values)
    if (!v.name.empty()) v.name = prefix + v.name;
  for (auto& n : g.nodes)
    if (!n.name.empty()) n.name = prefix + n.name;
  return g;
}

const EqualOptions map_names{.map_names = true};

}  // namespace

TEST_CASE("map_names compares graphs up to a consistent renaming of values and nodes") {
  const GraphDef a = sample_graph();
  const GraphDef b = renamed(a, "p/");
  CHECK(!structural_equal(a, b));
  CHECK(assert_structural_equal(a, b).message() == R"(not structurally equal: values[0].name: "x" != "p/x")");
  CHECK(structural_equal(a, b, map_names));
  CHECK(assert_structural_equal(a, b, map_names).ok());

  // Names still matter elsewhere: the graph's own name, metadata, attribute strings.
  GraphDef c = b;
  c.name = "other";
  CHECK(assert_structural_equal(a, c, map_names).message() == R"(not structurally equal: name: "sample" != "other")");
  c = b;
  c.nodes[2].attrs["approximate"] = std::string("none");
  CHECK(assert_structural_equal(a, c, map_names).message() ==
        R"(not structurally equal: nodes[2].attrs["approximate"]: "tanh" != "none")");
}

TEST_CASE("map_names refuses a renaming that is not one-to-one") {
  GraphDef a = sample_graph();
  a.values[3].name = "h";
  a.values[4].name = "h2";
  GraphDef b = a;
  b.values[4].name = "h";  // two names of `a` map to one of `b`
  CHECK(!structural_equal(a, b, map_names));
  CHECK(assert_structural_equal(a, b, map_names).message() ==
        R"(not structurally equal: values[4].name: "h2" != "h" ("h" maps to "h"))");
  b = a;
  a.values[4].name = "h";  // one name of `a` maps to two of `b`
  b.values[3].name = "k";
  CHECK(assert_structural_equal(a, b, map_names).message() ==
        R"(not structurally equal: values[4].name: "h" != "h2" ("h" maps to "k"))");
  // An unnamed value matches only an unnamed one.
  b = a;
  b.values[0].name = "";
  CHECK(assert_structural_equal(a, b, map_names).message() ==
        R"(not structurally equal: values[0].name: "x" != "" (an empty name matches only itself))");
  // Values and nodes are renamed independently: a node may take a value's old name.
  GraphDef d = sample_graph();
  GraphDef e = d;
  e.nodes[0].name = "x";
  e.values[0].name = "layers.0.mm";
  CHECK(structural_equal(d, e, map_names));
}

TEST_CASE("Graph handles compare by their def, with or without options") {
  const Graph a(sample_graph());
  const Graph b(renamed(sample_graph(), "q."));
  CHECK(!structural_equal(a, b));
  CHECK(structural_equal(a, b, map_names));
  GraphDef changed = sample_graph();
  changed.nodes[1].inputs[1] = 1;
  CHECK(assert_structural_equal(a, Graph(changed)).message() == "not structurally equal: nodes[1].inputs[1]: 2 != 1");
  CHECK(to_debug_string(Graph(GraphDef{})) == to_debug_string(GraphDef{}));
}

TEST_CASE("difference paths reach into tensors, optionals, maps and shared objects") {
  GraphDef a = sample_graph();
  GraphDef b = sample_graph();
  b.constants[1].data = b.constants[1].data.clone();
  b.constants[1].data.mutable_data<float>()[6] += 1;
  CHECK(assert_structural_equal(a, b).message() ==
        "not structurally equal: constants[1].data: tensor data differs at element 6");
  b = sample_graph();
  b.nodes[0].origin->line = 42;
  CHECK(assert_structural_equal(a, b).message() == "not structurally equal: nodes[0].origin.line: 41 != 42");
  b.nodes[0].origin.reset();
  CHECK(assert_structural_equal(a, b).message() == "not structurally equal: nodes[0].origin: value != null");
  b = sample_graph();
  b.metadata["license"] = "BSD";
  CHECK(assert_structural_equal(a, b).message() == R"(not structurally equal: metadata["license"]: "MIT" != "BSD")");

  serial_test::Pair p, q;
  p.a = std::make_shared<serial_test::Point>(serial_test::Point{1, 2});
  q.a = std::make_shared<serial_test::Point>(serial_test::Point{1, 3});
  CHECK(assert_structural_equal(p, q).message() == "not structurally equal: a.y: 2 != 3");
  CHECK(assert_structural_equal(p, p).ok());
}
