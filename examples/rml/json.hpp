// A small JSON writer for the `rml` tool's `--json` output: objects, arrays, escaped strings
// and numbers through std::to_chars (shortest round-trip form, the same in every locale).
// A number that is NaN or infinite is written as null; the tool counts those separately.
#pragma once

#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <rml/io/detail/json_out.hpp>

namespace rml_cli {

class JsonWriter {
 public:
  JsonWriter& begin_object() { return open('{', false); }
  JsonWriter& end_object() { return close('}'); }
  /// An array; a flat one keeps its (scalar) elements on one line: `[2, 12]`.
  JsonWriter& begin_array(bool flat = false) { return open('[', flat); }
  JsonWriter& end_array() { return close(']'); }

  /// The key of the next member of the current object.
  JsonWriter& key(std::string_view name) {
    separate();
    rml::detail::json_append_string(out_, name);
    out_ += ": ";
    after_key_ = true;
    return *this;
  }

  JsonWriter& value(std::string_view text) {
    separate();
    rml::detail::json_append_string(out_, text);
    return *this;
  }
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(const std::string& text) { return value(std::string_view(text)); }
  JsonWriter& value(bool b) {
    separate();
    out_ += b ? "true" : "false";
    return *this;
  }
  JsonWriter& value(std::integral auto n) {
    separate();
    char buf[24];
    const auto end = std::to_chars(buf, buf + sizeof buf, n).ptr;
    out_.append(buf, end);
    return *this;
  }
  JsonWriter& value(double x) {
    separate();
    if (!std::isfinite(x)) {
      out_ += "null";
      return *this;
    }
    char buf[32];
    const auto end = std::to_chars(buf, buf + sizeof buf, x).ptr;
    out_.append(buf, end);
    return *this;
  }
  JsonWriter& value(float x) { return value(static_cast<double>(x)); }
  JsonWriter& null() {
    separate();
    out_ += "null";
    return *this;
  }

  /// `"name": value`.
  template <typename T>
  JsonWriter& member(std::string_view name, const T& v) {
    key(name);
    return value(v);
  }

  /// The document, ended by a newline.
  [[nodiscard]] std::string str() const { return out_ + "\n"; }

 private:
  struct Level {
    bool first = true;  // nothing written in it yet
    bool flat = false;
  };

  JsonWriter& open(char bracket, bool flat) {
    separate();
    out_ += bracket;
    levels_.push_back({true, flat});
    return *this;
  }
  JsonWriter& close(char bracket) {
    const Level level = levels_.back();
    levels_.pop_back();
    if (!level.first && !level.flat) newline();
    out_ += bracket;
    return *this;
  }
  // A comma before every element but the first, then the element on its own indented line (or
  // after a space, in a flat array).
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (levels_.empty()) return;
    Level& level = levels_.back();
    if (!level.first) out_ += level.flat ? ", " : ",";
    level.first = false;
    if (!level.flat) newline();
  }
  void newline() {
    out_ += '\n';
    out_.append(2 * levels_.size(), ' ');
  }

  std::string out_;
  std::vector<Level> levels_;
  bool after_key_ = false;
};

}  // namespace rml_cli
