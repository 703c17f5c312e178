// bench_kineto_rss: one read of a Kineto trace in a process of its own, for its peak RSS
// (benchmarks/kineto_layouts.sh runs it under /usr/bin/time).
//
//   bench_kineto_rss load FILE   optrace::kineto::load
//   bench_kineto_rss ka FILE     optrace::KeyAverages::from_kineto_file (optrace summary --by time)
#include <optrace/key_averages.hpp>
#include <optrace/kineto.hpp>

#include <cstdio>
#include <exception>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: bench_kineto_rss load|ka FILE\n");
    return 2;
  }
  try {
    if (std::string(argv[1]) == "load") {
      const optrace::kineto::ImportResult r = optrace::kineto::load(argv[2]);
      std::printf("%lld calls kept\n", static_cast<long long>(r.report.kept));
    } else {
      const optrace::KeyAverages k = optrace::KeyAverages::from_kineto_file(argv[2], optrace::GroupBy::Name);
      std::printf("%zu rows\n", k.rows().size());
    }
  } catch (const std::exception& e) {
    std::printf("%s\n", e.what());
    return 1;
  }
  return 0;
}
