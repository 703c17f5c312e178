// optrace/detail/on_demand/scheduler.hpp: when an on-demand window opens and closes, decided without threads or libtorch
#pragma once
// The on-demand profiler's one state machine (issue 58). Its inputs are what happens: a request,
// a cancel, a step, a tick of the clock, a flush, a window that failed; each returns what the
// caller must do (open the window, close it, say lines). It holds no window, thread, file or
// clock of its own, so every transition is tested by itself (test_on_demand: [scheduler]) and
// driven by a fuzzer with random sequences.
//
// Every request is bounded relative to now: a start more than kMaxStepsAhead steps or kMaxWaitMs
// ahead is refused in one line (a PROFILE_START_TIME in µs or ns, or a start iteration of 10^12,
// would otherwise hold the one window slot for centuries), and all arithmetic on steps and times
// stays within those bounds, so nothing here can overflow. A cancel ends whatever is asked or open:
// an open window closes where it would have closed, on the thread that opened it (the stepping
// thread's next step, the polling thread's next tick), never on the canceller's.

#include <optrace/detail/on_demand/request.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace optrace::detail::on_demand {

// How far ahead a request may start: further is refused as a likely typo.
inline constexpr int64_t kMaxStepsAhead = 1000000;                   // steps from the current one
inline constexpr int64_t kMaxWaitMs = int64_t{24} * 3600 * 1000;     // from now to PROFILE_START_TIME
inline constexpr int64_t kMaxPastMs = 10000;                         // PROFILE_START_TIME behind now: Kineto's limit

enum class State {
  Idle,       // nothing asked
  Pending,    // an iteration request, placed at the next step (on the stepping thread, as Kineto)
  Scheduled,  // an iteration window, before its first step
  Waiting,    // a duration window, before its start time
  Recording,  // a window is open
};

inline const char* state_name(State s) {
  switch (s) {
    case State::Idle: return "idle";
    case State::Pending: return "a request waits for the next step";
    case State::Scheduled: return "a window of steps waits for its first step";
    case State::Waiting: return "a window waits for its start time";
    case State::Recording: return "a window is open";
  }
  return "?";
}

/// What the caller must do after an input: close the open window, then open the request's
/// window (open_step: the step its Profiler counts from), and say `lines` (each one line).
struct Actions {
  bool close = false;
  bool open = false;
  int64_t open_step = 0;
  std::vector<std::string> lines;
};

/// The state machine. Steps are the job's step counts (OnDemandProfiler::step_num); `now_ms` a
/// steady clock's milliseconds, `wall_ms` milliseconds since the epoch (PROFILE_START_TIME's clock).
class Scheduler {
 public:
  State state() const { return state_; }
  /// The request being served (any state but Idle).
  const OnDemandRequest& request() const { return request_; }
  /// An iteration window's steps [first_step, end_step) (Scheduled, Recording).
  int64_t first_step() const { return first_; }
  int64_t end_step() const { return end_; }
  /// Whether the stepping thread has something to do at its next step.
  bool wants_steps() const {
    return state_ == State::Pending || state_ == State::Scheduled || (state_ == State::Recording && by_iteration_);
  }
  /// Whether a cancel is closing the open window at its next step or tick.
  bool closing() const { return closing_; }
  /// When on_tick has something to do (a duration window's start or end), in now_ms; -1: never.
  int64_t next_tick_ms() const {
    if (state_ == State::Waiting) return start_ms_;
    if (state_ == State::Recording && !by_iteration_) return closing_ ? 0 : until_ms_;
    return -1;
  }

  /// A request, at the job's current step `step`. Refused (a line, nothing changes) while
  /// another is asked or open, or when it starts too far ahead or too long ago.
  Actions on_request(const OnDemandRequest& r, int64_t step, int64_t now_ms, int64_t wall_ms) {
    Actions a;
    if (state_ != State::Idle) {
      a.lines.push_back(std::string("request ignored: ") + state_name(state_) + " (one window at a time; a cancel ends it)");
      return a;
    }
    if (r.by_iteration()) {
      // Where it would start were it placed now; placed at the next step, it starts there or later.
      const int64_t first = window_start(step + 1, *r.start_iteration, r.start_iteration_roundup);
      if (first - (step + 1) > kMaxStepsAhead) {
        a.lines.push_back("request refused: its window would start at step " + std::to_string(first) + ", " +
                          std::to_string(first - step) + " steps ahead of step " + std::to_string(step) + " (at most " +
                          std::to_string(kMaxStepsAhead) + ")");
        return a;
      }
      request_ = r;
      by_iteration_ = true;
      state_ = State::Pending;
      return a;
    }
    int64_t wait_ms = 0;
    if (r.start_time_ms > 0) {
      // Compared before subtracting: start_time_ms may be anything up to INT64_MAX.
      if (r.start_time_ms > wall_ms && r.start_time_ms - wall_ms > kMaxWaitMs) {
        a.lines.push_back("request refused: PROFILE_START_TIME " + std::to_string(r.start_time_ms) + " is more than " +
                          std::to_string(kMaxWaitMs / 3600000) + " h ahead (milliseconds since the epoch; now is " +
                          std::to_string(wall_ms) + ")");
        return a;
      }
      if (r.start_time_ms < wall_ms && wall_ms - r.start_time_ms > kMaxPastMs) {
        a.lines.push_back("request refused: PROFILE_START_TIME " + std::to_string(r.start_time_ms) + " is more than " +
                          std::to_string(kMaxPastMs / 1000) + " s in the past (Kineto's limit)");
        return a;
      }
      wait_ms = r.start_time_ms > wall_ms ? r.start_time_ms - wall_ms : 0;
    }
    request_ = r;
    by_iteration_ = false;
    start_ms_ = now_ms + wait_ms;
    state_ = State::Waiting;
    return a;
  }

  /// The job's step `step` began (the stepping thread): an iteration request is placed, a
  /// scheduled window opens, an open one closes after its last step.
  Actions on_step(int64_t step) {
    Actions a;
    if (state_ == State::Recording && by_iteration_ && (step >= end_ || closing_)) close(a);
    if (state_ == State::Pending) {
      first_ = window_start(step, *request_.start_iteration, request_.start_iteration_roundup);
      end_ = first_ + request_.iterations;
      state_ = State::Scheduled;
      if (first_ > step)
        a.lines.push_back("request: steps " + std::to_string(first_) + ".." + std::to_string(end_ - 1) + " (now at step " +
                          std::to_string(step) + ")");
    }
    if (state_ == State::Scheduled && step >= first_) {
      // A stepping thread ahead of first_ (steps not reported one by one) opens it now.
      end_ = step + request_.iterations;
      first_ = step;
      open(a, step);
    }
    return a;
  }

  /// The clock reached `now_ms` (the polling thread): a duration window opens at its start, and
  /// closes at its end.
  Actions on_tick(int64_t now_ms, int64_t step) {
    Actions a;
    if (state_ == State::Recording && !by_iteration_ && (now_ms >= until_ms_ || closing_)) close(a);
    if (state_ == State::Waiting && now_ms >= start_ms_) {
      until_ms_ = now_ms + request_.duration_ms;
      open(a, step);
    }
    return a;
  }

  /// A cancel, from any thread: what is asked is dropped; an open window closes with what it
  /// recorded at its next step (a window of steps) or tick (a duration window: due at once).
  Actions on_cancel() {
    Actions a;
    if (state_ == State::Idle) {
      a.lines.push_back("cancel: nothing was asked");
    } else if (state_ == State::Recording) {
      a.lines.push_back(by_iteration_ ? "cancel: the window of steps " + std::to_string(first_) + ".." +
                                            std::to_string(end_ - 1) + " closes at the next step, with the steps recorded so far"
                                      : std::string("cancel: the duration window closes now"));
      closing_ = true;
    } else {
      a.lines.push_back(std::string("cancel: dropped (") + state_name(state_) + ")");
      state_ = State::Idle;
    }
    return a;
  }

  /// flush(): an open window closes with what it recorded, a window not started is dropped. A
  /// window of steps closes now (flush() runs on the stepping thread, or after it stopped); a
  /// duration window at the polling thread's next tick, due at once, where it was opened.
  Actions on_flush(int64_t step) {
    Actions a;
    if (state_ == State::Recording) {
      a.lines.push_back(ending("flush()", step));
      if (by_iteration_) close(a);
      else closing_ = true;
    } else if (state_ != State::Idle) {
      a.lines.push_back("flush(): a requested window that had not started is dropped");
      state_ = State::Idle;
    }
    return a;
  }

  /// The window could not be opened or failed while open: nothing is open any more.
  void on_window_failed() { state_ = State::Idle; }

 private:
  std::string ending(const char* who, int64_t step) const {
    if (by_iteration_)
      return std::string(who) + ": the window of steps " + std::to_string(first_) + ".." + std::to_string(end_ - 1) +
             " closes at step " + std::to_string(step) + ", with the steps recorded so far";
    return std::string(who) + ": the duration window closes early";
  }
  void open(Actions& a, int64_t step) {
    a.open = true;
    a.open_step = step;
    state_ = State::Recording;
    closing_ = false;
  }
  void close(Actions& a) {
    a.close = true;
    state_ = State::Idle;
  }

  State state_ = State::Idle;
  OnDemandRequest request_;
  bool by_iteration_ = false;
  bool closing_ = false;                 // Recording: closed at the next step, or tick (due at once)
  int64_t first_ = 0, end_ = 0;          // iteration window: steps [first, end)
  int64_t start_ms_ = 0, until_ms_ = 0;  // duration window: its start and end (now_ms)
};

}  // namespace optrace::detail::on_demand
