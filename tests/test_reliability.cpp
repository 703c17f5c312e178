// Reliability: readers turn every bad input into an optrace::Error (the fuzzers' regressions),
// exact counts under load ([stress]), and saves that a killed process cannot leave half-written.
#include <optrace/detail/aoti/zip_names.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/kineto.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/key_averages.hpp>
#include <optrace/rank_summary.hpp>
#include <optrace/observations.hpp>
#include <optrace/observer.hpp>
#include <optrace/on_demand.hpp>
#include <optrace/op_trace.hpp>
#include <optrace/op_tracer.hpp>
#include <optrace/operator_inputs.hpp>
#include <optrace/plan.hpp>
#include <optrace/replay.hpp>

#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <signal.h>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <vector>

#include "optrace_catch.hpp"

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string regression(const std::string& target, const std::string& name) {
  return read_text(std::string(OPTRACE_SOURCE_DIR) + "/tests/fuzz/regressions/" + target + "/" + name);
}

// The files of the fuzzers' regression folder for `target`: every target has one, never empty
// (a folder renamed or lost would otherwise check nothing).
std::vector<std::string> regressions(const std::string& target) {
  std::vector<std::string> out;
  const std::string dir = std::string(OPTRACE_SOURCE_DIR) + "/tests/fuzz/regressions/" + target;
  DIR* d = opendir(dir.c_str());
  INFO(dir);
  REQUIRE(d != nullptr);
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') out.push_back(dir + "/" + e->d_name);
  closedir(d);
  REQUIRE(!out.empty());
  return out;
}

// What a reader answers for `text`: "ok", or the optrace::Error's message. Anything else escapes.
template <class F>
std::string answer(F&& read) {
  try {
    read();
    return "ok";
  } catch (const optrace::Error& e) {
    return e.what();
  }
}

std::string nested_arrays(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

}  // namespace

// ---- files: errors name them; what is not a regular file is refused ---------------------------

TEST_CASE("reliability: every reader's error names the file", "[reliability]") {
  const std::string data = OPTRACE_TEST_DATA;
  const std::string observations = data + "/observations/masked.json";
  const std::string trace = data + "/peer/mlp.hf_op_trace.json";
  // An observation file given to the op-trace readers, and the other way round.
  auto error_of = [](auto&& read) -> std::pair<std::string, std::string> {
    try {
      read();
    } catch (const optrace::Error& e) {
      return {e.what(), e.file()};
    }
    return {"no error", ""};
  };
  auto [what, file] = error_of([&] { optrace::OpTrace::load(observations); });
  CHECK(file == observations);
  CHECK(what == "optrace: " + observations + ": JsonError at /format: expected an object, got string \"optrace.observations\"");
  std::tie(what, file) = error_of([&] { optrace::load_observations(trace); });
  CHECK(file == trace);
  CHECK_THAT(what, OPTRACE_STARTS_WITH("optrace: " + trace + ": JsonError at /: missing key \"format\""));
  std::tie(what, file) = error_of([&] { optrace::kineto::load(observations); });
  CHECK(file == observations);
  CHECK_THAT(what, OPTRACE_STARTS_WITH("optrace: " + observations + ": JsonError at "));
  std::tie(what, file) = error_of([&] { optrace::kineto::load_any(observations); });
  CHECK(file == observations);
  std::tie(what, file) = error_of([&] { optrace::json::Document::load(data + "/cli/truncated.json"); });
  CHECK_THAT(what, OPTRACE_STARTS_WITH("optrace: " + data + "/cli/truncated.json: JsonError at /: malformed JSON"));
  // A log names itself with line and column, once.
  std::tie(what, file) = error_of([&] { optrace::operator_inputs::load(data + "/cli/bad_log.txt"); });
  CHECK(file == data + "/cli/bad_log.txt");
  CHECK_THAT(what, OPTRACE_STARTS_WITH("optrace: TextError at " + data + "/cli/bad_log.txt:2:28: "));
  // A save that cannot be made names the file it was to write.
  std::tie(what, file) = error_of([&] { optrace::OpTrace::load(trace).save("/nonexistent/out.json"); });
  CHECK(file == "/nonexistent/out.json");
  CHECK_THAT(what, OPTRACE_STARTS_WITH("optrace: /nonexistent/out.json: IoError: cannot create '/nonexistent/out.json.tmp."));
}

TEST_CASE("reliability: a directory, a FIFO or a device is an IoError naming it, not read", "[reliability]") {
  const std::string dir = OPTRACE_TEST_DATA;
  const std::string fifo = optrace_test::temp_path("reliability.fifo");
  std::remove(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  struct Case {
    std::string path, why;
  };
  for (const Case& c : {Case{dir, "it is a directory"}, Case{fifo, "it is a FIFO (a named pipe), not a regular file"},
                        Case{"/dev/null", "it is a device, not a regular file"}}) {
    const std::string expected = "optrace: " + c.path + ": IoError: cannot read '" + c.path + "': " + c.why;
    CHECK(answer([&] { optrace::OpTrace::load(c.path); }) == expected);
    CHECK(answer([&] { optrace::load_observations(c.path); }) == expected);
    CHECK(answer([&] { optrace::kineto::load(c.path); }) == expected);
    CHECK(answer([&] { optrace::kineto::load_any(c.path); }) == expected);
    CHECK(answer([&] { optrace::kineto::detect_format(c.path); }) == expected);
    CHECK(answer([&] { optrace::operator_inputs::load(c.path); }) == expected);
    CHECK(answer([&] { optrace::json::Document::load(c.path); }) == expected);
  }
  std::remove(fifo.c_str());
}

TEST_CASE("reliability: a file in memory is its bytes then zeros, read (small) or mapped (large)", "[reliability]") {
  const std::string path = optrace_test::temp_path("reliability.bytes");
  std::mt19937 random(7);
  std::string content(200000, '\0');
  for (char& c : content) c = static_cast<char>(random() % 255 + 1);  // no zero: the spare must be written
  for (size_t size : {size_t{1}, size_t{4095}, size_t{4096}, size_t{50000}, content.size()}) {
    optrace::detail::write_file_atomic(path, std::string_view(content.data(), size));
    for (size_t read_below : {size_t{0}, SIZE_MAX, optrace::detail::FileBytes::kReadBelow}) {
      CAPTURE(size, read_below);
      optrace::detail::FileBytes file(path, 64, read_below);
      REQUIRE(file.data() != nullptr);
      CHECK(file.mapped() == (size >= read_below));
      CHECK(std::string_view(file.data(), file.size()) == std::string_view(content.data(), size));
      REQUIRE(file.capacity() >= size + 64);
      CHECK(std::string_view(file.data() + size, 64) == std::string(64, '\0'));
    }
  }
  optrace::detail::write_file_atomic(path, "");
  CHECK(optrace::detail::FileBytes(path, 64, SIZE_MAX).data() == nullptr);  // empty: read_file's case
  CHECK(optrace::detail::FileBytes(OPTRACE_TEST_DATA, 64, SIZE_MAX).data() == nullptr);  // a directory
  std::remove(path.c_str());
}

TEST_CASE("reliability: a .gz path is written gzip-compressed and read back", "[reliability]") {
  const optrace::OpTrace trace = optrace::OpTrace::load(std::string(OPTRACE_TEST_DATA) + "/peer/mlp.hf_op_trace.json");
  const std::string hf = optrace_test::temp_path("reliability.hf_op_trace.json.gz");
  const std::string kineto = optrace_test::temp_path("reliability.pt.trace.json.gz");
  const std::string log = optrace_test::temp_path("reliability.txt.gz");
  trace.save(hf);
  optrace::kineto::save(trace, kineto);
  optrace::operator_inputs::save(trace, log);
  for (const std::string& path : {hf, kineto, log}) {
    const std::string bytes = read_text(path);
    REQUIRE(bytes.size() > 2);
    CHECK(static_cast<unsigned char>(bytes[0]) == 0x1f);
    CHECK(static_cast<unsigned char>(bytes[1]) == 0x8b);
  }
  CHECK(optrace::OpTrace::load(hf) == trace);
  CHECK(optrace::kineto::load(kineto).trace == trace);
  CHECK(optrace::operator_inputs::load(log).trace.total_calls() == 18);  // t.default: non-compute, left out
}

// ---- readers: what the fuzzers found, and docs/reliability.md's table -----------------------

TEST_CASE("reliability: op trace counts that overflow int64 are a JsonError", "[reliability]") {
  // Found by fuzz_op_trace: the counts' sum overflowed (signed overflow, undefined behaviour).
  CHECK_THROWS_WITH(optrace::OpTrace::from_json(regression("op_trace", "count-sum-overflow.json")),
                    "optrace: JsonError at /a.default/unique_inputs/1/count: the counts add up to more than "
                    "9223372036854775807 calls");
  const std::string op = R"({"total_calls": 9223372036854775807, "unique_input_count": 0, "unique_inputs": []})";
  CHECK_THROWS_WITH(optrace::OpTrace::from_json("{\"a\": " + op + ", \"b\": " + op + "}"),
                    "optrace: JsonError at /b/total_calls: the trace's calls add up to more than 9223372036854775807");
  // Merging two such traces is refused the same way, as an ArgumentError.
  optrace::OpTrace big = optrace::OpTrace::from_json("{\"a\": " + op + "}");
  CHECK_THROWS_WITH(optrace::OpTrace(big).merge(big),
                    "optrace: ArgumentError: OpTrace::add('a'): the trace's calls would add up to more than 9223372036854775807");
  CHECK_THROWS_AS(optrace::OpTrace().add_dropped("a", -1), optrace::ArgumentError);
}

TEST_CASE("reliability: a Kineto list malformed inside is a JsonError", "[reliability]") {
  // Found by fuzz_kineto: the importer read the On-Demand value a second time after failing to
  // take its text, which broke simdjson's invariants (UBSan: unreachable program point).
  // Its op ("a") is no dispatcher op: its args are skipped unread, the error found skipping them.
  CHECK_THROWS_WITH(optrace::kineto::parse(regression("kineto", "malformed-list-read-twice.json")),
                    "optrace: JsonError at /traceEvents/0: malformed JSON: The JSON document has an "
                    "improper structure: missing or superfluous commas, braces, missing keys, etc.");
  // An op's args are read: the error names the list.
  CHECK_THROWS_WITH(optrace::kineto::parse(R"({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::add","args":{"Concrete Inputs":[})"),
                    "optrace: JsonError at /traceEvents/0/args/Concrete Inputs: malformed JSON: The JSON document has an "
                    "improper structure: missing or superfluous commas, braces, missing keys, etc.");
}

TEST_CASE("reliability: Kineto times and counts beyond int64 are a JsonError", "[reliability]") {
  // Found by fuzz_kineto: "ts" in microseconds times 1000 overflowed (undefined behaviour).
  CHECK_THROWS_WITH(optrace::kineto::parse(regression("kineto", "time-overflow.json")),
                    "optrace: JsonError at /traceEvents/0/ts: expected a time in microseconds, got number 70999999999999999");
  CHECK_THROWS_WITH(optrace::kineto::parse(R"([{"ph": "X", "cat": "cpu_op", "name": "aten::neg", "ts": 9000000000000000, "dur": 300000000000000}])"),
                    "optrace: JsonError at /0/dur: ts + dur is beyond int64 nanoseconds (ts 9000000000000000, dur 300000000000000)");
  CHECK_THROWS_WITH(optrace::kineto::parse(R"([{"ph": "X", "cat": "cpu_op", "name": "aten::neg", "ts": 1e300, "dur": 1}])"),
                    "optrace: JsonError at /0/ts: expected a time in microseconds, got number 1e300");
  // optrace's own exports carry counts: their sum must fit int64, as in the op-trace reader.
  CHECK_THROWS_WITH(optrace::kineto::parse(regression("kineto", "count-sum-overflow.json")),
                    "optrace: JsonError at /traceEvents/1/args/count: the events' counts add up to more than 9223372036854775807 calls");
}

TEST_CASE("reliability: shapes whose strides overflow int64 import and export", "[reliability]") {
  // Found while probing: exporting a trace with such a shape overflowed computing its strides.
  auto r = optrace::kineto::parse(regression("kineto", "huge-sizes-export.json"));
  REQUIRE(r.trace.total_calls() == 1);
  std::string exported = optrace::kineto::to_json(r.trace);
  CHECK_THAT(exported, OPTRACE_CONTAINS("\"Input Strides\": [[4611686018427387904, 1]]"));
  CHECK(optrace::kineto::parse(exported).trace.total_calls() == 1);
  optrace::TensorSpec spec;
  spec.sizes = {int64_t{1} << 62, 4, 0};
  CHECK(spec.numel() == 0);
  spec.sizes = {int64_t{1} << 62, 4};
  CHECK(spec.numel() == INT64_MAX);
  CHECK(optrace::TensorSpec::contiguous_strides(spec.sizes) == std::vector<int64_t>{4, 1});
  spec.sizes = {4, int64_t{1} << 62, 4};
  CHECK(optrace::TensorSpec::contiguous_strides(spec.sizes) == std::vector<int64_t>{INT64_MAX, 4, 1});
}

TEST_CASE("reliability: deeply nested input is a JsonError in every reader", "[reliability]") {
  const std::string deep = nested_arrays(100000);
  const std::string too_deep = "optrace: JsonError at /: malformed JSON: The JSON document was too deep (too many nested objects and arrays)";
  CHECK(answer([&] { optrace::OpTrace::from_json(deep); }) == too_deep);
  CHECK(answer([&] { optrace::Observations::from_json(deep); }) == too_deep);
  CHECK_THAT(answer([&] { optrace::kineto::parse(deep); }), OPTRACE_CONTAINS("optrace: JsonError at /"));
  // Within simdjson's depth limit (1024), values nest at most json::kMaxValueDepth deep (reading
  // them is recursive: a deeper bound would exhaust a small thread stack, or an ASan-sized frame).
  auto trace_with_value = [](size_t depth) {
    return std::string("{\"a.default\": {\"total_calls\": 1, \"unique_input_count\": 1, \"unique_inputs\": [") +
           "{\"op_name\": \"a.default\", \"input_shapes\": [null], \"input_dtypes\": [\"<class 'list'>\"], " +
           "\"non_tensor_inputs\": [" + nested_arrays(depth) + "], \"tensor_lists\": {}, \"count\": 1}]}}";
  };
  CHECK(optrace::OpTrace::from_json(trace_with_value(optrace::json::kMaxValueDepth)).total_calls() == 1);
  CHECK_THAT(answer([&] { optrace::OpTrace::from_json(trace_with_value(1000)); }),
             OPTRACE_CONTAINS("at /a.default/unique_inputs/0/non_tensor_inputs/0/0/0/") &&
                 OPTRACE_CONTAINS("expected lists nested at most 128 deep"));
  // An observation file's value trees: 400 levels of {"list": [...]} in a stored call.
  std::string deep_call = "null";
  for (int i = 0; i < 400; ++i) deep_call = "{\"list\": [" + deep_call + "]}";
  std::string observations = optrace::detail::read_file(optrace_test::data_path("observations/masked.json"));
  const size_t stored = observations.find("\"stored\": [");
  REQUIRE(stored != std::string::npos);
  observations.insert(stored + 11, "{\"dict\": {\"x\": " + deep_call + "}}, ");
  CHECK_THAT(answer([&] { optrace::Observations::from_json(observations); }),
             OPTRACE_CONTAINS("at /stored/0/dict/x/list/0/list/0/") && OPTRACE_CONTAINS("expected values nested at most 128 deep"));
}

TEST_CASE("reliability: every kept fuzz regression input is an optrace error or reads", "[reliability]") {
  for (const std::string& path : regressions("op_trace")) {
    INFO(path);
    std::string text = read_text(path);
    CHECK_NOTHROW(answer([&] { optrace::OpTrace::from_json(text); }));
  }
  for (const std::string& path : regressions("observations")) {
    INFO(path);
    std::string text = read_text(path);
    CHECK_NOTHROW(answer([&] {
      auto obs = optrace::Observations::from_json(text);
      answer([&] { obs.infer_dynamic_shapes().to_json(); });
      answer([&] { obs.infer_arguments(); });
    }));
  }
  for (const std::string& path : regressions("kineto")) {
    INFO(path);
    std::string text = read_text(path);
    CHECK_NOTHROW(answer([&] { optrace::kineto::parse(text).trace.to_json(); }));
  }
  for (const std::string& path : regressions("execution_trace")) {
    INFO(path);
    CHECK_NOTHROW(answer([&] { optrace::kineto::load_any(path).trace.to_json(); }));
  }
  for (const std::string& path : regressions("key_averages")) {
    INFO(path);
    std::string text = read_text(path);
    for (optrace::GroupBy group_by : {optrace::GroupBy::Name, optrace::GroupBy::InputShape})
      CHECK_NOTHROW(answer([&] { optrace::KeyAverages::from_kineto_text(text, group_by).table("", -1); }));
  }
  for (const std::string& path : regressions("rank_summary")) {
    INFO(path);
    CHECK_NOTHROW(answer([&] {
      const optrace::RankTrace trace = optrace::RankTrace::from_kineto_file(path);
      optrace::RankTrace other = trace;
      other.rank = trace.rank + 1;
      (void)optrace::RankSummary::from_ranks({trace, other}).table();
    }));
  }
  {
    // Each is the plan.json of a folder planted as fuzz_plan_folder plants it; each names a file
    // outside the folder, through a link or a path.
    const std::string base = optrace_test::temp_path("reliability_plan_folder");
    optrace::detail::remove_tree(base);
    const std::string dir = base + "/plan", outside = base + "/outside";
    std::filesystem::create_directories(outside);
    const std::string masked = read_text(optrace_test::data_path("observations/masked.json"));
    optrace::Plan::from_observations({optrace::Observations::from_json(masked)}).save(dir);
    std::ofstream(outside + "/o.json") << masked;
    std::filesystem::create_directory_symlink(outside, dir + "/linked");
    std::filesystem::create_symlink(outside + "/o.json", dir + "/link.json");
    for (const std::string& path : regressions("plan_folder")) {
      INFO(path);
      std::filesystem::copy_file(path, dir + "/plan.json", std::filesystem::copy_options::overwrite_existing);
      CHECK_THAT(answer([&] { optrace::Plan::load(dir); }),
                 OPTRACE_CONTAINS("is a symbolic link") || OPTRACE_CONTAINS("is not a file name inside the plan's folder"));
    }
    optrace::detail::remove_tree(base);
  }
  for (const std::string& path : regressions("operator_inputs")) {
    INFO(path);
    std::string text = read_text(path);
    CHECK_NOTHROW(answer([&] { optrace::operator_inputs::to_text(optrace::operator_inputs::parse(text, path).trace); }));
  }
  for (const std::string& path : regressions("on_demand_config")) {
    INFO(path);
    std::string text = read_text(path);
    CHECK_NOTHROW(answer([&] {
      const optrace::OnDemandRequest r = optrace::OnDemandRequest::parse(text);
      if (!r.log_file.empty()) optrace::detail::on_demand::resolve_inside("/nonexistent-optrace-fuzz/traces", r.log_file);
    }));
  }
  for (const std::string& path : regressions("zip")) {
    INFO(path);
    std::string bytes = read_text(path);
    CHECK_NOTHROW(answer([&] { optrace::detail::aoti::zip_names_in(bytes); }));
  }
  // The command line's (argument lists) are replayed by fuzz_replay_cli; here, that they are kept.
  CHECK(!regressions("cli").empty());
}

TEST_CASE("reliability: the kept regressions answer as they did when found", "[reliability]") {
  CHECK_THAT(answer([&] { optrace::Observations::from_json(regression("observations", "values-nested-400-deep.json")); }),
             OPTRACE_CONTAINS("expected values nested at most 128 deep"));
  CHECK_THAT(answer([&] { optrace::operator_inputs::parse(regression("operator_inputs", "dim-beyond-int64.txt"), "log.txt"); }),
             OPTRACE_CONTAINS("TextError at log.txt:2:14: expected an integer that fits 64 bits"));
  CHECK_THAT(answer([&] { optrace::operator_inputs::parse(regression("operator_inputs", "count-sum-overflow.txt"), "log.txt"); }),
             OPTRACE_CONTAINS("expected counts that add up to at most 2^63-1"));
  CHECK_THAT(answer([&] { optrace::KeyAverages::from_kineto_text(regression("key_averages", "time-overflow.json"), optrace::GroupBy::Name); }),
             OPTRACE_CONTAINS("JsonError at /traceEvents/0/ts: expected a time in microseconds"));
  // Times 18e12 us apart: each fits int64 nanoseconds, their span does not (measured from the first).
  const optrace::KeyAverages span =
      optrace::KeyAverages::from_kineto_text(regression("key_averages", "times-span-beyond-int64.json"), optrace::GroupBy::Name);
  CHECK(span.rows().size() == 2);
}

// ---- load ----------------------------------------------------------------------------------

TEST_CASE("reliability: 8 threads' calls through one InputObserver give exact counts", "[reliability][stress]") {
  constexpr int kThreads = 8, kCalls = optrace_test::kSanitized ? 25000 : 100000;
  auto fn = [](const torch::Tensor& x, int64_t k) { return x.size(0) + k; };
  optrace::InputObserver<decltype(fn)> observer(fn, optrace::ObserverOptions().store_n_calls(3));
  std::vector<torch::Tensor> inputs;
  for (int t = 0; t < kThreads; ++t) inputs.push_back(torch::ones({t + 1, 4}));
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      // Two signatures per thread: its own shape, and a shape every thread shares.
      for (int k = 0; k < kCalls; ++k) observer(k % 4 == 0 ? inputs[0] : inputs[t], int64_t{7});
    });
  go = true;
  for (auto& th : threads) th.join();
  CHECK(observer.num_calls() == int64_t{kThreads} * kCalls);
  CHECK(observer.num_obs() == 3);
  auto history = observer.history();
  REQUIRE(history.size() == kThreads);
  int64_t total = 0;
  for (const auto& [signature, count] : history) {
    int64_t rows = signature.items[0].spec.sizes[0];
    // Thread 0 makes all its calls with inputs[0]; every other thread a quarter of its calls.
    int64_t expected = rows == 1 ? kCalls + (kThreads - 1) * (kCalls / 4) : kCalls - kCalls / 4;
    CHECK(count == expected);
    total += count;
  }
  CHECK(total == int64_t{kThreads} * kCalls);
  CHECK(observer.infer_dynamic_shapes().to_python() == "({0: Dim.AUTO}, None)");
}

TEST_CASE("reliability: 8 threads' calls past max_signatures give exact counts", "[reliability][stress]") {
  constexpr int kThreads = 8, kCalls = optrace_test::kSanitized ? 25000 : 100000;
  auto fn = [](const torch::Tensor& x) { return x.size(0); };
  optrace::InputObserver<decltype(fn)> observer(fn, optrace::ObserverOptions().max_signatures(5).store_n_calls(1));
  std::vector<torch::Tensor> inputs;
  for (int n = 1; n <= 64; ++n) inputs.push_back(torch::ones({n}));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < kCalls; ++k) observer(inputs[(k + t) % 64]);
    });
  for (auto& th : threads) th.join();
  CHECK(observer.num_calls() == int64_t{kThreads} * kCalls);
  auto history = observer.history();
  CHECK(history.size() == 5);  // the bound holds; the other calls count for ranges only
  auto ds = observer.infer_dynamic_shapes();
  CHECK(ds[0].dims[0].min == 1);
  CHECK(ds[0].dims[0].max == 64);
}

TEST_CASE("reliability: 8 threads' ops under one OpTracer give exact counts", "[reliability][stress]") {
  constexpr int kThreads = 8, kCalls = optrace_test::kSanitized ? 25000 : 100000;
  std::vector<torch::Tensor> own;
  for (int t = 0; t < kThreads; ++t) own.push_back(torch::ones({t + 1}));
  torch::Tensor shared = torch::ones({2, 2});
  optrace::OpTracer tracer;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ++ready;
      while (!go.load()) std::this_thread::yield();
      for (int k = 0; k < kCalls; ++k) {
        if (k % 2 == 0) at::neg(own[t]);
        else at::neg(shared);
      }
    });
  while (ready.load() < kThreads) std::this_thread::yield();
  tracer.start();
  go = true;
  for (auto& th : threads) th.join();
  tracer.stop();
  optrace::OpTrace trace = tracer.trace();
  CHECK(trace.op_names() == std::vector<std::string>{"neg.default"});
  CHECK(trace.total_calls() == int64_t{kThreads} * kCalls);
  const optrace::OpEntry* neg = trace.find("neg.default");
  REQUIRE(neg != nullptr);
  CHECK(neg->dropped_calls == 0);
  REQUIRE(neg->unique_inputs.size() == kThreads + 1);
  for (const optrace::OpInput& in : neg->unique_inputs) {
    bool is_shared = in.input_shapes[0]->size() == 2;
    CHECK(in.count == (is_shared ? int64_t{kThreads} * kCalls / 2 : kCalls / 2));
  }
  // The saved trace reads back with the same counts.
  CHECK(optrace::OpTrace::from_json(trace.to_json()).total_calls() == trace.total_calls());
}

namespace {
int64_t rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  return 0;
}
}  // namespace

TEST_CASE("reliability: a long-running tracer stays within its bound on unique inputs", "[reliability][stress]") {
  constexpr int64_t kBound = 100;
  optrace::OpTracer tracer(optrace::OpTracerOptions().max_unique_inputs(kBound));
  std::vector<torch::Tensor> xs;
  for (int n = 1; n <= 2000; ++n) xs.push_back(torch::ones({n}));
  tracer.start();
  auto run = [&](int rounds) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int r = 0; r < rounds; ++r)
          for (size_t i = t; i < xs.size(); i += 4) at::neg(xs[i]);  // 2000 distinct inputs per round
      });
    for (auto& th : threads) th.join();
  };
  run(5);  // past the bound: the tracer's tables are as big as they get
  int64_t before = rss_kib();
  run(50);
  int64_t after = rss_kib();
  tracer.stop();
  optrace::OpTrace trace = tracer.trace();
  CHECK(trace.unique_input_count() == kBound);
  CHECK(trace.total_calls("neg.default") == 55 * 2000);
  CHECK(trace.dropped_calls() == 55 * 2000 - [&] {
    int64_t kept = 0;
    for (const auto& in : trace.find("neg.default")->unique_inputs) kept += in.count;
    return kept;
  }());
  // 100000 more calls with 1900 inputs it cannot keep: memory does not grow with them.
  INFO("RSS before " << before << " KiB, after " << after << " KiB");
  if (OPTRACE_TEST_ASAN)
    WARN("RSS not compared under AddressSanitizer (its quarantine keeps freed tensors); LeakSanitizer checks leaks");
  else
    CHECK(after - before < 16 * 1024);
}

// ---- atomic writes -------------------------------------------------------------------------

namespace {

// Forks a child that saves `a` and `b` to `path` in turn, forever, with `save(which)`; kills it
// (SIGKILL) `rounds` times, half after a random delay, half as soon as its temporary file exists. Each time, the file must hold exactly one of the
// two complete documents (and `parse` must accept it). Returns how many kills came while a
// temporary file was being written (so mid-write), and removes the temporary files the killed
// children left (named `<path>.tmp.<pid>`, never read by optrace).
int kill_while_saving(const std::string& path, const std::function<void(int)>& save, const std::string& a,
                      const std::string& b, const std::function<void(const std::string&)>& parse, int rounds) {
  std::remove(path.c_str());
  save(0);
  REQUIRE(read_text(path) == a);
  std::mt19937 rng(42);
  auto t0 = std::chrono::steady_clock::now();
  save(1);
  save(0);
  auto per_save = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count() / 2;
  std::uniform_int_distribution<int64_t> delay(0, 3 * per_save + 1000);
  int mid_write = 0;
  for (int round = 0; round < rounds; ++round) {
    // The child says when it starts saving, so that the random delay counts from there and not
    // from fork (which a loaded machine, or ASan, can make longer than a save).
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      close(ready[0]);
      char go = 1;
      if (write(ready[1], &go, 1) != 1) _exit(1);
      close(ready[1]);
      for (int k = 1;; ++k) save(k % 2);  // never returns: killed
    }
    close(ready[1]);
    char go = 0;
    REQUIRE(read(ready[0], &go, 1) == 1);
    close(ready[0]);
    // The child's temporary file: `path.tmp.<pid>.<random>` (detail::temporary_name).
    auto child_tmp = [&, prefix = std::filesystem::path(path).filename().string() + ".tmp." + std::to_string(child) + "."] {
      for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
        if (e.path().filename().string().rfind(prefix, 0) == 0) return e.path().string();
      return std::string();
    };
    if (round % 2 == 0) {
      // At a random moment: between saves, while formatting, writing or renaming.
      std::this_thread::sleep_for(std::chrono::microseconds(delay(rng)));
    } else {
      // While the temporary file is being written: the moment a non-atomic save would leave a
      // truncated file. (Formatting can take most of a save, under ASan nearly all of it, so
      // random moments alone may never land here.)
      auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (child_tmp().empty() && std::chrono::steady_clock::now() < give_up) {
      }
    }
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    if (const std::string tmp = child_tmp(); !tmp.empty()) {
      ++mid_write;
      std::remove(tmp.c_str());
    }
    std::string text = read_text(path);
    INFO("round " << round << ": " << text.size() << " bytes on disk; documents are " << a.size() << " and " << b.size());
    REQUIRE((text == a || text == b));
    parse(text);
  }
  return mid_write;
}

}  // namespace

TEST_CASE("reliability: a process killed while saving an op trace leaves a complete file", "[reliability]") {
  optrace::OpTrace docs[2];
  for (int v = 0; v < 2; ++v)
    for (int64_t i = 0; i < 5000; ++i) {
      optrace::OpInput in;
      in.input_shapes = {std::vector<int64_t>{i, 3 + v}, std::nullopt};
      in.input_dtypes = {"torch.float32", "<class 'float'>"};
      in.non_tensor_inputs = {optrace::OpValue(), optrace::OpValue::floating(0.5 * v)};
      in.count = 1 + i % 7;
      docs[v].add(v == 0 ? "add.Tensor" : "mul.Tensor", in);
    }
  const std::string path = optrace_test::temp_path("killed_save.hf_op_trace.json");
  const std::string a = docs[0].to_json(), b = docs[1].to_json();
  int mid_write = kill_while_saving(
      path, [&](int which) { docs[which].save(path); }, a, b,
      [&](const std::string& text) { CHECK(optrace::OpTrace::from_json(text).total_calls() > 0); }, 60);
  INFO(mid_write << " of 60 kills came mid-write");
  CHECK(mid_write >= 60 / 4);  // the waiting half lands mid-write nearly always
  std::remove(path.c_str());
}

TEST_CASE("reliability: a process killed while saving an observation file leaves a complete file", "[reliability]") {
  // Two observers with several thousand distinct call signatures each: a large history.
  auto fn = [](const torch::Tensor& x) { return x.size(0); };
  std::vector<optrace::Observations> docs;
  for (int v = 0; v < 2; ++v) {
    optrace::InputObserver<decltype(fn)> observer(fn, optrace::ObserverOptions().store_n_calls(1));
    for (int n = 1; n <= 1000; ++n) observer(torch::empty({n, 2 + v}));
    std::string tmp = optrace_test::temp_path("killed_save_seed.json");
    observer.save(tmp);
    // Loading is linear in the file's size: it was quadratic (every tensor's dtype, device and
    // layout worked out their JSON path, walking the document), 15 s for this 2 MB file.
    docs.push_back(optrace::load_observations(tmp));
    std::remove(tmp.c_str());
  }
  const std::string path = optrace_test::temp_path("killed_save.observations.json");
  const std::string a = docs[0].to_json() + "\n", b = docs[1].to_json() + "\n";
  int mid_write = kill_while_saving(
      path, [&](int which) { docs[which].save(path); }, a, b,
      [&](const std::string& text) { CHECK(optrace::Observations::from_json(text).num_calls() == 1000); }, 40);
  INFO(mid_write << " of 40 kills came mid-write");
  CHECK(mid_write >= 40 / 4);  // the waiting half lands mid-write nearly always
  std::remove(path.c_str());
}

// ---- replay and materialization under faults ------------------------------------------------

namespace {
std::string one_input_op(const std::string& op, const std::string& shapes, const std::string& dtypes, const std::string& values) {
  return "\"" + op + "\": {\"total_calls\": 1, \"unique_input_count\": 1, \"unique_inputs\": [{\"op_name\": \"" + op +
         "\", \"input_shapes\": " + shapes + ", \"input_dtypes\": " + dtypes + ", \"non_tensor_inputs\": " + values +
         ", \"tensor_lists\": {}, \"count\": 1}]}";
}
}  // namespace

TEST_CASE("reliability: replay reports an op that runs out of memory and goes on", "[reliability]") {
  // empty() of 2^48 floats (1 PiB): no input tensor, so nothing over the budget before the call;
  // the op's own allocation fails (c10's DefaultCPUAllocator error), it is reported, the replay goes on.
  const optrace::OpTrace trace = optrace::OpTrace::from_json(
      "{" + one_input_op("empty.memory_format", "[null]", R"(["<class 'list'>"])", "[[281474976710656]]") + ", " +
      one_input_op("relu.default", "[[2, 3]]", R"(["torch.float32"])", "[null]") + "}");
  const optrace::ReplayReport report = optrace::replay(trace, optrace::ReplayOptions().device(c10::kCPU).progress(false));
  REQUIRE(report.results.size() == 2);
  const optrace::ReplayResult& oom = report.results[0];
  INFO(oom.message);
  CHECK(oom.op == "empty.memory_format");
  CHECK(oom.status == optrace::ReplayStatus::error);
  CHECK_THAT(oom.message, OPTRACE_CONTAINS("you tried to allocate 1125899906842624 bytes"));
  CHECK(oom.message.find('\n') == std::string::npos);
  CHECK(report.results[1].status == optrace::ReplayStatus::ok);
}

TEST_CASE("reliability: replay skips inputs over the memory budget before allocating", "[reliability]") {
  // 2^20 x 2^20 floats (4 TiB): skipped as over the budget; 2^62 x 2^62 (bytes beyond int64): an
  // error naming the overflow. Neither is allocated; the next input runs.
  const optrace::OpTrace trace = optrace::OpTrace::from_json(
      "{" + one_input_op("neg.default", "[[1048576, 1048576]]", R"(["torch.float32"])", "[null]") + ", " +
      one_input_op("relu.default", "[[4611686018427387904, 4611686018427387904]]", R"(["torch.float32"])", "[null]") + ", " +
      one_input_op("sigmoid.default", "[[2, 3]]", R"(["torch.float32"])", "[null]") + "}");
  for (optrace::ReplayMode mode : {optrace::ReplayMode::run, optrace::ReplayMode::check}) {
    const optrace::ReplayReport report =
        optrace::replay(trace, optrace::ReplayOptions().device(c10::kCPU).mode(mode).progress(false));
    REQUIRE(report.results.size() == 3);
    INFO(report.results[0].message);
    CHECK(report.results[0].status == optrace::ReplayStatus::skipped);
    CHECK_THAT(report.results[0].message, OPTRACE_CONTAINS("over the memory budget of 4"));
    CHECK(report.results[1].status == optrace::ReplayStatus::error);
    CHECK(report.results[1].message ==
          "ShapeError: tensor (Float [4611686018427387904, 4611686018427387904]): storage extent overflows int64");
    CHECK(report.results[2].status == optrace::ReplayStatus::ok);
  }
}

TEST_CASE("reliability: materializing an observation file refuses sizes over the budget before allocating", "[reliability]") {
  // Observed on meta (no memory): a 2^20 x 2^20 float input, 4 TiB on any real device.
  auto fn = [](const torch::Tensor& x) { return x.size(0); };
  optrace::InputObserver<decltype(fn)> observer(fn);
  observer(torch::empty({int64_t{1} << 20, int64_t{1} << 20}, torch::TensorOptions().device(c10::kMeta)));
  const std::string path = optrace_test::temp_path("huge.observations.json");
  observer.save(path);
  const optrace::Observations obs = optrace::load_observations(path);
  CHECK(obs.infer_arguments().args.at(0).toTensor().sizes() == c10::IntArrayRef({int64_t{1} << 20, int64_t{1} << 20}));
  CHECK_THROWS_AS(obs.materialize(optrace::MaterializeOptions().device(c10::kCPU)), optrace::MaterializeError);
  CHECK_THROWS_WITH(obs.materialize(optrace::MaterializeOptions().device(c10::kCPU)), OPTRACE_CONTAINS("over the memory budget"));
  std::remove(path.c_str());
}
