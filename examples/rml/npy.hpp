// NumPy .npy files and rml tensors: read for `rml run --input name=file.npy`, written for
// `rml run --save DIR` (version 1.0, C order).
//
// Byte layout (format versions 1.0, 2.0 and 3.0):
//
//   offset 0   6 bytes  "\x93NUMPY"
//   offset 6   u8 major, u8 minor
//   offset 8   u16 (v1) or u32 (v2, v3) little-endian header length H
//   then       H bytes of a Python dict literal, padded with spaces and ended by '\n':
//                {'descr': '<f4', 'fortran_order': False, 'shape': (2, 12), }
//   then       the array's bytes, row-major unless fortran_order
//
// Read: descr `<f4` (f32), `<f2` (f16), `<i4` (i32), `<i8` (i64) and `|b1` (bool, each byte 0 or
// 1) as they are, `<f8` narrowed to f32 (rml has no f64); `|` or `=` in place of `<` on this
// little-endian build. Anything else (big-endian, other dtypes, Fortran order) is UNSUPPORTED; a
// damaged file is DATA_LOSS. (An i64 array for an i32 input is narrowed by the caller, checked.)
//
// Write: f32 `<f4`, f16 `<f2`, i32 `<i4`, i64 `<i8`, bool `|b1`; bf16, which NumPy lacks, as `<f4`
// (widening a bf16 to f32 is exact).
#pragma once

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>

#include <rml/core/status.hpp>
#include <rml/core/tensor.hpp>

namespace rml_cli {

namespace npy_detail {

// The text after `'key':` in the header dict, with leading spaces skipped; empty when absent.
inline std::string_view dict_value(std::string_view header, std::string_view key) {
  const std::string quoted = "'" + std::string(key) + "'";
  auto at = header.find(quoted);
  if (at == std::string_view::npos) return {};
  at = header.find(':', at + quoted.size());
  if (at == std::string_view::npos) return {};
  std::string_view rest = header.substr(at + 1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  return rest;
}

template <typename T>
T load_le(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // little-endian host (checked by the caller's static_assert)
  return v;
}

}  // namespace npy_detail

/// Reads an .npy file into a new tensor. NOT_FOUND when missing; DATA_LOSS when damaged
/// (bad magic, truncated header or data, unparsable header, a b1 byte other than 0 or 1);
/// UNSUPPORTED for a dtype, byte order or layout rml does not read.
inline rml::Result<rml::Tensor> read_npy(const std::filesystem::path& path) {
  using namespace npy_detail;
  static_assert(std::endian::native == std::endian::little, "rml: read_npy assumes a little-endian host");
  const std::string where = path.string() + ": ";
  std::ifstream in(path, std::ios::binary);
  if (!in) return rml::not_found(where + "cannot open");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return rml::data_loss(where + "read failed");
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    return rml::data_loss(where + "not an .npy file (no \\x93NUMPY magic)");
  const auto major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_len = 0;
  std::size_t header_start = 0;
  if (major == 1) {
    header_len = load_le<std::uint16_t>(bytes.data() + 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return rml::data_loss(where + "truncated header");
    header_len = load_le<std::uint32_t>(bytes.data() + 8);
    header_start = 12;
  } else {
    return rml::unsupported(where + ".npy format version " + std::to_string(major) + " (rml reads 1, 2 and 3)");
  }
  if (header_len > bytes.size() - header_start)
    return rml::data_loss(where + "header length " + std::to_string(header_len) + " goes beyond the end of the file");
  const std::string_view header(bytes.data() + header_start, header_len);

  // descr
  std::string_view descr = dict_value(header, "descr");
  if (descr.size() < 2 || descr.front() != '\'') return rml::data_loss(where + "header has no 'descr'");
  descr.remove_prefix(1);
  descr = descr.substr(0, descr.find('\''));
  const auto refuse = [&] {
    return rml::unsupported(where + "dtype '" + std::string(descr) +
                            "' (rml reads little-endian f4, f2, f8, i4, i8 and b1)");
  };
  // A byte order of '<' (little), '|' (not applicable) or '=' (native, little here), then the type.
  if (descr.size() != 3 || (descr[0] != '<' && descr[0] != '|' && descr[0] != '=')) return refuse();
  const std::string_view type = descr.substr(1);
  std::size_t stored_size = 0;
  rml::DType dtype = rml::DType::f32;
  if (type == "f4" || type == "f8") {
    stored_size = type == "f4" ? 4 : 8;
  } else if (type == "f2") {
    stored_size = 2;
    dtype = rml::DType::f16;
  } else if (type == "i4") {
    stored_size = 4;
    dtype = rml::DType::i32;
  } else if (type == "i8") {
    stored_size = 8;
    dtype = rml::DType::i64;
  } else if (type == "b1") {
    stored_size = 1;
    dtype = rml::DType::boolean;
  } else {
    return refuse();
  }

  // fortran_order
  const std::string_view order = dict_value(header, "fortran_order");
  if (order.substr(0, 4) == "True")
    return rml::unsupported(where + "Fortran-ordered arrays are not read; save a C-ordered copy");
  if (order.substr(0, 5) != "False") return rml::data_loss(where + "header has no 'fortran_order'");

  // shape: (d0, d1, ...) with an optional trailing comma
  std::string_view shape_text = dict_value(header, "shape");
  if (shape_text.empty() || shape_text.front() != '(') return rml::data_loss(where + "header has no 'shape'");
  const auto close = shape_text.find(')');
  if (close == std::string_view::npos) return rml::data_loss(where + "header's 'shape' is not closed");
  shape_text = shape_text.substr(1, close - 1);
  rml::Shape shape;
  while (!shape_text.empty()) {
    while (!shape_text.empty() && (shape_text.front() == ' ' || shape_text.front() == ',')) shape_text.remove_prefix(1);
    if (shape_text.empty()) break;
    std::int64_t dim = 0;
    std::size_t digits = 0;
    while (digits < shape_text.size() && shape_text[digits] >= '0' && shape_text[digits] <= '9') {
      if (dim > (std::numeric_limits<std::int64_t>::max() - 9) / 10)
        return rml::data_loss(where + "a dimension is too large");
      dim = dim * 10 + (shape_text[digits] - '0');
      ++digits;
    }
    if (digits == 0) return rml::data_loss(where + "header's 'shape' is not a tuple of integers");
    shape.push_back(dim);
    shape_text.remove_prefix(digits);
  }
  const auto numel = shape.checked_numel();
  if (!numel || *numel > static_cast<std::int64_t>(std::numeric_limits<std::size_t>::max() / 16))
    return rml::data_loss(where + "shape " + shape.to_string() + " is too large");

  const std::size_t data_start = header_start + header_len;
  const auto count = static_cast<std::size_t>(*numel);
  if (bytes.size() - data_start < count * stored_size)
    return rml::data_loss(where + "truncated: " + shape.to_string() + " of " + std::string(type) + " needs " +
                          std::to_string(count * stored_size) + " bytes of data, the file has " +
                          std::to_string(bytes.size() - data_start));
  const char* data = bytes.data() + data_start;
  rml::Tensor tensor = rml::Tensor::zeros(dtype, shape);
  if (type == "f8") {
    float* out = tensor.mutable_data<float>();
    for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<float>(load_le<double>(data + 8 * i));
    return tensor;
  }
  if (type == "b1")  // a byte other than 0 or 1 is not a bool
    for (std::size_t i = 0; i < count; ++i)
      if (static_cast<unsigned char>(data[i]) > 1)
        return rml::data_loss(where + "element " + std::to_string(i) + " of a bool array is byte " +
                              std::to_string(static_cast<unsigned char>(data[i])) + ", not 0 or 1");
  if (count) std::memcpy(tensor.mutable_raw_data(), data, count * stored_size);
  return tensor;
}

/// Writes `tensor` as an .npy file (version 1.0; the header padded so that the data starts at a
/// multiple of 64 bytes, as NumPy writes it); a bf16 tensor is written widened to `<f4`.
/// INVALID_ARGUMENT when the file cannot be written.
inline rml::Status write_npy(const std::filesystem::path& path, const rml::Tensor& given) {
  rml::Tensor tensor = given;
  if (given.dtype() == rml::DType::bf16) {
    tensor = rml::Tensor::zeros(rml::DType::f32, given.shape());
    float* out = tensor.mutable_data<float>();
    const rml::bf16* in = given.data<rml::bf16>();
    for (std::int64_t i = 0; i < given.numel(); ++i) out[i] = static_cast<float>(in[i]);
  }
  std::string header = "{'descr': '";
  switch (tensor.dtype()) {
    case rml::DType::i32:
      header += "<i4";
      break;
    case rml::DType::f16:
      header += "<f2";
      break;
    case rml::DType::i64:
      header += "<i8";
      break;
    case rml::DType::boolean:
      header += "|b1";
      break;
    default:
      header += "<f4";
  }
  header += "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < tensor.rank(); ++i) header += (i ? ", " : "") + std::to_string(tensor.shape()[i]);
  header += tensor.rank() == 1 ? ",), }" : "), }";  // a Python tuple: (4,), (2, 12), ()
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY\x01";
  bytes += '\0';
  bytes += static_cast<char>(header.size() & 0xFF);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (tensor.nbytes())
    out.write(reinterpret_cast<const char*>(tensor.raw_data()), static_cast<std::streamsize>(tensor.nbytes()));
  out.close();
  if (!out) return rml::invalid_argument(path.string() + ": cannot write");
  return {};
}

}  // namespace rml_cli
