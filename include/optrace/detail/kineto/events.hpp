// optrace/detail/kineto/events.hpp: a Kineto trace's events list, times and error paths (no libtorch)
#pragma once
// What every reader of a `*.pt.trace.json` needs before it knows what an event means: where the
// events list is (the document's "traceEvents", or the document itself when it is a list), the
// times exactly as integer nanoseconds, and errors that name the event's JSON pointer. The op
// importer (importer.hpp, which needs the operator facts), the key averages
// (detail/key_averages/read.hpp) and the rank summary (detail/rank_summary/read.hpp), which need
// none, read through these, so that a trace one of them reads the others read too, with the same
// words for what is wrong; the last two walk their events with for_each_event.

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
  optrace::detail::raise_json(path, "malformed JSON: " + json::detail::simdjson_message(e));
}

// A key a streaming reader reads, given twice in one object: refused at its path, as the DOM
// reader refuses every such key (json::detail::kDuplicateKey).
[[noreturn]] inline void duplicate_key(const std::string& path) { optrace::detail::raise_json(path, json::detail::kDuplicateKey); }

template <class V>
[[noreturn]] void expected(V& v, const std::string& path, const char* what) {
  optrace::detail::raise_json(path, std::string(what) + ", got " + ondemand::describe(v));
}

// The JSON pointer of event `index` of the list at `events_path`, for errors and examples.
inline std::string event_path_of(std::string_view events_path, uint32_t index) {
  return std::string(events_path) + "/" + std::to_string(index);
}

// ---- walking the events list, event by event and member by member ----

// An event's JSON pointer (event_path_of), made when called: only an error needs it, and a 100 MB
// trace has a million events that need none. Two words, no string, per event.
class EventPath {
 public:
  EventPath(const std::string& events_path, uint32_t index) : events_path_(events_path), index_(index) {}
  std::string operator()() const { return event_path_of(events_path_, index_); }

 private:
  const std::string& events_path_;
  uint32_t index_;
};

// One member of an event (for_each_event): its key compared in place, its value read as the
// readers read "ph", "cat", "name", "ts", "dur", with errors at the member's path.
class EventMember {
 public:
  EventMember(od::field& field, const EventPath& path) : field_(field), key_(field.key().raw()), path_(path) {}
  // Whether the key is `name` (ondemand::key_is: an escaped key never is).
  bool is(std::string_view name) const { return ondemand::key_is(key_, name); }
  od::value& value() { return field_.value(); }
  // The path of the event it is a member of.
  const EventPath& event_path() const { return path_; }
  // The value's token as written (ondemand::raw_token), unchecked.
  std::string_view token() { return ondemand::raw_token(value()); }
  // The token into `into`, which must be unread (a default view: what every read below sets is
  // a view into the document); else the key is given twice (duplicate_key).
  void token(std::string_view& into, const char* key) {
    once(into, key);
    into = token();
  }
  // The value, a string, into `into` (unescaped only where it holds an escape). Throws JsonError
  // at "<event>/<key>": "expected a string, got ...", or for a key given twice.
  void string(std::string_view& into, const char* key) {
    once(into, key);
    if (!ondemand::read_string(value(), into)) expected(value(), path_() + "/" + key, "expected a string");
  }
  // A number's token into `into`, read exactly later (parse_time_ns: a time); a string, a list or
  // a literal throws JsonError at "<event>/<key>": "expected a number, got ...", as does a key
  // given twice.
  void number(std::string_view& into, const char* key) {
    once(into, key);
    into = token();
    if (into.empty() || !(into[0] == '-' || (into[0] >= '0' && into[0] <= '9')))
      expected(value(), path_() + "/" + key, "expected a number");
  }

 private:
  void once(std::string_view into, const char* key) const {
    if (into.data() != nullptr) duplicate_key(path_() + "/" + key);
  }

  od::field& field_;
  const char* key_;
  const EventPath& path_;
};

// Reads each event of `events`, the list at `events_path` (what walk_events hands read_events),
// into a fresh `Event` (default-initialized, as `Event event;`: its members need initializers):
// `on_member(Event&, EventMember&) -> bool` on each of its members in order while it returns true
// (false leaves the rest of the event unread: On-Demand skips it), then `on_event(Event&, const
// EventPath&)`. One loop with the callers' code inlined in it, as each reader had written it: the
// hot loop of reading a 100 MB trace (a callback per event, which g++ 12 left out of line, cost
// 40-55 instructions an event more, 1.5% of the rank reader's). Throws JsonError at the event's
// path for malformed JSON and for an element that is no object ("expected an event object, got
// ..."), and what the callbacks throw.
template <class Event, class OnMember, class OnEvent>
void for_each_event(od::array& events, const std::string& events_path, OnMember&& on_member, OnEvent&& on_event) {
  uint32_t index = 0;
  for (auto element : events) {
    const EventPath path(events_path, index);
    od::value v;
    if (auto e = element.get(v)) malformed(path(), e);
    od::object object;
    if (v.get_object().get(object)) expected(v, path(), "expected an event object");
    Event event;  // not `{}`: zeroing the key averages' event first cost 13 instructions an event
    for (auto member : object) {
      if (auto e = member.error()) malformed(path(), e);
      EventMember m(member.value_unsafe(), path);  // not copied out (a hot loop)
      if (!on_member(event, m)) break;
    }
    on_event(event, path);
    ++index;
  }
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

// Whether the JSON string whose text (between its quotes) is [begin, end) is `name`, its escapes
// read by simdjson, as every reader here reads keys ("trace\u0045vents" is "traceEvents").
inline bool is_key(const char* begin, const char* end, std::string_view name) {
  const std::string_view raw(begin, static_cast<size_t>(end - begin));
  if (raw.find('\\') == std::string_view::npos) return raw == name;
  const simdjson::padded_string quoted("\"" + std::string(raw) + "\"");
  simdjson::dom::parser parser;
  std::string_view key;
  return !parser.parse(quoted).get_string().get(key) && key == name;
}

// Whether the root object's members in [from, end) (from past its events list, to its closing
// brace or the end of the text read) name "traceEvents" again. Python's json (HTA, Chakra) takes
// the last such list, a reader that stops at the first list another one: one trace, two sets of
// events, so the readers refuse it (kDuplicateKey at /traceEvents). A pass over the bytes that
// follows strings and their escapes; what comes after the events list is a few short members.
inline bool events_key_again(const char* from, const char* end) {
  size_t depth = 0;
  for (const char* p = from; p < end; ++p) {
    switch (*p) {
      case '"': {
        const char* begin = p + 1;
        for (++p; p < end && *p != '"'; ++p)
          if (*p == '\\') ++p;
        if (p >= end) return false;
        if (depth == 0) {
          const char* colon = p + 1;
          while (colon < end && json::detail::is_json_space(*colon)) ++colon;
          if (colon < end && *colon == ':' && is_key(begin, p, "traceEvents")) return true;
        }
        break;
      }
      case '{':
      case '[': ++depth; break;
      case '}':
      case ']':
        if (depth == 0) return false;  // the root object's end
        --depth;
        break;
      default: break;
    }
  }
  return false;
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
      if (found) duplicate_key("/traceEvents");  // the members after the list are iterated here (on_field)
      found = true;
      od::array events;
      if (f.value().get_array().get(events)) expected(f.value(), "/traceEvents", "expected a list of events");
      read_events(events, std::string("/traceEvents"));
      const char* after = nullptr;
      if (doc.current_location().get(after)) after = nullptr;
      if (events_end != nullptr) *events_end = after;
      if constexpr (!other_fields) {
        // The members after the list are not iterated: looked at as text for a second list.
        if (after != nullptr && events_key_again(after, data + size)) duplicate_key("/traceEvents");
        break;
      }
    }
    if (!found) optrace::detail::raise_json("", "missing key \"traceEvents\"");
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

// The last event boundary in data[0, size) with a line break between the comma and the '{' (the
// profiler's `},\n  {`, json.dump(indent=...)'s): found from the end, the bytes before unread.
// Not inside a string (no string holds a line break), but maybe in a deeper list, or in another
// key's: the reader of the piece checks.
inline bool find_last_line_cut(const char* data, size_t size, Cut& cut) {
  for (size_t p = size; p > 0;) {
    const void* open = ::memrchr(data, '{', p);
    if (open == nullptr) return false;
    const size_t r = static_cast<size_t>(static_cast<const char*>(open) - data);
    p = r;
    size_t q = r;
    while (q > 0 && is_json_space(data[q - 1])) --q;
    if (q < 2 || data[q - 1] != ',' || data[q - 2] != '}') continue;
    if (!is_event_open_after_comma(data, q - 1, r, 0)) continue;
    cut.comma = q - 1;
    cut.open = r;
    return true;
  }
  return false;
}

// The boundaries between the events of a trace's events list, found by the text's tokens:
// data[0, size) read from a document's start (a trace, or a streamed piece: a list of events),
// strings and their escapes followed, so that any whitespace between events (none included:
// `},{`) is found and no brace inside a string is. The events list is the root list, or the
// value of the root object's first "traceEvents" key (written without escapes). Calls
// `on_cut(const Cut&)` at each boundary, in order, until it returns false, the list ends, or the
// text read does (a string or an event cut off there). Depth is a count, not recursion: any
// nesting is a pass over the bytes.
template <class OnCut>
void for_each_event_cut(const char* data, size_t size, OnCut&& on_cut) {
  size_t depth = 0;
  size_t events_depth = 0;  // the list's, once known: its events close back to it
  bool root_object = false;
  size_t key_begin = 0, key_end = 0;  // the last string in the root object: the key of a list opening there
  auto skip_space = [&](size_t p) {
    while (p < size && is_json_space(data[p])) ++p;
    return p;
  };
  for (size_t p = 0; p < size; ++p) {
    switch (data[p]) {
      case '"': {  // to the closing quote: the first one after an even run of backslashes
        const size_t begin = p + 1;
        for (;;) {
          const void* quote = std::memchr(data + p + 1, '"', size - (p + 1));
          if (quote == nullptr) return;
          p = static_cast<size_t>(static_cast<const char*>(quote) - data);
          size_t backslashes = 0;
          while (data[p - 1 - backslashes] == '\\') ++backslashes;
          if (backslashes % 2 == 0) break;
        }
        if (depth == 1) {
          key_begin = begin;
          key_end = p;
        }
        break;
      }
      case '[':
        if (depth == 0) events_depth = 1;
        else if (depth == 1 && root_object && events_depth == 0 && key_end - key_begin == 11 &&
                 std::memcmp(data + key_begin, "traceEvents", 11) == 0)
          events_depth = 2;
        ++depth;
        break;
      case '{':
        if (depth == 0) root_object = true;
        ++depth;
        break;
      case ']':
      case '}':
        if (depth == 0 || --depth < events_depth) return;
        if (depth == events_depth && data[p] == '}') {
          const size_t comma = skip_space(p + 1);
          if (comma >= size || data[comma] != ',') break;
          const size_t open = skip_space(comma + 1);
          if (open < size && data[open] == '{' && !on_cut(Cut{comma, open})) return;
        }
        break;
      default: break;
    }
  }
}

// How a streamed trace's text opens: '{' (an object with "traceEvents"), '[' (a bare list of
// events), or 0 (neither: it cannot be streamed).
inline char trace_opening(const char* data, size_t size) {
  size_t at = 0;
  while (at < size && is_json_space(data[at])) ++at;
  return at < size && (data[at] == '{' || data[at] == '[') ? data[at] : 0;
}

// Whether text whose first bytes are `head` may be what a trace reader reads: an object or a
// list, after white space and a UTF-8 byte order mark (all white space: not told yet). A large
// file that may not is refused by its first bytes (refuse_not_json), not read whole for the JSON
// parser to name it: `optrace summary` of a 300 MB file of junk took 3.9 s and 640 MB that way.
inline bool may_begin_json(std::string_view head) {
  if (head.substr(0, 3) == "\xEF\xBB\xBF") head.remove_prefix(3);
  size_t at = 0;
  while (at < head.size() && is_json_space(head[at])) ++at;
  return at == head.size() || trace_opening(head.data() + at, head.size() - at) != 0;
}

[[noreturn]] inline void refuse_not_json() {
  optrace::detail::raise_json("", "not a trace: its first bytes begin no JSON object or list");
}

// Before a large file is read whole (to be read, or for the parser to name its error): refuses
// it (refuse_not_json) when its first bytes may not begin JSON. `in` is rewound, before and after.
template <class Source>
void refuse_unless_json(Source& in) {
  in.rewind();
  std::string head(size_t(64) << 10, '\0');
  head.resize(in.read(head.data(), head.size()));
  in.rewind();
  if (!may_begin_json(head)) refuse_not_json();
}

// A piece of a streamed trace, in its PieceBuffer, closed at its last event boundary so that it
// is a JSON document of its own: the first piece of an object then ends "}]}", any other "}]".
// The closing bytes are written over the comma and the byte after it (the next event's '{' where
// nothing lies between), and put back before the piece is read again or carried on.
class ClosedPiece {
 public:
  // Closes the buffer's piece at its last boundary (a line break's where there is one, else the
  // tokens'); false where it holds none.
  bool close(PieceBuffer& buffer, bool first_of_object) {
    char* data = buffer.data();
    if (!find_last_line_cut(data, buffer.size(), cut_)) {
      bool found = false;
      for_each_event_cut(data, buffer.size(), [&](const Cut& cut) {
        cut_ = cut;
        return found = true;
      });
      if (!found) return false;
    }
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
    reopen(buffer);
    buffer.carry(cut_.open - 1);
    buffer.data()[0] = '[';
  }
  // Where the carried text began in the piece.
  size_t carried_from() const { return cut_.open - 1; }

 private:
  Cut cut_;
  char saved_[2] = {};
  bool first_of_object_ = false;
};

// How stream_pieces hands an object's last piece: its events, then the root's other keys
// ("[...], "key": ...}").
enum class LastPiece {
  AsTrace,  // made a trace of its own: `{"traceEvents":` written before it
  AsTail,   // as it is, StreamPiece::tail set: for a reader that takes that form (read_pieces)
};

// A piece of a streamed trace, a JSON document of its own, as stream_pieces hands it.
struct StreamPiece {
  char* data;
  size_t size;
  size_t capacity;  // readable (simdjson's padding after the text) and writable
  bool first;       // the trace's first piece: read afresh (it may come again, longer)
  bool last;        // the rest of the trace
  bool tail;        // a list of events, then the rest of a root object (LastPiece::AsTail)
};

// What the reader of a piece made of it.
enum class PieceRead {
  Read,    // read: its events list ended at `events_end` (walk_events')
  Failed,  // not read (an error): a first piece comes again, longer; otherwise the trace is read whole
  Done,    // the reader is done with the trace: its result is made, or it reads the trace otherwise
};

// The one streaming driver of a Kineto trace: reads the trace `in` hands (`size_t read(char*,
// size_t)`, 0 at the end: detail::FileReader) about `piece_bytes` at a time, each piece made a JSON
// document of its own and handed, in order, to `read_piece(const StreamPiece&, const char*&
// events_end) -> PieceRead`:
// - the first piece is the trace up to its last event boundary, closed with "]}" (or "]" for a
//   bare list of events);
// - each next piece, the events up to the next boundary, as a list ("[...]");
// - the last, the rest: for an object as `last` says, for a bare list as it is.
// A boundary is found by the line break between two events where the layout has one, else by the
// text's tokens (ClosedPiece). Each piece's events list must reach its cut (else the cut lay in a
// deeper list, or in another key's): a first piece that does not, or fails to read, comes again,
// longer (its last line break may lie in a list of objects before the events: "deviceProperties").
// The memory is a piece's, grown to hold an event longer than one, whatever the trace's size.
// Returns true when the trace was read to its end (or the reader said Done); false where it
// cannot be streamed and the caller reads it whole, which also names any error: a text that is
// not an object or a list, a piece that fails (a later one, or the last), a later cut that was no
// boundary. Throws JsonError where no boundary lies within `max_piece_bytes` of text (one event,
// or the text before the events, that long; an endless string): refused, not held.
template <class Reader, class ReadPiece>
bool stream_pieces(Reader& in, size_t piece_bytes, LastPiece last, ReadPiece&& read_piece,
                   size_t max_piece_bytes = kMaxPieceBytes) {
  static constexpr char kPrefix[] = "{\"traceEvents\":";
  constexpr size_t kFront = sizeof kPrefix - 1;
  PieceBuffer buffer(std::max<size_t>(piece_bytes, 64), last == LastPiece::AsTrace ? kFront : 0, simdjson::SIMDJSON_PADDING);
  bool first = true, object = false;
  size_t offset = 0;  // the buffer's first byte in the text, for the error
  for (;;) {
    buffer.fill(in);
    char* data = buffer.data();
    if (first) {
      const char opening = trace_opening(data, buffer.size());
      if (opening == 0) return false;
      object = opening == '{';
    }
    const char* events_end = nullptr;
    if (buffer.end()) {
      StreamPiece piece{data, buffer.size(), buffer.capacity(), first, true, false};
      if (!first && object && last == LastPiece::AsTail) {
        piece.tail = true;
      } else if (!first && object) {
        std::memcpy(data - kFront, kPrefix, kFront);
        piece = StreamPiece{data - kFront, kFront + piece.size, kFront + piece.capacity, false, true, false};
      }
      return read_piece(piece, events_end) != PieceRead::Failed;
    }
    ClosedPiece closed;
    const bool cut = closed.close(buffer, first && object);
    if (cut) {
      const PieceRead read = read_piece(StreamPiece{data, closed.size(), buffer.capacity(), first, false, false}, events_end);
      if (read == PieceRead::Done) return true;
      if (read == PieceRead::Read && closed.events_reach_cut(buffer, events_end)) {
        closed.carry_rest(buffer);
        offset += closed.carried_from();
        first = false;
        continue;
      }
      closed.reopen(buffer);
      if (!first) return false;
    }
    if (buffer.target() >= max_piece_bytes) {
      if (cut) return false;  // a first piece that never read: the whole read names why
      optrace::detail::raise_json(object && !first ? "/traceEvents" : "",
                      "no boundary between two events in the " + std::to_string(buffer.target()) + " bytes from byte " +
                          std::to_string(offset) + " on (one event that long, or a string never closed): not read, to bound the memory");
    }
    buffer.grow();
  }
}

// Reads the trace `in` hands a piece of about `piece_bytes` at a time (stream_pieces), each passed
// to `read_piece(data, size, capacity, first)`, which walks it (walk_events, with on_field for the
// root's other keys) and returns where its events list ends (walk_events' `events_end`); `first`:
// start afresh. The last piece of an object is a trace of its own. Returns false where the caller
// must read the text whole (stream_pieces says when; any error read_piece throws included, the
// whole read naming it); throws stream_pieces' JsonError.
template <class Reader, class ReadPiece>
bool stream_documents(Reader& in, size_t piece_bytes, ReadPiece&& read_piece) {
  return stream_pieces(in, piece_bytes, LastPiece::AsTrace, [&](const StreamPiece& piece, const char*& events_end) {
    try {
      events_end = read_piece(piece.data, piece.size, piece.capacity, piece.first);
      return PieceRead::Read;
    } catch (const Error&) {
      return PieceRead::Failed;
    }
  });
}

}  // namespace optrace::detail::kineto
