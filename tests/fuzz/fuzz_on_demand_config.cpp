// tests/fuzz/fuzz_on_demand_config.cpp: an OnDemandProfiler's trigger file (OnDemandRequest::parse) on
// arbitrary bytes — whoever writes it steers a running job — then the ACTIVITIES_LOG_FILE it names
// resolved against an output folder: an optrace error, or a request whose fields hold together and
// a path inside the folder, with no `..` in it. The bytes after a NUL drive the scheduler
// (detail/on_demand/scheduler.hpp) with that request: each byte one input (the request, a step,
// the clock moving on, a cancel, a flush, a failed window); the actions must pair (a window opens
// only when none is open, closes only when one is), and a cancel followed by a step and a tick
// must always leave it idle, free for the next request.
#include "harness.hpp"

#include <optrace/detail/on_demand/files.hpp>
#include <optrace/detail/on_demand/request.hpp>
#include <optrace/detail/on_demand/scheduler.hpp>

#include <string>

namespace {

namespace od = optrace::detail::on_demand;

struct Driver {
  od::Scheduler s;
  bool open = false;
  int64_t step = 0, now_ms = 0, wall_ms = 1'764'000'000'000;

  void apply(const od::Actions& a) {
    if (a.close) {
      if (!open) optrace_fuzz::property_failed("a close without an open window");
      open = false;
    }
    if (a.open) {
      if (open) optrace_fuzz::property_failed("an open beside an open window");
      if (s.state() != od::State::Recording) optrace_fuzz::property_failed("an open, not recording");
      open = true;
    }
    if (open != (s.state() == od::State::Recording)) optrace_fuzz::property_failed("recording without an open window");
  }
  void run(const optrace::OnDemandRequest& r, std::string_view ops) {
    for (unsigned char op : ops) {
      switch (op % 8) {
        case 0: apply(s.on_request(r, step, now_ms, wall_ms)); break;
        case 1: apply(s.on_step(++step)); break;
        case 2: step += op; apply(s.on_step(step)); break;  // a stepping thread far ahead
        case 3: {
          const int64_t ms = int64_t{op} * 37;
          now_ms += ms;
          wall_ms += ms;
          apply(s.on_tick(now_ms, step));
          break;
        }
        case 4: apply(s.on_cancel()); break;
        case 5: apply(s.on_flush(step)); break;
        case 6:
          if (open) {
            s.on_window_failed();
            open = false;
          }
          break;
        default: wall_ms += int64_t{op} * 1000; break;  // the wall clock moves alone
      }
    }
    // Liveness: a cancel, then the thread that opened the window reaches it, leaves nothing.
    apply(s.on_cancel());
    apply(s.on_step(++step));
    apply(s.on_tick(now_ms + 1, step));
    if (s.state() != od::State::Idle || open) optrace_fuzz::property_failed("not idle after a cancel, a step and a tick");
    optrace::OnDemandRequest next;
    next.iterations = 1;
    next.start_iteration = 0;
    if (!s.on_request(next, step, now_ms, wall_ms).lines.empty()) optrace_fuzz::property_failed("a request refused after idle");
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = optrace_fuzz::text_of(data, size);
  const size_t nul = input.find('\0');
  const std::string_view text = input.substr(0, nul);
  optrace_fuzz::expect_only_optrace_errors("parse", [&] {
    std::vector<std::string> ignored;
    const optrace::OnDemandRequest r = optrace::OnDemandRequest::parse(text, &ignored);
    if (r.iterations < 0 || r.duration_ms < 1 || r.start_iteration_roundup < 0 || r.start_time_ms < 0)
      optrace_fuzz::property_failed("a field out of its range");
    if (r.by_iteration() && (!r.start_iteration || *r.start_iteration < 0))
      optrace_fuzz::property_failed("an iteration window without a start");
    if (nul != std::string_view::npos) Driver().run(r, input.substr(nul + 1));
    if (r.log_file.empty()) return;
    const std::string dir = "/nonexistent-optrace-fuzz/traces";
    const std::string path = optrace::detail::on_demand::resolve_inside(dir, r.log_file);
    if (path.rfind(dir + "/", 0) != 0) optrace_fuzz::property_failed("a log file outside the output folder");
    for (const auto& part : std::filesystem::path(path))
      if (part == "..") optrace_fuzz::property_failed("a log file path with '..'");
  });
  return 0;
}
