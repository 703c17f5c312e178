// optrace/detail/profiler/trace_info.hpp: what a trace says of the process and the profiling, beside a window's events
#pragma once

#include <cstdint>
#include <string>

namespace optrace::detail::profiler {

struct TraceInfo {
  int64_t pid = 0;
  std::string process_name;
  int64_t base_ns = 0;          // baseTimeNanoseconds (epoch)
  int64_t steady_to_epoch = 0;  // add to a steady-clock time to get epoch nanoseconds
  bool record_shapes = false, profile_memory = false, with_stack = false;
  std::string trace_id;

  // A steady-clock time as nanoseconds since baseTimeNanoseconds: what the trace's "ts" holds
  // (in microseconds).
  int64_t since_base(int64_t steady_ns) const { return steady_ns + steady_to_epoch - base_ns; }
};

}  // namespace optrace::detail::profiler
