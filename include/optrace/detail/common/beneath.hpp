// optrace/detail/common/beneath.hpp: files named by a file optrace reads, kept beneath their folder
#pragma once
// A plan names its packages and observation files; an on-demand request names the trace it wants
// written. Whoever wrote that file must not reach past the folder it belongs to, by the name
// (`../x`, `/etc/x`) or by a symbolic link planted on the way, before or while optrace reads or
// writes. One rule and one walk serve every such name:
// - beneath_name_problem: the name is relative, made of plain components (no `..`, `.`, empty
//   component, backslash or NUL);
// - open_folder_beneath / open_file_beneath: each folder from the base on is opened relative to
//   the one before with O_NOFOLLOW, so a link anywhere below the base is refused, not followed,
//   and what is then read or written goes through the descriptor held, whatever is renamed or
//   swapped meanwhile. The base folder itself is the caller's and is opened as given.

#include <optrace/detail/common/io.hpp>
#include <optrace/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace optrace::detail {

/// Why `name` cannot name a file beneath a folder, or "" when it can: it must be relative and made
/// of plain components (no `..` or `.`, no empty one as in `a//b` or a trailing `/`, no
/// backslash, no NUL).
inline std::string beneath_name_problem(std::string_view name) {
  if (name.empty()) return "an empty name";
  if (name.front() == '/') return "an absolute path";
  if (name.find('\0') != std::string_view::npos) return "a NUL in the name";
  if (name.find('\\') != std::string_view::npos) return "a backslash in the name";
  for (size_t begin = 0; begin <= name.size();) {
    const size_t end = std::min(name.find('/', begin), name.size());
    const std::string_view part = name.substr(begin, end - begin);
    if (part.empty()) return "an empty component";
    if (part == "..") return "a '..' component";
    if (part == ".") return "a '.' component";
    begin = end + 1;
  }
  return "";
}

/// `base/name` as messages name it ("" is the working folder).
inline std::string beneath_shown(const std::string& base, std::string_view name) {
  return base.empty() ? std::string(name) : base + "/" + std::string(name);
}

/// What open_folder_beneath does with a folder on the way that does not exist.
enum class MissingFolder {
  Refuse,  // IoError
  Make,    // made (0755), then opened as the others
  Stop,    // the walk stops there: no folder is returned (a check before the folders are made)
};

/// The folder that holds `name` beneath the folder `base` ("" is the working folder), open, and
/// the name's last component. Each folder on the way is opened from the one before with
/// O_NOFOLLOW. Throws ArgumentError for a name beneath_name_problem refuses, IoError for a link
/// or anything but a folder on the way, or a folder that cannot be opened or made; both name
/// `base/name`. With MissingFolder::Stop, the folder returned is empty where one is missing.
inline std::pair<Fd, std::string> open_folder_beneath(const std::string& base, std::string_view name,
                                                      MissingFolder missing = MissingFolder::Refuse) {
  const std::string shown = beneath_shown(base, name), top = base.empty() ? "." : base;
  if (const std::string problem = beneath_name_problem(name); !problem.empty())
    raise_about_file<ArgumentError>(shown, "'", std::string(name), "' is not a file name beneath '", top, "' (", problem, ")");
  Fd folder(::open(top.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!folder) raise_about_file<IoError>(shown, "cannot open the folder '", top, "': ", std::strerror(errno));
  std::string at = top;
  size_t begin = 0;
  for (size_t end; (end = name.find('/', begin)) != std::string_view::npos; begin = end + 1) {
    const std::string part(name.substr(begin, end - begin));
    at += "/" + part;
    if (missing == MissingFolder::Make && ::mkdirat(folder.get(), part.c_str(), 0755) != 0 && errno != EEXIST)
      raise_about_file<IoError>(shown, "cannot make the folder '", at, "': ", std::strerror(errno));
    Fd next(::openat(folder.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      const int err = errno;
      if (err == ENOENT && missing == MissingFolder::Stop) return {Fd(), std::string(name.substr(name.rfind('/') + 1))};
      struct stat st {};
      const bool link = ::fstatat(folder.get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
      if (link)
        raise_about_file<IoError>(shown, "'", at, "' is a symbolic link: a file named beneath '", top, "' stays in it");
      raise_about_file<IoError>(shown, "cannot open the folder '", at, "': ", std::strerror(err));
    }
    folder = std::move(next);
  }
  return {std::move(folder), std::string(name.substr(begin))};
}

/// The regular file `name` beneath `base`, open for reading (as open_folder_beneath walks to it,
/// the file itself opened with O_NOFOLLOW and without blocking: a link, FIFO, device or folder is
/// refused). Throws what open_folder_beneath throws, and IoError naming `base/name`, which says
/// "cannot open `what`: ..." ("the package").
inline Fd open_file_beneath(const std::string& base, std::string_view name, const char* what = "the file") {
  auto [folder, leaf] = open_folder_beneath(base, name);
  const std::string shown = beneath_shown(base, name);
  Fd file(::openat(folder.get(), leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!file) {
    const int err = errno;
    if (err == ELOOP)
      raise_about_file<IoError>(shown, "'", shown, "' is a symbolic link: a file named beneath '",
                                base.empty() ? "." : base, "' stays in it");
    raise_about_file<IoError>(shown, "cannot open ", what, ": ", std::strerror(err));
  }
  struct stat st {};
  if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode))
    raise_about_file<IoError>(shown, "cannot open ", what, ": not a regular file");
  return file;
}

}  // namespace optrace::detail
