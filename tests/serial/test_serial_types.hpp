// Test types for the serialization tests: plain, shared, polymorphic, and two schema versions.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "rml/core/reflect.hpp"
#include "rml/ir/graph.hpp"
#include "rml/serial/registry.hpp"

namespace serial_test {

struct Point {
  std::int32_t x = 0;
  std::int32_t y = 0;
  static constexpr auto fields() { return std::tuple{rml::field("x", &Point::x), rml::field("y", &Point::y)}; }
};

// Two pointers that may share one object.
struct Pair {
  std::shared_ptr<Point> a;
  std::shared_ptr<Point> b;
  static constexpr auto fields() { return std::tuple{rml::field("a", &Pair::a), rml::field("b", &Pair::b)}; }
};

// A linked list: nesting through shared objects.
struct Link {
  std::int64_t value = 0;
  std::shared_ptr<Link> next;
  static constexpr auto fields() {
    return std::tuple{rml::field("value", &Link::value), rml::field("next", &Link::next)};
  }
};

// A small polymorphic expression tree, restored through the registry.
struct Expr {
  virtual ~Expr() = default;
  std::string label;
  static constexpr auto fields() { return std::tuple{rml::field("label", &Expr::label)}; }
};
struct Const : Expr {
  double value = 0;
  static constexpr auto fields() {
    return std::tuple_cat(Expr::fields(), std::tuple{rml::field("value", &Const::value)});
  }
};
struct Add : Expr {
  std::shared_ptr<Expr> lhs;
  std::shared_ptr<Expr> rhs;
  static constexpr auto fields() {
    return std::tuple_cat(Expr::fields(), std::tuple{rml::field("lhs", &Add::lhs), rml::field("rhs", &Add::rhs)});
  }
};
struct Unregistered : Expr {
  std::int32_t secret = 0;
  static constexpr auto fields() {
    return std::tuple_cat(Expr::fields(), std::tuple{rml::field("secret", &Unregistered::secret)});
  }
};
struct Program {
  std::vector<std::shared_ptr<Expr>> roots;
  static constexpr auto fields() { return std::tuple{rml::field("roots", &Program::roots)}; }
};

RML_REGISTER_TYPE(Const, Expr);
RML_REGISTER_TYPE(Add, Expr);

// A struct member whose default is not its type's default: written at Device{} (trimmed to an empty
// struct), it must read back as Device{}, not as cpu(2).
struct Placement {
  rml::Device device = rml::Device::cpu(2);
  std::int32_t priority = 0;
  static constexpr auto fields() {
    return std::tuple{rml::field("device", &Placement::device), rml::field("priority", &Placement::priority)};
  }
};

// Every field category at once.
struct Everything {
  bool flag = false;
  std::int8_t i8 = 0;
  std::uint64_t u64 = 0;
  std::int64_t i64 = 0;
  float f = 0;
  double d = 0;
  rml::DType dtype = rml::DType::f32;
  std::string text;
  std::vector<std::string> words;
  std::vector<std::uint8_t> blob;
  std::vector<bool> bits;
  std::optional<rml::Origin> origin;
  std::map<std::string, rml::AttrValue, std::less<>> attrs;
  std::map<std::int32_t, std::vector<double>> table;
  rml::Tensor tensor;
  rml::Tensor empty_tensor;
  std::shared_ptr<Point> point;
  static constexpr auto fields() {
    return std::tuple{rml::field("flag", &Everything::flag),     rml::field("i8", &Everything::i8),
                      rml::field("u64", &Everything::u64),       rml::field("i64", &Everything::i64),
                      rml::field("f", &Everything::f),           rml::field("d", &Everything::d),
                      rml::field("dtype", &Everything::dtype),   rml::field("text", &Everything::text),
                      rml::field("words", &Everything::words),   rml::field("blob", &Everything::blob),
                      rml::field("bits", &Everything::bits),     rml::field("origin", &Everything::origin),
                      rml::field("attrs", &Everything::attrs),   rml::field("table", &Everything::table),
                      rml::field("tensor", &Everything::tensor), rml::field("empty_tensor", &Everything::empty_tensor),
                      rml::field("point", &Everything::point)};
  }
};

// Schema evolution: version 1 of a model description, and version 2 that appended fields (and
// nothing else: no serialization code changes). Each v1 struct is a prefix of its v2 struct, as the
// positional layout requires.
namespace v1 {
struct Layer {
  std::string name;
  std::int64_t width = 0;
  static constexpr auto fields() {
    return std::tuple{rml::field("name", &Layer::name), rml::field("width", &Layer::width)};
  }
};
struct Model {
  std::string name;
  std::vector<Layer> layers;
  static constexpr auto fields() {
    return std::tuple{rml::field("name", &Model::name), rml::field("layers", &Model::layers)};
  }
};
}  // namespace v1

namespace v2 {
struct Layer {
  std::string name;
  std::int64_t width = 0;
  std::optional<std::string> activation;  // added in v2
  double dropout = 0.5;                   // added in v2, with a default
  static constexpr auto fields() {
    return std::tuple{rml::field("name", &Layer::name), rml::field("width", &Layer::width),
                      rml::field("activation", &Layer::activation), rml::field("dropout", &Layer::dropout)};
  }
};
struct Model {
  std::string name;
  std::vector<Layer> layers;
  std::map<std::string, std::string> metadata;  // added in v2
  static constexpr auto fields() {
    return std::tuple{rml::field("name", &Model::name), rml::field("layers", &Model::layers),
                      rml::field("metadata", &Model::metadata)};
  }
};
}  // namespace v2

/// A graph with every IR feature: attributes of every kind, origins, devices, tied weights, metadata.
/// `tied` makes the two weight constants share one tensor (else the second is a copy).
inline rml::GraphDef sample_graph(bool tied = true) {
  using namespace rml;
  GraphDef g;
  g.name = "sample";
  g.producer = "rml tests";
  g.values = {{"x", {DType::f32, {2, 4}}}, {"w", {DType::f32, {4, 4}}},  {"w_tied", {DType::f32, {4, 4}}},
              {"h", {DType::f32, {2, 4}}}, {"h2", {DType::f32, {2, 4}}}, {"idx", {DType::i32, {3}}},
              {"y", {DType::f32, {2, 4}}}};
  g.inputs = {0};
  g.outputs = {6};
  std::vector<float> w(16);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * static_cast<float>(i) - 1.5f;
  w[3] = -0.0f;
  w[5] = 1e-42f;  // subnormal
  Tensor wt = Tensor::from_vector(w, {4, 4});
  g.constants.push_back({1, "w", wt, false});
  g.constants.push_back({2, "w_tied", tied ? wt : wt.clone(), false});
  g.constants.push_back({5, "", Tensor::from_vector<std::int32_t>({0, -1, 7}, {3}), true});
  NodeDef mm;
  mm.op = "matmul";
  mm.inputs = {0, 1};
  mm.outputs = {3};
  mm.name = "layers.0.mm";
  mm.origin = Origin{"layers.0", "model.py", 41};
  NodeDef mm2 = mm;
  mm2.inputs = {3, 2};
  mm2.outputs = {4};
  mm2.name = "layers.1.mm";
  mm2.device = Device::cpu(1);
  NodeDef act;
  act.op = "gelu";
  act.inputs = {4};
  act.outputs = {6};
  act.attrs = {{"approximate", std::string("tanh")},
               {"axis", std::int64_t{-1}},
               {"eps", 1e-5},
               {"keepdims", true},
               {"perm", std::vector<std::int64_t>{1, 0}},
               {"scales", std::vector<double>{0.5, -2.25}}};
  g.nodes = {mm, mm2, act};
  g.metadata = {{"license", "MIT"}, {"source", "hand-built"}};
  return g;
}

/// A chain of `n` operators over one input, alternating linear layers (matmul + add with a
/// weight and a bias) and activations, named and with origins as an exporter writes them.
inline rml::GraphDef chain_graph(int n) {
  using namespace rml;
  GraphDef g;
  g.name = "chain";
  g.values.push_back({"x", {DType::f32, {1, 8}}});
  g.inputs = {0};
  const Tensor w = Tensor::from_vector(std::vector<float>(64, 0.125f), {8, 8});
  const Tensor b = Tensor::from_vector(std::vector<float>(8, -1.0f), {8});
  ValueId h = 0;
  for (int i = 0; i < n; ++i) {
    NodeDef node;
    const std::string layer = "layers." + std::to_string(i / 3);
    switch (i % 3) {
      case 0:
        g.values.push_back({layer + ".weight", {DType::f32, {8, 8}}});
        g.constants.push_back({static_cast<ValueId>(g.values.size() - 1), layer + ".weight", w, false});
        node.op = "matmul";
        node.inputs = {h, static_cast<ValueId>(g.values.size() - 1)};
        break;
      case 1:
        g.values.push_back({layer + ".bias", {DType::f32, {8}}});
        g.constants.push_back({static_cast<ValueId>(g.values.size() - 1), layer + ".bias", b, false});
        node.op = "add";
        node.inputs = {h, static_cast<ValueId>(g.values.size() - 1)};
        break;
      default:
        node.op = "gelu";
        node.inputs = {h};
        node.attrs = {{"approximate", std::string("tanh")}};
    }
    g.values.push_back({"", {DType::f32, {1, 8}}});
    h = static_cast<ValueId>(g.values.size() - 1);
    node.outputs = {h};
    node.name = layer + "." + node.op;
    node.origin = Origin{layer, "model.py", 10 + i % 3};
    g.nodes.push_back(std::move(node));
  }
  g.outputs = {h};
  return g;
}

inline rml::Tensor bool_tensor(const std::vector<int>& v) {
  rml::Tensor t = rml::Tensor::zeros(rml::DType::boolean, {static_cast<std::int64_t>(v.size())});
  for (std::size_t i = 0; i < v.size(); ++i) t.mutable_data<bool>()[i] = v[i] != 0;
  return t;
}

// A graph with a constant of every dtype, 16-bit floats with signed zeros, NaN payloads,
// subnormals and infinities; integers at their extremes.
inline rml::GraphDef every_dtype_graph() {
  using namespace rml;
  GraphDef g;
  g.name = "dtypes";
  const Tensor data[] = {
      Tensor::from_vector<f16>(
          {f16(0.1F), f16::from_bits(0x8000), f16::from_bits(0x7e01), f16::from_bits(0x0001), f16::from_bits(0xfc00)},
          {5}),
      Tensor::from_vector<bf16>({bf16(-2.5F), bf16::from_bits(0xffc3), bf16::from_bits(0x0001)}, {3}),
      Tensor::from_vector<std::int64_t>({std::numeric_limits<std::int64_t>::min(), -1, (std::int64_t{1} << 53) + 1,
                                         std::numeric_limits<std::int64_t>::max()},
                                        {2, 2}),
      bool_tensor({1, 0, 0, 1}),
      Tensor::from_vector<float>({-0.0F, NAN}, {2}),
      Tensor::from_vector<std::int32_t>({-7}, {1}),
  };
  for (const Tensor& t : data) {
    const auto id = static_cast<ValueId>(g.values.size());
    g.values.push_back({std::string(dtype_name(t.dtype())), t.type()});
    g.constants.push_back({id, "", t, id % 2 == 0});
    g.outputs.push_back(id);
  }
  return g;
}

}  // namespace serial_test
