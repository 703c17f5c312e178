// optrace/detail/rank_summary/blame.hpp: every collective matched across ranks, and the wait it cost blamed on the rank that arrived last (no libtorch)
#pragma once
// What `summary --by rank` says of who kept whom waiting (issue 59), decided here once:
// - a rank's calls are one family of ranges (read.hpp's CallFamily, the first its trace has:
//   gloo's and NCCL's own ranges, else the dispatcher's c10d ops, else record_param_comms), each
//   in the ProfilerStep#N its start falls in (calls outside every step are left out);
// - a collective is one number of a process group's sequence, where every rank's calls of the
//   group write one (read.hpp: "Seq", which optrace writes from c10d's count and torch writes for
//   NCCL since 2026; point-to-point calls numbered apart): matched across ranks by it, whichever
//   step each rank's call fell in (the collective's step is the earliest); else the k-th call of
//   the group within a step, matched by that order (torch 2.6 numbers no calls). The group is the
//   call's "Process Group Name" and ranks; calls whose trace names none form one group;
// - a rank arrives at a collective when its call starts; the last to arrive kept the others
//   waiting: each rank's wait is the last arrival minus its own. Where every rank's call launched
//   NCCL kernels (read.hpp's link_kernels), the collective is timed by them, on the GPU: a rank
//   arrives when its first kernel starts (its CPU range ended at the enqueue; the ranks wait in
//   the kernels), for all its ranks, else by the CPU ranges for all. Times are the epoch's ("ts" plus
//   the trace's "baseTimeNanoseconds", as torch and optrace write both), so ranks compare as far as
//   their hosts' clocks agree (one host: exactly);
// - a collective blames its last rank only when its arrivals split into the ranks on time and a
//   late group of at most half of them, after a gap of at least kNoiseNs (kDeviceNoiseNs on the
//   GPU, whose clock is exact to microseconds: an 8-GPU job's kernels of one call end within 7 us) that is also at least the
//   on-time ranks' own spread (late_group; the first such gap: the largest late group). Noise
//   spreads arrivals without such a gap, however long the waits: 16 and 64 forked gloo ranks on
//   2 cores wait up to 57 and 257 ms at collectives where no rank was made slow, and none splits;
//   a straggler leaves one (tests/distributed/gloo_ranks.cpp --straggler). Of two ranks, the
//   later is late when it is kNoiseNs late;
// - blame passes along waits (pass_on_blame): a last rank that came late only because it had
//   waited for another rank at its call before (a partner held up at their pair's collective,
//   then late with it at the world's) passes the blame to that rank;
// - a rank that has a step and calls of a group but fewer of that group's calls in the step than
//   another rank never reached the ones it lacks there (the hang case): named in notes, as is a
//   collective whose ranks' calls have different names;
// - the clocks are checked, not estimated: at a collective no rank can leave before all arrived
//   (waits_for_all), a rank that arrived after another's call had ended proves their clocks
//   disagree by at least that much (ClockGap). Calls do not end together (gloo's ring all-reduce
//   under load ends rank by rank, tens of ms apart, on one host's one clock: 64 forked ranks, the
//   starts shifted with the ends), so their ends cannot estimate an offset. NCCL's kernels of
//   one call do end together (8 GPUs of one host: within 7 us): where collectives are timed by
//   them, each rank's offset is estimated from their ends (ClockOffset), and reported.
// One map entry per collective; each sorts its arrivals (late_group).

#include <optrace/detail/common/printable.hpp>
#include <optrace/detail/rank_summary/read.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace optrace::detail::rank_summary {

/// The least gap before a late group (see above): of calls timed by their CPU ranges, and of NCCL
/// calls timed by their kernels (kDeviceNoiseNs).
inline constexpr int64_t kNoiseNs = 1'000'000;
inline constexpr int64_t kDeviceNoiseNs = 100'000;
/// The least gap that is not noise, on the clock a collective is timed by: its kernels' (on_device) or its CPU ranges'.
inline constexpr int64_t least_gap_ns(bool on_device) { return on_device ? kDeviceNoiseNs : kNoiseNs; }

/// a - b and a + b, held at the int64 bound they pass: a hostile trace's times may lie far apart.
inline int64_t saturating_sub(int64_t a, int64_t b) {
  int64_t d = 0;
  return __builtin_sub_overflow(a, b, &d) ? (b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min()) : d;
}
inline int64_t saturating_add(int64_t a, int64_t b) {
  int64_t s = 0;
  return __builtin_add_overflow(a, b, &s) ? (b < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max()) : s;
}

/// The median of `v` (not empty; reordered): of an even count, the lower middle one.
inline int64_t lower_median(std::vector<int64_t>& v) {
  const auto middle = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2);
  std::nth_element(v.begin(), middle, v.end());
  return *middle;
}

/// How many ranks arrived late at a collective: those after the first gap in `arrivals` (any
/// order, sorted here) that is at least `least_gap_ns` (kNoiseNs, or kDeviceNoiseNs for kernels)
/// and at least the spread of the arrivals before it, with at most half the ranks after it; 0 when
/// no gap is such (see above).
inline int64_t late_group(std::vector<int64_t> arrivals, int64_t least_gap_ns = kNoiseNs) {
  std::sort(arrivals.begin(), arrivals.end());
  const size_t n = arrivals.size();
  // After arrivals[i], n - 1 - i ranks are late: at most half, so i >= (n - 1) / 2.
  for (size_t i = n < 2 ? n : (n - 1) / 2; i + 1 < n; ++i) {
    const int64_t gap = saturating_sub(arrivals[i + 1], arrivals[i]);
    if (gap >= least_gap_ns && gap >= saturating_sub(arrivals[i], arrivals.front())) return static_cast<int64_t>(n - 1 - i);
  }
  return 0;
}

/// A call's times on one clock's reading: the CPU range's, or its kernels' on the GPU.
struct CallTimes {
  int64_t start_ns = 0, end_ns = 0;
  /// Where the rank's way to this call began: the end of its previous call in the step, or the
  /// step's start (place_in_steps). What it ran in [since_ns, start_ns) is why it arrived when it did.
  int64_t since_ns = 0;
};

/// One call of a rank, placed in its step: what matching reads.
struct StepCall {
  int64_t step = 0;
  CallTimes cpu;  ///< its range's
  uint32_t name = 0, group = 0;  // indices into the rank's RankCalls tables
};

/// A rank's calls of one family, by start, each in its step (steps: the rank's, sorted by number
/// and not overlapping, as a profiler writes them). The tables are the reader's.
struct StepCalls {
  std::vector<StepCall> calls;
  /// Per call, its kernels' times on the GPU where it launched some (read.hpp's link_kernels;
  /// `on_device`); both empty where no call of the rank did: a gloo job keeps none.
  std::vector<CallTimes> device;
  std::vector<bool> on_device;
  /// Per call, its number in its group's sequence (read.hpp's CollectiveCall::seq; -1: none);
  /// empty where no call of the rank has one: a job that numbers none keeps none.
  std::vector<int64_t> seqs;
  std::vector<std::string> names, groups, group_ranks;  // RankCalls'
  int64_t base_ns = 0;  ///< what was added to the trace's times to put them on the epoch clock

  /// Call k's times on the GPU, or nullptr where it launched no kernel.
  const CallTimes* device_times(size_t k) const { return k < on_device.size() && on_device[k] ? &device[k] : nullptr; }
  /// Call k's number in its group's sequence, or -1.
  int64_t seq(size_t k) const { return k < seqs.size() ? seqs[k] : -1; }
};

/// The calls of `calls`' first family present, each in the step whose range holds its start, with
/// their times moved from the trace's clock to the epoch (`base_ns`, its "baseTimeNanoseconds":
/// torch and optrace floor it to 3-month intervals, so the ranks of a job share it, but a job that
/// crosses one would compare its ranks' "ts" wrongly), so that the ranks' calls compare.
inline StepCalls place_in_steps(RankCalls calls, std::vector<StepRange> steps, int64_t base_ns = 0) {
  StepCalls out;
  out.names = std::move(calls.names);
  out.groups = std::move(calls.groups);
  out.group_ranks = std::move(calls.group_ranks);
  out.base_ns = base_ns;
  if (calls.calls.empty()) return out;
  CallFamily family = CallFamily::Record;
  for (const CollectiveCall& c : calls.calls) family = std::min(family, c.family);
  std::stable_sort(steps.begin(), steps.end(), [](const StepRange& a, const StepRange& b) { return a.start_ns < b.start_ns; });
  std::vector<CollectiveCall>& c = calls.calls;
  std::stable_sort(c.begin(), c.end(), [](const CollectiveCall& a, const CollectiveCall& b) { return a.start_ns < b.start_ns; });
  auto epoch = [base_ns](int64_t t) { return saturating_add(t, base_ns); };
  // A call's way began where the calls before it in its step had all ended, or at the step's
  // start; a call that starts while an earlier one still runs (async collectives overlapping)
  // shares the way of the call before it. On the GPU alike, among the step's calls timed there.
  struct Way {
    int64_t ended = 0, since = 0;  // within the step: the latest end of its calls so far, the last call's since
    CallTimes next(int64_t start, int64_t end) {
      if (ended <= start) since = ended;
      ended = std::max(ended, end);
      return {start, end, since};
    }
  };
  const StepRange* step_of_last = nullptr;
  Way cpu, device;
  const bool any_on_device = std::any_of(c.begin(), c.end(), [family](const CollectiveCall& k) { return k.family == family && k.on_device; });
  const bool any_seq = std::any_of(c.begin(), c.end(), [family](const CollectiveCall& k) { return k.family == family && k.seq >= 0; });
  auto on_epoch = [&epoch](CallTimes t) { return CallTimes{epoch(t.start_ns), epoch(t.end_ns), epoch(t.since_ns)}; };
  for (const CollectiveCall& call : c) {
    if (call.family != family) continue;
    const StepRange* it = step_at(steps, call.start_ns);  // the CPU's step: the call's, wherever its kernels run
    if (it == nullptr) continue;
    if (step_of_last != it) step_of_last = it, cpu = device = Way{it->start_ns, it->start_ns};
    out.calls.push_back({it->step, on_epoch(cpu.next(call.start_ns, call.end_ns)), call.name, call.group});
    if (any_seq) out.seqs.push_back(call.seq);
    if (!any_on_device) continue;
    out.device.push_back(call.on_device ? on_epoch(device.next(call.device_start_ns, call.device_end_ns)) : CallTimes{});
    out.on_device.push_back(call.on_device);
  }
  return out;
}

/// A rank's way to a collective, on the epoch clock: from where it began (StepCall::since_ns) to
/// the rank's arrival (its call's start).
struct Approach {
  int64_t rank = -1;  ///< -1: no such rank (a collective of one rank has no median)
  int64_t since_ns = 0, arrival_ns = 0;
  /// Its length.
  int64_t ns() const { return saturating_sub(arrival_ns, since_ns); }
};

/// One collective matched across ranks.
struct CollectiveWait {
  int64_t step = 0;
  std::string group;        ///< its process group's name; "" when the traces name none
  int64_t index = 0;        ///< its place among the group's calls in the step, from 0
  int64_t seq = -1;         ///< its number in the group's sequence, by which it was matched; -1: matched by `index`
  std::string name;         ///< the call's name on the last rank to arrive ("gloo:all_reduce")
  int64_t ranks = 0;        ///< the ranks that made the call
  int64_t last_rank = 0;    ///< the last to arrive (ties: the lowest rank)
  int64_t max_wait_ns = 0;  ///< the last arrival minus the first: the longest any rank waited
  int64_t total_wait_ns = 0;  ///< the sum of every rank's wait
  Approach last;    ///< the last rank's way there
  Approach median;  ///< the median way of the other ranks (by its length; of two, the shorter; ties: the lowest rank)
  /// Where it is on_device: the same two ranks' ways on the CPU, to their calls' ranges (the GPU
  /// idle on a way is the CPU launching late: what the CPU ran there says why). Else rank -1.
  Approach last_cpu, median_cpu;
  int64_t late = 0;  ///< the ranks that arrived late (late_group); 0: nobody is to blame
  bool on_device = false;  ///< timed by its kernels on the GPU (every rank's call launched some); else by the CPU ranges
  /// Who the waits are blamed on: the last rank, or, where it came late only because it had
  /// waited for another at its collective before (`via`), the rank blamed there (see blame()).
  int64_t blamed_rank = 0;
  int64_t via = -1;  ///< that collective before, its index in Waits::collectives; -1: none
  bool blamed() const { return late > 0; }
};

/// One rank's part in the waits of one step.
struct StepWait {
  int64_t step = 0;
  int64_t caused_ns = 0;  ///< the others' waits at the step's collectives it was blamed for
  int64_t waited_ns = 0;  ///< its own waits at the step's collectives
};

/// One rank's part in the waits.
struct RankWait {
  int64_t rank = 0;
  int64_t caused_ns = 0;    ///< the others' waits at the collectives it arrived last at (blamed ones)
  int64_t blamed = 0;       ///< how many collectives it was blamed for
  int64_t waited_ns = 0;    ///< its own waits, at every collective
  std::vector<int64_t> steps;  ///< the steps of the collectives it was blamed for, ascending, once each
  std::vector<StepWait> by_step;  ///< per step it made collective calls in, ascending
};

/// A proof that two ranks' clocks disagree: at a collective that no rank can leave before every
/// rank arrived, `later` arrived `ns` after `earlier`'s call had ended, on their clocks; so
/// `later`'s clock reads at least `ns` later than `earlier`'s.
struct ClockGap {
  int64_t later = 0, earlier = 0;
  int64_t ns = 0;
  int64_t step = 0, index = 0;  ///< where: the collective's step and place in its group
  std::string group, name;
  int64_t seq = -1;  ///< ... and its sequence number (CollectiveWait::seq)
};

/// A rank's clock against the others', estimated from the ends of NCCL's kernels, which end
/// together: the median, over the collectives timed by them that wait for all (waits_for_all), of
/// its kernels' end less the median end of the collective's ranks.
struct ClockOffset {
  int64_t rank = 0;
  int64_t ns = 0;     ///< how much later its clock reads (negative: earlier)
  int64_t calls = 0;  ///< the collectives it is the median of
};

/// Every matched collective and every rank's part.
struct Waits {
  std::vector<CollectiveWait> collectives;  ///< by step, group, index
  std::vector<RankWait> ranks;              ///< by rank
  std::vector<std::string> notes;           ///< calls never reached, names that differ
  bool groups_named = false;                ///< some trace names its calls' process groups
  int64_t clock_checked = 0;                ///< the collectives the clocks were checked at (waits_for_all)
  int64_t clock_checked_on_device = 0;      ///< ... of them, those timed by their kernels
  int64_t on_device = 0;                    ///< the collectives timed by their kernels on the GPU
  int64_t by_seq = 0;                       ///< the collectives matched by their groups' sequence numbers
  std::vector<ClockGap> clock_gaps;         ///< per rank that arrived after another's call ended, its widest; widest first
  std::vector<ClockOffset> clock_offsets;   ///< per rank with NCCL kernels' ends to read, by rank
};

/// Whether no rank can leave a collective so named before every rank arrived, and its times span
/// the call to its end: gloo's own ranges, or NCCL's kernels (`on_device`), of an all-reduce,
/// all-gather, reduce-scatter, all-to-all or barrier (not a broadcast, whose root may leave first,
/// nor the dispatcher's c10d ops or NCCL's CPU ranges, which end when the call is enqueued).
inline bool waits_for_all(std::string_view name, bool on_device = false) {
  if (name.substr(0, 5) != (on_device ? "nccl:" : "gloo:")) return false;
  for (std::string_view kind : {"all_reduce", "allreduce", "all_gather", "allgather", "reduce_scatter", "alltoall", "all_to_all", "barrier"})
    if (name.find(kind) != std::string_view::npos) return true;
  return false;
}

/// " of group <name>" for messages, "" for calls whose trace names no group.
inline std::string group_label(const std::string& group) { return group.empty() ? std::string() : " of group " + printable(group); }

/// One rank's input: its number, steps (numbers, ascending) and placed calls.
struct RankInput {
  int64_t rank = 0;
  const std::vector<int64_t>* steps = nullptr;
  const StepCalls* calls = nullptr;
};

/// The median of `arrivals`' ways but `last_rank`'s (see CollectiveWait::median). `Arrival` has
/// rank, start_ns and since_ns.
template <class Arrival>
Approach median_approach(const std::vector<Arrival>& arrivals, int64_t last_rank) {
  std::vector<Approach> others;
  for (const Arrival& a : arrivals)
    if (a.rank != last_rank) others.push_back({a.rank, a.since_ns, a.start_ns});
  if (others.empty()) return {};
  const auto middle = others.begin() + static_cast<std::ptrdiff_t>((others.size() - 1) / 2);
  std::nth_element(others.begin(), middle, others.end(), [](const Approach& a, const Approach& b) {
    return std::make_pair(a.ns(), a.rank) < std::make_pair(b.ns(), b.rank);
  });
  return *middle;
}

/// `r`'s entry for `step`, added in its place when it has none (by_step ascends).
inline StepWait& step_wait(RankWait& r, int64_t step) {
  if (r.by_step.empty() || r.by_step.back().step < step) return r.by_step.emplace_back(StepWait{step, 0, 0});
  auto it = std::lower_bound(r.by_step.begin(), r.by_step.end(), step, [](const StepWait& s, int64_t v) { return s.step < v; });
  if (it == r.by_step.end() || it->step != step) it = r.by_step.insert(it, StepWait{step, 0, 0});
  return *it;
}

/// Passes blame on along waits: at a blamed collective C whose last rank L had, at its call
/// before (C', any step or group), waited for another rank for at least half of L's lag at C (its
/// arrival after the first), and added on its way from there to C (its way less the median of
/// the other ranks' ways from their calls before) at most half of that lag, L was late at C
/// mostly because C' let it go late: C is blamed on whom C' is (C.via = C'). Relative, not a
/// fixed tolerance: on a loaded machine a rank held up 1.7 s adds a few ms of its own. A rank late at its
/// pair's collective delays its partner, and both then the world's next collective: that wait is
/// the first rank's, not the partner's, whichever of the two arrived last. Collectives are taken
/// by their last arrival, and blame passes only from one taken before: no loops, whatever a
/// trace says. `arrivals_of(k)`: collective k's last arrival and all its arrivals (rank, start_ns,
/// since_ns, before: a key, before_end_ns); `index_of(key)`: that key's collective, -1 for none.
template <class ArrivalsOf, class IndexOf>
void pass_on_blame(std::vector<CollectiveWait>& cs, ArrivalsOf arrivals_of, IndexOf index_of) {
  std::vector<size_t> order(cs.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return arrivals_of(a).first->start_ns < arrivals_of(b).first->start_ns; });
  std::vector<bool> taken(cs.size(), false);
  for (size_t k : order) {
    taken[k] = true;
    CollectiveWait& c = cs[k];
    if (!c.blamed()) continue;
    const auto [last, arrivals] = arrivals_of(k);
    const int64_t b = index_of(last->before);
    if (b < 0 || static_cast<size_t>(b) == k || !taken[static_cast<size_t>(b)]) continue;
    const CollectiveWait& before = cs[static_cast<size_t>(b)];
    if (!before.blamed() || before.last_rank == c.last_rank || before.blamed_rank == c.last_rank) continue;
    // Its wait there: the last arrival there minus its own.
    const auto [before_last, before_arrivals] = arrivals_of(static_cast<size_t>(b));
    int64_t waited = -1;
    for (const auto& a : *before_arrivals)
      if (a.rank == c.last_rank) waited = saturating_sub(before_last->start_ns, a.start_ns);
    int64_t first = last->start_ns;
    for (const auto& a : *arrivals) first = std::min(first, a.start_ns);
    const int64_t lag = saturating_sub(last->start_ns, first);
    if (waited < 0 || waited < lag / 2) continue;
    // Its way from its call before, against the others' median: what it added itself.
    auto way = [](const auto& a) { return saturating_sub(a.start_ns, a.before != nullptr ? a.before_end_ns : a.since_ns); };
    std::vector<int64_t> others;
    for (const auto& a : *arrivals)
      if (a.rank != c.last_rank) others.push_back(way(a));
    if (others.empty()) continue;
    if (saturating_sub(way(*last), lower_median(others)) > lag / 2) continue;  // mostly late on its own way: its own wait
    c.blamed_rank = before.blamed_rank;
    c.via = b;
  }
}

/// The waits of `ranks` (ascending by rank, one entry each).
inline Waits blame(const std::vector<RankInput>& ranks) {
  Waits out;
  using Group = std::pair<std::string, std::string>;     // name, ranks as written (RankCalls)
  // step, group, then the call's index in the step's calls of the group, or, where the group is
  // numbered, whether it is point-to-point and its sequence number (index -1).
  using Key = std::tuple<int64_t, Group, int64_t, bool, int64_t>;
  // The times are of the collective's clock (`timed`: the calls' CPU ranges, or their kernels).
  struct Arrival {
    int64_t rank;
    int64_t start_ns;
    const std::string* name;
    int64_t since_ns, end_ns;
    const Key* before = nullptr;  // the rank's call before this one (any step, any group): its collective
    int64_t before_end_ns = 0;    // ... and that call's end
    const StepCalls* calls = nullptr;  // the rank's
    uint32_t k = 0, before_k = 0;      // this call's index there, and the call before's (where `before`)
    bool on_device() const { return calls->device_times(k) != nullptr; }
    const CallTimes& times(uint32_t call, bool gpu) const {
      const CallTimes* d = gpu ? calls->device_times(call) : nullptr;
      return d != nullptr ? *d : calls->calls[call].cpu;
    }
    void timed(bool gpu) {
      const CallTimes& t = times(k, gpu);
      start_ns = t.start_ns, since_ns = t.since_ns, end_ns = t.end_ns;
      if (before != nullptr) before_end_ns = times(before_k, gpu).end_ns;
    }
  };
  std::map<Key, std::vector<Arrival>> matched;
  // The groups whose calls all write a sequence number, on every rank (a map lookup per group of
  // each rank, not per call), and each numbered collective's step: the earliest of its ranks'
  // (they agree unless a call falls at a step's edge).
  using Numbered = std::tuple<Group, bool, int64_t>;  // group, point to point, seq
  std::map<Group, bool> numbered_group;
  for (const RankInput& r : ranks) {
    enum : int { kNoCall, kAllNumbered, kNotAll };
    std::vector<int> state(r.calls->groups.size(), kNoCall);  // per group index
    for (size_t i = 0; i < r.calls->calls.size(); ++i) {
      int& g = state[r.calls->calls[i].group];
      if (g != kNotAll) g = r.calls->seq(i) >= 0 ? kAllNumbered : kNotAll;
    }
    for (size_t g = 0; g < state.size(); ++g) {
      if (state[g] == kNoCall) continue;
      auto it = numbered_group.try_emplace(Group{r.calls->groups[g], r.calls->group_ranks[g]}, true).first;
      it->second = it->second && state[g] == kAllNumbered;
    }
  }
  std::vector<std::vector<int>> numbered(ranks.size());  // per rank, per group index: numbered
  std::map<Numbered, int64_t> numbered_step;
  for (size_t k = 0; k < ranks.size(); ++k) {
    const StepCalls& calls = *ranks[k].calls;
    for (size_t g = 0; g < calls.groups.size(); ++g) {
      auto it = numbered_group.find(Group{calls.groups[g], calls.group_ranks[g]});
      numbered[k].push_back(it != numbered_group.end() && it->second);
    }
    for (size_t i = 0; i < calls.seqs.size(); ++i) {  // none where the rank numbers no call
      const StepCall& c = calls.calls[i];
      if (!numbered[k][c.group]) continue;
      auto it = numbered_step.try_emplace(Numbered{Group{calls.groups[c.group], calls.group_ranks[c.group]},
                                                   kineto_names::is_point_to_point(calls.names[c.name]), calls.seqs[i]}, c.step).first;
      it->second = std::min(it->second, c.step);
    }
  }
  // Per step and group, how many calls each rank made there: the never-reached check.
  std::map<std::pair<int64_t, Group>, std::vector<std::pair<int64_t, int64_t>>> counts;
  std::map<Group, std::vector<int64_t>> members;  // group -> the ranks with calls of it
  constexpr int64_t kMaxNotes = 8;  // of each kind: a job whose calls stop matching would list every later one
  int64_t repeated = 0;             // calls whose number a call of their rank had already
  for (size_t rank_k = 0; rank_k < ranks.size(); ++rank_k) {
    const RankInput& r = ranks[rank_k];
    std::map<std::pair<int64_t, uint32_t>, int64_t> next;  // (step, group index) -> the next call's index
    const Key* before = nullptr;  // map keys stay where they are
    uint32_t before_k = 0;  // (a trace of 2^32 calls would hold 256 GB of them)
    for (uint32_t i = 0; i < r.calls->calls.size(); ++i) {  // by start (place_in_steps)
      const StepCall& c = r.calls->calls[i];
      Group group{r.calls->groups[c.group], r.calls->group_ranks[c.group]};
      if (!group.first.empty()) out.groups_named = true;
      const std::string& group_name = r.calls->groups[c.group];
      const int64_t k = next[{c.step, c.group}]++;
      Key key;
      if (numbered[rank_k][c.group]) {
        const bool p2p = kineto_names::is_point_to_point(r.calls->names[c.name]);
        const int64_t step = numbered_step.at(Numbered{group, p2p, r.calls->seq(i)});
        key = Key{step, std::move(group), -1, p2p, r.calls->seq(i)};
      } else {
        key = Key{c.step, std::move(group), k, false, -1};
      }
      auto at = matched.try_emplace(std::move(key)).first;
      if (!at->second.empty() && at->second.back().rank == r.rank) {  // a number twice on one rank: its first call stands
        if (++repeated <= kMaxNotes)
          out.notes.push_back("rank " + std::to_string(r.rank) + " made two calls numbered " + std::to_string(r.calls->seq(i)) + group_label(group_name) +
                              " (step " + std::to_string(c.step) + "): the second is left out of the matching");
        continue;
      }
      at->second.push_back({r.rank, 0, &r.calls->names[c.name], 0, 0, before, 0, r.calls, i, before_k});
      before = &at->first;
      before_k = i;
    }
    std::vector<uint32_t> groups;  // the groups this rank has calls of
    for (const auto& [where, n] : next) {
      counts[{where.first, Group{r.calls->groups[where.second], r.calls->group_ranks[where.second]}}].push_back({r.rank, n});
      groups.push_back(where.second);
    }
    std::sort(groups.begin(), groups.end());
    groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
    for (uint32_t g : groups) members[{r.calls->groups[g], r.calls->group_ranks[g]}].push_back(r.rank);
  }
  // A group is shown by its name, and by its ranks too where groups of other ranks share the name
  // (two pairs each named "1" by the rank that made it).
  std::map<std::string, int> named;  // name -> how many groups have it
  for (const auto& m : members) ++named[m.first.first];
  auto shown = [&named](const Group& g) {
    return named[g.first] > 1 && !g.second.empty() ? g.first + " " + g.second : g.first;
  };

  int64_t differ = 0, unreached = 0;
  std::map<int64_t, RankWait> by_rank;
  std::map<int64_t, ClockGap> gaps;  // later rank -> its widest gap
  std::map<int64_t, std::vector<int64_t>> end_offsets;  // rank -> its kernels' ends less each collective's median end
  for (const RankInput& r : ranks) by_rank[r.rank].rank = r.rank;
  std::map<const Key*, size_t> index_of;  // a collective's index in out.collectives
  std::vector<const Arrival*> last_of;    // per collective, its last arrival
  std::vector<const std::vector<Arrival>*> arrivals_at;  // ... and all of them
  std::pair<int64_t, const Group*> in_step{0, nullptr};  // numbered collectives: their step and group, so far
  int64_t place = 0;                                     // ... and how many of them came before
  for (auto& [key, arrivals] : matched) {
    index_of[&key] = out.collectives.size();
    arrivals_at.push_back(&arrivals);
    CollectiveWait w;
    // On the GPU where every rank's call launched kernels: one clock for all its ranks.
    w.on_device = std::all_of(arrivals.begin(), arrivals.end(), [](const Arrival& a) { return a.on_device(); });
    for (Arrival& a : arrivals) a.timed(w.on_device);
    w.step = std::get<0>(key);
    w.group = shown(std::get<1>(key));
    w.index = std::get<2>(key);
    if (w.index < 0) {  // numbered: its place in the step is its place among the step's numbers
      if (in_step.second == nullptr || in_step.first != w.step || *in_step.second != std::get<1>(key)) in_step = {w.step, &std::get<1>(key)}, place = 0;
      w.index = place++;
      w.seq = std::get<4>(key);
      ++out.by_seq;
    }
    w.ranks = static_cast<int64_t>(arrivals.size());
    const Arrival* last = &arrivals.front();
    int64_t first = arrivals.front().start_ns;
    for (const Arrival& a : arrivals) {
      if (a.start_ns > last->start_ns) last = &a;  // ranks ascend: a tie keeps the lowest
      first = std::min(first, a.start_ns);
    }
    w.last_rank = w.blamed_rank = last->rank;
    last_of.push_back(last);
    w.name = *last->name;
    auto wait = [&](const Arrival& a) { return saturating_sub(last->start_ns, a.start_ns); };
    auto add = [](int64_t& sum, int64_t v) { sum = saturating_add(sum, v); };
    w.max_wait_ns = wait(Arrival{0, first, nullptr, 0, 0});
    std::vector<int64_t> starts;
    for (const Arrival& a : arrivals) starts.push_back(a.start_ns);
    w.late = late_group(std::move(starts), least_gap_ns(w.on_device));
    w.last = {last->rank, last->since_ns, last->start_ns};
    w.median = median_approach(arrivals, last->rank);
    if (w.on_device)
      for (const Arrival& a : arrivals) {
        const CallTimes& cpu = a.times(a.k, false);
        if (a.rank == w.last.rank) w.last_cpu = {a.rank, cpu.since_ns, cpu.start_ns};
        if (a.rank == w.median.rank) w.median_cpu = {a.rank, cpu.since_ns, cpu.start_ns};
      }
    bool names_differ = false;
    for (const Arrival& a : arrivals) {
      RankWait& own = by_rank[a.rank];
      add(w.total_wait_ns, wait(a));
      add(own.waited_ns, wait(a));
      add(step_wait(own, w.step).waited_ns, wait(a));
      names_differ = names_differ || *a.name != w.name;
    }
    // The clocks: the last to arrive came after the first call to end had ended? (Saturating.)
    if (!names_differ && arrivals.size() > 1 && waits_for_all(w.name, w.on_device)) {
      ++out.clock_checked;
      out.clock_checked_on_device += w.on_device;
      if (w.on_device) {
        std::vector<int64_t> ends;
        for (const Arrival& a : arrivals) ends.push_back(a.end_ns);
        const int64_t median_end = lower_median(ends);
        for (const Arrival& a : arrivals) end_offsets[a.rank].push_back(saturating_sub(a.end_ns, median_end));
      }
      const Arrival* ended = &arrivals.front();
      for (const Arrival& a : arrivals)
        if (a.end_ns < ended->end_ns) ended = &a;
      int64_t gap = 0;
      if (ended->rank != last->rank && !__builtin_sub_overflow(last->start_ns, ended->end_ns, &gap) && gap >= least_gap_ns(w.on_device)) {
        ClockGap& g = gaps[last->rank];
        if (gap > g.ns) g = {last->rank, ended->rank, gap, w.step, w.index, w.group, w.name, w.seq};
      }
    }
    if (names_differ && ++differ <= kMaxNotes) {
      std::string which;
      for (const Arrival& a : arrivals)
        if (*a.name != w.name) which += (which.empty() ? "" : ", ") + std::to_string(a.rank);
      out.notes.push_back("step " + std::to_string(w.step) + ", collective #" + std::to_string(w.index) + group_label(w.group) +
                          ": rank(s) " + which + " called another collective than " + printable(w.name) +
                          " there: the ranks' calls do not match from this one on");
    }
    out.on_device += w.on_device;
    out.collectives.push_back(std::move(w));
  }
  pass_on_blame(
      out.collectives, [&](size_t k) { return std::make_pair(last_of[k], arrivals_at[k]); },
      [&](const Key* key) { return key == nullptr ? int64_t{-1} : static_cast<int64_t>(index_of.at(key)); });
  for (const CollectiveWait& w : out.collectives) {
    if (!w.blamed()) continue;
    RankWait& b = by_rank[w.blamed_rank];
    auto add = [](int64_t& sum, int64_t v) { sum = saturating_add(sum, v); };
    add(b.caused_ns, w.total_wait_ns);
    add(step_wait(b, w.step).caused_ns, w.total_wait_ns);
    ++b.blamed;
  }
  for (auto& [rank, r] : by_rank) {
    for (const StepWait& s : r.by_step)
      if (s.caused_ns > 0) r.steps.push_back(s.step);
  }
  for (auto& [rank, w] : by_rank) out.ranks.push_back(std::move(w));
  for (auto& [rank, g] : gaps) out.clock_gaps.push_back(std::move(g));
  for (auto& [rank, offsets] : end_offsets) out.clock_offsets.push_back({rank, lower_median(offsets), static_cast<int64_t>(offsets.size())});
  std::stable_sort(out.clock_gaps.begin(), out.clock_gaps.end(), [](const ClockGap& a, const ClockGap& b) { return a.ns > b.ns; });

  // Never reached: a member of the group that has the step made fewer of its calls there. Ranks,
  // members and each step's counts all ascend by rank: binary searches.
  auto input_of = [&](int64_t rank) -> const RankInput* {
    auto it = std::lower_bound(ranks.begin(), ranks.end(), rank, [](const RankInput& x, int64_t r) { return x.rank < r; });
    return it != ranks.end() && it->rank == rank ? &*it : nullptr;
  };
  for (const auto& [where, per_rank] : counts) {
    int64_t most = 0;
    for (const auto& [rank, n] : per_rank) most = std::max(most, n);
    for (int64_t member : members[where.second]) {
      const RankInput* r = input_of(member);
      if (r == nullptr || !std::binary_search(r->steps->begin(), r->steps->end(), where.first)) continue;
      auto it = std::lower_bound(per_rank.begin(), per_rank.end(), member,
                                 [](const std::pair<int64_t, int64_t>& x, int64_t rank) { return x.first < rank; });
      const int64_t made = it != per_rank.end() && it->first == member ? it->second : 0;
      if (made < most && ++unreached <= kMaxNotes)
        out.notes.push_back("rank " + std::to_string(member) + " made " + std::to_string(made) + " of the " + std::to_string(most) +
                            " collective calls" + group_label(shown(where.second)) + " that other ranks made in step " +
                            std::to_string(where.first) + ": it never reached #" + std::to_string(made) +
                            (made + 1 < most ? ".." + std::to_string(most - 1) : std::string()) + " there (a hang, or a window cut short)");
    }
  }
  if (unreached > kMaxNotes)
    out.notes.push_back("... and " + std::to_string(unreached - kMaxNotes) + " more steps and ranks with collective calls never reached");
  if (repeated > kMaxNotes)
    out.notes.push_back("... and " + std::to_string(repeated - kMaxNotes) + " more calls whose number their rank had called already");
  if (differ > kMaxNotes)
    out.notes.push_back("... and " + std::to_string(differ - kMaxNotes) + " more collectives whose ranks called different ones");
  return out;
}

}  // namespace optrace::detail::rank_summary
