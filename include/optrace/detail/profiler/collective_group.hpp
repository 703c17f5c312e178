// optrace/detail/profiler/collective_group.hpp: which process group a collective call went to, told while recording
#pragma once
// c10d's collective ops (c10d::allreduce_, c10d::allgather_, ...: what torch.distributed and 2.x's
// ProcessGroup methods call through the dispatcher) take their ProcessGroup as an argument, a
// custom-class IValue: an Object whose one slot is a Capsule holding the group. Its address,
// compared with the c10d objects of the DistributedInfo's groups (ProcessGroupConfig::handle,
// Settings::group_handles), tells the group; nothing is dereferenced.
//
// The backend's own range of the call (gloo:<op>) names no group and begins on a gloo worker
// thread, after its op may have returned. Its RecordFunction was made by the op, on the op's
// thread, so its threadId() is the op's thread's, and its inputs are the op's tensors: the op
// leaves its group under (thread id, each input tensor) in the window (Window::pending_groups),
// and the range takes it from there. A call made on a 2.x Backend directly (not through the
// dispatcher) has no op: its range's group stays unknown (kNoGroup).

#include <optrace/detail/common/kineto_names.hpp>
#include <optrace/detail/profiler/window.hpp>

#include <ATen/record_function.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace optrace::detail::profiler {

// Above this many waiting entries a window forgets them (ranges that never began: a backend that
// records none); a collective call leaves a few.
inline constexpr size_t kMaxPendingGroups = 4096;

// The group object a ProcessGroup argument holds, or nullptr when `v` is not a custom-class object.
inline const void* process_group_object(const c10::IValue& v) {
  if (!v.isObject()) return nullptr;
  const c10::ivalue::Object& object = v.toObjectRef();
  if (object.slots().size() != 1 || !object.getSlot(0).isCapsule()) return nullptr;
  return object.getSlot(0).toCapsule().get();
}

// The index of `object` among the groups' objects, or kNoGroup.
inline uint16_t group_index(const std::vector<const void*>& handles, const void* object) {
  if (object == nullptr) return kNoGroup;
  for (size_t i = 0; i < handles.size() && i < kNoGroup; ++i)
    if (handles[i] == object) return static_cast<uint16_t>(i);
  return kNoGroup;
}

// Calls f(TensorImpl*) for each defined tensor of `v`: a tensor, a list of tensors, a list of
// lists of them (allgather's outputs).
template <class F>
void for_each_tensor(const c10::IValue& v, F&& f) {
  if (v.isTensor()) {
    if (v.toTensor().defined()) f(static_cast<const void*>(v.toTensor().unsafeGetTensorImpl()));
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList().vec())
      if (t.defined()) f(static_cast<const void*>(t.unsafeGetTensorImpl()));
  } else if (v.isList()) {
    for (const c10::IValue& inner : v.toListRef())
      if (inner.isTensorList() || inner.isTensor()) for_each_tensor(inner, f);
  }
}

// The first defined tensor of `v` (for_each_tensor's order), or nullptr.
inline const void* first_tensor(const c10::IValue& v) {
  const void* first = nullptr;
  for_each_tensor(v, [&first](const void* impl) {
    if (first == nullptr) first = impl;
  });
  return first;
}

// A c10d collective op's group (its argument `arg`), and its sequence number in the group: c10d's
// count of the group's collectives before the call (read here, on the calling thread, before the
// op enqueues it) plus one, as getSequenceNumberForGroup() reads after it; 0 where the group counts
// none, and for a point-to-point call (kineto_names::is_point_to_point), which c10d numbers apart. Kept in the window for the op (call_seqs) and left for its backend range under the first
// tensor of each of its other arguments (the range's first input is one of them: allreduce's
// tensors, allgather's inputs), not every tensor: an allgather's outputs are a list per rank of
// the group. Two calls on one group from two threads at once may read one count: matching
// (summary --by rank) then names the pair, as it does calls that never meet.
inline uint16_t op_group(Window& window, const at::RecordFunction& fn, int arg) {
  const auto inputs = fn.inputs();
  if (arg < 0 || static_cast<size_t>(arg) >= inputs.size()) return kNoGroup;
  const void* object = process_group_object(inputs[static_cast<size_t>(arg)]);
  CallGroup call{group_index(window.settings.group_handles, object), 0};
  const auto& read = window.settings.group_sequence_numbers;
  if (call.group != kNoGroup && call.group < read.size() && read[call.group] != nullptr && !kineto_names::is_point_to_point(fn.name())) {
    const uint64_t before = read[call.group](object);
    call.seq = before != 0 ? before + 1 : 0;
  }
  const uint64_t thread = fn.threadId();
  std::lock_guard<std::mutex> lock(window.async_mutex);
  if (window.pending_groups.size() > kMaxPendingGroups) window.pending_groups.clear();
  if (call.seq != 0) window.call_seqs[fn.handle()] = call.seq;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (const void* impl = static_cast<int>(i) != arg ? first_tensor(inputs[i]) : nullptr) window.pending_groups[{thread, impl}] = call;
  return call.group;
}

// An async backend range's group: the one its op left under the range's thread id and first
// input tensor (taken: the next call on the same tensor leaves its own), or kNoGroup; its sequence
// number goes to the window's call_seqs under the range's handle. Called with
// window.async_mutex held.
inline uint16_t take_range_group(Window& window, const at::RecordFunction& fn) {
  const void* first = nullptr;
  for (const c10::IValue& v : fn.inputs())
    if ((first = first_tensor(v)) != nullptr) break;
  if (first == nullptr) return kNoGroup;
  auto it = window.pending_groups.find({fn.threadId(), first});
  if (it == window.pending_groups.end()) return kNoGroup;
  const CallGroup call = it->second;
  window.pending_groups.erase(it);
  if (call.seq != 0) window.call_seqs[fn.handle()] = call.seq;
  return call.group;
}

}  // namespace optrace::detail::profiler
