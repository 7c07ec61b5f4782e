// BASELINE FOR MEASUREMENT ONLY (see writer.hpp): serialize and deserialize over the hand-written
// MessagePack layer rml had before issue 18, as rml/serial/serialize.hpp drove it then.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rml/ir/graph.hpp"
#include "rml/serial/serialize.hpp"  // serial_size_hint, serial_root: unchanged helpers

#include "common.hpp"
#include "reader.hpp"
#include "writer.hpp"

namespace rml::baseline_serial {

template <typename T>
std::vector<std::uint8_t> serialize(const T& value) {
  using Root = rml::detail::serial_root_t<T>;
  SerialWriter writer(rml::detail::serial_size_hint(rml::detail::serial_root(value)));
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
  writer.write(rml::detail::serial_root(value));
  return std::move(writer).take();
}

template <typename T>
Result<T> deserialize(std::span<const std::uint8_t> bytes) {
  using Root = rml::detail::serial_root_t<T>;
  SerialReader reader(bytes);
  Root root{};
  if (!reader.read_document(root, serial_type_name<Root>())) return reader.status();
  if constexpr (std::is_same_v<T, Graph>)
    return Graph(std::move(root));
  else
    return root;
}

}  // namespace rml::baseline_serial
