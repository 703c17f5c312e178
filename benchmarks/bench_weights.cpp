// bench_weights: one copy of a plan's weights, concurrent calls on one package, and call latency
// while new weights are swapped in (issue 57). libtorch >= 2.6. benchmarks/serve_weights.sh
// compiles the plan of a model of about 300 MB of weights and runs each phase in a process of its
// own (resident memory is the process's):
//
//   bench_weights rss PACKAGE.pt2        resident memory after loading one package (its weights
//                                        inside) and serving one call
//   bench_weights rss PLAN_DIR           the same for the whole set, each package serving one call
//   bench_weights threads PLAN_DIR [S]   calls per second on the first package: 1 thread with 1
//                                        runner, 2 threads with 1, 2 threads with 2; S s each
//   bench_weights swap PLAN_DIR W.pt [S] 2 threads call for S seconds, then S seconds more while
//                                        the main thread calls replace_weights every 0.5 s
//                                        (alternately W.pt and the plan's own): p50, p99, slowest
//
// Each package's inputs are the first signature of its own observation file (ids in [0, 8)).
// Run it with OMP_NUM_THREADS=1 (intra-op threads 1), as serve_weights.sh does.
#include <optrace/serve.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// VmRSS of this process, in MB.
double resident_mb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      double kb = 0;
      status >> kb;
      return kb / 1024.0;
    }
  }
  return -1;
}

double quantile(std::vector<double>& v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

optrace::Arguments inputs_of(const optrace::PlannedPackage& p) {
  return p.observations.materialize_signature(0, optrace::MaterializeOptions().int_range(0, 8));
}

// Latencies (ms) of every call of `threads` threads calling `call` for `seconds`; `during` runs
// on this thread meanwhile.
template <class Call, class During>
std::vector<double> serve_for(int threads, double seconds, Call&& call, During&& during) {
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> per_thread(static_cast<size_t>(threads));
  std::vector<std::thread> running;
  for (auto& latencies : per_thread)
    running.emplace_back([&] {
      c10::InferenceMode inference;
      while (!stop.load(std::memory_order_relaxed)) {
        auto t0 = Clock::now();
        call();
        latencies.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
    });
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  during(end);
  std::this_thread::sleep_until(end);
  stop = true;
  for (auto& t : running) t.join();
  std::vector<double> all;
  for (auto& l : per_thread) all.insert(all.end(), l.begin(), l.end());
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_weights rss PACKAGE.pt2|PLAN_DIR | threads PLAN_DIR [S] | swap PLAN_DIR W.pt [S]\n");
    return 2;
  }
  const std::string mode = argv[1], target = argv[2];
  c10::InferenceMode inference;
  const double before = resident_mb();
  if (mode == "rss" && target.size() > 4 && target.compare(target.size() - 4, 4, ".pt2") == 0) {
    optrace::aoti::Package pkg(target);
    const double loaded = resident_mb();
    const std::string obs = target.substr(0, target.size() - 4) + ".observations.json";
    auto [args, kwargs] = optrace::detail::aoti::split(optrace::load_observations(obs).materialize_signature(
        0, optrace::MaterializeOptions().int_range(0, 8)));
    pkg.call(args, kwargs);
    std::printf("one package (weights inside): %.0f MB resident at start, %.0f MB loaded, %.0f MB after a call\n", before,
                loaded, resident_mb());
    return 0;
  }
  optrace::aoti::PackageSet set = optrace::aoti::PackageSet::load(target, optrace::aoti::LoadOptions().runners(
                                                                              mode == "threads" ? 2 : 1));
  const optrace::Plan plan = set.plan();
  if (mode == "rss") {
    const double loaded = resident_mb();
    for (size_t i = 0; i < set.size(); ++i) {
      auto [args, kwargs] = optrace::detail::aoti::split(inputs_of(plan.packages()[i]));
      set.call(args, kwargs);
    }
    std::printf("the set of %zu packages (one copy of the weights): %.0f MB resident at start, %.0f MB loaded, %.0f MB "
                "after a call on each\n", set.size(), before, loaded, resident_mb());
    return 0;
  }
  auto [args, kwargs] = optrace::detail::aoti::split(inputs_of(plan.packages()[0]));
  if (mode == "threads") {
    const double seconds = argc > 3 ? std::stod(argv[3]) : 5.0;
    optrace::aoti::Package one = optrace::aoti::Package::beneath(
        std::filesystem::path(plan.path()).parent_path().string(), plan.packages()[0].file,
        optrace::aoti::LoadOptions().weights(set.weights_path()));
    optrace::aoti::Package two = set.package(0);
    one.call(args, kwargs);
    two.call(args, kwargs);
    const size_t n1 = serve_for(1, seconds, [&] { one.call(args, kwargs); }, [](Clock::time_point) {}).size();
    const size_t n21 = serve_for(2, seconds, [&] { one.call(args, kwargs); }, [](Clock::time_point) {}).size();
    const size_t n2 = serve_for(2, seconds, [&] { two.call(args, kwargs); }, [](Clock::time_point) {}).size();
    std::printf("%s on %s: 1 thread, 1 runner %.1f calls/s; 2 threads, 1 runner %.1f calls/s (%.2fx); 2 threads, "
                "2 runners %.1f calls/s (%.2fx)\n", plan.packages()[0].name.c_str(),
                inputs_of(plan.packages()[0]).describe().c_str(), n1 / seconds, n21 / seconds,
                static_cast<double>(n21) / static_cast<double>(n1), n2 / seconds,
                static_cast<double>(n2) / static_cast<double>(n1));
    return 0;
  }
  if (mode == "swap" && argc > 3) {
    const std::string other = argv[3], own = set.weights_path();
    const double seconds = argc > 4 ? std::stod(argv[4]) : 5.0;
    set.call(args, kwargs);
    std::vector<double> quiet = serve_for(2, seconds, [&] { set.call(args, kwargs); }, [](Clock::time_point) {});
    int swaps = 0;
    std::vector<double> swapping = serve_for(2, seconds, [&] { set.call(args, kwargs); }, [&](Clock::time_point end) {
      while (Clock::now() + std::chrono::milliseconds(500) < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        const auto t0 = Clock::now();
        set.replace_weights(swaps % 2 == 0 ? other : own);
        std::printf("  replace_weights %d took %.0f ms, %.0f MB resident\n", swaps,
                    std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), resident_mb());
        ++swaps;
      }
    });
    std::printf("2 threads, %.1f s each phase   %8s %9s %9s %9s\n", seconds, "calls", "p50 ms", "p99 ms", "max ms");
    auto row = [](const char* name, std::vector<double>& v) {
      std::printf("%-30s %8zu %9.2f %9.2f %9.2f\n", name, v.size(), quantile(v, 0.5), quantile(v, 0.99), quantile(v, 1.0));
    };
    row("no swap", quiet);
    row("replace_weights every 0.5 s", swapping);
    std::printf("swaps: %d; %.0f MB resident at the end\n", swaps, resident_mb());
    return 0;
  }
  std::fprintf(stderr, "bench_weights: unknown mode '%s'\n", mode.c_str());
  return 2;
}
