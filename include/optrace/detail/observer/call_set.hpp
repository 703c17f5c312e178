// optrace/detail/observer/call_set.hpp: every call an observer saw, as the analysis and the observation file take it
#pragma once
// A live InputObserver (recorder.hpp) and an observation file loaded from disk
// (observation_file.hpp) both hand the analysis (analysis.hpp) a CallSet.

#include <optrace/value.hpp>

#include <cstdint>
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
};

/// `v` without tensor data (specs and scalars only): what the history keeps of a call.
inline Value strip_data(Value v) {
  v.data = at::Tensor();
  for (Value& item : v.items) item = strip_data(std::move(item));
  return v;
}

}  // namespace optrace::detail
