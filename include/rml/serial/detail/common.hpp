// What the MessagePack writer, reader and type registry share: the format's constants, type names,
// what counts as a default value, and the registry's tables (filled by rml/serial/registry.hpp).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <typeindex>
#include <typeinfo>

#include "rml/core/reflect.hpp"
#include "rml/core/tensor.hpp"

namespace rml {

/// The envelope's `format` string.
inline constexpr std::string_view serial_format_name = "rml-msgpack";
/// The envelope's version, as the writer writes it. A reader refuses a newer major version; minor
/// versions only add. Version 2 writes structs as positional arrays, version 1 wrote keyed maps.
inline constexpr std::uint32_t serial_version_major = 2;
inline constexpr std::uint32_t serial_version_minor = 0;
/// The oldest major version the reader still reads (its keyed structs).
inline constexpr std::uint32_t serial_oldest_version_major = 1;
/// Containers, structs, variants, tensors and shared objects nested deeper than this are refused on
/// read, and the writer refuses to write them (naming the path).
inline constexpr int serial_max_depth = 256;
/// The reader's memory budget: decoding a document of n bytes may build objects that take at most
/// serial_memory_per_byte * n + serial_memory_base bytes (counted as sizeof of each element, list,
/// map entry, string and shared object it creates, plus a heap block's overhead for each allocation).
/// A document past it is refused (DATA_LOSS), so an input's worth of empty structs cannot expand into
/// gigabytes; see docs/serialization.md for the bound on peak memory.
inline constexpr std::size_t serial_memory_per_byte = 32;
inline constexpr std::size_t serial_memory_base = std::size_t{16} << 20;

namespace detail {

class SerialWriter;
class SerialReader;

/// The compiler's spelling of T (`rml::GraphDef`).
template <typename T>
constexpr std::string_view pretty_type_name() {
#if defined(__clang__) || defined(__GNUC__)
  std::string_view p = __PRETTY_FUNCTION__;
  const std::size_t start = p.find("T = ") + 4;
  const std::size_t end = p.find_first_of(";]", start);
  return p.substr(start, end - start);
#else
  return typeid(T).name();
#endif
}

/// T's name without namespaces (`GraphDef`); a template keeps its full spelling.
template <typename T>
constexpr std::string_view unqualified_type_name() {
  std::string_view name = pretty_type_name<T>();
  if (name.find('<') != std::string_view::npos) return name;
  const std::size_t colon = name.rfind("::");
  return colon == std::string_view::npos ? name : name.substr(colon + 2);
}

/// How the writer writes a registered type: its wire name and a writer of its fields.
struct WriteEntry {
  std::string name;
  void (*write_fields)(SerialWriter&, const void* most_derived);
};

/// Registered types by C++ type (filled once, during static initialisation).
inline std::map<std::type_index, WriteEntry>& write_registry() {
  static std::map<std::type_index, WriteEntry> registry;
  return registry;
}

/// How the reader makes a registered type when a `shared_ptr<Base>` field names it.
template <typename Base>
struct ReadEntry {
  const std::type_info* type;           // the most-derived type
  std::shared_ptr<void> (*create)();    // a default-constructed object, most-derived pointer
  Base* (*upcast)(void* most_derived);  // the Base subobject
  bool (*read_fields)(SerialReader&, void* most_derived);
  std::size_t size;  // sizeof the most-derived type, for the reader's memory budget
};

/// Registered types that a `shared_ptr<Base>` may hold, by wire name.
template <typename Base>
std::map<std::string, ReadEntry<Base>, std::less<>>& read_registry() {
  static std::map<std::string, ReadEntry<Base>, std::less<>> registry;
  return registry;
}

/// The wire name of T: its registered name, or its unqualified C++ name.
template <typename T>
std::string_view serial_type_name() {
  const auto& registry = write_registry();
  if (auto it = registry.find(typeid(T)); it != registry.end()) return it->second.name;
  return unqualified_type_name<T>();
}

/// True when `v` holds what `d`, a default, holds, so that a writer may leave it out: equal scalars
/// (bit for bit), strings and structs, and empty containers, optionals, pointers and tensors.
/// Variants are never left out.
template <typename M>
bool holds_default(const M& v, const M& d) {
  if constexpr (std::is_same_v<M, float>) {
    return std::bit_cast<std::uint32_t>(v) == std::bit_cast<std::uint32_t>(d);
  } else if constexpr (std::is_same_v<M, double>) {
    return std::bit_cast<std::uint64_t>(v) == std::bit_cast<std::uint64_t>(d);
  } else if constexpr (std::is_arithmetic_v<M> || std::is_enum_v<M> || std::is_same_v<M, std::string>) {
    return v == d;
  } else if constexpr (std::is_same_v<M, Tensor>) {
    return !v.defined() && !v.is_symbolic() && !d.defined() && !d.is_symbolic();
  } else if constexpr (Reflected<M>) {
    return std::apply([&](const auto&... fd) { return (holds_default(v.*(fd.member), d.*(fd.member)) && ...); },
                      M::fields());
  } else if constexpr (is_vector<M>::value || is_map<M>::value) {
    return v.size() == 0 && d.size() == 0;
  } else if constexpr (is_optional<M>::value || is_shared_ptr<M>::value) {
    return !v && !d;
  } else {
    return false;
  }
}

// Wire names of the envelope and of shared objects.
inline constexpr std::string_view key_format = "format";
inline constexpr std::string_view key_version = "version";
inline constexpr std::string_view key_type = "type";
inline constexpr std::string_view key_root = "root";
inline constexpr std::string_view key_id = "id";
inline constexpr std::string_view key_ref = "ref";
inline constexpr std::string_view key_fields = "fields";
inline constexpr std::string_view storage_type_name = "Storage";

}  // namespace detail
}  // namespace rml
