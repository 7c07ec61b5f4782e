// The checker against attacker-chosen numbers: attributes and shapes whose products and sums
// overflow int64 are refused with a message (never signed overflow; the asan preset runs this
// under UBSan), and the gate refuses GraphDefs that would be indexed out of bounds.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "rml/check/infer.hpp"

using namespace rml;

namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t p2(int n) { return std::int64_t{1} << n; }

TensorType f32(Shape s) { return {DType::f32, std::move(s)}; }

std::string compile(const std::string& op, std::vector<TensorType> inputs, Attrs attrs = {}) {
  NodeDef n;
  n.op = op;
  n.attrs = std::move(attrs);
  n.outputs = {0};
  auto r = compile_op(n, inputs);
  if (!r.ok()) return r.error().to_string();
  return r->outputs[0].to_string();
}

using Ints = std::vector<std::int64_t>;

}  // namespace

TEST_CASE("slice with a step of INT64_MAX takes one element") {
  CHECK(compile("slice", {f32({10, 3})}, {{"starts", Ints{2}}, {"ends", Ints{10}}, {"steps", Ints{kMax}}}) ==
        "f32 [1, 3]");
  CHECK(
      compile("slice", {f32({10, 3})},
              {{"starts", Ints{-kMax, 0}}, {"ends", Ints{kMax, 3}}, {"axes", Ints{0, 1}}, {"steps", Ints{3, kMax}}}) ==
      "f32 [4, 1]");
  CHECK(compile("slice", {f32({10})}, {{"starts", Ints{kMax}}, {"ends", Ints{-kMax}}, {"steps", Ints{kMax}}}) ==
        "f32 [0]");
}

TEST_CASE("conv2d: dilation times kernel that overflows is refused") {
  // A kernel of 2^30 rows dilated by 2^40 spans 2^70 rows.
  const std::string r =
      compile("conv2d", {f32({1, 1, 8, 8}), f32({1, 1, p2(30), 1})}, {{"dilations", Ints{p2(40), 1}}});
  CHECK(r == "INVALID_ARGUMENT: conv2d: dilated kernel height overflows int64 (1099511627776 * 1073741823)");
  // Dilation and padding at their limits, in checked arithmetic: the padded extent 8 + 2^41
  // minus the dilated kernel 2^40 * 2 + 1, plus one, is 8 rows out (by hand).
  CHECK(compile("conv2d", {f32({1, 1, 8, 8}), f32({1, 1, 3, 3})},
                {{"dilations", Ints{p2(40), p2(40)}}, {"pads", Ints{p2(40), p2(40), p2(40), p2(40)}}}) ==
        "f32 [1, 1, 8, 8]");
}

TEST_CASE("pads are held to [0, 2^40] before they are added, so padded extents cannot overflow") {
  // The padded sizes (input + pads) are added in checked arithmetic, but what keeps the pads' own
  // sum from overflowing is this range check: INT64_MAX is refused, not summed.
  const std::string range = "attribute 'pads' must hold values in [0, 2^40], got ";
  CHECK(compile("pad", {f32({2})}, {{"pads", Ints{kMax, kMax}}}) ==
        "INVALID_ARGUMENT: pad: " + range + "[9223372036854775807, 9223372036854775807]");
  CHECK(compile("conv2d", {f32({1, 1, 8, 8}), f32({1, 1, 3, 3})}, {{"pads", Ints{kMax, 0, kMax, 0}}}) ==
        "INVALID_ARGUMENT: conv2d: " + range + "[9223372036854775807, 0, 9223372036854775807, 0]");
  CHECK(compile("max_pool2d", {f32({1, 1, 8, 8})}, {{"kernel", Ints{2, 2}}, {"pads", Ints{kMax, 0, 0, 0}}}) ==
        "INVALID_ARGUMENT: max_pool2d: " + range + "[9223372036854775807, 0, 0, 0]");
  // The largest pads on an input that leaves room for them: 2^61 - 1 - 2^41 + 2 * 2^40 elements.
  CHECK(compile("pad", {f32({p2(61) - 1 - p2(41)})}, {{"pads", Ints{p2(40), p2(40)}}}) == "f32 [2305843009213693951]");
}

TEST_CASE("concat: an axis out of range, and sizes whose sum overflows") {
  CHECK(compile("concat", {f32({2}), f32({2})}, {{"axis", kMax}}) ==
        "INVALID_ARGUMENT: concat: axis 9223372036854775807 is out of range for rank 1");
  CHECK(compile("concat", {f32({2}), f32({2})}, {{"axis", std::numeric_limits<std::int64_t>::min()}}) ==
        "INVALID_ARGUMENT: concat: axis -9223372036854775808 is out of range for rank 1");
  const TensorType huge = f32({p2(61) - 1});  // the largest f32 vector whose bytes fit
  const std::string r = compile("concat", {huge, huge, huge, huge, huge}, {{"axis", std::int64_t{0}}});
  CHECK(r.rfind("INVALID_ARGUMENT: concat: the concatenated axis overflows int64", 0) == 0);
  CHECK(compile("concat", {huge, huge}, {{"axis", std::int64_t{0}}}) ==
        "INVALID_ARGUMENT: concat: output shape [4611686018427387902] has more elements than int64 can count");
}

TEST_CASE("reshape: huge sizes are refused and the element count has no holes") {
  // The sizes' product, 2^80, overflows (it used to be multiplied unchecked).
  CHECK(compile("reshape", {f32({0})}, {{"shape", Ints{p2(40), p2(40), 0}}}) ==
        "INVALID_ARGUMENT: reshape: cannot reshape f32 [0] to [1099511627776, 1099511627776, 0]: its sizes' product "
        "overflows int64");
  // 2^41 elements cannot become [2^40, 2, 0] (0 elements): once accepted, the zero skipped.
  CHECK(compile("reshape", {f32({p2(41)})}, {{"shape", Ints{p2(40), 2, 0}}}) ==
        "INVALID_ARGUMENT: reshape: cannot reshape f32 [2199023255552] (2199023255552 elements) to [1099511627776, 2, "
        "0]");
  CHECK(compile("reshape", {f32({p2(41)})}, {{"shape", Ints{p2(40), -1}}}) == "f32 [1099511627776, 2]");
  CHECK(compile("reshape", {f32({0})}, {{"shape", Ints{0, -1}}}) ==
        "INVALID_ARGUMENT: reshape: cannot reshape f32 [0] to [0, -1]");
}

TEST_CASE("outputs whose byte size overflows are refused for every op family") {
  const std::string too_big = "has more elements than int64 can count";
  CHECK(compile("add", {f32({p2(31), 1}), f32({1, p2(31)})}).find(too_big) != std::string::npos);
  CHECK(compile("matmul", {f32({p2(31), 1}), f32({1, p2(31)})}).find(too_big) != std::string::npos);
  CHECK(compile("expand", {f32({1, 1})}, {{"shape", Ints{p2(40), p2(40)}}}).find(too_big) != std::string::npos);
  CHECK(compile("pad", {f32({p2(61) - 1})}, {{"pads", Ints{p2(40), p2(40)}}}).find(too_big) != std::string::npos);
  CHECK(compile("gather", {f32({2, p2(40)}), TensorType{DType::i32, {p2(30)}}}).find(too_big) != std::string::npos);
}

TEST_CASE("mod on floats needs fmod; argmax's output_dtype is i32 or i64") {
  CHECK(compile("mod", {f32({2}), f32({2})}) ==
        "INVALID_ARGUMENT: mod: mod on f32 needs fmod = true (the remainder of C's fmod, as ONNX Mod requires for "
        "floats)");
  CHECK(compile("mod", {f32({2}), f32({3, 1})}, {{"fmod", true}}) == "f32 [3, 2]");
  CHECK(compile("mod", {{DType::i64, {2}}, {DType::i64, {2}}}) == "i64 [2]");
  CHECK(compile("mod", {{DType::i32, {2}}, {DType::i64, {2}}}).find("dtypes must agree") != std::string::npos);
  CHECK(compile("pow", {{DType::i32, {4}}, {DType::i32, {1}}}) == "i32 [4]");
  CHECK(compile("argmax", {f32({2, 5})}, {{"axis", std::int64_t{1}}}) == "i32 [2]");
  CHECK(compile("argmax", {f32({2, 5})}, {{"axis", std::int64_t{1}}, {"output_dtype", std::string("i64")}}) ==
        "i64 [2]");
  CHECK(compile("argmax", {f32({2, 5})}, {{"axis", std::int64_t{1}}, {"output_dtype", std::string("f32")}}) ==
        "INVALID_ARGUMENT: argmax: attribute 'output_dtype' must be \"i32\" or \"i64\", got \"f32\"");
  CHECK(compile("argmax", {f32({1, p2(31) + 1})}, {{"axis", std::int64_t{1}}}).find("indices beyond i32") !=
        std::string::npos);
  CHECK(compile("argmax", {f32({1, p2(31) + 1})}, {{"axis", std::int64_t{1}}, {"output_dtype", std::string("i64")}}) ==
        "i64 [1]");
}

TEST_CASE("the gate refuses what would be read out of bounds") {
  GraphDef g;
  g.values = {{"x", f32({2})}, {"y", f32({2})}};
  g.inputs = {0};
  g.outputs = {1};
  NodeDef relu;
  relu.op = "relu";
  relu.inputs = {0};
  relu.outputs = {1};
  g.nodes = {relu};
  REQUIRE(validate_graph(g).ok());

  GraphDef bad = g;
  bad.values[0].type = f32({-1});
  CHECK(validate_graph(bad).to_string() == "INVALID_ARGUMENT: values[0].shape[0]: dimension -1 is negative");
  bad = g;
  bad.values[0].type = f32({0, p2(40), p2(40)});  // no elements, but strides of 2^80
  CHECK(validate_graph(bad).to_string() ==
        "INVALID_ARGUMENT: values[0].shape: [0, 1099511627776, 1099511627776] overflows the size of a tensor");
  bad = g;
  bad.values[1].type.dtype = static_cast<DType>(9);
  CHECK(validate_graph(bad).to_string() == "INVALID_ARGUMENT: values[1].dtype: dtype 9 is not a dtype rml knows");
  bad = g;
  bad.inputs = {2};
  CHECK(validate_graph(bad).code() == Code::invalid_argument);
  bad = g;
  bad.constants.push_back({0, "", Tensor::zeros(f32({3})), false});
  bad.inputs = {};
  CHECK(validate_graph(bad).to_string() ==
        "INVALID_ARGUMENT: constants[0]: holds f32 [3] but value 0 (x) is recorded as f32 [2]");
  bad = g;
  bad.constants.push_back({0, "", Tensor(), false});
  bad.inputs = {};
  CHECK(validate_graph(bad).to_string() == "INVALID_ARGUMENT: constants[0]: value 0 (x) has no data");
  {  // a bool constant may hold only the bytes 0 and 1 (kernels read them as bool)
    GraphDef b;
    const TensorType b3{DType::boolean, {3}};
    b.values = {{"m", b3}, {"y", b3}};
    b.outputs = {1};
    NodeDef n;
    n.op = "logical_not";
    n.inputs = {0};
    n.outputs = {1};
    b.nodes = {n};
    Tensor data = Tensor::zeros(b3);
    data.mutable_raw_data()[0] = std::byte{1};
    b.constants.push_back({0, "", data, true});
    CHECK(validate_graph(b).ok());
    data = Tensor::zeros(b3);
    data.mutable_raw_data()[2] = std::byte{255};
    b.constants[0].data = data;
    CHECK(validate_graph(b).to_string() ==
          "INVALID_ARGUMENT: constants[0].data: value 0 (m) is bool but its byte 2 is 255, not 0 or 1");
    CHECK(Graph::from_def(b).error().code() == Code::invalid_argument);
  }
  bad = g;
  bad.nodes[0].op = "";
  CHECK(validate_graph(bad).to_string() == "INVALID_ARGUMENT: nodes[0].op: is empty");
  bad = g;
  bad.nodes[0].outputs = {};
  CHECK(validate_graph(bad).to_string() ==
        "INVALID_ARGUMENT: nodes[0].outputs: a node must produce at least one value");
  bad = g;
  bad.nodes[0].inputs = {0, 0};  // arity is the type checker's: the structure is sound
  CHECK(validate_graph(bad).ok());
  CHECK(infer_types(bad).error().to_string() == "INVALID_ARGUMENT: node 0 (relu): takes 1 input, got 2");
  bad = g;
  bad.nodes[0].op = "frobnicate";  // unknown ops are the type checker's
  bad.nodes[0].inputs = {0, 0, 0};
  CHECK(validate_graph(bad).ok());
  CHECK(infer_types(bad).error().code() == Code::unsupported);

  // A Graph built from it unchecked is refused at its checked entry points.
  bad = g;
  bad.nodes[0].inputs = {5};
  const Graph graph(bad);
  CHECK(infer_types(graph).error().code() == Code::invalid_argument);
  CHECK(graph.nodes().empty());
}
