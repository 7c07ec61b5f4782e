// Structural equality with options: graphs up to a renaming of values and nodes, Graph handles,
// and difference paths.
#include <doctest/doctest.h>

#include <string>

#include <rml/core/equal.hpp>
#include <rml/ir/graph.hpp>
#include <rml/serial/serialize.hpp>

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

// ---------------------------------------------------------------------------------------------
// Objects behind shared_ptr<Base>: the dynamic type and all of its fields.

namespace serial_test {

// The seed's expression leaves: a variable by name, an integer constant.
struct Var : Expr {
  std::string name;
  static constexpr auto fields() { return std::tuple_cat(Expr::fields(), std::tuple{rml::field("name", &Var::name)}); }
};
struct ConstInt : Expr {
  std::int64_t value = 0;
  static constexpr auto fields() {
    return std::tuple_cat(Expr::fields(), std::tuple{rml::field("value", &ConstInt::value)});
  }
};
RML_REGISTER_TYPE(Var, Expr);
RML_REGISTER_TYPE(ConstInt, Expr);

}  // namespace serial_test

namespace {

using serial_test::Expr;

std::shared_ptr<Expr> var(const std::string& name) {
  auto v = std::make_shared<serial_test::Var>();
  v->name = name;
  return v;
}
std::shared_ptr<Expr> int_const(std::int64_t value) {
  auto c = std::make_shared<serial_test::ConstInt>();
  c->value = value;
  return c;
}
std::shared_ptr<Expr> add(std::shared_ptr<Expr> lhs, std::shared_ptr<Expr> rhs) {
  auto a = std::make_shared<serial_test::Add>();
  a->lhs = std::move(lhs);
  a->rhs = std::move(rhs);
  return a;
}

}  // namespace

TEST_CASE("through shared_ptr<Base>, the dynamic type and every field of it are compared") {
  // Different dynamic types never compare equal, whatever their Base fields hold.
  CHECK(!structural_equal(var("q"), int_const(7)));
  CHECK(assert_structural_equal(var("q"), int_const(7)).message() ==
        "not structurally equal: <root>: type Var != ConstInt");
  // The same type compares its own fields, not only the Base's.
  CHECK(!structural_equal(int_const(1), int_const(2)));
  CHECK(assert_structural_equal(add(var("a"), int_const(1)), add(var("b"), int_const(2))).message() ==
        R"(not structurally equal: lhs.name: "a" != "b")");
  CHECK(assert_structural_equal(add(var("a"), int_const(1)), add(var("a"), int_const(2))).message() ==
        "not structurally equal: rhs.value: 1 != 2");
  CHECK(assert_structural_equal(add(var("a"), int_const(1)), add(int_const(1), int_const(1))).message() ==
        "not structurally equal: lhs: type Var != ConstInt");
  // Equal trees, built apart, are equal; so is a tree and itself.
  const auto tree = add(add(var("x"), int_const(3)), var("y"));
  CHECK(structural_equal(tree, add(add(var("x"), int_const(3)), var("y"))));
  CHECK(structural_equal(tree, tree));
  // In containers, with the path through them.
  serial_test::Program p, q;
  p.roots = {tree, var("q")};
  q.roots = {add(add(var("x"), int_const(3)), var("y")), int_const(7)};
  CHECK(assert_structural_equal(p, q).message() == "not structurally equal: roots[1]: type Var != ConstInt");
  // The debug string shows the dynamic type and its fields.
  CHECK(to_debug_string(p.roots[1]) == R"(Var{label: "", name: "q"})");
}

TEST_CASE("the round-trip assertion on polymorphic trees can fail") {
  serial_test::Program p;
  p.roots = {add(var("a"), int_const(1))};
  auto back = deserialize<serial_test::Program>(serialize(p));
  REQUIRE_MESSAGE(back.ok(), back.status().to_string());
  CHECK(assert_structural_equal(p, *back).ok());
  dynamic_cast<serial_test::ConstInt&>(*dynamic_cast<serial_test::Add&>(*back->roots[0]).rhs).value = 2;
  CHECK(assert_structural_equal(p, *back).message() == "not structurally equal: roots[0].rhs.value: 1 != 2");
}

TEST_CASE("an unregistered derived type is never silently equal") {
  auto a = std::make_shared<serial_test::Unregistered>();
  auto b = std::make_shared<serial_test::Unregistered>();
  a->secret = 1;
  b->secret = 1;
  const std::shared_ptr<Expr> pa = a;
  const std::shared_ptr<Expr> pb = b;
  CHECK(!structural_equal(pa, pb));
  CHECK(assert_structural_equal(pa, pb).message().find("serial_test::Unregistered is not registered") !=
        std::string::npos);
  CHECK(structural_equal(pa, pa));  // the same object
  rml::register_polymorphic<serial_test::Unregistered>("Unregistered");
  CHECK(structural_equal(pa, pb));
  b->secret = 2;
  CHECK(assert_structural_equal(pa, pb).message() == "not structurally equal: secret: 1 != 2");
}
