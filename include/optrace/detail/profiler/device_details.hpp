// optrace/detail/profiler/device_details.hpp: what CUPTI adds to the device events, read from libtorch's own saved trace
#pragma once
// libtorch's KinetoEvent (device_trace.hpp) gives a kernel's name, device, stream, times and
// correlation, but not what torch.profiler's trace adds from CUPTI's records: a kernel's launch
// configuration ("grid", "block", "registers per thread", "shared memory", "blocks per SM",
// "warps per SM", occupancy), a copy's or set's "bytes" and "memory bandwidth (GB/s)", a runtime
// call's "cbid", and the trace's "deviceProperties" and CUDA versions. libkineto writes those
// only into the trace it saves (ProfilerResult::save), so the Profiler has libtorch save its CUDA
// activity's trace to a temporary file, and this reads them back: each device event's other
// arguments, matched by the correlation id (several of a CUDA graph's kernels share one: they are
// taken in start order) and the name. The reading is tested on torch.profiler's own GPU traces.

#include <optrace/detail/common/gzip.hpp>
#include <optrace/detail/common/ondemand.hpp>
#include <optrace/detail/kineto/events.hpp>
#include <optrace/detail/profiler/device_event.hpp>
#include <optrace/json/writer.hpp>

#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optrace::detail::profiler {

struct DeviceDetails {
  struct Args {
    std::string name;
    int64_t ts_ns = 0;
    std::string members;  // the arguments' JSON members, e.g. "\"cbid\": 211"
  };
  // By correlation id, each list in start order: the runtime and driver calls, and the kernels,
  // copies and sets.
  std::unordered_map<uint64_t, std::vector<Args>> host, device;
  // The trace's top-level "deviceProperties" and CUDA (or ROCm) versions: key, JSON value.
  std::vector<std::pair<std::string, std::string>> metadata;
};

// The arguments the Profiler writes itself (kineto_writer.hpp): not taken from the saved trace.
inline bool written_by_profiler(std::string_view key) {
  return key == "External id" || key == "device" || key == "stream" || key == "correlation";
}

// The top-level keys taken: the devices' properties and the versions of what recorded them.
inline bool device_metadata_key(std::string_view key) {
  auto starts = [key](std::string_view p) { return key.substr(0, p.size()) == p; };
  return key == "deviceProperties" || starts("cuda") || starts("cupti") || starts("hip") || starts("roc");
}

// Reads a saved Kineto trace's device events (`capacity` readable: simdjson's padding). Throws
// JsonError.
inline DeviceDetails read_device_details(const char* data, size_t size, size_t capacity) {
  namespace od = simdjson::ondemand;
  DeviceDetails out;
  od::parser parser;
  auto read_events = [&](od::array& events, const std::string& base) {
    uint32_t index = 0;
    for (auto element : events) {
      std::string path;  // made only for an error, as the key averages' reader does
      auto event_path = [&]() -> const std::string& {
        if (path.empty()) path = kineto::event_path_of(base, index);
        return path;
      };
      ++index;
      od::object obj;
      if (auto e = element.get_object().get(obj)) kineto::malformed(event_path(), e);
      std::string_view name, ts;
      bool has_cat = false;
      DeviceKind kind = DeviceKind::kKernel;
      DeviceDetails::Args args;
      int64_t correlation = -1;
      for (auto member : obj) {
        if (auto e = member.error()) kineto::malformed(event_path(), e);
        od::field& f = member.value_unsafe();
        const char* k = f.key().raw();
        if (ondemand::key_is(k, "cat")) {
          std::string_view cat;
          if (!ondemand::read_string(f.value(), cat)) kineto::expected(f.value(), event_path() + "/cat", "expected a string");
          if (!device_kind_of_category(cat, kind)) break;  // a CPU op, an annotation, a flow: the rest unread
          has_cat = true;
        } else if (ondemand::key_is(k, "name")) {
          if (!ondemand::read_string(f.value(), name)) kineto::expected(f.value(), event_path() + "/name", "expected a string");
        } else if (ondemand::key_is(k, "ts")) {
          ts = ondemand::raw_token(f.value());
        } else if (ondemand::key_is(k, "args")) {
          od::object a;
          if (f.value().get_object().get(a)) continue;  // not an event of a device: no arguments to take
          for (auto arg : a) {
            if (auto e = arg.error()) kineto::malformed(event_path() + "/args", e);
            od::field& g = arg.value_unsafe();
            std::string_view key, value;
            if (auto e = g.unescaped_key().get(key)) kineto::malformed(event_path() + "/args", e);
            if (key == "correlation") {
              if (g.value().get_int64().get(correlation) || correlation < 0)
                kineto::expected(g.value(), event_path() + "/args/correlation", "expected an id (an integer of at least 0)");
              continue;
            }
            if (written_by_profiler(key)) continue;
            const std::string member_key(key);  // `key` lives in the parser's buffer until the next key
            if (auto e = ondemand::raw_json(g.value(), value)) kineto::malformed(event_path() + "/args/" + member_key, e);
            if (!args.members.empty()) args.members += ", ";
            json::Writer::append_string(args.members, member_key);
            args.members += ": ";
            args.members += value;
          }
        }
      }
      if (!has_cat || correlation < 0) continue;
      if (!kineto::parse_time_ns(ts, args.ts_ns)) optrace::detail::raise_json(event_path() + "/ts", "expected a time in microseconds");
      args.name = std::string(name);
      (on_host(kind) ? out.host : out.device)[static_cast<uint64_t>(correlation)].push_back(std::move(args));
    }
  };
  auto on_field = [&](std::string_view key, od::value& v) {
    if (!device_metadata_key(key)) return;
    const std::string k(key);
    std::string_view value;
    if (auto e = ondemand::raw_json(v, value)) kineto::malformed("/" + k, e);
    out.metadata.emplace_back(k, std::string(value));
  };
  kineto::walk_events(parser, data, size, capacity, read_events, on_field);
  for (auto* table : {&out.host, &out.device})
    for (auto& [correlation, list] : *table)
      std::stable_sort(list.begin(), list.end(),
                       [](const DeviceDetails::Args& a, const DeviceDetails::Args& b) { return a.ts_ns < b.ts_ns; });
  return out;
}

// read_device_details of the file at `path` (gzip or plain). Throws IoError, JsonError.
inline DeviceDetails read_device_details_file(const std::string& path) {
  const std::string text = read_file_maybe_gzip(path, simdjson::SIMDJSON_PADDING);
  return read_device_details(text.data(), text.size(), text.capacity());
}

// Gives each of `events` (in start order) its arguments from `details`: the next event of the
// saved trace with its correlation id, on the same side (host or device), and its name. Returns
// how many were given theirs.
inline size_t attach_device_details(std::vector<DeviceEvent>& events, DeviceDetails& details) {
  std::unordered_map<uint64_t, size_t> next_host, next_device;
  size_t attached = 0;
  for (DeviceEvent& d : events) {
    const bool host = on_host(d.kind);
    auto& table = host ? details.host : details.device;
    auto it = table.find(d.correlation);
    if (it == table.end()) continue;
    size_t& k = (host ? next_host : next_device)[d.correlation];
    while (k < it->second.size() && it->second[k].name != d.name) ++k;
    if (k == it->second.size()) continue;
    d.args = std::move(it->second[k++].members);
    ++attached;
  }
  return attached;
}

}  // namespace optrace::detail::profiler
