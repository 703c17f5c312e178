// optrace/observer.hpp: InputObserver, which wraps a model and records what it is fed
#pragma once

#include <optrace/detail/analysis.hpp>
#include <optrace/detail/compat.hpp>
#include <optrace/dynamic_shapes.hpp>
#include <optrace/error.hpp>
#include <optrace/observations.hpp>
#include <optrace/value.hpp>

#include <torch/script.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optrace {

/// Options of InputObserver, in libtorch's chained-setter style.
///
/// Example:
///   optrace::ObserverOptions().store_n_calls(5).value_if_missing("mask", torch::ones({0, 10}))
class ObserverOptions {
 public:
  /// Keep the tensors (detached copies) of the first `n` calls; they become the export
  /// arguments. Every call still counts for dynamic shapes. Default: 3.
  ObserverOptions& store_n_calls(int64_t n) {
    OPTRACE_CHECK(n >= 0, ArgumentError, "store_n_calls must be >= 0, got ", n);
    store_n_calls_ = n;
    return *this;
  }
  /// What an optional argument stands for in calls that lack it (not passed, nullopt or None):
  /// it then takes part in dynamic shapes and export arguments. Default: none.
  ObserverOptions& value_if_missing(const std::string& name, c10::IValue value) {
    missing_by_name_.emplace_back(name, std::move(value));
    return *this;
  }
  /// The same for the positional argument at `position` (0-based).
  ObserverOptions& value_if_missing(int64_t position, c10::IValue value) {
    OPTRACE_CHECK(position >= 0, ArgumentError, "value_if_missing position must be >= 0, got ", position);
    missing_by_position_.emplace_back(position, std::move(value));
    return *this;
  }
  /// Names of the positional arguments of a C++ module or callable, so that positional and
  /// keyword calls line up and results can be keyed by name. TorchScript modules take them
  /// from their schema. Default: none (positional arguments are `#0`, `#1`, ...).
  ObserverOptions& arg_names(std::vector<std::string> names) {
    arg_names_ = std::move(names);
    return *this;
  }
  /// Bound on the distinct call signatures (shapes, dtypes, devices, scalars) kept with their
  /// counts. Calls with new signatures past it still count for dynamic dims and ranges, as
  /// per-dim min/max. Default: 10000.
  ObserverOptions& max_signatures(int64_t n) {
    OPTRACE_CHECK(n >= 1, ArgumentError, "max_signatures must be >= 1, got ", n);
    max_signatures_ = n;
    return *this;
  }

  int64_t store_n_calls() const { return store_n_calls_; }
  int64_t max_signatures() const { return max_signatures_; }
  const std::vector<std::string>& arg_names() const { return arg_names_; }
  const std::vector<std::pair<std::string, c10::IValue>>& missing_by_name() const { return missing_by_name_; }
  const std::vector<std::pair<int64_t, c10::IValue>>& missing_by_position() const { return missing_by_position_; }

 private:
  int64_t store_n_calls_ = 3;
  int64_t max_signatures_ = 10000;
  std::vector<std::string> arg_names_;
  std::vector<std::pair<std::string, c10::IValue>> missing_by_name_;
  std::vector<std::pair<int64_t, c10::IValue>> missing_by_position_;
};

namespace detail {

/// Writes a call as a flat list of integers: cheap to build, hash and compare, so a call
/// whose signature was seen before costs one lookup. Strings enter as their hash.
class Encoder {
 public:
  explicit Encoder(std::vector<int64_t>& out) : out_(out) {}
  void tensor(const at::Tensor& t) {
    const auto sizes = t.sizes();
    bool contiguous = t.layout() == c10::kStrided && t.is_contiguous();
    out_.push_back(1);
    out_.push_back(static_cast<int64_t>(t.scalar_type()) | static_cast<int64_t>(t.layout()) << 8 |
                   static_cast<int64_t>(t.device().type()) << 16 | static_cast<int64_t>(t.device().index() + 1) << 24 |
                   static_cast<int64_t>(t.requires_grad()) << 40 | static_cast<int64_t>(contiguous) << 41);
    out_.push_back(static_cast<int64_t>(sizes.size()));
    out_.insert(out_.end(), sizes.begin(), sizes.end());
    if (!contiguous && t.layout() == c10::kStrided) {
      const auto strides = t.strides();
      out_.insert(out_.end(), strides.begin(), strides.end());
      out_.push_back(t.storage_offset());
    }
  }
  void none() { out_.push_back(0); }
  void integer(int64_t x) {
    out_.push_back(2);
    out_.push_back(x);
  }
  void floating(double x) {
    int64_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    out_.push_back(3);
    out_.push_back(bits);
  }
  void boolean(bool x) { out_.push_back(x ? 5 : 4); }
  void string(std::string_view s) {
    out_.push_back(6);
    out_.push_back(static_cast<int64_t>(std::hash<std::string_view>()(s)));
  }
  void begin(Value::Kind kind, size_t size, std::string_view name) {
    out_.push_back(7);
    out_.push_back(static_cast<int64_t>(kind) | static_cast<int64_t>(size) << 8);
    if (!name.empty()) out_.push_back(static_cast<int64_t>(std::hash<std::string_view>()(name)));
  }
  void key(std::string_view k) {
    out_.push_back(8);
    out_.push_back(static_cast<int64_t>(std::hash<std::string_view>()(k)));
  }
  void end() { out_.push_back(9); }

 private:
  std::vector<int64_t>& out_;
};

inline uint64_t hash_encoding(const std::vector<int64_t>& xs) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ xs.size();
  for (int64_t x : xs) {
    h ^= static_cast<uint64_t>(x) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  }
  return h;
}

inline std::vector<int64_t>& scratch_encoding() {
  thread_local std::vector<int64_t> buffer;
  return buffer;
}

/// Element-wise min/max of the dims of calls past the signature bound. Structure mismatches
/// are kept as a message, raised by the analysis (a recording call never throws for them).
inline void merge_min_max(Value& mn, Value& mx, const Value& v, std::string& error) {
  if (v.is_none()) return;
  if (mn.is_none()) {
    mn = strip_data(v);
    mx = mn;
    return;
  }
  if (mn.kind != v.kind || mn.items.size() != v.items.size() || mn.keys != v.keys ||
      (v.is_tensor() && mn.spec.dim() != v.spec.dim()) || (!v.is_container() && !v.is_tensor() && mn != v)) {
    if (error.empty()) error = "a call past max_signatures does not match the others: " + describe(v) + " vs " + describe(mn);
    return;
  }
  if (v.is_tensor()) {
    for (size_t d = 0; d < v.spec.sizes.size(); ++d) {
      mn.spec.sizes[d] = std::min(mn.spec.sizes[d], v.spec.sizes[d]);
      mx.spec.sizes[d] = std::max(mx.spec.sizes[d], v.spec.sizes[d]);
    }
    return;
  }
  for (size_t k = 0; k < v.items.size(); ++k) merge_min_max(mn.items[k], mx.items[k], v.items[k], error);
}

/// The model-independent part of InputObserver: the signature table, the store, the lock.
class Recorder {
 public:
  explicit Recorder(ObserverOptions options) : options_(std::move(options)) {
    for (const auto& [name, value] : options_.missing_by_name()) missing_.emplace_back(name, to_value(value, true));
    for (const auto& [position, value] : options_.missing_by_position())
      missing_.emplace_back(positional_key(static_cast<size_t>(position)), to_value(value, true));
  }

  /// The names positional arguments get, and defaults of arguments a call may omit.
  void set_schema(std::vector<std::string> names, std::vector<std::pair<std::string, c10::IValue>> defaults) {
    names_ = std::move(names);
    for (auto& [name, value] : defaults) defaults_.emplace_back(name, to_value(value, true));
  }

  /// Counts a call whose encoding is in `scratch_encoding()`. Returns whether its signature was
  /// already known, and the store slot it gets (-1: not stored).
  std::pair<bool, int64_t> count(uint64_t hash) {
    const std::vector<int64_t>& enc = scratch_encoding();
    std::lock_guard<std::mutex> lock(mutex_);
    ++total_calls_;
    int64_t slot = reserved_ < options_.store_n_calls() ? reserved_++ : -1;
    if (slot >= 0) {
      stored_.emplace_back();
      outputs_.emplace_back();
    }
    auto range = index_.equal_range(hash);
    for (auto it = range.first; it != range.second; ++it) {
      if (entries_[it->second].encoding == enc) {
        ++counts_[it->second];
        return {true, slot};
      }
    }
    return {false, slot};
  }

  /// Adds the signature of a call that `count` did not know (it may have been added by another
  /// thread meanwhile), and/or the stored call for `slot`.
  void add(uint64_t hash, bool known, const Value& call, int64_t slot, bool keyed) {
    Value signature = strip_data(call);
    const std::vector<int64_t>& enc = scratch_encoding();
    std::lock_guard<std::mutex> lock(mutex_);
    keyed_ = keyed_ || keyed;
    if (!known) {
      bool found = false;
      auto range = index_.equal_range(hash);
      for (auto it = range.first; it != range.second && !found; ++it) {
        if (entries_[it->second].encoding == enc) {
          ++counts_[it->second];
          found = true;
        }
      }
      if (!found) {
        if (static_cast<int64_t>(entries_.size()) < options_.max_signatures()) {
          index_.emplace(hash, entries_.size());
          entries_.push_back({enc, std::move(signature)});
          counts_.push_back(1);
        } else {
          ++dropped_;
          if (!overflow_min_) overflow_min_ = overflow_max_ = Value();
          merge_min_max(*overflow_min_, *overflow_max_, signature, overflow_error_);
        }
      }
    }
    if (slot >= 0) stored_[static_cast<size_t>(slot)] = call;
  }

  void add_output(int64_t slot, Value output) {
    std::lock_guard<std::mutex> lock(mutex_);
    outputs_[static_cast<size_t>(slot)] = std::move(output);
  }

  void add_error(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (errors_.size() < 16) errors_.push_back(message);
  }

  /// The call as the analysis sees it: a Dict of argument keys, with defaults and
  /// value_if_missing filled in.
  Value normalize(std::vector<Value> positional, std::vector<std::pair<std::string, Value>> keywords,
                  bool keep_data) const {
    Value call;
    call.kind = Value::Kind::Dict;
    auto put = [&](const std::string& key, Value v) {
      for (size_t k = 0; k < call.keys.size(); ++k)
        if (call.keys[k] == key) {
          if (call.items[k].is_none()) call.items[k] = std::move(v);
          return;
        }
      call.keys.push_back(key);
      call.items.push_back(std::move(v));
    };
    for (size_t i = 0; i < positional.size(); ++i) put(positional_key(i), std::move(positional[i]));
    for (auto& [name, v] : keywords) put(name, std::move(v));
    for (const auto& [name, v] : defaults_) put(name, keep_data ? v : strip_data(v));
    for (const auto& [key, v] : missing_) put(key, keep_data ? v : strip_data(v));
    return call;
  }

  std::string positional_key(size_t i) const { return i < names_.size() ? names_[i] : "#" + std::to_string(i); }

  CallSet snapshot() const {
    std::lock_guard<std::mutex> lock(mutex_);
    CallSet s;
    s.keyed = keyed_;
    s.preferred_order = names_;
    for (const auto& e : entries_) s.signatures.push_back(e.signature);
    s.counts = counts_;
    for (const Value& v : stored_)
      if (v.kind == Value::Kind::Dict) s.stored.push_back(v);
    s.overflow_min = overflow_min_;
    s.overflow_max = overflow_max_;
    s.dropped_signatures = dropped_;
    s.total_calls = total_calls_;
    s.recording_errors = errors_;
    if (!overflow_error_.empty()) s.recording_errors.push_back(overflow_error_);
    return s;
  }

  int64_t num_stored() const {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t n = 0;
    for (const Value& v : stored_) n += v.kind == Value::Kind::Dict;
    return n;
  }
  int64_t total_calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return total_calls_;
  }
  std::vector<Value> outputs() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return outputs_;
  }

 private:
  struct Entry {
    std::vector<int64_t> encoding;
    Value signature;
  };

  ObserverOptions options_;
  std::vector<std::string> names_;
  std::vector<std::pair<std::string, Value>> defaults_;
  std::vector<std::pair<std::string, Value>> missing_;

  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
  std::vector<int64_t> counts_;
  std::unordered_multimap<uint64_t, size_t> index_;
  std::vector<Value> stored_, outputs_;
  int64_t reserved_ = 0, total_calls_ = 0, dropped_ = 0;
  bool keyed_ = false;
  std::optional<Value> overflow_min_, overflow_max_;
  std::string overflow_error_;
  std::vector<std::string> errors_;
};

template <class T, class = void>
struct has_arrow_forward : std::false_type {};
template <class T>
struct has_arrow_forward<T, std::void_t<decltype(&std::decay_t<decltype(*std::declval<T&>())>::forward)>> : std::true_type {};

template <class T, class = void>
struct is_recordable : std::true_type {};
template <class T>
struct is_recordable<T, std::void_t<typename Record<T>::unsupported>> : std::false_type {};

}  // namespace detail

/// Wraps a model and records every call's inputs (and, for stored calls, outputs), to infer
/// which dims are dynamic and a representative set of export arguments.
///
/// `Module` is a TORCH_MODULE holder or `std::shared_ptr` to an `nn::Module` subclass
/// (`forward` is called), a `torch::jit::Module` (its schema names the arguments and gives
/// their defaults), or any callable.
///
/// Thread-safe: calls from several threads are all recorded. A call that cannot be recorded
/// (an unsupported IValue type) still runs the model; the error is raised by the infer_*
/// methods.
///
/// Example:
///   optrace::InputObserver<Net> observer(net, optrace::ObserverOptions().store_n_calls(3));
///   for (auto& batch : batches) observer(batch.x, batch.y);
///   std::cout << observer.infer_dynamic_shapes().to_python();
///   optrace::Arguments args = observer.infer_arguments();
template <class Module>
class InputObserver {
  static constexpr bool kIsScript = std::is_same_v<std::decay_t<Module>, torch::jit::Module>;

 public:
  explicit InputObserver(Module model, const ObserverOptions& options = {})
      : model_(std::move(model)), recorder_(std::make_unique<detail::Recorder>(options)) {
    std::vector<std::string> names = options.arg_names();
    std::vector<std::pair<std::string, c10::IValue>> defaults;
    if constexpr (kIsScript) {
      const c10::FunctionSchema& schema = model_.get_method("forward").function().getSchema();
      names.clear();
      const auto& args = schema.arguments();
      for (size_t k = 1; k < args.size(); ++k) {  // 0 is self
        names.push_back(args[k].name());
        if (args[k].default_value()) defaults.emplace_back(args[k].name(), *args[k].default_value());
      }
    }
    recorder_->set_schema(std::move(names), std::move(defaults));
  }

  /// Calls the model with `args` (as `model->forward(args...)`, `module.forward({args...})` or
  /// `model(args...)`) and records them. Returns what the model returns.
  template <class... Args>
  decltype(auto) operator()(Args&&... args) {
    if constexpr (kIsScript) {
      return call(std::vector<c10::IValue>{c10::IValue(std::forward<Args>(args))...}, {});
    } else {
      int64_t slot = record([&](auto& visitor) { (visit_value(args, visitor), ...); }, [&](bool keep_data) {
        std::vector<Value> positional;
        (positional.push_back(to_value(args, keep_data)), ...);
        return recorder_->normalize(std::move(positional), {}, keep_data);
      }, false);
      return invoke_and_record_output(slot, [&]() -> decltype(auto) { return invoke(std::forward<Args>(args)...); });
    }
  }

  /// A call with keyword arguments: `module.forward(args, kwargs)` for a TorchScript module,
  /// `model(args, kwargs)` for a callable taking `(std::vector<c10::IValue>, torch::jit::Kwargs)`.
  c10::IValue call(std::vector<c10::IValue> args, const torch::jit::Kwargs& kwargs = {}) {
    static_assert(kIsScript || std::is_invocable_v<Module&, std::vector<c10::IValue>, const torch::jit::Kwargs&>,
                  "InputObserver::call needs a torch::jit::Module or a callable taking "
                  "(std::vector<c10::IValue>, torch::jit::Kwargs); call C++ modules with observer(args...)");
    std::vector<std::pair<const std::string*, const c10::IValue*>> sorted;
    for (const auto& kv : kwargs) sorted.emplace_back(&kv.first, &kv.second);
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return *a.first < *b.first; });
    int64_t slot = record(
        [&](auto& visitor) {
          for (const auto& a : args) visit_value(a, visitor);
          for (const auto& [name, value] : sorted) {
            visitor.key(*name);
            visit_value(*value, visitor);
          }
        },
        [&](bool keep_data) {
          std::vector<Value> positional;
          for (const auto& a : args) positional.push_back(to_value(a, keep_data));
          std::vector<std::pair<std::string, Value>> keywords;
          for (const auto& [name, value] : sorted) keywords.emplace_back(*name, to_value(*value, keep_data));
          return recorder_->normalize(std::move(positional), std::move(keywords), keep_data);
        },
        !kwargs.empty());
    return invoke_and_record_output(slot, [&]() -> c10::IValue {
      if constexpr (kIsScript) return model_.forward(std::move(args), kwargs);
      else return model_(std::move(args), kwargs);
    });
  }

  /// Number of stored calls (at most store_n_calls).
  int64_t num_obs() const { return recorder_->num_stored(); }
  /// Number of calls recorded, stored or not.
  int64_t num_calls() const { return recorder_->total_calls(); }

  /// Which dims are dynamic across every recorded call. Throws ArgumentError when the calls
  /// cannot be aligned (no call has every argument, a tensor changed rank or dtype, a container
  /// changed length, a scalar changed value), naming the argument.
  DynamicShapes infer_dynamic_shapes(const DynamicShapesOptions& options = {}) const {
    return detail::infer_dynamic_shapes(recorder_->snapshot(), options);
  }

  /// A representative set of export arguments from the stored calls (see
  /// InferArgumentsOptions). Throws like infer_dynamic_shapes, and ArgumentError when nothing
  /// was stored or the index is out of range.
  Arguments infer_arguments(const InferArgumentsOptions& options = {}) const {
    return detail::infer_arguments(recorder_->snapshot(), options);
  }
  /// The export arguments from the stored call at `index`, missing inputs filled.
  Arguments infer_arguments(int64_t index) const { return infer_arguments(InferArgumentsOptions().call_index(index)); }

  /// The stored calls: Dict values keyed by argument, with tensor data.
  std::vector<Value> observations() const { return recorder_->snapshot().stored; }
  /// The outputs of the stored calls (None where the return type is not recordable).
  std::vector<Value> outputs() const { return recorder_->outputs(); }
  /// Every distinct call signature (specs and scalars, no data) with its number of calls.
  std::vector<std::pair<Value, int64_t>> history() const {
    detail::CallSet s = recorder_->snapshot();
    std::vector<std::pair<Value, int64_t>> out;
    for (size_t k = 0; k < s.signatures.size(); ++k) out.emplace_back(std::move(s.signatures[k]), s.counts[k]);
    return out;
  }
  /// The observation file (optrace/observations.hpp): per input a torch.export TensorMeta,
  /// range constraints, treespec, dynamic-shapes spec, and the call history, without the data.
  /// Throws ArgumentError for a dtype the export schema has no number for (uint32, ...).
  std::string to_json(int indent = 1) const { return detail::observations_json(recorder_->snapshot(), indent); }
  /// Writes `to_json()` to `path` atomically (temporary file, then rename): a failure never
  /// leaves a truncated file. Throws IoError.
  void save(const std::string& path) const { detail::write_file_atomic(path, to_json() + "\n"); }

  /// Everything the analysis uses; what `save` writes.
  detail::CallSet call_set() const { return recorder_->snapshot(); }

  Module& module() { return model_; }

 private:
  template <class Encode, class Build>
  int64_t record(Encode&& encode, Build&& build, bool keyed) {
    try {
      std::vector<int64_t>& enc = detail::scratch_encoding();
      enc.clear();
      enc.push_back(keyed);
      detail::Encoder encoder(enc);
      encode(encoder);
      uint64_t hash = detail::hash_encoding(enc);
      auto [known, slot] = recorder_->count(hash);
      if (!known || slot >= 0) recorder_->add(hash, known, build(slot >= 0), slot, keyed);
      return slot;
    } catch (const std::exception& e) {
      recorder_->add_error(e.what());
      return -1;
    }
  }

  template <class F>
  decltype(auto) invoke_and_record_output(int64_t slot, F&& f) {
    using R = decltype(f());
    if constexpr (std::is_void_v<R>) {
      f();
    } else {
      R out = f();
      if constexpr (detail::is_recordable<std::decay_t<R>>::value) {
        if (slot >= 0) {
          try {
            recorder_->add_output(slot, to_value(out, true));
          } catch (const std::exception& e) {
            recorder_->add_error(e.what());
          }
        }
      }
      return out;
    }
  }

  template <class... Args>
  decltype(auto) invoke(Args&&... args) {
    if constexpr (detail::has_arrow_forward<Module>::value) return model_->forward(std::forward<Args>(args)...);
    else return std::invoke(model_, std::forward<Args>(args)...);
  }

  Module model_;
  // Behind a pointer so that an observer can be moved (the recorder holds a mutex).
  std::unique_ptr<detail::Recorder> recorder_;
};

}  // namespace optrace
