// tests/fuzz/fuzz_op_trace.cpp: OpTrace::from_json (the hf op-trace reader) on arbitrary bytes.
// Properties: whatever it reads, it writes back, and that text reads back to a trace that writes
// the same text (the JSON lists inputs by count, so the first write may reorder them, once). The
// streamed reader (OpTrace::load's for gzip and large files), in batches of 64 bytes read 7 at a
// time, reads the same trace, or leaves the text to the whole read; never a text from_json refuses.
#include "harness.hpp"
#include "../text_reader.hpp"

#include <optrace/detail/op_trace/stream_reader.hpp>
#include <optrace/op_trace.hpp>

#include <optional>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes = optrace_fuzz::text_of(data, size);
  std::optional<std::vector<optrace::OpEntry>> streamed;
  {
    optrace_test::TextReader in{bytes, 7};
    streamed = optrace::detail::op_trace::stream_ops(in, 64);
  }
  bool read = false;
  optrace_fuzz::expect_only_optrace_errors("from_json", [&] {
    optrace::OpTrace trace = optrace::OpTrace::from_json(bytes);
    read = true;
    if (streamed && optrace::OpTrace::from_entries(std::move(*streamed)) != trace)
      optrace_fuzz::property_failed("the streamed reader read another trace than from_json");
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
  if (!read && streamed) optrace_fuzz::property_failed("the streamed reader read a text from_json refuses");
  return 0;
}
