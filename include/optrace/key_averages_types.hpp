// optrace/key_averages_types.hpp: the timed events and rows of torch's key_averages (no libtorch)
#pragma once
// The types key_averages.hpp computes with, apart, so that the machinery in
// detail/key_averages/ (which key_averages.hpp includes) can use them too.

#include <cstdint>
#include <string>

namespace optrace {

/// One complete event, as torch's profiler records it: on a CPU thread an op (a Kineto `cpu_op`),
/// a user annotation (`record_function`, `RecordScope::USER_SCOPE`, `ProfilerStep#N`), or a
/// runtime call of an accelerator (`cudaLaunchKernel`); on the accelerator a kernel, copy,
/// memset or GPU annotation (`on_device`). CPU events nest only within one thread: an event is a
/// child of the innermost event of its thread that contains it.
struct TimedEvent {
  /// "aten::addmm", "ProfilerStep#3", "autograd::engine::evaluate_function: AddmmBackward0".
  std::string name;
  /// The thread it ran on (a device event's is not used).
  int64_t tid = 0;
  /// Start and duration in microseconds, from any origin (the profile's start keeps them small
  /// enough for a double to hold them to the nanosecond). Times are taken to the nanosecond.
  double start_us = 0, dur_us = 0;
  /// The inputs' sizes as torch's key_averages prints them (input_shapes_text):
  /// "[[32, 512], [512, 256], [], []]"; "" when shapes were not recorded.
  std::string input_shapes;
  /// A user annotation (Kineto's `user_annotation`, or `gpu_user_annotation` on the device):
  /// torch keeps its rows apart from an op's of the same name.
  bool user_annotation = false;
  /// Ran on the accelerator (a kernel, copy, memset, or GPU annotation), not the CPU: a row of
  /// its own with device time and no CPU time, and not nested in any event. Any such event makes
  /// the rows have an accelerator (KeyAverages::has_device).
  bool on_device = false;
  /// torch's correlation id of the event (KinetoEvent::correlation_id): an op's or annotation's
  /// "External id", a runtime call's CUPTI "correlation"; 0 for none.
  int64_t correlation_id = 0;
  /// The correlation id of the op that launched it (KinetoEvent::linked_correlation_id): a
  /// kernel's or runtime call's "External id" when that names an op; 0 for none. A device event
  /// counts toward every CPU event that is linked to none and whose correlation_id is this; a
  /// CPU event (a runtime call) is on that event's thread.
  int64_t linked_correlation_id = 0;
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

/// How key averages group events, as torch's `key_averages(group_by_input_shape=...)`:
/// by name alone (False), or by name and input shapes (True).
enum class GroupBy { Name, InputShape };

/// One row of torch's key_averages: the events of one name (and one input-shapes text, when
/// grouped by GroupBy::InputShape) added up.
struct KeyAverage {
  /// The event's name; every `ProfilerStep#N` is `ProfilerStep*`, as torch names its row.
  std::string name;
  /// The inputs' sizes (TimedEvent::input_shapes, "[]" when not recorded) when grouped by
  /// GroupBy::InputShape; "" otherwise.
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
  /// A row of events that ran on the accelerator (TimedEvent::on_device): kernels, copies,
  /// memsets, GPU annotations. torch keeps it apart from a CPU row of the same name.
  bool on_device = false;
  /// Device time (microseconds), torch's `self_device_time_total`: a device row's durations; a
  /// CPU row's, those of the device events it launched itself. 0 without an accelerator.
  double self_device_us = 0;
  /// torch's `device_time_total`: a device row's durations; a CPU row's, those of the device
  /// events it and the events nested in it launched.
  double device_total_us = 0;
  /// As cpu_memory and self_cpu_memory, for the accelerator's memory (CUDA, HIP, PrivateUse1).
  int64_t device_memory = 0, self_device_memory = 0;
  /// cpu_total_us per call (0 for no call): torch's "CPU time avg".
  double cpu_time_avg_us() const { return calls == 0 ? 0.0 : cpu_total_us / static_cast<double>(calls); }
  /// device_total_us per call (0 for no call): torch's "CUDA time avg".
  double device_time_avg_us() const { return calls == 0 ? 0.0 : device_total_us / static_cast<double>(calls); }
};

/// How KeyAverages::table spells bytes in the memory columns, which torch changed after 2.6.
enum class MemoryUnits {
  kTorch26,   ///< "240 b", "9.00 Kb", "1.50 Mb", "2.00 Gb": torch 2.6's text (the default)
  kTorch211,  ///< "240 B", "9.00 KB", "1.50 MB", "2.00 GB": torch 2.11's text
};

/// Options of KeyAverages::table.
class TableOptions {
 public:
  /// The memory columns' units. Default: MemoryUnits::kTorch26.
  TableOptions& memory_units(MemoryUnits units) {
    memory_units_ = units;
    return *this;
  }
  MemoryUnits memory_units() const { return memory_units_; }

 private:
  MemoryUnits memory_units_ = MemoryUnits::kTorch26;
};

}  // namespace optrace
