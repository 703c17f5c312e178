// optrace/detail/common/gzip.hpp: file reads that inflate gzip (zlib) transparently, whole or in pieces
#pragma once
// Profiler traces are often stored gzip-compressed (`*.pt.trace.json.gz`, as
// tensorboard_trace_handler(use_gzip=True) writes them). The file's magic bytes decide, not its
// name. Concatenated gzip members (what `cat a.gz b.gz` makes) are read as one stream, as gzip(1)
// does.

#include <optrace/detail/common/io.hpp>
#include <optrace/error.hpp>

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
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

/// `data` compressed as one gzip member (what gzip(1) writes at its default level 6).
inline std::string gzip(std::string_view data) {
  z_stream z;
  std::memset(&z, 0, sizeof z);
  // 15 + 16: a gzip wrapper; 8: zlib's default memory level.
  OPTRACE_CHECK(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK, IoError,
                "cannot compress: zlib initialization failed");
  std::string out;
  out.resize(deflateBound(&z, static_cast<uLong>(data.size())) + 64);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());  // callers' texts stay below 4 GiB
  z.next_out = reinterpret_cast<Bytef*>(&out[0]);
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);  // deflateBound: one call does it
  out.resize(z.total_out);
  deflateEnd(&z);
  OPTRACE_CHECK(rc == Z_STREAM_END, IoError, "cannot compress: zlib error ", rc);
  return out;
}

/// Whether `path` names a gzip-compressed file (ends in `.gz`).
inline bool gz_path(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

/// Writes `content` to `path` atomically (write_file_atomic), gzip-compressed when the path
/// ends in `.gz`.
inline void write_file_maybe_gzip(const FileTarget& target, std::string_view content,
                                  ExistingFile existing = ExistingFile::Replace) {
  if (gz_path(target.name)) write_file_atomic(target, gzip(content), existing);
  else write_file_atomic(target, content, existing);
}
inline void write_file_maybe_gzip(const std::string& path, std::string_view content,
                                  ExistingFile existing = ExistingFile::Replace) {
  write_file_maybe_gzip(FileTarget::path(path), content, existing);
}

/// The contents of the regular file at `path`, inflated when it is gzip-compressed, with at least
/// `spare` bytes of capacity after its end (simdjson reads up to 64 bytes past the text).
/// Throws IoError naming the path.
inline std::string read_file_maybe_gzip(const std::string& path, size_t spare = 64) {
  std::string data = read_file(path, spare);
  if (!is_gzip(data)) return data;
  return about_file(path, [&] { return gunzip(data, path); });
}

/// A regular file's bytes, front to back, in pieces of the caller's size, inflated as they are read
/// when the file is gzip-compressed (its magic bytes decide; concatenated members are one stream,
/// as gunzip reads them): what reads a trace of any size in bounded memory. Throws IoError naming
/// the path: the file cannot be opened or read, or its gzip data is corrupt or truncated.
class FileReader {
 public:
  explicit FileReader(const std::string& path) : path_(path), fd_(open_regular_file(path, &size_)) {
    std::memset(&z_, 0, sizeof z_);
    try {
      rewind();
    } catch (...) {
      ::close(fd_);
      throw;
    }
  }
  ~FileReader() {
    if (inflating_) inflateEnd(&z_);
    ::close(fd_);
  }
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  bool gzip() const { return gzip_; }
  /// The file's size on disk (compressed, for a gzip file).
  size_t file_size() const { return size_; }

  /// Up to `n` bytes of the (inflated) text into `into`: fewer only at its end, 0 after it.
  size_t read(char* into, size_t n) {
    size_t got = 0;
    if (!gzip_) {
      while (got < n && !done_) {
        const size_t k = fill_from_buffer(into + got, n - got);
        if (k > 0) {
          got += k;
          continue;
        }
        const ssize_t r = read_some(fd_, into + got, n - got);
        if (r < 0) fail_read();
        if (r == 0) done_ = true;
        got += static_cast<size_t>(r > 0 ? r : 0);
      }
      return got;
    }
    while (got < n && !done_) {
      if (z_.avail_in == 0 && !refill()) raise<IoError>("cannot inflate '", path_, "': the gzip data is truncated");
      z_.next_out = reinterpret_cast<Bytef*>(into + got);
      z_.avail_out = static_cast<uInt>(std::min<size_t>(n - got, 1u << 30));
      const uInt before = z_.avail_out;
      const int rc = inflate(&z_, Z_NO_FLUSH);
      got += before - z_.avail_out;
      if (rc == Z_STREAM_END) {
        // Another member may follow (concatenated .gz files); anything else is trailing garbage.
        if (z_.avail_in < 2) refill_keeping();
        if (z_.avail_in >= 2 && z_.next_in[0] == 0x1f && z_.next_in[1] == 0x8b) inflateReset(&z_);
        else done_ = true;
        continue;
      }
      if (rc == Z_OK || rc == Z_BUF_ERROR) continue;  // more input wanted (read above), or output full
      raise<IoError>("cannot inflate '", path_, "': ", z_.msg ? std::string(z_.msg) : "zlib error " + std::to_string(rc));
    }
    return got;
  }

  /// Back to the first byte (the trace is read again).
  void rewind() {
    if (::lseek(fd_, 0, SEEK_SET) != 0) fail_read();
    done_ = false;
    input_end_ = false;
    buffered_ = 0;
    if (!in_) in_.reset(new unsigned char[kInput]);
    // The first bytes tell a gzip file; a plain file's are handed out first by read().
    while (buffered_ < 2 && !input_end_) read_input(buffered_, 2);
    gzip_ = buffered_ >= 2 && in_[0] == 0x1f && in_[1] == 0x8b;
    if (!gzip_) {
      plain_at_ = 0;
      return;
    }
    if (inflating_) {
      inflateReset(&z_);
    } else {
      // 15 + 16: a gzip wrapper (not zlib's, not raw deflate).
      OPTRACE_CHECK(inflateInit2(&z_, 15 + 16) == Z_OK, IoError, "cannot inflate '", path_, "': zlib initialization failed");
      inflating_ = true;
    }
    z_.next_in = in_.get();
    z_.avail_in = static_cast<uInt>(buffered_);
  }

 private:
  static constexpr size_t kInput = 1 << 20;

  [[noreturn]] void fail_read() { raise<IoError>("error while reading '", path_, "': ", std::strerror(errno)); }

  // Appends what the file gives to in_[from..] (up to `most` bytes); the bytes in the buffer after it.
  void read_input(size_t from, size_t most = kInput) {
    const ssize_t r = read_some(fd_, reinterpret_cast<char*>(in_.get()) + from, std::min(most, kInput - from));
    if (r < 0) fail_read();
    if (r == 0) input_end_ = true;
    buffered_ = from + static_cast<size_t>(r);
  }
  // A plain file's bytes read by rewind(), handed out before the file's next ones.
  size_t fill_from_buffer(char* into, size_t n) {
    const size_t k = std::min(n, buffered_ - plain_at_);
    std::memcpy(into, in_.get() + plain_at_, k);
    plain_at_ += k;
    return k;
  }
  // New input for zlib; false at the file's end.
  bool refill() {
    if (input_end_) return false;
    read_input(0);
    z_.next_in = in_.get();
    z_.avail_in = static_cast<uInt>(buffered_);
    return buffered_ > 0;
  }
  // More input after what zlib has not taken yet (to see a next member's magic bytes).
  void refill_keeping() {
    const size_t left = z_.avail_in;
    std::memmove(in_.get(), z_.next_in, left);
    buffered_ = left;
    while (buffered_ < 2 && !input_end_) read_input(buffered_);
    z_.next_in = in_.get();
    z_.avail_in = static_cast<uInt>(buffered_);
  }

  std::string path_;
  size_t size_ = 0;
  int fd_ = -1;
  z_stream z_;
  bool inflating_ = false;
  bool gzip_ = false;
  bool done_ = false;
  bool input_end_ = false;
  std::unique_ptr<unsigned char[]> in_;
  size_t buffered_ = 0;  // bytes in in_
  size_t plain_at_ = 0;  // a plain file: the next of in_'s bytes to hand out
};

}  // namespace optrace::detail
