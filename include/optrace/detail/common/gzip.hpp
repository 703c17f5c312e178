// optrace/detail/common/gzip.hpp: whole-file reads that inflate gzip (zlib) transparently
#pragma once
// Profiler traces are often stored gzip-compressed (`*.pt.trace.json.gz`, as
// tensorboard_trace_handler(use_gzip=True) writes them). The file's magic bytes decide, not its
// name. Concatenated gzip members (what `cat a.gz b.gz` makes) are read as one stream, as gzip(1)
// does.

#include <optrace/detail/common/io.hpp>
#include <optrace/error.hpp>

#include <zlib.h>

#include <cerrno>
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
inline void write_file_maybe_gzip(const std::string& path, std::string_view content) {
  if (gz_path(path)) write_file_atomic(path, gzip(content));
  else write_file_atomic(path, content);
}

/// The contents of the regular file at `path`, inflated when it is gzip-compressed, with at least
/// `spare` bytes of capacity after its end (simdjson reads up to 64 bytes past the text).
/// Throws IoError naming the path.
inline std::string read_file_maybe_gzip(const std::string& path, size_t spare = 64) {
  std::string data = read_file(path, spare);
  if (!is_gzip(data)) return data;
  return about_file(path, [&] { return gunzip(data, path); });
}

}  // namespace optrace::detail
