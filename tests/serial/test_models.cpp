// Real models through MessagePack: the committed torch MLP and the zoo fixtures round-trip
// (structure and bit-identical weights), and the document is smaller than the rml-graph JSON.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <rml/core/equal.hpp>
#include <rml/io/graph_io.hpp>
#include <rml/serial/serialize.hpp>

#include "serial/test_serial_types.hpp"

using namespace rml;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() {
  const auto dir = fs::path(RML_TEST_BUILD_DIR) / "serial_tmp";
  fs::create_directories(dir);
  return dir;
}

// The bytes of distinct tensor data the graph's constants hold.
std::size_t weight_bytes(const GraphDef& def) {
  std::set<std::tuple<const Storage*, std::size_t, std::size_t>> seen;
  std::size_t total = 0;
  for (const auto& c : def.constants)
    if (c.data.defined() && seen.emplace(c.data.storage().get(), c.data.storage_offset(), c.data.nbytes()).second)
      total += c.data.nbytes();
  return total;
}

// Round-trips `g` through a file and checks structure and every weight's bytes.
void check_round_trip(const Graph& g, const std::string& name) {
  const fs::path path = temp_dir() / (name + ".msgpack");
  REQUIRE(serialize_to_file(g, path).ok());
  auto back = deserialize_from_file<Graph>(path);
  REQUIRE_MESSAGE(back.ok(), back.error().to_string());
  const Status same = assert_structural_equal(g, *back);
  CHECK_MESSAGE(same.ok(), name, ": ", same.message());
  const auto& a = g.def().constants;
  const auto& b = back->def().constants;
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].data.nbytes() == b[i].data.nbytes());
    CHECK(std::memcmp(a[i].data.raw_data(), b[i].data.raw_data(), a[i].data.nbytes()) == 0);
  }
}

}  // namespace

TEST_CASE("the torch MLP fixture round-trips") {
  const fs::path stem = fs::path(RML_TEST_DATA_DIR) / "torch_mlp";
  REQUIRE_MESSAGE(fs::exists(stem.string() + ".json"), "missing fixture ", stem.string());
  auto g = load_graph(stem);
  REQUIRE_MESSAGE(g.ok(), g.error().to_string());
  CHECK(!g->def().nodes.empty());
  check_round_trip(*g, "torch_mlp");
}

TEST_CASE("every zoo fixture round-trips") {
  const fs::path dir = fs::path(RML_TEST_DATA_DIR) / "zoo";
  REQUIRE_MESSAGE(fs::is_directory(dir), "missing fixtures ", dir.string());
  std::vector<fs::path> stems;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".json") stems.push_back(entry.path().parent_path() / entry.path().stem());
  CHECK(!stems.empty());
  for (const auto& stem : stems) {
    auto g = load_graph(stem);
    REQUIRE_MESSAGE(g.ok(), g.error().to_string());
    check_round_trip(*g, stem.filename().string());
  }
}

TEST_CASE("the MessagePack document is smaller than the rml-graph JSON, weights aside") {
  std::vector<std::pair<std::string, Graph>> graphs;
  graphs.emplace_back("chain", Graph(serial_test::chain_graph(300)));
  graphs.emplace_back("sample", Graph(serial_test::sample_graph()));
  if (auto mlp = load_graph(fs::path(RML_TEST_DATA_DIR) / "torch_mlp"); mlp.ok()) graphs.emplace_back("mlp", *mlp);
  CHECK(graphs.size() == 3);
  for (const auto& [name, g] : graphs) {
    const fs::path stem = temp_dir() / ("json_" + name);
    REQUIRE(save_graph(g, stem).ok());
    const auto json_size = fs::file_size(stem.string() + ".json");
    const auto msgpack_size = serialize(g).size() - weight_bytes(g.def());
    CHECK_MESSAGE(msgpack_size < json_size, name, ": ", msgpack_size, " bytes of MessagePack, ", json_size, " of JSON");
  }
}
