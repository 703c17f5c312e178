// tests/fuzz/fuzz_op_trace.cpp: OpTrace::from_json (the hf op-trace reader) on arbitrary bytes.
// Property: whatever it reads, it writes back, and that text reads back to a trace that writes
// the same text (the JSON lists inputs by count, so the first write may reorder them, once).
#include "harness.hpp"

#include <optrace/op_trace.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  optrace_fuzz::expect_only_optrace_errors("from_json", [&] {
    optrace::OpTrace trace = optrace::OpTrace::from_json(optrace_fuzz::text_of(data, size));
    (void)trace.total_calls();
    (void)trace.unique_input_count();
    std::string text = trace.to_json();
    optrace::OpTrace back;
    try {
      back = optrace::OpTrace::from_json(text);
    } catch (const optrace::Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      optrace_fuzz::property_failed("a trace that was read cannot be read back after to_json");
    }
    if (back.to_json() != text) optrace_fuzz::property_failed("to_json, from_json, to_json changed the text");
    // merge re-indexes every input (the reader defers it): exercise that path too.
    optrace::OpTrace merged;
    merged.merge(trace).merge(back);
    if (merged.total_calls() != 2 * trace.total_calls()) optrace_fuzz::property_failed("merge lost calls");
  });
  return 0;
}
