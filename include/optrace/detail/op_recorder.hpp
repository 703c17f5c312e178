// optrace/detail/op_recorder.hpp: OpTracer's RecordFunction callbacks, per-thread aggregation and decoding
#pragma once
// How recording works, and why:
// - One global RecordFunction callback pair (FUNCTION scope, inputs needed) while a tracer records.
//   The callbacks are plain function pointers, so the active session is a global.
// - Each thread aggregates into its own buffer (registered once per thread and session under a
//   mutex); the hot path takes only that buffer's uncontended mutex, so `trace()` can read it.
// - A call is encoded as a flat vector of int64 tokens (op, argument kinds, dtypes, sizes,
//   values) into a reused scratch buffer; the thread's hash table counts equal encodings. Strings
//   (names, dtype strings, Python type names) are made only when `trace()` decodes the keys.
// - The reference tracer is a Python TorchDispatchMode: it sees ops below Autograd, that is after
//   CompositeImplicitAutograd kernels decomposed them (`linear` -> `t`, `addmm`), and only the
//   outermost ones (the mode is off while an op runs). RecordFunction fires at every
//   `Dispatcher::call`, including inside kernels and for CompositeImplicitAutograd ops before
//   they decompose. So, per thread, a stack says whether each open RecordFunction opened a
//   nesting level: ops that decompose do not (their parts are the outermost ones), dispatcher ops
//   do, ranges that are not dispatcher ops (string-named RECORD_FUNCTIONs) do not.
// - Arguments are those Python's `__torch_dispatch__` receives in `args`
//   (torch/csrc/autograd/python_variable.cpp, parseIValuesToPyArgsKwargs): non-keyword-only
//   ones, trailing ones equal to their schema default dropped (compared with IValue's ==).

#include <optrace/detail/compat.hpp>
#include <optrace/detail/python_names.hpp>
#include <optrace/error.hpp>
#include <optrace/op_trace.hpp>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace optrace {

namespace detail {

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
  kTensorList,     // n, items (kTensor or kNone)
  kTuple,          // n, items
  kGenerator,      //
  kOther,          //
  kKwarg,          // argument index, value (extended)
};

enum class ArgKind : uint8_t { Plain, Dtype, Layout, MemoryFormat };

// What the recorder keeps of one dispatcher op; made once per op, never freed.
struct OpInfo {
  std::string name;        // "addmm.default"
  std::string base;        // "addmm"
  bool decomposes = false;  // a CompositeImplicitAutograd kernel runs: not seen by the reference tracer
  const c10::FunctionSchema* schema = nullptr;
  size_t kwarg_only_start = 0;
  std::vector<ArgKind> kinds;
  c10::OperatorHandle handle;
  // Set for an op the reference tracer records as another one (see reference_op_for): its calls
  // are recorded under `recorded_as`, with as many leading arguments as that op's schema has.
  const OpInfo* recorded_as = nullptr;
  explicit OpInfo(c10::OperatorHandle h) : handle(std::move(h)) {}
};

inline ArgKind arg_kind(const c10::Argument& a) {
  c10::TypePtr t = a.real_type();
  if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
  switch (t->kind()) {
    case c10::TypeKind::ScalarTypeType: return ArgKind::Dtype;
    case c10::TypeKind::LayoutType: return ArgKind::Layout;
    case c10::TypeKind::MemoryFormatType: return ArgKind::MemoryFormat;
    default: return ArgKind::Plain;
  }
}

// The OpInfo of a dispatcher op by name; nullptr if the dispatcher does not know it.
inline const OpInfo* op_info(const c10::OperatorName& name) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::unique_ptr<OpInfo>> infos;
  const OpInfo* recorded_as = nullptr;
  if (auto reference = reference_op_for(name)) recorded_as = op_info(*reference);  // before taking the lock
  std::string key = name.name + "." + name.overload_name;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = infos.find(key);
  if (it != infos.end()) return it->second.get();
  auto handle = c10::Dispatcher::singleton().findSchema(name);
  if (!handle || !handle->hasSchema()) return infos.emplace(key, nullptr).first->second.get();
  auto info = std::make_unique<OpInfo>(*handle);
  const c10::FunctionSchema& schema = handle->schema();
  info->schema = &schema;
  std::string base = name.name;
  size_t colons = base.find("::");
  if (colons != std::string::npos) base = base.substr(colons + 2);
  info->base = base;
  info->name = base + "." + (name.overload_name.empty() ? std::string("default") : name.overload_name);
  using K = c10::DispatchKey;
  const c10::OperatorHandle& h = *handle;
  // The CompositeImplicitAutograd kernel fills the Autograd and backend slots that have no kernel
  // of their own (hasKernelForDispatchKey(Autograd) is true for it too, so that one tells nothing).
  info->decomposes = h.hasKernelForDispatchKey(K::CompositeImplicitAutograd) &&
                     !h.hasKernelForDispatchKey(K::AutogradCPU) && !h.hasKernelForDispatchKey(K::CPU) &&
                     !h.hasKernelForDispatchKey(K::CompositeExplicitAutograd);
  const auto& args = schema.arguments();
  info->kwarg_only_start = args.size();
  while (info->kwarg_only_start > 0 && args[info->kwarg_only_start - 1].kwarg_only()) --info->kwarg_only_start;
  for (const auto& a : args) info->kinds.push_back(arg_kind(a));
  if (recorded_as != nullptr) {
    info->recorded_as = recorded_as;
    info->name = recorded_as->name;  // include/exclude filters see the recorded name
    info->base = recorded_as->base;
  }
  return infos.emplace(key, std::move(info)).first->second.get();
}

// Hash of an encoding. Two independent multiply lanes: half the dependency chain of a one-lane hash.
inline size_t hash_tokens(const int64_t* v, size_t n) noexcept {
  uint64_t a = 0x9E3779B97F4A7C15ull ^ n, b = 0xC2B2AE3D27D4EB4Full;
  size_t i = 0;
  for (; i + 1 < n; i += 2) {
    a = (a ^ static_cast<uint64_t>(v[i])) * 0xff51afd7ed558ccdull;
    b = (b ^ static_cast<uint64_t>(v[i + 1])) * 0xc4ceb9fe1a85ec53ull;
  }
  if (i < n) a = (a ^ static_cast<uint64_t>(v[i])) * 0xff51afd7ed558ccdull;
  uint64_t h = a ^ ((b << 31) | (b >> 33));
  return static_cast<size_t>(h ^ (h >> 29));
}

struct SignatureHash {
  size_t operator()(const std::vector<int64_t>& v) const noexcept { return hash_tokens(v.data(), v.size()); }
};

// The encoding of the call being recorded, in a buffer reused from call to call. A value asks
// for the room it needs once (`extend`) and stores its tokens without a capacity check each:
// vector::push_back's check and out-of-line growth cost as much as the rest of the encoding of
// a small tensor.
class KeyWriter {
 public:
  void clear() { size_ = 0; }
  const int64_t* data() const { return tokens_.data(); }
  size_t size() const { return size_; }
  // Room for `n` more tokens, counted as written; valid until the next call.
  int64_t* extend(size_t n) {
    if (size_ + n > tokens_.size()) grow(size_ + n);
    int64_t* p = tokens_.data() + size_;
    size_ += n;
    return p;
  }
  void put(int64_t token) { *extend(1) = token; }

 private:
  void grow(size_t needed) { tokens_.resize(std::max<size_t>({needed, 2 * tokens_.size(), 256})); }
  std::vector<int64_t> tokens_;  // its size is the capacity; `size_` tokens are written
  size_t size_ = 0;
};

struct Aggregate {
  int64_t count = 0;
  uint64_t first_seen = 0;
  std::vector<std::optional<std::pair<int64_t, int64_t>>> ranges;  // extended: per positional argument
};

struct Dropped {
  int64_t count = 0;
  uint64_t first_seen = 0;
};

// One thread's unique calls. Their encodings lie end to end in `tokens_`; `slots_` is an
// open-addressing table (power-of-two size, linear probing) of positions in `entries_`. A call
// seen before costs one hash, one probe and a memcmp against the scratch encoding: no key copy,
// no node to chase, no modulo by a prime (what std::unordered_map<std::vector<int64_t>> costs).
class CallTable {
 public:
  struct Entry {
    size_t hash;
    size_t offset, length;  // of the encoding in tokens_
    Aggregate agg;
  };

  static constexpr size_t kNone = SIZE_MAX;

  // The position (in first-recorded order) of the entry whose encoding is `key[0..n)`, or kNone.
  size_t find(const int64_t* key, size_t n, size_t hash) const {
    if (slots_.empty()) return kNone;
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      uint32_t slot = slots_[i];
      if (slot == 0) return kNone;
      const Entry& e = entries_[slot - 1];
      if (e.hash == hash && holds(slot - 1, key, n)) return slot - 1;
    }
  }
  // Whether the entry at `position` is `key[0..n)`.
  bool holds(size_t position, const int64_t* key, size_t n) const {
    const Entry& e = entries_[position];
    return e.length == n && std::memcmp(tokens_.data() + e.offset, key, n * sizeof(int64_t)) == 0;
  }
  // Adds `key[0..n)`, which `find` did not find; returns its position.
  size_t insert(const int64_t* key, size_t n, size_t hash, Aggregate agg) {
    if (2 * (entries_.size() + 1) > slots_.size()) rehash(std::max<size_t>(64, 2 * slots_.size()));
    entries_.push_back(Entry{hash, tokens_.size(), n, std::move(agg)});
    tokens_.insert(tokens_.end(), key, key + n);
    place(hash, static_cast<uint32_t>(entries_.size()));
    return entries_.size() - 1;
  }
  Entry& entry(size_t position) { return entries_[position]; }
  const std::vector<Entry>& entries() const { return entries_; }
  std::vector<int64_t> key(const Entry& e) const {
    return std::vector<int64_t>(tokens_.begin() + static_cast<ptrdiff_t>(e.offset),
                                tokens_.begin() + static_cast<ptrdiff_t>(e.offset + e.length));
  }

 private:
  void place(size_t hash, uint32_t slot) {
    const size_t mask = slots_.size() - 1;
    size_t i = hash & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = slot;
  }
  void rehash(size_t size) {
    slots_.assign(size, 0);
    for (size_t k = 0; k < entries_.size(); ++k) place(entries_[k].hash, static_cast<uint32_t>(k + 1));
  }

  std::vector<int64_t> tokens_;
  std::vector<Entry> entries_;  // first-recorded order
  std::vector<uint32_t> slots_;  // 0: empty, else a position in entries_ plus one
};

// A spinlock: taken by one thread on each recorded call and, rarely, by `trace()`; unlocking is
// a plain store, cheaper than std::mutex's on this hot path.
class SpinLock {
 public:
  void lock() noexcept {
    while (flag_.exchange(true, std::memory_order_acquire))
      while (flag_.load(std::memory_order_relaxed)) std::this_thread::yield();
  }
  void unlock() noexcept { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
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
  std::mutex mutex;  // guards `buffers`
  std::vector<std::unique_ptr<ThreadBuffer>> buffers;
  std::atomic<uint64_t> seq{0};
  std::atomic<int64_t> kept{0};

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

// The recording session, if any; its generation changes at every start and stop so threads
// notice and re-register.
inline std::mutex& active_mutex() {
  static std::mutex m;
  return m;
}
inline std::shared_ptr<Session>& active_session() {
  static std::shared_ptr<Session> s;
  return s;
}
inline std::atomic<uint64_t>& active_generation() {
  static std::atomic<uint64_t> g{1};
  return g;
}

struct CacheSlot {
  const char* key = nullptr;
  const OpInfo* info = nullptr;
  bool selected = false;
  size_t last_call = CallTable::kNone;  // the op's last recorded call, in this thread's CallTable
};

struct ThreadState {
  // Survives sessions: RecordFunctions opened under one session close after it.
  std::vector<uint8_t> levels;
  int64_t depth = 0;
  // Per session.
  uint64_t generation = 0;
  std::shared_ptr<Session> session;
  ThreadBuffer* buffer = nullptr;
  bool thread_selected = false;
  static constexpr size_t kCacheSize = 512;
  CacheSlot cache[kCacheSize];
  std::unordered_map<const char*, CacheSlot> overflow;
  KeyWriter scratch;

  // The current session, registering this thread with it first if needed; nullptr if none.
  Session* current() {
    uint64_t g = active_generation().load(std::memory_order_acquire);
    if (g == generation) return session.get();
    std::lock_guard<std::mutex> lock(active_mutex());
    generation = active_generation().load(std::memory_order_relaxed);
    session = active_session();
    buffer = nullptr;
    for (auto& c : cache) c = CacheSlot{};
    overflow.clear();
    if (session) {
      const auto& ids = session->settings.threads;
      thread_selected = ids.empty() || std::find(ids.begin(), ids.end(), std::this_thread::get_id()) != ids.end();
      if (thread_selected) {
        std::lock_guard<std::mutex> buffers_lock(session->mutex);
        session->buffers.push_back(std::make_unique<ThreadBuffer>());
        buffer = session->buffers.back().get();
      }
    }
    return session.get();
  }

  // The op behind a RecordFunction; nullptr for ranges that are not dispatcher ops.
  CacheSlot* lookup(const at::RecordFunction& fn) {
    const char* key = fn.name();
    CacheSlot& slot = cache[(reinterpret_cast<uintptr_t>(key) >> 4) % kCacheSize];
    if (slot.key == key) return &slot;
    auto it = overflow.find(key);
    if (it != overflow.end()) return &it->second;
    // Dispatcher ops are named by their schema's name string, which lives as long as the op, so
    // its address identifies the op. String-named ranges are not cached (their address is reused).
    auto name = fn.operator_name();
    if (!name) return nullptr;
    CacheSlot fresh{key, op_info(*name), false, CallTable::kNone};
    fresh.selected = fresh.info != nullptr && session->selected(*fresh.info);
    if (slot.key == nullptr) {
      slot = fresh;
      return &slot;
    }
    return &overflow.emplace(key, fresh).first->second;
  }
};

inline ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

inline void push_double(KeyWriter& out, double d) {
  if (std::isnan(d)) d = std::numeric_limits<double>::quiet_NaN();
  int64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  out.put(bits);
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

inline void encode_tensor(KeyWriter& out, const at::Tensor& t, bool extended) {
  encode_tensor_shape(out, t);
  if (!extended) return;
  out.put(static_cast<int64_t>(t.device().type()));
  out.put(t.device().index());
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
    else encode_tensor(out, t, extended);
    return;
  }
  if (kind != ArgKind::Plain && v.isInt()) {
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
      if (any_tensor && item.isTensor() && item.toTensor().defined()) encode_tensor(out, item.toTensor(), false);
      else if (any_tensor) out.put(kNone);
      else encode_value(out, item, kind, extended);
    }
    return;
  }
  if (v.isTuple()) {
    const auto& items = v.toTupleRef().elements();
    out.put(kTuple);
    out.put(static_cast<int64_t>(items.size()));
    for (const auto& item : items) encode_value(out, item, ArgKind::Plain, extended);
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

inline void record_call(ThreadState& ts, Session& s, CacheSlot& slot, c10::ArrayRef<const c10::IValue> inputs) {
  const OpInfo& op = *slot.info;
  const auto& args = op.schema->arguments();
  // Boxed calls (the TorchScript interpreter's) hand RecordFunction the caller's whole stack:
  // the op's arguments are its last ones.
  if (inputs.size() > args.size()) inputs = inputs.slice(inputs.size() - args.size());
  size_t n = std::min(inputs.size(), args.size());
  size_t positional = std::min(op.kwarg_only_start, n);
  if (op.recorded_as != nullptr) positional = std::min(positional, op.recorded_as->schema->arguments().size());
  while (positional > 0 && is_default(args[positional - 1], inputs[positional - 1])) --positional;
  const bool extended = s.settings.extended;
  KeyWriter& key = ts.scratch;
  key.clear();
  int64_t* head = key.extend(2);
  // The key names the op the call is recorded as: decoding and merging go by it.
  head[0] = reinterpret_cast<intptr_t>(op.recorded_as != nullptr ? op.recorded_as : &op);
  head[1] = static_cast<int64_t>(positional);
  for (size_t i = 0; i < positional; ++i) {
    const c10::IValue& v = inputs[i];
    if (!extended && v.isTensor() && v.toTensor().defined()) encode_tensor_shape(key, v.toTensor());  // most arguments
    else encode_value(key, v, op.kinds[i], extended);
  }
  if (extended) {
    for (size_t i = op.kwarg_only_start; i < n; ++i) {
      if (is_default(args[i], inputs[i])) continue;
      key.put(kKwarg);
      key.put(static_cast<int64_t>(i));
      encode_value(key, inputs[i], op.kinds[i], true);
    }
  }
  ThreadBuffer& buffer = *ts.buffer;
  std::lock_guard<SpinLock> lock(buffer.mutex);
  CallTable& calls = buffer.calls;
  // The op's previous call first: an op called again with the same arguments (layer after layer,
  // step after step) skips the hash and the probe.
  size_t position = slot.last_call;
  if (position == CallTable::kNone || !calls.holds(position, key.data(), key.size())) {
    const size_t hash = hash_tokens(key.data(), key.size());
    position = calls.find(key.data(), key.size(), hash);
    if (position == CallTable::kNone) {
      int64_t limit = s.settings.max_unique_inputs;
      if (limit > 0 && s.kept.fetch_add(1, std::memory_order_relaxed) >= limit) {
        s.kept.fetch_sub(1, std::memory_order_relaxed);
        Dropped& d = buffer.dropped[&op];
        if (d.count++ == 0) d.first_seen = s.seq.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      Aggregate fresh;
      fresh.first_seen = s.seq.fetch_add(1, std::memory_order_relaxed);
      position = calls.insert(key.data(), key.size(), hash, std::move(fresh));
    }
    slot.last_call = position;
  }
  Aggregate& agg = calls.entry(position).agg;
  ++agg.count;
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

inline std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  ThreadState& ts = thread_state();
  Session* s = ts.current();
  if (s == nullptr || !ts.thread_selected) {
    ts.levels.push_back(0);
    return nullptr;
  }
  const bool outermost = !s->settings.all_levels;
  if (outermost && ts.depth > 0) {
    ts.levels.push_back(0);
    return nullptr;
  }
  CacheSlot* op = ts.lookup(fn);
  if (op == nullptr || op->info == nullptr || (outermost && op->info->decomposes)) {
    ts.levels.push_back(0);
    return nullptr;
  }
  ts.levels.push_back(outermost ? 1 : 0);
  if (outermost) ++ts.depth;
  if (op->selected) {
    try {
      record_call(ts, *s, *op, fn.inputs());
    } catch (...) {
      // A value the encoder cannot read (a symbolic size, ...): the call goes unrecorded rather
      // than failing the user's op.
    }
  }
  return nullptr;
}

inline void on_end(const at::RecordFunction&, at::ObserverContext*) {
  ThreadState& ts = thread_state();
  if (ts.levels.empty()) return;
  if (ts.levels.back()) --ts.depth;
  ts.levels.pop_back();
}

// ---- decoding (at trace() time) ----

inline std::string device_name(int64_t type, int64_t index) {
  return c10::Device(static_cast<c10::DeviceType>(type), static_cast<c10::DeviceIndex>(index)).str();
}

struct Decoded {
  OptionalShape shape;
  std::string dtype;
  OpValue value;
  std::optional<TensorListInfo> list;  // a tensor list: value becomes its reference
  OptionalShape strides;
  std::optional<std::string> device;
};

class Decoder {
 public:
  Decoder(const std::vector<int64_t>& key, size_t pos, bool extended) : k_(key), p_(pos), extended_(extended) {}
  size_t pos() const { return p_; }
  int64_t next() { return k_.at(p_++); }
  bool done() const { return p_ >= k_.size(); }
  int64_t peek() const { return k_.at(p_); }

  Decoded value() {
    Decoded d;
    int64_t tag = next();
    switch (tag) {
      case kTensor: {
        tensor(d, extended_);
        return d;
      }
      case kTensorList: {
        int64_t n = next();
        TensorListInfo list;
        for (int64_t i = 0; i < n; ++i) {
          if (peek() == kNone) {
            next();
            list.shapes.emplace_back();
            list.dtypes.emplace_back("<class 'NoneType'>");
          } else {
            next();
            Decoded t;
            tensor(t, false);
            list.shapes.push_back(t.shape);
            list.dtypes.push_back(t.dtype);
          }
        }
        d.dtype = "<class 'list'>";
        d.list = std::move(list);
        return d;
      }
      default: {
        --p_;
        d.value = plain(d.dtype);
        return d;
      }
    }
  }

 private:
  void tensor(Decoded& d, bool extended) {
    d.dtype = python_dtype_name(static_cast<c10::ScalarType>(next()));
    int64_t ndim = next();
    std::vector<int64_t> sizes(static_cast<size_t>(ndim));
    for (auto& s : sizes) s = next();
    d.shape = std::move(sizes);
    if (extended) {
      int64_t type = next();
      int64_t index = next();
      d.device = device_name(type, index);
      if (next() == 0) {
        std::vector<int64_t> strides(static_cast<size_t>(ndim));
        for (auto& s : strides) s = next();
        d.strides = std::move(strides);
      }
    }
  }

  static double as_double(int64_t bits) {
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }

  // A non-tensor value; `type` gets Python's type string.
  OpValue plain(std::string& type) {
    int64_t tag = next();
    switch (tag) {
      case kNone: type = "<class 'NoneType'>"; return OpValue::none();
      case kBool: type = "<class 'bool'>"; return OpValue::boolean(next() != 0);
      case kInt: type = "<class 'int'>"; return OpValue::integer(next());
      case kFloat: type = "<class 'float'>"; return OpValue::floating(as_double(next()));
      case kString: {
        type = "<class 'str'>";
        size_t n = static_cast<size_t>(next());
        std::string s(n, '\0');
        for (size_t i = 0; i < n; i += 8) {
          int64_t packed = next();
          std::memcpy(&s[i], &packed, std::min<size_t>(8, n - i));
        }
        return OpValue::string(std::move(s));
      }
      case kDtype: type = "<class 'torch.dtype'>"; return OpValue::string(python_dtype_name(static_cast<c10::ScalarType>(next())));
      case kLayout: type = "<class 'torch.layout'>"; return OpValue::string(layout_name(next()));
      case kMemoryFormat: type = "<class 'torch.memory_format'>"; return OpValue::string(memory_format_name(next()));
      case kDevice: {
        type = "<class 'torch.device'>";
        int64_t t = next();
        return OpValue::string(device_name(t, next()));
      }
      case kComplex: {
        type = "<class 'complex'>";
        double re = as_double(next());
        return OpValue::string(python_complex(re, as_double(next())));
      }
      case kList:
      case kTuple: {
        type = tag == kList ? "<class 'list'>" : "<class 'tuple'>";
        int64_t n = next();
        std::vector<OpValue> items;
        std::string ignored;
        for (int64_t i = 0; i < n; ++i) {
          if (peek() == kTensor || peek() == kTensorList) {  // a tensor inside a tuple: Python cannot write it either
            Decoded inner = value();
            items.push_back(OpValue::none());
            continue;
          }
          items.push_back(plain(ignored));
        }
        return OpValue::list(std::move(items));
      }
      case kGenerator: type = "<class 'torch._C.Generator'>"; return OpValue::none();
      default: type = "<class 'object'>"; return OpValue::none();
    }
  }

  const std::vector<int64_t>& k_;
  size_t p_;
  bool extended_;
};

inline OpInput decode_call(const std::vector<int64_t>& key, const OpInfo& op, const Aggregate& agg, bool extended) {
  OpInput in;
  in.count = agg.count;
  size_t positional = static_cast<size_t>(key.at(1));
  Decoder dec(key, 2, extended);
  bool any_strides = false;
  for (size_t i = 0; i < positional; ++i) {
    Decoded d = dec.value();
    if (d.list) {
      int64_t id = static_cast<int64_t>(in.tensor_lists.size());
      in.tensor_lists.emplace_back(std::to_string(id), std::move(*d.list));
      d.value = OpValue::tensor_list_ref(id);
    }
    in.input_shapes.push_back(std::move(d.shape));
    in.input_dtypes.push_back(std::move(d.dtype));
    in.non_tensor_inputs.push_back(std::move(d.value));
    if (extended) {
      any_strides = any_strides || d.strides.has_value();
      in.input_strides.push_back(std::move(d.strides));
      in.input_devices.push_back(std::move(d.device));
    }
  }
  if (extended) {
    while (!dec.done() && dec.peek() == kKwarg) {
      dec.next();
      size_t index = static_cast<size_t>(dec.next());
      Decoded d = dec.value();
      OpKwarg kw;
      kw.name = op.schema->arguments().at(index).name();
      if (d.list) {
        int64_t id = static_cast<int64_t>(in.tensor_lists.size());
        in.tensor_lists.emplace_back(std::to_string(id), std::move(*d.list));
        d.value = OpValue::tensor_list_ref(id);
      }
      kw.shape = std::move(d.shape);
      kw.dtype = std::move(d.dtype);
      kw.value = std::move(d.value);
      in.kwargs.push_back(std::move(kw));
    }
    if (!any_strides) in.input_strides.clear();
    bool any_range = false;
    for (const auto& r : agg.ranges) any_range = any_range || r.has_value();
    if (any_range) {
      in.input_value_ranges = agg.ranges;
      in.input_value_ranges.resize(positional);
    }
  }
  return in;
}

// Merges every thread's buffer of `s` into an OpTrace: ops and inputs in first-seen order.
inline OpTrace collect(Session& s) {
  struct Item {
    uint64_t first_seen;
    const OpInfo* op;
    const std::vector<int64_t>* key;  // nullptr: dropped calls
    Aggregate agg;
  };
  std::unordered_map<std::vector<int64_t>, Aggregate, SignatureHash> calls;
  std::unordered_map<const OpInfo*, Dropped> dropped;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto& buffer : s.buffers) {
      std::lock_guard<SpinLock> buffer_lock(buffer->mutex);
      for (const CallTable::Entry& entry : buffer->calls.entries()) {
        const Aggregate& agg = entry.agg;
        auto [it, fresh] = calls.emplace(buffer->calls.key(entry), agg);
        if (fresh) continue;
        Aggregate& into = it->second;
        into.count += agg.count;
        into.first_seen = std::min(into.first_seen, agg.first_seen);
        if (into.ranges.size() < agg.ranges.size()) into.ranges.resize(agg.ranges.size());
        for (size_t i = 0; i < agg.ranges.size(); ++i) {
          if (!agg.ranges[i]) continue;
          auto& r = into.ranges[i];
          r = r ? std::make_pair(std::min(r->first, agg.ranges[i]->first), std::max(r->second, agg.ranges[i]->second))
                : *agg.ranges[i];
        }
      }
      for (const auto& [op, d] : buffer->dropped) {
        auto [it, fresh] = dropped.emplace(op, d);
        if (fresh) continue;
        it->second.count += d.count;
        it->second.first_seen = std::min(it->second.first_seen, d.first_seen);
      }
    }
  }
  std::vector<Item> items;
  items.reserve(calls.size() + dropped.size());
  for (const auto& [key, agg] : calls)
    items.push_back(Item{agg.first_seen, reinterpret_cast<const OpInfo*>(static_cast<intptr_t>(key[0])), &key, agg});
  for (const auto& [op, d] : dropped) items.push_back(Item{d.first_seen, op, nullptr, Aggregate{d.count, d.first_seen, {}}});
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.first_seen < b.first_seen; });
  OpTrace trace;
  for (const Item& item : items) {
    if (item.key == nullptr) trace.add_dropped(item.op->name, item.agg.count);
    else trace.add(item.op->name, decode_call(*item.key, *item.op, item.agg, s.settings.extended));
  }
  return trace;
}

}  // namespace detail
}  // namespace optrace
