// optrace/detail/rank_summary/explain.hpp: why a rank arrived late at a collective: what it ran on its way there against the median rank (no libtorch)
#pragma once
// What `summary --by rank` says of why the rank the others waited for was late (issue 59), decided
// here once:
// - a rank's way to a collective is [since, arrival) (blame.hpp's Approach): from the end of its
//   previous call in the step, or the step's start, to its call's start;
// - what it ran there: every CPU event of its trace (key_averages' reader: ops, annotations,
//   runtime calls; not the ProfilerStep#N that holds them all), clipped to the way, with torch's
//   self time (an event's time less the events nested directly in it on its thread:
//   key_averages' aggregate), per name and input shapes; and the time no event covers on any
//   thread, "outside any op" (Python, a sleep, a wait on a data loader);
// - a collective timed on the GPU (blame.hpp's CollectiveWait::on_device: NCCL's kernels) has its
//   ways on the GPU: what ran there is the rank's kernels, copies and sets (not the GPU
//   annotations over them), each its time within the way, per name; "outside any op" is the time
//   no kernel ran, the GPU idle (waiting for the CPU to launch its work, or for a copy);
//   and then, as the GPU idle is the CPU launching late, the same two ranks' ways on the CPU to
//   their calls' ranges, read as above (WaitCause::cpu_rows);
// - the late rank's times less the median rank's (blame.hpp's CollectiveWait::median) are the
//   excess; rows with the largest excess first, those under kMinExcessNs left out.
// Only the traces of the ranks compared are read again, each once, one at a time, keeping only the
// events on the ways: a summary of any number of ranks reads ten files more at most (kExplained
// collectives), in the memory of those events.

#include <optrace/detail/key_averages/aggregate.hpp>
#include <optrace/detail/key_averages/read.hpp>
#include <optrace/detail/rank_summary/blame.hpp>
#include <optrace/detail/rank_summary/read.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace optrace::detail::rank_summary {

/// The collectives explained: the longest waits, as many as the table lists.
inline constexpr size_t kExplained = 5;
/// Rows explained per collective, and the least excess a row needs.
inline constexpr size_t kCauseRows = 5;
inline constexpr int64_t kMinExcessNs = 10'000;

/// What a rank ran on its way to a collective.
struct WayOps {
  std::map<std::pair<std::string, std::string>, int64_t> self_ns;  ///< (name, input shapes) -> self time
  int64_t outside_ns = 0;  ///< the time no event covers, on any thread
};

/// What `trace` ran in [from_ns, to_ns) of the epoch clock: on the CPU, or on the GPU (`on_device`;
/// see above).
inline WayOps ops_on_way(const key_averages::TraceEvents& trace, int64_t from_ns, int64_t to_ns, bool on_device = false) {
  // On the events' clock: nanoseconds from trace.time_zero_ns (their microseconds hold them exactly).
  const int64_t from = saturating_sub(from_ns, trace.time_zero_ns), to = saturating_sub(to_ns, trace.time_zero_ns);
  WayOps out;
  std::vector<TimedEvent> clipped;
  key_averages::Spans spans;
  for (const TimedEvent& e : trace.events) {
    if (on_device ? !e.on_device || e.user_annotation : e.on_device || (e.user_annotation && step_number(e.name))) continue;
    const double start = std::round(e.start_us * 1000.0), end = start + std::round(e.dur_us * 1000.0);
    if (!(end > static_cast<double>(from) && start < static_cast<double>(to))) continue;
    // Clamped in doubles: a hostile event's bounds may lie beyond int64.
    const int64_t s = start <= static_cast<double>(from) ? from : static_cast<int64_t>(start);
    const int64_t t = end >= static_cast<double>(to) ? to : static_cast<int64_t>(end);
    if (t <= s) continue;
    TimedEvent c = e;
    c.start_us = static_cast<double>(s) / 1000.0;
    c.dur_us = static_cast<double>(t - s) / 1000.0;
    c.correlation_id = c.linked_correlation_id = 0;  // device time is not what is asked
    clipped.push_back(std::move(c));
    spans.emplace_back(s, t);
  }
  int64_t covered = 0;
  for (const auto& [s, t] : key_averages::union_of(std::move(spans))) covered = saturating_add(covered, saturating_sub(t, s));
  out.outside_ns = std::max<int64_t>(0, saturating_sub(saturating_sub(to, from), covered));
  if (on_device) {  // kernels nest in nothing: each its own time
    for (const TimedEvent& e : clipped) out.self_ns[{e.name, ""}] += std::llround(e.dur_us * 1000.0);
    return out;
  }
  for (const KeyAverage& row : key_averages::aggregate(std::move(clipped), {}, GroupBy::InputShape, 0))
    out.self_ns[{row.name, row.input_shapes}] += std::llround(row.self_cpu_us * 1000.0);
  return out;
}

/// One row of why: what the late rank ran longer than the median rank.
struct OpExcess {
  std::string name, input_shapes;  ///< "" and "" for the time outside any op
  bool outside = false;            ///< the time no event covers
  int64_t late_ns = 0, median_ns = 0;
  int64_t excess_ns() const { return saturating_sub(late_ns, median_ns); }
};

/// Why one collective's last rank arrived late.
struct WaitCause {
  size_t collective = 0;  ///< its index in Waits::collectives
  bool read = false;      ///< both ranks' traces were read again (else the rows are empty)
  std::vector<OpExcess> rows;  ///< the largest excess first (see above)
  std::vector<OpExcess> cpu_rows;  ///< where the collective is on_device: the rows of the ways on the CPU
};

/// The rows of `late` against `median` (see above).
inline std::vector<OpExcess> excess(const WayOps& late, const WayOps& median) {
  std::vector<OpExcess> rows;
  auto consider = [&rows](OpExcess row) {
    if (row.excess_ns() >= kMinExcessNs) rows.push_back(std::move(row));
  };
  for (const auto& [key, ns] : late.self_ns) {
    const auto it = median.self_ns.find(key);
    consider({key.first, key.second, false, ns, it == median.self_ns.end() ? 0 : it->second});
  }
  consider({"", "", true, late.outside_ns, median.outside_ns});
  std::stable_sort(rows.begin(), rows.end(), [](const OpExcess& a, const OpExcess& b) { return a.excess_ns() > b.excess_ns(); });
  if (rows.size() > kCauseRows) rows.resize(kCauseRows);
  return rows;
}

/// The indices of the blamed collectives of `waits` with the longest waits, longest first, at most `n`.
inline std::vector<size_t> longest_waits(const Waits& waits, size_t n) {
  std::vector<size_t> out;
  for (size_t k = 0; k < waits.collectives.size(); ++k)
    if (waits.collectives[k].blamed()) out.push_back(k);
  std::stable_sort(out.begin(), out.end(),
                   [&](size_t a, size_t b) { return waits.collectives[a].max_wait_ns > waits.collectives[b].max_wait_ns; });
  if (out.size() > n) out.resize(n);
  return out;
}

/// Why the last ranks arrived late at the kExplained longest waits of `waits`: the traces of the
/// ranks compared are read again, each once: `read(rank, spans)` gives the events of its trace
/// that overlap `spans` (key_averages::Spans, on the trace's own clock: the ways, less the rank's
/// StepCalls::base_ns from `base_of(rank)`), or nullopt when it cannot (the caller says why); the
/// causes of that rank are then not `read`.
template <class BaseOf, class Read>
std::vector<WaitCause> explain(const Waits& waits, const BaseOf& base_of, const Read& read) {
  std::vector<WaitCause> out;
  struct Way {
    size_t cause;
    bool late;
    int64_t from_ns, to_ns;
    bool on_device;
    bool cpu_of_device;  // the CPU way of a collective timed on the GPU
  };
  std::map<int64_t, std::vector<Way>> ways;  // rank -> the ways to measure in its trace
  for (size_t k : longest_waits(waits, kExplained)) {
    const CollectiveWait& c = waits.collectives[k];
    if (c.median.rank < 0 || c.via >= 0) continue;  // passed on: the collective it passes to says why
    ways[c.last.rank].push_back({out.size(), true, c.last.since_ns, c.last.arrival_ns, c.on_device, false});
    ways[c.median.rank].push_back({out.size(), false, c.median.since_ns, c.median.arrival_ns, c.on_device, false});
    if (c.on_device) {
      ways[c.last_cpu.rank].push_back({out.size(), true, c.last_cpu.since_ns, c.last_cpu.arrival_ns, false, true});
      ways[c.median_cpu.rank].push_back({out.size(), false, c.median_cpu.since_ns, c.median_cpu.arrival_ns, false, true});
    }
    out.push_back({k, true, {}, {}});
  }
  std::vector<std::pair<WayOps, WayOps>> measured(out.size()), measured_cpu(out.size());  // late, median
  for (const auto& [rank, list] : ways) {
    // The ways on the trace's clock, merged: the reader keeps what overlaps them.
    const int64_t base = base_of(rank);
    key_averages::Spans spans;
    for (const Way& w : list) spans.emplace_back(saturating_sub(w.from_ns, base), saturating_sub(w.to_ns, base));
    const std::optional<key_averages::TraceEvents> trace = read(rank, key_averages::union_of(std::move(spans)));
    for (const Way& w : list) {
      if (!trace) out[w.cause].read = false;
      else {
        auto& pair = (w.cpu_of_device ? measured_cpu : measured)[w.cause];
        (w.late ? pair.first : pair.second) = ops_on_way(*trace, w.from_ns, w.to_ns, w.on_device);
      }
    }
  }
  for (size_t k = 0; k < out.size(); ++k) {
    if (!out[k].read) continue;
    out[k].rows = excess(measured[k].first, measured[k].second);
    if (waits.collectives[out[k].collective].on_device) out[k].cpu_rows = excess(measured_cpu[k].first, measured_cpu[k].second);
  }
  return out;
}

}  // namespace optrace::detail::rank_summary
