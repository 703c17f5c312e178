// optrace/detail/profiler/window.hpp: a recording window: each thread's events and memory events, the device's events
#pragma once
// What a window holds is plain data, written by the callbacks (callbacks.hpp, memory_reporter.hpp)
// and by the CUDA capture (device_trace.hpp), read by the writers once the window closed
// (kineto_writer.hpp, timed_events.hpp, execution_trace.hpp). Names are kept as the dispatcher's
// own strings (ops) or copies (other ranges), inputs as OpTracer's tokens: strings, dtype names
// and JSON are made only when a trace is written, off the stepping thread.

#include <optrace/detail/common/block_vector.hpp>
#include <optrace/detail/common/dispatcher.hpp>
#include <optrace/detail/op_tracer/call_table.hpp>
#include <optrace/detail/op_tracer/recorder.hpp>
#include <optrace/detail/profiler/device_event.hpp>
#include <optrace/detail/recording/thread_buffers.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optrace::detail::profiler {

// Nanoseconds of a steady clock: what every event's times are taken with.
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

enum class EventKind : uint8_t { kOp, kBackward, kUserAnnotation, kOther };

// Event::group of a range whose process group is not known (most ranges: not a collective).
inline constexpr uint16_t kNoGroup = 0xFFFF;

// The group a collective call went to (an index in Settings::group_handles, or kNoGroup) and its
// number in the group's sequence (c10d's count of the group's collectives after it; 0: none read).
struct CallGroup {
  uint16_t group = kNoGroup;
  uint64_t seq = 0;
};

// One RecordFunction range on one thread.
struct Event {
  const char* name = nullptr;  // a dispatcher op's name (lives as long as the op), or nullptr:
  int32_t own_name = -1;       // ... then the index of a copy in ThreadBuffer::names
  EventKind kind = EventKind::kOther;
  uint8_t scope = 0;           // at::RecordScope
  uint16_t group = kNoGroup;   // a collective call's process group: its index in Settings::group_handles
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

struct ThreadBuffer {
  op_tracer::SpinLock mutex;  // taken by its thread on each event, and when the window closes
  int64_t os_tid = 0;
  uint64_t rf_thread_id = 0;  // RecordFunction's small id of the thread (fwd_thread_id refers to it)
  // Appended without copying what is there (a window holds millions), in blocks of 512 (52 KiB):
  // a thread's first block is what each short window costs it, and OnDemandProfiler's ring keeps
  // up to 64 windows of a few steps (4,096 a block held 28 MB for a ring of an MLP's steps, 7.9
  // MB with 512; an allocation per 512 events is still nothing beside them).
  BlockVector<Event, 9> events;
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
  // The c10d objects of DistributedInfo::groups(), in its order (nullptr: a group described by
  // hand): how a collective call's group is told (Event::group). Empty without a DistributedInfo.
  std::vector<const void*> group_handles;
  // ... and, beside them, how each group's c10d sequence number is read (nullptr: it is not).
  std::vector<uint64_t (*)(const void*)> group_sequence_numbers;
};

// One recording window: from a schedule's start of recording to its save (or stop()).
struct Window {
  Settings settings;
  int64_t start_ns = 0, end_ns = 0;
  ThreadBuffers<ThreadBuffer> buffers;
  // Where the window's op calls are recorded for the hf op trace (Profiler::op_trace()): the
  // Profiler's session, or none while an OpTracer records (its own callbacks record them).
  std::shared_ptr<op_tracer::Session> op_session;
  // Set when the window closes: a thread that got its buffer just before checks it under the
  // buffer's lock, so nothing is appended once the window's trace is handed over.
  std::atomic<bool> closed{false};
  // Async ranges (RecordFunction::isAsync: c10d's gloo:<op> work, which can end on a gloo worker
  // thread): the open ones by handle, so that whichever thread ends one finds its event. Only
  // async ranges take this lock; every other range is matched on its own thread.
  std::mutex async_mutex;
  std::unordered_map<uint64_t, std::pair<ThreadBuffer*, size_t>> async_open;
  // ... and, under the same lock, the groups of c10d's collective ops whose backend range has not
  // begun yet, by (RecordFunction's id of the calling thread, an input tensor's TensorImpl): a
  // gloo:<op> range begins on a gloo worker, after its c10d op may have returned, with the
  // caller's thread id and the op's tensors (collective_group.hpp).
  std::map<std::pair<uint64_t, const void*>, CallGroup> pending_groups;
  // ... and the calls' sequence numbers in their groups (CallGroup::seq), by the range's handle
  // (Event::rf_id): the c10d op's and its gloo range's. Collectives only: a few per step.
  std::unordered_map<uint64_t, uint64_t> call_seqs;
  // With the CUDA activity: kernels, copies and runtime calls (device_trace.hpp), in start order.
  std::vector<DeviceEvent> device_events;
  // ... and what CUPTI adds to them and to the trace's metadata ("deviceProperties", versions),
  // read from libtorch's saved trace the first time the trace is written, off the stepping
  // thread: read_device_details runs once (complete_device_details), then is dropped.
  std::vector<std::pair<std::string, std::string>> device_metadata;
  std::function<void(Window&)> read_device_details;
  std::once_flag device_details_once;
};

// One window made of closed CPU windows that follow each other (OnDemandProfiler's ring: the
// cycles that hold a slow step), from the first's start to the last's end. Their threads' buffers
// are shared, not copied: a thread that recorded in several has a buffer in each, whose events
// (parents are indices in their own buffer) are written under the same thread id.
inline std::shared_ptr<Window> joined_windows(const std::vector<std::shared_ptr<Window>>& parts) {
  auto w = std::make_shared<Window>();
  if (parts.empty()) return w;
  w->settings = parts.front()->settings;
  w->start_ns = parts.front()->start_ns;
  w->end_ns = parts.back()->end_ns;
  for (const auto& part : parts)
    for (const auto& b : part->buffers) w->buffers.share(b);
  w->closed.store(true, std::memory_order_relaxed);
  return w;
}

// Runs the window's read_device_details, once, whichever thread writes its trace first.
inline void complete_device_details(Window& w) {
  std::call_once(w.device_details_once, [&w] {
    if (!w.read_device_details) return;
    auto read = std::move(w.read_device_details);
    w.read_device_details = nullptr;
    read(w);
  });
}

// The sequence number a call's range was given (op_group, take_range_group), or 0. Read when the
// window's trace is written: no range is added any more.
inline uint64_t call_seq(const Window& window, uint64_t rf_id) {
  if (window.call_seqs.empty()) return 0;
  auto it = window.call_seqs.find(rf_id);
  return it != window.call_seqs.end() ? it->second : 0;
}

}  // namespace optrace::detail::profiler
