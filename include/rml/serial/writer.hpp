// The MessagePack writer: encodes any reflected value over its field descriptors, writing each
// shared object and each tensor's bytes once. The byte layout is described in rml/serial/reader.hpp.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <variant>
#include <vector>

#include "rml/core/reflect.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"
#include "rml/serial/detail/common.hpp"

namespace rml::detail {

/// Appends MessagePack to a growing buffer. One writer writes one document.
class SerialWriter {
 public:
  SerialWriter() = default;

  /// The bytes written so far; the writer is spent.
  std::vector<std::uint8_t> take() && {
    buf_.resize(size_);
    return std::move(buf_);
  }

  // ---- MessagePack primitives (shortest encoding) ----

  void write_nil() { put(0xc0); }
  void write_bool(bool v) { put(v ? 0xc3 : 0xc2); }
  void write_uint(std::uint64_t v) {
    if (v < 0x80) {
      put(static_cast<std::uint8_t>(v));
    } else if (v <= 0xff) {
      std::uint8_t* p = grow(2);
      p[0] = 0xcc;
      p[1] = static_cast<std::uint8_t>(v);
    } else if (v <= 0xffff) {
      put_be(0xcd, static_cast<std::uint16_t>(v));
    } else if (v <= 0xffffffffu) {
      put_be(0xce, static_cast<std::uint32_t>(v));
    } else {
      put_be(0xcf, v);
    }
  }
  void write_int(std::int64_t v) {
    if (v >= 0) {
      write_uint(static_cast<std::uint64_t>(v));
    } else if (v >= -32) {
      put(static_cast<std::uint8_t>(v));
    } else if (v >= -128) {
      std::uint8_t* p = grow(2);
      p[0] = 0xd0;
      p[1] = static_cast<std::uint8_t>(v);
    } else if (v >= -32768) {
      put_be(0xd1, static_cast<std::uint16_t>(v));
    } else if (v >= INT32_MIN) {
      put_be(0xd2, static_cast<std::uint32_t>(v));
    } else {
      put_be(0xd3, static_cast<std::uint64_t>(v));
    }
  }
  void write_f32(float v) { put_be(0xca, std::bit_cast<std::uint32_t>(v)); }
  void write_f64(double v) { put_be(0xcb, std::bit_cast<std::uint64_t>(v)); }
  void write_str(std::string_view s) {
    const std::size_t n = s.size();
    if (n < 32) {
      std::uint8_t* p = grow(1 + n);
      p[0] = static_cast<std::uint8_t>(0xa0 | n);
      if (n) std::memcpy(p + 1, s.data(), n);
      return;
    }
    sized_header(n, 0xd9, 0xda, 0xdb, "string");
    append(s.data(), n);
  }
  void write_bin(std::span<const std::byte> bytes) {
    sized_header(bytes.size(), 0xc4, 0xc5, 0xc6, "binary blob");
    append(bytes.data(), bytes.size());
  }
  void write_array_header(std::size_t n) {
    if (n < 16) return put(static_cast<std::uint8_t>(0x90 | n));
    sized_header(n, 0, 0xdc, 0xdd, "array");
  }
  void write_map_header(std::size_t n) {
    if (n < 16) return put(static_cast<std::uint8_t>(0x80 | n));
    sized_header(n, 0, 0xde, 0xdf, "map");
  }

  // ---- values, by category ----

  /// Writes any reflected field type. Throws Error for what cannot be written (a symbolic
  /// tensor, a polymorphic object of an unregistered type, more than 2^32 - 1 elements).
  template <typename T>
  void write(const T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      write_bool(v);
    } else if constexpr (std::is_enum_v<T>) {
      write(static_cast<std::underlying_type_t<T>>(v));
    } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      write_int(v);
    } else if constexpr (std::is_integral_v<T>) {
      write_uint(v);
    } else if constexpr (std::is_same_v<T, float>) {
      write_f32(v);
    } else if constexpr (std::is_same_v<T, double>) {
      write_f64(v);
    } else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::string_view>) {
      write_str(v);
    } else if constexpr (std::is_same_v<T, Tensor>) {
      write_tensor(v);
    } else if constexpr (Reflected<T>) {
      write_struct(v);
    } else if constexpr (is_vector<T>::value) {
      if constexpr (std::is_same_v<typename T::value_type, std::uint8_t>) {
        write_bin(std::as_bytes(std::span(v)));
      } else {
        write_array_header(v.size());
        for (const auto& e : v) write(static_cast<const typename T::value_type&>(e));
      }
    } else if constexpr (is_optional<T>::value) {
      if (v)
        write(*v);
      else
        write_nil();
    } else if constexpr (is_map<T>::value) {
      write_map_header(v.size());
      for (const auto& [key, value] : v) {
        write(key);
        write(value);
      }
    } else if constexpr (is_shared_ptr<T>::value) {
      write_shared(v);
    } else if constexpr (is_variant<T>::value) {
      write_array_header(2);
      write_uint(v.index());
      std::visit([&](const auto& x) { write(x); }, v);
    } else {
      static_assert(sizeof(T) == 0, "rml: serialize: this field type cannot be written; reflect it with fields()");
    }
  }

  /// A reflected struct: a map from field name to value, in declaration order, leaving out the
  /// fields that hold what a default-constructed T holds (the reader restores those by default).
  template <Reflected T>
  void write_struct(const T& obj) {
    write_fields(obj, std::make_index_sequence<field_count_v<T>>{});
  }

  /// True when `v` need not be written because the reader's default `d` is the same: equal
  /// scalars (bit for bit), strings and structs, and empty containers, optionals, pointers, tensors.
  template <typename M>
  static bool is_default(const M& v, const M& d) {
    if constexpr (std::is_same_v<M, float>) {
      return std::bit_cast<std::uint32_t>(v) == std::bit_cast<std::uint32_t>(d);
    } else if constexpr (std::is_same_v<M, double>) {
      return std::bit_cast<std::uint64_t>(v) == std::bit_cast<std::uint64_t>(d);
    } else if constexpr (std::is_arithmetic_v<M> || std::is_enum_v<M> || std::is_same_v<M, std::string>) {
      return v == d;
    } else if constexpr (std::is_same_v<M, Tensor>) {
      return !v.defined() && !v.is_symbolic() && !d.defined() && !d.is_symbolic();
    } else if constexpr (Reflected<M>) {
      return std::apply([&](const auto&... fd) { return (is_default(v.*(fd.member), d.*(fd.member)) && ...); },
                        M::fields());
    } else if constexpr (is_vector<M>::value || is_map<M>::value) {
      return v.empty() && d.empty();
    } else if constexpr (is_optional<M>::value || is_shared_ptr<M>::value) {
      return !v && !d;
    } else {
      return false;  // variants are always written
    }
  }

  /// Reserves room for `n` more bytes (a hint; writing grows the buffer anyway).
  void reserve(std::size_t n) {
    if (buf_.size() - size_ < n) buf_.resize(size_ + n);
  }

 private:
  template <Reflected T, std::size_t... I>
  void write_fields(const T& obj, std::index_sequence<I...>) {
    static constexpr auto fields = T::fields();
    if constexpr (sizeof...(I) == 0) {
      write_map_header(0);
    } else if constexpr (std::is_default_constructible_v<T>) {
      static const T defaults{};
      const bool present[] = {
          !is_default(obj.*(std::get<I>(fields).member), defaults.*(std::get<I>(fields).member))...};
      std::size_t n = 0;
      for (bool p : present) n += p;
      write_map_header(n);
      ((present[I] ? (write_key<T, I>(), write(obj.*(std::get<I>(fields).member))) : void()), ...);
    } else {
      write_map_header(sizeof...(I));
      ((write_key<T, I>(), write(obj.*(std::get<I>(fields).member))), ...);
    }
  }

  template <typename T, std::size_t I>
  void write_key() {
    constexpr const auto& key = EncodedKey<T, I>::bytes;
    std::memcpy(grow(key.size()), key.data(), key.size());
  }

  // A shared object is known by its address and its most-derived type (a struct and its first
  // member share an address).
  using ObjectKey = std::pair<const void*, std::type_index>;
  // Tensor bytes are known by storage, offset and size: tied weights are written once.
  using BlobKey = std::tuple<const Storage*, std::size_t, std::size_t>;

  template <typename T>
  void write_shared(const std::shared_ptr<T>& p) {
    using U = std::remove_cv_t<T>;
    if (!p) return write_nil();
    const void* addr = p.get();
    const std::type_info* type = &typeid(U);
    if constexpr (std::is_polymorphic_v<U>) {
      addr = dynamic_cast<const void*>(p.get());
      type = &typeid(*p);
    }
    if (write_ref(objects_, ObjectKey{addr, std::type_index(*type)})) return;
    if (*type == typeid(U)) {
      if constexpr (Reflected<U>) {
        write_str(serial_type_name<U>());
        write_str(key_fields);
        return write_struct(*p);
      }
    }
    const auto& registry = write_registry();
    const auto it = registry.find(std::type_index(*type));
    if (it == registry.end())
      throw Error(Code::failed_precondition, std::string("serialize: a shared_ptr<") +
                                                 std::string(unqualified_type_name<U>()) + "> holds a " + type->name() +
                                                 ", which is not registered; add RML_REGISTER_TYPE for it");
    write_str(it->second.name);
    write_str(key_fields);
    it->second.write_fields(*this, addr);
  }

  // Writes `{"ref": n}` and returns true when `key` was written before; otherwise gives it the
  // next id, writes `{"id": n, "type": ` and returns false (the caller writes the rest).
  template <typename Key>
  bool write_ref(std::map<Key, std::uint32_t>& seen, const Key& key) {
    const auto [it, fresh] = seen.try_emplace(key, next_id_);
    if (!fresh) {
      write_map_header(1);
      write_str(key_ref);
      write_uint(it->second);
      return true;
    }
    ++next_id_;
    write_map_header(3);
    write_str(key_id);
    write_uint(it->second);
    write_str(key_type);
    return false;
  }

  // A tensor: nil when it has no data, else `{"dtype": d, "shape": [...], "data": <shared bytes>}`.
  void write_tensor(const Tensor& t) {
    if (t.is_symbolic())
      throw Error(Code::failed_precondition, "serialize: a symbolic tensor (being traced) has no data to write");
    if (!t.defined()) return write_nil();
    write_map_header(3);
    write_str("dtype");
    write(t.dtype());
    write_str("shape");
    write(t.shape().dims());
    write_str("data");
    if (write_ref(blobs_, BlobKey{t.storage().get(), t.storage_offset(), t.nbytes()})) return;
    write_str(storage_type_name);
    write_str(key_fields);
    write_bin(t.bytes());
  }

  void sized_header(std::size_t n, std::uint8_t op8, std::uint8_t op16, std::uint8_t op32, const char* what) {
    if (op8 != 0 && n <= 0xff) {
      std::uint8_t* p = grow(2);
      p[0] = op8;
      p[1] = static_cast<std::uint8_t>(n);
    } else if (n <= 0xffff) {
      put_be(op16, static_cast<std::uint16_t>(n));
    } else if (n <= 0xffffffffu) {
      put_be(op32, static_cast<std::uint32_t>(n));
    } else {
      throw Error(Code::unsupported, std::string("serialize: a ") + what + " of " + std::to_string(n) +
                                         " elements is beyond MessagePack's 2^32 - 1");
    }
  }

  // Room for n bytes at the end; returns where they go.
  [[gnu::always_inline]] std::uint8_t* grow(std::size_t n) {
    if (buf_.size() - size_ < n) [[unlikely]]
      grow_slow(n);
    std::uint8_t* p = buf_.data() + size_;
    size_ += n;
    return p;
  }
  [[gnu::noinline]] void grow_slow(std::size_t n) {
    buf_.resize(std::max({buf_.size() * 2, size_ + n, std::size_t{256}}));
  }
  void put(std::uint8_t b) { *grow(1) = b; }
  void append(const void* data, std::size_t n) {
    if (n) std::memcpy(grow(n), data, n);
  }
  template <typename U>
  void put_be(std::uint8_t op, U v) {
    std::uint8_t* p = grow(1 + sizeof(U));
    p[0] = op;
    for (std::size_t i = 0; i < sizeof(U); ++i) p[1 + i] = static_cast<std::uint8_t>(v >> (8 * (sizeof(U) - 1 - i)));
  }

  std::vector<std::uint8_t> buf_;
  std::size_t size_ = 0;
  std::uint32_t next_id_ = 0;
  std::map<ObjectKey, std::uint32_t> objects_;
  std::map<BlobKey, std::uint32_t> blobs_;
};

}  // namespace rml::detail
