// Files for rml/io and rml/serial: reads that take only regular files and stop at their size, a
// read-only memory mapping that tensors share and that notices when its file shrinks, and writes
// that replace a file only once its new contents are complete and on disk.
//
// A write goes to a temporary beside the target, created exclusively (O_CREAT | O_EXCL |
// O_NOFOLLOW) under a name with 64 random bits, so a file or symlink planted at a guessable name
// is never opened, let alone followed; the temporary is fsynced, renamed over the target, and the
// directory is fsynced so that the rename itself survives a power loss.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define RML_HAVE_POSIX_FILES 1
#else
#include <fstream>
#define RML_HAVE_POSIX_FILES 0
#endif

#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"

namespace rml::detail {

/// `bytes` random bytes as lowercase hex, from the C++ library's random_device (the kernel's
/// generator on Linux). Should that fail, a mix of the clock, the process and a counter: names
/// made from it stay unique, if not secret.
inline std::string random_hex(std::size_t bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  std::uint64_t word = 0;
  bool device = true;
  std::random_device* rd = nullptr;
  try {
    static thread_local std::random_device source;
    rd = &source;
  } catch (...) {
    device = false;
  }
  static std::atomic<std::uint64_t> counter{0};
  std::uint64_t fallback = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                           (reinterpret_cast<std::uintptr_t>(&out) << 7) ^ (++counter * 0x9E3779B97F4A7C15ULL);
#if RML_HAVE_POSIX_FILES
  fallback ^= static_cast<std::uint64_t>(::getpid()) << 32;
#endif
  for (std::size_t i = 0; i < bytes; ++i) {
    if (i % 4 == 0) {
      word = 0;
      if (device) {
        try {
          word = (*rd)();
        } catch (...) {
          device = false;
        }
      }
      if (!device) {
        fallback ^= fallback << 13;  // xorshift64
        fallback ^= fallback >> 7;
        fallback ^= fallback << 17;
        word = fallback;
      }
    }
    const auto b = static_cast<unsigned>((word >> (8 * (i % 4))) & 0xFF);
    out += digits[b >> 4];
    out += digits[b & 0xF];
  }
  return out;
}

/// A path that a writer may create: not empty, and not naming a directory (`""`, `"dir/"`, `"."`).
inline Status check_output_path(const std::filesystem::path& path, std::string_view what) {
  if (path.empty()) return invalid_argument(std::string(what) + ": the path is empty; name a file, such as dir/model");
  const std::filesystem::path name = path.filename();
  if (name.empty() || name == "." || name == "..")
    return invalid_argument(std::string(what) + ": '" + path.string() + "' names a directory, not a file");
  return {};
}

inline std::filesystem::path parent_directory(const std::filesystem::path& path) {
  std::filesystem::path dir = path.parent_path();
  return dir.empty() ? std::filesystem::path(".") : dir;
}

#if RML_HAVE_POSIX_FILES

inline std::string errno_text(int err) { return std::strerror(err); }

/// An owned file descriptor.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
  FileDescriptor(FileDescriptor&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { reset(); }

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] explicit operator bool() const noexcept { return fd_ >= 0; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  /// close(2), reporting its error (a delayed write error surfaces here on some file systems).
  bool close() noexcept {
    const int fd = std::exchange(fd_, -1);
    return fd < 0 || ::close(fd) == 0;
  }

 private:
  int fd_ = -1;
};

inline const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/// A regular file opened for reading, and its size. NOT_FOUND when missing; INVALID_ARGUMENT for a
/// directory, FIFO, device or socket, which are refused before a byte is read: the path is checked
/// with stat(), opened with O_NONBLOCK (so a FIFO without a writer cannot block the open), and the
/// descriptor checked again with fstat() (so a swap between the two checks is caught).
struct OpenedFile {
  FileDescriptor fd;
  std::size_t size = 0;
};

inline Result<OpenedFile> open_regular_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  struct stat st {};
  if (::stat(name.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return not_found(name + ": no such file");
    return invalid_argument(name + ": cannot stat: " + errno_text(errno));
  }
  if (!S_ISREG(st.st_mode)) return invalid_argument(name + ": is " + file_kind(st.st_mode) + ", not a regular file");
  FileDescriptor fd(::open(name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd) {
    if (errno == ENOENT) return not_found(name + ": no such file");
    return invalid_argument(name + ": cannot open: " + errno_text(errno));
  }
  if (::fstat(fd.get(), &st) != 0) return data_loss(name + ": cannot stat: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) return invalid_argument(name + ": is " + file_kind(st.st_mode) + ", not a regular file");
  if (st.st_size < 0 || static_cast<std::uint64_t>(st.st_size) > std::numeric_limits<std::size_t>::max() / 2)
    return invalid_argument(name + ": has an impossible size");
  return OpenedFile{std::move(fd), static_cast<std::size_t>(st.st_size)};
}

/// Reads exactly `size` bytes at `out` (the file's size when it was opened). DATA_LOSS when the
/// file ends sooner: it shrank while being read.
inline Status read_exactly(const OpenedFile& file, std::byte* out, const std::string& name) {
  std::size_t done = 0;
  while (done < file.size) {
    const std::size_t chunk = std::min<std::size_t>(file.size - done, std::size_t{1} << 30);
    const ssize_t n = ::pread(file.fd.get(), out + done, chunk, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return data_loss(name + ": read failed: " + errno_text(errno));
    }
    if (n == 0)
      return data_loss(name + ": shrank while being read (" + std::to_string(done) + " of " +
                       std::to_string(file.size) + " bytes)");
    done += static_cast<std::size_t>(n);
  }
  return {};
}

inline bool write_all(int fd, const void* data, std::size_t size) {
  const auto* p = static_cast<const std::byte*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, std::min<std::size_t>(size, std::size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

/// fsync() of a directory, so that renames and creations in it are durable. Best effort: some
/// file systems refuse to sync a directory (EINVAL), which is not an error of the write.
inline void sync_directory(const std::filesystem::path& dir) {
  FileDescriptor fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd) ::fsync(fd.get());
}

/// An exclusive advisory lock (flock) on a directory, held while a writer swaps a pair of files in
/// it, so that concurrent writers (threads or processes) commit their pairs one after the other.
/// Best effort: where the lock cannot be taken, the writer goes on without it.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::filesystem::path& dir)
      : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_)
      while (::flock(fd_.get(), LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  ~DirectoryLock() {
    if (fd_) ::flock(fd_.get(), LOCK_UN);
  }

 private:
  FileDescriptor fd_;
};

#endif  // RML_HAVE_POSIX_FILES

/// Where a writer puts its bytes: unbuffered (writers hand over large blocks).
class FileSink {
 public:
#if RML_HAVE_POSIX_FILES
  explicit FileSink(int fd) noexcept : fd_(fd) {}
  bool write(const void* data, std::size_t size) { return ok_ = ok_ && (size == 0 || write_all(fd_, data, size)); }
#else
  explicit FileSink(std::ofstream& out) noexcept : out_(&out) {}
  bool write(const void* data, std::size_t size) {
    out_->write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    return ok_ = ok_ && static_cast<bool>(*out_);
  }
#endif
  bool write(std::string_view s) { return write(s.data(), s.size()); }
  [[nodiscard]] bool ok() const noexcept { return ok_; }

 private:
#if RML_HAVE_POSIX_FILES
  int fd_;
#else
  std::ofstream* out_;
#endif
  bool ok_ = true;
};

/// A file written in full under a name no one else uses, waiting to be renamed into place; removed
/// on destruction unless committed. `write_staged_file` makes one.
class StagedFile {
 public:
  StagedFile() : pending_(false) {}
  StagedFile(std::filesystem::path staged, std::filesystem::path target)
      : staged_(std::move(staged)), target_(std::move(target)) {}
  StagedFile(StagedFile&& o) noexcept
      : staged_(std::move(o.staged_)), target_(std::move(o.target_)), pending_(std::exchange(o.pending_, false)) {}
  StagedFile& operator=(StagedFile&& o) noexcept {
    if (this != &o) {
      discard();
      staged_ = std::move(o.staged_);
      target_ = std::move(o.target_);
      pending_ = std::exchange(o.pending_, false);
    }
    return *this;
  }
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  ~StagedFile() { discard(); }

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return staged_; }
  [[nodiscard]] const std::filesystem::path& target() const noexcept { return target_; }

  /// Renames the staged file over its target (atomically: a reader sees the old file or the new one).
  Status commit() {
    std::error_code ec;
    std::filesystem::rename(staged_, target_, ec);
    if (ec) return invalid_argument(target_.string() + ": cannot replace: " + ec.message());
    pending_ = false;
    return {};
  }
  /// Keeps the staged file on destruction (it has been renamed, or must stay for readers).
  void keep() noexcept { pending_ = false; }
  void discard() noexcept {
    if (!pending_) return;
    std::error_code ec;
    std::filesystem::remove(staged_, ec);
    pending_ = false;
  }

 private:
  std::filesystem::path staged_;
  std::filesystem::path target_;
  bool pending_ = true;
};

/// Creates `staged` exclusively (never an existing file, never through a symlink), has
/// `write(FileSink&)` fill it, and flushes it to disk. `target` is where commit() renames it. On
/// any failure nothing is left behind. `write` returns false (or a failed Status) to abort.
template <typename Writer>
Result<StagedFile> write_staged_file(const std::filesystem::path& staged, const std::filesystem::path& target,
                                     Writer&& write) {
  const std::string name = target.string();
#if RML_HAVE_POSIX_FILES
  FileDescriptor fd(::open(staged.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd) return invalid_argument(name + ": cannot create " + staged.string() + ": " + errno_text(errno));
  StagedFile file(staged, target);
  FileSink sink(fd.get());
  Status written = write(sink);
  if (written.ok() && !sink.ok()) written = data_loss(name + ": write failed: " + errno_text(errno));
  if (written.ok() && ::fsync(fd.get()) != 0) written = data_loss(name + ": fsync failed: " + errno_text(errno));
  if (written.ok() && !fd.close()) written = data_loss(name + ": close failed: " + errno_text(errno));
  if (!written.ok()) return written;  // `file` removes the staged file
  return file;
#else
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(staged, ec)))
    return invalid_argument(name + ": cannot create " + staged.string() + ": it exists");
  std::ofstream out(staged, std::ios::binary | std::ios::trunc);
  if (!out) return invalid_argument(name + ": cannot create " + staged.string());
  StagedFile file(staged, target);
  FileSink sink(out);
  Status written = write(sink);
  out.close();
  if (written.ok() && (!sink.ok() || !out)) written = data_loss(name + ": write failed");
  if (!written.ok()) return written;
  return file;
#endif
}

/// The name of a temporary for `target`: `<target>.<16 random hex digits>.tmp`, in its directory.
inline std::filesystem::path temporary_name(const std::filesystem::path& target) {
  return std::filesystem::path(target.string() + "." + random_hex(8) + ".tmp");
}

inline void sync_parent_directory(const std::filesystem::path& path) {
#if RML_HAVE_POSIX_FILES
  sync_directory(parent_directory(path));
#else
  (void)path;
#endif
}

/// Replaces `path` with what `write(FileSink&)` produces (a Status), or leaves the old file as it
/// was: an exclusive temporary, fsync, rename, fsync of the directory. INVALID_ARGUMENT for a path
/// naming no file or a directory that cannot be written; DATA_LOSS when writing fails.
template <typename Writer>
Status write_file_atomically(const std::filesystem::path& path, Writer&& write) {
  RML_RETURN_IF_ERROR(check_output_path(path, "write"));
  RML_ASSIGN_OR_RETURN(StagedFile staged, write_staged_file(temporary_name(path), path, std::forward<Writer>(write)));
  RML_RETURN_IF_ERROR(staged.commit());
  sync_parent_directory(path);
  return {};
}

/// A whole file mapped read-only, or read into memory. Tensors loaded from it hold a shared_ptr to
/// it, so it lives as long as any of them.
///
/// A mapping keeps its file's descriptor, so verify() can compare the file's current size with
/// the mapped size: a file cut short after loading (truncate, or a writer that rewrites it in
/// place) would otherwise raise SIGBUS at the first read of a lost page. verify() is cheap (one
/// fstat) and is called where rml starts reading weights (Executor::create, serialize_to_file); a
/// file that shrinks *while* those bytes are being read can still raise SIGBUS: load with
/// `LoadOptions{.mmap = false}` to read the weights into memory when other processes may rewrite
/// the file in place. Files rml writes are always replaced by rename, which never shrinks a
/// mapped file.
class MappedFile final : public Storage {
 public:
  ~MappedFile() override {
#if RML_HAVE_POSIX_FILES
    if (mapped_) ::munmap(data(), size());
#endif
  }

  /// Maps (`map`) or reads `path`. NOT_FOUND when it does not exist; INVALID_ARGUMENT when it is
  /// not a regular file (a directory, FIFO or device is refused without reading).
  static Result<std::shared_ptr<MappedFile>> open(const std::filesystem::path& path, bool map = true) {
#if RML_HAVE_POSIX_FILES
    RML_ASSIGN_OR_RETURN(OpenedFile file, open_regular_file(path));
    const std::string name = path.string();
    if (!map || file.size == 0) {
      std::shared_ptr<BufferStorage> buffer;
      try {
        buffer = BufferStorage::allocate(file.size);
      } catch (const std::bad_alloc&) {
        return invalid_argument(name + ": " + std::to_string(file.size) + " bytes do not fit in memory");
      }
      RML_RETURN_IF_ERROR(read_exactly(file, buffer->data(), name));
      return std::shared_ptr<MappedFile>(new MappedFile(std::move(buffer), name));
    }
    void* p = ::mmap(nullptr, file.size, PROT_READ, MAP_PRIVATE, file.fd.get(), 0);
    if (p == MAP_FAILED) return data_loss(name + ": cannot map: " + errno_text(errno));
    return std::shared_ptr<MappedFile>(new MappedFile(static_cast<std::byte*>(p), file.size, std::move(file.fd), name));
#else
    (void)map;
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status)) return not_found(path.string() + ": no such file");
    if (!std::filesystem::is_regular_file(status)) return invalid_argument(path.string() + ": is not a regular file");
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) return not_found(path.string() + ": cannot open");
    const auto size = static_cast<std::size_t>(in.tellg());
    auto buffer = BufferStorage::allocate(size);
    in.seekg(0);
    in.read(reinterpret_cast<char*>(buffer->data()), static_cast<std::streamsize>(size));
    if (!in) return data_loss(path.string() + ": read failed");
    return std::shared_ptr<MappedFile>(new MappedFile(std::move(buffer), path.string()));
#endif
  }

  /// True when the bytes are a mapping of the file (not a copy in memory).
  [[nodiscard]] bool mapped() const noexcept { return mapped_; }

  /// DATA_LOSS, naming the file, when it is now shorter than its mapping.
  [[nodiscard]] Status verify() const override {
#if RML_HAVE_POSIX_FILES
    if (!mapped_) return {};
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0) return data_loss(path_ + ": cannot stat the mapped file: " + errno_text(errno));
    if (static_cast<std::uint64_t>(st.st_size) < size())
      return data_loss(path_ + ": the file shrank from " + std::to_string(size()) + " to " +
                       std::to_string(st.st_size) +
                       " bytes after it was loaded; its weights are lost: load the model again");
#endif
    return {};
  }

 private:
#if RML_HAVE_POSIX_FILES
  MappedFile(std::byte* p, std::size_t size, FileDescriptor fd, std::string path) noexcept
      : Storage(p, size, false), fd_(std::move(fd)), path_(std::move(path)), mapped_(true) {}
  FileDescriptor fd_;
#endif
  MappedFile(std::shared_ptr<BufferStorage> buffer, std::string path) noexcept
      : Storage(buffer->data(), buffer->size(), false), buffer_(std::move(buffer)), path_(std::move(path)) {}
  std::shared_ptr<BufferStorage> buffer_;
  std::string path_;
  bool mapped_ = false;
};

/// The whole of a regular file as a string. NOT_FOUND when missing; INVALID_ARGUMENT for a
/// directory, FIFO or device, or a file over `max_bytes`; DATA_LOSS when reading fails or the file
/// shrinks meanwhile (bytes appended meanwhile are not read).
inline Result<std::string> read_file(const std::filesystem::path& path,
                                     std::size_t max_bytes = std::numeric_limits<std::size_t>::max()) {
  const std::string name = path.string();
#if RML_HAVE_POSIX_FILES
  RML_ASSIGN_OR_RETURN(OpenedFile file, open_regular_file(path));
  if (file.size > max_bytes)
    return invalid_argument(name + ": " + std::to_string(file.size) + " bytes, over the limit of " +
                            std::to_string(max_bytes));
  std::string out;
  try {
    out.resize(file.size);
  } catch (const std::exception&) {
    return invalid_argument(name + ": " + std::to_string(file.size) + " bytes do not fit in memory");
  }
  RML_RETURN_IF_ERROR(read_exactly(file, reinterpret_cast<std::byte*>(out.data()), name));
  return out;
#else
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return not_found(name + ": no such file");
  if (!std::filesystem::is_regular_file(status)) return invalid_argument(name + ": is not a regular file");
  std::ifstream in(path, std::ios::binary);
  std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (out.size() > max_bytes) return invalid_argument(name + ": over the limit of " + std::to_string(max_bytes));
  return out;
#endif
}

}  // namespace rml::detail
