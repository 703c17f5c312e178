// optrace/error.hpp: the one exception family every optrace call throws
#pragma once

#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace optrace {

/// Base of every exception optrace throws. `what()` reads
/// `optrace: <Kind>: <message>` (or `optrace: JsonError at <path>: <message>`).
/// When a libtorch `c10::Error` caused it, that error is kept as the nested exception
/// (`std::rethrow_if_nested`).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A recorded argument does not fit the others: a scalar changed value, a tensor changed
/// rank, a container changed length, no call has every keyword argument, ...
class ArgumentError : public Error {
 public:
  using Error::Error;
};

/// Shapes that cannot be reconciled (dynamic-shape inference, materialization requests).
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// A JSON document is malformed or does not follow its schema. `path()` is the JSON pointer
/// of the offending value (`/convolution.default/unique_inputs/3/input_shapes/0`).
class JsonError : public Error {
 public:
  JsonError(std::string path, const std::string& message)
      : Error("optrace: JsonError at " + (path.empty() ? std::string("/") : path) + ": " + message),
        path_(std::move(path)) {}
  /// The JSON pointer of the offending value; empty for the document itself.
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

/// A file could not be read or written.
class IoError : public Error {
 public:
  using Error::Error;
};

/// Tensors could not be built from recorded specs (unsupported dtype, over the memory budget).
class MaterializeError : public Error {
 public:
  using Error::Error;
};

namespace detail {

template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

template <class E>
constexpr const char* error_kind() {
  if constexpr (std::is_same_v<E, ArgumentError>) return "ArgumentError";
  else if constexpr (std::is_same_v<E, ShapeError>) return "ShapeError";
  else if constexpr (std::is_same_v<E, IoError>) return "IoError";
  else if constexpr (std::is_same_v<E, MaterializeError>) return "MaterializeError";
  else return "Error";
}

/// The one place that throws (fmt's report_error). Builds the message only when called.
template <class E, class... Parts>
[[noreturn]] void raise(const Parts&... parts) {
  static_assert(!std::is_same_v<E, JsonError>, "JsonError takes a path: throw JsonError(path, msg)");
  std::string message = concat("optrace: ", error_kind<E>(), ": ", parts...);
  if (std::current_exception()) std::throw_with_nested(E(message));
  throw E(message);
}

}  // namespace detail
}  // namespace optrace

/// OPTRACE_CHECK(cond, ErrorType, message parts...): throws ErrorType with the parts
/// concatenated, built only when `cond` is false.
#define OPTRACE_CHECK(cond, ErrorType, ...)                     \
  do {                                                          \
    if (!(cond)) ::optrace::detail::raise<ErrorType>(__VA_ARGS__); \
  } while (false)
