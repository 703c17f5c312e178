// optrace/detail/profiler/timed_events.hpp: a recorded window as key_averages' timed events and memory records
#pragma once
// ProfilerTrace::key_averages in memory, told as the trace the window is written as
// (kineto_writer.hpp) tells it, so that the rows of prof.key_averages() and those of
// KeyAverages::from_kineto_file of the saved trace agree: each range with its External id as
// correlation id; with the CUDA activity, each runtime call on its thread with its CUPTI
// correlation id, linked to the range it belongs to, and each kernel, copy and set on the device,
// linked to its call's range (DeviceJoin, device_trace.hpp: the one join both use).

#include <optrace/detail/profiler/device_trace.hpp>
#include <optrace/detail/profiler/event_inputs.hpp>
#include <optrace/detail/profiler/trace_info.hpp>
#include <optrace/detail/profiler/window.hpp>
#include <optrace/key_averages.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace optrace::detail::profiler {

struct WindowEvents {
  std::vector<TimedEvent> events;
  std::vector<MemoryRecord> memory;
};

// The window's events, times in microseconds since the trace's baseTimeNanoseconds; input shapes
// only for GroupBy::InputShape (torch's text; decoding them costs, and grouping by name needs none).
inline WindowEvents timed_events(const Window& window, const TraceInfo& info, GroupBy group_by) {
  const bool with_shapes = group_by == GroupBy::InputShape;
  WindowEvents out;
  auto us = [&info](int64_t ns) { return static_cast<double>(info.since_base(ns)) / 1000.0; };
  const DeviceJoin join = join_device_events(window);
  for (size_t bi = 0; bi < window.buffers.size(); ++bi) {
    const ThreadBuffer& b = *window.buffers[bi];
    for (size_t k = 0; k < b.events.size(); ++k) {
      const Event& e = b.events[k];
      if (e.end_ns < 0) continue;
      TimedEvent t;
      t.name = event_name(b, e);
      t.tid = b.os_tid;
      t.start_us = us(e.start_ns);
      t.dur_us = static_cast<double>(e.end_ns - e.start_ns) / 1000.0;
      t.user_annotation = e.kind == EventKind::kUserAnnotation;
      t.correlation_id = join.external_id[bi][k];
      if (with_shapes && e.num_args > 0) t.input_shapes = optrace::input_shapes_text(decode_inputs(b, e).input_shapes);
      out.events.push_back(std::move(t));
    }
    for (const auto& m : b.memory) out.memory.push_back(MemoryRecord{b.os_tid, us(m.ts_ns), m.bytes, m.device_type});
  }
  for (size_t i = 0; i < window.device_events.size(); ++i) {
    const DeviceEvent& d = window.device_events[i];
    const DeviceJoin::Link& link = join.links[i];
    TimedEvent t;
    t.name = d.name;
    t.on_device = !on_host(d.kind);
    t.tid = t.on_device ? d.stream : link.tid;
    t.start_us = us(d.start_ns);
    t.dur_us = static_cast<double>(d.dur_ns) / 1000.0;
    t.correlation_id = t.on_device ? 0 : static_cast<int64_t>(d.correlation);
    t.linked_correlation_id = link.external;
    out.events.push_back(std::move(t));
  }
  return out;
}

}  // namespace optrace::detail::profiler
