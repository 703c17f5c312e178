// optrace/on_demand.hpp: OnDemandProfiler, profiling windows of a running job on request, without a restart
#pragma once
// How it works, and why:
// - Idle, nothing is installed: no RecordFunction callback, no Profiler. `step()` is a counter
//   and one atomic load; the trigger file is polled on a thread of its own.
// - A request (the trigger file's new content, or request()) becomes a window: an iteration
//   window starts and ends on the stepping thread, at step boundaries Kineto's rules decide
//   (detail/on_demand/request.hpp), so that every rank reading one request records the same
//   steps; a duration window starts and ends on the polling thread, for programs without steps.
// - A window is a Profiler (profiler.hpp) whose steps count from the job's own step. When it
//   closes, its trace goes to the Profiler's writer thread; the finished Profiler is joined and
//   destroyed on the polling thread (or by flush()), never on the stepping thread.
// - Everything a window does wrong (a bad request, a path outside the output folder, a full disk)
//   is one line on stderr, kept in messages(); the job goes on.

#include <optrace/detail/on_demand/files.hpp>
#include <optrace/detail/on_demand/request.hpp>
#include <optrace/distributed.hpp>
#include <optrace/error.hpp>
#include <optrace/profiler.hpp>

#include <torch/arg.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace optrace {

/// Options of an OnDemandProfiler, as chained setters.
struct OnDemandOptions {
  /// The trigger file, polled: Kineto's on-demand config keys (docs/on_demand.md). Each new content
  /// is one request. Read only when owned by the job's user (or root) and not writable by group or
  /// others. Default: none (requests come from request() only).
  TORCH_ARG(std::string, config_file) = "";
  /// How often the trigger file is read.
  TORCH_ARG(std::chrono::milliseconds, poll_interval) = std::chrono::milliseconds(1000);
  /// Where traces go (made with its parents; must be writable): tensorboard_trace_handler's names,
  /// `<worker>.<time in ns>.pt.trace.json`, or a request's ACTIVITIES_LOG_FILE, always inside it.
  /// Only Kineto traces go there, as HTA reads a folder of them. Required.
  TORCH_ARG(std::string, output_dir) = "";
  /// Where each window's execution trace goes (`<worker>.<time in ns>.et.json`), for Chakra;
  /// another folder than output_dir. Default: none.
  TORCH_ARG(std::string, execution_trace_dir) = "";
  /// The traces' worker name. Default: "<host name>_<pid>", and "_rank<R>" when the job's rank
  /// is known (ProfilerOptions::distributed, else torchrun's RANK and WORLD_SIZE).
  TORCH_ARG(std::string, worker_name) = "";
  /// Write traces gzip-compressed (`.pt.trace.json.gz`).
  TORCH_ARG(bool, use_gzip) = false;
  /// What a window records unless its request says otherwise (record_shapes, profile_memory,
  /// with_stack, activities). Its schedule and on_trace_ready are the OnDemandProfiler's.
  TORCH_ARG(ProfilerOptions, profiler) = {};
};

/// Profiles a running job on request, as Kineto's on-demand mode (what `dyno gputrace` drives)
/// without a daemon: a few steps now, on every rank at the same steps, or a few seconds of a
/// server, with nothing installed while nobody asks.
///
///   optrace::OnDemandProfiler od(optrace::OnDemandOptions()
///       .config_file("/run/optrace/trigger.conf")
///       .output_dir("traces")
///       .profiler(optrace::ProfilerOptions().record_shapes(true)));
///   for (;;) { train_or_serve_one_step(); od.step(); }
///   od.flush();
///
/// Then `printf 'PROFILE_START_ITERATION_ROUNDUP=20\nACTIVITIES_ITERATIONS=3\n' > trigger.conf`
/// makes every rank record its steps 20, 21, 22 (or the next multiple of 20 ahead).
/// One window at a time; no other Profiler or recording OpTracer beside a window.
class OnDemandProfiler {
 public:
  /// Throws ArgumentError for options that cannot work, IoError for an output folder that
  /// cannot be made or written.
  explicit OnDemandProfiler(OnDemandOptions options) : options_(std::move(options)) {
    namespace fs = std::filesystem;
    OPTRACE_CHECK(!options_.output_dir().empty(), ArgumentError, "OnDemandOptions: output_dir is required");
    OPTRACE_CHECK(options_.poll_interval().count() > 0, ArgumentError, "OnDemandOptions: poll_interval must be > 0");
    dir_ = make_folder(options_.output_dir());
    if (!options_.execution_trace_dir().empty()) {
      et_dir_ = make_folder(options_.execution_trace_dir());
      OPTRACE_CHECK(et_dir_ != dir_, ArgumentError, "OnDemandOptions: execution_trace_dir must be another folder than ",
                    "output_dir (HTA reads every trace in output_dir as a Kineto trace)");
    }
    worker_ = !options_.worker_name().empty() ? options_.worker_name()
              : detail::profiler::default_worker_name(options_.profiler().distributed()
                                                          ? options_.profiler().distributed()
                                                          : DistributedInfo::from_environment());
    poller_ = std::thread([this] { poll_loop(); });
  }
  OnDemandProfiler(const OnDemandProfiler&) = delete;
  OnDemandProfiler& operator=(const OnDemandProfiler&) = delete;

  /// Stops polling and flushes (see flush()).
  ~OnDemandProfiler() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (poller_.joinable()) poller_.join();
    flush();
  }

  /// Ends the job's current step and begins the next (call it on the thread that runs the steps).
  /// Idle: one atomic load and a counter.
  void step() noexcept {
    const int64_t s = step_.load(std::memory_order_relaxed) + 1;
    step_.store(s, std::memory_order_relaxed);
    if (attention_.load(std::memory_order_acquire)) on_step(s);
  }

  /// The job's current step (0-based: the number of step() calls).
  int64_t step_num() const { return step_.load(std::memory_order_relaxed); }

  /// A request from the program's own control channel; served as a new trigger file would be.
  void request(const OnDemandRequest& r) {
    std::lock_guard<std::mutex> lock(mutex_);
    accept(r);
  }

  /// Closes the open window (its trace written with the steps recorded so far), drops a request
  /// whose window has not started (saying so), and waits until every trace is written. Call it on
  /// the stepping thread, or once it has stopped stepping.
  void flush() {
    std::vector<std::unique_ptr<Profiler>> done;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (window_) {
        say(window_by_iteration_ ? "flush(): the window of steps " + std::to_string(window_first_) + ".." +
                                       std::to_string(window_end_ - 1) + " closes at step " +
                                       std::to_string(step_num()) + ", with the steps recorded so far"
                                 : std::string("flush(): the duration window closes early"));
        retire_window();
      }
      if (scheduled_ || pending_) say("flush(): a requested window that had not started is dropped");
      scheduled_ = false;
      pending_.reset();
      attention_.store(false, std::memory_order_release);
      done.swap(retired_);
    }
    join(done);
    std::unique_lock<std::mutex> lock(mutex_);  // and what the polling thread is joining
    joined_.wait(lock, [this] { return joining_ == 0; });
  }

  /// The trace files written so far: each window's Kineto trace, then its execution trace.
  std::vector<std::string> traces() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return traces_;
  }

  /// What the profiler said (each also printed to stderr, "optrace: on-demand: ..."): requests
  /// served or refused, and why.
  std::vector<std::string> messages() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return messages_;
  }

 private:
  using Clock = std::chrono::steady_clock;

  static std::filesystem::path make_folder(const std::string& dir) {
    OPTRACE_CHECK(detail::profiler::can_write_in(dir), IoError, "OnDemandProfiler: cannot write in folder '", dir,
                  "'");
    std::error_code ec;
    std::filesystem::path canonical = std::filesystem::canonical(dir, ec);
    OPTRACE_CHECK(!ec, IoError, "OnDemandProfiler: folder '", dir, "': ", ec.message());
    return canonical;
  }

  void say(std::string line) {  // under mutex_; one write, so that lines of several threads never mix
    const std::string text = "optrace: on-demand: " + line + "\n";
    std::fwrite(text.data(), 1, text.size(), stderr);
    messages_.push_back(std::move(line));
  }

  // A new request (under mutex_): refused while another is open or waiting.
  void accept(const OnDemandRequest& r) {
    if (window_ || scheduled_ || pending_) {
      say("a window is already open or waiting; this request is ignored (one window at a time)");
      return;
    }
    try {
      if (!r.log_file.empty()) detail::on_demand::resolve_inside(dir_, r.log_file);
      if (!r.by_iteration() && r.start_time_ms > 0) {
        const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
        OPTRACE_CHECK(now_ms - r.start_time_ms <= 10000, ArgumentError, "PROFILE_START_TIME ", r.start_time_ms,
                      " is more than 10 s in the past (Kineto's limit)");
      }
    } catch (const Error& e) {
      say(std::string("request refused: ") + e.what());
      return;
    }
    pending_ = r;
    if (r.by_iteration()) attention_.store(true, std::memory_order_release);
    wake_.notify_all();
  }

  // The stepping thread's part, when a request or a window needs it.
  void on_step(int64_t s) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      if (window_ && window_by_iteration_) {
        window_->step();
        if (s >= window_end_) retire_window();
      }
      if (!window_ && scheduled_ && s >= window_first_) {
        scheduled_ = false;
        open_window(scheduled_request_, s);
      }
      if (!window_ && !scheduled_ && pending_ && pending_->by_iteration()) {
        const int64_t first =
            detail::on_demand::window_start(s, *pending_->start_iteration, pending_->start_iteration_roundup);
        scheduled_request_ = *pending_;
        pending_.reset();
        if (first == s) {
          open_window(scheduled_request_, s);
        } else {
          scheduled_ = true;
          window_first_ = first;
          say("request: steps " + std::to_string(first) + ".." + std::to_string(first + scheduled_request_.iterations - 1) +
              " (now at step " + std::to_string(s) + ")");
        }
      }
    } catch (const std::exception& e) {
      say(std::string("window at step ") + std::to_string(s) + " failed: " + e.what());
      window_.reset();
      scheduled_ = false;
    }
    attention_.store((window_ && window_by_iteration_) || scheduled_ || (pending_ && pending_->by_iteration()),
                     std::memory_order_release);
  }

  // Opens a window for `r` (under mutex_): on the stepping thread at step `s` for an iteration
  // window, on the polling thread for a duration window.
  void open_window(const OnDemandRequest& r, int64_t s) {
    const int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    // The trace goes through the folder opened here beneath the output folder, made if missing:
    // a link put on the way before the writer thread writes (seconds later) is not followed.
    const std::string relative =
        r.log_file.empty() ? worker_ + "." + std::to_string(ns) + ".pt.trace.json" + (options_.use_gzip() ? ".gz" : "")
                           : detail::on_demand::name_inside(dir_, r.log_file);
    const std::string path = (dir_ / relative).string();
    auto [folder, leaf] = detail::open_folder_beneath(dir_.string(), relative, detail::MissingFolder::Make);
    auto held = std::make_shared<detail::Fd>(std::move(folder));
    ProfilerOptions o = options_.profiler();
    if (r.record_shapes) o.record_shapes(*r.record_shapes);
    if (r.profile_memory) o.profile_memory(*r.profile_memory);
    if (r.with_stack) o.with_stack(*r.with_stack);
    if (r.device_activity)
      o.activities(*r.device_activity ? std::vector<Activity>{Activity::CPU, Activity::CUDA}
                                      : std::vector<Activity>{Activity::CPU});
    if (!r.by_iteration() && o.profile_memory()) {
      say("PROFILE_PROFILE_MEMORY: a duration window records no allocations (the allocators report to the thread "
          "that opens a window, here optrace's own); use an iteration window");
      o.profile_memory(false);
    }
    o.schedule(r.by_iteration() ? std::optional<Schedule>(Schedule().skip_first(s).active(r.iterations).repeat(1))
                                : std::nullopt);
    o.execution_trace(et_dir_.empty() ? std::string() : (et_dir_ / (worker_ + "." + std::to_string(ns) + ".et.json")).string());
    o.on_trace_ready([this, path, held, leaf = leaf](const ProfilerTrace& trace) {
      trace.save(detail::FileTarget{held->get(), leaf, path}, detail::ExistingFile::Keep);
      std::lock_guard<std::mutex> lock(mutex_);
      traces_.push_back(path);
    });
    window_.reset(new Profiler(std::move(o), s));
    window_by_iteration_ = r.by_iteration();
    window_first_ = s;
    window_end_ = s + r.iterations;
    window_until_ = Clock::now() + std::chrono::milliseconds(r.duration_ms);
    say(r.by_iteration() ? "recording steps " + std::to_string(s) + ".." + std::to_string(window_end_ - 1) + " to " + path
                         : "recording " + std::to_string(r.duration_ms) + " ms to " + path);
  }

  // The open window stops recording; its trace goes to its writer (under mutex_, without waiting).
  void retire_window() {
    window_->stop_recording();
    retired_.push_back(std::move(window_));
    wake_.notify_all();
  }

  // Waits for finished windows' writers (not under mutex_: their handlers take it).
  void join(std::vector<std::unique_ptr<Profiler>>& done) {
    for (auto& p : done) {
      try {
        p->stop();  // the writer joined, the execution trace written
        std::lock_guard<std::mutex> lock(mutex_);
        if (!p->options().execution_trace().empty()) traces_.push_back(p->options().execution_trace());
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex_);
        say(std::string("a window's trace was not written: ") + e.what());
      }
      p.reset();
    }
    done.clear();
  }

  // The polling thread: reads the trigger file, runs duration windows, joins finished windows.
  void poll_loop() {
    auto next_poll = Clock::now();
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      const auto now = Clock::now();
      if (now >= next_poll) {
        poll_config();
        next_poll = now + options_.poll_interval();
      }
      Clock::time_point until = next_poll;
      run_duration_window(until);
      if (!retired_.empty()) {
        std::vector<std::unique_ptr<Profiler>> done;
        done.swap(retired_);
        ++joining_;
        lock.unlock();
        join(done);
        lock.lock();
        --joining_;
        joined_.notify_all();
        continue;
      }
      wake_.wait_until(lock, until);
    }
  }

  // A duration window's start and end, on the polling thread (under mutex_); `until` is lowered
  // to its next event.
  void run_duration_window(Clock::time_point& until) {
    try {
      if (window_ && !window_by_iteration_) {
        if (Clock::now() >= window_until_) retire_window();
        else until = std::min(until, window_until_);
      }
      if (window_ || scheduled_ || !pending_ || pending_->by_iteration()) return;
      const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
      if (pending_->start_time_ms > now_ms) {
        until = std::min(until, Clock::now() + std::chrono::milliseconds(pending_->start_time_ms - now_ms));
        return;
      }
      const OnDemandRequest r = *pending_;
      pending_.reset();
      open_window(r, step_num());
      until = std::min(until, window_until_);
    } catch (const std::exception& e) {
      say(std::string("duration window failed: ") + e.what());
      window_.reset();
    }
  }

  // Reads the trigger file (under mutex_); a new content is a request.
  void poll_config() {
    if (options_.config_file().empty()) return;
    detail::on_demand::ConfigRead c = detail::on_demand::read_config(options_.config_file());
    if (c.kind == detail::on_demand::ConfigRead::Absent) {
      config_.reset();  // the same text written again later is a new request
      return;
    }
    if (c.kind == detail::on_demand::ConfigRead::Refused) {
      if (c.state != refused_state_) say(c.reason);
      refused_state_ = c.state;
      return;
    }
    refused_state_.clear();
    if (config_ && *config_ == c.text) return;
    config_ = c.text;
    std::vector<std::string> ignored;
    OnDemandRequest r;
    try {
      r = OnDemandRequest::parse(c.text, &ignored);
    } catch (const Error& e) {
      say(std::string("request refused: ") + e.what());
      return;
    }
    if (!ignored.empty()) {
      std::string keys;
      for (const std::string& k : ignored) keys += (keys.empty() ? "" : ", ") + k;
      say("config keys that do not apply to optrace, ignored: " + keys);
    }
    accept(r);
  }

  OnDemandOptions options_;
  std::filesystem::path dir_, et_dir_;  // canonical
  std::string worker_;
  std::atomic<int64_t> step_{0};
  std::atomic<bool> attention_{false};  // the stepping thread has something to do
  mutable std::mutex mutex_;            // everything below
  std::condition_variable wake_;    // the polling thread: a request, a window retired, stopping
  std::condition_variable joined_;  // flush(): the polling thread's joins are done
  int joining_ = 0;                 // finished windows the polling thread is joining
  bool stopping_ = false;
  std::optional<OnDemandRequest> pending_;  // accepted, not yet placed
  bool scheduled_ = false;                  // an iteration window waits for step window_first_
  OnDemandRequest scheduled_request_;
  std::unique_ptr<Profiler> window_;
  bool window_by_iteration_ = false;
  int64_t window_first_ = 0, window_end_ = 0;  // iteration window: steps [first, end)
  Clock::time_point window_until_;             // duration window: its end
  std::vector<std::unique_ptr<Profiler>> retired_;
  std::optional<std::string> config_;  // the trigger file's last content
  std::string refused_state_;          // the last refused trigger file, said once
  std::vector<std::string> traces_, messages_;
  std::thread poller_;
};

}  // namespace optrace
