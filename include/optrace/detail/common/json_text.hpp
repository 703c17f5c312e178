// optrace/detail/common/json_text.hpp: JSON text facts both readers share (DOM and On-Demand)
#pragma once
// Python's non-standard float tokens, simdjson's messages in words, how values are described in
// error messages, JSON pointer segments. The DOM reader (json/reader.hpp) and the On-Demand fast
// readers (detail/common/ondemand.hpp and their users) word errors the same way through these.

#include <simdjson.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace optrace::json {

/// How deep values may nest in optrace's files (an op's argument lists, an observed call's
/// input tree); deeper is a JsonError. Real ones nest a few levels; the bound keeps reading them
/// (recursive, as is destroying the values read) from exhausting a small thread stack, far below
/// simdjson's own depth limit of 1024.
inline constexpr int kMaxValueDepth = 128;

namespace detail {

// Python's json writes NaN, Infinity and -Infinity bare; simdjson (rightly) rejects them. Before
// parsing, each such token outside a string is replaced by a string that no real document holds
// ("\u0000NaN", ...), and the typed accessors read those strings back as numbers.
inline constexpr std::string_view kNaN = std::string_view("\0NaN", 4);
inline constexpr std::string_view kInf = std::string_view("\0Infinity", 9);
inline constexpr std::string_view kNegInf = std::string_view("\0-Infinity", 10);

/// Why a document with a key given twice in one object is refused (by the DOM reader, for every
/// key; by the streaming readers, for the keys they read): Python's json keeps the last value,
/// simdjson's lookup the first, so the document means two things.
inline constexpr const char* kDuplicateKey = "a key given twice in one object (JSON readers differ on which value they take)";

// simdjson's message for `error`, the same across simdjson versions: 3.12 prefixes the code's
// name ("TAPE_ERROR: ") and appends " This is a fatal and unrecoverable error." to some.
inline std::string simdjson_message(simdjson::error_code error) {
  if (error == simdjson::EMPTY) return "no JSON found (empty input)";  // 3.0: "Empty: ...", 3.12: "EMPTY: ..."
  std::string_view m = simdjson::error_message(error);
  const size_t colon = m.find(": ");
  if (colon != std::string_view::npos && colon > 0 &&
      m.substr(0, colon).find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789") == std::string_view::npos)
    m.remove_prefix(colon + 2);
  constexpr std::string_view fatal = " This is a fatal and unrecoverable error.";
  if (m.size() >= fatal.size() && m.substr(m.size() - fatal.size()) == fatal) m.remove_suffix(fatal.size());
  while (!m.empty() && m.back() == ' ') m.remove_suffix(1);
  return std::string(m);
}

inline bool is_special_float(std::string_view s) { return !s.empty() && s[0] == '\0' && (s == kNaN || s == kInf || s == kNegInf); }

inline double special_float_value(std::string_view s) {
  if (s == kNaN) return std::numeric_limits<double>::quiet_NaN();
  return s == kInf ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

// Whether the text between `from` (outside any string) and `to` leaves us inside a string.
// Jumps from quote to quote with memchr; a quote preceded by an odd run of backslashes is escaped.
inline bool ends_inside_string(const char* text_begin, const char* from, const char* to, bool inside) {
  const char* p = from;
  while (p < to) {
    const void* q = std::memchr(p, '"', static_cast<size_t>(to - p));
    if (q == nullptr) break;
    const char* quote = static_cast<const char*>(q);
    if (inside) {
      size_t backslashes = 0;
      for (const char* b = quote; b > text_begin && b[-1] == '\\'; --b) ++backslashes;
      if (backslashes % 2 == 0) inside = false;
    } else {
      inside = true;
    }
    p = quote + 1;
  }
  return inside;
}

inline bool is_json_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

inline bool is_value_end(char c) { return c == ',' || c == ']' || c == '}' || is_json_space(c); }

// The first occurrence of `token` ("NaN", "Infinity") in [from, end), or nullptr. memchr for its
// capital first letter, then a compare: glibc's memchr is vectorized, its memmem is not for
// needles this short, and the letter rarely starts anything else in op-trace JSON (`NoneType`
// aside), so this runs near memchr's speed.
inline const char* find_token(const char* from, const char* end, std::string_view token) {
  while (from < end) {
    const void* hit = std::memchr(from, token[0], static_cast<size_t>(end - from));
    if (hit == nullptr) return nullptr;
    const char* p = static_cast<const char*>(hit);
    if (static_cast<size_t>(end - p) >= token.size() && std::memcmp(p + 1, token.data() + 1, token.size() - 1) == 0) return p;
    from = p + 1;
  }
  return nullptr;
}

// Whether `text` holds "NaN" or "Infinity" anywhere (inside strings too): if not, it needs no rewrite.
inline bool has_float_tokens(std::string_view text) {
  const char* end = text.data() + text.size();
  return find_token(text.data(), end, "NaN") != nullptr || find_token(text.data(), end, "Infinity") != nullptr;
}

// Copies `text` into `out` (with simdjson's padding reserved), rewriting Python's non-standard
// float tokens outside strings. Returns false (leaving `out` untouched) when the text holds none.
//
// `exact` false: a token is rewritten where JSON's grammar allows a value there (after `[`, `,` or
// `:`, before `,`, `]`, `}` or the end), without tracking strings: fast. A string that holds such
// a pattern gets split by the rewrite into `"..."\u0000NaN"..."`, which is never valid JSON,
// so a parse error afterwards means "retry exact". `exact` true tracks string state (slower).
inline bool rewrite_python_floats(std::string_view text, std::string& out, bool exact = true) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  // The next 'N' of "NaN" or 'I' of "Infinity", whichever comes first. Each token's next
  // position is remembered, so the text is searched once per token overall.
  const char* next_hit[2] = {begin, begin};
  bool searched[2] = {false, false};
  const std::string_view tokens[2] = {"NaN", "Infinity"};
  if (begin == nullptr) return false;
  auto find = [&](const char* from) -> const char* {
    const char* best = nullptr;
    for (int t = 0; t < 2; ++t) {
      if (!searched[t] || (next_hit[t] != nullptr && next_hit[t] < from)) {
        searched[t] = true;
        next_hit[t] = find_token(from, end, tokens[t]);
      }
      if (next_hit[t] != nullptr && (best == nullptr || next_hit[t] < best)) best = next_hit[t];
    }
    return best;
  };

  const char* hit = find(begin);
  if (hit == nullptr) return false;
  out.clear();
  out.reserve(text.size() + text.size() / 8 + simdjson::SIMDJSON_PADDING);
  const char* copied = begin;   // text before this is in `out`
  const char* scanned = begin;  // string state known up to here
  bool inside = false;
  while (hit != nullptr) {
    bool nan = *hit == 'N';
    const char* token_begin = hit;
    const char* token_end = hit + (nan ? 3 : 8);
    bool negative = !nan && token_begin > begin && token_begin[-1] == '-';
    if (negative) --token_begin;
    bool alone;
    if (exact) {
      inside = ends_inside_string(begin, scanned, token_begin, inside);
      scanned = token_begin;
      // A bare token stands alone: not inside a string and not part of a longer word.
      alone = !inside && (token_end == end || !std::isalnum(static_cast<unsigned char>(*token_end))) &&
              (token_begin == begin || !std::isalnum(static_cast<unsigned char>(token_begin[-1])));
    } else {
      const char* before = token_begin;
      while (before > begin && is_json_space(before[-1])) --before;
      alone = (before == begin || before[-1] == '[' || before[-1] == ',' || before[-1] == ':') &&
              (token_end == end || is_value_end(*token_end));
    }
    if (alone) {
      out.append(copied, static_cast<size_t>(token_begin - copied));
      out += nan ? "\"\\u0000NaN\"" : negative ? "\"\\u0000-Infinity\"" : "\"\\u0000Infinity\"";
      copied = token_end;
    }
    hit = find(token_end);
  }
  out.append(copied, static_cast<size_t>(end - copied));
  return true;
}

// Writes the JSON pointer segment for `key` (RFC 6901: '~' -> "~0", '/' -> "~1").
inline void append_pointer_segment(std::string& path, std::string_view key) {
  path += '/';
  for (char c : key) {
    if (c == '~') path += "~0";
    else if (c == '/') path += "~1";
    else path += c;
  }
}

inline std::string_view trim(std::string_view s) {
  // Tokens seldom have spaces around them (a hot path: every field of every Kineto event): that
  // case checked first, before the loops (~0.5 us of a 22 KB trace's ~23 us import).
  if (!s.empty() && !is_json_space(s.back()) && !is_json_space(s.front())) return s;
  while (!s.empty() && is_json_space(s.back())) s.remove_suffix(1);
  while (!s.empty() && is_json_space(s.front())) s.remove_prefix(1);
  return s;
}

// Python's float tokens as they stand in JSON text ("NaN", "Infinity", "-Infinity"); nullopt for
// anything else.
inline std::optional<double> python_float_token(std::string_view raw) {
  raw = trim(raw);
  if (raw == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (raw == "Infinity") return std::numeric_limits<double>::infinity();
  if (raw == "-Infinity") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

// How error messages describe values: `string "abc"` (cut at 60 characters), `integer 3`,
// `number 1.5`, `NaN`, `null`, `true`, `a list of 2`, `an object`.
inline std::string describe_string(std::string_view s) {
  std::string out = "string \"";
  if (s.size() > 60) {
    out.append(s.substr(0, 57));
    out += "...";
  } else {
    out.append(s);
  }
  out += '"';
  return out;
}
inline std::string describe_number(std::string_view text) {
  text = trim(text);
  const bool integer = text.find_first_of(".eE") == std::string_view::npos;
  return (integer ? "integer " : "number ") + std::string(text);
}
inline std::string describe_number(double d) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  return "number " + std::string(buf, r.ptr);
}
inline std::string describe_list(size_t n) { return "a list of " + std::to_string(n); }

// A double as Python and IValue print it ("1.0", "1.", "-0.001", "1e-05", "inf", "-inf", "nan");
// false for anything else (optrace::parse_double, python_names.hpp).
inline bool parse_double(std::string_view s, double& out) {
  if (s == "inf" || s == "+inf") {
    out = std::numeric_limits<double>::infinity();
    return true;
  }
  if (s == "-inf") {
    out = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (s == "nan" || s == "-nan") {
    out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (s.empty() || s.size() > 64) return false;
  char buf[72];
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = '\0';
  char* end = nullptr;
  out = std::strtod(buf, &end);
  return end == buf + s.size();
}

}  // namespace detail
}  // namespace optrace::json
