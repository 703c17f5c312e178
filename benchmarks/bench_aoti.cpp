// bench_aoti: what optrace::aoti::Package::call adds to AOTInductor's own run (issue 32, item 5):
// flattening the call by the in_spec, the guard, rebuilding the outputs by the out_spec.
//
//   bench_aoti PACKAGE.pt2 OBSERVATIONS.json [CALLS]
//
// Builds the inputs of the observation file's first history signature (as verify does), then
// times, alternating in rounds, CALLS calls (default 20000) of: prepare() alone (flatten + guard),
// outputs() alone (the out_spec), Package::call, and run() on the same flat tensors;
// prints the median per call of each over the rounds and call - run. libtorch >= 2.6.
// benchmarks/aoti.sh compiles the demo's package and runs it.
#include <optrace/aoti.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

template <class F>
double per_call_us(int64_t calls, F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < calls; ++i) f();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / static_cast<double>(calls);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: bench_aoti PACKAGE.pt2 OBSERVATIONS.json [CALLS]\n");
    return 2;
  }
  const int64_t calls = argc == 4 ? std::stoll(argv[3]) : 20000;
  optrace::aoti::Package pkg(argv[1]);
  optrace::Observations obs = optrace::load_observations(argv[2]);
  optrace::Arguments a = obs.materialize_signature(0, optrace::MaterializeOptions().int_range(0, 8));
  auto [args, kwargs] = optrace::detail::aoti::split(a);  // as verify passes them
  c10::InferenceMode inference;
  const std::vector<at::Tensor> flat = pkg.prepare(args, kwargs);
  const std::vector<at::Tensor> out = pkg.run(flat);
  std::printf("package %s %s, inputs %s (%zu tensors), %lld calls per round\n", argv[1], pkg.signature().c_str(),
              a.describe().c_str(), flat.size(), static_cast<long long>(calls));
  std::vector<double> prepare, rebuild, call, run;
  for (int round = 0; round < 7; ++round) {
    prepare.push_back(per_call_us(calls, [&] { (void)pkg.prepare(args, kwargs); }));
    rebuild.push_back(per_call_us(calls, [&] { (void)pkg.outputs(out); }));
    call.push_back(per_call_us(calls, [&] { (void)pkg.call(args, kwargs); }));
    run.push_back(per_call_us(calls, [&] { (void)pkg.run(flat); }));
  }
  std::printf("prepare (flatten + guard)  %8.3f us\n", median(prepare));
  std::printf("outputs (out_spec)         %8.3f us\n", median(rebuild));
  std::printf("Package::call              %8.3f us\n", median(call));
  std::printf("run                      %8.3f us\n", median(run));
  std::printf("call - run                 %8.3f us (median of 7 rounds)\n", median(call) - median(run));
  return 0;
}
