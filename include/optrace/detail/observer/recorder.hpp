// optrace/detail/observer/recorder.hpp: InputObserver's model-independent part: encoding calls, the signature table, the store
#pragma once
// Why it is built this way:
// - A call is first encoded as a flat list of integers (Encoder), cheap to build, hash and
//   compare, so a call whose signature was seen before costs one hash lookup; only a new
//   signature, or a call to store, is turned into Values.
// - One mutex guards the table and the store: calls from any number of threads are recorded.
// - Calls past max_signatures still count for dynamic dims, as per-dim min/max.

#include <optrace/detail/observer/call_set.hpp>
#include <optrace/error.hpp>
#include <optrace/value.hpp>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optrace::detail {

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

/// Min and max of the values of each integer tensor (has_int_range) of a stored call, by leaf
/// name. Run only for the calls that are stored, so an ordinary call costs what it did. A tensor
/// without elements, or whose values cannot be read here (meta, sparse, a backend without
/// aminmax), has none: the range only guides materialization, so it never fails the call.
inline std::map<std::string, std::pair<int64_t, int64_t>> int_ranges_of(const Value& call) {
  std::map<std::string, std::pair<int64_t, int64_t>> out;
  for_each_tensor_leaf(call, [&](const std::string& name, const Value& v) {
    const at::Tensor& t = v.data;
    if (!t.defined() || !has_int_range(t.scalar_type()) || t.numel() == 0 || t.layout() != c10::kStrided || t.is_meta())
      return;
    try {
      const auto [lo, hi] = at::aminmax(t);
      out.emplace(name, std::make_pair(lo.item<int64_t>(), hi.item<int64_t>()));
    } catch (const c10::Error&) {
    }
  });
  return out;
}

/// What a Recorder is made with: the observer's options, resolved against the model.
struct RecorderSetup {
  int64_t store_n_calls = 3;
  int64_t max_signatures = 10000;
  std::vector<std::string> names;  ///< the names positional arguments get
  /// Defaults of arguments a call may omit (TorchScript schemas), and value_if_missing values,
  /// by argument name and by position (keyed by the name `names` gives it, else `#i`).
  std::vector<std::pair<std::string, c10::IValue>> defaults, missing;
  std::vector<std::pair<int64_t, c10::IValue>> missing_by_position;
};

/// A call as the analysis sees it, and the arguments value_if_missing stood in for.
struct NormalizedCall {
  Value call;
  std::vector<std::string> stand_ins;
};

/// The model-independent part of InputObserver: the signature table, the store, the lock.
class Recorder {
 public:
  explicit Recorder(RecorderSetup setup)
      : store_n_calls_(setup.store_n_calls), max_signatures_(setup.max_signatures), names_(std::move(setup.names)) {
    for (const auto& [key, value] : setup.defaults) defaults_.emplace_back(key, to_value(value, true));
    for (const auto& [key, value] : setup.missing) missing_.emplace_back(key, to_value(value, true));
    for (const auto& [position, value] : setup.missing_by_position)
      missing_.emplace_back(positional_key(static_cast<size_t>(position)), to_value(value, true));
  }

  /// Counts a call whose encoding is in `scratch_encoding()`. Returns whether its signature was
  /// already known, and the store slot it gets (-1: not stored).
  std::pair<bool, int64_t> count(uint64_t hash) {
    const std::vector<int64_t>& enc = scratch_encoding();
    std::lock_guard<std::mutex> lock(mutex_);
    ++total_calls_;
    int64_t slot = reserved_ < store_n_calls_ ? reserved_++ : -1;
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
  void add(uint64_t hash, bool known, NormalizedCall normalized, int64_t slot, bool keyed) {
    const Value& call = normalized.call;
    Value signature = strip_data(call);
    const std::vector<int64_t>& enc = scratch_encoding();
    std::map<std::string, std::pair<int64_t, int64_t>> ranges;
    if (slot >= 0) ranges = int_ranges_of(call);  // before the lock: it reads the values
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
        if (static_cast<int64_t>(entries_.size()) < max_signatures_) {
          index_.emplace(hash, entries_.size());
          entries_.push_back({enc, std::move(signature), std::move(normalized.stand_ins)});
          counts_.push_back(1);
        } else {
          ++dropped_;
          if (!overflow_min_) overflow_min_ = overflow_max_ = Value();
          merge_min_max(*overflow_min_, *overflow_max_, signature, overflow_error_);
        }
      }
    }
    if (slot >= 0) {
      stored_[static_cast<size_t>(slot)] = call;
      merge_int_ranges(int_ranges_, ranges);
    }
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
  /// value_if_missing filled in (those named in `stand_ins`).
  NormalizedCall normalize(std::vector<Value> positional, std::vector<std::pair<std::string, Value>> keywords,
                           bool keep_data) const {
    NormalizedCall out;
    Value& call = out.call;
    call.kind = Value::Kind::Dict;
    auto put = [&](const std::string& key, Value v) {
      for (size_t k = 0; k < call.keys.size(); ++k)
        if (call.keys[k] == key) {
          if (!call.items[k].is_none()) return false;
          call.items[k] = std::move(v);
          return true;
        }
      call.keys.push_back(key);
      call.items.push_back(std::move(v));
      return true;
    };
    for (size_t i = 0; i < positional.size(); ++i) put(positional_key(i), std::move(positional[i]));
    for (auto& [name, v] : keywords) put(name, std::move(v));
    for (const auto& [name, v] : defaults_) put(name, keep_data ? v : strip_data(v));
    for (const auto& [key, v] : missing_)
      if (put(key, keep_data ? v : strip_data(v)) && !v.is_none()) out.stand_ins.push_back(key);
    return out;
  }

  std::string positional_key(size_t i) const { return i < names_.size() ? names_[i] : "#" + std::to_string(i); }

  CallSet snapshot() const {
    std::lock_guard<std::mutex> lock(mutex_);
    CallSet s;
    s.keyed = keyed_;
    s.preferred_order = names_;
    for (const auto& e : entries_) {
      s.signatures.push_back(e.signature);
      s.stand_ins.push_back(e.stand_ins);
    }
    s.counts = counts_;
    for (const Value& v : stored_)
      if (v.kind == Value::Kind::Dict) s.stored.push_back(v);
    s.overflow_min = overflow_min_;
    s.overflow_max = overflow_max_;
    s.dropped_signatures = dropped_;
    s.total_calls = total_calls_;
    s.recording_errors = errors_;
    if (!overflow_error_.empty()) s.recording_errors.push_back(overflow_error_);
    s.int_ranges = int_ranges_;
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
    std::vector<std::string> stand_ins;
  };

  const int64_t store_n_calls_, max_signatures_;
  std::vector<std::string> names_;
  std::vector<std::pair<std::string, Value>> defaults_;
  std::vector<std::pair<std::string, Value>> missing_;

  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
  std::vector<int64_t> counts_;
  std::unordered_multimap<uint64_t, size_t> index_;
  std::vector<Value> stored_, outputs_;
  std::map<std::string, std::pair<int64_t, int64_t>> int_ranges_;  ///< of the stored calls
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

// A model that names its own arguments (optrace::aoti::Package: argument_names()).
template <class T, class = void>
struct has_argument_names : std::false_type {};
template <class T>
struct has_argument_names<T, std::void_t<decltype(std::declval<const T&>().argument_names())>> : std::true_type {};

}  // namespace optrace::detail
