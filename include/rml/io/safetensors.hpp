// Reading and writing safetensors files: the weights half of an rml-graph model.
//
// Byte layout (little-endian):
//
//   offset 0        u64  N, the length of the header in bytes
//   offset 8        N bytes of UTF-8 JSON, padded with spaces (rml pads to a multiple of 8):
//                     {"<name>": {"dtype": "F32", "shape": [12, 16], "data_offsets": [begin, end]},
//                      ...,
//                      "__metadata__": {"<key>": "<string>", ...}}          (optional)
//   offset 8 + N    the data section; a tensor's bytes are data[begin, end), row-major
//
// The reader checks everything before handing out a byte: N fits in the file, the header is a
// JSON object, every dtype is a safetensors dtype, every shape is non-negative without overflow,
// every `data_offsets` pair is ordered, inside the data section and exactly dtype size x element
// count long, and no two tensors overlap. Gaps between tensors are allowed; rml's writer leaves
// none (so other safetensors readers accept its files) and every tensor it writes is aligned to
// its element size, because the header is padded to 8 bytes and every element is 4 bytes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "rml/core/dtype.hpp"
#include "rml/core/shape.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"
#include "rml/io/detail/file.hpp"
#include "rml/io/detail/json_out.hpp"

namespace rml {

/// One tensor's entry in a safetensors header.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // as stored: "F32", "I32", "F16", ...
  Shape shape;
  std::uint64_t begin = 0;  // offsets within the data section
  std::uint64_t end = 0;
};

namespace detail {

// The dtypes of the safetensors format and their sizes in bytes (F8 types are one byte).
inline std::optional<std::size_t> safetensors_dtype_size(std::string_view dtype) noexcept {
  static constexpr std::pair<std::string_view, std::size_t> table[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
  for (const auto& [name, size] : table)
    if (name == dtype) return size;
  return std::nullopt;
}

inline std::optional<DType> dtype_from_safetensors(std::string_view dtype) noexcept {
  if (dtype == "F32") return DType::f32;
  if (dtype == "I32") return DType::i32;
  return std::nullopt;
}

inline std::string_view dtype_to_safetensors(DType dtype) noexcept { return dtype == DType::i32 ? "I32" : "F32"; }

inline std::string simdjson_error_text(simdjson::error_code e) { return simdjson::error_message(e); }

}  // namespace detail

/// A memory-mapped, validated safetensors file. Tensors it hands out are views that share the
/// mapping, which outlives the reader.
class SafetensorsReader {
 public:
  /// The largest header rml reads (the format's own readers use the same bound).
  static constexpr std::uint64_t max_header_size = 100u << 20;

  /// Maps (or, with `map` false, reads into memory) and validates `path`. NOT_FOUND when missing;
  /// INVALID_ARGUMENT when it is not a regular file (a directory, FIFO or device, refused before
  /// reading); DATA_LOSS when damaged (truncated, a header length beyond the file, a header that is
  /// not a JSON object, an unknown dtype, a bad shape, offsets out of range, overlapping, or not
  /// equal to dtype size x element count). Messages start with the path.
  static Result<SafetensorsReader> open(const std::filesystem::path& path, bool map = true) {
    auto file = detail::MappedFile::open(path, map);
    if (!file.ok()) return file.error();
    SafetensorsReader reader;
    reader.path_ = path.string();
    reader.file_ = std::move(*file);
    RML_RETURN_IF_ERROR(reader.validate());
    return reader;
  }

  /// Validates a safetensors image held in memory (used by tests and fuzzers). The bytes are
  /// copied into storage the returned tensors share.
  static Result<SafetensorsReader> from_bytes(std::string_view bytes, std::string name = "<memory>") {
    auto buffer = BufferStorage::allocate(bytes.size());
    if (!bytes.empty()) std::memcpy(buffer->data(), bytes.data(), bytes.size());
    SafetensorsReader reader;
    reader.path_ = std::move(name);
    reader.file_ = std::move(buffer);
    RML_RETURN_IF_ERROR(reader.validate());
    return reader;
  }

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// The size of the whole file in bytes.
  [[nodiscard]] std::size_t file_size() const noexcept { return file_->size(); }
  [[nodiscard]] const std::vector<SafetensorsEntry>& entries() const noexcept { return entries_; }
  [[nodiscard]] const std::map<std::string, std::string, std::less<>>& metadata() const noexcept { return metadata_; }
  [[nodiscard]] bool contains(std::string_view name) const { return find(name) != nullptr; }
  [[nodiscard]] const SafetensorsEntry* find(std::string_view name) const {
    auto it = index_.find(std::string(name));
    return it == index_.end() ? nullptr : &entries_[it->second];
  }

  /// The tensor `name`: a view sharing the mapping, or a copy when its bytes are misaligned for
  /// its element type. NOT_FOUND when absent; INVALID_ARGUMENT when stored in a dtype rml does
  /// not compute with (`F16`, `BF16`, `I64`, ...), naming it.
  [[nodiscard]] Result<Tensor> get(std::string_view name) const {
    const SafetensorsEntry* e = find(name);
    if (!e) return not_found(path_ + ": no tensor named '" + std::string(name) + "'");
    const auto dtype = detail::dtype_from_safetensors(e->dtype);
    if (!dtype)
      return invalid_argument(path_ + ": tensor '" + e->name + "' is stored as " + e->dtype +
                              "; rml reads F32 and I32 only");
    const std::size_t offset = data_start_ + static_cast<std::size_t>(e->begin);
    TensorType type{*dtype, e->shape};
    const auto address = reinterpret_cast<std::uintptr_t>(file_->data() + offset);
    if (address % element_size(*dtype) != 0) {
      Tensor copy = Tensor::zeros(type);
      if (copy.nbytes()) std::memcpy(copy.mutable_raw_data(), file_->data() + offset, copy.nbytes());
      return copy;
    }
    return Tensor::view(std::move(type), file_, offset);
  }

 private:
  SafetensorsReader() = default;

  Status fail(const std::string& what) const { return data_loss(path_ + ": " + what); }

  Status validate() {
    const std::size_t size = file_->size();
    const std::byte* bytes = file_->data();
    if (size < 8)
      return fail("truncated: " + std::to_string(size) +
                  " bytes, but a safetensors file starts with an 8-byte header length");
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint64_t>(bytes[i]);
    if (n > size - 8)
      return fail("header length " + std::to_string(n) + " goes beyond the end of the file (" + std::to_string(size) +
                  " bytes)");
    if (n > max_header_size) return fail("header length " + std::to_string(n) + " is over the 100 MiB limit");
    data_start_ = 8 + static_cast<std::size_t>(n);
    const std::uint64_t data_size = size - data_start_;

    simdjson::padded_string header(reinterpret_cast<const char*>(bytes + 8), static_cast<std::size_t>(n));
    simdjson::ondemand::parser parser;
    simdjson::ondemand::document doc;
    simdjson::ondemand::object root;
    if (auto e = parser.iterate(header).get(doc); e)
      return fail("header is not JSON: " + detail::simdjson_error_text(e));
    if (auto e = doc.get_object().get(root); e)
      return fail("header is not a JSON object: " + detail::simdjson_error_text(e));

    for (auto field_result : root) {
      simdjson::ondemand::field field;
      std::string_view key;
      if (auto e = std::move(field_result).get(field); e) return fail("header: " + detail::simdjson_error_text(e));
      if (auto e = field.unescaped_key().get(key); e) return fail("header: " + detail::simdjson_error_text(e));
      std::string name(key);
      if (name == "__metadata__") {
        RML_RETURN_IF_ERROR(read_metadata(field.value()));
        continue;
      }
      if (index_.count(name)) return fail("header: tensor '" + name + "' is listed twice");
      SafetensorsEntry entry;
      entry.name = name;
      RML_RETURN_IF_ERROR(read_entry(field.value(), entry, data_size));
      index_.emplace(name, entries_.size());
      entries_.push_back(std::move(entry));
    }
    if (const char* rest = nullptr; !doc.current_location().get(rest))
      return fail("header: trailing content after the JSON object");

    // No two tensors may share a byte.
    std::vector<const SafetensorsEntry*> order;
    order.reserve(entries_.size());
    for (const auto& e : entries_) order.push_back(&e);
    std::sort(order.begin(), order.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
      return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    const SafetensorsEntry* reach = nullptr;  // the entry reaching furthest so far
    for (const SafetensorsEntry* cur : order) {
      if (cur->begin == cur->end) continue;  // an empty tensor owns no byte
      if (reach && cur->begin < reach->end)
        return fail("tensors '" + reach->name + "' [" + std::to_string(reach->begin) + ", " +
                    std::to_string(reach->end) + ") and '" + cur->name + "' [" + std::to_string(cur->begin) + ", " +
                    std::to_string(cur->end) + ") overlap");
      if (!reach || cur->end > reach->end) reach = cur;
    }
    return {};
  }

  Status read_metadata(simdjson::ondemand::value value) {
    simdjson::ondemand::object obj;
    if (value.get_object().get(obj)) return fail("header: __metadata__ must be an object of strings");
    for (auto f : obj) {
      simdjson::ondemand::field field;
      std::string_view key;
      std::string_view text;
      if (std::move(f).get(field) || field.unescaped_key().get(key)) return fail("header: __metadata__ is malformed");
      if (field.value().get_string().get(text))
        return fail("header: __metadata__." + std::string(key) + " must be a string");
      metadata_.insert_or_assign(std::string(key), std::string(text));
    }
    return {};
  }

  Status read_entry(simdjson::ondemand::value value, SafetensorsEntry& entry, std::uint64_t data_size) {
    const std::string where = "header: tensor '" + entry.name + "'";
    simdjson::ondemand::object obj;
    if (value.get_object().get(obj)) return fail(where + " must be an object");
    bool have_dtype = false;
    bool have_shape = false;
    bool have_offsets = false;
    for (auto f : obj) {
      simdjson::ondemand::field field;
      std::string_view key;
      if (std::move(f).get(field) || field.unescaped_key().get(key)) return fail(where + " is malformed");
      if (key == "dtype") {
        std::string_view dtype;
        if (field.value().get_string().get(dtype)) return fail(where + ": dtype must be a string");
        entry.dtype = std::string(dtype);
        have_dtype = true;
      } else if (key == "shape") {
        simdjson::ondemand::array arr;
        if (field.value().get_array().get(arr)) return fail(where + ": shape must be a list of integers");
        for (auto d : arr) {
          std::int64_t dim = 0;
          if (d.get_int64().get(dim)) return fail(where + ": shape must be a list of integers");
          if (dim < 0) return fail(where + ": shape has the negative dimension " + std::to_string(dim));
          entry.shape.push_back(dim);
        }
        have_shape = true;
      } else if (key == "data_offsets") {
        simdjson::ondemand::array arr;
        if (field.value().get_array().get(arr)) return fail(where + ": data_offsets must be [begin, end]");
        std::uint64_t offs[2] = {0, 0};
        std::size_t count = 0;
        for (auto d : arr) {
          std::uint64_t x = 0;
          if (d.get_uint64().get(x)) return fail(where + ": data_offsets must be two non-negative integers");
          if (count < 2) offs[count] = x;
          ++count;
        }
        if (count != 2) return fail(where + ": data_offsets must be [begin, end]");
        entry.begin = offs[0];
        entry.end = offs[1];
        have_offsets = true;
      }
    }
    if (!have_dtype || !have_shape || !have_offsets)
      return fail(where + " lacks " + (!have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets"));
    const auto esize = detail::safetensors_dtype_size(entry.dtype);
    if (!esize) return fail(where + ": unknown dtype '" + entry.dtype + "'");
    const auto numel = entry.shape.checked_numel();
    if (!numel || *numel > static_cast<std::int64_t>(UINT64_MAX / 16 / *esize))
      return fail(where + ": shape " + entry.shape.to_string() + " is too large");
    if (entry.begin > entry.end)
      return fail(where + ": data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) +
                  "] end before they begin");
    if (entry.end > data_size)
      return fail(where + ": data_offsets end at " + std::to_string(entry.end) + ", beyond the data section (" +
                  std::to_string(data_size) + " bytes)");
    const std::uint64_t expected = static_cast<std::uint64_t>(*numel) * *esize;
    if (entry.end - entry.begin != expected)
      return fail(where + ": data_offsets span " + std::to_string(entry.end - entry.begin) + " bytes, but " +
                  entry.dtype + " " + entry.shape.to_string() + " needs " + std::to_string(expected));
    return {};
  }

  std::string path_;
  std::shared_ptr<const Storage> file_;
  std::size_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::unordered_map<std::string, std::size_t> index_;
  std::map<std::string, std::string, std::less<>> metadata_;
};

namespace detail {

// The 8-byte length and the padded JSON header for `tensors` laid out in order with no gaps.
inline Result<std::string> safetensors_header(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                              const std::map<std::string, std::string, std::less<>>& metadata) {
  std::string header = "{";
  bool first = true;
  std::unordered_map<std::string_view, int> seen;
  std::uint64_t offset = 0;
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first_key = true;
    for (const auto& [k, v] : metadata) {
      if (!first_key) header += ',';
      first_key = false;
      json_append_string(header, k);
      header += ':';
      json_append_string(header, v);
    }
    header += '}';
    first = false;
  }
  for (const auto& [name, tensor] : tensors) {
    if (name.empty() || name == "__metadata__")
      return invalid_argument("safetensors: invalid tensor name '" + name + "'");
    if (!seen.emplace(name, 0).second) return invalid_argument("safetensors: tensor name '" + name + "' is used twice");
    if (!tensor.defined()) return invalid_argument("safetensors: tensor '" + name + "' has no data");
    if (!first) header += ',';
    first = false;
    json_append_string(header, name);
    header += ":{\"dtype\":\"";
    header += dtype_to_safetensors(tensor.dtype());
    header += "\",\"shape\":[";
    for (std::size_t i = 0; i < tensor.rank(); ++i) {
      if (i) header += ',';
      header += std::to_string(tensor.shape()[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + tensor.nbytes()) + "]}";
    offset += tensor.nbytes();
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out;
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + header;
}

}  // namespace detail

/// The bytes of a safetensors file holding `tensors` in order, with no gaps; the header is
/// padded with spaces to a multiple of 8. INVALID_ARGUMENT for a duplicate or empty name or a
/// tensor without data.
inline Result<std::string> encode_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                              const std::map<std::string, std::string, std::less<>>& metadata = {}) {
  auto out = detail::safetensors_header(tensors, metadata);
  if (!out.ok()) return out;
  for (const auto& [name, tensor] : tensors)
    out->append(reinterpret_cast<const char*>(tensor.raw_data()), tensor.nbytes());
  return out;
}

namespace detail {

// Writes the file encode_safetensors describes: `header` (from safetensors_header), then each
// tensor's bytes, checking first that no mapped weights it copies from have shrunk.
inline Status write_safetensors_to(FileSink& sink, const std::string& header,
                                   const std::vector<std::pair<std::string, Tensor>>& tensors) {
  for (const auto& [name, tensor] : tensors) RML_RETURN_IF_ERROR(tensor.storage()->verify());
  sink.write(header);
  for (const auto& [name, tensor] : tensors) sink.write(tensor.raw_data(), tensor.nbytes());
  return {};
}

}  // namespace detail

/// Writes `tensors` to `path` as safetensors (the layout of encode_safetensors), streaming the
/// data, and replaces the file only once the new one is complete and on disk (see
/// detail::write_file_atomically).
inline Status write_safetensors(const std::filesystem::path& path,
                                const std::vector<std::pair<std::string, Tensor>>& tensors,
                                const std::map<std::string, std::string, std::less<>>& metadata = {}) {
  auto header = detail::safetensors_header(tensors, metadata);
  if (!header.ok()) return header.error().with_prefix(path.string() + ": ");
  return detail::write_file_atomically(
      path, [&](detail::FileSink& sink) { return detail::write_safetensors_to(sink, *header, tensors); });
}

}  // namespace rml
