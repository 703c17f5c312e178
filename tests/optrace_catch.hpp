// optrace_catch.hpp: one include for Catch2 v2 (Debian bookworm) and v3 (Debian trixie)
#pragma once

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#if defined(OPTRACE_CATCH2_V3)
#include <catch2/catch_all.hpp>
#define OPTRACE_CONTAINS(s) Catch::Matchers::ContainsSubstring(s)
#define OPTRACE_STARTS_WITH(s) Catch::Matchers::StartsWith(s)
#define OPTRACE_CATCH_SKIP(reason) SKIP(reason)
#else
#include <catch2/catch.hpp>
#define OPTRACE_CONTAINS(s) Catch::Matchers::Contains(s)
#define OPTRACE_STARTS_WITH(s) Catch::Matchers::StartsWith(s)
// Catch2 v2 has no SKIP: say so and leave.
#define OPTRACE_CATCH_SKIP(reason) \
  do {                             \
    WARN(reason);                  \
    return;                        \
  } while (false)
#endif

// OPTRACE_SKIP(reason parts): skips the test case with its reason, which also goes to stdout as
// one whole line "SKIPPED: <reason>" (Catch's reporter wraps long messages at 80 columns):
// ctest marks the test skipped on "SKIPPED:", and cmake/skipped.sh lists that line. A reason that
// already begins "SKIPPED: " (a script's first line) is not prefixed twice.
#define OPTRACE_SKIP(msg)                                                                  \
  do {                                                                                     \
    std::ostringstream optrace_skip_text_;                                                 \
    optrace_skip_text_ << msg;                                                             \
    const std::string optrace_skip_reason_ = optrace_test::skip_reason(optrace_skip_text_.str()); \
    std::cout << "SKIPPED: " << optrace_skip_reason_ << std::endl;                         \
    OPTRACE_CATCH_SKIP(optrace_skip_reason_);                                              \
  } while (false)

namespace optrace_test {
// A skip's reason without a leading "SKIPPED: " (what a skipping script prints first).
inline std::string skip_reason(std::string text) {
  while (text.rfind("SKIPPED: ", 0) == 0) text.erase(0, 9);
  return text;
}
inline std::string data_path(const std::string& name) { return std::string(OPTRACE_TEST_DATA) + "/" + name; }
inline std::string temp_path(const std::string& name) { return std::string(OPTRACE_BINARY_DIR) + "/" + name; }
#ifdef OPTRACE_PYTHON
// Whether OPTRACE_PYTHON imports torch (asked once per process): the tests that compare with
// PyTorch's Python side skip without it.
inline bool python_torch_available() {
  static const bool available = [] {
    std::string cmd = std::string(OPTRACE_PYTHON) + " -c 'import torch' > /dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;
  }();
  return available;
}
#endif
}  // namespace optrace_test

// Built with AddressSanitizer (cmake/sanitize.sh): freed memory sits in ASan's quarantine, so the
// process's RSS says nothing about what the code under test keeps.
#if defined(__SANITIZE_ADDRESS__)
#define OPTRACE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OPTRACE_TEST_ASAN 1
#endif
#endif
#ifndef OPTRACE_TEST_ASAN
#define OPTRACE_TEST_ASAN 0
#endif
#if defined(__SANITIZE_THREAD__)
#define OPTRACE_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define OPTRACE_TEST_TSAN 1
#endif
#endif
#ifndef OPTRACE_TEST_TSAN
#define OPTRACE_TEST_TSAN 0
#endif

namespace optrace_test {
// Built with a sanitizer (cmake/sanitize.sh, tsan.sh: clang at -O0, 5-20x slower than Release):
// the heaviest repetitions run fewer rounds there, every path still taken once or more; the
// Release stages run them whole (CI's time, docs/ci.md).
inline constexpr bool kSanitized = OPTRACE_TEST_ASAN || OPTRACE_TEST_TSAN;
}  // namespace optrace_test
