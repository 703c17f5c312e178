// bench_profiler: what optrace::Profiler costs on a TorchScript model's forward, one thread.
//   bench_profiler MODEL.pt [ROUNDS] [STEPS]
//   bench_profiler --cuda [ITERATIONS]
// MODEL.pt: a TorchScript module taking one 2x3x112x112 tensor (benchmarks/profiler.sh makes
// resnet18's with torchvision). Prints, side by side in one run:
//  - the median step unprofiled and profiled with record_shapes + profile_memory (interleaved
//    rounds of STEPS steps each, default 5 rounds of 20), and their ratio;
//  - stopping a profile of 50 steps (what the stepping thread waits for) and saving its trace
//    (streamed into the file and flushed to disk), with the trace's events and bytes; and the
//    trace's text alone (to_json).
// With --cuda (a GPU, libtorch with Kineto): a window of ITERATIONS (default 10,000) iterations of
// relu(mm(a, a)) on 64x64 CUDA tensors, recorded with Activity::CUDA, record_shapes and
// profile_memory; prints the stop, the first writing of its trace (which has libtorch save its
// CUDA events to read what CUPTI adds: device_details.hpp) and a second writing (without that), so
// that their difference is the cost of libtorch's save and its reading.
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

// The --cuda mode: a large window of CUDA kernels, stopped and written twice.
int cuda_window(int iterations) {
  if (!torch::cuda::is_available()) {
    std::printf("no CUDA device: the --cuda mode not measured\n");
    return 0;
  }
  torch::NoGradGuard no_grad;
  auto a = torch::randn({64, 64}, torch::kCUDA);
  for (int i = 0; i < 10; ++i) torch::relu(torch::mm(a, a));  // cuBLAS's handle made before recording
  torch::cuda::synchronize();
  optrace::Profiler prof(optrace::ProfilerOptions()
                             .activities({optrace::Activity::CPU, optrace::Activity::CUDA})
                             .record_shapes(true)
                             .profile_memory(true));
  auto t0 = Clock::now();
  for (int i = 0; i < iterations; ++i) torch::relu(torch::mm(a, a));
  torch::cuda::synchronize();
  const double run_s = seconds_since(t0);
  t0 = Clock::now();
  prof.stop();
  const double stop_s = seconds_since(t0);
  for (const std::string& n : prof.notes()) std::printf("note: %s\n", n.c_str());
  t0 = Clock::now();
  const size_t first = prof.last_trace()->to_json().size();
  const double first_s = seconds_since(t0);
  t0 = Clock::now();
  const size_t second = prof.last_trace()->to_json().size();
  const double second_s = seconds_since(t0);
  const double events = static_cast<double>(prof.last_trace()->num_events());
  std::printf("cuda window: %d iterations of relu(mm) in %.3f s; %.0f ops (with their kernels and runtime calls), %.1f MB; "
              "stop %.4f s; first to_json %.4f s (libtorch's save and its reading: %.4f s); second to_json %.4f s%s\n",
              iterations, run_s, events, static_cast<double>(first) / 1e6, stop_s, first_s, first_s - second_s, second_s,
              first == second ? "" : " (the two texts differ in size!)");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--cuda") return cuda_window(argc > 2 ? std::atoi(argv[2]) : 10000);
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_profiler MODEL.pt [ROUNDS] [STEPS]\n       bench_profiler --cuda [ITERATIONS]\n");
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
