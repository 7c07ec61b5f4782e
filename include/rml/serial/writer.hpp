// The MessagePack writer: walks any reflected value over its field descriptors and hands each item to
// msgpack-cxx's packer, writing each shared object and each tensor's bytes once. The byte layout is
// described in rml/serial/reader.hpp.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
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
#include "rml/serial/detail/wire.hpp"

namespace rml::detail {

/// Writes one MessagePack document through msgpack::packer into an OutputBuffer.
class SerialWriter {
 public:
  /// A writer whose buffer starts with room for `capacity` bytes (it grows as needed).
  explicit SerialWriter(std::size_t capacity = 256) : out_(capacity), pk_(out_) {}
  /// A writer that writes over `buffer` from its start, keeping its capacity (see OutputBuffer).
  SerialWriter(std::vector<std::uint8_t>&& buffer, std::size_t capacity)
      : out_(std::move(buffer), capacity), pk_(out_) {}
  SerialWriter(const SerialWriter&) = delete;
  SerialWriter& operator=(const SerialWriter&) = delete;

  /// The bytes written so far; the writer is spent.
  std::vector<std::uint8_t> take() && { return std::move(out_).take(); }

  // ---- items ----

  void write_nil() { pk_.pack_nil(); }
  void write_uint(std::uint64_t v) { pk_.pack_uint64(v); }
  [[gnu::always_inline]] void write_str(std::string_view s) {
    const auto n = checked_size(s.size(), "string");
    pk_.pack_str(n);
    pk_.pack_str_body(s.data(), n);
  }
  void write_bin(std::span<const std::byte> bytes) {
    const auto n = checked_size(bytes.size(), "binary blob");
    pk_.pack_bin(n);
    pk_.pack_bin_body(reinterpret_cast<const char*>(bytes.data()), n);
  }
  [[gnu::always_inline]] void write_array_header(std::size_t n) { pk_.pack_array(checked_size(n, "array")); }
  void write_map_header(std::size_t n) { pk_.pack_map(checked_size(n, "map")); }

  /// Writes `root`, the document's root value. Throws Error for what cannot be written (see write)
  /// and (UNSUPPORTED, naming the path) for nesting deeper than the reader reads.
  template <typename T>
  void write_root(const T& root) {
    try {
      write(root);
    } catch (NestingTooDeep& e) {
      std::string path;
      for (auto it = e.path.rbegin(); it != e.path.rend(); ++it) path += *it;
      if (!path.empty() && path[0] == '.') path.erase(0, 1);
      if (path.empty()) path = "<root>";
      throw Error(Code::unsupported, "serialize: " + path + ": nesting deeper than " +
                                         std::to_string(serial_max_depth) +
                                         " levels, which no reader of the format reads");
    }
  }

  // ---- values, by category ----

  /// Writes any reflected field type. Throws Error for what cannot be written (a symbolic
  /// tensor, a polymorphic object of an unregistered type, more than 2^32 - 1 elements).
  template <typename T>
  [[gnu::always_inline]] void write(const T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      if (v)
        pk_.pack_true();
      else
        pk_.pack_false();
    } else if constexpr (std::is_enum_v<T>) {
      write(static_cast<std::underlying_type_t<T>>(v));
    } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      pk_.pack_int64(v);
    } else if constexpr (std::is_integral_v<T>) {
      pk_.pack_uint64(v);
    } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      write_float(v);
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
      write_map(v);
    } else if constexpr (is_shared_ptr<T>::value) {
      write_shared(v);
    } else if constexpr (is_variant<T>::value) {
      const Level level(*this);
      write_array_header(2);
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
    const Level level(*this);
    write_fields(obj, std::make_index_sequence<field_count_v<T>>{});
  }

 private:
  // Thrown by a level past serial_max_depth; each enclosing field, element or key adds its segment.
  struct NestingTooDeep {
    std::vector<std::string> path;  // innermost first
  };
  // One level of nesting, as the reader counts them: a struct, list, map, variant, shared object or
  // tensor.
  struct Level {
    SerialWriter& w;
    explicit Level(SerialWriter& writer) : w(writer) {
      if (++w.depth_ > serial_max_depth) [[unlikely]] {
        --w.depth_;
        throw NestingTooDeep{};
      }
    }
    ~Level() { --w.depth_; }
    Level(const Level&) = delete;
    Level& operator=(const Level&) = delete;
  };

  static std::uint32_t checked_size(std::size_t n, const char* what) {
    if (n > 0xffffffffu) [[unlikely]]
      too_long(n, what);
    return static_cast<std::uint32_t>(n);
  }
  [[noreturn, gnu::cold]] static void too_long(std::size_t n, const char* what) {
    throw Error(Code::unsupported, std::string("serialize: a ") + what + " of " + std::to_string(n) +
                                       " elements is beyond MessagePack's 2^32 - 1");
  }

  // float32 or float64, always: msgpack-cxx's pack_float/pack_double write an integral value as an
  // integer, which the format does not allow (and which would lose -0.0). The 5 or 9 bytes use
  // msgpack-cxx's own big-endian store.
  template <typename F>
  [[gnu::always_inline]] void write_float(F v) {
    if constexpr (std::is_same_v<F, float>) {
      char b[5];
      b[0] = static_cast<char>(0xcau);
      _msgpack_store32(&b[1], std::bit_cast<std::uint32_t>(v));
      out_.write(b, 5);
    } else {
      char b[9];
      b[0] = static_cast<char>(0xcbu);
      _msgpack_store64(&b[1], std::bit_cast<std::uint64_t>(v));
      out_.write(b, 9);
    }
  }

  template <Reflected T, std::size_t I>
  [[gnu::always_inline]] void write_field(const T& obj) {
    static constexpr auto fields = T::fields();
    if constexpr (can_nest<std::remove_cvref_t<decltype(obj.*(std::get<I>(fields).member))>>()) {
      try {
        write(obj.*(std::get<I>(fields).member));
      } catch (NestingTooDeep& e) {
        e.path.push_back("." + std::string(std::get<I>(fields).name));
        throw;
      }
    } else {
      write(obj.*(std::get<I>(fields).member));
    }
  }

  // Whether writing an M can open a level that fails (scalars and strings cannot).
  template <typename M>
  static constexpr bool can_nest() {
    return !(std::is_arithmetic_v<M> || std::is_enum_v<M> || std::is_same_v<M, std::string>);
  }

  template <Reflected T, std::size_t... I>
  void write_fields(const T& obj, std::index_sequence<I...>) {
    const std::size_t n = written_field_count(obj, std::index_sequence<I...>{});
    write_array_header(n);
    ((I < n ? write_field<T, I>(obj) : void()), ...);
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
    } else if constexpr (!can_nest<E>()) {
      const Level level(*this);
      write_array_header(v.size());
      for (const auto& e : v) write(static_cast<E>(e));
    } else {
      const Level level(*this);
      const std::size_t n = v.size();
      write_array_header(n);
      // Structs hold their lists and long strings on the heap, in blocks spread over memory: ask for
      // those of a later element while writing this one (large graphs are bound by these misses). Small
      // structs take less time each, so they look further ahead (about 1 KB of elements, 8 at least).
      constexpr std::size_t ahead = std::max<std::size_t>(8, 1024 / sizeof(E));
      std::size_t i = 0;
      try {
        for (; i < n; ++i) {
          if constexpr (Reflected<E>)
            if (i + ahead < n) prefetch_heap(v[i + ahead]);
          write(static_cast<const E&>(v[i]));
        }
      } catch (NestingTooDeep& e) {
        e.path.push_back("[" + std::to_string(i) + "]");
        throw;
      }
    }
  }

  template <typename M>
  void write_map(const M& m) {
    const Level level(*this);
    write_map_header(m.size());
    for (const auto& [key, value] : m) {
      write(key);
      if constexpr (can_nest<typename M::mapped_type>()) {
        try {
          write(value);
        } catch (NestingTooDeep& e) {
          if constexpr (std::is_convertible_v<const typename M::key_type&, std::string_view>)
            e.path.push_back("[\"" + std::string(std::string_view(key)) + "\"]");
          else if constexpr (std::is_integral_v<typename M::key_type>)
            e.path.push_back("[" + std::to_string(key) + "]");
          else
            e.path.push_back("[<key>]");
          throw;
        }
      } else {
        write(value);
      }
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
    const Level level(*this);
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

  // A tensor: nil when it has no data, else `[dtype, shape, <shared bytes>]`.
  void write_tensor(const Tensor& t) {
    if (t.is_symbolic())
      throw Error(Code::failed_precondition, "serialize: a symbolic tensor (being traced) has no data to write");
    if (!t.defined()) return write_nil();
    const Level level(*this);
    write_array_header(3);
    write(t.dtype());
    write(t.shape().dims());
    if (write_ref(blobs_, BlobKey{t.storage().get(), t.storage_offset(), t.nbytes()})) return;
    write_str(storage_type_name);
    write_str(key_fields);
    write_bin(t.bytes());
  }

  OutputBuffer out_;
  msgpack::packer<OutputBuffer> pk_;
  int depth_ = 0;
  std::uint32_t next_id_ = 0;
  std::map<ObjectKey, std::uint32_t> objects_;
  std::map<BlobKey, std::uint32_t> blobs_;
};

}  // namespace rml::detail
