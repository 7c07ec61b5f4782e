// The executor against hostile graphs and tensors: graphs needing more memory than the budget,
// graphs that bypass validation (built in code, read from MessagePack), views that do not fit
// their storage, and run_into outputs that alias inputs.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "rml/exec/executor.hpp"
#include "rml/serial/serialize.hpp"

namespace {

using rml::Code;
using rml::DType;
using rml::GraphDef;
using rml::NodeDef;
using rml::Tensor;
using rml::TensorType;

TensorType f32(rml::Shape s) { return {DType::f32, std::move(s)}; }

NodeDef node(std::string op, rml::ValueIds in, rml::ValueIds out, rml::Attrs attrs = {}) {
  NodeDef n;
  n.op = std::move(op);
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attrs = std::move(attrs);
  return n;
}

// x: f32 [1] -> expand to `shape` -> relu -> y.
GraphDef expand_relu(const std::vector<std::int64_t>& shape) {
  GraphDef g;
  g.values = {{"x", f32({1})}, {"big", f32(rml::Shape(shape))}, {"y", f32(rml::Shape(shape))}};
  g.inputs = {0};
  g.outputs = {2};
  g.nodes.push_back(node("expand", {0}, {1}, {{"shape", shape}}));
  g.nodes.push_back(node("relu", {1}, {2}));
  return g;
}

// x: f32 [2, 3] -> transpose -> y: f32 [3, 2].
GraphDef transpose_graph() {
  GraphDef g;
  g.values = {{"x", f32({2, 3})}, {"y", f32({3, 2})}};
  g.inputs = {0};
  g.outputs = {1};
  g.nodes.push_back(node("transpose", {0}, {1}));
  return g;
}

// A storage whose bytes are any span the test chooses (it owns nothing).
class SpanStorage final : public rml::Storage {
 public:
  SpanStorage(std::byte* p, std::size_t n) : Storage(p, n, true) {}
};

}  // namespace

TEST_CASE("a graph needing terabytes is refused by create, not by bad_alloc in run") {
  // [2^20, 2^20] f32: 4 TiB for the intermediate and 4 TiB for the output.
  auto exec = rml::Executor::create(expand_relu({std::int64_t{1} << 20, std::int64_t{1} << 20}));
  REQUIRE_FALSE(exec.ok());
  CHECK(exec.error().code() == Code::out_of_range);
  CHECK(exec.error().message().find("memory budget") != std::string::npos);

  // The same graph at a small size runs; a budget below what it needs refuses it.
  const GraphDef small = expand_relu({4, 4});
  REQUIRE(rml::Executor::create(small).ok());
  rml::ExecutorOptions tight;
  tight.memory.max_bytes = 64;  // the arena alone takes 64 bytes; the output needs 64 more
  auto refused = rml::Executor::create(small, tight);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == Code::out_of_range);
  tight.memory.max_bytes = 128;
  auto fits = rml::Executor::create(small, tight);
  REQUIRE(fits.ok());
  auto out = fits->run({Tensor::from_vector<float>({-2.0f}, {1})});
  REQUIRE(out.ok());
  CHECK((*out)[0].to_vector<float>() == std::vector<float>(16, 0.0f));  // relu(-2) broadcast
  CHECK(rml::physical_memory_bytes() > 0);
}

TEST_CASE("a depthwise convolution padded by 2^40 is sized without overflow and refused by the budget") {
  // One channel, 1x1 kernel, pads of 2^40 on every side, stride 2^40 down: the output is 3 x (2^41 + 1),
  // and the padded plane the depthwise path would copy is about 2^41 x 2^41 floats, past int64.
  const std::int64_t big = std::int64_t{1} << 40;
  const rml::Shape out{1, 1, 3, 2 * big + 1};
  GraphDef g;
  g.values = {{"x", f32({1, 1, 1, 1})}, {"w", f32({1, 1, 1, 1})}, {"y", f32(out)}};
  g.inputs = {0};
  g.outputs = {2};
  g.constants.push_back({1, "w", Tensor::from_vector<float>({1.0f}, {1, 1, 1, 1}), false});
  g.nodes.push_back(node("conv2d", {0, 1}, {2},
                         {{"pads", std::vector<std::int64_t>{big, big, big, big}},
                          {"strides", std::vector<std::int64_t>{big, 1}}}));
  for (int threads : {1, 2}) {
    auto exec = rml::Executor::create(g, {.threads = threads});
    REQUIRE_FALSE(exec.ok());
    CHECK(exec.error().code() == Code::out_of_range);
    CHECK(exec.error().message().find("memory budget") != std::string::npos);
  }
}

TEST_CASE("create refuses GraphDefs that bypass validation") {
  GraphDef g = transpose_graph();
  g.nodes[0].inputs = {7};  // out of range
  auto e = rml::Executor::create(g);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().to_string() ==
        "INVALID_ARGUMENT: nodes[0].inputs[0]: value id 7 is out of range (the graph has 2 values)");

  g = transpose_graph();
  g.outputs = {std::numeric_limits<rml::ValueId>::max()};
  CHECK(rml::Executor::create(g).error().code() == Code::invalid_argument);

  g = transpose_graph();  // a byte count that overflows int64
  g.values[0].type = f32({std::int64_t{1} << 31, std::int64_t{1} << 31});
  e = rml::Executor::create(g);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().to_string() ==
        "INVALID_ARGUMENT: values[0].shape: [2147483648, 2147483648] overflows the size of a tensor");

  g = transpose_graph();  // a constant whose id is out of range
  g.constants.push_back({9, "", Tensor::zeros(f32({2, 3})), false});
  CHECK(rml::Executor::create(g).error().to_string() ==
        "INVALID_ARGUMENT: constants[0].value: value id 9 is out of range (the graph has 2 values)");

  g = transpose_graph();  // a node with no outputs
  g.nodes[0].outputs = {};
  CHECK(rml::Executor::create(g).error().code() == Code::invalid_argument);
}

TEST_CASE("a MessagePack graph goes through the gate") {
  GraphDef g = transpose_graph();
  REQUIRE(rml::deserialize<rml::Graph>(rml::serialize(g)).ok());
  g.nodes[0].inputs = {5};
  auto bad = rml::deserialize<rml::Graph>(rml::serialize(g));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().to_string() ==
        "INVALID_ARGUMENT: nodes[0].inputs[0]: value id 5 is out of range (the graph has 2 values)");
  g = transpose_graph();
  g.values[1].type = f32({-3, 2});
  bad = rml::deserialize<rml::Graph>(rml::serialize(g));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().to_string() == "INVALID_ARGUMENT: values[1].shape[0]: dimension -3 is negative");
}

TEST_CASE("views that do not fit their storage cannot be made, so cannot reach run") {
  alignas(64) std::byte bytes[64] = {};
  auto storage = std::make_shared<SpanStorage>(bytes, sizeof bytes);
  // Too small: 6 floats need 24 bytes at offset 48 of a 64-byte storage.
  auto small = Tensor::try_view(f32({2, 3}), storage, 48);
  REQUIRE_FALSE(small.ok());
  CHECK(small.error().code() == Code::invalid_argument);
  CHECK_THROWS_AS((void)Tensor::view(f32({2, 3}), storage, 48), rml::Error);
  // An offset past the end, and one that does not align a float.
  CHECK_FALSE(Tensor::try_view(f32({1}), storage, 65).ok());
  auto odd = Tensor::try_view(f32({2, 3}), storage, 1);
  REQUIRE_FALSE(odd.ok());
  CHECK(odd.error().message().find("not aligned") != std::string::npos);
  // A storage that starts at an odd address.
  auto shifted = std::make_shared<SpanStorage>(bytes + 2, 32);
  CHECK_FALSE(Tensor::try_view(f32({2, 3}), shifted, 0).ok());

  // A view that fits runs, and reads its own bytes.
  float values[6] = {1, 2, 3, 4, 5, 6};
  std::memcpy(bytes + 16, values, sizeof values);
  auto fits = Tensor::try_view(f32({2, 3}), storage, 16);
  REQUIRE(fits.ok());
  auto exec = rml::Executor::create(transpose_graph());
  REQUIRE(exec.ok());
  auto out = exec->run({*fits});
  REQUIRE(out.ok());
  CHECK((*out)[0].to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("run_into refuses outputs that alias an input, another output or a constant") {
  auto exec = rml::Executor::create(transpose_graph());
  REQUIRE(exec.ok());
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  // The same storage seen as the output's type: transpose in place would read what it wrote.
  std::vector<Tensor> aliased = {x.reshape({3, 2})};
  const rml::Status s = exec->run_into(std::vector<Tensor>{x}, aliased);
  CHECK(s.code() == Code::invalid_argument);
  CHECK(s.message().find("shares memory with input 0") != std::string::npos);
  CHECK(x.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});  // untouched

  std::vector<Tensor> separate = {Tensor::zeros(f32({3, 2}))};
  REQUIRE(exec->run_into(std::vector<Tensor>{x}, separate).ok());
  CHECK(separate[0].to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});

  // Two outputs over one buffer.
  GraphDef two = transpose_graph();
  two.values.push_back({"z", f32({3, 2})});
  two.nodes.push_back(node("relu", {1}, {2}));
  two.outputs = {1, 2};
  auto exec2 = rml::Executor::create(two);
  REQUIRE(exec2.ok());
  Tensor shared = Tensor::zeros(f32({3, 2}));
  std::vector<Tensor> outs = {shared, shared};
  CHECK(exec2->run_into(std::vector<Tensor>{x}, outs).code() == Code::invalid_argument);

  // An output over a constant of the graph.
  GraphDef with_const;
  with_const.values = {{"c", f32({2, 3})}, {"y", f32({3, 2})}};
  Tensor c = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  with_const.constants.push_back({0, "", c, false});
  with_const.outputs = {1};
  with_const.nodes.push_back(node("transpose", {0}, {1}));
  auto exec3 = rml::Executor::create(with_const);
  REQUIRE(exec3.ok());
  std::vector<Tensor> over_constant = {c.reshape({3, 2})};
  CHECK(exec3->run_into({}, over_constant).code() == Code::invalid_argument);
}

TEST_CASE("bool bytes other than 0 or 1 are refused in run inputs and in constants") {
  // x: bool [3] -> logical_not -> y; and the same with x a constant built in code.
  const TensorType b3{DType::boolean, {3}};
  GraphDef g;
  g.values = {{"x", b3}, {"y", b3}};
  g.inputs = {0};
  g.outputs = {1};
  g.nodes.push_back(node("logical_not", {0}, {1}));
  auto exec = rml::Executor::create(g);
  REQUIRE_MESSAGE(exec.ok(), exec.error().to_string());

  Tensor good = Tensor::zeros(b3), bad = Tensor::zeros(b3);
  good.mutable_raw_data()[1] = std::byte{1};
  auto out = exec->run({good});
  REQUIRE_MESSAGE(out.ok(), out.error().to_string());
  const auto y = (*out)[0].span<bool>();
  CHECK((y[0] && !y[1] && y[2]));  // not [0, 1, 0]

  bad.mutable_raw_data()[2] = std::byte{2};
  const auto refused = exec->run({bad});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == Code::invalid_argument);
  CHECK(refused.error().message() == R"(run: input 0 ("x") is bool but its byte 2 is 2, not 0 or 1)");

  GraphDef k;
  k.values = {{"c", b3}, {"y", b3}};
  k.outputs = {1};
  rml::ConstantDef c;
  c.value = 0;
  c.data = bad;
  c.inline_data = true;
  k.constants.push_back(c);
  k.nodes.push_back(node("logical_not", {0}, {1}));
  const auto made = rml::Executor::create(k);
  REQUIRE_FALSE(made.ok());
  CHECK(made.error().code() == Code::invalid_argument);
  CHECK(made.error().message().find("is bool but its byte 2 is 2, not 0 or 1") != std::string::npos);
}
