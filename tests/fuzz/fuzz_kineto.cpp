// tests/fuzz/fuzz_kineto.cpp: the Kineto trace importer (kineto::parse) on arbitrary bytes, then
// the imported trace's export and its hf JSON; and the same bytes read in pieces on threads.
#include "harness.hpp"
#include "../text_reader.hpp"

#include <optrace/kineto.hpp>

#include <algorithm>
#include <cstring>

namespace {

// The trace and report read from `bytes` in up to `wanted` pieces (1: whole), or the error.
std::string read_in_pieces(std::string_view bytes, size_t wanted) {
  std::string text(bytes);
  text.reserve(text.size() + simdjson::SIMDJSON_PADDING);
  try {
    optrace::kineto::ImportResult r = optrace::detail::kineto::import_in_pieces(
        text.data(), text.size(), text.capacity(), {}, optrace::detail::live_catalog(), wanted);
    return r.trace.to_json() + r.report.to_string();
  } catch (const optrace::Error& e) {
    return std::string("error: ") + e.what();
  }
}

// The same, streamed in pieces of `piece_bytes` (Kineto traces larger than a few MB are read so).
std::string read_streamed(std::string_view bytes, size_t piece_bytes) {
  optrace_test::TextReader reader{bytes, SIZE_MAX};
  try {
    optrace::kineto::ImportResult r = optrace::detail::kineto::import_stream(
        reader, optrace::kineto::ImportOptions().threads(2), optrace::detail::live_catalog(),
        [&] { return optrace::kineto::parse(bytes); }, piece_bytes);
    return r.trace.to_json() + r.report.to_string();
  } catch (const optrace::Error& e) {
    return std::string("error: ") + e.what();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  optrace_fuzz::expect_only_optrace_errors("parse", [&] {
    optrace::kineto::ImportResult r = optrace::kineto::parse(optrace_fuzz::text_of(data, size));
    (void)r.report.to_string();
    std::string hf = r.trace.to_json();
    try {
      // The hf JSON lists inputs by count: compare what reading it writes again.
      if (optrace::OpTrace::from_json(hf).to_json() != hf)
        optrace_fuzz::property_failed("an imported trace changed through its hf JSON");
    } catch (const optrace::Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      optrace_fuzz::property_failed("an imported trace's hf JSON cannot be read back");
    }
    (void)optrace::kineto::to_json(r.trace);
  });
  optrace_fuzz::expect_only_optrace_errors("import_in_pieces", [&] {
    // Cut at the profiler's "},\n  {" wherever it is (in a string, a deeper list, the keys
    // around the events): the same trace and report, or the same error, as the whole read.
    const std::string whole = read_in_pieces(optrace_fuzz::text_of(data, size), 1);
    for (size_t wanted : {2, 3})
      if (read_in_pieces(optrace_fuzz::text_of(data, size), wanted) != whole)
        optrace_fuzz::property_failed("a trace read in pieces differs from the trace read whole");
    for (size_t piece : {64, 512})
      if (read_streamed(optrace_fuzz::text_of(data, size), piece) != whole)
        optrace_fuzz::property_failed("a trace streamed in pieces differs from the trace read whole");
  });
  return 0;
}
