// Views, merge, Graph::merge, split, extract: names, renames, every refusal and its message, and
// that a refused call leaves every graph as it was.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "rml/core/equal.hpp"
#include "rml/edit/edit.hpp"

using namespace rml;

namespace {

Graph trace1(const TraceFunction& fn, const std::string& in, const std::string& out, Shape shape = {2, 3}) {
  return trace(fn, {{in, DType::f32, std::move(shape)}}, "t", {out}).value();
}
std::vector<Tensor> rectify(const std::vector<Tensor>& x) { return {ops::relu(x[0])}; }
std::vector<Tensor> twice(const std::vector<Tensor>& x) { return {ops::add(x[0], x[0])}; }
std::vector<Tensor> pool(const std::vector<Tensor>& x) { return {ops::neg(ops::sum(ops::relu(x[0]), {1}, true))}; }

std::vector<std::string> names_of(const std::vector<Node>& nodes) {
  std::vector<std::string> out;
  for (const Node& n : nodes) out.push_back(n.name());
  return out;
}

std::vector<GraphPart> encoder_head(const std::string& head_input = "h") {
  std::vector<GraphPart> parts;
  parts.push_back({"encoder", trace1(rectify, "x", "h")});
  parts.push_back({"head", trace1(twice, head_input, "y")});
  return parts;
}

// A refused call: each part's def is what it was before.
void check_unchanged(const std::vector<GraphPart>& parts, const std::vector<GraphDef>& before) {
  REQUIRE(parts.size() == before.size());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const Status same = assert_structural_equal(parts[i].graph.def(), before[i]);
    CHECK_MESSAGE(same.ok(), same.to_string());
  }
}

std::vector<GraphDef> defs_of(const std::vector<GraphPart>& parts) {
  std::vector<GraphDef> out;
  for (const GraphPart& p : parts) out.push_back(p.graph.def());
  return out;
}

Status refusal(const std::vector<Connection>& connections, std::vector<GraphPart> parts, MergeOptions options = {}) {
  const auto before = defs_of(parts);
  auto r = merge(parts, connections, options);
  REQUIRE_FALSE(r.ok());
  check_unchanged(parts, before);
  return r.error();
}

}  // namespace

TEST_CASE("views: nodes, names, values, edges") {
  const Graph g = trace1(pool, "x", "y");
  CHECK(names_of(g.nodes()) == std::vector<std::string>{"x", "Relu_1", "Sum_2", "Neg_3"});
  CHECK(g.nodes()[0].kind() == NodeKind::input);
  CHECK(g.nodes()[2].op_code() == OpCode::Sum);
  CHECK(g.input_names() == std::vector<std::string>{"x"});
  CHECK(g.output_names() == std::vector<std::string>{"y"});
  const Node sum = g.node("Sum_2").value();
  CHECK(sum.index() == 2);
  CHECK(sum.output(0)->name() == "Sum_2_0");
  CHECK(sum.output(0)->type() == TensorType{DType::f32, {2, 1}});
  CHECK(sum.input(0)->producer()->name() == "Relu_1");
  CHECK(names_of(sum.output(0)->consumers().value()) == std::vector<std::string>{"Neg_3"});
  CHECK(g.node("x")->output(0)->name() == "x");
  CHECK(sum.output(1).error().code() == Code::out_of_range);
  CHECK(g.node("nope").error().code() == Code::not_found);
  CHECK(g.find_nodes(OpCode::Neg).size() == 1);
  CHECK(g.find_nodes(OpCode::MatMul).empty());
  CHECK(g.values().size() == 4);
  CHECK(g.value("Relu_1_0")->id() == 1);
  const std::vector<Edge> edges = g.edges();
  REQUIRE(edges.size() == 3);
  CHECK(edges[0].from().name() == "x");
  CHECK(edges[0].to().name() == "Relu_1");
  CHECK(edges[2].value().name() == "Sum_2_0");
}

TEST_CASE("views refuse once their graph is destroyed, assigned over, consumed or edited") {
  const std::string gone =
      "the node 'Relu_1' is no longer in its graph: that graph no longer exists (a merge, a split or an extract "
      "consumed it, or it was destroyed or assigned over)";
  std::optional<Node> node;
  {
    const Graph g = trace1(rectify, "x", "h");
    node = g.nodes()[1];
    CHECK(node->check().ok());
  }
  CHECK(node->check().message() == gone);
  CHECK(node->output(0).error().message() == gone);

  Graph g = trace1(rectify, "x", "h");
  const Value h = g.nodes()[1].output(0).value();
  g = trace1(rectify, "x", "h");
  CHECK(h.check().code() == Code::invalid_argument);
  CHECK(h.producer().error().message().find("the value 'h' is no longer in its graph") == 0);

  Graph moved_from = trace1(rectify, "x", "h");
  const Node relu = moved_from.nodes()[1];
  Graph moved_to = std::move(moved_from);  // a move keeps the body: views stay good
  CHECK(relu.check().ok());

  Graph edited = trace1(rectify, "x", "h");
  const Node before_edit = edited.nodes()[1];
  edited.mutable_def().name = "renamed";
  CHECK(before_edit.check().message().find("edited after the view was taken") != std::string::npos);
}

TEST_CASE("merge side by side: io name modes and renames") {
  auto parts = encoder_head("x");
  const MergedGraph merged = merge(parts).value();
  CHECK(merged.graph.input_names() == std::vector<std::string>{"encoder/x", "head/x"});
  CHECK(merged.graph.output_names() == std::vector<std::string>{"h", "y"});
  REQUIRE(merged.renames.size() == 4);
  CHECK(merged.renames[0].kind == NameKind::input);
  CHECK(merged.renames[2].from == "Relu_1");
  CHECK(merged.renames[2].to == "encoder/Relu_1");
  CHECK(parts[0].graph.consumed());
  CHECK(parts[1].graph.def().nodes.empty());

  MergeOptions always;
  always.io_names = IoNames::prefix_always;
  parts = encoder_head("x");
  const MergedGraph prefixed = merge(parts, {}, always).value();
  CHECK(prefixed.graph.output_names() == std::vector<std::string>{"encoder/h", "head/y"});
  CHECK(prefixed.renames.size() == 6);

  MergeOptions keep;
  keep.io_names = IoNames::keep;
  const Status s = refusal({}, encoder_head("x"), keep);
  CHECK(s.message() ==
        "merge: parts 'encoder' and 'head' both have an input named 'x', which IoNames::Keep keeps; merge with "
        "IoNames::PrefixOnCollision or PrefixAlways");
  // Keep is fine when names are distinct; an output named like another part's input collides too.
  parts = encoder_head("h");
  CHECK(refusal({}, std::move(parts), keep).message() ==
        "merge: part 'encoder' has an output and part 'head' an input named 'h', which IoNames::Keep keeps; merge "
        "with IoNames::PrefixOnCollision or PrefixAlways");
}

TEST_CASE("merge refusals name the place and change nothing") {
  const std::vector<Connection> ok = {{{"encoder", "h"}, {"head", "h"}}};
  CHECK(refusal({{{"encoder", "h"}, {"head", "z"}}}, encoder_head()).message() ==
        "merge: part 'head' has no input 'z'");
  CHECK(refusal({{{"encoder", "q"}, {"head", "h"}}}, encoder_head()).message() ==
        "merge: part 'encoder' has no output 'q'");
  CHECK(refusal({{{"enc", "h"}, {"head", "h"}}}, encoder_head()).message() ==
        "merge: connection enc.h -> head.h names no part 'enc'");
  CHECK(refusal({ok[0], ok[0]}, encoder_head()).message() == "merge: input 'head.h' is fed by two connections");
  CHECK(refusal({{{"head", "y"}, {"head", "h"}}}, encoder_head()).message() ==
        "merge: connection head.y -> head.h feeds part 'head' into itself");

  std::vector<GraphPart> mismatched;
  mismatched.push_back({"encoder", trace1(rectify, "x", "h")});
  mismatched.push_back({"head", trace1(twice, "h", "y", {2, 4})});
  CHECK(refusal(ok, std::move(mismatched)).message() ==
        "merge: connection encoder.h -> head.h joins f32 [2, 3] to f32 [2, 4]; the two ends must agree in dtype and "
        "shape");

  std::vector<GraphPart> cycle;
  cycle.push_back({"a", trace1(rectify, "x", "y")});
  cycle.push_back({"b", trace1(rectify, "x", "y")});
  CHECK(refusal({{{"a", "y"}, {"b", "x"}}, {{"b", "y"}, {"a", "x"}}}, std::move(cycle)).message() ==
        "merge: the connections form a cycle through parts 'a', 'b'");

  std::vector<GraphPart> none;
  CHECK(merge(none).error().message() == "merge: no parts to merge");
  auto dup = encoder_head();
  dup[1].name = "encoder";
  CHECK(refusal({}, std::move(dup)).message() == "merge: two parts are named 'encoder'");
  auto slash = encoder_head();
  slash[1].name = "a/b";
  CHECK(refusal({}, std::move(slash)).code() == Code::invalid_argument);

  auto consumed = encoder_head();
  {
    std::vector<GraphPart> eat;
    eat.push_back({"p", trace1(rectify, "x", "h")});
    std::swap(eat[0].graph, consumed[1].graph);
    REQUIRE(merge(eat).ok());
    std::swap(eat[0].graph, consumed[1].graph);
  }
  CHECK(refusal({}, std::move(consumed)).message() ==
        "merge: part 'head' is empty: a merge, a split or an extract consumed its graph");

  MergeOptions refuse;
  refuse.cross_device = CrossDevice::refuse;
  auto devices = encoder_head();
  REQUIRE(devices[1].graph.to(Device::cpu(1)).ok());
  CHECK(refusal(ok, std::move(devices), refuse).message() ==
        "merge: connection encoder.h -> head.h joins cpu:0 to cpu:1, which CrossDevice::Refuse refuses; merge with "
        "CrossDevice::Move to copy the value across");
}

TEST_CASE("merge across devices inserts a copy onto the input's device") {
  auto parts = encoder_head();
  REQUIRE(parts[1].graph.to(Device::cpu(1)).ok());
  const MergedGraph merged = merge(parts, {{{"encoder", "h"}, {"head", "h"}}}).value();
  const auto& nodes = merged.graph.def().nodes;
  REQUIRE(nodes.size() == 3);
  CHECK(nodes[1].op == "copy");
  CHECK(nodes[1].device == Device::cpu(1));
  CHECK(nodes[0].device == Device::cpu(0));
  CHECK(nodes[2].inputs[0] == nodes[1].outputs[0]);
}

TEST_CASE("Graph::merge keeps this graph's names and renames the second's") {
  Graph first = trace1(rectify, "x", "h");
  Graph second = trace1(rectify, "x", "h");
  const std::vector<Rename> renames = first.merge(second, {{"h", "x"}}).value();
  REQUIRE(renames.size() == 1);
  CHECK(renames[0].part == "second");
  CHECK(renames[0].from == "Relu_1");
  CHECK(renames[0].to == "Relu_1_1");
  CHECK(names_of(first.nodes()) == std::vector<std::string>{"x", "Relu_1", "Relu_1_1"});
  CHECK(first.output_names() == std::vector<std::string>{"h"});
  CHECK(second.consumed());

  // Side by side: second's input x and output h clash with first's and take _1.
  Graph a = trace1(rectify, "x", "h");
  Graph b = trace1(rectify, "x", "h");
  const auto side = a.merge(b).value();
  CHECK(a.input_names() == std::vector<std::string>{"x", "x_1"});
  CHECK(a.output_names() == std::vector<std::string>{"h", "h_1"});
  CHECK(side.size() == 3);

  Graph c = trace1(rectify, "x", "h");
  Graph d = trace1(rectify, "x", "h");
  const GraphDef c_before = c.def(), d_before = d.def();
  CHECK(c.merge(d, {{"nope", "x"}}).error().message() == "merge: this graph has no output 'nope'");
  CHECK(c.merge(d, {{"h", "nope"}}).error().message() == "merge: the second graph has no input 'nope'");
  CHECK(c.merge(c).error().message() == "merge: a graph cannot be merged into itself");
  CHECK(assert_structural_equal(c.def(), c_before).ok());
  CHECK(assert_structural_equal(d.def(), d_before).ok());
}

TEST_CASE("split at a cut and by a function") {
  Graph pooled = trace1(pool, "x", "y");
  const ValueCut cut = pooled.min_value_cut().value();
  CHECK(cut.bytes == 8);
  SplitGraph s = split(pooled, cut).value();
  REQUIRE(s.parts.size() == 2);
  CHECK(s.parts[0].graph.output_names() == std::vector<std::string>{"Sum_2_0"});
  CHECK(s.connections.size() == 1);
  CHECK(pooled.consumed());
  CHECK(split(pooled, cut).error().code() == Code::invalid_argument);  // the graph and the cut are gone

  // A graph input that both parts read crosses too.
  Graph both = trace(
                   [](const std::vector<Tensor>& x) {
                     return std::vector<Tensor>{ops::add(ops::sum(ops::relu(x[0]), {0, 1}, true), x[0])};
                   },
                   {{"x", DType::f32, {2, 3}}}, "t", {"y"})
                   .value();
  const ValueCut c2 = both.min_value_cut().value();
  const SplitGraph s2 = split(both, c2).value();
  CHECK(s2.parts[1].graph.input_names().size() == 2);
  bool x_crosses = false;
  for (const Connection& c : s2.connections) x_crosses = x_crosses || c.from.name == "x";
  CHECK(x_crosses);
}

TEST_CASE("split by a function: refusals keep the graph") {
  Graph pooled = trace1(pool, "x", "y");
  const GraphDef before = pooled.def();
  const auto check_same = [&] { CHECK(assert_structural_equal(pooled.def(), before).ok()); };

  const auto err = split(pooled, [](const Node& n) -> std::string {
    if (n.op_code() == OpCode::Neg) throw Error(Code::not_found, "no part for Neg");
    return "first";
  });
  CHECK(err.error().code() == Code::not_found);
  CHECK(err.error().message() == "split: the partition function failed on the node 'Neg_3': no part for Neg");
  check_same();

  const auto other = split(pooled, [](const Node&) -> std::string { throw std::logic_error("oops"); });
  CHECK(other.error().code() == Code::internal);
  check_same();
  const auto weird = split(pooled, [](const Node&) -> std::string { throw 42; });
  CHECK(weird.error().code() == Code::internal);
  check_same();

  const auto bad_name = split(pooled, [](const Node&) { return std::string("a.b"); });
  CHECK(bad_name.error().message() ==
        "split: the partition function put 'Relu_1' in the part 'a.b'; a part's name must be non-empty and hold no "
        "'/' or '.'");
  check_same();
  const auto cycle = split(pooled, [](const Node& n) { return std::string(n.op_code() == OpCode::Sum ? "b" : "a"); });
  CHECK(cycle.error().message() ==
        "split: parts 'a', 'b' depend on each other in a cycle; no order runs every connection forward");
  check_same();

  REQUIRE(pooled.to(Device::cpu(0)).ok());
  int calls = 0;
  const auto asked = split(pooled, [&](const Node&) { return std::string("p") + std::to_string(calls++); });
  CHECK(calls == 3);
  CHECK(asked.ok());
}

TEST_CASE("extract: names, refusals, freed weights") {
  std::weak_ptr<const Storage> dropped_weight;
  Graph g = trace(
                [&](const std::vector<Tensor>& x) {
                  const Tensor w = Tensor::from_vector<float>(std::vector<float>(6, 1.0F), {6});
                  dropped_weight = w.storage();
                  const Tensor s = ops::sum(ops::relu(x[0]), {1}, true);
                  return std::vector<Tensor>{s, ops::sum(ops::add(ops::reshape(x[0], {6}), w))};
                },
                {{"x", DType::f32, {2, 3}}}, "t", {"s", "t"})
                .value();
  std::optional<GraphDef> before = g.def();
  const Value x = g.node("x")->output(0).value();
  const Value sum = g.find_nodes(OpCode::Sum).front().output(0).value();
  const Value relu = g.find_nodes(OpCode::Relu).front().output(0).value();
  CHECK(extract(g, {}, {sum}).error().message() ==
        "extract: the outputs depend on the graph input 'x', which is not among the inputs");
  CHECK(extract(g, {x}, {}).error().message() == "extract: no outputs to extract");
  CHECK(extract(g, {x, x}, {sum}).error().message() == "extract: the value 'x' is listed twice as an input");
  Graph other = trace1(rectify, "x", "h");
  CHECK(extract(other, {x}, {sum}).error().message() == "extract: the value 'x' belongs to another graph");
  CHECK(assert_structural_equal(g.def(), *before).ok());
  before.reset();

  CHECK_FALSE(dropped_weight.expired());
  Graph part = extract(g, {relu}, {sum}).value();
  CHECK(part.input_names() == std::vector<std::string>{"Relu_1_0"});
  CHECK(part.output_names() == std::vector<std::string>{"s"});
  CHECK(part.def().constants.empty());
  CHECK(g.consumed());
  CHECK(dropped_weight.expired());  // the weight the extract left out is freed
  CHECK(extract(g, {x}, {sum}).error().message() ==
        "extract: the graph is empty: a merge, a split or an extract consumed it");
}

TEST_CASE("split at a hand-made cut: closure of its values, refusals keep the graph") {
  Graph pooled = trace1(pool, "x", "y");
  const GraphDef before = pooled.def();
  Graph other = trace1(pool, "x", "y");
  ValueCut foreign;
  foreign.values = {other.value("Sum_2_0").value()};
  CHECK(split(pooled, foreign).error().message() == "split: the value 'Sum_2_0' belongs to another graph");
  CHECK(split(pooled, ValueCut{}).error().message() == "split: the cut leaves no operator before it");
  ValueCut last;
  last.values = {pooled.value("y").value()};
  CHECK(split(pooled, last).error().message() == "split: the cut leaves no operator after it");
  ValueCut backwards;
  backwards.before = {pooled.node("Sum_2").value()};
  CHECK(split(pooled, backwards).error().message() ==
        "split: the cut puts 'Sum_2' before it but 'Relu_1', which it reads, after it");
  CHECK(assert_structural_equal(pooled.def(), before).ok());

  ValueCut by_value;
  by_value.values = {pooled.value("Relu_1_0").value()};
  const SplitGraph parts = split(pooled, by_value).value();
  CHECK(parts.parts[0].graph.def().nodes.size() == 1);
  CHECK(parts.parts[1].graph.def().nodes.size() == 2);
  CHECK(parts.connections.size() == 1);
}
