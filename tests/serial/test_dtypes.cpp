// The f16, bf16, i64 and bool dtypes in MessagePack and in structural equality.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <msgpack.hpp>
#include <string>
#include <vector>

#include <rml/core/equal.hpp>
#include <rml/serial/serialize.hpp>

#include "serial/test_serial_types.hpp"

using namespace rml;
using serial_test::bool_tensor;
using serial_test::every_dtype_graph;

namespace {

// The root's "constants" list, decoded by msgpack-cxx (format 2: GraphDef is positional).
std::vector<std::pair<std::uint64_t, std::string>> stored_tensors(const std::vector<std::uint8_t>& bytes) {
  auto handle = msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const msgpack::object& env = handle.get();
  REQUIRE(env.type == msgpack::type::MAP);
  const msgpack::object* root = nullptr;
  for (std::uint32_t i = 0; i < env.via.map.size; ++i)
    if (env.via.map.ptr[i].key.as<std::string>() == "root") root = &env.via.map.ptr[i].val;
  REQUIRE(root);
  REQUIRE(root->type == msgpack::type::ARRAY);
  const msgpack::object& constants =
      root->via.array.ptr[5];  // [name, producer, values, inputs, outputs, constants, ...]
  std::vector<std::pair<std::uint64_t, std::string>> out;
  for (std::uint32_t i = 0; i < constants.via.array.size; ++i) {
    // ConstantDef: [value, tensor, data, inline_data]; data: [dtype, shape, {"id", "type", "fields": bin}]
    const msgpack::object& tensor = constants.via.array.ptr[i].via.array.ptr[2];
    REQUIRE(tensor.type == msgpack::type::ARRAY);
    const msgpack::object& storage = tensor.via.array.ptr[2];
    std::string bin;
    for (std::uint32_t k = 0; k < storage.via.map.size; ++k)
      if (storage.via.map.ptr[k].key.as<std::string>() == "fields")
        bin.assign(storage.via.map.ptr[k].val.via.bin.ptr, storage.via.map.ptr[k].val.via.bin.size);
    out.emplace_back(tensor.via.array.ptr[0].as<std::uint64_t>(), bin);
  }
  return out;
}

}  // namespace

TEST_CASE("constants of every dtype round-trip through MessagePack, bits intact") {
  const GraphDef g = every_dtype_graph();
  const auto bytes = serialize(g);
  auto back = deserialize<GraphDef>(bytes);
  REQUIRE_MESSAGE(back.ok(), back.error().to_string());
  CHECK_MESSAGE(assert_structural_equal(g, *back).ok(), assert_structural_equal(g, *back).message());
  for (std::size_t i = 0; i < g.constants.size(); ++i) {
    INFO(i);
    const Tensor& a = g.constants[i].data;
    const Tensor& b = back->constants[i].data;
    CHECK(b.type() == a.type());
    CHECK(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0);
  }
  // What an independent decoder sees: the DType number (f16 2, bf16 3, i64 4, bool 5) and the
  // element bytes, little-endian.
  const auto stored = stored_tensors(bytes);
  REQUIRE(stored.size() == 6);
  const std::uint64_t numbers[] = {2, 3, 4, 5, 0, 1};
  for (std::size_t i = 0; i < 6; ++i) {
    INFO(i);
    CHECK(stored[i].first == numbers[i]);
    const Tensor& t = g.constants[i].data;
    CHECK(stored[i].second == std::string(reinterpret_cast<const char*>(t.raw_data()), t.nbytes()));
  }
  CHECK(stored[0].second.substr(0, 4) == std::string("\x66\x2e\x00\x80", 4));  // f16 0.1 = 0x2e66, then -0
  CHECK(stored[3].second == std::string("\x01\x00\x00\x01", 4));
  // A second generation writes the same bytes.
  CHECK(serialize(*back) == bytes);
}

TEST_CASE("16-bit float tensors compare by bits, as f32 tensors do") {
  // f32 today: -0.0 differs from 0.0, the same NaN bits are equal, other NaN bits differ.
  auto f32_equal = [](float a, float b) {
    return structural_equal(Tensor::from_vector<float>({1.0F, a}, {2}), Tensor::from_vector<float>({1.0F, b}, {2}));
  };
  auto f16_equal = [](std::uint16_t a, std::uint16_t b) {
    return structural_equal(Tensor::from_vector<f16>({f16(1.0F), f16::from_bits(a)}, {2}),
                            Tensor::from_vector<f16>({f16(1.0F), f16::from_bits(b)}, {2}));
  };
  auto bf16_equal = [](std::uint16_t a, std::uint16_t b) {
    return structural_equal(Tensor::from_vector<bf16>({bf16(1.0F), bf16::from_bits(a)}, {2}),
                            Tensor::from_vector<bf16>({bf16(1.0F), bf16::from_bits(b)}, {2}));
  };
  const float nan_a = std::bit_cast<float>(0x7fc00000u);
  const float nan_b = std::bit_cast<float>(0x7fc00001u);
  CHECK(!f32_equal(0.0F, -0.0F));
  CHECK(f32_equal(nan_a, nan_a));
  CHECK(!f32_equal(nan_a, nan_b));
  CHECK(!f16_equal(0x0000, 0x8000));
  CHECK(f16_equal(0x7e00, 0x7e00));
  CHECK(!f16_equal(0x7e00, 0x7e01));
  CHECK(!bf16_equal(0x0000, 0x8000));
  CHECK(bf16_equal(0x7fc0, 0x7fc0));
  CHECK(!bf16_equal(0x7fc0, 0x7fc1));
  CHECK(f16_equal(0x3555, 0x3555));
  // The same bits in another dtype are another tensor; the difference is named.
  const Tensor h = Tensor::from_vector<f16>({f16(1.0F)}, {1});
  const Tensor b = Tensor::from_vector<bf16>({bf16::from_bits(h.data<f16>()[0].bits)}, {1});
  CHECK(!structural_equal(h, b));
  CHECK(assert_structural_equal(h, b).message() == "not structurally equal: <root>: f16 [1] != bf16 [1]");
  const Tensor l = Tensor::from_vector<std::int64_t>({1, 2}, {2});
  Tensor l2 = l.clone();
  l2.mutable_data<std::int64_t>()[1] = 2 + (std::int64_t{1} << 40);
  CHECK(assert_structural_equal(l, l2).message() == "not structurally equal: <root>: tensor data differs at element 1");
  CHECK(!structural_equal(bool_tensor({1, 0}), bool_tensor({1, 1})));
  CHECK(structural_equal(bool_tensor({1, 0}), bool_tensor({1, 0})));
}

TEST_CASE("the debug printer names the new dtypes") {
  CHECK(to_debug_string(TensorType{DType::bf16, Shape{2, 3}}) == "{dtype: bf16, shape: {dims: [2, 3]}}");
  CHECK(to_debug_string(Tensor::zeros(DType::boolean, {4})) == "Tensor(bool [4])");
}
