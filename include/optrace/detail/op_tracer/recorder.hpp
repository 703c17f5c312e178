// optrace/detail/op_tracer/recorder.hpp: OpTracer's RecordFunction callbacks and the encoding of calls
#pragma once
// How recording works, and why:
// - One global RecordFunction callback pair (FUNCTION scope, inputs needed) while a tracer records.
//   The callbacks are plain function pointers, so the active session is a global, which only
//   ActiveSession (recording/active_recording.hpp) installs and retracts.
// - Each thread aggregates into its own buffer (registered once per thread and session under a
//   mutex); the hot path takes only that buffer's uncontended mutex, so `trace()` can read it.
// - Most calls repeat their op's previous call (layer after layer, step after step). on_start
//   compares such a call in place with that call's stored encoding and counts it without the
//   lock, calling nothing out of line but RecordFunction::name() (repeats_simply); what it
//   cannot tell that way goes to start_op, which compares the rest (count_repeat) or records.
// - A call is encoded as a flat vector of int64 tokens (op, argument kinds, dtypes, sizes,
//   values) into a reused scratch buffer; the thread's hash table counts equal encodings. Strings
//   (names, dtype strings, Python type names) are made only when `trace()` decodes the keys
//   (decoder.hpp).
// - The reference tracer is a Python TorchDispatchMode: it sees ops below Autograd, that is after
//   CompositeImplicitAutograd kernels decomposed them (`linear` -> `t`, `addmm`), and only the
//   outermost ones (the mode is off while an op runs). RecordFunction fires at every
//   `Dispatcher::call`, including inside kernels and for CompositeImplicitAutograd ops before
//   they decompose. So, per thread, a stack says what each open RecordFunction opened: a nesting
//   level (dispatcher ops), a composite (ops that decompose: their parts are the outermost ones,
//   and the open composites are the context of the reference's context rules, dispatcher.hpp),
//   an autograd node (BACKWARD_FUNCTION ranges: context for the engine's rule), or nothing
//   (string-named RECORD_FUNCTIONs).
// - Wrapped numbers (0-dim tensors made from a scalar) are recorded as the scalar; calls whose
//   arguments cannot be encoded (nested tensors) are counted as dropped, with the reason.
// - Arguments are those Python's `__torch_dispatch__` receives in `args`
//   (torch/csrc/autograd/python_variable.cpp, parseIValuesToPyArgsKwargs): non-keyword-only
//   ones, trailing ones equal to their schema default dropped (compared with IValue's ==).

#include <optrace/detail/common/compat.hpp>
#include <optrace/detail/common/dispatcher.hpp>
#include <optrace/detail/common/error_text.hpp>
#include <optrace/detail/common/per_thread.hpp>
#include <optrace/detail/op_tracer/call_table.hpp>
#include <optrace/detail/recording/active_recording.hpp>
#include <optrace/detail/recording/thread_buffers.hpp>
#include <optrace/error.hpp>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/graph_task.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optrace::detail::op_tracer {

// Tokens of the flat encoding of one call.
enum Token : int64_t {
  kTensor = 1,     // dtype, ndim, sizes...; extended: device type, index, contiguous, [strides...]
  kNone,           //
  kBool,           // value
  kInt,            // value
  kFloat,          // bits
  kString,         // length, chars packed 8 per token
  kDtype,          // ScalarType
  kLayout,         // Layout
  kMemoryFormat,   // MemoryFormat
  kDevice,         // type, index
  kComplex,        // real bits, imag bits
  kList,           // n, items
  kTensorList,     // n, items (kTensor or kNone; extended: contiguous, [strides...], no device)
  kTuple,          // n, items
  kGenerator,      //
  kOther,          //
  kKwarg,          // argument index, value (extended)
};

// One thread's aggregation for one session. `mutex` is taken by the recording thread on each
// recorded call (uncontended) and by `trace()`.
struct ThreadBuffer {
  SpinLock mutex;
  CallTable calls;
  std::unordered_map<const OpInfo*, Dropped> dropped;
};

struct Settings {
  std::vector<std::string> include_ops, exclude_ops;
  bool all_levels = false;
  std::vector<std::thread::id> threads;
  int64_t max_unique_inputs = 0;
  bool extended = false;
  int64_t value_range_max_numel = 4096;
};

// One recording of an OpTracer (kept across its start/stop cycles until `clear`).
struct Session {
  Settings settings;
  ThreadBuffers<ThreadBuffer> buffers;
  std::atomic<uint64_t> seq{0};
  std::atomic<int64_t> kept{0};

  // Include/exclude filters see the name a call is recorded under.
  bool selected(const OpInfo& op) const {
    auto matches = [&](const std::vector<std::string>& names) {
      for (const auto& n : names)
        if (n == op.name || n == op.base) return true;
      return false;
    };
    if (!settings.include_ops.empty() && !matches(settings.include_ops)) return false;
    return !matches(settings.exclude_ops);
  }
};

// The recording session, if any: OpTracer's, or the one a Profiler's window records into.
using ActiveSession = ActiveRecording<Session>;

struct CacheSlot {
  const char* key = nullptr;
  const OpInfo* info = nullptr;
  bool selected = false;
  // Recorded as itself whenever it runs at a recorded level: selected, and (outermost only) no
  // decomposition and no context rule to ask. start_op's short path, ahead of those checks (it
  // repeats their two lines of nesting: 5 instructions fewer per op than sharing them, measured
  // when the path was on_start's).
  bool plain = false;
  // Plain, and the session is not extended: on_start's fast path may count a repeat of `last`.
  bool repeatable = false;
  // No argument takes a dtype, layout or memory format (ints encoded with their own token): the
  // fast path reads an int argument without asking its kind.
  bool ints_plain = false;
  CallTable::Entry* last = nullptr;  // the op's last recorded call, in this thread's CallTable
};

// What each open RecordFunction did on entry, undone when it ends.
enum Level : uint8_t { kNoLevel = 0, kNested = 1, kComposite = 2, kBackwardNode = 3 };

// The levels of a thread's open RecordFunctions, innermost last. A fixed array: a push is one
// store where std::vector's push_back is an out-of-line call; past 64 open ranges, a vector.
class LevelStack {
 public:
  void push(Level level) {
    if (size_ < kInline) inline_[size_] = level;
    else spill_.push_back(level);
    ++size_;
  }
  bool empty() const { return size_ == 0; }
  bool full() const { return size_ >= kInline; }  // a push would spill (out of line)
  void push_unspilled(Level level) { inline_[size_++] = level; }  // when not full()
  // Pops the innermost level into `level` if it is in the fixed array: one test for most pops.
  bool pop_unspilled(Level& level) {
    const size_t i = size_ - 1;  // wraps around when empty
    if (i >= kInline) return false;
    level = inline_[i];
    size_ = i;
    return true;
  }
  Level top() const { return size_ <= kInline ? inline_[size_ - 1] : spill_.back(); }
  void pop() {
    if (size_ > kInline) spill_.pop_back();
    --size_;
  }

 private:
  static constexpr size_t kInline = 64;
  Level inline_[kInline] = {};
  std::vector<Level> spill_;
  size_t size_ = 0;
};

// A thread's op recording. OpTracer's callbacks have one per thread (thread_state()), following
// ActiveSession's generations; the Profiler's callbacks have one inside their own thread state
// (profiler/callbacks.hpp), following the open window's, which attaches the window's session.
struct ThreadState {
  // Survives sessions: RecordFunctions opened under one session close after it.
  LevelStack levels;
  int64_t depth = 0;
  // The decomposing ops open at the outermost level, innermost last: the context of the
  // reference tracer's context rules (dispatcher.hpp).
  std::vector<const OpInfo*> composites;
  int64_t backward_nodes = 0;  // autograd nodes running (BACKWARD_FUNCTION ranges)
  // Per session.
  uint64_t generation = 0;
  uint64_t recording_generation = 0;  // `generation` where this thread records, else 0 (no generation's)
  std::shared_ptr<Session> session;
  ThreadBuffer* buffer = nullptr;  // this thread's, where the session records it (Settings::threads)
  bool outermost = true;  // the session records outermost ops only (not Settings::all_levels)
  static constexpr size_t kCacheSize = 512;
  CacheSlot cache[kCacheSize];
  std::unordered_map<const char*, CacheSlot> overflow;
  KeyWriter scratch;
  // The generations this state follows, and whether its owner attaches each one's session
  // (the Profiler's window) rather than refresh() reading ActiveSession's.
  const std::atomic<uint64_t>* generations = &ActiveSession::generations();
  bool attached_by_owner = false;

  ThreadState() = default;
  ThreadState(const std::atomic<uint64_t>& followed, bool by_owner) : generations(&followed), attached_by_owner(by_owner) {}

  // The current session, registering this thread with it first if needed; nullptr if none (or,
  // attached by its owner, when the owner has not attached the current generation's yet).
  Session* current() {
    if (generations->load(std::memory_order_acquire) == generation) return session.get();
    return attached_by_owner ? nullptr : refresh();
  }
  // Whether `session` is the current one and records this thread: one test for on_start.
  bool recording() const { return generations->load(std::memory_order_acquire) == recording_generation; }

  // Out of line: the first call of a thread under a session, and the first after a start or stop.
  C10_NOINLINE Session* refresh() {
    ActiveSession::view(generation, [this](const std::shared_ptr<Session>& active) { attach(active, generation); });
    return session.get();
  }

  // Makes `active` (nullptr: none) this thread's session of generation `g`, registering the
  // thread with it where it records it (Settings::threads). Under the lock of the followed
  // kind's view, so that the thread cannot register with a session once retracted.
  void attach(std::shared_ptr<Session> active, uint64_t g) {
    generation = g;
    session = std::move(active);
    buffer = nullptr;
    outermost = session == nullptr || !session->settings.all_levels;
    recording_generation = 0;
    for (auto& c : cache) c = CacheSlot{};
    overflow.clear();
    if (session) register_thread();
  }

  // Gives this thread a buffer in `session`, where the session records it (Settings::threads).
  void register_thread() {
    const auto& ids = session->settings.threads;
    if (!ids.empty() && std::find(ids.begin(), ids.end(), std::this_thread::get_id()) == ids.end()) return;
    buffer = &session->buffers.add(std::make_unique<ThreadBuffer>());
    recording_generation = generation;
  }

  // The cache slot for a RecordFunction named `key`: its op's, or another's.
  CacheSlot& slot_for(const char* key) { return cache[(reinterpret_cast<uintptr_t>(key) >> 4) % kCacheSize]; }
  // The op behind a RecordFunction; nullptr for ranges that are not dispatcher ops.
  CacheSlot* lookup(const at::RecordFunction& fn) {
    const char* key = fn.name();
    CacheSlot& slot = slot_for(key);
    return slot.key == key ? &slot : lookup_slow(fn, key, slot);
  }

  // Out of line: an op not in its cache slot.
  C10_NOINLINE CacheSlot* lookup_slow(const at::RecordFunction& fn, const char* key, CacheSlot& slot) {
    auto it = overflow.find(key);
    if (it != overflow.end()) return &it->second;
    // Dispatcher ops are named by their schema's name string, which lives as long as the op, so
    // its address identifies the op. String-named ranges are not cached (their address is reused).
    auto name = fn.operator_name();
    if (!name) return nullptr;
    CacheSlot fresh{key, op_info(*name)};
    fresh.selected = fresh.info != nullptr && session != nullptr && session->selected(*fresh.info);
    fresh.plain = fresh.selected &&
                  (session->settings.all_levels || (!fresh.info->decomposes && fresh.info->rules.empty()));
    fresh.repeatable = fresh.plain && !session->settings.extended;
    fresh.ints_plain = fresh.info != nullptr &&
                       std::none_of(fresh.info->args.begin(), fresh.info->args.end(), [](const ArgType& a) {
                         return a.kind == ArgKind::Dtype || a.kind == ArgKind::Layout || a.kind == ArgKind::MemoryFormat;
                       });
    if (slot.key == nullptr) {
      slot = fresh;
      return &slot;
    }
    return &overflow.emplace(key, fresh).first->second;
  }
};

inline ThreadState& thread_state() { return PerThread<ThreadState>::get(); }

inline void push_double(KeyWriter& out, double d) {
  if (std::isnan(d)) d = std::numeric_limits<double>::quiet_NaN();
  int64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  out.put(bits);
}

// Whether `v` is encoded by its dtype and sizes alone (encode_tensor_shape) when not extended: a
// defined tensor that is not a wrapped number, that is most arguments.
inline bool is_plain_tensor(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() && !v.toTensor().unsafeGetTensorImpl()->is_wrapped_number();
}

// A tensor's dtype and sizes. Small, so that it inlines into record_call's loop over arguments.
inline void encode_tensor_shape(KeyWriter& out, const at::Tensor& t) {
  auto sizes = t.sizes();
  const size_t ndim = sizes.size();
  int64_t* p = out.extend(3 + ndim);
  p[0] = kTensor;
  p[1] = static_cast<int64_t>(t.scalar_type());
  p[2] = static_cast<int64_t>(ndim);
  for (size_t i = 0; i < ndim; ++i) p[3 + i] = sizes[i];
}

// A wrapped number (a Python or C++ scalar that an operator's binding turned into a 0-dim CPU
// tensor: `x / 2.5` -> div.Tensor) as the scalar it was: __torch_dispatch__ hands Python the
// number, so the reference tracer records `<class 'float'>` 2.5. Read from the data pointer: no
// dispatch. False (nothing written) for a tensor that is not one.
inline bool encode_wrapped_number(KeyWriter& out, const at::Tensor& t) {
  if (!t.unsafeGetTensorImpl()->is_wrapped_number() || !t.device().is_cpu()) return false;
  switch (t.scalar_type()) {
    case c10::ScalarType::Double: out.put(kFloat); push_double(out, *t.data_ptr<double>()); return true;
    case c10::ScalarType::Long: out.put(kInt); out.put(*t.data_ptr<int64_t>()); return true;
    case c10::ScalarType::Bool: out.put(kBool); out.put(*t.data_ptr<bool>() ? 1 : 0); return true;
    case c10::ScalarType::ComplexDouble: {
      const auto c = *t.data_ptr<c10::complex<double>>();
      out.put(kComplex);
      push_double(out, c.real());
      push_double(out, c.imag());
      return true;
    }
    default: return false;
  }
}

// Extended: the device (not for a list's elements: the trace keeps no device for them) and the
// strides of a non-contiguous tensor.
inline void encode_tensor(KeyWriter& out, const at::Tensor& t, bool extended, bool device = true) {
  encode_tensor_shape(out, t);
  if (!extended) return;
  if (device) {
    out.put(static_cast<int64_t>(t.device().type()));
    out.put(t.device().index());
  }
  bool strided = t.layout() == c10::kStrided;
  bool contiguous = !strided || t.is_contiguous();
  out.put(contiguous ? 1 : 0);
  if (!contiguous) {
    auto strides = t.strides();
    int64_t* q = out.extend(strides.size());
    for (size_t i = 0; i < strides.size(); ++i) q[i] = strides[i];
  }
}

inline void encode_value(KeyWriter& out, const c10::IValue& v, ArgKind kind, bool extended) {
  if (v.isNone()) { out.put(kNone); return; }
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) out.put(kNone);
    else if (!encode_wrapped_number(out, t)) encode_tensor(out, t, extended);
    return;
  }
  if ((kind == ArgKind::Dtype || kind == ArgKind::Layout || kind == ArgKind::MemoryFormat) && v.isInt()) {
    out.put(kind == ArgKind::Dtype ? kDtype : kind == ArgKind::Layout ? kLayout : kMemoryFormat);
    out.put(v.toInt());
    return;
  }
  if (v.isBool()) { out.put(kBool); out.put(v.toBool()); return; }
  if (v.isInt()) { out.put(kInt); out.put(v.toInt()); return; }
  if (v.isDouble()) { out.put(kFloat); push_double(out, v.toDouble()); return; }
  if (v.isSymInt()) { out.put(kInt); out.put(v.toSymInt().expect_int()); return; }
  if (v.isString()) {
    const std::string& s = v.toStringRef();
    out.put(kString);
    out.put(static_cast<int64_t>(s.size()));
    for (size_t i = 0; i < s.size(); i += 8) {
      int64_t packed = 0;
      std::memcpy(&packed, s.data() + i, std::min<size_t>(8, s.size() - i));
      out.put(packed);
    }
    return;
  }
  if (v.isDevice()) {
    out.put(kDevice);
    out.put(static_cast<int64_t>(v.toDevice().type()));
    out.put(v.toDevice().index());
    return;
  }
  if (v.isComplexDouble()) {
    auto c = v.toComplexDouble();
    out.put(kComplex);
    push_double(out, c.real());
    push_double(out, c.imag());
    return;
  }
  if (v.isList()) {
    auto items = v.toListRef();
    bool any_tensor = false;
    for (const auto& item : items) any_tensor = any_tensor || item.isTensor();
    out.put(any_tensor ? kTensorList : kList);
    out.put(static_cast<int64_t>(items.size()));
    for (const auto& item : items) {
      if (any_tensor && item.isTensor() && item.toTensor().defined()) encode_tensor(out, item.toTensor(), extended, /*device=*/false);
      else if (any_tensor) out.put(kNone);
      else encode_value(out, item, kind, extended);
    }
    return;
  }
  if (v.isTuple()) {
    const auto& items = v.toTupleRef().elements();
    out.put(kTuple);
    out.put(static_cast<int64_t>(items.size()));
    for (const auto& item : items) encode_value(out, item, ArgKind::Other, extended);
    return;
  }
  out.put(v.isGenerator() ? kGenerator : kOther);
}

inline bool is_default(const c10::Argument& a, const c10::IValue& v) {
  if (!a.default_value().has_value()) return false;
  return *a.default_value() == v;  // what PyTorch uses to drop arguments before calling Python
}

// [min, max] of a small integer tensor, computed with RecordFunction off (no re-entry).
inline std::optional<std::pair<int64_t, int64_t>> value_range(const c10::IValue& v, int64_t max_numel) {
  if (!v.isTensor()) return std::nullopt;
  const at::Tensor& t = v.toTensor();
  if (!t.defined() || !c10::isIntegralType(t.scalar_type(), /*includeBool=*/false) || t.numel() == 0 || t.numel() > max_numel)
    return std::nullopt;
  at::RecordFunctionGuard off(false);
  c10::AutoGradMode no_grad(false);
  auto flat = t.reshape({-1});
  return std::make_pair(flat.min().item<int64_t>(), flat.max().item<int64_t>());
}

// Counts one dropped call of `recorded` in `buffer` (its lock held); the caller says why.
inline Dropped& count_dropped(ThreadBuffer& buffer, Session& s, const OpInfo& recorded) {
  Dropped& d = buffer.dropped[&recorded];
  if (d.count++ == 0) d.first_seen = s.seq.fetch_add(1, std::memory_order_relaxed);
  return d;
}

// How many of a call's arguments are recorded: the positional ones, trailing ones equal to
// their schema default dropped. `inputs` are the op's arguments (a boxed call's stack trimmed to
// them); `limit`: at most this many (the recorded op's own count under a rule).
C10_ALWAYS_INLINE size_t recorded_positional(const OpInfo& op, c10::ArrayRef<const c10::IValue> inputs, size_t limit) {
  size_t positional = std::min(std::min(op.positional, inputs.size()), limit);
  if (positional <= op.defaults_from) return positional;  // no trailing argument has a default
  const auto& args = op.live->schema->arguments();
  while (positional > op.defaults_from && is_default(args[positional - 1], inputs[positional - 1])) --positional;
  return positional;
}

// Boxed calls (the TorchScript interpreter's) hand RecordFunction the caller's whole stack: the
// op's arguments are its last ones.
C10_ALWAYS_INLINE c10::ArrayRef<const c10::IValue> op_arguments(const OpInfo& op, c10::ArrayRef<const c10::IValue> inputs) {
  const size_t n = op.args.size();  // not slice(): its bounds check is an out-of-line call
  return inputs.size() > n ? c10::ArrayRef<const c10::IValue>(inputs.data() + (inputs.size() - n), n) : inputs;
}

// Whether the tokens at `key`, at a value's start in a stored encoding, are encode_tensor_shape's
// of `t`; if so, moves `key` past them. It may read three tokens past the encoding's end, which
// hold no kTensor (CallTable::kPadding): no bounds check.
C10_ALWAYS_INLINE bool same_tensor_shape(const int64_t*& key, const c10::TensorImpl& t) {
  const auto sizes = t.sizes();
  const size_t ndim = sizes.size();
  // The dtype as TypeMeta's index, which is the ScalarType for tensors' types: no conversion
  // (and no error path) where a stored token is only ever a ScalarType.
  if ((static_cast<uint64_t>(key[0] ^ kTensor) | static_cast<uint64_t>(key[2] ^ static_cast<int64_t>(ndim)) |
       static_cast<uint64_t>(!t.dtype().isScalarType(static_cast<c10::ScalarType>(key[1])))) != 0)
    return false;
  const int64_t* stored = key + 3;
  const int64_t* actual = sizes.data();
  switch (ndim) {  // the usual ranks in one test each, without a loop's counting
    case 0: break;
    case 1: if (stored[0] != actual[0]) return false; break;
    case 2: if (((stored[0] ^ actual[0]) | (stored[1] ^ actual[1])) != 0) return false; break;
    case 3:
      if (((stored[0] ^ actual[0]) | (stored[1] ^ actual[1]) | (stored[2] ^ actual[2])) != 0) return false;
      break;
    case 4:
      if (((stored[0] ^ actual[0]) | (stored[1] ^ actual[1]) | (stored[2] ^ actual[2]) | (stored[3] ^ actual[3])) != 0)
        return false;
      break;
    default:
      for (size_t d = 0; d < ndim; ++d)
        if (stored[d] != actual[d]) return false;
  }
  key = stored + ndim;
  return true;
}

// The lock-free path of a repeated call: if this call of `slot`'s op (no context rule, not
// extended) encodes as the op's previous call did, counts it and returns true. Tensors, most
// arguments, are compared in place; any other value is encoded into `scratch` and compared.
// Only this thread changes its CallTable, so reading it needs no lock (CallCount).
C10_ALWAYS_INLINE bool count_repeat(const CacheSlot& slot, KeyWriter& scratch, c10::ArrayRef<const c10::IValue> inputs) {
  if (slot.last == nullptr) return false;
  const OpInfo& op = *slot.info;
  inputs = op_arguments(op, inputs);
  const size_t positional = recorded_positional(op, inputs, SIZE_MAX);
  const int64_t* key = slot.last->tokens;
  const int64_t* end = slot.last->end();
  if (key[1] != static_cast<int64_t>(positional)) return false;
  key += 2;
  for (size_t i = 0; i < positional; ++i) {
    const c10::IValue& v = inputs[i];
    if (is_plain_tensor(v)) {
      if (!same_tensor_shape(key, *v.unsafeToTensorImpl())) return false;
      continue;
    }
    scratch.clear();
    encode_value(scratch, v, op.args[i].kind, /*extended=*/false);
    if (static_cast<size_t>(end - key) < scratch.size() ||
        std::memcmp(key, scratch.data(), scratch.size() * sizeof(int64_t)) != 0)
      return false;
    key += scratch.size();
  }
  if (key != end) return false;
  slot.last->agg.count.add(1);
  return true;
}

// TensorImpl::sizes() calls out for a tensor with custom sizes (a virtual sizes_custom(), which
// throws for a nested tensor). Its test of the policy is protected; a pointer to it, formed
// through a derived class, reads it (the class is never made).
struct SizesPolicy : c10::TensorImpl {
  static bool custom(const c10::TensorImpl& t) {
    return (t.*&SizesPolicy::matches_policy)(SizesStridesPolicy::CustomSizes);
  }
};

// on_start's fast path: whether this call of `slot`'s op (repeatable, with a last call) encodes as
// that call did, judged from what is read without calling out: tensors (not custom-sized, not
// wrapped numbers), None, bools, ints and floats. False also for what it leaves to the full
// path (other values, trailing defaults to drop): count_repeat and record_call decide those.
C10_ALWAYS_INLINE bool repeats_simply(const CacheSlot& slot, c10::ArrayRef<const c10::IValue> inputs) {
  inputs = op_arguments(*slot.info, inputs);
  const size_t positional = std::min(slot.info->positional, inputs.size());
  if (positional > slot.info->defaults_from) return false;
  const int64_t* key = slot.last->tokens;
  if (key[1] != static_cast<int64_t>(positional)) return false;
  key += 2;
  const c10::IValue* const stop = inputs.data() + positional;
  for (const c10::IValue* v = inputs.data(); v != stop; ++v) {
    int64_t token = kNone, value = 0;
    if (v->isTensor()) {
      // An undefined tensor (stored as kNone, a rank-0 tensor here) differs: the full path's.
      const c10::TensorImpl& t = *v->unsafeToTensorImpl();
      if (t.is_wrapped_number() || SizesPolicy::custom(t) || !same_tensor_shape(key, t)) return false;
      continue;
    }
    if (v->isBool()) {
      token = kBool;
      value = v->toBool();
    } else if (v->isInt()) {
      if (!slot.ints_plain) return false;
      token = kInt;
      value = v->toInt();
    } else if (v->isDouble()) {
      const double d = v->toDouble();
      if (std::isnan(d)) return false;
      token = kFloat;
      std::memcpy(&value, &d, sizeof value);
    } else if (!v->isNone()) {
      return false;
    }
    if (token == kNone) {
      if (key[0] != kNone) return false;
      ++key;
      continue;
    }
    if (((key[0] ^ token) | (key[1] ^ value)) != 0) return false;  // key[1]: in the padding at most
    key += 2;
  }
  return key == slot.last->end();
}

// Records one call of `slot`'s op, as the reference sees it under `rule` (a context rule that
// matched, or nullptr).
inline void record_call(ThreadState& ts, Session& s, CacheSlot& slot, const OpInfo::Rule* rule,
                        c10::ArrayRef<const c10::IValue> inputs) {
  const OpInfo& op = *slot.info;
  const OpInfo& recorded = rule != nullptr ? *rule->recorded : op;
  const auto& args = op.live->schema->arguments();
  inputs = op_arguments(op, inputs);
  std::vector<c10::IValue> changed;  // the inputs with the rule's argument value
  if (rule != nullptr && rule->set_arg >= 0 && static_cast<size_t>(rule->set_arg) < inputs.size()) {
    changed.assign(inputs.begin(), inputs.end());
    changed[static_cast<size_t>(rule->set_arg)] = c10::IValue(rule->set_to);
    inputs = c10::ArrayRef<const c10::IValue>(changed.data(), changed.size());
  }
  const size_t n = inputs.size();
  const size_t positional = recorded_positional(op, inputs, &recorded != &op ? recorded.args.size() : SIZE_MAX);
  const bool extended = s.settings.extended;
  KeyWriter& key = ts.scratch;
  key.clear();
  int64_t* head = key.extend(2);
  // The key names the op the call is recorded as: decoding and merging go by it.
  head[0] = reinterpret_cast<intptr_t>(&recorded);
  head[1] = static_cast<int64_t>(positional);
  for (size_t i = 0; i < positional; ++i) {
    const c10::IValue& v = inputs[i];
    if (!extended && is_plain_tensor(v))
      encode_tensor_shape(key, v.toTensor());  // most arguments
    else
      encode_value(key, v, op.args[i].kind, extended);
  }
  if (extended) {
    for (size_t i = op.positional; i < n; ++i) {
      if (is_default(args[i], inputs[i])) continue;
      key.put(kKwarg);
      key.put(static_cast<int64_t>(i));
      encode_value(key, inputs[i], op.args[i].kind, true);
    }
  }
  ThreadBuffer& buffer = *ts.buffer;
  std::lock_guard<SpinLock> lock(buffer.mutex);
  CallTable& calls = buffer.calls;
  // A repeat of the op's previous call was counted by count_repeat, without the lock, unless
  // extended (its value ranges are updated here): then that call is tried before the hash.
  CallTable::Entry* entry = nullptr;
  if (extended && rule == nullptr && slot.last != nullptr && CallTable::holds(*slot.last, key.data(), key.size()))
    entry = slot.last;
  if (entry == nullptr) {
    size_t position;
    const size_t hash = hash_tokens(key.data(), key.size());
    position = calls.find(key.data(), key.size(), hash);
    if (position == CallTable::kNone) {
      int64_t limit = s.settings.max_unique_inputs;
      if (limit > 0 && s.kept.fetch_add(1, std::memory_order_relaxed) >= limit) {
        s.kept.fetch_sub(1, std::memory_order_relaxed);
        ++count_dropped(buffer, s, recorded).over_budget;
        return;
      }
      Aggregate fresh;
      fresh.first_seen = s.seq.fetch_add(1, std::memory_order_relaxed);
      position = calls.insert(key.data(), key.size(), hash, std::move(fresh));
    }
    entry = &calls.entry(position);
  }
  if (rule == nullptr) slot.last = entry;
  Aggregate& agg = entry->agg;
  agg.count.add(1);
  if (extended) {
    if (agg.ranges.empty()) agg.ranges.resize(positional);
    for (size_t i = 0; i < positional; ++i) {
      auto r = value_range(inputs[i], s.settings.value_range_max_numel);
      if (!r) continue;
      auto& into = agg.ranges[i];
      if (!into) into = r;
      else into = std::make_pair(std::min(into->first, r->first), std::max(into->second, r->second));
    }
  }
}

// Whether this thread runs the autograd engine's work (a backward pass) now.
inline bool in_autograd_engine() { return torch::autograd::get_current_graph_task_exec_info() != nullptr; }

// A call with an argument the encoder cannot read (a nested tensor, whose sizes() throws): counted
// as a dropped call of its op with the reason, rather than failing the user's op or vanishing.
inline void count_unreadable(ThreadState& ts, Session& s, const OpInfo& recorded, std::string reason) {
  std::lock_guard<SpinLock> lock(ts.buffer->mutex);
  Dropped& d = count_dropped(*ts.buffer, s, recorded);
  if (d.unreadable.empty()) d.unreadable = std::move(reason);
}

// Records a call (`recorded`: the op it is recorded as). An op called again with the same
// arguments (layer after layer, step after step) is counted without a lock, a hash or a copy of
// its encoding (count_repeat). A call whose arguments cannot be read (a nested tensor's sizes()
// throws) is counted as dropped with the reason, never thrown into the user's op. Out of line:
// on_start stays small enough for the compiler to inline what it calls.
C10_NOINLINE inline void record(ThreadState& ts, Session& s, CacheSlot& op, const OpInfo::Rule* rule,
                                const OpInfo& recorded, const at::RecordFunction& fn) {
  try {
    if (rule != nullptr || s.settings.extended || !count_repeat(op, ts.scratch, fn.inputs()))
      record_call(ts, s, op, rule, fn.inputs());
  } catch (const std::exception& e) {
    count_unreadable(ts, s, recorded, first_line(e));
  } catch (...) {
    count_unreadable(ts, s, recorded, "unknown exception");
  }
}

// A call of `op`'s (from this thread's cache) at a level that may be recorded: records it, or
// opens a composite. Out of line, for on_start's fast path.
C10_NOINLINE inline void start_op(ThreadState& ts, CacheSlot& op, const at::RecordFunction& fn) {
  Session& s = *ts.session;
  const bool outermost = ts.outermost;
  if (op.info == nullptr) {  // not a dispatcher op
    ts.levels.push(kNoLevel);
    return;
  }
  if (op.plain) {  // most calls
    ts.levels.push(outermost ? kNested : kNoLevel);
    if (outermost) ++ts.depth;
    record(ts, s, op, nullptr, *op.info, fn);
    return;
  }
  if (outermost && op.info->decomposes) {
    ts.composites.push_back(op.info);
    ts.levels.push(kComposite);
    return;
  }
  ts.levels.push(outermost ? kNested : kNoLevel);
  if (outermost) ++ts.depth;
  // What the reference tracer sees of this call (dispatcher.hpp, context_rules).
  const OpInfo::Rule* rule = nullptr;
  if (outermost && !op.info->rules.empty())
    rule = op.info->rule_within(ts.composites, [&ts] { return ts.backward_nodes == 0 && in_autograd_engine(); });
  const OpInfo* recorded = rule != nullptr ? rule->recorded : op.info;
  const bool selected = recorded == op.info ? op.selected : s.selected(*recorded);
  if (selected) record(ts, s, op, rule, *recorded, fn);
}

// on_start's path for what its fast path does not reach: an autograd node, a thread's first call
// under a session (or the first after a start or stop), a range the cache does not hold yet.
C10_NOINLINE inline void start_range(ThreadState& ts, const at::RecordFunction& fn) {
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {  // an autograd node: context only
    ++ts.backward_nodes;
    ts.levels.push(kBackwardNode);
    return;
  }
  // No session, not this thread, nested.
  if (ts.current() == nullptr || ts.buffer == nullptr || (ts.outermost && ts.depth > 0)) {
    ts.levels.push(kNoLevel);
    return;
  }
  CacheSlot* op = ts.lookup(fn);
  if (op == nullptr) ts.levels.push(kNoLevel);  // a string-named range
  else start_op(ts, *op, fn);
}

// A RecordFunction starts on the thread of `ts`. Its fast path, most calls (one nested in a
// recorded op, the repeat of an op's previous call with simple arguments), calls only
// RecordFunction::name(); the rest is out of line: start_op for an op in the thread's cache,
// start_range before that.
C10_ALWAYS_INLINE void enter(ThreadState& ts, const at::RecordFunction& fn) {
  if (C10_LIKELY(fn.scope() != at::RecordScope::BACKWARD_FUNCTION && ts.recording())) {
    if (ts.outermost && ts.depth > 0 && !ts.levels.full()) {  // inside a recorded op
      ts.levels.push_unspilled(kNoLevel);
      return;
    }
    const char* name = fn.name();
    CacheSlot& slot = ts.slot_for(name);
    if (slot.key == name) {
      if (slot.repeatable && slot.last != nullptr && !ts.levels.full() && repeats_simply(slot, fn.inputs())) {
        slot.last->agg.count.add(1);
        ts.levels.push_unspilled(ts.outermost ? kNested : kNoLevel);
        if (ts.outermost) ++ts.depth;
      } else {
        start_op(ts, slot, fn);
      }
      return;
    }
  }
  start_range(ts, fn);
}

// A RecordFunction that enter() saw ends on the thread of `ts`.
C10_ALWAYS_INLINE void leave(ThreadState& ts) {
  Level level;
  if (!ts.levels.pop_unspilled(level)) {
    if (ts.levels.empty()) return;  // a range opened before the callbacks were added
    level = ts.levels.top();
    ts.levels.pop();
  }
  if (level == kNested) --ts.depth;
  else if (level == kComposite && !ts.composites.empty()) ts.composites.pop_back();
  else if (level == kBackwardNode) --ts.backward_nodes;
}

// OpTracer's callbacks, over the thread's own state.
inline std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  enter(thread_state(), fn);
  return nullptr;
}
inline void on_end(const at::RecordFunction&, at::ObserverContext*) { leave(thread_state()); }

}  // namespace optrace::detail::op_tracer
