// optrace/detail/profiler/trace_info.hpp: what a trace says of the process and the profiling, beside a window's events
#pragma once

#include <optrace/distributed.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace optrace::detail::profiler {

struct TraceInfo {
  int64_t pid = 0;
  std::string process_name;
  int64_t base_ns = 0;          // baseTimeNanoseconds (epoch)
  int64_t steady_to_epoch = 0;  // add to a steady-clock time to get epoch nanoseconds
  bool record_shapes = false, profile_memory = false, with_stack = false;
  std::string trace_id;
  std::optional<DistributedInfo> distributed;  // "distributedInfo", and the collectives' arguments
  std::vector<std::pair<std::string, std::string>> metadata;  // more top-level keys: JSON values

  // A steady-clock time as nanoseconds since baseTimeNanoseconds: what the trace's "ts" holds
  // (in microseconds).
  int64_t since_base(int64_t steady_ns) const { return steady_ns + steady_to_epoch - base_ns; }
};

// Seconds in libkineto's "3 months" (a month of 2629746 s: output_json.h's _trimonths).
inline constexpr int64_t kKinetoBaseTimeSeconds = 7889238;

// baseTimeNanoseconds for a process whose clock reads `epoch_ns` now: the epoch time floored to
// libkineto's 3-month intervals (ChromeTraceBaseTime), so that every rank of a job that starts
// in the same interval, optrace's or torch's, writes the same base and their "ts" compare
// directly. Why 3 months: "ts" is read as a double, exact to the nanosecond for about 3 months.
inline int64_t kineto_base_time_ns(int64_t epoch_ns) {
  constexpr int64_t interval = kKinetoBaseTimeSeconds * 1000000000;
  return epoch_ns - epoch_ns % interval;
}

}  // namespace optrace::detail::profiler
