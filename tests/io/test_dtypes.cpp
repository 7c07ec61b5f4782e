// The f16, bf16, i64 and bool dtypes in files: NumPy-written safetensors, rml's roundings against
// NumPy's and PyTorch's, byte-exact round trips, aligned layout, f32/i32 files unchanged.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <rml/core/equal.hpp>
#include <rml/io/graph_io.hpp>

#include "support/temp_dir.hpp"

using namespace rml;
using rml::testing::read_text;
using rml::testing::TempDir;

namespace {

const std::filesystem::path data_dir = RML_TEST_DATA_DIR;

// The hand-written values tests/data/gen_fixtures.py (dtypes) gave NumPy and PyTorch.
const float f16_values[12] = {0.0F,     -0.0F,    1.0F,      -2.5F, 65504.0F, 0x1p-14F,
                              0x1p-24F, INFINITY, -INFINITY, NAN,   0.0F,     0.0F};
// 0.1 and -1/3 are not binary16 numbers: their NumPy roundings, worked out by hand.
const std::uint16_t f16_bits[12] = {0x0000, 0x8000, 0x3c00, 0xc100, 0x7bff, 0x0400,
                                    0x0001, 0x7c00, 0xfc00, 0x7e00, 0x2e66, 0xb555};
const std::uint16_t bf16_bits[10] = {0x0000, 0x8000, 0x3F80, 0xC020, 0x7F7F, 0x0080, 0x0001, 0x7F80, 0xFF80, 0x7FC0};
const float bf16_values[10] = {0.0F, -0.0F, 1.0F, -2.5F, 0x1.fep127F, 0x1p-126F, 0x1p-133F, INFINITY, -INFINITY, NAN};
const std::int64_t i64_values[7] = {
    std::numeric_limits<std::int64_t>::min(), -(std::int64_t{1} << 53) - 1, -1, 0, 1, (std::int64_t{1} << 53) + 1,
    std::numeric_limits<std::int64_t>::max()};
const bool bool_values[5] = {true, false, false, true, true};

bool same_float(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;  // -0.0 != 0.0
}

Tensor bool_tensor(const std::vector<int>& v, Shape shape) {
  Tensor t = Tensor::zeros(DType::boolean, std::move(shape));
  for (std::size_t i = 0; i < v.size(); ++i) t.mutable_data<bool>()[i] = v[i] != 0;
  return t;
}

// One constant of each dtype stored, and one inline with values a JSON number holds exactly (the
// graph has no nodes: its outputs are the constants).
GraphDef every_dtype_graph() {
  GraphDef g;
  g.producer = "test_dtypes";
  const std::int64_t two53 = std::int64_t{1} << 53;
  const Tensor stored[] = {
      Tensor::from_vector<f16>({f16(1.5F), f16(-0.0F), f16::from_bits(0x7c00), f16::from_bits(0x0001)}, {2, 2}),
      Tensor::from_vector<bf16>({bf16(3.0F), bf16::from_bits(0xff80), bf16(1e-39F)}, {3}),
      Tensor::from_vector<std::int64_t>({i64_values[0], i64_values[6], -5}, {3}),
      bool_tensor({1, 0, 1}, {3}),
      Tensor::from_vector<float>({1.0F, 2.0F}, {2}),
      Tensor::from_vector<std::int32_t>({7}, {1}),
  };
  const Tensor inline_data[] = {
      Tensor::from_vector<f16>({f16(0.1F), f16(-0.0F), f16(65504.0F), f16::from_bits(0x0001)}, {4}),
      Tensor::from_vector<bf16>({bf16(-2.5F), bf16(1e-39F), bf16(0x1.fep127F)}, {3}),
      Tensor::from_vector<std::int64_t>({-two53, two53, -5}, {3}),
      bool_tensor({0, 1}, {2}),
      Tensor::from_vector<float>({0.1F}, {1}),
      Tensor::from_vector<std::int32_t>({-2147483647 - 1}, {1}),
  };
  auto add = [&](const Tensor& t, bool is_inline) {
    const auto id = static_cast<ValueId>(g.values.size());
    g.values.push_back({std::string(dtype_name(t.dtype())) + (is_inline ? "_inline" : "_stored"), t.type()});
    g.constants.push_back({id, is_inline ? "" : std::string(dtype_name(t.dtype())) + "_w", t, is_inline});
    g.outputs.push_back(id);
  };
  for (const Tensor& t : stored) add(t, false);
  for (const Tensor& t : inline_data) add(t, true);
  return g;
}

}  // namespace

TEST_CASE("safetensors written by NumPy: every new dtype, element by element") {
  auto reader = SafetensorsReader::open(data_dir / "dtypes.safetensors");
  REQUIRE_MESSAGE(reader.ok(), reader.status().to_string());

  Tensor f = reader->get("f16").value();
  CHECK(f.type().to_string() == "f16 [3, 4]");
  for (std::size_t i = 0; i < 12; ++i) {
    INFO(i);
    CHECK(f.data<f16>()[i].bits == f16_bits[i]);
    if (i < 10) CHECK(same_float(static_cast<float>(f.data<f16>()[i]), f16_values[i]));
  }
  CHECK(static_cast<float>(f.data<f16>()[10]) == 0.0999755859375F);
  CHECK(static_cast<float>(f.data<f16>()[11]) == -0.333251953125F);

  Tensor b = reader->get("bf16").value();
  CHECK(b.type().to_string() == "bf16 [10]");
  for (std::size_t i = 0; i < 10; ++i) {
    INFO(i);
    CHECK(b.data<bf16>()[i].bits == bf16_bits[i]);
    CHECK(same_float(static_cast<float>(b.data<bf16>()[i]), bf16_values[i]));
  }

  Tensor l = reader->get("i64").value();  // misaligned in NumPy's layout (offset 29): a copy
  CHECK(l.type().to_string() == "i64 [7]");
  CHECK(reinterpret_cast<std::uintptr_t>(l.raw_data()) % 8 == 0);
  for (std::size_t i = 0; i < 7; ++i) CHECK(l.data<std::int64_t>()[i] == i64_values[i]);

  Tensor o = reader->get("bool").value();
  CHECK(o.type().to_string() == "bool [5]");
  for (std::size_t i = 0; i < 5; ++i) CHECK(o.data<bool>()[i] == bool_values[i]);
}

TEST_CASE("rml's f16 and bf16 roundings agree with NumPy's and PyTorch's, bit for bit") {
  auto reader = SafetensorsReader::open(data_dir / "dtypes.safetensors");
  REQUIRE(reader.ok());
  Tensor src = reader->get("src").value();
  Tensor h = reader->get("f16_of_src").value();
  Tensor bh = reader->get("bf16_of_src").value();
  REQUIRE(src.numel() == 4024);
  REQUIRE(h.numel() == src.numel());
  REQUIRE(bh.numel() == src.numel());
  int nans = 0;
  for (std::int64_t i = 0; i < src.numel(); ++i) {
    const float x = src.data<float>()[i];
    INFO(i, " ", x);
    const f16 ours(x);
    const bf16 ours_b(x);
    if (std::isnan(x)) {  // NaN payloads differ between libraries; NaN must stay NaN
      ++nans;
      CHECK(std::isnan(static_cast<float>(ours)));
      CHECK(std::isnan(static_cast<float>(h.data<f16>()[i])));
      CHECK(std::isnan(static_cast<float>(ours_b)));
      CHECK(std::isnan(static_cast<float>(bh.data<bf16>()[i])));
      continue;
    }
    CHECK(ours.bits == h.data<f16>()[i].bits);
    CHECK(ours_b.bits == bh.data<bf16>()[i].bits);
    // Widening is exact: NumPy's float16 read back through rml equals the value NumPy holds.
    CHECK(same_float(static_cast<float>(f16(static_cast<float>(h.data<f16>()[i]))),
                     static_cast<float>(h.data<f16>()[i])));
  }
  CHECK(nans > 0);
}

TEST_CASE("the writer lays every dtype out aligned; re-encoding is byte-exact") {
  auto reader = SafetensorsReader::open(data_dir / "dtypes.safetensors");
  REQUIRE(reader.ok());
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& e : reader->entries()) tensors.emplace_back(e.name, reader->get(e.name).value());
  auto bytes = encode_safetensors(tensors, reader->metadata());
  REQUIRE(bytes.ok());
  TempDir dir;
  rml::testing::write_text(dir / "again.safetensors", *bytes);
  auto again = SafetensorsReader::open(dir / "again.safetensors");
  REQUIRE(again.ok());
  CHECK(again->entries().size() == tensors.size());
  CHECK(again->metadata() == reader->metadata());
  // I64 first, then the 4-byte tensors, the 2-byte ones, BOOL last, otherwise in the given order.
  std::vector<std::string> order;
  for (const auto& e : again->entries()) order.push_back(e.name);
  CHECK(order == std::vector<std::string>{"i64", "src", "f16", "bf16", "f16_of_src", "bf16_of_src", "bool"});
  for (const auto& [name, t] : tensors) {
    INFO(name);
    const SafetensorsEntry* e = again->find(name);
    REQUIRE(e);
    CHECK(e->begin % element_size(t.dtype()) == 0);
    Tensor u = again->get(name).value();
    CHECK(dynamic_cast<const detail::MappedFile*>(u.storage().get()) != nullptr);  // a view, not a copy
    CHECK(u.type() == t.type());
    CHECK(std::memcmp(u.raw_data(), t.raw_data(), t.nbytes()) == 0);
  }
  std::vector<std::pair<std::string, Tensor>> second;
  for (const auto& e : again->entries()) second.emplace_back(e.name, again->get(e.name).value());
  CHECK(encode_safetensors(second, again->metadata()).value() == *bytes);
}

TEST_CASE("a model with constants of every dtype, stored and inline, round-trips byte-exact") {
  const GraphDef g = every_dtype_graph();
  TempDir dir;
  REQUIRE(save_graph(Graph(g), dir / "a").ok());
  auto loaded = load_graph(dir / "a");
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());
  CHECK_MESSAGE(assert_structural_equal(g, loaded->def()).ok(), assert_structural_equal(g, loaded->def()).message());
  const std::string json = read_text(dir / "a.json");
  CHECK(json.find(R"({"value": 6, "data": [0.099975586, -0.0, 65504.0, 5.9604645e-08]})") != std::string::npos);
  CHECK(json.find(R"({"value": 8, "data": [-9007199254740992, 9007199254740992, -5]})") != std::string::npos);
  CHECK(json.find(R"({"value": 9, "data": [0, 1]})") != std::string::npos);
  auto weights = SafetensorsReader::open(dir / "a.safetensors").value();
  std::vector<std::string> stored;
  for (const auto& e : weights.entries()) stored.push_back(e.name + ":" + e.dtype);
  CHECK(stored ==
        std::vector<std::string>{"i64_w:I64", "f32_w:F32", "i32_w:I32", "f16_w:F16", "bf16_w:BF16", "bool_w:BOOL"});
  REQUIRE(save_graph(*loaded, dir / "b").ok());
  CHECK(read_text(dir / "a.json") == read_text(dir / "b.json"));
  CHECK(read_text(dir / "a.safetensors") == read_text(dir / "b.safetensors"));
}

TEST_CASE("inline constants a JSON number cannot hold exactly are stored, bits intact") {
  GraphDef g;
  const Tensor odd[] = {
      Tensor::from_vector<f16>({f16::from_bits(0x7c00), f16(1.0F)}, {2}),     // inf
      Tensor::from_vector<bf16>({bf16::from_bits(0x7fc1), bf16(1.0F)}, {2}),  // a NaN with a payload
      Tensor::from_vector<std::int64_t>({(std::int64_t{1} << 53) + 1}, {1}),  // beyond 2^53
  };
  for (const Tensor& t : odd) {
    const auto id = static_cast<ValueId>(g.values.size());
    g.values.push_back({"", t.type()});
    g.constants.push_back({id, "", t, true});
    g.outputs.push_back(id);
  }
  TempDir dir;
  REQUIRE(save_graph(Graph(g), dir / "o").ok());
  CHECK(read_text(dir / "o.json").find("\"data\"") == std::string::npos);
  CHECK(SafetensorsReader::open(dir / "o.safetensors").value().entries().size() == 3);
  const GraphDef back = load_graph(dir / "o").value().def();
  for (std::size_t i = 0; i < 3; ++i) {
    INFO(i);
    CHECK(!back.constants[i].inline_data);
    CHECK(back.constants[i].data.type() == odd[i].type());
    CHECK(std::memcmp(back.constants[i].data.raw_data(), odd[i].raw_data(), odd[i].nbytes()) == 0);
  }
}

TEST_CASE("models of f32 and i32 only are written byte for byte as before the new dtypes") {
  // tests/data/f32_i32_saved.{json,safetensors} were written by save_graph at commit 7c9f77a (before
  // f16, bf16, i64 and bool) from this graph: the torch_mlp fixture plus i32 and f32 constants,
  // stored and inline, with a tied pair and a non-finite inline constant (which is stored).
  GraphDef g = load_graph(data_dir / "torch_mlp").value().def();
  auto add = [&](const std::string& name, Tensor t, bool inline_data) {
    const auto id = static_cast<ValueId>(g.values.size());
    g.values.push_back({name, t.type()});
    g.constants.push_back({id, "", std::move(t), inline_data});
    g.outputs.push_back(id);
  };
  Tensor tied = Tensor::from_vector<std::int32_t>({-3, 0, 2147483647}, {3});
  add("idx", tied, false);
  add("idx_again", tied, false);
  add("small", Tensor::from_vector<std::int32_t>({1, -2}, {2}), true);
  add("scale", Tensor::scalar(0.1F), true);
  add("odd", Tensor::from_vector<float>({NAN, 1.0F, -0.0F}, {3}), true);
  add("col", Tensor::from_vector<float>({0.5F, 0.25F, 0.125F}, {3, 1}), false);
  TempDir dir;
  REQUIRE(save_graph(Graph(g), dir / "now").ok());
  CHECK(read_text(dir / "now.json") == read_text(data_dir / "f32_i32_saved.json"));
  CHECK(read_text(dir / "now.safetensors") == read_text(data_dir / "f32_i32_saved.safetensors"));
}
