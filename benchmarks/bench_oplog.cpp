// bench_oplog: reading PyTorch's operator-inputs logs, against PyTorch's own Python reading them.
//
// Makes a large log of the three real logs in tests/data/oplogs (PyTorch's, from its
// operator_inp_logs/), COPIES times (default 200: 44,000 lines, 3.3 MB) with other tensor sizes
// in each copy, so that every line is a new input, or reads the LOG given,
// then times in the same run:
//   - optrace::operator_inputs::load of the file (best of 5),
//   - optrace::operator_inputs::to_text of the trace read (best of 5),
//   - Debian's /usr/bin/python3 running benchmarks/oplog_read_python.py on the file: what
//     OperatorInputsLoader and deserialize_args do, every input line evaluated, with T/ST bound to
//     cheap functions (no tensor allocated); best of 3, the interpreter's start-up not counted.
//
//   bench_oplog [COPIES (default 200)] [LOG]
#include <optrace/operator_inputs.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  const int copies = argc > 1 ? std::atoi(argv[1]) : 200;
  std::string path = argc > 2 ? argv[2] : "";
  if (path.empty()) {
    std::string one;
    for (const char* f : {"resnet18_training.txt", "BertForMaskedLM_training.txt", "tts_angular_training.txt"})
      one += read(std::string(OPTRACE_OPLOGS) + "/" + f);
    // Each copy's tensors get other leading sizes (T([64, ...]) becomes T([3064, ...]) in copy 3),
    // so that its lines are new inputs, as in a log of many models, not repeats of the first.
    path = "/tmp/optrace_bench_oplog.txt";
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < copies; ++i) {
      std::string copy;
      const std::string tag = "T([" + std::to_string(i + 1) + "0";
      for (size_t at = 0;;) {
        const size_t t = one.find("T([", at);
        copy.append(one, at, t == std::string::npos ? std::string::npos : t - at);
        if (t == std::string::npos) break;
        copy += i == 0 ? "T([" : tag;
        at = t + 3;
      }
      out << copy;
    }
  }
  const std::string text = read(path);
  int64_t lines = 0;
  for (char c : text) lines += c == '\n';
  std::printf("log: %s (%.1f MB, %lld lines)\n", path.c_str(), text.size() / 1e6, static_cast<long long>(lines));

  double best = 1e9;
  optrace::operator_inputs::ReadResult r;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    optrace::operator_inputs::ReadResult read = optrace::operator_inputs::load(path);
    best = std::min(best, seconds_since(t0));
    r = std::move(read);  // the previous trace is freed outside the timed part, as Python's is
  }
  std::printf("optrace read:   %8.4f s  (%.0f MB/s, %.2f M lines/s): %zu ops, %lld unique inputs, %lld calls\n", best,
              text.size() / 1e6 / best, lines / 1e6 / best, r.trace.size(), static_cast<long long>(r.trace.unique_input_count()),
              static_cast<long long>(r.trace.total_calls()));
  double write = 1e9;
  size_t written = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    written = optrace::operator_inputs::to_text(r.trace).size();
    write = std::min(write, seconds_since(t0));
  }
  std::printf("optrace write:  %8.4f s  (%zu bytes: the unique lines)\n", write, written);

  const std::string command = "/usr/bin/python3 " + std::string(OPTRACE_SOURCE_DIR) + "/benchmarks/oplog_read_python.py " + path;
  std::FILE* p = popen(command.c_str(), "r");
  double python = -1;
  long long python_lines = 0;
  if (p != nullptr) {
    if (std::fscanf(p, "%lf %lld", &python, &python_lines) != 2) python = -1;
    pclose(p);
  }
  if (python > 0) {
    std::printf("python3 (OperatorInputsLoader + deserialize_args rules, %lld input lines): %8.4f s\n", python_lines, python);
    std::printf("speed-up: %.1fx\n", python / best);
  } else {
    std::printf("python3: /usr/bin/python3 with torch not available\n");
  }
  return 0;
}
