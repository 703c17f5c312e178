// bench_profiler: what optrace::Profiler costs on a TorchScript model's forward, one thread.
//   bench_profiler MODEL.pt [ROUNDS] [STEPS]
// MODEL.pt: a TorchScript module taking one 2x3x112x112 tensor (benchmarks/profiler.sh makes
// resnet18's with torchvision). Prints, side by side in one run:
//  - the median step unprofiled and profiled with record_shapes + profile_memory (interleaved
//    rounds of STEPS steps each, default 5 rounds of 20), and their ratio;
//  - stopping a profile of 50 steps (what the stepping thread waits for) and saving its trace
//    (streamed into the file and flushed to disk), with the trace's events and bytes; and the
//    trace's text alone (to_json).
// benchmarks/profiler_torch.py measures torch.profiler the same way; docs/performance.md has both.
#include <optrace/profiler.hpp>

#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_profiler MODEL.pt [ROUNDS] [STEPS]\n");
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 20;
  at::set_num_threads(1);
  torch::NoGradGuard no_grad;
  torch::jit::Module model = torch::jit::load(argv[1]);
  model.eval();
  std::vector<c10::IValue> inputs{torch::randn({2, 3, 112, 112})};
  for (int i = 0; i < 5; ++i) model.forward(inputs);

  std::vector<double> plain, profiled;
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < steps; ++i) {
      auto t0 = Clock::now();
      model.forward(inputs);
      plain.push_back(seconds_since(t0));
    }
    optrace::Profiler prof(optrace::ProfilerOptions().record_shapes(true).profile_memory(true));
    for (int i = 0; i < steps; ++i) {
      auto t0 = Clock::now();
      model.forward(inputs);
      profiled.push_back(seconds_since(t0));
    }
  }
  const double p = median(plain), q = median(profiled);
  std::printf("step unprofiled %.3f ms, profiled (record_shapes, profile_memory) %.3f ms: %.3fx (median of %d rounds x %d steps)\n",
              p * 1e3, q * 1e3, q / p, rounds, steps);

  // 50 steps, then stop and write.
  optrace::Profiler prof(optrace::ProfilerOptions().record_shapes(true).profile_memory(true));
  for (int i = 0; i < 50; ++i) model.forward(inputs);
  auto t0 = Clock::now();
  prof.stop();
  const double stop_s = seconds_since(t0);
  const std::string path = "bench_profiler.pt.trace.json";
  t0 = Clock::now();
  prof.last_trace()->save(path);  // streamed to the file, flushed to disk (as on_trace_ready's handler does)
  const double save_s = seconds_since(t0);
  t0 = Clock::now();
  const std::string text = prof.last_trace()->to_json();
  const double json_s = seconds_since(t0);
  std::remove(path.c_str());
  const double events = static_cast<double>(prof.last_trace()->num_events());
  std::printf("50 steps: %.0f events, %.1f MB; stop %.4f s, save %.4f s: %.4f s in all (%.2f us per event); to_json alone %.4f s\n",
              events, static_cast<double>(text.size()) / 1e6, stop_s, save_s, stop_s + save_s,
              (stop_s + save_s) * 1e6 / events, json_s);
  return 0;
}
