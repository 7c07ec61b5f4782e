// Files for rml/io: a read-only memory mapping that tensors can share, whole-file reads, and
// writes that replace a file only once its new contents are complete.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define RML_HAVE_MMAP 1
#else
#include <fstream>
#define RML_HAVE_MMAP 0
#endif

#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"

namespace rml::detail {

/// A whole file mapped read-only. Tensors loaded from it hold a shared_ptr to it, so the
/// mapping lives as long as any of them. Where mmap is missing, the bytes are read instead.
class MappedFile final : public Storage {
 public:
  ~MappedFile() override {
#if RML_HAVE_MMAP
    if (mapped_) ::munmap(data(), size());
#endif
  }

  /// Maps `path`. NOT_FOUND when it does not exist; INVALID_ARGUMENT when it is not a regular file.
  static Result<std::shared_ptr<MappedFile>> open(const std::filesystem::path& path) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status)) return not_found(path.string() + ": no such file");
    if (std::filesystem::is_directory(status)) return invalid_argument(path.string() + ": is a directory, not a file");
    if (!std::filesystem::is_regular_file(status)) return invalid_argument(path.string() + ": is not a regular file");
#if RML_HAVE_MMAP
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return not_found(path.string() + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return data_loss(path.string() + ": cannot stat: " + why);
    }
    const auto size = static_cast<std::size_t>(st.st_size);
    void* p = nullptr;
    if (size > 0) {
      p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        return data_loss(path.string() + ": cannot map: " + why);
      }
    }
    ::close(fd);
    return std::shared_ptr<MappedFile>(new MappedFile(static_cast<std::byte*>(p), size, size > 0));
#else
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) return not_found(path.string() + ": cannot open");
    const auto size = static_cast<std::size_t>(in.tellg());
    auto buffer = BufferStorage::allocate(size);
    in.seekg(0);
    in.read(reinterpret_cast<char*>(buffer->data()), static_cast<std::streamsize>(size));
    if (!in) return data_loss(path.string() + ": read failed");
    return std::shared_ptr<MappedFile>(new MappedFile(std::move(buffer)));
#endif
  }

 private:
  MappedFile(std::byte* p, std::size_t size, bool mapped) noexcept : Storage(p, size, false), mapped_(mapped) {}
#if !RML_HAVE_MMAP
  explicit MappedFile(std::shared_ptr<BufferStorage> buffer) noexcept
      : Storage(buffer->data(), buffer->size(), false), buffer_(std::move(buffer)) {}
  std::shared_ptr<BufferStorage> buffer_;
#endif
  bool mapped_ = false;
};

/// The whole file as a string. NOT_FOUND when missing, INVALID_ARGUMENT when a directory.
inline Result<std::string> read_file(const std::filesystem::path& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return not_found(path.string() + ": no such file");
  if (std::filesystem::is_directory(status)) return invalid_argument(path.string() + ": is a directory, not a file");
  std::FILE* f = std::fopen(path.string().c_str(), "rb");
  if (!f) return not_found(path.string() + ": cannot open: " + std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return data_loss(path.string() + ": read failed");
  return out;
}

/// Writes a file through a temporary beside it and a rename, so a failure leaves the old file.
/// `write(FILE*)` returns false on failure.
template <typename Writer>
Status write_file_atomically(const std::filesystem::path& path, Writer&& write) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  std::FILE* f = std::fopen(tmp.string().c_str(), "wb");
  if (!f) return invalid_argument(path.string() + ": cannot write: " + std::strerror(errno));
  bool ok = write(f);
  ok = (std::fflush(f) == 0) && ok;
  ok = (std::fclose(f) == 0) && ok;
  std::error_code ec;
  if (!ok) {
    std::filesystem::remove(tmp, ec);
    return data_loss(path.string() + ": write failed");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return invalid_argument(path.string() + ": cannot replace: " + ec.message());
  }
  return {};
}

}  // namespace rml::detail
