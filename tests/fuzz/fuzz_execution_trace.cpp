// tests/fuzz/fuzz_execution_trace.cpp: the execution-trace reader (import_execution_trace) on
// arbitrary bytes, then the imported trace's hf JSON read back.
#include "harness.hpp"

#include <optrace/kineto.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  optrace_fuzz::expect_only_optrace_errors("import_execution_trace", [&] {
    std::string text(optrace_fuzz::text_of(data, size));
    optrace::kineto::ImportResult r =
        optrace::detail::kineto::import_execution_trace(text, {}, optrace::detail::live_catalog());
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
