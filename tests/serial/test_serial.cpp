// MessagePack serialization: round trips of every field kind and of graphs, pointer sharing, the
// type registry, and the bytes checked with an independent decoder (msgpack-cxx).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <msgpack.hpp>
#include <string>
#include <vector>

#include <rml/core/equal.hpp>
#include <rml/serial/serialize.hpp>

#include "serial/test_serial_types.hpp"

using namespace rml;
using namespace serial_test;

namespace {

std::filesystem::path temp_path(const std::string& name) {
  const auto dir = std::filesystem::path(RML_TEST_BUILD_DIR) / "serial_tmp";
  std::filesystem::create_directories(dir);
  return dir / name;
}

// The envelope's keys and the root, decoded by msgpack-cxx.
msgpack::object_handle decode(const std::vector<std::uint8_t>& bytes) {
  return msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}
const msgpack::object* find_key(const msgpack::object& map, std::string_view key) {
  REQUIRE(map.type == msgpack::type::MAP);
  for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
    const auto& kv = map.via.map.ptr[i];
    if (kv.key.type == msgpack::type::STR && std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == key)
      return &kv.val;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("every field kind round-trips") {
  Everything e;
  e.flag = true;
  e.i8 = -100;
  e.u64 = std::numeric_limits<std::uint64_t>::max();
  e.i64 = std::numeric_limits<std::int64_t>::min();
  e.f = -0.0f;
  e.d = std::nan("0x5");
  e.dtype = DType::i32;
  e.text = std::string(40, 'x') + "\xe2\x9c\x93";  // longer than a fixstr, with UTF-8
  e.words = {"", "a", std::string(300, 'b')};
  e.blob = {0, 1, 2, 255};
  e.bits = {true, false, true};
  e.origin = Origin{"layers.2", "model.py", 41};
  e.attrs = {
      {"i", std::int64_t{-7}},
      {"d", 2.5},
      {"b", false},
      {"s", std::string("tanh")},
      {"li", std::vector<std::int64_t>{1, -2, -33, -129, -32769, -2147483649LL, 255, 65535, 4294967295LL, 1LL << 40}},
      {"ld", std::vector<double>{}}};
  e.table = {{-1, {1.0, 2.0}}, {70000, {}}};
  e.tensor = Tensor::from_vector<std::int32_t>({1, -2, 3, 1 << 30, -(1 << 30), 0}, {2, 3});
  e.point = std::make_shared<Point>(Point{3, -4});

  const auto bytes = serialize(e);
  // An independent decoder reads the integers of every width as written.
  auto handle = decode(bytes);
  const msgpack::object& root = *find_key(handle.get(), "root");
  REQUIRE(root.type == msgpack::type::ARRAY);
  REQUIRE(root.via.array.size == 17);                                   // every field: the last, `point`, is set
  const msgpack::object& li = *find_key(root.via.array.ptr[12], "li");  // field 12: attrs
  CHECK(li.via.array.ptr[0].as<int>() == 4);
  CHECK(li.via.array.ptr[1].as<std::vector<std::int64_t>>() == std::get<4>(e.attrs.at("li")));
  auto back = deserialize<Everything>(bytes);
  REQUIRE(back.ok());
  CHECK(assert_structural_equal(e, *back).ok());
  CHECK(std::signbit(back->f));
  std::uint64_t bits_in = 0, bits_out = 0;
  std::memcpy(&bits_in, &e.d, 8);
  std::memcpy(&bits_out, &back->d, 8);
  CHECK(bits_in == bits_out);  // the NaN payload survives
  CHECK(!back->empty_tensor.defined());
  CHECK(back->tensor.to_vector<std::int32_t>() == e.tensor.to_vector<std::int32_t>());
  // Restored tensors own aligned storage.
  CHECK(reinterpret_cast<std::uintptr_t>(back->tensor.raw_data()) % BufferStorage::alignment == 0);
}

TEST_CASE("long lists and strings grow the writer's buffer from its small start") {
  // Thousands of structs, a scalar list longer than the writer's 4096-element chunk with every
  // integer width, and a blob and a string longer than the buffer's first steps.
  v2::Model m;
  m.name = std::string(70000, 'n');
  for (int i = 0; i < 5000; ++i) m.layers.push_back({"layer" + std::to_string(i), i * 1000003LL, std::nullopt, 0.5});
  Everything e;
  std::vector<std::int64_t> widths;  // +-2^k for every k < 63: every encoding width, both signs
  for (std::int64_t i = 0; i < 10000; ++i) widths.push_back((i % 2 ? -1 : 1) * (std::int64_t{1} << (i % 63)));
  for (std::size_t i = 0; i < widths.size(); ++i)
    e.table[static_cast<std::int32_t>(i % 3)].push_back(static_cast<double>(widths[i]));
  e.attrs["big"] = widths;
  e.blob.assign(300000, 0xab);
  auto model = deserialize<v2::Model>(serialize(m));
  REQUIRE_MESSAGE(model.ok(), model.error().to_string());
  CHECK(model->name == m.name);
  REQUIRE(model->layers.size() == 5000);
  CHECK(model->layers[4999].name == "layer4999");
  CHECK(model->layers[4999].width == 4999 * 1000003LL);
  const auto bytes = serialize(e);
  // msgpack-cxx reads the long list back as written.
  auto handle = decode(bytes);
  const msgpack::object& root = *find_key(handle.get(), "root");
  CHECK(find_key(root.via.array.ptr[12], "big")->via.array.ptr[1].as<std::vector<std::int64_t>>() == widths);
  auto back = deserialize<Everything>(bytes);
  REQUIRE_MESSAGE(back.ok(), back.error().to_string());
  CHECK(assert_structural_equal(e, *back).ok());
}

TEST_CASE("the bytes are MessagePack as documented (decoded by msgpack-cxx)") {
  Pair p;
  p.a = std::make_shared<Point>(Point{1, 2});
  p.b = p.a;
  const auto bytes = serialize(p);
  auto handle = decode(bytes);
  const msgpack::object& doc = handle.get();
  REQUIRE(doc.type == msgpack::type::MAP);
  CHECK(doc.via.map.size == 4);
  CHECK(doc.via.map.ptr[0].key.as<std::string>() == "format");
  CHECK(doc.via.map.ptr[0].val.as<std::string>() == "rml-msgpack");
  CHECK(doc.via.map.ptr[1].key.as<std::string>() == "version");
  CHECK(doc.via.map.ptr[1].val.as<std::vector<int>>() == std::vector<int>{2, 0});
  CHECK(find_key(doc, "type")->as<std::string>() == "Pair");
  const msgpack::object& root = *find_key(doc, "root");  // [a, b]
  REQUIRE(root.type == msgpack::type::ARRAY);
  REQUIRE(root.via.array.size == 2);
  const msgpack::object& a = root.via.array.ptr[0];
  CHECK(find_key(a, "id")->as<int>() == 0);
  CHECK(find_key(a, "type")->as<std::string>() == "Point");
  CHECK(find_key(a, "fields")->as<std::vector<int>>() == std::vector<int>{1, 2});  // [x, y]
  const msgpack::object& b = root.via.array.ptr[1];
  CHECK(b.via.map.size == 1);
  CHECK(find_key(b, "ref")->as<int>() == 0);
}

TEST_CASE("a struct is positional: fields before the last one written are kept, trailing defaults are not") {
  // width 0 is its default but precedes activation: written. dropout 0.5 is trailing: left out.
  v2::Layer layer{"fc", 0, "relu", 0.5};
  auto handle = decode(serialize(layer));
  const msgpack::object& root = *find_key(handle.get(), "root");
  REQUIRE(root.type == msgpack::type::ARRAY);
  REQUIRE(root.via.array.size == 3);
  CHECK(root.via.array.ptr[0].as<std::string>() == "fc");
  CHECK(root.via.array.ptr[1].as<int>() == 0);
  CHECK(root.via.array.ptr[2].as<std::string>() == "relu");
  // All defaults: an empty array. A nested struct at its defaults is an empty array too.
  auto empty = decode(serialize(v2::Layer{"", 0, std::nullopt, 0.5}));
  CHECK(find_key(empty.get(), "root")->via.array.size == 0);
  NodeDef node;
  node.op = "relu";
  node.device = Device::cpu(0);  // trailing and default: left out
  auto node_handle = decode(serialize(node));
  CHECK(find_key(node_handle.get(), "root")->via.array.size == 1);
  node.device = Device::cpu(3);
  auto with_device = decode(serialize(node));
  const msgpack::object& fields = *find_key(with_device.get(), "root");
  REQUIRE(fields.via.array.size == 7);  // op, inputs, outputs, name, attrs, origin (nil), device
  CHECK(fields.via.array.ptr[5].is_nil());
  CHECK(fields.via.array.ptr[6].as<std::vector<int>>() == std::vector<int>{0, 3});  // [kind cpu, index 3]
  auto back = deserialize<NodeDef>(serialize(node));
  REQUIRE(back.ok());
  CHECK(back->device == Device::cpu(3));
}

TEST_CASE("a nested struct whose enclosing default differs from its own reads back as written") {
  Placement moved;
  moved.device = Device::cpu(0);  // Device{}: written as an empty struct
  moved.priority = 1;
  auto back = deserialize<Placement>(serialize(moved));
  REQUIRE(back.ok());
  CHECK(back->device == Device::cpu(0));
  CHECK(back->priority == 1);
  auto defaults = deserialize<Placement>(serialize(Placement{}));  // all left out
  REQUIRE(defaults.ok());
  CHECK(defaults->device == Device::cpu(2));
  // The same in version 1's keyed layout, as its writer wrote it: {"device": {}, "priority": 1}.
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(4).pack("format").pack("rml-msgpack").pack("version").pack_array(2).pack(1).pack(0);
  pk.pack("type").pack("Placement").pack("root").pack_map(2).pack("device").pack_map(0).pack("priority").pack(1);
  auto keyed = deserialize<Placement>(std::span(reinterpret_cast<const std::uint8_t*>(buf.data()), buf.size()));
  REQUIRE_MESSAGE(keyed.ok(), keyed.error().to_string());
  CHECK(keyed->device == Device::cpu(0));
}

TEST_CASE("a positional document packed by msgpack-cxx (appended fields, long headers, wide integers) reads") {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  const auto raw = [&](std::initializer_list<std::uint8_t> bytes) {
    for (std::uint8_t b : bytes) buf.write(reinterpret_cast<const char*>(&b), 1);
  };
  pk.pack_map(4).pack("format").pack("rml-msgpack").pack("version").pack_array(2).pack(2).pack(0);
  pk.pack("type").pack("Model").pack("root");
  raw({0xdc, 0x00, 0x04});  // Model as an array16 of 4: name, layers, metadata, and one field from the future
  pk.pack("mlp").pack_array(2);
  pk.pack_array(5).pack("fc1").pack(std::uint64_t{128}).pack_nil().pack(0.25).pack_array(1).pack("future");
  raw({0xdd, 0x00, 0x00, 0x00, 0x01});  // a Layer as an array32 of 1: only its name
  pk.pack("fc2");
  pk.pack_map(1).pack("k").pack("v");
  pk.pack_map(1).pack("later").pack_bin(3).pack_bin_body("abc", 3);
  const std::vector<std::uint8_t> bytes(buf.data(), buf.data() + buf.size());
  auto m = deserialize<v2::Model>(bytes);
  REQUIRE_MESSAGE(m.ok(), m.error().to_string());
  CHECK(m->name == "mlp");
  REQUIRE(m->layers.size() == 2);
  CHECK(m->layers[0].name == "fc1");
  CHECK(m->layers[0].width == 128);
  CHECK(!m->layers[0].activation);
  CHECK(m->layers[0].dropout == 0.25);
  CHECK(m->layers[1].name == "fc2");
  CHECK(m->layers[1].width == 0);
  CHECK(m->layers[1].dropout == 0.5);  // missing: the default
  CHECK(m->metadata.at("k") == "v");
}

TEST_CASE("a document packed by msgpack-cxx (keys reordered, unknown keys, wide integers) reads") {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(5);
  pk.pack("format").pack("rml-msgpack");
  pk.pack("version").pack_array(3).pack(1).pack(7).pack("future");  // newer minor, extra element
  pk.pack("comment").pack_map(1).pack("nested").pack_array(2).pack(1.5).pack_nil();
  pk.pack("root");
  pk.pack_map(3);
  pk.pack("layers").pack_array(1);
  pk.pack_map(3).pack("width").pack(std::uint64_t{128}).pack("unknown").pack_bin(3).pack_bin_body("abc", 3);
  pk.pack("name").pack("fc1");
  pk.pack("name").pack("mlp");
  pk.pack("metadata").pack_map(1).pack("k").pack("v");
  pk.pack("type").pack("Model");
  const std::vector<std::uint8_t> bytes(buf.data(), buf.data() + buf.size());
  auto m = deserialize<v2::Model>(bytes);
  REQUIRE_MESSAGE(m.ok(), m.error().to_string());
  CHECK(m->name == "mlp");
  REQUIRE(m->layers.size() == 1);
  CHECK(m->layers[0].name == "fc1");
  CHECK(m->layers[0].width == 128);
  CHECK(m->layers[0].dropout == 0.5);  // missing: the default
  CHECK(!m->layers[0].activation);
  CHECK(m->metadata.at("k") == "v");
}

TEST_CASE("graphs round-trip with bit-identical weights, in memory and through files") {
  const GraphDef def = sample_graph();
  const Graph g(def);
  const auto bytes = serialize(g);
  auto back = deserialize<Graph>(bytes);
  REQUIRE_MESSAGE(back.ok(), back.error().to_string());
  CHECK(assert_structural_equal(g, *back).ok());
  const auto& c = back->def().constants;
  REQUIRE(c.size() == 3);
  CHECK(std::memcmp(c[0].data.raw_data(), def.constants[0].data.raw_data(), 64) == 0);
  CHECK(c[2].data.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, -1, 7});
  CHECK(c[2].inline_data);
  // Tied weights come back tied.
  CHECK(c[0].data.storage() == c[1].data.storage());
  // GraphDef and Graph write the same document.
  CHECK(serialize(def) == bytes);

  const auto path = temp_path("sample.rmlpack");
  REQUIRE(serialize_to_file(g, path).ok());
  auto from_file = deserialize_from_file<Graph>(path);
  REQUIRE_MESSAGE(from_file.ok(), from_file.error().to_string());
  CHECK(assert_structural_equal(g, *from_file).ok());
  CHECK(std::filesystem::file_size(path) == bytes.size());

  auto missing = deserialize_from_file<Graph>(temp_path("nope.rmlpack"));
  CHECK(missing.error().code() == Code::not_found);
  CHECK(missing.error().message().find("nope.rmlpack") != std::string::npos);
  CHECK(serialize_to_file(g, temp_path("no_dir") / "x.rmlpack").code() == Code::invalid_argument);
}

TEST_CASE("serialize_into reuses a buffer: the same bytes as serialize, whatever the buffer held") {
  const Graph small(sample_graph());
  const Graph large(serial_test::chain_graph(300));
  const auto small_bytes = serialize(small);
  const auto large_bytes = serialize(large);
  std::vector<std::uint8_t> buffer(3, 0xee);  // stale contents are overwritten, not appended to
  serialize_into(small, buffer);
  CHECK(buffer == small_bytes);
  serialize_into(large, buffer);  // grows past what it held
  CHECK(buffer == large_bytes);
  const auto* memory = buffer.data();
  serialize_into(small, buffer);  // shrinks, keeping its memory
  CHECK(buffer == small_bytes);
  CHECK(buffer.data() == memory);
  CHECK(buffer.capacity() >= large_bytes.size());
  auto back = deserialize<Graph>(buffer);
  REQUIRE_MESSAGE(back.ok(), back.error().to_string());
  CHECK(assert_structural_equal(small, *back).ok());
}

TEST_CASE("tensor storage shared by several tensors is written once and shared again") {
  const auto tied = serialize(sample_graph(true));
  const auto untied = serialize(sample_graph(false));
  CHECK(untied.size() - tied.size() >= 64);  // the second copy of the 4x4 f32 weight
  auto back = deserialize<GraphDef>(untied);
  REQUIRE(back.ok());
  CHECK(back->constants[0].data.storage() != back->constants[1].data.storage());

  // Views at different offsets of one storage are distinct data; the same view twice is one.
  const Tensor base = Tensor::from_vector<float>({1, 2, 3, 4}, {4});
  GraphDef g;
  g.values = {{"a", {DType::f32, {2}}}, {"b", {DType::f32, {2}}}, {"c", {DType::f32, {2}}}};
  g.constants = {{0, "a", Tensor::view({DType::f32, {2}}, base.storage(), 0), false},
                 {1, "b", Tensor::view({DType::f32, {2}}, base.storage(), 8), false},
                 {2, "c", Tensor::view({DType::f32, {2}}, base.storage(), 8), false}};
  auto views = deserialize<GraphDef>(serialize(g));
  REQUIRE(views.ok());
  CHECK(views->constants[0].data.to_vector<float>() == std::vector<float>{1, 2});
  CHECK(views->constants[1].data.to_vector<float>() == std::vector<float>{3, 4});
  CHECK(views->constants[0].data.storage() != views->constants[1].data.storage());
  CHECK(views->constants[1].data.storage() == views->constants[2].data.storage());
}

TEST_CASE("objects held by shared_ptr are written once and restored as one object") {
  Pair shared;
  shared.a = std::make_shared<Point>(Point{5, 6});
  shared.b = shared.a;
  Pair separate;
  separate.a = std::make_shared<Point>(Point{5, 6});
  separate.b = std::make_shared<Point>(Point{5, 6});
  const auto shared_bytes = serialize(shared);
  const auto separate_bytes = serialize(separate);
  CHECK(shared_bytes.size() < separate_bytes.size());

  auto restored = deserialize<Pair>(shared_bytes);
  REQUIRE(restored.ok());
  CHECK(restored->a.get() == restored->b.get());
  CHECK(restored->a->x == 5);
  auto apart = deserialize<Pair>(separate_bytes);
  REQUIRE(apart.ok());
  CHECK(apart->a.get() != apart->b.get());
  CHECK(structural_equal(*restored, *apart));

  Pair nulls;
  auto none = deserialize<Pair>(serialize(nulls));
  REQUIRE(none.ok());
  CHECK(!none->a);
  CHECK(!none->b);
}

TEST_CASE("polymorphic objects come back through the type registry") {
  auto x = std::make_shared<Const>();
  x->label = "x";
  x->value = 2.5;
  auto sum = std::make_shared<Add>();
  sum->label = "x+x";
  sum->lhs = x;
  sum->rhs = x;
  Program p;
  p.roots = {sum, x, nullptr};

  auto back = deserialize<Program>(serialize(p));
  REQUIRE_MESSAGE(back.ok(), back.error().to_string());
  REQUIRE(back->roots.size() == 3);
  auto* add = dynamic_cast<Add*>(back->roots[0].get());
  REQUIRE(add != nullptr);
  CHECK(add->label == "x+x");
  CHECK(add->lhs.get() == add->rhs.get());  // pointer sharing preserved
  CHECK(add->lhs.get() == back->roots[1].get());
  auto* c = dynamic_cast<Const*>(add->lhs.get());
  REQUIRE(c != nullptr);
  CHECK(c->value == 2.5);
  CHECK(c->label == "x");
  CHECK(!back->roots[2]);

  // An unregistered dynamic type cannot be written; the file API turns that into a status.
  Program bad;
  bad.roots = {std::make_shared<Unregistered>()};
  CHECK_THROWS_AS((void)serialize(bad), Error);
  CHECK(serialize_to_file(bad, temp_path("bad.rmlpack")).code() == Code::failed_precondition);
}

TEST_CASE("registering a type is one line and a name a reader does not know is refused by name") {
  // A document naming "Mul", a type this program never registered.
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(4).pack("format").pack("rml-msgpack").pack("version").pack_array(2).pack(1).pack(0);
  pk.pack("type").pack("Program").pack("root").pack_map(1).pack("roots").pack_array(1);
  pk.pack_map(3).pack("id").pack(0).pack("type").pack("Mul").pack("fields").pack_map(0);
  auto r = deserialize<Program>(std::span(reinterpret_cast<const std::uint8_t*>(buf.data()), buf.size()));
  REQUIRE(!r.ok());
  CHECK(r.error().code() == Code::invalid_argument);
  CHECK(r.error().message().find("roots[0]: unknown type name \"Mul\"") != std::string::npos);
}

TEST_CASE("a Link chain nests through shared objects up to the depth bound") {
  auto make_chain = [](int n) {
    Link head;
    std::shared_ptr<Link>* tail = &head.next;
    for (int i = 0; i < n; ++i) {
      *tail = std::make_shared<Link>();
      (*tail)->value = i;
      tail = &(*tail)->next;
    }
    return head;
  };
  auto shallow = deserialize<Link>(serialize(make_chain(100)));
  REQUIRE(shallow.ok());
  CHECK(shallow->next->next->value == 1);
  // The root struct is one level and each link two (its shared object and its struct): 127 links are
  // 255 levels and read back; 128 would be 257, which the writer now refuses rather than writing a
  // document no reader reads (issue 16). The reader's own refusal of deeper documents is tested in
  // test_bad_input.cpp and test_limits.cpp.
  auto deepest = deserialize<Link>(serialize(make_chain(127)));
  REQUIRE(deepest.ok());
  try {
    (void)serialize(make_chain(300));
    FAIL("a chain of 300 links was written");
  } catch (const Error& e) {
    CHECK(e.status().code() == Code::unsupported);
    CHECK(e.status().message().find("nesting deeper than 256") != std::string::npos);
  }
}
