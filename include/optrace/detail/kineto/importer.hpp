// optrace/detail/kineto/importer.hpp: the streaming pass over a Kineto trace's events
#pragma once
// A `*.pt.trace.json[.gz]` written by torch.profiler(record_shapes=True) holds one
// `cpu_op` complete event ("ph": "X") per RecordFunction, with the op's arguments in
// "Input Dims", "Input type", "Input Strides" and "Concrete Inputs". The importer keeps the calls
// OpTracer would have recorded, per (pid, tid):
// - dispatcher ops (aten and any namespace the local libtorch knows), after CompositeImplicitAutograd
//   decomposition: ops whose resolved overload only has that kernel (`linear`) are transparent;
// - outermost only: an op inside a kept op's [ts, ts + dur] is not kept;
// - events that are no dispatcher op (autograd nodes, `ProfilerStep#`, annotations, unknown
//   namespaces) are transparent: their children can be outermost. Unknown `aten::` names are
//   taken as ops (a newer libtorch wrote them): not kept, reported, and they hide their children.
// Kineto names carry no overload: it is resolved by matching each argument's recorded kind and
// value against every overload's schema (see detail::kineto::match_score).
//
// Streaming: the file is read (and inflated) into memory once, then walked with simdjson's
// On-Demand API, in pieces on several threads when it is long (import_in_pieces); no DOM of the
// trace is built. Each distinct (name, argument fields) combination
// is decoded once, when finish() first meets it outermost: its argument fields' raw JSON text is
// the cache key, and only then read (decode.hpp).

#include <optrace/detail/common/op_schema.hpp>
#include <optrace/detail/common/json_text.hpp>
#include <optrace/detail/common/kineto_names.hpp>
#include <optrace/detail/common/ondemand.hpp>
#include <optrace/detail/common/pieces.hpp>
#include <optrace/detail/common/string_map.hpp>
#include <optrace/detail/kineto/decode.hpp>
#include <optrace/detail/kineto/events.hpp>
#include <optrace/detail/kineto/profiler_text.hpp>
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/kineto_types.hpp>
#include <optrace/op_trace.hpp>

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optrace::detail::kineto {

using optrace::kineto::ImportOptions;
using optrace::kineto::ImportReport;
using optrace::kineto::ImportResult;

namespace od = simdjson::ondemand;

// The raw JSON text of `v`; `path()` names it in errors (called only then).
template <class V, class PathFn>
std::string_view raw_of(V& v, const PathFn& path) {
  std::string_view s;
  if (auto e = ondemand::raw_json(v, s)) malformed(path(), e);
  return s;
}

// Copies of short texts that stay where they are: a streamed trace's keys, kept after the piece of
// the trace they were read from is gone.
class TextArena {
 public:
  std::string_view keep(std::string_view s) {
    if (s.empty()) return s;
    if (s.size() > kBlock / 4) {  // long: a block of its own
      large_.emplace_back(new char[s.size()]);
      std::memcpy(large_.back().get(), s.data(), s.size());
      return std::string_view(large_.back().get(), s.size());
    }
    if (blocks_.empty() || kBlock - used_ < s.size()) {
      blocks_.emplace_back(new char[kBlock]);
      used_ = 0;
    }
    char* at = blocks_.back().get() + used_;
    std::memcpy(at, s.data(), s.size());
    used_ += s.size();
    return std::string_view(at, s.size());
  }

 private:
  static constexpr size_t kBlock = 64 * 1024;
  std::vector<std::unique_ptr<char[]>> blocks_, large_;
  size_t used_ = kBlock;  // in the last block
};

class Importer {
 public:
  // `parser`: one to read with, kept by the caller across reads (a streamed trace's pieces reuse
  // their parsers' memory); the importer's own when null.
  explicit Importer(const ImportOptions& options, const OpCatalog& catalog, od::parser* parser = nullptr)
      : options_(options), catalog_(catalog), parser_(parser != nullptr ? parser : &own_parser_) {}
  Importer(const Importer&) = delete;
  Importer& operator=(const Importer&) = delete;

  // Reads a whole trace and finishes it.
  ImportResult run(const char* data, size_t size, size_t capacity) {
    read(data, size, capacity);
    return finish();
  }

  // Reads the trace's events (its "traceEvents", or a bare list of events) without finishing.
  // Returns where the document goes on after the events list: its next structural character,
  // or nullptr at the end of the document (what import_in_pieces checks a piece by).
  const char* read(const char* data, size_t size, size_t capacity) {
    return walk_events(*parser_, data, size, capacity,
                       [this](od::array& events, const std::string& base) { read_events(events, base); });
  }

  // Takes in the events `piece` read from the text that follows this importer's, as if this
  // importer had read them: the same event numbers, threads and keys (in first-seen order) that
  // one read of the whole text gives. False when the calls' counts overflow (the whole read then
  // names the event). `piece` must outlive finish(): its keys are views into its parser.
  bool absorb(const Importer& piece) {
    const uint32_t offset = static_cast<uint32_t>(report_.events);
    std::vector<uint32_t> thread_of, key_of;
    merge_keys(piece, offset, false, thread_of, key_of);
    records_.reserve(records_.size() + piece.records_.size());
    for (EventRec rec : piece.records_) {
      if (__builtin_add_overflow(calls_, rec.count, &calls_)) return false;
      rec.thread = thread_of[rec.thread];
      rec.key = key_of[rec.key];
      rec.index += offset;
      records_.push_back(rec);
    }
    report_.events += piece.report_.events;
    report_.op_events += piece.report_.op_events;
    report_.transparent += piece.report_.transparent;
    saw_concrete_ = saw_concrete_ || piece.saw_concrete_;
    return true;
  }

 private:
  struct EventRec {
    uint32_t thread;
    uint32_t key;
    int64_t ts, end;
    uint32_t index;
    int64_t count;
  };

  // What an event's key is made of, by key: views into the document, which decode() reads when
  // finish() first meets the key outermost (`pending` until then; dropped-calls keys never are).
  struct KeySource {
    std::string_view name;
    const std::vector<const OpInfo*>* overloads;  // op_overloads(name)
    RawFields raw;
    uint64_t hash = 0;   // key_hash's
    uint32_t index = 0;  // of its first event, for the error path
    bool dropped = false;
    bool pending = false;
  };
  struct Event {
    std::string_view ph, cat, name, pid, tid, ts, dur, args;
    RawFields raw;
    int64_t count = 1;
    std::optional<int64_t> dropped;
    const std::vector<const OpInfo*>* overloads = nullptr;  // op_overloads(name), once asked
    bool asked = false;
    bool op_category = false;  // is_op_category(cat)
    bool has_args = false;
  };

  static bool is_op_category(std::string_view cat) {
    return kineto_names::is(cat, kineto_names::Category::cpu_op) || kineto_names::is(cat, kineto_names::Category::operator_legacy);
  }
  static bool is_op_event(const Event& e) { return e.op_category && e.ph.size() == 1 && e.ph[0] == 'X'; }

  // The overloads of `name` if it may be a dispatcher op (none for an `aten::` name this libtorch
  // lacks), else nullptr: the event is transparent. Kept by name, for decode() too.
  const std::vector<const OpInfo*>* op_overloads(std::string_view name) {
    if (const auto* known = op_names_.find(name)) return *known;
    const std::vector<const OpInfo*>& overloads = catalog_.overloads_of(name);  // lives as long as the catalog
    const bool op = !overloads.empty() || (name.rfind("aten::", 0) == 0 && name.find(' ') == std::string_view::npos);
    return op_names_.insert(name, op ? &overloads : nullptr);
  }
  bool is_op_name(Event& ev) {
    if (!ev.asked) {
      ev.overloads = op_overloads(ev.name);
      ev.asked = true;
    }
    return ev.overloads != nullptr;
  }

  // `path()`: the JSON pointer of the args object, built only for an error message.
  template <class Obj, class PathFn>
  void read_args(Obj& args, Event& ev, const PathFn& path) {
    uint32_t seen = 0;  // a bit per key read: one given twice is refused
    for (auto member : args) {
      if (auto e = member.error()) malformed(path(), e);
      od::field& f = member.value_unsafe();  // not copied out (a hot loop)
      // The keys by their first letter, then compared in place (a hot loop: every argument field
      // of every op event).
      const char* k = f.key().raw();
      std::string_view key;
      std::string_view* list_into = nullptr;
      uint32_t bit = 0;  // the key's, in `seen`
      switch (k[0]) {
        case 'I':
          if (ondemand::key_is(k, key = "Input Dims")) list_into = &ev.raw.dims, bit = 1;
          else if (ondemand::key_is(k, key = "Input type")) list_into = &ev.raw.types, bit = 2;
          else if (ondemand::key_is(k, key = "Input Strides")) list_into = &ev.raw.strides, bit = 4;
          else continue;
          break;
        case 'C':
          if (!ondemand::key_is(k, key = "Concrete Inputs")) continue;
          list_into = &ev.raw.concrete, bit = 8;
          break;
        case 'T':
          if (!ondemand::key_is(k, key = "TensorList dtypes")) continue;
          list_into = &ev.raw.list_dtypes, bit = 16;
          break;
        case 'O':
          if (!ondemand::key_is(k, key = "Overload name")) continue;
          bit = 32;
          break;
        case 'c':
          if (!ondemand::key_is(k, key = "count")) continue;
          bit = 64;
          break;
        case 'D':
          if (!ondemand::key_is(k, key = "Dropped calls")) continue;
          bit = 128;
          break;
        default: continue;
      }
      auto field_path = [&path, key] { return path() + "/" + std::string(key); };
      if (seen & bit) duplicate_key(field_path());
      seen |= bit;
      if (list_into != nullptr) {
        // The fields are lists: take their text directly (raw_of words the error otherwise).
        // An On-Demand value is read once: a list whose text cannot be taken (malformed inside)
        // is an error here, not read again through raw_of (which broke simdjson's invariants).
        od::array a;
        if (f.value().get_array().get(a)) {
          *list_into = raw_of(f.value(), field_path);
          continue;
        }
        if (auto e = a.raw_json().get(*list_into)) malformed(field_path(), e);
        *list_into = json::detail::trim(*list_into);
      } else if (k[0] == 'O') {
        ev.raw.overload = raw_of(f.value(), field_path);
      } else {
        const bool count = k[0] == 'c';
        int64_t n;
        if (f.value().get_int64().get(n) || n < (count ? 1 : 0))
          expected(f.value(), field_path(), count ? "expected a count of at least 1" : "expected a count");
        if (count) ev.count = n;
        else ev.dropped = n;
      }
    }
  }

  void read_events(od::array& events, const std::string& base) {
    events_path_ = base;
    records_.reserve(256);  // no regrowth on small traces
    sources_.reserve(256);
    op_names_.reserve(64);
    key_index_.reserve(64);
    uint32_t index = 0;
    for (auto element : events) {
      std::string path;
      auto event_path = [&]() -> const std::string& {
        if (path.empty()) path = event_path_of(base, index);
        return path;
      };
      od::value v;
      if (auto e = element.get(v)) malformed(event_path(), e);
      od::object obj;
      if (v.get_object().get(obj)) expected(v, event_path(), "expected an event object");
      ++report_.events;
      Event ev;
      for (auto member : obj) {
        if (auto e = member.error()) malformed(event_path(), e);
        od::field& f = member.value_unsafe();  // not copied out (a hot loop)
        // Keys by their first letter, then compared in place: every field of every event.
        const char* k = f.key().raw();
        // A key read twice (`into` set already: every read sets a view into the document) is
        // refused, as the DOM reader refuses it.
        auto once = [&](std::string_view into, const char* key) {
          if (into.data() != nullptr) duplicate_key(event_path() + "/" + key);
        };
        auto string_field = [&](std::string_view& into, const char* key) {
          once(into, key);
          if (!ondemand::read_string(f.value(), into)) expected(f.value(), event_path() + "/" + key, "expected a string");
        };
        auto token_field = [&](std::string_view& into, const char* key) {
          once(into, key);
          into = ondemand::raw_token(f.value());
        };
        auto number_field = [&](std::string_view& into, const char* key) {
          once(into, key);
          into = ondemand::raw_token(f.value());
          if (into.empty() || !(into[0] == '-' || (into[0] >= '0' && into[0] <= '9')))
            expected(f.value(), event_path() + "/" + key, "expected a number");
        };
        // Once "ph" or "cat" says the event is no op, its other fields are left unread (most
        // events of a real trace: metadata, kernels, flows).
        bool other = false;
        switch (k[0]) {
          case 'p':
            if (ondemand::key_is(k, "ph")) {
              string_field(ev.ph, "ph");
              other = !(ev.ph.size() == 1 && ev.ph[0] == 'X');
            } else if (ondemand::key_is(k, "pid")) {
              token_field(ev.pid, "pid");
            }
            break;
          case 'c':
            if (ondemand::key_is(k, "cat")) {
              string_field(ev.cat, "cat");
              ev.op_category = is_op_category(ev.cat);
              other = !ev.op_category;
            }
            break;
          case 'n':
            if (ondemand::key_is(k, "name")) string_field(ev.name, "name");
            break;
          case 't':
            if (ondemand::key_is(k, "ts")) number_field(ev.ts, "ts");
            else if (ondemand::key_is(k, "tid")) token_field(ev.tid, "tid");
            break;
          case 'd':
            if (ondemand::key_is(k, "dur")) number_field(ev.dur, "dur");
            break;
          case 'a':
            if (ondemand::key_is(k, "args")) {
              if (ev.has_args) duplicate_key(event_path() + "/args");
              ev.has_args = true;
              bool known = !ev.ph.empty() && !ev.cat.empty() && !ev.name.empty();
              if (known && (!is_op_event(ev) || !is_op_name(ev))) continue;  // skipped unread
              auto args_path = [&event_path] { return event_path() + "/args"; };
              od::object args;
              if (f.value().get_object().get(args)) expected(f.value(), args_path(), "expected an object");
              if (known) read_args(args, ev, args_path);
              else if (auto e = args.raw_json().get(ev.args)) malformed(args_path(), e);
            }
            break;
          default: break;
        }
        if (other) break;
      }
      if (is_op_event(ev)) add_event(ev, index, event_path);
      ++index;
    }
  }

  template <class PathFn>
  void add_event(Event& ev, uint32_t index, PathFn& event_path) {
    ++report_.op_events;
    if (!is_op_name(ev)) {
      ++report_.transparent;
      return;
    }
    if (!ev.args.empty()) {  // "args" came before "ph", "cat" or "name": read it now
      od::document sub;
      if (auto e = sub_parser_.iterate(ev.args.data(), ev.args.size(), ev.args.size() + simdjson::SIMDJSON_PADDING).get(sub))
        malformed(event_path() + "/args", e);
      od::object args;
      if (auto e = sub.get_object().get(args)) malformed(event_path() + "/args", e);
      read_args(args, ev, [&event_path] { return event_path() + "/args"; });
    }
    if (ev.ts.empty()) optrace::detail::raise_json(event_path(), "missing key \"ts\"");
    if (ev.dur.empty()) optrace::detail::raise_json(event_path(), "missing key \"dur\"");
    EventRec rec;
    if (!parse_time_ns(ev.ts, rec.ts)) optrace::detail::raise_json(event_path() + "/ts", "expected a time in microseconds, got number " + std::string(ev.ts));
    int64_t dur;
    if (!parse_time_ns(ev.dur, dur) || dur < 0)
      optrace::detail::raise_json(event_path() + "/dur", "expected a duration of at least 0, got number " + std::string(ev.dur));
    if (__builtin_add_overflow(rec.ts, dur, &rec.end))
      optrace::detail::raise_json(event_path() + "/dur", "ts + dur is beyond int64 nanoseconds (ts " + std::string(ev.ts) + ", dur " + std::string(ev.dur) + ")");
    rec.index = index;
    rec.count = ev.count;
    record(ev, rec, event_path);
  }

 public:
  // A call read from another format: an execution trace's node (execution_trace_import.hpp). Its
  // name, its thread's name, its span on any clock where a child's span lies inside its parent's,
  // and its arguments as the Kineto fields' text; the views must outlive finish(). `index`
  // numbers it under the events path (set_events_path) in the report's examples.
  void add_call(std::string_view name, std::string_view thread, int64_t ts, int64_t end, const RawFields& raw,
                uint32_t index) {
    ++report_.events;
    ++report_.op_events;
    Event ev;
    ev.name = name;
    ev.tid = thread;
    ev.raw = raw;
    if (!is_op_name(ev)) {
      ++report_.transparent;
      return;
    }
    EventRec rec;
    rec.ts = ts;
    rec.end = end;
    rec.index = index;
    rec.count = 1;
    auto event_path = [this, index] { return event_path_of(events_path_, index); };
    record(ev, rec, event_path);
  }
  void set_events_path(std::string path) { events_path_ = std::move(path); }

 private:
  // The thread and key of an op event (or call) whose span is read, recorded for finish().
  template <class PathFn>
  void record(Event& ev, EventRec rec, PathFn& event_path) {
    if (!ev.raw.concrete.empty()) saw_concrete_ = true;

    if (!same_bytes(ev.pid, last_pid_) || !same_bytes(ev.tid, last_tid_) || records_.empty()) {
      scratch_.clear();
      scratch_.append(ev.pid).append("\x1f").append(ev.tid);
      const uint32_t* thread = threads_.find(scratch_);
      last_thread_ = thread != nullptr ? *thread : threads_.insert(scratch_, static_cast<uint32_t>(threads_.size()));
      last_pid_ = ev.pid;
      last_tid_ = ev.tid;
    }
    rec.thread = last_thread_;

    uint32_t key;
    const uint64_t hash = key_hash(ev.name, ev.raw, ev.dropped.has_value());
    if (!find_key(hash, ev.name, ev.raw, ev.dropped.has_value(), key))
      // Decoded when finish() first meets it outermost: most distinct inputs of a real trace are
      // ops' inner calls (conv2d's convolution, _convolution, ...), hidden by their caller.
      sources_.push_back(KeySource{ev.name, ev.overloads, ev.raw, hash, rec.index, ev.dropped.has_value(), !ev.dropped});
    if (ev.dropped) rec.count = *ev.dropped;
    rec.key = key;
    // Every count the report and the trace add up is part of this sum: it must fit int64.
    if (__builtin_add_overflow(calls_, rec.count, &calls_))
      optrace::detail::raise_json(event_path() + (ev.dropped ? "/args/Dropped calls" : "/args/count"),
                      "the events' counts add up to more than " + std::to_string(INT64_MAX) + " calls");
    records_.push_back(rec);
  }

  // The hash of an event's key: (name, argument fields, dropped or not), one pass over views
  // into the document.
  static uint64_t key_hash(std::string_view name, const RawFields& raw, bool dropped) {
    uint64_t h = hash_mix_bytes(name, dropped);
    for (std::string_view part : {raw.dims, raw.types, raw.concrete, raw.strides, raw.overload, raw.list_dtypes})
      h = part.empty() ? (h << 7 | h >> 57) ^ 0x9e3779b97f4a7c15ull : hash_mix_bytes(part, h);  // absent: no multiply
    return hash_mix(h, 0x8ebc6af09c88c6e3ull);
  }

  // The key of hash `h`, for (name, raw, dropped); false when new, `key` then the next one (the
  // caller adds its KeySource).
  bool find_key(uint64_t h, std::string_view name, const RawFields& raw, bool dropped, uint32_t& key) {
    auto same = [&](uint32_t position) {
      const KeySource& k = sources_[position];
      return k.dropped == dropped && same_bytes(k.name, name) && same_bytes(k.raw.dims, raw.dims) &&
             same_bytes(k.raw.types, raw.types) && same_bytes(k.raw.concrete, raw.concrete) &&
             same_bytes(k.raw.strides, raw.strides) && same_bytes(k.raw.overload, raw.overload) &&
             same_bytes(k.raw.list_dtypes, raw.list_dtypes);
    };
    if (key_index_.find(h, same, key)) return true;
    key = static_cast<uint32_t>(sources_.size());
    key_index_.insert(h, key);
    return false;
  }

  // The info of `key`, decoded now if it was not yet. The fields' text still lies in the
  // document (and the names in the parser's string buffer): finish() runs before either goes.
  KeyInfo& info_of(uint32_t key) {
    if (key < sources_.size() && sources_[key].pending) {
      KeySource& u = sources_[key];
      u.pending = false;
      decode(infos_[key], *u.overloads, u.name, u.raw, events_path_, u.index, options_);
    }
    return infos_[key];
  }

  void note(const std::string& reason, bool kept, int64_t count, const std::string& example) {
    auto it = issue_index_.find(reason);
    if (it == issue_index_.end()) {
      it = issue_index_.emplace(reason, report_.issues.size()).first;
      ImportReport::Issue issue;
      issue.reason = reason;
      issue.kept = kept;
      report_.issues.push_back(std::move(issue));
    }
    ImportReport::Issue& issue = report_.issues[it->second];
    issue.count += count;
    if (static_cast<int64_t>(issue.examples.size()) < options_.max_examples() &&
        std::find(issue.examples.begin(), issue.examples.end(), example) == issue.examples.end())
      issue.examples.push_back(example);
  }

 public:
  // What the events read make: outermost calls kept, decoded, counted. Called once, after read()
  // (and absorb()), or after take() has folded a streamed trace's pieces.
  ImportResult finish() {
    grow_infos();
    // Nesting, per thread: ops in start order, a parent before the children that share its start.
    std::vector<uint32_t> order(records_.size());
    for (uint32_t k = 0; k < order.size(); ++k) order[k] = k;
    auto by_start = [this](uint32_t a, uint32_t b) {
      const EventRec& x = records_[a];
      const EventRec& y = records_[b];
      if (x.thread != y.thread) return x.thread < y.thread;
      if (x.ts != y.ts) return x.ts < y.ts;
      if (x.end != y.end) return x.end > y.end;
      return x.index < y.index;
    };
    // A one-thread trace usually comes in this order already: checked in one pass before sorting.
    if (!std::is_sorted(order.begin(), order.end(), by_start)) std::sort(order.begin(), order.end(), by_start);
    for (uint32_t k : order) visit(records_[k]);
    return emit();
  }

  // Streaming: takes in the events `piece` read from the text after what was taken before, as
  // absorb() does, copying what the keys need (the piece's text goes), and folds the calls into
  // the result as they come when folding (fold()): then no record of them is kept, so memory does
  // not grow with the trace. Folding needs each thread's ops in start order (parents first, as
  // finish() sorts them; the profiler writes them so): false when `piece` breaks it, and the
  // caller reads the trace again without folding (finish() then sorts what take() kept).
  bool take(const Importer& piece) {
    if (report_.events + piece.report_.events > UINT32_MAX)
      optrace::detail::raise_json(events_path_, "more than " + std::to_string(UINT32_MAX) + " events: beyond what one import reads");
    if (report_.events == 0 && events_path_.empty()) events_path_ = piece.events_path_;
    const uint32_t offset = static_cast<uint32_t>(report_.events);
    std::vector<uint32_t> thread_of, key_of;
    merge_keys(piece, offset, true, thread_of, key_of);
    grow_infos();
    for (EventRec rec : piece.records_) {
      rec.thread = thread_of[rec.thread];
      rec.key = key_of[rec.key];
      rec.index += offset;
      if (__builtin_add_overflow(calls_, rec.count, &calls_))
        optrace::detail::raise_json(event_path_of(events_path_, rec.index) + (sources_[rec.key].dropped ? "/args/Dropped calls" : "/args/count"),
                        "the events' counts add up to more than " + std::to_string(INT64_MAX) + " calls");
      if (!fold_) {
        records_.push_back(rec);
        continue;
      }
      if (!sources_[rec.key].dropped) {
        ThreadWalk& w = walks_[rec.thread];
        if (w.seen && (rec.ts < w.last_ts || (rec.ts == w.last_ts && rec.end > w.last_end))) return false;
        w.seen = true;
        w.last_ts = rec.ts;
        w.last_end = rec.end;
      }
      visit(rec);
    }
    report_.events += piece.report_.events;
    report_.op_events += piece.report_.op_events;
    report_.transparent += piece.report_.transparent;
    saw_concrete_ = saw_concrete_ || piece.saw_concrete_;
    return true;
  }
  // take() folds the calls as they come (see there).
  void fold(bool on) { fold_ = on; }

 private:
  // Keys of calls read under a context rule (decode_within) are numbered from here, apart from
  // the events' keys: a streamed trace adds events' keys after them.
  static constexpr uint32_t kWithin = 1u << 31;

  KeyInfo& info_at(uint32_t key) { return key & kWithin ? within_infos_[key & ~kWithin] : infos_[key]; }

  // What a key's calls add up to, as visit() meets them: the result is made from these (emit),
  // so the order calls are visited in changes nothing but the walk's own (nesting is per thread).
  struct Tally {
    int64_t kept = 0;  // calls kept (or dropped calls)
    int64_t first_ts = 0;  // the first kept call: first-seen order, over all threads
    uint32_t first_index = 0;
    bool seen = false;
    int64_t left_out = 0;
    uint32_t left_thread = 0;  // the first call left out, in walk order (its example first)
    int64_t left_ts = 0, left_end = 0;
    uint32_t left_index = 0;
    bool left_seen = false;
  };
  Tally& tally_at(uint32_t key) { return key & kWithin ? within_tallies_[key & ~kWithin] : tallies_[key]; }

  // One thread's walk: the kept op that hides what starts inside it, and the decomposed ops open
  // around the current event, outermost first (the context of the reference tracer's context
  // rules, dispatcher.hpp, as OpTracer keeps it).
  struct Open {
    int64_t start, end;
    const OpInfo* op;
  };
  struct ThreadWalk {
    bool open = false;
    int64_t open_start = 0, open_end = 0;
    std::vector<Open> composites;
    bool seen = false;  // take(): the last op event folded, to check the order
    int64_t last_ts = 0, last_end = 0;
  };

  // Maps the threads and keys `piece` read onto this importer's, the new ones added after in the
  // piece's first-seen order, their first events numbered from `offset`: thread_of and key_of
  // give each of the piece's own numbers. `copy_text`: a new key's text is copied (take: the
  // piece's parser reads the next piece), else its views into the piece's document are kept.
  void merge_keys(const Importer& piece, uint32_t offset, bool copy_text, std::vector<uint32_t>& thread_of,
                  std::vector<uint32_t>& key_of) {
    thread_of.reserve(piece.threads_.size());
    piece.threads_.for_each([&](std::string_view name, uint32_t) {
      const uint32_t* thread = threads_.find(name);
      thread_of.push_back(thread != nullptr ? *thread : threads_.insert(name, static_cast<uint32_t>(threads_.size())));
    });
    key_of.resize(piece.sources_.size());
    for (size_t k = 0; k < piece.sources_.size(); ++k) {
      const KeySource& source = piece.sources_[k];
      if (find_key(source.hash, source.name, source.raw, source.dropped, key_of[k])) continue;
      KeySource kept = source;
      if (copy_text) {
        kept.name = text_.keep(source.name);
        for (std::string_view* part : {&kept.raw.dims, &kept.raw.types, &kept.raw.concrete, &kept.raw.strides,
                                       &kept.raw.overload, &kept.raw.list_dtypes})
          *part = text_.keep(*part);
      }
      kept.index += offset;
      sources_.push_back(kept);
    }
  }

  // Infos and tallies for every key read so far (a dropped-calls key's info is made here).
  void grow_infos() {
    for (size_t key = infos_.size(); key < sources_.size(); ++key) {
      infos_.emplace_back();
      tallies_.emplace_back();
      const KeySource& source = sources_[key];
      if (!source.dropped) continue;
      KeyInfo& info = infos_.back();
      info.status = Status::Dropped;
      info.blocks = false;
      std::string overload;
      if (!source.raw.overload.empty()) overload = std::string(json::Document::parse(source.raw.overload)->root().as_string());
      info.dropped_op = display_name(source.name, overload);
    }
    if (walks_.size() < threads_.size()) walks_.resize(threads_.size());
  }

  // One op event, in its thread's start order (a parent before the children that share its start).
  void visit(EventRec r) {
    ThreadWalk& w = walks_[r.thread];
    if (infos_[r.key].status == Status::Dropped) {
      tally_kept(r);
      return;
    }
    if (w.open && r.ts >= w.open_start && r.end <= w.open_end) {
      report_.nested += r.count;
      return;
    }
    while (!w.composites.empty() && !(r.ts >= w.composites.back().start && r.end <= w.composites.back().end))
      w.composites.pop_back();
    if (info_of(r.key).rebuild.best != nullptr) {
      context_.clear();
      for (const Open& o : w.composites) context_.push_back(o.op);
      // The trace does not tell the engine's own calls from a backward formula's: engine rules
      // are not applied.
      if (const OpInfo::Rule* rule = infos_[r.key].rebuild.best->rule_within(context_, [] { return false; })) {
        auto [it, fresh] = within_keys_.emplace(std::make_pair(r.key, static_cast<const void*>(rule)), 0);
        if (fresh) {
          it->second = kWithin | static_cast<uint32_t>(within_infos_.size());
          const KeySource& source = sources_[r.key];  // a plain key: only those have a rebuild
          within_infos_.push_back(decode_within(infos_[r.key], *rule, source.name, source.raw, events_path_, source.index, options_));
          within_tallies_.emplace_back();
        }
        r.key = it->second;
      }
    }
    const KeyInfo& info = info_at(r.key);
    if (info.blocks) {
      w.open = true;
      w.open_start = r.ts;
      w.open_end = r.end;
    }
    switch (info.status) {
      case Status::Kept: tally_kept(r); break;
      case Status::Decomposed:
        report_.decomposed += r.count;
        w.composites.push_back(Open{r.ts, r.end, info.decomposed});
        break;
      case Status::LeftOut: {
        report_.left_out += r.count;
        Tally& t = tally_at(r.key);
        t.left_out += r.count;
        auto walk_order = [&r](const Tally& u) {  // r before u's first, in finish()'s walk
          if (r.thread != u.left_thread) return r.thread < u.left_thread;
          if (r.ts != u.left_ts) return r.ts < u.left_ts;
          if (r.end != u.left_end) return r.end > u.left_end;
          return r.index < u.left_index;
        };
        if (!t.left_seen || walk_order(t)) {
          t.left_seen = true;
          t.left_thread = r.thread;
          t.left_ts = r.ts;
          t.left_end = r.end;
          t.left_index = r.index;
        }
        break;
      }
      default: break;
    }
  }

  void tally_kept(const EventRec& r) {
    Tally& t = tally_at(r.key);
    t.kept += r.count;
    if (!t.seen || r.ts < t.first_ts || (r.ts == t.first_ts && r.index < t.first_index)) {
      t.seen = true;
      t.first_ts = r.ts;
      t.first_index = r.index;
    }
  }

  // The result, from the tallies.
  ImportResult emit() {
    std::vector<uint32_t> keys;
    auto all_keys = [&](auto&& wanted) {
      keys.clear();
      for (uint32_t k = 0; k < tallies_.size(); ++k)
        if (wanted(tallies_[k])) keys.push_back(k);
      for (uint32_t k = 0; k < within_tallies_.size(); ++k)
        if (wanted(within_tallies_[k])) keys.push_back(kWithin | k);
    };
    // Calls left out, noted in the walk's order of each key's first.
    all_keys([](const Tally& t) { return t.left_seen; });
    std::sort(keys.begin(), keys.end(), [this](uint32_t a, uint32_t b) {
      const Tally& x = tally_at(a);
      const Tally& y = tally_at(b);
      if (x.left_thread != y.left_thread) return x.left_thread < y.left_thread;
      if (x.left_ts != y.left_ts) return x.left_ts < y.left_ts;
      if (x.left_end != y.left_end) return x.left_end > y.left_end;
      return x.left_index < y.left_index;
    });
    for (uint32_t key : keys) {
      const KeyInfo& info = info_at(key);
      note(info.reasons.front(), false, tally_at(key).left_out, info.example);
    }
    // Calls kept, in first-seen order: by start time over all threads, then file order.
    all_keys([](const Tally& t) { return t.seen; });
    std::sort(keys.begin(), keys.end(), [this](uint32_t a, uint32_t b) {
      const Tally& x = tally_at(a);
      const Tally& y = tally_at(b);
      return x.first_ts != y.first_ts ? x.first_ts < y.first_ts : x.first_index < y.first_index;
    });
    for (uint32_t key : keys) {
      const KeyInfo& info = info_at(key);
      if (info.status != Status::Kept) continue;
      const int64_t count = tally_at(key).kept;
      report_.kept += count;
      if (!info.reasons.empty()) report_.incomplete += count;
      for (const std::string& reason : info.reasons) note(reason, true, count, info.example);
    }
    ImportResult result;
    {  // the trace's ops, counted by their names' storage (an op's name is its OpInfo's)
      std::vector<const char*> names;
      names.reserve(keys.size());
      for (uint32_t key : keys) names.push_back(info_at(key).status == Status::Dropped ? info_at(key).dropped_op.data() : info_at(key).op.data());
      std::sort(names.begin(), names.end());
      result.trace.reserve(static_cast<size_t>(std::unique(names.begin(), names.end()) - names.begin()));
    }
    for (uint32_t key : keys) {
      KeyInfo& info = info_at(key);
      if (info.status == Status::Dropped) {
        result.trace.add_dropped(info.dropped_op, tally_at(key).kept);
        continue;
      }
      info.input.count = tally_at(key).kept;
      result.trace.add(info.op, std::move(info.input));  // each key once; the infos are done with
    }
    report_.format = "kineto";
    report_.concrete_inputs = saw_concrete_ || report_.op_events == report_.transparent;
    result.report = std::move(report_);
    return result;
  }

 private:
  ImportOptions options_;
  const OpCatalog& catalog_;
  ImportReport report_;
  od::parser own_parser_;
  od::parser* parser_;  // the document's: names with escapes are unescaped into it (finish reads them)
  od::parser sub_parser_;
  std::string scratch_;
  std::string_view last_pid_, last_tid_;  // the previous op event's thread (its tokens in the document)
  uint32_t last_thread_ = 0;
  // op_overloads' answers, by views of the names in the document (they outlive the importer's
  // work, finish() included)
  StringMap<const std::vector<const OpInfo*>*, std::string_view> op_names_;
  StringMap<uint32_t> threads_;
  // By key (deques: a reference stays valid as keys are added). Then the keys of calls read
  // under a context rule, from kWithin.
  std::deque<KeyInfo> infos_, within_infos_;
  std::deque<Tally> tallies_, within_tallies_;
  std::vector<ThreadWalk> walks_;  // by thread
  std::vector<const OpInfo*> context_;
  std::map<std::pair<uint32_t, const void*>, uint32_t> within_keys_;  // (key, rule) -> key
  TextArena text_;  // take(): the keys' text, copied out of the pieces
  bool fold_ = false;
  std::vector<KeySource> sources_;
  HashIndex key_index_;  // find_key's: hashes of the keys' parts -> key
  std::string events_path_;  // "/traceEvents" or "" (a bare list)
  std::vector<EventRec> records_;
  std::unordered_map<std::string, size_t> issue_index_;
  bool saw_concrete_ = false;
  int64_t calls_ = 0;  // the op events' counts, summed
};


// Reading one trace on several threads. The events list is cut where one event ends and the
// next begins ("},\n  {": a comma and a line break between, as the profiler writes), and each
// piece made a document of its own by writing brackets into that space: the first piece ends
// "}]}" (or "}]" for a bare list), the others are lists, "[{...}, ..., {...}]", the last one
// closed by writing "]" over the root's final "}". Each piece is read by its own Importer on its
// own thread, then the pieces are taken in, in file order, by the first (absorb) and finished as
// one read: the same result as reading the text whole. Whether each cut was an event boundary of
// the events list (and not one in a deeper list, or in a list of another key) is checked by the
// pieces themselves: the first piece's events list must end where its written "]" is; a middle
// piece's list must be its whole document; the last piece's must end before its written "]".
// When a check fails or a piece throws, the bytes are put back and the text is read whole on the
// calling thread: results and errors are then that read's own.

// A piece is at least this long: below, a thread costs more than it saves (measured:
// bench_kineto_files, a 1.4 MB trace in two pieces).
inline constexpr size_t kMinPieceBytes = 512 * 1024;

// Pieces for a text of `size` bytes when `threads` are asked for (0: one per core).
inline size_t pieces_for(size_t size, int64_t threads) {
  if (size < 2 * kMinPieceBytes || threads == 1) return 1;  // before asking the cores (glibc reads /sys: ~6 us)
  static const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t n = threads > 0 ? static_cast<size_t>(threads) : cores;
  return std::max<size_t>(1, std::min(n, size / kMinPieceBytes));
}

// Reads `data` (`size` bytes, `capacity` readable, writable) in up to `wanted` pieces at once,
// each by its own importer in `importers` (made, or a fresh one on the parser of the one there;
// the first `n` hold the pieces, in file order). `data` is a trace (an object with "traceEvents",
// or a list of events) or, with `tail`, a list of events followed by the rest of a root object
// ("[{...}, {...}], "key": ... }": the last piece of a streamed trace). Returns the pieces read
// (1 where no cut was found), or 0 when a check failed or a piece threw: the caller reads the
// text whole to name the error. The bytes are put back either way.
inline size_t read_pieces(char* data, size_t size, size_t capacity, bool tail, size_t wanted, const ImportOptions& options,
                          const OpCatalog& catalog, std::vector<std::unique_ptr<Importer>>& importers,
                          std::vector<std::unique_ptr<od::parser>>& parsers, const char** last_next = nullptr) {
  size_t first = 0;
  while (first < size && is_json_space(data[first])) ++first;
  size_t last = size;
  while (last > first && is_json_space(data[last - 1])) --last;
  if (first >= size || !(data[first] == '{' || (data[first] == '[' && (!tail || data[last - 1] == '}')))) return 0;
  const bool object = data[first] == '{';
  if (object && data[last - 1] != '}') return 0;
  std::vector<Cut> cuts;
  for (size_t k = 1; k < wanted; ++k) {
    const size_t from = std::max(size / wanted * k, cuts.empty() ? first : cuts.back().open);
    Cut cut;
    // The first piece of an object ends "]}" and the next begins "[": two spaces at least.
    if (find_cut(data, last, from, 1 << 20, object && cuts.empty() ? 2 : 1, cut)) cuts.push_back(cut);
  }
  // The bytes written, to put back: brackets in the space of each cut, and over the final '}'.
  std::vector<std::pair<size_t, char>> saved;
  auto write = [&](size_t at, char c) {
    saved.emplace_back(at, data[at]);
    data[at] = c;
  };
  struct Piece {
    size_t begin, end;
    const char* next = nullptr;
    bool read = false;
  };
  std::vector<Piece> pieces(cuts.size() + 1);
  for (size_t k = 0; k < cuts.size(); ++k) {
    const Cut& cut = cuts[k];
    write(cut.comma, ']');
    if (k == 0 && object) write(cut.comma + 1, '}');
    write(cut.open - 1, '[');
    pieces[k].end = cut.comma + (k == 0 && object ? 2 : 1);
    pieces[k + 1].begin = cut.open - 1;
  }
  pieces.front().begin = 0;
  pieces.back().end = size;
  // One piece of a whole trace is read as it is (what Importer::run reads).
  const bool whole = cuts.empty() && !tail;
  if (!whole && (object || tail)) write(last - 1, ']');
  while (parsers.size() < pieces.size()) parsers.push_back(std::make_unique<od::parser>());
  importers.resize(std::max(importers.size(), pieces.size()));
  for (size_t k = 0; k < pieces.size(); ++k) importers[k] = std::make_unique<Importer>(options, catalog, parsers[k].get());
  auto read_piece = [&](size_t k) {
    Piece& piece = pieces[k];
    try {
      piece.next = importers[k]->read(data + piece.begin, piece.end - piece.begin, capacity - piece.begin);
      piece.read = true;
    } catch (...) {  // the whole read names it
    }
  };
  {
    std::vector<std::thread> threads;
    threads.reserve(pieces.size() - 1);
    for (size_t k = 1; k < pieces.size(); ++k) {
      try {
        threads.emplace_back(read_piece, k);
      } catch (const std::system_error&) {  // no thread to be had: read here
        read_piece(k);
      }
    }
    read_piece(0);
    for (std::thread& t : threads) t.join();
  }
  bool ok = true;
  for (size_t k = 0; k < pieces.size() && ok; ++k) {
    const Piece& piece = pieces[k];
    if (!piece.read) ok = false;
    else if (whole) ok = true;
    else if (k == 0 && object && !cuts.empty()) ok = piece.next == data + cuts[0].comma + 1;  // its written '}'
    else if (k + 1 == pieces.size() && (object || tail)) ok = piece.next != nullptr;    // before its written ']'
    else ok = piece.next == nullptr;  // a list to its end
  }
  for (auto it = saved.rbegin(); it != saved.rend(); ++it) data[it->first] = it->second;
  // After the last piece's events come the root object's last members: a second "traceEvents"
  // there is the whole read's to refuse (walk_events), as a read in one piece refuses it.
  if (ok && !whole && (object || tail) && events_key_again(pieces.back().next, data + size)) ok = false;
  if (last_next != nullptr) *last_next = pieces.back().next;
  return ok ? pieces.size() : 0;
}

// Reads `data` (`size` bytes, `capacity` readable, writable) in up to `wanted` pieces at once.
// `pieces_read`, when given, is set to the pieces the trace was read in (1: whole).
inline ImportResult import_in_pieces(char* data, size_t size, size_t capacity, const ImportOptions& options,
                                     const OpCatalog& catalog, size_t wanted, size_t* pieces_read = nullptr) {
  if (pieces_read != nullptr) *pieces_read = 1;
  if (wanted >= 2) {
    std::vector<std::unique_ptr<Importer>> importers;
    std::vector<std::unique_ptr<od::parser>> parsers;
    const size_t n = read_pieces(data, size, capacity, false, wanted, options, catalog, importers, parsers);
    bool ok = n >= 1;
    for (size_t k = 1; k < n && ok; ++k) ok = importers[0]->absorb(*importers[k]);
    if (ok) {
      if (pieces_read != nullptr) *pieces_read = n;
      return importers[0]->finish();
    }
  }
  Importer importer(options, catalog);
  return importer.run(data, size, capacity);
}

// Streaming: a trace read from `in` in pieces of about `piece_bytes` per thread (stream_pieces),
// each parsed on its own and folded into the result (Importer::take) before the next is read, so
// memory stays bounded by the pieces whatever the trace's size. `whole` reads the trace whole
// (all of it in memory), for what streaming cannot take (stream_pieces says when; a piece whose
// fold throws too: the whole read names the error). Throws stream_pieces' JsonError.
template <class Reader, class Whole>
ImportResult import_stream(Reader& in, const ImportOptions& options, const OpCatalog& catalog, Whole&& whole,
                           size_t piece_bytes = kStreamPieceBytes, bool fold = true) {
  const size_t wanted = options.threads() == 1 ? 1 : pieces_for(SIZE_MAX, options.threads());
  std::optional<Importer> result;
  std::optional<ImportResult> out;
  bool unordered = false, failed = false;
  std::vector<std::unique_ptr<Importer>> importers;
  std::vector<std::unique_ptr<od::parser>> parsers;
  auto read_piece = [&](const StreamPiece& piece, const char*& events_end) {
    if (piece.first) {
      if (piece.last) {  // read in one piece anyway
        out = import_in_pieces(piece.data, piece.size, piece.capacity, options, catalog, pieces_for(piece.size, options.threads()));
        return PieceRead::Done;
      }
      result.emplace(options, catalog);
      result->fold(fold);
    }
    const size_t n = read_pieces(piece.data, piece.size, piece.capacity, piece.tail, wanted, options, catalog, importers,
                                 parsers, &events_end);
    // The rest of a bare list must end where the text does.
    if (n == 0 || (piece.last && !piece.tail && events_end != nullptr)) return PieceRead::Failed;
    // An error the fold meets (an event's fields malformed where only decoding reads them) is
    // named by the whole read, which may meet another first, as any read of the whole trace.
    try {
      for (size_t k = 0; k < n; ++k) {
        if (!result->take(*importers[k])) {  // a thread's ops out of start order: read again, keeping them
          unordered = true;
          return PieceRead::Done;
        }
      }
      if (piece.last) out = result->finish();
    } catch (const Error&) {
      failed = true;
      return PieceRead::Done;
    }
    return PieceRead::Read;
  };
  if (!stream_pieces(in, wanted * piece_bytes, LastPiece::AsTail, read_piece) || failed) return whole();
  if (unordered) {
    in.rewind();
    return import_stream(in, options, catalog, whole, piece_bytes, false);
  }
  return std::move(*out);
}

// Runs the importer over `data`, growing its capacity by simdjson's padding first (no copy when
// the string has room, as read_file's and gunzip's results usually do); on several threads when
// the text is long enough (import_in_pieces).
inline ImportResult import_text(std::string& data, const ImportOptions& options, const OpCatalog& catalog) {
  if (data.capacity() < data.size() + simdjson::SIMDJSON_PADDING) data.reserve(data.size() + simdjson::SIMDJSON_PADDING);
  return import_in_pieces(data.data(), data.size(), data.capacity(), options, catalog, pieces_for(data.size(), options.threads()));
}

// Whether the JSON text `s` is surely a Kineto trace by its first bytes: a list, or an object
// with "traceEvents" among its keys before any member detect_text would take for an op of an hf op
// trace. Reads at most `limit` bytes and validates nothing (the import that follows does); false
// whenever unsure (escaped keys, anything unusual, the limit reached), and detect_text decides.
// What it saves a large trace: detect_text's own pass over the whole text, and its index.
inline bool surely_kineto(std::string_view s, size_t limit = size_t(1) << 20) {
  const char* p = s.data();
  const char* end = s.data() + std::min(s.size(), limit);
  auto space = [&] {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) ++p;
  };
  auto skip_string = [&]() -> bool {  // at '"'
    for (++p; p < end; ++p) {
      if (*p == '\\') ++p;
      else if (*p == '"') return ++p, true;
    }
    return false;
  };
  auto key = [&](std::string_view& out) -> bool {  // a key without escapes, then ':'
    space();
    if (p >= end || *p != '"') return false;
    const char* start = ++p;
    while (p < end && *p != '"' && *p != '\\') ++p;
    if (p >= end || *p != '"') return false;
    out = std::string_view(start, static_cast<size_t>(p - start));
    ++p;
    space();
    return p < end && *p++ == ':';
  };
  auto skip_value = [&]() -> bool {
    space();
    if (p >= end) return false;
    if (*p == '"') return skip_string();
    if (*p != '{' && *p != '[') {
      while (p < end && *p != ',' && *p != '}' && *p != ']') ++p;
      return p < end;
    }
    for (int depth = 0; p < end;) {
      const char c = *p;
      if (c == '"') {
        if (!skip_string()) return false;
        continue;
      }
      ++p;
      if (c == '{' || c == '[') ++depth;
      else if ((c == '}' || c == ']') && --depth == 0) return true;
    }
    return false;
  };
  auto after_member = [&](char close) -> int {  // 1: another member, 0: the object's end, -1: unsure
    space();
    if (p >= end) return -1;
    const char c = *p++;
    return c == ',' ? 1 : c == close ? 0 : -1;
  };
  space();
  if (p >= end) return false;
  if (*p == '[') return true;
  if (*p++ != '{') return false;
  space();
  if (p < end && *p == '}') return false;  // {}: an empty hf op trace
  for (std::string_view name;;) {
    if (!key(name)) return false;
    if (name == "traceEvents") return true;
    space();
    if (p < end && *p == '{') {  // an object: an op of an hf op trace if it has one of these keys
      ++p;
      space();
      if (p < end && *p == '}') {
        ++p;
      } else {
        for (std::string_view inner;;) {
          if (!key(inner) || inner == "unique_inputs" || inner == "total_calls" || !skip_value()) return false;
          const int more = after_member('}');
          if (more < 0) return false;
          if (more == 0) break;
        }
      }
    } else if (!skip_value()) {
      return false;
    }
    if (after_member('}') != 1) return false;
  }
}

inline optrace::kineto::TraceFormat detect_text(std::string& data) {
  using optrace::kineto::TraceFormat;
  if (data.capacity() < data.size() + simdjson::SIMDJSON_PADDING) data.reserve(data.size() + simdjson::SIMDJSON_PADDING);
  od::parser parser;
  od::document doc;
  if (parser.iterate(data.data(), data.size(), data.capacity()).get(doc)) return TraceFormat::Unknown;
  od::json_type t;
  if (doc.type().get(t)) return TraceFormat::Unknown;
  if (t == od::json_type::array) return TraceFormat::Kineto;
  od::object root;
  if (t != od::json_type::object || doc.get_object().get(root)) return TraceFormat::Unknown;
  bool empty = true;
  for (auto member : root) {
    empty = false;
    od::field f;
    std::string_view key;
    if (std::move(member).get(f) || f.unescaped_key().get(key)) return TraceFormat::Unknown;
    if (key == "traceEvents") return TraceFormat::Kineto;
    // An execution trace's "schema" (a string) and "nodes" (a list): an hf op trace's members
    // are objects.
    od::json_type member_type;
    if ((key == "schema" || key == "nodes") && !f.value().type().get(member_type) &&
        member_type == (key == "schema" ? od::json_type::string : od::json_type::array))
      return TraceFormat::ExecutionTrace;
    od::object entry;
    if (f.value().get_object().get(entry)) continue;
    for (auto inner : entry) {
      od::field g;
      std::string_view k;
      if (std::move(inner).get(g) || g.unescaped_key().get(k)) return TraceFormat::Unknown;
      if (k == "unique_inputs" || k == "total_calls") return TraceFormat::HfOpTrace;
    }
  }
  return empty ? TraceFormat::HfOpTrace : TraceFormat::Unknown;
}

}  // namespace optrace::detail::kineto
