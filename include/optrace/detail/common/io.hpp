// optrace/detail/common/io.hpp: whole-file reads, files in memory (mapped or read) and atomic writes
#pragma once

#include <optrace/error.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <string_view>
#include <utility>

#include <fcntl.h>
#include <ftw.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace optrace::detail {

/// A file descriptor, closed with its owner.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

/// Runs `f()`; an optrace::Error it throws leaves naming `path` as its file (Error::name_file),
/// and running out of memory reading it becomes an IoError naming it (not a bare
/// `std::bad_alloc` with no file: a huge token in a trace, a file read many times).
template <class F>
auto about_file(const std::string& path, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (Error& e) {
    e.name_file(path);
    throw;
  } catch (const std::bad_alloc&) {
    raise_about_file<IoError>(path, "not enough memory to read it");
  }
}

/// A descriptor of the regular file at `path`, open for reading, and its size. Throws IoError
/// naming the path for anything else: a directory, a FIFO (opened without blocking, and refused),
/// a device, a socket.
inline int open_regular_file(const std::string& path, size_t* size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) raise_about_file<IoError>(path, "cannot open '", path, "' for reading: ", std::strerror(errno));
  struct stat st {};
  const bool stated = ::fstat(fd, &st) == 0;
  if (!stated || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    const mode_t mode = st.st_mode;
    raise_about_file<IoError>(path, "cannot read '", path, "': ",
                              !stated                         ? std::strerror(err)
                              : S_ISDIR(mode)                 ? "it is a directory"
                              : S_ISFIFO(mode)                ? "it is a FIFO (a named pipe), not a regular file"
                              : S_ISCHR(mode) || S_ISBLK(mode) ? "it is a device, not a regular file"
                                                              : "it is not a regular file");
  }
  *size = static_cast<size_t>(st.st_size);
  return fd;
}

/// ::read of up to `n` bytes into `into`, again when a signal interrupts it: the bytes read, 0 at
/// the end of the file, -1 on an error (errno says which).
inline ssize_t read_some(int fd, char* into, size_t n) {
  for (;;) {
    const ssize_t got = ::read(fd, into, n);
    if (got >= 0 || errno != EINTR) return got;
  }
}

/// The rest of the file open at `fd` (left open), read to its end, into a std::string (or another
/// contiguous container of char: std::vector<char> is what torch::pickle_load takes); `path`
/// names it in errors. `spare` bytes of capacity are reserved after its end (a simdjson parser's
/// padding). A file of `size_hint` bytes is read into one buffer: one byte more is asked for, so
/// that the read that finds the end needs no larger one (growing it would copy the whole file).
template <class Bytes = std::string>
Bytes read_all(int fd, size_t size_hint, const std::string& path, size_t spare = 0) {
  Bytes data;
  data.reserve(size_hint + 1 + spare);
  data.resize(size_hint + 1);
  size_t got = 0;
  for (;;) {
    if (got == data.size()) data.resize(data.size() + (1 << 16));  // the file grew
    const ssize_t n = read_some(fd, &data[got], data.size() - got);
    if (n < 0) raise_about_file<IoError>(path, "error while reading '", path, "': ", std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  return data;
}

/// The whole regular file at `path`. `spare` bytes of capacity are reserved after its end (a
/// simdjson parser's padding), so the caller can parse it in place with one allocation and no
/// copy. Throws IoError naming the path (a directory, FIFO or device is refused, not read).
inline std::string read_file(const std::string& path, size_t spare = 0) {
  size_t size = 0;
  const Fd fd(open_regular_file(path, &size));
  return read_all(fd.get(), size, path, spare);
}

/// Writes all `n` bytes at `p` to `fd` (again when a signal interrupts a write): 0, or the errno
/// of the write that failed.
inline int write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : EIO;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

/// What writing a file does to a file already at its path.
enum class ExistingFile {
  Replace,  // the new file takes its place (atomically)
  Keep,     // the write fails with IoError and the file stays: what a running job's profiler
            // writes must never destroy a file (docs/on_demand.md)
};

/// Where a file is written: `name` in the folder open at `folder`, or, with AT_FDCWD, the path
/// `name` from the working folder; `shown` names it in messages. A folder held open keeps a write
/// where it was meant whatever is renamed or linked on the way meanwhile (beneath.hpp).
struct FileTarget {
  int folder = AT_FDCWD;
  std::string name, shown;
  static FileTarget path(const std::string& p) { return {AT_FDCWD, p, p}; }
};

/// A name for a temporary file beside `name` that nobody can guess ahead (a planted file or link
/// of that name would otherwise be written through): `name.tmp.<pid>.<16 random hex digits>`.
inline std::string temporary_name(const std::string& name) {
  static thread_local std::mt19937_64 random{std::random_device{}() ^ (uint64_t(::getpid()) << 32)};
  char suffix[17];
  std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(random()));
  return name + ".tmp." + std::to_string(::getpid()) + "." + suffix;
}

/// Whether a file can be made beside `name` (its folder exists and takes new files): 0, or the
/// errno why not. The probe is a temporary_name, created as write_file_atomic_with creates its
/// temporary file and removed: nothing planted under a fixed name is truncated or followed.
inline int can_create_beside(const FileTarget& target) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    const std::string probe = temporary_name(target.name);
    const int fd = ::openat(target.folder, probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd >= 0) {
      ::close(fd);
      ::unlinkat(target.folder, probe.c_str(), 0);
      return 0;
    }
    if (errno != EEXIST) return errno;
  }
  return EEXIST;
}

/// Writes to `target` what `produce` hands, piece by piece, to the sink it is given
/// (`produce(sink)`, `sink(std::string_view)`), so that readers see the old file or the whole new
/// one, never a part: write a temporary file beside it, flush it to disk, then rename it over the
/// target (ExistingFile::Keep: link it there, which fails where a file, or a link, already is).
/// The temporary file has a name nobody can guess (temporary_name) and is created, never opened:
/// O_EXCL and O_NOFOLLOW, so nothing planted under its name is written through. What `produce`
/// throws leaves no file. Throws IoError naming the target (Error::file).
template <class Produce>
void write_file_atomic_with(const FileTarget& target, Produce&& produce, ExistingFile existing = ExistingFile::Replace) {
  about_file(target.shown, [&] {
    int fd = -1;
    std::string tmp;
    for (int attempt = 0; fd < 0 && attempt < 8; ++attempt) {
      tmp = temporary_name(target.name);
      fd = ::openat(target.folder, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
      if (fd < 0 && errno != EEXIST) break;
    }
    const std::string tmp_shown = target.shown + tmp.substr(target.name.size());
    OPTRACE_CHECK(fd >= 0, IoError, "cannot create '", tmp_shown, "': ", std::strerror(errno));
    auto remove_tmp = [&] { ::unlinkat(target.folder, tmp.c_str(), 0); };
    auto fail = [&](const char* what, int err) {
      ::close(fd);
      remove_tmp();
      raise<IoError>("cannot ", what, " '", tmp_shown, "': ", std::strerror(err));
    };
    auto sink = [&](std::string_view content) {
      if (const int err = write_all(fd, content.data(), content.size())) fail("write", err);
    };
    try {
      produce(sink);
    } catch (const IoError&) {
      throw;
    } catch (...) {
      ::close(fd);
      remove_tmp();
      throw;
    }
    if (::fsync(fd) != 0) fail("flush", errno);
    if (::close(fd) != 0) {
      int err = errno;
      remove_tmp();
      raise<IoError>("cannot flush '", tmp_shown, "': ", std::strerror(err));
    }
    if (existing == ExistingFile::Keep) {
      const int linked = ::linkat(target.folder, tmp.c_str(), target.folder, target.name.c_str(), 0);
      const int err = errno;
      remove_tmp();
      if (linked != 0 && err == EEXIST) raise<IoError>("'", target.shown, "' exists and is kept: nothing replaces a file");
      if (linked != 0) raise<IoError>("cannot write '", target.shown, "': ", std::strerror(err));
      return;
    }
    if (::renameat(target.folder, tmp.c_str(), target.folder, target.name.c_str()) != 0) {
      int err = errno;
      remove_tmp();
      raise<IoError>("cannot rename '", tmp_shown, "' to '", target.shown, "': ", std::strerror(err));
    }
  });
}

/// write_file_atomic_with to the path `path`.
template <class Produce>
void write_file_atomic_with(const std::string& path, Produce&& produce, ExistingFile existing = ExistingFile::Replace) {
  write_file_atomic_with(FileTarget::path(path), std::forward<Produce>(produce), existing);
}

/// Writes `content` to `target` atomically (see write_file_atomic_with).
inline void write_file_atomic(const FileTarget& target, std::string_view content,
                              ExistingFile existing = ExistingFile::Replace) {
  write_file_atomic_with(target, [content](auto& sink) { sink(content); }, existing);
}
inline void write_file_atomic(const std::string& path, std::string_view content,
                              ExistingFile existing = ExistingFile::Replace) {
  write_file_atomic(FileTarget::path(path), content, existing);
}

/// Removes `path` and everything beneath it, following no link (a link is removed, not what it
/// names); true when nothing is left, or nothing was there. The one way optrace removes a tree,
/// for folders the process made itself: the walk goes by paths, so a folder that others may
/// write in could be swapped for a link between a look and a removal.
/// Not std::filesystem::remove_all: PyTorch's wheels (2.5 to at least 2.11, pytorch#133437)
/// export their own statically linked copy of it from libtorch.so, which a program linked to
/// libtorch binds first and which calls a weak symbol left null: the process crashes (seen on
/// torch 2.11.0+cu130, 2026-12-01).
inline bool remove_tree(const std::string& path) noexcept {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT;
  if (!S_ISDIR(st.st_mode)) return ::unlink(path.c_str()) == 0;
  // Depth first (a folder after what it holds), physical (links not followed).
  auto remove_one = [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p) == 0 ? 0 : -1; };
  return ::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0;
}

/// A regular file's bytes in memory, read-only, followed by at least `spare` readable zero bytes
/// (which simdjson needs past the text). Small files are read into a heap buffer, large ones
/// mapped: mapping costs two mmaps and an munmap (12 us against 4 us of reading a 22 KB file,
/// 14 against 6 at 100 KB), while past malloc's 128 KiB mmap threshold a fresh process's buffer is
/// new pages, each faulted in (139 us against a mapping's 15 at 300 KB): bench_file_bytes.
/// `data()` is null when the file cannot be had this way (not a regular file, empty, mmap or read
/// refused): read it with read_file instead, which names the problem.
class FileBytes {
 public:
  /// Files below this size are read, not mapped (their buffer stays under malloc's 128 KiB mmap
  /// threshold).
  static constexpr size_t kReadBelow = 120 * 1024;

  explicit FileBytes(const std::string& path, size_t spare = 64, size_t read_below = kReadBelow) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block here
    if (fd < 0) return;
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      const size_t size = static_cast<size_t>(st.st_size);
      if (size < read_below) read_small(fd, size, spare);
      else map(fd, size, spare);
    }
    ::close(fd);
  }
  ~FileBytes() {
    if (mapped()) ::munmap(data_, total_);
  }
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;

  const char* data() const { return data_; }
  /// The bytes may be written (the Kineto importer writes brackets between events to read a
  /// trace in pieces): a mapping is private, its written pages copies, the file never changes.
  char* data() { return data_; }
  size_t size() const { return size_; }
  bool mapped() const { return data_ != nullptr && read_ == nullptr; }
  /// Readable bytes from data(): size() plus the spare ones.
  size_t capacity() const { return total_; }

 private:
  void read_small(int fd, size_t size, size_t spare) {
    std::unique_ptr<char[]> buffer(new char[size + spare]);
    size_t got = 0;
    while (got < size) {
      const ssize_t n = read_some(fd, buffer.get() + got, size - got);
      if (n <= 0) return;  // an error, or the file shrank: read_file says what happened
      got += static_cast<size_t>(n);
    }
    std::memset(buffer.get() + size, 0, spare);
    read_ = std::move(buffer);
    data_ = read_.get();
    size_ = size;
    total_ = size + spare;
  }

  void map(int fd, size_t size, size_t spare) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t mapped = (size + page - 1) / page * page;
    const size_t total = (size + spare + page - 1) / page * page;
    // Reserve the whole span as zero pages, then put the file over its start: the bytes after
    // the file's end, in its last page and the pages after, read as zeros. Not MAP_POPULATE: the
    // kernel maps a cached file's pages 16 at a time as they are first read, which measured
    // faster (a 4 MB file: 91 us against 174 populated, bench_file_bytes; a 4.8 MB Kineto
    // import's load 0.1 ms faster).
    void* region = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) return;
    void* file = ::mmap(region, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, 0);
    if (file == MAP_FAILED) {
      ::munmap(region, total);
      return;
    }
    data_ = static_cast<char*>(region);
    size_ = size;
    total_ = total;
  }

  std::unique_ptr<char[]> read_;  // a small file's bytes; null when mapped
  char* data_ = nullptr;
  size_t size_ = 0, total_ = 0;
};

}  // namespace optrace::detail
