// optrace/detail/profiler/recorder.hpp: the Profiler's RecordFunction callbacks and memory reporter
#pragma once
// How the Profiler records, and why:
// - One global RecordFunction callback pair, every scope (ops, autograd nodes, user annotations
//   such as RecordScope and ProfilerStep#N), added when a recording window opens and removed when
//   it closes. The callbacks are plain function pointers, so the recording is a global, as
//   OpTracer's.
// - Each thread appends to its own buffer (registered once per thread and window under a mutex):
//   a start time, the names' address (dispatcher ops) or a copy (other ranges), RecordFunction's
//   ids, and with record_shapes the inputs encoded by OpTracer's own encoder (encode_value) into
//   the thread's token arena. Strings, dtype names and JSON are made only when the window's trace
//   is written, off the stepping thread (kineto_writer.hpp).
// - The same callbacks drive OpTracer's (op_tracer/recorder.hpp on_start/on_end) over a session
//   the Profiler owns: one recording gives both the timed trace and the hf op trace.
// - Memory: c10's allocators report each allocation and free to the thread's PROFILER_STATE
//   debug info (a c10::MemoryReportingInfoBase); the Profiler installs one on the stepping thread,
//   and libtorch's thread pools carry it into the threads they run the op's work on.
// - with_stack: the TorchScript interpreter's call stack and module hierarchy of a range, made by
//   libtorch's own functions (the text torch.profiler writes), kept once per distinct text.

#include <optrace/detail/common/block_vector.hpp>
#include <optrace/detail/common/dispatcher.hpp>
#include <optrace/detail/common/per_thread.hpp>
#include <optrace/detail/op_tracer/call_table.hpp>
#include <optrace/detail/op_tracer/recorder.hpp>
#include <optrace/detail/profiler/et_values.hpp>

#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/csrc/profiler/util.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace optrace::detail::profiler {

// Nanoseconds of a steady clock: what every event's times are taken with.
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The operating system's id of the calling thread, as torch.profiler writes it in "tid".
inline int64_t os_thread_id() {
#if defined(__linux__)
  return static_cast<int64_t>(::syscall(SYS_gettid));
#else
  return static_cast<int64_t>(std::hash<std::thread::id>()(std::this_thread::get_id()));
#endif
}

enum class EventKind : uint8_t { kOp, kBackward, kUserAnnotation, kOther };

// One RecordFunction range on one thread.
struct Event {
  const char* name = nullptr;  // a dispatcher op's name (lives as long as the op), or nullptr:
  int32_t own_name = -1;       // ... then the index of a copy in ThreadBuffer::names
  EventKind kind = EventKind::kOther;
  uint8_t scope = 0;           // at::RecordScope
  const OpInfo* op = nullptr;  // dispatcher ops only
  int64_t start_ns = 0, end_ns = -1;  // end -1: still open when the window closed
  uint64_t rf_id = 0;          // RecordFunction's handle: "Record function id", the ET's rf_id
  int64_t seq_nr = -1;         // autograd's sequence number
  uint64_t fwd_thread_id = 0;  // RecordFunction's id of the thread that ran the forward
  int32_t parent = -1;         // the enclosing open event of the same thread, index in `events`
  uint32_t tokens_begin = 0, tokens_end = 0;  // with record_shapes: the inputs' encoding
  uint32_t num_args = 0;
  // With an execution trace: the inputs and outputs with their tensors' identities
  // (et_values.hpp encodes them into ThreadBuffer::et_tokens).
  uint32_t et_inputs_begin = 0, et_inputs_end = 0, et_outputs_begin = 0, et_outputs_end = 0;
  // With with_stack, where TorchScript runs the range: indices in ThreadBuffer::stacks, or -1.
  int32_t call_stack = -1, module_hierarchy = -1;
};

// One allocation (bytes > 0) or free (bytes < 0) that an allocator reported.
struct MemoryEvent {
  int64_t ts_ns = 0;
  uintptr_t addr = 0;
  int64_t bytes = 0, total_allocated = 0, total_reserved = 0;
  int8_t device_type = 0, device_index = -1;
};

// The categories torch.profiler writes device-side and runtime events under.
enum class DeviceKind : uint8_t { kKernel, kMemcpy, kMemset, kRuntime, kDriver };

inline const char* device_category(DeviceKind k) {
  switch (k) {
    case DeviceKind::kKernel: return "kernel";
    case DeviceKind::kMemcpy: return "gpu_memcpy";
    case DeviceKind::kMemset: return "gpu_memset";
    case DeviceKind::kRuntime: return "cuda_runtime";
    case DeviceKind::kDriver: return "cuda_driver";
  }
  return "kernel";
}

// The kind whose category is `cat` (a trace's "cat"); false for any other category.
inline bool device_kind_of_category(std::string_view cat, DeviceKind& kind) {
  for (DeviceKind k : {DeviceKind::kKernel, DeviceKind::kMemcpy, DeviceKind::kMemset, DeviceKind::kRuntime,
                       DeviceKind::kDriver})
    if (cat == device_category(k)) return kind = k, true;
  return false;
}

inline bool on_host(DeviceKind k) { return k == DeviceKind::kRuntime || k == DeviceKind::kDriver; }

// One activity CUPTI reported (device_trace.hpp). Times are the recording's steady clock.
struct DeviceEvent {
  std::string name;
  DeviceKind kind = DeviceKind::kKernel;
  int64_t start_ns = 0, dur_ns = 0;
  uint64_t correlation = 0;
  int64_t device = 0;  // device side: the device index
  int64_t stream = 0;  // device side: the stream; on the host: the thread (os id)
  // What CUPTI adds (a kernel's launch configuration, a copy's bytes, a call's cbid): JSON
  // members from libtorch's saved trace (device_details.hpp); empty until read.
  std::string args;
};

struct ThreadBuffer {
  op_tracer::SpinLock mutex;  // taken by its thread on each event, and when the window closes
  int64_t os_tid = 0;
  uint64_t rf_thread_id = 0;  // RecordFunction's small id of the thread (fwd_thread_id refers to it)
  BlockVector<Event> events;  // appended without copying what is there (a window holds millions)
  op_tracer::KeyWriter tokens;  // with record_shapes: the events' inputs, encoded where they stay
  op_tracer::KeyWriter et_tokens;  // with an execution trace: the events' inputs and outputs
  std::vector<std::string> names;
  std::vector<std::string> stacks;  // with_stack: each distinct text once (stack_index)
  std::unordered_map<std::string, int32_t> stack_index;
  BlockVector<MemoryEvent> memory;
  std::vector<int32_t> open;  // indices of the open events, innermost last
};

inline std::string event_name(const ThreadBuffer& b, const Event& e) {
  return e.name != nullptr ? std::string(e.name) : b.names[static_cast<size_t>(e.own_name)];
}

struct Settings {
  bool record_shapes = false;
  bool profile_memory = false;
  bool with_stack = false;
  bool execution_trace = false;
};

// The TorchScript call stack and module hierarchy around the current range, as torch.profiler
// writes them ("Call stack": "file(line): function;..." innermost first; "Module Hierarchy":
// "TOP(Net)::forward.fc(Linear)::forward."): empty outside TorchScript.
struct Stacks {
  std::string call_stack, module_hierarchy;
};
inline Stacks torchscript_stacks() {
  namespace impl = torch::profiler::impl;
  // stacksToStr quotes the text for JSON (and makes '"' a '\''): the quotes are the writer's.
  auto unquoted = [](std::string s) { return s.size() >= 2 ? s.substr(1, s.size() - 2) : std::string(); };
  Stacks s;
  const std::vector<torch::jit::StackEntry> entries = torch::jit::currentCallstack();
  if (!entries.empty()) s.call_stack = unquoted(impl::stacksToStr(impl::callstackStr(impl::prepareCallstack(entries)), ";"));
  const std::vector<std::string> modules = torch::jit::currentModuleHierarchy();
  if (!modules.empty()) s.module_hierarchy = unquoted(impl::stacksToStr(modules, "."));
  return s;
}

inline int32_t intern_stack(ThreadBuffer& b, std::string text) {
  if (text.empty()) return -1;
  auto [it, fresh] = b.stack_index.try_emplace(std::move(text), static_cast<int32_t>(b.stacks.size()));
  if (fresh) b.stacks.push_back(it->first);
  return it->second;
}

// One recording window: from a schedule's start of recording to its save (or stop()).
struct Window {
  Settings settings;
  int64_t start_ns = 0, end_ns = 0;
  std::mutex mutex;  // guards `buffers`
  std::vector<std::unique_ptr<ThreadBuffer>> buffers;
  // Set when the window closes: a thread that got its buffer just before checks it under the
  // buffer's lock, so nothing is appended once the window's trace is handed over.
  std::atomic<bool> closed{false};
  // With the CUDA activity: kernels, copies and runtime calls (device_trace.hpp), in start order.
  std::vector<DeviceEvent> device_events;
  // ... and what CUPTI adds to them and to the trace's metadata ("deviceProperties", versions),
  // read from libtorch's saved trace the first time the trace is written, off the stepping
  // thread: read_device_details runs once (complete_device_details), then is dropped.
  std::vector<std::pair<std::string, std::string>> device_metadata;
  std::function<void(Window&)> read_device_details;
  std::once_flag device_details_once;
};

// Runs the window's read_device_details, once, whichever thread writes its trace first.
inline void complete_device_details(Window& w) {
  std::call_once(w.device_details_once, [&w] {
    if (!w.read_device_details) return;
    auto read = std::move(w.read_device_details);
    w.read_device_details = nullptr;
    read(w);
  });
}

inline std::mutex& active_mutex() {
  static std::mutex m;
  return m;
}
inline std::shared_ptr<Window>& active_window() {
  static std::shared_ptr<Window> w;
  return w;
}
inline std::atomic<uint64_t>& active_generation() {
  static std::atomic<uint64_t> g{1};
  return g;
}

// Dispatcher ops by their name's address (see op_tracer::ThreadState::lookup): a small cache per
// thread, filled on first sight.
struct OpCache {
  static constexpr size_t kSize = 1024;
  const char* keys[kSize] = {};
  const OpInfo* ops[kSize] = {};

  const OpInfo* find(const at::RecordFunction& fn) {
    const char* key = fn.name();
    size_t slot = (reinterpret_cast<uintptr_t>(key) >> 4) % kSize;
    if (keys[slot] == key) return ops[slot];
    auto name = fn.operator_name();
    if (!name) return nullptr;
    const OpInfo* info = op_info(*name);
    keys[slot] = key;
    ops[slot] = info;
    return info;
  }
};

// A thread's state, reached once per callback (per_thread.hpp: each reach of a thread_local is a
// call of __tls_get_addr in a shared library).
struct ThreadState {
  uint64_t generation = 0;
  std::shared_ptr<Window> window;
  ThreadBuffer* buffer = nullptr;
  OpCache ops;

  // The open window's buffer of this thread, registered first if needed; nullptr when none.
  ThreadBuffer* current() {
    uint64_t g = active_generation().load(std::memory_order_acquire);
    if (g == generation) return buffer;
    std::lock_guard<std::mutex> lock(active_mutex());
    generation = active_generation().load(std::memory_order_relaxed);
    window = active_window();
    buffer = nullptr;
    if (window) {
      auto fresh = std::make_unique<ThreadBuffer>();
      fresh->os_tid = os_thread_id();
      fresh->rf_thread_id = at::RecordFunction::currentThreadId();
      std::lock_guard<std::mutex> buffers_lock(window->mutex);
      window->buffers.push_back(std::move(fresh));
      buffer = window->buffers.back().get();
    }
    return buffer;
  }
};

inline ThreadState& thread_state() { return PerThread<ThreadState>::get(); }

// Encodes a call's inputs as OpTracer does (every argument, extended: devices and strides).
// The op's own inputs: boxed calls (the TorchScript interpreter's) hand over the caller's stack.
inline c10::ArrayRef<const c10::IValue> op_inputs(const Event& e, const at::RecordFunction& fn) {
  c10::ArrayRef<const c10::IValue> inputs = fn.inputs();
  return e.op != nullptr && e.op->live != nullptr ? op_tracer::op_arguments(*e.op, inputs) : inputs;
}

// A call's own outputs: boxed calls leave the caller's stack before them (as op_inputs), and
// num_outputs() is the schema's count (all of them for a range that is not an op's), as torch's
// ExecutionTraceObserver takes them.
inline c10::ArrayRef<const c10::IValue> op_outputs(const at::RecordFunction& fn) {
  const std::vector<c10::IValue>& outputs = fn.outputs();
  const size_t n = std::min(fn.num_outputs(), outputs.size());
  return c10::ArrayRef<const c10::IValue>(outputs.data() + (outputs.size() - n), n);
}

inline void record_inputs(ThreadBuffer& b, Event& e, const at::RecordFunction& fn) {
  c10::ArrayRef<const c10::IValue> inputs = op_inputs(e, fn);
  const size_t begin = b.tokens.size();
  try {
    for (size_t i = 0; i < inputs.size(); ++i) {
      ArgKind kind = e.op != nullptr && i < e.op->args.size() ? e.op->args[i].kind : ArgKind::Other;
      op_tracer::encode_value(b.tokens, inputs[i], kind, /*extended=*/true);
    }
  } catch (...) {  // an argument that cannot be read (a nested tensor): the event keeps no inputs
    b.tokens.truncate(begin);
    return;
  }
  e.tokens_begin = static_cast<uint32_t>(begin);
  e.tokens_end = static_cast<uint32_t>(b.tokens.size());
  e.num_args = static_cast<uint32_t>(inputs.size());
}

inline bool op_tracer_scope(at::RecordScope scope) {
  return scope == at::RecordScope::FUNCTION || scope == at::RecordScope::BACKWARD_FUNCTION;
}

inline std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (op_tracer_scope(fn.scope())) op_tracer::on_start(fn);
  ThreadState& ts = thread_state();
  ThreadBuffer* b = ts.current();
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
  if (e.kind == EventKind::kOp) e.op = ts.ops.find(fn);
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
  b->open.push_back(static_cast<int32_t>(b->events.size()));
  b->events.push_back(e);
  return nullptr;
}

inline void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (op_tracer_scope(fn.scope())) op_tracer::on_end(fn, nullptr);
  ThreadState& ts = thread_state();
  ThreadBuffer* b = ts.current();
  if (b == nullptr) return;
  const int64_t end = now_ns();
  std::lock_guard<op_tracer::SpinLock> lock(b->mutex);
  if (ts.window->closed.load(std::memory_order_relaxed)) return;
  // Ranges mostly close innermost first, but not always (a RecordScope may outlive the step
  // it began in); a range opened before the window, or on another thread (an async range), has
  // no event here.
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

// The memory reporter c10's allocators call on the threads that carry it.
template <class T>
struct TotalsOf;
template <class C, class Total>
struct TotalsOf<void (C::*)(void*, int64_t, Total, Total, c10::Device)> {
  using type = Total;  // int64_t in libtorch 1.13, size_t in 2.x
};
using MemoryTotal = TotalsOf<decltype(&c10::MemoryReportingInfoBase::reportMemoryUsage)>::type;

struct MemoryReporter : c10::MemoryReportingInfoBase {
  // Read by every thread that carries the reporter (libtorch's pools), cleared by the stepping
  // thread when the window closes.
  std::atomic<bool> enabled{false};

  void reportMemoryUsage(void* ptr, int64_t alloc_size, MemoryTotal total_allocated, MemoryTotal total_reserved,
                         c10::Device device) override {
    if (!enabled.load(std::memory_order_relaxed)) return;
    ThreadState& ts = thread_state();
    ThreadBuffer* b = ts.current();
    if (b == nullptr) return;
    MemoryEvent m;
    m.ts_ns = now_ns();
    m.addr = reinterpret_cast<uintptr_t>(ptr);
    m.bytes = alloc_size;
    m.total_allocated = static_cast<int64_t>(total_allocated);
    m.total_reserved = static_cast<int64_t>(total_reserved);
    m.device_type = static_cast<int8_t>(device.type());
    m.device_index = static_cast<int8_t>(device.index());
    std::lock_guard<op_tracer::SpinLock> lock(b->mutex);
    if (ts.window->closed.load(std::memory_order_relaxed)) return;
    b->memory.push_back(m);
  }
  bool memoryProfilingEnabled() const override { return enabled.load(std::memory_order_relaxed); }
};

}  // namespace optrace::detail::profiler
