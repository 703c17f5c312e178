// bench_on_demand: what an OnDemandProfiler costs a running job (docs/performance.md#on-demand).
// 1. step() while idle, in ns per call, against the bare loop (and with the trigger file polled
//    every millisecond on the side), and with slow_steps armed (each step timed and judged against
//    the median of the last 50; a factor of 10^6 keeps any step from being taken for a slow one);
//   bench_on_demand [STEPS] [MODEL.pt]
// 2. a job's step times (a small MLP's forward and backward) over STEPS steps: without a profiler,
//    with an idle OnDemandProfiler, and with a 3-step window requested every 100 steps (started and
//    stopped at step boundaries, written on the writer thread): p50, p99, max; what the step()
//    calls that open and close windows themselves took, and a Profiler's own start and stop; and
//    with slow_steps armed;
// 3. what the ring costs (SlowSteps::ring_steps(8): every step recorded, to capture a slow step
//    itself), without and with record_shapes, against the job unprofiled, in interleaved rounds
//    long enough to fill the ring: p50, p99, max of the steps (with the step() that ends a
//    cycle), that step() alone, and the resident memory the ring added. On the MLP, and on
//    MODEL.pt when given (a TorchScript module taking one 2x3x112x112 tensor:
//    benchmarks/profiler.sh makes resnet18's).
#include <optrace/detail/common/io.hpp>
#include <optrace/on_demand.hpp>

#include <torch/script.h>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <malloc.h>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point t0) { return std::chrono::duration<double, std::nano>(Clock::now() - t0).count(); }

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

void print_row(const char* what, const std::vector<double>& us) {
  std::printf("  %-44s p50 %8.1f us   p99 %8.1f us   max %8.1f us\n", what, percentile(us, 0.5), percentile(us, 0.99),
              *std::max_element(us.begin(), us.end()));
}

// Every step judged against the median of the last 50, as by default, but none taken (a factor of
// 10^6): only the judging is measured.
optrace::SlowSteps armed() { return optrace::SlowSteps().factor(1e6); }

// 1. step() idle.
void idle_step(const std::string& dir) {
  constexpr int64_t kCalls = 200'000'000;
  volatile int64_t sink = 0;
  auto t0 = Clock::now();
  for (int64_t i = 0; i < kCalls; ++i) sink = sink + 1;
  const double bare = ns_since(t0) / kCalls;
  for (const bool polled : {false, true}) {
    optrace::detail::remove_tree(dir);
    optrace::OnDemandOptions o = optrace::OnDemandOptions().output_dir(dir);
    if (polled) {
      std::filesystem::create_directories(dir);
      std::ofstream(dir + "/trigger.conf") << "# nothing requested\n";
      o.config_file(dir + "/trigger.conf").poll_interval(std::chrono::milliseconds(1));
    }
    optrace::OnDemandProfiler od(o);
    t0 = Clock::now();
    for (int64_t i = 0; i < kCalls; ++i) od.step();
    std::printf("step() idle%s: %.2f ns per call (the bare loop: %.2f ns; %lld calls)\n",
                polled ? ", trigger file polled every 1 ms" : "", ns_since(t0) / kCalls, bare,
                static_cast<long long>(kCalls));
  }
  constexpr int64_t kTimed = 5'000'000;
  optrace::detail::remove_tree(dir);
  optrace::OnDemandProfiler od(optrace::OnDemandOptions().output_dir(dir).slow_steps(armed()));
  t0 = Clock::now();
  for (int64_t i = 0; i < kTimed; ++i) od.step();
  std::printf("step() with slow_steps armed (history 50): %.2f ns per call (%lld calls)\n", ns_since(t0) / kTimed,
              static_cast<long long>(kTimed));
}

struct Job {
  torch::nn::Sequential mlp{torch::nn::Linear(256, 256), torch::nn::ReLU(), torch::nn::Linear(256, 256)};
  torch::Tensor x = torch::randn({32, 256});
  void step() {
    mlp->zero_grad();
    mlp->forward(x).sum().backward();
  }
};

// 2. Step times of the job; `od` may be null (no profiler). With `windows`, a 3-step window is
// requested every 100 steps; `boundaries` gets what the step() calls at each window's first and
// after its last step took.
std::vector<double> run(Job& job, int steps, optrace::OnDemandProfiler* od, bool windows, std::vector<double>* opened,
                        std::vector<double>* closed) {
  std::vector<double> us;
  us.reserve(static_cast<size_t>(steps));
  for (int s = 0; s < steps; ++s) {
    if (windows && s % 100 == 50) {
      optrace::OnDemandRequest r;
      r.start_iteration_roundup = 100;
      r.start_iteration = 0;
      r.iterations = 3;
      od->request(r);
    }
    const auto t0 = Clock::now();
    job.step();
    const auto t1 = Clock::now();
    if (od != nullptr) od->step();
    const double step_ns = ns_since(t1);
    us.push_back(ns_since(t0) / 1000.0);
    const int64_t now = od != nullptr ? od->step_num() : 0;
    if (windows && now > 0 && now % 100 == 0) opened->push_back(step_ns / 1000.0);
    if (windows && now > 0 && now % 100 == 3) closed->push_back(step_ns / 1000.0);
  }
  return us;
}

// The heap's bytes in use, in kB (glibc's mallinfo2: allocated chunks and mmapped blocks; 0
// elsewhere): what the ring holds, unlike the resident size, which a heap grown earlier hides.
int64_t heap_kb() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
  const struct mallinfo2 m = mallinfo2();
  return static_cast<int64_t>((m.uordblks + m.hblkhd) / 1024);
#else
  return 0;
#endif
}

// 3. The ring (SlowSteps::ring_steps): every step recorded, in cycles of kCycle steps, each
// finished cycle kept for two poll intervals and 500 ms (the default poll, 1 s: at most 64
// cycles), against the job unprofiled, in interleaved rounds long enough to fill the ring.
void ring_cost(const std::string& dir, const char* what, const std::function<void()>& one_step, int rounds, int steps,
               bool shapes) {
  constexpr int64_t kCycle = 8;
  std::vector<double> plain, ring, ends;
  int64_t held = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < steps; ++i) {
      const auto t0 = Clock::now();
      one_step();
      plain.push_back(ns_since(t0) / 1000.0);
    }
    const int64_t held0 = heap_kb();
    optrace::detail::remove_tree(dir);
    optrace::OnDemandProfiler od(optrace::OnDemandOptions()
                                     .output_dir(dir)
                                     .profiler(optrace::ProfilerOptions().record_shapes(shapes))
                                     .slow_steps(armed().ring_steps(kCycle)));
    for (int i = 0; i < steps; ++i) {
      const auto t0 = Clock::now();
      one_step();
      const auto t1 = Clock::now();
      od.step();
      if (od.step_num() <= kCycle) continue;  // the ring starts at step 8
      ring.push_back(ns_since(t0) / 1000.0);
      if (od.step_num() % kCycle == 0) ends.push_back(ns_since(t1) / 1000.0);
    }
    held = std::max(held, heap_kb() - held0);
  }
  std::printf("the ring (%s; cycles of %lld steps%s; %d rounds x %d steps):\n", what, static_cast<long long>(kCycle),
              shapes ? ", record_shapes" : "", rounds, steps);
  print_row("unprofiled", plain);
  print_row("recording in the ring", ring);
  print_row("  the step() that ends a cycle", ends);
  std::printf("  p50 %.3fx, p99 %.3fx; %lld kB of memory held by the ring when full\n", percentile(ring, 0.5) / percentile(plain, 0.5),
              percentile(ring, 0.99) / percentile(plain, 0.99), static_cast<long long>(held));
}
}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 2000;
  const std::string dir = (std::filesystem::temp_directory_path() / "bench_on_demand").string();
  torch::set_num_threads(1);
  idle_step(dir);

  Job job;
  for (int i = 0; i < 50; ++i) job.step();  // warm
  std::printf("job step times (MLP 256x256x2, batch 32, forward + backward; %d steps each, 1 thread):\n", steps);
  print_row("no profiler", run(job, steps, nullptr, false, nullptr, nullptr));
  std::vector<double> opened, closed;
  size_t traces = 0;
  {
    optrace::detail::remove_tree(dir);
    optrace::OnDemandProfiler od(optrace::OnDemandOptions().output_dir(dir));
    print_row("OnDemandProfiler, idle", run(job, steps, &od, false, nullptr, nullptr));
    print_row("OnDemandProfiler, 3-step window every 100", run(job, steps, &od, true, &opened, &closed));
    od.flush();
    traces = od.traces().size();
  }
  {
    optrace::detail::remove_tree(dir);
    optrace::OnDemandProfiler od(optrace::OnDemandOptions().output_dir(dir).slow_steps(armed()));
    print_row("OnDemandProfiler, slow_steps armed", run(job, steps, &od, false, nullptr, nullptr));
  }
  print_row("  the step() calls that opened one", opened);
  print_row("  the step() calls that closed one", closed);
  // For comparison: a Profiler's own start (construction, its first ProfilerStep range) and its
  // window's end (the step() that saves it to an on_trace_ready on the writer thread), each after
  // 97 steps of the job, as the on-demand windows are.
  std::vector<double> own_start, own_end;
  for (int i = 0; i < 20; ++i) {
    for (int s = 0; s < 97; ++s) job.step();
    auto t0 = Clock::now();
    optrace::Profiler p(optrace::ProfilerOptions()
                            .activities({optrace::Activity::CPU})
                            .schedule(optrace::Schedule().active(1).repeat(1))
                            .on_trace_ready([](const optrace::ProfilerTrace&) {}));
    own_start.push_back(ns_since(t0) / 1000.0);
    job.step();
    t0 = Clock::now();
    p.step();
    own_end.push_back(ns_since(t0) / 1000.0);
  }
  print_row("  a Profiler's own start (20 times)", own_start);
  print_row("  a Profiler's own step() that ends its window", own_end);
  std::printf("  (%zu windows written to %s)\n", traces, dir.c_str());
  optrace::detail::remove_tree(dir);

  for (const bool shapes : {false, true})
    ring_cost(dir, "MLP 256x256x2, forward + backward", [&] { job.step(); }, 3, std::max(steps / 2, 700), shapes);
  if (argc > 2) {
    torch::NoGradGuard no_grad;
    torch::jit::Module model = torch::jit::load(argv[2]);
    model.eval();
    std::vector<c10::IValue> inputs{torch::randn({2, 3, 112, 112})};
    for (int i = 0; i < 5; ++i) model.forward(inputs);
    for (const bool shapes : {false, true}) ring_cost(dir, argv[2], [&] { model.forward(inputs); }, 3, 250, shapes);
  }
  optrace::detail::remove_tree(dir);
  return 0;
}
