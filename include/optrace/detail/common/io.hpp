// optrace/detail/common/io.hpp: whole-file reads, read-only file mappings and atomic writes
#pragma once

#include <optrace/error.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace optrace::detail {

/// The whole file at `path`. `spare` bytes of capacity are reserved after its end (a simdjson
/// parser's padding), so the caller can parse it in place with one allocation and no copy.
inline std::string read_file(const std::string& path, size_t spare = 0) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  OPTRACE_CHECK(f != nullptr, IoError, "cannot open '", path, "' for reading: ", std::strerror(errno));
  std::string data;
  if (std::fseek(f, 0, SEEK_END) == 0) {
    long size = std::ftell(f);
    if (size > 0) data.reserve(static_cast<size_t>(size) + spare);
    std::fseek(f, 0, SEEK_SET);
  }
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) data.append(buffer, n);
  bool failed = std::ferror(f) != 0;
  std::fclose(f);
  OPTRACE_CHECK(!failed, IoError, "error while reading '", path, "'");
  return data;
}

/// Writes `content` to `path` so that readers see the old file or the whole new one, never a
/// part: write a temporary file beside it, flush it to disk, then rename it over `path`.
inline void write_file_atomic(const std::string& path, std::string_view content) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  OPTRACE_CHECK(fd >= 0, IoError, "cannot create '", tmp, "': ", std::strerror(errno));
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      raise<IoError>("cannot write '", tmp, "': ", std::strerror(err));
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  int synced = ::fsync(fd);
  int sync_err = errno;
  int closed = ::close(fd);
  if (synced != 0 || closed != 0) {
    int err = synced != 0 ? sync_err : errno;
    ::unlink(tmp.c_str());
    raise<IoError>("cannot flush '", tmp, "': ", std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    raise<IoError>("cannot rename '", tmp, "' to '", path, "': ", std::strerror(err));
  }
}

/// A file mapped read-only into memory, followed by at least `spare` readable bytes (zeros),
/// which simdjson needs past the text. Mapping instead of reading spares a copy of the whole file
/// and the page faults of a fresh buffer. `data()` is null when the file cannot be mapped (not a
/// regular file, empty, mmap refused): read it instead.
class MappedFile {
 public:
  MappedFile(const std::string& path, size_t spare = 64) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
      size_t size = static_cast<size_t>(st.st_size);
      size_t mapped = (size + page - 1) / page * page;
      size_t total = (size + spare + page - 1) / page * page;
      // Reserve the whole span as zero pages, then put the file over its start: the bytes after
      // the file's end, in its last page and the pages after, read as zeros.
      void* region = ::mmap(nullptr, total, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (region != MAP_FAILED) {
        void* file = ::mmap(region, mapped, PROT_READ, MAP_PRIVATE | MAP_FIXED | MAP_POPULATE, fd, 0);
        if (file == MAP_FAILED) {
          ::munmap(region, total);
        } else {
          data_ = static_cast<const char*>(region);
          size_ = size;
          total_ = total;
        }
      }
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<char*>(data_), total_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return data_; }
  size_t size() const { return size_; }
  /// Readable bytes from data(): size() plus the spare ones.
  size_t capacity() const { return total_; }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0, total_ = 0;
};

}  // namespace optrace::detail
