// Must not compile without NDEBUG (tests/consumers/debug_build/CMakeLists.txt).
#include <optrace/op_tracer.hpp>

int main() {
  optrace::OpTracer tracer;
  tracer.start();
  tracer.stop();
  return 0;
}
