// tests/fuzz/fuzz_kineto.cpp: the Kineto trace importer (kineto::parse) on arbitrary bytes, then
// the imported trace's export and its hf JSON.
#include "harness.hpp"

#include <optrace/kineto.hpp>

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
  return 0;
}
