// The program every consumer test builds: what a user's first program with optrace does.
// Records what a tensor is (never its data) and writes it as JSON; exits non-zero if the
// record is wrong, so a consumer test fails on a broken package, not only a broken build.
#include <optrace/optrace.hpp>
#include <optrace/json/writer.hpp>

#include <cstdio>

int main() {
  at::Tensor x = at::zeros({2, 3}, at::kFloat).t();  // a non-contiguous view
  optrace::TensorSpec spec = optrace::TensorSpec::of(x);

  optrace::json::Writer w;
  w.begin_object().key("sizes").begin_array();
  for (int64_t s : spec.sizes) w.value(s);
  w.end_array().key("strides").begin_array();
  for (int64_t s : spec.strides) w.value(s);
  w.end_array().key("dtype").value(std::string(c10::toString(spec.dtype))).end_object();
  std::printf("%s\n", w.str().c_str());

  const char* expected = R"({"sizes": [3, 2], "strides": [1, 3], "dtype": "Float"})";
  if (w.str() != expected) {
    std::fprintf(stderr, "expected %s\n", expected);
    return 1;
  }
  return 0;
}
