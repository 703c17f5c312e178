// bench_op_tracer_overhead: OpTracer's cost per op against a bare RecordFunction callback.
//
// Times a loop of 2x2 `add` on one thread three ways: with no callback, with a bare global
// RecordFunction callback that only reads the inputs (same registration as OpTracer's: FUNCTION
// scope, needsInputs; it walks fn.inputs() and reads each tensor's dim), and with an OpTracer
// recording. Overhead = time minus the time with no callback.
//
// The machine may be shared and its speed drift: each round runs `calls` ops per mode in chunks
// of at most 25000, the three modes' chunks interleaved (in an order that rotates, so none always
// runs first), so that a change of speed during a round hits the three alike. Each round yields
// one ratio from its own figures; the median over rounds is the headline, the best-of-rounds
// times per mode are printed too.
// Usage: bench_op_tracer_overhead [calls=200000] [rounds=15]
//
// Timing alone cannot tell 20 ns apart on a shared machine. `count MODE CALLS [OP]` (MODE: none,
// bare, tracer, profiler: a Profiler with record_shapes and profile_memory, or profiler_et: the
// same with an execution trace, written to a temporary file) runs one mode's
// loop once, in the function `counted_loop`, for an instruction count that the machine's load
// does not move:
//   valgrind --tool=callgrind --collect-atstart=no --toggle-collect="*counted_loop*"
//     bench_op_tracer_overhead count tracer 20000   (one command)
// (instructions per op = the total / CALLS; overhead = a mode's figure minus none's). OP: add
// (the default, as timed) or sum, `at::sum(x, {1})` on a 2x2 tensor: an int list and a trailing
// default argument, which the tracer's fast path leaves to its full path.
// `latency [CALLS=2000000]` times each op alone under a Profiler and prints the slowest.
#include <optrace/op_tracer.hpp>
#include <optrace/profiler.hpp>

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

volatile int64_t g_sink = 0;

std::unique_ptr<at::ObserverContext> bare_start(const at::RecordFunction& fn) {
  int64_t n = 0;
  for (const c10::IValue& v : fn.inputs())
    if (v.isTensor()) n += v.toTensor().dim();
  g_sink = g_sink + n;
  return nullptr;
}
void bare_end(const at::RecordFunction&, at::ObserverContext*) {}

// The bare callback, registered as OpTracer registers its own.
at::CallbackHandle add_bare_callback() {
  return at::addGlobalCallback(
      at::RecordFunctionCallback(&bare_start, &bare_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
}

double run(const at::Tensor& a, const at::Tensor& b, int64_t calls) {
  auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < calls; ++i) at::add(a, b);
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / calls;
}

// The loop that `count` mode's instruction counts cover (valgrind's --toggle-collect names it).
void loop(const at::Tensor& a, const at::Tensor& b, int64_t calls, bool sum) {
  const std::vector<int64_t> dims{1};
  if (sum)
    for (int64_t i = 0; i < calls; ++i) at::sum(a, dims);
  else
    for (int64_t i = 0; i < calls; ++i) at::add(a, b);
}
C10_NOINLINE void counted_loop(const at::Tensor& a, const at::Tensor& b, int64_t calls, bool sum) { loop(a, b, calls, sum); }

// `count MODE CALLS [OP]`: one mode, warmed up, then `counted_loop`.
int count(const std::string& mode, int64_t calls, const std::string& op) {
  if (op != "add" && op != "sum") {
    std::fprintf(stderr, "unknown op %s: add or sum\n", op.c_str());
    return 2;
  }
  at::Tensor a = at::ones({2, 2}), b = at::ones({2, 2});
  optrace::OpTracer tracer;
  std::optional<optrace::Profiler> profiler;
  at::CallbackHandle handle = 0;
  const std::string et_path = std::filesystem::temp_directory_path() / ("bench_op_tracer_et." + std::to_string(::getpid()) + ".json");
  if (mode == "bare")
    handle = add_bare_callback();
  else if (mode == "tracer")
    tracer.start();
  else if (mode == "profiler")
    profiler.emplace(optrace::ProfilerOptions().record_shapes(true).profile_memory(true));
  else if (mode == "profiler_et")
    profiler.emplace(optrace::ProfilerOptions().record_shapes(true).profile_memory(true).execution_trace(et_path));
  else if (mode != "none") {
    std::fprintf(stderr, "unknown mode %s: none, bare, tracer, profiler or profiler_et\n", mode.c_str());
    return 2;
  }
  loop(a, b, 1000, op == "sum");  // warm up: the tracer's first call of an op inserts it
  counted_loop(a, b, calls, op == "sum");
  if (handle != 0) at::removeCallback(handle);
  tracer.stop();
  if (profiler) profiler->stop();
  if (mode == "profiler_et") std::remove(et_path.c_str());
  std::printf("%s: %lld calls of %s counted\n", mode.c_str(), static_cast<long long>(calls), op.c_str());
  return 0;
}

// `latency CALLS`: each of CALLS 2x2 adds timed alone under a Profiler (record_shapes,
// profile_memory), for the slowest: what one op can cost when the recording's storage grows.
int latency(int64_t calls) {
  at::Tensor a = at::ones({2, 2}), b = at::ones({2, 2});
  std::vector<int64_t> ns(static_cast<size_t>(calls));
  optrace::Profiler profiler(optrace::ProfilerOptions().record_shapes(true).profile_memory(true));
  for (int64_t i = 0; i < calls; ++i) {
    const auto start = std::chrono::steady_clock::now();
    at::add(a, b);
    ns[static_cast<size_t>(i)] = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  }
  profiler.stop();
  const size_t worst = static_cast<size_t>(std::max_element(ns.begin(), ns.end()) - ns.begin());
  const int64_t max_ns = ns[worst];
  std::vector<int64_t> sorted = ns;
  std::sort(sorted.begin(), sorted.end());
  auto at_fraction = [&sorted](double f) { return sorted[std::min(sorted.size() - 1, static_cast<size_t>(f * static_cast<double>(sorted.size())))]; };
  int64_t over_1ms = 0;
  for (int64_t t : ns) over_1ms += t > 1000000 ? 1 : 0;
  std::printf("2x2 add under the Profiler (record_shapes, profile_memory), %lld calls timed one by one\n", static_cast<long long>(calls));
  std::printf("  median %lld ns, 99.9%% %lld ns, 99.999%% %lld ns, max %.3f ms (call %zu); %lld calls over 1 ms\n",
              static_cast<long long>(at_fraction(0.5)), static_cast<long long>(at_fraction(0.999)),
              static_cast<long long>(at_fraction(0.99999)), static_cast<double>(max_ns) / 1e6, worst, static_cast<long long>(over_1ms));
  return 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "latency") return latency(argc > 2 ? std::atoll(argv[2]) : 2000000);
  if (argc > 1 && std::string(argv[1]) == "count")
    return count(argc > 2 ? argv[2] : "", argc > 3 ? std::atoll(argv[3]) : 20000, argc > 4 ? argv[4] : "add");
  int64_t calls = argc > 1 ? std::atoll(argv[1]) : 200000;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 15;
  at::Tensor a = at::ones({2, 2}), b = at::ones({2, 2});
  for (int w = 0; w < 3; ++w) run(a, b, calls);  // warm up
  double none = 1e30, bare = 1e30, traced = 1e30;
  std::vector<double> ratios;
  const int64_t chunk = std::min<int64_t>(calls, 25000);
  for (int r = 0; r < rounds; ++r) {
    double t[3] = {0, 0, 0};  // ns per op, summed over the round's chunks
    optrace::OpTracer tracer;
    int64_t done = 0;
    for (int c = 0; done < calls; ++c) {
      const int64_t n = std::min(chunk, calls - done);
      const double weight = static_cast<double>(n) / static_cast<double>(calls);
      for (int k = 0; k < 3; ++k) {
        int mode = (r + c + k) % 3;
        if (mode == 0) {
          t[0] += weight * run(a, b, n);
        } else if (mode == 1) {
          at::CallbackHandle handle = add_bare_callback();
          t[1] += weight * run(a, b, n);
          at::removeCallback(handle);
        } else {
          tracer.start();
          t[2] += weight * run(a, b, n);
          tracer.stop();
        }
      }
      done += n;
    }
    if (tracer.trace().total_calls("add.Tensor") != calls) {
      std::fprintf(stderr, "unexpected count\n");
      return 1;
    }
    none = std::min(none, t[0]);
    bare = std::min(bare, t[1]);
    traced = std::min(traced, t[2]);
    ratios.push_back((t[2] - t[0]) / (t[1] - t[0]));
  }
  std::sort(ratios.begin(), ratios.end());
  std::printf("2x2 add, %lld calls, %d rounds\n", static_cast<long long>(calls), rounds);
  std::printf("  no callback:          %7.1f ns/op (best)\n", none);
  std::printf("  bare callback:        %7.1f ns/op (best; overhead %.1f ns)\n", bare, bare - none);
  std::printf("  OpTracer:             %7.1f ns/op (best; overhead %.1f ns)\n", traced, traced - none);
  std::printf("  ratio of best-of overheads: %5.2fx\n", (traced - none) / (bare - none));
  std::printf("  per-round ratios: min %.2fx, quartiles %.2fx / %.2fx / %.2fx, max %.2fx\n", ratios.front(),
              ratios[ratios.size() / 4], median(ratios), ratios[(3 * ratios.size()) / 4], ratios.back());
  std::printf("  overhead ratio (median): %5.2fx the bare callback's (goal <= 1.2x)\n", median(ratios));
  return 0;
}
