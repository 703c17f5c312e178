// optrace/detail/common/printable.hpp: text from a file or a file name, made safe to print
#pragma once
// A name optrace prints (a file name, a backend a trace claims) may hold a newline that forges a
// line of a report, a control byte that moves the terminal's cursor, or bytes that are not UTF-8
// (a file name on Linux is any bytes) and make JSON output unreadable. `printable` escapes them
// for text; json::Writer writes U+FFFD for each byte that is not UTF-8. Both know UTF-8 by
// `utf8_sequence`, the one rule (RFC 3629: no overlong forms, no surrogates, nothing past
// U+10FFFF), which simdjson also applies to what optrace reads.

#include <cstddef>
#include <string>
#include <string_view>

namespace optrace::detail {

/// The length of the well-formed UTF-8 sequence that starts `s` (whose first byte is 0x80 or
/// more), or 0 when it is not one.
inline size_t utf8_sequence(std::string_view s) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  auto continues = [&](size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return i < s.size() && byte(i) >= lo && byte(i) <= hi;
  };
  const unsigned char c = byte(0);
  if (c >= 0xC2 && c <= 0xDF) return continues(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const bool second = c == 0xE0 ? continues(1, 0xA0) : c == 0xED ? continues(1, 0x80, 0x9F) : continues(1);
    return second && continues(2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const bool second = c == 0xF0 ? continues(1, 0x90) : c == 0xF4 ? continues(1, 0x80, 0x8F) : continues(1);
    return second && continues(2) && continues(3) ? 4 : 0;
  }
  return 0;
}

/// How many bytes at the start of `s` print as they are: printable ASCII and well-formed UTF-8.
inline size_t printable_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F) {
      ++i;
      continue;
    }
    const size_t n = c >= 0x80 ? utf8_sequence(s.substr(i)) : 0;
    // U+0080..U+009F are control codes too (U+009B starts a terminal command on some terminals).
    if (n == 0 || (c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0)) break;
    i += n;
  }
  return i;
}

/// `s` with what a terminal or a line-based reader would misread escaped: `\n`, `\r`, `\t`, and
/// `\xNN` for the other control bytes, DEL, the C1 controls' bytes, and each byte that is not
/// UTF-8. Printable ASCII and other well-formed UTF-8 pass unchanged.
inline std::string printable(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  while (!s.empty()) {
    const size_t clean = printable_prefix(s);
    out.append(s.substr(0, clean));
    if (clean == s.size()) break;
    const unsigned char c = static_cast<unsigned char>(s[clean]);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else out += {'\\', 'x', hex[c >> 4], hex[c & 15]};
    s.remove_prefix(clean + 1);
  }
  return out;
}

}  // namespace optrace::detail
