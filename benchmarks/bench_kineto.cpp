// bench_kineto: Kineto trace import speed against Python's json.load of the same file.
//
// Writes a synthetic torch.profiler trace of at least SIZE_MB megabytes (the events of a
// training step of an MLP, repeated with varying batch sizes: ProfilerStep annotations, nested
// cpu_op events with Input Dims / Input type / Input Strides / Concrete Inputs, autograd nodes,
// cuda_runtime and kernel events, flow events), then times in the same run:
//   - optrace::kineto::load of the file (best of REPEATS),
//   - the same for a gzip-compressed copy,
//   - Debian's /usr/bin/python3: json.load of the file, timed inside Python (best of 2; the
//     interpreter's start-up is not counted).
//
//   bench_kineto [SIZE_MB (default 64)] [REPEATS (default 3)] [DIR (default /tmp)] [keep]
#include <optrace/kineto.hpp>

#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Gen {
  std::string out;
  int64_t ts = 1700000000000000;  // microseconds, as Kineto writes them (plus 3 decimals)
  int64_t ext = 1;

  static std::string time(int64_t ns) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000), static_cast<long long>(ns % 1000));
    return buf;
  }

  // One complete event; `args` is the JSON inside "args" after the ids.
  void event(const char* cat, const std::string& name, int64_t tid, int64_t start_ns, int64_t dur_ns, const std::string& args) {
    out += R"(  {"ph": "X", "cat": ")";
    out += cat;
    out += R"(", "name": ")";
    out += name;
    out += R"(", "pid": 4242, "tid": )";
    out += std::to_string(tid);
    out += R"(, "ts": )";
    out += time(start_ns);
    out += R"(, "dur": )";
    out += time(dur_ns);
    out += R"(, "args": {"External id": )";
    out += std::to_string(ext++);
    out += R"(, "Record function id": 0, "Ev Idx": )";
    out += std::to_string(ext);
    if (!args.empty()) out += ", " + args;
    out += "}},\n";
  }

  static std::string op_args(const std::string& dims, const std::string& types, const std::string& strides,
                             const std::string& concrete) {
    return R"("Input Dims": )" + dims + R"(, "Input type": )" + types + R"(, "Input Strides": )" + strides +
           R"(, "Concrete Inputs": )" + concrete +
           R"(, "Call stack": "train.py(42): forward;torch/nn/modules/module.py(1501): _call_impl;train.py(88): step")";
  }

  // A linear layer: aten::linear > aten::t > aten::transpose > aten::as_strided, aten::addmm.
  void linear(int64_t tid, int64_t& t, int64_t b, int64_t in, int64_t outf) {
    std::string B = std::to_string(b), I = std::to_string(in), O = std::to_string(outf);
    int64_t start = t;
    event("cpu_op", "aten::linear", tid, start, 9000,
          op_args("[[" + B + ", " + I + "], [" + O + ", " + I + "], [" + O + "]]", R"(["float", "float", "float"])",
                  "[[" + I + ", 1], [" + I + ", 1], [1]]", R"(["", "", ""])"));
    event("cpu_op", "aten::t", tid, start + 100, 2000,
          op_args("[[" + O + ", " + I + "]]", R"(["float"])", "[[" + I + ", 1]]", R"([""])"));
    event("cpu_op", "aten::transpose", tid, start + 200, 1500,
          op_args("[[" + O + ", " + I + "], [], []]", R"(["float", "Scalar", "Scalar"])", "[[" + I + ", 1], [], []]",
                  R"(["", "0", "1"])"));
    event("cpu_op", "aten::as_strided", tid, start + 300, 800,
          op_args("[[" + O + ", " + I + "], [], [], []]", R"(["float", "ScalarList", "ScalarList", ""])",
                  "[[" + I + ", 1], [], [], []]", "[\"\", \"[" + I + ", " + O + "]\", \"[1, " + I + "]\", \"\"]"));
    event("cpu_op", "aten::addmm", tid, start + 2500, 6000,
          op_args("[[" + O + "], [" + B + ", " + I + "], [" + I + ", " + O + "], [], []]",
                  R"(["float", "float", "float", "Scalar", "Scalar"])", "[[1], [" + I + ", 1], [1, " + I + "], [], []]",
                  R"(["", "", "", "1", "1"])"));
    event("cuda_runtime", "cudaLaunchKernel", tid, start + 4000, 1500, R"("cbid": 211, "correlation": )" + std::to_string(ext));
    event("kernel", "ampere_sgemm_128x64_tn", 7, start + 20000, 15000,
          R"("queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": )" + std::to_string(ext) +
              R"(, "registers per thread": 122, "shared memory": 24576, "blocks per SM": 1.2, "warps per SM": 4.8, "grid": [2, 4, 1], "block": [128, 1, 1], "est. achieved occupancy %": 8)");
    t += 10000;
  }

  void relu(int64_t tid, int64_t& t, int64_t b, int64_t f) {
    std::string B = std::to_string(b), F = std::to_string(f);
    event("cpu_op", "aten::relu", tid, t, 3000,
          op_args("[[" + B + ", " + F + "]]", R"(["float"])", "[[" + F + ", 1]]", R"([""])"));
    event("cpu_op", "aten::clamp_min", tid, t + 100, 2500,
          op_args("[[" + B + ", " + F + "], []]", R"(["float", "Scalar"])", "[[" + F + ", 1], []]", R"(["", "0"])"));
    t += 4000;
  }

  void step(int64_t b) {
    int64_t tid = 101, t = ts * 1000;
    int64_t step_start = t;
    std::string id = std::to_string(ext++);
    out += R"(  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#)" + id +
           R"(", "pid": 4242, "tid": 101, "ts": )" + time(t) + R"(, "dur": 900000.000, "args": {"External id": )" + id +
           "}},\n";
    t += 1000;
    linear(tid, t, b, 512, 1024);
    relu(tid, t, b, 1024);
    linear(tid, t, b, 1024, 1024);
    relu(tid, t, b, 1024);
    linear(tid, t, b, 1024, 10);
    // Backward on the autograd thread: nodes are transparent, their aten ops are kept.
    int64_t bt = t;
    for (int k = 0; k < 3; ++k) {
      event("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 102, bt, 20000, "");
      event("cpu_op", "AddmmBackward0", 102, bt + 100, 19000, "");
      event("cpu_op", "aten::mm", 102, bt + 200, 8000,
            op_args("[[" + std::to_string(b) + ", 1024], [1024, 1024]]", R"(["float", "float"])", "[[1024, 1], [1, 1024]]",
                    R"(["", ""])"));
      event("cpu_op", "aten::sum", 102, bt + 9000, 5000,
            op_args("[[" + std::to_string(b) + ", 1024], [], [], []]", R"(["float", "ScalarList", "Scalar", ""])",
                    "[[1024, 1], [], [], []]", R"(["", "[0]", "True", ""])"));
      out += R"(  {"ph": "f", "id": )" + std::to_string(ext) + R"(, "pid": 4242, "tid": 102, "ts": )" + time(bt) +
             R"(, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"},)" + "\n";
      bt += 21000;
    }
    ts = (step_start + 1000000) / 1000;
  }
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const double size_mb = argc > 1 ? std::atof(argv[1]) : 64;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 3;
  const std::string dir = argc > 3 ? argv[3] : "/tmp";
  const bool keep = argc > 4 && std::string(argv[4]) == "keep";  // leave the trace files there
  const std::string path = dir + "/bench_kineto.pt.trace.json";
  const std::string gz_path = path + ".gz";

  Gen gen;
  gen.out = "{\n \"schemaVersion\": 1,\n \"displayTimeUnit\": \"ms\",\n \"traceEvents\": [\n";
  int64_t steps = 0;
  const int64_t batches[] = {32, 64, 128, 8, 256, 16, 64, 32};
  while (static_cast<double>(gen.out.size()) < size_mb * 1e6) gen.step(batches[steps++ % 8]);
  gen.out += R"(  {"name": "process_name", "ph": "M", "pid": 4242, "tid": 0, "args": {"name": "python3"}})";
  gen.out += "\n ]\n}\n";
  optrace::detail::write_file_atomic(path, gen.out);
  {
    gzFile gz = gzopen(gz_path.c_str(), "wb6");
    gzwrite(gz, gen.out.data(), static_cast<unsigned>(gen.out.size()));
    gzclose(gz);
  }
  const double mb = static_cast<double>(gen.out.size()) / 1e6;
  std::printf("trace: %s, %.1f MB, %lld steps\n", path.c_str(), mb, static_cast<long long>(steps));

  auto time_load = [&](const std::string& file, optrace::kineto::ImportResult& last) {
    double best = 1e9;
    for (int k = 0; k < repeats; ++k) {
      auto start = std::chrono::steady_clock::now();
      last = optrace::kineto::load(file);
      best = std::min(best, seconds_since(start));
    }
    return best;
  };
  optrace::kineto::ImportResult result;
  double plain = time_load(path, result);
  double gz = time_load(gz_path, result);
  std::printf("optrace::kineto::load:         %8.3f s  (%.0f MB/s)\n", plain, mb / plain);
  std::printf("optrace::kineto::load (.gz):   %8.3f s\n", gz);
  std::printf("  op events %lld, kept calls %lld, ops %zu, unique inputs %lld\n",
              static_cast<long long>(result.report.op_events), static_cast<long long>(result.report.kept),
              result.trace.size(), static_cast<long long>(result.trace.unique_input_count()));

  std::string command = "/usr/bin/python3 -c \"import json, sys, time\nbest = 1e9\nfor _ in range(2):\n"
                        "    t = time.perf_counter(); json.load(open(sys.argv[1])); best = min(best, time.perf_counter() - t)\n"
                        "print(best)\" " + path;
  std::FILE* p = popen(command.c_str(), "r");
  double python = -1;
  if (p != nullptr) {
    if (std::fscanf(p, "%lf", &python) != 1) python = -1;
    pclose(p);
  }
  if (python > 0) {
    std::printf("python3 json.load:             %8.3f s  (%.0f MB/s)\n", python, mb / python);
    std::printf("speed-up: %.1fx (plain), %.1fx (.gz against plain json.load)\n", python / plain, python / gz);
  } else {
    std::printf("python3 json.load: /usr/bin/python3 not available\n");
  }
  if (!keep) {
    std::remove(path.c_str());
    std::remove(gz_path.c_str());
  }
  return 0;
}
