// optrace/detail/kineto/record_function_times.hpp: each op call's recorded time in a Kineto trace, by RecordFunction id (no libtorch)
#pragma once
// An execution trace and the Kineto trace of the same window name each op call by one id: the
// node's "rf_id" attribute and the `cpu_op` event's "Record function id" argument (torch's
// profiler writes both from the call's RecordFunction handle; so does optrace's Profiler). The
// execution trace has no times; replay reads them here.

#include <optrace/detail/common/gzip.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/detail/common/ondemand.hpp>
#include <optrace/detail/kineto/events.hpp>
#include <optrace/error.hpp>

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace optrace::detail::kineto {

// One op call as the Kineto trace recorded it.
struct RecordedCall {
  std::string name;    // "aten::addmm"
  int64_t dur_ns = 0;  // its span, its children's included
};

// The `cpu_op` events of the Kineto trace `data` (`capacity` readable: simdjson's padding) whose
// "Record function id" is one of `wanted`, by that id (a second event with one id is left out:
// the first one counts). Only those are held: a trace of a million events costs what the
// execution trace's calls need. Throws JsonError at the event's path.
inline std::unordered_map<int64_t, RecordedCall> read_record_function_times(const char* data, size_t size, size_t capacity,
                                                                            const std::unordered_set<int64_t>& wanted) {
  std::unordered_map<int64_t, RecordedCall> out;
  struct Event {
    std::string_view cat, name, dur;
    int64_t rf_id = -1;
  };
  od::parser parser;
  auto read_events = [&](od::array& events, const std::string& base) {
    for_each_event<Event>(
        events, base,
        [](Event& e, EventMember& m) {
          if (m.is("cat")) {
            m.string(e.cat, "cat");
            return e.cat == "cpu_op";  // anything else: the rest unread
          }
          if (m.is("name")) {
            m.string(e.name, "name");
          } else if (m.is("dur")) {
            m.number(e.dur, "dur");
          } else if (m.is("args")) {
            od::object args;
            if (m.value().get_object().get(args)) return true;
            for (auto arg : args) {
              if (auto err = arg.error()) malformed(m.event_path()() + "/args", err);
              od::field& f = arg.value_unsafe();
              if (!ondemand::key_is(f.key().raw(), "Record function id")) continue;
              if (f.value().get_int64().get(e.rf_id) || e.rf_id < 0)
                expected(f.value(), m.event_path()() + "/args/Record function id", "expected an id (an integer of at least 0)");
            }
          }
          return true;
        },
        [&](Event& e, const EventPath& path) {
          if (e.cat != "cpu_op" || e.rf_id < 0 || e.dur.data() == nullptr || wanted.count(e.rf_id) == 0) return;
          int64_t dur = 0;
          if (!parse_time_ns(e.dur, dur) || dur < 0) optrace::detail::raise_json(path() + "/dur", "expected a duration in microseconds");
          out.emplace(e.rf_id, RecordedCall{std::string(e.name), dur});
        });
  };
  walk_events(parser, data, size, capacity, read_events);
  return out;
}

// read_record_function_times of the file at `path` (gzip or plain). Throws IoError, JsonError
// (naming the file).
inline std::unordered_map<int64_t, RecordedCall> read_record_function_times_file(const std::string& path,
                                                                                 const std::unordered_set<int64_t>& wanted) {
  return optrace::detail::about_file(path, [&] {
    const std::string text = read_file_maybe_gzip(path, simdjson::SIMDJSON_PADDING);
    return read_record_function_times(text.data(), text.size(), text.capacity(), wanted);
  });
}

}  // namespace optrace::detail::kineto
