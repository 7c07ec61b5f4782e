// Format compatibility: committed files written by older schemas read with the newer types,
// newer documents read by older types, and a newer major version refused.
//
// The files under tests/data/serial/ were written by the "old" types below. To rewrite them (only
// when the wire format changes on purpose, with a new major version), run this test binary with
// `--no-skip -tc="regenerate*"` (which also rewrites the fuzzer's seed corpus).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <rml/core/equal.hpp>
#include <rml/serial/serialize.hpp>

#include "serial/test_serial_types.hpp"

using namespace rml;
using namespace serial_test;

namespace {

// The IR as an earlier rml wrote it: nodes without origin and device, graphs without metadata.
namespace old_ir {
struct NodeDef {
  std::string op;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::string name;
  Attrs attrs;
  static constexpr auto fields() {
    return std::tuple{field("op", &NodeDef::op), field("inputs", &NodeDef::inputs), field("outputs", &NodeDef::outputs),
                      field("name", &NodeDef::name), field("attrs", &NodeDef::attrs)};
  }
};
struct GraphDef {
  std::string name;
  std::vector<ValueDef> values;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::vector<ConstantDef> constants;
  std::vector<NodeDef> nodes;
  static constexpr auto fields() {
    return std::tuple{field("name", &GraphDef::name),           field("values", &GraphDef::values),
                      field("inputs", &GraphDef::inputs),       field("outputs", &GraphDef::outputs),
                      field("constants", &GraphDef::constants), field("nodes", &GraphDef::nodes)};
  }
};
}  // namespace old_ir

v1::Model old_model() {
  v1::Model m;
  m.name = "mlp";
  m.layers = {{"fc1", 16}, {"fc2", 4}};
  return m;
}

old_ir::GraphDef old_graph() {
  old_ir::GraphDef g;
  g.name = "relu_scale";
  g.values = {{"x", {DType::f32, {2}}}, {"s", {DType::f32, {2}}}, {"h", {DType::f32, {2}}}, {"y", {DType::f32, {2}}}};
  g.inputs = {0};
  g.outputs = {3};
  g.constants = {{1, "s", Tensor::from_vector<float>({0.5f, -2.0f}, {2}), false}};
  g.nodes = {{"mul", {0, 1}, {2}, "scale", {}}, {"relu", {2}, {3}, "", {{"inplace", false}}}};
  return g;
}

std::filesystem::path data_file(const char* name) { return std::filesystem::path(RML_TEST_DATA_DIR) / "serial" / name; }

std::vector<std::uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("regenerate the committed old-schema files" * doctest::skip()) {
  std::filesystem::create_directories(data_file(""));
  REQUIRE(serialize_to_file(old_model(), data_file("model_v1.msgpack")).ok());
  REQUIRE(serialize_to_file(old_graph(), data_file("graph_v0.msgpack")).ok());
  // The fuzzer's seeds (tests/fuzz/fuzz_msgpack.cpp).
  const auto corpus = std::filesystem::path(RML_TEST_DATA_DIR).parent_path() / "fuzz" / "corpus" / "msgpack";
  std::filesystem::create_directories(corpus);
  REQUIRE(serialize_to_file(sample_graph(), corpus / "sample_graph.msgpack").ok());
  REQUIRE(serialize_to_file(chain_graph(4), corpus / "chain_graph.msgpack").ok());
  REQUIRE(serialize_to_file(old_graph(), corpus / "old_graph.msgpack").ok());
}

TEST_CASE("a file from an older schema reads with the newer type; added fields take their defaults") {
  REQUIRE(std::filesystem::exists(data_file("model_v1.msgpack")));
  auto m = deserialize_from_file<v2::Model>(data_file("model_v1.msgpack"));
  REQUIRE_MESSAGE(m.ok(), m.error().to_string());
  CHECK(m->name == "mlp");
  REQUIRE(m->layers.size() == 2);
  CHECK(m->layers[0].name == "fc1");
  CHECK(m->layers[0].width == 16);
  CHECK(!m->layers[0].activation);
  CHECK(m->layers[0].dropout == 0.5);
  CHECK(m->layers[1].name == "fc2");
  CHECK(m->layers[1].width == 4);
  CHECK(m->metadata.empty());
}

TEST_CASE("an older IR file (no origin, device or metadata) reads as today's GraphDef") {
  REQUIRE(std::filesystem::exists(data_file("graph_v0.msgpack")));
  auto g = deserialize_from_file<Graph>(data_file("graph_v0.msgpack"));
  REQUIRE_MESSAGE(g.ok(), g.error().to_string());
  const GraphDef& def = g->def();
  CHECK(def.name == "relu_scale");
  CHECK(def.producer.empty());
  CHECK(def.metadata.empty());
  REQUIRE(def.nodes.size() == 2);
  CHECK(def.nodes[0].op == "mul");
  CHECK(def.nodes[0].inputs == std::vector<ValueId>{0, 1});
  CHECK(def.nodes[0].name == "scale");
  CHECK(!def.nodes[0].origin);
  CHECK(def.nodes[0].device == Device::cpu(0));
  CHECK(def.nodes[1].attrs.at("inplace") == AttrValue(false));
  REQUIRE(def.constants.size() == 1);
  CHECK(def.constants[0].data.to_vector<float>() == std::vector<float>{0.5f, -2.0f});
}

TEST_CASE("the wire format is stable: today's writer reproduces the committed bytes") {
  CHECK(serialize(old_model()) == read_bytes(data_file("model_v1.msgpack")));
  CHECK(serialize(old_graph()) == read_bytes(data_file("graph_v0.msgpack")));
}

TEST_CASE("a newer document reads with an older type: unknown fields are skipped") {
  v2::Model m;
  m.name = "new";
  m.layers = {{"fc", "relu", 8, 0.1}};
  m.metadata = {{"a", "b"}};
  auto old = deserialize<v1::Model>(serialize(m));
  REQUIRE_MESSAGE(old.ok(), old.error().to_string());
  CHECK(old->name == "new");
  REQUIRE(old->layers.size() == 1);
  CHECK(old->layers[0].name == "fc");
  CHECK(old->layers[0].width == 8);

  GraphDef today = sample_graph();
  auto before = deserialize<old_ir::GraphDef>(serialize(today));
  REQUIRE_MESSAGE(before.ok(), before.error().to_string());
  CHECK(before->nodes.size() == today.nodes.size());
  CHECK(before->nodes[2].attrs == today.nodes[2].attrs);
}

TEST_CASE("a newer major version is refused; a newer minor version is read") {
  auto bytes = read_bytes(data_file("model_v1.msgpack"));
  // "version" then the array [1, 0]: 0xa7 'version' 0x92 0x01 0x00.
  const std::vector<std::uint8_t> key = {0xa7, 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x92};
  auto it = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  REQUIRE(it != bytes.end());
  const auto at = static_cast<std::size_t>(it - bytes.begin()) + key.size();
  REQUIRE(bytes[at] == 1);
  bytes[at + 1] = 9;  // 1.9
  CHECK(deserialize<v2::Model>(bytes).ok());
  bytes[at] = 2;  // 2.9
  auto r = deserialize<v2::Model>(bytes);
  REQUIRE(!r.ok());
  CHECK(r.error().code() == Code::unsupported);
  CHECK(r.error().message().find("version 2.9 is not supported") != std::string::npos);
}
