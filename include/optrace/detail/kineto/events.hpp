// optrace/detail/kineto/events.hpp: a Kineto trace's events list, times and error paths (no libtorch)
#pragma once
// What every reader of a `*.pt.trace.json` needs before it knows what an event means: where the
// events list is (the document's "traceEvents", or the document itself when it is a list), the
// times exactly as integer nanoseconds, and errors that name the event's JSON pointer. The op
// importer (importer.hpp, which needs the operator facts) and the key averages
// (detail/key_averages/read.hpp, which need none) both read through these, so that a trace one
// of them reads the other reads too, with the same words for what is wrong.

#include <optrace/detail/common/json_text.hpp>
#include <optrace/detail/common/ondemand.hpp>
#include <optrace/error.hpp>

#include <simdjson.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace optrace::detail::kineto {

namespace od = simdjson::ondemand;

[[noreturn]] inline void malformed(const std::string& path, simdjson::error_code e) {
  throw JsonError(path, "malformed JSON: " + json::detail::simdjson_message(e));
}

template <class V>
[[noreturn]] void expected(V& v, const std::string& path, const char* what) {
  throw JsonError(path, std::string(what) + ", got " + ondemand::describe(v));
}

// The JSON pointer of event `index` of the list at `events_path`, for errors and examples.
inline std::string event_path_of(std::string_view events_path, uint32_t index) {
  return std::string(events_path) + "/" + std::to_string(index);
}

// parse_time_ns for any form: spaces, a sign, an exponent, up to int64 nanoseconds.
inline bool parse_time_ns_general(std::string_view s, int64_t& out) {
  s = json::detail::trim(s);
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) s.remove_prefix(1);
  // One pass over the usual form, "123456.789": whole microseconds, then up to 3 decimals.
  int64_t us = 0, ns = 0;
  size_t k = 0;
  bool overflow = false;  // an error unless an exponent follows
  for (; k < s.size() && s[k] >= '0' && s[k] <= '9'; ++k)
    overflow = overflow || __builtin_mul_overflow(us, 10, &us) || __builtin_add_overflow(us, s[k] - '0', &us);
  bool exponent = k < s.size() && (s[k] == 'e' || s[k] == 'E');
  if (k > 0 && k < s.size() && s[k] == '.') {
    int digits = 0;
    for (++k; k < s.size() && s[k] >= '0' && s[k] <= '9'; ++k, ++digits)
      if (digits < 3) ns = ns * 10 + (s[k] - '0');
    exponent = k < s.size() && (s[k] == 'e' || s[k] == 'E');
    for (; digits < 3; ++digits) ns *= 10;
  }
  if (exponent) {  // "1.5e3": as a double, rounded to nanoseconds
    double d;
    if (!json::detail::parse_double(s, d) || !(std::fabs(d) < 9.2e15)) return false;  // NaN and inf fail too
    out = static_cast<int64_t>(std::llround(d * 1000.0)) * (negative ? -1 : 1);
    return true;
  }
  if (k == 0 || k != s.size() || overflow) return false;
  if (__builtin_mul_overflow(us, 1000, &us) || __builtin_add_overflow(us, ns, &out)) return false;
  if (negative) out = -out;
  return true;
}

// A Kineto time ("4203669604595.407" microseconds) as integer nanoseconds, exactly. False for
// anything else, and for times beyond int64 nanoseconds (292 years).
inline bool parse_time_ns(std::string_view s, int64_t& out) {
  // What the profiler writes (two per op event), in one pass: at most 15 digits before the point
  // (no overflow to check), then the decimals; any other form goes the general way.
  size_t k = 0;
  int64_t us = 0;
  for (; k < s.size() && k < 16 && static_cast<unsigned>(s[k] - '0') < 10; ++k) us = us * 10 + (s[k] - '0');
  if (k > 0 && k < 16) {
    int64_t ns = 0;
    int digits = 0;
    if (k < s.size() && s[k] == '.')
      for (++k; k < s.size() && static_cast<unsigned>(s[k] - '0') < 10; ++k, ++digits)
        if (digits < 3) ns = ns * 10 + (s[k] - '0');
    if (k == s.size()) {
      for (; digits < 3; ++digits) ns *= 10;
      out = us * 1000 + ns;
      return true;
    }
  }
  return parse_time_ns_general(s, out);
}

// Iterates the trace `data` (`size` bytes, `capacity` readable: simdjson's padding) with `parser`
// and calls `read_events(od::array& events, const std::string& base)` on its events list: the
// document's "traceEvents" (base "/traceEvents"), or the document itself when it is a list (base
// ""). With `on_field`, `on_field(key, od::value&)` is called on the document's other keys too
// (those after the list included); without, the document is left right after the list, and the
// return value is where it goes on (its next structural character), or nullptr at its end (what
// import_in_pieces checks a piece by). Throws JsonError for malformed JSON and for a document that
// is neither.
template <class ReadEvents, class OnField = std::nullptr_t>
const char* walk_events(od::parser& parser, const char* data, size_t size, size_t capacity, ReadEvents&& read_events,
                        OnField&& on_field = nullptr) {
  constexpr bool other_fields = !std::is_same_v<std::decay_t<OnField>, std::nullptr_t>;
  od::document doc;
  if (auto e = parser.iterate(data, size, capacity).get(doc)) malformed("", e);
  od::json_type t;
  if (auto e = doc.type().get(t)) malformed("", e);
  if (t == od::json_type::array) {
    od::array events;
    if (auto e = doc.get_array().get(events)) malformed("", e);
    read_events(events, std::string());
  } else if (t == od::json_type::object) {
    od::object root;
    if (auto e = doc.get_object().get(root)) malformed("", e);
    bool found = false;
    for (auto member : root) {
      od::field f;
      if (auto e = std::move(member).get(f)) malformed("", e);
      std::string_view key;
      if (auto e = f.unescaped_key().get(key)) malformed("", e);
      if (key != "traceEvents") {
        if constexpr (other_fields) on_field(key, f.value());
        continue;
      }
      found = true;
      od::array events;
      if (f.value().get_array().get(events)) expected(f.value(), "/traceEvents", "expected a list of events");
      read_events(events, std::string("/traceEvents"));
      if constexpr (!other_fields) break;
    }
    if (!found) throw JsonError("", "missing key \"traceEvents\"");
  } else {
    expected(doc, "", "expected an object with \"traceEvents\" or a list of events");
  }
  const char* next = nullptr;
  if (doc.current_location().get(next)) return nullptr;
  return next;
}

}  // namespace optrace::detail::kineto
