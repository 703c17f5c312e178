// bench_replay: unique inputs replayed per second by optrace::replay.
//
//   bench_replay [cpu|cuda|all] [--reps N]      (default: all, 3 repetitions)
//
// Two traces: the peer mlp trace (12 unique inputs of tiny ops: the replay machinery's own
// cost) and a synthetic transformer-block trace (9 ops at 32 batch/sequence shapes, 264 unique
// inputs: embedding, layer norm, addmm, bmm, masked_fill, softmax, gelu, add, view). Each is
// replayed in run, check (CPU float64 reference) and time (2 warm-up + 10 timed calls) mode,
// on the CPU and the meta device, and on CUDA when there is one (else "no CUDA device").
// Figures are medians over the repetitions of the whole replay, wall clock.
#include <optrace/op_trace.hpp>
#include <optrace/replay.hpp>

#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using optrace::OpInput;
using optrace::OpValue;

OpInput input(std::vector<optrace::OptionalShape> shapes, std::vector<std::string> dtypes, std::vector<OpValue> values) {
  OpInput in;
  in.input_shapes = std::move(shapes);
  in.input_dtypes = std::move(dtypes);
  in.non_tensor_inputs = std::move(values);
  return in;
}

OpValue ints(std::vector<int64_t> v) {
  std::vector<OpValue> items;
  for (int64_t x : v) items.push_back(OpValue::integer(x));
  return OpValue::list(std::move(items));
}

// A small transformer block's ops (hidden 64, 4 heads, feed-forward 256) at batch 1..4 and
// sequence 8..64: what a traced model with dynamic shapes looks like.
optrace::OpTrace transformer_trace() {
  const std::string f32 = "torch.float32", i64 = "torch.int64", b8 = "torch.bool";
  const std::string c_int = "<class 'int'>", c_float = "<class 'float'>", c_bool = "<class 'bool'>", c_list = "<class 'list'>";
  const OpValue none;
  const int64_t h = 64, heads = 4, ff = 256, vocab = 1000;
  optrace::OpTrace trace;
  for (int64_t b : {1, 2, 3, 4})
    for (int64_t s : {8, 16, 24, 32, 40, 48, 56, 64}) {
      const int64_t n = b * s;
      trace.add("embedding.default", input({{{vocab, h}}, {{b, s}}}, {f32, i64}, {none, none}));
      trace.add("native_layer_norm.default",
                input({{{b, s, h}}, std::nullopt, {{h}}, {{h}}, std::nullopt}, {f32, c_list, f32, f32, c_float},
                      {none, ints({h}), none, none, OpValue::floating(1e-5)}));
      trace.add("view.default", input({{{b, s, h}}, std::nullopt}, {f32, c_list}, {none, ints({n, h})}));
      trace.add("addmm.default", input({{{3 * h}}, {{n, h}}, {{h, 3 * h}}}, {f32, f32, f32}, {none, none, none}));
      trace.add("bmm.default", input({{{b * heads, s, h / heads}}, {{b * heads, h / heads, s}}}, {f32, f32}, {none, none}));
      trace.add("masked_fill.Scalar", input({{{b, heads, s, s}}, {{b, 1, 1, s}}, std::nullopt}, {f32, b8, c_float},
                                            {none, none, OpValue::floating(-std::numeric_limits<double>::infinity())}));
      trace.add("_softmax.default", input({{{b, heads, s, s}}, std::nullopt, std::nullopt}, {f32, c_int, c_bool},
                                          {none, OpValue::integer(-1), OpValue::boolean(false)}));
      trace.add("gelu.default", input({{{n, ff}}}, {f32}, {none}));
      trace.add("add.Tensor", input({{{b, s, h}}, {{b, s, h}}}, {f32, f32}, {none, none}));
    }
  return trace;
}

struct Figure {
  double seconds = 0;
  int64_t inputs = 0;
  int64_t not_ok = 0;   // errors and mismatches
  int64_t skipped = 0;  // not run or not compared (on meta: no meta kernel in this libtorch)
};

Figure measure(const optrace::OpTrace& trace, const optrace::ReplayOptions& options, int reps) {
  std::vector<double> times;
  Figure f;
  optrace::replay(trace, options);  // warm-up: first-call costs (kernels, allocator, generator clones)
  for (int i = 0; i < reps; ++i) {
    const optrace::ReplayReport report = optrace::replay(trace, options);
    times.push_back(report.seconds);
    f.inputs = static_cast<int64_t>(report.results.size());
    f.not_ok = report.num(optrace::ReplayStatus::error) + report.num(optrace::ReplayStatus::mismatch);
    f.skipped = report.num(optrace::ReplayStatus::skipped);
  }
  std::sort(times.begin(), times.end());
  f.seconds = times[times.size() / 2];
  return f;
}

void bench_device(c10::Device device, int reps) {
  const optrace::OpTrace mlp = optrace::OpTrace::load(OPTRACE_MLP_TRACE);
  const optrace::OpTrace block = transformer_trace();
  std::printf("\n%s (%d intra-op threads)\n", device.str().c_str(), at::get_num_threads());
  std::printf("%-12s %-6s %8s %10s %14s %8s %8s\n", "trace", "mode", "inputs", "seconds", "inputs/s", "failed", "skipped");
  for (const auto* t : {&mlp, &block}) {
    for (optrace::ReplayMode mode : {optrace::ReplayMode::run, optrace::ReplayMode::check, optrace::ReplayMode::time}) {
      const auto options = optrace::ReplayOptions().device(device).mode(mode).progress(false);
      const Figure f = measure(*t, options, reps);
      std::printf("%-12s %-6s %8lld %10.4f %14.1f %8lld %8lld\n", t == &mlp ? "mlp" : "transformer",
                  optrace::to_string(mode), static_cast<long long>(f.inputs), f.seconds,
                  static_cast<double>(f.inputs) / f.seconds, static_cast<long long>(f.not_ok),
                  static_cast<long long>(f.skipped));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string which = "all";
  int reps = 3;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else which = argv[i];
  }
  std::printf("bench_replay: unique inputs replayed per second (median of %d replays; libtorch %s)\n", reps,
              TORCH_VERSION);
  if (which == "cpu" || which == "all") {
    bench_device(c10::Device(c10::kCPU), reps);
    bench_device(c10::Device(c10::kMeta), reps);
  }
  if (which == "cuda" || which == "all") {
    if (torch::cuda::is_available()) bench_device(c10::Device(c10::kCUDA, 0), reps);
    else std::printf("\ncuda: no CUDA device\n");
  }
  return 0;
}
