// BASELINE FOR MEASUREMENT ONLY: rml's hand-written MessagePack writer as it was before the
// serial layer moved onto msgpack-cxx (issue 18), kept in the benchmark directory so bench_serial can
// compare both layers in one run. Nothing in include/ or the tests uses it; do not extend it.
// Changes from the original: the namespace (rml::baseline_serial) and, in common.hpp, the public
// constants, which are taken from today's rml/serial/detail/common.hpp.
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

#include "common.hpp"
#include "rml/core/reflect.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"

namespace rml::baseline_serial {
using namespace rml::detail;  // is_vector, Reflected helpers, pretty names

// ---- encoders: each writes one MessagePack item at `p`, which has room for it, and returns its end ----

template <typename U>
[[gnu::always_inline]] inline std::uint8_t* encode_be(std::uint8_t* p, std::uint8_t op, U v) {
  static_assert(std::is_unsigned_v<U>);
  if constexpr (sizeof(U) == 2) v = __builtin_bswap16(v);
  if constexpr (sizeof(U) == 4) v = __builtin_bswap32(v);
  if constexpr (sizeof(U) == 8) v = __builtin_bswap64(v);
  p[0] = op;
  std::memcpy(p + 1, &v, sizeof(U));
  return p + 1 + sizeof(U);
}

[[gnu::always_inline]] inline std::uint8_t* encode_uint(std::uint8_t* p, std::uint64_t v) {
  if (v < 0x80) [[likely]] {
    *p = static_cast<std::uint8_t>(v);
    return p + 1;
  }
  if (v <= 0xff) {
    p[0] = 0xcc;
    p[1] = static_cast<std::uint8_t>(v);
    return p + 2;
  }
  if (v <= 0xffff) return encode_be(p, 0xcd, static_cast<std::uint16_t>(v));
  if (v <= 0xffffffffu) return encode_be(p, 0xce, static_cast<std::uint32_t>(v));
  return encode_be(p, 0xcf, v);
}

[[gnu::always_inline]] inline std::uint8_t* encode_int(std::uint8_t* p, std::int64_t v) {
  if (v >= 0) return encode_uint(p, static_cast<std::uint64_t>(v));
  if (v >= -32) {
    *p = static_cast<std::uint8_t>(v);
    return p + 1;
  }
  if (v >= -128) {
    p[0] = 0xd0;
    p[1] = static_cast<std::uint8_t>(v);
    return p + 2;
  }
  if (v >= -32768) return encode_be(p, 0xd1, static_cast<std::uint16_t>(v));
  if (v >= INT32_MIN) return encode_be(p, 0xd2, static_cast<std::uint32_t>(v));
  return encode_be(p, 0xd3, static_cast<std::uint64_t>(v));
}

/// The most bytes one encoded T takes, for the types encoded without a length (bool, enums,
/// integers, float, double); 0 for every other type.
template <typename T>
constexpr std::size_t max_scalar_bytes() {
  if constexpr (std::is_same_v<T, bool>)
    return 1;
  else if constexpr (std::is_enum_v<T>)
    return max_scalar_bytes<std::underlying_type_t<T>>();
  else if constexpr (std::is_integral_v<T> || std::is_same_v<T, float> || std::is_same_v<T, double>)
    return 1 + sizeof(T);
  else
    return 0;
}

/// Encodes a type that max_scalar_bytes covers: shortest integer form, float32, float64.
template <typename T>
[[gnu::always_inline]] inline std::uint8_t* encode_scalar(std::uint8_t* p, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    *p = v ? 0xc3 : 0xc2;
    return p + 1;
  } else if constexpr (std::is_enum_v<T>) {
    return encode_scalar(p, static_cast<std::underlying_type_t<T>>(v));
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    return encode_int(p, v);
  } else if constexpr (std::is_integral_v<T>) {
    return encode_uint(p, v);
  } else if constexpr (std::is_same_v<T, float>) {
    return encode_be(p, 0xca, std::bit_cast<std::uint32_t>(v));
  } else {
    static_assert(std::is_same_v<T, double>);
    return encode_be(p, 0xcb, std::bit_cast<std::uint64_t>(v));
  }
}

/// Copies n <= 32 bytes with a few fixed-size moves instead of a call to memcpy (names and ops are
/// short). Reads and writes only [src, src + n) and [dst, dst + n).
[[gnu::always_inline]] inline void copy_short(std::uint8_t* dst, const char* src, std::size_t n) {
  const auto move = [&]<std::size_t W>(std::size_t at) { std::memcpy(dst + at, src + at, W); };
  if (n >= 16) {
    move.template operator()<16>(0);
    move.template operator()<16>(n - 16);
  } else if (n >= 8) {
    move.template operator()<8>(0);
    move.template operator()<8>(n - 8);
  } else if (n >= 4) {
    move.template operator()<4>(0);
    move.template operator()<4>(n - 4);
  } else if (n > 0) {
    dst[0] = static_cast<std::uint8_t>(src[0]);
    dst[n / 2] = static_cast<std::uint8_t>(src[n / 2]);
    dst[n - 1] = static_cast<std::uint8_t>(src[n - 1]);
  }
}

/// Appends MessagePack to a growing buffer. One writer writes one document.
class SerialWriter {
 public:
  /// A writer whose buffer starts with room for `capacity` bytes (it grows as needed).
  explicit SerialWriter(std::size_t capacity = 256) { reset_buffer(capacity); }
  /// A writer that writes over `buffer` from its start, keeping its capacity: the bytes it already
  /// holds are overwritten in place, so a buffer reused document after document costs neither
  /// zero-filling nor page faults. Reserves `capacity` bytes when it holds fewer.
  SerialWriter(std::vector<std::uint8_t>&& buffer, std::size_t capacity) : buf_(std::move(buffer)) {
    if (buf_.capacity() < capacity) buf_.reserve(capacity);
    pos_ = buf_.data();
    end_ = buf_.data() + buf_.size();
  }
  SerialWriter(const SerialWriter&) = delete;
  SerialWriter& operator=(const SerialWriter&) = delete;

  /// The bytes written so far; the writer is spent.
  std::vector<std::uint8_t> take() && {
    buf_.resize(size());
    return std::move(buf_);
  }

  // ---- MessagePack primitives (shortest encoding) ----

  void write_nil() { *bump(1) = 0xc0; }
  void write_uint(std::uint64_t v) { pos_ = encode_uint(room(9), v); }
  [[gnu::always_inline]] void write_str(std::string_view s) {
    const std::size_t n = s.size();
    if (n < 32) [[likely]] {
      std::uint8_t* p = bump(1 + n);
      p[0] = static_cast<std::uint8_t>(0xa0 | n);
      copy_short(p + 1, s.data(), n);
      return;
    }
    write_long_str(s);
  }
  void write_bin(std::span<const std::byte> bytes) {
    sized_header(bytes.size(), 0xc4, 0xc5, 0xc6, "binary blob");
    append(bytes.data(), bytes.size());
  }
  [[gnu::always_inline]] void write_array_header(std::size_t n) {
    if (n < 16) [[likely]] {
      *bump(1) = static_cast<std::uint8_t>(0x90 | n);
      return;
    }
    sized_header(n, 0, 0xdc, 0xdd, "array");
  }
  void write_map_header(std::size_t n) {
    if (n < 16) [[likely]] {
      *bump(1) = static_cast<std::uint8_t>(0x80 | n);
      return;
    }
    sized_header(n, 0, 0xde, 0xdf, "map");
  }

  // ---- values, by category ----

  /// Writes any reflected field type. Throws Error for what cannot be written (a symbolic
  /// tensor, a polymorphic object of an unregistered type, more than 2^32 - 1 elements).
  template <typename T>
  [[gnu::always_inline]] void write(const T& v) {
    if constexpr (max_scalar_bytes<T>() != 0) {
      pos_ = encode_scalar(room(max_scalar_bytes<T>()), v);
    } else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::string_view>) {
      write_str(v);
    } else if constexpr (std::is_same_v<T, Tensor>) {
      write_tensor(v);
    } else if constexpr (Reflected<T>) {
      write_struct(v);
    } else if constexpr (is_vector<T>::value) {
      write_vector(v);
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
      *bump(1) = 0x92;
      write_uint(v.index());
      std::visit([&](const auto& x) { write(x); }, v);
    } else {
      static_assert(sizeof(T) == 0, "rml: serialize: this field type cannot be written; reflect it with fields()");
    }
  }

  /// A reflected struct: an array of its fields in declaration order, without the trailing fields
  /// that hold what a default-constructed T holds (the reader restores those by default).
  template <Reflected T>
  void write_struct(const T& obj) {
    write_fields(obj, std::make_index_sequence<field_count_v<T>>{});
  }

 private:
  template <Reflected T, std::size_t... I>
  void write_fields(const T& obj, std::index_sequence<I...>) {
    static constexpr auto fields = T::fields();
    const std::size_t n = written_field_count(obj, std::index_sequence<I...>{});
    write_array_header(n);
    ((I < n ? write(obj.*(std::get<I>(fields).member)) : void()), ...);
  }

  // How many leading fields of `obj` are written: all but the trailing run of fields that hold
  // the default-constructed T's values.
  template <Reflected T, std::size_t... I>
  static std::size_t written_field_count(const T& obj, std::index_sequence<I...>) {
    constexpr std::size_t count = sizeof...(I);
    if constexpr (count == 0 || !std::is_default_constructible_v<T>) {
      return count;
    } else {
      static constexpr auto fields = T::fields();
      static const T defaults{};
      std::size_t n = count;
      // From the last field back; stops at the first that differs from its default.
      (void)((holds_default(obj.*(std::get<count - 1 - I>(fields).member),
                            defaults.*(std::get<count - 1 - I>(fields).member)) &&
              (--n, true)) &&
             ...);
      return n;
    }
  }

  // Any vector-like V (is_vector): uses only size, operator[] and begin/end.
  template <typename V>
  [[gnu::always_inline]] void write_vector(const V& v) {
    using E = typename V::value_type;
    if constexpr (std::is_same_v<E, std::uint8_t>) {
      const std::size_t n = v.size();
      write_bin(n == 0 ? std::span<const std::byte>() : std::as_bytes(std::span(&v[0], n)));
    } else if constexpr (max_scalar_bytes<E>() != 0) {
      // Scalars: one bounds check for a short list (a shape, a node's inputs), inline, or per
      // chunk of a long one, then a tight loop.
      const std::size_t n = v.size();
      if (n < 16) [[likely]] {
        std::uint8_t* p = room(1 + n * max_scalar_bytes<E>());
        *p++ = static_cast<std::uint8_t>(0x90 | n);
        for (std::size_t i = 0; i < n; ++i) p = encode_scalar(p, static_cast<E>(v[i]));
        pos_ = p;
        return;
      }
      write_long_scalars(v);
    } else if constexpr (Reflected<E>) {
      write_structs(v);
    } else {
      write_array_header(v.size());
      for (const auto& e : v) write(static_cast<const E&>(e));
    }
  }

  template <typename V>
  [[gnu::noinline]] void write_long_scalars(const V& v) {
    using E = typename V::value_type;
    constexpr std::size_t chunk = 4096;
    const std::size_t n = v.size();
    write_array_header(n);
    for (std::size_t i = 0; i < n;) {
      const std::size_t end = i + std::min(n - i, chunk);
      std::uint8_t* p = room((end - i) * max_scalar_bytes<E>());
      for (; i < end; ++i) p = encode_scalar(p, static_cast<E>(v[i]));
      pos_ = p;
    }
  }

  template <typename V>
  void write_structs(const V& v) {
    // Structs hold their lists and long strings on the heap, in blocks spread over memory: ask for
    // those of a later element while writing this one (large graphs are bound by these misses). Small
    // structs take less time each, so they look further ahead (about 1 KB of elements, 8 at least).
    constexpr std::size_t ahead = std::max<std::size_t>(8, 1024 / sizeof(typename V::value_type));
    const std::size_t n = v.size();
    write_array_header(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (i + ahead < n) prefetch_heap(v[i + ahead]);
      write_struct(static_cast<const typename V::value_type&>(v[i]));
    }
  }

  // Prefetches the heap blocks `x` points to: the data of its vectors, strings and tensor shapes and
  // the first node of its maps, in its fields and its nested structs' fields.
  template <typename M>
  static void prefetch_heap(const M& x) {
    if constexpr (Reflected<M>) {
      std::apply([&](const auto&... fd) { (prefetch_heap(x.*(fd.member)), ...); }, M::fields());
    } else if constexpr (std::is_same_v<M, std::string>) {
      __builtin_prefetch(x.data());
    } else if constexpr (std::is_same_v<M, Tensor>) {
      prefetch_heap(x.shape().dims());
    } else if constexpr (is_map<M>::value) {
      if (x.size() != 0) __builtin_prefetch(&*x.begin());
    } else if constexpr (is_vector<M>::value) {
      if constexpr (!std::is_same_v<typename M::value_type, bool>)
        if (x.size() != 0) __builtin_prefetch(&x[0]);
    }
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
      std::uint8_t* p = room(ref_prefix.size() + 9);
      std::memcpy(p, ref_prefix.data(), ref_prefix.size());
      pos_ = encode_uint(p + ref_prefix.size(), it->second);
      return true;
    }
    ++next_id_;
    write_map_header(3);
    write_str(key_id);
    write_uint(it->second);
    write_str(key_type);
    return false;
  }

  // A tensor: nil when it has no data, else `[dtype, shape, <shared bytes>]`.
  void write_tensor(const Tensor& t) {
    if (t.is_symbolic())
      throw Error(Code::failed_precondition, "serialize: a symbolic tensor (being traced) has no data to write");
    if (!t.defined()) return write_nil();
    write_array_header(3);
    write(t.dtype());
    write(t.shape().dims());
    if (write_ref(blobs_, BlobKey{t.storage().get(), t.storage_offset(), t.nbytes()})) return;
    write_str(storage_type_name);
    write_str(key_fields);
    write_bin(t.bytes());
  }

  [[gnu::noinline]] void write_long_str(std::string_view s) {
    sized_header(s.size(), 0xd9, 0xda, 0xdb, "string");
    append(s.data(), s.size());
  }

  void sized_header(std::size_t n, std::uint8_t op8, std::uint8_t op16, std::uint8_t op32, const char* what) {
    std::uint8_t* p = room(5);
    if (op8 != 0 && n <= 0xff) {
      p[0] = op8;
      p[1] = static_cast<std::uint8_t>(n);
      pos_ = p + 2;
    } else if (n <= 0xffff) {
      pos_ = encode_be(p, op16, static_cast<std::uint16_t>(n));
    } else if (n <= 0xffffffffu) {
      pos_ = encode_be(p, op32, static_cast<std::uint32_t>(n));
    } else {
      throw Error(Code::unsupported, std::string("serialize: a ") + what + " of " + std::to_string(n) +
                                         " elements is beyond MessagePack's 2^32 - 1");
    }
  }

  std::size_t size() const noexcept { return static_cast<std::size_t>(pos_ - buf_.data()); }
  // Room for n bytes at the end, without taking them; returns where they go.
  [[gnu::always_inline]] std::uint8_t* room(std::size_t n) {
    if (static_cast<std::size_t>(end_ - pos_) < n) [[unlikely]]
      grow(n);
    return pos_;
  }
  // Takes n bytes at the end; returns where they go.
  [[gnu::always_inline]] std::uint8_t* bump(std::size_t n) {
    std::uint8_t* p = room(n);
    pos_ = p + n;
    return p;
  }
  void append(const void* data, std::size_t n) {
    if (n) std::memcpy(bump(n), data, n);
  }
  // Makes room for n more bytes. The vector's capacity grows geometrically, but its size (which
  // std::vector zero-fills) only a step at a time, just ahead of the writing: a generous capacity
  // costs no memset and no page faults for the part never written.
  [[gnu::noinline]] void grow(std::size_t n) {
    const std::size_t step = std::clamp<std::size_t>(buf_.capacity() / 4, 256, 16 * 1024);
    const std::size_t used = size();
    const std::size_t want = used + std::max(n, step);
    if (want > buf_.capacity()) buf_.reserve(std::max(want, 2 * buf_.capacity()));
    buf_.resize(std::min(buf_.capacity(), std::max(want, buf_.size() + step)));
    pos_ = buf_.data() + used;
    end_ = buf_.data() + buf_.size();
  }
  void reset_buffer(std::size_t capacity) {
    buf_.reserve(capacity);
    pos_ = end_ = buf_.data();
  }

  std::vector<std::uint8_t> buf_;
  std::uint8_t* pos_ = nullptr;  // the next byte to write, in buf_
  std::uint8_t* end_ = nullptr;  // buf_'s end
  std::uint32_t next_id_ = 0;
  std::map<ObjectKey, std::uint32_t> objects_;
  std::map<BlobKey, std::uint32_t> blobs_;
};

}  // namespace rml::baseline_serial
