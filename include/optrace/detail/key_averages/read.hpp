// optrace/detail/key_averages/read.hpp: a Kineto trace's timed events and memory records (no libtorch)
#pragma once
// torch computes key_averages from its in-memory events (profiler.py `_parse_kineto_results`):
// every event of the profiler's result, the "[memory]" records attributed to the events around
// them. What a trace file holds of those:
// - "X" events on the CPU: of category `cpu_op` (ops, and TorchScript's own ranges: "forward",
//   "<forward op>"; `Operator` in older traces), `user_annotation` (record_function,
//   ProfilerStep#N), the accelerator runtime's calls (`cuda_runtime`, `cuda_driver`,
//   `xpu_runtime`, `mtia_runtime`, `privateuse1_runtime`, `privateuse1_driver`; `Runtime` in older
//   traces) and CUPTI's `overhead` ("Activity Buffer Request"): Kineto gives those the CPU as
//   device, so torch's table has rows for them, and they are children of the ops around them;
// - "X" events on the device (torch's CUDA device type): `kernel`, `gpu_memcpy`, `gpu_memset`,
//   `cuda_sync` and `gpu_user_annotation`, rows of their own with device time;
// - their ids: an op's or annotation's "External id" is its correlation id; a runtime call's is
//   its "correlation"; a runtime call's or device event's "External id", when it names an op of
//   the trace, is the op it is linked to (older writers put the correlation there, or 0, when
//   there is none). A GPU annotation is linked to none in torch's memory;
// - "i" events named "[memory]": the memory records ("Bytes", "Device Type").
// Left out: the "Trace" span, python_function events and flows.
// Three things the file writes otherwise than torch holds them in memory, undone here:
// - Kineto widens a GPU annotation by 1 ns before and after (for Chrome's drawing): its span in
//   memory is its kernels', 2 ns shorter;
// - an overhead event (written with thread 0) is on the thread that stopped the profiler, which
//   the file does not name: the process's main thread (tid = pid), where Python's
//   torch.profiler stops, when the trace has one. (torch puts a runtime call linked to no op
//   there too; the file's thread, the one that made the call, is kept for it: see
//   docs/profiler.md. A runtime call linked to an op is on the op's thread: aggregate.hpp.)
// - an overhead event's correlation id is not written: it has none here (see docs/profiler.md).
// Times are read exactly (integer nanoseconds), then made relative to the profiler's start (the
// "Trace" span's ts, torch's trace_start_ns; else the earliest event's): torch's own start_us and
// end_us, to the last bit, so that its floats add up to the same table. The profiler's clock
// itself is "baseTimeNanoseconds" + ts (torch's start_ns()), which memory attribution rounds with
// (aggregate.hpp).

#include <optrace/detail/common/gzip.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/detail/common/kineto_names.hpp>
#include <optrace/detail/common/ondemand.hpp>
#include <optrace/detail/kineto/events.hpp>
#include <optrace/error.hpp>
#include <optrace/key_averages_types.hpp>

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace optrace::detail::key_averages {

namespace od = simdjson::ondemand;

// torch's text of an event's input shapes (str() of KinetoEvent::shapes()): each input's sizes,
// [] for one that has none (a scalar, None, a tensor list).
inline std::string input_shapes_text(const std::vector<std::optional<std::vector<int64_t>>>& shapes) {
  std::string out = "[";
  for (size_t k = 0; k < shapes.size(); ++k) {
    out += k > 0 ? ", [" : "[";
    if (shapes[k])
      for (size_t i = 0; i < shapes[k]->size(); ++i) out += (i > 0 ? ", " : "") + std::to_string((*shapes[k])[i]);
    out += ']';
  }
  return out + "]";
}

// What an "X" event of category `cat` is to torch's key_averages (see above).
enum class Counted { No, Op, Runtime, Overhead, Device, DeviceAnnotation };
inline Counted counted_category(std::string_view cat) {
  using kineto_names::Category;
  static constexpr std::pair<Category, Counted> kCounted[] = {
      {Category::cpu_op, Counted::Op},
      {Category::user_annotation, Counted::Op},
      {Category::operator_legacy, Counted::Op},
      {Category::overhead, Counted::Overhead},
      {Category::kernel, Counted::Device},
      {Category::kernel_legacy, Counted::Device},
      {Category::gpu_memcpy, Counted::Device},
      {Category::gpu_memset, Counted::Device},
      {Category::cuda_sync, Counted::Device},
      {Category::gpu_user_annotation, Counted::DeviceAnnotation},
  };
  if (kineto_names::is_runtime(cat)) return Counted::Runtime;
  for (const auto& [category, counted] : kCounted)
    if (kineto_names::is(cat, category)) return counted;
  return Counted::No;
}

struct TraceEvents {
  std::vector<TimedEvent> events;
  std::vector<MemoryRecord> memory;
  int64_t time_zero_ns = 0;  // the events' time 0 on the profiler's clock (KeyAverages::from_events)
  bool times_measured = true;  // false: the trace says "timesMeasured": false (kineto::save of an op trace)
};

/// Spans of a trace's own clock (its "ts", in nanoseconds), [first, second), disjoint and sorted:
/// a reader given some keeps only the timed events that overlap one (and no memory records).
/// Empty: all.
using Spans = std::vector<std::pair<int64_t, int64_t>>;

/// `spans` ([first, second) each, any order) as Spans: sorted, the overlapping and touching ones
/// merged into their union.
inline Spans union_of(Spans spans) {
  std::sort(spans.begin(), spans.end());
  Spans out;
  for (const auto& s : spans)
    if (!out.empty() && s.first <= out.back().second) out.back().second = std::max(out.back().second, s.second);
    else out.push_back(s);
  return out;
}

class Reader {
 public:
  Reader() = default;
  /// A reader that keeps only what overlaps `keep` (Spans): the rank summary's why reads a trace
  /// for a few windows, in the memory of their events.
  explicit Reader(Spans keep) : keep_(std::move(keep)) {}

  // Reads the trace `data` (`capacity` readable: simdjson's padding). Throws JsonError naming
  // the event.
  TraceEvents read(const char* data, size_t size, size_t capacity) {
    feed(data, size, capacity);
    return finish();
  }

  // Reads one document of the trace's events (a piece of a streamed trace: stream_documents) and
  // returns where its events list ends; finish() then makes the result of all of them.
  const char* feed(const char* data, size_t size, size_t capacity) {
    const char* events_end = nullptr;
    kineto::walk_events(
        parser_, data, size, capacity, [this](od::array& events, const std::string& base) { read_events(events, base); },
        [this](std::string_view key, od::value& v) {
          // Only the memory columns' rounding depends on it: a value of another kind is left
          // alone (the bounds are then exact), not an error.
          int64_t ns;
          bool measured;
          if (key == "baseTimeNanoseconds" && !v.get_int64().get(ns)) base_ns_ = ns;
          if (key == "timesMeasured" && !v.get_bool().get(measured)) times_measured_ = measured;
        },
        &events_end);
    return events_end;
  }

 private:
  enum class Kind { Unknown, Timed, Memory, Span, Other };
  struct Event {
    std::string_view ph, cat, name, pid, tid, ts, dur;
    std::string shapes;
    std::optional<int64_t> bytes, device_type, external_id, correlation;
    bool has_ph = false, has_cat = false, has_name = false, has_args = false, has_dims = false;
    Kind kind() const {
      if (!has_ph) return Kind::Unknown;
      if (ph == "X")
        return !has_cat ? Kind::Unknown
               : counted_category(cat) != Counted::No ? Kind::Timed
               : kineto_names::is(cat, kineto_names::Category::trace_span) ? Kind::Span
                                : Kind::Other;
      if (ph == "i") return !has_name ? Kind::Unknown : name == "[memory]" ? Kind::Memory : Kind::Other;
      return Kind::Other;
    }
  };

  void read_events(od::array& events, const std::string& base) {
    kineto::for_each_event<Event>(
        events, base,
        [this](Event& ev, kineto::EventMember& m) {
          if (m.is("ph")) m.string(ev.ph, "ph"), ev.has_ph = true;
          else if (m.is("cat")) m.string(ev.cat, "cat"), ev.has_cat = true;
          else if (m.is("name")) m.string(ev.name, "name"), ev.has_name = true;
          else if (m.is("tid")) m.token(ev.tid, "tid");
          else if (m.is("pid")) m.token(ev.pid, "pid");
          else if (m.is("ts")) m.number(ev.ts, "ts");
          else if (m.is("dur")) m.number(ev.dur, "dur");
          else if (m.is("args") && (ev.kind() == Kind::Unknown || ev.kind() == Kind::Timed || ev.kind() == Kind::Memory))
            read_args(m.value(), ev, m.event_path());
          return ev.kind() != Kind::Other;  // the rest of a kernel, a flow, metadata: unread
        },
        [this](Event& ev, const kineto::EventPath& path) {
          const Kind kind = ev.kind();
          if (kind == Kind::Timed) add_timed(ev, path);
          else if (kind == Kind::Memory) add_memory(ev, path);
          else if (kind == Kind::Span && !trace_start_ && !ev.ts.empty()) trace_start_ = time_of(ev.ts, "ts", path);
        });
  }

  template <class PathFn>
  void read_args(od::value& v, Event& ev, const PathFn& event_path) {
    od::object args;
    if (ev.has_args) kineto::duplicate_key(event_path() + "/args");
    ev.has_args = true;
    if (v.get_object().get(args)) kineto::expected(v, event_path() + "/args", "expected an object");
    for (auto member : args) {
      if (auto e = member.error()) kineto::malformed(event_path() + "/args", e);
      od::field& f = member.value_unsafe();
      const char* k = f.key().raw();
      if (ondemand::key_is(k, "Input Dims")) {
        if (ev.has_dims) kineto::duplicate_key(event_path() + "/args/Input Dims");
        ev.has_dims = true;
        ev.shapes = read_input_dims(f.value(), [&] { return event_path() + "/args/Input Dims"; });
      } else if (ondemand::key_is(k, "Bytes") || ondemand::key_is(k, "Device Type") || ondemand::key_is(k, "External id") ||
                 ondemand::key_is(k, "correlation")) {
        const char* key = k[0] == 'B' ? "Bytes" : k[0] == 'D' ? "Device Type" : k[0] == 'E' ? "External id" : "correlation";
        const bool id = k[0] == 'E' || k[0] == 'c';
        int64_t n;
        std::optional<int64_t>& into = k[0] == 'B' ? ev.bytes : k[0] == 'D' ? ev.device_type : k[0] == 'E' ? ev.external_id : ev.correlation;
        if (into) kineto::duplicate_key(event_path() + "/args/" + key);
        if (f.value().get_int64().get(n) || (id && n < 0))
          kineto::expected(f.value(), event_path() + "/args/" + key, id ? "expected an id (an integer of at least 0)" : "expected an integer");
        into = n;
      }
    }
  }

  // "Input Dims": per input, a tensor's sizes, a tensor list's sizes (a list of lists), or [].
  template <class PathFn>
  std::string read_input_dims(od::value& v, const PathFn& path) {
    od::array inputs;
    if (v.get_array().get(inputs)) kineto::expected(v, path(), "expected a list of each input's sizes");
    shapes_.clear();
    size_t k = 0;
    for (auto input : inputs) {
      auto input_path = [&] { return path() + "/" + std::to_string(k); };
      od::value x;
      if (auto e = input.get(x)) kineto::malformed(input_path(), e);
      od::array sizes;
      if (x.get_array().get(sizes)) kineto::expected(x, input_path(), "expected a list of sizes");
      std::vector<int64_t> dims;
      bool list = false;
      size_t i = 0;
      for (auto size : sizes) {
        od::value d;
        if (auto e = size.get(d)) kineto::malformed(input_path(), e);
        od::json_type t;
        if (auto e = d.type().get(t)) kineto::malformed(input_path(), e);
        int64_t n = 0;
        if (t == od::json_type::array) list = true;  // a tensor list: torch shows no sizes for it
        else if (d.get_int64().get(n)) kineto::expected(d, input_path() + "/" + std::to_string(i), "expected a size (an integer)");
        dims.push_back(n);
        ++i;
      }
      if (list) shapes_.emplace_back();
      else shapes_.emplace_back(std::move(dims));
      ++k;
    }
    return input_shapes_text(shapes_);
  }

  template <class PathFn>
  int64_t time_of(std::string_view token, const char* key, const PathFn& event_path) {
    if (token.empty()) optrace::detail::raise_json(event_path(), "missing key \"" + std::string(key) + "\"");
    int64_t ns;
    if (!kineto::parse_time_ns(token, ns))
      optrace::detail::raise_json(event_path() + "/" + key, "expected a time in microseconds, got " + json::detail::describe_number(token));
    return ns;
  }

  // A thread's id: the integer "tid" holds, or one of its own for any other token (GPU streams are
  // named, "stream 7"); 0 when absent.
  int64_t thread_of(std::string_view token) {
    int64_t id = 0;
    auto r = std::from_chars(token.data(), token.data() + token.size(), id);
    if (token.empty() || (r.ec == std::errc() && r.ptr == token.data() + token.size())) return id;
    auto it = named_threads_.emplace(std::string(token), std::numeric_limits<int64_t>::min() + static_cast<int64_t>(named_threads_.size())).first;
    return it->second;
  }

  template <class PathFn>
  void add_timed(Event& ev, const PathFn& event_path) {
    if (!ev.has_name) optrace::detail::raise_json(event_path(), "missing key \"name\"");
    const Counted counted = counted_category(ev.cat);
    TimedEvent t;
    t.name = std::string(ev.name);
    t.tid = thread_of(ev.tid);
    t.input_shapes = std::move(ev.shapes);
    t.user_annotation = kineto_names::is(ev.cat, kineto_names::Category::user_annotation) || counted == Counted::DeviceAnnotation;
    t.on_device = counted == Counted::Device || counted == Counted::DeviceAnnotation;
    int64_t ts = time_of(ev.ts, "ts", event_path), dur = time_of(ev.dur, "dur", event_path);
    if (dur < 0) optrace::detail::raise_json(event_path() + "/dur", "expected a duration of at least 0, got " + json::detail::describe_number(ev.dur));
    int64_t end = 0;
    if (__builtin_add_overflow(ts, dur, &end))
      optrace::detail::raise_json(event_path() + "/dur", "ts + dur is beyond int64 nanoseconds (ts " + std::string(ev.ts) + ", dur " + std::string(ev.dur) + ")");
    // The process's main thread is the first op's, kept or not: what the kept events' threads are
    // does not depend on what is kept.
    if (counted == Counted::Op && ev.pid.size() > 0 && !process_) process_ = thread_of(ev.pid);
    if (!keep_.empty() && !overlaps_kept(ts, end)) return;
    if (counted == Counted::DeviceAnnotation && dur >= 2) ts += 1, dur -= 2;  // Kineto's widening, undone
    Ids ids;
    if (counted == Counted::Op) {
      t.correlation_id = ev.external_id.value_or(0);
      if (t.correlation_id > 0) op_ids_.insert(t.correlation_id);
    } else if (counted == Counted::Runtime || counted == Counted::Device) {
      t.correlation_id = counted == Counted::Runtime ? ev.correlation.value_or(0) : 0;
      ids.external = ev.external_id.value_or(0);
    }
    ids.unplaced = counted == Counted::Overhead;
    out_.events.push_back(std::move(t));
    times_.push_back({ts, dur});
    ids_.push_back(ids);
  }

  // Whether [start, end) overlaps a span of keep_ (disjoint and sorted; an instant, end == start,
  // counts inside one): the first span that ends after `start` begins before `end`.
  bool overlaps_kept(int64_t start, int64_t end) const {
    auto it = std::upper_bound(keep_.begin(), keep_.end(), start, [](int64_t t, const std::pair<int64_t, int64_t>& s) { return t < s.second; });
    return it != keep_.end() && (it->first < end || (end == start && it->first <= start));
  }

  template <class PathFn>
  void add_memory(Event& ev, const PathFn& event_path) {
    if (!keep_.empty()) return;
    if (!ev.bytes) optrace::detail::raise_json(event_path() + "/args", "missing key \"Bytes\"");
    MemoryRecord m;
    m.tid = thread_of(ev.tid);
    m.bytes = *ev.bytes;
    m.device_type = static_cast<int>(ev.device_type.value_or(0));
    out_.memory.push_back(m);
    memory_times_.push_back(time_of(ev.ts, "ts", event_path));
  }

 public:
  // Times relative to the profiler's start, in microseconds (exact in a double for traces of up
  // to 104 days).
  TraceEvents finish() {
    int64_t origin = std::numeric_limits<int64_t>::max();
    for (const auto& [ts, dur] : times_) origin = std::min(origin, ts);
    for (int64_t ts : memory_times_) origin = std::min(origin, ts);
    if (trace_start_) origin = *trace_start_;
    if (times_.empty() && memory_times_.empty()) origin = 0;
    // On the clock, every time must fit int64 nanoseconds; else the clock is left out (exact bounds).
    int64_t first = origin, last = origin, ignored = 0;
    for (const auto& [ts, dur] : times_) first = std::min(first, ts), last = std::max(last, ts + dur);
    for (int64_t ts : memory_times_) first = std::min(first, ts), last = std::max(last, ts);
    if (__builtin_add_overflow(base_ns_, first, &ignored) || __builtin_add_overflow(base_ns_, last, &ignored)) base_ns_ = 0;
    out_.time_zero_ns = base_ns_ + origin;
    out_.times_measured = times_measured_;
    auto relative_us = [origin](int64_t ns) {
      int64_t d = 0;
      if (__builtin_sub_overflow(ns, origin, &d)) optrace::detail::raise_json("", "the events' times span more than int64 nanoseconds");
      return static_cast<double>(d) / 1000.0;
    };
    for (size_t k = 0; k < times_.size(); ++k) {
      TimedEvent& t = out_.events[k];
      t.start_us = relative_us(times_[k].first);
      t.dur_us = static_cast<double>(times_[k].second) / 1000.0;
      // Linked: an "External id" that names an op of the trace. An overhead: on the profiler's
      // thread (torch's: the one that stopped it), taken as the process's main thread.
      if (ids_[k].external > 0 && op_ids_.count(ids_[k].external) > 0) t.linked_correlation_id = ids_[k].external;
      else if (ids_[k].unplaced && process_) t.tid = *process_;
    }
    for (size_t k = 0; k < memory_times_.size(); ++k) out_.memory[k].ts_us = relative_us(memory_times_[k]);
    return std::move(out_);
  }

 private:
  // Per event, what finish() links it with: its "External id" (runtime calls, device events), and
  // whether it goes to the profiler's thread (overheads).
  struct Ids {
    int64_t external = 0;
    bool unplaced = false;
  };

  od::parser parser_;
  TraceEvents out_;
  std::vector<std::pair<int64_t, int64_t>> times_;  // per event: ts and dur, in nanoseconds
  std::vector<Ids> ids_;                            // per event
  std::unordered_set<int64_t> op_ids_;              // the ops' and annotations' External ids
  std::optional<int64_t> process_;                  // the CPU events' "pid", as a thread id: the main thread
  std::vector<int64_t> memory_times_;
  std::vector<std::optional<std::vector<int64_t>>> shapes_;  // read_input_dims' scratch
  std::unordered_map<std::string, int64_t> named_threads_;
  std::optional<int64_t> trace_start_;  // the "Trace" span's ts
  int64_t base_ns_ = 0;  // "baseTimeNanoseconds": the clock's epoch time of ts 0 (newer profilers write it)
  bool times_measured_ = true;  // "timesMeasured"
  Spans keep_;  // what to keep; empty: all
};

// The timed events of the Kineto trace `in` hands (detail::FileReader), read a piece of about
// `piece_bytes` at a time (kineto::stream_documents): the text is never held whole. nullopt where
// it must be read whole: a text that cannot be cut between events, or any error (the whole read
// names it, with the event's exact path). Throws stream_documents' JsonError (no boundary within
// kMaxPieceBytes).
template <class Source>
std::optional<TraceEvents> stream_events(Source& in, size_t piece_bytes = kStreamPieceBytes, const Spans& keep = {}) {
  Reader reader(keep);
  if (!kineto::stream_documents(in, piece_bytes, [&](const char* data, size_t size, size_t capacity, bool first) {
        if (first) reader = Reader(keep);  // the first piece again, longer
        return reader.feed(data, size, capacity);
      }))
    return std::nullopt;
  try {
    return reader.finish();
  } catch (const Error&) {
    return std::nullopt;
  }
}

// The timed events of the Kineto trace file at `path` (gzip or not; only those overlapping
// `keep`, when given): streamed when it is gzip'd or of kStreamFromBytes or more (memory holds
// the events, not the text), what streaming leaves read whole. Throws IoError or JsonError (at
// the event's path); the caller names the file.
inline TraceEvents read_trace_events(const std::string& path, const Spans& keep = {}) {
  {
    FileReader in(path);
    if (in.gzip() || in.file_size() >= kStreamFromBytes) {
      if (std::optional<TraceEvents> read = stream_events(in, kStreamPieceBytes, keep)) return std::move(*read);
      kineto::refuse_unless_json(in);
    }
  }
  std::string text = read_file_maybe_gzip(path, simdjson::SIMDJSON_PADDING);
  if (text.capacity() < text.size() + simdjson::SIMDJSON_PADDING) text.reserve(text.size() + simdjson::SIMDJSON_PADDING);
  return Reader(keep).read(text.data(), text.size(), text.capacity());
}

}  // namespace optrace::detail::key_averages
