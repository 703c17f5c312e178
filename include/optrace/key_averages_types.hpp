// optrace/key_averages_types.hpp: the timed events and rows of torch's key_averages (no libtorch)
#pragma once
// The types key_averages.hpp computes with, apart, so that the machinery in
// detail/key_averages/ (which key_averages.hpp includes) can use them too.

#include <cstdint>
#include <string>

namespace optrace {

/// One complete event on one thread, as torch's profiler records it: an op (a Kineto `cpu_op`),
/// a user annotation (`record_function`, `RecordScope::USER_SCOPE`, `ProfilerStep#N`), or a
/// runtime call of an accelerator (`cudaLaunchKernel`). Events nest only within one thread: an
/// event is a child of the innermost event of its thread that contains it.
struct TimedEvent {
  /// "aten::addmm", "ProfilerStep#3", "autograd::engine::evaluate_function: AddmmBackward0".
  std::string name;
  /// The thread it ran on.
  int64_t tid = 0;
  /// Start and duration in microseconds, from any origin (the profile's start keeps them small
  /// enough for a double to hold them to the nanosecond). Times are taken to the nanosecond.
  double start_us = 0, dur_us = 0;
  /// The inputs' sizes as torch's key_averages prints them (input_shapes_text):
  /// "[[32, 512], [512, 256], [], []]"; "" when shapes were not recorded.
  std::string input_shapes;
  /// A user annotation (Kineto's `user_annotation`): torch keeps its rows apart from an op's of
  /// the same name.
  bool user_annotation = false;
};

/// One allocation (bytes > 0) or free (bytes < 0) the profiler recorded (a Kineto `[memory]`
/// instant event) with profile_memory.
struct MemoryRecord {
  int64_t tid = 0;
  /// When, in the events' microseconds.
  double ts_us = 0;
  /// Allocated (> 0) or freed (< 0).
  int64_t bytes = 0;
  /// c10::DeviceType as the `[memory]` events' "Device Type" holds it: 0 CPU (and 2 MKLDNN,
  /// 5 IDEEP, which torch counts as CPU memory too); others are device memory.
  int device_type = 0;
};

/// One row of torch's key_averages: the events of one name (and one input-shapes text, when
/// grouped by input shape) added up.
struct KeyAverage {
  /// The event's name; every `ProfilerStep#N` is `ProfilerStep*`, as torch names its row.
  std::string name;
  /// The inputs' sizes (TimedEvent::input_shapes, "[]" when not recorded) when grouped by input
  /// shape; "" otherwise.
  std::string input_shapes;
  /// A row of user annotations (record_function ranges).
  bool user_annotation = false;
  int64_t calls = 0;
  /// Time in the events themselves, not in the events nested directly in them (microseconds).
  double self_cpu_us = 0;
  /// The events' durations added up (microseconds).
  double cpu_total_us = 0;
  /// Bytes allocated (net of frees) while its events ran, on any thread; and the part not
  /// allocated within the events nested in them. 0 without memory records.
  int64_t cpu_memory = 0, self_cpu_memory = 0;
  /// cpu_total_us per call (0 for no call): torch's "CPU time avg".
  double cpu_time_avg_us() const { return calls == 0 ? 0.0 : cpu_total_us / static_cast<double>(calls); }
};

}  // namespace optrace
