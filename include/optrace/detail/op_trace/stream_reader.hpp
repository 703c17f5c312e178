// optrace/detail/op_trace/stream_reader.hpp: hf op traces read from a file in pieces of bounded size
#pragma once
// OpTrace::load's and kineto::load_any's path for gzip files and large plain ones. An hf op trace
// is an object of ops, each an object whose "unique_inputs" list holds nearly all of the text:
//   {"add.Tensor": {"total_calls": 3, "unique_input_count": 1, "unique_inputs": [{...}, {...}]}, ...}
// This reader walks that frame itself, byte by byte (strings and brackets only: it finds where
// each value ends, it does not check what the value holds), and hands the values to the fast
// reader (fast_reader.hpp) to read: the unique inputs in batches of about `batch_bytes`, each
// batch copied out as one JSON list, the other members of an op one by one. The text is read from
// the file as the walk needs it and dropped once a batch is read, so memory holds a batch and the
// result, whatever the file's size (a single unique input longer than a batch is held whole).
// At the first thing it does not expect, this reader gives up (nullopt) and the caller reads the
// file whole, in memory: the fast reader, and the DOM reader, which names what is wrong. So, as
// the fast reader, it only has to read well-formed traces right, and never accept what those
// reject: every byte of the frame is checked here, every value by the fast reader.

#include <optrace/detail/common/json_text.hpp>
#include <optrace/detail/common/pieces.hpp>
#include <optrace/detail/op_trace/fast_reader.hpp>
#include <optrace/op_trace_types.hpp>

#include <simdjson.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace optrace::detail::op_trace {

// `Reader` hands the text's bytes: `size_t read(char*, size_t n)` gives up to n, 0 at the end
// (detail::FileReader).
template <class Reader>
class StreamReader {
 public:
  // `batch_bytes`: the unique inputs read at a time, as the Kineto reader's pieces.
  explicit StreamReader(Reader& in, size_t batch_bytes = kStreamPieceBytes)
      : in_(in), batch_bytes_(std::max<size_t>(batch_bytes, 1)), buffer_(2 * batch_bytes_ + 4096) {}

  // The trace's ops, or nullopt where the caller must read the text whole.
  std::optional<std::vector<OpEntry>> read() {
    try {
      return read_trace();
    } catch (const Fail&) {
      return std::nullopt;
    }
  }

 private:
  struct Fail {};
  // The one throw of this reader's signal: the file is then read whole.
  [[noreturn]] static void give_up() { throw Fail{}; }

  std::vector<OpEntry> read_trace() {
    std::vector<OpEntry> ops;
    std::unordered_set<std::string> names;
    int64_t calls = 0;
    expect('{');
    if (next() == '}') {
      ++pos_;
    } else {
      for (;;) {
        std::string name = key();
        if (!names.insert(name).second) give_up();  // a duplicate op
        OpEntry& entry = ops.emplace_back();
        entry.name = std::move(name);
        read_entry(entry);
        if (__builtin_add_overflow(calls, entry.total_calls(), &calls)) give_up();
        if (comma_or('}')) break;
      }
    }
    if (next() != -1) give_up();  // something after the root
    return ops;
  }

  void read_entry(OpEntry& entry) {
    expect('{');
    bool have_total = false, have_count = false, have_inputs = false;
    int64_t total_calls = 0, sum = 0, counted = 0;
    if (next() == '}') {
      ++pos_;
    } else {
      for (;;) {
        const std::string k = key();
        if (k == "unique_inputs") {
          if (have_inputs || next() != '[') give_up();
          have_inputs = true;
          read_inputs(entry, sum);
        } else {
          if (next() < 0) give_up();
          const size_t end = value_end();
          const simdjson::padded_string_view list = as_list(pos_, end);
          if (k == "total_calls") {
            if (have_total || !fast_.read_int(list, total_calls)) give_up();
            have_total = true;
          } else if (k == "unique_input_count") {
            if (have_count || !fast_.read_int(list, counted)) give_up();
            have_count = true;
            // As the fast reader: a hint for the inputs' vector, capped (checked after).
            if (!have_inputs && counted > 0) entry.unique_inputs.reserve(static_cast<size_t>(std::min<int64_t>(counted, 1 << 20)));
          } else if (!fast_.read_any(list)) {
            give_up();
          }
          pos_ = end;
        }
        if (comma_or('}')) break;
      }
    }
    if (!FastReader::close_entry(entry, have_total && have_count && have_inputs, total_calls, sum, counted)) give_up();
  }

  // The list at pos_ ('['): its items read in batches of about batch_bytes_, each batch's text
  // kept in the buffer until it is read.
  void read_inputs(OpEntry& entry, int64_t& sum) {
    ++pos_;
    if (next() == ']') {
      ++pos_;
      return;
    }
    for (;;) {
      const size_t batch = keep_ = pos_;  // at an item
      in_batch_ = true;
      size_t end;
      int c;
      do {
        end = value_end();
        pos_ = end;
        c = next();
        if (c != ',' && c != ']') give_up();
        ++pos_;
        if (c == ',' && next() < 0) give_up();
      } while (c == ',' && end - batch < batch_bytes_);
      in_batch_ = false;
      if (!fast_.read_inputs(as_list(batch, end), entry, sum)) give_up();
      if (c == ']') return;
    }
  }

  // ---- the frame's bytes ----

  char at(size_t p) { return buffer_.data()[p - base_]; }

  // Reads more of the text into the buffer, first dropping what lies before keep_ (and growing
  // the buffer when nothing can be dropped); false at the end of the text.
  bool more() {
    buffer_.carry(keep_ - base_);
    base_ = keep_;
    if (buffer_.size() == buffer_.target()) buffer_.grow();
    const size_t filled = buffer_.size();
    buffer_.fill(in_);
    return buffer_.size() > filled;
  }

  // The next byte that is not whitespace, pos_ on it, or -1 at the end of the text.
  int next() {
    for (;;) {
      for (; pos_ < base_ + buffer_.size(); ++pos_)
        if (!json::detail::is_json_space(at(pos_))) return static_cast<unsigned char>(at(pos_));
      if (!in_batch_) keep_ = pos_;
      if (!more()) return -1;
    }
  }

  void expect(char c) {
    if (next() != static_cast<unsigned char>(c)) give_up();
    ++pos_;
  }
  // After a member: true at `close` (passed), false at ',' (passed, and a member follows).
  bool comma_or(char close) {
    const int c = next();
    ++pos_;
    if (c == static_cast<unsigned char>(close)) return true;
    if (c != ',') give_up();
    return false;
  }

  // A key at pos_ (a string, then ':'), unescaped; pos_ after the ':'.
  std::string key() {
    if (next() != '"') give_up();
    const size_t end = value_end();
    std::string k;
    if (!fast_.read_string(as_list(pos_, end), k)) give_up();
    pos_ = end;
    expect(':');
    return k;
  }

  // Where the value that starts at pos_ ends: a string's closing quote, the bracket that closes a
  // list or an object (strings skipped), or the end of a number or literal. What it holds is the
  // fast reader's to check. The bytes from keep_ on stay in the buffer.
  size_t value_end() {
    if (pos_ >= base_ + buffer_.size() && !more()) give_up();
    const char first = at(pos_);
    if (first == ',' || first == ':' || first == ']' || first == '}') give_up();
    if (!in_batch_) keep_ = pos_;  // kept from its start (as_list reads it)
    const bool scalar = first != '"' && first != '[' && first != '{';
    int depth = 0;
    bool in_string = false, escaped = false;
    size_t p = pos_;
    for (;;) {
      for (const size_t stop = base_ + buffer_.size(); p < stop; ++p) {
        const char c = at(p);
        if (scalar) {
          if (json::detail::is_value_end(c)) return p;
        } else if (in_string) {
          if (escaped) escaped = false;
          else if (c == '\\') escaped = true;
          else if (c == '"') {
            in_string = false;
            if (depth == 0) return p + 1;
          }
        } else if (c == '"') {
          in_string = true;
        } else if (c == '[' || c == '{') {
          ++depth;
        } else if (c == ']' || c == '}') {
          if (--depth == 0) return p + 1;
        }
      }
      if (!more()) {
        if (scalar && p > pos_) return p;  // a number at the end of the text (the frame then fails)
        give_up();
      }
    }
  }

  // text[from, to) as a JSON list ("[" text "]") in scratch_, with simdjson's padding after it.
  simdjson::padded_string_view as_list(size_t from, size_t to) {
    const size_t n = to - from;
    scratch_.resize(std::max(scratch_.size(), n + 2 + simdjson::SIMDJSON_PADDING));
    scratch_[0] = '[';
    std::memcpy(&scratch_[1], buffer_.data() + (from - base_), n);
    scratch_[n + 1] = ']';
    std::memset(&scratch_[n + 2], 0, simdjson::SIMDJSON_PADDING);
    return simdjson::padded_string_view(scratch_.data(), n + 2, scratch_.size());
  }

  Reader& in_;
  const size_t batch_bytes_;
  PieceBuffer buffer_;  // the text's bytes [base_, base_ + buffer_.size())
  size_t base_ = 0;
  size_t pos_ = 0;         // where the walk is, in the text
  size_t keep_ = 0;        // the buffer keeps the text from here on: a batch's or a value's start
  bool in_batch_ = false;  // keep_ holds a batch's start
  std::string scratch_;    // a value or batch as a padded JSON list
  FastReader fast_;
};

// The ops of the hf op trace `in` reads, streamed; nullopt where it must be read whole.
template <class Reader>
std::optional<std::vector<OpEntry>> stream_ops(Reader& in, size_t batch_bytes = kStreamPieceBytes) {
  return StreamReader<Reader>(in, batch_bytes).read();
}

}  // namespace optrace::detail::op_trace
