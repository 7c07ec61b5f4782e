// The definitions behind rml/io/safetensors.hpp: the header parser (over simdjson) and the
// writer. Included by that header wherever RML_SPLIT_DEFINED is 1 (see rml/core/linkage.hpp).
#pragma once

#include <algorithm>
#include <cstring>

#include <simdjson.h>

#include "rml/io/detail/file.hpp"
#include "rml/io/detail/json_out.hpp"
#include "rml/io/safetensors.hpp"

namespace rml {

namespace detail {

inline std::string simdjson_error_text(simdjson::error_code e) { return simdjson::error_message(e); }

}  // namespace detail

RML_SPLIT_API Result<SafetensorsReader> SafetensorsReader::open(const std::filesystem::path& path, bool map) {
  auto file = detail::MappedFile::open(path, map);
  if (!file.ok()) return file.error();
  SafetensorsReader reader;
  reader.path_ = path.string();
  reader.file_ = std::move(*file);
  RML_RETURN_IF_ERROR(reader.validate());
  return reader;
}

RML_SPLIT_API Result<SafetensorsReader> SafetensorsReader::from_bytes(std::string_view bytes, std::string name) {
  auto buffer = BufferStorage::allocate(bytes.size());
  if (!bytes.empty()) std::memcpy(buffer->data(), bytes.data(), bytes.size());
  SafetensorsReader reader;
  reader.path_ = std::move(name);
  reader.file_ = std::move(buffer);
  RML_RETURN_IF_ERROR(reader.validate());
  return reader;
}

RML_SPLIT_API Result<Tensor> SafetensorsReader::get(std::string_view name) const {
  const SafetensorsEntry* e = find(name);
  if (!e) return not_found(path_ + ": no tensor named '" + std::string(name) + "'");
  const auto dtype = detail::dtype_from_safetensors(e->dtype);
  if (!dtype)
    return invalid_argument(path_ + ": tensor '" + e->name + "' is stored as " + e->dtype +
                            "; rml reads F32, F16, BF16, I32, I64 and BOOL");
  const std::size_t offset = data_start_ + static_cast<std::size_t>(e->begin);
  if (*dtype == DType::boolean) {  // a bool byte other than 0 or 1 is not a bool
    const auto* bytes = reinterpret_cast<const unsigned char*>(file_->data() + offset);
    for (std::uint64_t i = 0; i < e->end - e->begin; ++i)
      if (bytes[i] > 1)
        return invalid_argument(path_ + ": tensor '" + e->name + "' is BOOL but its byte " + std::to_string(i) +
                                " is " + std::to_string(bytes[i]) + ", not 0 or 1");
  }
  TensorType type{*dtype, e->shape};
  const auto address = reinterpret_cast<std::uintptr_t>(file_->data() + offset);
  if (address % element_size(*dtype) != 0) {
    Tensor copy = Tensor::zeros(type);
    if (copy.nbytes()) std::memcpy(copy.mutable_raw_data(), file_->data() + offset, copy.nbytes());
    return copy;
  }
  return Tensor::view(std::move(type), file_, offset);
}

// The two kinds of header entry; a member class, so that it fills the reader's fields.
struct SafetensorsReader::HeaderFields {
  SafetensorsReader& r;

  Status read_metadata(simdjson::ondemand::value value) {
    simdjson::ondemand::object obj;
    if (value.get_object().get(obj)) return r.fail("header: __metadata__ must be an object of strings");
    for (auto f : obj) {
      simdjson::ondemand::field field;
      std::string_view key;
      std::string_view text;
      if (std::move(f).get(field) || field.unescaped_key().get(key)) return r.fail("header: __metadata__ is malformed");
      if (field.value().get_string().get(text))
        return r.fail("header: __metadata__." + std::string(key) + " must be a string");
      r.metadata_.insert_or_assign(std::string(key), std::string(text));
    }
    return {};
  }

  Status read_entry(simdjson::ondemand::value value, SafetensorsEntry& entry, std::uint64_t data_size) {
    const std::string where = "header: tensor '" + entry.name + "'";
    simdjson::ondemand::object obj;
    if (value.get_object().get(obj)) return r.fail(where + " must be an object");
    bool have_dtype = false;
    bool have_shape = false;
    bool have_offsets = false;
    for (auto f : obj) {
      simdjson::ondemand::field field;
      std::string_view key;
      if (std::move(f).get(field) || field.unescaped_key().get(key)) return r.fail(where + " is malformed");
      if (key == "dtype") {
        std::string_view dtype;
        if (field.value().get_string().get(dtype)) return r.fail(where + ": dtype must be a string");
        entry.dtype = std::string(dtype);
        have_dtype = true;
      } else if (key == "shape") {
        simdjson::ondemand::array arr;
        if (field.value().get_array().get(arr)) return r.fail(where + ": shape must be a list of integers");
        for (auto d : arr) {
          std::int64_t dim = 0;
          if (d.get_int64().get(dim)) return r.fail(where + ": shape must be a list of integers");
          if (dim < 0) return r.fail(where + ": shape has the negative dimension " + std::to_string(dim));
          entry.shape.push_back(dim);
        }
        have_shape = true;
      } else if (key == "data_offsets") {
        simdjson::ondemand::array arr;
        if (field.value().get_array().get(arr)) return r.fail(where + ": data_offsets must be [begin, end]");
        std::uint64_t offs[2] = {0, 0};
        std::size_t count = 0;
        for (auto d : arr) {
          std::uint64_t x = 0;
          if (d.get_uint64().get(x)) return r.fail(where + ": data_offsets must be two non-negative integers");
          if (count < 2) offs[count] = x;
          ++count;
        }
        if (count != 2) return r.fail(where + ": data_offsets must be [begin, end]");
        entry.begin = offs[0];
        entry.end = offs[1];
        have_offsets = true;
      }
    }
    if (!have_dtype || !have_shape || !have_offsets)
      return r.fail(where + " lacks " + (!have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets"));
    const auto esize = detail::safetensors_dtype_size(entry.dtype);
    if (!esize) return r.fail(where + ": unknown dtype '" + entry.dtype + "'");
    const auto numel = entry.shape.checked_numel();
    if (!numel || *numel > static_cast<std::int64_t>(UINT64_MAX / 16 / *esize))
      return r.fail(where + ": shape " + entry.shape.to_string() + " is too large");
    if (entry.begin > entry.end)
      return r.fail(where + ": data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) +
                    "] end before they begin");
    if (entry.end > data_size)
      return r.fail(where + ": data_offsets end at " + std::to_string(entry.end) + ", beyond the data section (" +
                    std::to_string(data_size) + " bytes)");
    const std::uint64_t expected = static_cast<std::uint64_t>(*numel) * *esize;
    if (entry.end - entry.begin != expected)
      return r.fail(where + ": data_offsets span " + std::to_string(entry.end - entry.begin) + " bytes, but " +
                    entry.dtype + " " + entry.shape.to_string() + " needs " + std::to_string(expected));
    return {};
  }
};

RML_SPLIT_API Status SafetensorsReader::validate() {
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
  if (auto e = parser.iterate(header).get(doc); e) return fail("header is not JSON: " + detail::simdjson_error_text(e));
  if (auto e = doc.get_object().get(root); e)
    return fail("header is not a JSON object: " + detail::simdjson_error_text(e));

  for (auto field_result : root) {
    simdjson::ondemand::field field;
    std::string_view key;
    if (auto e = std::move(field_result).get(field); e) return fail("header: " + detail::simdjson_error_text(e));
    if (auto e = field.unescaped_key().get(key); e) return fail("header: " + detail::simdjson_error_text(e));
    std::string name(key);
    if (name == "__metadata__") {
      RML_RETURN_IF_ERROR(HeaderFields{*this}.read_metadata(field.value()));
      continue;
    }
    if (index_.count(name)) return fail("header: tensor '" + name + "' is listed twice");
    SafetensorsEntry entry;
    entry.name = name;
    RML_RETURN_IF_ERROR(HeaderFields{*this}.read_entry(field.value(), entry, data_size));
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
      return fail("tensors '" + reach->name + "' [" + std::to_string(reach->begin) + ", " + std::to_string(reach->end) +
                  ") and '" + cur->name + "' [" + std::to_string(cur->begin) + ", " + std::to_string(cur->end) +
                  ") overlap");
    if (!reach || cur->end > reach->end) reach = cur;
  }
  return {};
}

namespace detail {

// The order the writer lays tensors out in: by element size, largest first, otherwise as given.
// The data section starts at a multiple of 8, so every tensor then starts at a multiple of its
// element size and the reader can hand out views. A file of f32 and i32 tensors (all 4 bytes)
// keeps the caller's order, byte for byte what rml wrote before the 1-, 2- and 8-byte dtypes.
inline std::vector<const std::pair<std::string, Tensor>*> safetensors_order(
    const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::vector<const std::pair<std::string, Tensor>*> order;
  order.reserve(tensors.size());
  for (const auto& t : tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return element_size(a->second.dtype()) > element_size(b->second.dtype());
  });
  return order;
}

// The 8-byte length and the padded JSON header for `tensors` laid out in safetensors_order with no
// gaps.
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
  for (const auto* entry : safetensors_order(tensors)) {
    const auto& [name, tensor] = *entry;
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

RML_SPLIT_API Result<std::string> encode_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                                     const std::map<std::string, std::string, std::less<>>& metadata) {
  auto out = detail::safetensors_header(tensors, metadata);
  if (!out.ok()) return out;
  for (const auto* entry : detail::safetensors_order(tensors))
    out->append(reinterpret_cast<const char*>(entry->second.raw_data()), entry->second.nbytes());
  return out;
}

namespace detail {

// Writes the file encode_safetensors describes: `header` (from safetensors_header), then each
// tensor's bytes, checking first that no mapped weights it copies from have shrunk.
inline Status write_safetensors_to(FileSink& sink, const std::string& header,
                                   const std::vector<std::pair<std::string, Tensor>>& tensors) {
  for (const auto& [name, tensor] : tensors) RML_RETURN_IF_ERROR(tensor.storage()->verify());
  sink.write(header);
  for (const auto* entry : safetensors_order(tensors)) sink.write(entry->second.raw_data(), entry->second.nbytes());
  return {};
}

}  // namespace detail

RML_SPLIT_API Status write_safetensors(const std::filesystem::path& path,
                                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                                       const std::map<std::string, std::string, std::less<>>& metadata) {
  auto header = detail::safetensors_header(tensors, metadata);
  if (!header.ok()) return header.error().with_prefix(path.string() + ": ");
  return detail::write_file_atomically(
      path, [&](detail::FileSink& sink) { return detail::write_safetensors_to(sink, *header, tensors); });
}

}  // namespace rml
