// tests/fuzz/fuzz_execution_trace.cpp: the execution-trace reader (import_execution_trace) on
// arbitrary bytes, handed whole and in pieces of 1 to 61 bytes (the streamed read must answer
// as the whole one: the same trace, or the same error), then the imported trace's hf JSON read
// back.
#include "../text_reader.hpp"
#include "harness.hpp"

#include <optrace/kineto.hpp>

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace et = optrace::detail::kineto::execution_trace;
  const std::string_view text = optrace_fuzz::text_of(data, size);
  auto answer = [](auto&& read) -> std::string {
    try {
      return optrace::detail::kineto::import_execution_trace(read(), {}, optrace::detail::live_catalog()).trace.to_json();
    } catch (const optrace::Error& e) {
      return std::string("error: ") + e.what();
    }
  };
  optrace_test::TextReader pieces{text, 1 + size % 61};
  if (answer([&] { return et::read_trace_text(text, false); }) != answer([&] { return et::read_trace(pieces, false); }))
    optrace_fuzz::property_failed("an execution trace read in pieces differs from the same text read whole");
  optrace_fuzz::expect_only_optrace_errors("import_execution_trace", [&] {
    optrace::kineto::ImportResult r = optrace::detail::kineto::import_execution_trace(text, {}, optrace::detail::live_catalog());
    (void)r.report.to_string();
    const std::string hf = r.trace.to_json();
    try {
      if (optrace::OpTrace::from_json(hf).to_json() != hf)
        optrace_fuzz::property_failed("an imported execution trace changed through its hf JSON");
    } catch (const optrace::Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      optrace_fuzz::property_failed("an imported execution trace's hf JSON cannot be read back");
    }
  });
  return 0;
}
