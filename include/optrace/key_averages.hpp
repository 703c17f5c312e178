// optrace/key_averages.hpp: torch's key_averages table, of timed events or of any Kineto trace (no libtorch)
#pragma once
// What `prof.key_averages().table()` prints, computed as torch 2.6 and 2.11 compute it
// (torch/autograd/profiler_util.py), with the CUDA columns when the profile had the accelerator:
// the Profiler's own traces and every `*.pt.trace.json` (the ones Python's torch.profiler writes
// too) give the same rows and the same text. No libtorch: the CLI's front end (`optrace summary
// --by time`) includes it. See docs/profiler.md ("Key averages and the summary table").

#include <optrace/detail/common/gzip.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/detail/key_averages/aggregate.hpp>
#include <optrace/detail/key_averages/read.hpp>
#include <optrace/detail/key_averages/table.hpp>
#include <optrace/key_averages_types.hpp>

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace optrace {

/// torch's text of an op's input shapes, as its key_averages groups and prints them: `str()` of
/// a list with each input's sizes, `[]` for an input without (a scalar, None, a tensor list):
/// `{{32, 512}, {512, 256}, nullopt}` gives "[[32, 512], [512, 256], []]". Takes
/// OpInput::input_shapes as it is.
inline std::string input_shapes_text(const std::vector<std::optional<std::vector<int64_t>>>& shapes) {
  return detail::key_averages::input_shapes_text(shapes);
}

/// torch's `key_averages()`: timed events added up per name (and per input shapes with
/// GroupBy::InputShape), with self times (an event's time less the events nested directly in it
/// on its thread), with an accelerator the device time of the kernels each launched (and rows of
/// the device's own events), and with memory records the memory allocated within each. `table()`
/// prints it as torch does.
///
/// Example:
///   auto averages = optrace::KeyAverages::from_kineto_file("run.pt.trace.json.gz", optrace::GroupBy::Name);
///   std::cout << averages.table("self_cpu_time_total", 10);
class KeyAverages {
 public:
  /// Rows of `events`, with `memory` attributed to the events whose [start, end] holds its time.
  /// `group_by`: one row per name (GroupBy::Name, torch's `key_averages()`), or per (name,
  /// TimedEvent::input_shapes) (GroupBy::InputShape, torch's
  /// `key_averages(group_by_input_shape=True)`). Events named as torch's profiler leaves out
  /// (`aten::is_leaf`, `aten::_version`, `profiler::_record_function_*`, ...) are left out too;
  /// a call nested alone in a call of the same name counts once, as torch merges it. Device events
  /// (TimedEvent::on_device) are rows of their own, and count toward the CPU events linked to
  /// none whose correlation_id is their linked_correlation_id (torch's rule, see
  /// docs/profiler.md); a CPU event linked to an op moves to that op's thread.
  /// `time_zero_ns`: where the events' time 0 is on the profiler's clock (nanoseconds since the
  /// epoch: a Kineto trace's "baseTimeNanoseconds" plus its start). torch attributes memory by
  /// that clock's float microseconds, which round an event's bounds to 256 ns today; with it, the
  /// memory columns are torch's to the byte (without, the bounds are exact). Throws ArgumentError
  /// for a time that is not a finite number (or a negative duration), or a negative correlation id.
  static KeyAverages from_events(std::vector<TimedEvent> events, const std::vector<MemoryRecord>& memory,
                                 GroupBy group_by, int64_t time_zero_ns = 0) {
    KeyAverages out;
    for (const TimedEvent& e : events) out.device_ = out.device_ || e.on_device;
    out.rows_ = detail::key_averages::aggregate(std::move(events), memory, group_by, time_zero_ns);
    out.memory_ = !memory.empty();
    out.group_by_ = group_by;
    return out;
  }

  /// Rows of a Kineto trace file (`*.pt.trace.json`, gzip-compressed or not; a gzip one, or a
  /// plain one of 4 MiB or more, read 1 MiB at a time: memory holds the events, not the text): its `cpu_op`,
  /// `user_annotation`, accelerator-runtime and `overhead` events, the device's kernels, copies,
  /// memsets and GPU annotations, and its `[memory]` records; Input Shapes from the events'
  /// "Input Dims"; rows grouped by `group_by` (as from_events). Throws IoError (unreadable) or
  /// JsonError (not a Kineto trace, malformed; at the path of the event), naming the file.
  static KeyAverages from_kineto_file(const std::string& path, GroupBy group_by) {
    return detail::about_file(path, [&] { return read_from(detail::key_averages::read_trace_events(path), group_by); });
  }

  /// from_kineto_file for a trace's text. Throws JsonError.
  static KeyAverages from_kineto_text(std::string_view text, GroupBy group_by) {
    std::string copy;
    copy.reserve(text.size() + simdjson::SIMDJSON_PADDING);
    copy.assign(text.data(), text.size());
    return from_padded(copy, group_by);
  }

  /// Whether the trace's times were measured: false for a trace that says they were not
  /// (`"timesMeasured": false`, what `kineto::save` writes for an op trace: one event per unique
  /// input, 1 us each), whose rows' times and calls mean nothing.
  bool times_measured() const { return times_measured_; }
  /// The rows in torch's order: by the start of each row's first event.
  const std::vector<KeyAverage>& rows() const { return rows_; }
  /// Whether memory records were given (torch's profile_memory): the table shows memory then.
  bool has_memory() const { return memory_; }
  /// Whether an event ran on the accelerator (torch's use_device: the profile had the CUDA
  /// activity): the table shows the CUDA columns then, where a row has device time of its own,
  /// and the CUDA memory columns with memory, where a row has device memory of its own.
  bool has_device() const { return device_; }
  /// The rows' self CPU times added up: what the table's shares are of, and its last line.
  double self_cpu_time_total_us() const { return detail::key_averages::self_total_us(rows_); }
  /// The self device times of the device rows that are no GPU annotations, added up: what the
  /// CUDA shares are of, and the table's "Self CUDA time total".
  double self_device_time_total_us() const { return detail::key_averages::self_device_total_us(rows_); }

  /// torch's `table(sort_by=..., row_limit=...)`, character for character: rows sorted by
  /// `sort_by`, the largest first, ties in the rows' order ("self_cpu_time_total",
  /// "cpu_time_total", "cpu_time" (the average), "count", "cpu_memory_usage",
  /// "self_cpu_memory_usage", "self_cuda_time_total", "cuda_time_total", "cuda_time",
  /// "cuda_memory_usage", "self_cuda_memory_usage", each also with "device" (torch 2.11's names),
  /// "xpu" or "privateuse1" for "cuda", as torch reads them; "" keeps the rows' order), at most
  /// `row_limit` of them (-1: all); "" when there are no rows. `options`: the memory units
  /// (torch 2.6's by default). Throws ArgumentError for another `sort_by`, naming the valid ones.
  std::string table(const std::string& sort_by = "self_cpu_time_total", int row_limit = 100,
                    const TableOptions& options = {}) const {
    return detail::key_averages::table(rows_, memory_, device_, sort_by, row_limit, options);
  }

  /// The rows `table` would show, as a JSON list of objects: name, input_shapes (when grouped by
  /// GroupBy::InputShape), user_annotation, calls, self_cpu_us, self_cpu_share (of the total),
  /// cpu_total_us, cpu_time_avg_us, cpu_memory and self_cpu_memory (bytes); with an accelerator
  /// (has_device) also on_device, self_device_us, self_device_share (of
  /// self_device_time_total_us), device_total_us, device_time_avg_us, device_memory and
  /// self_device_memory. `indent` > 0 pretty-prints (json::Writer). Throws ArgumentError as
  /// `table`.
  std::string to_json(const std::string& sort_by = "self_cpu_time_total", int row_limit = -1, int indent = 0) const {
    return detail::key_averages::rows_json(rows_, group_by_, device_, sort_by, row_limit, indent);
  }

 private:
  // A trace's events, read whole or streamed, with what the trace says of its times.
  static KeyAverages read_from(detail::key_averages::TraceEvents read, GroupBy group_by) {
    KeyAverages out = from_events(std::move(read.events), read.memory, group_by, read.time_zero_ns);
    out.times_measured_ = read.times_measured;
    return out;
  }
  // `text` has simdjson's padding in its capacity.
  static KeyAverages from_padded(std::string& text, GroupBy group_by) {
    if (text.capacity() < text.size() + simdjson::SIMDJSON_PADDING) text.reserve(text.size() + simdjson::SIMDJSON_PADDING);
    detail::key_averages::TraceEvents read = detail::key_averages::Reader().read(text.data(), text.size(), text.capacity());
    return read_from(std::move(read), group_by);
  }

  std::vector<KeyAverage> rows_;
  GroupBy group_by_ = GroupBy::Name;
  bool memory_ = false, device_ = false, times_measured_ = true;
};

}  // namespace optrace
