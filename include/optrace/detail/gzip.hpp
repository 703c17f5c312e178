// optrace/detail/gzip.hpp: whole-file reads that inflate gzip (zlib) transparently
#pragma once
// Profiler traces are often stored gzip-compressed (`*.pt.trace.json.gz`, as
// tensorboard_trace_handler(use_gzip=True) writes them). The file's magic bytes decide, not its
// name. Concatenated gzip members (what `cat a.gz b.gz` makes) are read as one stream, as gzip(1)
// does.

#include <optrace/detail/io.hpp>
#include <optrace/error.hpp>

#include <zlib.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace optrace::detail {

/// True when `data` starts with the gzip magic bytes.
inline bool is_gzip(std::string_view data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f && static_cast<unsigned char>(data[1]) == 0x8b;
}

/// Inflates the gzip stream `data`; `what` names it in errors. Throws IoError for corrupt or
/// truncated data.
inline std::string gunzip(std::string_view data, const std::string& what) {
  std::string out;
  out.resize(data.size() * 4 + 4096);
  z_stream z;
  std::memset(&z, 0, sizeof z);
  // 15 + 16: a gzip wrapper (not zlib's, not raw deflate).
  OPTRACE_CHECK(inflateInit2(&z, 15 + 16) == Z_OK, IoError, "cannot inflate '", what, "': zlib initialization failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());  // profiler traces stay far below 4 GiB compressed
  size_t produced = 0;
  for (;;) {
    if (produced == out.size()) out.resize(out.size() * 2);
    z.next_out = reinterpret_cast<Bytef*>(&out[produced]);
    z.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - produced, 1u << 30));
    uInt before = z.avail_out;
    int rc = inflate(&z, Z_NO_FLUSH);
    produced += before - z.avail_out;
    if (rc == Z_STREAM_END) {
      // Another member may follow (concatenated .gz files); anything else is trailing garbage.
      if (z.avail_in >= 2 && z.next_in[0] == 0x1f && z.next_in[1] == 0x8b) {
        inflateReset(&z);
        continue;
      }
      break;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && z.avail_in == 0) {
      inflateEnd(&z);
      raise<IoError>("cannot inflate '", what, "': the gzip data is truncated");
    }
    if (rc == Z_BUF_ERROR) continue;  // output buffer full: grow and go on
    std::string message = z.msg ? z.msg : "zlib error " + std::to_string(rc);
    inflateEnd(&z);
    raise<IoError>("cannot inflate '", what, "': ", message);
  }
  inflateEnd(&z);
  out.resize(produced);
  return out;
}

/// The contents of the file at `path`, inflated when it is gzip-compressed, with at least
/// `spare` bytes of capacity after its end (simdjson reads up to 64 bytes past the text).
/// Throws IoError.
inline std::string read_file_maybe_gzip(const std::string& path, size_t spare = 64) {
  std::string data;
  {
    // One allocation and one read for the whole file (read_file grows its buffer by chunks).
    std::FILE* f = std::fopen(path.c_str(), "rb");
    OPTRACE_CHECK(f != nullptr, IoError, "cannot open '", path, "' for reading: ", std::strerror(errno));
    long size = -1;
    if (std::fseek(f, 0, SEEK_END) == 0) size = std::ftell(f);
    std::fclose(f);
    if (size < 0) {
      data = read_file(path);  // not seekable (a pipe): read it by chunks
    } else {
      data.reserve(static_cast<size_t>(size) + spare);
      data.resize(static_cast<size_t>(size));
      f = std::fopen(path.c_str(), "rb");
      OPTRACE_CHECK(f != nullptr, IoError, "cannot open '", path, "' for reading: ", std::strerror(errno));
      size_t got = std::fread(&data[0], 1, data.size(), f);
      bool failed = std::ferror(f) != 0;
      std::fclose(f);
      OPTRACE_CHECK(!failed && got == data.size(), IoError, "error while reading '", path, "'");
    }
  }
  if (!is_gzip(data)) return data;
  return gunzip(data, path);
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
