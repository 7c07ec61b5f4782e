// The MessagePack reader: pulls the tokens that msgpack-cxx's parser reports (rml/serial/detail/wire.hpp)
// and builds any reflected value over its field descriptors, restores shared objects and tensor
// storage, and names the path and byte offset of any fault.
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
// anything is allocated; nesting deeper than serial_max_depth (256) is refused (and never written);
// what the document builds in memory is charged against a budget proportional to its size
// (serial_memory_per_byte); a `ref` must name an object defined earlier; ids must come in sequence;
// a tensor's bytes must equal dtype x shape, and a bool tensor's bytes be 0 or 1.
#pragma once

#include <bit>
#include <bitset>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <variant>
#include <vector>

#include "rml/core/reflect.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"
#include "rml/serial/detail/common.hpp"
#include "rml/serial/detail/wire.hpp"

namespace rml::detail {

/// Decodes one document from a span of bytes it does not own (which outlives the reader).
/// Every read returns false on failure, after which status() says what and where.
class SerialReader {
 public:
  /// A heap block's bookkeeping, as the memory budget counts it for each allocation.
  static constexpr std::size_t heap_block = 32;

  explicit SerialReader(std::span<const std::uint8_t> bytes)
      : ts_(bytes.data(), bytes.size()),
        budget_(bytes.size() > (std::numeric_limits<std::size_t>::max() - serial_memory_base) / serial_memory_per_byte
                    ? std::numeric_limits<std::size_t>::max()
                    : serial_memory_per_byte * bytes.size() + serial_memory_base) {}

  /// Reads the envelope and its root into `out`, which must hold T's defaults. Never throws
  /// (whatever msgpack-cxx or an allocation throws becomes a status).
  template <typename T>
  bool read_document(T& out, std::string_view expected_type) noexcept {
    try {
      return read_envelope(out, expected_type);
    } catch (const std::bad_alloc&) {
      return fail(Code::data_loss, "out of memory");
    } catch (const std::exception& e) {
      return fail(Code::data_loss, std::string("malformed MessagePack (") + e.what() + ")");
    }
  }

  /// The failure: `<path>: <what> (at byte N)`, or OK.
  [[nodiscard]] Status status() const {
    if (code_ == Code::ok) return {};
    std::string path;
    for (auto it = path_.rbegin(); it != path_.rend(); ++it) path += *it;
    if (!path.empty() && path[0] == '.') path.erase(0, 1);
    if (path.empty()) path = "<root>";
    const std::size_t offset = fail_offset_known_ ? fail_offset_ : ts_.offset_of(fail_index_);
    return {code_,
            std::string(serial_format_name) + ": " + path + ": " + what_ + " (at byte " + std::to_string(offset) + ")"};
  }

  /// The bytes charged against the memory budget so far.
  std::size_t memory_charged() const noexcept { return charged_; }
  /// The budget: serial_memory_per_byte x the document's size + serial_memory_base.
  std::size_t memory_budget() const noexcept { return budget_; }

  // ---- values, by category ----

  template <typename T>
  [[gnu::always_inline]] bool read(T& out) {
    if constexpr (std::is_same_v<T, bool>) {
      const Token& t = ts_.peek();
      if (t.kind == Token::boolean) {
        out = t.v != 0;
        ts_.advance();
        return true;
      }
      return wrong_type("a bool");
    } else if constexpr (std::is_enum_v<T>) {
      using Raw = std::underlying_type_t<T>;
      const std::uint64_t start = ts_.index();
      Raw raw{};
      if (!read(raw)) return false;
      if constexpr (requires { T::count_; }) {
        if (raw < static_cast<Raw>(0) || raw >= static_cast<Raw>(T::count_)) [[unlikely]]
          return fail_at(start, Code::data_loss, "enum value " + std::to_string(raw) + " is out of range");
      }
      out = static_cast<T>(raw);
      return true;
    } else if constexpr (std::is_integral_v<T>) {
      const Token& t = ts_.peek();
      if (t.kind == Token::uint && t.v <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())) [[likely]] {
        out = static_cast<T>(t.v);
        ts_.advance();
        return true;
      }
      return read_integral(out);
    } else if constexpr (std::is_floating_point_v<T>) {
      return read_floating(out);
    } else if constexpr (std::is_same_v<T, std::string>) {
      std::string_view s;
      if (!read_str(s)) return false;
      if (s.size() > 15 && !charge(s.size() + 1 + heap_block)) return false;
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
      if (ts_.peek().kind == Token::nil) {
        ts_.advance();
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
  /// item's type (see the layout above).
  template <Reflected T>
  [[gnu::always_inline]] bool read_struct(T& obj) {
    const Token& t = ts_.peek();
    if (t.kind == Token::array) [[likely]] {
      std::uint32_t n = 0;
      if (!read_array_header(n)) return false;
      return read_positional(obj, n, std::make_index_sequence<field_count_v<T>>{});
    }
    if (t.kind == Token::map) return read_keyed(obj, std::make_index_sequence<field_count_v<T>>{});
    return wrong_type("a struct (array or map)");
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

  template <typename T>
  bool read_envelope(T& out, std::string_view expected_type) {
    std::uint32_t n = 0;
    std::string_view key;
    std::string_view format;
    if (ts_.peek().kind != Token::map || !read_map_header(n) || n < 2 || !read_str(key) || key != key_format ||
        !read_str(format) || format != serial_format_name)
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
    if (const Token& t = ts_.peek(); t.kind != Token::end || t.n != 0)
      return fail(Code::data_loss,
                  std::to_string(ts_.size() - ts_.offset_of(ts_.index())) + " bytes follow the document");
    return true;
  }

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

  // True when token `t` is the string `s`.
  bool is_str(const Token& t, std::string_view s) const noexcept {
    return t.kind == Token::str && t.n == s.size() &&
           (s.empty() || std::memcmp(ts_.data() + t.v, s.data(), s.size()) == 0);
  }

  // A version-1 struct: a map from field name to value. Keys in declaration order (what the
  // version-1 writer wrote) are matched in turn; anything else (unknown keys, another order) goes
  // through the general loop.
  template <Reflected T, std::size_t... I>
  bool read_keyed(T& obj, std::index_sequence<I...>) {
    static constexpr auto fields = T::fields();
    constexpr std::size_t count = sizeof...(I);
    std::uint32_t n = 0;
    if (!read_map_header(n) || !enter()) return false;
    std::bitset<count> seen;
    std::uint32_t done = 0;
    // Fast path: the keys the writer writes, in declaration order.
    const bool ok =
        ((done == n || !is_str(ts_.peek(), std::get<I>(fields).name) ||
          (ts_.advance(), seen.set(I), ++done, read_field<T, I>(obj) || in_field(std::get<I>(fields).name))) &&
         ...);
    if (!ok) return false;
    for (; done < n; ++done) {  // the rest: unknown keys, or keys in another order
      const std::uint64_t start = ts_.index();
      std::string_view key;
      if (!read_str(key)) return false;
      std::size_t index = count;
      (void)((std::get<I>(fields).name == key && (index = I, true)) || ...);
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

  [[gnu::cold]] bool fail(Code code, std::string what) { return fail_at(ts_.index(), code, std::move(what)); }
  // A failure about the item that is token `start` (the first failure wins).
  [[gnu::cold]] bool fail_at(std::uint64_t start, Code code, std::string what) {
    if (code_ == Code::ok) {
      code_ = code;
      what_ = std::move(what);
      fail_index_ = start;
    }
    return false;
  }
  [[gnu::cold]] bool fail_at_offset(std::size_t offset, Code code, std::string what) {
    if (code_ == Code::ok) {
      fail_offset_known_ = true;
      fail_offset_ = offset;
    }
    return fail_at(0, code, std::move(what));
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

  // Charges `bytes` of memory the document makes the reader build against the budget.
  [[gnu::always_inline]] bool charge(std::size_t bytes) {
    if (bytes <= budget_ - charged_) [[likely]] {
      charged_ += bytes;
      return true;
    }
    return over_budget(bytes);
  }
  [[gnu::cold, gnu::noinline]] bool over_budget(std::size_t bytes) {
    return fail(Code::data_loss, "the document would take more than " + std::to_string(budget_) + " bytes in memory (" +
                                     std::to_string(charged_) + " so far, " + std::to_string(bytes) +
                                     " more); the limit is " + std::to_string(serial_memory_per_byte) + " x its " +
                                     std::to_string(ts_.size()) + " bytes + " + std::to_string(serial_memory_base));
  }

  static const char* kind_name(const Token& t) {
    switch (t.kind) {
      case Token::nil:
        return "nil";
      case Token::boolean:
        return "a bool";
      case Token::uint:
      case Token::nint:
        return "an integer";
      case Token::f32:
      case Token::f64:
        return "a float";
      case Token::str:
        return "a string";
      case Token::bin:
        return "binary data";
      case Token::ext:
        return "an extension value";
      case Token::array:
        return "an array";
      case Token::map:
        return "a map";
      default:
        return "malformed data";
    }
  }
  // The next item is not `expected`: another type, the input's end, or malformed bytes.
  [[gnu::cold, gnu::noinline]] bool wrong_type(const char* expected) {
    const Token& t = ts_.peek();
    if (t.kind == Token::invalid) {
      if (t.n == 1)
        return fail_at_offset(t.v, Code::data_loss, "malformed MessagePack (msgpack-cxx: " + ts_.exception() + ")");
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(ts_.data()[t.v])));
      return fail_at_offset(t.v, Code::data_loss, std::string("the invalid byte ") + byte);
    }
    if (t.kind == Token::end) return truncated(expected);
    return fail(Code::data_loss, std::string("expected ") + expected + ", found " + kind_name(t));
  }
  // The input ends before or inside the next item. A string, blob or extension whose header
  // promises more bytes than remain is named with its length: msgpack-cxx only reports that it needs
  // more input, so the header is read here, for this message only.
  [[gnu::cold, gnu::noinline]] bool truncated(const char* expected) {
    const std::size_t start = ts_.offset_of(ts_.index());
    const std::size_t size = ts_.size();
    if (start < size) {
      const auto* p = reinterpret_cast<const unsigned char*>(ts_.data()) + start;
      const unsigned b = p[0];
      const char* what = nullptr;
      std::size_t width = 0;
      if (b >= 0xd9 && b <= 0xdb) {
        what = "a string";
        width = std::size_t{1} << (b - 0xd9);
      } else if (b >= 0xc4 && b <= 0xc6) {
        what = "binary data";
        width = std::size_t{1} << (b - 0xc4);
      } else if (b >= 0xc7 && b <= 0xc9) {
        what = "an extension value";
        width = std::size_t{1} << (b - 0xc7);
      }
      if (what != nullptr && size - start > width) {
        std::uint64_t n = 0;
        for (std::size_t i = 1; i <= width; ++i) n = n << 8 | p[i];
        return fail(Code::data_loss, std::string(what) + " of " + std::to_string(n) + " claims more than the " +
                                         std::to_string(size - start - 1 - width) + " bytes that remain");
      }
    }
    return fail(Code::data_loss, std::string("truncated: expected ") + expected);
  }

  // ---- items ----

  // Checks that `count` items of at least `min_bytes` each can follow the container header `t`
  // (whose offset is at least t.v), before anything is allocated for them.
  [[gnu::always_inline]] bool fits(const Token& t, std::uint64_t min_bytes, const char* what) {
    // Up to 15 items (a fixarray or fixmap) are checked as they are read.
    const std::uint64_t remain = ts_.size() - t.v - 1;     // at most what follows the header
    if (t.n < 16 || t.n * min_bytes <= remain) [[likely]]  // n < 2^32, min_bytes <= 2: no overflow
      return true;
    return too_long(t.n, what);
  }
  [[gnu::cold, gnu::noinline]] bool too_long(std::uint64_t count, const char* what) {
    const std::size_t after = ts_.offset_of(ts_.index() + 1);  // the header's end
    return fail(Code::data_loss, std::string(what) + " of " + std::to_string(count) + " claims more than the " +
                                     std::to_string(ts_.size() - after) + " bytes that remain");
  }
  bool read_map_header(std::uint32_t& n) { return read_header(n, Token::map, 2, "a map"); }
  bool read_array_header(std::uint32_t& n) { return read_header(n, Token::array, 1, "an array"); }
  // A container header of `kind` whose `n` items of at least `min_bytes` each fit in what remains.
  [[gnu::always_inline]] bool read_header(std::uint32_t& n, Token::Kind kind, std::uint64_t min_bytes,
                                          const char* what) {
    const Token& t = ts_.peek();
    if (t.kind != kind) [[unlikely]]
      return wrong_type(what);
    if (!fits(t, min_bytes, what)) return false;
    n = t.n;
    ts_.advance();
    return true;
  }
  [[gnu::always_inline]] bool read_str(std::string_view& s) {
    const Token& t = ts_.peek();
    if (t.kind != Token::str) [[unlikely]]
      return wrong_type("a string");
    s = {ts_.data() + t.v, t.n};
    ts_.advance();
    return true;
  }
  bool read_bin(std::span<const std::uint8_t>& out) {
    const Token& t = ts_.peek();
    if (t.kind != Token::bin) [[unlikely]]
      return wrong_type("binary data");
    out = {reinterpret_cast<const std::uint8_t*>(ts_.data()) + t.v, t.n};
    ts_.advance();
    return true;
  }

  // Any integer, range-checked against T (the fast path in read() takes small unsigned values).
  template <typename T>
  [[gnu::noinline]] bool read_integral(T& out) {
    const Token& t = ts_.peek();
    if (t.kind == Token::uint) {
      if (t.v <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
        out = static_cast<T>(t.v);
        ts_.advance();
        return true;
      }
      return fail(Code::data_loss, std::to_string(t.v) + " is out of range for " + integer_name<T>());
    }
    if (t.kind == Token::nint) {
      const auto s = static_cast<std::int64_t>(t.v);
      if constexpr (std::is_signed_v<T>) {
        if (s >= static_cast<std::int64_t>(std::numeric_limits<T>::min())) {
          out = static_cast<T>(s);
          ts_.advance();
          return true;
        }
      }
      return fail(Code::data_loss, std::to_string(s) + " is out of range for " + integer_name<T>());
    }
    return wrong_type("an integer");
  }
  template <typename T>
  static std::string integer_name() {
    return std::string(std::is_signed_v<T> ? "int" : "uint") + std::to_string(8 * sizeof(T));
  }

  template <typename T>
  bool read_floating(T& out) {
    const Token& t = ts_.peek();
    if (t.kind == Token::f32) {
      out = static_cast<T>(std::bit_cast<float>(static_cast<std::uint32_t>(t.v)));
    } else if (t.kind == Token::f64) {
      const double d = std::bit_cast<double>(t.v);
      if (std::isfinite(d) && (d > std::numeric_limits<T>::max() || d < std::numeric_limits<T>::lowest()))
        return fail(Code::data_loss, std::to_string(d) + " is out of range for a float");
      out = static_cast<T>(d);
    } else {
      return wrong_type("a float");
    }
    ts_.advance();
    return true;
  }

  /// Skips one value of any kind (an unknown field), within the nesting bound.
  bool skip() {
    const Token& t = ts_.peek();
    std::uint64_t items = 0;  // nested values that follow
    std::uint32_t n = 0;
    switch (t.kind) {
      case Token::array:
        if (!read_array_header(n)) return false;
        items = n;
        break;
      case Token::map:
        if (!read_map_header(n)) return false;
        items = 2ull * n;
        break;
      case Token::end:
      case Token::invalid:
        return wrong_type("a value");
      default:
        ts_.advance();
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
      if (!read_bin(bytes) || !charge(bytes.size() + heap_block)) return false;
      out.resize(bytes.size());
      if (!bytes.empty()) std::memcpy(&out[0], bytes.data(), bytes.size());
      return true;
    } else {
      std::uint32_t n = 0;
      if (!read_array_header(n) || !enter()) return false;
      out.clear();
      if (n == 0) return leave();
      // n <= the bytes that remain (one at least per element), and what the elements take is
      // charged before anything is allocated for them.
      if (!charge(std::size_t{n} * sizeof(E) + heap_block)) return false;
      if constexpr (std::is_arithmetic_v<E> && !std::is_same_v<E, bool>) {
        // Every element is written below (or the read fails), so a SmallVector skips zero-filling
        // them first.
        if constexpr (requires { out.resize_for_overwrite(n); })
          out.resize_for_overwrite(n);
        else
          out.resize(n);
        // The elements through a local pointer: a store through out[i] may alias out's own size fields.
        E* elements = out.data();
        for (std::uint32_t i = 0; i < n; ++i) {
          if (!read(elements[i])) {
            out.resize(i);  // no unwritten element stays behind
            return in_element(i);
          }
        }
      } else {
        out.reserve(n);
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
    // A map entry: the key and value in a heap node of its own, with the tree's links.
    if (!charge(std::size_t{n} * (sizeof(typename M::value_type) + 2 * heap_block))) return false;
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::uint64_t start = ts_.index();
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
    const std::uint64_t start = ts_.index();
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
    const std::uint64_t start = ts_.index();
    std::uint32_t n = 0;
    std::string_view key;
    if (!read_map_header(n) || !read_str(key)) return false;
    if (key == key_ref) {
      if (n != 1) return fail_at(start, Code::data_loss, "a {\"ref\": n} map has other keys");
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
    const Token& t = ts_.peek();
    if (t.kind == Token::nil) {
      ts_.advance();
      out.reset();
      return true;
    }
    const std::uint64_t start = ts_.index();
    SharedHeader h;
    if (t.kind != Token::map) return wrong_type("a shared object (map) or nil");
    if (!enter() || !read_shared_header(h)) return false;
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
    if (!charge(sizeof(SharedObject))) return false;
    if constexpr (std::is_polymorphic_v<U>) {
      const auto& registry = read_registry<U>();
      if (const auto it = registry.find(h.type); it != registry.end()) {
        if (!charge(it->second.size + heap_block)) return false;
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
      if (!charge(sizeof(U) + heap_block)) return false;
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
  [[gnu::cold]] bool unknown_type(std::uint64_t start, std::string_view name) {
    return fail_at(start, Code::invalid_argument,
                   "unknown type name \"" + std::string(name) +
                       "\" (no type of that name is registered for shared_ptr<" +
                       std::string(unqualified_type_name<U>()) + ">)");
  }

  // ---- tensors ----

  // nil, [dtype, shape, data] (version 2; later elements skipped), or {"dtype", "shape", "data"} (version 1).
  bool read_tensor(Tensor& out) {
    const Token& t = ts_.peek();
    if (t.kind == Token::nil) {
      ts_.advance();
      out = Tensor();
      return true;
    }
    const std::uint64_t start = ts_.index();
    DType dtype = DType::f32;
    Dims dims;
    std::shared_ptr<const Storage> storage;
    std::size_t size = 0;
    std::uint32_t n = 0;
    if (t.kind == Token::array) {
      if (!read_array_header(n) || !enter()) return false;
      if (n < 3) return fail_at(start, Code::data_loss, "a tensor needs [dtype, shape, data]");
      if (!read(dtype)) return in_field("dtype");
      if (!read(dims)) return in_field("shape");
      if (!read_storage(storage, size)) return in_field("data");
      for (std::uint32_t i = 3; i < n; ++i)
        if (!skip()) return in_extra_field(i);
    } else {
      if (t.kind != Token::map) return wrong_type("a tensor (array or map) or nil");
      if (!read_map_header(n) || !enter()) return false;
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
    if (type.dtype == DType::boolean) {  // a byte other than 0 or 1 is not a bool: reading it is UB
      const auto* b = reinterpret_cast<const unsigned char*>(storage->data());
      for (std::size_t i = 0; i < size; ++i)
        if (b[i] > 1)
          return fail_at(start, Code::data_loss,
                         "a bool tensor's byte " + std::to_string(i) + " is " + std::to_string(b[i]) + ", not 0 or 1");
    }
    auto view = Tensor::try_view(std::move(type), std::move(storage), 0);
    if (!view.ok()) return fail_at(start, Code::data_loss, view.error().message());
    out = std::move(*view);
    return leave();
  }

  bool read_storage(std::shared_ptr<const Storage>& out, std::size_t& size) {
    const std::uint64_t start = ts_.index();
    SharedHeader h;
    if (ts_.peek().kind != Token::map) return wrong_type("tensor data ({\"id\"...} or {\"ref\": n})");
    if (!read_shared_header(h)) return false;
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
    if (!read_bin(bytes) || !charge(bytes.size() + sizeof(SharedObject) + 2 * heap_block)) return false;
    std::shared_ptr<Storage> storage = BufferStorage::allocate(bytes.size());
    if (!bytes.empty()) std::memcpy(storage->data(), bytes.data(), bytes.size());
    objects_.push_back({std::shared_ptr<void>(storage), &typeid(Storage), storage_type_name, bytes.size()});
    out = std::move(storage);
    size = bytes.size();
    return true;
  }

  TokenStream ts_;
  int depth_ = 0;
  std::vector<SharedObject> objects_;
  std::size_t budget_;
  std::size_t charged_ = 0;
  // The failure: code, message, the token it concerns (its offset is found when the status is
  // asked for) or its offset, and the path segments pushed while unwinding (innermost first).
  Code code_ = Code::ok;
  std::string what_;
  std::uint64_t fail_index_ = 0;
  bool fail_offset_known_ = false;
  std::size_t fail_offset_ = 0;
  std::vector<std::string> path_;
};

}  // namespace rml::detail
