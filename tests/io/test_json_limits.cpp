// The rml-graph JSON reader's memory budget: what a document makes the reader build is charged
// before it is allocated, a document past the budget is refused naming the place, real models are
// charged a few bytes per byte, and a stored tensor named by many constants is bound once.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <rml/io/graph_io.hpp>

#include "support/temp_dir.hpp"

using namespace rml;
using rml::testing::read_text;
using rml::testing::TempDir;
using rml::testing::write_text;

namespace {

const std::string head = R"({"format":"rml-graph","version":1,)";

// `open` + `item` repeated until the document has `target` bytes + `close`; `item` may hold `#`,
// replaced by the repetition's number (for keys that must differ).
std::string repeated(std::string_view open, std::string_view item, std::string_view close, std::size_t target) {
  std::string s(open);
  for (std::size_t i = 0; s.size() < target; ++i) {
    if (i) s += ',';
    std::string one(item);
    if (const auto at = one.find('#'); at != std::string::npos) one.replace(at, 1, std::to_string(i));
    s += one;
  }
  return s.append(close);
}

struct Parsed {
  Status status;
  std::size_t peak = 0;
  std::size_t budget = 0;
};

Parsed parse_with(const std::string& json, std::size_t per_byte, std::size_t base,
                  const SafetensorsReader* weights = nullptr) {
  const simdjson::padded_string padded(json);
  detail::GraphJsonParser parser(weights, per_byte, base);
  const auto graph = parser.parse(padded);
  return {graph.status(), parser.memory_peak(), parser.memory_budget()};
}

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("every list, name and map a document claims is charged; past the budget it is refused by path") {
  struct Case {
    const char* name;
    std::string json;
    const char* path;  // where the refusal must point
  };
  constexpr std::size_t size = 64 << 10;
  const std::string no_ids = R"("inputs":[],"outputs":[],)";
  const Case cases[] = {
      {"empty nodes",
       head + no_ids + repeated(R"("values":[],"nodes":[)", R"({"op":"a","inputs":[],"outputs":[]})", "]}", size),
       "nodes["},
      {"empty values",
       head + no_ids + repeated(R"("nodes":[],"values":[)", R"({"dtype":"f32","shape":[]})", "]}", size), "values["},
      {"a long dimension list",
       head + no_ids + repeated(R"("nodes":[],"values":[{"dtype":"f32","shape":[)", "1", "]}]}", size),
       "values[0].shape["},
      {"graph inputs", head + repeated(R"("outputs":[],"values":[],"nodes":[],"inputs":[)", "0", "]}", size),
       "inputs["},
      {"node inputs",
       head + no_ids + repeated(R"("values":[],"nodes":[{"op":"a","outputs":[],"inputs":[)", "0", "]}]}", size),
       "nodes[0].inputs["},
      {"attribute keys",
       head + no_ids +
           repeated(R"("values":[],"nodes":[{"op":"a","inputs":[],"outputs":[],"attrs":{)", R"("#":0)", "}}]}", size),
       "nodes[0].attrs."},
      {"an attribute list",
       head + no_ids +
           repeated(R"("values":[],"nodes":[{"op":"a","inputs":[],"outputs":[],"attrs":{"a":[)", "0", "]}}]}", size),
       "nodes[0].attrs.a["},
      {"inline data",
       head + no_ids +
           repeated(R"("nodes":[],"values":[{"dtype":"f32","shape":[1]}],"constants":[{"value":0,"data":[)", "0",
                    "]}]}", size),
       "constants[0].data["},
      {"metadata", head + no_ids + repeated(R"("values":[],"nodes":[],"metadata":{)", R"("#":"")", "}}", size),
       "metadata."},
  };
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    // Each of these builds more than 4 bytes per byte: 4 x its size is too little.
    const Parsed small = parse_with(c.json, 4, 0);
    CHECK(small.status.code() == Code::invalid_argument);
    CHECK_MESSAGE(contains(small.status.message(), "bytes in memory"), small.status.message());
    CHECK_MESSAGE(small.status.message().rfind(c.path, 0) == 0, small.status.message());
    CHECK(contains(small.status.message(), "the limit is 4 x its " + std::to_string(c.json.size()) + " bytes + 0"));
    CHECK(small.peak <= small.budget);
    // The default budget reads it (the graph is then refused, or not, for what it is).
    const Parsed normal = parse_with(c.json, graph_json_memory_per_byte, graph_json_memory_base);
    CHECK_MESSAGE(!contains(normal.status.message(), "bytes in memory"), normal.status.message());
    CHECK(normal.peak > 4 * c.json.size());
    CHECK(normal.peak <= normal.budget);
    CHECK(normal.budget == graph_json_memory_per_byte * c.json.size() + graph_json_memory_base);
  }

  // A long name is charged as its length: 8000 characters over a budget of 4096 bytes.
  const std::string named = head + no_ids + R"("values":[],"nodes":[],"name":")" + std::string(8000, 'n') + "\"}";
  const Parsed name = parse_with(named, 0, 4096);
  CHECK_MESSAGE(name.status.message().rfind("name: the document would take more than 4096 bytes", 0) == 0,
                name.status.message());
  CHECK(parse_with(named, 0, 16384).status.ok());
}

TEST_CASE("the charge follows what is built") {
  // n empty values: the list of ValueDef that holds them is charged before each block is taken.
  constexpr std::size_t n = 1000;
  std::string json = head + R"("inputs":[],"outputs":[],"nodes":[],"values":[)";
  for (std::size_t i = 0; i < n; ++i) json += std::string(i ? "," : "") + R"({"dtype":"f32","shape":[]})";
  json += "]}";
  const Parsed p = parse_with(json, graph_json_memory_per_byte, graph_json_memory_base);
  CHECK_MESSAGE(contains(p.status.message(), "value 0 is never defined"), p.status.message());
  CHECK(p.peak >= n * sizeof(ValueDef));             // the final list
  CHECK(p.peak <= 3 * n * sizeof(ValueDef) + 1024);  // the list and the one it replaces while it grows
}

TEST_CASE("real models are charged a few bytes per byte of JSON") {
  const std::filesystem::path zoo = std::filesystem::path(RML_TEST_DATA_DIR) / "zoo";
  for (const std::string name : {"mlp_b1", "cnn_b1", "transformer_b1", "gpt_b1"}) {
    CAPTURE(name);
    const std::string json = read_text(zoo / (name + ".json"));
    auto weights = SafetensorsReader::open(zoo / (name + ".safetensors"));
    REQUIRE(weights.ok());
    const Parsed p = parse_with(json, graph_json_memory_per_byte, graph_json_memory_base, &*weights);
    REQUIRE_MESSAGE(p.status.ok(), p.status.to_string());
    MESSAGE(name, ": ", json.size(), " bytes of JSON, ", p.peak, " bytes charged at the peak");
    CHECK(p.peak > json.size());
    CHECK(p.peak < 6 * json.size());
  }
}

TEST_CASE("a stored tensor named by many constants is bound once, so a misaligned one is copied once") {
  // Data starts at 8 + header, 2 (mod 4): the F32 tensor is misaligned in the mapping and the
  // reader must copy it.
  std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  while ((8 + header.size()) % 4 != 2) header += ' ';
  std::string file(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  file += header;
  const float w[2] = {1.5F, -2.0F};
  file.append(reinterpret_cast<const char*>(w), sizeof w);
  TempDir dir;
  write_text(dir / "m.safetensors", file);
  auto weights = SafetensorsReader::open(dir / "m.safetensors");
  REQUIRE(weights.ok());

  constexpr std::size_t n = 50;
  std::string json = head + R"("inputs":[],"nodes":[],"values":[)";
  for (std::size_t i = 0; i < n; ++i) json += std::string(i ? "," : "") + R"({"dtype":"f32","shape":[2]})";
  json += R"(],"outputs":[0],"constants":[)";
  for (std::size_t i = 0; i < n; ++i)
    json += std::string(i ? "," : "") + R"({"value":)" + std::to_string(i) + R"(,"tensor":"w"})";
  json += "]}";
  auto graph = parse_graph(json, &*weights);
  REQUIRE_MESSAGE(graph.ok(), graph.status().to_string());
  const auto& constants = graph->def().constants;
  REQUIRE(constants.size() == n);
  CHECK(dynamic_cast<const detail::MappedFile*>(constants[0].data.storage().get()) == nullptr);  // a copy
  CHECK(constants[0].data.to_vector<float>() == std::vector<float>{1.5F, -2.0F});
  for (const ConstantDef& c : constants) CHECK(c.data.storage() == constants[0].data.storage());
}
