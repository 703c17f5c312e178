// optrace/error.hpp: the one exception family every optrace call throws
#pragma once

#include <cstdint>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace optrace {

/// Base of every exception optrace throws. `what()` reads `optrace: <Kind>: <message>` (or
/// `optrace: JsonError at <path>: <message>`); an error about a file names it first, as compilers
/// do: `optrace: trace.json: JsonError at /relu.default: ...` (`file()`). `message()` is the
/// message alone, and `what_without_prefix()` the text after `optrace: `. When a libtorch
/// `c10::Error` caused it, that error is kept as the nested exception (`std::rethrow_if_nested`).
class Error : public std::runtime_error {
 public:
  /// An error of kind "Error" with `message`.
  explicit Error(std::string message) : Error("Error", std::move(message)) {}

  const char* what() const noexcept override { return what_.c_str(); }
  /// The message without the `optrace: <Kind>: ` head: `scalar changed between calls: 0.5 and 0.25`.
  const std::string& message() const noexcept { return message_; }
  /// `what()` without its leading `optrace: `: `ArgumentError: scalar changed ...`.
  const char* what_without_prefix() const noexcept { return what_.c_str() + kPrefix.size(); }
  /// The file the error is about (what was being read or written); empty when none.
  const std::string& file() const noexcept { return file_; }
  /// Names `file` as the file the error is about, in `what()` too; a no-op when one is named
  /// already. The readers and writers that take a path call it on whatever they throw.
  void name_file(const std::string& file) {
    if (!file_.empty() || file.empty()) return;
    file_ = file;
    what_ = std::string(kPrefix) + file + ": " + head_;
  }

 protected:
  /// For subclasses: `kind` is what `what()` names after `optrace: ` ("ArgumentError",
  /// "JsonError at /a/0").
  Error(const std::string& kind, std::string message)
      : std::runtime_error(kind), head_(kind + ": " + message), what_(std::string(kPrefix) + head_),
        message_(std::move(message)) {}
  /// For errors whose kind names their file already (TextError: `at log.txt:12:40`).
  void set_file_named_in_kind(std::string file) { file_ = std::move(file); }

 private:
  static constexpr std::string_view kPrefix = "optrace: ";
  std::string head_;  // "<Kind>: <message>"
  std::string what_;
  std::string message_;
  std::string file_;
};

/// A recorded argument does not fit the others: a scalar changed value, a tensor changed
/// rank, a container changed length, no call has every keyword argument, ...
class ArgumentError : public Error {
 public:
  explicit ArgumentError(std::string message) : Error("ArgumentError", std::move(message)) {}
};

/// Shapes that cannot be reconciled (dynamic-shape inference, materialization requests).
class ShapeError : public Error {
 public:
  explicit ShapeError(std::string message) : Error("ShapeError", std::move(message)) {}
};

/// A JSON document is malformed or does not follow its schema. `path()` is the JSON pointer
/// of the offending value (`/convolution.default/unique_inputs/3/input_shapes/0`).
class JsonError : public Error {
 public:
  JsonError(std::string path, std::string message)
      : Error("JsonError at " + (path.empty() ? std::string("/") : path), std::move(message)), path_(std::move(path)) {}
  /// The JSON pointer of the offending value; empty for the document itself.
  const std::string& path() const noexcept { return path_; }
  /// The same error for a document nested at `prefix` in a larger one (`/traceEvents/12/args`).
  JsonError under(const std::string& prefix) const { return JsonError(prefix + path_, message()); }

 private:
  std::string path_;
};

/// A text log (PyTorch's operator-inputs format) is malformed. `what()` names where, as
/// compilers do: `optrace: TextError at log.txt:12:40: expected ')' after the tensor's dtype, got ']'`.
class TextError : public Error {
 public:
  TextError(std::string source, int64_t line, int64_t column, std::string message)
      : Error("TextError at " + source + ":" + std::to_string(line) + ":" + std::to_string(column), std::move(message)),
        source_(std::move(source)), line_(line), column_(column) {
    set_file_named_in_kind(source_);
  }
  /// The file (or the name given to a text parsed from memory).
  const std::string& source() const noexcept { return source_; }
  /// 1-based line and column (column in bytes).
  int64_t line() const noexcept { return line_; }
  int64_t column() const noexcept { return column_; }

 private:
  std::string source_;
  int64_t line_, column_;
};

/// A file could not be read or written.
class IoError : public Error {
 public:
  explicit IoError(std::string message) : Error("IoError", std::move(message)) {}
};

/// Tensors could not be built from recorded specs (unsupported dtype, over the memory budget).
class MaterializeError : public Error {
 public:
  explicit MaterializeError(std::string message) : Error("MaterializeError", std::move(message)) {}
};

namespace detail {

template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

/// The one place that throws (fmt's report_error): `E` made of `args`, with the exception being
/// handled, if any, kept as the nested cause. The forms below build the message only when called.
///
/// Everything optrace throws to its caller comes from here, an `Error` of the family above.
/// Outside this file only three kinds of `throw` remain: rethrows (`throw;`), the internal
/// signals a reader throws from one function and catches itself (`FastReader::give_up`,
/// `StreamReader::give_up`, the operator-inputs parser's `left_out_line`), and `std::bad_alloc` for
/// memory the allocator refused, as the standard containers throw it.
template <class E, class... Args>
[[noreturn]] void throw_error(Args&&... args) {
  static_assert(std::is_base_of_v<Error, E>, "optrace throws only its own error family");
  if (std::current_exception()) std::throw_with_nested(E(std::forward<Args>(args)...));
  throw E(std::forward<Args>(args)...);
}

/// Throws `E` with the parts concatenated as its message.
template <class E, class... Parts>
[[noreturn]] void raise(const Parts&... parts) {
  static_assert(!std::is_same_v<E, JsonError>, "JsonError takes a path: raise_json(path, parts...)");
  throw_error<E>(concat(parts...));
}

/// Throws a JsonError at the JSON pointer `path` with the parts concatenated as its message.
template <class... Parts>
[[noreturn]] void raise_json(std::string path, const Parts&... parts) {
  throw_error<JsonError>(std::move(path), concat(parts...));
}

/// `raise`, for an error about a file: names it (Error::file).
template <class E, class... Parts>
[[noreturn]] void raise_about_file(const std::string& file, const Parts&... parts) {
  E e(concat(parts...));
  e.name_file(file);
  throw e;  // never nested: the file's error is the whole story
}

}  // namespace detail
}  // namespace optrace

/// OPTRACE_CHECK(cond, ErrorType, message parts...): throws ErrorType with the parts
/// concatenated, built only when `cond` is false.
#define OPTRACE_CHECK(cond, ErrorType, ...)                     \
  do {                                                          \
    if (!(cond)) ::optrace::detail::raise<ErrorType>(__VA_ARGS__); \
  } while (false)
