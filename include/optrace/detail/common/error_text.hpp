#pragma once

// The line of an error that a report shows.

#include <optrace/error.hpp>

#include <c10/util/Exception.h>

#include <exception>
#include <string>
#include <string_view>

namespace optrace::detail {

// The first line of an error's text, or "unknown error" for an empty one. libtorch follows its
// message with lines a report line does not want: a backtrace, "Exception raised from ...", or for a
// missing kernel the list of every backend.
inline std::string first_line(std::string_view text) {
  const std::string_view line = text.substr(0, text.find('\n'));
  return line.empty() ? std::string("unknown error") : std::string(line);
}

// The first line of `e`'s message; of a libtorch error's message without its backtrace.
inline std::string first_line(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) return first_line(c->what_without_backtrace());
  return first_line(std::string_view(e.what()));
}

// The text of an exception for a report line (replay's, verify's): libtorch's first line without
// its backtrace, optrace's message without the "optrace: " prefix, any other's first line.
inline std::string describe_exception(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) {
    // "Could not run 'aten::relu' with arguments from the 'Meta' backend. This could be because
    // ..., backends: [CPU, ...]": the first sentence says it all.
    std::string s = first_line(c->what_without_backtrace());
    const size_t cut = s.find("' backend. ");
    if (s.rfind("Could not run '", 0) == 0 && cut != std::string::npos) s.resize(cut + 10);
    return s;
  }
  if (const auto* o = dynamic_cast<const Error*>(&e)) return first_line(o->what_without_prefix());
  return first_line(std::string_view(e.what()));
}

}  // namespace optrace::detail
