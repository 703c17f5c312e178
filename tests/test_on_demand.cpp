// Tests for optrace/on_demand.hpp: Kineto's on-demand keys and rules, windows opened by a trigger
// file or a request in a running loop, nothing installed while idle, and the trigger file and the
// paths it names read as hostile.
#include <optrace/detail/common/io.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/on_demand.hpp>

#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <csignal>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "optrace_catch.hpp"

namespace on_demand_test {

namespace fs = std::filesystem;
using optrace::OnDemandOptions;
using optrace::OnDemandProfiler;
using optrace::OnDemandRequest;

std::string fresh_dir(const std::string& name) {
  const std::string dir = optrace_test::temp_path("on_demand/" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_config(const std::string& path, const std::string& text, mode_t mode = 0600) {
  const std::string tmp = path + ".new";
  {
    std::ofstream out(tmp);
    out << text;
  }
  ::chmod(tmp.c_str(), mode);
  fs::rename(tmp, path);
}

// One step of work with a few ops.
void work() {
  torch::NoGradGuard no_grad;
  auto a = torch::randn({16, 16});
  (void)torch::relu(torch::mm(a, a));
}

// The names of the "ProfilerStep#N" ranges of a trace file, in order, and whether `op` is in it.
std::vector<std::string> profiler_steps(const std::string& path, bool* has_mm = nullptr) {
  auto doc = optrace::json::Document::parse(optrace::detail::read_file_maybe_gzip(path));
  std::vector<std::string> steps;
  for (optrace::json::Node e : doc->root()["traceEvents"].array()) {
    optrace::json::Node name(e);
    if (!e.find("name", name) || !name.is_string()) continue;
    const std::string n(name.as_string());
    if (n.rfind("ProfilerStep#", 0) == 0) steps.push_back(n);
    if (has_mm != nullptr && n == "aten::mm") *has_mm = true;
  }
  return steps;
}

bool said(const OnDemandProfiler& od, const std::string& part) {
  for (const std::string& m : od.messages())
    if (m.find(part) != std::string::npos) return true;
  return false;
}

// Polls `done` for up to 20 s.
template <class Done>
bool eventually(Done done) {
  for (int i = 0; i < 2000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return done();
}

TEST_CASE("on demand: Kineto's on-demand keys are read as Kineto reads them", "[on_demand]") {
  std::vector<std::string> ignored;
  OnDemandRequest r = OnDemandRequest::parse(
      "# dyno gputrace\n PROFILE_START_ITERATION_ROUNDUP = 20\nACTIVITIES_ITERATIONS=3\n\n"
      "PROFILE_REPORT_INPUT_SHAPES=true\nPROFILE_PROFILE_MEMORY=0\nPROFILE_WITH_STACK=TRUE\n"
      "ACTIVITIES_LOG_FILE=run/trace.json\nACTIVITY_TYPES=cpu_op,user_annotation,kernel\n"
      "ACTIVITIES_WARMUP_PERIOD_SECS=5\nVERBOSE_LOG_LEVEL=1\n",
      &ignored);
  CHECK(r.by_iteration());
  CHECK(r.start_iteration == 0);  // a roundup alone starts at iteration 0 (Kineto's validate())
  CHECK(r.start_iteration_roundup == 20);
  CHECK(r.iterations == 3);
  CHECK(r.record_shapes == true);
  CHECK(r.profile_memory == false);
  CHECK(r.with_stack == true);
  CHECK(r.log_file == "run/trace.json");
  CHECK(r.device_activity == true);
  CHECK(ignored == std::vector<std::string>{"ACTIVITIES_WARMUP_PERIOD_SECS", "VERBOSE_LOG_LEVEL"});

  OnDemandRequest d = OnDemandRequest::parse("PROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS=250\nACTIVITY_TYPES=cpu_op");
  CHECK_FALSE(d.by_iteration());
  CHECK(d.duration_ms == 250);
  CHECK(d.device_activity == false);
  CHECK(OnDemandRequest::parse("ACTIVITIES_DURATION_SECS=2").duration_ms == 2000);
  CHECK(OnDemandRequest::parse("").duration_ms == 500);  // Kineto's default duration
  // Iterations alone: from the next step (where Kineto would make a 500 ms window).
  OnDemandRequest it = OnDemandRequest::parse("ACTIVITIES_ITERATIONS=2");
  CHECK(it.by_iteration());
  CHECK(it.start_iteration == 0);
  // The iteration keys take precedence over the time keys, as in Kineto.
  CHECK(OnDemandRequest::parse("PROFILE_START_TIME=0\nPROFILE_START_ITERATION=7\nACTIVITIES_ITERATIONS=1").by_iteration());
}

TEST_CASE("on demand: a bad on-demand value is one line naming the key and the value", "[on_demand]") {
  const std::pair<const char*, const char*> cases[] = {
      {"ACTIVITIES_ITERATIONS=three", "ACTIVITIES_ITERATIONS=three: expected an integer from 0 to 1000000000000"},
      {"PROFILE_START_ITERATION_ROUNDUP=0", "PROFILE_START_ITERATION_ROUNDUP=0: expected an integer from 1"},
      {"PROFILE_START_ITERATION=-1", "PROFILE_START_ITERATION=-1: expected an integer from 0"},
      {"ACTIVITIES_DURATION_MSECS=0", "ACTIVITIES_DURATION_MSECS=0: expected an integer from 1 to 604800000"},
      {"ACTIVITIES_DURATION_MSECS=99999999999999999999", "expected an integer from 1"},
      {"ACTIVITIES_DURATION_SECS=9223372036854775807", "ACTIVITIES_DURATION_SECS=9223372036854775807: expected an integer from 1 to 604800"},
      {"PROFILE_REPORT_INPUT_SHAPES=maybe", "PROFILE_REPORT_INPUT_SHAPES=maybe: expected true or false"},
      {"ACTIVITY_TYPES=cpu_op,kernels", "ACTIVITY_TYPES: unknown activity 'kernels'"},
      {"ACTIVITIES_LOG_FILE=", "ACTIVITIES_LOG_FILE is empty"},
      {"ACTIVITIES_ITERATIONS=3\nrm -rf /", "line 2 is not KEY=VALUE: 'rm -rf /'"},
  };
  for (const auto& [text, message] : cases) {
    INFO(text);
    try {
      OnDemandRequest::parse(text);
      FAIL("no error");
    } catch (const optrace::ArgumentError& e) {
      const std::string what = e.what();
      CHECK_THAT(what, OPTRACE_CONTAINS(message));
      CHECK(what.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("on demand: an iteration window starts where Kineto starts it", "[on_demand]") {
  using optrace::detail::on_demand::window_start;
  CHECK(window_start(2010, 0, 1000) == 3000);  // Kineto's own example (Config.cpp)
  CHECK(window_start(7, 0, 20) == 20);
  CHECK(window_start(20, 0, 20) == 20);  // on a multiple: now
  CHECK(window_start(21, 0, 20) == 40);
  CHECK(window_start(5, 12, 20) == 12);  // a start ahead is kept, not rounded
  CHECK(window_start(15, 12, 0) == 15);  // a start passed, no roundup: now
  CHECK(window_start(15, 12, 4) == 16);
}

TEST_CASE("on demand: OnDemandProfiler records the requested steps and nothing while idle", "[on_demand]") {
  const std::string dir = fresh_dir("iterations");
  OnDemandProfiler od(OnDemandOptions().output_dir(dir).worker_name("w"));
  for (int i = 0; i < 3; ++i) {
    work();
    od.step();
  }
  CHECK_FALSE(at::hasGlobalCallbacks());  // idle: nothing installed
  OnDemandRequest r;
  r.start_iteration = 0;
  r.start_iteration_roundup = 5;
  r.iterations = 3;
  od.request(r);
  bool recording_seen = false;
  for (int i = 3; i < 12; ++i) {
    work();
    if (od.step_num() >= 5 && od.step_num() < 8) recording_seen = recording_seen || at::hasGlobalCallbacks();
    od.step();
  }
  od.flush();
  CHECK(recording_seen);
  CHECK_FALSE(at::hasGlobalCallbacks());
  const std::vector<std::string> traces = od.traces();
  REQUIRE(traces.size() == 1);
  CHECK(fs::path(traces[0]).parent_path() == fs::canonical(dir));
  CHECK_THAT(fs::path(traces[0]).filename().string(), OPTRACE_STARTS_WITH("w."));
  bool has_mm = false;
  CHECK(profiler_steps(traces[0], &has_mm) == std::vector<std::string>{"ProfilerStep#5", "ProfilerStep#6", "ProfilerStep#7"});
  CHECK(has_mm);
  CHECK(said(od, "request: steps 5..7 (now at step 4)"));
}

TEST_CASE("on demand: OnDemandProfiler serves each new content of the trigger file once", "[on_demand]") {
  const std::string dir = fresh_dir("trigger");
  const std::string config = dir + "/trigger.conf";
  OnDemandProfiler od(OnDemandOptions()
                          .config_file(config)
                          .poll_interval(std::chrono::milliseconds(10))
                          .output_dir(dir + "/traces")
                          .use_gzip(true));
  const std::string request = "PROFILE_START_ITERATION_ROUNDUP=4\nACTIVITIES_ITERATIONS=2\nFOO=1\n";
  write_config(config, request);
  // Step until the window has come and gone, a little at a time (the poller reads every 10 ms).
  auto run_until = [&](size_t traces) {
    return eventually([&] {
      work();
      od.step();
      return od.traces().size() >= traces;
    });
  };
  REQUIRE(run_until(1));
  const int64_t after_first = od.step_num();
  // The same content again is no new request ...
  write_config(config, request);
  for (int i = 0; i < 30; ++i) {
    work();
    od.step();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  CHECK(od.traces().size() == 1);
  // ... a new content is, and so is the same content after the file was removed.
  write_config(config, request + "# again\n");
  REQUIRE(run_until(2));
  fs::remove(config);
  for (int i = 0; i < 10; ++i) {
    od.step();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  write_config(config, request);
  REQUIRE(run_until(3));
  od.flush();
  const std::vector<std::string> traces = od.traces();
  for (const std::string& t : traces) {
    INFO(t);
    CHECK_THAT(t, Catch::Matchers::EndsWith(".pt.trace.json.gz"));
    const std::vector<std::string> steps = profiler_steps(t);
    REQUIRE(steps.size() == 2);
    const int64_t first = std::stoll(steps[0].substr(13));
    CHECK(first % 4 == 0);
    CHECK(steps[1] == "ProfilerStep#" + std::to_string(first + 1));
  }
  CHECK(after_first > 0);
  CHECK(said(od, "config keys that do not apply to optrace, ignored: FOO"));
}

TEST_CASE("on demand: a server without steps gets a duration window from the trigger file", "[on_demand]") {
  const std::string dir = fresh_dir("duration");
  const std::string config = dir + "/trigger.conf";
  OnDemandProfiler od(OnDemandOptions()
                          .config_file(config)
                          .poll_interval(std::chrono::milliseconds(10))
                          .output_dir(dir + "/traces")
                          .worker_name("server"));
  // libtorch's default generator is made on first use, behind a static that TSan (libtorch is not
  // instrumented) cannot see guarded: made here first, so the serving threads only use it.
  work();
  std::atomic<bool> stop{false};
  std::vector<std::thread> servers;
  for (int t = 0; t < 3; ++t)
    servers.emplace_back([&] {
      while (!stop.load()) work();
    });
  write_config(config, "PROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS=200\nACTIVITIES_LOG_FILE=served/window.json\n");
  const bool written = eventually([&] { return !od.traces().empty(); });
  stop = true;
  for (auto& s : servers) s.join();
  REQUIRE(written);
  const std::string trace = od.traces()[0];
  CHECK(trace == (fs::canonical(dir + "/traces") / "served" / "window.json").string());
  bool has_mm = false;
  CHECK(profiler_steps(trace, &has_mm).empty());
  CHECK(has_mm);
  // The served threads' ops, from more than one thread.
  auto doc = optrace::json::Document::parse(optrace::detail::read_file(trace));
  std::set<int64_t> tids;
  for (optrace::json::Node e : doc->root()["traceEvents"].array()) {
    optrace::json::Node name(e), tid(e);
    if (e.find("name", name) && name.is_string() && name.as_string() == "aten::mm" && e.find("tid", tid)) tids.insert(tid.as_int());
  }
  CHECK(tids.size() >= 2);
  CHECK(said(od, "recording 200 ms to "));
}

TEST_CASE("on demand: a trigger file others can write is ignored with one line", "[on_demand]") {
  const std::string dir = fresh_dir("writable");
  const std::string config = dir + "/trigger.conf";
  OnDemandProfiler od(OnDemandOptions().config_file(config).poll_interval(std::chrono::milliseconds(10)).output_dir(dir + "/t"));
  write_config(config, "ACTIVITIES_ITERATIONS=1\n", 0620);
  REQUIRE(eventually([&] { return said(od, "writable by its group or others"); }));
  for (int i = 0; i < 10; ++i) {
    od.step();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK_FALSE(at::hasGlobalCallbacks());
  od.flush();
  CHECK(od.traces().empty());
  int lines = 0;
  for (const std::string& m : od.messages()) lines += m.find("writable by its group") != std::string::npos ? 1 : 0;
  CHECK(lines == 1);  // said once, not at every poll
}

TEST_CASE("on demand: a trigger file owned by another user is ignored with one line", "[on_demand]") {
  if (::geteuid() != 0) OPTRACE_SKIP("needs root, to give the trigger file to another user (CI runs as root)");
  const std::string dir = fresh_dir("owner");
  const std::string config = dir + "/trigger.conf";
  write_config(config, "ACTIVITIES_ITERATIONS=1\n");
  REQUIRE(::chown(config.c_str(), 65534, 65534) == 0);
  OnDemandProfiler od(OnDemandOptions().config_file(config).poll_interval(std::chrono::milliseconds(10)).output_dir(dir + "/t"));
  REQUIRE(eventually([&] { return said(od, "owned by user 65534"); }));
  od.step();
  od.flush();
  CHECK(od.traces().empty());
}

TEST_CASE("on demand: paths a request names stay inside the output folder and replace nothing", "[on_demand]") {
  const std::string dir = fresh_dir("paths");
  const std::string out = dir + "/traces";
  fs::create_directories(out);
  fs::create_directories(dir + "/elsewhere");
  fs::create_directory_symlink(dir + "/elsewhere", out + "/link");
  { std::ofstream(out + "/kept.json") << "mine"; }
  OnDemandProfiler od(OnDemandOptions().output_dir(out));
  const std::pair<std::string, std::string> cases[] = {
      {"../escape.json", "has '..'"},
      {"/tmp/optrace-escape.json", "is outside the output folder"},
      {"link/trace.json", "is a symbolic link"},
      {"kept.json", "exists and is kept"},
  };
  for (const auto& [file, message] : cases) {
    INFO(file);
    OnDemandRequest r;
    r.iterations = 1;
    r.start_iteration = 0;
    r.log_file = file;
    od.request(r);
    CHECK(said(od, message));
    od.step();
  }
  // Absolute inside the folder is fine.
  OnDemandRequest ok;
  ok.iterations = 1;
  ok.start_iteration = 0;
  ok.log_file = (fs::canonical(out) / "sub" / "ok.json").string();
  od.request(ok);
  work();
  od.step();
  work();
  od.step();
  od.flush();
  CHECK(od.traces() == std::vector<std::string>{ok.log_file});
  CHECK(fs::is_empty(dir + "/elsewhere"));
  CHECK_FALSE(fs::exists(dir + "/escape.json"));
  CHECK(optrace::detail::read_file(out + "/kept.json") == "mine");
}

// The request is checked when it comes; the trace is written seconds later, on the writer
// thread. A folder on the way swapped for a link in between must not take the trace elsewhere:
// the write goes through the folder opened when the window opened.
TEST_CASE("on demand: a folder swapped for a link before the write does not move the trace", "[on_demand]") {
  const std::string dir = fresh_dir("swap");
  const std::string out = dir + "/traces";
  fs::create_directories(out);
  fs::create_directories(dir + "/elsewhere");
  OnDemandProfiler od(OnDemandOptions().output_dir(out));
  OnDemandRequest r;
  r.iterations = 1;
  r.start_iteration = 0;
  r.log_file = "sub/trace.json";
  od.request(r);
  od.step();  // the window opens: sub/ is made and held
  REQUIRE(said(od, "recording steps"));
  work();
  fs::rename(out + "/sub", out + "/moved");
  fs::create_directory_symlink(dir + "/elsewhere", out + "/sub");
  od.step();
  od.flush();
  CHECK(fs::is_empty(dir + "/elsewhere"));
  CHECK(profiler_steps(out + "/moved/trace.json").size() == 1);
}

TEST_CASE("on demand: a trace that cannot be written stops the window, not the job", "[on_demand]") {
  const std::string dir = fresh_dir("full");
  // A file-size limit stands in for a full disk: the write fails (EFBIG) where it would (ENOSPC).
  struct rlimit before {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &before) == 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  {
    OnDemandProfiler od(OnDemandOptions().output_dir(dir));
    OnDemandRequest r;
    r.iterations = 2;
    r.start_iteration = 0;
    od.request(r);
    struct rlimit small = before;
    small.rlim_cur = 512;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    for (int i = 0; i < 4; ++i) {
      work();
      od.step();
    }
    od.flush();
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &before) == 0);
    CHECK(od.traces().empty());
    CHECK(said(od, "a window's trace was not written"));
    // The job goes on, and the next window is written.
    od.request(r);
    for (int i = 0; i < 4; ++i) {
      work();
      od.step();
    }
    od.flush();
    CHECK(od.traces().size() == 1);
  }
  std::signal(SIGXFSZ, old_handler);
  ::setrlimit(RLIMIT_FSIZE, &before);
  for (const auto& entry : fs::directory_iterator(dir))
    CHECK_THAT(entry.path().filename().string(), !OPTRACE_CONTAINS(".tmp."));  // no partial file left
}

TEST_CASE("on demand: flush() closes the open window and drops one not started, saying so", "[on_demand]") {
  const std::string dir = fresh_dir("flush");
  OnDemandProfiler od(OnDemandOptions().output_dir(dir).worker_name("f"));
  OnDemandRequest r;
  r.start_iteration = 2;
  r.iterations = 5;
  od.request(r);
  od.request(r);  // one window at a time
  CHECK(said(od, "a window is already open or waiting"));
  for (int i = 0; i < 4; ++i) {
    work();
    od.step();
  }
  od.flush();
  REQUIRE(od.traces().size() == 1);
  CHECK(profiler_steps(od.traces()[0]) == std::vector<std::string>{"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"});
  CHECK(said(od, "flush(): the window of steps 2..6 closes at step 4"));
  r.start_iteration = 100;
  od.request(r);
  od.step();
  od.flush();
  CHECK(said(od, "a requested window that had not started is dropped"));
  CHECK(od.traces().size() == 1);
}

TEST_CASE("on demand: OnDemandOptions that cannot work are one line", "[on_demand]") {
  CHECK_THROWS_WITH(OnDemandProfiler(OnDemandOptions()), OPTRACE_CONTAINS("output_dir is required"));
  const std::string dir = fresh_dir("options");
  CHECK_THROWS_WITH(OnDemandProfiler(OnDemandOptions().output_dir(dir).execution_trace_dir(dir)),
                    OPTRACE_CONTAINS("execution_trace_dir must be another folder"));
  { std::ofstream(dir + "/file") << "x"; }
  CHECK_THROWS_AS(OnDemandProfiler(OnDemandOptions().output_dir(dir + "/file/sub")), optrace::IoError);
}

}  // namespace on_demand_test
