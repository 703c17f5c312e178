// optrace/detail/io.hpp: whole-file reads and atomic writes
#pragma once

#include <optrace/error.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <unistd.h>

namespace optrace::detail {

inline std::string read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  OPTRACE_CHECK(f != nullptr, IoError, "cannot open '", path, "' for reading: ", std::strerror(errno));
  std::string data;
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

}  // namespace optrace::detail
