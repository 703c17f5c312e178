// Tests for optrace/profiler.hpp: schedules as torch.profiler's, true timings, the Kineto trace
// read back by optrace's importer and by torch's and HTA's readers (tests/python/).
#include <optrace/detail/common/io.hpp>
#include <optrace/kineto.hpp>
#include <optrace/op_tracer.hpp>
#include <optrace/profiler.hpp>

#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

#include <sys/wait.h>

#include "optrace_catch.hpp"

namespace profiler_test {

using optrace::json::Node;

// A small TorchScript model: convolution, pooling, linear layers, softmax.
constexpr const char* kModel = R"(
def forward(x: Tensor, w: Tensor, b: Tensor, fc: Tensor):
    y = torch.conv2d(x, w, b, [1, 1], [1, 1])
    y = torch.relu(y)
    y = torch.max_pool2d(y, [2, 2])
    z = torch.flatten(y, 1)
    z = torch.matmul(z, fc.t())
    return torch.softmax(z, -1)
)";

struct Model {
  std::shared_ptr<torch::jit::CompilationUnit> cu = torch::jit::compile(kModel);
  std::vector<c10::IValue> inputs{torch::randn({2, 3, 16, 16}), torch::randn({8, 3, 3, 3}), torch::randn({8}),
                                  torch::randn({10, 8 * 8 * 8})};
  void operator()() {
    torch::NoGradGuard no_grad;
    cu->get_function("forward")(inputs);
  }
};

struct Parsed {
  std::unique_ptr<optrace::json::Document> doc;
  Node events() const { return doc->root()["traceEvents"]; }
};

Parsed parse(const std::string& text) { return Parsed{optrace::json::Document::parse(text)}; }

// Compact JSON of a value made of lists, integers and strings.
std::string text_of(Node v) {
  if (v.is_array()) {
    std::string s = "[";
    for (Node item : v.array()) s += (s.size() > 1 ? "," : "") + text_of(item);
    return s + "]";
  }
  if (v.is_string()) return "\"" + std::string(v.as_string()) + "\"";
  return std::to_string(v.as_int());
}

// The names of the "ProfilerStep#N" ranges of a trace, in order.
std::vector<std::string> profiler_steps(const std::string& trace_json) {
  Parsed p = parse(trace_json);
  std::vector<std::string> steps;
  for (Node e : p.events().array()) {
    Node name(e);
    if (e.find("name", name) && name.is_string() && name.as_string().rfind("ProfilerStep#", 0) == 0)
      steps.push_back(std::string(name.as_string()));
  }
  return steps;
}

std::string temp_dir(const std::string& name) {
  std::string dir = optrace_test::temp_path(name);
  optrace::detail::remove_tree(dir);
  return dir;
}

using optrace_test::python_torch_available;

// Runs a Python script of tests/python/ with `args`: its exit status and output (stdout and stderr).
struct ScriptRun {
  int status = -1;
  std::string out;
  std::string first_line() const { return out.substr(0, out.find('\n')); }
};
ScriptRun run_script(const std::string& script, const std::string& args) {
  const std::string cmd = std::string(OPTRACE_PYTHON) + " " + OPTRACE_SOURCE_DIR + "/tests/python/" + script + " " + args + " 2>&1";
  ScriptRun run;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[512];
  while (p && fgets(buf, sizeof buf, p)) run.out += buf;
  const int rc = p ? pclose(p) : -1;
  run.status = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return run;
}

TEST_CASE("profiler: a schedule's actions are torch.profiler.schedule's", "[profiler][python]") {
  if (!python_torch_available()) OPTRACE_SKIP("python3-torch is not installed");
  // wait, warmup, active, repeat, skip_first
  const std::vector<std::array<int64_t, 5>> grid = {{1, 1, 3, 1, 0}, {0, 0, 1, 0, 0}, {2, 1, 2, 2, 1},
                                                    {0, 2, 3, 0, 3}, {1, 0, 1, 3, 0}, {3, 2, 1, 1, 2}};
  std::string args = "20";
  for (const auto& g : grid)
    for (int64_t v : g) args += " " + std::to_string(v);
  const ScriptRun run = run_script("profiler_schedule.py", args);
  INFO(run.out);
  REQUIRE(run.status == 0);
  std::istringstream lines(run.out);
  for (const auto& g : grid) {
    optrace::Schedule s = optrace::Schedule().wait(g[0]).warmup(g[1]).active(g[2]).repeat(g[3]).skip_first(g[4]);
    std::string expected, got;
    REQUIRE(std::getline(lines, expected));
    const char* names[] = {"NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE"};
    for (int64_t step = 0; step < 20; ++step) got += std::string(step > 0 ? " " : "") + names[static_cast<int>(s(step))];
    INFO("wait=" << g[0] << " warmup=" << g[1] << " active=" << g[2] << " repeat=" << g[3] << " skip_first=" << g[4]);
    CHECK(got == expected);
  }
}

TEST_CASE("profiler: steps, windows and traces as torch.profiler's", "[profiler]") {
  Model model;
  std::vector<std::vector<std::string>> traces;
  {
    optrace::Profiler prof(optrace::ProfilerOptions()
                               .schedule(optrace::Schedule().wait(1).warmup(1).active(3).repeat(2))
                               .on_trace_ready([&traces](const optrace::ProfilerTrace& t) {
                                 traces.push_back(profiler_steps(t.to_json()));
                               }));
    for (int i = 0; i < 12; ++i) {
      model();
      prof.step();
    }
    CHECK(prof.step_num() == 12);
    prof.stop();
  }
  // torch.profiler with the same schedule: steps 2-4 and 7-9 recorded, each cycle one trace.
  REQUIRE(traces.size() == 2);
  CHECK(traces[0] == std::vector<std::string>{"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"});
  CHECK(traces[1] == std::vector<std::string>{"ProfilerStep#7", "ProfilerStep#8", "ProfilerStep#9"});

  // Without a schedule: one trace from construction to stop, no ProfilerStep ranges.
  optrace::Profiler plain;
  model();
  plain.stop();
  REQUIRE(plain.last_trace() != nullptr);
  CHECK(profiler_steps(plain.last_trace()->to_json()).empty());
  CHECK(plain.last_trace()->num_events() > 5);
  // save() streams the text into the file: the same bytes as to_json.
  const std::string saved = optrace_test::temp_path("profiler_plain.pt.trace.json");
  plain.last_trace()->save(saved);
  CHECK(optrace::detail::read_file(saved) == plain.last_trace()->to_json(saved));

  // stop() in the middle of the active steps hands over what was recorded.
  int ready = 0;
  optrace::Profiler early(optrace::ProfilerOptions()
                              .schedule(optrace::Schedule().wait(0).warmup(0).active(5))
                              .on_trace_ready([&ready](const optrace::ProfilerTrace&) { ++ready; }));
  model();
  early.step();
  model();
  early.stop();
  CHECK(ready == 1);
  CHECK(profiler_steps(early.last_trace()->to_json()) == std::vector<std::string>{"ProfilerStep#0", "ProfilerStep#1"});
}

TEST_CASE("profiler: the step ranges add up to the wall time and every op lies within its step", "[profiler]") {
  Model model;
  using Clock = std::chrono::steady_clock;
  // Clock readings on both sides of each step() call: the steps lie between the readings around
  // the call that opens the first active step and around the call that closes the last, whatever
  // the scheduler does inside step() on a busy machine.
  std::vector<std::pair<Clock::time_point, Clock::time_point>> around_step;
  optrace::Profiler prof(optrace::ProfilerOptions()
                             .schedule(optrace::Schedule().wait(1).warmup(1).active(3).repeat(1))
                             .record_shapes(true));
  for (int i = 0; i < 6; ++i) {
    for (int k = 0; k < 5; ++k) model();
    const Clock::time_point before = Clock::now();
    prof.step();
    around_step.emplace_back(before, Clock::now());
  }
  prof.stop();
  const auto us = [](Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
  // ProfilerStep#2 opens in step() number 1 and ProfilerStep#4 closes in step() number 4.
  const double inner_us = us(around_step[4].first - around_step[1].second);
  const double outer_us = us(around_step[4].second - around_step[1].first);
  const double between_steps_us = us(around_step[2].second - around_step[2].first) +
                                  us(around_step[3].second - around_step[3].first);
  Parsed p = parse(prof.last_trace()->to_json());
  struct Span {
    double start, end;
  };
  std::vector<Span> steps;
  std::vector<std::pair<std::string, Span>> ops;
  for (Node e : p.events().array()) {
    Node ph(e);
    if (!e.find("ph", ph) || ph.as_string() != "X") continue;
    const std::string name(e["name"].as_string());
    Span s{e["ts"].as_double(), e["ts"].as_double() + e["dur"].as_double()};
    CHECK(e["dur"].as_double() >= 0);
    if (name.rfind("ProfilerStep#", 0) == 0) steps.push_back(s);
    else ops.emplace_back(name, s);
  }
  REQUIRE(steps.size() == 3);
  std::sort(steps.begin(), steps.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  const double span = steps.back().end - steps.front().start;
  double sum = 0;
  for (const Span& s : steps) sum += s.end - s.start;
  INFO("steps " << sum << " us over " << span << " us; measured between " << inner_us << " and " << outer_us
                << " us, " << between_steps_us << " us of it in the step() calls between steps");
  // 1% and 20 us for the two clocks' readings.
  CHECK(span >= inner_us * 0.99 - 20);
  CHECK(span <= outer_us * 1.01 + 20);
  // The steps follow one another: what is not in a step was spent in a step() call.
  for (size_t k = 1; k < steps.size(); ++k) CHECK(steps[k].start >= steps[k - 1].end - 1);
  CHECK(sum >= span - between_steps_us * 1.01 - 20);
  REQUIRE(ops.size() > 30);
  for (const auto& [name, s] : ops) {
    bool within = false;
    for (const Span& step : steps) within = within || (s.start >= step.start && s.end <= step.end);
    INFO(name);
    CHECK(within);
  }
  // Self times: never negative, never above the op's own duration.
  const optrace::KeyAverages averages = prof.key_averages();
  for (const optrace::KeyAverage& row : averages.rows()) {
    INFO(row.name);
    CHECK(row.self_cpu_us >= 0);
    CHECK(row.self_cpu_us <= row.cpu_total_us + 1e-6);
  }
}

TEST_CASE("profiler: the trace imported equals OpTracer's trace of the same calls, and so does op_trace()",
          "[profiler]") {
  Model model;
  torch::jit::setGraphExecutorOptimize(false);
  optrace::OpTracer tracer;
  tracer.start();
  for (int i = 0; i < 3; ++i) model();
  tracer.stop();
  optrace::Profiler prof(optrace::ProfilerOptions().record_shapes(true));
  for (int i = 0; i < 3; ++i) model();
  prof.stop();
  torch::jit::setGraphExecutorOptimize(true);
  const std::string expected = tracer.trace().to_json();
  CHECK(prof.op_trace().to_json() == expected);
  optrace::kineto::ImportResult imported = optrace::kineto::parse(prof.last_trace()->to_json());
  INFO(imported.report.to_string());
  CHECK(imported.trace.to_json() == expected);
}

TEST_CASE("profiler: inputs, ids and autograd pairs as torch.profiler writes them", "[profiler]") {
  optrace::Profiler prof(optrace::ProfilerOptions().record_shapes(true));
  auto w = torch::randn({4, 3}, torch::requires_grad());
  auto x = torch::randn({2, 3});
  auto y = torch::addmm(torch::zeros({4}), x, w.t(), 1, 2);
  y.sum().backward();
  prof.stop();
  prof.export_chrome_trace(optrace_test::temp_path("profiler_autograd.pt.trace.json"));
  Parsed p = parse(prof.last_trace()->to_json());
  bool addmm = false, backward = false;
  int64_t flows = 0;
  std::set<int64_t> ev_idx, externals;
  for (Node e : p.events().array()) {
    Node args(e);
    if (e.find("cat", args) && args.as_string() == "fwdbwd") ++flows;
    if (!e.find("args", args)) continue;
    Node idx(e);
    if (args.find("Ev Idx", idx)) CHECK(ev_idx.insert(idx.as_int()).second);
    if (args.find("External id", idx)) CHECK(externals.insert(idx.as_int()).second);
    const std::string name(e["name"].as_string());
    if (name == "aten::addmm") {
      addmm = true;
      CHECK(text_of(args["Input Dims"]) == "[[4],[2,3],[3,4],[],[]]");
      CHECK(text_of(args["Input type"]) == R"(["float","float","float","Scalar","Scalar"])");
      CHECK(text_of(args["Input Strides"]) == "[[1],[3,1],[1,3],[],[]]");
      CHECK(text_of(args["Concrete Inputs"]) == R"(["","","","1","2"])");
      CHECK(args["Sequence number"].as_int() >= 0);
      CHECK(args["Fwd thread id"].as_int() == 0);
      CHECK(args["Record function id"].as_int() > 0);
    }
    // The autograd node's range (and on libtorch 2.x the engine's range around it) names the
    // forward op's sequence number and thread.
    Node fwd(e);
    if (name.find("AddmmBackward") != std::string::npos && args.find("Fwd thread id", fwd)) {
      backward = true;
      CHECK(fwd.as_int() > 0);
      CHECK(args["Sequence number"].as_int() >= 0);
    }
  }
  CHECK(addmm);
  CHECK(backward);
  CHECK(flows >= 2);
  CHECK(flows % 2 == 0);
}

TEST_CASE("profiler: an op whose inputs cannot be read keeps none, and the ops around it keep theirs", "[profiler]") {
  // A nested tensor's sizes() throws: its op's encoding fails part way through the window's
  // tokens, and what it wrote must not end up in its event or in its neighbours'.
  torch::NoGradGuard no_grad;
  at::Tensor dense = torch::randn({2, 3, 4});
  at::Tensor mask = torch::tensor({1, 1, 0, 1, 0, 0}, torch::kBool).reshape({2, 3});
  at::Tensor nested = at::_nested_tensor_from_mask(dense, mask, false);
  optrace::Profiler prof(optrace::ProfilerOptions().record_shapes(true));
  torch::addmm(torch::zeros({4}), torch::randn({2, 3}), torch::randn({3, 4}), 1, 2);
  at::Tensor padded = nested.to_padded_tensor(0.0);
  torch::addmm(torch::zeros({5}), torch::randn({2, 6}), torch::randn({6, 5}), 1, 2);
  prof.stop();
  CHECK(padded.size(1) == 2);
  Parsed p = parse(prof.last_trace()->to_json());
  std::vector<std::string> addmm_dims;
  bool to_padded = false;
  for (Node e : p.events().array()) {
    Node args(e);
    if (!e.find("args", args)) continue;
    const std::string name(e["name"].as_string());
    Node dims(e);
    if (name == "aten::addmm") addmm_dims.push_back(text_of(args["Input Dims"]));
    if (name == "aten::to_padded_tensor") {
      to_padded = true;
      CHECK_FALSE(args.find("Input Dims", dims));
    }
  }
  CHECK(to_padded);
  CHECK(addmm_dims == std::vector<std::string>{"[[4],[2,3],[3,4],[],[]]", "[[5],[2,6],[6,5],[],[]]"});
}

TEST_CASE("profiler: memory events and the memory columns", "[profiler]") {
  optrace::Profiler prof(optrace::ProfilerOptions().profile_memory(true));
  {
    auto a = torch::ones({256, 256});  // 256 KiB
    auto b = a * 2;
  }
  prof.stop();
  Parsed p = parse(prof.last_trace()->to_json());
  int64_t allocated = 0, freed = 0;
  for (Node e : p.events().array()) {
    Node name(e);
    if (!e.find("name", name) || name.as_string() != "[memory]") continue;
    const int64_t bytes = e["args"]["Bytes"].as_int();
    (bytes > 0 ? allocated : freed) += bytes;
    CHECK(e["args"]["Device Type"].as_int() == 0);
  }
  CHECK(allocated >= 2 * 256 * 256 * 4);
  CHECK(freed <= -2 * 256 * 256 * 4);
  optrace::KeyAverages averages = prof.key_averages();
  CHECK(averages.has_memory());
  bool ones = false;
  for (const auto& row : averages.rows())
    if (row.name == "aten::ones") ones = row.cpu_memory == 256 * 256 * 4;
  CHECK(ones);
  CHECK_THAT(averages.table("self_cpu_memory_usage", 5), OPTRACE_CONTAINS("Self CPU Mem"));
}

// with_stack: the interpreter's call stack and module hierarchy of a scripted module's ops.
TEST_CASE("profiler: with_stack records TorchScript's call stack and module hierarchy", "[profiler]") {
  torch::jit::Module inner("Inner");
  inner.define(R"(
def forward(self, x):
    return torch.relu(x)
)");
  torch::jit::Module net("Net");
  net.register_module("block", inner);
  net.define(R"(
def forward(self, x):
    y = self.block.forward(x)
    return torch.sigmoid(y)
)");
  std::vector<c10::IValue> inputs{torch::randn({4, 4})};
  std::map<std::string, std::pair<std::string, std::string>> stacks;  // op -> call stack, module hierarchy
  for (bool with_stack : {true, false}) {
    optrace::Profiler prof(optrace::ProfilerOptions().with_stack(with_stack));
    net.forward(inputs);
    prof.stop();
    Parsed p = parse(prof.last_trace()->to_json());
    for (Node e : p.events().array()) {
      Node args(e), v(e);
      if (e["ph"].as_string() != "X" || !e.find("args", args)) continue;
      const std::string name(e["name"].as_string());
      if (name != "aten::relu" && name != "aten::sigmoid") continue;
      std::string stack, modules;
      if (args.find("Call stack", v)) stack = std::string(v.as_string());
      if (args.find("Module Hierarchy", v)) modules = std::string(v.as_string());
      if (with_stack) {
        stacks[name] = {stack, modules};
      } else {
        CHECK(stack.empty());
        CHECK(modules.empty());
      }
    }
  }
  INFO("relu: " << stacks["aten::relu"].first << " | " << stacks["aten::relu"].second);
  INFO("sigmoid: " << stacks["aten::sigmoid"].first << " | " << stacks["aten::sigmoid"].second);
  CHECK_THAT(stacks["aten::relu"].first, OPTRACE_CONTAINS("forward"));
  CHECK_THAT(stacks["aten::relu"].second, OPTRACE_CONTAINS("block(Inner)::forward"));
  CHECK_THAT(stacks["aten::sigmoid"].second, OPTRACE_CONTAINS("TOP(Net)::forward"));
  CHECK(stacks["aten::sigmoid"].second.find("block(") == std::string::npos);
}

// The CUDA activity's events joined to the CPU ranges when the trace is written (device_trace.hpp),
// on a window made by hand: what runs without a GPU. The [cuda] case below records real ones.
namespace dp = optrace::detail::profiler;

// A window with the CUDA activity, made by hand: aten::mm (thread 100) around aten::relu,
// aten::add on thread 200, runtime calls in them and in none, what they launched, and a kernel
// whose call is not in the window.
std::unique_ptr<dp::Window> device_window() {
  auto made = std::make_unique<dp::Window>();
  dp::Window& window = *made;
  auto b = std::make_unique<dp::ThreadBuffer>();
  b->os_tid = 100;
  b->names = {"aten::mm", "aten::relu"};
  dp::Event outer, inner;
  outer.own_name = 0, outer.kind = dp::EventKind::kOp, outer.start_ns = 1000, outer.end_ns = 9000;
  inner.own_name = 1, inner.kind = dp::EventKind::kOp, inner.start_ns = 2000, inner.end_ns = 3000, inner.parent = 0;
  b->events = {outer, inner};
  window.buffers.add(std::move(b));
  auto other = std::make_unique<dp::ThreadBuffer>();  // a second thread, with a short op
  other->os_tid = 200;
  other->names = {"aten::add"};
  dp::Event add;
  add.own_name = 0, add.kind = dp::EventKind::kOp, add.start_ns = 3900, add.end_ns = 4300;
  other->events = {add};
  window.buffers.add(std::move(other));
  window.start_ns = 0, window.end_ns = 10000;
  auto device = [](std::string name, dp::DeviceKind kind, int64_t start, int64_t dur, uint64_t correlation, int64_t stream) {
    dp::DeviceEvent d;
    d.name = std::move(name), d.kind = kind, d.start_ns = start, d.dur_ns = dur, d.correlation = correlation;
    d.stream = stream;
    return d;
  };
  using K = dp::DeviceKind;
  // Runtime calls carry libtorch's thread id of the collecting thread (1), not the caller's.
  window.device_events = {device("cudaLaunchKernel", K::kRuntime, 2100, 100, 7, 1),   // in relu, in mm
                          device("cudaLaunchKernel", K::kRuntime, 4000, 100, 11, 1),  // in add (thread 200), in mm
                          device("cudaMemcpyAsync", K::kRuntime, 5000, 100, 8, 1),    // in mm only
                          device("cudaDeviceSynchronize", K::kRuntime, 9500, 10, 9, 1),  // in no range
                          device("relu_kernel", K::kKernel, 4500, 400, 7, 7),
                          device("Memcpy DtoH (Device -> Pinned)", K::kMemcpy, 6000, 50, 8, 7),
                          device("add_kernel", K::kKernel, 7500, 50, 11, 7),
                          device("orphan_kernel", K::kKernel, 8000, 50, 10, 13)};
  return made;
}

TEST_CASE("profiler: runtime calls take the External id of the range around them, kernels their call's", "[profiler]") {
  const std::unique_ptr<dp::Window> window = device_window();
  dp::TraceInfo info;
  info.pid = 42;
  info.process_name = "app";
  Parsed p = parse(dp::KinetoWriter(*window, info).write(""));
  std::map<std::string, int64_t> external;  // name -> External id
  std::map<int64_t, int64_t> call_tid;      // correlation -> the runtime call's tid
  std::map<int64_t, std::vector<std::string>> flows;  // id -> "s pid tid ts", "f pid tid ts"
  std::set<std::string> threads;
  for (Node e : p.events().array()) {
    const std::string ph(e["ph"].as_string());
    Node args(e);
    if (ph == "X" && e.find("args", args)) {
      Node ext(e);
      if (args.find("External id", ext)) external[std::string(e["name"].as_string())] = ext.as_int();
      if (e["cat"].as_string() == "cuda_runtime") call_tid[args["correlation"].as_int()] = e["tid"].as_int();
    }
    if (ph == "s" || ph == "f") {
      Node cat(e);
      REQUIRE(e.find("cat", cat));
      if (cat.as_string() != "ac2g") continue;
      std::ostringstream end;
      end << ph << ' ' << e["pid"].as_int() << ' ' << e["tid"].as_int() << ' ' << e["ts"].as_double();
      flows[e["id"].as_int()].push_back(end.str());
    }
    if (ph == "M" && e["name"].as_string() == "thread_name" && e["pid"].as_int() == 0)
      threads.insert(std::string(e["args"]["name"].as_string()));
  }
  CHECK(external["aten::mm"] == 1);
  CHECK(external["aten::relu"] == 2);
  CHECK(external["aten::add"] == 3);
  CHECK(external["relu_kernel"] == 2);
  CHECK(external["Memcpy DtoH (Device -> Pinned)"] == 1);
  CHECK(external["add_kernel"] == 3);
  CHECK(external["orphan_kernel"] == 0);
  CHECK(external["cudaDeviceSynchronize"] == 0);
  CHECK(call_tid == std::map<int64_t, int64_t>{{7, 100}, {8, 100}, {9, 1}, {11, 200}});
  CHECK(flows.size() == 3);
  CHECK(flows[7] == std::vector<std::string>{"s 42 100 2.1", "f 0 7 4.5"});
  CHECK(flows[8] == std::vector<std::string>{"s 42 100 5", "f 0 7 6"});
  CHECK(flows[11] == std::vector<std::string>{"s 42 200 4", "f 0 7 7.5"});
  CHECK(threads == std::set<std::string>{"stream 7 ", "stream 13 "});
}

TEST_CASE("profiler: key_averages counts each kernel toward the range that launched it, as the saved trace does",
          "[profiler]") {
  // ProfilerTrace::key_averages is KeyAverages::from_events of timed_events (the one join the
  // trace's writer uses too): the window of the test above, without a GPU.
  const std::unique_ptr<dp::Window> window = device_window();
  dp::TraceInfo info;
  info.pid = 42;
  info.process_name = "app";
  dp::WindowEvents events = dp::timed_events(*window, info, optrace::GroupBy::Name);
  const optrace::KeyAverages averages = optrace::KeyAverages::from_events(events.events, events.memory, optrace::GroupBy::Name);
  CHECK(averages.has_device());
  std::map<std::string, optrace::KeyAverage> rows;
  for (const optrace::KeyAverage& r : averages.rows()) rows[r.name + (r.on_device ? " @device" : "")] = r;
  auto near = [](double a, double b) { return std::fabs(a - b) < 1e-9; };
  // relu launched relu_kernel (0.4 us); mm launched the copy (0.05 us) and holds relu's kernel as
  // its child's; add (thread 200) launched add_kernel.
  CHECK(near(rows["aten::relu"].self_device_us, 0.4));
  CHECK(near(rows["aten::mm"].self_device_us, 0.05));
  CHECK(near(rows["aten::mm"].device_total_us, 0.45));
  CHECK(near(rows["aten::add"].self_device_us, 0.05));
  // The runtime calls are rows on the CPU, children of their ranges: relu's self time is 1 us
  // less its call's 0.1; mm's is 8 us less relu's 1 and the copy's call (0.1).
  CHECK(rows["cudaLaunchKernel"].calls == 2);
  CHECK_FALSE(rows["cudaLaunchKernel"].on_device);
  CHECK(near(rows["aten::relu"].self_cpu_us, 0.9));
  CHECK(near(rows["aten::mm"].self_cpu_us, 6.9));
  // The kernels are rows of their own; the one whose call is not in the window counts toward none.
  CHECK(near(rows["relu_kernel @device"].self_device_us, 0.4));
  CHECK(near(rows["orphan_kernel @device"].self_device_us, 0.05));
  CHECK(near(averages.self_device_time_total_us(), 0.4 + 0.05 + 0.05 + 0.05));
  CHECK_THAT(averages.table("self_cuda_time_total", -1), OPTRACE_CONTAINS("Self CUDA time total: 0.550us\n"));
  // The saved trace's table is the same.
  const optrace::KeyAverages from_file =
      optrace::KeyAverages::from_kineto_text(dp::KinetoWriter(*window, info).write(""), optrace::GroupBy::Name);
  REQUIRE(from_file.rows().size() == averages.rows().size());
  for (size_t k = 0; k < averages.rows().size(); ++k) {
    const optrace::KeyAverage &mine = averages.rows()[k], &theirs = from_file.rows()[k];
    INFO(mine.name);
    CHECK(mine.name == theirs.name);
    CHECK(mine.on_device == theirs.on_device);
    CHECK(mine.calls == theirs.calls);
    CHECK(near(mine.self_cpu_us, theirs.self_cpu_us));
    CHECK(near(mine.self_device_us, theirs.self_device_us));
    CHECK(near(mine.device_total_us, theirs.device_total_us));
  }
  // (In the rows' order: sorted by device time, rows of 0.05 us each would tie in one and, by the
  // last bits of times from another origin, not in the other.)
  CHECK(averages.table("", -1) == from_file.table("", -1));
}

// A device event's arguments as compact JSON, without the "External id" (each trace's own join).
std::map<std::string, std::string> device_args_of(Node e) {
  std::map<std::string, std::string> out;
  for (auto [key, v] : e["args"].object())
    if (key != "External id") out[std::string(key)] = simdjson::minify(v.element());
  return out;
}

// A trace's kernels, copies, sets and runtime calls in time order: "cat name", then their
// arguments.
std::vector<std::pair<std::string, std::map<std::string, std::string>>> device_events_of(const Parsed& p) {
  std::vector<std::tuple<double, std::string, std::map<std::string, std::string>>> events;
  for (Node e : p.events().array()) {
    Node cat(e);
    if (!e.find("cat", cat) || e["ph"].as_string() != "X") continue;
    const std::string_view c = cat.as_string();
    dp::DeviceKind kind;
    if (dp::device_kind_of_category(c, kind))
      events.emplace_back(e["ts"].as_double(), std::string(c) + " " + std::string(e["name"].as_string()), device_args_of(e));
  }
  std::stable_sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> out;
  for (auto& [ts, name, args] : events) out.emplace_back(std::move(name), std::move(args));
  return out;
}

// torch.profiler's own trace of a training step on an H100 (tests/data/kineto/), and a window
// holding its kernels, copies, sets and runtime calls as libtorch's KinetoEvent gives them (no
// launch configuration, bytes or cbid), counted by category.
const char* const kTorchCudaTrace = "kineto/torch211_cuda_train.pt.trace.json.gz";
std::unique_ptr<dp::Window> device_window_of(const Parsed& torch_trace, std::map<std::string, int>& counts) {
  auto window = std::make_unique<dp::Window>();
  for (Node e : torch_trace.events().array()) {
    Node cat(e);
    dp::DeviceEvent d;
    if (!e.find("cat", cat) || e["ph"].as_string() != "X" || !dp::device_kind_of_category(cat.as_string(), d.kind)) continue;
    d.name = std::string(e["name"].as_string());
    d.start_ns = std::llround(e["ts"].as_double() * 1000);
    d.dur_ns = std::llround(e["dur"].as_double() * 1000);
    d.correlation = static_cast<uint64_t>(e["args"]["correlation"].as_int());
    d.device = dp::on_host(d.kind) ? 0 : e["args"]["device"].as_int();
    d.stream = dp::on_host(d.kind) ? e["tid"].as_int() : e["args"]["stream"].as_int();
    window->device_events.push_back(std::move(d));
    ++counts[std::string(cat.as_string())];
  }
  std::stable_sort(window->device_events.begin(), window->device_events.end(),
                   [](const dp::DeviceEvent& a, const dp::DeviceEvent& b) { return a.start_ns < b.start_ns; });
  return window;
}

TEST_CASE("profiler: CUDA events carry what libtorch's saved trace adds, as torch.profiler's own trace holds it",
          "[profiler]") {
  // libtorch's KinetoEvent has no launch configuration, bytes or cbid: the Profiler reads them
  // from the trace libtorch saves of the same recording (device_details.hpp). Here that trace is
  // torch.profiler's own: the device events made from it come out of the Profiler's writer with
  // torch's arguments, and the trace with torch's deviceProperties and CUDA versions.
  const std::string path = optrace_test::data_path(kTorchCudaTrace);
  dp::DeviceDetails details = dp::read_device_details_file(path);
  const Parsed torch_trace = parse(optrace::detail::read_file_maybe_gzip(path));
  std::map<std::string, int> counts;
  const std::unique_ptr<dp::Window> window = device_window_of(torch_trace, counts);
  INFO(counts["kernel"] << " kernels, " << counts["gpu_memcpy"] << " copies, " << counts["cuda_runtime"] << " runtime calls");
  REQUIRE(counts["kernel"] > 10);
  REQUIRE(counts["gpu_memcpy"] > 0);
  REQUIRE(counts["cuda_runtime"] > 10);
  size_t read_on_device = 0;
  for (const auto& [correlation, list] : details.device) read_on_device += list.size();
  CHECK(read_on_device == static_cast<size_t>(counts["kernel"] + counts["gpu_memcpy"] + counts["gpu_memset"]));
  CHECK(dp::attach_device_details(window->device_events, details) == window->device_events.size());
  window->device_metadata = details.metadata;
  dp::TraceInfo info;
  const Parsed ours = parse(dp::KinetoWriter(*window, info).write(""));

  const auto mine = device_events_of(ours), theirs = device_events_of(torch_trace);
  REQUIRE(mine.size() == theirs.size());
  int kernels_with_grid = 0, copies_with_bytes = 0, calls_with_cbid = 0;
  for (size_t k = 0; k < mine.size(); ++k) {
    INFO(theirs[k].first);
    CHECK(mine[k].first == theirs[k].first);
    CHECK(mine[k].second == theirs[k].second);
    kernels_with_grid += mine[k].second.count("grid") && mine[k].second.count("block") ? 1 : 0;
    copies_with_bytes += mine[k].second.count("bytes") && mine[k].second.count("memory bandwidth (GB/s)") ? 1 : 0;
    calls_with_cbid += mine[k].second.count("cbid");
  }
  CHECK(kernels_with_grid == counts["kernel"]);
  CHECK(copies_with_bytes == counts["gpu_memcpy"] + counts["gpu_memset"]);
  CHECK(calls_with_cbid == counts["cuda_runtime"] + counts["cuda_driver"]);
  for (const char* key : {"deviceProperties", "cuda_runtime_version", "cuda_driver_version", "cupti_version"}) {
    INFO(key);
    CHECK(simdjson::minify(ours.doc->root()[key].element()) == simdjson::minify(torch_trace.doc->root()[key].element()));
  }
  // Each key once: deviceProperties comes from the saved trace instead of the empty list.
  std::set<std::string> keys;
  for (auto [key, v] : ours.doc->root().object()) CHECK(keys.insert(std::string(key)).second);
  CHECK(ours.doc->root()["deviceProperties"].array().size() == 1);
}

TEST_CASE("profiler: HTA reads the launch statistics and memory bandwidth of CUDA events with CUPTI's arguments",
          "[profiler][python]") {
  // The window of the test above written by the Profiler's writer, given to HTA's GPU analyses
  // (tests/python/hta_gpu_check.py: kernel breakdown, launch statistics, memory bandwidth).
  if (!python_torch_available()) OPTRACE_SKIP("python3-torch is not installed");
  const std::string path = optrace_test::data_path(kTorchCudaTrace);
  dp::DeviceDetails details = dp::read_device_details_file(path);
  std::map<std::string, int> counts;
  const std::unique_ptr<dp::Window> window = device_window_of(parse(optrace::detail::read_file_maybe_gzip(path)), counts);
  REQUIRE(dp::attach_device_details(window->device_events, details) == window->device_events.size());
  window->device_metadata = details.metadata;
  const std::string dir = temp_dir("profiler_cupti_hta");
  std::filesystem::create_directories(dir);
  const std::string trace = dir + "/cuda_events.pt.trace.json";
  dp::TraceInfo info;
  info.pid = 587;  // torch's trace's
  info.process_name = "python";
  optrace::detail::write_file_atomic(trace, dp::KinetoWriter(*window, info).write(""));
  const ScriptRun run = run_script("hta_gpu_check.py", std::string(OPTRACE_SOURCE_DIR) + "/../shared/consumers " + trace + " " + dir + "/work");
  if (run.status == 77) OPTRACE_SKIP(run.first_line());
  INFO(run.out);
  CHECK(run.status == 0);
  CHECK_THAT(run.out, OPTRACE_CONTAINS("HTA memory bandwidth: 6 copies and sets with bytes"));
}

#if OPTRACE_PROFILER_DEVICE_TRACE
TEST_CASE("profiler: the trace libtorch saves of a recording is read back and its file removed", "[profiler]") {
  // What runs on a GPU when a trace is first written (save_device_details), here with the CPU
  // activity: libtorch 2.x saves its Kineto trace into the temporary folder, optrace reads it.
  namespace impl = torch::profiler::impl;
  const std::set<impl::ActivityType> cpu{impl::ActivityType::CPU};
  impl::ProfilerConfig config(impl::ProfilerState::KINETO);
  try {
    torch::autograd::profiler::prepareProfiler(config, cpu);
    torch::autograd::profiler::enableProfiler(config, cpu);
  } catch (const std::exception& e) {
    OPTRACE_SKIP("libtorch's Kineto profiler cannot start here: " << e.what());
  }
  torch::mm(torch::ones({8, 8}), torch::ones({8, 8}));
  std::unique_ptr<torch::autograd::profiler::ProfilerResult> result = torch::autograd::profiler::disableProfiler();
  REQUIRE(result);
  auto ours = [] {
    int n = 0;
    const std::string prefix = "optrace-cuda-" + std::to_string(::getpid()) + "-";
    for (const auto& f : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
      n += f.path().filename().string().rfind(prefix, 0) == 0 ? 1 : 0;
    return n;
  };
  const int before = ours();
  dp::Window window;
  CHECK(dp::save_device_details(*result, window) == "");
  CHECK(ours() == before);
  // A second save of the same result is libtorch's error, said, not thrown.
  CHECK_FALSE(dp::save_device_details(*result, window).empty());
  CHECK(ours() == before);
}
#endif

// A GPU's kernels, recorded by libtorch's Kineto and written with the CPU ops that launched them;
// their names as torch.profiler's own trace of the same computation holds them.
TEST_CASE("profiler: CUDA kernels, copies and runtime calls with their ops and flows", "[profiler][cuda]") {
  if (!torch::cuda::is_available()) OPTRACE_SKIP("no CUDA device");
  auto work = [] {
    auto a = torch::ones({256, 256}, torch::kCUDA);
    auto b = torch::mm(a, a);
    auto c = torch::relu(b);
    return c.sum().cpu();
  };
  work();  // cuBLAS's handle and workspace made before recording, as the Python side does
  torch::cuda::synchronize();
  // One profiler step (chakra_trace_link asks for a ProfilerStep#N range), with the execution
  // trace: what chakra_trace_link joins (tests/data/profiler_cuda/ keeps both files of a run).
  optrace::Profiler prof(optrace::ProfilerOptions()
                             .activities({optrace::Activity::CPU, optrace::Activity::CUDA})
                             .schedule(optrace::Schedule().active(1).repeat(1))
                             .profile_memory(true)
                             .record_shapes(true)
                             .execution_trace(optrace_test::temp_path("profiler_cuda_et.json")));
  CHECK(work().item<float>() == 256.0f * 256 * 256);
  torch::cuda::synchronize();
  prof.step();
  prof.stop();
  for (const auto& n : prof.notes()) WARN("note: " << n);
  CHECK(prof.notes().empty());
  const std::string text = prof.last_trace()->to_json();
  optrace::detail::write_file_atomic(optrace_test::temp_path("profiler_cuda.pt.trace.json"), text);
  Parsed p = parse(text);
  struct Span {
    std::string name, cat;
    int64_t pid = 0, tid = 0, ext = 0, corr = -1;
    double ts = 0, dur = 0;
    std::string cupti;  // what libtorch's saved trace adds (device_details.hpp), as torch_cuda_kernels.py writes it
  };
  std::vector<Span> spans;
  std::map<int64_t, int> flow_ends;  // ac2g id -> ends seen
  int64_t cuda_memory = 0;
  for (Node e : p.events().array()) {
    const std::string ph(e["ph"].as_string());
    if (ph == "s" || ph == "f") {
      if (e["cat"].as_string() == "ac2g") ++flow_ends[e["id"].as_int()];
      continue;
    }
    if (ph == "i" && e["name"].as_string() == "[memory]") {
      if (e["args"]["Device Type"].as_int() == 1) ++cuda_memory;
      continue;
    }
    if (ph != "X") continue;
    Span s;
    s.name = std::string(e["name"].as_string());
    s.cat = std::string(e["cat"].as_string());
    s.pid = e["pid"].as_int(), s.tid = e["tid"].as_int();
    s.ts = e["ts"].as_double(), s.dur = e["dur"].as_double();
    Node args(e), v(e);
    if (e.find("args", args)) {
      if (args.find("External id", v)) s.ext = v.as_int();
      if (args.find("correlation", v)) s.corr = v.as_int();
      auto list = [](Node l) {
        std::string t;
        for (int64_t x : l.as_int_list()) t += (t.empty() ? "" : ",") + std::to_string(x);
        return t;
      };
      if (args.find("grid", v)) s.cupti += " grid=" + list(v);
      if (args.find("block", v)) s.cupti += " block=" + list(v);
      if (args.find("bytes", v)) s.cupti += " bytes=" + std::to_string(v.as_int());
      if (args.find("cbid", v)) s.cupti += " cbid";
    }
    spans.push_back(s);
  }
  std::map<int64_t, const Span*> op_of_ext, call_of_corr;
  std::vector<const Span*> launched;
  for (const Span& s : spans) {
    if (s.cat == "cpu_op" || s.cat == "user_annotation") op_of_ext[s.ext] = &s;
    if (s.cat == "cuda_runtime" || s.cat == "cuda_driver") call_of_corr[s.corr] = &s;
    if (s.cat == "kernel" || s.cat == "gpu_memcpy" || s.cat == "gpu_memset") launched.push_back(&s);
  }
  WARN(launched.size() << " kernels, copies and sets; " << call_of_corr.size() << " runtime calls; "
                       << cuda_memory << " CUDA [memory] events");
  REQUIRE(launched.size() >= 3);  // mm, relu, sum; the copy to the host
  std::vector<std::string> names;
  std::set<std::string> launching_ops;
  // With what libtorch's saved trace adds: launch configurations, bytes, cbid, the device.
  for (const Span* k : launched) {
    INFO(k->cat << " " << k->name << k->cupti);
    CHECK_THAT(k->cupti, OPTRACE_CONTAINS(k->cat == "kernel" ? " grid=" : " bytes="));
  }
  for (const auto& [correlation, call] : call_of_corr) CHECK(call->cupti == " cbid");
  CHECK(p.doc->root()["deviceProperties"].array().size() >= 1);
  for (const Span* k : launched) {
    INFO(k->cat << " " << k->name << " correlation " << k->corr);
    names.push_back(k->name + k->cupti);
    auto call = call_of_corr.find(k->corr);
    REQUIRE(call != call_of_corr.end());
    CHECK(flow_ends[k->corr] == 2);
    CHECK(k->ts >= call->second->ts);  // launched before it ran: the two clocks agree
    CHECK(k->ext == call->second->ext);
    auto op = op_of_ext.find(call->second->ext);
    REQUIRE(op != op_of_ext.end());  // the call lies within a recorded range
    CHECK(op->second->tid == call->second->tid);
    CHECK(op->second->ts <= call->second->ts);
    CHECK(op->second->ts + op->second->dur >= call->second->ts + call->second->dur);
    launching_ops.insert(op->second->name);
  }
  CHECK(launching_ops.count("aten::mm") == 1);
  CHECK(launching_ops.count("aten::sum") == 1);
  CHECK(cuda_memory >= 2);
  // prof.key_averages() in memory: the kernels as rows of their own, their time counted toward
  // the ops that launched them (the CUDA columns), the rows those of the saved trace's table.
  const optrace::KeyAverages averages = prof.key_averages();
  const optrace::KeyAverages from_file = optrace::KeyAverages::from_kineto_text(text, optrace::GroupBy::Name);
  CHECK(averages.has_device());
  double mm_device_us = 0;
  int device_rows = 0;
  for (const optrace::KeyAverage& r : averages.rows()) {
    if (r.name == "aten::mm" && !r.on_device) mm_device_us = r.self_device_us;
    device_rows += r.on_device ? 1 : 0;
  }
  CHECK(mm_device_us > 0);
  CHECK(device_rows >= 3);
  CHECK_THAT(averages.table("self_cuda_time_total", -1), OPTRACE_CONTAINS("Self CUDA time total: "));
  REQUIRE(from_file.rows().size() == averages.rows().size());
  for (size_t k = 0; k < averages.rows().size(); ++k) {
    INFO(averages.rows()[k].name);
    CHECK(averages.rows()[k].name == from_file.rows()[k].name);
    CHECK(averages.rows()[k].calls == from_file.rows()[k].calls);
    // Within the file's resolution (1 ns): in memory, a duration is the difference of two absolute
    // steady-clock times in microseconds, as torch computes it (aggregate.hpp), whose doubles carry
    // ~1e-6 us of rounding; the file's times are relative to its base (2e-6 us apart on the H200).
    CHECK(std::fabs(averages.rows()[k].self_device_us - from_file.rows()[k].self_device_us) < 1e-3);
  }

  // The kernels' names as torch.profiler writes them for the same program.
  if (!python_torch_available()) OPTRACE_SKIP("the comparison with torch.profiler needs python3-torch with CUDA");
  const std::string torch_names = optrace_test::temp_path("profiler_cuda.torch.txt");
  const ScriptRun run = run_script("torch_cuda_kernels.py",
                                   optrace_test::temp_path("profiler_cuda.torch.pt.trace.json") + " " + torch_names);
  if (run.status == 77) OPTRACE_SKIP(run.first_line());
  INFO(run.out);
  REQUIRE(run.status == 0);
  std::string ours;
  for (const auto& n : names) ours += n + "\n";
  CHECK(ours == optrace::detail::read_file(torch_names));
}

TEST_CASE("profiler: ops on several threads, each on its own tid", "[profiler]") {
  optrace::Profiler prof;
  auto work = [] {
    for (int i = 0; i < 10; ++i) torch::mm(torch::ones({8, 8}), torch::ones({8, 8}));
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  prof.stop();
  Parsed p = parse(prof.last_trace()->to_json());
  std::map<int64_t, int> mm_per_tid;
  for (Node e : p.events().array()) {
    Node name(e);
    if (e.find("name", name) && name.as_string() == "aten::mm") ++mm_per_tid[e["tid"].as_int()];
  }
  REQUIRE(mm_per_tid.size() == 2);
  for (const auto& [tid, n] : mm_per_tid) CHECK(n == 10);
}

// The folder check before a run (can_write_in) once opened a fixed name with truncation: a link
// planted under it emptied the file it pointed to.
TEST_CASE("profiler: the trace handler's folder check writes through nothing planted in the folder", "[profiler]") {
  const std::string dir = temp_dir("profiler_planted");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/../profiler_planted_victim") << "keep me";
  REQUIRE(::link((dir + "/../profiler_planted_victim").c_str(), (dir + "/.optrace-write-check").c_str()) == 0);
  optrace::tensorboard_trace_handler(dir);
  CHECK(optrace::detail::read_file(dir + "/../profiler_planted_victim") == "keep me");
}

TEST_CASE("profiler: RecordScope ranges and the trace handler's files", "[profiler]") {
  const std::string dir = temp_dir("profiler_traces");
  {
    optrace::Profiler prof(optrace::ProfilerOptions()
                               .schedule(optrace::Schedule().active(2).repeat(1))
                               .on_trace_ready(optrace::tensorboard_trace_handler(dir, "worker", /*use_gzip=*/true)));
    for (int i = 0; i < 3; ++i) {
      {
        optrace::RecordScope scope("data_loading");
        torch::ones({2, 2});
      }
      // A range that ends after the step it began in (ProfilerStep#0 ends first).
      optrace::RecordScope across("across_steps");
      torch::ones({2, 2}).sum();
      prof.step();
    }
  }
  std::vector<std::string> files;
  for (const auto& f : std::filesystem::directory_iterator(dir)) files.push_back(f.path().filename().string());
  REQUIRE(files.size() == 1);
  CHECK_THAT(files[0], OPTRACE_STARTS_WITH("worker."));
  CHECK(files[0].size() > std::string("worker..pt.trace.json.gz").size());
  CHECK(files[0].substr(files[0].size() - 17) == ".pt.trace.json.gz");
  const std::string text = optrace::detail::read_file_maybe_gzip(dir + "/" + files[0]);
  Parsed p = parse(text);
  std::map<std::string, int> ranges;
  for (Node e : p.events().array()) {
    Node cat(e);
    if (e.find("cat", cat) && cat.as_string() == "user_annotation") ++ranges[std::string(e["name"].as_string())];
  }
  // The second across_steps range was still open when the window closed: it is not in the trace.
  CHECK(ranges == std::map<std::string, int>{{"ProfilerStep#0", 1}, {"ProfilerStep#1", 1}, {"data_loading", 2}, {"across_steps", 1}});
}

// Each "cpu_op" event of a trace as one line: name, Input Dims, Input type, Concrete Inputs; in
// start order. Two differences with torch.profiler are by design, and taken out here:
// - a Device argument: torch writes "" for its value, optrace the device ("cpu"), so that its
//   Kineto import gives back what OpTracer records;
// - the TorchScript interpreter hands RecordFunction its whole stack: torch lists the caller's
//   values before the op's own arguments (aten::t of a 2-input function: two tensors); optrace
//   lists the op's own arguments. `arity` gives each op's count to keep torch's last ones.
std::vector<std::string> op_lines(const std::string& trace_json, bool torch_trace) {
  Parsed p = parse(trace_json);
  std::vector<std::pair<double, std::string>> ops;
  for (Node e : p.events().array()) {
    Node cat(e);
    if (!e.find("cat", cat) || cat.as_string() != "cpu_op") continue;
    Node args = e["args"], v(e);
    const std::string name(e["name"].as_string());
    std::vector<std::vector<std::string>> columns;  // per key, per argument
    for (const char* key : {"Input Dims", "Input type", "Concrete Inputs"}) {
      columns.emplace_back();
      if (args.find(key, v))
        for (Node item : v.array()) columns.back().push_back(text_of(item));
    }
    const optrace::detail::OpInfo* op = torch_trace ? optrace::detail::find_op(name) : nullptr;
    size_t keep = columns[0].size();
    if (op != nullptr && op->live != nullptr) keep = std::min(keep, op->live->schema->arguments().size());
    std::string line = name;
    for (auto& column : columns) {
      line += " [";
      for (size_t k = column.size() - std::min(keep, column.size()); k < column.size(); ++k) {
        std::string item = column[k];
        if (&column == &columns[2] && columns[1].size() == column.size() && columns[1][k] == "\"\"") item = "\"\"";
        line += item + ",";
      }
      line += "]";
    }
    ops.emplace_back(e["ts"].as_double(), line);
  }
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> lines;
  for (auto& [ts, line] : ops) lines.push_back(std::move(line));
  return lines;
}

// The real profiler: torch.profiler (torch >= 2, with Kineto) around the same TorchScript calls.
TEST_CASE("profiler: the ops and inputs torch.profiler records for the same TorchScript calls", "[profiler][python]") {
  if (!python_torch_available()) OPTRACE_SKIP("python3-torch is not installed");
  Model model;
  const std::string source = optrace_test::temp_path("profiler_model.ts");
  const std::string inputs = optrace_test::temp_path("profiler_model_inputs.pt");
  const std::string theirs = optrace_test::temp_path("profiler_model.torch.pt.trace.json");
  optrace::detail::write_file_atomic(source, kModel);
  const std::vector<char> pickled = torch::pickle_save(c10::ivalue::Tuple::create(model.inputs));
  optrace::detail::write_file_atomic(inputs, std::string(pickled.begin(), pickled.end()));
  torch::jit::setGraphExecutorOptimize(false);
  optrace::Profiler prof(optrace::ProfilerOptions().record_shapes(true));
  for (int i = 0; i < 2; ++i) model();
  prof.stop();
  torch::jit::setGraphExecutorOptimize(true);
  const ScriptRun run = run_script("torch_profile_script.py", source + " " + inputs + " 2 " + theirs);
  if (run.status == 77) OPTRACE_SKIP(run.first_line());
  INFO(run.out);
  REQUIRE(run.status == 0);
  const std::vector<std::string> ours = op_lines(prof.last_trace()->to_json(), /*torch_trace=*/false);
  const std::vector<std::string> torchs = op_lines(optrace::detail::read_file(theirs), /*torch_trace=*/true);
  std::string diff;
  for (size_t i = 0; i < std::max(ours.size(), torchs.size()); ++i) {
    const std::string a = i < ours.size() ? ours[i] : "(none)", b = i < torchs.size() ? torchs[i] : "(none)";
    if (a != b) diff += std::to_string(i) + ": optrace " + a + "\n" + std::string(std::to_string(i).size(), ' ') + "  torch   " + b + "\n";
  }
  INFO(diff);
  CHECK(ours == torchs);
}

// A TorchScript function whose ops take what an execution trace must tell apart: int lists, a
// string, a double, a bool, None, a device, a dtype, a view of a tensor (same storage), a list of
// tensors in and out.
constexpr const char* kEtModel = R"(
def forward(x: Tensor, w: Tensor, b: Tensor):
    y = torch.conv2d(x, w, b, [1, 1], [1, 1])
    y = torch.div(y, w[0, 0, 0, 0], rounding_mode='floor')
    y = torch.add(y, y[:, :1], alpha=0.5)
    parts = torch.split(y, [3, 5], 1)
    z = torch.cat(parts, 1)
    z = torch.dropout(z, 0.0, False)
    d = torch.zeros([2], dtype=7, device=torch.device('cpu'))  # 7: float64
    return z, d
)";

// The real writer: torch's own ExecutionTraceObserver (torch >= 2) around the same TorchScript
// calls, forward and backward, writes the same nodes, inputs, outputs and autograd links
// (tests/python/execution_trace_parity.py).
TEST_CASE("profiler: the execution trace holds the nodes torch's ExecutionTraceObserver writes for the same calls",
          "[profiler][python]") {
  if (!python_torch_available()) OPTRACE_SKIP("python3-torch is not installed");
  auto cu = torch::jit::compile(kEtModel);
  std::vector<c10::IValue> inputs{torch::randn({2, 3, 8, 8}), torch::randn({8, 3, 3, 3}), torch::randn({8})};
  const std::string source = optrace_test::temp_path("profiler_et_model.ts");
  const std::string pickled_inputs = optrace_test::temp_path("profiler_et_model_inputs.pt");
  const std::string ours = optrace_test::temp_path("profiler_et_model.optrace.json");
  const std::string theirs = optrace_test::temp_path("profiler_et_model.torch.json");
  optrace::detail::write_file_atomic(source, kEtModel);
  const std::vector<char> pickled = torch::pickle_save(c10::ivalue::Tuple::create(inputs));
  optrace::detail::write_file_atomic(pickled_inputs, std::string(pickled.begin(), pickled.end()));
  torch::jit::setGraphExecutorOptimize(false);
  {
    // As the script: two calls under no_grad, then one whose output's sum runs backward.
    const torch::Tensor seed = torch::ones({});
    optrace::Profiler prof(optrace::ProfilerOptions().execution_trace(ours));
    {
      torch::NoGradGuard no_grad;
      for (int i = 0; i < 2; ++i) cu->get_function("forward")(inputs);
    }
    for (size_t i = 1; i < 3; ++i) inputs[i].toTensor().requires_grad_(true);
    cu->get_function("forward")(inputs).toTupleRef().elements()[0].toTensor().sum().backward(seed);
  }
  torch::jit::setGraphExecutorOptimize(true);
  const ScriptRun run = run_script("execution_trace_parity.py", source + " " + pickled_inputs + " 2 " + ours + " " + theirs);
  if (run.status == 77) OPTRACE_SKIP(run.first_line());
  INFO(run.out);
  CHECK(run.status == 0);
}

// The real consumer: HTA's TraceAnalysis on the folder tensorboard_trace_handler wrote (the
// seed's collection: wait 1, warmup 1, active 3, repeat 1).
TEST_CASE("profiler: HTA loads the trace folder and shows the ops with the file's durations", "[profiler][python]") {
  if (!python_torch_available()) OPTRACE_SKIP("python3-torch is not installed");
  const std::string dir = temp_dir("profiler_hta");
  Model model;
  {
    optrace::Profiler prof(optrace::ProfilerOptions()
                               .schedule(optrace::Schedule().wait(1).warmup(1).active(3).repeat(1))
                               .on_trace_ready(optrace::tensorboard_trace_handler(dir))
                               .record_shapes(true)
                               .profile_memory(true));
    for (int i = 0; i < 6; ++i) {
      model();
      prof.step();
    }
  }
  const ScriptRun run = run_script("hta_check.py", std::string(OPTRACE_SOURCE_DIR) + "/../shared/consumers " + dir + " 2 3 4");
  if (run.status == 77) OPTRACE_SKIP(run.first_line());
  INFO(run.out);
  CHECK(run.status == 0);
}

// Seed 004's collection in C++: an MLP's training steps under the schedule (wait 1, warmup 1,
// active 3), the Kineto trace by tensorboard_trace_handler and the execution trace of the same
// steps. Returns the Kineto trace's path.
std::string collect_training_steps(const std::string& dir) {
  torch::nn::Sequential m(torch::nn::Linear(512, 256), torch::nn::ReLU(), torch::nn::Linear(256, 10));
  torch::optim::SGD opt(m->parameters(), torch::optim::SGDOptions(0.01));
  {
    optrace::Profiler prof(optrace::ProfilerOptions()
                               .schedule(optrace::Schedule().wait(1).warmup(1).active(3).repeat(1))
                               .on_trace_ready(optrace::tensorboard_trace_handler(dir + "/kineto"))
                               .record_shapes(true)
                               .profile_memory(true)
                               .execution_trace(dir + "/host_et.0.json"));
    for (int i = 0; i < 6; ++i) {
      auto x = torch::randn({32, 512});
      auto t = torch::randn({32, 10});
      auto loss = torch::mse_loss(m->forward(x), t);
      opt.zero_grad();
      loss.backward();
      opt.step();
      prof.step();
    }
  }
  std::vector<std::string> files;
  for (const auto& f : std::filesystem::directory_iterator(dir + "/kineto")) files.push_back(f.path().string());
  REQUIRE(files.size() == 1);
  return files[0];
}

TEST_CASE("profiler: the execution trace is a tree whose ops are the Kineto trace's, by rf_id", "[profiler]") {
  const std::string dir = temp_dir("profiler_et");
  const std::string kineto = collect_training_steps(dir);
  Parsed et = parse(optrace::detail::read_file(dir + "/host_et.0.json"));
  CHECK(et.doc->root()["schema"].as_string() == "1.1.1-chakra.0.0.4");
  std::map<int64_t, int64_t> parent_of;
  std::set<std::pair<int64_t, std::string>> et_ops;
  int64_t steps = 0, tensors = 0;
  for (Node n : et.doc->root()["nodes"].array()) {
    const int64_t id = n["id"].as_int();
    CHECK(parent_of.emplace(id, n["ctrl_deps"].as_int()).second);  // ids unique
    const std::string name(n["name"].as_string());
    std::map<std::string, Node> attrs;
    for (Node a : n["attrs"].array()) attrs.emplace(std::string(a["name"].as_string()), a["value"]);
    for (const char* key : {"rf_id", "fw_parent", "seq_id", "scope", "tid", "fw_tid", "op_schema"}) CHECK(attrs.count(key) == 1);
    if (name.rfind("[pytorch|profiler|execution_trace|", 0) == 0) continue;
    et_ops.emplace(attrs.at("rf_id").as_int(), name);
    steps += name.rfind("ProfilerStep#", 0) == 0 ? 1 : 0;
    for (Node type : n["inputs"]["types"].array()) tensors += std::string(type.as_string()).rfind("Tensor(", 0) == 0 ? 1 : 0;
    if (name == "aten::addmm") CHECK(std::string(attrs.at("op_schema").as_string()).rfind("aten::addmm(Tensor self", 0) == 0);
  }
  CHECK(steps == 3);
  CHECK(tensors > 100);
  // A tree rooted at the process node (id 1, its own parent).
  REQUIRE(parent_of.count(1) == 1);
  CHECK(parent_of.at(1) == 1);
  for (const auto& [id, parent] : parent_of) {
    int64_t at = id, hops = 0;
    while (at != 1 && hops++ < 1000) at = parent_of.count(at) ? parent_of.at(at) : -1;
    INFO("node " << id);
    CHECK(at == 1);
  }
  // The Kineto trace's ops and ranges, by "Record function id": the same set (chakra_trace_link
  // joins the two by it).
  Parsed k = parse(optrace::detail::read_file(kineto));
  std::set<std::pair<int64_t, std::string>> kineto_ops;
  for (Node e : k.events().array()) {
    Node cat(e);
    if (!e.find("cat", cat) || (cat.as_string() != "cpu_op" && cat.as_string() != "user_annotation")) continue;
    kineto_ops.emplace(e["args"]["Record function id"].as_int(), std::string(e["name"].as_string()));
  }
  CHECK(kineto_ops.size() > 200);
  CHECK(et_ops == kineto_ops);
}

// The real consumer: Chakra's converter on the execution trace.
TEST_CASE("profiler: Chakra's converter converts the execution trace, one node per op", "[profiler][python]") {
  if (!python_torch_available()) OPTRACE_SKIP("python3-torch is not installed");
  const std::string dir = temp_dir("profiler_chakra");
  collect_training_steps(dir);
  const ScriptRun run = run_script("chakra_check.py", std::string(OPTRACE_SOURCE_DIR) + "/../shared/consumers " + dir + "/host_et.0.json " + dir + "/chakra");
  if (run.status == 77) OPTRACE_SKIP(run.first_line());
  INFO(run.out);
  CHECK(run.status == 0);
}

TEST_CASE("profiler: misuse errors", "[profiler]") {
  CHECK_THROWS_WITH(optrace::Profiler(optrace::ProfilerOptions().schedule(optrace::Schedule().active(0))),
                    "optrace: ArgumentError: Schedule: wait, warmup, repeat and skip_first must be >= 0 and active > 0, "
                    "got wait=0 warmup=0 active=0 repeat=0 skip_first=0");
  {
    optrace::Profiler first;
    CHECK_THROWS_WITH(optrace::Profiler(), "optrace: Error: another Profiler is active; stop it first");
    CHECK_THROWS_WITH(first.start(), "optrace: Error: this Profiler is already started");
  }
  {
    optrace::OpTracer tracer;
    tracer.start();
    CHECK_THROWS_WITH(optrace::Profiler(), "optrace: Error: an OpTracer is recording; stop it before starting a Profiler");
  }
  CHECK_THROWS_WITH(optrace::Profiler(optrace::ProfilerOptions().execution_trace("et.json.gz")),
                    "optrace: ArgumentError: execution_trace 'et.json.gz': Chakra reads the execution trace as plain JSON; drop the .gz");
  CHECK_THROWS_WITH(optrace::Profiler(optrace::ProfilerOptions().execution_trace("/proc/version/et.json")),
                    "optrace: IoError: execution_trace '/proc/version/et.json': cannot write in folder '/proc/version'");
  optrace::Profiler after;  // the failed ones left nothing active
  after.stop();
  CHECK_THROWS_WITH(optrace::tensorboard_trace_handler("/proc/version/traces"),
                    OPTRACE_STARTS_WITH("optrace: IoError: tensorboard_trace_handler: cannot make folder '/proc/version/traces'"));
  optrace::Profiler fresh;
  CHECK_THROWS_WITH(fresh.export_chrome_trace(optrace_test::temp_path("never.json")),
                    "optrace: Error: export_chrome_trace: no trace has finished yet (stop() first)");
  fresh.stop();
  CHECK_THROWS_WITH(fresh.step(), "optrace: Error: step() on a Profiler that is not started");
  // A failing handler: stop() rethrows its error.
  optrace::Profiler failing(optrace::ProfilerOptions().on_trace_ready(
      [](const optrace::ProfilerTrace&) { throw optrace::IoError("disk full"); }));
  CHECK_THROWS_WITH(failing.stop(), "optrace: IoError: disk full");
}

}  // namespace profiler_test
