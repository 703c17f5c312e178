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
#include <optrace/detail/common/ondemand.hpp>
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

class Importer {
 public:
  explicit Importer(const ImportOptions& options, const OpCatalog& catalog) : options_(options), catalog_(catalog) {}

  // Reads a whole trace and finishes it.
  ImportResult run(const char* data, size_t size, size_t capacity) {
    read(data, size, capacity);
    return finish();
  }

  // Reads the trace's events (its "traceEvents", or a bare list of events) without finishing.
  // Returns where the document goes on after the events list: its next structural character,
  // or nullptr at the end of the document (what import_in_pieces checks a piece by).
  const char* read(const char* data, size_t size, size_t capacity) {
    return walk_events(parser_, data, size, capacity,
                       [this](od::array& events, const std::string& base) { read_events(events, base); });
  }

  // Takes in the events `piece` read from the text that follows this importer's, as if this
  // importer had read them: the same event numbers, threads and keys (in first-seen order) that
  // one read of the whole text gives. False when the calls' counts overflow (the whole read then
  // names the event). `piece` must outlive finish(): its keys are views into its parser.
  bool absorb(const Importer& piece) {
    const uint32_t offset = static_cast<uint32_t>(report_.events);
    std::vector<uint32_t> thread_of;
    thread_of.reserve(piece.threads_.size());
    piece.threads_.for_each([&](std::string_view name, uint32_t) {
      const uint32_t* thread = threads_.find(name);
      thread_of.push_back(thread != nullptr ? *thread : threads_.insert(name, static_cast<uint32_t>(threads_.size())));
    });
    std::vector<uint32_t> key_of(piece.sources_.size());
    for (size_t k = 0; k < piece.sources_.size(); ++k) {
      const KeySource& source = piece.sources_[k];
      if (!find_key(source.hash, source.name, source.raw, source.dropped, key_of[k])) {
        sources_.push_back(source);
        sources_.back().index += offset;
      }
    }
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
  };

  static bool is_op_category(std::string_view cat) {
    return (cat.size() == 6 && std::memcmp(cat.data(), "cpu_op", 6) == 0) || cat == "Operator";
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
    for (auto member : args) {
      if (auto e = member.error()) malformed(path(), e);
      od::field& f = member.value_unsafe();  // not copied out (a hot loop)
      // The keys by their first letter, then compared in place (a hot loop: every argument field
      // of every op event).
      const char* k = f.key().raw();
      std::string_view key;
      std::string_view* list_into = nullptr;
      switch (k[0]) {
        case 'I':
          if (ondemand::key_is(k, key = "Input Dims")) list_into = &ev.raw.dims;
          else if (ondemand::key_is(k, key = "Input type")) list_into = &ev.raw.types;
          else if (ondemand::key_is(k, key = "Input Strides")) list_into = &ev.raw.strides;
          else continue;
          break;
        case 'C':
          if (!ondemand::key_is(k, key = "Concrete Inputs")) continue;
          list_into = &ev.raw.concrete;
          break;
        case 'T':
          if (!ondemand::key_is(k, key = "TensorList dtypes")) continue;
          list_into = &ev.raw.list_dtypes;
          break;
        case 'O':
          if (!ondemand::key_is(k, key = "Overload name")) continue;
          break;
        case 'c':
          if (!ondemand::key_is(k, key = "count")) continue;
          break;
        case 'D':
          if (!ondemand::key_is(k, key = "Dropped calls")) continue;
          break;
        default: continue;
      }
      auto field_path = [&path, key] { return path() + "/" + std::string(key); };
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
        // The keys by their first letter, then compared in place (a hot loop: every field of
        // every event).
        const char* k = f.key().raw();
        auto string_field = [&](std::string_view& into, const char* key) {
          if (!ondemand::read_string(f.value(), into)) expected(f.value(), event_path() + "/" + key, "expected a string");
        };
        auto number_field = [&](std::string_view& into, const char* key) {
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
              ev.pid = ondemand::raw_token(f.value());
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
            else if (ondemand::key_is(k, "tid")) ev.tid = ondemand::raw_token(f.value());
            break;
          case 'd':
            if (ondemand::key_is(k, "dur")) number_field(ev.dur, "dur");
            break;
          case 'a':
            if (ondemand::key_is(k, "args")) {
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
    if (ev.ts.empty()) throw JsonError(event_path(), "missing key \"ts\"");
    if (ev.dur.empty()) throw JsonError(event_path(), "missing key \"dur\"");
    EventRec rec;
    if (!parse_time_ns(ev.ts, rec.ts)) throw JsonError(event_path() + "/ts", "expected a time in microseconds, got number " + std::string(ev.ts));
    int64_t dur;
    if (!parse_time_ns(ev.dur, dur) || dur < 0)
      throw JsonError(event_path() + "/dur", "expected a duration of at least 0, got number " + std::string(ev.dur));
    if (__builtin_add_overflow(rec.ts, dur, &rec.end))
      throw JsonError(event_path() + "/dur", "ts + dur is beyond int64 nanoseconds (ts " + std::string(ev.ts) + ", dur " + std::string(ev.dur) + ")");
    rec.index = index;
    rec.count = ev.count;
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
      sources_.push_back(KeySource{ev.name, ev.overloads, ev.raw, hash, index, ev.dropped.has_value(), !ev.dropped});
    if (ev.dropped) rec.count = *ev.dropped;
    rec.key = key;
    // Every count the report and the trace add up is part of this sum: it must fit int64.
    if (__builtin_add_overflow(calls_, rec.count, &calls_))
      throw JsonError(event_path() + (ev.dropped ? "/args/Dropped calls" : "/args/count"),
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
  // (and absorb()).
  ImportResult finish() {
    infos_.reserve(sources_.size() + sources_.size() / 4 + 8);  // and the keys under context rules, unmoved
    infos_.resize(sources_.size());
    for (size_t key = 0; key < sources_.size(); ++key) {
      const KeySource& source = sources_[key];
      if (!source.dropped) continue;
      KeyInfo& info = infos_[key];
      info.status = Status::Dropped;
      info.blocks = false;
      std::string overload;
      if (!source.raw.overload.empty()) overload = std::string(json::Document::parse(source.raw.overload)->root().as_string());
      info.dropped_op = display_name(source.name, overload);
    }
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
    // A one-thread trace usually comes in this order already: checked in one pass before sorting
    // (here and for `kept` below).
    if (!std::is_sorted(order.begin(), order.end(), by_start)) std::sort(order.begin(), order.end(), by_start);
    std::vector<uint32_t> kept;
    kept.reserve(records_.size());
    uint32_t thread = UINT32_MAX;
    int64_t open_start = 0, open_end = 0;
    bool open = false;
    // Decomposed ops open around the current event, outermost first: the context of the
    // reference tracer's context rules (dispatcher.hpp), as OpTracer keeps it.
    struct Open {
      int64_t start, end;
      const OpInfo* op;
    };
    std::vector<Open> composites;
    std::vector<const OpInfo*> context;
    std::map<std::pair<uint32_t, const void*>, uint32_t> within_keys;  // (key, rule) -> key
    for (uint32_t k : order) {
      EventRec& r = records_[k];
      if (r.thread != thread) {
        thread = r.thread;
        open = false;
        composites.clear();
      }
      if (infos_[r.key].status == Status::Dropped) {
        kept.push_back(k);
        continue;
      }
      if (open && r.ts >= open_start && r.end <= open_end) {
        report_.nested += r.count;
        continue;
      }
      while (!composites.empty() && !(r.ts >= composites.back().start && r.end <= composites.back().end))
        composites.pop_back();
      if (info_of(r.key).rebuild.best != nullptr) {
        context.clear();
        for (const Open& o : composites) context.push_back(o.op);
        // The trace does not tell the engine's own calls from a backward formula's: engine rules
        // are not applied.
        if (const OpInfo::Rule* rule = infos_[r.key].rebuild.best->rule_within(context, [] { return false; })) {
          auto [it, fresh] = within_keys.emplace(std::make_pair(r.key, static_cast<const void*>(rule)), 0);
          if (fresh) {
            it->second = static_cast<uint32_t>(infos_.size());
            const KeySource& source = sources_[r.key];  // a plain key: only those have a rebuild
            KeyInfo within = decode_within(infos_[r.key], *rule, source.name, source.raw, events_path_, source.index, options_);
            infos_.push_back(std::move(within));
          }
          r.key = it->second;
        }
      }
      const KeyInfo& info = infos_[r.key];
      if (info.blocks) {
        open = true;
        open_start = r.ts;
        open_end = r.end;
      }
      switch (info.status) {
        case Status::Kept: kept.push_back(k); break;
        case Status::Decomposed:
          report_.decomposed += r.count;
          composites.push_back(Open{r.ts, r.end, info.decomposed});
          break;
        case Status::LeftOut:
          report_.left_out += r.count;
          note(info.reasons.front(), false, r.count, info.example);
          break;
        default: break;
      }
    }
    // First-seen order: by start time over all threads, then file order.
    auto by_first_seen = [this](uint32_t a, uint32_t b) {
      const EventRec& x = records_[a];
      const EventRec& y = records_[b];
      return x.ts != y.ts ? x.ts < y.ts : x.index < y.index;
    };
    if (!std::is_sorted(kept.begin(), kept.end(), by_first_seen)) std::sort(kept.begin(), kept.end(), by_first_seen);
    std::vector<int64_t> totals(infos_.size(), 0);
    std::vector<uint32_t> first_seen;
    first_seen.reserve(infos_.size());
    for (uint32_t k : kept) {
      const EventRec& r = records_[k];
      if (totals[r.key] == 0) first_seen.push_back(r.key);
      totals[r.key] += r.count;
      const KeyInfo& info = infos_[r.key];
      if (info.status != Status::Kept) continue;
      report_.kept += r.count;
      if (!info.reasons.empty()) report_.incomplete += r.count;
      for (const std::string& reason : info.reasons) note(reason, true, r.count, info.example);
    }
    ImportResult result;
    {  // the trace's ops, counted by their names' storage (an op's name is its OpInfo's)
      std::vector<const char*> names;
      names.reserve(first_seen.size());
      for (uint32_t key : first_seen) names.push_back(infos_[key].status == Status::Dropped ? infos_[key].dropped_op.data() : infos_[key].op.data());
      std::sort(names.begin(), names.end());
      result.trace.reserve(static_cast<size_t>(std::unique(names.begin(), names.end()) - names.begin()));
    }
    for (uint32_t key : first_seen) {
      KeyInfo& info = infos_[key];
      if (info.status == Status::Dropped) {
        result.trace.add_dropped(info.dropped_op, totals[key]);
        continue;
      }
      info.input.count = totals[key];
      result.trace.add(info.op, std::move(info.input));  // each key once; infos_ is done with
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
  od::parser parser_;  // the document's: names with escapes are unescaped into it (finish reads them)
  od::parser sub_parser_;
  std::string scratch_;
  std::string_view last_pid_, last_tid_;  // the previous op event's thread (its tokens in the document)
  uint32_t last_thread_ = 0;
  // op_overloads' answers, by views of the names in the document (they outlive the importer's
  // work, finish() included)
  StringMap<const std::vector<const OpInfo*>*, std::string_view> op_names_;
  StringMap<uint32_t> threads_;
  std::vector<KeyInfo> infos_;  // by key; then the keys of calls under a context rule (finish)
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

inline bool is_json_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// An event boundary: the ',' after an event's '}' and the '{' of the next one.
struct Cut {
  size_t comma = 0, open = 0;
};

// The first event boundary after `from` (within `window` bytes) with at least `spaces` whitespace
// bytes between the comma and the '{', a line break among them (no string holds one: the cut is
// not inside a string), or false.
inline bool find_cut(const char* data, size_t size, size_t from, size_t window, size_t spaces, Cut& cut) {
  const size_t stop = std::min(size, from + window);
  for (size_t p = from; p < stop;) {
    const void* brace = std::memchr(data + p, '}', stop - p);
    if (brace == nullptr) return false;
    size_t q = static_cast<size_t>(static_cast<const char*>(brace) - data) + 1;
    p = q;
    if (q >= size || data[q] != ',') continue;
    size_t r = q + 1;
    while (r < size && is_json_space(data[r])) ++r;
    if (r < size && data[r] == '{' && r - (q + 1) >= spaces && std::memchr(data + q + 1, '\n', r - (q + 1)) != nullptr) {
      cut.comma = q;
      cut.open = r;
      return true;
    }
  }
  return false;
}

// Reads `data` (`size` bytes, `capacity` readable, writable) in up to `wanted` pieces at once.
// `pieces_read`, when given, is set to the pieces the trace was read in (1: whole).
inline ImportResult import_in_pieces(char* data, size_t size, size_t capacity, const ImportOptions& options,
                                     const OpCatalog& catalog, size_t wanted, size_t* pieces_read = nullptr) {
  if (pieces_read != nullptr) *pieces_read = 1;
  auto whole = [&] {
    Importer importer(options, catalog);
    return importer.run(data, size, capacity);
  };
  size_t first = 0;
  while (first < size && is_json_space(data[first])) ++first;
  size_t last = size;
  while (last > first && is_json_space(data[last - 1])) --last;
  if (wanted < 2 || first >= size || !(data[first] == '{' || data[first] == '[')) return whole();
  const bool object = data[first] == '{';
  if (object && data[last - 1] != '}') return whole();
  std::vector<Cut> cuts;
  for (size_t k = 1; k < wanted; ++k) {
    const size_t from = std::max(size / wanted * k, cuts.empty() ? first : cuts.back().open);
    Cut cut;
    // The first piece of an object ends "]}" and the next begins "[": two spaces at least.
    if (find_cut(data, last, from, 1 << 20, object && cuts.empty() ? 2 : 1, cut)) cuts.push_back(cut);
    else if (cuts.empty()) return whole();
  }
  // The bytes written, to put back: brackets in the space of each cut, and over the final '}'.
  std::vector<std::pair<size_t, char>> saved;
  auto write = [&](size_t at, char c) {
    saved.emplace_back(at, data[at]);
    data[at] = c;
  };
  struct Piece {
    size_t begin, end;
    std::unique_ptr<Importer> importer;
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
  if (object) write(last - 1, ']');
  auto read_piece = [&](Piece& piece) {
    try {
      piece.importer = std::make_unique<Importer>(options, catalog);
      piece.next = piece.importer->read(data + piece.begin, piece.end - piece.begin, capacity - piece.begin);
      piece.read = true;
    } catch (...) {  // the whole read names it
    }
  };
  {
    std::vector<std::thread> threads;
    threads.reserve(pieces.size() - 1);
    for (size_t k = 1; k < pieces.size(); ++k) {
      try {
        threads.emplace_back(read_piece, std::ref(pieces[k]));
      } catch (const std::system_error&) {  // no thread to be had: read here
        read_piece(pieces[k]);
      }
    }
    read_piece(pieces[0]);
    for (std::thread& t : threads) t.join();
  }
  bool ok = true;
  for (size_t k = 0; k < pieces.size() && ok; ++k) {
    const Piece& piece = pieces[k];
    if (!piece.read) ok = false;
    else if (k == 0 && object) ok = piece.next == data + cuts[0].comma + 1;  // its written '}'
    else if (k + 1 == pieces.size() && object) ok = piece.next != nullptr;     // before its written ']'
    else ok = piece.next == nullptr;  // a list to its end
  }
  for (size_t k = 1; k < pieces.size() && ok; ++k) ok = pieces[0].importer->absorb(*pieces[k].importer);
  for (auto it = saved.rbegin(); it != saved.rend(); ++it) data[it->first] = it->second;
  if (!ok) return whole();
  if (pieces_read != nullptr) *pieces_read = pieces.size();
  return pieces[0].importer->finish();
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
