// text_reader.hpp: a text's bytes as detail::FileReader hands them, for the tests of the streamed
// readers (Kineto traces, hf op traces) and their fuzz targets
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string_view>

namespace optrace_test {

// Hands `text` (which must outlive it) `step` bytes at a time at most, and counts rewinds.
struct TextReader {
  std::string_view text;
  size_t step = 4096;
  size_t at = 0;
  int rewinds = 0;
  size_t read(char* into, size_t n) {
    const size_t k = std::min({n, step, text.size() - at});
    std::memcpy(into, text.data() + at, k);
    at += k;
    return k;
  }
  void rewind() {
    at = 0;
    ++rewinds;
  }
};

}  // namespace optrace_test
