// bench_serve: what optrace::aoti::PackageSet adds to the package it routes a call to, and the
// latency of calls while the set is replaced under them (issue 50).
//
//   bench_serve PLAN_DIR [CALLS] [SECONDS]
//
// Routing: for each package of the plan, the inputs of the first signature of its own observation
// file (as verify builds them); in 7 rounds, 10 x CALLS calls (default 20000) of set.route (the
// routing alone: every package before it refuses the call, then it takes it) and of the package's
// own prepare (its flatten and guard), then CALLS calls of set.call and of that package's
// Package::call; the median per call of each. route - prepare is what routing adds to the call;
// set.call - Package::call measures the same through the package's run (noisier).
// Replace: 4 threads call set.call on the first package's inputs for SECONDS (default 3) with no
// replace, then as long again while the main thread loads the plan anew and replaces the set
// every 0.5 s; the p50, p99 and the slowest call of each phase. libtorch >= 2.6.
// benchmarks/serve.sh compiles a plan of 4 packages from serve_e2e's traffic and runs it.
#include <optrace/serve.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double per_call_us(int64_t calls, F&& f) {
  auto t0 = Clock::now();
  for (int64_t i = 0; i < calls; ++i) f();
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / static_cast<double>(calls);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double quantile(std::vector<double>& v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// Latencies (us) of every call of 4 threads over `seconds`; `during` runs on this thread meanwhile.
template <class During>
std::vector<double> serve_for(optrace::aoti::PackageSet& set, const optrace::Arguments& a, double seconds, During&& during) {
  auto [args, kwargs] = optrace::detail::aoti::split(a);
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> per_thread(4);
  std::vector<std::thread> threads;
  for (auto& latencies : per_thread)
    threads.emplace_back([&, args = args, kwargs = kwargs] {
      c10::InferenceMode inference;
      while (!stop.load(std::memory_order_relaxed)) {
        auto t0 = Clock::now();
        set.call(args, kwargs);
        latencies.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      }
    });
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  during(end);
  std::this_thread::sleep_until(end);
  stop = true;
  for (auto& t : threads) t.join();
  std::vector<double> all;
  for (auto& l : per_thread) all.insert(all.end(), l.begin(), l.end());
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: bench_serve PLAN_DIR [CALLS] [SECONDS]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t calls = argc >= 3 ? std::stoll(argv[2]) : 20000;
  const double seconds = argc >= 4 ? std::stod(argv[3]) : 3.0;
  optrace::aoti::PackageSet set = optrace::aoti::PackageSet::load(dir);
  const optrace::Plan plan = set.plan();
  c10::InferenceMode inference;
  std::printf("plan %s: %zu packages, %lld calls per round\n", dir.c_str(), set.size(), static_cast<long long>(calls));
  std::printf("%-4s %-60s %9s %9s %11s %11s %9s\n", "", "inputs", "route us", "prepare us", "set.call us", "Package::call us",
              "call diff");
  std::vector<optrace::Arguments> inputs;
  for (size_t i = 0; i < set.size(); ++i) {
    const optrace::Arguments a =
        plan.packages()[i].observations.materialize_signature(0, optrace::MaterializeOptions().int_range(0, 8));
    inputs.push_back(a);
    auto [args, kwargs] = optrace::detail::aoti::split(a);
    optrace::aoti::Package pkg = set.package(i);
    if (set.route(args, kwargs) != i) std::printf("  (routed to another package)\n");
    std::vector<double> route, prepare, routed, direct;
    for (int round = 0; round < 7; ++round) {
      route.push_back(per_call_us(calls * 10, [&] { (void)set.route(args, kwargs); }));
      prepare.push_back(per_call_us(calls * 10, [&] { (void)pkg.prepare(args, kwargs); }));
      routed.push_back(per_call_us(calls, [&] { (void)set.call(args, kwargs); }));
      direct.push_back(per_call_us(calls, [&] { (void)pkg.call(args, kwargs); }));
    }
    std::printf("%-4s %-60s %9.3f %9.3f %11.3f %11.3f %9.3f\n", plan.packages()[i].name.c_str(), a.describe().c_str(),
                median(route), median(prepare), median(routed), median(direct), median(routed) - median(direct));
  }

  std::vector<double> quiet = serve_for(set, inputs[0], seconds, [](Clock::time_point) {});
  int replaces = 0;
  std::vector<double> replacing = serve_for(set, inputs[0], seconds, [&](Clock::time_point end) {
    while (Clock::now() + std::chrono::milliseconds(500) < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      set.replace(optrace::aoti::PackageSet::load(dir));  // loaded here, off the serving threads
      ++replaces;
    }
  });
  std::printf("4 threads, %.1f s each phase  %10s %10s %10s %10s\n", seconds, "calls", "p50 us", "p99 us", "max us");
  auto row = [](const char* name, std::vector<double>& v) {
    std::printf("%-28s %10zu %10.1f %10.1f %10.1f\n", name, v.size(), quantile(v, 0.5), quantile(v, 0.99), quantile(v, 1.0));
  };
  row("no replace", quiet);
  row("replaced", replacing);
  std::printf("replaces: %d; p99 replaced / p99 quiet: %.2f\n", replaces, quantile(replacing, 0.99) / quantile(quiet, 0.99));
  std::printf("%s", set.stats().to_string().c_str());
  return 0;
}
