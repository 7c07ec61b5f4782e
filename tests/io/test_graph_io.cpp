// rml-graph JSON: the MLP fixture, round trips, and a corpus of malformed models.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include <rml/core/equal.hpp>
#include <rml/io/graph_io.hpp>

#include "support/temp_dir.hpp"

using namespace rml;
using rml::testing::TempDir;
using rml::testing::write_text;

namespace {

const std::filesystem::path data_dir = RML_TEST_DATA_DIR;

// A small valid graph: x [2, 3] -> add(x, w) -> y, with w stored as "w" (f32 [3]).
std::string base_json(const std::string& values_extra = "", const std::string& nodes = "") {
  return R"({"format": "rml-graph", "version": 1,
  "values": [{"name": "x", "dtype": "f32", "shape": [2, 3]}, {"name": "w", "dtype": "f32", "shape": [3]},
             {"name": "y", "dtype": "f32", "shape": [2, 3]})" +
         values_extra + R"(],
  "inputs": [0], "outputs": [2],
  "constants": [{"value": 1, "tensor": "w"}],
  "nodes": [)" +
         (nodes.empty() ? R"({"op": "add", "inputs": [0, 1], "outputs": [2]})" : nodes) + "]}";
}

std::string weights_bytes(const char* dtype = "F32", const std::string& shape = "[3]", std::size_t bytes = 12) {
  const std::string header = std::string(R"({"w":{"dtype":")") + dtype + R"(","shape":)" + shape +
                             R"(,"data_offsets":[0,)" + std::to_string(bytes) + "]}}";
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  out += header;
  out.append(bytes, '\0');
  return out;
}

struct BadCase {
  const char* name;
  std::string json;
  std::string weights;  // empty: no weights file
  Code code;
  const char* message;  // a part of the message, naming the place
};

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  return s.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("the MLP fixture loads with the seed's counts") {
  auto graph = load_graph(data_dir / "torch_mlp");
  REQUIRE_MESSAGE(graph.ok(), graph.status().to_string());
  const GraphDef& g = graph->def();
  CHECK(g.values.size() == 15);
  CHECK(g.constants.size() == 6);
  CHECK(g.nodes.size() == 8);
  REQUIRE(g.inputs.size() == 1);
  CHECK(g.inputs[0] == 3);
  CHECK(g.values[3].name == "x");
  CHECK(g.values[3].type.to_string() == "f32 [2, 12]");
  REQUIRE(g.outputs.size() == 1);
  CHECK(g.outputs[0] == 14);
  CHECK(g.values[14].type.to_string() == "f32 [2, 4]");
  CHECK(g.constants[0].tensor == "layers.0.bias");
  CHECK(g.constants[3].tensor == "const.4");
  CHECK(g.nodes[0].op == "matmul");
  CHECK(g.nodes[0].inputs == std::vector<ValueId>{3, 4});
  REQUIRE(g.nodes[0].origin.has_value());
  CHECK(g.nodes[0].origin->to_string() == "layers.0 at mlp.py:12");
  // Weights are views into the mapped file: zero copies.
  for (const ConstantDef& c : g.constants) {
    CHECK(dynamic_cast<const detail::MappedFile*>(c.data.storage().get()) != nullptr);
    CHECK(c.data.raw_data() >= c.data.storage()->data());
    CHECK(c.data.raw_data() + c.data.nbytes() <= c.data.storage()->data() + c.data.storage()->size());
  }
}

TEST_CASE("save_graph then load_graph is structurally equal, weights bit-identical") {
  Graph graph = load_graph(data_dir / "torch_mlp").value();
  TempDir dir;
  REQUIRE(save_graph(graph, dir / "copy").ok());
  auto again = load_graph(dir / "copy");
  REQUIRE_MESSAGE(again.ok(), again.status().to_string());
  CHECK_MESSAGE(assert_structural_equal(graph.def(), again->def()).ok(),
                assert_structural_equal(graph.def(), again->def()).message());
  // ... and through a second generation, byte for byte the same files: the pair id that binds
  // each JSON to its weights (32 hex digits, in both files) is a hash of the contents.
  REQUIRE(save_graph(*again, dir / "copy2").ok());
  const std::string json1 = rml::testing::read_text(dir / "copy.json");
  const std::size_t at = json1.find(R"("pair": ")");
  REQUIRE(at != std::string::npos);
  const std::string pair1 = json1.substr(at + 9, 32);
  CHECK(detail::is_pair_id(pair1));
  CHECK(json1 == rml::testing::read_text(dir / "copy2.json"));
  const std::string weights1 = rml::testing::read_text(dir / "copy.safetensors");
  CHECK(weights1.find(pair1) != std::string::npos);
  CHECK(weights1 == rml::testing::read_text(dir / "copy2.safetensors"));
}

TEST_CASE("attributes, origins, devices, inline constants and metadata round-trip") {
  GraphDef g;
  g.name = "attrs";
  g.producer = "test \"quoted\"\n";
  g.values = {
      {"x", {DType::f32, {2, 2}}}, {"k", {DType::i32, {3}}}, {"s", {DType::f32, {}}}, {"y", {DType::f32, {2, 2}}}};
  g.inputs = {0};
  g.outputs = {3};
  g.constants.push_back({1, "", Tensor::from_vector<std::int32_t>({1, -2, 2147483647}, {3}), true});
  g.constants.push_back({2, "", Tensor::scalar(0.1F), true});
  NodeDef n;
  n.op = "some_op";
  n.inputs = {0, 1, 2};
  n.outputs = {3};
  n.name = "n0";
  n.attrs = {{"i", std::int64_t{-3}},
             {"f", 0.1},
             {"whole", 2.0},
             {"b", true},
             {"s", std::string("tanh")},
             {"ints", std::vector<std::int64_t>{1, -1}},
             {"floats", std::vector<double>{0.5, 1e-30, 3.0}},
             {"empty", std::vector<std::int64_t>{}}};
  n.origin = Origin{"layers.2", "model.py", 41};
  n.device = Device::cpu(1);
  g.nodes.push_back(n);
  g.metadata = {{"license", "MIT"}};
  TempDir dir;
  REQUIRE(save_graph(Graph(g), dir / "a").ok());
  auto loaded = load_graph(dir / "a.json");
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());
  CHECK_MESSAGE(assert_structural_equal(g, loaded->def()).ok(), assert_structural_equal(g, loaded->def()).message());
}

TEST_CASE("storage shared by several constants is written once; non-finite inline data is stored") {
  GraphDef g;
  g.values = {{"a", {DType::f32, {2}}}, {"b", {DType::f32, {2}}}, {"c", {DType::f32, {1}}}};
  g.outputs = {0, 1, 2};
  Tensor tied = Tensor::from_vector<float>({1, 2}, {2});
  g.constants.push_back({0, "", tied, false});
  g.constants.push_back({1, "", tied, false});
  g.constants.push_back({2, "", Tensor::from_vector<float>({NAN}, {1}), true});
  TempDir dir;
  REQUIRE(save_graph(Graph(g), dir / "t").ok());
  auto reader = SafetensorsReader::open(dir / "t.safetensors");
  REQUIRE(reader.ok());
  CHECK(reader->entries().size() == 2);  // the tied pair once, the NaN constant stored
  Graph loaded = load_graph(dir / "t").value();
  const auto& cs = loaded.def().constants;
  CHECK(cs[0].tensor == cs[1].tensor);
  CHECK(cs[0].data.raw_data() == cs[1].data.raw_data());
  CHECK(std::isnan(cs[2].data.data<float>()[0]));
}

TEST_CASE("save_graph refuses graphs it cannot write, and leaves no file") {
  TempDir dir;
  GraphDef g;
  g.values = {{"a", {DType::f32, {1}}}};
  g.outputs = {5};
  CHECK(save_graph(Graph(g), dir / "bad").code() == Code::invalid_argument);
  // A graph the gate accepts (it does not judge ops) whose attribute JSON cannot hold.
  g.values.push_back({"b", {DType::f32, {1}}});
  g.inputs = {0};
  g.outputs = {1};
  NodeDef n;
  n.op = "x";
  n.inputs = {0};
  n.outputs = {1};
  n.attrs = {{"f", INFINITY}};
  g.nodes.push_back(n);
  Status s = save_graph(Graph(g), dir / "bad");
  CHECK(s.code() == Code::invalid_argument);
  CHECK(s.message().find("nodes[0].attrs.f") != std::string::npos);
  CHECK(!std::filesystem::exists(dir / "bad.json"));
}

TEST_CASE("malformed models: each refused with its code, naming the place") {
  const std::string base = base_json();
  const std::string w = weights_bytes();
  // base with w recorded as `dtype`, stored or inline.
  auto as_w = [&](const char* dtype) {
    return replace(base, R"("name": "w", "dtype": "f32")", std::string(R"("name": "w", "dtype": ")") + dtype + "\"");
  };
  auto inline_w = [&](const char* dtype, const char* data) {
    return replace(as_w(dtype), R"("tensor": "w")", std::string(R"("data": )") + data);
  };
  auto bool_weights = [](const char* three_bytes) {
    std::string out = weights_bytes("BOOL", "[3]", 3);
    out.replace(out.size() - 3, 3, three_bytes, 3);
    return out;
  };
  const auto node = [&](const std::string& n) { return base_json("", n); };
  const std::vector<BadCase> cases = {
      {"JSON syntax", R"({"format": "rml-graph",)", w, Code::invalid_argument, "not valid JSON"},
      {"JSON syntax mid-way", replace(base, R"("inputs": [0])", R"("inputs": [0,,])"), w, Code::invalid_argument,
       "inputs[1]"},
      {"JSON syntax in a string", replace(base, R"("name": "x")", "\"name\": \"x\n"), w, Code::invalid_argument,
       "not valid JSON"},
      {"not an object", "[1, 2]", w, Code::invalid_argument, "the document must be a JSON object"},
      {"trailing content", base + " {}", w, Code::invalid_argument, "not valid JSON"},
      {"format missing", replace(base, R"("format": "rml-graph", )", ""), w, Code::invalid_argument, "format: missing"},
      {"format wrong", replace(base, "rml-graph", "onnx"), w, Code::invalid_argument,
       "format: 'onnx' is not 'rml-graph'"},
      {"format not a string", replace(base, R"("rml-graph")", "7"), w, Code::invalid_argument,
       "format: must be a string"},
      {"version newer", replace(base, R"("version": 1)", R"("version": 2)"), w, Code::unsupported,
       "version: 2 is newer than this reader"},
      {"version newer wins over later errors",
       replace(replace(base, R"("version": 1)", R"("version": 9)"), R"("inputs": [0])", R"("inputs": [99])"), w,
       Code::unsupported, "version: 9"},
      {"version a string", replace(base, R"("version": 1)", R"("version": "1")"), w, Code::invalid_argument,
       "version: must be an integer"},
      {"version zero", replace(base, R"("version": 1)", R"("version": 0)"), w, Code::invalid_argument,
       "version: 0 is not a valid version"},
      {"version missing", replace(base, R"("version": 1,)", ""), w, Code::invalid_argument, "version: missing"},
      {"values not a list", replace(base, R"("values": [)", R"("values": 3, "v": [)"), w, Code::invalid_argument,
       "values: must be a list"},
      {"values missing", replace(base, R"("values": [)", R"("vals": [)"), w, Code::invalid_argument, "values: missing"},
      {"nodes missing", replace(base, R"("nodes": [)", R"("nods": [)"), w, Code::invalid_argument, "nodes: missing"},
      {"outputs missing", replace(base, R"("outputs": [2],)", ""), w, Code::invalid_argument, "outputs: missing"},
      {"value not an object", replace(base, R"({"name": "w", "dtype": "f32", "shape": [3]})", "5"), w,
       Code::invalid_argument, "values[1]: must be an object"},
      {"dtype missing", replace(base, R"("name": "w", "dtype": "f32",)", R"("name": "w",)"), w, Code::invalid_argument,
       "values[1]: dtype is missing"},
      {"shape missing", replace(base, R"("dtype": "f32", "shape": [3]})", R"("dtype": "f32"})"), w,
       Code::invalid_argument, "values[1]: shape is missing"},
      {"dtype unknown", replace(base, R"("name": "w", "dtype": "f32")", R"("name": "w", "dtype": "f64")"), w,
       Code::invalid_argument, "values[1].dtype: 'f64' is not"},
      {"shape negative", replace(base, R"("shape": [2, 3]}, {"name": "w")", R"("shape": [2, -3]}, {"name": "w")"), w,
       Code::invalid_argument, "values[0].shape[1]: dimension -3 is negative"},
      {"shape float", replace(base, R"("shape": [3]})", R"("shape": [3.5]})"), w, Code::invalid_argument,
       "values[1].shape[0]: must be an integer"},
      {"shape overflowing", replace(base, R"("shape": [3]})", R"("shape": [4611686018427387904, 4]})"), w,
       Code::invalid_argument, "values[1].shape: [4611686018427387904, 4] overflows"},
      {"shape not a list", replace(base, R"("shape": [3]})", R"("shape": 3})"), w, Code::invalid_argument,
       "values[1].shape: must be a list"},
      {"name not a string", replace(base, R"("name": "w")", R"("name": ["w"])"), w, Code::invalid_argument,
       "values[1].name: must be a string"},
      {"input id out of range", replace(base, R"("inputs": [0])", R"("inputs": [9])"), w, Code::invalid_argument,
       "inputs[0]: value id 9 is out of range (the graph has 3 values)"},
      {"input id negative", replace(base, R"("inputs": [0])", R"("inputs": [-1])"), w, Code::invalid_argument,
       "inputs[0]: value id -1 is out of range"},
      {"output id a string", replace(base, R"("outputs": [2])", R"("outputs": ["y"])"), w, Code::invalid_argument,
       "outputs[0]: must be an integer"},
      {"node input out of range", node(R"({"op": "add", "inputs": [0, 42], "outputs": [2]})"), w,
       Code::invalid_argument, "nodes[0].inputs[1]: value id 42 is out of range"},
      {"node output out of range", node(R"({"op": "add", "inputs": [0, 1], "outputs": [3]})"), w,
       Code::invalid_argument, "nodes[0].outputs[0]: value id 3 is out of range"},
      {"node op missing", node(R"({"inputs": [0, 1], "outputs": [2]})"), w, Code::invalid_argument,
       "nodes[0]: op is missing"},
      {"node op not a string", node(R"({"op": 3, "inputs": [0, 1], "outputs": [2]})"), w, Code::invalid_argument,
       "nodes[0].op: must be a string"},
      {"node inputs missing", node(R"({"op": "add", "outputs": [2]})"), w, Code::invalid_argument,
       "nodes[0]: inputs is missing"},
      {"node outputs not a list", node(R"({"op": "add", "inputs": [0, 1], "outputs": 2})"), w, Code::invalid_argument,
       "nodes[0].outputs: must be a list of value ids"},
      {"node not an object", node(R"([1])"), w, Code::invalid_argument, "nodes[0]: must be an object"},
      {"value defined twice", node(R"({"op": "add", "inputs": [0, 1], "outputs": [0]})"), w, Code::invalid_argument,
       "nodes[0].outputs[0]: value 0 (x) is already defined by inputs[0]"},
      {"value defined twice by nodes",
       base_json(
           R"(, {"name": "z", "dtype": "f32", "shape": [2, 3]})",
           R"({"op": "add", "inputs": [0, 1], "outputs": [2]}, {"op": "relu", "inputs": [2], "outputs": [2]}, {"op": "relu", "inputs": [2], "outputs": [3]})"),
       w, Code::invalid_argument, "nodes[1].outputs[0]: value 2 (y) is already defined by nodes[0].outputs[0]"},
      {"read before defined",
       base_json(R"(, {"name": "z", "dtype": "f32", "shape": [2, 3]})",
                 R"({"op": "relu", "inputs": [3], "outputs": [2]}, {"op": "add", "inputs": [0, 1], "outputs": [3]})"),
       w, Code::invalid_argument, "nodes[0].inputs[0]: value 3 (z) is read before it is defined"},
      {"never defined", base_json(R"(, {"name": "z", "dtype": "f32", "shape": [2, 3]})"), w, Code::invalid_argument,
       "values[3]: value 3 (z) is never defined"},
      {"input twice", replace(base, R"("inputs": [0])", R"("inputs": [0, 0])"), w, Code::invalid_argument,
       "inputs[1]: value 0 (x) is already defined by inputs[0]"},
      {"constant is an input", replace(base, R"("inputs": [0])", R"("inputs": [0, 1])"), w, Code::invalid_argument,
       "constants[0]: value 1 (w) is already defined by inputs[1]"},
      {"constant value missing", replace(base, R"({"value": 1, "tensor": "w"})", R"({"tensor": "w"})"), w,
       Code::invalid_argument, "constants[0]: value is missing"},
      {"constant tensor and data", replace(base, R"("tensor": "w")", R"("tensor": "w", "data": [1, 2, 3])"), w,
       Code::invalid_argument, "constants[0]: needs exactly one of"},
      {"constant id out of range", replace(base, R"({"value": 1, "tensor": "w"})", R"({"value": 7, "tensor": "w"})"), w,
       Code::invalid_argument, "constants[0].value: value id 7 is out of range"},
      {"inline data count", replace(base, R"("tensor": "w")", R"("data": [1, 2])"), "", Code::invalid_argument,
       "constants[0].data: 2 numbers, but value 1 (w) is recorded as f32 [3] (3 elements)"},
      {"inline data not numbers", replace(base, R"("tensor": "w")", R"("data": [1, "2", 3])"), "",
       Code::invalid_argument, "constants[0].data[1]: must be a number"},
      {"inline i32 not integral",
       replace(replace(base, R"("name": "w", "dtype": "f32")", R"("name": "w", "dtype": "i32")"), R"("tensor": "w")",
               R"("data": [1, 2.5, 3])"),
       "", Code::invalid_argument, "constants[0].data[1]: is not an i32"},
      {"inline i32 out of range",
       replace(replace(base, R"("name": "w", "dtype": "f32")", R"("name": "w", "dtype": "i32")"), R"("tensor": "w")",
               R"("data": [1, 4294967296, 3])"),
       "", Code::invalid_argument, "constants[0].data[1]: is not an i32"},
      {"stored tensor missing", replace(base, R"("tensor": "w")", R"("tensor": "nope")"), w, Code::invalid_argument,
       "constants[0]: tensor 'nope' is not in"},
      {"no weights file", base, "", Code::invalid_argument,
       "constants[0]: tensor 'w' needs a weights file, and there is none"},
      {"stored dtype differs", base, weights_bytes("I32"), Code::invalid_argument,
       "constants[0]: tensor 'w' is stored as i32 [3] but value 1 (w) is recorded as f32 [3]"},
      {"stored shape differs", base, weights_bytes("F32", "[3, 1]"), Code::invalid_argument,
       "constants[0]: tensor 'w' is stored as f32 [3, 1] but value 1 (w) is recorded as f32 [3]"},
      {"stored as F64", base, weights_bytes("F64", "[3]", 24), Code::invalid_argument, "tensor 'w' is stored as F64"},
      {"stored as U8", base, weights_bytes("U8", "[3]", 3), Code::invalid_argument, "is stored as U8"},
      {"stored as F16, recorded f32", base, weights_bytes("F16", "[3]", 6), Code::invalid_argument,
       "constants[0]: tensor 'w' is stored as f16 [3] but value 1 (w) is recorded as f32 [3]"},
      {"stored as BF16, recorded f32", base, weights_bytes("BF16", "[3]", 6), Code::invalid_argument,
       "is stored as bf16 [3] but value 1 (w) is recorded as f32 [3]"},
      {"stored as I64, recorded f32", base, weights_bytes("I64", "[3]", 24), Code::invalid_argument,
       "is stored as i64 [3] but value 1 (w) is recorded as f32 [3]"},
      // The new dtypes: byte lengths that do not fit a 2- or 8-byte element, bool bytes, mismatches.
      {"F16 bytes not 2 per element", as_w("f16"), weights_bytes("F16", "[3]", 7), Code::data_loss,
       "data_offsets span 7 bytes, but F16 [3] needs 6"},
      {"BF16 bytes of an f32", as_w("bf16"), weights_bytes("BF16", "[3]", 12), Code::data_loss,
       "data_offsets span 12 bytes, but BF16 [3] needs 6"},
      {"I64 bytes of an i32", as_w("i64"), weights_bytes("I64", "[3]", 12), Code::data_loss,
       "data_offsets span 12 bytes, but I64 [3] needs 24"},
      {"I64 bytes not 8 per element", as_w("i64"), weights_bytes("I64", "[3]", 25), Code::data_loss, "needs 24"},
      {"bool byte 2", as_w("bool"), bool_weights("\x01\x02\x00"), Code::invalid_argument,
       "tensor 'w' is BOOL but its byte 1 is 2, not 0 or 1"},
      {"bool byte 255", as_w("bool"), bool_weights("\x00\x00\xff"), Code::invalid_argument, "its byte 2 is 255"},
      {"recorded f16, stored BF16", as_w("f16"), weights_bytes("BF16", "[3]", 6), Code::invalid_argument,
       "constants[0]: tensor 'w' is stored as bf16 [3] but value 1 (w) is recorded as f16 [3]"},
      {"recorded bf16, stored F16", as_w("bf16"), weights_bytes("F16", "[3]", 6), Code::invalid_argument,
       "is stored as f16 [3] but value 1 (w) is recorded as bf16 [3]"},
      {"recorded i64, stored I32", as_w("i64"), weights_bytes("I32", "[3]", 12), Code::invalid_argument,
       "is stored as i32 [3] but value 1 (w) is recorded as i64 [3]"},
      {"recorded bool, stored U8", as_w("bool"), weights_bytes("U8", "[3]", 3), Code::invalid_argument,
       "is stored as U8"},
      {"recorded i32, stored I64", replace(base, R"("name": "w", "dtype": "f32")", R"("name": "w", "dtype": "i32")"),
       weights_bytes("I64", "[3]", 24), Code::invalid_argument,
       "is stored as i64 [3] but value 1 (w) is recorded as i32 [3]"},
      {"inline f16 out of range", inline_w("f16", "[1, 65520, 3]"), "", Code::invalid_argument,
       "constants[0].data[1]: is out of range for f16"},
      {"inline bf16 out of range", inline_w("bf16", "[3.4e38, 1, 1]"), "", Code::invalid_argument,
       "constants[0].data[0]: is out of range for bf16"},
      {"inline bool 2", inline_w("bool", "[0, 2, 1]"), "", Code::invalid_argument,
       "constants[0].data[1]: is not a bool, but value 1 (w) is bool"},
      {"inline bool 0.5", inline_w("bool", "[0, 0.5, 1]"), "", Code::invalid_argument, "data[1]: is not a bool"},
      {"inline i64 beyond 2^53", inline_w("i64", "[1, 9007199254740994, 3]"), "", Code::invalid_argument,
       "constants[0].data[1]: is not an i64, but value 1 (w) is i64"},
      {"attribute an object", node(R"({"op": "add", "inputs": [0, 1], "outputs": [2], "attrs": {"k": {"a": 1}}})"), w,
       Code::invalid_argument,
       "nodes[0].attrs.k: must be an integer, a float, a boolean, a string, or a list of numbers"},
      {"attribute list of strings",
       node(R"({"op": "add", "inputs": [0, 1], "outputs": [2], "attrs": {"k": [1, "a"]}})"), w, Code::invalid_argument,
       "nodes[0].attrs.k[1]: must be a number"},
      {"attribute null", node(R"({"op": "add", "inputs": [0, 1], "outputs": [2], "attrs": {"k": null}})"), w,
       Code::invalid_argument, "nodes[0].attrs.k: must be"},
      {"attrs not an object", node(R"({"op": "add", "inputs": [0, 1], "outputs": [2], "attrs": [1]})"), w,
       Code::invalid_argument, "nodes[0].attrs: must be an object"},
      {"duplicate key", node(R"({"op": "add", "op": "sub", "inputs": [0, 1], "outputs": [2]})"), w,
       Code::invalid_argument, "nodes[0]: key 'op' appears twice"},
      {"origin line a string", node(R"({"op": "add", "inputs": [0, 1], "outputs": [2], "origin": {"line": "41"}})"), w,
       Code::invalid_argument, "nodes[0].origin.line: must be an integer"},
      {"device unknown", node(R"({"op": "add", "inputs": [0, 1], "outputs": [2], "device": "tpu"})"), w,
       Code::invalid_argument, "nodes[0].device: 'tpu' is not a device"},
      {"no outputs", node(R"({"op": "add", "inputs": [0, 1], "outputs": []})"), w, Code::invalid_argument,
       "nodes[0].outputs: a node must produce at least one value"},
      {"control character in a name", replace(base, R"("name": "x")", "\"name\": \"x\\u001b[2J\""), w,
       Code::invalid_argument, "values[0].name: holds a control character"},
      {"strides that overflow", replace(base, R"("shape": [3]})", R"("shape": [0, 4294967296, 4294967296]})"), w,
       Code::invalid_argument, "values[1].shape: [0, 4294967296, 4294967296] overflows"},
      {"metadata not strings", replace(base, R"("version": 1,)", R"("version": 1, "metadata": {"k": 1},)"), w,
       Code::invalid_argument, "metadata.k: must be a string"},
      {"truncated weights", base, weights_bytes().substr(0, 5), Code::data_loss, "truncated: 5 bytes"},
      {"weights header beyond the file", base, std::string("\xff\x00\x00\x00\x00\x00\x00\x00{}", 10), Code::data_loss,
       "header length 255 goes beyond the end of the file"},
      {"weights offsets out of range", base, weights_bytes("F32", "[3]", 12).substr(0, weights_bytes().size() - 4),
       Code::data_loss, "beyond the data section"},
      {"weights header not JSON", base, std::string("\x04\x00\x00\x00\x00\x00\x00\x00{\"a\"", 12), Code::data_loss,
       "header"},
  };
  CHECK(cases.size() >= 40);
  TempDir dir;
  int i = 0;
  for (const BadCase& c : cases) {
    INFO(c.name);
    const std::filesystem::path stem = dir / ("case" + std::to_string(i++));
    write_text(stem.string() + ".json", c.json);
    if (!c.weights.empty()) write_text(stem.string() + ".safetensors", c.weights);
    auto result = load_graph(stem);
    REQUIRE(!result.ok());
    const Status& s = result.error();
    CHECK_MESSAGE(s.code() == c.code, s.to_string());
    CHECK_MESSAGE(s.message().find(c.message) != std::string::npos, s.message());
    CHECK_MESSAGE(s.message().rfind(stem.string() + ".json: ", 0) == 0, s.message());  // prefixed with the path
    // parse_graph on the text alone never throws either.
    auto direct = parse_graph(c.json, nullptr);
    CHECK(!direct.ok());
  }
}

TEST_CASE("missing files and directories") {
  TempDir dir;
  Status s = load_graph(dir / "absent").status();
  CHECK(s.code() == Code::not_found);
  CHECK(s.message() == (dir / "absent.json").string() + ": no such file");
  write_text(dir / "m.json", base_json());
  std::filesystem::create_directory(dir / "m.safetensors");
  s = load_graph(dir / "m").status();
  CHECK(s.code() == Code::invalid_argument);
  CHECK(s.message().find("m.safetensors: is a directory") != std::string::npos);
  std::filesystem::create_directory(dir / "d.json");
  CHECK(load_graph(dir / "d").status().code() == Code::invalid_argument);
}

TEST_CASE("a valid graph with unknown ops and keys loads: op semantics are infer_types' business") {
  TempDir dir;
  write_text(dir / "u.json",
             replace(base_json("", R"({"op": "frobnicate", "inputs": [0, 1], "outputs": [2], "future": {"x": [1]}})"),
                     R"("version": 1,)", R"("version": 1, "later_key": [1, 2, {"a": null}],)"));
  write_text(dir / "u.safetensors", weights_bytes());
  auto g = load_graph(dir / "u");
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  CHECK(g->def().nodes[0].op == "frobnicate");
}
