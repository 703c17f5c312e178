// optrace/detail/common/pieces.hpp: a text read a piece at a time, in bounded memory
#pragma once
// The buffer of every reader that never holds a file whole: the Kineto readers' streaming
// (kineto::stream_pieces: the import and the key averages), the hf op trace reader
// (op_trace::StreamReader) and the operator-inputs log reader (op_trace::oplog::read_log). Each
// reads a piece, handles it up to the last boundary it finds in it (an event's end, a line's
// end), and carries the rest into the next piece.

#include <cstddef>
#include <cstring>
#include <memory>

namespace optrace::detail {

// Files from this size on (and every gzip file) are streamed; smaller ones are mapped and read at
// once, which is as fast below it and needs no copy.
inline constexpr size_t kStreamFromBytes = size_t(4) << 20;
// The text read at a time (per thread, for the Kineto import): 1 MiB measured fastest, small
// enough to stay in the caches (docs/performance.md, "How cost grows with size").
inline constexpr size_t kStreamPieceBytes = size_t(1) << 20;
// A piece grows to hold an event (or a value) longer than itself, up to this: past it the text is
// refused rather than held, so that a hostile file (one endless string, a gzip bomb) cannot take
// the memory.
inline constexpr size_t kMaxPieceBytes = size_t(1) << 30;

// `fill` reads from `in` (`size_t read(char*, size_t)`, 0 at the end: FileReader) until the
// buffer holds `target()` bytes or the text ends. The caller handles the data up to a boundary,
// then `carry(n)` moves what follows the first n bytes to the front for the next fill; where no
// boundary lies in what was read (an event or a line longer than a piece), `grow` doubles the
// target and keeps the data. Memory is the longest piece's, whatever the text's size.
// `front` bytes of room lie before the data (a prefix the caller may write there, at
// `data() - front`); the `padding` bytes after the data are zero after each fill (simdjson reads
// up to SIMDJSON_PADDING bytes past a document's end).
class PieceBuffer {
 public:
  explicit PieceBuffer(size_t target, size_t front = 0, size_t padding = 0)
      : target_(target), front_(front), padding_(padding), storage_(new char[front + target + padding]) {}

  template <class Reader>
  void fill(Reader& in) {
    char* d = data();
    while (size_ < target_ && !end_) {
      const size_t n = in.read(d + size_, target_ - size_);
      if (n == 0) end_ = true;
      size_ += n;
    }
    std::memset(d + size_, 0, padding_);
  }

  void grow() {
    std::unique_ptr<char[]> bigger(new char[front_ + 2 * target_ + padding_]);
    std::memcpy(bigger.get() + front_, data(), size_);
    storage_ = std::move(bigger);
    target_ *= 2;
  }

  // Drops the first `n` bytes: the rest is the front of the next piece.
  void carry(size_t n) {
    if (n == 0) return;
    std::memmove(data(), data() + n, size_ - n);
    size_ -= n;
  }

  char* data() { return storage_.get() + front_; }
  size_t size() const { return size_; }
  // What a parser may read from data(): the data and its zeroed padding.
  size_t capacity() const { return size_ + padding_; }
  size_t target() const { return target_; }
  // Whether the text's end has been read (the data is its last piece).
  bool end() const { return end_; }

 private:
  size_t target_, front_, padding_;
  std::unique_ptr<char[]> storage_;
  size_t size_ = 0;
  bool end_ = false;
};

}  // namespace optrace::detail
