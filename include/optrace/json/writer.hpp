// optrace/json/writer.hpp: a small streaming JSON writer that writes numbers as Python does
#pragma once

#include <optrace/detail/common/printable.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace optrace::json {

/// Appends JSON to a string. Commas and nesting are tracked, so callers only say what comes
/// next. Floats are written as Python's `json` writes them: shortest round-trip digits, a
/// `.0` on integral values, and the tokens `NaN`, `Infinity`, `-Infinity`.
///
/// Example:
///   json::Writer w;
///   w.begin_object().key("n").value(3).key("xs").begin_array().value(1.5).end_array().end_object();
///   w.str();  // {"n": 3, "xs": [1.5]}
class Writer {
 public:
  /// `indent` > 0 pretty-prints with that many spaces; 0 writes Python's compact default
  /// (`", "` and `": "` separators).
  explicit Writer(int indent = 0) : indent_(indent) {}

  Writer& begin_object() { return open('{'); }
  Writer& end_object() { return close('}'); }
  Writer& begin_array() { return open('['); }
  Writer& end_array() { return close(']'); }

  Writer& key(std::string_view k) {
    separate();
    write_string(k);
    out_ += ": ";
    after_key_ = true;
    return *this;
  }

  Writer& value(std::string_view s) { separate(); write_string(s); return *this; }
  Writer& value(const char* s) { return value(std::string_view(s)); }
  Writer& value(const std::string& s) { return value(std::string_view(s)); }
  Writer& value(bool b) { separate(); out_ += b ? "true" : "false"; return *this; }
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Writer& value(T v) {
    separate();
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, r.ptr);
    return *this;
  }
  Writer& value(double d) { separate(); write_double(d); return *this; }
  Writer& null() { separate(); out_ += "null"; return *this; }
  /// Inserts already-serialized JSON as the next value.
  Writer& raw(std::string_view json) { separate(); out_ += json; return *this; }

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

  /// Appends `d` to `out` as Python's repr would (NaN, Infinity, -Infinity; 1.0 not 1).
  static void append_double(std::string& out, double d) {
    if (std::isnan(d)) { out += "NaN"; return; }
    if (std::isinf(d)) { out += d > 0 ? "Infinity" : "-Infinity"; return; }
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, d);
    std::string_view s(buf, static_cast<size_t>(r.ptr - buf));
    out += s;
    if (s.find_first_of(".e") == std::string_view::npos) out += ".0";
  }

  /// `s` as a JSON string. Each byte that is not UTF-8 (a file name may hold any) is written as
  /// U+FFFD, so the output stays valid JSON for every reader.
  static void append_string(std::string& out, std::string_view s) {
    static const char* hex = "0123456789abcdef";
    out += '"';
    for (size_t i = 0; i < s.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20) {
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 15];
          } else if (c < 0x80) {
            out += static_cast<char>(c);
          } else if (const size_t n = optrace::detail::utf8_sequence(s.substr(i))) {
            out.append(s.substr(i, n));
            i += n - 1;
          } else {
            out += "\xEF\xBF\xBD";  // U+FFFD
          }
      }
    }
    out += '"';
  }

 private:
  Writer& open(char c) {
    separate();
    out_ += c;
    first_.push_back(true);
    return *this;
  }
  Writer& close(char c) {
    bool empty = first_.back();
    first_.pop_back();
    if (indent_ > 0 && !empty) newline();
    out_ += c;
    return *this;
  }
  void separate() {
    if (after_key_) { after_key_ = false; return; }
    if (first_.empty()) return;
    if (!first_.back()) out_ += indent_ > 0 ? "," : ", ";
    first_.back() = false;
    if (indent_ > 0) newline();
  }
  void newline() {
    out_ += '\n';
    out_.append(first_.size() * static_cast<size_t>(indent_), ' ');
  }
  void write_string(std::string_view s) { append_string(out_, s); }
  void write_double(double d) { append_double(out_, d); }

  std::string out_;
  std::vector<bool> first_;
  bool after_key_ = false;
  int indent_;
};

}  // namespace optrace::json
