// optrace/rank_summary.hpp: a distributed job's ranks side by side: per step, step time, time in collectives, the slowest rank (no libtorch)
#pragma once
// What `optrace summary --by rank` prints, from the Kineto traces of a job's ranks (one
// `*.pt.trace.json[.gz]` per rank, as torch.profiler's tensorboard_trace_handler writes them): HTA's
// straggler view, for gloo as for NCCL. See docs/cli.md ("summary --by rank").
//
// The rules, decided here once:
// - a trace's rank is its "distributedInfo"'s "rank" (torch.profiler writes it); a trace without
//   one is refused (HTA makes it rank 0, which hides a mistake), and so are two traces of one rank;
// - a step is a `ProfilerStep#N` range (cat user_annotation); its time is the range's duration;
// - its time in collectives is the union of the collectives' intervals (detail/rank_summary/read.hpp
//   lists which events are collectives) clipped to the step: nested and overlapping ranges (the
//   dispatcher's c10d::allreduce_ around the call, gloo:all_reduce on a worker thread, two workers
//   at once) count once, as wall time, so it is never more than the step; a collective's GPU
//   kernel (`nccl*`) counts in the step that launched it (its runtime call, by correlation id),
//   whole, for the GPU runs it when it gets to it, often during the CPU's next step (held at the
//   step's time); one whose launch the trace does not hold counts where it runs, clipped;
// - the slowest rank of a step is the one with the most time *outside* collectives: in a job that
//   synchronizes, every rank's step lasts about as long (the others wait in the collective for
//   the late one), so the step time alone does not tell the straggler; the rank that waits least
//   is the one the others wait for. Ties go to the lowest rank.
// - who kept whom waiting, collective by collective: detail/rank_summary/blame.hpp (each step's
//   collective calls matched across ranks, the wait blamed on the last rank to arrive).

#include <optrace/detail/common/printable.hpp>
#include <optrace/detail/common/text_table.hpp>
#include <optrace/detail/key_averages/table.hpp>
#include <optrace/detail/rank_summary/blame.hpp>
#include <optrace/detail/rank_summary/explain.hpp>
#include <optrace/detail/rank_summary/html.hpp>
#include <optrace/detail/rank_summary/read.hpp>
#include <optrace/error.hpp>
#include <optrace/json/writer.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace optrace {

/// One step of one rank.
struct RankStepTime {
  int64_t step = 0;           ///< the N of ProfilerStep#N
  double step_us = 0;         ///< the step's duration
  double collective_us = 0;   ///< the union of the collectives' intervals within the step
  double outside_us = 0;      ///< the rest of the step: compute, data, waits elsewhere
};

/// One rank's trace, reduced to its steps.
struct RankTrace {
  std::string file;
  int64_t rank = 0;
  int64_t world_size = -1;  ///< as the trace says; -1 when it does not
  std::string backend;      ///< as the trace says ("gloo", "nccl"); "" when it does not
  std::vector<RankStepTime> steps;  ///< by step number
  /// Why the trace was taken, when OnDemandProfiler's slow-step capture took it ("optraceCapture").
  std::optional<detail::rank_summary::CaptureReason> capture;
  /// Its collective calls, each in its step: what RankSummary matches across ranks (waits()).
  detail::rank_summary::StepCalls calls;

  /// The rank's steps from its Kineto trace at `path` (gzip or not; large and gzip files are
  /// streamed: the memory holds the steps and collectives, not the text). Throws IoError
  /// (unreadable), JsonError (malformed, at the event's path) or Error (no distributedInfo rank, a
  /// step twice), naming the file.
  static RankTrace from_kineto_file(const std::string& path) { return from_events(detail::rank_summary::read_rank_events(path), path); }

  /// The rank's steps from what the reader read of its trace (`from_kineto_file`, and the fuzz
  /// target of the reader, which reads text). Throws Error naming `path` as from_kineto_file.
  static RankTrace from_events(detail::rank_summary::RankEvents events, const std::string& path) {
    if (!events.rank)
      detail::raise_about_file<Error>(path, "no \"distributedInfo\" with a \"rank\": torch.profiler writes one in a distributed "
                                            "job's traces (torch.distributed initialized); optrace cannot tell which rank this is");
    RankTrace out;
    out.file = path;
    out.rank = *events.rank;
    out.world_size = events.world_size;
    out.backend = std::move(events.backend);
    out.capture = events.capture;
    detail::rank_summary::link_kernels(events);
    detail::rank_summary::link_sequence_numbers(events.calls);
    out.calls = detail::rank_summary::place_in_steps(std::move(events.calls), events.steps, events.base_ns);
    out.steps = step_times(std::move(events), path);
    return out;
  }

 private:
  static std::vector<RankStepTime> step_times(detail::rank_summary::RankEvents events, const std::string& path) {
    using detail::rank_summary::Interval;
    using detail::rank_summary::StepRange;
    std::vector<Interval>& c = events.collectives;
    // The collectives' kernels, each in the step that launched it (its launch: the runtime call of
    // its correlation id, in the step's range, as step_at places it); one whose launch the trace
    // does not hold, or holds outside every step, counts where it runs, as the ranges do.
    std::map<int64_t, std::vector<Interval>> launched_in;  // step number -> its kernels
    {
      std::vector<detail::rank_summary::Launch>& l = events.launches;
      std::sort(l.begin(), l.end(), [](const auto& a, const auto& b) { return a.correlation < b.correlation; });
      std::vector<StepRange> by_start = events.steps;
      std::stable_sort(by_start.begin(), by_start.end(), [](const StepRange& a, const StepRange& b) { return a.start_ns < b.start_ns; });
      for (const detail::rank_summary::DeviceCollective& k : events.device_collectives) {
        const auto launch = std::lower_bound(l.begin(), l.end(), k.correlation, [](const auto& a, int64_t id) { return a.correlation < id; });
        const StepRange* step = launch != l.end() && launch->correlation == k.correlation
                                    ? detail::rank_summary::step_at(by_start, launch->start_ns)
                                    : nullptr;
        if (step != nullptr) launched_in[step->step].push_back({k.start_ns, k.end_ns});
        else c.push_back({k.start_ns, k.end_ns});
      }
    }
    const std::vector<Interval> merged = detail::rank_summary::union_of(std::move(c));  // disjoint, by start
    // before[k]: the time in merged[0, k), so a step's share is two binary searches, however many
    // intervals it spans (steps that overlap each other would otherwise walk them again and
    // again). Unsigned: the sums wrap on a hostile trace's spans, and the difference a step
    // takes, at most its own length, comes out exact.
    std::vector<uint64_t> before(merged.size() + 1, 0);
    for (size_t k = 0; k < merged.size(); ++k)
      before[k + 1] = before[k] + (static_cast<uint64_t>(merged[k].end_ns) - static_cast<uint64_t>(merged[k].start_ns));
    // The time of the merged intervals within [lo, hi): those from the first that ends after lo to
    // the first that starts at or after hi, the first and last clipped.
    auto covered = [&](int64_t lo, int64_t hi) -> uint64_t {
      const size_t first = static_cast<size_t>(
          std::upper_bound(merged.begin(), merged.end(), lo, [](int64_t t, const Interval& i) { return t < i.end_ns; }) - merged.begin());
      const size_t last = static_cast<size_t>(
          std::lower_bound(merged.begin(), merged.end(), hi, [](const Interval& i, int64_t t) { return i.start_ns < t; }) - merged.begin());
      if (first >= last) return 0;
      uint64_t in = before[last] - before[first];
      if (merged[first].start_ns < lo) in -= static_cast<uint64_t>(lo) - static_cast<uint64_t>(merged[first].start_ns);
      if (merged[last - 1].end_ns > hi) in -= static_cast<uint64_t>(merged[last - 1].end_ns) - static_cast<uint64_t>(hi);
      return in;
    };
    std::sort(events.steps.begin(), events.steps.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
    std::vector<RankStepTime> out;
    for (const detail::rank_summary::StepRange& s : events.steps) {
      if (!out.empty() && out.back().step == s.step)
        detail::raise_about_file<Error>(path, "ProfilerStep#", s.step, " appears twice (two profiling windows in one trace?): give one window per trace");
      const int64_t step_ns = s.end_ns - s.start_ns;
      uint64_t in = covered(s.start_ns, s.end_ns);
      // The step's kernels, whole (they may run past the step's end), less what the ranges above
      // already count of them; the sum held at the step's time.
      if (const auto kernels = launched_in.find(s.step); kernels != launched_in.end()) {
        for (const Interval& b : detail::rank_summary::union_of(std::move(kernels->second))) {
          if (in >= static_cast<uint64_t>(step_ns)) break;
          const int64_t lo = std::max(b.start_ns, s.start_ns), hi = std::min(b.end_ns, s.end_ns);
          const uint64_t extra = (static_cast<uint64_t>(b.end_ns) - static_cast<uint64_t>(b.start_ns)) - (lo < hi ? covered(lo, hi) : 0);
          in = std::min(in + extra, static_cast<uint64_t>(step_ns));
        }
      }
      const int64_t in_collectives = static_cast<int64_t>(in);
      out.push_back({s.step, static_cast<double>(step_ns) / 1000.0, static_cast<double>(in_collectives) / 1000.0,
                     static_cast<double>(step_ns - in_collectives) / 1000.0});
    }
    return out;
  }
};

/// The ranks of a job side by side, per step.
///
/// Example:
///   std::vector<optrace::RankTrace> ranks;
///   for (const std::string& f : files) ranks.push_back(optrace::RankTrace::from_kineto_file(f));
///   optrace::RankSummary summary = optrace::RankSummary::from_ranks(std::move(ranks));
///   std::cout << summary.table();
class RankSummary {
 public:
  /// The summary of `ranks` (any order; sorted by rank here). Throws Error for two traces of one
  /// rank, naming both files: the later one in `ranks` as the one given again. What does not stop the summary but a reader should know (ranks
  /// whose steps differ, ranks missing from the world size) is in notes().
  static RankSummary from_ranks(std::vector<RankTrace> ranks) {
    // Stable: which file is named "again" follows the order given, whatever the number of ranks.
    std::stable_sort(ranks.begin(), ranks.end(), [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
    for (size_t k = 1; k < ranks.size(); ++k)
      if (ranks[k].rank == ranks[k - 1].rank)
        detail::raise_about_file<Error>(ranks[k].file, "rank ", ranks[k].rank, " again: ", ranks[k - 1].file,
                                        " is rank ", ranks[k].rank, " too; give one trace per rank");
    auto by_step = [](const RankStepTime& a, const RankStepTime& b) { return a.step < b.step; };
    for (RankTrace& r : ranks)  // as from_kineto_file makes them; a RankTrace made by hand may not be
      if (!std::is_sorted(r.steps.begin(), r.steps.end(), by_step)) std::stable_sort(r.steps.begin(), r.steps.end(), by_step);
    RankSummary out;
    out.ranks_ = std::move(ranks);
    out.index_steps();
    out.note_differences();
    out.match_collectives();
    return out;
  }

  /// The ranks, by rank.
  const std::vector<RankTrace>& ranks() const { return ranks_; }
  /// Every step number any rank has, ascending.
  std::vector<int64_t> steps() const {
    std::vector<int64_t> out;
    for (const auto& [step, rows] : by_step_) out.push_back(step);
    return out;
  }
  /// The slowest rank of `step` (the most time outside collectives), or nullopt when no rank has it.
  std::optional<int64_t> slowest_rank(int64_t step) const {
    const auto it = by_step_.find(step);
    if (it == by_step_.end()) return std::nullopt;
    const std::pair<int64_t, RankStepTime>* worst = nullptr;
    for (const auto& row : it->second)
      if (worst == nullptr || row.second.outside_us > worst->second.outside_us) worst = &row;
    return worst->first;
  }
  /// One line each: ranks whose steps differ from the others', ranks missing from the world size,
  /// collective calls a rank never reached, calls that do not match across ranks.
  const std::vector<std::string>& notes() const { return notes_; }
  /// Each step's collectives matched across ranks, and the wait each cost blamed on the rank that
  /// arrived last (detail/rank_summary/blame.hpp has the rules).
  const detail::rank_summary::Waits& waits() const { return waits_; }

  /// Says why the last rank arrived late at each of the longest waits (the five table() lists):
  /// what it ran on its way there longer than the median rank, op by op (name and input shapes),
  /// and the time it spent outside any op (detail/rank_summary/explain.hpp has the rules). Reads
  /// the traces of the ranks compared again (RankTrace::file), each once; one that cannot be read
  /// is said in notes() and its collectives go unexplained. table() and to_json() then say it.
  /// Once: a second call does nothing.
  void explain_waits() {
    if (explained_) return;
    explained_ = true;
    auto trace_of = [this](int64_t rank) -> const RankTrace& {
      return *std::lower_bound(ranks_.begin(), ranks_.end(), rank, [](const RankTrace& t, int64_t n) { return t.rank < n; });
    };
    auto base_of = [&](int64_t rank) { return trace_of(rank).calls.base_ns; };
    causes_ = detail::rank_summary::explain(waits_, base_of, [&](int64_t rank, const detail::key_averages::Spans& spans)
                                                                 -> std::optional<detail::key_averages::TraceEvents> {
      const RankTrace& r = trace_of(rank);
      try {
        return detail::about_file(r.file, [&] { return detail::key_averages::read_trace_events(r.file, spans); });
      } catch (const Error& e) {
        notes_.push_back("rank " + std::to_string(rank) + "'s trace could not be read again to say why it was late or " +
                         "how the median rank compares: " + detail::printable(e.what_without_prefix()));
        return std::nullopt;
      }
    });
  }
  /// What explain_waits() found: per collective explained, the rows of why.
  const std::vector<detail::rank_summary::WaitCause>& causes() const { return causes_; }

  /// The table: the files per rank, a row per step and rank (times in ms, the slowest rank marked),
  /// then the slowest rank per step.
  std::string table() const {
    std::ostringstream out;
    for (const RankTrace& r : ranks_) {
      out << "rank " << r.rank << ": " << detail::printable(r.file) << describe_world(r) << "\n";
      if (r.capture) out << "  " << describe_capture(*r.capture) << "\n";
    }
    detail::TextTable t({"step", "rank", "step ms", "collectives ms", "share", "outside ms", ""},
                        {"step", "rank", "step ms", "collectives ms", "share", "outside ms"});
    for (const auto& [step, rows] : by_step_) {
      const std::optional<int64_t> slowest = slowest_rank(step);
      for (const auto& [rank, s] : rows)
        t.row({std::to_string(step), std::to_string(rank), detail::fixed(s.step_us / 1000, 3), detail::fixed(s.collective_us / 1000, 3),
               detail::percent(s.collective_us, s.step_us), detail::fixed(s.outside_us / 1000, 3),
               rows.size() > 1 && slowest == rank ? "slowest" : ""});
    }
    if (by_step_.empty()) out << "no ProfilerStep#N ranges in any trace: no steps to compare\n";
    else t.print(out);
    if (ranks_.size() > 1 && !by_step_.empty()) out << slowest_line();
    if (ranks_.size() > 1 && !waits_.collectives.empty()) out << waits_text();
    return out.str();
  }

  /// The same as JSON: {"ranks": [{"rank", "file", "world_size", "backend", "capture" (when the
  /// trace has one: {"step", "step_ms", "median_ms", "rank", "first_step", "iterations"}), "steps": [{"step",
  /// "step_us", "collective_us", "outside_us"}]}], "steps": [{"step", "ranks", "slowest_rank"}],
  /// "waits": {"ranks": [{"rank", "caused_us", "blamed", "waited_us", "steps", "by_step": [{"step",
  /// "caused_us", "waited_us"}]}], "collectives":
  /// [{"step", "group", "index", "seq" (its number in the group's sequence, by which it was matched; null: matched by index), "name", "ranks", "last_rank", "max_wait_us", "total_wait_us",
  /// "late", "blamed", "blamed_rank", "on_device" (timed by its NCCL kernels), "via" (null, or the collective before where the last rank
  /// waited for the blamed one: {"step", "group", "index"})}], "matched_by_seq" (how many collectives were), "clocks_checked", "clock_gaps": [{"later_rank", "earlier_rank",
  /// "at_least_us", "step", "group", "index", "name"}], "clock_offsets" (from NCCL kernels' ends): [{"rank", "offset_us", "calls"}], "causes" (explain_waits(); else empty): [{"step", "group", "index", "rank", "on_device" (the way is the GPU's), "way_us",
  /// "median_rank", "median_way_us", "set_out_later_us", "set_out_late" (whether that is past noise, as the text says it), "rows": [{"name", "input_shapes", "outside", "excess_us",
  /// "rank_us", "median_us"}], and where on_device: "cpu_way_us", "median_cpu_way_us", "cpu_rows" (the ways on the CPU)}]}, "notes": [...]}. `indent` > 0 pretty-prints.
  std::string to_json(int indent = 0) const {
    json::Writer w(indent);
    w.begin_object().key("ranks").begin_array();
    for (const RankTrace& r : ranks_) {
      w.begin_object().key("rank").value(r.rank).key("file").value(r.file).key("world_size").value(r.world_size);
      w.key("backend").value(r.backend);
      if (r.capture)
        w.key("capture").begin_object().key("step").value(r.capture->step).key("step_ms").value(r.capture->step_ms)
            .key("median_ms").value(r.capture->median_ms).key("rank").value(r.capture->rank)
            .key("first_step").value(r.capture->first_step).key("iterations").value(r.capture->iterations).end_object();
      w.key("steps").begin_array();
      for (const RankStepTime& s : r.steps)
        w.begin_object().key("step").value(s.step).key("step_us").value(s.step_us).key("collective_us").value(s.collective_us)
            .key("outside_us").value(s.outside_us).end_object();
      w.end_array().end_object();
    }
    w.end_array().key("steps").begin_array();
    for (const auto& [step, rows] : by_step_) {
      w.begin_object().key("step").value(step).key("ranks").begin_array();
      for (const auto& [rank, s] : rows) w.value(rank);
      w.end_array().key("slowest_rank").value(*slowest_rank(step)).end_object();
    }
    w.end_array().key("waits").begin_object().key("ranks").begin_array();
    for (const detail::rank_summary::RankWait& r : waits_.ranks) {
      w.begin_object().key("rank").value(r.rank).key("caused_us").value(us(r.caused_ns)).key("blamed").value(r.blamed);
      w.key("waited_us").value(us(r.waited_ns)).key("steps").begin_array();
      for (int64_t step : r.steps) w.value(step);
      w.end_array().key("by_step").begin_array();
      for (const detail::rank_summary::StepWait& s : r.by_step)
        w.begin_object().key("step").value(s.step).key("caused_us").value(us(s.caused_ns)).key("waited_us").value(us(s.waited_ns)).end_object();
      w.end_array().end_object();
    }
    w.end_array().key("collectives").begin_array();
    for (const detail::rank_summary::CollectiveWait& c : waits_.collectives) {
      w.begin_object().key("step").value(c.step).key("group").value(c.group).key("index").value(c.index).key("seq");
      if (c.seq < 0) w.null();
      else w.value(c.seq);
      w.key("name").value(c.name)
          .key("ranks").value(c.ranks).key("last_rank").value(c.last_rank).key("max_wait_us").value(us(c.max_wait_ns))
          .key("total_wait_us").value(us(c.total_wait_ns)).key("late").value(c.late).key("blamed").value(c.blamed())
          .key("blamed_rank").value(c.blamed_rank).key("on_device").value(c.on_device).key("via");
      if (c.via < 0) {
        w.null();
      } else {
        const detail::rank_summary::CollectiveWait& v = waits_.collectives[static_cast<size_t>(c.via)];
        w.begin_object().key("step").value(v.step).key("group").value(v.group).key("index").value(v.index).end_object();
      }
      w.end_object();
    }
    w.end_array().key("matched_by_seq").value(waits_.by_seq).key("clocks_checked").value(waits_.clock_checked).key("clock_gaps").begin_array();
    for (const detail::rank_summary::ClockGap& g : waits_.clock_gaps)
      w.begin_object().key("later_rank").value(g.later).key("earlier_rank").value(g.earlier).key("at_least_us").value(us(g.ns))
          .key("step").value(g.step).key("group").value(g.group).key("index").value(g.index).key("name").value(g.name).end_object();
    w.end_array().key("clock_offsets").begin_array();
    for (const detail::rank_summary::ClockOffset& o : waits_.clock_offsets)
      w.begin_object().key("rank").value(o.rank).key("offset_us").value(us(o.ns)).key("calls").value(o.calls).end_object();
    w.end_array().key("causes").begin_array();
    for (const detail::rank_summary::WaitCause& why : causes_) {
      if (!why.read) continue;
      const detail::rank_summary::CollectiveWait& c = waits_.collectives[why.collective];
      w.begin_object().key("step").value(c.step).key("group").value(c.group).key("index").value(c.index)
          .key("rank").value(c.last.rank).key("on_device").value(c.on_device).key("way_us").value(us(c.last.ns())).key("median_rank").value(c.median.rank)
          .key("median_way_us").value(us(c.median.ns())).key("set_out_later_us").value(us(set_out_later(c)))
          .key("set_out_late").value(set_out_late(c))
          .key("rows");
      auto rows = [&w](const std::vector<detail::rank_summary::OpExcess>& list) {
        w.begin_array();
        for (const detail::rank_summary::OpExcess& row : list)
          w.begin_object().key("name").value(row.name).key("input_shapes").value(row.input_shapes).key("outside").value(row.outside)
              .key("excess_us").value(us(row.excess_ns())).key("rank_us").value(us(row.late_ns)).key("median_us").value(us(row.median_ns))
              .end_object();
        w.end_array();
      };
      rows(why.rows);
      if (c.on_device) {
        w.key("cpu_way_us").value(us(c.last_cpu.ns())).key("median_cpu_way_us").value(us(c.median_cpu.ns())).key("cpu_rows");
        rows(why.cpu_rows);
      }
      w.end_object();
    }
    w.end_array().end_object().key("notes").begin_array();
    for (const std::string& n : notes_) w.value(n);
    w.end_array().end_object();
    return w.take();
  }

  /// The same as one self-contained HTML page (detail/rank_summary/html.hpp): ranks x steps coloured
  /// by the wait each caused the others, a click on a cell for its times, the step's collectives
  /// and why the rank was late (explain_waits(), when called before). No network: it opens from a
  /// file anywhere, and a trace's names are shown as text, never run.
  std::string to_html() const { return detail::rank_summary::html_page(to_json()); }

 private:
  static std::string describe_capture(const detail::rank_summary::CaptureReason& c) {
    // The ring's steps hold the slow step; a window's follow it.
    return std::string(c.first_step > c.step ? "captured after" : "captured with") + " a slow step: step " +
           std::to_string(c.step) + " took " + detail::fixed(c.step_ms, 1) +
           " ms, the median " + detail::fixed(c.median_ms, 1) + " ms" +
           (c.rank >= 0 ? " (seen by rank " + std::to_string(c.rank) + ")" : std::string()) + "; steps " +
           std::to_string(c.first_step) + ".." + std::to_string(c.first_step + c.iterations - 1);
  }

  static std::string describe_world(const RankTrace& r) {
    std::string out;
    if (!r.backend.empty()) out += detail::printable(r.backend);
    if (r.world_size > 0) out += (out.empty() ? "" : ", ") + std::string("world size ") + std::to_string(r.world_size);
    return out.empty() ? out : " (" + out + ")";
  }

  static double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

  void match_collectives() {
    std::vector<std::vector<int64_t>> steps(ranks_.size());
    std::vector<detail::rank_summary::RankInput> inputs;
    for (size_t k = 0; k < ranks_.size(); ++k) {
      for (const RankStepTime& s : ranks_[k].steps) steps[k].push_back(s.step);
      inputs.push_back({ranks_[k].rank, &steps[k], &ranks_[k].calls});
    }
    waits_ = detail::rank_summary::blame(inputs);
    notes_.insert(notes_.end(), waits_.notes.begin(), waits_.notes.end());
  }

  // A collective as the text names it: its place among its group's calls in the step, and its
  // number in the group's sequence where it was matched by that.
  static std::string number(int64_t index, int64_t seq) {
    return "#" + std::to_string(index) + (seq >= 0 ? " (seq " + std::to_string(seq) + ")" : std::string());
  }

  // The ranks that kept others waiting (up to 10, the most first), the longest waits (up to 5),
  // and the rank the others waited for most, in time: not in steps (slowest_line's count).
  std::string waits_text() const {
    using detail::rank_summary::CollectiveWait;
    using detail::rank_summary::RankWait;
    const double noise_ms = static_cast<double>(detail::rank_summary::kNoiseNs) / 1e6;
    const double device_noise_ms = static_cast<double>(detail::rank_summary::kDeviceNoiseNs) / 1e6;
    const bool gpu = waits_.on_device > 0;
    const size_t n = waits_.collectives.size();
    const std::string matched = waits_.by_seq == 0 ? "each step's collective calls matched across ranks in order"
                                : static_cast<size_t>(waits_.by_seq) == n ? "collective calls matched across ranks by their groups' sequence numbers"
                                : std::to_string(waits_.by_seq) + " of " + std::to_string(n) +
                                      " collectives matched across ranks by their groups' sequence numbers, the rest in order within each step";
    std::string out = "\nwaits at collectives (" + matched + ", " +
                      std::string(waits_.groups_named ? "per process group" : "the traces name no process group") +
                      (gpu ? "; " + std::to_string(waits_.on_device) + " of " + std::to_string(waits_.collectives.size()) +
                                 " timed on the GPU, by the NCCL kernels each rank's call launched" : std::string()) +
                      "; the last rank is blamed where at most half the ranks arrived late, " + detail::fixed(noise_ms, 0) +
                      " ms or more after the others" + (gpu ? " (" + detail::fixed(device_noise_ms, 1) + " ms on the GPU)" : std::string()) +
                      " and after a gap as wide as the others' spread):\n";
    std::vector<const RankWait*> blamed;
    for (const RankWait& r : waits_.ranks)
      if (r.blamed > 0) blamed.push_back(&r);
    if (blamed.empty())
      return out + "no collective had ranks arriving late (their waits are the ranks' spread: noise): no rank to blame\n" + clock_text();
    std::stable_sort(blamed.begin(), blamed.end(), [](const RankWait* a, const RankWait* b) { return a->caused_ns > b->caused_ns; });
    detail::TextTable t({"rank", "others waited ms", "at", "steps", "own waits ms"}, {"rank", "others waited ms", "at", "own waits ms"});
    for (size_t k = 0; k < blamed.size() && k < 10; ++k) {
      const RankWait& r = *blamed[k];
      t.row({std::to_string(r.rank), detail::fixed(us(r.caused_ns) / 1000, 3), std::to_string(r.blamed), step_list(r.steps, r.steps.size()),
             detail::fixed(us(r.waited_ns) / 1000, 3)});
    }
    std::ostringstream table;
    t.print(table);
    out += table.str();
    for (size_t k : detail::rank_summary::longest_waits(waits_, detail::rank_summary::kExplained)) {
      const CollectiveWait& c = waits_.collectives[k];
      out += "  step " + std::to_string(c.step) + ", " + detail::printable(c.name) + " " + number(c.index, c.seq) +
             detail::rank_summary::group_label(c.group) + ": rank " + std::to_string(c.last_rank) +
             (c.late > 1 ? " (the last of " + std::to_string(c.late) + " late ranks)" : std::string()) +
             " arrived " + detail::fixed(us(c.max_wait_ns) / 1000, 3) + " ms after the first" + (c.on_device ? " on the GPU" : "") +
             "; " + std::to_string(c.ranks - 1) +
             " other rank(s) waited " + detail::fixed(us(c.total_wait_ns) / 1000, 3) + " ms in all\n";
      if (c.via >= 0) {
        const CollectiveWait& v = waits_.collectives[static_cast<size_t>(c.via)];
        out += "    it had waited for rank " + std::to_string(c.blamed_rank) + " at its collective before (step " +
               std::to_string(v.step) + ", " + detail::printable(v.name) + " " + number(v.index, v.seq) +
               detail::rank_summary::group_label(v.group) + "), which made most of its lag here: the wait is rank " +
               std::to_string(c.blamed_rank) + "'s\n";
      }
      for (const detail::rank_summary::WaitCause& why : causes_)
        if (why.collective == k) out += cause_text(c, why);
    }
    const RankWait& most = *blamed.front();
    return out + "the rank the others waited for most: " + std::to_string(most.rank) + " (" +
           detail::fixed(us(most.caused_ns) / 1000, 3) + " ms at " + std::to_string(most.blamed) + " collective(s), steps " +
           step_list(most.steps, most.steps.size()) + ")\n" + clock_text();
  }

  // What the collectives prove of the ranks' clocks (Waits::clock_gaps, up to 5), or one line
  // that they prove nothing wrong; "" where no collective could be checked.
  std::string clock_text() const {
    if (waits_.clock_checked == 0) return "";
    const int64_t kernels = waits_.clock_checked_on_device;
    const std::string checked = std::to_string(waits_.clock_checked) + " all-reduce, all-gather, reduce-scatter, all-to-all or barrier call(s)" +
                                " checked (" + (kernels == 0 ? "gloo's ranges" : kernels == waits_.clock_checked ? "NCCL's kernels" : "gloo's ranges, NCCL's kernels") + ")";
    const std::string offsets = offsets_text();
    if (waits_.clock_gaps.empty())
      return "clocks: at the " + checked + ", no rank arrived after another's call had ended: consistent with one clock\n" + offsets;
    std::string out = "clocks: at the " + checked + ", ranks arrived after another's call had ended, which one clock cannot show; "
                      "the waits above are read on each rank's own clock:\n";
    for (size_t k = 0; k < waits_.clock_gaps.size() && k < 5; ++k) {
      const detail::rank_summary::ClockGap& g = waits_.clock_gaps[k];
      out += "  rank " + std::to_string(g.later) + "'s clock reads at least " + detail::fixed(us(g.ns) / 1000, 3) + " ms later than rank " +
             std::to_string(g.earlier) + "'s (step " + std::to_string(g.step) + ", " + detail::printable(g.name) + " " +
             number(g.index, g.seq) + detail::rank_summary::group_label(g.group) + ")\n";
    }
    if (waits_.clock_gaps.size() > 5) out += "  ... and " + std::to_string(waits_.clock_gaps.size() - 5) + " more ranks\n";
    return out + offsets;
  }

  // What the NCCL kernels' ends estimate of the ranks' clocks (Waits::clock_offsets): the ranks
  // whose clock reads kDeviceNoiseNs or more off the others' (up to 5, the farthest first), or one
  // line that none does; "" where no kernels' ends were read.
  std::string offsets_text() const {
    const auto& all = waits_.clock_offsets;
    if (all.empty()) return "";
    std::vector<const detail::rank_summary::ClockOffset*> off;
    for (const auto& o : all)
      if (o.ns >= detail::rank_summary::kDeviceNoiseNs || o.ns <= -detail::rank_summary::kDeviceNoiseNs) off.push_back(&o);
    auto magnitude = [](int64_t ns) { return ns < 0 ? -static_cast<double>(ns) : static_cast<double>(ns); };
    const std::string head = "clock offsets, estimated from the ends of NCCL's kernels (those of a call end together; the median over " +
                             std::to_string(waits_.clock_checked_on_device) + " call(s)): ";
    if (off.empty()) {  // every |ns| is under kDeviceNoiseNs
      int64_t widest = 0;
      for (const auto& o : all) widest = std::max(widest, o.ns < 0 ? -o.ns : o.ns);
      return head + "every rank's clock reads within " + detail::fixed(us(widest) / 1000, 3) + " ms of the others'\n";
    }
    std::stable_sort(off.begin(), off.end(), [&](const auto* a, const auto* b) { return magnitude(a->ns) > magnitude(b->ns); });
    std::string out = head + std::to_string(off.size()) + " rank(s) read " +
                      detail::fixed(us(detail::rank_summary::kDeviceNoiseNs) / 1000, 1) + " ms or more off the others':\n";
    for (size_t k = 0; k < off.size() && k < 5; ++k)
      out += "  rank " + std::to_string(off[k]->rank) + "'s clock reads " + detail::fixed(magnitude(off[k]->ns) / 1e6, 3) + " ms " +
             (off[k]->ns > 0 ? "later" : "earlier") + " (median of " + std::to_string(off[k]->calls) + " call(s))\n";
    if (off.size() > 5) out += "  ... and " + std::to_string(off.size() - 5) + " more ranks\n";
    return out;
  }

  // How much later than the median rank c's last rank set out on its way.
  static int64_t set_out_later(const detail::rank_summary::CollectiveWait& c) {
    return detail::rank_summary::saturating_sub(c.last.since_ns, c.median.since_ns);
  }

  // A name cut to kMaxWhyName code points and "...": a kernel's C++ signature runs to 2,000 (to_json has it whole).
  static constexpr size_t kMaxWhyName = 100;
  static std::string cut_name(const std::string& name) {
    return detail::key_averages::code_points(name) > kMaxWhyName ? detail::key_averages::first_code_points(name, kMaxWhyName - 3) + "..." : name;
  }

  // Whether it set out late enough to say so: past noise on the clock c is timed by.
  static bool set_out_late(const detail::rank_summary::CollectiveWait& c) {
    return set_out_later(c) >= detail::rank_summary::least_gap_ns(c.on_device);
  }

  // Why c's last rank was late: its way there against the median rank's, and the rows of `why`.
  static std::string cause_text(const detail::rank_summary::CollectiveWait& c, const detail::rank_summary::WaitCause& why) {
    if (!why.read) return "";
    const std::string median = "rank " + std::to_string(c.median.rank);
    std::string out;
    if (set_out_late(c))
      out += "    it set out " + detail::fixed(us(set_out_later(c)) / 1000, 3) + " ms after the median rank (" + median +
             "): its step, or its collective before, ended later\n";
    out += way_text(std::string("    its way there") + (c.on_device ? " on the GPU" : ""), c.last, c.median, why.rows, c.on_device);
    if (c.on_device) out += way_text("    on the CPU, its way to the call", c.last_cpu, c.median_cpu, why.cpu_rows, false);
    return out;
  }

  // "<what> took X ms, the median rank's (rank M) Y ms; rank L spent more time:" and `rows`, on the
  // GPU (`on_device`: kernels, and its idle time) or the CPU (ops, and the time outside them).
  static std::string way_text(const std::string& what, const detail::rank_summary::Approach& last,
                              const detail::rank_summary::Approach& median, const std::vector<detail::rank_summary::OpExcess>& rows,
                              bool on_device) {
    const std::string late = "rank " + std::to_string(last.rank);
    std::string out = what + " took " + detail::fixed(us(last.ns()) / 1000, 3) + " ms, the median rank's (rank " +
                      std::to_string(median.rank) + ") " + detail::fixed(us(median.ns()) / 1000, 3) + " ms";
    if (rows.empty()) return out + "; no " + (on_device ? "kernel" : "op") + " took " + late + " longer there\n";
    out += "; " + late + (on_device ? "'s GPU" : "") + " spent more time:\n";
    for (const detail::rank_summary::OpExcess& row : rows)
      out += "      " + detail::fixed(us(row.excess_ns()) / 1000, 3) + " ms more " +
             (row.outside ? std::string(on_device ? "outside any kernel (the GPU idle)" : "outside any op")
                          : "in " + detail::printable(cut_name(row.name)) +
                                (row.input_shapes.empty() ? "" : " " + detail::printable(row.input_shapes))) +
             " (" + detail::fixed(us(row.late_ns) / 1000, 3) + " against " + detail::fixed(us(row.median_ns) / 1000, 3) + " ms)\n";
    return out;
  }

  // "3, 4, 5": the first kListed of `count` steps (`steps` holds at least those), then
  // ", ... (N in all)" when there are more.
  static constexpr size_t kListed = 8;
  static std::string step_list(const std::vector<int64_t>& steps, size_t count) {
    std::string out;
    for (size_t k = 0; k < steps.size() && k < kListed; ++k) out += (k ? ", " : "") + std::to_string(steps[k]);
    if (count > kListed) out += ", ... (" + std::to_string(count) + " in all)";
    return out;
  }

  void index_steps() {
    for (const RankTrace& r : ranks_)
      for (const RankStepTime& s : r.steps) by_step_[s.step].emplace_back(r.rank, s);
  }

  // Per step the slowest rank (up to 20 steps: beyond, one line would not be read), then the rank
  // slowest in the most steps.
  std::string slowest_line() const {
    std::map<int64_t, int64_t> times_slowest;
    std::string per_step;
    for (const auto& [step, rows] : by_step_) {
      const int64_t r = *slowest_rank(step);
      ++times_slowest[r];
      per_step += " " + std::to_string(step) + ": " + std::to_string(r) + ",";
    }
    per_step.pop_back();
    std::string out;
    if (by_step_.size() <= 20) out = "slowest rank per step:" + per_step + "\n";
    const auto most = std::max_element(times_slowest.begin(), times_slowest.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    return out + "slowest rank: " + std::to_string(most->first) + " (in " + std::to_string(most->second) + " of " +
           std::to_string(by_step_.size()) + " steps; the most time outside collectives: the others wait for it)\n";
  }

  // Ranks lacking steps that others have; ranks that the world size says exist but no trace is of.
  void note_differences() {
    for (const RankTrace& r : ranks_) {
      std::vector<int64_t> lacking;  // the first kListed
      size_t count = 0;
      // Both in step order (r.steps are sorted, by_step_ is a map): one walk of each.
      auto own = r.steps.begin();
      for (const auto& [step, rows] : by_step_) {
        while (own != r.steps.end() && own->step < step) ++own;
        if (own == r.steps.end() || own->step != step)
          if (++count <= kListed) lacking.push_back(step);
      }
      if (count > 0)
        notes_.push_back("rank " + std::to_string(r.rank) + " (" + detail::printable(r.file) + ") lacks steps " + step_list(lacking, count) +
                         " that other ranks have: its window differs; those steps compare the ranks that have them");
    }
    int64_t world = 0;
    for (const RankTrace& r : ranks_) world = std::max(world, r.world_size);
    if (world > static_cast<int64_t>(ranks_.size()))
      notes_.push_back(std::to_string(ranks_.size()) + " traces of a world of " + std::to_string(world) +
                       " ranks: the slowest rank is among those given");
  }

  std::vector<RankTrace> ranks_;
  std::map<int64_t, std::vector<std::pair<int64_t, RankStepTime>>> by_step_;  // step -> (rank, its time), by rank
  std::vector<std::string> notes_;
  detail::rank_summary::Waits waits_;
  std::vector<detail::rank_summary::WaitCause> causes_;  // explain_waits()
  bool explained_ = false;
};

}  // namespace optrace
