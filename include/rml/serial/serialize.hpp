// MessagePack serialization of any reflected value, and of Graph (one self-contained file with
// its weights): serialize, deserialize, serialize_to_file, deserialize_from_file.
//
//   std::vector<std::uint8_t> bytes = rml::serialize(graph);
//   rml::Graph copy = rml::deserialize<rml::Graph>(bytes).value();
//
// The byte layout is at the top of rml/serial/reader.hpp and in docs/serialization.md.
#pragma once

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "rml/core/status.hpp"
#include "rml/io/detail/whole_file.hpp"
#include "rml/ir/graph.hpp"
#include "rml/serial/detail/common.hpp"
#include "rml/serial/reader.hpp"
#include "rml/serial/registry.hpp"
#include "rml/serial/writer.hpp"

namespace rml {

namespace detail {

// A Graph is written as its GraphDef.
template <typename T>
using serial_root_t = std::conditional_t<std::is_same_v<T, Graph>, GraphDef, T>;

template <typename T>
const serial_root_t<T>& serial_root(const T& value) {
  if constexpr (std::is_same_v<T, Graph>)
    return value.def();
  else
    return value;
}

// A guess at the document's size, so the writer rarely moves its buffer: graphs by counting their
// parts (generously: capacity the writer does not use costs no zero-filling) and weights, anything
// else starts small.
template <typename T>
std::size_t serial_size_hint(const T& value) {
  if constexpr (std::is_same_v<T, GraphDef>) {
    std::size_t bytes = 256 + 96 * value.nodes.size() + 24 * value.values.size() + 48 * value.constants.size();
    // Tied weights are written once: a small direct-mapped table of recent (storage, offset) pairs
    // catches the common sharing (a collision only makes the guess larger).
    std::array<std::pair<const Storage*, std::size_t>, 64> seen{};
    for (const auto& c : value.constants) {
      if (!c.data.defined()) continue;
      const std::pair<const Storage*, std::size_t> key{c.data.storage().get(), c.data.storage_offset()};
      auto& slot = seen[(reinterpret_cast<std::uintptr_t>(key.first) / 64 + key.second) % seen.size()];
      if (slot != key) bytes += c.data.nbytes();
      slot = key;
    }
    return bytes;
  } else {
    return 256;
  }
}

// The envelope, then the root.
template <typename T>
std::vector<std::uint8_t> write_document(const T& value, SerialWriter&& writer) {
  using Root = serial_root_t<T>;
  writer.write_map_header(4);
  writer.write_str(key_format);
  writer.write_str(serial_format_name);
  writer.write_str(key_version);
  writer.write_array_header(2);
  writer.write_uint(serial_version_major);
  writer.write_uint(serial_version_minor);
  writer.write_str(key_type);
  writer.write_str(serial_type_name<Root>());
  writer.write_str(key_root);
  writer.write_root(serial_root(value));
  return std::move(writer).take();
}

}  // namespace detail

/// The rml-msgpack document holding `value` (a reflected type, a Graph, or any field type).
/// Shared objects and tensor bytes shared by several tensors are written once.
/// Throws Error (FAILED_PRECONDITION) for a symbolic tensor or for a polymorphic object whose type is not
/// registered, and (UNSUPPORTED) for a string, list or blob longer than MessagePack's 2^32 - 1.
template <typename T>
std::vector<std::uint8_t> serialize(const T& value) {
  return detail::write_document(value, detail::SerialWriter(detail::serial_size_hint(detail::serial_root(value))));
}

/// serialize() into `out`, replacing what it held but reusing its memory: for a program that
/// writes document after document (a server sending graphs), the buffer's pages stay mapped and
/// nothing is zero-filled. Throws as serialize() does; `out` is then left empty.
template <typename T>
void serialize_into(const T& value, std::vector<std::uint8_t>& out) {
  const std::size_t hint = detail::serial_size_hint(detail::serial_root(value));
  out = detail::write_document(value, detail::SerialWriter(std::move(out), hint));
}

/// The T held by an rml-msgpack document (T = Graph reads a GraphDef and wraps it).
/// Errors name the path inside the document and the byte offset:
/// INVALID_ARGUMENT when the bytes are not an rml-msgpack document, hold another type, or name
/// a polymorphic type that is not registered; UNSUPPORTED for a newer major version; DATA_LOSS for
/// truncated or corrupt data (wrong types, absurd lengths, dangling refs, nesting deeper than 256,
/// a tensor whose bytes are not dtype x shape).
template <typename T>
Result<T> deserialize(std::span<const std::uint8_t> bytes) {
  using Root = detail::serial_root_t<T>;
  static_assert(std::is_default_constructible_v<Root>, "rml: deserialize<T> needs a default-constructible T");
  detail::SerialReader reader(bytes);
  Root root{};
  if (!reader.read_document(root, detail::serial_type_name<Root>())) return reader.status();
  if constexpr (std::is_same_v<T, Graph>)
    return Graph::from_def(std::move(root));  // the gate (rml/ir/validate.hpp): INVALID_ARGUMENT naming the place
  else
    return root;
}

namespace detail {

// DATA_LOSS when a graph's weights are mapped from a file that has shrunk since (reading them
// would raise SIGBUS). Values other than graphs are not searched.
template <typename T>
Status verify_weights(const T& value) {
  if constexpr (std::is_same_v<T, Graph> || std::is_same_v<T, GraphDef>) {
    const Storage* last = nullptr;
    for (const ConstantDef& c : serial_root(value).constants) {
      if (!c.data.defined() || c.data.storage().get() == last) continue;
      last = c.data.storage().get();
      RML_RETURN_IF_ERROR(last->verify());
    }
  }
  return {};
}

}  // namespace detail

/// Writes serialize(value) to `path`, replacing an existing file only once the new one is
/// complete and on disk: through an exclusively created temporary beside it (never a symlink), an
/// fsync and a rename, as save_graph does. A failure leaves the previous file as it was.
/// INVALID_ARGUMENT for a path naming no file (`""`, `"dir/"`) or one that cannot be written;
/// DATA_LOSS when writing fails or a graph's mapped weights have shrunk; what serialize would
/// throw, as a status. Messages start with the path.
template <typename T>
Status serialize_to_file(const T& value, const std::filesystem::path& path) {
  RML_RETURN_IF_ERROR(detail::check_output_file(path, "serialize_to_file"));
  std::vector<std::uint8_t> bytes;
  try {
    RML_RETURN_IF_ERROR(detail::verify_weights(value));
    bytes = serialize(value);
  } catch (const Error& e) {
    return e.status().with_prefix(path.string() + ": ");
  }
  return detail::replace_file(path, bytes);
}

/// Reads the T that serialize_to_file wrote. NOT_FOUND when the file does not exist;
/// INVALID_ARGUMENT when it is not a regular file (a FIFO or device is refused without reading);
/// DATA_LOSS when it cannot be read; else what deserialize returns. Every message starts with the
/// path.
template <typename T>
Result<T> deserialize_from_file(const std::filesystem::path& path) {
  auto text = detail::read_whole_file(path);
  if (!text.ok()) return text.error();
  const std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(text->data()), text->size());
  Result<T> result = deserialize<T>(bytes);
  if (!result.ok()) return result.error().with_prefix(path.string() + ": ");
  return result;
}

}  // namespace rml
