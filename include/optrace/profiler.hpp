// optrace/profiler.hpp: Profiler, torch.profiler for libtorch programs: timed traces that HTA, Chakra and Perfetto read
#pragma once

// libtorch's inline RecordFunction::inputs() reads a member that exists only in debug builds of
// libtorch (see op_tracer.hpp).
#ifndef NDEBUG
#error "optrace/profiler.hpp needs NDEBUG, as libtorch is built with it: configure with -DCMAKE_BUILD_TYPE=Release (or RelWithDebInfo), or add -DNDEBUG"
#endif

#include <optrace/detail/common/gzip.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/detail/profiler/callbacks.hpp>
#include <optrace/detail/profiler/device_trace.hpp>
#include <optrace/detail/profiler/execution_trace.hpp>
#include <optrace/detail/profiler/kineto_writer.hpp>
#include <optrace/detail/profiler/memory_reporter.hpp>
#include <optrace/detail/profiler/timed_events.hpp>
#include <optrace/detail/profiler/trace_info.hpp>
#include <optrace/detail/profiler/window.hpp>
#include <optrace/distributed.hpp>
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/key_averages.hpp>
#include <optrace/op_trace.hpp>
#include <optrace/op_tracer.hpp>

#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <torch/arg.h>
#include <torch/cuda.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#if defined(__unix__)
#include <unistd.h>
#endif

namespace optrace {

/// What a Profiler records: CPU (ops and ranges on every thread) and CUDA (kernels and runtime
/// calls; see docs/profiler.md for where they are recorded).
enum class Activity { CPU, CUDA };

/// What the profiler does during one step, as torch.profiler.ProfilerAction.
enum class ProfilerAction { None, Warmup, Record, RecordAndSave };

/// When to record, as `torch.profiler.schedule(wait=, warmup=, active=, repeat=, skip_first=)`:
/// after `skip_first` steps, cycles of `wait` idle steps, `warmup` steps, then `active` recorded
/// steps, the last of which saves the trace (`on_trace_ready`); `repeat` cycles (0: until stop).
struct Schedule {
  TORCH_ARG(int64_t, wait) = 0;
  TORCH_ARG(int64_t, warmup) = 0;
  TORCH_ARG(int64_t, active) = 1;
  TORCH_ARG(int64_t, repeat) = 0;
  TORCH_ARG(int64_t, skip_first) = 0;

 public:
  /// The action of step `step` (0-based), as torch.profiler.schedule's function returns it.
  ProfilerAction operator()(int64_t step) const {
    if (step < skip_first()) return ProfilerAction::None;
    step -= skip_first();
    const int64_t cycle = wait() + warmup() + active();
    if (repeat() > 0 && step / cycle >= repeat()) return ProfilerAction::None;
    const int64_t mod = step % cycle;
    if (mod < wait()) return ProfilerAction::None;
    if (mod < wait() + warmup()) return ProfilerAction::Warmup;
    return mod < cycle - 1 ? ProfilerAction::Record : ProfilerAction::RecordAndSave;
  }

  /// Throws ArgumentError unless wait, warmup, repeat, skip_first >= 0 and active > 0.
  void validate() const {
    OPTRACE_CHECK(wait() >= 0 && warmup() >= 0 && repeat() >= 0 && skip_first() >= 0 && active() > 0, ArgumentError,
                  "Schedule: wait, warmup, repeat and skip_first must be >= 0 and active > 0, got wait=", wait(),
                  " warmup=", warmup(), " active=", active(), " repeat=", repeat(), " skip_first=", skip_first());
  }
};

/// The trace of one recording window (a schedule's active steps, or start to stop), as
/// `on_trace_ready` receives it. Written in torch.profiler's Kineto format on demand.
class ProfilerTrace {
 public:
  /// The trace as the JSON text torch.profiler's `export_chrome_trace` writes; `trace_name` is
  /// its "traceName".
  std::string to_json(const std::string& trace_name = "") const {
    return detail::profiler::KinetoWriter(complete_window(), info_).write(trace_name);
  }

  /// Writes the trace to `path` (gzip when it ends in ".gz"), atomically: a failed write leaves
  /// no partial file. Throws IoError.
  void save(const std::string& path) const { save(path, detail::ExistingFile::Replace); }

  /// Writes the trace as save() does, but never over a file: IoError when `path` exists (a file
  /// or a link), and the file there is kept.
  void save_new(const std::string& path) const { save(path, detail::ExistingFile::Keep); }

  /// torch's `key_averages()` of this trace: one row per name (and input shapes with
  /// GroupBy::InputShape, torch's `key_averages(group_by_input_shape=True)`);
  /// with the CUDA activity, the runtime calls as rows on the CPU, each kernel's, copy's and
  /// set's time counted toward the range that launched it, and the device's events as rows of
  /// their own (the CUDA columns), joined as the saved trace joins them.
  KeyAverages key_averages(GroupBy group_by = GroupBy::Name) const {
    detail::profiler::WindowEvents w = detail::profiler::timed_events(*window_, info_, group_by);
    return KeyAverages::from_events(std::move(w.events), w.memory, group_by);
  }

  /// Events recorded (ops and ranges that ended within the window).
  int64_t num_events() const {
    int64_t n = 0;
    for (const auto& b : window_->buffers)
      for (const auto& e : b->events) n += e.end_ns >= 0 ? 1 : 0;
    return n;
  }

  /// Wall time of the window, in microseconds.
  double duration_us() const { return static_cast<double>(window_->end_ns - window_->start_ns) / 1000.0; }

 private:
  friend class Profiler;
  friend class OnDemandProfiler;
  ProfilerTrace(std::shared_ptr<detail::profiler::Window> window, detail::profiler::TraceInfo info)
      : window_(std::move(window)), info_(std::move(info)) {}

  void save(const std::string& path, detail::ExistingFile existing) const { save(detail::FileTarget::path(path), existing); }
  // The trace named `target.shown` (its traceName), written to the target (OnDemandProfiler's
  // through a folder held open beneath its output folder).
  void save(const detail::FileTarget& target, detail::ExistingFile existing) const {
    if (detail::gz_path(target.name)) {
      detail::write_file_maybe_gzip(target, to_json(target.shown), existing);
      return;
    }
    detail::profiler::KinetoWriter writer(complete_window(), info_);
    detail::write_file_atomic_with(target, [&](auto& sink) { writer.write(target.shown, sink); }, existing);
  }

  // The window with what libtorch's saved trace adds to its CUDA events (read once, here rather
  // than when the window closed: writing stays off the stepping thread).
  const detail::profiler::Window& complete_window() const {
    detail::profiler::complete_device_details(*window_);
    return *window_;
  }

  std::shared_ptr<detail::profiler::Window> window_;
  detail::profiler::TraceInfo info_;
};

/// What `on_trace_ready` is: called once per recording window with its trace, on the profiler's
/// writer thread (one at a time, in order), so that writing never holds up the stepping thread.
using TraceHandler = std::function<void(const ProfilerTrace&)>;

namespace detail::profiler {
// Whether a file can be made in `dir` (made first, with its parents, where it can be): a folder
// the profiler cannot write in is an error before the run, not after it.
inline bool can_write_in(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  return detail::can_create_beside(FileTarget::path(dir + "/.optrace-write-check")) == 0;
}

// A trace file's default worker name, as torch's tensorboard_trace_handler makes it: "<host
// name>_<pid>", with "_rank<R>" when the job's rank is known (`job`).
inline std::string default_worker_name(const std::optional<DistributedInfo>& job) {
  char host[256] = "localhost";
#if defined(__unix__)
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "localhost");
  std::string name = std::string(host) + "_" + std::to_string(static_cast<int64_t>(getpid()));
#else
  std::string name = host;
#endif
  if (job) name += "_rank" + std::to_string(job->rank);
  return name;
}

// A trace file's name as torch's tensorboard_trace_handler makes it: `<worker>.<time in ns>.pt.trace.json`,
// `.gz` added with `gzip`.
inline std::string trace_file_name(const std::string& worker, int64_t ns, bool gzip) {
  return worker + "." + std::to_string(ns) + ".pt.trace.json" + (gzip ? ".gz" : "");
}
}  // namespace detail::profiler

/// As torch.profiler.tensorboard_trace_handler: writes each trace to
/// `<dir>/<worker_name>.<time in ns>.pt.trace.json` (`.gz` added with `use_gzip`). `worker_name`
/// defaults to "<host name>_<pid>", with "_rank<R>" when torchrun's RANK and WORLD_SIZE are set
/// (the file says the rank too: "distributedInfo"). The folder is made (with its parents) and
/// checked writable here: a folder that cannot be written is an IoError now, not after the run.
inline TraceHandler tensorboard_trace_handler(const std::string& dir, std::string worker_name = "", bool use_gzip = false) {
  OPTRACE_CHECK(!dir.empty(), ArgumentError, "tensorboard_trace_handler: the folder is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  OPTRACE_CHECK(!ec && std::filesystem::is_directory(dir), IoError, "tensorboard_trace_handler: cannot make folder '", dir,
                "': ", ec ? ec.message() : "not a folder");
  OPTRACE_CHECK(detail::profiler::can_write_in(dir), IoError, "tensorboard_trace_handler: folder '", dir,
                "' is not writable");
  if (worker_name.empty()) worker_name = detail::profiler::default_worker_name(DistributedInfo::from_environment());
  return [dir, worker_name, use_gzip](const ProfilerTrace& trace) {
    const int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    trace.save(dir + "/" + detail::profiler::trace_file_name(worker_name, ns, use_gzip));
  };
}

/// A named range in the trace (cat "user_annotation"), as torch.profiler's `record_function`:
///   { optrace::RecordScope scope("data_loading"); ... }
/// Costs nothing measurable when no profiler records.
class RecordScope {
 public:
  explicit RecordScope(std::string name) : fn_(at::RecordScope::USER_SCOPE) {
    if (fn_.isActive()) fn_.before(std::move(name));
  }
  RecordScope(const RecordScope&) = delete;
  RecordScope& operator=(const RecordScope&) = delete;

 private:
  at::RecordFunction fn_;
};

/// Top-level keys of a Kineto trace with their JSON values (ProfilerOptions::metadata_json).
using TraceMetadata = std::vector<std::pair<std::string, std::string>>;

/// Options of a `Profiler`, as chained setters (the arguments of torch.profiler.profile).
struct ProfilerOptions {
  /// What to record. Default: CPU, and CUDA where a CUDA device is available.
  TORCH_ARG(std::vector<Activity>, activities) = {};
  /// When to record; none (the default): from construction (or start()) to stop(), one trace.
  TORCH_ARG(std::optional<Schedule>, schedule) = std::nullopt;
  /// Called with each finished trace (see TraceHandler). Default: none (the last trace stays
  /// available from `last_trace()` and `export_chrome_trace`).
  TORCH_ARG(TraceHandler, on_trace_ready) = nullptr;
  /// Record each op's inputs: "Input Dims", "Input type", "Input Strides", "Concrete Inputs".
  TORCH_ARG(bool, record_shapes) = false;
  /// Record the allocators' allocations and frees: "[memory]" events, key_averages' memory columns.
  TORCH_ARG(bool, profile_memory) = false;
  /// Record, for ranges that TorchScript runs, its call stack ("Call stack": "code(3): forward;")
  /// and module hierarchy ("Module Hierarchy": "TOP(Net)::forward.fc(Linear)::forward."), as
  /// torch.profiler writes them (its with_stack and with_modules). A C++ program has no Python stack.
  TORCH_ARG(bool, with_stack) = false;
  /// Also write the host execution trace of the same recorded steps to this path (plain JSON,
  /// schema 1.1.1-chakra.0.0.4: what torch's ExecutionTraceObserver writes, which Chakra's
  /// converter and trace_link read), when profiling stops. Default: none.
  TORCH_ARG(std::string, execution_trace) = "";
  /// This process's place in a distributed job, written in the trace as torch.profiler writes it
  /// ("distributedInfo", which HTA reads the rank from) and used for the collectives' arguments
  /// (docs/profiler.md, "Distributed jobs"). Default: `DistributedInfo::from_environment()`
  /// (torchrun's RANK and WORLD_SIZE) when they are set, else none.
  TORCH_ARG(std::optional<DistributedInfo>, distributed) = std::nullopt;
  /// More top-level keys of the Kineto trace, each with a JSON value, as torch.profiler's
  /// `add_metadata_json(key, value)` writes them (after "distributedInfo"). A key is a name of
  /// letters, digits and '_' that the trace does not already have. OnDemandProfiler's slow-step
  /// capture writes "optraceCapture" this way. Default: none.
  TORCH_ARG(TraceMetadata, metadata_json) = {};
};

/// torch.profiler for libtorch programs. Records every op and range on every thread with its
/// real start and duration (the whole nesting, as torch.profiler's `cpu_op` events), with
/// `record_shapes` their inputs, with `profile_memory` the allocators' reports, and writes
/// torch.profiler's Kineto trace (`*.pt.trace.json`), which HTA, Chakra, Perfetto and
/// optrace's own Kineto import read. The same recording gives the hf op trace (`op_trace()`),
/// equal to what an OpTracer records for the same calls.
///
/// One Profiler is active at a time in a process, and not beside a recording OpTracer. It
/// records from construction (or `start()`) to `stop()` (or destruction). Built on
/// RecordFunction observers, as OpTracer.
///
/// Example (torch.profiler's seed snippet in C++):
///   optrace::Profiler prof(optrace::ProfilerOptions()
///       .schedule(optrace::Schedule().wait(1).warmup(1).active(3).repeat(1))
///       .on_trace_ready(optrace::tensorboard_trace_handler("traces"))
///       .record_shapes(true).profile_memory(true));
///   for (int i = 0; i < 5; ++i) { model.forward(inputs); prof.step(); }
///   prof.stop();
///   std::cout << prof.key_averages().table("self_cpu_time_total", 20);
class Profiler {
 public:
  /// Validates the options and starts profiling. Throws ArgumentError for a bad schedule, Error
  /// when another Profiler is active or an OpTracer is recording.
  explicit Profiler(ProfilerOptions options = {}) : Profiler(std::move(options), /*first_step=*/0, std::nullopt, true) {}

 private:
  friend class OnDemandProfiler;
  // OnDemandProfiler's window (and ring): step numbers (ProfilerStep#N, the schedule's) count from
  // the job's own step `first_step`, so that every rank's window holds the same numbers; `et`: the
  // execution trace written through a folder held open (options.execution_trace() then names it);
  // `op_trace`: whether its windows feed op_trace() (~180 instructions per op, and memory for
  // every op until the Profiler goes: nobody asks an on-demand window for it).
  Profiler(ProfilerOptions options, int64_t first_step, std::optional<detail::profiler::HeldTarget> et = std::nullopt,
           bool op_trace = false)
      : options_(std::move(options)), op_trace_(op_trace) {
    if (options_.schedule()) options_.schedule()->validate();
    if (!options_.execution_trace().empty()) check_execution_trace_path(options_.execution_trace());
    check_metadata(options_.metadata_json());
    const bool cuda = torch::cuda::is_available();
    if (options_.activities().empty())
      options_.activities(cuda ? std::vector<Activity>{Activity::CPU, Activity::CUDA} : std::vector<Activity>{Activity::CPU});
    for (Activity a : options_.activities()) {
      if (a == Activity::CUDA && !cuda)
        notes_.push_back("CUDA activity requested but no CUDA device is available: recording CPU activity only");
      else if (a == Activity::CUDA)
        device_trace_ = true;
    }
    const int64_t epoch = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    info_.steady_to_epoch = epoch - detail::profiler::now_ns();
    info_.base_ns = detail::profiler::kineto_base_time_ns(epoch);
    if (!options_.distributed()) options_.distributed(DistributedInfo::from_environment());
    info_.distributed = options_.distributed();
#if defined(__unix__)
    info_.pid = static_cast<int64_t>(getpid());
#endif
    info_.process_name = process_name();
    info_.record_shapes = options_.record_shapes();
    info_.profile_memory = options_.profile_memory();
    info_.with_stack = options_.with_stack();
    info_.metadata = options_.metadata_json();
    if (et)
      execution_trace_ = std::make_unique<detail::profiler::ExecutionTraceWriter>(std::move(*et), info_.pid, info_.distributed);
    else if (!options_.execution_trace().empty())
      execution_trace_ = std::make_unique<detail::profiler::ExecutionTraceWriter>(options_.execution_trace(), info_.pid,
                                                                               info_.distributed);
    start_at(first_step);
  }

 public:
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// Stops profiling (see stop()); a failure of `on_trace_ready` is printed to stderr, not thrown.
  ~Profiler() {
    try {
      stop();
    } catch (const std::exception& e) {
      std::cerr << "optrace: Profiler: " << e.what() << "\n";
    } catch (...) {
    }
    left_state_.release();  // on the thread that opened a window stopped elsewhere
  }

  /// Starts profiling at step 0 (the constructor does). Throws Error when this or another
  /// Profiler is active, or an OpTracer is recording.
  void start() { start_at(0); }

  /// Ends the current step and begins the next, as torch.profiler's `step()`: the schedule's
  /// action for the new step opens, closes or saves a recording window.
  void step() {
    OPTRACE_CHECK(started_, Error, "step() on a Profiler that is not started");
    step_scope_.reset();
    const ProfilerAction previous = action_;
    ++step_num_;
    action_ = current_action();
    transit(previous, action_);
    open_step_scope();
  }

  /// Stops profiling: the open window is closed and its trace handed to `on_trace_ready`; waits
  /// for the writer thread. Rethrows the first exception `on_trace_ready` threw. Does nothing when
  /// stopped.
  void stop() {
    stop_recording();
    join_writer();
    if (execution_trace_ && started_windows_ > 0) {
      started_windows_ = 0;
      execution_trace_->finish();
    }
    if (handler_error_) {
      std::exception_ptr e = handler_error_;
      handler_error_ = nullptr;
      std::rethrow_exception(e);
    }
  }

  /// The current step (0-based), as torch.profiler's `step_num`.
  int64_t step_num() const { return step_num_; }

  /// The last finished trace, or nullptr before one finished.
  std::shared_ptr<const ProfilerTrace> last_trace() const { return last_trace_; }

  /// Writes the last finished trace to `path`, as torch.profiler's `export_chrome_trace`.
  /// Throws Error when no trace has finished yet.
  void export_chrome_trace(const std::string& path) const {
    OPTRACE_CHECK(last_trace_ != nullptr, Error, "export_chrome_trace: no trace has finished yet (stop() first)");
    last_trace_->save(path);
  }

  /// torch's `key_averages()` of the last finished trace (empty before one finished), grouped
  /// as ProfilerTrace::key_averages.
  KeyAverages key_averages(GroupBy group_by = GroupBy::Name) const {
    if (!last_trace_) return KeyAverages::from_events({}, {}, group_by);
    return last_trace_->key_averages(group_by);
  }

  /// The hf op trace of every recorded step so far: what an OpTracer records for the same calls.
  OpTrace op_trace() const { return op_session_ ? detail::op_tracer::collect(*op_session_) : OpTrace(); }

  /// What the profiler could not do as asked (e.g. CUDA without a device).
  const std::vector<std::string>& notes() const { return notes_; }

  const ProfilerOptions& options() const { return options_; }

 private:
  void start_at(int64_t first_step) {
    Profiler* active = nullptr;
    if (!active_profiler().compare_exchange_strong(active, this))
      detail::raise<Error>(active == this ? "this Profiler is already started" : "another Profiler is active; stop it first");
    if (detail::op_tracer::ActiveSession::any()) {
      active_profiler().store(nullptr);
      detail::raise<Error>("an OpTracer is recording; stop it before starting a Profiler");
    }
    started_ = true;
    step_num_ = first_step;
    action_ = current_action();
    transit(ProfilerAction::None, action_);
    open_step_scope();
  }

  // What stop() does on the stepping thread: the open window closes and goes to the writer thread,
  // which this does not wait for (OnDemandProfiler joins it off the stepping thread).
  void stop_recording() {
    if (!started_) return;
    step_scope_.reset();
    close_window(/*ready=*/true);  // torch's transition to None: a window is open only while recording
    started_ = false;
    active_profiler().store(nullptr);
  }

  static std::atomic<Profiler*>& active_profiler() {
    static std::atomic<Profiler*> p{nullptr};
    return p;
  }

  static std::string process_name() {
    std::ifstream comm("/proc/self/comm");
    std::string name;
    if (comm && std::getline(comm, name) && !name.empty()) return name;
    return "optrace";
  }

  ProfilerAction current_action() const {
    return options_.schedule() ? (*options_.schedule())(step_num_) : ProfilerAction::Record;
  }

  // torch.profiler's action map (profiler.py, _get_default_action_map), without its warm-up of
  // Kineto: a window opens when recording begins and closes when the action leaves recording.
  void transit(ProfilerAction from, ProfilerAction to) {
    using A = ProfilerAction;
    const bool was = from == A::Record || from == A::RecordAndSave;
    const bool is = to == A::Record || to == A::RecordAndSave;
    if (from == A::RecordAndSave) {
      close_window(/*ready=*/true);
    } else if (was && !is) {
      close_window(/*ready=*/false);  // torch: "Incorrect schedule: RECORD followed by NONE/WARMUP"
    }
    if (is && !window_) open_window();
  }

  void open_step_scope() {
    if (options_.schedule()) step_scope_.emplace("ProfilerStep#" + std::to_string(step_num_));
  }

  void open_window() {
    auto w = std::make_shared<detail::profiler::Window>();
    w->settings.record_shapes = options_.record_shapes();
    w->settings.profile_memory = options_.profile_memory();
    w->settings.with_stack = options_.with_stack();
    w->settings.execution_trace = execution_trace_ != nullptr;
    // Groups are told apart only when some group has its c10d object (c10d.hpp's describers).
    if (info_.distributed) {
      for (const ProcessGroupConfig& g : info_.distributed->groups()) {
        w->settings.group_handles.push_back(g.handle);
        w->settings.group_sequence_numbers.push_back(g.handle != nullptr ? g.sequence_number : nullptr);
      }
      const auto& handles = w->settings.group_handles;
      if (std::all_of(handles.begin(), handles.end(), [](const void* h) { return h == nullptr; })) {
        w->settings.group_handles.clear();
        w->settings.group_sequence_numbers.clear();
      }
    }
    ++started_windows_;
    // The hf op trace records into the Profiler's session unless an OpTracer records already
    // (then its own callbacks record, and the window's callbacks record no op).
    if (op_trace_ && !op_session_) op_session_ = std::make_shared<detail::op_tracer::Session>();
    if (op_trace_ && op_view_.install(op_session_)) w->op_session = op_session_;
    w->start_ns = detail::profiler::now_ns();
    recording_.install(w);  // no other window is open: one Profiler is active at a time (start)
    opened_on_ = std::this_thread::get_id();
    // libtorch's Kineto puts its own state on the thread's PROFILER_STATE: it goes first, so that
    // the allocators report to ours, above it.
    if (device_trace_) {
      std::string note;
      if (!device_capture_.start(note)) {
        device_trace_ = false;  // not tried again in later windows
        notes_.push_back(note);
      }
    }
    if (options_.profile_memory()) {
      reporter_ = std::make_shared<detail::profiler::MemoryReporter>();
      reporter_->enabled = true;
      c10::ThreadLocalDebugInfo::_push(c10::DebugInfoKind::PROFILER_STATE, reporter_);
    }
    window_ = std::move(w);
    recording_.add_callbacks(at::RecordFunctionCallback(&detail::profiler::on_start, &detail::profiler::on_end)
                                 .needsInputs(true)
                                 .needsOutputs(execution_trace_ != nullptr)
                                 .needsIds(true));
  }

  void close_window(bool ready) {
    if (!window_) return;
    recording_.remove_callbacks();
    // What the window put on the opening thread's PROFILER_STATE only that thread can pop: closed
    // on another, it stays there (left_state_) and the CUDA events are lost, said in notes().
    const bool opening_thread = std::this_thread::get_id() == opened_on_;
    if (!opening_thread) left_state_.thread = opened_on_;
    if (reporter_) {
      reporter_->enabled = false;
      if (opening_thread) {
        try {
          c10::ThreadLocalDebugInfo::_pop(c10::DebugInfoKind::PROFILER_STATE);
        } catch (...) {  // the user's own debug info above ours: ours stays, disabled
        }
      } else {
        left_state_.reporter = reporter_;
      }
      reporter_.reset();
    }
    window_->end_ns = detail::profiler::now_ns();
    recording_.retract();
    if (device_capture_.running()) {
      std::string note;
      if (opening_thread) {
        note = device_capture_.stop(info_.steady_to_epoch, *window_);
      } else {
        left_state_.device = device_capture_.left();
        note = "CUDA activity: the window closed on another thread than the one that opened it, and libtorch's "
               "profiler stops only there: this window has no kernels";
      }
      if (!note.empty()) notes_.push_back(std::move(note));
    }
    op_view_.retract();
    // Other threads may still be inside an event: once each buffer's lock was taken after
    // `closed`, nothing more is appended.
    window_->closed.store(true, std::memory_order_relaxed);
    window_->buffers.for_each([](detail::profiler::ThreadBuffer& b) { std::lock_guard<detail::op_tracer::SpinLock> buffer_lock(b.mutex); });
    std::random_device rd;
    char id[33];
    std::snprintf(id, sizeof id, "%08X%08X%08X%08X", rd(), rd(), rd(), rd());
    info_.trace_id = id;
    last_trace_ = std::shared_ptr<const ProfilerTrace>(new ProfilerTrace(std::move(window_), info_));
    window_.reset();
    if (execution_trace_ || (ready && options_.on_trace_ready())) hand_over(last_trace_, ready);
  }

  // The window's execution trace nodes and on_trace_ready, on the writer thread, after what
  // the previous window handed over.
  void hand_over(std::shared_ptr<const ProfilerTrace> trace, bool ready) {
    join_writer();
    TraceHandler handler = ready ? options_.on_trace_ready() : nullptr;
    detail::profiler::ExecutionTraceWriter* et = execution_trace_.get();
    writer_ = std::thread([this, handler, trace, et] {
      try {
        if (et != nullptr) et->add(*trace->window_);
        if (handler) handler(*trace);
      } catch (...) {
        if (!handler_error_) handler_error_ = std::current_exception();
      }
    });
  }

  // The execution trace's file: plain JSON (Chakra reads no gzip) in a folder that can be written.
  static void check_execution_trace_path(const std::string& path) {
    OPTRACE_CHECK(!detail::gz_path(path), ArgumentError, "execution_trace '", path,
                  "': Chakra reads the execution trace as plain JSON; drop the .gz");
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    const std::string dir = parent.empty() ? std::string(".") : parent.string();
    OPTRACE_CHECK(detail::profiler::can_write_in(dir), IoError, "execution_trace '", path, "': cannot write in folder '",
                  dir, "'");
  }

  // metadata_json: names the trace does not have, values that are JSON (a value is never echoed).
  static void check_metadata(const TraceMetadata& metadata) {
    std::vector<std::string_view> seen;
    for (const auto& [key, value] : metadata) {
      bool name = !key.empty() && key.size() <= 64;
      for (char c : key) name = name && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
      OPTRACE_CHECK(name, ArgumentError, "ProfilerOptions::metadata_json: a key is a name of letters, digits and '_' (up to 64)");
      const bool taken = detail::profiler::written_key(key) || std::find(seen.begin(), seen.end(), key) != seen.end();
      OPTRACE_CHECK(!taken, ArgumentError, "ProfilerOptions::metadata_json: key '", key, "' is already in the trace");
      seen.push_back(key);
      try {
        json::Document::parse(value);
      } catch (const Error&) {
        OPTRACE_CHECK(false, ArgumentError, "ProfilerOptions::metadata_json: the value of '", key, "' is not JSON");
      }
    }
  }

  void join_writer() {
    if (writer_.joinable()) writer_.join();
  }

  ProfilerOptions options_;
  bool op_trace_ = true;  // windows feed op_session_ (op_trace())
  detail::profiler::TraceInfo info_;
  std::vector<std::string> notes_;
  bool started_ = false;
  int64_t step_num_ = 0;
  ProfilerAction action_ = ProfilerAction::None;
  std::optional<RecordScope> step_scope_;
  std::shared_ptr<detail::profiler::Window> window_;
  std::shared_ptr<detail::profiler::MemoryReporter> reporter_;
  bool device_trace_ = false;  // the CUDA activity asked for and a device present
  detail::profiler::DeviceCapture device_capture_;
  std::thread::id opened_on_;                          // the open window's thread
  detail::profiler::OpeningThreadState left_state_;  // what a window closed elsewhere left on it
  detail::profiler::ActiveWindow recording_;  // the open window and the callbacks
  std::shared_ptr<detail::op_tracer::Session> op_session_;
  detail::op_tracer::ActiveSession op_view_;  // op_session_, while a window is open and no OpTracer records
  std::shared_ptr<const ProfilerTrace> last_trace_;
  std::unique_ptr<detail::profiler::ExecutionTraceWriter> execution_trace_;
  int64_t started_windows_ = 0;  // windows since the execution trace was last written
  std::thread writer_;
  std::exception_ptr handler_error_;
};

}  // namespace optrace
