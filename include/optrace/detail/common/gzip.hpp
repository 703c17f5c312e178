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

}  // namespace optrace::detail
