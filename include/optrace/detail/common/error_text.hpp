#pragma once

// The line of an error that a report shows.

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

}  // namespace optrace::detail
