// The program every consumer test builds: what a user's first program with optrace does.
// Observes three calls of a model and prints the dynamic shapes it infers; exits non-zero if
// they are wrong, so a consumer test fails on a broken package, not only on a broken build.
#include <optrace/optrace.hpp>

#include <cstdio>
#include <string>

int main() {
  auto model = [](const at::Tensor& x, const at::Tensor& y) { return x + y; };
  optrace::InputObserver<decltype(model)> observer(model, optrace::ObserverOptions().store_n_calls(2));
  for (int64_t batch : {2, 3, 4}) observer(at::ones({batch, 8}), at::ones({batch, 8}));

  const std::string got = observer.infer_dynamic_shapes().to_python();
  std::printf("%lld calls stored, dynamic shapes %s\n", static_cast<long long>(observer.num_obs()), got.c_str());
  const std::string expected = "({0: Dim.AUTO}, {0: Dim.AUTO})";
  if (observer.num_obs() != 2 || got != expected) {
    std::fprintf(stderr, "expected 2 calls stored and %s\n", expected.c_str());
    return 1;
  }
  return 0;
}
