// bench_materialize: fill throughput of optrace::Materializer against libtorch's own fills.
//
//   bench_materialize [cpu|cuda|all] [--reps N]      (default: all, 9 repetitions)
//
// cpu:  Materializer (normal / uniform / int_range) against torch::randn / torch::rand /
//       torch::randint on the same shapes and dtypes; GB/s of output written, and the ratio.
// cuda: Materializer fill bandwidth against torch::randn and against a device-to-device copy
//       of the same bytes (dst.copy_(src)); prints "no CUDA device" without one.
// Times are medians over the repetitions (more for small tensors), each side run alternately to share the noise.
#include <optrace/materialize.hpp>

#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

struct Case {
  const char* what;
  std::vector<int64_t> sizes;
  c10::ScalarType dtype;
  enum { normal, uniform, integer } fill;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs a and b alternately `reps` times after one warm-up each; returns median seconds.
std::pair<double, double> time_pair(const std::function<at::Tensor()>& a, const std::function<at::Tensor()>& b,
                                    int reps, bool cuda) {
  auto sync = [&] {
    if (cuda) torch::cuda::synchronize();
  };
  auto once = [&](const std::function<at::Tensor()>& f) {
    sync();
    auto t0 = std::chrono::steady_clock::now();
    at::Tensor t = f();
    sync();
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double>(t1 - t0).count();
  };
  once(a);
  once(b);
  std::vector<double> ta, tb;
  for (int i = 0; i < reps; ++i) {
    ta.push_back(once(a));
    tb.push_back(once(b));
  }
  return {median(ta), median(tb)};
}

// Small tensors get more repetitions (up to 64x), so that each case runs long enough to
// measure on a shared machine.
int reps_for(int reps, int64_t bytes) {
  const int64_t scale = std::clamp<int64_t>((int64_t{4} << 20) / std::max<int64_t>(bytes, 1), 1, 64);
  return static_cast<int>(reps * scale);
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

optrace::MaterializeOptions options_for(const Case& c, c10::Device device) {
  auto o = optrace::MaterializeOptions().device(device).seed(1).memory_budget_bytes(int64_t{16} << 30);
  if (c.fill == Case::uniform) o.uniform(0, 1);
  return o;
}

at::Tensor torch_fill(const Case& c, c10::Device device) {
  auto opts = at::TensorOptions().dtype(c.dtype).device(device);
  switch (c.fill) {
    case Case::normal: return torch::randn(c.sizes, opts);
    case Case::uniform: return torch::rand(c.sizes, opts);
    case Case::integer: return torch::randint(0, 8, c.sizes, opts);
  }
  return {};
}

const char* torch_name(const Case& c) {
  return c.fill == Case::normal ? "randn" : c.fill == Case::uniform ? "rand" : "randint";
}

void bench_cpu(int reps) {
  std::printf("== cpu (%d intra-op threads; median of %d)\n", at::get_num_threads(), reps);
  std::printf("%-10s %-16s %-9s %12s %12s %8s\n", "fill", "shape", "dtype", "optrace GB/s", "torch GB/s", "ratio");
  const std::vector<Case> cases = {
      {"normal", {64}, c10::kFloat, Case::normal},             {"normal", {256, 256}, c10::kFloat, Case::normal},
      {"normal", {1024, 1024}, c10::kFloat, Case::normal},
      {"normal", {4096, 4096}, c10::kFloat, Case::normal},     {"normal", {8, 512, 768}, c10::kBFloat16, Case::normal},
      {"normal", {2048, 2048}, c10::kDouble, Case::normal},    {"uniform", {1024, 1024}, c10::kFloat, Case::uniform},
      {"uniform", {4096, 4096}, c10::kFloat, Case::uniform},   {"uniform", {8, 512, 768}, c10::kHalf, Case::uniform},
      {"int_range", {4096, 4096}, c10::kLong, Case::integer},  {"int_range", {64, 4096}, c10::kInt, Case::integer},
  };
  const c10::Device cpu(c10::kCPU);
  double worst = 1e9;  // over tensors of 64 KiB and more; below, per-call overhead shows
  for (const Case& c : cases) {
    optrace::TensorSpec spec;
    spec.sizes = c.sizes;
    spec.dtype = c.dtype;
    optrace::Materializer m(options_for(c, cpu));
    uint64_t stream = 0;
    const int64_t bytes = spec.numel() * static_cast<int64_t>(c10::elementSize(c.dtype));
    auto [to, tt] = time_pair([&] { return m.tensor(spec, stream++); }, [&] { return torch_fill(c, cpu); },
                              reps_for(reps, bytes), false);
    const double gb = static_cast<double>(bytes) / 1e9;
    if (bytes >= (int64_t{64} << 10)) worst = std::min(worst, tt / to);
    std::printf("%-10s %-16s %-9s %12.2f %12.2f %8.2f   (vs torch::%s)\n", c.what, shape_str(c.sizes).c_str(),
                c10::toString(c.dtype), gb / to, gb / tt, tt / to, torch_name(c));
  }
  std::printf("worst ratio optrace/torch on tensors of 64 KiB and more: %.2f (target >= 0.8)\n", worst);
}

void bench_cuda(int reps) {
  if (!torch::cuda::is_available()) {
    std::printf("== cuda: no CUDA device\n");
    return;
  }
  std::printf("== cuda (median of %d)\n", reps);
  std::printf("%-10s %-12s %-9s %12s %12s %12s %10s\n", "fill", "shape", "dtype", "optrace GB/s", "randn GB/s",
              "d2d copy GB/s", "fill/copy");
  const std::vector<Case> cases = {
      {"normal", {1 << 20}, c10::kFloat, Case::normal},     {"normal", {1 << 26}, c10::kFloat, Case::normal},
      {"normal", {1 << 27}, c10::kBFloat16, Case::normal},  {"uniform", {1 << 26}, c10::kFloat, Case::uniform},
      {"int_range", {1 << 25}, c10::kLong, Case::integer},  {"normal", {1 << 26}, c10::kComplexFloat, Case::normal},
  };
  const c10::Device cuda(c10::kCUDA);
  for (const Case& c : cases) {
    optrace::TensorSpec spec;
    spec.sizes = c.sizes;
    spec.dtype = c.dtype;
    optrace::Materializer m(options_for(c, cuda));
    uint64_t stream = 0;
    at::Tensor src = torch::empty(c.sizes, at::TensorOptions().dtype(c.dtype).device(cuda)).zero_();
    at::Tensor dst = torch::empty_like(src);
    const int64_t bytes = spec.numel() * static_cast<int64_t>(c10::elementSize(c.dtype));
    auto [to, tt] = time_pair([&] { return m.tensor(spec, stream++); }, [&] { return torch_fill(c, cuda); },
                              reps_for(reps, bytes), true);
    auto [tc, unused] = time_pair([&] { return dst.copy_(src); }, [&] { return dst; }, reps_for(reps, bytes), true);
    (void)unused;
    const double gb = static_cast<double>(bytes) / 1e9;
    std::printf("%-10s %-12s %-9s %12.1f %12.1f %12.1f %10.2f\n", c.what, shape_str(c.sizes).c_str(),
                c10::toString(c.dtype), gb / to, gb / tt, gb / tc, tc / to);
  }
  std::printf("(d2d copy GB/s counts the bytes copied once; the copy reads and writes them)\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "all";
  int reps = 9;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "cpu") || !std::strcmp(argv[i], "cuda") || !std::strcmp(argv[i], "all")) mode = argv[i];
    else {
      std::fprintf(stderr, "usage: bench_materialize [cpu|cuda|all] [--reps N]\n");
      return 2;
    }
  }
  if (mode != "cuda") bench_cpu(reps);
  if (mode != "cpu") bench_cuda(reps);
  return 0;
}
