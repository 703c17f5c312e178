// bench_window_replay: a window optrace's Profiler records (its Kineto trace and execution trace),
// replayed from that pair, its replayed time against its recorded one, one thread.
//   bench_window_replay MODEL.pt N C H W OUT_DIR [REPEATS]
// MODEL.pt: a TorchScript module taking one NxCxHxW float tensor (benchmarks/window_replay.sh makes
// torchvision's resnet18 and mobilenet_v3_small). Runs it in eval and no-grad, the graph
// executor's optimizations off (each aten op dispatched as the module calls it). Prints, for one
// forward:
//  - its wall time unprofiled (median of 20 calls), and in a recorded step: profiled, with
//    record_shapes, and with the execution trace too (what each adds to the ops' recorded times);
//  - the window the Profiler records with record_shapes and an execution trace (the ET is written
//    from the recorded window when profiling stops, not inside each op's span as torch's
//    ExecutionTraceObserver writes it): the recorded time of the calls replay runs (their Kineto
//    durations, by RecordFunction id);
//  - optrace replay of that window in time mode (2 warm-up passes, REPEATS timed, default 10): the
//    calls' median times added up, their ratio to the recorded, and how many of the top 10 ops by
//    recorded time are in replay's top 10.
// `optrace replay OUT_DIR/window.et.json --kineto OUT_DIR/window.pt.trace.json --time` gives the same
// report from the files. docs/replay.md keeps the figures.
#include <optrace/execution_replay.hpp>
#include <optrace/profiler.hpp>

#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: bench_window_replay MODEL.pt N C H W OUT_DIR [REPEATS]\n");
    return 2;
  }
  const std::string model_path = argv[1], out = argv[6];
  const int repeats = argc > 7 ? std::atoi(argv[7]) : 10;
  at::set_num_threads(1);
  torch::jit::setGraphExecutorOptimize(false);
  torch::jit::Module model = torch::jit::load(model_path);
  model.eval();
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  const torch::Tensor x = torch::randn({std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]), std::atoll(argv[5])});
  auto forward = [&] { model.forward({x}); };
  for (int i = 0; i < 5; ++i) forward();

  std::vector<double> wall;
  for (int i = 0; i < 20; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    forward();
    wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(wall.begin(), wall.end());

  // The forward's wall time in a recorded step (after one warm-up step), with `options`; the
  // window's Kineto trace saved to `kineto` when given.
  auto profiled_ms = [&](optrace::ProfilerOptions options, const std::string& kineto) {
    optrace::Profiler prof(options.schedule(optrace::Schedule().wait(0).warmup(1).active(1).repeat(1)));
    double ms = 0;
    for (int i = 0; i < 2; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      forward();
      ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      prof.step();
    }
    prof.stop();
    if (!kineto.empty()) prof.export_chrome_trace(kineto);
    return ms;
  };
  const double plain_ms = profiled_ms(optrace::ProfilerOptions(), "");
  const double shapes_ms = profiled_ms(optrace::ProfilerOptions().record_shapes(true), "");
  const std::string et = out + "/window.et.json", kineto = out + "/window.pt.trace.json";
  const double et_ms = profiled_ms(optrace::ProfilerOptions().record_shapes(true).execution_trace(et), kineto);

  const optrace::ExecutionReplayReport r = optrace::replay_execution_trace(
      et, optrace::ReplayOptions().device(c10::kCPU).mode(optrace::ReplayMode::time).warmup(2).repeats(repeats).progress(false), kineto);
  std::printf("model                       %s\n", model_path.c_str());
  std::printf("calls replayed              %lld of %lld (recorded time found for %lld)\n", static_cast<long long>(r.count(optrace::ReplayStatus::ok)),
              static_cast<long long>(r.nodes.size()), static_cast<long long>(r.recorded_nodes));
  std::printf("forward, unprofiled         %.3f ms (median of 20)\n", wall[wall.size() / 2]);
  std::printf("forward, profiled           %.3f ms; with record_shapes %.3f ms; and the execution trace %.3f ms (the window)\n", plain_ms,
              shapes_ms, et_ms);
  std::printf("recorded (Kineto durations) %.3f ms\n", r.recorded_ms);
  std::printf("replayed (medians)          %.3f ms (%+.1f%% of recorded)\n", r.replayed_ms_of_recorded,
              r.recorded_ms > 0 ? 100.0 * (r.replayed_ms_of_recorded - r.recorded_ms) / r.recorded_ms : 0.0);
  std::printf("top-10 ops kept             %lld of 10\n", static_cast<long long>(r.top_ops_kept(10)));
  return r.count(optrace::ReplayStatus::ok) == static_cast<int64_t>(r.nodes.size()) ? 0 : 1;
}
