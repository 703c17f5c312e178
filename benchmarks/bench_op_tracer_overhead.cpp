// bench_op_tracer_overhead: OpTracer's cost per op against a bare RecordFunction callback.
//
// Times a loop of 2x2 `add` on one thread three ways in the same run: with no callback, with a
// bare global RecordFunction callback that only reads the inputs (needsInputs, sums the tensor
// sizes), and with an OpTracer recording. Overhead = time minus the time with no callback.
// Usage: bench_op_tracer_overhead [calls=200000] [repeats=5]
#include <optrace/op_tracer.hpp>

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

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

double run(const at::Tensor& a, const at::Tensor& b, int64_t calls) {
  auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < calls; ++i) at::add(a, b);
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / calls;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t calls = argc > 1 ? std::atoll(argv[1]) : 200000;
  int repeats = argc > 2 ? std::atoi(argv[2]) : 15;
  at::Tensor a = at::ones({2, 2}), b = at::ones({2, 2});
  for (int w = 0; w < 3; ++w) run(a, b, calls);  // warm up
  double none = 1e30, bare = 1e30, traced = 1e30;
  for (int r = 0; r < repeats; ++r) {
    none = std::min(none, run(a, b, calls));
    auto handle = at::addGlobalCallback(at::RecordFunctionCallback(&bare_start, &bare_end)
                                            .needsInputs(true)
                                            .scopes({at::RecordScope::FUNCTION}));
    bare = std::min(bare, run(a, b, calls));
    at::removeCallback(handle);
    optrace::OpTracer tracer;
    tracer.start();
    traced = std::min(traced, run(a, b, calls));
    tracer.stop();
    if (tracer.trace().total_calls("add.Tensor") != calls) {
      std::fprintf(stderr, "unexpected count\n");
      return 1;
    }
  }
  std::printf("2x2 add, %lld calls, best of %d\n", static_cast<long long>(calls), repeats);
  std::printf("  no callback:          %7.1f ns/op\n", none);
  std::printf("  bare callback:        %7.1f ns/op  (overhead %.1f ns)\n", bare, bare - none);
  std::printf("  OpTracer:             %7.1f ns/op  (overhead %.1f ns)\n", traced, traced - none);
  std::printf("  overhead ratio:       %7.2fx the bare callback's (target <= 1.5x)\n", (traced - none) / (bare - none));
  return 0;
}
