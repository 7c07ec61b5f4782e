// A small JSON text writer for rml/io: escaped strings, and numbers that read back exactly in any
// locale (std::to_chars never consults the locale, unlike printf's "%g", which writes "5,5" under
// de_DE.UTF-8).
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace rml::detail {

inline void json_append_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (const auto u = static_cast<unsigned char>(c); u < 0x20) {
          out += "\\u00";
          out += hex[u >> 4];
          out += hex[u & 0xF];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

/// The largest magnitude an i64 may have to be written as a JSON number: readers hold JSON numbers
/// as doubles, which are exact for integers up to 2^53. Larger i64 constants go to the weights file.
inline constexpr std::int64_t kJsonExactInteger = std::int64_t{1} << 53;

/// Any integer, in decimal.
template <typename Int>
void json_append_integer(std::string& out, Int v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

inline void json_append_int(std::string& out, std::int64_t v) { json_append_integer(out, v); }

/// A finite float or double in the shortest form that reads back as the same value, always with a
/// '.' or an exponent so that readers see a float. The caller has checked std::isfinite.
template <typename Float>
void json_append_real(std::string& out, Float v) {
  char buf[40];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  const std::string_view s(buf, static_cast<std::size_t>(r.ptr - buf));
  out += s;
  if (s.find_first_of(".eEn") == std::string_view::npos) out += ".0";
}

inline void json_append_double(std::string& out, double v) { json_append_real(out, v); }
inline void json_append_float(std::string& out, float v) { json_append_real(out, v); }

/// A number as text for messages, locale-independent (`std::to_string(double)` follows the locale).
template <typename Number>
std::string number_text(Number v) {
  char buf[40];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return {buf, r.ptr};
}

}  // namespace rml::detail
