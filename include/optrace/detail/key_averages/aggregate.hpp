// optrace/detail/key_averages/aggregate.hpp: timed events added up into rows, as torch's key_averages does
#pragma once
// torch 2.6 and 2.11 (torch/autograd/profiler.py `_parse_kineto_results`, profiler_util.py
// `EventList`, `FunctionEvent`), step by step, so that the rows are torch's for the same events:
// 1. Events: all but a few utility names (`_filter_name`), whose time stays their parent's own;
//    every `ProfilerStep#N` is named `ProfilerStep*` (`_rewrite_name`, with_wildcard).
// 2. Device events to the ops that launched them: an event linked to none (linked correlation id
//    0) on the CPU takes every device event (kernel, copy, memset) linked to its correlation id
//    as a "kernel" of its own, and gives its thread to every CPU event (runtime call) linked
//    there. torch matches the ids without asking what they are: an unlinked runtime call's CUPTI
//    correlation id that equals an op's External id takes that op's kernels too.
// 3. Memory: an event's memory is every memory record whose time lies in [start, end], on any
//    thread, counted when it is on the CPU (`MemRecordsAcc.in_interval`), as CPU or as device
//    memory by its device type; device events get none. A record in no CPU event becomes an
//    event of its own, named "[memory]", of no duration (a row of torch's table).
//    torch takes [start, end] as float microseconds of its clock (nanoseconds since the epoch)
//    times 1000, which today are multiples of 256 ns: a free 100 ns before an op's end can fall
//    out of it. The bounds are worked out the same way (torch_bound_ns), given where the events'
//    time 0 is on that clock.
// 4. The list: by start, the longer first among events that start together (a stable sort).
// 5. Nesting, per thread, of the CPU events (`_populate_cpu_children`): in list order, an event
//    is a child of the innermost open event that contains it; one that overlaps its parent's end
//    closes it first. Device events nest in nothing.
// 6. A call nested alone in a call of the same name is merged into it (`_remove_dup_nodes`, until
//    nothing changes): its children become the outer call's, and so do its kernels (in place of
//    the outer call's own), and it is no call of its own, so a recursion counts once. A same-name
//    child beside others stays a call.
// 7. Self time and memory: the event's minus its children's (`self_cpu_time_total`). Device time
//    (`device_time_total`): a device event's duration; a CPU event's kernels and its children's
//    device time; its self device time, that less its children's.
// 8. Rows by (name, CPU or device, user annotation, input shapes when grouped), in the order
//    their first event has in the list (`key_averages`' dict).
// Times are integer nanoseconds (the profiler's clock) for nesting and memory, and torch's floats
// (nanoseconds / 1000, from the same origin) for the times of the rows, added in torch's order.

#include <optrace/error.hpp>
#include <optrace/key_averages_types.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optrace::detail::key_averages {

// profiler_util._filter_name: the events torch leaves out before anything else.
inline bool filtered_out(std::string_view name) {
  for (std::string_view utility : {"[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                                   "profiler::_record_function_enter_new", "profiler::_record_function_exit",
                                   "aten::is_leaf", "aten::output_nr", "aten::_version"})
    if (name == utility) return true;
  return false;
}

// The name of an event's row (profiler_util._rewrite_name with a wildcard).
inline std::string row_name(std::string name) {
  if (name.rfind("ProfilerStep#", 0) == 0) return "ProfilerStep*";
  return name;
}

// Memory torch counts as CPU memory: CPU, MKLDNN and IDEEP (profiler.py `_cpu_memory_usage`).
inline bool cpu_memory(int device_type) { return device_type == 0 || device_type == 2 || device_type == 5; }
// And as device memory: CUDA, HIP and PrivateUse1 (`_device_memory_usage`).
inline bool device_memory(int device_type) { return device_type == 1 || device_type == 6 || device_type == 20; }

// Microseconds as integer nanoseconds; false for a time that is no finite number within int64
// nanoseconds.
inline bool to_ns(double us, int64_t& out) {
  if (!(std::fabs(us) < 9.2e15)) return false;
  out = static_cast<int64_t>(std::llround(us * 1000.0));
  return true;
}

// (ns / 1000) * 1000 as Python works it out for MemRecordsAcc.in_interval: the quotient of the
// integers correctly rounded to a double (q + r / 1000 is: q is exact, r / 1000 rounds too little
// to cross a midpoint), then the product rounded.
inline double torch_bound_ns(int64_t ns) {
  const int64_t q = ns / 1000, r = ns % 1000;
  return (static_cast<double>(q) + static_cast<double>(r) / 1000.0) * 1000.0;
}
// a >= b and a <= b, exactly, for an integer and a double (as Python compares them).
inline bool at_least(int64_t a, double b) {
  if (!(b > -9.2e18)) return true;
  if (!(b < 9.2e18)) return false;
  return a >= static_cast<int64_t>(std::ceil(b));
}
inline bool at_most(int64_t a, double b) {
  if (!(b < 9.2e18)) return true;
  if (!(b > -9.2e18)) return false;
  return a <= static_cast<int64_t>(std::floor(b));
}

// torch's FunctionEvent: one event, with what the steps below give it.
struct FunctionEvent {
  std::string name, shapes;
  int64_t tid = 0, start = 0, end = 0, memory = 0, device_memory = 0;
  int64_t id = 0, linked = 0;  // correlation ids
  bool user_annotation = false, on_device = false;
  int64_t parent = -1;
  std::vector<int64_t> children;
  std::vector<double> kernels;  // the durations of the device events it launched (step 2)
  double device_total = 0;
};

// torch's float microseconds of an event's duration.
inline double elapsed_us(const FunctionEvent& e) {
  return static_cast<double>(e.end) / 1000.0 - static_cast<double>(e.start) / 1000.0;
}

// 1. The events torch keeps (`_filter_name`), checked and named as their rows (`_rewrite_name`).
inline std::vector<FunctionEvent> function_events(std::vector<TimedEvent>& events) {
  std::vector<FunctionEvent> nodes;
  nodes.reserve(events.size());
  for (size_t k = 0; k < events.size(); ++k) {
    TimedEvent& e = events[k];
    if (filtered_out(e.name)) continue;
    auto what = [&] { return "event " + std::to_string(k) + " (" + e.name + ")"; };
    FunctionEvent n;
    int64_t dur = 0;
    if (!to_ns(e.start_us, n.start)) raise<ArgumentError>(what(), ": start_us must be a finite number of microseconds, got ", e.start_us);
    if (!to_ns(e.dur_us, dur) || dur < 0)
      raise<ArgumentError>(what(), ": dur_us must be a finite number of microseconds of at least 0, got ", e.dur_us);
    if (__builtin_add_overflow(n.start, dur, &n.end)) raise<ArgumentError>(what(), ": start_us + dur_us is beyond int64 nanoseconds");
    if (e.correlation_id < 0 || e.linked_correlation_id < 0)
      raise<ArgumentError>(what(), ": correlation ids must be >= 0 (0: none), got correlation_id ", e.correlation_id,
                           " and linked_correlation_id ", e.linked_correlation_id);
    n.name = row_name(std::move(e.name));
    n.shapes = std::move(e.input_shapes);
    n.tid = e.tid;
    n.user_annotation = e.user_annotation;
    n.on_device = e.on_device;
    n.id = e.correlation_id;
    n.linked = e.linked_correlation_id;
    nodes.push_back(std::move(n));
  }
  return nodes;
}

// 2. Device events to the CPU events linked to none whose id they are linked to, in the events'
// order (a later one's thread wins, as in torch's loop over `device_corr_map`).
inline void associate_device_events(std::vector<FunctionEvent>& nodes) {
  std::unordered_map<int64_t, std::vector<size_t>> linked_to;
  for (size_t k = 0; k < nodes.size(); ++k)
    if (nodes[k].linked > 0) linked_to[nodes[k].linked].push_back(k);
  if (linked_to.empty()) return;
  for (FunctionEvent& fe : nodes) {
    if (fe.on_device || fe.linked != 0) continue;
    auto it = linked_to.find(fe.id);
    if (it == linked_to.end()) continue;
    for (size_t k : it->second) {
      FunctionEvent& f = nodes[k];
      if (f.on_device) fe.kernels.push_back(elapsed_us(f));
      else f.tid = fe.tid;
    }
  }
}

// 3. Memory (`MemRecordsAcc.in_interval`): the records by time, their CPU and device bytes summed,
// and a count of the CPU events over each (a difference array: a record no event covers becomes
// a "[memory]" event, torch's top-level memory events).
inline void add_memory_records(std::vector<FunctionEvent>& nodes, const std::vector<MemoryRecord>& memory, int64_t time_zero_ns) {
  std::vector<size_t> by_time(memory.size());
  std::vector<int64_t> times(memory.size());
  for (size_t k = 0; k < memory.size(); ++k) {
    by_time[k] = k;
    if (!to_ns(memory[k].ts_us, times[k]))
      raise<ArgumentError>("memory record ", k, ": ts_us must be a finite number of microseconds, got ", memory[k].ts_us);
  }
  std::stable_sort(by_time.begin(), by_time.end(), [&](size_t a, size_t b) { return times[a] < times[b]; });
  std::vector<int64_t> sorted_times(memory.size()), cpu_bytes_before(memory.size() + 1, 0),
      device_bytes_before(memory.size() + 1, 0), covering(memory.size() + 1, 0);
  for (size_t i = 0; i < by_time.size(); ++i) {
    const MemoryRecord& r = memory[by_time[i]];
    sorted_times[i] = times[by_time[i]];
    cpu_bytes_before[i + 1] = cpu_bytes_before[i] + (cpu_memory(r.device_type) ? r.bytes : 0);
    device_bytes_before[i + 1] = device_bytes_before[i] + (device_memory(r.device_type) ? r.bytes : 0);
  }
  if (memory.empty()) return;
  auto on_clock = [time_zero_ns](int64_t ns) {
    int64_t out = 0;
    if (__builtin_add_overflow(ns, time_zero_ns, &out)) raise<ArgumentError>("time_zero_ns + the times is beyond int64 nanoseconds");
    return out;
  };
  for (int64_t& t : sorted_times) t = on_clock(t);
  for (FunctionEvent& n : nodes) {
    if (n.on_device) continue;
    const double from = torch_bound_ns(on_clock(n.start)), to = torch_bound_ns(on_clock(n.end));
    const size_t lo = static_cast<size_t>(std::partition_point(sorted_times.begin(), sorted_times.end(),
                                                               [from](int64_t t) { return !at_least(t, from); }) - sorted_times.begin());
    const size_t hi = std::max(lo, static_cast<size_t>(std::partition_point(sorted_times.begin(), sorted_times.end(),
                                                                            [to](int64_t t) { return at_most(t, to); }) - sorted_times.begin()));
    n.memory = cpu_bytes_before[hi] - cpu_bytes_before[lo];
    n.device_memory = device_bytes_before[hi] - device_bytes_before[lo];
    ++covering[lo];
    --covering[hi];
  }
  std::vector<bool> covered(memory.size());
  int64_t open = 0;
  for (size_t i = 0; i < by_time.size(); ++i) covered[by_time[i]] = (open += covering[i]) > 0;
  for (size_t k = 0; k < memory.size(); ++k) {  // in the records' order, after the events
    if (covered[k]) continue;
    FunctionEvent n;
    n.name = "[memory]";
    n.tid = memory[k].tid;
    n.start = n.end = times[k];
    n.memory = cpu_memory(memory[k].device_type) ? memory[k].bytes : 0;
    n.device_memory = device_memory(memory[k].device_type) ? memory[k].bytes : 0;
    nodes.push_back(std::move(n));
  }
}

// torch's EventList: the events, and `list`, their indices in the list's order.
struct EventList {
  std::vector<FunctionEvent> events;
  std::vector<int64_t> list;

  FunctionEvent& at(int64_t k) { return events[static_cast<size_t>(k)]; }

  // 4. The list (`_parse_kineto_results`' sort): by start, the longer first, stably.
  void sort_by_start() {
    list.resize(events.size());
    for (size_t k = 0; k < list.size(); ++k) list[k] = static_cast<int64_t>(k);
    std::stable_sort(list.begin(), list.end(), [&](int64_t a, int64_t b) {
      const FunctionEvent& x = at(a);
      const FunctionEvent& y = at(b);
      return x.start != y.start ? x.start < y.start : x.end > y.end;
    });
  }

  // 5. Nesting (`_populate_cpu_children`): each thread's CPU events in list order, with a stack
  // of the open ones.
  void populate_cpu_children() {
    std::vector<int64_t> by_thread;
    by_thread.reserve(list.size());
    for (int64_t k : list)
      if (!at(k).on_device) by_thread.push_back(k);
    std::stable_sort(by_thread.begin(), by_thread.end(), [&](int64_t a, int64_t b) { return at(a).tid < at(b).tid; });
    std::vector<int64_t> open;
    for (size_t i = 0; i < by_thread.size(); ++i) {
      FunctionEvent& e = at(by_thread[i]);
      if (i > 0 && at(by_thread[i - 1]).tid != e.tid) open.clear();
      while (!open.empty()) {
        FunctionEvent& parent = at(open.back());
        if (e.start >= parent.end || e.end > parent.end) {
          open.pop_back();
          continue;
        }
        parent.children.push_back(by_thread[i]);
        e.parent = open.back();
        break;
      }
      open.push_back(by_thread[i]);
    }
  }

  // 6. Calls nested alone in a call of the same name, merged into it (`_remove_dup_nodes`: its
  // passes, in list order, until one merges nothing).
  void remove_dup_nodes() {
    for (;;) {
      std::vector<bool> merged(events.size(), false);
      bool any = false;
      for (int64_t k : list) {
        FunctionEvent& e = at(k);
        if (e.parent < 0) continue;
        FunctionEvent& parent = at(e.parent);
        if (parent.name != e.name || parent.children.size() != 1) continue;
        parent.children = e.children;
        parent.kernels = e.kernels;
        for (int64_t child : e.children) at(child).parent = e.parent;
        merged[static_cast<size_t>(k)] = any = true;
      }
      if (!any) return;
      list.erase(std::remove_if(list.begin(), list.end(), [&](int64_t k) { return merged[static_cast<size_t>(k)]; }), list.end());
    }
  }

  double children_device_us(const FunctionEvent& e) {
    double sum = 0;
    for (int64_t child : e.children) sum += at(child).device_total;
    return sum;
  }

  // 7. `device_time_total`, children first (a child comes after its parent in the list): torch's
  // recursive sums, in its order.
  void sum_device_time() {
    for (auto it = list.rbegin(); it != list.rend(); ++it) {
      FunctionEvent& e = at(*it);
      if (e.on_device) {
        e.device_total = elapsed_us(e);
        continue;
      }
      double launched = 0;
      for (double d : e.kernels) launched += d;
      e.device_total = launched + children_device_us(e);
    }
  }

  // 7 and 8. Self time and memory; rows in order of first appearance (`key_averages`' dict, each
  // event added as `FunctionEventAvg.add` does). The times are torch's floats, added in torch's
  // order (the same last bits, so the same table).
  std::vector<KeyAverage> key_averages(GroupBy group_by) {
    const bool by_input_shape = group_by == GroupBy::InputShape;
    std::vector<KeyAverage> rows;
    std::unordered_map<std::string, size_t> row_of;
    std::string key;
    for (int64_t k : list) {
      FunctionEvent& e = at(k);
      if (by_input_shape && e.shapes.empty()) e.shapes = "[]";  // what torch prints for no recorded shapes
      key.assign(e.name).append(1, '\0').append(e.user_annotation ? "1" : "0").append(e.on_device ? "d" : "c");
      if (by_input_shape) key.append(1, '\0').append(e.shapes);
      auto [it, fresh] = row_of.emplace(key, rows.size());
      if (fresh) {
        KeyAverage row;
        row.name = e.name;
        if (by_input_shape) row.input_shapes = e.shapes;
        row.user_annotation = e.user_annotation;
        row.on_device = e.on_device;
        rows.push_back(std::move(row));
      }
      add(rows[it->second], e);
    }
    return rows;
  }

  // `FunctionEventAvg.add`: one event's calls, times and memory added to its row.
  void add(KeyAverage& row, const FunctionEvent& e) {
    row.calls += 1;
    row.device_total_us += e.device_total;
    if (e.on_device) {  // no CPU time, no memory: torch's 0s
      row.self_device_us += e.device_total;
      return;
    }
    double children_us = 0;
    int64_t self_memory = e.memory, self_device_memory = e.device_memory;
    for (int64_t child : e.children) {
      children_us += elapsed_us(at(child));
      self_memory -= at(child).memory;
      self_device_memory -= at(child).device_memory;
    }
    row.cpu_total_us += elapsed_us(e);
    row.self_cpu_us += elapsed_us(e) - children_us;
    row.self_device_us += e.device_total - children_device_us(e);
    row.cpu_memory += e.memory;
    row.self_cpu_memory += self_memory;
    row.device_memory += e.device_memory;
    row.self_device_memory += self_device_memory;
  }
};

// The steps above, in the header's order: `_parse_kineto_results` (1 to 4), EventList's
// `_build_tree` (5, 6), then its `key_averages` (7, 8).
inline std::vector<KeyAverage> aggregate(std::vector<TimedEvent> events, const std::vector<MemoryRecord>& memory, GroupBy group_by,
                                         int64_t time_zero_ns) {
  EventList event_list;
  event_list.events = function_events(events);
  associate_device_events(event_list.events);
  add_memory_records(event_list.events, memory, time_zero_ns);
  event_list.sort_by_start();
  event_list.populate_cpu_children();
  event_list.remove_dup_nodes();
  event_list.sum_device_time();
  return event_list.key_averages(group_by);
}

}  // namespace optrace::detail::key_averages
