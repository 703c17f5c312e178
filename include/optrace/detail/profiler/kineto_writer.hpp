// optrace/detail/profiler/kineto_writer.hpp: a recorded window written as torch.profiler's Kineto trace
#pragma once
// The layout is torch 2.6's own (`*.pt.trace.json` as tensorboard_trace_handler writes it):
// top-level metadata, then per thread its "X" events (cat "cpu_op" for ops and autograd nodes,
// "user_annotation" for record_function ranges and ProfilerStep#N), "[memory]" instant events,
// and "fwdbwd" flow events from each forward op to its autograd node; with the CUDA activity, the
// runtime calls on their threads, kernels, copies and sets on their device and stream, and an
// "ac2g" flow from each call to what it launched (device_trace.hpp says how they are joined),
// with what CUPTI adds to them (device_details.hpp). Times are microseconds
// since `baseTimeNanoseconds` with nanosecond decimals, as Kineto writes them. The arguments'
// text ("Input Dims", "Input type", "Concrete Inputs", ...) is the Kineto exporter's
// (kineto/exporter.hpp), the inputs decoded by OpTracer's decoder (event_inputs.hpp).

#include <optrace/detail/common/kineto_names.hpp>
#include <optrace/detail/kineto/exporter.hpp>
#include <optrace/detail/profiler/collectives.hpp>
#include <optrace/detail/profiler/device_trace.hpp>
#include <optrace/detail/profiler/event_inputs.hpp>
#include <optrace/detail/profiler/trace_info.hpp>
#include <optrace/detail/profiler/window.hpp>
#include <optrace/json/writer.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <string>
#include <utility>
#include <vector>

namespace optrace::detail::profiler {

// How an "X" event of category `c` begins, up to its name.
inline std::string event_head(kineto_names::Category c) {
  return "{\"ph\": \"X\", \"cat\": \"" + std::string(kineto_names::name(c)) + "\", \"name\": ";
}

// Whether KinetoWriter::write writes the top-level key `key` itself (the device's keys included):
// what ProfilerOptions::metadata_json may not add. Keep in step with write().
inline bool written_key(std::string_view key) {
  for (std::string_view k : {"schemaVersion", "distributedInfo", "record_shapes", "profile_memory", "with_stack", "trace_id",
                             "traceName", "displayTimeUnit", "baseTimeNanoseconds", "traceEvents"})
    if (key == k) return true;
  return device_metadata_key(key);
}

class KinetoWriter {
 public:
  KinetoWriter(const Window& window, const TraceInfo& info) : window_(window), info_(info) {}

  std::string write(const std::string& trace_name) {
    std::string out;
    write(trace_name, [&out](std::string_view text) { out += text; }, &out);
    return out;
  }

  // The trace's text in pieces, in order, each handed to `sink` (the file writer streams them:
  // no 10 MB string to fault in page by page). `reserve`: a string to size for the whole text.
  template <class Sink>
  void write(const std::string& trace_name, Sink&& sink, std::string* reserve = nullptr) {
    size_t estimate = 4096;
    for (const auto& b : window_.buffers) estimate += 320 * b->events.size() + 260 * b->memory.size();
    if (reserve != nullptr) reserve->reserve(estimate);
    json::Writer w;
    w.begin_object();
    w.key("schemaVersion").value(int64_t{1});
    // With the CUDA activity, the devices' properties and CUDA's versions as libtorch's own
    // trace holds them (device_details.hpp).
    bool properties = false;
    for (const auto& [key, value] : window_.device_metadata) properties = properties || key == "deviceProperties";
    if (!properties) w.key("deviceProperties").begin_array().end_array();
    for (const auto& [key, value] : window_.device_metadata) w.key(key).raw(value);
    // Where torch.profiler puts it (after the devices), with json.dumps' spacing: HTA finds the
    // rank with the regex `"rank":\s+(\d+)`, the first match in the file.
    if (info_.distributed) w.key("distributedInfo").raw(info_.distributed->to_json());
    for (const auto& [key, value] : info_.metadata) w.key(key).raw(value);
    if (info_.record_shapes) w.key("record_shapes").value(int64_t{1});
    if (info_.profile_memory) w.key("profile_memory").value(int64_t{1});
    if (info_.with_stack) w.key("with_stack").value(int64_t{1});
    w.key("trace_id").value(info_.trace_id);
    w.key("traceName").value(trace_name);
    w.key("displayTimeUnit").value("ms");
    w.key("baseTimeNanoseconds").value(info_.base_ns);
    w.key("traceEvents").begin_array();
    write_metadata(w);
    sink(w.take());
    join_ = join_device_events(window_);
    std::string chunk;
    for (size_t bi = 0; bi < window_.buffers.size(); ++bi) {
      write_thread(chunk, *window_.buffers[bi], join_.external_id[bi], sink);
      sink(chunk);
      chunk.clear();
    }
    write_device(chunk, sink);
    sink(chunk);
    chunk.clear();
    write_device_metadata(w);
    write_flows(w);
    w.begin_object().key("name").value("Record Window End").key("ph").value("i").key("s").value("g");
    w.key("pid").value("").key("tid").value("").key("ts").raw(ts_text(window_.end_ns)).end_object();
    w.end_array();
    w.end_object();
    sink(w.take());
  }

 private:
  // The text written per thread (and for the device events) is handed to the sink in pieces of
  // about this size.
  static constexpr size_t kChunk = 1 << 20;
  // How an op's and an annotation's events begin.
  inline static const std::string kCpuOpHead = event_head(kineto_names::Category::cpu_op);
  inline static const std::string kUserAnnotationHead = event_head(kineto_names::Category::user_annotation);

  static void append_int(std::string& s, int64_t v) {
    char buf[24];
    s.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  }

  // Nanoseconds as microseconds with up to three decimals ("12139.893", "5.2"), as Kineto
  // writes them; exact, and without a double's formatting.
  static void append_micros(std::string& s, int64_t ns) {
    if (ns < 0) s += '-';
    const uint64_t v = ns < 0 ? static_cast<uint64_t>(-ns) : static_cast<uint64_t>(ns);
    char buf[24];
    s.append(buf, std::to_chars(buf, buf + sizeof buf, v / 1000).ptr);
    const uint64_t frac = v % 1000;
    if (frac == 0) return;
    char digits[3] = {static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                      static_cast<char>('0' + frac % 10)};
    size_t n = 3;
    while (digits[n - 1] == '0') --n;
    s += '.';
    s.append(digits, n);
  }
  std::string ts_text(int64_t steady_ns) const {
    std::string s;
    append_micros(s, info_.since_base(steady_ns));
    return s;
  }

  // The arguments' keys of an event, rendered once per distinct encoding: a profile repeats the
  // same calls step after step (resnet18: ~430 distinct in 21,400 events of 50 steps).
  const std::string& input_args_text(const ThreadBuffer& b, const Event& e) {
    std::string key(reinterpret_cast<const char*>(b.tokens.data() + e.tokens_begin),
                    sizeof(int64_t) * (e.tokens_end - e.tokens_begin));
    key.append(reinterpret_cast<const char*>(&e.num_args), sizeof e.num_args);
    auto [it, fresh] = args_text_.try_emplace(std::move(key));
    if (fresh) {
      json::Writer w;
      w.begin_object();
      kineto::write_input_args(w, decode_inputs(b, e));
      w.end_object();
      std::string text = w.take();
      it->second = text.substr(1, text.size() - 2);  // the keys and values, without the braces
    }
    return it->second;
  }

  // A c10d range's collective arguments (collectives.hpp) as "key": value pairs, written after its
  // inputs (and on its record_param_comms, append_param_comms), or "" for any other range.
  std::string collective_args_of(const ThreadBuffer& b, const Event& e, const char* name) const {
    if (name[0] != 'g' && name[0] != 'c') return {};  // most ranges: no string made
    std::optional<std::string> collective = collective_name(name);
    if (!collective) return {};
    std::optional<OpInput> in;
    if (e.num_args > 0) in = decode_inputs(b, e);
    return collective_args(*collective, in ? &*in : nullptr, *info_.distributed, e.group, call_seq(window_, e.rf_id));
  }

  // The record_param_comms a collective's gloo range is described by (collectives.hpp: torch's
  // NCCL backend records one in each call), as torch writes one: a cpu_op on the range's thread,
  // its own External id (after every range's), "Record function id" param_comms_rf_id (the
  // execution trace's node has it), and the collective arguments. At the range's start, 0 long:
  // of the same times as the range, chakra_trace_link's exclusive time of the range, its duration
  // less the child's computed in double microseconds (~1 ns apart at 2^42 us), goes below zero
  // and it stops.
  // `args`: the range's collective arguments (collective_args_of).
  void append_param_comms(std::string& o, const Event& e, const std::string& head, const std::string& args) {
    o += ", ";
    o += kCpuOpHead;
    o += "\"record_param_comms\"";
    o += head;
    append_micros(o, info_.since_base(e.start_ns));
    o += ", \"dur\": 0, \"args\": {\"External id\": ";
    append_int(o, join_.numbered + ++param_comms_);
    o += ", \"Record function id\": ";
    append_int(o, static_cast<int64_t>(param_comms_rf_id(e.rf_id)));
    o += ", ";
    o += args;
    o += ", \"Ev Idx\": ";
    append_int(o, ev_idx_++);
    o += "}}";
  }

  // One "M" event: a process's or thread's name, label or sort index, at the window's start.
  template <class Value>
  void meta(json::Writer& w, const char* name, int64_t pid, int64_t tid, const char* key, const Value& value) {
    w.begin_object().key("name").value(name).key("ph").value("M").key("ts").raw(ts_text(window_.start_ns));
    w.key("pid").value(pid).key("tid").value(tid);
    w.key("args").begin_object().key(key).value(value).end_object().end_object();
  }

  void write_metadata(json::Writer& w) {
    meta(w, "process_name", info_.pid, 0, "name", info_.process_name);
    meta(w, "process_labels", info_.pid, 0, "labels", "CPU");
    meta(w, "process_sort_index", info_.pid, 0, "sort_index", info_.pid);
    std::vector<int64_t> named;  // a thread's name once, though a joined window has a buffer of it per part
    for (const auto& b : window_.buffers) {
      if (std::find(named.begin(), named.end(), b->os_tid) != named.end()) continue;
      named.push_back(b->os_tid);
      const std::string thread = "thread " + std::to_string(b->os_tid) + " (" + info_.process_name + ")";
      meta(w, "thread_name", info_.pid, b->os_tid, "name", thread);
      meta(w, "thread_sort_index", info_.pid, b->os_tid, "sort_index", b->os_tid);
    }
  }

  // A thread's events, appended as text: the same JSON as json::Writer's (keys and values as it
  // spaces them), at a few hundred nanoseconds an event instead of microseconds. `ids`: the
  // events' External ids (DeviceJoin). `o` is handed to `sink` every ~1 MB. Each event follows a
  // ", ": the metadata events come first.
  template <class Sink>
  void write_thread(std::string& o, const ThreadBuffer& b, const std::vector<int64_t>& ids, Sink& sink) {
    o.reserve(kChunk + 64 * 1024);
    auto put_int = [&o](int64_t v) { append_int(o, v); };
    std::string head;  // `"pid": P, "tid": T, "ts": ` of this thread
    head = ", \"pid\": " + std::to_string(info_.pid) + ", \"tid\": " + std::to_string(b.os_tid) + ", \"ts\": ";
    for (size_t index = 0; index < b.events.size(); ++index) {
      const Event& e = b.events[index];
      if (e.end_ns < 0) continue;  // still open when the window closed
      const bool annotation = e.kind == EventKind::kUserAnnotation;
      if (o.size() > kChunk) {
        sink(o);
        o.clear();
      }
      o += ", ";
      o += annotation ? kUserAnnotationHead : kCpuOpHead;
      o += e.name != nullptr ? escaped_name(e.name) : escaped(b.names[static_cast<size_t>(e.own_name)]);
      o += head;
      append_micros(o, info_.since_base(e.start_ns));
      o += ", \"dur\": ";
      append_micros(o, e.end_ns - e.start_ns);
      o += ", \"args\": {\"External id\": ";
      put_int(ids[index]);
      if (e.seq_nr >= 0 && !annotation) {
        o += ", \"Sequence number\": ";
        put_int(e.seq_nr);
        o += ", \"Fwd thread id\": ";
        put_int(static_cast<int64_t>(e.fwd_thread_id));
      }
      o += ", \"Record function id\": ";
      put_int(static_cast<int64_t>(e.rf_id));
      if (e.num_args > 0) {
        o += ", ";
        o += input_args_text(b, e);
      }
      const char* name = e.name != nullptr ? e.name : b.names[static_cast<size_t>(e.own_name)].c_str();
      const std::string collective = info_.distributed ? collective_args_of(b, e, name) : std::string();
      if (!collective.empty()) {
        o += ", ";
        o += collective;
      }
      if (e.call_stack >= 0) {
        o += ", \"Call stack\": ";
        o += escaped(b.stacks[static_cast<size_t>(e.call_stack)]);
      }
      if (e.module_hierarchy >= 0) {
        o += ", \"Module Hierarchy\": ";
        o += escaped(b.stacks[static_cast<size_t>(e.module_hierarchy)]);
      }
      o += ", \"Ev Idx\": ";
      put_int(ev_idx_++);
      o += "}}";
      note_flow(b, e);
      if (!collective.empty() && records_param_comms(name)) append_param_comms(o, e, head, collective);
    }
    for (const MemoryEvent& m : b.memory) {
      if (o.size() > kChunk) {
        sink(o);
        o.clear();
      }
      o += ", ";
      o += "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\"";
      o += head;
      append_micros(o, info_.since_base(m.ts_ns));
      o += ", \"args\": {\"Total Reserved\": ";
      put_int(m.total_reserved);
      o += ", \"Total Allocated\": ";
      put_int(m.total_allocated);
      o += ", \"Bytes\": ";
      put_int(m.bytes);
      o += ", \"Addr\": ";
      put_int(static_cast<int64_t>(m.addr));
      o += ", \"Device Type\": ";
      put_int(m.device_type);
      o += ", \"Device Id\": ";
      put_int(m.device_index);
      o += ", \"Ev Idx\": ";
      put_int(ev_idx_++);
      o += "}}";
    }
  }

  // The CUDA activity's events (after every thread's, whose External ids they take: join_), the
  // "ac2g" flows from each runtime call to the kernel, copy or set it launched, and the devices'
  // and streams' names, as torch.profiler writes them.
  template <class Sink>
  void write_device(std::string& o, Sink& sink) {
    const std::vector<DeviceEvent>& events = window_.device_events;
    if (events.empty()) return;
    auto put_int = [&o](int64_t v) { append_int(o, v); };
    std::vector<std::pair<size_t, const DeviceEvent*>> flows;  // the call's index, what it launched
    for (size_t i = 0; i < events.size(); ++i) {
      if (o.size() > kChunk) {
        sink(o);
        o.clear();
      }
      const DeviceEvent& d = events[i];
      const DeviceJoin::Link& link = join_.links[i];
      const bool host = on_host(d.kind);
      o += ", {\"ph\": \"X\", \"cat\": \"";
      o += device_category(d.kind);
      o += "\", \"name\": ";
      o += escaped(d.name);
      o += ", \"pid\": ";
      put_int(host ? info_.pid : d.device);
      o += ", \"tid\": ";
      put_int(host ? link.tid : d.stream);
      o += ", \"ts\": ";
      append_micros(o, info_.since_base(d.start_ns));
      o += ", \"dur\": ";
      append_micros(o, d.dur_ns);
      o += ", \"args\": {\"External id\": ";
      put_int(link.external);
      if (!host) {
        o += ", \"device\": ";
        put_int(d.device);
        o += ", \"stream\": ";
        put_int(d.stream);
        streams_[d.device].insert(d.stream);
        if (link.call >= 0) flows.emplace_back(static_cast<size_t>(link.call), &d);
      }
      o += ", \"correlation\": ";
      put_int(static_cast<int64_t>(d.correlation));
      if (!d.args.empty()) {
        o += ", ";
        o += d.args;
      }
      o += "}}";
    }
    auto flow_end = [&](const char* head, uint64_t id, int64_t pid, int64_t tid, int64_t start_ns, const char* tail) {
      o += head;
      put_int(static_cast<int64_t>(id));
      o += ", \"pid\": ";
      put_int(pid);
      o += ", \"tid\": ";
      put_int(tid);
      o += ", \"ts\": ";
      append_micros(o, info_.since_base(start_ns));
      o += tail;
    };
    for (const auto& [call, launched] : flows) {
      flow_end(", {\"ph\": \"s\", \"id\": ", launched->correlation, info_.pid, join_.links[call].tid, events[call].start_ns,
               ", \"cat\": \"ac2g\", \"name\": \"ac2g\"}");
      flow_end(", {\"ph\": \"f\", \"id\": ", launched->correlation, launched->device, launched->stream,
               launched->start_ns, ", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}");
    }
  }

  // The devices' and streams' names of the CUDA activity's events.
  void write_device_metadata(json::Writer& w) {
    for (const auto& [device, ids] : streams_) {
      meta(w, "process_name", device, 0, "name", info_.process_name);
      meta(w, "process_labels", device, 0, "labels", "GPU " + std::to_string(device));
      meta(w, "process_sort_index", device, 0, "sort_index", 5000000 + device);
      for (int64_t stream : ids) {
        meta(w, "thread_name", device, stream, "name", "stream " + std::to_string(stream) + " ");
        meta(w, "thread_sort_index", device, stream, "sort_index", stream);
      }
    }
  }

  static std::string escaped(std::string_view s) {
    std::string out;
    json::Writer::append_string(out, s);
    return out;
  }
  // Op names live as long as their op: escaped once per name.
  const std::string& escaped_name(const char* name) {
    auto [it, fresh] = names_.try_emplace(name);
    if (fresh) it->second = escaped(name);
    return it->second;
  }

  // Forward ops and the autograd nodes made for them share (forward thread, sequence number).
  struct FlowEnd {
    int64_t tid = 0;
    int64_t ns = 0;  // steady clock
    bool set = false;
  };
  void note_flow(const ThreadBuffer& b, const Event& e) {
    if (e.seq_nr < 0) return;
    // A forward op has no forward thread of its own (0); an autograd node's range (libtorch 1.13:
    // the node's BACKWARD_FUNCTION range; 2.x: also "autograd::engine::evaluate_function: ..."
    // around it, which comes first) names the thread of its forward op.
    if (e.fwd_thread_id == 0) {
      if (e.kind != EventKind::kOp) return;
      FlowEnd& start = flows_[{b.rf_thread_id, e.seq_nr}].first;
      if (!start.set) start = FlowEnd{b.os_tid, e.start_ns, true};
    } else {
      FlowEnd& end = flows_[{e.fwd_thread_id, e.seq_nr}].second;
      if (!end.set) end = FlowEnd{b.os_tid, e.start_ns, true};
    }
  }

  void write_flows(json::Writer& w) {
    int64_t id = 0;
    for (const auto& [key, ends] : flows_) {
      if (!ends.first.set || !ends.second.set) continue;
      ++id;
      for (const FlowEnd* f : {&ends.first, &ends.second}) {
        const bool start = f == &ends.first;
        w.begin_object().key("ph").value(start ? "s" : "f").key("id").value(id);
        w.key("pid").value(info_.pid).key("tid").value(f->tid).key("ts").raw(ts_text(f->ns));
        w.key("cat").value("fwdbwd").key("name").value("fwdbwd");
        if (!start) w.key("bp").value("e");
        w.end_object();
      }
    }
  }

  const Window& window_;
  const TraceInfo& info_;
  int64_t ev_idx_ = 0;
  int64_t param_comms_ = 0;  // record_param_comms written (append_param_comms)
  DeviceJoin join_;
  std::map<std::pair<uint64_t, int64_t>, std::pair<FlowEnd, FlowEnd>> flows_;
  std::unordered_map<std::string, std::string> args_text_;
  std::unordered_map<const char*, std::string> names_;
  std::map<int64_t, std::set<int64_t>> streams_;  // device -> the streams its events ran on
};

}  // namespace optrace::detail::profiler
