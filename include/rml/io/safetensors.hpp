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
// its element size: the header is padded to 8 bytes and tensors are laid out by element size,
// largest first (I64, then F32/I32, then F16/BF16, then BOOL), otherwise in the order given.
//
// Element bytes: F32 IEEE binary32, F16 IEEE binary16, BF16 the top 16 bits of a binary32, I32 and
// I64 two's complement, all little-endian; BOOL one byte, 0 or 1 (get() refuses any other byte).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rml/core/dtype.hpp"
#include "rml/core/linkage.hpp"
#include "rml/core/shape.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"

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

inline std::string_view dtype_to_safetensors(DType dtype) noexcept {
  switch (dtype) {
    case DType::i32:
      return "I32";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::i64:
      return "I64";
    case DType::boolean:
      return "BOOL";
    case DType::f32:
    case DType::count_:
      break;
  }
  return "F32";
}

inline std::optional<DType> dtype_from_safetensors(std::string_view dtype) noexcept {
  for (std::size_t i = 0; i < dtype_count; ++i)
    if (dtype_to_safetensors(static_cast<DType>(i)) == dtype) return static_cast<DType>(i);
  return std::nullopt;
}

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
  static Result<SafetensorsReader> open(const std::filesystem::path& path, bool map = true);

  /// Validates a safetensors image held in memory (used by tests and fuzzers). The bytes are
  /// copied into storage the returned tensors share.
  static Result<SafetensorsReader> from_bytes(std::string_view bytes, std::string name = "<memory>");

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
  /// not read (`F64`, `U8`, ...), naming it, or when a BOOL byte is neither 0 nor 1.
  [[nodiscard]] Result<Tensor> get(std::string_view name) const;

 private:
  struct HeaderFields;  // reads the header's entries through simdjson (the definitions' side)

  SafetensorsReader() = default;

  Status fail(const std::string& what) const { return data_loss(path_ + ": " + what); }

  Status validate();

  std::string path_;
  std::shared_ptr<const Storage> file_;
  std::size_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::unordered_map<std::string, std::size_t> index_;
  std::map<std::string, std::string, std::less<>> metadata_;
};

/// The bytes of a safetensors file holding `tensors` with no gaps, by element size (largest
/// first, so each is aligned) and otherwise in order; the header is padded with spaces to a
/// multiple of 8. INVALID_ARGUMENT for a duplicate or empty name or a
/// tensor without data.
RML_SPLIT_API Result<std::string> encode_safetensors(
    const std::vector<std::pair<std::string, Tensor>>& tensors,
    const std::map<std::string, std::string, std::less<>>& metadata = {});

/// Writes `tensors` to `path` as safetensors (the layout of encode_safetensors), streaming the
/// data, and replaces the file only once the new one is complete and on disk (see
/// detail::write_file_atomically).
RML_SPLIT_API Status write_safetensors(const std::filesystem::path& path,
                                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                                       const std::map<std::string, std::string, std::less<>>& metadata = {});

}  // namespace rml

#if RML_SPLIT_DEFINED
#include "rml/io/detail/safetensors_impl.hpp"
#endif
