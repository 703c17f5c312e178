// bench_file_bytes: reading a file into memory, mapped or read (detail::FileBytes), by size.
// FileBytes reads files below kReadBelow into a heap buffer and maps larger ones; this program
// times both ways on files of the page cache (written to $TMPDIR first), best of many, each
// touching every page of the bytes and freeing them, as the loaders do:
//   cmake --build build --target bench_file_bytes && build/benchmarks/bench_file_bytes
// "read, fresh": reading in a process whose heap has not grown yet (a CLI run on one file): past
// malloc's mmap threshold (128 KiB) the buffer is new pages, each faulted in (a child process
// measures it, the threshold fixed).
#include <optrace/detail/common/io.hpp>

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

double best_seconds(const std::string& path, size_t read_below, int repeats, unsigned long& sink) {
  double best = 1e9;
  for (int k = 0; k < repeats; ++k) {
    const auto start = std::chrono::steady_clock::now();
    {
      optrace::detail::FileBytes file(path, 64, read_below);
      if (file.data() == nullptr) std::abort();
      for (size_t i = 0; i < file.size(); i += 4096) sink += static_cast<unsigned char>(file.data()[i]);
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  const bool fresh_only = argc > 1 && std::string(argv[1]) == "--fresh";
  // A fresh process: malloc's mmap threshold fixed at its start value, so that every buffer past
  // it is new pages (a process that read big files before reuses its heap instead).
  if (fresh_only) mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  const size_t sizes[] = {4096, 22000, 50000, 100000, 300000, 1000000, 4000000, 16000000};
  unsigned long sink = 0;
  double map[8], read[8], fresh[8];
  for (size_t k = 0; k < 8; ++k) {
    const std::string path = dir + "/bench_file_bytes." + std::to_string(::getpid()) + "." + std::to_string(sizes[k]);
    optrace::detail::write_file_atomic(path, std::string(sizes[k], 'x'));
    const int repeats = sizes[k] > 5000000 ? 10 : 200;
    if (fresh_only) {
      std::printf("%.9f\n", best_seconds(path, SIZE_MAX, repeats, sink));
    } else {
      map[k] = best_seconds(path, 0, repeats, sink);
      read[k] = best_seconds(path, SIZE_MAX, repeats, sink);
    }
    std::remove(path.c_str());
  }
  if (fresh_only) {
    std::printf("%lu\n", sink % 2);  // the bytes' checksum, so that their reads stay (the parent reads 8 lines)
    return 0;
  }
  const std::string command = "'" + std::string(argv[0]) + "' --fresh";
  FILE* child = ::popen(command.c_str(), "r");
  for (size_t k = 0; k < 8; ++k)
    if (child == nullptr || std::fscanf(child, "%lf", &fresh[k]) != 1) fresh[k] = -1e-6;
  if (child != nullptr) ::pclose(child);
  std::printf("%10s %10s %10s %14s\n", "bytes", "map us", "read us", "read, fresh us");
  for (size_t k = 0; k < 8; ++k) std::printf("%10zu %10.1f %10.1f %14.1f\n", sizes[k], map[k] * 1e6, read[k] * 1e6, fresh[k] * 1e6);
  std::printf("FileBytes reads files below %zu bytes, maps the others (%lu)\n", optrace::detail::FileBytes::kReadBelow, sink % 2);
  return 0;
}
