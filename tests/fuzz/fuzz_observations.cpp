// tests/fuzz/fuzz_observations.cpp: the observation-file reader (Observations::from_json), what a
// loaded file answers (infer_dynamic_shapes, infer_arguments on meta, to_json), and a plan made
// from it (plan.hpp), which must cover every call it was planned from.
#include "harness.hpp"

#include <optrace/observations.hpp>
#include <optrace/plan.hpp>

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
    optrace_fuzz::expect_only_optrace_errors("plan", [&] {
      optrace::Plan plan = optrace::Plan::from_observations({obs});
      (void)plan.to_json();
      (void)plan.summary();
      // A stand-in (value_if_missing) counts in ranges but not in the equalities of shared
      // symbols, so a call with one may be outside its own package's ties: no property there.
      if (obs.to_json().find("\"stand_ins\"") != std::string::npos) return;
      if (!plan.drift({obs}).all_covered()) optrace_fuzz::property_failed("a plan does not cover the calls it was planned from");
    });
  });
  return 0;
}
