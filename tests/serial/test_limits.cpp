// The limits the writer and the reader share (nesting depth), the reader's memory budget, and
// error offsets and refusals far into a document (where msgpack-cxx's parser is restarted chunk after
// chunk).
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <msgpack.hpp>
#include <string>
#include <vector>

#include <rml/serial/serialize.hpp>

#include "serial/test_serial_types.hpp"

using namespace rml;
using namespace serial_test;

namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

// An envelope of `type` in format 2 whose root is packed by `root`.
std::vector<std::uint8_t> document(const char* type, const std::function<void(Packer&, msgpack::sbuffer&)>& root) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(4).pack("format").pack("rml-msgpack").pack("version").pack_array(2).pack(2).pack(0);
  pk.pack("type").pack(type).pack("root");
  root(pk, buf);
  return {buf.data(), buf.data() + buf.size()};
}

// The envelope above before its root: 84, a6 "format", ab "rml-msgpack", a7 "version", 92 02 00,
// a4 "type", a8 "GraphDef", a4 "root".
constexpr std::size_t graph_envelope_bytes = 50;

// A program whose one root is `adds` Add nodes nested through `lhs`, ending in a Const.
Program nested_program(int adds) {
  std::shared_ptr<Expr> e = std::make_shared<Const>();
  for (int i = 0; i < adds; ++i) {
    auto add = std::make_shared<Add>();
    add->lhs = e;
    e = add;
  }
  Program p;
  p.roots.push_back(e);
  return p;
}

// A GraphDef (positional) whose nodes list holds `n` empty nodes, each the one byte 0x90.
std::vector<std::uint8_t> empty_nodes(std::size_t n, std::size_t name_bytes = 0) {
  return document("GraphDef", [&](Packer& pk, msgpack::sbuffer& buf) {
    pk.pack_array(7).pack(std::string(name_bytes, 'n')).pack("").pack_array(0).pack_array(0).pack_array(0);
    pk.pack_array(0).pack_array(static_cast<std::uint32_t>(n));
    const std::vector<char> nodes(n, static_cast<char>(0x90));
    buf.write(nodes.data(), nodes.size());
  });
}

}  // namespace

TEST_CASE("writer and reader agree on the nesting bound: what one writes the other reads") {
  // Program (1) > roots (2) > shared Add (3) > Add (4) > lhs (5) > ...: the Const under 126 Adds is
  // a struct at level 4 + 2 * 126 = 256, the deepest the reader reads; under 127 its shared object
  // alone is level 257.
  const auto bytes = serialize(nested_program(126));
  auto back = deserialize<Program>(bytes);
  REQUIRE_MESSAGE(back.ok(), back.status().to_string());
  int depth = 0;
  for (const Expr* e = back->roots[0].get(); const auto* add = dynamic_cast<const Add*>(e); e = add->lhs.get()) ++depth;
  CHECK(depth == 126);

  std::string path = "roots[0]";
  for (int i = 0; i < 127; ++i) path += ".lhs";
  try {
    (void)serialize(nested_program(127));
    FAIL("a 127-deep expression was written");
  } catch (const Error& e) {
    CHECK(e.status().code() == Code::unsupported);
    CHECK_MESSAGE(e.status().message().find(path + ": nesting deeper than 256 levels") != std::string::npos,
                  e.status().message());
  }
  // serialize_to_file turns the refusal into a status.
  const auto file = std::filesystem::temp_directory_path() / "rml_test_limits_deep.msgpack";
  const Status s = serialize_to_file(nested_program(127), file);
  CHECK(s.code() == Code::unsupported);

  // The reader refuses the same document when another writer packs it: 127 Adds by hand.
  const auto packed = document("Program", [](Packer& pk, auto&) {
    pk.pack_array(1).pack_array(1);  // Program [roots [
    for (int i = 0; i < 127; ++i)
      pk.pack_map(3).pack("id").pack(i).pack("type").pack("Add").pack("fields").pack_array(2).pack("");
    pk.pack_map(3).pack("id").pack(127).pack("type").pack("Const").pack("fields").pack_array(0);
  });
  auto refused = deserialize<Program>(packed);
  REQUIRE(!refused.ok());
  CHECK(refused.error().code() == Code::data_loss);
  CHECK_MESSAGE(refused.error().message().find(path + ": nesting deeper than 256 levels") != std::string::npos,
                refused.error().message());
}

TEST_CASE("the reader charges what it builds: sizeof each element, string, entry and object") {
  using detail::SerialReader;
  // Three empty nodes: one list of three NodeDefs, nothing else (empty strings and lists cost nothing
  // beyond their owner).
  {
    const auto bytes = empty_nodes(3);
    SerialReader reader(bytes);
    GraphDef g;
    REQUIRE(reader.read_document(g, "GraphDef"));
    CHECK(g.nodes.size() == 3);
    CHECK(reader.memory_charged() == 3 * sizeof(NodeDef) + SerialReader::heap_block);
    CHECK(reader.memory_budget() == serial_memory_per_byte * bytes.size() + serial_memory_base);
  }
  // A 40-byte name (longer than a short string's inline room) and a list of two ids.
  {
    const auto bytes = document("GraphDef", [](Packer& pk, auto&) {
      pk.pack_array(7).pack(std::string(40, 'g')).pack("").pack_array(0);
      pk.pack_array(2).pack(0).pack(1).pack_array(0).pack_array(0).pack_array(0);
    });
    SerialReader reader(bytes);
    GraphDef g;
    REQUIRE(reader.read_document(g, "GraphDef"));
    CHECK(reader.memory_charged() ==
          (40 + 1 + SerialReader::heap_block) + (2 * sizeof(ValueId) + SerialReader::heap_block));
  }
}

TEST_CASE("a document of empty structs cannot expand past the budget") {
  // 4 MiB of empty nodes: each is one byte on the wire and a whole NodeDef in memory. Refused at the
  // list's header, before anything is allocated for it.
  constexpr std::size_t n = std::size_t{4} << 20;
  static_assert(sizeof(NodeDef) > serial_memory_per_byte, "an empty node must cost more than its byte");
  const auto bytes = empty_nodes(n);
  auto r = deserialize<GraphDef>(bytes);
  REQUIRE(!r.ok());
  CHECK(r.error().code() == Code::data_loss);
  CHECK_MESSAGE(r.error().message().find("nodes: the document would take more than") != std::string::npos,
                r.error().message());
  // Just inside the budget the same kind of document reads (the budget is not a limit on real graphs:
  // the zoo and chain graphs are read by the other tests).
  const std::size_t fits =
      (serial_memory_base - detail::SerialReader::heap_block) / (sizeof(NodeDef) - serial_memory_per_byte);
  auto ok = deserialize<GraphDef>(empty_nodes(fits / 2));
  REQUIRE_MESSAGE(ok.ok(), ok.status().to_string());
  CHECK(ok->nodes.size() == fits / 2);
}

TEST_CASE("errors far into a document name their exact byte offset") {
  // Inputs of 3000 ids, the 2500th of them -1: the error lies several parser chunks in.
  const auto bytes = document("GraphDef", [](Packer& pk, auto&) {
    pk.pack_array(4).pack("").pack("").pack_array(0).pack_array(3000);
    for (int i = 0; i < 3000; ++i) pk.pack(i == 2500 ? -1 : 300);  // 300 is cd 01 2c, three bytes
  });
  // Root 94 at 50, a0 at 51, a0 at 52, 90 at 53, dc 0b b8 at 54..56, ids from 57, three bytes each.
  const std::size_t expected = graph_envelope_bytes + 7 + 3 * 2500;
  auto r = deserialize<GraphDef>(bytes);
  REQUIRE(!r.ok());
  CHECK_MESSAGE(r.error().message().find("inputs[2500]: -1 is out of range for uint32 (at byte " +
                                         std::to_string(expected) + ")") != std::string::npos,
                r.error().message());
  // Truncated in the middle: the id cut in two is named at its first byte.
  const std::vector<std::uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(expected - 3 + 1));
  auto t = deserialize<GraphDef>(cut);
  REQUIRE(!t.ok());
  CHECK(t.error().code() == Code::data_loss);
  CHECK_MESSAGE(t.error().message().find("inputs[2499]: truncated") != std::string::npos, t.error().message());
  CHECK_MESSAGE(t.error().message().find("(at byte " + std::to_string(expected - 3) + ")") != std::string::npos,
                t.error().message());
  // Trailing bytes after a long document are counted exactly.
  auto good = serialize(chain_graph(2000));
  const std::size_t size = good.size();
  good.insert(good.end(), {0x91, 0xc0, 0xc0});
  auto trailing = deserialize<GraphDef>(good);
  REQUIRE(!trailing.ok());
  CHECK_MESSAGE(trailing.error().message().find("3 bytes follow the document (at byte " + std::to_string(size) + ")") !=
                    std::string::npos,
                trailing.error().message());
}

TEST_CASE("every document the writer writes reads back, at every chunk boundary of the parser") {
  // Graphs whose token counts cross the token stream's chunk size at many different items.
  for (int nodes : {50, 100, 170, 171, 172, 400, 1000}) {
    const GraphDef g = chain_graph(nodes);
    auto back = deserialize<GraphDef>(serialize(g));
    REQUIRE_MESSAGE(back.ok(), back.status().to_string());
    CHECK(back->nodes.size() == g.nodes.size());
    CHECK(serialize(*back) == serialize(g));
  }
}
