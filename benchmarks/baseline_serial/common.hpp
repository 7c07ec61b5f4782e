// BASELINE FOR MEASUREMENT ONLY: rml's hand-written MessagePack format helpers as it was before the
// serial layer moved onto msgpack-cxx (issue 18), kept in the benchmark directory so bench_serial can
// compare both layers in one run. Nothing in include/ or the tests uses it; do not extend it.
// Changes from the original: the namespace (rml::baseline_serial) and, in common.hpp, the public
// constants, which are taken from today's rml/serial/detail/common.hpp.
// What the MessagePack writer, reader and type registry share: the format's constants, type names,
// what counts as a default value, and the registry's tables (filled by rml/serial/registry.hpp).
#pragma once

#include <array>
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

#include "rml/serial/detail/common.hpp"

namespace rml::baseline_serial {
using namespace rml::detail;

class SerialWriter;
class SerialReader;
using ::rml::detail::pretty_type_name;
using ::rml::detail::unqualified_type_name;

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

/// Field I of T's version-1 wire key as MessagePack bytes (str header + name), built at compile time
/// so the reader of keyed structs compares a constant number of bytes.
template <typename T, std::size_t I>
struct EncodedKey {
  static constexpr std::string_view name = std::get<I>(T::fields()).name;
  static constexpr std::size_t header = name.size() < 32 ? 1 : name.size() <= 0xff ? 2 : 3;
  static constexpr auto bytes = [] {
    static_assert(name.size() <= 0xffff, "rml: a field name longer than 65535 bytes");
    std::array<std::uint8_t, header + name.size()> a{};
    if constexpr (header == 1) {
      a[0] = static_cast<std::uint8_t>(0xa0 | name.size());
    } else if constexpr (header == 2) {
      a[0] = 0xd9;
      a[1] = static_cast<std::uint8_t>(name.size());
    } else {
      a[0] = 0xda;
      a[1] = static_cast<std::uint8_t>(name.size() >> 8);
      a[2] = static_cast<std::uint8_t>(name.size() & 0xff);
    }
    for (std::size_t i = 0; i < name.size(); ++i) a[header + i] = static_cast<std::uint8_t>(name[i]);
    return a;
  }();
};

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
/// `{"ref": ` as MessagePack bytes: a map of one entry and the key.
inline constexpr std::array<std::uint8_t, 5> ref_prefix = {0x81, 0xa3, 'r', 'e', 'f'};

}  // namespace rml::baseline_serial
