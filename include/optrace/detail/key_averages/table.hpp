// optrace/detail/key_averages/table.hpp: key averages as torch prints them (profiler_util._build_table)
#pragma once
// torch's table of `key_averages().table()` (2.6 and 2.11 alike, but for the memory units): the
// same columns, widths, number formats and order, so that a table of a file reads as the one
// torch printed in the run.
// - Columns: Name (as wide as the longest name + 4, at most 55; a name of 52 or more
//   characters cut to 52 and "..."), then 12 wide: Self CPU %, Self CPU, CPU total %, CPU total,
//   CPU time avg, [Self CUDA, Self CUDA %, CUDA total, CUDA time avg when a row has device time],
//   [CPU Mem, Self CPU Mem with profile_memory, then CUDA Mem, Self CUDA Mem when the rows have
//   an accelerator and a row has device memory of its own], # of Calls, then [Input Shapes, as
//   wide as the longest + 4, at most 80, cut to that] when a row has shapes. Every cell
//   right-aligned and followed by two spaces, the last one too; a cell wider than its column
//   ("Self CUDA Mem", 13) is not cut.
// - CPU shares are of the self CPU time of all rows (not only those shown); "NaN" when it is 0.
//   Device shares are of the self device time of the device rows that are no annotations.
// - Rows sorted by the key, largest first, ties in the rows' order (Python's stable sort);
//   row_limit rows (-1: all) after the widths are taken from all rows.
// - The last lines: "Self CPU time total: ...", then "Self CUDA time total: ..." with the device
//   columns.

#include <optrace/detail/common/text_table.hpp>
#include <optrace/error.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/key_averages_types.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace optrace::detail::key_averages {

// _format_time: "468.705us", "1.484ms", "2.000s".
inline std::string format_time(double us) {
  if (us >= 1000.0 * 1000.0) return fixed(us / (1000.0 * 1000.0), 3) + "s";
  if (us >= 1000.0) return fixed(us / 1000.0, 3) + "ms";
  return fixed(us, 3) + "us";
}

// _format_time_share: "31.59%"; "NaN" of a total of 0.
inline std::string format_time_share(double us, double total_us) {
  if (total_us == 0) return "NaN";
  return fixed(us * 100.0 / total_us, 2) + "%";
}

// _format_memory: "6.75 Kb", "-20.72 Kb", "240 b" (binary units); torch 2.11's "6.75 KB", "240 B".
inline std::string format_memory(int64_t bytes, MemoryUnits units = MemoryUnits::kTorch26) {
  const bool upper = units == MemoryUnits::kTorch211;
  const double kb = 1024.0, mb = 1024.0 * kb, gb = 1024.0 * mb;
  const double n = static_cast<double>(bytes);
  if (std::fabs(n) >= gb) return fixed(n / gb, 2) + (upper ? " GB" : " Gb");
  if (std::fabs(n) >= mb) return fixed(n / mb, 2) + (upper ? " MB" : " Mb");
  if (std::fabs(n) >= kb) return fixed(n / kb, 2) + (upper ? " KB" : " Kb");
  return std::to_string(bytes) + (upper ? " B" : " b");
}

// What `table` and `to_json` sort by: torch's attribute names, each the larger first. torch reads
// "cuda", "xpu" and "privateuse1" in a key as "device" (`_build_table`): its older names and its
// newer ones give the same order.
struct SortKey {
  const char* name;
  bool (*before)(const KeyAverage&, const KeyAverage&);
};
inline const std::vector<SortKey>& sort_keys() {
  static const std::vector<SortKey> keys = {
      {"self_cpu_time_total", [](const KeyAverage& a, const KeyAverage& b) { return a.self_cpu_us > b.self_cpu_us; }},
      {"cpu_time_total", [](const KeyAverage& a, const KeyAverage& b) { return a.cpu_total_us > b.cpu_total_us; }},
      {"cpu_time", [](const KeyAverage& a, const KeyAverage& b) { return a.cpu_time_avg_us() > b.cpu_time_avg_us(); }},
      {"count", [](const KeyAverage& a, const KeyAverage& b) { return a.calls > b.calls; }},
      {"cpu_memory_usage", [](const KeyAverage& a, const KeyAverage& b) { return a.cpu_memory > b.cpu_memory; }},
      {"self_cpu_memory_usage", [](const KeyAverage& a, const KeyAverage& b) { return a.self_cpu_memory > b.self_cpu_memory; }},
      {"self_device_time_total", [](const KeyAverage& a, const KeyAverage& b) { return a.self_device_us > b.self_device_us; }},
      {"device_time_total", [](const KeyAverage& a, const KeyAverage& b) { return a.device_total_us > b.device_total_us; }},
      {"device_time", [](const KeyAverage& a, const KeyAverage& b) { return a.device_time_avg_us() > b.device_time_avg_us(); }},
      {"device_memory_usage", [](const KeyAverage& a, const KeyAverage& b) { return a.device_memory > b.device_memory; }},
      {"self_device_memory_usage",
       [](const KeyAverage& a, const KeyAverage& b) { return a.self_device_memory > b.self_device_memory; }},
  };
  return keys;
}

// A sort key as torch reads it: "cuda", "xpu" and "privateuse1" are "device".
inline std::string torch_sort_key(std::string key) {
  for (std::string_view device : {"privateuse1", "cuda", "xpu"})
    for (size_t at = key.find(device); at != std::string::npos; at = key.find(device, at + 6))
      key.replace(at, device.size(), "device");
  return key;
}

// The rows in `sort_by`'s order ("": their own). Throws ArgumentError for another key.
inline std::vector<const KeyAverage*> sorted(const std::vector<KeyAverage>& rows, const std::string& sort_by) {
  const SortKey* key = nullptr;
  const std::string wanted = torch_sort_key(sort_by);
  for (const SortKey& k : sort_keys())
    if (wanted == k.name) key = &k;
  if (key == nullptr && !sort_by.empty()) {
    std::string names;
    for (const SortKey& k : sort_keys()) {
      std::string name = k.name;
      const size_t device = name.find("device");
      if (device != std::string::npos) name = name.replace(device, 6, "cuda") + " (" + k.name + ")";
      names += (names.empty() ? "" : ", ") + name;
    }
    raise<ArgumentError>("unknown sort_by '", sort_by, "': expected one of ", names,
                         " (torch's names), or \"\" for the rows' own order");
  }
  std::vector<const KeyAverage*> out;
  out.reserve(rows.size());
  for (const KeyAverage& r : rows) out.push_back(&r);
  if (key != nullptr)
    std::stable_sort(out.begin(), out.end(), [key](const KeyAverage* a, const KeyAverage* b) { return key->before(*a, *b); });
  return out;
}

inline const KeyAverage& row_of(const KeyAverage& r) { return r; }
inline const KeyAverage& row_of(const KeyAverage* r) { return *r; }

// Python's len() and slicing of str, which count code points: UTF-8 bytes that start one.
inline size_t code_points(std::string_view s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}
inline std::string first_code_points(std::string_view s, size_t n) {
  size_t end = 0;
  for (size_t seen = 0; end < s.size(); ++end) {
    if ((static_cast<unsigned char>(s[end]) & 0xC0) != 0x80 && seen++ == n) break;
  }
  return std::string(s.substr(0, end));
}

// The rows' self CPU times added up in their order, as torch adds them (its footer adds them in the
// table's order: the last bits may differ).
template <class Rows>
double self_total_us(const Rows& rows) {
  double total = 0;
  for (const auto& r : rows) total += row_of(r).self_cpu_us;
  return total;
}

// The self device time of the device rows that are no annotations, added up as self_total_us:
// torch's "Self CUDA time total", what the device shares are of.
template <class Rows>
double self_device_total_us(const Rows& rows) {
  double total = 0;
  for (const auto& r : rows)
    if (row_of(r).on_device && !row_of(r).user_annotation) total += row_of(r).self_device_us;
  return total;
}

// Whether a row's input shapes make torch show the column: a non-empty list.
inline bool has_shapes(const KeyAverage& r) { return !r.input_shapes.empty() && r.input_shapes != "[]"; }

// Whether torch shows the device time columns: a row has device time of its own.
inline bool has_device_time(const std::vector<KeyAverage>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const KeyAverage& r) { return r.self_device_us > 0; });
}
// And the device memory columns (with the memory ones, where the rows have an accelerator).
inline bool has_device_memory(const std::vector<KeyAverage>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const KeyAverage& r) { return r.self_device_memory > 0; });
}

// `memory`: the memory columns (torch's profile_memory); `device`: the rows have an accelerator
// (torch's use_device).
inline std::string table(const std::vector<KeyAverage>& rows, bool memory, bool device, const std::string& sort_by,
                         int64_t row_limit, const TableOptions& options = {}) {
  const std::vector<const KeyAverage*> order = sorted(rows, sort_by);
  if (rows.empty()) return "";
  const double total_us = self_total_us(order), device_total_us = self_device_total_us(order);
  const bool device_time = device && has_device_time(rows), device_memory = memory && device && has_device_memory(rows);
  constexpr size_t kMaxName = 55, kMaxShapes = 80, kWidth = 12;
  size_t name_width = 0, shapes_width = 0;
  bool shapes = false;
  for (const KeyAverage& r : rows) {
    name_width = std::max(name_width, code_points(r.name));
    shapes_width = std::max(shapes_width, code_points(r.input_shapes));
    shapes = shapes || has_shapes(r);
  }
  name_width = std::min(name_width + 4, kMaxName);
  shapes_width = std::min(shapes_width + 4, kMaxShapes);

  std::vector<std::string> head = {"Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"};
  if (device_time) head.insert(head.end(), {"Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"});
  if (memory) head.insert(head.end(), {"CPU Mem", "Self CPU Mem"});
  if (device_memory) head.insert(head.end(), {"CUDA Mem", "Self CUDA Mem"});
  head.push_back("# of Calls");
  if (shapes) head.push_back("Input Shapes");
  std::vector<size_t> widths(head.size(), kWidth);
  widths.front() = name_width;
  if (shapes) widths.back() = shapes_width;

  std::string out, separator;
  for (size_t w : widths) separator.append(w, '-').append("  ");
  separator += '\n';
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      const size_t n = code_points(cells[i]);
      if (n < widths[i]) out.append(widths[i] - n, ' ');
      out.append(cells[i]).append("  ");
    }
    out += '\n';
  };
  out += separator;
  line(head);
  out += separator;
  int64_t shown = 0;
  for (const KeyAverage* r : order) {
    if (shown == row_limit) break;
    ++shown;
    std::vector<std::string> cells;
    cells.reserve(head.size());
    cells.push_back(code_points(r->name) >= kMaxName - 3 ? first_code_points(r->name, kMaxName - 3) + "..." : r->name);
    cells.push_back(format_time_share(r->self_cpu_us, total_us));
    cells.push_back(format_time(r->self_cpu_us));
    cells.push_back(format_time_share(r->cpu_total_us, total_us));
    cells.push_back(format_time(r->cpu_total_us));
    cells.push_back(format_time(r->cpu_time_avg_us()));
    if (device_time) {
      cells.push_back(format_time(r->self_device_us));
      cells.push_back(format_time_share(r->self_device_us, device_total_us));
      cells.push_back(format_time(r->device_total_us));
      cells.push_back(format_time(r->device_time_avg_us()));
    }
    if (memory) {
      cells.push_back(format_memory(r->cpu_memory, options.memory_units()));
      cells.push_back(format_memory(r->self_cpu_memory, options.memory_units()));
    }
    if (device_memory) {
      cells.push_back(format_memory(r->device_memory, options.memory_units()));
      cells.push_back(format_memory(r->self_device_memory, options.memory_units()));
    }
    cells.push_back(std::to_string(r->calls));
    if (shapes) cells.push_back(first_code_points(r->input_shapes, shapes_width));
    line(cells);
  }
  out += separator;
  out += "Self CPU time total: " + format_time(total_us) + "\n";
  if (device_time) out += "Self CUDA time total: " + format_time(device_total_us) + "\n";
  return out;
}

// The rows `table` shows, as a JSON list of objects (input_shapes only when grouped by
// GroupBy::InputShape; the device fields when the rows have an accelerator).
inline std::string rows_json(const std::vector<KeyAverage>& rows, GroupBy group_by, bool device, const std::string& sort_by,
                             int64_t row_limit, int indent) {
  const std::vector<const KeyAverage*> order = sorted(rows, sort_by);
  const double total_us = self_total_us(rows), device_total_us = self_device_total_us(rows);
  json::Writer w(indent);
  w.begin_array();
  int64_t shown = 0;
  for (const KeyAverage* r : order) {
    if (shown == row_limit) break;
    ++shown;
    w.begin_object();
    w.key("name").value(r->name);
    if (group_by == GroupBy::InputShape) w.key("input_shapes").value(r->input_shapes);
    w.key("user_annotation").value(r->user_annotation);
    w.key("calls").value(r->calls);
    w.key("self_cpu_us").value(r->self_cpu_us);
    w.key("self_cpu_share").value(total_us > 0 ? r->self_cpu_us / total_us : 0.0);
    w.key("cpu_total_us").value(r->cpu_total_us);
    w.key("cpu_time_avg_us").value(r->cpu_time_avg_us());
    w.key("cpu_memory").value(r->cpu_memory);
    w.key("self_cpu_memory").value(r->self_cpu_memory);
    if (device) {
      w.key("on_device").value(r->on_device);
      w.key("self_device_us").value(r->self_device_us);
      w.key("self_device_share").value(device_total_us > 0 ? r->self_device_us / device_total_us : 0.0);
      w.key("device_total_us").value(r->device_total_us);
      w.key("device_time_avg_us").value(r->device_time_avg_us());
      w.key("device_memory").value(r->device_memory);
      w.key("self_device_memory").value(r->self_device_memory);
    }
    w.end_object();
  }
  w.end_array();
  return w.take();
}

}  // namespace optrace::detail::key_averages
