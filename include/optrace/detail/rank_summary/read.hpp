// optrace/detail/rank_summary/read.hpp: a rank's steps and collective times from its Kineto trace (no libtorch)
#pragma once
// What `summary --by rank` needs of one rank's `*.pt.trace.json[.gz]`, and nothing more, so that
// 8 traces of 100 MB are read in the memory of their steps and collectives:
// - the rank: torch.profiler writes `"distributedInfo": {"backend": "gloo", "rank": 0,
//   "world_size": 2, "pg_count": 1, "pg_config": [...]}` before "traceEvents" (torch 2.6); read
//   from whichever piece holds it, before or after the events;
// - the steps: "X" events of cat `user_annotation` named `ProfilerStep#N`;
// - the collectives: "X" events named `gloo:*` (gloo's own ranges, cat user_annotation, on its
//   worker threads: they span the wait for the other ranks too), `nccl:*`, `record_param_comms`
//   (torch's collective record, NCCL and UCC), `c10d::*` (the dispatcher's collective ops, cpu_op,
//   on the calling thread) and the GPU kernels whose names start with `nccl`. They nest and
//   overlap (c10d::allreduce_ around the call, gloo:all_reduce on a worker, several workers), so
//   only their intervals are kept: the summary takes their union (aggregate in rank_summary.hpp).
//   A kernel's "correlation" is kept with it, and every runtime call's (cuda_runtime, cuda_driver,
//   ...) "correlation" and start: a kernel runs when the GPU gets to it, often in the CPU's next
//   step, and is counted in the step that launched it (rank_summary.hpp).
// - each collective call, for matching across ranks (blame.hpp): the ranges that stand for one
//   call each, with their name and process group ("Process Group Name" and "Process Group Ranks"
//   in their args, which optrace's profiler and torch's record_param_comms write, read when the
//   name came before the args, as every writer orders them; "" where none is written; the ranks
//   tell apart groups of one name, as two pairs both named "1" by their ranks): the backend's `gloo:*` and
//   `nccl:*` ranges (not the GPU kernels), the dispatcher's `c10d::*` ops, `record_param_comms`;
//   each family kept apart, as one call appears in several (matching uses one family per trace);
// - each call's number in its group's sequence, where its args write one ("Seq": torch's
//   record_param_comms of NCCL since 2026, and optrace's gloo ranges, their record_param_comms
//   and c10d ops, from c10d's count): a call that writes none takes the one of the
//   record_param_comms on its thread that holds its start (link_sequence_numbers), as torch's
//   record_param_comms holds the nccl:* range of its call; record_param_comms keep none of their
//   own (a collective's and its wait's share one);
// - where an NCCL call (`nccl:*`, the backend's range) launched GPU kernels, their times
//   (link_kernels): the CPU range ends when the call is enqueued, the kernels run the collective on
//   the GPU, and the ranks wait for each other there (see link_kernels);
// - why the trace was taken, where OnDemandProfiler's slow-step capture says so: the top-level
//   "optraceCapture" object (its step, step_ms, median_ms, rank, first_step, iterations).
// Times are integer nanoseconds, exactly as kineto::parse_time_ns reads them.

#include <optrace/detail/common/gzip.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/detail/common/kineto_names.hpp>
#include <optrace/detail/common/ondemand.hpp>
#include <optrace/detail/kineto/events.hpp>
#include <optrace/error.hpp>

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optrace::detail::rank_summary {

namespace od = simdjson::ondemand;

/// A `ProfilerStep#N` range: its number and [start, end) in nanoseconds on the trace's clock.
struct StepRange {
  int64_t step = 0;
  int64_t start_ns = 0, end_ns = 0;
};

/// The step of `by_start` (steps stable-sorted by start: of steps that start together, the
/// trace's last is taken) whose range holds time `t`: the last that starts
/// at or before `t`, when `t` is before its end; nullptr when none does. One rule for every event
/// placed in a step (a collective call, a kernel's launch).
inline const StepRange* step_at(const std::vector<StepRange>& by_start, int64_t t) {
  auto it = std::upper_bound(by_start.begin(), by_start.end(), t, [](int64_t u, const StepRange& s) { return u < s.start_ns; });
  if (it == by_start.begin()) return nullptr;
  --it;
  return t < it->end_ns ? &*it : nullptr;
}

/// An interval of a collective, in nanoseconds on the trace's clock.
struct Interval {
  int64_t start_ns = 0, end_ns = 0;
};

/// The union of `intervals` (any order): sorted by start, the overlapping and touching ones merged.
inline std::vector<Interval> union_of(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; });
  std::vector<Interval> out;
  for (const Interval& i : intervals)
    if (!out.empty() && i.start_ns <= out.back().end_ns) out.back().end_ns = std::max(out.back().end_ns, i.end_ns);
    else out.push_back(i);
  return out;
}

/// Why a trace was taken: OnDemandProfiler's slow-step capture ("optraceCapture").
struct CaptureReason {
  int64_t step = 0;        // the slow step
  double step_ms = 0;      // its duration
  double median_ms = 0;    // the median of the steps before it
  int64_t rank = -1;       // the rank that saw it (-1: not known)
  int64_t first_step = 0;  // the window's steps: [first_step, first_step + iterations)
  int64_t iterations = 0;
};

/// The families of ranges that each stand for one collective call (see above), in the order
/// matching prefers them: the backend's own range spans the call's wait for the other ranks.
enum class CallFamily : uint8_t { Backend = 0, Dispatcher = 1, Record = 2 };

/// One collective call: its range on the trace's clock, its name and group (indices into the
/// rank's tables) and family; where it launched GPU kernels (link_kernels), their first start and
/// last end, `on_device`.
struct CollectiveCall {
  int64_t start_ns = 0, end_ns = 0;
  uint32_t name = 0, group = 0;
  CallFamily family = CallFamily::Backend;
  bool on_device = false;
  uint64_t thread = 0;  // its "tid" token's hash (thread_key)
  int64_t seq = -1;     // its number in its group's sequence ("Seq"; link_sequence_numbers); -1: none
  int64_t device_start_ns = 0, device_end_ns = 0;
};

/// A rank's collective calls in the trace's order, with the names and groups they index: a group
/// is its name ("" where no arg names one) and its ranks as written ("[0, 1]"; "" where not
/// written), `groups` and `group_ranks` side by side. At most kMaxCallNames distinct names and as
/// many groups.
struct RankCalls {
  std::vector<CollectiveCall> calls;
  std::vector<std::string> names, groups, group_ranks;
};
inline constexpr size_t kMaxCallNames = 4096;
inline constexpr size_t kMaxGroupRanksText = 256;  ///< of a group's ranks, what RankCalls keeps

/// The family of a range that stands for one collective call, or nullopt (see above).
inline std::optional<CallFamily> call_family(std::string_view name, std::string_view cat) {
  auto starts = [&name](std::string_view prefix) { return name.substr(0, prefix.size()) == prefix; };
  if (starts("gloo:") || (starts("nccl:") && !kineto_names::is_kernel(cat))) return CallFamily::Backend;
  if (starts("c10d::")) return CallFamily::Dispatcher;
  if (name == "record_param_comms") return CallFamily::Record;
  return std::nullopt;
}

/// A collective's GPU kernel and the correlation id of the runtime call that launched it.
struct DeviceCollective {
  int64_t start_ns = 0, end_ns = 0;
  int64_t correlation = 0;
};

/// A runtime or driver call: its correlation id (the device events it launched repeat it), start
/// and thread (thread_key).
struct Launch {
  int64_t correlation = 0;
  int64_t start_ns = 0;
  uint64_t thread = 0;
};

/// A thread's key: its "tid" token as written, hashed (a CPU thread's events all write the same
/// token; Kineto writes a number). One rule for calls and launches.
inline uint64_t thread_key(std::string_view tid_token) { return std::hash<std::string_view>{}(tid_token); }

/// What one rank's trace holds for the summary.
struct RankEvents {
  std::optional<int64_t> rank;    // distributedInfo.rank; nullopt: the trace has none
  int64_t world_size = -1;        // distributedInfo.world_size; -1: not written
  std::string backend;            // distributedInfo.backend; "" when not written
  std::vector<StepRange> steps;   // in the trace's order
  std::vector<Interval> collectives;  // the collectives' ranges, and the kernels without a correlation id
  std::vector<DeviceCollective> device_collectives;  // the collectives' kernels with one
  std::vector<Launch> launches;                     // every runtime call with a correlation id
  std::optional<CaptureReason> capture;  // "optraceCapture", when the trace has one
  RankCalls calls;
  int64_t base_ns = 0;  // "baseTimeNanoseconds" (0 where the trace has none)
};

/// Whether an event named `name` of category `cat` is a collective (see above).
inline bool is_collective(std::string_view name, std::string_view cat) {
  auto starts = [&name](std::string_view prefix) { return name.substr(0, prefix.size()) == prefix; };
  if (starts("gloo:") || starts("nccl:") || name == "record_param_comms" || starts("c10d::")) return true;
  return starts("nccl") && kineto_names::is_kernel(cat);
}

/// Whether an event is a collective's GPU kernel (`nccl*`, cat kernel): counted in the step that
/// launched it, where the trace holds its launch (rank_summary.hpp).
inline bool is_device_collective(std::string_view name, std::string_view cat) {
  return name.substr(0, 4) == "nccl" && kineto_names::is_kernel(cat);
}

/// The N of `ProfilerStep#N`, or nullopt for any other name.
inline std::optional<int64_t> step_number(std::string_view name) {
  constexpr std::string_view kPrefix = "ProfilerStep#";
  if (name.substr(0, kPrefix.size()) != kPrefix || name.size() == kPrefix.size()) return std::nullopt;
  int64_t n = 0;
  const char* end = name.data() + name.size();
  const auto r = std::from_chars(name.data() + kPrefix.size(), end, n);
  if (r.ec != std::errc() || r.ptr != end || n < 0) return std::nullopt;
  return n;
}

class Reader {
 public:
  /// Reads one document of the trace (the whole text, or a piece of a streamed one) and returns
  /// where its events list ends (walk_events' `events_end`). Throws JsonError at the event's path.
  const char* feed(const char* data, size_t size, size_t capacity) {
    const char* events_end = nullptr;
    kineto::walk_events(
        parser_, data, size, capacity, [this](od::array& events, const std::string& base) { read_events(events, base); },
        [this](std::string_view key, od::value& v) {
          if (key == "optraceCapture") {
            if (out_.capture) kineto::duplicate_key("/optraceCapture");
            read_capture(v);
            return;
          }
          if (key == "baseTimeNanoseconds") {  // the epoch time of ts 0: the ranks' one clock (blame.hpp)
            int64_t ns = 0;
            if (!v.get_int64().get(ns)) out_.base_ns = ns;
            return;
          }
          if (key != "distributedInfo") return;
          if (distributed_info_read_) kineto::duplicate_key("/distributedInfo");  // in any piece of the trace
          distributed_info_read_ = true;
          read_distributed_info(v);
        },
        &events_end);
    return events_end;
  }

  RankEvents take() { return std::move(out_); }

 private:
  bool distributed_info_read_ = false;

 private:
  struct Event {
    std::string_view ph, cat, name, ts, dur, tid;
    std::string_view group, group_ranks;  // args' "Process Group Name" and "... Ranks" of a collective call
    int64_t seq = -1;                     // ... and its "Seq"; -1: none
    int64_t correlation = -1;             // args' "correlation" of a kernel or runtime call; -1: none
  };

  // A kernel's or runtime call's args: its "correlation" (an integer of at least 0, as CUPTI's
  // ids are), the rest skipped; args that are not an object, as read_call_args.
  static void read_correlation(kineto::EventMember& m, Event& ev) {
    od::object args;
    if (m.value().get_object().get(args)) return;
    for (auto member : args) {
      if (auto e = member.error()) kineto::malformed(m.event_path()() + "/args", e);
      od::field& f = member.value_unsafe();
      if (!ondemand::key_is(f.key().raw(), "correlation")) continue;
      const std::string path = m.event_path()() + "/args/correlation";
      if (ev.correlation >= 0) kineto::duplicate_key(path);
      if (f.value().get_int64().get(ev.correlation) || ev.correlation < 0)
        kineto::expected(f.value(), path, "expected a correlation id (an integer of at least 0)");
    }
  }

  // A collective call's args: its "Process Group Name" and "Process Group Ranks" (strings, as
  // torch writes them) and "Seq" (an integer of at least 0, or a string of one), the rest
  // skipped. Args that are not an object are left to the readers that read them (nothing here
  // depends on them).
  static void read_call_args(kineto::EventMember& m, Event& ev) {
    od::object args;
    if (m.value().get_object().get(args)) return;
    for (auto member : args) {
      if (auto e = member.error()) kineto::malformed(m.event_path()() + "/args", e);
      od::field& f = member.value_unsafe();
      if (ondemand::key_is(f.key().raw(), "Seq")) {
        const std::string path = m.event_path()() + "/args/Seq";
        if (ev.seq >= 0) kineto::duplicate_key(path);
        std::string_view text;
        if (ondemand::read_string(f.value(), text)) {
          const auto r = std::from_chars(text.data(), text.data() + text.size(), ev.seq);
          if (r.ec != std::errc() || r.ptr != text.data() + text.size()) ev.seq = -1;
        } else if (f.value().get_int64().get(ev.seq)) {
          ev.seq = -1;
        }
        if (ev.seq < 0) kineto::expected(f.value(), path, "expected a sequence number (an integer of at least 0)");
        continue;
      }
      const bool name = ondemand::key_is(f.key().raw(), "Process Group Name");
      if (!name && !ondemand::key_is(f.key().raw(), "Process Group Ranks")) continue;
      std::string_view& into = name ? ev.group : ev.group_ranks;
      const std::string path = m.event_path()() + (name ? "/args/Process Group Name" : "/args/Process Group Ranks");
      if (into.data() != nullptr) kineto::duplicate_key(path);
      std::string_view g;
      if (!ondemand::read_string(f.value(), g)) kineto::expected(f.value(), path, "expected a string");
      into = g.data() != nullptr ? g : std::string_view("", 0);
    }
  }

  // The index of `key` in `index` (added as `table.size()` when new, with `add` called to grow
  // the tables); JsonError at `path` past kMaxCallNames.
  template <class PathFn, class Add>
  static uint32_t intern(std::string key, const std::vector<std::string>& table, std::unordered_map<std::string, uint32_t>& index,
                         const char* what, const PathFn& event_path, const Add& add) {
    const auto it = index.find(key);
    if (it != index.end()) return it->second;
    if (table.size() >= kMaxCallNames)
      raise_json(event_path(), "more than " + std::to_string(kMaxCallNames) + " distinct collective " + what + " in one trace");
    index.emplace(std::move(key), static_cast<uint32_t>(table.size()));
    add();
    return static_cast<uint32_t>(table.size() - 1);
  }

  void read_distributed_info(od::value& v) {
    od::object info;
    if (v.get_object().get(info)) kineto::expected(v, "/distributedInfo", "expected an object");
    bool rank = false, world_size = false, backend = false;  // read: a key given twice is refused
    auto once = [](bool& read, const char* path) {
      if (read) kineto::duplicate_key(path);
      read = true;
    };
    for (auto member : info) {
      if (auto e = member.error()) kineto::malformed("/distributedInfo", e);
      od::field& f = member.value_unsafe();
      std::string_view key;
      if (auto e = f.unescaped_key().get(key)) kineto::malformed("/distributedInfo", e);
      int64_t n = 0;
      if (key == "rank") {
        once(rank, "/distributedInfo/rank");
        if (f.value().get_int64().get(n) || n < 0) kineto::expected(f.value(), "/distributedInfo/rank", "expected a rank (an integer of at least 0)");
        out_.rank = n;
      } else if (key == "world_size") {
        once(world_size, "/distributedInfo/world_size");
        if (f.value().get_int64().get(n) || n < 1) kineto::expected(f.value(), "/distributedInfo/world_size", "expected an integer of at least 1");
        out_.world_size = n;
      } else if (key == "backend") {
        once(backend, "/distributedInfo/backend");
        std::string_view s;
        if (!ondemand::read_string(f.value(), s)) kineto::expected(f.value(), "/distributedInfo/backend", "expected a string");
        out_.backend = std::string(s);
      }
    }
  }

  // "optraceCapture": the integers and numbers the summary prints, each once; other members are
  // left (a later optrace may say more).
  void read_capture(od::value& v) {
    od::object o;
    if (v.get_object().get(o)) kineto::expected(v, "/optraceCapture", "expected an object");
    CaptureReason c;
    unsigned read = 0;  // a bit per member read: one given twice is refused
    for (auto member : o) {
      if (auto e = member.error()) kineto::malformed("/optraceCapture", e);
      od::field& f = member.value_unsafe();
      std::string_view key;
      if (auto e = f.unescaped_key().get(key)) kineto::malformed("/optraceCapture", e);
      static constexpr std::string_view kKeys[] = {"step", "rank", "first_step", "iterations", "step_ms", "median_ms"};
      unsigned k = 0;
      while (k < 6 && kKeys[k] != key) ++k;
      if (k == 6) continue;
      const std::string path = "/optraceCapture/" + std::string(key);
      if (read & (1u << k)) kineto::duplicate_key(path);
      read |= 1u << k;
      if (k < 4) {
        int64_t* integer[] = {&c.step, &c.rank, &c.first_step, &c.iterations};
        const int64_t least = k == 1 ? -1 : k == 3 ? 1 : 0;
        if (f.value().get_int64().get(*integer[k]) || *integer[k] < least)
          kineto::expected(f.value(), path, ("expected an integer of at least " + std::to_string(least)).c_str());
      } else {
        double& number = k == 4 ? c.step_ms : c.median_ms;
        if (f.value().get_double().get(number) || !(number >= 0)) kineto::expected(f.value(), path, "expected a number of at least 0");
      }
    }
    if (read != 0x3fu)
      optrace::detail::raise_json("/optraceCapture", "expected step, step_ms, median_ms, rank, first_step and iterations");
    out_.capture = c;
  }

  void read_events(od::array& events, const std::string& base) {
    kineto::for_each_event<Event>(
        events, base,
        [](Event& ev, kineto::EventMember& m) {
          if (m.is("ph")) m.string(ev.ph, "ph");
          else if (m.is("cat")) m.string(ev.cat, "cat");
          else if (m.is("name")) m.string(ev.name, "name");
          else if (m.is("ts")) m.number(ev.ts, "ts");  // a time's token, read exactly later (time_of)
          else if (m.is("dur")) m.number(ev.dur, "dur");
          // A thread as written, only compared (thread_key): every event's (1.3% more instructions
          // for a gloo job's traces; reading it only for the events link_kernels joins cost 4.5%).
          else if (m.is("tid")) m.token(ev.tid, "tid");
          else if (m.is("args") && ev.name.data() != nullptr && call_family(ev.name, ev.cat)) read_call_args(m, ev);
          else if (m.is("args") && ev.name.data() != nullptr &&
                   (kineto_names::is_runtime(ev.cat) || is_device_collective(ev.name, ev.cat)))
            read_correlation(m, ev);
          // The rest (pid, tid, other events' args) is skipped by On-Demand, unread.
          return true;
        },
        [this](const Event& ev, const kineto::EventPath& path) {
          if (ev.ph == "X") add(ev, path);
        });
  }

  template <class PathFn>
  void add(const Event& ev, const PathFn& event_path) {
    const std::optional<int64_t> step =
        kineto_names::is(ev.cat, kineto_names::Category::user_annotation) ? step_number(ev.name) : std::nullopt;
    const bool launch = !step && kineto_names::is_runtime(ev.cat) && ev.correlation >= 0;
    if (!step && !launch && !is_collective(ev.name, ev.cat)) return;
    const int64_t start = time_of(ev.ts, "ts", event_path);
    if (launch) {
      out_.launches.push_back({ev.correlation, start, thread_key(ev.tid)});
      return;
    }
    const int64_t dur = time_of(ev.dur, "dur", event_path);
    if (dur < 0) raise_json(event_path() + "/dur", "expected a duration of at least 0, got " + std::string(ev.dur));
    int64_t end = 0;
    if (__builtin_add_overflow(start, dur, &end)) raise_json(event_path() + "/dur", "ts + dur is beyond int64 nanoseconds");
    if (step) {
      out_.steps.push_back({*step, start, end});
      return;
    }
    if (ev.correlation >= 0 && is_device_collective(ev.name, ev.cat)) {
      out_.device_collectives.push_back({start, end, ev.correlation});
      return;
    }
    out_.collectives.push_back({start, end});
    if (const std::optional<CallFamily> family = call_family(ev.name, ev.cat)) {
      RankCalls& c = out_.calls;
      CollectiveCall call;
      call.start_ns = start;
      call.end_ns = end;
      call.family = *family;
      call.thread = thread_key(ev.tid);
      call.seq = ev.seq;
      call.name = intern(std::string(ev.name), c.names, name_index_, "names", event_path, [&] { c.names.emplace_back(ev.name); });
      // A group's key: its name's length, the name, its ranks (no two groups share one).
      // Ranks past kMaxGroupRanksText are cut (torch cuts past 30 ranks): they tell groups of one
      // name apart, and 16,384 ranks' text per trace would outweigh the trace's calls.
      const std::string_view ranks = ev.group_ranks.substr(0, kMaxGroupRanksText);
      std::string group_key = std::to_string(ev.group.size()) + ":";
      group_key.append(ev.group).append(ranks);
      call.group = intern(std::move(group_key), c.groups, group_index_, "process groups", event_path, [&] {
        c.groups.emplace_back(ev.group);
        c.group_ranks.emplace_back(ranks);
      });
      c.calls.push_back(call);
    }
  }

  template <class PathFn>
  static int64_t time_of(std::string_view token, const char* key, const PathFn& event_path) {
    if (token.empty()) raise_json(event_path(), "missing key \"", key, "\"");
    int64_t ns = 0;
    if (!kineto::parse_time_ns(token, ns))
      raise_json(event_path() + "/" + key, "expected a time in microseconds, got " + json::detail::describe_number(token));
    return ns;
  }

  od::parser parser_;
  RankEvents out_;
  std::unordered_map<std::string, uint32_t> name_index_, group_index_;  // out_.calls' tables
};

/// Times each NCCL call (the backend's `nccl:*` range) by the NCCL kernels it launched: a kernel's
/// "correlation" names its launch (a runtime call), and the launch belongs to the call on its
/// thread that started last at or before it, when the launch starts by that call's end. A call with
/// kernels is `on_device`, from its first kernel's start to its last one's end: the ranks wait for
/// each other there, not in the CPU range, which ends when the call is enqueued. Kernels whose
/// launch the trace does not hold link to nothing. Sorts `e.launches` by correlation id. Each
/// kernel costs two binary searches, whatever the calls' ranges.
inline void link_kernels(RankEvents& e) {
  std::vector<Launch>& launches = e.launches;
  std::sort(launches.begin(), launches.end(), [](const Launch& a, const Launch& b) { return a.correlation < b.correlation; });
  std::vector<CollectiveCall*> nccl;  // by thread, then start
  for (CollectiveCall& c : e.calls.calls)
    if (c.family == CallFamily::Backend && e.calls.names[c.name].compare(0, 5, "nccl:") == 0) nccl.push_back(&c);
  if (nccl.empty() || e.device_collectives.empty()) return;
  auto thread_start = [](const CollectiveCall* c) { return std::make_pair(c->thread, c->start_ns); };
  std::stable_sort(nccl.begin(), nccl.end(), [&](const CollectiveCall* a, const CollectiveCall* b) { return thread_start(a) < thread_start(b); });
  for (const DeviceCollective& k : e.device_collectives) {
    const auto launch = std::lower_bound(launches.begin(), launches.end(), k.correlation,
                                         [](const Launch& l, int64_t id) { return l.correlation < id; });
    if (launch == launches.end() || launch->correlation != k.correlation) continue;
    const std::pair<uint64_t, int64_t> at{launch->thread, launch->start_ns};
    auto it = std::upper_bound(nccl.begin(), nccl.end(), at, [&](const std::pair<uint64_t, int64_t>& t, const CollectiveCall* c) {
      return t < thread_start(c);
    });
    if (it == nccl.begin()) continue;
    CollectiveCall& call = **--it;
    if (call.thread != launch->thread || launch->start_ns > call.end_ns) continue;
    if (!call.on_device) {
      call.on_device = true;
      call.device_start_ns = k.start_ns, call.device_end_ns = k.end_ns;
    } else {
      call.device_start_ns = std::min(call.device_start_ns, k.start_ns);
      call.device_end_ns = std::max(call.device_end_ns, k.end_ns);
    }
  }
}

/// Gives each call that writes no "Seq" the one of the record_param_comms (CallFamily::Record) on
/// its thread that started last at or before it, when that one holds the call's start: torch
/// writes the number on its record_param_comms only, which holds the call's nccl:* range and
/// c10d op. Then takes the record_param_comms' own numbers away: all are named
/// record_param_comms, a collective's and its wait's ("Collective name" "wait", numbered as its
/// collective) and a send's alike, so where they are the calls matched they are matched by order,
/// as before torch numbered them. Two binary searches a call.
inline void link_sequence_numbers(RankCalls& calls) {
  std::vector<CollectiveCall*> records;  // by thread, then start
  for (CollectiveCall& c : calls.calls)
    if (c.family == CallFamily::Record && c.seq >= 0) records.push_back(&c);
  if (records.empty()) return;
  auto thread_start = [](const CollectiveCall* c) { return std::make_pair(c->thread, c->start_ns); };
  std::stable_sort(records.begin(), records.end(), [&](const CollectiveCall* a, const CollectiveCall* b) { return thread_start(a) < thread_start(b); });
  for (CollectiveCall& c : calls.calls) {
    if (c.family == CallFamily::Record || c.seq >= 0) continue;
    auto it = std::upper_bound(records.begin(), records.end(), thread_start(&c),
                               [&](const std::pair<uint64_t, int64_t>& t, const CollectiveCall* r) { return t < thread_start(r); });
    if (it == records.begin()) continue;
    const CollectiveCall& r = **--it;
    if (r.thread == c.thread && c.start_ns <= r.end_ns) c.seq = r.seq;
  }
  for (CollectiveCall* r : records) r->seq = -1;
}

/// The steps and collectives of the Kineto trace at `path` (gzip or not): streamed a piece at a
/// time when it is gzip-compressed or of kStreamFromBytes or more (the memory holds the steps and
/// collectives, not the text); what streaming leaves (a layout it cannot cut, or an error, which
/// the whole read then names at its path) is read whole. Throws IoError or JsonError naming the file.
inline RankEvents read_rank_events(const std::string& path) {
  return about_file(path, [&] {
    {
      FileReader in(path);
      if (in.gzip() || in.file_size() >= kStreamFromBytes) {
        Reader reader;
        if (kineto::stream_documents(in, kStreamPieceBytes, [&](const char* data, size_t size, size_t capacity, bool first) {
              if (first) reader = Reader();  // the first piece again, longer
              return reader.feed(data, size, capacity);
            }))
          return reader.take();
        kineto::refuse_unless_json(in);
      }
    }
    std::string text = read_file_maybe_gzip(path, simdjson::SIMDJSON_PADDING);
    if (text.capacity() < text.size() + simdjson::SIMDJSON_PADDING) text.reserve(text.size() + simdjson::SIMDJSON_PADDING);
    Reader reader;
    reader.feed(text.data(), text.size(), text.capacity());
    return reader.take();
  });
}

}  // namespace optrace::detail::rank_summary
