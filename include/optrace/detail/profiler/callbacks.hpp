// optrace/detail/profiler/callbacks.hpp: the Profiler's RecordFunction callbacks and each thread's state
#pragma once
// How the Profiler records, and why:
// - One global RecordFunction callback pair, every scope (ops, autograd nodes, user annotations
//   such as RecordScope and ProfilerStep#N), added when a recording window opens and removed when
//   it closes. The callbacks are plain function pointers, so the open window is a global, which
//   only ActiveWindow (recording/active_recording.hpp) installs and retracts, as OpTracer's session.
// - Each thread appends to its own buffer (registered once per thread and window): a start time,
//   the names' address (dispatcher ops) or a copy (other ranges), RecordFunction's ids, with
//   record_shapes the inputs (event_inputs.hpp), with with_stack TorchScript's stacks
//   (torchscript_stacks.hpp).
// - Ranges are matched to their end on their own thread, innermost first; only async ranges
//   (c10d's gloo:<op>, which a gloo worker may end) go through a window-wide map by handle.
// - With a DistributedInfo, a collective call's process group is told while recording: c10d's
//   ops by their ProcessGroup argument, gloo's ranges by their op (collective_group.hpp).
// - The same callbacks drive OpTracer's recording (op_tracer/recorder.hpp enter/leave) over the
//   thread's `ops`, into the session the window names: one recording gives both the timed trace
//   and the hf op trace, and one op cache serves both.

#include <optrace/detail/common/dispatcher.hpp>
#include <optrace/detail/common/per_thread.hpp>
#include <optrace/detail/op_tracer/call_table.hpp>
#include <optrace/detail/op_tracer/recorder.hpp>
#include <optrace/detail/profiler/collective_group.hpp>
#include <optrace/detail/profiler/et_values.hpp>
#include <optrace/detail/profiler/event_inputs.hpp>
#include <optrace/detail/profiler/torchscript_stacks.hpp>
#include <optrace/detail/profiler/window.hpp>
#include <optrace/detail/recording/active_recording.hpp>

#include <ATen/record_function.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace optrace::detail::profiler {

// The operating system's id of the calling thread, as torch.profiler writes it in "tid".
inline int64_t os_thread_id() {
#if defined(__linux__)
  return static_cast<int64_t>(::syscall(SYS_gettid));
#else
  return static_cast<int64_t>(std::hash<std::thread::id>()(std::this_thread::get_id()));
#endif
}

// The open window, if any.
using ActiveWindow = ActiveRecording<Window>;

// A thread's state, reached once per callback (per_thread.hpp: each reach of a thread_local is a
// call of __tls_get_addr in a shared library): its buffer of the open window, and its op
// recording (`ops`), whose op cache also names the window's dispatcher ops.
struct ThreadState {
  uint64_t generation = 0;
  std::shared_ptr<Window> window;
  ThreadBuffer* buffer = nullptr;
  op_tracer::ThreadState ops{ActiveWindow::generations(), /*by_owner=*/true};

  // The open window's buffer of this thread, registered first if needed; nullptr when none.
  ThreadBuffer* current() { return ActiveWindow::generation() == generation ? buffer : refresh(); }

  // Out of line: the first call of a thread under a window, and the first after one opens or
  // closes. The op recording follows the window: it records into the window's session.
  C10_NOINLINE ThreadBuffer* refresh() {
    ActiveWindow::view(generation, [this](const std::shared_ptr<Window>& active) {
      window = active;
      buffer = nullptr;
      ops.attach(window ? window->op_session : nullptr, generation);
      if (!window) return;
      auto fresh = std::make_unique<ThreadBuffer>();
      fresh->os_tid = os_thread_id();
      fresh->rf_thread_id = at::RecordFunction::currentThreadId();
      buffer = &window->buffers.add(std::move(fresh));
    });
    return buffer;
  }
};

inline ThreadState& thread_state() { return PerThread<ThreadState>::get(); }

inline bool op_tracer_scope(at::RecordScope scope) {
  return scope == at::RecordScope::FUNCTION || scope == at::RecordScope::BACKWARD_FUNCTION;
}

// Whether a range may end on another thread. c10d marks its work's ranges async (gloo:<op>, of
// scope USER_SCOPE); isAsync is out of line in libtorch, so ops never pay for the call.
inline bool is_async(const at::RecordFunction& fn) {
  return fn.scope() == at::RecordScope::USER_SCOPE && fn.isAsync();
}

inline std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  ThreadState& ts = thread_state();
  ThreadBuffer* b = ts.current();  // first: it attaches the op recording to the window's session
  if (op_tracer_scope(fn.scope())) op_tracer::enter(ts.ops, fn);
  if (b == nullptr) return nullptr;
  const Settings& settings = ts.window->settings;
  // torch.profiler takes no stack for an autograd node (it runs outside the interpreter).
  Stacks stacks;
  if (settings.with_stack && fn.scope() != at::RecordScope::BACKWARD_FUNCTION) stacks = torchscript_stacks();
  const int64_t start = now_ns();
  std::lock_guard<op_tracer::SpinLock> lock(b->mutex);
  if (ts.window->closed.load(std::memory_order_relaxed)) return nullptr;
  Event e;
  e.call_stack = intern_stack(*b, std::move(stacks.call_stack));
  e.module_hierarchy = intern_stack(*b, std::move(stacks.module_hierarchy));
  e.start_ns = start;
  e.rf_id = fn.handle();
  e.seq_nr = fn.seqNr();
  e.fwd_thread_id = fn.forwardThreadId();
  e.parent = b->open.empty() ? -1 : b->open.back();
  e.scope = static_cast<uint8_t>(fn.scope());
  switch (fn.scope()) {
    case at::RecordScope::FUNCTION: e.kind = EventKind::kOp; break;
    case at::RecordScope::BACKWARD_FUNCTION: e.kind = EventKind::kBackward; break;
    case at::RecordScope::USER_SCOPE: e.kind = EventKind::kUserAnnotation; break;
    default: e.kind = EventKind::kOther; break;
  }
  if (e.kind == EventKind::kOp) {
    const op_tracer::CacheSlot* slot = ts.ops.lookup(fn);
    e.op = slot != nullptr ? slot->info : nullptr;
  }
  const bool groups = !settings.group_handles.empty();
  if (C10_UNLIKELY(e.op != nullptr && e.op->process_group_arg >= 0) && groups)
    e.group = op_group(*ts.window, fn, e.op->process_group_arg);
  if (e.op != nullptr) {
    e.name = fn.name();
  } else {
    e.own_name = static_cast<int32_t>(b->names.size());
    b->names.emplace_back(fn.name());
  }
  // Inputs of every range that has them, as torch.profiler: ops, autograd nodes (their
  // gradients), TorchScript functions.
  if (settings.record_shapes && !fn.inputs().empty()) record_inputs(*b, e, fn);
  if (settings.execution_trace) {
    e.et_inputs_begin = static_cast<uint32_t>(b->et_tokens.size());
    et_encode_all(b->et_tokens, op_inputs(e, fn));
    e.et_inputs_end = static_cast<uint32_t>(b->et_tokens.size());
  }
  if (C10_UNLIKELY(is_async(fn))) {
    // Not among the thread's open ranges: it may end on another thread, after ranges that
    // began later here.
    std::lock_guard<std::mutex> async_lock(ts.window->async_mutex);
    ts.window->async_open[e.rf_id] = {b, b->events.size()};
    if (groups) e.group = take_range_group(*ts.window, fn);
  } else {
    b->open.push_back(static_cast<int32_t>(b->events.size()));
  }
  b->events.push_back(e);
  return nullptr;
}

// Ends an async range, on whichever thread: its event is in the buffer of the thread it began on.
C10_NOINLINE inline void end_async(const at::RecordFunction& fn, Window& window, int64_t end) {
  std::pair<ThreadBuffer*, size_t> where{nullptr, 0};
  {
    std::lock_guard<std::mutex> async_lock(window.async_mutex);
    auto it = window.async_open.find(fn.handle());
    if (it == window.async_open.end()) return;  // began before the window opened
    where = it->second;
    window.async_open.erase(it);
  }
  std::lock_guard<op_tracer::SpinLock> lock(where.first->mutex);
  if (window.closed.load(std::memory_order_relaxed)) return;
  where.first->events[where.second].end_ns = end;
}

inline void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  ThreadState& ts = thread_state();
  if (op_tracer_scope(fn.scope())) op_tracer::leave(ts.ops);
  ThreadBuffer* b = ts.current();
  if (b == nullptr) return;
  const int64_t end = now_ns();
  if (C10_UNLIKELY(is_async(fn))) return end_async(fn, *ts.window, end);
  std::lock_guard<op_tracer::SpinLock> lock(b->mutex);
  if (ts.window->closed.load(std::memory_order_relaxed)) return;
  // Ranges mostly close innermost first, but not always (a RecordScope may outlive the step
  // it began in); a range opened before the window has no event here.
  const uint64_t id = fn.handle();
  for (size_t k = b->open.size(); k-- > 0;) {
    Event& e = b->events[static_cast<size_t>(b->open[k])];
    if (e.rf_id != id) continue;
    e.end_ns = end;
    if (ts.window->settings.execution_trace) {
      e.et_outputs_begin = static_cast<uint32_t>(b->et_tokens.size());
      et_encode_all(b->et_tokens, op_outputs(fn));
      e.et_outputs_end = static_cast<uint32_t>(b->et_tokens.size());
    }
    b->open.erase(b->open.begin() + static_cast<std::ptrdiff_t>(k));
    return;
  }
}

}  // namespace optrace::detail::profiler
