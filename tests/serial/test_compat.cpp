// Format compatibility: committed files written by older schemas read with the newer types, in the
// keyed layout of format 1 and the positional layout of format 2; newer documents read by older
// types; a newer major version refused.
//
// The files under tests/data/serial/ were written by the "old" types below: `*_v1.msgpack` and
// `graph_v0.msgpack` by the format-1 writer (kept as they are: today's writer writes format 2),
// `*.format2.msgpack` by today's writer. To rewrite the format-2 files (only when the wire format
// changes on purpose, with a new major version), run this test binary with
// `--no-skip -tc="regenerate*"` (which also rewrites the fuzzer's format-2 seeds).
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
// Each struct is a prefix of today's, as the positional layout requires (graph_v0.msgpack, keyed,
// was written before `producer` existed; keys do not care).
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
  std::string producer;
  std::vector<ValueDef> values;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::vector<ConstantDef> constants;
  std::vector<NodeDef> nodes;
  static constexpr auto fields() {
    return std::tuple{field("name", &GraphDef::name),       field("producer", &GraphDef::producer),
                      field("values", &GraphDef::values),   field("inputs", &GraphDef::inputs),
                      field("outputs", &GraphDef::outputs), field("constants", &GraphDef::constants),
                      field("nodes", &GraphDef::nodes)};
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

// The committed files: format 1 (keyed structs) and format 2 (positional structs) of each old schema.
constexpr const char* model_files[] = {"model_v1.msgpack", "model_v1.format2.msgpack"};
constexpr const char* graph_files[] = {"graph_v0.msgpack", "graph_v0.format2.msgpack"};

// Where the envelope's version array [major, minor] starts its elements in `bytes`.
std::size_t version_at(const std::vector<std::uint8_t>& bytes) {
  // "version" then a fixarray of 2: 0xa7 'version' 0x92.
  const std::vector<std::uint8_t> key = {0xa7, 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x92};
  auto it = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  REQUIRE(it != bytes.end());
  return static_cast<std::size_t>(it - bytes.begin()) + key.size();
}

}  // namespace

TEST_CASE("regenerate the committed old-schema files" * doctest::skip()) {
  std::filesystem::create_directories(data_file(""));
  REQUIRE(serialize_to_file(old_model(), data_file(model_files[1])).ok());
  REQUIRE(serialize_to_file(old_graph(), data_file(graph_files[1])).ok());
  // The fuzzer's seeds (tests/fuzz/fuzz_msgpack.cpp); the format-1 seeds (v1_*) stay as they are.
  const auto corpus = std::filesystem::path(RML_TEST_DATA_DIR).parent_path() / "fuzz" / "corpus" / "msgpack";
  std::filesystem::create_directories(corpus);
  REQUIRE(serialize_to_file(sample_graph(), corpus / "sample_graph.msgpack").ok());
  REQUIRE(serialize_to_file(chain_graph(4), corpus / "chain_graph.msgpack").ok());
  REQUIRE(serialize_to_file(old_graph(), corpus / "old_graph.msgpack").ok());
  REQUIRE(serialize_to_file(Graph(GraphDef{}), corpus / "empty_graph.msgpack").ok());
  REQUIRE(serialize_to_file(every_dtype_graph(), corpus / "dtypes_graph.msgpack").ok());
}

TEST_CASE("a file from an older schema reads with the newer type; added fields take their defaults") {
  for (const char* file : model_files) {
    CAPTURE(file);
    REQUIRE(std::filesystem::exists(data_file(file)));
    auto m = deserialize_from_file<v2::Model>(data_file(file));
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
}

TEST_CASE("an older IR file (no origin, device or metadata) reads as today's GraphDef") {
  for (const char* file : graph_files) {
    CAPTURE(file);
    REQUIRE(std::filesystem::exists(data_file(file)));
    auto g = deserialize_from_file<Graph>(data_file(file));
    REQUIRE_MESSAGE(g.ok(), g.error().to_string());
    const GraphDef& def = g->def();
    CHECK(def.name == "relu_scale");
    CHECK(def.producer.empty());
    CHECK(def.metadata.empty());
    REQUIRE(def.values.size() == 4);
    CHECK(def.values[3].name == "y");
    CHECK(def.values[3].type == TensorType{DType::f32, {2}});
    CHECK(def.inputs == std::vector<ValueId>{0});
    CHECK(def.outputs == std::vector<ValueId>{3});
    REQUIRE(def.nodes.size() == 2);
    CHECK(def.nodes[0].op == "mul");
    CHECK(def.nodes[0].inputs == std::vector<ValueId>{0, 1});
    CHECK(def.nodes[0].outputs == std::vector<ValueId>{2});
    CHECK(def.nodes[0].name == "scale");
    CHECK(!def.nodes[0].origin);
    CHECK(def.nodes[0].device == Device::cpu(0));
    CHECK(def.nodes[1].op == "relu");
    CHECK(def.nodes[1].name.empty());
    CHECK(def.nodes[1].attrs.at("inplace") == AttrValue(false));
    REQUIRE(def.constants.size() == 1);
    CHECK(def.constants[0].value == 1);
    CHECK(def.constants[0].tensor == "s");
    CHECK(def.constants[0].data.to_vector<float>() == std::vector<float>{0.5f, -2.0f});
  }
}

TEST_CASE("the wire format is stable: today's writer reproduces the committed format-2 bytes") {
  CHECK(serialize(old_model()) == read_bytes(data_file(model_files[1])));
  CHECK(serialize(old_graph()) == read_bytes(data_file(graph_files[1])));
  // And the format-2 file is the positional layout: the root Model is [name, layers], each Layer
  // [name, width], checked byte for byte against a hand encoding.
  const auto bytes = read_bytes(data_file(model_files[1]));
  const std::vector<std::uint8_t> root = {0x92, 0xa3, 'm', 'l', 'p', 0x92,   // ["mlp", [
                                          0x92, 0xa3, 'f', 'c', '1', 0x10,   // ["fc1", 16],
                                          0x92, 0xa3, 'f', 'c', '2', 0x04};  // ["fc2", 4]]]
  REQUIRE(bytes.size() > root.size());
  CHECK(std::vector<std::uint8_t>(bytes.end() - static_cast<std::ptrdiff_t>(root.size()), bytes.end()) == root);
}

TEST_CASE("a newer document reads with an older type: appended fields are skipped") {
  v2::Model m;
  m.name = "new";
  m.layers = {{"fc", 8, "relu", 0.1}};
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
  CHECK(before->producer == today.producer);
  REQUIRE(before->nodes.size() == today.nodes.size());
  for (std::size_t i = 0; i < today.nodes.size(); ++i) {
    CHECK(before->nodes[i].op == today.nodes[i].op);
    CHECK(before->nodes[i].inputs == today.nodes[i].inputs);
    CHECK(before->nodes[i].name == today.nodes[i].name);
    CHECK(before->nodes[i].attrs == today.nodes[i].attrs);
  }
  CHECK(before->constants[0].data.storage() == before->constants[1].data.storage());
}

TEST_CASE("a newer major version is refused; a newer minor version and version 1 are read") {
  auto bytes = read_bytes(data_file(model_files[1]));
  const std::size_t at = version_at(bytes);
  REQUIRE(bytes[at] == 2);
  bytes[at + 1] = 9;  // 2.9
  CHECK(deserialize<v2::Model>(bytes).ok());
  bytes[at] = 3;  // 3.9
  auto r = deserialize<v2::Model>(bytes);
  REQUIRE(!r.ok());
  CHECK(r.error().code() == Code::unsupported);
  CHECK(r.error().message().find("version 3.9 is not supported") != std::string::npos);
  bytes[at] = 0;  // 0.9: there never was one
  CHECK(deserialize<v2::Model>(bytes).error().code() == Code::unsupported);

  auto v1 = read_bytes(data_file(model_files[0]));
  const std::size_t v1_at = version_at(v1);
  REQUIRE(v1[v1_at] == 1);
  v1[v1_at + 1] = 9;  // 1.9
  CHECK(deserialize<v2::Model>(v1).ok());
}
