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
#include <optrace/detail/common/pieces.hpp>
#include <optrace/error.hpp>

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
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
// import_in_pieces checks a piece by). `events_end`, when given, is set to where the document
// goes on right after the events list (nullptr at its end). Throws JsonError for malformed JSON
// and for a document that is neither.
template <class ReadEvents, class OnField = std::nullptr_t>
const char* walk_events(od::parser& parser, const char* data, size_t size, size_t capacity, ReadEvents&& read_events,
                        OnField&& on_field = nullptr, const char** events_end = nullptr) {
  constexpr bool other_fields = !std::is_same_v<std::decay_t<OnField>, std::nullptr_t>;
  od::document doc;
  if (auto e = parser.iterate(data, size, capacity).get(doc)) malformed("", e);
  od::json_type t;
  if (auto e = doc.type().get(t)) malformed("", e);
  if (t == od::json_type::array) {
    od::array events;
    if (auto e = doc.get_array().get(events)) malformed("", e);
    read_events(events, std::string());
    if (events_end != nullptr && doc.current_location().get(*events_end)) *events_end = nullptr;
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
      if (events_end != nullptr && doc.current_location().get(*events_end)) *events_end = nullptr;
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

// ---- cutting a trace's text between events (streamed and threaded reads) ----

using json::detail::is_json_space;

// An event boundary: the ',' after an event's '}' and the '{' of the next one.
struct Cut {
  size_t comma = 0, open = 0;
};

// Whether the '{' at `open` after the ',' at `comma` opens an event: at least `spaces` whitespace
// bytes between them, a line break among them (no string holds one: the cut is not inside a string).
inline bool is_event_open_after_comma(const char* data, size_t comma, size_t open, size_t spaces) {
  return open - (comma + 1) >= spaces && std::memchr(data + comma + 1, '\n', open - (comma + 1)) != nullptr;
}

// The first event boundary after `from` (within `window` bytes) with at least `spaces` whitespace
// bytes between the comma and the '{', a line break among them (no string holds one: the cut is
// not inside a string), or false.
inline bool find_cut(const char* data, size_t size, size_t from, size_t window, size_t spaces, Cut& cut) {
  const size_t stop = std::min(size, from + window);
  for (size_t p = from; p < stop;) {
    const void* brace = std::memchr(data + p, '}', stop - p);
    if (brace == nullptr) return false;
    size_t q = static_cast<size_t>(static_cast<const char*>(brace) - data) + 1;
    p = q;
    if (q >= size || data[q] != ',') continue;
    size_t r = q + 1;
    while (r < size && is_json_space(data[r])) ++r;
    if (r < size && data[r] == '{' && is_event_open_after_comma(data, q, r, spaces)) {
      cut.comma = q;
      cut.open = r;
      return true;
    }
  }
  return false;
}

// The last event boundary in data[0, size): as find_cut's, searched from the end.
inline bool find_last_cut(const char* data, size_t size, size_t spaces, Cut& cut) {
  for (size_t p = size; p > 0;) {
    const void* open = ::memrchr(data, '{', p);
    if (open == nullptr) return false;
    const size_t r = static_cast<size_t>(static_cast<const char*>(open) - data);
    p = r;
    size_t q = r;
    while (q > 0 && is_json_space(data[q - 1])) --q;
    if (q < 2 || data[q - 1] != ',' || data[q - 2] != '}') continue;
    if (!is_event_open_after_comma(data, q - 1, r, spaces)) continue;
    cut.comma = q - 1;
    cut.open = r;
    return true;
  }
  return false;
}

// How a streamed trace's text opens: '{' (an object with "traceEvents"), '[' (a bare list of
// events), or 0 (neither: it cannot be streamed).
inline char trace_opening(const char* data, size_t size) {
  size_t at = 0;
  while (at < size && is_json_space(data[at])) ++at;
  return at < size && (data[at] == '{' || data[at] == '[') ? data[at] : 0;
}

// A piece of a streamed trace, in its PieceBuffer, closed at its last event boundary so that it
// is a JSON document of its own: the first piece of an object then ends "}]}", any other "}]".
// What both streaming readers do with a piece (stream_documents below, import_stream in
// importer.hpp): close it, read it, check that the events list reached the cut, then either
// reopen it (a first piece read again, longer) or carry the events after the cut into the next
// piece, opened as a list.
class ClosedPiece {
 public:
  // Closes the buffer's piece at its last boundary; false where it holds none.
  bool close(PieceBuffer& buffer, bool first_of_object) {
    char* data = buffer.data();
    if (!find_last_cut(data, buffer.size(), first_of_object ? 2 : 1, cut_)) return false;
    first_of_object_ = first_of_object;
    std::memcpy(saved_, data + cut_.comma, 2);
    data[cut_.comma] = ']';
    if (first_of_object) data[cut_.comma + 1] = '}';
    return true;
  }
  // The document's size: the text up to the cut, and what closes it.
  size_t size() const { return cut_.comma + (first_of_object_ ? 2 : 1); }
  // Whether the events list ended at the cut, given where walk_events says it ended: else the
  // cut lay in a list after it ("after": [{...},\n {...}]), not between events.
  bool events_reach_cut(PieceBuffer& buffer, const char* events_end) const {
    return events_end == (first_of_object_ ? buffer.data() + cut_.comma + 1 : nullptr);
  }
  // Undoes close(), for the first piece to be read again.
  void reopen(PieceBuffer& buffer) const { std::memcpy(buffer.data() + cut_.comma, saved_, 2); }
  // Keeps the events after the cut as the next piece's front, a list from its '[' on.
  void carry_rest(PieceBuffer& buffer) const {
    buffer.carry(cut_.open - 1);
    buffer.data()[0] = '[';
  }

 private:
  Cut cut_;
  char saved_[2] = {};
  bool first_of_object_ = false;
};

// Plain traces at least this long are streamed (import_stream, stream_documents); shorter ones are
// read from their mapping, in pieces, which is as fast below it. Compressed ones are always streamed.
inline constexpr size_t kStreamPlainAbove = 4u << 20;
// The text read at a time (per thread, import_stream): 1 MiB measured fastest (docs/performance.md).
inline constexpr size_t kStreamPieceBytes = 1u << 20;

// Reads the trace `in` hands (`size_t read(char*, size_t)`, as detail::FileReader) a piece of
// about `piece_bytes` at a time, each made a JSON document of its own and passed to
// `read_piece(data, size, capacity, first)`, which walks it (walk_events, with on_field for the
// root's other keys) and returns where its events list ends (walk_events' `events_end`). The
// first piece may be read more than once (`first`: start afresh), longer each time, when its cut
// was no event boundary or its read threw (a cut before the events); later pieces' errors are thrown.
// - the first piece is the trace up to an event boundary (find_last_cut), closed with "]}" (or
//   "]" for a bare list of events);
// - each next piece, the events up to the next boundary as a list ("[...]");
// - the last, the rest as a trace of its own: `{"traceEvents":` put before "[...], ...}" (the
//   root's keys after the events), or the rest of a bare list as it is.
// The memory is a piece's (grown to hold an event longer than one), whatever the trace's size.
// Returns false, having read some of it, when the text cannot be cut so: not an object or a list,
// no boundary within 1 GiB, or a cut that was no boundary between events (the events list must
// reach each piece's cut). The caller then reads the text whole, which also names any error.
template <class Reader, class ReadPiece>
bool stream_documents(Reader& in, size_t piece_bytes, ReadPiece&& read_piece) {
  static constexpr char kPrefix[] = "{\"traceEvents\":";
  constexpr size_t kFront = sizeof kPrefix - 1, kMaxRegion = size_t(1) << 30, pad = simdjson::SIMDJSON_PADDING;
  PieceBuffer buffer(std::max<size_t>(piece_bytes, 64), kFront, pad);  // room for kPrefix before the last piece
  bool first = true, object = false;
  for (;;) {
    buffer.fill(in);
    char* data = buffer.data();
    const size_t filled = buffer.size();
    if (first) {
      const char opening = trace_opening(data, filled);
      if (opening == 0) return false;
      object = opening == '{';
    }
    if (buffer.end()) {
      if (first || !object) return read_piece(data, filled, buffer.capacity(), first), true;
      std::memcpy(data - kFront, kPrefix, kFront);
      read_piece(data - kFront, kFront + filled, kFront + buffer.capacity(), false);
      return true;
    }
    ClosedPiece piece;
    if (!piece.close(buffer, first && object)) {
      if (buffer.target() >= kMaxRegion) return false;
      buffer.grow();
      continue;
    }
    const char* events_end = nullptr;
    bool read = true;
    try {
      events_end = read_piece(data, piece.size(), buffer.capacity(), first);  // the text after the piece is its padding
    } catch (const Error&) {
      if (!first) throw;
      read = false;
    }
    if (!read || !piece.events_reach_cut(buffer, events_end)) {
      // The first piece's last boundary may lie in a list of objects before the events
      // ("deviceProperties"): a longer first piece has one after them. It is read afresh.
      if (!first || buffer.target() >= kMaxRegion) return false;
      piece.reopen(buffer);
      buffer.grow();
      continue;
    }
    piece.carry_rest(buffer);
    first = false;
  }
}

}  // namespace optrace::detail::kineto
