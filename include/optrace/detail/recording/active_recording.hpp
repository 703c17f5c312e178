// optrace/detail/recording/active_recording.hpp: the one place that installs, swaps and retracts what RecordFunction callbacks record into
#pragma once
// RecordFunction callbacks are plain function pointers, so what they record into (OpTracer's
// Session, the Profiler's Window) is a global, one per kind of state. Every start and stop of a
// recording goes through an ActiveRecording, as PyTorch's ProfilerStateBase::push/pop are the
// only code that installs or removes its active state (torch/csrc/profiler/orchestration/observer.h):
// - The state is swapped under a mutex and a generation counter is bumped with it. The callbacks'
//   hot path reads only the counter (one acquire load) and compares it with the generation its
//   thread last saw; only when they differ does the thread take the mutex (view) and register
//   with the new state. A thread registers under that mutex so that it cannot join a state once
//   retracted: its owner hands the state over to readers right after.
// - At most one state of a kind is active: install refuses while another owner's is.
// - The owner's callback pair is added after its state is installed and removed before the state
//   is retracted: a callback that starts while its owner records finds the state.

#include <ATen/record_function.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

namespace optrace::detail {

// One owner's hold on the active `State` of its kind, and the callbacks that record into it.
template <class State>
class ActiveRecording {
 public:
  ActiveRecording() = default;
  ActiveRecording(const ActiveRecording&) = delete;
  ActiveRecording& operator=(const ActiveRecording&) = delete;
  ~ActiveRecording() { retract(); }

  // Makes `state` the active state of its kind; false (nothing changed) while one is active.
  bool install(std::shared_ptr<State> state) {
    std::lock_guard<std::mutex> lock(mutex());
    if (active() != nullptr) return false;
    swap_locked(std::move(state));
    installed_ = true;
    return true;
  }

  // Adds the RecordFunction callbacks that record into the installed state.
  void add_callbacks(at::RecordFunctionCallback callbacks) { handle_ = at::addGlobalCallback(std::move(callbacks)); }

  // Removes the callbacks, if added. Callbacks already running on other threads finish.
  void remove_callbacks() {
    if (handle_ == 0) return;
    at::removeCallback(handle_);
    handle_ = 0;
  }

  // Removes the callbacks, then the state this owner installed; nothing when it installed none.
  void retract() {
    remove_callbacks();
    if (!installed_) return;
    std::lock_guard<std::mutex> lock(mutex());
    swap_locked(nullptr);
    installed_ = false;
  }

  bool installed() const { return installed_; }

  // Whether any owner's state of this kind is active.
  static bool any() {
    std::lock_guard<std::mutex> lock(mutex());
    return active() != nullptr;
  }

  // The callbacks' side. Changes at every install and retract; never 0, so that a thread's 0
  // means "no generation seen yet".
  static uint64_t generation() { return counter().load(std::memory_order_acquire); }
  // The counter itself, for a thread state that follows this kind's generations through a
  // pointer (op_tracer::ThreadState: OpTracer's sessions, or the Profiler's windows).
  static const std::atomic<uint64_t>& generations() { return counter(); }

  // Calls `with(state)` (nullptr when none is active) with the generation it belongs to in
  // `generation`, under the lock that install and retract take: a thread registers here.
  template <class With>
  static void view(uint64_t& generation, With&& with) {
    std::lock_guard<std::mutex> lock(mutex());
    generation = counter().load(std::memory_order_relaxed);
    with(active());
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::shared_ptr<State>& active() {
    static std::shared_ptr<State> s;
    return s;
  }
  static std::atomic<uint64_t>& counter() {
    static std::atomic<uint64_t> g{1};
    return g;
  }
  static void swap_locked(std::shared_ptr<State> state) {
    active() = std::move(state);
    counter().fetch_add(1, std::memory_order_acq_rel);
  }

  bool installed_ = false;
  at::CallbackHandle handle_ = 0;
};

}  // namespace optrace::detail
