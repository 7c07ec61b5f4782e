// Hostile and damaged input: every failure is a status naming the path, never a crash, a deep
// recursion or an allocation the input does not justify.
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <msgpack.hpp>
#include <string>
#include <vector>

#include <rml/serial/serialize.hpp>

#include "serial/test_serial_types.hpp"

using namespace rml;
using namespace serial_test;

namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

// An envelope of `type` in format `major` (1: keyed structs, 2: positional) whose root is packed by `root`.
std::vector<std::uint8_t> document(const char* type, const std::function<void(Packer&, msgpack::sbuffer&)>& root,
                                   int major = 1) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(4).pack("format").pack("rml-msgpack").pack("version").pack_array(2).pack(major).pack(0);
  pk.pack("type").pack(type).pack("root");
  root(pk, buf);
  return {buf.data(), buf.data() + buf.size()};
}

void raw(msgpack::sbuffer& buf, std::initializer_list<std::uint8_t> bytes) {
  for (std::uint8_t b : bytes) buf.write(reinterpret_cast<const char*>(&b), 1);
}

// A document of `type` whose root is `{key: <value's raw bytes>}`.
std::vector<std::uint8_t> one_field(const char* type, const char* key, std::initializer_list<std::uint8_t> value) {
  return document(type, [&](Packer& pk, msgpack::sbuffer& buf) {
    pk.pack_map(1).pack(key);
    raw(buf, value);
  });
}

// A GraphDef with two nodes whose second node's inputs are packed by `inputs`.
std::vector<std::uint8_t> graph_with_inputs(const std::function<void(Packer&, msgpack::sbuffer&)>& inputs) {
  return document("GraphDef", [&](Packer& pk, msgpack::sbuffer& buf) {
    pk.pack_map(1).pack("nodes").pack_array(2);
    pk.pack_map(2).pack("op").pack("relu").pack("inputs").pack_array(1).pack(0);
    pk.pack_map(2).pack("op").pack("add").pack("inputs");
    inputs(pk, buf);
  });
}

// The same in format 2: a GraphDef [name, producer, values, inputs, outputs, constants, nodes] with two
// nodes [op, inputs], the second one's inputs packed by `inputs`.
std::vector<std::uint8_t> positional_graph_with_inputs(const std::function<void(Packer&, msgpack::sbuffer&)>& inputs) {
  return document(
      "GraphDef",
      [&](Packer& pk, msgpack::sbuffer& buf) {
        pk.pack_array(7).pack("g").pack("").pack_array(0).pack_array(0).pack_array(0).pack_array(0).pack_array(2);
        pk.pack_array(2).pack("relu").pack_array(1).pack(0);
        pk.pack_array(2).pack("add");
        inputs(pk, buf);
      },
      2);
}

template <typename T>
Status read_status(const std::vector<std::uint8_t>& bytes) {
  return deserialize<T>(bytes).status();
}

void check_error(const Status& s, Code code, const std::string& fragment) {
  CHECK(s.code() == code);
  CHECK_MESSAGE(s.message().find(fragment) != std::string::npos, s.message());
}

}  // namespace

TEST_CASE("every truncation of a graph document fails cleanly") {
  const auto bytes = serialize(sample_graph());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<std::uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    const Status s = read_status<GraphDef>(cut);
    REQUIRE_MESSAGE(!s.ok(), "a prefix of ", n, " bytes parsed");
    CHECK_MESSAGE((s.code() == Code::data_loss || s.code() == Code::invalid_argument), s.to_string());
  }
}

TEST_CASE("every single-byte corruption of a graph document is a status, never a crash") {
  const auto bytes = serialize(sample_graph());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (int v : {0x00, 0x7f, 0x80, 0x9f, 0xc0, 0xc1, 0xc4, 0xcf, 0xd3, 0xdb, 0xdd, 0xdf, 0xff}) {
      auto bad = bytes;
      bad[i] = static_cast<std::uint8_t>(v);
      auto r = deserialize<GraphDef>(bad);
      if (!r.ok()) {
        const Code c = r.error().code();
        CHECK((c == Code::data_loss || c == Code::invalid_argument || c == Code::unsupported));
      }
    }
  }
}

TEST_CASE("wrong types are named by their path") {
  check_error(read_status<GraphDef>(graph_with_inputs([](Packer& pk, auto&) { pk.pack_array(2).pack(1).pack("x"); })),
              Code::data_loss, "nodes[1].inputs[1]: expected an integer, found a string");
  check_error(read_status<GraphDef>(graph_with_inputs([](Packer& pk, auto&) { pk.pack(3); })), Code::data_loss,
              "nodes[1].inputs: expected an array, found an integer");
  check_error(read_status<GraphDef>(graph_with_inputs([](Packer& pk, auto&) { pk.pack_array(1).pack(-1); })),
              Code::data_loss, "nodes[1].inputs[0]: -1 is out of range for uint32");
  check_error(read_status<GraphDef>(
                  graph_with_inputs([](Packer& pk, auto&) { pk.pack_array(1).pack(std::uint64_t{1} << 40); })),
              Code::data_loss, "nodes[1].inputs[0]: 1099511627776 is out of range for uint32");
  check_error(read_status<GraphDef>(document("GraphDef", [](Packer& pk, auto&) { pk.pack("x"); })), Code::data_loss,
              "<root>: expected a struct (array or map), found a string");
  check_error(read_status<GraphDef>(document("GraphDef",
                                             [](Packer& pk, auto&) {
                                               pk.pack_map(1).pack("values").pack_array(1).pack_map(1).pack("type");
                                               pk.pack_map(1).pack("dtype").pack(9);
                                             })),
              Code::data_loss, "values[0].type.dtype: enum value 9 is out of range");
  check_error(read_status<GraphDef>(document("GraphDef",
                                             [](Packer& pk, auto&) {
                                               pk.pack_map(1).pack("nodes").pack_array(1).pack_map(1).pack("attrs");
                                               pk.pack_map(1).pack("axis").pack_array(2).pack(9).pack(1);
                                             })),
              Code::data_loss, "nodes[0].attrs[\"axis\"]: variant alternative 9 is unknown");
  check_error(read_status<GraphDef>(document("GraphDef",
                                             [](Packer& pk, auto&) {
                                               pk.pack_map(1).pack("nodes").pack_array(1).pack_map(1).pack("attrs");
                                               pk.pack_map(1).pack("eps").pack_array(2).pack(1).pack("x");
                                             })),
              Code::data_loss, "nodes[0].attrs[\"eps\"]: expected a float, found a string");
  check_error(read_status<GraphDef>(document(
                  "GraphDef", [](Packer& pk, auto&) { pk.pack_map(2).pack("name").pack("a").pack("name").pack("b"); })),
              Code::data_loss, "field \"name\" appears twice");
  check_error(read_status<GraphDef>(document("GraphDef",
                                             [](Packer& pk, auto&) {
                                               pk.pack_map(1).pack("metadata").pack_map(2);
                                               pk.pack("k").pack("1").pack("k").pack("2");
                                             })),
              Code::data_loss, "metadata[\"k\"]: a repeated map key");
  check_error(read_status<GraphDef>(document("GraphDef",
                                             [](Packer& pk, auto&) {
                                               pk.pack_map(1).pack("nodes").pack_array(1).pack_map(1).pack("origin");
                                               pk.pack_map(1).pack("line").pack(1.5);
                                             })),
              Code::data_loss, "nodes[0].origin.line: expected an integer, found a float");
}

TEST_CASE("wrong types in the positional layout are named by their path and byte offset") {
  check_error(read_status<GraphDef>(
                  positional_graph_with_inputs([](Packer& pk, auto&) { pk.pack_array(2).pack(1).pack("x"); })),
              Code::data_loss, "nodes[1].inputs[1]: expected an integer, found a string");
  check_error(read_status<GraphDef>(positional_graph_with_inputs([](Packer& pk, auto&) { pk.pack_array(1).pack(-1); })),
              Code::data_loss, "nodes[1].inputs[0]: -1 is out of range for uint32");
  check_error(read_status<GraphDef>(positional_graph_with_inputs([](Packer& pk, auto&) { pk.pack_map(0); })),
              Code::data_loss, "nodes[1].inputs: expected an array, found a map");
  // The offset, counted by hand: the envelope takes 50 bytes (84, a6 "format", ab "rml-msgpack",
  // a7 "version", 92 02 00, a4 "type", a8 "GraphDef", a4 "root"); then the root 97 at 50, a1 "g" at
  // 51, a0 at 53, 90 at 54, and the inputs array 91 at 55 whose element -1 (ff) is at byte 56.
  check_error(
      read_status<GraphDef>(document(
          "GraphDef",
          [](Packer& pk, auto&) { pk.pack_array(7).pack("g").pack("").pack_array(0).pack_array(1).pack(-1); }, 2)),
      Code::data_loss, "inputs[0]: -1 is out of range for uint32 (at byte 56)");
  // A field appended by a newer writer is skipped, but must still be well-formed: its path is its position.
  check_error(read_status<GraphDef>(document(
                  "GraphDef",
                  [](Packer& pk, msgpack::sbuffer& buf) {
                    pk.pack_array(7).pack("").pack("").pack_array(0).pack_array(0).pack_array(0).pack_array(0);
                    pk.pack_array(2).pack_array(1).pack("relu");
                    pk.pack_array(8).pack("add").pack_array(0).pack_array(0).pack("").pack_map(0).pack_nil();
                    pk.pack_array(0);
                    raw(buf, {0xc1});
                  },
                  2)),
              Code::data_loss, "nodes[1].<field 7>: the invalid byte 0xc1");
  check_error(read_status<GraphDef>(document(
                  "GraphDef", [](Packer& pk, auto&) { pk.pack_array(1).pack(5); }, 2)),
              Code::data_loss, "name: expected a string, found an integer");
  check_error(read_status<Everything>(document(
                  "Everything",
                  [](Packer& pk, auto&) {
                    pk.pack_array(15).pack(false).pack(0).pack(0).pack(0).pack(0.5f);
                    pk.pack(0.5).pack(0).pack("").pack_array(0).pack_bin(0).pack_array(0).pack_nil().pack_map(0);
                    pk.pack_map(0).pack_array(2).pack(0).pack_array(0);
                  },
                  2)),
              Code::data_loss, "tensor: a tensor needs [dtype, shape, data]");
}

TEST_CASE("the envelope is checked: format, root type, root presence, trailing bytes") {
  check_error(read_status<GraphDef>({}), Code::invalid_argument, "not an rml-msgpack document");
  check_error(read_status<GraphDef>({'{', '}'}), Code::invalid_argument, "not an rml-msgpack document");
  const auto pair = serialize(Pair{});
  check_error(read_status<GraphDef>(pair), Code::invalid_argument, "the document holds a Pair, not a GraphDef");
  auto trailing = serialize(GraphDef{});
  trailing.push_back(0xc0);
  check_error(read_status<GraphDef>(trailing), Code::data_loss, "1 bytes follow the document");
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(2).pack("format").pack("rml-msgpack").pack("version").pack_array(2).pack(1).pack(0);
  check_error(read_status<GraphDef>({buf.data(), buf.data() + buf.size()}), Code::data_loss, "no \"root\"");
}

TEST_CASE("absurd lengths are refused before anything is allocated") {
  // A 4 GB string in a few bytes.
  check_error(read_status<GraphDef>(one_field("GraphDef", "name", {0xdb, 0xff, 0xff, 0xff, 0xff, 'x'})),
              Code::data_loss, "name: a string of 4294967295 claims more than the 1 bytes that remain");
  // Four billion nodes, a map of four billion entries, a 4 GB blob.
  check_error(read_status<GraphDef>(one_field("GraphDef", "nodes", {0xdd, 0xff, 0xff, 0xff, 0xfe, 0x80})),
              Code::data_loss, "nodes: an array of 4294967294 claims more");
  check_error(read_status<GraphDef>(one_field("GraphDef", "metadata", {0xdf, 0xff, 0xff, 0xff, 0xff})), Code::data_loss,
              "metadata: a map of 4294967295 claims more");
  check_error(read_status<Everything>(one_field("Everything", "blob", {0xc6, 0xff, 0xff, 0xff, 0xff, 0})),
              Code::data_loss, "blob: binary data of 4294967295 claims more");
  // The same in the positional layout: a 4 GB name, four billion nodes, four billion fields.
  check_error(read_status<GraphDef>(document(
                  "GraphDef",
                  [](Packer& pk, msgpack::sbuffer& buf) {
                    pk.pack_array(1);
                    raw(buf, {0xdb, 0xff, 0xff, 0xff, 0xff, 'x'});
                  },
                  2)),
              Code::data_loss, "name: a string of 4294967295 claims more than the 1 bytes that remain");
  check_error(read_status<GraphDef>(document(
                  "GraphDef",
                  [](Packer& pk, msgpack::sbuffer& buf) {
                    pk.pack_array(7).pack("").pack("").pack_array(0).pack_array(0).pack_array(0).pack_array(0);
                    raw(buf, {0xdd, 0xff, 0xff, 0xff, 0xfe, 0x90});
                  },
                  2)),
              Code::data_loss, "nodes: an array of 4294967294 claims more");
  check_error(read_status<GraphDef>(document(
                  "GraphDef",
                  [](Packer&, msgpack::sbuffer& buf) {
                    raw(buf, {0xdd, 0xff, 0xff, 0xff, 0xff, 0xa0});
                  },
                  2)),
              Code::data_loss, "<root>: an array of 4294967295 claims more");
  // A count hidden in an unknown field is checked as well.
  check_error(read_status<GraphDef>(one_field("GraphDef", "future", {0xdd, 0x7f, 0xff, 0xff, 0xff})), Code::data_loss,
              "future: an array of 2147483647 claims more");
}

TEST_CASE("nesting 100 000 deep is refused at 256 levels, without deep recursion") {
  auto deep = document("GraphDef", [](Packer& pk, msgpack::sbuffer& buf) {
    pk.pack_map(1).pack("future");
    for (int i = 0; i < 100000; ++i) raw(buf, {0x91});
    raw(buf, {0xc0});
  });
  check_error(read_status<GraphDef>(deep), Code::data_loss, "future: nesting deeper than 256 levels");
  auto deep_maps = document("GraphDef", [](Packer& pk, msgpack::sbuffer& buf) {
    pk.pack_map(1).pack("nodes").pack_array(1).pack_map(1).pack("future");
    for (int i = 0; i < 100000; ++i) raw(buf, {0x81, 0xa0});
    raw(buf, {0xc0});
  });
  check_error(read_status<GraphDef>(deep_maps), Code::data_loss, "nodes[0].future: nesting deeper than 256 levels");
  // Positional: deep nesting in a field appended by a newer writer, and structs nested in structs.
  auto deep_extra = document(
      "GraphDef",
      [](Packer& pk, msgpack::sbuffer& buf) {
        pk.pack_array(9).pack("").pack("").pack_array(0).pack_array(0).pack_array(0).pack_array(0).pack_array(0);
        pk.pack_map(0);
        for (int i = 0; i < 100000; ++i) raw(buf, {0x91});
        raw(buf, {0xc0});
      },
      2);
  check_error(read_status<GraphDef>(deep_extra), Code::data_loss, "<field 8>: nesting deeper than 256 levels");
  auto deep_structs = document(
      "Link",
      [](Packer& pk, msgpack::sbuffer& buf) {
        for (int i = 0; i < 100000; ++i)  // [0, {"id": i, "type": "Link", "fields": [0, ...
          pk.pack_array(2).pack(0).pack_map(3).pack("id").pack(i).pack("type").pack("Link").pack("fields");
        raw(buf, {0xc0});
      },
      2);
  check_error(read_status<Link>(deep_structs), Code::data_loss, "nesting deeper than 256 levels");
}

TEST_CASE("refs must name an earlier object of the right type; ids come in sequence") {
  const auto pair = [](const std::function<void(Packer&)>& a, const std::function<void(Packer&)>& b) {
    return document("Pair", [&](Packer& pk, auto&) {
      pk.pack_map(2).pack("a");
      a(pk);
      pk.pack("b");
      b(pk);
    });
  };
  const auto point = [](int id) {
    return [id](Packer& pk) {
      pk.pack_map(3).pack("id").pack(id).pack("type").pack("Point").pack("fields").pack_map(1).pack("x").pack(1);
    };
  };
  const auto ref = [](int id) { return [id](Packer& pk) { pk.pack_map(1).pack("ref").pack(id); }; };
  CHECK(deserialize<Pair>(pair(point(0), ref(0))).ok());
  check_error(read_status<Pair>(pair(point(0), ref(5))), Code::data_loss,
              "b: ref 5 names no earlier object (1 defined so far)");
  check_error(read_status<Pair>(pair(ref(1), point(1))), Code::data_loss, "a: ref 1 names no earlier object");
  check_error(read_status<Pair>(pair(point(0), point(0))), Code::data_loss, "b: object id 0 is used twice");
  check_error(read_status<Pair>(pair(point(3), ref(3))), Code::data_loss, "a: object id 3 is out of sequence");
  check_error(
      read_status<Pair>(pair(point(0), [](Packer& pk) { pk.pack_map(2).pack("ref").pack(0).pack("x").pack(1); })),
      Code::data_loss, "b: a {\"ref\": n} map has other keys");
  check_error(read_status<Pair>(pair([](Packer& pk) { pk.pack(7); }, ref(0))), Code::data_loss,
              "a: expected a shared object (map) or nil, found an integer");

  // Tensor data may only refer to tensor data, and a Point ref only to a Point.
  const auto everything = document("Everything", [](Packer& pk, auto&) {
    pk.pack_map(2).pack("point");
    pk.pack_map(3).pack("id").pack(0).pack("type").pack("Point").pack("fields").pack_map(0);
    pk.pack("tensor").pack_map(3).pack("dtype").pack(0).pack("shape").pack_array(0);
    pk.pack("data").pack_map(1).pack("ref").pack(0);
  });
  check_error(read_status<Everything>(everything), Code::data_loss,
              "tensor.data: ref 0 names a Point, not tensor data");
}

TEST_CASE("tensors must hold exactly dtype x shape bytes") {
  const auto tensor = [](int dtype, std::vector<std::int64_t> dims, std::size_t nbytes) {
    return document("Everything", [=](Packer& pk, auto&) {
      pk.pack_map(1).pack("tensor").pack_map(3).pack("dtype").pack(dtype).pack("shape").pack(dims);
      pk.pack("data").pack_map(3).pack("id").pack(0).pack("type").pack("Storage").pack("fields");
      pk.pack_bin(static_cast<std::uint32_t>(nbytes));
      pk.pack_bin_body(std::string(nbytes, '\0').data(), static_cast<std::uint32_t>(nbytes));
    });
  };
  auto ok = deserialize<Everything>(tensor(1, {3}, 12));
  REQUIRE(ok.ok());
  CHECK(ok->tensor.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 0, 0});
  check_error(read_status<Everything>(tensor(0, {3}, 8)), Code::data_loss,
              "tensor: a f32 [3] tensor needs 12 bytes, its data has 8");
  check_error(read_status<Everything>(tensor(0, {-1}, 0)), Code::data_loss, "tensor: invalid tensor shape [-1]");
  check_error(read_status<Everything>(tensor(0, {1LL << 62, 1LL << 62}, 0)), Code::data_loss,
              "tensor: invalid tensor shape");
  check_error(read_status<Everything>(tensor(6, {1}, 4)), Code::data_loss,
              "tensor.dtype: enum value 6 is out of range");
  // The 2-, 8- and 1-byte dtypes (f16 2, bf16 3, i64 4, bool 5).
  check_error(read_status<Everything>(tensor(2, {3}, 7)), Code::data_loss,
              "tensor: a f16 [3] tensor needs 6 bytes, its data has 7");
  check_error(read_status<Everything>(tensor(3, {3}, 12)), Code::data_loss,
              "tensor: a bf16 [3] tensor needs 6 bytes, its data has 12");
  check_error(read_status<Everything>(tensor(4, {3}, 12)), Code::data_loss,
              "tensor: a i64 [3] tensor needs 24 bytes, its data has 12");
  check_error(read_status<Everything>(tensor(5, {3}, 4)), Code::data_loss,
              "tensor: a bool [3] tensor needs 3 bytes, its data has 4");
  const auto bools = [](std::string bytes) {
    return document("Everything", [=](Packer& pk, auto&) {
      pk.pack_map(1).pack("tensor").pack_map(3).pack("dtype").pack(5).pack("shape").pack(
          std::vector<std::int64_t>{static_cast<std::int64_t>(bytes.size())});
      pk.pack("data").pack_map(3).pack("id").pack(0).pack("type").pack("Storage").pack("fields");
      pk.pack_bin(static_cast<std::uint32_t>(bytes.size()));
      pk.pack_bin_body(bytes.data(), static_cast<std::uint32_t>(bytes.size()));
    });
  };
  auto mask = deserialize<Everything>(bools(std::string("\x01\x00\x01", 3)));
  REQUIRE(mask.ok());
  CHECK(mask->tensor.to_vector<bool>() == std::vector<bool>{true, false, true});
  check_error(read_status<Everything>(bools(std::string("\x01\x00\x02", 3))), Code::data_loss,
              "tensor: a bool tensor's byte 2 is 2, not 0 or 1");
  check_error(read_status<Everything>(bools(std::string("\xff", 1))), Code::data_loss, "byte 0 is 255");
  check_error(
      read_status<Everything>(document(
          "Everything", [](Packer& pk, auto&) { pk.pack_map(1).pack("tensor").pack_map(1).pack("dtype").pack(0); })),
      Code::data_loss, "tensor: a tensor needs \"dtype\", \"shape\" and \"data\"");
}
