// safetensors: validation of every header field, zero-copy views, misaligned copies, the writer.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include <rml/io/safetensors.hpp>

#include "support/temp_dir.hpp"

using namespace rml;
using rml::testing::TempDir;
using rml::testing::write_text;

namespace {

// A safetensors image with `header` as its JSON header (unpadded unless the caller pads it)
// followed by `data_bytes` bytes counting up from 0.
std::string image(const std::string& header, std::size_t data_bytes, std::uint64_t declared_length = UINT64_MAX) {
  std::string out;
  const std::uint64_t n = declared_length == UINT64_MAX ? header.size() : declared_length;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xFF);
  out += header;
  for (std::size_t i = 0; i < data_bytes; ++i) out += static_cast<char>(i & 0xFF);
  return out;
}

Status open_status(const std::string& bytes) { return SafetensorsReader::from_bytes(bytes).status(); }

}  // namespace

TEST_CASE("a valid file: entries, metadata, typed tensors") {
  std::vector<float> w = {1.5F, -2.0F, 3.25F, 4.0F, 5.0F, 6.0F};
  std::vector<std::int32_t> idx = {7, -8};
  auto bytes = encode_safetensors({{"w", Tensor::from_vector(w, {2, 3})}, {"idx", Tensor::from_vector(idx, {2})}},
                                  {{"producer", "test"}});
  REQUIRE(bytes.ok());
  CHECK(bytes->size() % 4 == 0);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes->data(), 8);
  CHECK(n % 8 == 0);  // header padded to 8
  auto reader = SafetensorsReader::from_bytes(*bytes);
  REQUIRE(reader.ok());
  CHECK(reader->entries().size() == 2);
  CHECK(reader->metadata().at("producer") == "test");
  auto t = reader->get("w");
  REQUIRE(t.ok());
  CHECK(t->type().to_string() == "f32 [2, 3]");
  CHECK(t->to_vector<float>() == w);
  CHECK(reader->get("idx")->to_vector<std::int32_t>() == idx);
  CHECK(reader->get("nope").status().code() == Code::not_found);
}

TEST_CASE("tensors are views into the mapping, which outlives the reader") {
  TempDir dir;
  std::vector<float> w(1000);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.5F;
  REQUIRE(write_safetensors(dir / "w.safetensors", {{"a", Tensor::from_vector(w, {10, 100})}}).ok());
  Tensor view;
  {
    auto reader = SafetensorsReader::open(dir / "w.safetensors");
    REQUIRE(reader.ok());
    view = reader->get("a").value();
    const std::byte* base = view.storage()->data();
    CHECK(view.raw_data() >= base);
    CHECK(view.raw_data() + view.nbytes() <= base + view.storage()->size());
    CHECK(!view.storage()->writable());
    CHECK(dynamic_cast<const detail::MappedFile*>(view.storage().get()) != nullptr);
  }
  CHECK(view.to_vector<float>() == w);  // the reader is gone, the mapping is not
  CHECK_THROWS_AS((void)view.mutable_data<float>(), Error);
}

TEST_CASE("a tensor misaligned for its element type is copied, and correct") {
  // Header of 10 bytes: data starts at 18, which is 2 mod 4, so an F32 at offset 0 is misaligned.
  std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  while ((8 + header.size()) % 4 != 2) header += ' ';  // so that 8 + N = 2 (mod 4)
  std::string bytes = image(header, 0);
  float vals[2] = {3.5F, -1.25F};
  bytes.append(reinterpret_cast<const char*>(vals), 8);
  TempDir dir;
  write_text(dir / "m.safetensors", bytes);
  auto reader = SafetensorsReader::open(dir / "m.safetensors");
  REQUIRE(reader.ok());
  Tensor t = reader->get("a").value();
  CHECK(reinterpret_cast<std::uintptr_t>(t.raw_data()) % 4 == 0);
  CHECK(dynamic_cast<const BufferStorage*>(t.storage().get()) != nullptr);  // a copy, not the mapping
  CHECK(t.to_vector<float>() == std::vector<float>{3.5F, -1.25F});
}

TEST_CASE("damaged files are DATA_LOSS naming the problem") {
  struct Case {
    const char* name;
    std::string bytes;
    const char* message;
  };
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const Case cases[] = {
      {"empty file", "", "truncated: 0 bytes"},
      {"truncated length", std::string("\x05\x00\x00", 3), "truncated: 3 bytes"},
      {"header beyond the file", image("{}", 0, 1000), "header length 1000 goes beyond the end of the file (10 bytes)"},
      {"header length absurd", image("{}", 0, UINT64_MAX - 1), "goes beyond the end of the file"},
      {"header not JSON", image("{\"a\":", 0), "<memory>: header"},
      {"header a list", image("[1, 2]", 0), "header is not a JSON object"},
      {"entry not an object", image(R"({"a": 5})", 0), "tensor 'a' must be an object"},
      {"unknown dtype", image(R"({"a":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}})", 8), "unknown dtype 'F99'"},
      {"negative dimension", image(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
       "negative dimension -2"},
      {"overflowing shape", image(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
       "is too large"},
      {"offsets out of range", image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
       "beyond the data section (4 bytes)"},
      {"offsets reversed", image(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
       "end before they begin"},
      {"size inconsistent", image(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "needs 12"},
      {"overlap", image("{" + ok_entry + R"(,"b":{"dtype":"I32","shape":[2],"data_offsets":[4,12]}})", 12), "overlap"},
      {"missing offsets", image(R"({"a":{"dtype":"F32","shape":[2]}})", 8), "lacks data_offsets"},
      {"offsets of three", image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})", 8),
       "must be [begin, end]"},
      {"metadata not strings", image(R"({"__metadata__":{"k":1}})", 0), "__metadata__.k must be a string"},
      {"listed twice", image("{" + ok_entry + "," + ok_entry + "}", 8), "listed twice"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Status s = open_status(c.bytes);
    CHECK(s.code() == Code::data_loss);
    CHECK_MESSAGE(s.message().find(c.message) != std::string::npos, s.message());
  }
}

TEST_CASE("stored dtypes rml does not compute with are refused by name") {
  for (const char* dtype : {"F64", "U8", "I8", "I16", "U16", "U32", "U64", "F8_E5M2", "F8_E4M3"}) {
    INFO(dtype);
    const std::size_t size = *detail::safetensors_dtype_size(dtype);
    auto bytes = image(std::string(R"({"a":{"dtype":")") + dtype + R"(","shape":[2],"data_offsets":[0,)" +
                           std::to_string(2 * size) + "]}}",
                       2 * size);
    auto reader = SafetensorsReader::from_bytes(bytes);
    REQUIRE(reader.ok());
    Status s = reader->get("a").status();
    CHECK(s.code() == Code::invalid_argument);
    CHECK(s.message().find(std::string("stored as ") + dtype) != std::string::npos);
  }
}

TEST_CASE("files that are missing or directories") {
  TempDir dir;
  CHECK(SafetensorsReader::open(dir / "none.safetensors").status().code() == Code::not_found);
  std::filesystem::create_directory(dir / "d.safetensors");
  Status s = SafetensorsReader::open(dir / "d.safetensors").status();
  CHECK(s.code() == Code::invalid_argument);
  CHECK(s.message().find("is a directory") != std::string::npos);
}

TEST_CASE("the writer refuses what it cannot write, and writes nothing then") {
  TempDir dir;
  Tensor t = Tensor::from_vector<float>({1}, {1});
  CHECK(write_safetensors(dir / "x.safetensors", {{"a", t}, {"a", t}}).code() == Code::invalid_argument);
  CHECK(write_safetensors(dir / "x.safetensors", {{"", t}}).code() == Code::invalid_argument);
  CHECK(write_safetensors(dir / "x.safetensors", {{"a", Tensor()}}).code() == Code::invalid_argument);
  CHECK(!std::filesystem::exists(dir / "x.safetensors"));
  CHECK(!std::filesystem::exists(dir / "x.safetensors.tmp"));
}
