// Tests for optrace/on_demand.hpp: Kineto's on-demand keys and rules, windows opened by a trigger
// file or a request in a running loop, nothing installed while idle, and the trigger file and the
// paths it names read as hostile.
#include <optrace/detail/common/io.hpp>
#include <optrace/execution_replay.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/on_demand.hpp>
#include <optrace/rank_summary.hpp>

#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
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
  optrace::detail::remove_tree(dir);
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

// A window of `iterations` steps from step `start`.
OnDemandRequest steps_request(int64_t start, int64_t iterations, int64_t roundup = 0) {
  OnDemandRequest r;
  r.start_iteration = start;
  r.iterations = iterations;
  r.start_iteration_roundup = roundup;
  return r;
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

TEST_CASE("on demand: a bad on-demand value is one line naming the key, never the value", "[on_demand]") {
  // The file may be anything a link or a mistake points at (a password file): no value, no line of
  // it reaches the job's log.
  const std::pair<const char*, const char*> cases[] = {
      {"ACTIVITIES_ITERATIONS=three", "ACTIVITIES_ITERATIONS: expected an integer from 0 to 1000000000000"},
      {"PROFILE_START_ITERATION_ROUNDUP=0", "PROFILE_START_ITERATION_ROUNDUP: expected an integer from 1"},
      {"PROFILE_START_ITERATION=-1", "PROFILE_START_ITERATION: expected an integer from 0"},
      {"ACTIVITIES_DURATION_MSECS=0", "ACTIVITIES_DURATION_MSECS: expected an integer from 1 to 604800000"},
      {"ACTIVITIES_DURATION_MSECS=99999999999999999999", "expected an integer from 1"},
      {"ACTIVITIES_DURATION_SECS=9223372036854775807", "ACTIVITIES_DURATION_SECS: expected an integer from 1 to 604800"},
      {"PROFILE_REPORT_INPUT_SHAPES=maybe", "PROFILE_REPORT_INPUT_SHAPES: expected true or false"},
      {"OPTRACE_CANCEL=please", "OPTRACE_CANCEL: expected true or false"},
      {"ACTIVITY_TYPES=cpu_op,kernels", "ACTIVITY_TYPES: an activity Kineto does not name"},
      {"ACTIVITIES_LOG_FILE=", "ACTIVITIES_LOG_FILE is empty"},
      {"ACTIVITIES_ITERATIONS=3\nrm -rf /", "line 2 is not KEY=VALUE"},
      {"db.example:5432:prod:admin:s3cret", "line 1 is not KEY=VALUE"},
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
      const std::string t = text;
      const std::string value = t.substr(t.find_last_of("=\n") + 1);
      if (value.size() >= 4) CHECK(what.find(value) == std::string::npos);  // shorter ones (0, -1) are in the limits
    }
  }
  // Keys that are not names are listed by their line, not their text.
  std::vector<std::string> ignored;
  OnDemandRequest::parse("ACTIVITIES_ITERATIONS=1\npassword = hunter2\nVERBOSE_LOG_LEVEL=1\n", &ignored);
  CHECK(ignored == std::vector<std::string>{"line 2", "VERBOSE_LOG_LEVEL"});
  CHECK(OnDemandRequest::parse("OPTRACE_CANCEL=1").cancel);
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

// The execution trace is written later still (when the finished window is joined): through the
// folder opened when the window opened too.
TEST_CASE("on demand: an execution trace folder swapped for a link does not move the execution trace", "[on_demand]") {
  const std::string dir = fresh_dir("swap_et");
  fs::create_directories(dir + "/elsewhere");
  OnDemandProfiler od(OnDemandOptions().output_dir(dir + "/traces").execution_trace_dir(dir + "/et").worker_name("w"));
  od.request(steps_request(0, 1));
  od.step();
  REQUIRE(said(od, "recording steps"));
  work();
  fs::rename(dir + "/et", dir + "/et_moved");
  fs::create_directory_symlink(dir + "/elsewhere", dir + "/et");
  od.step();
  od.flush();
  CHECK(fs::is_empty(dir + "/elsewhere"));
  std::vector<std::string> kept;
  for (const auto& e : fs::directory_iterator(dir + "/et_moved")) kept.push_back(e.path().filename().string());
  REQUIRE(kept.size() == 1);
  CHECK_THAT(kept[0], OPTRACE_STARTS_WITH("w."));
  CHECK(optrace::json::Document::parse(optrace::detail::read_file(dir + "/et_moved/" + kept[0]))->root()["nodes"].array().size() > 1);
}

TEST_CASE("on demand: a window's execution trace replays with its Kineto trace, every call timed against its record",
          "[on_demand][replay]") {
  const std::string dir = fresh_dir("window_replay");
  OnDemandProfiler od(OnDemandOptions().output_dir(dir + "/traces").execution_trace_dir(dir + "/et").worker_name("w").profiler(
      optrace::ProfilerOptions().record_shapes(true)));
  od.request(steps_request(0, 2));
  for (int i = 0; i < 3; ++i) {
    work();
    od.step();
  }
  od.flush();
  REQUIRE(od.traces().size() == 2);  // the Kineto trace and the execution trace, one name
  std::string kineto = od.traces()[0], et = od.traces()[1];
  if (et.find("/et/") == std::string::npos) std::swap(kineto, et);
  const std::string kineto_name = fs::path(kineto).filename().string(), suffix = ".pt.trace.json";
  REQUIRE(kineto_name.size() > suffix.size());
  CHECK(fs::path(et).filename().string() == kineto_name.substr(0, kineto_name.size() - suffix.size()) + ".et.json");
  const auto r = optrace::replay_execution_trace(et, optrace::ReplayOptions().device(c10::kCPU).progress(false), kineto);
  INFO(r.summary());
  CHECK(r.nodes.size() >= 6);  // randn, mm, relu per step
  CHECK(r.count(optrace::ReplayStatus::ok) == static_cast<int64_t>(r.nodes.size()));
  CHECK(r.recorded_nodes == static_cast<int64_t>(r.nodes.size()));
  CHECK(r.shared_inputs > 0);  // relu reads mm's output
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
  CHECK(said(od, "request ignored: a request waits for the next step (one window at a time; a cancel ends it)"));
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

TEST_CASE("on demand: a request that would start too far ahead is refused, and the next one is served", "[on_demand]") {
  const std::string dir = fresh_dir("far_ahead");
  const std::string config = dir + "/trigger.conf";
  OnDemandProfiler od(OnDemandOptions().config_file(config).poll_interval(std::chrono::milliseconds(10)).output_dir(dir + "/t"));
  const int64_t now_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  write_config(config, "PROFILE_START_TIME=" + std::to_string(now_us) + "\n");  // microseconds by mistake
  REQUIRE(eventually([&] { return said(od, "is more than 24 h ahead"); }));
  write_config(config, "PROFILE_START_ITERATION=1000000000000\nACTIVITIES_ITERATIONS=1\n");
  REQUIRE(eventually([&] { return said(od, "would start at step 1000000000000"); }));
  // Neither holds the one window slot: a valid request is served.
  write_config(config, "ACTIVITIES_ITERATIONS=2\n");
  REQUIRE(eventually([&] {
    work();
    od.step();
    return od.traces().size() == 1;
  }));
  od.flush();
  CHECK(profiler_steps(od.traces()[0]).size() == 2);
}

TEST_CASE("on demand: a request left in the trigger file before the job started is not served", "[on_demand]") {
  const std::string dir = fresh_dir("leftover");
  const std::string config = dir + "/trigger.conf";
  write_config(config, "ACTIVITIES_ITERATIONS=2\n");
  OnDemandProfiler od(OnDemandOptions().config_file(config).poll_interval(std::chrono::milliseconds(10)).output_dir(dir + "/t"));
  CHECK(said(od, "already holds a request as the profiler starts: not served"));
  for (int i = 0; i < 20; ++i) {
    od.step();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK_FALSE(at::hasGlobalCallbacks());
  CHECK(od.traces().empty());
  write_config(config, "ACTIVITIES_ITERATIONS=2\n# now\n");  // a new request is
  REQUIRE(eventually([&] {
    work();
    od.step();
    return od.traces().size() == 1;
  }));
}

TEST_CASE("on demand: a trigger file reached through a link, or in a folder others can write, is refused unread", "[on_demand]") {
  const std::string dir = fresh_dir("trigger_links");
  const std::string secret = dir + "/secret/pgpass";
  fs::create_directories(dir + "/secret");
  // What the job sees once it runs: `place` puts the trigger file there after it started.
  auto messages_of = [&](const std::string& config, const std::function<void()>& place, const std::string& expected) {
    OnDemandProfiler od(OnDemandOptions().config_file(config).poll_interval(std::chrono::milliseconds(10)).output_dir(dir + "/t"));
    place();
    const bool seen = eventually([&] { return said(od, expected); });
    od.flush();
    std::string all;
    for (const std::string& m : od.messages()) all += m + "\n";
    INFO(all);
    CHECK(seen);
    CHECK(all.find("s3cret") == std::string::npos);
    CHECK(all.find("admin") == std::string::npos);
    CHECK(od.traces().empty());
  };
  const std::string pgpass = "db.example:5432:prod:admin:s3cret\n";
  write_config(secret, pgpass);  // 0600, the job's user's: it passes the owner and mode checks
  messages_of(dir + "/symlink.conf", [&] { fs::create_symlink(secret, dir + "/symlink.conf"); },
              "a symbolic link: the trigger file is read only as itself");
  messages_of(dir + "/hard.conf", [&] { fs::create_hard_link(secret, dir + "/hard.conf"); }, "it has 2 names (hard links)");
  // The file itself, read: a parse error names the line, not its text.
  messages_of(dir + "/plain.conf", [&] { write_config(dir + "/plain.conf", pgpass); }, "line 1 is not KEY=VALUE");
  const std::string open_dir = dir + "/open";
  fs::create_directories(open_dir);
  ::chmod(open_dir.c_str(), 0777);
  messages_of(open_dir + "/trigger.conf", [&] { write_config(open_dir + "/trigger.conf", "ACTIVITIES_ITERATIONS=1\n"); },
              "writable by its group or others and not sticky");
  ::chmod(open_dir.c_str(), 01777);  // sticky, as /tmp: others cannot replace the job's file
  OnDemandProfiler od(OnDemandOptions().config_file(open_dir + "/trigger.conf").output_dir(dir + "/t"));
  CHECK(said(od, "already holds a request"));  // read
}

TEST_CASE("on demand: a cancel drops a waiting request or closes the open window", "[on_demand]") {
  const std::string dir = fresh_dir("cancel");
  const std::string config = dir + "/trigger.conf";
  OnDemandProfiler od(OnDemandOptions().config_file(config).poll_interval(std::chrono::milliseconds(10)).output_dir(dir + "/t"));
  OnDemandRequest r;
  r.start_iteration = 1000;
  r.iterations = 3;
  od.request(r);
  od.step();
  write_config(config, "OPTRACE_CANCEL=1\n");
  REQUIRE(eventually([&] { return said(od, "cancel: dropped (a window of steps waits for its first step)"); }));
  r.start_iteration = 0;
  r.iterations = 1000;
  od.request(r);  // the slot is free again
  for (int i = 0; i < 3; ++i) {
    work();
    od.step();
  }
  od.cancel();  // from this thread, as from a control channel's: the window closes at the next step
  CHECK(said(od, "cancel: the window of steps 2..1001 closes at the next step, with the steps recorded so far"));
  CHECK(at::hasGlobalCallbacks());
  work();
  od.step();
  CHECK_FALSE(at::hasGlobalCallbacks());
  od.flush();
  REQUIRE(od.traces().size() == 1);
  CHECK(profiler_steps(od.traces()[0]) == std::vector<std::string>{"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"});
  CHECK_FALSE(at::hasGlobalCallbacks());
}

TEST_CASE("on demand: steps from several threads are all counted", "[on_demand]") {
  OnDemandProfiler od(OnDemandOptions().output_dir(fresh_dir("threads")));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 100000; ++i) od.step();
    });
  for (auto& t : threads) t.join();
  CHECK(od.step_num() == 400000);
}

TEST_CASE("on demand: messages keep the last kMaxMessages lines", "[on_demand]") {
  OnDemandProfiler od(OnDemandOptions().output_dir(fresh_dir("messages")));
  for (int i = 0; i < 1100; ++i) od.cancel();  // each says "cancel: nothing was asked"
  OnDemandRequest r;
  r.log_file = "../out.json";
  od.request(r);
  const std::vector<std::string> m = od.messages();
  CHECK(m.size() == OnDemandProfiler::kMaxMessages);
  CHECK_THAT(m.back(), OPTRACE_CONTAINS("has '..'"));
  CHECK(m.front() == "cancel: nothing was asked");
}

TEST_CASE("on demand: a duration window is closed by the polling thread that opened it, also on flush() and destruction", "[on_demand]") {
  // libtorch's profiler must be stopped on the thread that started it (with CUDA activities it
  // throws or crashes otherwise); the OnDemandProfiler says when a window closes elsewhere.
  const std::string dir = fresh_dir("closing_thread");
  OnDemandRequest r;
  r.duration_ms = 60000;
  {
    OnDemandProfiler od(OnDemandOptions().output_dir(dir).worker_name("a"));
    od.request(r);
    REQUIRE(eventually([&] { return said(od, "recording 60000 ms"); }));
    od.flush();
    CHECK(said(od, "flush(): the duration window closes early"));
    CHECK_FALSE(said(od, "closes on another thread"));
    CHECK(od.traces().size() == 1);
    CHECK_FALSE(at::hasGlobalCallbacks());
    od.request(r);
    REQUIRE(eventually([&] { return said(od, "recording 60000 ms") && at::hasGlobalCallbacks(); }));
  }  // the destructor, with the window open
  CHECK_FALSE(at::hasGlobalCallbacks());
  size_t written = 0;
  for (const auto& e : fs::directory_iterator(dir)) written += e.path().string().find(".pt.trace.json") != std::string::npos;
  CHECK(written == 2);
  // A window of steps flushed from a thread that does not step: closed there, and said. What the
  // window put on the stepping thread (the memory reporter, as libtorch's CUDA profiler state)
  // only that thread can pop: it stays until its next step.
  OnDemandProfiler od(OnDemandOptions().output_dir(dir).worker_name("b"));
  OnDemandRequest with_memory = steps_request(0, 100);
  with_memory.profile_memory = true;
  od.request(with_memory);
  od.step();
  auto profiler_state = [] { return c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE); };
  CHECK(profiler_state() != nullptr);
  std::thread([&] { od.flush(); }).join();
  CHECK(said(od, "the window closes on another thread than the one that opened it"));
  CHECK(od.traces().size() == 1);
  CHECK(said(od, "the window's profiler state stays on the thread that opened it until that thread's next step()"));
  CHECK(profiler_state() != nullptr);
  od.step();
  CHECK(profiler_state() == nullptr);
  CHECK(said(od, "released at step 2"));
}

// The kernels of a trace file.
int kernels_in(const std::string& path) {
  auto doc = optrace::json::Document::parse(optrace::detail::read_file_maybe_gzip(path));
  int kernels = 0;
  for (optrace::json::Node e : doc->root()["traceEvents"].array()) {
    optrace::json::Node cat(e);
    kernels += e.find("cat", cat) && cat.is_string() && cat.as_string() == "kernel" ? 1 : 0;
  }
  return kernels;
}

// The same windows with the CUDA activity (tests/gpu/run.sh): libtorch's profiler starts and stops
// on the thread that opened the window, the kernels are in its trace, and a window closed on
// another thread neither throws nor leaves libtorch's profiler running.
TEST_CASE("on demand: windows with CUDA activity record kernels, and close on any thread without a crash", "[on_demand][cuda]") {
  if (!torch::cuda::is_available()) OPTRACE_SKIP("no CUDA device");
  auto gpu_work = [] {
    torch::NoGradGuard no_grad;
    auto a = torch::ones({256, 256}, torch::kCUDA);
    (void)torch::relu(torch::mm(a, a)).sum().cpu();
  };
  gpu_work();  // cuBLAS's handle made before recording
  const std::string dir = fresh_dir("cuda");
  auto cuda_request = [](OnDemandRequest r) {
    r.device_activity = true;
    return r;
  };
  auto files_of = [&](const std::string& worker) {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().rfind(worker + ".", 0) == 0) files.push_back(e.path().string());
    return files;
  };
  SECTION("a window of steps, closed by the stepping thread") {
    OnDemandProfiler od(OnDemandOptions().output_dir(dir).worker_name("steps"));
    od.request(cuda_request(steps_request(2, 3)));
    for (int i = 0; i < 8; ++i) {
      gpu_work();
      od.step();
    }
    od.flush();
    for (const std::string& m : od.messages()) UNSCOPED_INFO(m);
    REQUIRE(od.traces().size() == 1);
    CHECK(kernels_in(od.traces()[0]) >= 3 * 3);  // mm, relu, sum in each of the three steps
    CHECK_FALSE(said(od, "no kernels"));
  }
  SECTION("a duration window, opened by the polling thread and closed by it on destruction") {
    {
      OnDemandRequest r;
      r.duration_ms = 60000;
      OnDemandProfiler od(OnDemandOptions().output_dir(dir).worker_name("duration"));
      od.request(cuda_request(r));
      REQUIRE(eventually([&] { return said(od, "recording 60000 ms"); }));
      for (int i = 0; i < 5; ++i) gpu_work();
      torch::cuda::synchronize();
    }  // destroyed with the window open
    const std::vector<std::string> files = files_of("duration");
    REQUIRE(files.size() == 1);
    CHECK(kernels_in(files[0]) >= 5 * 3);
  }
  SECTION("a window of steps flushed from another thread: no kernels, said; released at the next step") {
    OnDemandProfiler od(OnDemandOptions().output_dir(dir).worker_name("elsewhere"));
    OnDemandRequest r = cuda_request(steps_request(0, 100));
    r.profile_memory = true;
    od.request(r);
    od.step();
    gpu_work();
    std::thread([&] { od.flush(); }).join();
    for (const std::string& m : od.messages()) UNSCOPED_INFO(m);
    CHECK(said(od, "this window has no kernels"));
    CHECK(said(od, "stays on the thread that opened it"));
    CHECK(od.traces().size() == 1);
    od.step();
    CHECK(c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE) == nullptr);
    CHECK(said(od, "released at step 2"));
    // libtorch's profiler is off again: the next window on this thread records kernels.
    od.request(cuda_request(steps_request(0, 2)));
    for (int i = 0; i < 5; ++i) {
      gpu_work();
      od.step();
    }
    od.flush();
    REQUIRE(od.traces().size() == 2);
    CHECK(kernels_in(od.traces()[1]) >= 3);
    CHECK_FALSE(said(od, "could not start"));
  }
}

// The state machine alone (detail/on_demand/scheduler.hpp): every transition, no threads.
namespace sched = optrace::detail::on_demand;

TEST_CASE("on demand: the scheduler places, opens and closes a window of steps", "[on_demand][scheduler]") {
  sched::Scheduler s;
  CHECK(!s.wants_steps());
  CHECK(s.on_request(steps_request(0, 3, 10), 4, 0, 0).lines.empty());
  CHECK(s.state() == sched::State::Pending);
  CHECK(s.wants_steps());
  sched::Actions a = s.on_step(5);  // placed at the next multiple of 10
  CHECK(s.state() == sched::State::Scheduled);
  CHECK(s.first_step() == 10);
  CHECK(s.end_step() == 13);
  REQUIRE(a.lines.size() == 1);
  CHECK(a.lines[0] == "request: steps 10..12 (now at step 5)");
  CHECK(!a.open);
  for (int64_t step = 6; step < 10; ++step) CHECK(!s.on_step(step).open);
  a = s.on_step(10);
  CHECK(a.open);
  CHECK(a.open_step == 10);
  CHECK(s.state() == sched::State::Recording);
  CHECK(!s.on_step(11).close);
  CHECK(!s.on_step(12).close);
  a = s.on_step(13);
  CHECK(a.close);
  CHECK(!a.open);
  CHECK(s.state() == sched::State::Idle);
  CHECK(!s.wants_steps());
}

TEST_CASE("on demand: the scheduler opens a window at once when its step has come", "[on_demand][scheduler]") {
  sched::Scheduler s;
  s.on_request(steps_request(0, 2), 7, 0, 0);
  sched::Actions a = s.on_step(8);
  CHECK(a.open);
  CHECK(a.open_step == 8);
  CHECK(a.lines.empty());
  CHECK(s.end_step() == 10);
  // A stepping thread past the first step (no step() between) opens where it is.
  sched::Scheduler t;
  t.on_request(steps_request(20, 2), 0, 0, 0);
  t.on_step(1);
  a = t.on_step(25);
  CHECK(a.open);
  CHECK(t.first_step() == 25);
  CHECK(t.end_step() == 27);
}

TEST_CASE("on demand: the scheduler runs a duration window by the clock", "[on_demand][scheduler]") {
  sched::Scheduler s;
  OnDemandRequest r;
  r.duration_ms = 300;
  r.start_time_ms = 1'000'500;  // wall ms: 500 ms ahead of wall 1'000'000
  CHECK(s.on_request(r, 3, 50, 1'000'000).lines.empty());
  CHECK(s.state() == sched::State::Waiting);
  CHECK(!s.wants_steps());
  CHECK(s.next_tick_ms() == 550);
  CHECK(!s.on_tick(549, 3).open);
  sched::Actions a = s.on_tick(560, 4);
  CHECK(a.open);
  CHECK(a.open_step == 4);
  CHECK(s.next_tick_ms() == 860);
  CHECK(!s.on_tick(859, 4).close);
  CHECK(s.on_tick(860, 4).close);
  CHECK(s.state() == sched::State::Idle);
  CHECK(s.next_tick_ms() == -1);
}

TEST_CASE("on demand: the scheduler refuses a start too far ahead, and stays free for the next request", "[on_demand][scheduler]") {
  sched::Scheduler s;
  const int64_t wall = 1'764'000'000'000;  // ms since the epoch, late 2025
  OnDemandRequest us;
  us.start_time_ms = wall * 1000;  // microseconds by mistake
  sched::Actions a = s.on_request(us, 0, 0, wall);
  REQUIRE(a.lines.size() == 1);
  CHECK_THAT(a.lines[0], OPTRACE_CONTAINS("PROFILE_START_TIME 1764000000000000 is more than 24 h ahead"));
  CHECK(s.state() == sched::State::Idle);
  OnDemandRequest max;
  max.start_time_ms = std::numeric_limits<int64_t>::max();
  CHECK_THAT(s.on_request(max, 0, 0, wall).lines.at(0), OPTRACE_CONTAINS("is more than 24 h ahead"));
  OnDemandRequest old;
  old.start_time_ms = wall - 10'001;
  CHECK_THAT(s.on_request(old, 0, 0, wall).lines.at(0), OPTRACE_CONTAINS("more than 10 s in the past"));
  a = s.on_request(steps_request(1'000'000'000'000, 1), 5, 0, wall);
  CHECK_THAT(a.lines.at(0), OPTRACE_CONTAINS("would start at step 1000000000000, 999999999995 steps ahead of step 5 (at most 1000000)"));
  a = s.on_request(steps_request(0, 1, 1'000'000'000'000), 5, 0, wall);
  CHECK_THAT(a.lines.at(0), OPTRACE_CONTAINS("would start at step 1000000000000"));
  CHECK(s.state() == sched::State::Idle);
  // The limits themselves are accepted.
  CHECK(s.on_request(steps_request(5 + 1 + sched::kMaxStepsAhead, 1), 5, 0, wall).lines.empty());
  CHECK(s.on_cancel().lines.at(0) == "cancel: dropped (a request waits for the next step)");
  OnDemandRequest day;
  day.start_time_ms = wall + sched::kMaxWaitMs;
  CHECK(s.on_request(day, 0, 0, wall).lines.empty());
  CHECK(s.next_tick_ms() == sched::kMaxWaitMs);
}

TEST_CASE("on demand: the scheduler takes one request at a time, and cancel and flush end it", "[on_demand][scheduler]") {
  sched::Scheduler s;
  s.on_request(steps_request(0, 5), 0, 0, 0);
  CHECK_THAT(s.on_request(steps_request(0, 5), 0, 0, 0).lines.at(0),
             OPTRACE_CONTAINS("request ignored: a request waits for the next step (one window at a time"));
  CHECK(s.on_step(1).open);
  CHECK_THAT(s.on_request(steps_request(0, 5), 1, 0, 0).lines.at(0), OPTRACE_CONTAINS("a window is open"));
  // A cancel closes the window on the stepping thread, at its next step, not on the canceller's.
  sched::Actions a = s.on_cancel();
  CHECK(!a.close);
  CHECK(a.lines.at(0) == "cancel: the window of steps 1..5 closes at the next step, with the steps recorded so far");
  CHECK(s.closing());
  CHECK(s.wants_steps());
  CHECK(s.on_step(4).close);
  CHECK(s.state() == sched::State::Idle);
  CHECK(s.on_cancel().lines.at(0) == "cancel: nothing was asked");
  CHECK(!s.on_flush(3).close);
  s.on_request(steps_request(50, 5), 3, 0, 0);
  s.on_step(4);
  a = s.on_flush(4);
  CHECK(!a.close);
  CHECK(a.lines.at(0) == "flush(): a requested window that had not started is dropped");
  OnDemandRequest r;
  s.on_request(r, 4, 0, 0);
  CHECK(s.on_tick(0, 4).open);
  a = s.on_flush(4);  // a duration window closes on the polling thread's next tick, due at once
  CHECK(!a.close);
  CHECK(a.lines.at(0) == "flush(): the duration window closes early");
  CHECK(s.next_tick_ms() == 0);
  CHECK(s.on_tick(1, 4).close);
  s.on_request(r, 4, 0, 0);
  s.on_tick(0, 4);
  s.on_window_failed();
  CHECK(s.state() == sched::State::Idle);
  // A duration window cancelled closes at the polling thread's next tick, due at once.
  s.on_request(r, 4, 100, 0);
  CHECK(s.on_tick(100, 4).open);
  CHECK(s.on_cancel().lines.at(0) == "cancel: the duration window closes now");
  CHECK(s.next_tick_ms() <= 100);
  CHECK(s.on_tick(101, 4).close);
  // A new window after a cancel is not closing.
  s.on_request(steps_request(0, 2), 4, 0, 0);
  CHECK(s.on_step(5).open);
  CHECK(!s.closing());
  CHECK(!s.on_step(6).close);
}

// The slow-step capture (OnDemandOptions::slow_steps).

namespace slow = optrace::detail::on_demand;

// A job's store in memory, as c10d's behaves for the calls optrace makes.
struct MemoryStore : optrace::RankStore {
  std::mutex m;
  std::map<std::string, std::string> kv;
  int64_t add(const std::string& key, int64_t delta) override {
    std::lock_guard<std::mutex> lock(m);
    auto it = kv.find(key);
    const int64_t v = (it == kv.end() ? 0 : std::stoll(it->second)) + delta;
    kv[key] = std::to_string(v);
    return v;
  }
  void set(const std::string& key, const std::string& value) override {
    std::lock_guard<std::mutex> lock(m);
    kv[key] = value;
  }
  std::string get(const std::string& key) override {
    std::lock_guard<std::mutex> lock(m);
    auto it = kv.find(key);
    if (it == kv.end()) throw std::runtime_error("no such key");
    return it->second;
  }
};

TEST_CASE("on demand: a step is slow against the median of the steps before it", "[on_demand][slow_steps]") {
  slow::StepTimes t(5, 3.0, 0);
  int64_t median = -1;
  for (int64_t ns : {10, 12, 11, 9, 10}) CHECK_FALSE(t.add(ns * 1000, &median));  // not judged before 5 steps
  CHECK(t.median() == 10000);
  CHECK_FALSE(t.add(30000, &median));  // 3 x the median is not more than 3 x
  CHECK(median == -1);
  CHECK_FALSE(t.add(33000, &median));  // the ring was 30, 12, 11, 9, 10 (the oldest replaced): median 11
  CHECK(t.add(33001, &median));        // against 30, 33, 11, 9, 10: median 11
  CHECK(median == 11000);
  // The slow steps are in the ring: one more does not make the next normal one slow.
  CHECK_FALSE(t.add(10000, &median));
  t.clear();
  CHECK(t.size() == 0);
  for (int k = 0; k < 4; ++k) CHECK_FALSE(t.add(1000, &median));
  CHECK_FALSE(t.add(1000000, &median));  // the 5th refills the ring: judged from the 6th
  CHECK(t.add(5000000, &median));
  // A floor: a step must also last min_ns.
  slow::StepTimes floor(3, 2.0, 1000000);
  for (int k = 0; k < 3; ++k) floor.add(100, nullptr);
  CHECK_FALSE(floor.add(999999, &median));
  CHECK(floor.add(1000000, &median));
}

TEST_CASE("on demand: a capture reads back from the store's text, and nothing else does", "[on_demand][slow_steps]") {
  const slow::Capture c{57, 312000000, 31000000, 1, 70, 3};
  const std::optional<slow::Capture> back = slow::Capture::from_text(c.to_text());
  REQUIRE(back);
  CHECK(back->to_text() == "1 57 312000000 31000000 1 70 3");
  CHECK(c.to_json(3) == "{\"trigger\": \"slow_step\", \"step\": 57, \"step_ms\": 312.000, \"median_ms\": 31.000, "
                        "\"factor\": 3, \"rank\": 1, \"first_step\": 70, \"iterations\": 3}");
  for (const char* bad : {"", "1", "2 57 312000000 31000000 1 70 3", "1 57 312000000 31000000 1 70 3 ", " 1 57 3 3 1 70 3",
                          "1 57 3 3 1 50 3", "1 57 3 3 1 -1 3", "1 57 3 3 1 70 0", "1 -1 3 3 1 70 3", "1 57 3 3 -2 70 3",
                          "1 57 3 3 1 70 1001000000000", "1 57 3 3 1 70 99999999999999999999", "1  57 3 3 1 70 3",
                          "1 57 3 3 1 70 3\n", "1 0x39 3 3 1 70 3"})
    CHECK_FALSE(slow::Capture::from_text(bad));
  // The ring's steps hold the slow step: they begin before it and end after it.
  const std::optional<slow::Capture> ring = slow::Capture::from_text("1 25 3 3 1 16 16");
  REQUIRE(ring);
  CHECK(ring->start == 16);
  CHECK(slow::Capture::from_text("1 25 3 3 1 25 1"));
}

TEST_CASE("on demand: one capture per slowdown: the first claim publishes, the ranks that saw it too do not", "[on_demand][slow_steps]") {
  MemoryStore store;
  int64_t g = 0;
  const slow::Capture first{57, 300, 100, 1, 70, 3};
  CHECK(slow::publish_capture(store, first, 0, 2, &g) == slow::Published::Yes);
  CHECK(g == 1);
  // Rank 0 waited in the all-reduce for rank 1: it saw step 57 slow too, and step 58.
  CHECK(slow::publish_capture(store, slow::Capture{57, 290, 100, 0, 69, 3}, 0, 2, &g) == slow::Published::Covered);
  CHECK(slow::publish_capture(store, slow::Capture{72, 290, 100, 0, 80, 3}, 0, 2, &g) == slow::Published::Covered);
  // Two ranks that read the same count: the second claim of capture 2 loses.
  store.add(std::string(slow::kStorePrefix) + "claim/2", 1);
  CHECK(slow::publish_capture(store, slow::Capture{200, 290, 100, 0, 210, 3}, 0, 2, &g) == slow::Published::Claimed);
  store.kv.erase(std::string(slow::kStorePrefix) + "claim/2");
  CHECK(slow::publish_capture(store, slow::Capture{200, 290, 100, 0, 210, 3}, 0, 2, &g) == slow::Published::Yes);
  CHECK(g == 2);
  CHECK(slow::publish_capture(store, slow::Capture{900, 290, 100, 0, 910, 3}, 0, 2, &g) == slow::Published::Limit);
  CHECK(slow::publish_capture(store, slow::Capture{201, 290, 100, 0, 215, 3}, 0, 2, &g) == slow::Published::Covered);
  // A run of the job started on this store after those two: their steps are another run's, and
  // cover nothing of this one's; this run may publish two more.
  CHECK(slow::publish_capture(store, slow::Capture{57, 290, 100, 0, 69, 3}, 2, 4, &g) == slow::Published::Yes);
  CHECK(g == 3);
  store.kv.erase(std::string(slow::kStorePrefix) + "3");  // (read below as the first run's two)
  store.add(std::string(slow::kStorePrefix) + "count", -1);
  // Every rank reads them in order, once; a text that is not a capture is counted, not served.
  int64_t seen = 0, unreadable = 0;
  std::vector<slow::Capture> read = slow::read_captures(store, &seen, &unreadable);
  REQUIRE(read.size() == 2);
  CHECK(read[0].step == 57);
  CHECK(read[1].step == 200);
  CHECK(seen == 2);
  CHECK(slow::read_captures(store, &seen, &unreadable).empty());
  store.set(std::string(slow::kStorePrefix) + "3", "not a capture");
  store.add(std::string(slow::kStorePrefix) + "count", 1);
  CHECK(slow::read_captures(store, &seen, &unreadable).empty());
  CHECK(unreadable == 1);
  CHECK(seen == 3);
}

// `n` steps of about `ms` each.
void steps_of(OnDemandProfiler& od, int n, int ms) {
  for (int k = 0; k < n; ++k) {
    work();
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    od.step();
  }
}

TEST_CASE("on demand: a slow step makes the profiler record the steps after it, saying why in the trace", "[on_demand][slow_steps]") {
  const std::string dir = fresh_dir("slow_alone");
  // Only a step of 150 ms or more can be slow here: a loaded machine's 5 ms step is not.
  OnDemandProfiler od(OnDemandOptions().output_dir(dir).worker_name("w").poll_interval(std::chrono::milliseconds(10)).slow_steps(
      optrace::SlowSteps().history(5).iterations(2).max_captures(1).min_duration(std::chrono::milliseconds(150))));
  steps_of(od, 8, 1);                           // steps 0..7
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  steps_of(od, 1, 1);                           // step 8: slow
  REQUIRE(eventually([&] { return said(od, "slow steps: step 8 took"); }));
  steps_of(od, 12, 1);  // the window, then 5 steps to judge by again
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // slow again: the one capture is taken
  steps_of(od, 8, 1);
  od.flush();
  const std::vector<std::string> traces = od.traces();
  REQUIRE(traces.size() == 1);
  const std::vector<std::string> steps = profiler_steps(traces[0]);
  REQUIRE(steps.size() == 2);  // the two steps after the poller read it (at once: its next step or one after)
  CHECK(steps[0] < steps[1]);
  auto doc = optrace::json::Document::parse(optrace::detail::read_file_maybe_gzip(traces[0]));
  optrace::json::Node why = doc->root()["optraceCapture"];
  CHECK(why["trigger"].as_string() == "slow_step");
  CHECK(why["step"].as_int() == 8);
  CHECK(why["step_ms"].as_double() >= 300);
  CHECK(why["median_ms"].as_double() < 150);
  CHECK(why["rank"].as_int() == -1);
  CHECK(why["iterations"].as_int() == 2);
  CHECK(steps[0] == "ProfilerStep#" + std::to_string(why["first_step"].as_int()));
  CHECK(said(od, "slow steps: no more captures: 1 taken (SlowSteps::max_captures)"));
}

TEST_CASE("on demand: the job's own rule (is_slow) judges the steps, and one that throws is said once", "[on_demand][slow_steps]") {
  const std::string dir = fresh_dir("slow_rule");
  std::vector<int64_t> judged;  // the stepping thread's (this one's)
  OnDemandProfiler od(OnDemandOptions().output_dir(dir).worker_name("w").poll_interval(std::chrono::milliseconds(10)).slow_steps(
      optrace::SlowSteps().history(3).iterations(2).max_captures(1).is_slow([&](const optrace::StepTime& t) {
        judged.push_back(t.step);
        CHECK(t.duration.count() > 0);
        CHECK(t.median.count() > 0);
        if (t.step == 6 || t.step == 7) throw std::runtime_error("the rule broke");
        return t.step == 9;  // by the job's state, not by time
      })));
  steps_of(od, 11, 1);  // step() 11 times: step 9 ends at the 11th
  REQUIRE(eventually([&] { return said(od, "slow steps: step 9 took"); }));
  steps_of(od, 12, 1);
  od.flush();
  // The first step timed is step 1 (step 0 has no start); steps 1..3 fill the history of 3.
  REQUIRE(!judged.empty());
  CHECK(judged.front() == 4);
  const std::vector<std::string> messages = od.messages();
  CHECK(std::count_if(messages.begin(), messages.end(), [](const std::string& m) {
          return m.find("SlowSteps::is_slow threw (the rule broke): its steps count as not slow") != std::string::npos;
        }) == 1);
  CHECK(said(od, "judged slow by SlowSteps::is_slow, the median"));
  REQUIRE(od.traces().size() == 1);
  auto doc = optrace::json::Document::parse(optrace::detail::read_file_maybe_gzip(od.traces()[0]));
  optrace::json::Node why = doc->root()["optraceCapture"];
  CHECK(why["step"].as_int() == 9);
  CHECK(why["judged_by"].as_string() == "is_slow");
  optrace::json::Node factor = why;
  CHECK_FALSE(why.find("factor", factor));
  const int64_t first = why["first_step"].as_int();
  // The window's steps, and the history's refill after it, are judged by none.
  for (int64_t s = first; s < first + 2 + 3; ++s) CHECK(std::find(judged.begin(), judged.end(), s) == judged.end());
  CHECK(judged.back() > first + 2 + 3);
}

TEST_CASE("on demand: a capture another rank published is recorded here at its steps, and an old one is not", "[on_demand][slow_steps]") {
  const std::string dir = fresh_dir("slow_store");
  auto store = std::make_shared<MemoryStore>();
  int64_t g = 0;
  // A capture of an earlier run of the job, left in the store: not served.
  slow::publish_capture(*store, slow::Capture{3, 300, 100, 1, 5, 2}, 0, 10, &g);
  OnDemandProfiler od(OnDemandOptions().output_dir(dir).worker_name("w").poll_interval(std::chrono::milliseconds(10)).slow_steps(
      optrace::SlowSteps().history(1000).store(store)));
  steps_of(od, 8, 1);
  slow::publish_capture(*store, slow::Capture{9, 300000000, 1000000, 1, 20, 2}, 0, 10, &g);
  REQUIRE(eventually([&] { return said(od, "slow steps: rank 1: step 9 took 300.0 ms, over 3 x the median 1.0 ms: recording steps 20..21"); }));
  store->set(std::string(slow::kStorePrefix) + "3", "1 2 3");
  store->add(std::string(slow::kStorePrefix) + "count", 1);
  REQUIRE(eventually([&] { return said(od, "slow steps: 1 capture(s) in the store are not optrace's: ignored"); }));
  steps_of(od, 20, 1);
  od.flush();
  REQUIRE(od.traces().size() == 1);
  CHECK(profiler_steps(od.traces()[0]) == std::vector<std::string>{"ProfilerStep#20", "ProfilerStep#21"});
  auto doc = optrace::json::Document::parse(optrace::detail::read_file_maybe_gzip(od.traces()[0]));
  CHECK(doc->root()["optraceCapture"]["rank"].as_int() == 1);
}

TEST_CASE("on demand: a slow step is published in the store, whose earlier run's captures count for nothing", "[on_demand][slow_steps]") {
  const std::string dir = fresh_dir("slow_publish");
  auto store = std::make_shared<MemoryStore>();
  int64_t g = 0;
  for (int k = 0; k < 5; ++k) slow::publish_capture(*store, slow::Capture{100 * k, 300, 100, 0, 100 * k + 5, 2}, 0, 10, &g);
  OnDemandProfiler od(OnDemandOptions().output_dir(dir).worker_name("w").poll_interval(std::chrono::milliseconds(10)).slow_steps(
      optrace::SlowSteps().history(5).iterations(2).max_captures(1).min_duration(std::chrono::milliseconds(150)).store(store)));
  steps_of(od, 8, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  steps_of(od, 1, 1);  // step 8: slow, published as capture 6 (this run's first)
  REQUIRE(eventually([&] { return said(od, "slow steps: step 8 took"); }));
  CHECK(store->add(std::string(slow::kStorePrefix) + "count", 0) == 6);
  const std::optional<slow::Capture> c = slow::Capture::from_text(store->get(std::string(slow::kStorePrefix) + "6"));
  REQUIRE(c);
  CHECK(c->step == 8);
  CHECK(c->rank == -1);
  CHECK(c->start > 9);  // ahead: two poll intervals and 100 ms, in steps of the median (~1 ms)
  steps_of(od, 200, 1);
  od.flush();
  REQUIRE(od.traces().size() == 1);
  CHECK(profiler_steps(od.traces()[0]).front() == "ProfilerStep#" + std::to_string(c->start));
}

TEST_CASE("on demand: a store that fails is said once and the job goes on", "[on_demand][slow_steps]") {
  struct Broken : optrace::RankStore {
    int64_t add(const std::string&, int64_t) override { throw std::runtime_error("connection reset"); }
    void set(const std::string&, const std::string&) override { throw std::runtime_error("connection reset"); }
    std::string get(const std::string&) override { throw std::runtime_error("connection reset"); }
  };
  const std::string dir = fresh_dir("slow_broken");
  OnDemandProfiler od(OnDemandOptions().output_dir(dir).poll_interval(std::chrono::milliseconds(5)).slow_steps(
      optrace::SlowSteps().store(std::make_shared<Broken>())));
  steps_of(od, 10, 2);
  od.flush();
  int failures = 0;
  for (const std::string& m : od.messages()) failures += m == "slow steps: the store failed: connection reset";
  CHECK(failures == 2);  // at construction, and once by the polling thread
  CHECK(od.traces().empty());
}

// The names of a trace's threads (its "thread_name" metadata events), in order.
std::vector<int64_t> named_threads(const std::string& path) {
  auto doc = optrace::json::Document::parse(optrace::detail::read_file_maybe_gzip(path));
  std::vector<int64_t> tids;
  for (optrace::json::Node e : doc->root()["traceEvents"].array()) {
    optrace::json::Node name(e);
    if (e.find("name", name) && name.is_string() && name.as_string() == "thread_name") tids.push_back(e["tid"].as_int());
  }
  return tids;
}

TEST_CASE("on demand: the ring writes the slow step itself and the cycle before it, as one trace", "[on_demand][slow_steps]") {
  const std::string dir = fresh_dir("slow_ring");
  // Slow is 400 ms and more: writing the ring's trace inside a step took 166 ms under ASan on a
  // loaded machine, which 150 ms counted as a slowdown of its own.
  OnDemandProfiler od(OnDemandOptions().output_dir(dir).worker_name("w").poll_interval(std::chrono::milliseconds(10)).slow_steps(
      optrace::SlowSteps().history(5).max_captures(2).min_duration(std::chrono::milliseconds(400)).ring_steps(4)));
  steps_of(od, 22, 1);  // step 22 begins
  CHECK(said(od, "the ring records from step 4, in cycles of 4 steps"));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  steps_of(od, 1, 1);  // step 22 ends: slow; its cycle is 20..23, the one before 16..19
  REQUIRE(eventually([&] { return said(od, "slow steps: step 22 took"); }));
  CHECK(said(od, ": writing the ring's steps 16..23"));
  CHECK(od.traces().empty());  // written once its cycle ends, at step 24
  // Step 23 slow too: within those steps, the same slowdown.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  steps_of(od, 1, 1);
  REQUIRE(eventually([&] { return od.traces().size() == 1; }));
  CHECK(said(od, "slow steps: wrote steps 16..23 from the ring to " + od.traces()[0]));
  bool has_mm = false;
  const std::vector<std::string> steps = profiler_steps(od.traces()[0], &has_mm);
  std::vector<std::string> expected;
  for (int k = 16; k <= 23; ++k) expected.push_back("ProfilerStep#" + std::to_string(k));
  CHECK(steps == expected);
  CHECK(has_mm);
  const std::vector<int64_t> tids = named_threads(od.traces()[0]);  // each thread named once, though in two cycles
  CHECK(std::set<int64_t>(tids.begin(), tids.end()).size() == tids.size());
  auto doc = optrace::json::Document::parse(optrace::detail::read_file_maybe_gzip(od.traces()[0]));
  optrace::json::Node why = doc->root()["optraceCapture"];
  CHECK(why["step"].as_int() == 22);
  CHECK(why["first_step"].as_int() == 16);
  CHECK(why["iterations"].as_int() == 8);
  CHECK(why["step_ms"].as_double() >= 550);
  // Each cycle's mm (one per step) is in the trace, timed within its step.
  int mms = 0;
  for (optrace::json::Node e : doc->root()["traceEvents"].array()) {
    optrace::json::Node name(e);
    mms += e.find("name", name) && name.is_string() && name.as_string() == "aten::mm";
  }
  CHECK(mms >= 8);
  // A later slow step is a capture of its own, written by flush() before its cycle ends (the
  // steps recorded so far).
  steps_of(od, 10, 1);  // step 34 begins
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  steps_of(od, 1, 1);  // step 34 (cycle 32..35) ends: slow
  REQUIRE(eventually([&] { return said(od, "slow steps: step 34 took"); }));
  od.flush();
  REQUIRE(od.traces().size() == 2);
  CHECK_FALSE(said(od, "step 23 took"));
  CHECK(said(od, "slow steps: wrote steps 28..35 from the ring to " + od.traces()[1]));
  CHECK_FALSE(said(od, "not kept"));
  CHECK(profiler_steps(od.traces()[1]).back() == "ProfilerStep#35");  // as recorded so far: it had begun
}

TEST_CASE("on demand: beside the ring a window of steps pauses it, a duration is refused, and old steps are dropped", "[on_demand][slow_steps]") {
  const std::string dir = fresh_dir("slow_ring_window");
  auto store = std::make_shared<MemoryStore>();
  OnDemandProfiler od(OnDemandOptions().output_dir(dir).worker_name("w").poll_interval(std::chrono::milliseconds(10)).slow_steps(
      optrace::SlowSteps().history(1000).ring_steps(4).store(store)));
  steps_of(od, 6, 1);
  OnDemandRequest duration;
  duration.duration_ms = 100;
  od.request(duration);
  CHECK(said(od, "request refused: a window of a duration cannot run beside the ring (SlowSteps::ring_steps)"));
  od.request(steps_request(10, 2));
  steps_of(od, 14, 1);  // the window records 10 and 11; the ring records again from step 12
  CHECK(said(od, "the ring pauses for the window from step 10"));
  CHECK(said(od, "the ring records again from step 12"));
  REQUIRE(eventually([&] { return od.traces().size() == 1; }));
  CHECK(profiler_steps(od.traces()[0]) == std::vector<std::string>{"ProfilerStep#10", "ProfilerStep#11"});
  // Other ranks' captures: of step 13 (steps 8..15, of which the window had 10 and 11), of step 22
  // (16..23), and of steps long gone (4..11: dropped).
  int64_t g = 0;
  steps_of(od, 10, 1);  // step 30 begins
  slow::publish_capture(*store, slow::Capture{13, 300000000, 1000000, 1, 8, 8}, 0, 10, &g);
  REQUIRE(eventually([&] { return od.traces().size() == 2; }));
  CHECK(said(od, "slow steps: wrote steps 8..15 from the ring to " + od.traces()[1] +
                     " (of steps 8..15, 2 not kept: the ring was not recording them)"));
  CHECK(profiler_steps(od.traces()[1]) == std::vector<std::string>{"ProfilerStep#8", "ProfilerStep#9", "ProfilerStep#12",
                                                                   "ProfilerStep#13", "ProfilerStep#14", "ProfilerStep#15"});
  slow::publish_capture(*store, slow::Capture{22, 300000000, 1000000, 1, 16, 8}, 0, 10, &g);
  REQUIRE(eventually([&] { return od.traces().size() == 3; }));
  CHECK(profiler_steps(od.traces()[2]).size() == 8);
  CHECK(profiler_steps(od.traces()[2]).front() == "ProfilerStep#16");
  // A capture of a step far ahead (a foreign or broken writer) waits for nothing.
  slow::publish_capture(*store, slow::Capture{100000000000, 300000000, 1000000, 1, 100000000001, 3}, 0, 10, &g);
  REQUIRE(eventually([&] { return said(od, "slow steps: a capture of step 100000000000 (steps 100000000001..100000000003) does not fit the ring at step"); }));
  steps_of(od, 60, 10);  // over 2 polls and 500 ms
  // (Set by hand: publish_capture drops it, as it ends before the last capture's steps do.)
  store->set(std::string(slow::kStorePrefix) + "4", slow::Capture{9, 300000000, 1000000, 1, 4, 8}.to_text());
  store->add(std::string(slow::kStorePrefix) + "count", 1);
  REQUIRE(eventually([&] { return said(od, "slow steps: the ring kept none of steps 4..11"); }));
  od.flush();
  CHECK(od.traces().size() == 3);
}

TEST_CASE("on demand: SlowSteps that cannot work are one line", "[on_demand][slow_steps]") {
  const std::string dir = fresh_dir("slow_options");
  auto make = [&](optrace::SlowSteps s) { OnDemandProfiler od(OnDemandOptions().output_dir(dir).slow_steps(s)); };
  CHECK_THROWS_WITH(make(optrace::SlowSteps().factor(1.0)), OPTRACE_CONTAINS("SlowSteps: factor must be > 1"));
  CHECK_THROWS_WITH(make(optrace::SlowSteps().factor(std::nan(""))), OPTRACE_CONTAINS("SlowSteps: factor must be > 1"));
  CHECK_THROWS_WITH(make(optrace::SlowSteps().history(2)), OPTRACE_CONTAINS("SlowSteps: history must be 3 to 10000 steps"));
  CHECK_THROWS_WITH(make(optrace::SlowSteps().iterations(0)), OPTRACE_CONTAINS("SlowSteps: iterations must be 1 to 1000"));
  CHECK_THROWS_WITH(make(optrace::SlowSteps().max_captures(0)), OPTRACE_CONTAINS("SlowSteps: max_captures must be >= 1"));
  for (int64_t m : {-1, 1, 1001})
    CHECK_THROWS_WITH(make(optrace::SlowSteps().ring_steps(m)), OPTRACE_CONTAINS("SlowSteps: ring_steps must be 0 (no ring) or 2 to 1000"));
}

TEST_CASE("on demand: a trace's metadata_json is written at its top level, and a bad one is refused unechoed", "[on_demand][profiler]") {
  auto make = [](std::vector<std::pair<std::string, std::string>> m) {
    optrace::Profiler p(optrace::ProfilerOptions().metadata_json(std::move(m)));
    work();
    p.stop();
    return p.last_trace()->to_json();
  };
  const std::string text = make({{"jobInfo", "{\"name\": \"train\", \"attempt\": 2}"}});
  auto doc = optrace::json::Document::parse(text);
  CHECK(doc->root()["jobInfo"]["attempt"].as_int() == 2);
  CHECK_THROWS_WITH(make({{"traceEvents", "[]"}}), OPTRACE_CONTAINS("ProfilerOptions::metadata_json: key 'traceEvents' is already in the trace"));
  CHECK_THROWS_WITH(make({{"cuda_driver_version", "1"}}), OPTRACE_CONTAINS("ProfilerOptions::metadata_json: key 'cuda_driver_version' is already in the trace"));
  CHECK_THROWS_WITH(make({{"a", "1"}, {"a", "2"}}), OPTRACE_CONTAINS("ProfilerOptions::metadata_json: key 'a' is already in the trace"));
  CHECK_THROWS_WITH(make({{"a b", "1"}}), OPTRACE_CONTAINS("ProfilerOptions::metadata_json: a key is a name of letters, digits and '_' (up to 64)"));
  CHECK_THROWS_WITH(make({{"token", "password=hunter2"}}), OPTRACE_CONTAINS("ProfilerOptions::metadata_json: the value of 'token' is not JSON"));
}

}  // namespace on_demand_test
