// tests/fuzz/fuzz_observations.cpp: the observation-file reader (Observations::from_json) and
// what a loaded file answers (infer_dynamic_shapes, infer_arguments on meta, to_json).
#include "harness.hpp"

#include <optrace/observations.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  optrace_fuzz::expect_only_optrace_errors("from_json", [&] {
    optrace::Observations obs = optrace::Observations::from_json(optrace_fuzz::text_of(data, size));
    (void)obs.num_calls();
    (void)obs.history();
    optrace_fuzz::expect_only_optrace_errors("infer_dynamic_shapes", [&] {
      optrace::DynamicShapes ds = obs.infer_dynamic_shapes();
      (void)ds.to_python();
      (void)ds.to_json();
    });
    optrace_fuzz::expect_only_optrace_errors("infer_arguments", [&] { (void)obs.infer_arguments(); });
    optrace_fuzz::expect_only_optrace_errors("to_json", [&] { (void)obs.to_json(); });
  });
  return 0;
}
