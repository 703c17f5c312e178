// bench_observer: what InputObserver adds to a model call once its store is full.
//
// The model is a callable taking 4 small tensors that does no work, so the difference between
// observed and direct calls is the observer's own cost: encoding the 4 tensor signatures,
// hashing them, one lookup under the lock.
//
//   bench_observer [CALLS]   (default 2000000)
#include <optrace/observer.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

struct Model {
  int64_t operator()(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c, const at::Tensor& d) const {
    return a.size(0) + b.size(0) + c.size(0) + d.size(0);
  }
};

template <class F>
double ns_per_call(int64_t calls, F&& f) {
  int64_t sink = 0;
  auto start = std::chrono::steady_clock::now();
  for (int64_t k = 0; k < calls; ++k) sink += f();
  auto stop = std::chrono::steady_clock::now();
  if (sink == 42) std::puts("");  // keep the calls
  return std::chrono::duration<double, std::nano>(stop - start).count() / static_cast<double>(calls);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t calls = argc > 1 ? std::atoll(argv[1]) : 2000000;
  auto a = at::ones({2, 16}), b = at::ones({2, 16}, at::kLong), c = at::ones({2, 16, 8}), d = at::ones({16});
  Model model;
  optrace::InputObserver<Model> observer(model);
  for (int k = 0; k < 3; ++k) observer(a, b, c, d);  // fill the store (3 calls)

  double best_direct = 1e30, best_observed = 1e30;
  for (int round = 0; round < 5; ++round) {
    best_direct = std::min(best_direct, ns_per_call(calls, [&] { return model(a, b, c, d); }));
    best_observed = std::min(best_observed, ns_per_call(calls, [&] { return observer(a, b, c, d); }));
  }
  std::printf("calls per round: %lld (best of 5 rounds)\n", static_cast<long long>(calls));
  std::printf("direct call:     %8.1f ns\n", best_direct);
  std::printf("observed call:   %8.1f ns\n", best_observed);
  std::printf("observer adds:   %8.1f ns per call (target: <= 1000 ns)\n", best_observed - best_direct);
  std::printf("calls recorded:  %lld\n", static_cast<long long>(observer.num_calls()));
  return 0;
}
