// Core types: Status, Result, DType, Shape, TensorType, Tensor, reflection and structural equality.
#include <doctest/doctest.h>

#include <rml/core/equal.hpp>
#include <rml/core/status.hpp>
#include <rml/core/tensor.hpp>
#include <rml/ir/graph.hpp>

using namespace rml;

TEST_CASE("Status carries code and message; OK allocates nothing") {
  Status ok;
  CHECK(ok.ok());
  CHECK(ok.code_name() == "OK");
  CHECK(sizeof(Status) == sizeof(void*));
  Status bad = invalid_argument("values[3].shape[1]: must be >= 0");
  CHECK(!bad.ok());
  CHECK(bad.code() == Code::invalid_argument);
  CHECK(bad.to_string() == "INVALID_ARGUMENT: values[3].shape[1]: must be >= 0");
  CHECK(bad.with_prefix("m.json: ").message() == "m.json: values[3].shape[1]: must be >= 0");
  CHECK(code_name(Code::data_loss) == "DATA_LOSS");
  CHECK(code_name(Code::failed_precondition) == "FAILED_PRECONDITION");
  CHECK(code_name(Code::unsupported) == "UNSUPPORTED");
}

TEST_CASE("Result holds a value or a status; value() throws Error") {
  Result<int> r = 5;
  REQUIRE(r.ok());
  CHECK(*r == 5);
  Result<int> e = not_found("x.json: no such file");
  CHECK(!e.ok());
  CHECK(e.error().code() == Code::not_found);
  try {
    (void)e.value();
    FAIL("value() did not throw");
  } catch (const Error& err) {
    CHECK(err.code() == Code::not_found);
    CHECK(err.code_name() == "NOT_FOUND");
    CHECK(std::string(err.what()) == "x.json: no such file");
  }
  Result<int> from_ok = Status();
  CHECK(from_ok.error().code() == Code::internal);
}

TEST_CASE("DType names and sizes") {
  CHECK(dtype_name(DType::f32) == "f32");
  CHECK(dtype_name(DType::i32) == "i32");
  CHECK(element_size(DType::i32) == 4);
  CHECK(parse_dtype("i32") == DType::i32);
  CHECK(parse_dtype("f16") == DType::f16);
  CHECK(parse_dtype("bool") == DType::boolean);
  CHECK(!parse_dtype("f8").has_value());
  static_assert(std::is_same_v<dtype_type_t<DType::f32>, float>);
}

TEST_CASE("Shape and TensorType print and check overflow") {
  TensorType t{DType::f32, {2, 16}};
  CHECK(t.to_string() == "f32 [2, 16]");
  CHECK(TensorType{DType::i32, {}}.to_string() == "i32 []");
  CHECK(Shape{2, 3, 4}.checked_numel() == 24);
  CHECK(Shape{}.checked_numel() == 1);
  CHECK(!Shape{-1, 3}.checked_numel());
  CHECK(!Shape{1LL << 40, 1LL << 40}.checked_numel());
  CHECK(!TensorType{DType::f32, {1LL << 31, 1LL << 31}}.checked_nbytes());
  CHECK(TensorType{DType::f32, {0, 5}}.checked_nbytes() == 0);
}

TEST_CASE("Tensor owns or shares storage; typed access is checked") {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(a.type().to_string() == "f32 [2, 3]");
  CHECK(a.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(reinterpret_cast<std::uintptr_t>(a.raw_data()) % 64 == 0);
  CHECK_THROWS_AS((void)a.data<std::int32_t>(), Error);
  Tensor b = a.reshape({-1});
  CHECK(b.shape() == Shape{6});
  CHECK(b.storage() == a.storage());
  CHECK_THROWS_AS((void)a.reshape({4, -1}), Error);
  Tensor c = a.clone();
  CHECK(c.storage() != a.storage());
  CHECK(c.equal(a));
  c.mutable_data<float>()[0] = 9;
  CHECK(!c.equal(a));
  CHECK(a.data<float>()[0] == 1);
  Tensor z = Tensor::zeros(DType::i32, {0, 4});
  CHECK(z.numel() == 0);
  CHECK(z.to_vector<std::int32_t>().empty());
  CHECK_THROWS_AS(Tensor::zeros(DType::f32, {-2}), Error);
  CHECK_THROWS_AS(Tensor::from_vector<float>({1, 2}, {3}), Error);
}

TEST_CASE("reflection walks fields; structural equality names the first difference by path") {
  static_assert(field_count_v<NodeDef> == 7);
  GraphDef g;
  g.values = {{"x", {DType::f32, {2, 3}}}, {"y", {DType::f32, {2, 3}}}};
  g.inputs = {0};
  g.outputs = {1};
  NodeDef relu;
  relu.op = "relu";
  relu.inputs = {0};
  relu.outputs = {1};
  g.nodes = {relu, relu};
  GraphDef h = g;
  CHECK(structural_equal(g, h));
  CHECK(assert_structural_equal(g, h).ok());
  h.nodes[1].inputs[0] = 5;
  Status s = assert_structural_equal(g, h);
  CHECK(s.code() == Code::invalid_argument);
  CHECK(s.message() == "not structurally equal: nodes[1].inputs[0]: 0 != 5");
  h = g;
  h.values[1].type.shape = Shape{2, 4};
  CHECK(assert_structural_equal(g, h).message() == "not structurally equal: values[1].type.shape.dims[1]: 3 != 4");
  h = g;
  h.nodes[0].attrs["axis"] = std::int64_t{1};
  CHECK(assert_structural_equal(g, h).message() == "not structurally equal: nodes[0].attrs: size 0 != 1");
  CHECK(to_debug_string(g.values[0]) == R"({name: "x", type: {dtype: f32, shape: {dims: [2, 3]}}})");

  ConstantDef c1{0, "w", Tensor::from_vector<float>({1, 2}, {2}), false};
  ConstantDef c2{0, "w", Tensor::from_vector<float>({1, 3}, {2}), false};
  CHECK(assert_structural_equal(c1, c2).message() == "not structurally equal: data: tensor data differs at element 1");
}

TEST_CASE("checked arithmetic: overflow is an answer, not undefined behaviour") {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  CHECK(rml::checked_mul(max, 2) == std::nullopt);
  CHECK(rml::checked_mul(-1, std::numeric_limits<std::int64_t>::min()) == std::nullopt);
  CHECK(rml::checked_mul(3, 4) == 12);
  CHECK(rml::checked_add(max, 1) == std::nullopt);
  CHECK(rml::checked_add(max - 1, 1) == max);
  CHECK(rml::checked_sub(std::numeric_limits<std::int64_t>::min(), 1) == std::nullopt);
  const std::int64_t big = std::int64_t{1} << 40;
  // A zero dimension makes no elements, but the other dimensions' product must still fit.
  CHECK(rml::Shape{0, big, big}.checked_numel() == std::nullopt);
  CHECK(rml::Shape{0, big}.checked_numel() == 0);
  CHECK(rml::Shape{big, -1}.checked_numel() == std::nullopt);
  CHECK(rml::Shape{big, -1}.numel() == 0);  // unchecked use of an invalid shape reads nothing
  CHECK(rml::checked_bytes(rml::TensorType{rml::DType::f32, {std::int64_t{1} << 61}}) == std::nullopt);
  CHECK(rml::checked_bytes(rml::TensorType{rml::DType::f32, {(std::int64_t{1} << 61) - 1}}) ==
        ((std::int64_t{1} << 61) - 1) * 4);
  CHECK(rml::checked_numel(rml::Shape{2, 3}) == 6);
  CHECK_THROWS_AS((void)rml::Tensor::zeros(rml::DType::f32, {big, big}), rml::Error);
}

TEST_CASE("Tensor reports its device and moves to the CPU as itself") {
  const rml::Tensor t = rml::Tensor::from_vector<float>({1, 2}, {2});
  CHECK(t.device() == rml::Device::cpu());
  const rml::Tensor same = t.to(rml::Device::cpu());
  CHECK(same.storage() == t.storage());
  CHECK(same.to_vector<float>() == std::vector<float>{1, 2});
  CHECK_THROWS_AS((void)t.to(rml::Device{rml::DeviceKind::gpu, 0}), rml::Error);
}

TEST_CASE("Tensor::reshape in checked arithmetic") {
  const rml::Tensor t = rml::Tensor::zeros(rml::DType::f32, {6});
  CHECK(t.reshape({-1, 3}).shape() == rml::Shape{2, 3});
  CHECK(t.reshape({2, -1}).shape() == rml::Shape{2, 3});
  const std::int64_t big = std::int64_t{1} << 40;
  CHECK_THROWS_AS((void)t.reshape({big, big, -1}), rml::Error);  // used to overflow
  CHECK_THROWS_AS((void)t.reshape({0, -1}), rml::Error);
  CHECK_THROWS_AS((void)t.reshape({4, -1}), rml::Error);
}
