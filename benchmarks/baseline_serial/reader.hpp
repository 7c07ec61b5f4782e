// BASELINE FOR MEASUREMENT ONLY: rml's hand-written MessagePack reader as it was before the
// serial layer moved onto msgpack-cxx (issue 18), kept in the benchmark directory so bench_serial can
// compare both layers in one run. Nothing in include/ or the tests uses it; do not extend it.
// Changes from the original: the namespace (rml::baseline_serial) and, in common.hpp, the public
// constants, which are taken from today's rml/serial/detail/common.hpp.
// The MessagePack reader: a bounds-checked cursor that decodes any reflected value over its
// field descriptors, restores shared objects and tensor storage, and names the path of any fault.
//
// Byte layout of an rml-msgpack document, version 2.0 (MessagePack; see docs/serialization.md):
//
//   document  = map {"format": "rml-msgpack", "version": [major, minor], "type": str, "root": value}
//               "format" and "version" come first, in that order; other keys may follow in any order and
//               unknown keys are skipped. A newer major version is refused (UNSUPPORTED).
//   bool      = true | false              integer = int/uint family, shortest encoding, range-checked on read
//   float     = float32                   double  = float64 (bit-exact)
//   enum      = its underlying integer (an enum with a `count_` enumerator is checked against it)
//   string    = str                       vector<uint8_t> = bin
//   vector<T> = array of T                optional<T>     = nil | T
//   map<K, V> = map of K -> V (a repeated key is refused)
//   variant   = array [alternative index, value]           (AttrValue: 0 int64, 1 double, 2 bool, 3 string,
//                                                           4 list of int64, 5 list of double)
//   struct    = array [field 0, field 1, ...]: the fields by position, in declaration order (base fields
//               first), without the trailing run of fields whose values are what a default-constructed
//               struct holds (equal scalars and strings, empty containers, optionals, pointers and
//               tensors; structs whose fields are all left out). Fields before the last one written are
//               written whatever they hold.
//               On read, missing trailing elements leave their fields at the default-constructed
//               struct's values (an older writer did not know them), and elements beyond the fields this
//               reader knows are skipped (a newer writer appended them). Hence the evolution rule: new
//               fields are appended; fields are never reordered or removed (a removed field stays as a
//               deprecated placeholder), never change type, and keep their names (debug output, v1 keys).
//             | map {field name: value}: version 1's keyed struct, still read (keys in any order, unknown
//               keys skipped, missing keys left at their defaults). Each struct is decided by its header byte.
//   shared_ptr<T> = nil
//               | {"id": n, "type": "<TypeName>", "fields": struct}   (first occurrence; ids are 0, 1, 2, ...
//                                                                       in order of first occurrence)
//               | {"ref": n}                                          (a later occurrence of object n)
//   Tensor    = nil (no data) | [dtype: uint, shape: [int...], data: bytes]
//               (version 1: {"dtype": ..., "shape": ..., "data": ...}, still read)
//   bytes     = {"id": n, "type": "Storage", "fields": bin} | {"ref": n}
//               (one id space with shared objects; keyed on storage, offset and size, so tied weights
//               are stored once and share one storage again after reading)
//
// Limits enforced while reading: every length is checked against the bytes that remain before
// anything is allocated; nesting deeper than serial_max_depth (256) is refused; a `ref` must name
// an object defined earlier; ids must come in sequence; a tensor's bytes must equal dtype x shape.
#pragma once

#include <bit>
#include <bitset>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <variant>
#include <vector>

#include "common.hpp"
#include "rml/core/reflect.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"

namespace rml::baseline_serial {
using namespace rml::detail;  // is_vector, Reflected helpers, pretty names

/// Decodes one document from a span of bytes it does not own (which outlives the reader).
/// Every read returns false on failure, after which status() says what and where.
class SerialReader {
 public:
  explicit SerialReader(std::span<const std::uint8_t> bytes) noexcept
      : begin_(bytes.data()), p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  /// Reads the envelope and its root into `out`, which must hold T's defaults.
  template <typename T>
  bool read_document(T& out, std::string_view expected_type) {
    std::uint32_t n = 0;
    std::string_view key;
    std::string_view format;
    if (!at_kind(0x80) || !read_map_header(n) || n < 2 || !read_str(key) || key != key_format || !read_str(format) ||
        format != serial_format_name)
      return fail_document();
    std::uint32_t version[2] = {0, 0};
    std::uint32_t version_len = 0;
    if (!read_str(key) || key != key_version || !read_array_header(version_len) || version_len < 2 ||
        !read(version[0]) || !read(version[1]))
      return fail(Code::data_loss, "the envelope's \"version\" is not [major, minor]");
    if (version[0] < serial_oldest_version_major || version[0] > serial_version_major)
      return fail(Code::unsupported, "version " + std::to_string(version[0]) + "." + std::to_string(version[1]) +
                                         " is not supported by this reader (version " +
                                         std::to_string(serial_version_major) + "." +
                                         std::to_string(serial_version_minor) + ")");
    for (std::uint32_t i = 2; i < version_len; ++i)
      if (!skip()) return false;
    bool have_root = false;
    for (std::uint32_t i = 2; i < n; ++i) {
      if (!read_str(key)) return false;
      if (key == key_type) {
        std::string_view type;
        if (!read_str(type)) return false;
        if (type != expected_type)
          return fail(Code::invalid_argument,
                      "the document holds a " + std::string(type) + ", not a " + std::string(expected_type));
      } else if (key == key_root) {
        if (have_root) return fail(Code::data_loss, "the envelope has two roots");
        have_root = true;
        if (!read(out)) return false;
      } else if (!skip()) {
        return false;
      }
    }
    if (!have_root) return fail(Code::data_loss, "the envelope has no \"root\"");
    if (p_ != end_) return fail(Code::data_loss, std::to_string(end_ - p_) + " bytes follow the document");
    return true;
  }

  /// The failure: `<path>: <what> (at byte N)`, or OK.
  [[nodiscard]] Status status() const {
    if (code_ == Code::ok) return {};
    std::string path;
    for (auto it = path_.rbegin(); it != path_.rend(); ++it) path += *it;
    if (!path.empty() && path[0] == '.') path.erase(0, 1);
    if (path.empty()) path = "<root>";
    return {code_, std::string(serial_format_name) + ": " + path + ": " + what_ + " (at byte " +
                       std::to_string(fail_offset_) + ")"};
  }

  // ---- values, by category ----

  template <typename T>
  [[gnu::always_inline]] bool read(T& out) {
    if constexpr (std::is_same_v<T, bool>) {
      if (p_ < end_ && (*p_ == 0xc2 || *p_ == 0xc3)) {
        out = *p_++ == 0xc3;
        return true;
      }
      return wrong_type("a bool");
    } else if constexpr (std::is_enum_v<T>) {
      using Raw = std::underlying_type_t<T>;
      const std::uint8_t* start = p_;
      Raw raw{};
      if (!read(raw)) return false;
      if constexpr (requires { T::count_; }) {
        if (raw < static_cast<Raw>(0) || raw >= static_cast<Raw>(T::count_)) [[unlikely]]
          return fail_at(start, Code::data_loss, "enum value " + std::to_string(raw) + " is out of range");
      }
      out = static_cast<T>(raw);
      return true;
    } else if constexpr (std::is_integral_v<T>) {
      const std::uint8_t* p = p_;
      if (decode_small(p, end_, out)) [[likely]] {
        p_ = p;
        return true;
      }
      return read_integral(out);
    } else if constexpr (std::is_floating_point_v<T>) {
      return read_floating(out);
    } else if constexpr (std::is_same_v<T, std::string>) {
      std::string_view s;
      if (!read_str(s)) return false;
      out.clear();
      out.append(s.data(), s.size());  // simpler than assign's general replace
      return true;
    } else if constexpr (std::is_same_v<T, Tensor>) {
      return read_tensor(out);
    } else if constexpr (Reflected<T>) {
      return read_struct(out);  // a fresh T: struct fields that may not be are reset by read_field
    } else if constexpr (is_vector<T>::value) {
      return read_vector(out);
    } else if constexpr (is_optional<T>::value) {
      if (p_ < end_ && *p_ == 0xc0) {
        ++p_;
        out.reset();
        return true;
      }
      if constexpr (Reflected<typename T::value_type>)
        return read_struct(out.emplace());  // already fresh
      else
        return read(out.emplace());
    } else if constexpr (is_map<T>::value) {
      return read_map(out);
    } else if constexpr (is_shared_ptr<T>::value) {
      return read_shared(out);
    } else if constexpr (is_variant<T>::value) {
      return read_variant(out);
    } else {
      static_assert(sizeof(T) == 0, "rml: deserialize: this field type cannot be read; reflect it with fields()");
    }
  }

  /// A reflected struct into a default-constructed `obj` (fields the document leaves out keep their
  /// values): a positional array (version 2) or a map of field names (version 1), decided by the
  /// header byte (see the layout above).
  template <Reflected T>
  [[gnu::always_inline]] bool read_struct(T& obj) {
    if (p_ < end_ && (*p_ & 0xf0) == 0x90) [[likely]]
      return read_positional(obj, *p_++ & 0x0fu, std::make_index_sequence<field_count_v<T>>{});
    return read_struct_other(obj);
  }

 private:
  struct SharedObject {
    std::shared_ptr<void> object;
    const std::type_info* type;
    std::string_view name;
    std::size_t size;  // bytes, for tensor storage
  };
  struct SharedHeader {
    bool is_ref = false;
    std::uint32_t id = 0;
    std::string_view type;
  };

  // Field I of a default-constructed T, read once. A nested struct is written trimmed against its own
  // type's defaults, so it is read into a default-constructed one: the field is reset first when T's
  // default member holds something else (checked once per field).
  template <Reflected T, std::size_t I>
  [[gnu::always_inline]] bool read_field(T& obj) {
    auto& field = obj.*(std::get<I>(T::fields()).member);
    using M = std::remove_reference_t<decltype(field)>;
    if constexpr (Reflected<M>) {
      if constexpr (std::is_default_constructible_v<M> && std::is_move_assignable_v<M>) {
        if constexpr (std::is_default_constructible_v<T>) {
          static const bool reset = !holds_default(T{}.*(std::get<I>(T::fields()).member), M{});
          if (reset) field = M{};
        } else {
          field = M{};
        }
      }
      return read_struct(field);
    } else {
      return read(field);
    }
  }

  // The first `n` fields by position; elements beyond the fields T has are skipped.
  template <Reflected T, std::size_t... I>
  bool read_positional(T& obj, std::uint32_t n, std::index_sequence<I...>) {
    static constexpr auto fields = T::fields();
    if (!enter()) return false;
    const bool ok = ((I >= n || read_field<T, I>(obj) || in_field(std::get<I>(fields).name)) && ...);
    if (!ok) return false;
    for (std::uint32_t i = sizeof...(I); i < n; ++i)  // appended by a newer writer
      if (!skip()) return in_extra_field(i);
    return leave();
  }

  // A struct that is not a fixarray: a longer array, a version-1 map, or a wrong type.
  template <Reflected T>
  [[gnu::noinline]] bool read_struct_other(T& obj) {
    std::uint32_t n = 0;
    if (at_kind(0x90)) {
      if (!read_array_header(n)) return false;
      return read_positional(obj, n, std::make_index_sequence<field_count_v<T>>{});
    }
    if (!at_kind(0x80, "a struct (array or map)")) return false;
    return read_keyed(obj, std::make_index_sequence<field_count_v<T>>{});
  }

  // True when the next bytes are field I's key, exactly as the version-1 writer encoded it.
  template <typename T, std::size_t I>
  bool at_key() const noexcept {
    constexpr const auto& key = EncodedKey<T, I>::bytes;
    return static_cast<std::size_t>(end_ - p_) >= key.size() && std::memcmp(p_, key.data(), key.size()) == 0;
  }

  // A version-1 struct: a map from field name to value. Keys in declaration order (what the
  // version-1 writer wrote) are matched against precomputed bytes; anything else (unknown keys,
  // another order) goes through the general loop.
  template <Reflected T, std::size_t... I>
  bool read_keyed(T& obj, std::index_sequence<I...>) {
    constexpr std::size_t count = sizeof...(I);
    std::uint32_t n = 0;
    if (!read_map_header(n) || !enter()) return false;
    std::bitset<count> seen;
    std::uint32_t done = 0;
    // Fast path: the keys the writer writes, in declaration order, each matched as raw bytes.
    const bool ok = ((done == n || !at_key<T, I>() ||
                      (p_ += EncodedKey<T, I>::bytes.size(), seen.set(I), ++done,
                       read_field<T, I>(obj) || in_field(EncodedKey<T, I>::name))) &&
                     ...);
    if (!ok) return false;
    for (; done < n; ++done) {  // the rest: unknown keys, or keys in another order
      const std::uint8_t* start = p_;
      std::string_view key;
      if (!read_str(key)) return false;
      std::size_t index = count;
      (void)((EncodedKey<T, I>::name == key && (index = I, true)) || ...);
      if (index == count) {  // a field this reader does not know: written by a newer writer
        if (!skip()) return in_field(key);
        continue;
      }
      if (seen[index]) return fail_at(start, Code::data_loss, "field \"" + std::string(key) + "\" appears twice");
      seen.set(index);
      if (!((index != I || read_field<T, I>(obj)) && ...)) return in_field(key);
    }
    return leave();
  }

  // ---- failure and path ----

  [[gnu::cold]] bool fail(Code code, std::string what) { return fail_at(p_, code, std::move(what)); }
  // A failure about the value that begins at `start` (the first failure wins).
  [[gnu::cold]] bool fail_at(const std::uint8_t* start, Code code, std::string what) {
    if (code_ == Code::ok) {
      code_ = code;
      what_ = std::move(what);
      fail_offset_ = static_cast<std::size_t>(start - begin_);
    }
    return false;
  }
  [[gnu::cold]] bool fail_document() {
    return fail(Code::invalid_argument,
                "not an rml-msgpack document (it must open with {\"format\": \"rml-msgpack\"})");
  }
  [[gnu::cold]] bool in_field(std::string_view name) {
    path_.push_back("." + std::string(name));
    return false;
  }
  [[gnu::cold]] bool in_extra_field(std::uint32_t i) {
    path_.push_back(".<field " + std::to_string(i) + ">");
    return false;
  }
  [[gnu::cold]] bool in_element(std::size_t i) {
    path_.push_back("[" + std::to_string(i) + "]");
    return false;
  }
  bool enter() {
    if (++depth_ <= serial_max_depth) [[likely]]
      return true;
    return too_deep();
  }
  [[gnu::cold, gnu::noinline]] bool too_deep() {
    return fail(Code::data_loss, "nesting deeper than " + std::to_string(serial_max_depth) + " levels");
  }
  bool leave() {
    --depth_;
    return true;
  }

  static const char* kind_name(std::uint8_t b) {
    if (b <= 0x7f || b >= 0xe0 || (b >= 0xcc && b <= 0xd3)) return "an integer";
    if (b <= 0x8f || b == 0xde || b == 0xdf) return "a map";
    if (b <= 0x9f || b == 0xdc || b == 0xdd) return "an array";
    if (b <= 0xbf || (b >= 0xd9 && b <= 0xdb)) return "a string";
    switch (b) {
      case 0xc0:
        return "nil";
      case 0xc2:
      case 0xc3:
        return "a bool";
      case 0xc4:
      case 0xc5:
      case 0xc6:
        return "binary data";
      case 0xca:
      case 0xcb:
        return "a float";
      case 0xc1:
        return "the invalid byte 0xc1";
      default:
        return "an extension value";
    }
  }
  [[gnu::cold, gnu::noinline]] bool wrong_type(const char* expected) {
    if (p_ == end_) return fail(Code::data_loss, std::string("truncated: expected ") + expected);
    return fail(Code::data_loss, std::string("expected ") + expected + ", found " + kind_name(*p_));
  }
  // True when the next byte starts a value of the family `family` (0x80 map, 0x90 array).
  bool at_kind(std::uint8_t family, const char* what = nullptr) {
    if (p_ < end_) {
      const std::uint8_t b = *p_;
      if (family == 0x80 && ((b & 0xf0) == 0x80 || b == 0xde || b == 0xdf)) return true;
      if (family == 0x90 && ((b & 0xf0) == 0x90 || b == 0xdc || b == 0xdd)) return true;
    }
    if (what == nullptr) return false;
    return wrong_type(what);
  }

  // ---- MessagePack primitives ----

  bool need(std::size_t n) {
    if (static_cast<std::size_t>(end_ - p_) >= n) [[likely]]
      return true;
    return truncated(n);
  }
  [[gnu::cold, gnu::noinline]] bool truncated(std::size_t n) {
    return fail(Code::data_loss,
                "truncated: " + std::to_string(n) + " bytes needed, " + std::to_string(end_ - p_) + " remain");
  }
  // A big-endian unsigned value of 1, 2, 4 or 8 bytes; the caller has checked need(width).
  std::uint64_t load_be_width(std::size_t width) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < width; ++i) v = (v << 8) | p_[i];
    p_ += width;
    return v;
  }
  bool read_sized(std::uint32_t& n, int width) {
    if (!need(static_cast<std::size_t>(width))) return false;
    n = static_cast<std::uint32_t>(load_be_width(static_cast<std::size_t>(width)));
    return true;
  }
  // Checks that `count` items of at least `min_bytes` each fit in what remains after the header
  // of the value that began at `start`.
  bool fits(std::uint64_t count, std::uint64_t min_bytes, const char* what, const std::uint8_t* start) {
    const auto remain = static_cast<std::uint64_t>(end_ - p_);
    if (count * min_bytes <= remain) [[likely]]  // count < 2^32, min_bytes <= 2: no overflow
      return true;
    return too_long(count, what, start);
  }
  [[gnu::cold, gnu::noinline]] bool too_long(std::uint64_t count, const char* what, const std::uint8_t* start) {
    const auto remain = static_cast<std::uint64_t>(end_ - p_);
    return fail_at(start, Code::data_loss,
                   std::string(what) + " of " + std::to_string(count) + " claims more than the " +
                       std::to_string(remain) + " bytes that remain");
  }

  [[gnu::always_inline]] bool read_map_header(std::uint32_t& n) {
    if (p_ < end_ && (*p_ & 0xf0) == 0x80) [[likely]] {  // at most 15 pairs: checked as they are read
      n = *p_++ & 0x0fu;
      return true;
    }
    return read_header(n, 0x80, 0xde, 2, "a map");
  }
  [[gnu::always_inline]] bool read_array_header(std::uint32_t& n) {
    if (p_ < end_ && (*p_ & 0xf0) == 0x90) [[likely]] {  // at most 15 items: checked as they are read
      n = *p_++ & 0x0fu;
      return true;
    }
    return read_header(n, 0x90, 0xdc, 1, "an array");
  }
  // A container header: fix family `fix` (count in the low 4 bits), `op16`, or `op16 + 1` (32-bit
  // count); then checks that `n` items of at least `item_bytes` each fit in what remains.
  [[gnu::noinline]] bool read_header(std::uint32_t& n, std::uint8_t fix, std::uint8_t op16, std::uint64_t item_bytes,
                                     const char* what) {
    const std::uint8_t* start = p_;
    if (p_ == end_) return wrong_type(what);
    const std::uint8_t b = *p_;
    if ((b & 0xf0) == fix) {
      ++p_;
      n = b & 0x0f;
    } else if (b == op16 || b == op16 + 1) {
      ++p_;
      if (!read_sized(n, b == op16 ? 2 : 4)) return false;
    } else {
      return wrong_type(what);
    }
    return fits(n, item_bytes, what, start);
  }
  [[gnu::always_inline]] bool read_str(std::string_view& s) {
    if (p_ < end_ && (*p_ & 0xe0) == 0xa0) [[likely]] {
      const std::size_t n = *p_ & 0x1fu;
      if (static_cast<std::size_t>(end_ - p_) > n) [[likely]] {
        s = {reinterpret_cast<const char*>(p_ + 1), n};
        p_ += 1 + n;
        return true;
      }
    }
    return read_long_str(s);
  }
  // Any string (the fast path's fixstr included, when it does not fit).
  [[gnu::noinline]] bool read_long_str(std::string_view& s) {
    const std::uint8_t* start = p_;
    if (p_ == end_) return wrong_type("a string");
    const std::uint8_t b = *p_;
    std::uint32_t n = 0;
    if ((b & 0xe0) == 0xa0) {
      ++p_;
      n = b & 0x1f;
    } else if (b >= 0xd9 && b <= 0xdb) {
      ++p_;
      if (!read_sized(n, 1 << (b - 0xd9))) return false;
    } else {
      return wrong_type("a string");
    }
    if (!fits(n, 1, "a string", start)) return false;
    s = {reinterpret_cast<const char*>(p_), n};
    p_ += n;
    return true;
  }
  bool read_bin(std::span<const std::uint8_t>& out) {
    const std::uint8_t* start = p_;
    if (p_ == end_ || *p_ < 0xc4 || *p_ > 0xc6) return wrong_type("binary data");
    std::uint32_t n = 0;
    if (!read_sized(n, 1 << (*p_++ - 0xc4))) return false;
    if (!fits(n, 1, "binary data", start)) return false;
    out = {p_, n};
    p_ += n;
    return true;
  }

  // A positive fixint, or a uint8 or uint16 when T holds every such value: what ids, dimensions and
  // counts mostly are. Advances `p` and returns true, or leaves it and returns false (anything else).
  template <typename T>
  [[gnu::always_inline]] static bool decode_small(const std::uint8_t*& p, const std::uint8_t* end, T& out) {
    if (p == end) return false;
    const std::uint8_t b = *p;
    if (b <= 0x7f) {
      out = static_cast<T>(b);
      ++p;
      return true;
    }
    if constexpr (std::numeric_limits<T>::max() >= 0xffff) {
      if (b == 0xcd && end - p >= 3) {
        out = static_cast<T>(static_cast<unsigned>(p[1]) << 8 | p[2]);
        p += 3;
        return true;
      }
      if (b == 0xcc && end - p >= 2) {
        out = static_cast<T>(p[1]);
        p += 2;
        return true;
      }
    }
    return false;
  }

  // Any integer encoding, range-checked against T.
  template <typename T>
  [[gnu::noinline]] bool read_integral(T& out) {
    const std::uint8_t* start = p_;
    if (p_ == end_) return wrong_type("an integer");
    const std::uint8_t b = *p_;
    bool negative = false;
    std::uint64_t u = 0;
    std::int64_t s = 0;
    if (b <= 0x7f) {
      ++p_;
      u = b;
    } else if (b >= 0xe0) {
      ++p_;
      negative = true;
      s = static_cast<std::int8_t>(b);
    } else if (b >= 0xcc && b <= 0xcf) {
      const std::size_t width = std::size_t{1} << (b - 0xcc);
      if (!need(1 + width)) return false;
      ++p_;
      u = load_be_width(width);
    } else if (b >= 0xd0 && b <= 0xd3) {
      const std::size_t width = std::size_t{1} << (b - 0xd0);
      if (!need(1 + width)) return false;
      ++p_;
      const auto shift = static_cast<unsigned>(64 - 8 * width);  // sign-extend the width-byte value
      s = static_cast<std::int64_t>(load_be_width(width) << shift) >> shift;
      negative = s < 0;
      u = static_cast<std::uint64_t>(s);
    } else {
      return wrong_type("an integer");
    }
    if (negative) {
      if constexpr (std::is_signed_v<T>) {
        if (s >= static_cast<std::int64_t>(std::numeric_limits<T>::min())) {
          out = static_cast<T>(s);
          return true;
        }
      }
      return fail_at(start, Code::data_loss, std::to_string(s) + " is out of range for " + integer_name<T>());
    }
    if (u <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
      out = static_cast<T>(u);
      return true;
    }
    return fail_at(start, Code::data_loss, std::to_string(u) + " is out of range for " + integer_name<T>());
  }
  template <typename T>
  static std::string integer_name() {
    return std::string(std::is_signed_v<T> ? "int" : "uint") + std::to_string(8 * sizeof(T));
  }

  template <typename T>
  bool read_floating(T& out) {
    const std::uint8_t* start = p_;
    if (p_ == end_ || (*p_ != 0xca && *p_ != 0xcb)) return wrong_type("a float");
    if (*p_ == 0xca) {
      if (!need(5)) return false;
      ++p_;
      out = static_cast<T>(std::bit_cast<float>(static_cast<std::uint32_t>(load_be_width(4))));
    } else {
      if (!need(9)) return false;
      ++p_;
      const double d = std::bit_cast<double>(load_be_width(8));
      if (std::isfinite(d) && (d > std::numeric_limits<T>::max() || d < std::numeric_limits<T>::lowest()))
        return fail_at(start, Code::data_loss, std::to_string(d) + " is out of range for a float");
      out = static_cast<T>(d);
    }
    return true;
  }

  /// Skips one value of any kind (an unknown field), within the nesting bound.
  bool skip() {
    if (p_ == end_) return wrong_type("a value");
    const std::uint8_t b = *p_;
    std::uint64_t items = 0;  // nested values that follow
    std::uint32_t n = 0;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
      ++p_;
      return true;
    }
    if ((b & 0xe0) == 0xa0 || (b >= 0xd9 && b <= 0xdb)) {
      std::string_view s;
      return read_str(s);
    }
    if (b >= 0xc4 && b <= 0xc6) {
      std::span<const std::uint8_t> bytes;
      return read_bin(bytes);
    }
    if (at_kind(0x90)) {
      if (!read_header(n, 0x90, 0xdc, 1, "an array")) return false;
      items = n;
    } else if (at_kind(0x80)) {
      if (!read_header(n, 0x80, 0xde, 2, "a map")) return false;
      items = 2ull * n;
    } else {
      const std::uint8_t* start = p_;
      std::size_t size = 0;  // bytes after the opcode
      switch (b) {
        case 0xcc:
        case 0xd0:
          size = 1;
          break;
        case 0xcd:
        case 0xd1:
          size = 2;
          break;
        case 0xca:
        case 0xce:
        case 0xd2:
          size = 4;
          break;
        case 0xcb:
        case 0xcf:
        case 0xd3:
          size = 8;
          break;
        case 0xd4:
          size = 2;
          break;  // fixext 1..16: type byte + data
        case 0xd5:
          size = 3;
          break;
        case 0xd6:
          size = 5;
          break;
        case 0xd7:
          size = 9;
          break;
        case 0xd8:
          size = 17;
          break;
        case 0xc7:
        case 0xc8:
        case 0xc9: {  // ext 8/16/32: length, type byte, data
          ++p_;
          if (!read_sized(n, 1 << (b - 0xc7)) || !need(1)) return false;
          ++p_;
          if (!fits(n, 1, "an extension value", start)) return false;
          p_ += n;
          return true;
        }
        default:
          return fail(Code::data_loss, "the invalid byte 0xc1");
      }
      if (!need(1 + size)) return false;
      p_ += 1 + size;
      return true;
    }
    if (!enter()) return false;
    for (std::uint64_t i = 0; i < items; ++i)
      if (!skip()) return false;
    return leave();
  }

  // ---- containers ----

  // Any vector-like V (is_vector): uses only clear, resize, reserve, emplace_back and operator[].
  template <typename V>
  bool read_vector(V& out) {
    using E = typename V::value_type;
    if constexpr (std::is_same_v<E, std::uint8_t>) {
      std::span<const std::uint8_t> bytes;
      if (!read_bin(bytes)) return false;
      out.resize(bytes.size());
      if (!bytes.empty()) std::memcpy(&out[0], bytes.data(), bytes.size());
      return true;
    } else {
      std::uint32_t n = 0;
      if (!read_array_header(n) || !enter()) return false;
      out.clear();
      if constexpr (std::is_arithmetic_v<E> && !std::is_same_v<E, bool>) {
        // n <= remaining bytes, and each element is at most 8 bytes. Every element is written below
        // (or the read fails), so a SmallVector skips zero-filling them first.
        if constexpr (requires { out.resize_for_overwrite(n); })
          out.resize_for_overwrite(n);
        else
          out.resize(n);
        // A local cursor for small integers (ids, dimensions); anything else through read(). The
        // elements through a local pointer: a store through out[i] may alias out's own size fields.
        E* elements = out.data();
        const std::uint8_t* p = p_;
        for (std::uint32_t i = 0; i < n; ++i) {
          if constexpr (std::is_integral_v<E>) {
            if (decode_small(p, end_, elements[i])) [[likely]]
              continue;
          }
          p_ = p;
          if (!read(elements[i])) {
            out.resize(i);  // no unwritten element stays behind
            return in_element(i);
          }
          p = p_;
        }
        p_ = p;
      } else {
        // Reserve only what the remaining bytes could plausibly hold: an element needs at least
        // one byte on the wire, so a huge count is bounded by the input's size.
        const auto remain = static_cast<std::size_t>(end_ - p_);
        if (std::size_t{n} * sizeof(E) <= 16 * remain + 4096) out.reserve(n);
        for (std::uint32_t i = 0; i < n; ++i) {
          bool ok;
          if constexpr (std::is_same_v<E, bool>) {
            bool b = false;
            ok = read(b);
            out.emplace_back(b);
          } else if constexpr (Reflected<E>) {
            ok = read_struct(out.emplace_back());  // already fresh
          } else {
            ok = read(out.emplace_back());
          }
          if (!ok) return in_element(i);
        }
      }
      return leave();
    }
  }

  template <typename M>
  bool read_map(M& out) {
    std::uint32_t n = 0;
    if (!read_map_header(n) || !enter()) return false;
    out.clear();
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::uint8_t* start = p_;
      typename M::key_type key{};
      if (!read(key)) return in_element(i);
      auto [it, fresh] = out.try_emplace(std::move(key));
      if (!fresh) {
        fail_at(start, Code::data_loss, "a repeated map key");
        return in_key(it->first);
      }
      if (!read(it->second)) return in_key(it->first);
    }
    return leave();
  }
  template <typename K>
  [[gnu::cold]] bool in_key(const K& key) {
    if constexpr (std::is_convertible_v<const K&, std::string_view>) {
      path_.push_back("[\"" + std::string(std::string_view(key)) + "\"]");
    } else if constexpr (std::is_integral_v<K>) {
      path_.push_back("[" + std::to_string(key) + "]");
    } else {
      path_.push_back("[<key>]");
    }
    return false;
  }

  template <typename V>
  bool read_variant(V& out) {
    const std::uint8_t* start = p_;
    std::uint32_t n = 0;
    if (!read_array_header(n)) return false;
    if (n != 2) return fail_at(start, Code::data_loss, "a variant must be [alternative, value]");
    std::uint32_t index = 0;
    if (!read(index) || !enter()) return false;
    constexpr std::size_t count = std::variant_size_v<V>;
    if (index >= count)
      return fail_at(start, Code::data_loss,
                     "variant alternative " + std::to_string(index) + " is unknown (this reader has " +
                         std::to_string(count) + ")");
    return read_alternative(out, index, std::make_index_sequence<count>{}) && leave();
  }
  template <typename V, std::size_t... I>
  bool read_alternative(V& out, std::size_t index, std::index_sequence<I...>) {
    return ((index != I || read(out.template emplace<I>())) && ...);
  }

  // ---- shared objects ----

  // Reads `{"ref": n}` (checks n names an earlier object), or `{"id": n, "type": t, "fields": `
  // (checks n is the next id) and stops before the fields' value.
  bool read_shared_header(SharedHeader& h) {
    const std::uint8_t* start = p_;
    std::uint32_t n = 0;
    std::string_view key;
    // `{"ref": ` as the writer writes it, matched as raw bytes (tied weights make refs common).
    const bool ref = static_cast<std::size_t>(end_ - p_) >= ref_prefix.size() &&
                     std::memcmp(p_, ref_prefix.data(), ref_prefix.size()) == 0;
    if (ref) {
      p_ += ref_prefix.size();
    } else if (!read_map_header(n) || !read_str(key)) {
      return false;
    }
    if (ref || key == key_ref) {
      if (!ref && n != 1) return fail_at(start, Code::data_loss, "a {\"ref\": n} map has other keys");
      h.is_ref = true;
      if (!read(h.id)) return false;
      if (h.id >= objects_.size())
        return fail_at(start, Code::data_loss,
                       "ref " + std::to_string(h.id) + " names no earlier object (" + std::to_string(objects_.size()) +
                           " defined so far)");
      return true;
    }
    if (key != key_id || n != 3)
      return fail_at(start, Code::data_loss, "a shared object must be {\"id\", \"type\", \"fields\"} or {\"ref\"}");
    if (!read(h.id)) return false;
    if (h.id != objects_.size())
      return fail_at(start, Code::data_loss,
                     h.id < objects_.size() ? "object id " + std::to_string(h.id) + " is used twice"
                                            : "object id " + std::to_string(h.id) + " is out of sequence (expected " +
                                                  std::to_string(objects_.size()) + ")");
    if (!read_str(key) || key != key_type || !read_str(h.type))
      return fail_at(start, Code::data_loss, "a shared object needs \"type\" after \"id\"");
    if (!read_str(key) || key != key_fields)
      return fail_at(start, Code::data_loss, "a shared object needs \"fields\" after \"type\"");
    return true;
  }

  template <typename T>
  bool read_shared(std::shared_ptr<T>& out) {
    using U = std::remove_cv_t<T>;
    if (p_ < end_ && *p_ == 0xc0) {
      ++p_;
      out.reset();
      return true;
    }
    const std::uint8_t* start = p_;
    SharedHeader h;
    if (!at_kind(0x80, "a shared object (map) or nil") || !enter() || !read_shared_header(h)) return false;
    if (h.is_ref) {
      const SharedObject& o = objects_[h.id];
      if constexpr (std::is_polymorphic_v<U>) {
        const auto& registry = read_registry<U>();
        const auto it = registry.find(o.name);
        if (it != registry.end() && *it->second.type == *o.type) {
          out = std::shared_ptr<T>(o.object, it->second.upcast(o.object.get()));
          return leave();
        }
      }
      if (*o.type != typeid(U))
        return fail_at(start, Code::data_loss,
                       "ref " + std::to_string(h.id) + " names a " + std::string(o.name) + ", not a " +
                           std::string(serial_type_name<U>()));
      out = std::static_pointer_cast<U>(o.object);
      return leave();
    }
    if constexpr (std::is_polymorphic_v<U>) {
      const auto& registry = read_registry<U>();
      if (const auto it = registry.find(h.type); it != registry.end()) {
        std::shared_ptr<void> object = it->second.create();
        objects_.push_back({object, it->second.type, h.type, 0});
        if (!it->second.read_fields(*this, object.get())) return false;
        out = std::shared_ptr<T>(object, it->second.upcast(object.get()));
        return leave();
      }
      if constexpr (!Reflected<U> || std::is_abstract_v<U>) {
        return unknown_type<U>(start, h.type);
      } else if (h.type != serial_type_name<U>()) {
        return unknown_type<U>(start, h.type);
      }
    }
    if constexpr (Reflected<U> && !std::is_abstract_v<U>) {
      static_assert(std::is_default_constructible_v<U>,
                    "rml: deserialize: a shared_ptr<T> field needs a "
                    "default-constructible T");
      auto object = std::make_shared<U>();
      objects_.push_back({object, &typeid(U), h.type, 0});
      if (!read_struct(*object)) return false;
      out = std::move(object);
      return leave();
    } else {
      return false;
    }
  }

  template <typename U>
  [[gnu::cold]] bool unknown_type(const std::uint8_t* start, std::string_view name) {
    return fail_at(start, Code::invalid_argument,
                   "unknown type name \"" + std::string(name) +
                       "\" (no type of that name is registered for shared_ptr<" +
                       std::string(unqualified_type_name<U>()) + ">)");
  }

  // ---- tensors ----

  // nil, [dtype, shape, data] (version 2; later elements skipped), or {"dtype", "shape", "data"} (version 1).
  bool read_tensor(Tensor& out) {
    if (p_ < end_ && *p_ == 0xc0) {
      ++p_;
      out = Tensor();
      return true;
    }
    const std::uint8_t* start = p_;
    DType dtype = DType::f32;
    Dims dims;
    std::shared_ptr<const Storage> storage;
    std::size_t size = 0;
    std::uint32_t n = 0;
    if (at_kind(0x90)) {
      if (!read_array_header(n) || !enter()) return false;
      if (n < 3) return fail_at(start, Code::data_loss, "a tensor needs [dtype, shape, data]");
      if (!read(dtype)) return in_field("dtype");
      if (!read(dims)) return in_field("shape");
      if (!read_storage(storage, size)) return in_field("data");
      for (std::uint32_t i = 3; i < n; ++i)
        if (!skip()) return in_extra_field(i);
    } else {
      if (!at_kind(0x80, "a tensor (array or map) or nil") || !read_map_header(n) || !enter()) return false;
      bool have_dtype = false;
      bool have_shape = false;
      for (std::uint32_t i = 0; i < n; ++i) {
        std::string_view key;
        if (!read_str(key)) return false;
        bool ok = true;
        if (key == "dtype")
          ok = have_dtype = read(dtype);
        else if (key == "shape")
          ok = have_shape = read(dims);
        else if (key == "data")
          ok = read_storage(storage, size);
        else
          ok = skip();
        if (!ok) return in_field(key);
      }
      if (!have_dtype || !have_shape || !storage)
        return fail_at(start, Code::data_loss, "a tensor needs \"dtype\", \"shape\" and \"data\"");
    }
    TensorType type{dtype, Shape(std::move(dims))};
    const auto nbytes = type.checked_nbytes();
    if (!nbytes) return fail_at(start, Code::data_loss, "invalid tensor shape " + type.shape.to_string());
    if (static_cast<std::uint64_t>(*nbytes) != size)
      return fail_at(start, Code::data_loss,
                     "a " + type.to_string() + " tensor needs " + std::to_string(*nbytes) + " bytes, its data has " +
                         std::to_string(size));
    out = Tensor::view(std::move(type), std::move(storage), 0);
    return leave();
  }

  bool read_storage(std::shared_ptr<const Storage>& out, std::size_t& size) {
    const std::uint8_t* start = p_;
    SharedHeader h;
    if (!at_kind(0x80, "tensor data ({\"id\"...} or {\"ref\": n})") || !read_shared_header(h)) return false;
    if (h.is_ref) {
      const SharedObject& o = objects_[h.id];
      if (*o.type != typeid(Storage))
        return fail_at(start, Code::data_loss,
                       "ref " + std::to_string(h.id) + " names a " + std::string(o.name) + ", not tensor data");
      out = std::static_pointer_cast<const Storage>(o.object);
      size = o.size;
      return true;
    }
    if (h.type != storage_type_name)
      return fail_at(start, Code::data_loss, "tensor data has type \"" + std::string(h.type) + "\", not \"Storage\"");
    std::span<const std::uint8_t> bytes;
    if (!read_bin(bytes)) return false;
    std::shared_ptr<Storage> storage = BufferStorage::allocate(bytes.size());
    if (!bytes.empty()) std::memcpy(storage->data(), bytes.data(), bytes.size());
    objects_.push_back({std::shared_ptr<void>(storage), &typeid(Storage), storage_type_name, bytes.size()});
    out = std::move(storage);
    size = bytes.size();
    return true;
  }

  const std::uint8_t* begin_;
  const std::uint8_t* p_;
  const std::uint8_t* end_;
  int depth_ = 0;
  std::vector<SharedObject> objects_;
  // The failure: code, message, offset, and the path segments pushed while unwinding (innermost first).
  Code code_ = Code::ok;
  std::string what_;
  std::size_t fail_offset_ = 0;
  std::vector<std::string> path_;
};

}  // namespace rml::baseline_serial
