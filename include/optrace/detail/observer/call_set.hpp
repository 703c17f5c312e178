// optrace/detail/observer/call_set.hpp: every call an observer saw, as the analysis and the observation file take it
#pragma once
// A live InputObserver (recorder.hpp) and an observation file loaded from disk
// (observation_file.hpp) both hand the analysis (analysis.hpp) a CallSet.

#include <optrace/value.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace optrace::detail {

/// Every call an observer saw, in the form the analysis needs. Each call is a Dict Value
/// whose keys are argument keys: names, or `#i` for unnamed positional arguments.
struct CallSet {
  bool keyed = false;                        ///< some call used keyword arguments
  std::vector<std::string> preferred_order;  ///< argument names in signature order, if known
  std::vector<Value> signatures;             ///< distinct calls, specs only, first-seen order
  std::vector<int64_t> counts;               ///< calls per signature
  /// Per signature (may be shorter: none), the arguments a value_if_missing value stood in
  /// for. Their sizes count in ranges, not in the equalities that tie dims to one symbol.
  std::vector<std::vector<std::string>> stand_ins;
  std::vector<Value> stored;                 ///< the stored calls, with tensor data
  /// Calls beyond the signature bound: element-wise min and max of their dims (same structure).
  std::optional<Value> overflow_min, overflow_max;
  int64_t dropped_signatures = 0;
  int64_t total_calls = 0;                   ///< every call, stored or not
  std::vector<std::string> recording_errors;
  /// Per input leaf name (as the file's inputs[].name): min and max of the values of the
  /// stored calls, for integer tensors (not bool) with at least one element.
  std::map<std::string, std::pair<int64_t, int64_t>> int_ranges;
};

/// Whether the observer records the range of a tensor of `dtype`'s values: the integer dtypes
/// a model indexes with (int8, int16, int32, int64, uint8), not bool.
inline bool has_int_range(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Byte:
    case c10::ScalarType::Char:
    case c10::ScalarType::Short:
    case c10::ScalarType::Int:
    case c10::ScalarType::Long: return true;
    default: return false;
  }
}

/// Appends to `name` the step to item `index` (key `key`) of a container of kind `parent`:
/// `batch.input_ids` (struct), `extra["pos"]` (dict), `cache[1]` (list, tuple). The one rule
/// for the file's inputs[].name (leaf_name) and the leaves int_ranges is keyed by.
inline void append_leaf_step(std::string& name, Value::Kind parent, const std::string& key, size_t index) {
  if (parent == Value::Kind::Struct) name += "." + key;
  else if (parent == Value::Kind::Dict) name += "[\"" + key + "\"]";
  else name += "[" + std::to_string(index) + "]";
}

/// Calls `f(name, tensor)` for every tensor of `call` (a Dict keyed by argument), depth first
/// in argument order, `name` as the file's inputs[].name.
template <class V, class F>
void for_each_tensor_leaf(V& call, F&& f) {
  std::string name;
  auto walk = [&](auto& self, V& v) -> void {
    if (v.is_tensor()) f(static_cast<const std::string&>(name), v);
    if (!v.is_container()) return;
    for (size_t k = 0; k < v.items.size(); ++k) {
      const size_t size = name.size();
      append_leaf_step(name, v.kind, v.is_keyed() ? v.keys[k] : std::string(), k);
      self(self, v.items[k]);
      name.resize(size);
    }
  };
  for (size_t k = 0; k < call.items.size(); ++k) {
    name = call.keys[k];
    walk(walk, call.items[k]);
  }
}

/// Widens `into` to hold `ranges` (min of mins, max of maxes, leaf by leaf).
inline void merge_int_ranges(std::map<std::string, std::pair<int64_t, int64_t>>& into,
                             const std::map<std::string, std::pair<int64_t, int64_t>>& ranges) {
  for (const auto& [name, range] : ranges) {
    auto [it, added] = into.emplace(name, range);
    if (added) continue;
    it->second.first = std::min(it->second.first, range.first);
    it->second.second = std::max(it->second.second, range.second);
  }
}

/// `v` without tensor data (specs and scalars only): what the history keeps of a call.
inline Value strip_data(Value v) {
  v.data = at::Tensor();
  for (Value& item : v.items) item = strip_data(std::move(item));
  return v;
}

}  // namespace optrace::detail
