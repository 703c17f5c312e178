// examples/cli/files.hpp: the CLI's care for users' files: an output is never an input, an
// existing file is replaced only when asked (--force), and every output is checked writable
// before the work that leads to it. Errors are optrace::IoError naming the file.
#pragma once

#include <optrace/detail/common/io.hpp>
#include <optrace/error.hpp>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cli::files {

[[noreturn]] inline void fail(const std::string& file, const std::string& message) {
  optrace::detail::raise_about_file<optrace::IoError>(file, message);
}

// The directory part of `path` ("." for a bare name).
inline std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Whether `a` and `b` name the same file: the same inode when both exist, otherwise the same
// name in the same directory (`x.json` and `./x.json`).
inline bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  const bool ea = ::stat(a.c_str(), &sa) == 0, eb = ::stat(b.c_str(), &sb) == 0;
  if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (ea != eb) return false;
  const auto base = [](const std::string& p) { return p.substr(p.find_last_of('/') + 1); };
  struct stat da {}, db {};
  return base(a) == base(b) && ::stat(directory_of(a).c_str(), &da) == 0 && ::stat(directory_of(b).c_str(), &db) == 0 &&
         da.st_dev == db.st_dev && da.st_ino == db.st_ino;
}

// Refuses a file given twice (merge would add its counts twice).
inline void check_distinct_inputs(const std::vector<std::string>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (same_file(inputs[i], inputs[j]))
        fail(inputs[i], "given twice" + (inputs[i] == inputs[j] ? std::string() : " (also as '" + inputs[j] + "')") +
                            ": its counts would be added twice; give each trace once");
}

// Checks, before any work, that each output can be written without losing anything: it is not
// an input nor another output, it exists only if `force`, and its directory takes a new file.
inline void check_outputs(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs, bool force) {
  for (size_t k = 0; k < outputs.size(); ++k) {
    const std::string& out = outputs[k];
    for (const std::string& in : inputs)
      if (same_file(out, in)) fail(out, "refusing to write an output onto the input '" + in + "'");
    for (size_t j = 0; j < k; ++j)
      if (same_file(out, outputs[j])) fail(out, "named as two outputs");
    struct stat st {};
    if (::stat(out.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) fail(out, "is a directory; name a file to write");
      if (!force) fail(out, "exists; pass --force to replace it");
    }
    // A probe file beside it: the directory exists and takes new files (the write is atomic: a
    // temporary file renamed over the output).
    const std::string probe = out + ".optrace-probe." + std::to_string(::getpid());
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) fail(out, std::string("cannot be written: ") + std::strerror(errno));
    ::close(fd);
    ::unlink(probe.c_str());
  }
}

inline bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The file name ending of format `to` ("hf", "kineto", "text").
inline const char* ending_of(const std::string& to) {
  return to == "kineto" ? ".pt.trace.json" : to == "text" ? ".txt" : ".hf_op_trace.json";
}

// Where `convert` writes each input when OUT is a directory (made if missing): the input's file
// name without its format's ending (and .gz), with the ending of `to`. Two inputs that would land
// on one name are refused.
inline std::vector<std::string> outputs_in_directory(const std::vector<std::string>& inputs, const std::string& dir,
                                                     const std::string& to) {
  if (!is_directory(dir) && ::mkdir(dir.c_str(), 0755) != 0)
    fail(dir, std::string("cannot make the output directory: ") + std::strerror(errno));
  std::vector<std::string> out;
  for (const std::string& in : inputs) {
    std::string name = in.substr(in.find_last_of('/') + 1);
    auto strip = [&name](const std::string& ending) {
      if (name.size() > ending.size() && name.compare(name.size() - ending.size(), ending.size(), ending) == 0) {
        name.resize(name.size() - ending.size());
        return true;
      }
      return false;
    };
    strip(".gz");
    strip(".pt.trace.json") || strip(".hf_op_trace.json") || strip(".json") || strip(".txt");
    out.push_back(dir + (dir.back() == '/' ? "" : "/") + name + ending_of(to));
    for (size_t j = 0; j + 1 < out.size(); ++j)
      if (out[j] == out.back())
        fail(in, "would be written to '" + out.back() + "' as '" + inputs[j] + "' is: rename one of them");
  }
  return out;
}

// Whether `path` is an observation file (InputObserver::save), by its first bytes. Throws
// IoError naming the file when it cannot be read (missing, a directory, a FIFO).
inline bool is_observation_file(const std::string& path) {
  size_t size = 0;
  const int fd = optrace::detail::about_file(path, [&] { return optrace::detail::open_regular_file(path, &size); });
  char head[4096];
  size_t got = 0;  // its first 4 KiB (or all of it), however many reads that takes
  for (ssize_t n; got < sizeof head && (n = optrace::detail::read_some(fd, head + got, sizeof head - got)) > 0;)
    got += static_cast<size_t>(n);
  ::close(fd);
  return std::string_view(head, got).find("\"optrace.observations\"") != std::string_view::npos;
}

}  // namespace cli::files
