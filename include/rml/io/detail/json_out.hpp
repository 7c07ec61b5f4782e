// A small JSON text writer for rml/io: escaped strings, round-tripping numbers.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace rml::detail {

inline void json_append_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

inline void json_append_int(std::string& out, std::int64_t v) { out += std::to_string(v); }

/// A finite double in the shortest form that reads back exactly, always with a '.' or an
/// exponent so that readers see a float. The caller has checked std::isfinite.
inline void json_append_double(std::string& out, double v) {
  char buf[40];
  for (int precision = 9; precision <= 17; precision += 8) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string_view s(buf);
  out += s;
  if (s.find_first_of(".eEn") == std::string_view::npos) out += ".0";
}

/// A float written so that it reads back as the same float.
inline void json_append_float(std::string& out, float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  std::string_view s(buf);
  out += s;
  if (s.find_first_of(".eEn") == std::string_view::npos) out += ".0";
}

}  // namespace rml::detail
