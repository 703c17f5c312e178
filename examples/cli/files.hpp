// examples/cli/files.hpp: the CLI's care for users' files: an output is never an input, an
// existing file is replaced only when asked (--force), and every output is checked writable
// before the work that leads to it. Errors are optrace::IoError naming the file.
#pragma once

#include <optrace/detail/common/io.hpp>
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
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

// Which file `path` names, however it is spelled: its device and inode when it exists, else its
// directory's and its name (`x.json` and `./x.json`, both missing, are one file); empty when
// neither can be examined (then it is no other file). Two paths name the same file when their
// ids are equal: one stat each, so n paths are compared in linear time.
inline std::string file_id(const std::string& path) {
  struct stat st {};
  auto id = [](char kind, const struct stat& s) {
    return kind + std::to_string(s.st_dev) + ":" + std::to_string(s.st_ino);
  };
  if (::stat(path.c_str(), &st) == 0) return id('f', st);
  if (::stat(directory_of(path).c_str(), &st) != 0) return {};
  return id('n', st) + "/" + path.substr(path.find_last_of('/') + 1);
}

// The first earlier path of `paths` that names the file `id` names, else -1 (adding `id` as
// `paths[index]`'s when it is new).
inline int64_t earlier_same_file(std::unordered_map<std::string, size_t>& seen, const std::string& id, size_t index) {
  if (id.empty()) return -1;
  const auto [it, fresh] = seen.emplace(id, index);
  return fresh ? -1 : static_cast<int64_t>(it->second);
}

// Refuses a file given twice (merge would add its counts twice).
inline void check_distinct_inputs(const std::vector<std::string>& inputs) {
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t j = earlier_same_file(seen, file_id(inputs[i]), i);
    if (j < 0) continue;
    const std::string& first = inputs[static_cast<size_t>(j)];
    fail(inputs[i], "given twice" + (inputs[i] == first ? std::string() : " (also as '" + first + "')") +
                        ": its counts would be added twice; give each trace once");
  }
}

// Checks, before any work, that each output can be written without losing anything: it is not
// an input nor another output, it exists only if `force`, and its directory takes a new file.
inline void check_outputs(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs, bool force) {
  std::unordered_map<std::string, size_t> input_ids, output_ids;
  for (size_t i = 0; i < inputs.size(); ++i) earlier_same_file(input_ids, file_id(inputs[i]), i);
  for (size_t k = 0; k < outputs.size(); ++k) {
    const std::string& out = outputs[k];
    const std::string id = file_id(out);
    if (const auto in = id.empty() ? input_ids.end() : input_ids.find(id); in != input_ids.end())
      fail(out, "refusing to write an output onto the input '" + inputs[in->second] + "'");
    if (earlier_same_file(output_ids, id, k) >= 0) fail(out, "named as two outputs");
    struct stat st {};
    if (::stat(out.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) fail(out, "is a directory; name a file to write");
      if (!force) fail(out, "exists; pass --force to replace it");
    }
    // A probe file beside it: the directory exists and takes new files (the write is atomic: a
    // temporary file renamed over the output).
    if (const int err = optrace::detail::can_create_beside(optrace::detail::FileTarget::path(out)))
      fail(out, std::string("cannot be written: ") + std::strerror(err));
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

// The largest file declares_observations parses whole: a trace that failed to read (a damaged
// 2 GB trace) is not read again into memory; an observation file of 100,000 signatures is 30 MB.
inline constexpr size_t kObservationsParsedWhole = size_t(256) << 20;

// Whether `path` is an observation file by the reader's own rule (read_observations: a top-level
// "format" of "optrace.observations", wherever it stands, as in a file written with sorted
// keys). A whole parse of a file up to kObservationsParsedWhole: for when the first bytes did
// not say and reading it as a trace failed.
inline bool declares_observations(const std::string& path) {
  try {
    size_t size = 0;
    ::close(optrace::detail::open_regular_file(path, &size));
    if (size > kObservationsParsedWhole) return false;
    auto doc = optrace::json::Document::load(path);
    const optrace::json::Node root = doc->root();
    optrace::json::Node format = root;
    return root.is_object() && root.find("format", format) && format.is_string() && format.as_string() == "optrace.observations";
  } catch (const optrace::Error&) {
    return false;  // the trace reader's error is the one to show
  }
}

}  // namespace cli::files
