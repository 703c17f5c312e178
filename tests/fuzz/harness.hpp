// tests/fuzz/harness.hpp: what every optrace fuzz target shares
#pragma once
// A target feeds the input to one reader. The only exception allowed out of a reader is
// optrace::Error (and its subclasses): bad input must become a clear error. Anything else that
// escapes (c10::Error, std::out_of_range, std::bad_alloc, ...) reaches std::terminate, which
// libFuzzer reports as a crash, as it does for the sanitizers' reports.

#include <optrace/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace optrace_fuzz {

inline std::string_view text_of(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// Runs `f`, swallowing optrace::Error only. With OPTRACE_FUZZ_PRINT set, prints what `step`
// answered: "ok" or the error's message (`OPTRACE_FUZZ_PRINT=1 build-fuzz/tests/fuzz/fuzz_op_trace
// FILE` shows what a user sees).
template <class F>
void expect_only_optrace_errors(const char* step, F&& f) {
  static const bool print = std::getenv("OPTRACE_FUZZ_PRINT") != nullptr;
  try {
    f();
    if (print) std::fprintf(stderr, "%s: ok\n", step);
  } catch (const optrace::Error& e) {
    if (print) std::fprintf(stderr, "%s: %s\n", step, e.what());
  }
}

// A property of a successfully read input that does not hold: a bug, reported as a crash.
[[noreturn]] inline void property_failed(const char* what) {
  std::fprintf(stderr, "optrace fuzz: property failed: %s\n", what);
  std::abort();
}

}  // namespace optrace_fuzz
