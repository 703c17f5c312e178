// optrace/detail/on_demand/files.hpp: the trigger file and the paths a request names, read as hostile
#pragma once
// Whoever can write the trigger file steers a running job (docs/on_demand.md, Security), so:
// - its folder is opened first and must be the job's user's (or root's) and not writable by its
//   group or others unless sticky (as /tmp): nobody else can then replace the file in it;
// - the file is opened in that folder without following a link (a link to a 0600 file of the
//   job's user, a .pgpass, would pass every other check) and read only when it is a regular file
//   with one name (no hard link), owned by the job's user (or root) and not writable by its group
//   or others: fstat on the open descriptor, so that what is checked is what is read;
// - at most kMaxConfigBytes of it: a config is a few lines; no line of it is ever repeated in a
//   message (request.hpp);
// - a path a request names (ACTIVITIES_LOG_FILE) resolves inside the output folder: relative to
//   it, or absolute under it; no `..`, no symbolic link on the way (checked when the request
//   comes, and again by the write, which goes through the folder opened beneath the output
//   folder: detail/common/beneath.hpp); the file itself must not exist (the write links it in
//   place, which also refuses a file or link made there meanwhile).

#include <optrace/detail/common/beneath.hpp>
#include <optrace/error.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace optrace::detail::on_demand {

inline constexpr size_t kMaxConfigBytes = 64 * 1024;

// What reading the trigger file found.
struct ConfigRead {
  enum Kind { Absent, Refused, Read } kind = Absent;
  std::string text;    // Read: the content
  std::string reason;  // Refused: why, one line
  std::string state;   // Refused: owner, mode, size and time, so that one refusal is said once
};

inline ConfigRead read_config(const std::string& path) {
  ConfigRead r;
  struct stat st {};
  bool got = false;
  int fd = -1;
  auto refuse = [&](std::string why) {
    if (fd >= 0) ::close(fd);
    r.kind = ConfigRead::Refused;
    r.reason = "ignoring config file '" + path + "': " + why;
    r.state = why + (got ? ":" + std::to_string(st.st_uid) + ":" + std::to_string(st.st_mode) + ":" +
                               std::to_string(st.st_nlink) + ":" + std::to_string(st.st_size) + ":" +
                               std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec)
                         : std::string());
    return r;
  };
  const std::filesystem::path p(path);
  const std::string folder_name = p.has_parent_path() ? p.parent_path().string() : std::string(".");
  const Fd folder(::open(folder_name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (folder.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return r;  // absent: no request
    return refuse("its folder: " + std::string(std::strerror(errno)));
  }
  got = ::fstat(folder.get(), &st) == 0;
  if (!got) return refuse("its folder: " + std::string(std::strerror(errno)));
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    return refuse("its folder '" + folder_name + "' is owned by user " + std::to_string(st.st_uid) +
                  ", not by this job's user " + std::to_string(::geteuid()) + " (who could replace the file)");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0)
    return refuse("its folder '" + folder_name + "' is writable by its group or others and not sticky (they could "
                  "replace the file: chmod go-w or +t the folder)");
  fd = ::openat(folder.get(), p.filename().c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return r;  // absent: no request
    got = false;
    return refuse(errno == ELOOP ? std::string("a symbolic link: the trigger file is read only as itself (a link could "
                                               "point at any file of the job's user)")
                                 : std::string(std::strerror(errno)));
  }
  got = ::fstat(fd, &st) == 0;
  if (!got) return refuse(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return refuse("not a regular file");
  if (st.st_nlink != 1)
    return refuse("it has " + std::to_string(st.st_nlink) + " names (hard links): the trigger file is read only "
                  "under its one name");
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    return refuse("owned by user " + std::to_string(st.st_uid) + ", not by this job's user " +
                  std::to_string(::geteuid()) + " (whoever writes it steers the job)");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return refuse("writable by its group or others (chmod go-w it: whoever writes it steers the job)");
  if (static_cast<size_t>(st.st_size) > kMaxConfigBytes)
    return refuse("larger than " + std::to_string(kMaxConfigBytes) + " bytes; a config is a few lines");
  r.text.resize(kMaxConfigBytes + 1);
  size_t got_bytes = 0;
  while (got_bytes < r.text.size()) {
    const ssize_t n = ::read(fd, &r.text[got_bytes], r.text.size() - got_bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return refuse(std::strerror(errno));
    if (n == 0) break;
    got_bytes += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got_bytes > kMaxConfigBytes) {
    r.kind = ConfigRead::Refused;
    r.reason = "ignoring config file '" + path + "': it grew past " + std::to_string(kMaxConfigBytes) + " bytes";
    return r;
  }
  r.text.resize(got_bytes);
  r.kind = ConfigRead::Read;
  return r;
}

// The name a request gives its trace, relative to `dir` (canonical): relative to it, or absolute
// under it, then held to the rule of every name beneath a folder (beneath_name_problem).
inline std::string name_inside(const std::filesystem::path& dir, const std::string& requested) {
  namespace fs = std::filesystem;
  const fs::path p(requested);
  std::string relative = requested;
  if (p.is_absolute()) {
    const fs::path r = p.lexically_normal().lexically_relative(dir);
    OPTRACE_CHECK(!r.empty() && *r.begin() != "..", ArgumentError, "ACTIVITIES_LOG_FILE '", requested,
                  "' is outside the output folder '", dir.string(), "'");
    relative = r.string();
  }
  const std::string problem = beneath_name_problem(relative);
  OPTRACE_CHECK(problem != "a '..' component", ArgumentError, "ACTIVITIES_LOG_FILE '", requested,
                "' has '..': it must stay inside the output folder '", dir.string(), "'");
  OPTRACE_CHECK(problem.empty(), ArgumentError, "ACTIVITIES_LOG_FILE '", requested,
                "' names no file inside the output folder (", problem, ")");
  return relative;
}

// The file a request names, inside `dir` (canonical), checked as the write will find it when the
// request comes: no link on the way (open_folder_beneath, which the write goes through again), no
// file there already. An error line for anything else.
inline std::string resolve_inside(const std::filesystem::path& dir, const std::string& requested) {
  const std::string relative = name_inside(dir, requested);
  const auto [folder, leaf] = open_folder_beneath(dir.string(), relative, MissingFolder::Stop);
  struct stat st {};
  const std::string path = (dir / relative).string();
  OPTRACE_CHECK(!folder || ::fstatat(folder.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0, IoError,
                "ACTIVITIES_LOG_FILE '", requested, "': '", path, "' exists and is kept: nothing replaces a file");
  return path;
}

}  // namespace optrace::detail::on_demand
