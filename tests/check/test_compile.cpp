// compile_op and infer_types: output types, and every rejection with its exact message.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "rml/check/infer.hpp"

using namespace rml;

namespace {

TensorType f32(Shape s) { return {DType::f32, std::move(s)}; }
TensorType i32(Shape s) { return {DType::i32, std::move(s)}; }

NodeDef make_node(std::string op, Attrs attrs = {}, std::size_t outputs = 1) {
  NodeDef n;
  n.op = std::move(op);
  n.attrs = std::move(attrs);
  for (std::size_t i = 0; i < outputs; ++i) n.outputs.push_back(static_cast<ValueId>(100 + i));
  return n;
}

/// The single output type, or the failure as `CODE: message`.
std::string compile(const NodeDef& node, std::vector<TensorType> inputs) {
  auto r = compile_op(node, inputs);
  if (!r.ok()) return r.error().to_string();
  REQUIRE(r->outputs.size() == 1);
  return r->outputs[0].to_string();
}
std::string compile(const std::string& op, std::vector<TensorType> inputs, Attrs attrs = {}) {
  return compile(make_node(op, std::move(attrs)), std::move(inputs));
}

}  // namespace

TEST_CASE("output types") {
  CHECK(compile("relu", {f32({2, 3})}) == "f32 [2, 3]");
  CHECK(compile("exp", {f32({})}) == "f32 []");
  CHECK(compile("add", {f32({2, 1, 4}), f32({3, 1})}) == "f32 [2, 3, 4]");
  CHECK(compile("add", {f32({}), f32({5})}) == "f32 [5]");
  CHECK(compile("where", {f32({2, 1}), f32({3}), f32({})}) == "f32 [2, 3]");
  CHECK(compile("matmul", {f32({2, 12}), f32({12, 16})}) == "f32 [2, 16]");
  CHECK(compile("matmul", {f32({5}), f32({5})}) == "f32 []");
  CHECK(compile("matmul", {f32({3}), f32({2, 3, 4})}) == "f32 [2, 4]");
  CHECK(compile("matmul", {f32({2, 3, 4}), f32({4})}) == "f32 [2, 3]");
  CHECK(compile("matmul", {f32({2, 1, 3, 4}), f32({5, 4, 2})}) == "f32 [2, 5, 3, 2]");
  CHECK(compile("conv2d", {f32({1, 4, 7, 8}), f32({6, 2, 3, 2})},
                {{"groups", std::int64_t{2}}, {"strides", std::vector<std::int64_t>{2, 3}},
                 {"pads", std::vector<std::int64_t>{0, 1, 2, 0}}}) == "f32 [1, 6, 4, 3]");
  CHECK(compile("max_pool2d", {f32({1, 1, 7, 6})}, {{"kernel", std::vector<std::int64_t>{2, 2}}}) ==
        "f32 [1, 1, 3, 3]");
  CHECK(compile("sum", {f32({2, 3, 4})}) == "f32 []");
  CHECK(compile("mean", {f32({2, 3, 4})}, {{"axes", std::vector<std::int64_t>{-1, 0}}, {"keepdims", true}}) ==
        "f32 [1, 3, 1]");
  CHECK(compile("max", {f32({2, 3})}, {{"axes", std::vector<double>{}}}) == "f32 []");  // empty float list
  CHECK(compile("argmax", {f32({2, 3})}, {{"axis", std::int64_t{-1}}}) == "i32 [2]");
  CHECK(compile("reshape", {i32({2, 3})}, {{"shape", std::vector<std::int64_t>{-1, 2}}}) == "i32 [3, 2]");
  CHECK(compile("transpose", {f32({2, 3, 4})}) == "f32 [4, 3, 2]");
  CHECK(compile("concat", {f32({2, 1}), f32({2, 3})}, {{"axis", std::int64_t{1}}}) == "f32 [2, 4]");
  CHECK(compile("slice", {f32({10})}, {{"starts", std::vector<std::int64_t>{-3}},
                                        {"ends", std::vector<std::int64_t>{1000}}}) == "f32 [3]");
  CHECK(compile("expand", {f32({3, 1})}, {{"shape", std::vector<std::int64_t>{2, 3, 4}}}) == "f32 [2, 3, 4]");
  CHECK(compile("pad", {i32({2})}, {{"pads", std::vector<std::int64_t>{1, 2}}, {"value", std::int64_t{7}}}) ==
        "i32 [5]");  // an integer where a float is expected
  CHECK(compile("gather", {f32({5, 4}), i32({2, 3})}, {{"axis", std::int64_t{-2}}}) == "f32 [2, 3, 4]");
  CHECK(compile("cast", {f32({2})}, {{"to", std::string("i32")}}) == "i32 [2]");
  CHECK(compile("copy", {i32({})}) == "i32 []");
  // The dtypes beyond f32 and i32: comparisons give bool except on f32 (its 0/1 mask).
  const auto t = [](DType d, Dims s) { return TensorType{d, Shape(std::move(s))}; };
  CHECK(compile("less", {f32({2}), f32({2})}) == "f32 [2]");
  CHECK(compile("less", {t(DType::f16, {2}), t(DType::f16, {2})}) == "bool [2]");
  CHECK(compile("equal", {t(DType::i64, {2, 1}), t(DType::i64, {3})}) == "bool [2, 3]");
  CHECK(compile("div", {t(DType::i64, {2}), t(DType::i64, {2})}) == "i64 [2]");
  CHECK(compile("exp", {t(DType::bf16, {2})}) == "bf16 [2]");
  CHECK(compile("mean", {t(DType::f16, {2, 3})}, {{"axes", std::vector<std::int64_t>{1}}}) == "f16 [2]");
  CHECK(compile("argmax", {t(DType::i64, {2, 3})}, {{"axis", std::int64_t{1}}}) == "i32 [2]");
  CHECK(compile("where", {t(DType::boolean, {2, 1}), t(DType::i64, {3}), t(DType::i64, {1})}) == "i64 [2, 3]");
  CHECK(compile("gather", {t(DType::bf16, {5, 4}), t(DType::i64, {2})}) == "bf16 [2, 4]");
  CHECK(compile("cast", {t(DType::bf16, {2})}, {{"to", std::string("bool")}}) == "bool [2]");
  CHECK(compile("logical_and", {t(DType::boolean, {2}), t(DType::boolean, {1})}) == "bool [2]");
  CHECK(compile("pad", {t(DType::boolean, {2})}, {{"pads", std::vector<std::int64_t>{1, 0}}}) == "bool [3]");
}

TEST_CASE("rejections name the op and what is wrong") {
  CHECK(compile("frobnicate", {f32({2})}) == "UNSUPPORTED: frobnicate: unknown op 'frobnicate'");
  // Arity and dtypes.
  CHECK(compile("relu", {f32({2}), f32({2})}) == "INVALID_ARGUMENT: relu: takes 1 input, got 2");
  CHECK(compile("add", {f32({2})}) == "INVALID_ARGUMENT: add: takes 2 inputs, got 1");
  CHECK(compile("conv2d", {f32({1, 1, 3, 3})}) == "INVALID_ARGUMENT: conv2d: takes 2 to 3 inputs, got 1");
  CHECK(compile("concat", {}, {{"axis", std::int64_t{0}}}) ==
        "INVALID_ARGUMENT: concat: takes at least 1 input, got 0");
  CHECK(compile("add", {f32({3}), i32({3})}) ==
        "INVALID_ARGUMENT: add: input 1 is i32 [3] but input 0 is f32 [3] (dtypes must agree)");
  CHECK(compile("add", {TensorType{DType::boolean, Shape({3})}, TensorType{DType::boolean, Shape({3})}}) ==
        "INVALID_ARGUMENT: add: does not compute on bool (input 0 is bool [3]; takes f32, i32, f16, bf16 or i64)");
  CHECK(compile("matmul", {TensorType{DType::f16, Shape({2, 2})}, f32({2, 2})}) ==
        "INVALID_ARGUMENT: matmul: input 1 is f32 [2, 2] but input 0 is f16 [2, 2] (dtypes must agree)");
  CHECK(compile("softmax", {i32({2})}) ==
        "INVALID_ARGUMENT: softmax: does not compute on i32 (input 0 is i32 [2]; takes f32, f16 or bf16)");
  CHECK(compile("where", {i32({2}), f32({2}), f32({2})}) ==
        "INVALID_ARGUMENT: where: condition (input 0) must be bool or f32, got i32 [2]");
  CHECK(compile("where", {f32({2}), f32({2}), i32({2})}) ==
        "INVALID_ARGUMENT: where: input 2 is i32 [2] but input 1 is f32 [2] (dtypes must agree)");
  CHECK(compile("logical_not", {f32({2})}) ==
        "INVALID_ARGUMENT: logical_not: does not compute on f32 (input 0 is f32 [2]; takes bool)");
  CHECK(compile("concat", {i32({2}), f32({2})}, {{"axis", std::int64_t{0}}}) ==
        "INVALID_ARGUMENT: concat: input 1 is f32 [2] but input 0 is i32 [2] (dtypes must agree)");
  CHECK(compile("gather", {f32({4}), f32({2})}) ==
        "INVALID_ARGUMENT: gather: indices (input 1) must be i32 or i64, got f32 [2]");
  CHECK(compile("argmax", {TensorType{DType::boolean, Shape({4})}}, {{"axis", std::int64_t{0}}}) ==
        "INVALID_ARGUMENT: argmax: does not compute on bool (input 0 is bool [4]; takes f32, i32, f16, bf16 or i64)");
  // Attributes: unknown, missing, wrong kind, out of range.
  CHECK(compile("relu", {f32({2})}, {{"alpha", 0.1}}) ==
        "INVALID_ARGUMENT: relu: unknown attribute 'alpha' (relu takes none)");
  CHECK(compile("softmax", {f32({2})}, {{"dim", std::int64_t{0}}}) ==
        "INVALID_ARGUMENT: softmax: unknown attribute 'dim' (softmax takes axis)");
  CHECK(compile("max_pool2d", {f32({1, 1, 4, 4})}) ==
        "INVALID_ARGUMENT: max_pool2d: missing required attribute 'kernel'");
  CHECK(compile("conv2d", {f32({1, 1, 3, 3}), f32({1, 1, 1, 1})}, {{"groups", 1.0}}) ==
        "INVALID_ARGUMENT: conv2d: attribute 'groups' must be int, got float");
  CHECK(compile("sum", {f32({2})}, {{"axes", std::vector<double>{0.0}}}) ==
        "INVALID_ARGUMENT: sum: attribute 'axes' must be ints, got floats");
  CHECK(compile("sum", {f32({2})}, {{"keepdims", std::int64_t{1}}}) ==
        "INVALID_ARGUMENT: sum: attribute 'keepdims' must be bool, got int");
  CHECK(compile("conv2d", {f32({1, 1, 3, 3}), f32({1, 1, 1, 1})}, {{"groups", std::int64_t{0}}}) ==
        "INVALID_ARGUMENT: conv2d: attribute 'groups' must be >= 1, got 0");
  CHECK(compile("conv2d", {f32({1, 1, 3, 3}), f32({1, 1, 1, 1})}, {{"strides", std::vector<std::int64_t>{0, 1}}}) ==
        "INVALID_ARGUMENT: conv2d: attribute 'strides' must hold values in [1, 2^40], got [0, 1]");
  CHECK(compile("conv2d", {f32({1, 1, 3, 3}), f32({1, 1, 1, 1})}, {{"pads", std::vector<std::int64_t>{1, 1}}}) ==
        "INVALID_ARGUMENT: conv2d: attribute 'pads' must have 4 entries, got 2");
  CHECK(compile("softmax", {f32({2, 3})}, {{"axis", std::int64_t{2}}}) ==
        "INVALID_ARGUMENT: softmax: axis 2 is out of range for rank 2");
  CHECK(compile("sum", {f32({2, 3})}, {{"axes", std::vector<std::int64_t>{1, -1}}}) ==
        "INVALID_ARGUMENT: sum: axis -1 is listed twice in [1, -1]");
  CHECK(compile("gelu", {f32({2})}, {{"approximate", std::string("fast")}}) ==
        "INVALID_ARGUMENT: gelu: attribute 'approximate' must be \"none\" or \"tanh\", got \"fast\"");
  CHECK(compile("cast", {f32({2})}, {{"to", std::string("f8")}}) ==
        "INVALID_ARGUMENT: cast: attribute 'to' must name a dtype (f32, i32, f16, bf16, i64 or bool), got \"f8\"");
  CHECK(compile("transpose", {f32({2, 3})}, {{"perm", std::vector<std::int64_t>{0, 0}}}) ==
        "INVALID_ARGUMENT: transpose: attribute 'perm' [0, 0] is not a permutation of the axes of f32 [2, 3]");
  CHECK(compile("slice", {f32({4})}, {{"starts", std::vector<std::int64_t>{0}},
                                       {"ends", std::vector<std::int64_t>{4}},
                                       {"steps", std::vector<std::int64_t>{-1}}}) ==
        "INVALID_ARGUMENT: slice: attribute 'steps' [-1] must hold values >= 1");
  CHECK(compile("max_pool2d", {f32({1, 1, 4, 4})},
                {{"kernel", std::vector<std::int64_t>{2, 2}}, {"pads", std::vector<std::int64_t>{2, 0, 0, 0}}}) ==
        "INVALID_ARGUMENT: max_pool2d: attribute 'pads' [2, 0, 0, 0] must be smaller than the kernel [2, 2]");
  // Shapes.
  CHECK(compile("add", {f32({2, 3}), f32({4})}) == "INVALID_ARGUMENT: add: cannot broadcast f32 [2, 3] with f32 [4]");
  CHECK(compile("matmul", {f32({2, 3}), f32({4, 5})}) ==
        "INVALID_ARGUMENT: matmul: inner dimensions differ: f32 [2, 3] @ f32 [4, 5] (3 != 4)");
  CHECK(compile("matmul", {f32({}), f32({3})}) ==
        "INVALID_ARGUMENT: matmul: operands must have rank >= 1, got f32 [] @ f32 [3]");
  CHECK(compile("matmul", {f32({2, 2, 3}), f32({3, 3, 1})}) ==
        "INVALID_ARGUMENT: matmul: batch dimensions do not broadcast: f32 [2, 2, 3] @ f32 [3, 3, 1]");
  CHECK(compile("conv2d", {f32({1, 3, 5, 5}), f32({4, 2, 3, 3})}) ==
        "INVALID_ARGUMENT: conv2d: weight f32 [4, 2, 3, 3] must have 3 input channels per group (input f32 [1, 3, 5, "
        "5], groups 1)");
  CHECK(compile("conv2d", {f32({1, 4, 5, 5}), f32({3, 2, 3, 3})}, {{"groups", std::int64_t{2}}}) ==
        "INVALID_ARGUMENT: conv2d: groups 2 must divide input channels 4 and output channels 3");
  CHECK(compile("conv2d", {f32({1, 1, 2, 2}), f32({1, 1, 3, 3})}) ==
        "INVALID_ARGUMENT: conv2d: dilated kernel [3, 3] is larger than the padded input [2, 2]");
  CHECK(compile("conv2d", {f32({1, 1, 3, 3}), f32({2, 1, 1, 1}), f32({3})}) ==
        "INVALID_ARGUMENT: conv2d: bias (input 2) must be f32 [2], got f32 [3]");
  CHECK(compile("reshape", {f32({2, 3})}, {{"shape", std::vector<std::int64_t>{4, 2}}}) ==
        "INVALID_ARGUMENT: reshape: cannot reshape f32 [2, 3] (6 elements) to [4, 2]");
  CHECK(compile("reshape", {f32({2, 3})}, {{"shape", std::vector<std::int64_t>{-1, -1}}}) ==
        "INVALID_ARGUMENT: reshape: attribute 'shape' [-1, -1] may hold one -1 and otherwise sizes in [0, 2^40]");
  CHECK(compile("expand", {f32({3, 2})}, {{"shape", std::vector<std::int64_t>{3, 4}}}) ==
        "INVALID_ARGUMENT: expand: cannot broadcast f32 [3, 2] to [3, 4]");
  CHECK(compile("concat", {f32({2, 1}), f32({3, 3})}, {{"axis", std::int64_t{1}}}) ==
        "INVALID_ARGUMENT: concat: input 1 f32 [3, 3] does not match input 0 f32 [2, 1] outside axis 1");
  CHECK(compile("max", {f32({2, 0})}, {{"axes", std::vector<std::int64_t>{1}}}) ==
        "INVALID_ARGUMENT: max: reduces over an empty axis of f32 [2, 0] (no identity for max)");
  CHECK(compile("argmax", {f32({2, 0})}, {{"axis", std::int64_t{1}}}) ==
        "INVALID_ARGUMENT: argmax: argmax over axis 1 of f32 [2, 0], which is empty");
  CHECK(compile("gather", {f32({}), i32({1})}) ==
        "INVALID_ARGUMENT: gather: data (input 0) must have rank >= 1, got f32 []");
  // The node's own outputs, and how a named node is called.
  CHECK(compile(make_node("relu", {}, 2), {f32({2})}) == "INVALID_ARGUMENT: relu: lists 2 outputs but produces 1");
  NodeDef named = make_node("relu", {{"alpha", 1.0}});
  named.name = "act1";
  CHECK(compile(named, {f32({2})}) ==
        "INVALID_ARGUMENT: node \"act1\" (relu): unknown attribute 'alpha' (relu takes none)");
}

TEST_CASE("kernel plans carry the resolved parameters") {
  auto r = compile_op(make_node("add"), std::vector{f32({4, 3}), f32({3})});
  REQUIRE(r.ok());
  const auto& b = r->kernel.as<BroadcastPlan>();
  CHECK(b.dims == std::vector<std::int64_t>{4, 3});
  CHECK(b.strides[0] == std::vector<std::int64_t>{3, 1});
  CHECK(b.strides[1] == std::vector<std::int64_t>{0, 1});
  auto m = compile_op(make_node("matmul"), std::vector{f32({4, 3, 5}), f32({5, 2})});
  REQUIRE(m.ok());
  const auto& mm = m->kernel.as<MatMulPlan>();
  CHECK(mm.m == 12);  // the batch folds into the rows when the right side is shared
  CHECK(mm.batch_dims.empty());
  auto s = compile_op(make_node("sum", {{"axes", std::vector<std::int64_t>{-1}}}), std::vector{f32({2, 3, 4})});
  REQUIRE(s.ok());
  const auto& red = s->kernel.as<ReducePlan>();
  CHECK((red.simple && red.outer == 6 && red.reduce == 4 && red.inner == 1));
}

namespace {

/// x [2, 12] -> matmul w [12, 16] -> add b [16] -> relu -> matmul w2 [16, 8] (recorded as `rec`).
GraphDef small_graph(TensorType recorded) {
  GraphDef g;
  auto value = [&](std::string name, TensorType t) {
    g.values.push_back({std::move(name), std::move(t)});
    return static_cast<ValueId>(g.values.size() - 1);
  };
  const ValueId x = value("x", f32({2, 12}));
  const ValueId w = value("", f32({12, 16}));
  const ValueId b = value("b", f32({16}));
  const ValueId w2 = value("", f32({16, 8}));
  const ValueId h1 = value("", f32({2, 16}));
  const ValueId h2 = value("", f32({2, 16}));
  const ValueId h3 = value("", f32({2, 16}));
  std::vector<ValueId> padding;  // constants, so that the last value is v12
  for (int i = 0; i < 5; ++i) padding.push_back(value("", f32({1})));
  const ValueId y = value("", std::move(recorded));
  g.inputs = {x};
  g.outputs = {y};
  for (ValueId c : {w, b, w2}) g.constants.push_back({c, "", Tensor::zeros(g.values[c].type), false});
  for (ValueId c : padding) g.constants.push_back({c, "", Tensor::zeros(g.values[c].type), false});
  auto node = [&](std::string op, std::vector<ValueId> in, ValueId out) {
    NodeDef n;
    n.op = std::move(op);
    n.inputs = std::move(in);
    n.outputs = {out};
    g.nodes.push_back(std::move(n));
  };
  node("matmul", {x, w}, h1);
  node("add", {h1, b}, h2);
  node("relu", {h2}, h3);
  node("matmul", {h3, w2}, y);
  return g;
}

std::string infer(const GraphDef& g) {
  auto r = infer_types(g);
  return r.ok() ? "OK" : r.error().to_string();
}

}  // namespace

TEST_CASE("infer_types checks every recorded type") {
  GraphDef good = small_graph(f32({2, 8}));
  auto types = infer_types(Graph(good));
  REQUIRE(types.ok());
  CHECK(types->size() == good.values.size());
  CHECK((*types)[12] == f32({2, 8}));

  CHECK(infer(small_graph(f32({2, 16}))) ==
        "INVALID_ARGUMENT: node 3 (matmul) produces f32 [2, 8] but v12 is recorded as f32 [2, 16]");
  GraphDef named = small_graph(f32({2, 16}));
  named.values[12].name = "logits";
  named.nodes[3].origin = Origin{"layers.2", "model.py", 41};
  CHECK(infer(named) ==
        "INVALID_ARGUMENT: node 3 (matmul, layers.2 at model.py:41) produces f32 [2, 8] but logits is recorded as "
        "f32 [2, 16]");
  GraphDef dtype = small_graph(i32({2, 8}));
  CHECK(infer(dtype) == "INVALID_ARGUMENT: node 3 (matmul) produces f32 [2, 8] but v12 is recorded as i32 [2, 8]");
}

TEST_CASE("infer_types rejects graphs built wrongly in code") {
  GraphDef g = small_graph(f32({2, 8}));
  g.nodes[1].attrs["axis"] = std::int64_t{0};
  CHECK(infer(g) == "INVALID_ARGUMENT: node 1 (add): unknown attribute 'axis' (add takes none)");
  g = small_graph(f32({2, 8}));
  g.nodes[2].op = "leaky_relu";
  CHECK(infer(g) == "UNSUPPORTED: node 2 (leaky_relu): unknown op 'leaky_relu'");
  g = small_graph(f32({2, 8}));
  g.nodes[2].inputs = {42};
  // Structure is the gate's (rml/ir/validate.hpp): its messages name the place in the GraphDef.
  CHECK(infer(g) == "INVALID_ARGUMENT: nodes[2].inputs[0]: value id 42 is out of range (the graph has 13 values)");
  g = small_graph(f32({2, 8}));
  std::swap(g.nodes[1], g.nodes[2]);  // relu reads the add's output before the add runs
  CHECK(infer(g) ==
        "INVALID_ARGUMENT: nodes[1].inputs[0]: value 5 is read before it is defined (nodes must be in "
        "topological order)");
  g = small_graph(f32({2, 8}));
  g.nodes[3].outputs = {4};  // h1, already produced by node 0
  CHECK(infer(g) == "INVALID_ARGUMENT: nodes[3].outputs[0]: value 4 is already defined by nodes[0].outputs[0]");
  g = small_graph(f32({2, 8}));
  g.nodes[3].outputs = {12, 11};
  CHECK(infer(g) == "INVALID_ARGUMENT: nodes[3].outputs[1]: value 11 is already defined by constants[7]");
  g = small_graph(f32({2, 8}));
  g.nodes[3].outputs = {};
  CHECK(infer(g) == "INVALID_ARGUMENT: nodes[3].outputs: a node must produce at least one value");
  g = small_graph(f32({2, 8}));
  g.nodes[3].inputs = {6};
  CHECK(infer(g) == "INVALID_ARGUMENT: node 3 (matmul): takes 2 inputs, got 1");  // arity is the type checker's
  g = small_graph(f32({2, 8}));
  g.nodes.pop_back();
  CHECK(infer(g) ==
        "INVALID_ARGUMENT: values[12]: value 12 is never defined (not an input, a constant or a node "
        "output)");
  g = small_graph(f32({2, 8}));
  g.inputs = {0, 0};
  CHECK(infer(g) == "INVALID_ARGUMENT: inputs[1]: value 0 (x) is already defined by inputs[0]");
  g = small_graph(f32({2, 8}));
  g.constants[1].data = Tensor::zeros(f32({8}));
  CHECK(infer(g) == "INVALID_ARGUMENT: constants[1]: holds f32 [8] but value 2 (b) is recorded as f32 [16]");
  g = small_graph(f32({2, 8}));
  g.outputs = {99};
  CHECK(infer(g) == "INVALID_ARGUMENT: outputs[0]: value id 99 is out of range (the graph has 13 values)");
}
