// tests/fuzz/fuzz_observations.cpp: the observation-file reader (Observations::from_json), what a
// loaded file answers (infer_dynamic_shapes, infer_arguments on meta, to_json), and a plan made
// from it (plan.hpp), which must cover every call it was planned from. An input with a NUL byte
// is two files (split at the first one; JSON text has none), planned together: the plan covers
// both files' calls and counts them all, and a sum that overflows is refused, never negative.
#include "harness.hpp"

#include <optrace/observations.hpp>
#include <optrace/plan.hpp>

namespace {

// A stand-in (value_if_missing) counts in ranges but not in the equalities of shared symbols,
// so a call with one may be outside its own package's ties: no coverage property there.
bool has_stand_ins(const optrace::Observations& obs) { return obs.to_json().find("\"stand_ins\"") != std::string::npos; }

void plan_covers(const std::vector<optrace::Observations>& files) {
  optrace_fuzz::expect_only_optrace_errors("plan", [&] {
    optrace::Plan plan = optrace::Plan::from_observations(files);
    (void)plan.to_json();
    (void)plan.summary();
    int64_t calls = 0;
    for (const optrace::Observations& obs : files) {
      if (__builtin_add_overflow(calls, obs.num_calls(), &calls)) optrace_fuzz::property_failed("a plan of calls that overflow was made");
      if (has_stand_ins(obs)) return;
    }
    if (plan.num_calls() != calls) optrace_fuzz::property_failed("a plan does not count every call of its files");
    const optrace::DriftReport drift = plan.drift(files);
    // drift counts the signatures' calls, which are at most the files' totals (dropped signatures).
    if (drift.calls > calls || !drift.all_covered()) optrace_fuzz::property_failed("a plan does not cover the calls it was planned from");
  });
}

void one_file(std::string_view text) {
  optrace::Observations obs = optrace::Observations::from_json(text);
  (void)obs.num_calls();
  (void)obs.history();
  optrace_fuzz::expect_only_optrace_errors("infer_dynamic_shapes", [&] {
    optrace::DynamicShapes ds = obs.infer_dynamic_shapes();
    (void)ds.to_python();
    (void)ds.to_json();
  });
  optrace_fuzz::expect_only_optrace_errors("infer_arguments", [&] { (void)obs.infer_arguments(); });
  optrace_fuzz::expect_only_optrace_errors("to_json", [&] { (void)obs.to_json(); });
  plan_covers({obs});
}

void two_files(std::string_view first, std::string_view second) {
  std::vector<optrace::Observations> files{optrace::Observations::from_json(first), optrace::Observations::from_json(second)};
  plan_covers(files);
  // The first file's plan judges the second: any answer, or an optrace error.
  optrace_fuzz::expect_only_optrace_errors("drift", [&] {
    const optrace::DriftReport drift = optrace::Plan::from_observations({files[0]}).drift({files[1]});
    if (drift.covered < 0 || drift.covered > drift.calls) optrace_fuzz::property_failed("drift covers more calls than it read");
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = optrace_fuzz::text_of(data, size);
  const size_t nul = text.find('\0');
  optrace_fuzz::expect_only_optrace_errors("from_json", [&] {
    if (nul == std::string_view::npos) one_file(text);
    else two_files(text.substr(0, nul), text.substr(nul + 1));
  });
  return 0;
}
