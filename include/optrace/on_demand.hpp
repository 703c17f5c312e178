// optrace/on_demand.hpp: OnDemandProfiler, profiling windows of a running job on request, without a restart
#pragma once
// How it works, and why:
// - Idle, nothing is installed: no RecordFunction callback, no Profiler. `step()` is one atomic
//   increment and one atomic load; the trigger file is polled on a thread of its own, and read
//   without the lock the stepping thread may take.
// - A request (the trigger file's new content, or request()) becomes a window: an iteration
//   window starts and ends on the stepping thread, at step boundaries Kineto's rules decide
//   (detail/on_demand/request.hpp), so that every rank reading one request records the same
//   steps; a duration window starts and ends on the polling thread, for programs without steps.
//   When is decided by one state machine without threads (detail/on_demand/scheduler.hpp): a
//   request that would start too far ahead is refused, and a cancel ends any request.
// - A window is a Profiler (profiler.hpp) whose steps count from the job's own step. When it
//   closes, its trace goes to the Profiler's writer thread; the finished Profiler is joined and
//   destroyed on the polling thread (or by flush()), never on the stepping thread.
// - With SlowSteps::ring_steps, the stepping thread also runs a CPU-only Profiler in cycles of
//   steps, keeps the finished cycles a while, and the polling thread writes those that hold a
//   slow step as one trace (the ring's part of this class, below).
// - Everything a window does wrong (a bad request, a path outside the output folder, a full disk)
//   is one line on stderr, kept in messages(); the job goes on.

#include <optrace/detail/common/error_text.hpp>
#include <optrace/detail/on_demand/files.hpp>
#include <optrace/detail/on_demand/request.hpp>
#include <optrace/detail/on_demand/scheduler.hpp>
#include <optrace/detail/on_demand/slow_steps.hpp>
#include <optrace/distributed.hpp>
#include <optrace/error.hpp>
#include <optrace/profiler.hpp>

#include <torch/arg.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace optrace {

/// A step as SlowSteps::is_slow sees it: its number (0-based), how long it took, and the median of
/// the `history` steps before it.
struct StepTime {
  int64_t step = 0;
  std::chrono::nanoseconds duration{0};
  std::chrono::nanoseconds median{0};
};

/// The slow-step capture (OnDemandOptions::slow_steps): when a step takes more than `factor` times
/// the median of the `history` steps before it (or `is_slow` says so), every rank records the
/// `iterations` steps after it, or with `ring_steps` writes the slow step itself and the steps
/// before it: the same steps on every rank when the ranks share `store`.
struct SlowSteps {
  /// How much longer than the median a slow step is (> 1).
  TORCH_ARG(double, factor) = 3.0;
  /// The job's own rule, instead of `factor`: whether a step is slow (over a deadline, or a step
  /// whose loss jumped: the function may read the job's state). Called on the stepping thread for
  /// each step judged (after the first `history`, at least `min_duration`, no window asked or
  /// open); it must not block. One that throws counts as false, and is said once. The trace says
  /// `"judged_by": "is_slow"` where it would give the factor. Default: none (`factor` decides).
  TORCH_ARG(std::function<bool(const StepTime&)>, is_slow) = nullptr;
  /// How many steps the median is taken over (3 to 10000); the first `history` steps, and those
  /// after each window (which the profiling slowed), are judged by none.
  TORCH_ARG(int64_t, history) = 50;
  /// A slow step is also at least this long: a job of 1 ms steps may ignore a 4 ms one.
  TORCH_ARG(std::chrono::milliseconds, min_duration) = std::chrono::milliseconds(0);
  /// The steps recorded after a slow step (1 to 1000); with ring_steps, none are.
  TORCH_ARG(int64_t, iterations) = 3;
  /// Keep recording every step, in cycles of this many (2 to 1000), so that a capture holds the
  /// slow step itself: the cycle that holds it and the one before (steps 16..31 for step 25 with
  /// 8), the same steps on every rank, written when that cycle ends. The ring records CPU ops and
  /// ranges (record_shapes and with_stack as OnDemandOptions::profiler says), no CUDA kernels,
  /// allocations or execution trace, and keeps the cycles that ended in the last two poll
  /// intervals and 500 ms (at most 64, and always the last two). It holds the process's Profiler
  /// for good: a request for steps pauses it, one for a duration is refused. What it costs per
  /// step: docs/performance.md. Default 0: no ring (`iterations` after the slow step).
  TORCH_ARG(int64_t, ring_steps) = 0;
  /// At most this many captures: of the whole job when the ranks share a store (counted from the
  /// store's count when the profiler starts: an earlier run's do not count), else of this
  /// process. A job that is slow every hundred steps (a checkpoint) fills no disk.
  TORCH_ARG(int64_t, max_captures) = 3;
  /// A store every rank of the job reaches (the job's c10d store: `optrace::rank_store(store)`
  /// from <optrace/c10d.hpp>): the rank that sees a slow step publishes a capture there, and
  /// every rank records the same steps. The window starts far enough ahead for every rank's
  /// polling thread to read it (two poll intervals and 100 ms, in steps of the median). None:
  /// this process alone records, from its next step.
  TORCH_ARG(std::shared_ptr<RankStore>, store) = nullptr;
};

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
  /// Record after a slow step, without anyone asking (see SlowSteps). Default: off.
  TORCH_ARG(std::optional<SlowSteps>, slow_steps) = std::nullopt;
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
    const std::optional<DistributedInfo> job =
        options_.profiler().distributed() ? options_.profiler().distributed() : DistributedInfo::from_environment();
    worker_ = !options_.worker_name().empty() ? options_.worker_name() : detail::profiler::default_worker_name(job);
    rank_ = job ? job->rank : -1;
    if (options_.slow_steps()) start_slow_steps(*options_.slow_steps());
    // A request already in the trigger file was written before this process (a leftover of an
    // earlier run, or a restart after it was served): its content is taken as seen, not served.
    if (!options_.config_file().empty()) {
      detail::on_demand::ConfigRead c = detail::on_demand::read_config(options_.config_file());
      if (c.kind == detail::on_demand::ConfigRead::Read) {
        config_ = std::move(c.text);
        std::lock_guard<std::mutex> lock(mutex_);
        say("config file '" + options_.config_file() + "' already holds a request as the profiler starts: not served "
            "(a leftover); write a new one to profile");
      }
    }
    poller_ = std::thread([this] { poll_loop(); });
  }
  OnDemandProfiler(const OnDemandProfiler&) = delete;
  OnDemandProfiler& operator=(const OnDemandProfiler&) = delete;

  /// Stops polling and flushes (see flush()).
  ~OnDemandProfiler() {
    if (ring_) stop_ring(step_num(), /*within=*/true);  // on any thread: a CPU-only Profiler leaves nothing behind
    flush();  // while the polling thread runs: it closes a duration window it opened
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (poller_.joinable()) poller_.join();
    flush();  // what a request made meanwhile left
    left_.release();  // destroyed on the stepping thread: what a window closed elsewhere left on it
  }

  /// Ends the job's current step and begins the next, on the thread that runs the steps. Idle:
  /// one atomic increment and one atomic load. Several threads may call it: each call counts once
  /// (a window's steps are then those of all of them).
  /// With slow_steps, one thread steps (the step times are its, and the ring's Profiler).
  void step() noexcept {
    const int64_t s = step_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (times_) time_step(s);
    if (attention_.load(std::memory_order_acquire)) on_step(s);  // a window opening stops the ring first
    if (ring_steps_ > 0) ring_step(s);
  }

  /// The job's current step (0-based: the number of step() calls).
  int64_t step_num() const { return step_.load(std::memory_order_relaxed); }

  /// A request from the program's own control channel; served as a new trigger file would be.
  void request(const OnDemandRequest& r) {
    std::lock_guard<std::mutex> lock(mutex_);
    accept(r);
  }

  /// Drops the request waiting, or closes the open window with the steps recorded so far (as the
  /// trigger file's OPTRACE_CANCEL=1 does), saying so. From any thread: the window closes on the
  /// thread that opened it, at the job's next step (a window of steps) or at once on the polling
  /// thread (a duration window).
  void cancel() {
    OnDemandRequest r;
    r.cancel = true;
    request(r);
  }

  /// Closes the open window (its trace written with the steps recorded so far), drops a request
  /// whose window has not started (saying so), and waits until every trace is written. Call it on
  /// the stepping thread, or once it has stopped stepping: a window of steps closed on another
  /// thread has no CUDA kernels (libtorch's profiler stops only where it started), and what
  /// libtorch left on the stepping thread is released at its next step() (both said). A duration
  /// window is closed by the polling thread, which opened it, and waited for. With the ring
  /// (SlowSteps::ring_steps), a capture waiting for its cycle's end is written with the steps
  /// recorded so far; on the stepping thread, the ring's cycle ends here (a new one begins at
  /// the next multiple of ring_steps).
  void flush() {
    if (ring_steps_ > 0 && ring_thread_.load() == std::this_thread::get_id() && ring_) stop_ring(step_num(), /*within=*/true);
    std::vector<std::unique_ptr<Profiler>> done;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      serve_ring(lock, /*now=*/true);
      apply(scheduler_.on_flush(step_num()));
      while (scheduler_.state() == detail::on_demand::State::Recording) {  // a duration window closing
        if (!polling_) {  // its thread is gone (only in the destructor): here, rather than never
          apply(scheduler_.on_tick(steady_ms(), step_num()));
          break;
        }
        wake_.notify_all();
        closed_.wait(lock);
      }
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
  /// served or refused, and why. The last kMaxMessages lines: a job that runs for months keeps
  /// no more.
  std::vector<std::string> messages() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::vector<std::string>(messages_.begin(), messages_.end());
  }
  static constexpr size_t kMaxMessages = 1000;

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

  // The slow-step capture's checks, its step times, and the captures already in the store (an
  // earlier run's, not served again).
  void start_slow_steps(const SlowSteps& o) {
    OPTRACE_CHECK(std::isfinite(o.factor()) && o.factor() > 1.0, ArgumentError, "SlowSteps: factor must be > 1");
    OPTRACE_CHECK(o.history() >= 3 && o.history() <= 10000, ArgumentError, "SlowSteps: history must be 3 to 10000 steps");
    OPTRACE_CHECK(o.iterations() >= 1 && o.iterations() <= 1000, ArgumentError, "SlowSteps: iterations must be 1 to 1000");
    OPTRACE_CHECK(o.max_captures() >= 1, ArgumentError, "SlowSteps: max_captures must be >= 1");
    OPTRACE_CHECK(o.min_duration().count() >= 0, ArgumentError, "SlowSteps: min_duration must be >= 0");
    OPTRACE_CHECK(o.ring_steps() == 0 || (o.ring_steps() >= 2 && o.ring_steps() <= 1000), ArgumentError,
                  "SlowSteps: ring_steps must be 0 (no ring) or 2 to 1000");
    ring_steps_ = o.ring_steps();
    times_.emplace(o.history(), o.factor(), std::chrono::duration_cast<std::chrono::nanoseconds>(o.min_duration()).count());
    if (!o.store()) return;
    captures_last_ = o.max_captures();
    try {
      captures_seen_ = o.store()->add(std::string(detail::on_demand::kStorePrefix) + "count", 0);
      captures_first_ = captures_seen_;
      // This run's captures are counted from here: a store an earlier run left (a restart) holds
      // its captures, which neither are served nor use up this run's max_captures.
      captures_last_ = captures_seen_ < std::numeric_limits<int64_t>::max() - o.max_captures()
                           ? captures_seen_ + o.max_captures()
                           : std::numeric_limits<int64_t>::max();
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      say("slow steps: the store failed: " + detail::first_line(e));
    }
  }

  // The stepping thread's part of the slow-step capture: step s - 1 ended now. A slow one is
  // handed to the polling thread, which publishes it (nothing here waits on a store).
  void time_step(int64_t s) noexcept {
    const int64_t now = detail::profiler::now_ns();
    const int64_t last = last_step_ns_;
    last_step_ns_ = now;
    if (clear_times_.load(std::memory_order_relaxed)) {
      clear_times_.store(false, std::memory_order_relaxed);
      times_->clear();
    }
    const SlowSteps& o = *options_.slow_steps();
    if (last == 0) return;
    // Slow by the factor, or judged at all for the job's rule; a window asked or open: its steps
    // are not judged (nor the rule asked).
    int64_t median = 0;
    const bool candidate = o.is_slow() ? times_->judged(now - last, &median) : times_->add(now - last, &median);
    if (!candidate || attention_.load(std::memory_order_relaxed)) return;
    if (o.is_slow() && !ask_is_slow(o, StepTime{s - 1, std::chrono::nanoseconds(now - last), std::chrono::nanoseconds(median)}))
      return;
    // With the ring: the cycle that holds the slow step and the one before.
    const int64_t slow = s - 1;
    if (ring_steps_ > 0) {
      const auto [first, end] = ring_window(slow);
      std::lock_guard<std::mutex> lock(mutex_);
      if (detected_ || scheduler_.state() != detail::on_demand::State::Idle) return;
      detected_ = detail::on_demand::Capture{slow, now - last, median, rank_, first, end - first + 1};
      wake_.notify_all();
      return;
    }
    // Every rank's polling thread must read the capture before its first step: two poll intervals
    // and 100 ms ahead, in steps of the median (at least 1).
    int64_t lead = 1;
    if (o.store()) {
      const double ahead_ns = 2.0 * static_cast<double>(options_.poll_interval().count()) * 1e6 + 1e8;
      lead = static_cast<int64_t>(std::ceil(ahead_ns / static_cast<double>(std::max<int64_t>(median, 1))));
      lead = std::clamp<int64_t>(lead, 1, detail::on_demand::kMaxStepsAhead / 2);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (detected_ || scheduler_.state() != detail::on_demand::State::Idle) return;
    detected_ = detail::on_demand::Capture{s - 1, now - last, median, rank_, s + lead, o.iterations()};
    wake_.notify_all();
  }

  // The job's rule (SlowSteps::is_slow) on a step; one that throws counts as false, said once.
  bool ask_is_slow(const SlowSteps& o, const StepTime& t) noexcept {
    try {
      return o.is_slow()(t);
    } catch (const std::exception& e) {
      say_is_slow_threw(&e);
    } catch (...) {
      say_is_slow_threw(nullptr);
    }
    return false;
  }
  void say_is_slow_threw(const std::exception* e) noexcept {
    try {
      const std::string why = e != nullptr ? detail::first_line(*e) : "an exception that is not a std::exception";
      std::lock_guard<std::mutex> lock(mutex_);
      if (!is_slow_threw_) say("slow steps: SlowSteps::is_slow threw (" + why + "): its steps count as not slow");
      is_slow_threw_ = true;
    } catch (...) {  // no memory for the message: the step counts as not slow all the same
    }
  }

  // The polling thread's part (under mutex_, which it releases around the store): publishes the
  // slow step this rank saw, reads what the others published, and serves the latest.
  void poll_slow_steps(std::unique_lock<std::mutex>& lock) {
    const SlowSteps& o = *options_.slow_steps();
    std::optional<detail::on_demand::Capture> mine;
    mine.swap(detected_);
    if (!o.store()) {
      if (!mine) return;
      // The ring: a slow step inside the last capture's steps is the same slowdown (as with a store).
      if (ring_steps_ > 0 && mine->step < ring_covered_end_) return;
      if (captures_seen_ >= o.max_captures()) return say_limit(o.max_captures());
      ++captures_seen_;
      say_capture(*mine, "", judged_by(o));
      return serve_capture(*mine, judged_by(o));
    }
    using detail::on_demand::Published;
    Published published = Published::Yes;
    int64_t g = 0, unreadable = 0;
    std::vector<detail::on_demand::Capture> read;
    std::string error;
    lock.unlock();
    try {
      if (mine) published = detail::on_demand::publish_capture(*o.store(), *mine, captures_first_, captures_last_, &g);
      read = detail::on_demand::read_captures(*o.store(), &captures_seen_, &unreadable);
    } catch (const std::exception& e) {
      error = detail::first_line(e);  // c10d's errors carry a backtrace
    }
    lock.lock();
    if (!error.empty()) {
      if (error != store_error_) say("slow steps: the store failed: " + error);
      store_error_ = error;
      return;
    }
    store_error_.clear();
    if (unreadable > 0) say("slow steps: " + std::to_string(unreadable) + " capture(s) in the store are not optrace's: ignored");
    if (mine && published == Published::Limit) say_limit(o.max_captures());
    if (mine && published == Published::Claimed)
      say("slow steps: step " + std::to_string(mine->step) + " was slow here too; another rank's capture records it");
    if (read.empty()) return;
    const detail::on_demand::Capture& c = read.back();
    say_capture(c, c.rank == rank_ && mine && published == Published::Yes ? "" : "rank " + std::to_string(c.rank) + ": ",
                judged_by(o));
    serve_capture(c, judged_by(o));
  }

  // The factor that judges steps, or none when the job's rule does (SlowSteps::is_slow).
  static std::optional<double> judged_by(const SlowSteps& o) {
    return o.is_slow() ? std::nullopt : std::optional<double>(o.factor());
  }

  void say_capture(const detail::on_demand::Capture& c, const std::string& who, std::optional<double> factor) {
    char rule[48] = "judged slow by SlowSteps::is_slow,";
    if (factor) std::snprintf(rule, sizeof rule, "over %g x", *factor);
    char text[200];
    std::snprintf(text, sizeof text, "slow steps: %sstep %lld took %.1f ms, %s the median %.1f ms: %s steps %lld..%lld",
                  who.c_str(), static_cast<long long>(c.step), static_cast<double>(c.step_ns) / 1e6, rule,
                  static_cast<double>(c.median_ns) / 1e6, ring_steps_ > 0 ? "writing the ring's" : "recording",
                  static_cast<long long>(c.start), static_cast<long long>(c.start + c.iterations - 1));
    say(text);
  }
  void say_limit(int64_t max) {
    if (limit_said_) return;
    limit_said_ = true;
    say("slow steps: no more captures: " + std::to_string(max) + " taken (SlowSteps::max_captures)");
  }
  void serve_capture(const detail::on_demand::Capture& c, std::optional<double> factor) {
    if (ring_steps_ > 0) return hold_ring_capture(c, factor);
    OnDemandRequest r;
    r.start_iteration = c.start;
    r.iterations = c.iterations;
    r.reason_json = c.to_json(factor);
    accept(r);
  }

  void say(std::string line) {  // under mutex_; one write, so that lines of several threads never mix
    const std::string text = "optrace: on-demand: " + line + "\n";
    std::fwrite(text.data(), 1, text.size(), stderr);
    if (messages_.size() == kMaxMessages) messages_.pop_front();
    messages_.push_back(std::move(line));
  }

  static int64_t steady_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
  }
  static int64_t wall_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  // The ring (SlowSteps::ring_steps). The stepping thread runs a CPU-only Profiler whose cycles
  // of ring_steps steps begin at multiples of it (the same steps on every rank), and keeps each
  // finished cycle's trace (its window, shared) in ring_cycles_; the polling thread drops those no
  // capture can still ask for (trim_ring) and writes a capture from the cycles that hold its steps
  // (serve_ring), joined into one trace: one file per rank, as HTA reads a folder.

  // One finished cycle: its trace, its steps, and when it ended (steady clock, ms).
  struct RingCycle {
    std::shared_ptr<const ProfilerTrace> trace;
    int64_t first = 0, last = 0;
    int64_t end_ms = 0;
  };
  // A capture waiting for the cycle that ends its steps.
  struct RingCapture {
    detail::on_demand::Capture capture;
    std::optional<double> factor;
  };
  static constexpr size_t kRingCycles = 64;  // at most this many kept (and the last two always)
  static constexpr size_t kRingPending = 16;  // captures waiting for their cycle, at most

  // The steps a capture of slow step `step` holds: the cycle that holds it and the one before.
  std::pair<int64_t, int64_t> ring_window(int64_t step) const {
    const int64_t cycle = step / ring_steps_ * ring_steps_;
    return {std::max<int64_t>(0, cycle - ring_steps_), cycle + ring_steps_ - 1};
  }

  // A capture (this rank's, or read from the store: any text that parses) waits for its cycle
  // (under mutex_). Its steps are those of this ring's window around its slow step, whatever it
  // says (another rank's ring_steps, a trigger's window after the step); one whose slow step is
  // far ahead of this rank, or whose steps miss that window, is ignored: nothing waits forever.
  void hold_ring_capture(detail::on_demand::Capture c, std::optional<double> factor) {
    const auto [first, end] = ring_window(c.step);
    const int64_t start = std::max(c.start, first), last = std::min(c.start + c.iterations - 1, end);
    if (c.step > step_num() + detail::on_demand::kMaxStepsAhead || start > last) {
      say("slow steps: a capture of step " + std::to_string(c.step) + " (steps " + std::to_string(c.start) + ".." +
          std::to_string(c.start + c.iterations - 1) + ") does not fit the ring at step " + std::to_string(step_num()) +
          ": ignored");
      return;
    }
    c.start = start;
    c.iterations = last - start + 1;
    if (ring_pending_.size() == kRingPending) {
      say("slow steps: " + std::to_string(kRingPending) + " captures wait for their cycles: the oldest, of step " +
          std::to_string(ring_pending_.front().capture.step) + ", is dropped");
      ring_pending_.erase(ring_pending_.begin());
    }
    ring_pending_.push_back(RingCapture{c, factor});
    ring_covered_end_ = std::max(ring_covered_end_, last + 1);
    ring_waiting_.store(true, std::memory_order_relaxed);
  }

  // The stepping thread's part: a cycle ends at each multiple of ring_steps_; the ring starts at
  // one when no window is asked or open (a window takes the Profiler's place meanwhile).
  void ring_step(int64_t s) noexcept {
    if (s % ring_steps_ != 0) {
      if (ring_) step_ring();
      return;
    }
    if (ring_) {
      if (!step_ring()) return;
      const bool crowded = keep_cycle(s - 1);  // the cycle that ended as step s began
      ring_cycle_first_ = s;
      if (crowded || ring_waiting_.load(std::memory_order_relaxed)) wake_.notify_all();
    } else if (!attention_.load(std::memory_order_acquire)) {
      start_ring(s);
    }
  }

  bool step_ring() noexcept {
    try {
      ring_->step();
      return true;
    } catch (const std::exception& e) {
      ring_failed(e.what());
    }
    return false;
  }

  void start_ring(int64_t s) noexcept {
    try {
      ProfilerOptions o = options_.profiler();
      o.activities({Activity::CPU})
          .profile_memory(false)
          .execution_trace(std::string())
          .on_trace_ready(nullptr)
          .schedule(Schedule().active(ring_steps_));
      ring_.reset(new Profiler(std::move(o), s));
      ring_thread_.store(std::this_thread::get_id());
      ring_cycle_first_ = s;
      if (ring_said_ && !ring_paused_) return;
      std::lock_guard<std::mutex> lock(mutex_);
      say(ring_said_ ? "the ring records again from step " + std::to_string(s)
                     : "the ring records from step " + std::to_string(s) + ", in cycles of " + std::to_string(ring_steps_) + " steps");
      ring_said_ = true;
      ring_paused_ = false;
    } catch (const std::exception& e) {
      ring_failed(e.what());  // another Profiler or an OpTracer: tried again at the next cycle
    }
  }

  void ring_failed(const char* what) noexcept {
    ring_.reset();
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      if (ring_error_ != what) say(std::string("the ring stopped: ") + what + " (tried again at the next cycle)");
      ring_error_ = what;
    } catch (...) {
    }
  }

  // The ring's last closed cycle, from ring_cycle_first_ to step `last`, kept for the polling
  // thread; whether more than kRingCycles are kept now.
  bool keep_cycle(int64_t last) noexcept {
    try {
      std::lock_guard<std::mutex> lock(ring_mutex_);
      ring_cycles_.push_back(RingCycle{ring_->last_trace(), ring_cycle_first_, last, steady_ms()});
      return ring_cycles_.size() > kRingCycles;
    } catch (...) {  // no memory for one more: the cycle is not kept
    }
    return false;
  }

  // Stops the ring (on its thread; in the destructor, on any) before step s begins (a window
  // opens: the ring has not begun s), or `within` it (flush: s as recorded so far); the steps of
  // its open cycle are kept.
  void stop_ring(int64_t s, bool within) noexcept {
    try {
      ring_->stop();
      const int64_t last = within ? s : s - 1;
      if (last >= ring_cycle_first_) keep_cycle(last);
    } catch (...) {  // stop() failed: that cycle is not kept
    }
    ring_.reset();
  }

  // Writes the captures whose steps the ring holds (under mutex_, released while writing): each
  // once the cycle that ends its steps is kept, or the job is a cycle past them (the ring was not
  // recording: a window had its place), or `now` (flush: what is kept so far).
  void serve_ring(std::unique_lock<std::mutex>& lock, bool now) {
    for (size_t next = 0; next < ring_pending_.size();) {
      const RingCapture c = ring_pending_[next];
      const int64_t last = c.capture.start + c.capture.iterations - 1;
      std::vector<RingCycle> parts;
      bool ended = false;
      {
        std::lock_guard<std::mutex> ring_lock(ring_mutex_);
        ended = !ring_cycles_.empty() && ring_cycles_.back().last >= last;
        for (const RingCycle& k : ring_cycles_)
          if (k.last >= c.capture.start && k.first <= last) parts.push_back(k);
      }
      if (!ended && !now && step_num() <= last + ring_steps_ + 1) {
        ++next;  // its cycle has not ended
        continue;
      }
      ring_pending_.erase(ring_pending_.begin() + static_cast<std::ptrdiff_t>(next));
      ring_waiting_.store(!ring_pending_.empty(), std::memory_order_relaxed);
      if (parts.empty()) {
        say("slow steps: the ring kept none of steps " + std::to_string(c.capture.start) + ".." + std::to_string(last) +
            " (it was not recording, or they were dropped): nothing written for step " + std::to_string(c.capture.step));
        continue;
      }
      const int64_t first = std::max(parts.front().first, c.capture.start);
      const int64_t end = std::min(parts.back().last, last);
      detail::on_demand::Capture written = c.capture;
      written.start = first;
      written.iterations = end - first + 1;
      ++joining_;  // flush() waits for this write
      lock.unlock();
      std::string path, error;
      try {
        path = write_ring_capture(parts, written.to_json(c.factor));
      } catch (const std::exception& e) {
        error = e.what();
      }
      lock.lock();
      --joining_;
      joined_.notify_all();
      if (!error.empty()) {
        say("slow steps: the ring's trace was not written: " + error);
        continue;
      }
      traces_.push_back(path);
      int64_t held = 0;
      for (const RingCycle& k : parts) held += std::min(k.last, end) - std::max(k.first, first) + 1;
      say("slow steps: wrote steps " + std::to_string(first) + ".." + std::to_string(end) + " from the ring to " + path +
          (first > c.capture.start || end < last || held < end - first + 1
               ? " (of steps " + std::to_string(c.capture.start) + ".." + std::to_string(last) + ", " +
                     std::to_string(last - c.capture.start + 1 - held) + " not kept: the ring was not recording them)"
               : std::string()));
    }
  }

  // A trace's name in the output folder when the request names none: tensorboard_trace_handler's.
  std::string trace_name(int64_t ns) const { return detail::profiler::trace_file_name(worker_, ns, options_.use_gzip()); }

  // The cycles' trace, joined, with why it was taken, written as a window's (off the stepping
  // thread, without mutex_).
  std::string write_ring_capture(const std::vector<RingCycle>& parts, const std::string& why) {
    std::vector<std::shared_ptr<detail::profiler::Window>> windows;
    for (const RingCycle& k : parts) windows.push_back(k.trace->window_);
    ProfilerTrace trace(detail::profiler::joined_windows(windows), parts.back().trace->info_);
    trace.info_.metadata.emplace_back("optraceCapture", why);
    const std::string relative = trace_name(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
    auto [folder, leaf] = detail::open_folder_beneath(dir_.string(), relative, detail::MissingFolder::Make);
    const std::string path = (dir_ / relative).string();
    trace.save(detail::FileTarget{folder.get(), leaf, path}, detail::ExistingFile::Keep);
    return path;
  }

  // Drops the cycles no capture can still ask for (the polling thread, under mutex_): those that
  // ended more than two poll intervals and 500 ms ago (every rank has read a capture by then)
  // unless a waiting capture needs them, and the oldest beyond kRingCycles whatever waits; never
  // the last two.
  void trim_ring() {
    int64_t needed = std::numeric_limits<int64_t>::max();
    for (const RingCapture& c : ring_pending_) needed = std::min(needed, c.capture.start);
    const int64_t horizon = steady_ms() - 2 * options_.poll_interval().count() - 500;
    std::vector<RingCycle> dropped;  // freed after the lock: the stepping thread may wait for it
    {
      std::lock_guard<std::mutex> ring_lock(ring_mutex_);
      while (ring_cycles_.size() > 2 && (ring_cycles_.size() > kRingCycles ||
                                         (ring_cycles_.front().end_ms < horizon && ring_cycles_.front().last < needed))) {
        dropped.push_back(std::move(ring_cycles_.front()));
        ring_cycles_.pop_front();
      }
    }
  }

  // Does what the scheduler decided (under mutex_): the open window closes, the request's window
  // opens, the lines are said. A window that cannot open is said, and the scheduler is idle again.
  void apply(const detail::on_demand::Actions& a) {
    for (const std::string& line : a.lines) say(line);
    try {
      if (a.close && window_) retire_window();
      if (a.close) clear_times_.store(true, std::memory_order_relaxed);
      if (a.open) open_window(scheduler_.request(), a.open_step);
    } catch (const std::exception& e) {
      say((a.open ? "window at step " + std::to_string(a.open_step) + " failed: " : std::string("closing the window failed: ")) +
          e.what());
      window_.reset();
      scheduler_.on_window_failed();
    }
    attention_.store(scheduler_.wants_steps() || !left_.empty(), std::memory_order_release);
  }

  // A new request (under mutex_): its trace's name checked here, the rest by the scheduler.
  void accept(const OnDemandRequest& r) {
    if (r.cancel) {
      apply(scheduler_.on_cancel());
      wake_.notify_all();  // the polling thread closes a duration window
      return;
    }
    if (ring_steps_ > 0 && !r.by_iteration()) {
      say("request refused: a window of a duration cannot run beside the ring (SlowSteps::ring_steps), which "
          "records every step; ask for steps (ACTIVITIES_ITERATIONS)");
      return;
    }
    try {
      if (!r.log_file.empty()) detail::on_demand::resolve_inside(dir_, r.log_file);
    } catch (const Error& e) {
      say(std::string("request refused: ") + e.what());
      return;
    }
    apply(scheduler_.on_request(r, step_num(), steady_ms(), wall_ms()));
    wake_.notify_all();  // the polling thread: a duration window's start
  }

  // The stepping thread's part, when a request or a window needs it.
  void on_step(int64_t s) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!left_.empty() && left_.release())  // release() empties it
      say("the profiler state a window closed elsewhere left on this thread was released at step " + std::to_string(s));
    try {
      // A window cancelled closes at this boundary: the step that begins here is not one of it.
      if (window_ && scheduler_.request().by_iteration() && !scheduler_.closing()) window_->step();
    } catch (const std::exception& e) {
      say(std::string("window at step ") + std::to_string(s) + " failed: " + e.what());
      window_.reset();
      scheduler_.on_window_failed();
    }
    apply(scheduler_.on_step(s));
  }

  // Opens a window for `r` (under mutex_): on the stepping thread at step `s` for an iteration
  // window, on the polling thread for a duration window.
  void open_window(const OnDemandRequest& r, int64_t s) {
    if (ring_steps_ > 0 && r.by_iteration() && ring_) {  // on the stepping thread, the ring's: the window takes its place
      OPTRACE_CHECK(std::this_thread::get_id() == ring_thread_.load(), Error, "the ring records on another thread");
      stop_ring(s, /*within=*/false);
      ring_paused_ = true;
      say("the ring pauses for the window from step " + std::to_string(s));
    }
    const int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    // The trace goes through the folder opened here beneath the output folder, made if missing:
    // a link put on the way before the writer thread writes (seconds later) is not followed.
    const std::string relative = r.log_file.empty() ? trace_name(ns) : detail::on_demand::name_inside(dir_, r.log_file);
    const std::string path = (dir_ / relative).string();
    auto [folder, leaf] = detail::open_folder_beneath(dir_.string(), relative, detail::MissingFolder::Make);
    auto held = std::make_shared<detail::Fd>(std::move(folder));
    ProfilerOptions o = options_.profiler();
    if (r.record_shapes) o.record_shapes(*r.record_shapes);
    if (r.profile_memory) o.profile_memory(*r.profile_memory);
    if (r.with_stack) o.with_stack(*r.with_stack);
    if (!r.reason_json.empty()) {
      TraceMetadata metadata = o.metadata_json();
      metadata.emplace_back("optraceCapture", r.reason_json);
      o.metadata_json(std::move(metadata));
    }
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
    // The execution trace too: through the folder opened now (it is written when the window is
    // joined, later still), never over a file.
    std::optional<detail::profiler::HeldTarget> et;
    if (!et_dir_.empty()) {
      const std::string name = worker_ + "." + std::to_string(ns) + ".et.json";
      auto [et_folder, et_leaf] = detail::open_folder_beneath(et_dir_.string(), name, detail::MissingFolder::Make);
      const int fd = et_folder.get();
      et = detail::profiler::HeldTarget{detail::FileTarget{fd, et_leaf, (et_dir_ / name).string()},
                                        std::make_shared<const detail::Fd>(std::move(et_folder))};
      o.execution_trace(et->target.shown);
    } else {
      o.execution_trace(std::string());
    }
    o.on_trace_ready([this, path, held, leaf = leaf](const ProfilerTrace& trace) {
      trace.save(detail::FileTarget{held->get(), leaf, path}, detail::ExistingFile::Keep);
      std::lock_guard<std::mutex> lock(mutex_);
      traces_.push_back(path);
    });
    window_.reset(new Profiler(std::move(o), s, std::move(et)));
    window_thread_ = std::this_thread::get_id();
    for (const std::string& note : window_->notes()) say(note);  // e.g. CUDA asked for without a device
    say(r.by_iteration() ? "recording steps " + std::to_string(s) + ".." + std::to_string(s + r.iterations - 1) + " to " + path
                         : "recording " + std::to_string(r.duration_ms) + " ms to " + path);
  }

  // The open window stops recording; its trace goes to its writer (under mutex_, without waiting).
  void retire_window() {
    const bool elsewhere = std::this_thread::get_id() != window_thread_;
    if (elsewhere)
      say("the window closes on another thread than the one that opened it (flush() from a thread that does not "
          "step?): with CUDA activities libtorch needs the opening thread");
    const size_t notes = window_->notes().size();
    window_->stop_recording();
    for (size_t i = notes; i < window_->notes().size(); ++i) say(window_->notes()[i]);
    if (elsewhere && !window_->left_state_.empty()) {
      // libtorch's state (and the memory reporter) stay on the stepping thread until its next step.
      left_ = std::move(window_->left_state_);
      window_->left_state_ = {};
      say("the window's profiler state stays on the thread that opened it until that thread's next step()");
    }
    retired_.push_back(std::move(window_));
    wake_.notify_all();
    closed_.notify_all();
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
        if (!options_.config_file().empty()) {
          // Read without the lock step() may need: a file system that hangs stalls this thread only.
          lock.unlock();
          detail::on_demand::ConfigRead c = detail::on_demand::read_config(options_.config_file());
          lock.lock();
          poll_config(std::move(c));
        }
        if (times_) poll_slow_steps(lock);
        next_poll = now + options_.poll_interval();
        if (stopping_) break;
      } else if (detected_) {
        poll_slow_steps(lock);  // this rank's slow step, published at once
      }
      if (ring_steps_ > 0) {
        serve_ring(lock, /*now=*/false);
        trim_ring();
        if (stopping_) break;
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
    // A duration window opened after the destructor's first flush (a request meanwhile) closes
    // here, on the thread that opened it, not on the destructor's.
    if (window_ && window_thread_ == std::this_thread::get_id()) {
      apply(scheduler_.on_flush(step_num()));
      apply(scheduler_.on_tick(steady_ms(), step_num()));
    }
    polling_ = false;
    closed_.notify_all();
  }

  // A duration window's start and end, on the polling thread (under mutex_); `until` is lowered
  // to its next event.
  void run_duration_window(Clock::time_point& until) {
    apply(scheduler_.on_tick(steady_ms(), step_num()));
    const int64_t next = scheduler_.next_tick_ms();
    if (next >= 0) until = std::min(until, Clock::time_point(std::chrono::milliseconds(next)));
  }

  // What the trigger file held (read by the polling thread, handled under mutex_); a new content
  // is a request.
  void poll_config(detail::on_demand::ConfigRead c) {
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
  int64_t rank_ = -1;                   // the job's rank, -1 when not known
  // The slow-step capture: the step times and the last step's end, the stepping thread's own.
  std::optional<detail::on_demand::StepTimes> times_;
  int64_t last_step_ns_ = 0;
  std::atomic<bool> clear_times_{false};  // a window closed: its steps are not judged
  mutable std::mutex mutex_;            // everything below
  std::condition_variable wake_;    // the polling thread: a request, a window retired, stopping
  std::condition_variable joined_;  // flush(): the polling thread's joins are done
  std::condition_variable closed_;  // flush(): the polling thread closed a duration window, or stopped
  bool polling_ = true;             // the polling thread runs
  int joining_ = 0;                 // finished windows the polling thread is joining
  bool stopping_ = false;
  detail::on_demand::Scheduler scheduler_;  // when windows open and close
  std::unique_ptr<Profiler> window_;        // the open window (scheduler_ is Recording)
  std::thread::id window_thread_;           // the thread that opened it, which closes it
  detail::profiler::OpeningThreadState left_;  // a window closed elsewhere left this on its thread
  std::vector<std::unique_ptr<Profiler>> retired_;
  std::optional<std::string> config_;  // the trigger file's last content (at start: a leftover)
  std::string refused_state_;          // the last refused trigger file, said once
  std::optional<detail::on_demand::Capture> detected_;  // this rank's slow step, for the polling thread
  int64_t captures_seen_ = 0;  // the store's captures read (or, without a store, taken here)
  int64_t captures_first_ = 0;  // with a store: its count at start (captures after it are this run's)
  int64_t captures_last_ = 0;   // and the last capture number this run may publish
  std::string store_error_;    // the store's last failure, said once
  bool limit_said_ = false;
  bool is_slow_threw_ = false;  // SlowSteps::is_slow threw, said once
  std::vector<std::string> traces_;
  std::deque<std::string> messages_;  // the last kMaxMessages
  // The ring: its Profiler and cycle are the stepping thread's (ring_thread_); the rest below.
  int64_t ring_steps_ = 0;  // SlowSteps::ring_steps; 0: no ring
  std::unique_ptr<Profiler> ring_;
  std::atomic<std::thread::id> ring_thread_{};  // the stepping thread, once the ring started
  int64_t ring_cycle_first_ = 0;  // the open cycle's first step
  bool ring_said_ = false;
  bool ring_paused_ = false;  // by a window: its restart is said
  std::string ring_error_;                    // under mutex_: the last failure, said once
  std::vector<RingCapture> ring_pending_;     // under mutex_
  int64_t ring_covered_end_ = 0;              // under mutex_: the end of the last capture's steps
  std::atomic<bool> ring_waiting_{false};     // ring_pending_ is not empty: wake the poller at a cycle's end
  std::mutex ring_mutex_;                     // ring_cycles_; taken last, never while waiting
  std::deque<RingCycle> ring_cycles_;
  std::thread poller_;
};

}  // namespace optrace
