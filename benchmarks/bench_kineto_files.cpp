// bench_kineto_files: Kineto import speed on real trace files, against two references measured in
// the same run on the same bytes:
//   - the floor: a simdjson On-Demand walk that visits every value of the document (every key,
//     every string unescaped, every number parsed), with no other work;
//   - Debian's /usr/bin/python3: json.load of the file, timed inside Python (the interpreter's
//     start-up is not counted), best of at least 2 (more for small files, up to ~1 s).
// optrace's figures, best of REPEATS each: `load ms` is optrace::kineto::load of the (uncompressed)
// file (read, walked once, events decoded, nesting resolved, the OpTrace built) with the default
// options (a trace of 1 MiB or more is read in pieces, one thread per core), `1-thread ms` the
// same with ImportOptions::threads(1); both are compared with Python's json.load of the file
// (`x python`, `x py 1t`). `parse ms` is optrace::kineto::parse of the bytes already in memory on
// one thread, compared with the one-thread walk over the same bytes (`x walk`). What is timed is
// the call that makes a result: the previous one (OpTrace, or Python's objects) is freed before
// the clock starts. `py/walk` (json.load over the walk) bounds the one-thread `x python` of an
// import no faster than the walk.
//
//   bench_kineto_files [--repeats N] [--optrace-only] FILE...
// (without --repeats: each figure is the best of at least 3 runs, more for small files, ~1 s each)
// (.gz files are inflated to a temporary copy first; --optrace-only: no walk, no Python, for perf)
//
// benchmarks/kineto_files.sh gathers the real traces (../shared/data/kineto, a large trace made by
// repeating a real trace's events, and torch 2.6 traces of torchvision models) and runs this.
#include <optrace/detail/common/gzip.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/kineto.hpp>

#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace od = simdjson::ondemand;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Visits every value under `v`; returns a checksum so that nothing is optimized away.
uint64_t walk(od::value v) {
  od::json_type type;
  if (v.type().get(type)) std::abort();
  switch (type) {
    case od::json_type::object: {
      uint64_t sum = 0;
      for (auto field : v.get_object()) {
        std::string_view key;
        if (field.unescaped_key().get(key)) std::abort();
        sum += key.size() + walk(field.value());
      }
      return sum;
    }
    case od::json_type::array: {
      uint64_t sum = 1;
      for (auto item : v.get_array()) sum += walk(item.value());
      return sum;
    }
    case od::json_type::string: {
      std::string_view s;
      if (v.get_string().get(s)) std::abort();
      return s.size();
    }
    case od::json_type::number: {
      double d;
      if (v.get_double().get(d)) std::abort();
      return static_cast<uint64_t>(d != 0);
    }
    case od::json_type::boolean: {
      bool b;
      if (v.get_bool().get(b)) std::abort();
      return b;
    }
    case od::json_type::null: return v.is_null() ? 1 : 0;
  }
  return 0;
}

uint64_t walk_document(const std::string& padded) {
  od::parser parser;
  od::document doc;
  if (parser.iterate(padded.data(), padded.size(), padded.capacity()).get(doc)) std::abort();
  od::value root;
  if (doc.get_value().get(root)) std::abort();
  return walk(root);
}

double python_json_load(const std::string& path) {
  const std::string command =
      "/usr/bin/python3 -c \"import json, sys, time\nbest = 1e9\nstart = time.perf_counter()\n"
      "for k in range(1000):\n    if k >= 2 and time.perf_counter() - start > 1.0: break\n"
      "    t = time.perf_counter(); r = json.load(open(sys.argv[1])); best = min(best, time.perf_counter() - t); del r\n"
      "print(best)\" '" + path + "'";
  std::FILE* p = popen(command.c_str(), "r");
  double seconds = -1;
  if (p != nullptr) {
    if (std::fscanf(p, "%lf", &seconds) != 1) seconds = -1;
    pclose(p);
  }
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 0;  // 0: at least 3, and on until a file has had ~1 s
  bool optrace_only = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--repeats" && i + 1 < argc) repeats = std::max(1, std::atoi(argv[++i]));
    else if (a == "--optrace-only") optrace_only = true;
    else files.push_back(a);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: bench_kineto_files [--repeats N] FILE...\n");
    return 2;
  }
  std::printf("(%u cores)\n", std::thread::hardware_concurrency());
  std::printf("%-36s %6s %8s %9s %8s %8s %10s %7s %8s %8s %6s %7s\n", "trace", "MB", "op calls", "python ms", "load ms",
              "x python", "1-thread ms", "x py 1t", "parse ms", "walk ms", "x walk", "py/walk");
  for (const std::string& file : files) {
    std::string path = file;
    std::string text = optrace::detail::read_file_maybe_gzip(file);
    if (optrace::detail::gz_path(file)) {  // the same bytes, uncompressed, for all three
      path = "/tmp/bench_kineto_files." + std::to_string(::getpid()) + ".json";
      optrace::detail::write_file_atomic(path, text);
    }
    text.reserve(text.size() + simdjson::SIMDJSON_PADDING);
    optrace::kineto::ImportResult result;
    double ours = 1e9, one_thread = 1e9, parsed = 1e9, floor = 1e9;
    const optrace::kineto::ImportOptions serial = optrace::kineto::ImportOptions().threads(1);
    uint64_t check = 0;
    const auto began = std::chrono::steady_clock::now();
    for (int k = 0; repeats > 0 ? k < repeats : (k < 3 || (seconds_since(began) < 1.0 && k < 1000)); ++k) {
      result = {};  // the previous result is freed before the clock starts (Python's too, below)
      auto start = std::chrono::steady_clock::now();
      result = optrace::kineto::load(path);
      ours = std::min(ours, seconds_since(start));
      result = {};
      start = std::chrono::steady_clock::now();
      result = optrace::kineto::load(path, serial);
      one_thread = std::min(one_thread, seconds_since(start));
      result = {};
      start = std::chrono::steady_clock::now();
      result = optrace::kineto::parse(text, serial);
      parsed = std::min(parsed, seconds_since(start));
      if (optrace_only) continue;
      start = std::chrono::steady_clock::now();
      check += walk_document(text);
      floor = std::min(floor, seconds_since(start));
    }
    const double python = optrace_only ? -1 : python_json_load(path);
    if (path != file) std::remove(path.c_str());
    std::string name = file.substr(file.find_last_of('/') + 1);
    if (name.size() > 36) name = name.substr(0, 33) + "...";
    auto times = [python](double t) { return python > 0 ? python / t : 0.0; };
    std::printf("%-36s %6.1f %8lld %9.3f %8.3f %8.1f %10.3f %7.1f %8.3f %8.3f %6.2f %7.1f\n", name.c_str(),
                static_cast<double>(text.size()) / 1e6, static_cast<long long>(result.report.kept), std::max(python, 0.0) * 1e3, ours * 1e3,
                times(ours), one_thread * 1e3, times(one_thread), parsed * 1e3, optrace_only ? 0.0 : floor * 1e3,
                optrace_only ? 0.0 : parsed / floor, times(floor));
    if (check == 0 && !optrace_only) std::printf("(empty walk)\n");
  }
  std::printf("x python: python json.load / load (target >= 12); x py 1t: the same, one thread;\n"
              "x walk: parse / walk, both one thread (target <= 1.5);\n"
              "py/walk: python json.load / walk, the one-thread x python of an import exactly as fast as the walk\n");
  return 0;
}
