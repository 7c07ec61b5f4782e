// Reading and replacing a whole file, declared apart from rml/io/detail/file.hpp: code that needs
// only these (rml/serial) does not compile the file layer where its definitions are split off
// (see rml/core/linkage.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "rml/core/linkage.hpp"
#include "rml/core/status.hpp"

namespace rml::detail {

/// detail::check_output_path: INVALID_ARGUMENT, naming `what`, for a path that names no file.
RML_SPLIT_API Status check_output_file(const std::filesystem::path& path, std::string_view what);

/// detail::read_file without a size bound.
RML_SPLIT_API Result<std::string> read_whole_file(const std::filesystem::path& path);

/// Replaces `path` with `bytes` through detail::write_file_atomically.
RML_SPLIT_API Status replace_file(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);

}  // namespace rml::detail

#if RML_SPLIT_DEFINED
#include "rml/io/detail/file.hpp"

namespace rml::detail {

RML_SPLIT_API Status check_output_file(const std::filesystem::path& path, std::string_view what) {
  return check_output_path(path, what);
}

RML_SPLIT_API Result<std::string> read_whole_file(const std::filesystem::path& path) { return read_file(path); }

RML_SPLIT_API Status replace_file(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  return write_file_atomically(path, [&](FileSink& sink) {
    sink.write(bytes.data(), bytes.size());
    return Status();
  });
}

}  // namespace rml::detail
#endif
