// Tests for optrace/rank_summary.hpp: RankTrace and RankSummary on the real torch 2.6 traces of a
// 2-rank gloo job (tests/data/distributed_gloo_torch26/, rank 1 the straggler; the figures below
// are the CLI tests' and were recomputed from the traces' events in Python), read whole, streamed
// and gzip'd, and their one-line refusals.
#include <optrace/detail/common/gzip.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/rank_summary.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "optrace_catch.hpp"

namespace rank_summary_test {  // (a unity group shares one translation unit: names of its own)

using optrace::RankStepTime;
using optrace::RankSummary;
using optrace::RankTrace;

const std::string kGloo = optrace_test::data_path("distributed_gloo_torch26");
const std::string kRank0 = kGloo + "/rank0.1795896516679514272.pt.trace.json.gz";
const std::string kRank1 = kGloo + "/rank1.1795896516679514337.pt.trace.json.gz";
const std::string kCliRank = optrace_test::data_path("cli/rank");

// A time in microseconds as integer nanoseconds: the reader's times are exact nanoseconds / 1000.
int64_t ns(double us) { return std::llround(us * 1000); }

// One step's figures in nanoseconds: step, in collectives, outside.
struct StepNs {
  int64_t step, step_ns, collective_ns, outside_ns;
  bool operator==(const StepNs& o) const {
    return step == o.step && step_ns == o.step_ns && collective_ns == o.collective_ns && outside_ns == o.outside_ns;
  }
};
std::ostream& operator<<(std::ostream& out, const StepNs& s) {
  return out << "{step " << s.step << ": " << s.step_ns << ", " << s.collective_ns << ", " << s.outside_ns << " ns}";
}
std::vector<StepNs> steps_ns(const RankTrace& r) {
  std::vector<StepNs> out;
  for (const RankStepTime& s : r.steps) out.push_back({s.step, ns(s.step_us), ns(s.collective_us), ns(s.outside_us)});
  return out;
}

// What rank 0 and rank 1 of the gloo job hold (the summary_by_rank CLI tests' table and JSON).
const std::vector<StepNs> kRank0Steps = {
    {0, 89473847, 83142142, 6331705}, {1, 24068137, 22417964, 1650173}, {2, 31836430, 30357402, 1479028}};
const std::vector<StepNs> kRank1Steps = {
    {0, 28791345, 3993543, 24797802}, {1, 22771761, 1085267, 21686494}, {2, 31838823, 9888870, 21949953}};

// what() of the error `f` throws, or "(no error)".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const optrace::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_CASE("rank summary: each rank's steps and collectives from torch 2.6's traces", "[rank_summary]") {
  const RankTrace r0 = RankTrace::from_kineto_file(kRank0), r1 = RankTrace::from_kineto_file(kRank1);
  CHECK(r0.file == kRank0);
  CHECK(r0.rank == 0);
  CHECK(r1.rank == 1);
  for (const RankTrace* r : {&r0, &r1}) {
    CHECK(r->world_size == 2);
    CHECK(r->backend == "gloo");
    // A step's time is its collectives' and the rest; the union of the collectives never exceeds it.
    for (const RankStepTime& s : r->steps) {
      CHECK(ns(s.collective_us) + ns(s.outside_us) == ns(s.step_us));
      CHECK(s.collective_us <= s.step_us);
      CHECK(s.outside_us >= 0);
    }
  }
  CHECK(steps_ns(r0) == kRank0Steps);
  CHECK(steps_ns(r1) == kRank1Steps);
}

TEST_CASE("rank summary: the straggler is the rank with the most time outside collectives", "[rank_summary]") {
  // Given in reverse: ranks() are by rank.
  const RankSummary summary = RankSummary::from_ranks({RankTrace::from_kineto_file(kRank1), RankTrace::from_kineto_file(kRank0)});
  REQUIRE(summary.ranks().size() == 2);
  CHECK(summary.ranks()[0].rank == 0);
  CHECK(summary.ranks()[1].rank == 1);
  CHECK(summary.steps() == std::vector<int64_t>{0, 1, 2});
  // Rank 1 sleeps 20 ms per step: rank 0 waits for it inside the all-reduces, so rank 0's step 0
  // is the longer (89 ms against 29 ms), and the time outside collectives names rank 1.
  CHECK(summary.ranks()[0].steps[0].step_us > summary.ranks()[1].steps[0].step_us);
  for (int64_t step : {0, 1, 2}) CHECK(summary.slowest_rank(step) == std::optional<int64_t>(1));
  CHECK_FALSE(summary.slowest_rank(3).has_value());
  CHECK(summary.notes().empty());
  const std::string table = summary.table();
  CHECK_THAT(table, OPTRACE_CONTAINS("\n   0     0   89.474          83.142  92.9%       6.332\n"));
  CHECK_THAT(table, OPTRACE_CONTAINS("\n   0     1   28.791           3.994  13.9%      24.798  slowest\n"));
  CHECK_THAT(table, OPTRACE_CONTAINS("\nslowest rank per step: 0: 1, 1: 1, 2: 1\nslowest rank: 1 (in 3 of 3 steps;"));
}

TEST_CASE("rank summary: each step's collectives are matched across ranks, the wait blamed on the last to arrive", "[rank_summary]") {
  // Rank 1 sleeps 20 ms a step before its all-reduces (80 ms before the first): each step's first
  // gloo:all_reduce starts that much later on rank 1 than on rank 0. Recomputed in Python from the
  // traces' gloo:all_reduce starts, matched by order within each step.
  const RankSummary summary = RankSummary::from_ranks({RankTrace::from_kineto_file(kRank0), RankTrace::from_kineto_file(kRank1)});
  const optrace::detail::rank_summary::Waits& w = summary.waits();
  CHECK_FALSE(w.groups_named);  // torch 2.6 writes no process group on gloo's ranges
  REQUIRE(w.collectives.size() == 12);  // 4 all-reduces in each of 3 steps
  std::vector<std::string> blamed;  // "step index last-rank wait-ns"
  for (const auto& c : w.collectives) {
    CHECK(c.name == "gloo:all_reduce");
    CHECK(c.ranks == 2);
    CHECK(c.total_wait_ns == c.max_wait_ns);  // two ranks: one waits
    if (c.blamed())
      blamed.push_back(std::to_string(c.step) + " " + std::to_string(c.index) + " " + std::to_string(c.last_rank) + " " +
                       std::to_string(c.max_wait_ns));
  }
  CHECK(blamed == std::vector<std::string>{"0 0 1 79436896", "1 0 1 21305774", "2 0 1 20404592"});
  REQUIRE(w.ranks.size() == 2);
  CHECK(w.ranks[1].rank == 1);
  CHECK(w.ranks[1].caused_ns == 79436896 + 21305774 + 20404592);
  CHECK(w.ranks[1].blamed == 3);
  CHECK(w.ranks[1].steps == std::vector<int64_t>{0, 1, 2});
  // Per step: what it caused there, and every rank's own waits adding up to its total.
  std::vector<std::pair<int64_t, int64_t>> caused_by_step;
  for (int64_t k : {0, 1}) {
    int64_t waited = 0;
    for (const auto& s : w.ranks[k].by_step) {
      waited += s.waited_ns;
      if (k == 1) caused_by_step.emplace_back(s.step, s.caused_ns);
    }
    CHECK(waited == w.ranks[k].waited_ns);
  }
  CHECK(caused_by_step == std::vector<std::pair<int64_t, int64_t>>{{0, 79436896}, {1, 21305774}, {2, 20404592}});
  CHECK(w.ranks[0].blamed == 0);  // last at six collectives, each by less than 1 ms
  CHECK(w.ranks[0].waited_ns > w.ranks[1].caused_ns);
  CHECK(summary.notes().empty());
  const std::string table = summary.table();
  CHECK_THAT(table, OPTRACE_CONTAINS("\nwaits at collectives (each step's collective calls matched across ranks in order, the traces "
                                     "name no process group; the last rank is blamed where at most half the ranks arrived late, 1 ms or "
                                     "more after the others and after a gap as wide as the others' spread):\n"));
  CHECK_THAT(table, OPTRACE_CONTAINS("  step 0, gloo:all_reduce #0: rank 1 arrived 79.437 ms after the first; 1 other rank(s) waited "
                                     "79.437 ms in all\n"));
  CHECK_THAT(table, OPTRACE_CONTAINS("the rank the others waited for most: 1 (121.147 ms at 3 collective(s), steps 0, 1, 2)\n"
                                     "clocks: at the 12 all-reduce, all-gather, reduce-scatter, all-to-all or barrier call(s) checked "
                                     "(gloo's ranges), no rank arrived after another's call had ended: consistent with one clock\n"));
  CHECK(w.clock_checked == 12);
  CHECK(w.clock_gaps.empty());
  auto doc = optrace::json::Document::parse(summary.to_json());
  std::vector<std::pair<int64_t, double>> caused;
  for (optrace::json::Node r : doc->root()["waits"]["ranks"].array()) caused.emplace_back(r["rank"].as_int(), r["caused_us"].as_double());
  CHECK(caused == std::vector<std::pair<int64_t, double>>{{0, 0.0}, {1, 121147.262}});
  int64_t listed = 0;
  for (optrace::json::Node c : doc->root()["waits"]["collectives"].array()) listed += c["blamed"].as_bool() ? 1 : 0;
  CHECK(listed == 3);
  std::vector<std::pair<int64_t, double>> step_caused;
  for (optrace::json::Node r : doc->root()["waits"]["ranks"].array())
    if (r["rank"].as_int() == 1)
      for (optrace::json::Node s : r["by_step"].array()) step_caused.emplace_back(s["step"].as_int(), s["caused_us"].as_double());
  CHECK(step_caused == std::vector<std::pair<int64_t, double>>{{0, 79436.896}, {1, 21305.774}, {2, 20404.592}});
}

TEST_CASE("rank summary: the HTML page holds the JSON, names from traces cannot end its script, and it fetches nothing", "[rank_summary]") {
  // The page's rendering is checked in a browser (tests/cli/report_in_browser.sh); here, what
  // it is made of: a file name that would end the data block and run a script of its own.
  RankTrace r0 = RankTrace::from_kineto_file(kRank0), r1 = RankTrace::from_kineto_file(kRank1);
  r0.file = "</script><script>alert(1)</script><!--";
  const RankSummary summary = RankSummary::from_ranks({std::move(r0), std::move(r1)});
  const std::string page = summary.to_html();
  CHECK(page.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(page.find("<script>alert") == std::string::npos);  // its '<' and '>' are \u escapes:
  CHECK_THAT(page, OPTRACE_CONTAINS("\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"));
  CHECK(page.find("<!--") == std::string::npos);
  size_t closings = 0;
  for (size_t at = page.find("</script>"); at != std::string::npos; at = page.find("</script>", at + 1)) ++closings;
  CHECK(closings == 2);  // the data block's and the script's
  CHECK_THAT(page, OPTRACE_CONTAINS("content=\"default-src 'none'; img-src 'none'; style-src 'nonce-"));
  CHECK(page.find("://") == std::string::npos);  // nothing to fetch: no address at all
  // The data block parses back to to_json(), the name as it was.
  const std::string open = "<script type=\"application/json\" id=\"optrace-data\">";
  const size_t from = page.find(open) + open.size();
  const std::string block = page.substr(from, page.find("</script>", from) - from);
  const auto doc = optrace::json::Document::parse(block);
  CHECK((*doc->root()["ranks"].array().begin())["file"].as_string() == "</script><script>alert(1)</script><!--");
  CHECK(optrace::json::Document::parse(summary.to_json())->root()["waits"]["collectives"].array().size() ==
        doc->root()["waits"]["collectives"].array().size());
  // Each page its own nonce: a report cannot be forged to carry the script of another.
  const auto nonce = [](const std::string& p) { const size_t at = p.find("'nonce-") + 7; return p.substr(at, p.find('\'', at) - at); };
  CHECK(nonce(page).size() == 32);
  CHECK(nonce(page) != nonce(summary.to_html()));
}

namespace {
// A rank of a hand-made job: `steps` as [start, end) ms (steps 0, 1, ...), `calls` as (start ms,
// end ms, name, group).
RankTrace hand_made_job(int64_t rank, const std::vector<std::pair<double, double>>& steps,
                        const std::vector<std::tuple<double, double, std::string, std::string>>& calls) {
  RankTrace r;
  r.rank = rank;
  r.file = "rank" + std::to_string(rank);
  std::vector<optrace::detail::rank_summary::StepRange> ranges;
  for (size_t k = 0; k < steps.size(); ++k) {
    const int64_t start = std::llround(steps[k].first * 1e6), end = std::llround(steps[k].second * 1e6);
    const double us = static_cast<double>(end - start) / 1000;
    r.steps.push_back({static_cast<int64_t>(k), us, 0, us});
    ranges.push_back({static_cast<int64_t>(k), start, end});
  }
  optrace::detail::rank_summary::RankCalls rc;
  auto index = [](std::vector<std::string>& table, const std::string& v) {
    auto it = std::find(table.begin(), table.end(), v);
    if (it == table.end()) table.push_back(v);
    return static_cast<uint32_t>(std::find(table.begin(), table.end(), v) - table.begin());
  };
  std::vector<std::string> group_keys;
  for (const auto& [start, end, name, group] : calls) {
    optrace::detail::rank_summary::CollectiveCall c;
    c.start_ns = std::llround(start * 1e6);
    c.end_ns = std::llround(end * 1e6);
    c.name = index(rc.names, name);
    c.group = index(group_keys, group);  // "NAME [R, R]": a name and its ranks, as the reader keeps them
    if (c.group == rc.groups.size()) {
      const size_t at = group.find(" [");
      rc.groups.push_back(group.substr(0, at));
      rc.group_ranks.push_back(at == std::string::npos ? "" : group.substr(at + 1));
    }
    rc.calls.push_back(c);
  }
  r.calls = optrace::detail::rank_summary::place_in_steps(std::move(rc), std::move(ranges));
  return r;
}

// Steps 0 and 1 of [0, 100) and [100, 200) ms; `calls` as (start ms, name, group), each 1 us long.
RankTrace hand_made(int64_t rank, const std::vector<std::tuple<double, std::string, std::string>>& calls) {
  std::vector<std::tuple<double, double, std::string, std::string>> timed;
  for (const auto& [ms, name, group] : calls) timed.emplace_back(ms, ms + 0.001, name, group);
  return hand_made_job(rank, {{0, 100}, {100, 200}}, timed);
}
}  // namespace

TEST_CASE("rank summary: collectives are matched per process group, and calls never reached or that differ are named", "[rank_summary]") {
  using C = std::tuple<double, std::string, std::string>;
  // Group "0" (all ranks) and group "pair" (ranks 0 and 1). In step 0 rank 2 reaches group 0's
  // all-reduce 30 ms after the others; the pair's broadcast has rank 1 last by 5 ms, and ranks
  // 0 and 2 tie last at group 0's second call, 2 ms after rank 1 (rank 0 last: the lowest; two
  // late ranks of three are no straggler: nobody blamed). In step 1 rank 1 is last by exactly 1 ms
  // (the threshold: blamed), never reaches group 0's second call, and rank 2 calls a broadcast
  // where the others all-reduce.
  std::vector<RankTrace> ranks;
  ranks.push_back(hand_made(0, {C{10, "gloo:all_reduce", "0"}, C{20, "gloo:broadcast", "pair"}, C{50, "gloo:all_reduce", "0"},
                                C{110, "gloo:all_reduce", "0"}, C{120, "gloo:all_reduce", "0"}}));
  ranks.push_back(hand_made(1, {C{11, "gloo:all_reduce", "0"}, C{25, "gloo:broadcast", "pair"}, C{48, "gloo:all_reduce", "0"},
                                C{111, "gloo:all_reduce", "0"}}));
  ranks.push_back(hand_made(2, {C{40, "gloo:all_reduce", "0"}, C{50, "gloo:all_reduce", "0"}, C{90.5, "gloo:all_reduce", "0"},
                                C{110, "gloo:broadcast", "0"}, C{120.5, "gloo:all_reduce", "0"}}));
  // The step-0 call of rank 2 at 90.5 ms is group 0's third there: nobody else made it.
  const RankSummary summary = RankSummary::from_ranks(std::move(ranks));
  const auto& w = summary.waits();
  CHECK(w.groups_named);
  auto find = [&](int64_t step, const std::string& group, int64_t index) {
    for (const auto& c : w.collectives)
      if (c.step == step && c.group == group && c.index == index) return c;
    FAIL("no collective " << step << " " << group << " " << index);
    return optrace::detail::rank_summary::CollectiveWait{};
  };
  const auto first = find(0, "0", 0);
  CHECK(first.ranks == 3);
  CHECK(first.last_rank == 2);
  CHECK(first.max_wait_ns == 30000000);
  CHECK(first.total_wait_ns == 30000000 + 29000000);
  const auto pair = find(0, "pair", 0);
  CHECK(pair.ranks == 2);
  CHECK(pair.last_rank == 1);
  CHECK(pair.max_wait_ns == 5000000);
  const auto tie = find(0, "0", 1);
  CHECK(tie.last_rank == 0);  // 0 and 2 at 50 ms: the lowest
  CHECK(tie.max_wait_ns == 2000000);
  CHECK(tie.late == 0);
  CHECK_FALSE(tie.blamed());
  CHECK(find(1, "0", 0).name == "gloo:all_reduce");
  CHECK(find(1, "0", 0).max_wait_ns == 1000000);  // exactly the noise threshold: blamed
  CHECK(find(1, "0", 0).blamed());
  REQUIRE(w.ranks.size() == 3);
  CHECK(w.ranks[2].caused_ns == 59000000);
  CHECK(w.ranks[2].steps == std::vector<int64_t>{0});
  CHECK(w.ranks[1].caused_ns == 5000000 + 1000000 + 1000000);  // step 1: ranks 0 and 2 waited 1 ms
  CHECK(w.ranks[0].caused_ns == 0);
  CHECK(w.ranks[1].steps == std::vector<int64_t>{0, 1});
  const std::vector<std::string>& notes = summary.notes();
  auto noted = [&](const std::string& text) { return std::find(notes.begin(), notes.end(), text) != notes.end(); };
  CHECK(noted("step 1, collective #0 of group 0: rank(s) 2 called another collective than gloo:all_reduce there: the ranks' calls do not "
              "match from this one on"));
  CHECK(noted("rank 0 made 2 of the 3 collective calls of group 0 that other ranks made in step 0: it never reached #2 there (a hang, "
              "or a window cut short)"));
  CHECK(noted("rank 1 made 2 of the 3 collective calls of group 0 that other ranks made in step 0: it never reached #2 there (a hang, "
              "or a window cut short)"));
  CHECK(noted("rank 1 made 1 of the 2 collective calls of group 0 that other ranks made in step 1: it never reached #1 there (a hang, "
              "or a window cut short)"));
  CHECK(notes.size() == 4);  // rank 2 is not of group "pair": it lacks none of its calls
  CHECK_THAT(summary.table(), OPTRACE_CONTAINS("the rank the others waited for most: 2 (59.000 ms at 1 collective(s), steps 0)\n"));
}

TEST_CASE("rank summary: why the last rank was late is its way there against the median rank's, on torch 2.6's traces", "[rank_summary]") {
  // Rank 1 sleeps 20 ms before each step's all-reduces (time.sleep: no event). Recomputed in
  // Python from the traces: each rank's way to its step's first gloo:all_reduce (from the step's
  // start) and the time in it covered by no CPU event; rank 1 then rank 0, in microseconds:
  // step 0 22385.085 / 21125.008 and 4941.680 / 3871.586; step 1 20951.807 / 20607.636 and
  // 942.970 / 448.081; step 2 21071.595 / 20639.822 and 667.055 / 295.280.
  RankSummary summary = RankSummary::from_ranks({RankTrace::from_kineto_file(kRank0), RankTrace::from_kineto_file(kRank1)});
  CHECK(summary.causes().empty());  // not until asked: it reads the traces again
  summary.explain_waits();
  CHECK(summary.notes().empty());
  const auto& w = summary.waits();
  REQUIRE(summary.causes().size() == 3);
  const double way[3][2] = {{22385.085, 4941.680}, {20951.807, 942.970}, {21071.595, 667.055}};
  const double outside[3][2] = {{21125.008, 3871.586}, {20607.636, 448.081}, {20639.822, 295.280}};
  for (const auto& why : summary.causes()) {
    const auto& c = w.collectives[why.collective];
    INFO("step " << c.step);
    REQUIRE(why.read);
    REQUIRE(c.step >= 0);
    REQUIRE(c.step <= 2);
    const auto k = static_cast<size_t>(c.step);
    CHECK(c.last.rank == 1);
    CHECK(c.median.rank == 0);
    // Python's sums of float microseconds round to a few nanoseconds.
    CHECK(std::abs(c.last.ns() - ns(way[k][0])) <= 5);
    CHECK(std::abs(c.median.ns() - ns(way[k][1])) <= 5);
    // The sleep is the first reason, as the job was written.
    REQUIRE_FALSE(why.rows.empty());
    CHECK(why.rows[0].outside);
    CHECK(std::abs(why.rows[0].late_ns - ns(outside[k][0])) <= 5);
    CHECK(std::abs(why.rows[0].median_ns - ns(outside[k][1])) <= 5);
    CHECK(why.rows[0].excess_ns() > (c.step == 0 ? 17000000 : 19000000));
    // What each rank ran longer comes after, largest first.
    for (size_t r = 1; r < why.rows.size(); ++r) CHECK(why.rows[r].excess_ns() <= why.rows[r - 1].excess_ns());
  }
  const std::string table = summary.table();
  CHECK_THAT(table, OPTRACE_CONTAINS("  step 1, gloo:all_reduce #0: rank 1 arrived 21.306 ms after the first; 1 other rank(s) waited 21.306 ms in all\n"
                                     "    it set out 1.297 ms after the median rank (rank 0): its step, or its collective before, ended later\n"
                                     "    its way there took 20.952 ms, the median rank's (rank 0) 0.943 ms; rank 1 spent more time:\n"
                                     "      20.160 ms more outside any op (20.608 against 0.448 ms)\n"));
  // Step 0: rank 0's step began 62 ms before rank 1's; that and the way's 17.4 ms more make the wait.
  CHECK_THAT(table, OPTRACE_CONTAINS("    it set out 61.993 ms after the median rank (rank 0)"));
  const auto doc = optrace::json::Document::parse(summary.to_json());
  int64_t causes = 0;
  for (optrace::json::Node c : doc->root()["waits"]["causes"].array()) {
    ++causes;
    CHECK(c["rank"].as_int() == 1);
    CHECK(c["median_rank"].as_int() == 0);
    CHECK((*c["rows"].array().begin())["outside"].as_bool());
  }
  CHECK(causes == 3);
}

namespace {
// `text` as a JSON string: the newlines the tests put in names escaped.
std::string json_quoted(const std::string& text) {
  std::string out = "\"";
  for (char ch : text) out += ch == '\n' ? std::string("\\n") : std::string(1, ch);
  return out + "\"";
}

// A rank's Kineto trace as torch.profiler writes it, in a file: one step [0, 100) ms, CPU ops on
// the main thread (`ops`: name, input dims as JSON, start ms, duration ms) and one gloo:all_reduce
// of group `group` on a worker thread from `call_ms` to 100 ms.
std::string rank_trace_file(int64_t rank, const std::vector<std::tuple<std::string, std::string, double, double>>& ops, double call_ms,
                            const std::string& group = "0", int64_t world = 3, const std::string& group_ranks = "") {
  std::string events = R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 7, "tid": 7, "ts": 0, "dur": 100000})";
  for (const auto& [name, dims, start, dur] : ops)
    events += R"(, {"ph": "X", "cat": "cpu_op", "name": )" + json_quoted(name) + R"(, "pid": 7, "tid": 7, "ts": )" + std::to_string(start * 1000) +
              R"(, "dur": )" + std::to_string(dur * 1000) + R"(, "args": {"Input Dims": )" + dims + "}}";
  events += R"(, {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 7, "tid": 9, "ts": )" + std::to_string(call_ms * 1000) +
            R"(, "dur": )" + std::to_string((100 - call_ms) * 1000) + R"(, "args": {"Process Group Name": )" +
            json_quoted(group) + (group_ranks.empty() ? "" : R"(, "Process Group Ranks": )" + json_quoted(group_ranks)) + "}}";
  const std::string path = optrace_test::temp_path("rank_summary_why_rank" + std::to_string(rank) + ".pt.trace.json");
  optrace::detail::write_file_atomic(path, R"({"distributedInfo": {"backend": "gloo", "rank": )" + std::to_string(rank) +
                                                R"(, "world_size": )" + std::to_string(world) + R"(}, "baseTimeNanoseconds": 1700000000000000000, "traceEvents": [)" + events + "]}");
  return path;
}
}  // namespace

TEST_CASE("rank summary: the late rank's ops are named with their shapes, by self time, largest excess first", "[rank_summary]") {
  using Op = std::tuple<std::string, std::string, double, double>;
  // Every rank runs aten::linear (5 ms, 4 of them in aten::addmm) from 1 ms. Rank 2 then runs
  // aten::embedding for 31 ms, 30 of them in aten::index_select, and arrives at 40 ms; rank 1
  // arrives at 8 ms, rank 0 at 7 ms: rank 0 is the median of the other two (the shorter way).
  const std::vector<Op> linear = {Op{"aten::linear", "[[2, 8], [4, 8], [4]]", 1, 5}, Op{"aten::addmm", "[[4], [2, 8], [8, 4]]", 1.5, 4}};
  std::vector<Op> slow = linear;
  slow.push_back(Op{"aten::embedding", "[[1000, 64], [50]]", 7, 31});
  slow.push_back(Op{"aten::index_select", "[[1000, 64], [], [50]]", 7.5, 30});
  std::vector<RankTrace> ranks;
  ranks.push_back(RankTrace::from_kineto_file(rank_trace_file(0, linear, 7)));
  ranks.push_back(RankTrace::from_kineto_file(rank_trace_file(1, linear, 8)));
  ranks.push_back(RankTrace::from_kineto_file(rank_trace_file(2, slow, 40)));
  RankSummary summary = RankSummary::from_ranks(std::move(ranks));
  summary.explain_waits();
  REQUIRE(summary.causes().size() == 1);
  const auto& why = summary.causes()[0];
  const auto& c = summary.waits().collectives[why.collective];
  CHECK(c.last.rank == 2);
  CHECK(c.median.rank == 0);
  CHECK(c.last.ns() == 40000000);
  CHECK(c.median.ns() == 7000000);
  // Outside any op: rank 2 4 ms of 40 (1 before linear, 1 between linear and embedding, 2 after
  // it), rank 0 2 ms of 7. linear and addmm: the same on both, no excess.
  REQUIRE(why.rows.size() == 3);
  CHECK(why.rows[0].name == "aten::index_select");
  CHECK(why.rows[0].input_shapes == "[[1000, 64], [], [50]]");
  CHECK(why.rows[0].late_ns == 30000000);
  CHECK(why.rows[0].median_ns == 0);
  CHECK(why.rows[1].outside);
  CHECK(why.rows[1].late_ns == 4000000);
  CHECK(why.rows[1].median_ns == 2000000);
  CHECK(why.rows[2].name == "aten::embedding");  // its self time: 31 ms less its child's 30
  CHECK(why.rows[2].late_ns == 1000000);
  CHECK_THAT(summary.table(),
             OPTRACE_CONTAINS("  step 0, gloo:all_reduce #0 of group 0: rank 2 arrived 33.000 ms after the first; 2 other rank(s) waited 65.000 ms in all\n"
                              "    its way there took 40.000 ms, the median rank's (rank 0) 7.000 ms; rank 2 spent more time:\n"
                              "      30.000 ms more in aten::index_select [[1000, 64], [], [50]] (30.000 against 0.000 ms)\n"
                              "      2.000 ms more outside any op (4.000 against 2.000 ms)\n"
                              "      1.000 ms more in aten::embedding [[1000, 64], [50]] (1.000 against 0.000 ms)\n"
                              "the rank the others waited for most: 2"));
}

TEST_CASE("rank summary: a trace that cannot be read again is noted, and names from traces cannot forge lines", "[rank_summary]") {
  using Op = std::tuple<std::string, std::string, double, double>;
  const std::string group = "0\nrank 9: forged";
  std::vector<RankTrace> ranks;
  ranks.push_back(RankTrace::from_kineto_file(rank_trace_file(0, {}, 7, group, 2)));
  ranks.push_back(RankTrace::from_kineto_file(
      rank_trace_file(1, {Op{"aten::mm\nrank 8: forged", "[[2, 2]]", 10, 20}}, 40, group, 2)));
  RankSummary summary = RankSummary::from_ranks(ranks);
  summary.explain_waits();
  const std::string table = summary.table();
  CHECK_THAT(table, OPTRACE_CONTAINS("  step 0, gloo:all_reduce #0 of group 0\\nrank 9: forged: rank 1 arrived 33.000 ms"));
  CHECK_THAT(table, OPTRACE_CONTAINS("      20.000 ms more in aten::mm\\nrank 8: forged [[2, 2]] (20.000 against 0.000 ms)\n"));
  for (const char* forged : {"\nrank 9", "\nrank 8"}) CHECK(table.find(forged) == std::string::npos);
  CHECK(optrace::json::Document::parse(summary.to_json())->root()["waits"]["causes"].array().size() == 1);

  // The file is gone by the time it is read again: said once, the summary kept.
  std::remove(ranks[1].file.c_str());
  RankSummary gone = RankSummary::from_ranks(ranks);
  gone.explain_waits();
  REQUIRE(gone.causes().size() == 1);
  CHECK_FALSE(gone.causes()[0].read);
  REQUIRE(gone.notes().size() == 1);
  CHECK_THAT(gone.notes()[0], OPTRACE_STARTS_WITH("rank 1's trace could not be read again to say why it was late or how the median rank "
                                                  "compares: " + ranks[1].file + ": "));
  CHECK(gone.notes()[0].find('\n') == std::string::npos);
  gone.explain_waits();  // once: nothing read or said again
  CHECK(gone.notes().size() == 1);
  CHECK_THAT(gone.table(), OPTRACE_CONTAINS("waited 33.000 ms in all\nthe rank the others waited for most: 1"));
}

TEST_CASE("rank summary: a collective blames only a late group split from the others by a gap", "[rank_summary]") {
  using optrace::detail::rank_summary::late_group;
  const int64_t ms = 1000000;
  auto at = [&](std::vector<double> times) {
    std::vector<int64_t> out;
    for (double t : times) out.push_back(std::llround(t * ms));
    return out;
  };
  // Measured: 16 forked gloo ranks on 2 cores, no straggler at these collectives (gloo_ranks
  // --straggler 16 11, steps 1 and 3): spread, however long the waits.
  CHECK(late_group(at({0.0, 11.4, 27.7, 29.4, 30.1, 32.5, 33.8, 34.3, 39.3, 41.5, 42.4, 47.2, 54.0, 55.2, 55.5, 57.4})) == 0);
  CHECK(late_group(at({0.0, 0.7, 1.7, 1.9, 2.7, 4.3, 5.1, 5.5, 6.1, 6.4, 7.2, 8.0, 8.1, 9.0, 9.7, 14.9})) == 0);
  // Its straggler, step 4: 129 ms after a spread of 22.
  CHECK(late_group(at({0.0, 3.2, 3.3, 4.0, 4.3, 9.1, 13.2, 13.5, 14.3, 15.6, 16.2, 16.9, 17.5, 21.8, 22.0, 151.0})) == 1);
  // Two stragglers, apart or together, in any order; but not half the ranks and one more.
  CHECK(late_group(at({90, 0, 1, 2, 3, 40})) == 2);
  CHECK(late_group(at({0, 1, 2, 3, 40, 41})) == 2);
  CHECK(late_group(at({0, 1, 40, 41, 42})) == 0);
  // Two ranks: the later is late from 1 ms on; one rank or none: nobody.
  CHECK(late_group(at({0, 1})) == 1);
  CHECK(late_group(at({0, 0.999})) == 0);
  CHECK(late_group(at({5})) == 0);
  CHECK(late_group({}) == 0);
  // A gap narrower than the spread before it is no split; hostile times saturate.
  CHECK(late_group(at({0, 10, 19})) == 0);
  CHECK(late_group({std::numeric_limits<int64_t>::min(), 0, std::numeric_limits<int64_t>::max()}) == 1);
}

TEST_CASE("rank summary: a rank whose clock is off is proven so where it arrived after another's call had ended", "[rank_summary]") {
  using optrace::detail::rank_summary::waits_for_all;
  // Three ranks make 4 all-reduces per step; the calls of one end together (at 20, 40, 60, 80 ms
  // of each step) and ranks 0 and 1 arrive 1 and 2 ms before, but rank 2's clock reads 7 ms later:
  // on it, its calls start 6 ms after the others' ended, which one clock cannot show.
  std::vector<RankTrace> ranks;
  for (int64_t rank = 0; rank < 3; ++rank) {
    RankTrace r;
    r.rank = rank;
    r.file = "rank" + std::to_string(rank);
    r.steps = {{0, 100000, 0, 100000}, {1, 100000, 0, 100000}};
    optrace::detail::rank_summary::RankCalls rc;
    rc.names = {"gloo:all_reduce"};
    rc.groups = {"0"};
    rc.group_ranks = {""};
    const int64_t skew = rank == 2 ? 7000000 : 0, ms = 1000000;
    for (int64_t step = 0; step < 2; ++step)
      for (int64_t k = 1; k <= 4; ++k) {
        optrace::detail::rank_summary::CollectiveCall c;
        c.end_ns = step * 100 * ms + k * 20 * ms + skew;
        c.start_ns = c.end_ns - (rank == 1 ? 2 : 1) * ms;
        rc.calls.push_back(c);
      }
    r.calls = optrace::detail::rank_summary::place_in_steps(std::move(rc), {{0, 0, 100 * ms}, {1, 100 * ms, 200 * ms}});
    ranks.push_back(std::move(r));
  }
  const RankSummary summary = RankSummary::from_ranks(std::move(ranks));
  const auto& w = summary.waits();
  CHECK(w.clock_checked == 8);
  REQUIRE(w.clock_gaps.size() == 1);
  CHECK(w.clock_gaps[0].later == 2);
  CHECK(w.clock_gaps[0].earlier == 0);  // of ranks 0 and 1, which end together: the lower
  CHECK(w.clock_gaps[0].ns == 6000000);
  // Read on each rank's own clock, rank 2 is blamed at every collective; the clocks line says why
  // that may be the clock.
  CHECK(w.ranks[2].blamed == 8);
  CHECK_THAT(summary.table(), OPTRACE_CONTAINS("\nclocks: at the 8 all-reduce, all-gather, reduce-scatter, all-to-all or barrier call(s) "
                                               "checked (gloo's ranges), ranks arrived after another's call had ended, which one clock "
                                               "cannot show; the waits above are read on each rank's own clock:\n  rank 2's clock reads at "
                                               "least 6.000 ms later than rank 0's (step 0, gloo:all_reduce #0 of group 0)\n"));
  const auto doc = optrace::json::Document::parse(summary.to_json());
  CHECK(doc->root()["waits"]["clocks_checked"].as_int() == 8);
  for (optrace::json::Node g : doc->root()["waits"]["clock_gaps"].array()) CHECK(g["at_least_us"].as_double() == 6000.0);
  // Only where no rank can leave before all arrived, on ranges that span the call.
  CHECK(waits_for_all("gloo:all_reduce"));
  CHECK(waits_for_all("gloo:barrier"));
  CHECK(waits_for_all("gloo:all_gather"));
  CHECK_FALSE(waits_for_all("gloo:broadcast"));
  CHECK_FALSE(waits_for_all("c10d::allreduce_"));
  CHECK_FALSE(waits_for_all("nccl:all_reduce"));  // NCCL's CPU range ends when the call is enqueued
  CHECK(waits_for_all("nccl:all_reduce", true));   // its kernels end when every rank's have run
  CHECK(waits_for_all("nccl:all_to_all", true));
  CHECK_FALSE(waits_for_all("nccl:broadcast", true));
}

TEST_CASE("rank summary: without a wait of 1 ms nobody is blamed", "[rank_summary]") {
  using C = std::tuple<double, std::string, std::string>;
  std::vector<RankTrace> ranks;
  ranks.push_back(hand_made(0, {C{10, "gloo:all_reduce", ""}, C{110, "gloo:all_reduce", ""}}));
  ranks.push_back(hand_made(1, {C{10.9, "gloo:all_reduce", ""}, C{109.5, "gloo:all_reduce", ""}}));
  const RankSummary summary = RankSummary::from_ranks(std::move(ranks));
  REQUIRE(summary.waits().collectives.size() == 2);
  for (const auto& r : summary.waits().ranks) CHECK(r.blamed == 0);
  CHECK_THAT(summary.table(), OPTRACE_CONTAINS("no collective had ranks arriving late (their waits are the ranks' spread: noise): no rank to blame\n"));
}

TEST_CASE("rank summary: ranks whose steps differ and ranks missing from the world are noted", "[rank_summary]") {
  // Rank 2 of a world of 4 (hand-made): steps 0 and 7; in step 7 [200, 250) us, c10d::allreduce_
  // [210, 220) and gloo:all_reduce [215, 225) overlap (15 us once), an NCCL kernel [240, 260) is
  // clipped to the step (10 us): 25 us in collectives.
  const RankTrace r2 = RankTrace::from_kineto_file(kCliRank + "/rank2_other_steps.pt.trace.json");
  CHECK(r2.world_size == 4);
  CHECK(steps_ns(r2) == std::vector<StepNs>{{0, 50000, 0, 50000}, {7, 50000, 25000, 25000}});
  const RankSummary summary =
      RankSummary::from_ranks({RankTrace::from_kineto_file(kRank0), RankTrace::from_kineto_file(kRank1), r2});
  CHECK(summary.steps() == std::vector<int64_t>{0, 1, 2, 7});
  CHECK(summary.slowest_rank(7) == std::optional<int64_t>(2));  // the only rank with step 7
  REQUIRE(summary.notes().size() == 5);
  CHECK(summary.notes()[0] == "rank 0 (" + kRank0 + ") lacks steps 7 that other ranks have: its window differs; those steps compare the ranks that have them");
  CHECK_THAT(summary.notes()[2], OPTRACE_STARTS_WITH("rank 2 (" + r2.file + ") lacks steps 1, 2 that other ranks have"));
  CHECK(summary.notes()[3] == "3 traces of a world of 4 ranks: the slowest rank is among those given");
  // Rank 2 calls collectives (in step 7) but none in step 0, where the others made 4.
  CHECK(summary.notes()[4] == "rank 2 made 0 of the 4 collective calls that other ranks made in step 0: it never reached #0..3 "
                              "there (a hang, or a window cut short)");
  // torch 2.6's rank 0 of another run, alone (schedule warmup=1 active=2: steps 1 and 2).
  const RankSummary one = RankSummary::from_ranks(
      {RankTrace::from_kineto_file(optrace_test::data_path("distributed/torch26_gloo_rank0.pt.trace.json.gz"))});
  CHECK(steps_ns(one.ranks()[0]) == std::vector<StepNs>{{1, 3307390, 1609056, 1698334}, {2, 7164764, 5392184, 1772580}});
  CHECK(one.notes() == std::vector<std::string>{"1 traces of a world of 2 ranks: the slowest rank is among those given"});
}

TEST_CASE("rank summary: a trace reads the same whole and streamed with distributedInfo after the events", "[rank_summary]") {
  const std::string text = optrace::detail::read_file_maybe_gzip(kRank0);
  // Whole: the plain text is under kStreamFromBytes.
  const std::string plain = optrace_test::temp_path("rank_summary_rank0.pt.trace.json");
  optrace::detail::write_file_maybe_gzip(plain, text);
  CHECK(steps_ns(RankTrace::from_kineto_file(plain)) == kRank0Steps);
  // Streamed, 1 MiB at a time: 5 MB of other events first, and "distributedInfo" moved after the
  // events, into the last piece.
  std::string big = text;
  const std::string list = "\"traceEvents\": [\n";
  const size_t events = big.find(list);
  REQUIRE(events != std::string::npos);
  std::string filler;
  while (filler.size() < optrace::detail::kStreamFromBytes + (size_t(1) << 20))
    filler += "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::add\", \"pid\": 1, \"tid\": 1, \"ts\": 5039490600000.000, \"dur\": 1.000},\n";
  big.insert(events + list.size(), filler);
  const size_t info = big.find("  \"distributedInfo\": ");
  REQUIRE(info != std::string::npos);
  const size_t info_end = big.find(",\n", info);
  const std::string info_member = big.substr(info, info_end - info);
  big.erase(info, info_end + 2 - info);
  big.insert(big.rfind('}'), ",\n" + info_member + "\n");
  REQUIRE(big.find("\"distributedInfo\"") > big.rfind("\"ProfilerStep#"));
  const std::string streamed = optrace_test::temp_path("rank_summary_rank0_big.pt.trace.json");
  optrace::detail::write_file_maybe_gzip(streamed, big);
  const RankTrace r = RankTrace::from_kineto_file(streamed);
  CHECK(r.rank == 0);
  CHECK(r.world_size == 2);
  CHECK(r.backend == "gloo");
  CHECK(steps_ns(r) == kRank0Steps);
  optrace::detail::write_file_maybe_gzip(streamed + ".gz", big);
  CHECK(steps_ns(RankTrace::from_kineto_file(streamed + ".gz")) == kRank0Steps);
}

// The time in collectives per step is found by two binary searches over the merged intervals;
// on random steps (overlapping each other) and collectives (overlapping too) it is the naive
// O(steps x collectives) sum of each merged interval clipped to the step. NCCL kernels count in
// the step that launched them (their runtime call's correlation id), whole, with the step's
// ranges, at most the step's time; those whose launch is missing or in no step where they run.
TEST_CASE("rank summary: the time in collectives per step equals the naive sum, on random traces", "[rank_summary]") {
  std::mt19937_64 random(61);
  int64_t past_step = 0, by_time = 0, held = 0;  // the rules each decided some step's time
  for (int round = 0; round < 40; ++round) {
    std::uniform_int_distribution<int64_t> at(0, 2000), length(0, 300);
    struct Range { int64_t start, end; };
    // Steps one after another in the second half of the rounds (as a profiler writes them), any
    // way in the first.
    std::vector<Range> steps(1 + random() % 10), collectives(random() % 20);
    struct Kernel { Range runs; int64_t launch; };  // launch -1: the trace holds none
    std::vector<Kernel> kernels(round % 4 == 0 ? 0 : random() % 12);
    std::string events;
    auto add = [&events](const std::string& cat, const std::string& name, const Range& r, const std::string& args = "") {
      events += (events.empty() ? "" : ", ") + std::string("{\"ph\": \"X\", \"cat\": \"") + cat + "\", \"name\": \"" + name +
                "\", \"ts\": " + std::to_string(r.start) + ", \"dur\": " + std::to_string(r.end - r.start) +
                (args.empty() ? "" : ", \"args\": " + args) + "}";
    };
    int64_t next_start = 0;
    for (size_t k = 0; k < steps.size(); ++k) {
      const int64_t start = round < 20 ? at(random) : next_start + random() % 3;
      steps[k] = {start, start + length(random)};
      next_start = steps[k].end;
      add("user_annotation", "ProfilerStep#" + std::to_string(k), steps[k]);
    }
    for (Range& c : collectives) {
      const int64_t start = at(random);
      c = {start, start + length(random) / 3};
      add("cpu_op", "gloo:all_reduce", c);
    }
    for (size_t k = 0; k < kernels.size(); ++k) {
      Kernel& n = kernels[k];
      const int64_t start = at(random);
      n.runs = {start, start + length(random)};
      n.launch = random() % 5 == 0 ? -1 : std::max<int64_t>(0, start - length(random));
      const std::string correlation = std::to_string(100 + k);
      add(k % 2 ? "kernel" : "Kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", n.runs,
          "{\"device\": 0, \"correlation\": " + correlation + "}");
      // Other runtime calls and kernels, whose correlation ids match no NCCL kernel.
      add("cuda_runtime", "cudaLaunchKernel", {start, start + 1}, "{\"correlation\": " + std::to_string(900 + k) + "}");
      add("kernel", "void at::native::vectorized_elementwise_kernel", {start, start + 2}, "{\"correlation\": " + std::to_string(900 + k) + "}");
      if (n.launch >= 0)
        add(k % 3 ? "cuda_runtime" : "cuda_driver", k % 3 ? "cudaLaunchKernel" : "cuLaunchKernelEx", {n.launch, n.launch + 3},
            "{\"cbid\": 211, \"correlation\": " + correlation + "}");
    }
    const std::string file = optrace_test::temp_path("rank_summary_random.json");
    optrace::detail::write_file_atomic(file, R"({"distributedInfo": {"rank": 0}, "traceEvents": [)" + events + "]}");
    const RankTrace r = RankTrace::from_kineto_file(file);
    REQUIRE(r.steps.size() == steps.size());
    // The step a time is in: the last to start at or before it (by start, then the trace's
    // order, as a stable sort leaves them), if it has not ended.
    auto step_at = [&](int64_t t) -> int64_t {
      int64_t found = -1;
      for (size_t k = 0; k < steps.size(); ++k)
        if (steps[k].start <= t && (found < 0 || steps[k].start >= steps[static_cast<size_t>(found)].start)) found = static_cast<int64_t>(k);
      return found >= 0 && t < steps[static_cast<size_t>(found)].end ? found : -1;
    };
    for (size_t k = 0; k < steps.size(); ++k) {
      // Naive: each nanosecond of the step that a collective or a kernel without its launch in a
      // step covers, then each nanosecond outside it of the kernels the step launched.
      auto in_range = [](int64_t t, const Range& c) { return c.start <= t && t < c.end; };
      auto launched_here = [&](const Kernel& n) { return n.launch >= 0 && step_at(n.launch) == static_cast<int64_t>(k); };
      auto counted_by_time = [&](const Kernel& n) { return n.launch < 0 || step_at(n.launch) < 0; };
      int64_t covered = 0;
      for (int64_t t = steps[k].start; t < steps[k].end; ++t)
        covered += std::any_of(collectives.begin(), collectives.end(), [&](const Range& c) { return in_range(t, c); }) ||
                   std::any_of(kernels.begin(), kernels.end(), [&](const Kernel& n) {
                     return in_range(t, n.runs) && (launched_here(n) || counted_by_time(n));
                   });
      const int64_t within = covered;
      for (int64_t t = 0; t < 3000; ++t)
        if (!in_range(t, steps[k]))
          covered += std::any_of(kernels.begin(), kernels.end(), [&](const Kernel& n) { return launched_here(n) && in_range(t, n.runs); });
      past_step += covered > within;
      by_time += std::any_of(kernels.begin(), kernels.end(), [&](const Kernel& n) {
        return counted_by_time(n) && n.runs.start < steps[k].end && steps[k].start < n.runs.end;
      });
      held += covered > steps[k].end - steps[k].start;
      covered = std::min(covered, steps[k].end - steps[k].start);
      INFO("round " << round << ", step " << k);
      CHECK(r.steps[k].collective_us == static_cast<double>(covered));
    }
  }
  CHECK(past_step > 0);
  CHECK(by_time > 0);
  CHECK(held > 0);
}

// A file name and a backend are whatever the job wrote: a newline in them does not forge a line
// of the table or a note, and --json of a name that is not UTF-8 still parses.
TEST_CASE("rank summary: names from files are printed escaped and written as valid JSON", "[rank_summary]") {
  std::string text = optrace::detail::read_file_maybe_gzip(kRank0);
  const std::string backend = "\"backend\": \"gloo\"";
  const size_t at = text.find(backend);
  REQUIRE(at != std::string::npos);
  text.replace(at, backend.size(), "\"backend\": \"gloo\\nrank 9: forged\"");
  const std::string forged = optrace_test::temp_path("rank_summary_forged\nrank 8: \xff.json");
  optrace::detail::write_file_atomic(forged, text);
  const RankSummary summary = RankSummary::from_ranks(
      {RankTrace::from_kineto_file(forged), RankTrace::from_kineto_file(kCliRank + "/rank2_other_steps.pt.trace.json")});
  const std::string table = summary.table();
  CHECK_THAT(table, OPTRACE_CONTAINS("rank_summary_forged\\nrank 8: \\xff.json (gloo\\nrank 9: forged, world size 2)\n"));
  std::string lines = table;
  for (const std::string& n : summary.notes()) lines += n + "\n";
  CHECK(lines.find("\nrank 9") == std::string::npos);
  CHECK(lines.find("\nrank 8") == std::string::npos);
  CHECK(summary.notes()[0].find('\n') == std::string::npos);
  const auto doc = optrace::json::Document::parse(summary.to_json());  // simdjson refuses text that is not UTF-8
  CHECK(std::string((*doc->root()["ranks"].array().begin())["file"].as_string()).find("rank 8: \xEF\xBF\xBD.json") != std::string::npos);
}

TEST_CASE("rank summary: refusals are one-line errors that name the file", "[rank_summary]") {
  SECTION("a trace without distributedInfo") {
    const std::string scripted = optrace_test::data_path("kineto/torch26_scripted.pt.trace.json.gz");
    CHECK_THROWS_WITH(RankTrace::from_kineto_file(scripted),
                      "optrace: " + scripted + ": Error: no \"distributedInfo\" with a \"rank\": torch.profiler writes one in a "
                                               "distributed job's traces (torch.distributed initialized); optrace cannot tell which rank this is");
  }
  SECTION("a rank given twice names both files") {
    const std::string again = kCliRank + "/rank0_again.pt.trace.json";
    const std::string what = error_of([&] {
      RankSummary::from_ranks({RankTrace::from_kineto_file(kRank0), RankTrace::from_kineto_file(kRank1), RankTrace::from_kineto_file(again)});
    });
    auto message = [](const std::string& a, const std::string& b) {
      return "optrace: " + a + ": Error: rank 0 again: " + b + " is rank 0 too; give one trace per rank";
    };
    CHECK(what == message(again, kRank0));
    // The later of two traces of a rank is the one given again, among many traces too (past 16,
    // std::sort is not stable: it could name either).
    std::vector<RankTrace> many{RankTrace::from_kineto_file(again)};
    const RankTrace rank1 = RankTrace::from_kineto_file(kRank1);
    for (int k = 0; k < 38; ++k) many.push_back(rank1);
    many.push_back(RankTrace::from_kineto_file(kRank0));
    const std::string among_many = error_of([&] { RankSummary::from_ranks(std::move(many)); });
    CHECK(among_many == message(kRank0, again));
  }
  SECTION("a key it reads given twice in one object") {
    const std::string twice = ": a key given twice in one object (JSON readers differ on which value they take)";
    const std::string rank_twice = optrace_test::temp_path("rank_summary_rank_twice.json");
    optrace::detail::write_file_atomic(rank_twice, R"({"distributedInfo": {"rank": 0, "world_size": 2, "rank": 1}, "traceEvents": []})");
    CHECK_THROWS_WITH(RankTrace::from_kineto_file(rank_twice), "optrace: " + rank_twice + ": JsonError at /distributedInfo/rank" + twice);
    const std::string info_twice = optrace_test::temp_path("rank_summary_info_twice.json");
    optrace::detail::write_file_atomic(info_twice, R"({"distributedInfo": {"rank": 0}, "traceEvents": [], "distributedInfo": {"rank": 1}})");
    CHECK_THROWS_WITH(RankTrace::from_kineto_file(info_twice), "optrace: " + info_twice + ": JsonError at /distributedInfo" + twice);
    const std::string ts_twice = optrace_test::temp_path("rank_summary_ts_twice.json");
    optrace::detail::write_file_atomic(ts_twice, R"({"distributedInfo": {"rank": 0}, "traceEvents": [{"ph": "X", "ts": 1, "ts": 2}]})");
    CHECK_THROWS_WITH(RankTrace::from_kineto_file(ts_twice), "optrace: " + ts_twice + ": JsonError at /traceEvents/0/ts" + twice);
    const std::string events_twice = optrace_test::temp_path("rank_summary_events_twice.json");
    optrace::detail::write_file_atomic(events_twice, R"({"distributedInfo": {"rank": 0}, "traceEvents": [], "traceEvents": [{"ph": "X", "ts": 1}]})");
    CHECK_THROWS_WITH(RankTrace::from_kineto_file(events_twice), "optrace: " + events_twice + ": JsonError at /traceEvents" + twice);
  }
  SECTION("a kernel's or runtime call's correlation id that is not one") {
    const std::string bad = optrace_test::temp_path("rank_summary_bad_correlation.json");
    for (const std::string& event :
         {std::string(R"({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "ts": 1, "dur": 1, "args": {"correlation": -3}})"),
          std::string(R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1, "dur": 1, "args": {"correlation": "7"}})"),
          std::string(R"({"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "ts": 1, "dur": 1, "args": {"correlation": 1, "correlation": 2}})")}) {
      optrace::detail::write_file_atomic(bad, R"({"distributedInfo": {"rank": 0}, "traceEvents": [{"ph": "X"}, )" + event + "]}");
      const std::string what = error_of([&] { (void)RankTrace::from_kineto_file(bad); });
      INFO(what);
      CHECK(what.rfind("optrace: " + bad + ": JsonError at /traceEvents/1/args/correlation", 0) == 0);
      CHECK(what.find('\n') == std::string::npos);
    }
  }
  SECTION("a step given twice") {
    const std::string twice = kCliRank + "/step_twice.pt.trace.json";
    CHECK_THROWS_WITH(RankTrace::from_kineto_file(twice),
                      "optrace: " + twice + ": Error: ProfilerStep#1 appears twice (two profiling windows in one trace?): give one window per trace");
  }
  SECTION("truncated input") {
    const std::string cut = kCliRank + "/rank3_truncated.pt.trace.json";
    const std::string ended_early = "JsonError at /: malformed JSON: JSON document ended early in the middle of an object or array.";
    CHECK_THROWS_WITH(RankTrace::from_kineto_file(cut), "optrace: " + cut + ": " + ended_early);
    // The real trace cut in the middle of its events, plain and gzip'd (streamed, then read whole
    // to name the error), and its gzip file cut short.
    const std::string text = optrace::detail::read_file_maybe_gzip(kRank0);
    const std::string half = optrace_test::temp_path("rank_summary_half.pt.trace.json");
    optrace::detail::write_file_maybe_gzip(half, text.substr(0, text.size() / 2));
    CHECK_THROWS_WITH(RankTrace::from_kineto_file(half), "optrace: " + half + ": " + ended_early);
    optrace::detail::write_file_maybe_gzip(half + ".gz", text.substr(0, text.size() / 2));
    CHECK_THROWS_WITH(RankTrace::from_kineto_file(half + ".gz"), "optrace: " + half + ".gz: " + ended_early);
    const std::string gz = optrace::detail::read_file(kRank0);
    const std::string short_gz = optrace_test::temp_path("rank_summary_short.pt.trace.json.gz");
    optrace::detail::write_file_atomic(short_gz, gz.substr(0, gz.size() / 2));
    CHECK_THROWS_WITH(RankTrace::from_kineto_file(short_gz),
                      "optrace: " + short_gz + ": IoError: cannot inflate '" + short_gz + "': the gzip data is truncated");
  }
  SECTION("a bad value names its JSON path") {
    const std::string bad_rank = kCliRank + "/rank_not_integer.pt.trace.json";
    CHECK_THROWS_WITH(RankTrace::from_kineto_file(bad_rank),
                      "optrace: " + bad_rank + ": JsonError at /distributedInfo/rank: expected a rank (an integer of at least 0), got string \"zero\"");
    // The events: the path of the event, and of its member.
    const std::string head = R"({"distributedInfo": {"rank": 0}, "traceEvents": [)"
                             R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "ts": 1, "dur": 9}, )";
    const std::string file = optrace_test::temp_path("rank_summary_bad_event.pt.trace.json");
    auto error_for = [&](const std::string& event) {
      optrace::detail::write_file_maybe_gzip(file, head + event + "]}");
      return error_of([&] { RankTrace::from_kineto_file(file); });
    };
    const std::string at = "optrace: " + file + ": JsonError at /traceEvents/1";
    CHECK(error_for("7") == at + ": expected an event object, got integer 7");
    CHECK(error_for(R"({"ph": 1})") == at + "/ph: expected a string, got integer 1");
    CHECK(error_for(R"({"ph": "X", "name": ["gloo:all_reduce"]})") == at + "/name: expected a string, got a list of 1");
    CHECK(error_for(R"({"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "ts": "5", "dur": 1})") ==
          at + "/ts: expected a number, got string \"5\"");
    CHECK(error_for(R"({"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "ts": 5})") == at + ": missing key \"dur\"");
    CHECK(error_for(R"({"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "ts": 5, "dur": -1})") ==
          at + "/dur: expected a duration of at least 0, got -1");
    CHECK(error_for(R"({"ph": "X", "cat" 1})") ==
          at + ": malformed JSON: The JSON document has an improper structure: missing or superfluous commas, braces, missing keys, etc.");
  }
}

TEST_CASE("rank summary: why a trace was taken (optraceCapture) is read and printed, and a bad one refused", "[rank_summary]") {
  auto trace = [](const std::string& name, const std::string& capture) {
    const std::string path = optrace_test::temp_path("rank_summary_" + name + ".json");
    optrace::detail::write_file_atomic(path, R"({"distributedInfo": {"rank": 1}, "optraceCapture": )" + capture +
                                                 R"(, "traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#34", "ts": 10, "dur": 5}]})");
    return path;
  };
  const std::string good = trace("capture", R"({"trigger": "slow_step", "step": 25, "step_ms": 314.3, "median_ms": 15.8, "factor": 3, "rank": 3, "first_step": 34, "iterations": 3})");
  const RankTrace r = RankTrace::from_kineto_file(good);
  REQUIRE(r.capture);
  CHECK(r.capture->step == 25);
  CHECK(r.capture->rank == 3);
  CHECK(r.capture->first_step == 34);
  const RankSummary summary = RankSummary::from_ranks({r});
  CHECK_THAT(summary.table(), OPTRACE_CONTAINS("\n  captured after a slow step: step 25 took 314.3 ms, the median 15.8 ms (seen by rank 3); steps 34..36\n"));
  auto doc = optrace::json::Document::parse(summary.to_json());
  for (optrace::json::Node rank : doc->root()["ranks"].array()) CHECK(rank["capture"]["median_ms"].as_double() == 15.8);
  // The ring's steps hold the slow step.
  const std::string ring = trace("ring", R"({"trigger": "slow_step", "step": 25, "step_ms": 314.3, "median_ms": 15.8, "factor": 3, "rank": 3, "first_step": 16, "iterations": 16})");
  CHECK_THAT(RankSummary::from_ranks({RankTrace::from_kineto_file(ring)}).table(),
             OPTRACE_CONTAINS("\n  captured with a slow step: step 25 took 314.3 ms, the median 15.8 ms (seen by rank 3); steps 16..31\n"));
  // A trace without one has no "capture".
  CHECK(RankSummary::from_ranks({RankTrace::from_kineto_file(kRank0)}).to_json().find("capture") == std::string::npos);
  const std::pair<const char*, const char*> bad[] = {
      {R"([1])", "JsonError at /optraceCapture: expected an object, got a list of 1"},
      {R"({"step": 25})", "JsonError at /optraceCapture: expected step, step_ms, median_ms, rank, first_step and iterations"},
      {R"({"step": 25, "step_ms": 1, "median_ms": 1, "rank": 0, "first_step": 30, "iterations": 3, "step": 26})",
       "JsonError at /optraceCapture/step: a key given twice in one object (JSON readers differ on which value they take)"},
      {R"({"step": -1, "step_ms": 1, "median_ms": 1, "rank": 0, "first_step": 30, "iterations": 3})",
       "JsonError at /optraceCapture/step: expected an integer of at least 0, got integer -1"},
      {R"({"step": 25, "step_ms": "slow", "median_ms": 1, "rank": 0, "first_step": 30, "iterations": 3})",
       "JsonError at /optraceCapture/step_ms: expected a number of at least 0, got string \"slow\""},
      {R"({"step": 25, "step_ms": 1, "median_ms": 1, "rank": -2, "first_step": 30, "iterations": 3})",
       "JsonError at /optraceCapture/rank: expected an integer of at least -1, got integer -2"},
  };
  for (const auto& [capture, what] : bad) {
    const std::string path = trace("capture_bad", capture);
    CHECK_THROWS_WITH(RankTrace::from_kineto_file(path), "optrace: " + path + ": " + what);
  }
  const std::string twice = optrace_test::temp_path("rank_summary_capture_twice.json");
  optrace::detail::write_file_atomic(twice, R"({"distributedInfo": {"rank": 1}, "optraceCapture": {}, "traceEvents": [], "optraceCapture": {}})");
  CHECK_THROWS_WITH(RankTrace::from_kineto_file(twice), OPTRACE_CONTAINS("JsonError at /optraceCapture"));
}

// Ranks 0 and 1 are pair "1", 2 and 3 pair "2", all four the world "0". Rank 3 reaches its pair's
// all-reduce 30 ms after rank 2, which waits for it there; both then reach the world's all-reduce
// about 30 ms after ranks 0 and 1, rank 2 last. Rank 2 came on from its pair's all-reduce no
// slower than the others from theirs: the world's wait is rank 3's (via the pair's). Had rank 2
// taken 40 ms longer on that way, more than its wait there, the wait would be its own.
TEST_CASE("rank summary: a wait passes to the rank that held up the last one at its collective before", "[rank_summary]") {
  using C = std::tuple<double, double, std::string, std::string>;
  auto job = [](double rank2_arrives) {
    std::vector<RankTrace> ranks;
    ranks.push_back(hand_made_job(0, {{0, 100}}, {C{10, 10.1, "gloo:all_reduce", "1"}, C{20, 50.1, "gloo:all_reduce", "0"}}));
    ranks.push_back(hand_made_job(1, {{0, 100}}, {C{10, 10.1, "gloo:all_reduce", "1"}, C{20, 50.1, "gloo:all_reduce", "0"}}));
    ranks.push_back(hand_made_job(2, {{0, 100}}, {C{10, 40.1, "gloo:all_reduce", "2"}, C{rank2_arrives, 50.1, "gloo:all_reduce", "0"}}));
    ranks.push_back(hand_made_job(3, {{0, 100}}, {C{40, 40.1, "gloo:all_reduce", "2"}, C{49.9, 50.1, "gloo:all_reduce", "0"}}));
    return RankSummary::from_ranks(std::move(ranks));
  };
  const RankSummary passed = job(50);
  const auto& w = passed.waits();
  REQUIRE(w.collectives.size() == 3);  // by step, group, index: "0", "1", "2"
  const auto& world = w.collectives[0];
  const auto& pair = w.collectives[2];
  REQUIRE(world.group == "0");
  REQUIRE(pair.group == "2");
  CHECK(pair.blamed());
  CHECK(pair.last_rank == 3);
  CHECK(pair.blamed_rank == 3);
  CHECK(pair.via == -1);
  CHECK(world.late == 2);
  CHECK(world.last_rank == 2);
  CHECK(world.blamed_rank == 3);
  CHECK(world.via == 2);
  REQUIRE(w.ranks.size() == 4);
  CHECK(w.ranks[2].blamed == 0);
  CHECK(w.ranks[3].blamed == 2);
  CHECK(w.ranks[3].caused_ns == pair.total_wait_ns + world.total_wait_ns);
  CHECK_THAT(passed.table(), OPTRACE_CONTAINS("    it had waited for rank 3 at its collective before (step 0, gloo:all_reduce #0 of group 2), "
                                              "which made most of its lag here: the wait is rank 3's\n"));
  const auto doc = optrace::json::Document::parse(passed.to_json());
  const auto world_json = *doc->root()["waits"]["collectives"].array().begin();
  CHECK(world_json["blamed_rank"].as_int() == 3);
  CHECK(world_json["via"]["group"].as_string() == "2");

  // 4 ms more on its way than the others (a loaded machine's noise) still passes on: its 30 ms
  // wait made most of its 34 ms lag.
  CHECK(job(54).waits().collectives[0].blamed_rank == 3);
  // 40 ms more on its way: most of its 70 ms lag is its own.
  const RankSummary own = job(90);
  CHECK(own.waits().collectives[0].last_rank == 2);
  CHECK(own.waits().collectives[0].blamed_rank == 2);
  CHECK(own.waits().collectives[0].via == -1);
}

TEST_CASE("rank summary: groups of one name are told apart by their ranks", "[rank_summary]") {
  // Two pairs each named "1" (add_process_group's default on libtorch 1.13: each rank names the
  // group it adds), read from files: ranks 0 and 1 arrive at 10 and 11 ms, rank 2 at 10 ms and
  // rank 3 at 60 ms. By name alone the four would be one collective of four ranks.
  std::vector<RankTrace> ranks;
  const double arrive[4] = {10, 11, 10, 60};
  for (int64_t rank = 0; rank < 4; ++rank)
    ranks.push_back(RankTrace::from_kineto_file(rank_trace_file(rank, {}, arrive[rank], "1", 4, rank < 2 ? "[0, 1]" : "[2, 3]")));
  const RankSummary summary = RankSummary::from_ranks(std::move(ranks));
  const auto& w = summary.waits();
  REQUIRE(w.collectives.size() == 2);
  CHECK(w.collectives[0].group == "1 [0, 1]");  // the ranks shown: the name alone is not one group
  CHECK(w.collectives[0].ranks == 2);
  CHECK(w.collectives[0].last_rank == 1);
  CHECK(w.collectives[0].max_wait_ns == 1000000);
  CHECK(w.collectives[1].group == "1 [2, 3]");
  CHECK(w.collectives[1].ranks == 2);
  CHECK(w.collectives[1].blamed_rank == 3);
  CHECK(w.collectives[1].max_wait_ns == 50000000);
  REQUIRE(w.ranks.size() == 4);
  CHECK(w.ranks[3].caused_ns == 50000000);
  CHECK(w.ranks[0].waited_ns == 1000000);  // not rank 3's 50 ms
  CHECK(summary.notes().empty());
  CHECK_THAT(summary.table(), OPTRACE_CONTAINS("of group 1 [2, 3]"));

  // Groups whose names differ are shown by their names alone, as before.
  std::vector<RankTrace> named;
  for (int64_t rank = 0; rank < 4; ++rank)
    named.push_back(RankTrace::from_kineto_file(
        rank_trace_file(rank, {}, arrive[rank], rank < 2 ? "1" : "2", 4, rank < 2 ? "[0, 1]" : "[2, 3]")));
  const RankSummary by_name = RankSummary::from_ranks(std::move(named));
  REQUIRE(by_name.waits().collectives.size() == 2);
  CHECK(by_name.waits().collectives[1].group == "2");
}

const std::string kNccl = optrace_test::data_path("distributed_nccl_dlrm");

TEST_CASE("rank summary: NCCL calls are timed by the kernels they launched, on the real traces of an 8-GPU job", "[rank_summary]") {
  // DLRM on 8 V100s, one step (tests/data/distributed_nccl_dlrm/). Recomputed in Python from the
  // traces: each nccl:* range holds the cudaLaunchKernel (its thread) of one ncclKernel_*; the 8
  // ranks' kernels of a call end within 7 us of each other. Kernel starts after the first rank's,
  // in us, per call: #0 (all_to_all) rank 1 0, 3 1502, 4 2752, 5 2955, 0 5489, 2 7116, 6 7119, 7
  // 7624; #1 4 0, 5 48, 0 77, 1 84, 3 86, 6 589, 2 592, 7 1101; #2 7 168 (the others 0..6); #3 7
  // 125 (the others 0..1); #4 (all_reduce) 0, 15, 64, 96, 107, 211, 214, 223 (rank 7 last); #5 7
  // 186, 4 482, 5 534 (the others 0..76); #6 7 136, 4 535, 5 584 (the others 0..30); #7 7 147, 5
  // 871, 4 885 (the others 0..68).
  std::vector<RankTrace> ranks;
  for (const char* file : {"worker0_step_12.1694128201545", "worker1_step_12.1694128201556", "worker2_step_12.1694128201554",
                           "worker3_step_12.1694128201557", "worker4_step_12.1694128201547", "worker5_step_12.1694128201549",
                           "worker6_step_12.1694128201553", "worker7_step_12.1694128201553"})
    ranks.push_back(RankTrace::from_kineto_file(kNccl + "/" + file + ".pt.trace.json.gz"));
  for (const RankTrace& r : ranks) {
    INFO("rank " << r.rank);
    REQUIRE(r.calls.calls.size() == 8);
    for (size_t k = 0; k < 8; ++k) CHECK(r.calls.device_times(k) != nullptr);
  }
  // Rank 0's first call: its range [3083, 3145) us into the step, its kernel [3121, 5267).
  CHECK(ranks[0].calls.calls[0].cpu.start_ns == 1694128201429757000);
  CHECK(ranks[0].calls.calls[0].cpu.end_ns == 1694128201429819000);
  const auto* first = ranks[0].calls.device_times(0);
  REQUIRE(first != nullptr);
  CHECK(first->start_ns == 1694128201429795000);
  CHECK(first->end_ns == 1694128201431941000);
  CHECK(first->since_ns == 1694128201426674000);  // the step's start: no call before it

  RankSummary summary = RankSummary::from_ranks(std::move(ranks));
  const auto& w = summary.waits();
  REQUIRE(w.collectives.size() == 8);
  CHECK(w.on_device == 8);
  const int64_t last[8] = {7, 7, 7, 7, 7, 5, 5, 4}, late[8] = {0, 3, 1, 1, 0, 3, 3, 2};
  const int64_t max_wait_us[8] = {7624, 1101, 168, 125, 223, 534, 584, 885};
  for (size_t k = 0; k < 8; ++k) {
    INFO("collective #" << k);
    const auto& c = w.collectives[k];
    CHECK(c.on_device);
    CHECK(c.index == static_cast<int64_t>(k));
    CHECK(c.last_rank == last[k]);
    CHECK(c.late == late[k]);
    CHECK(c.max_wait_ns == max_wait_us[k] * 1000);
  }
  // #0: the ranks began their step up to 7.5 ms apart, and arrive spread out, with no gap: no one
  // rank is to blame. #4: rank 7's 104 us gap is narrower than the 107 us spread before it.
  CHECK(w.collectives[2].total_wait_ns == 1161000);  // 7 x 168 less 0 + 0 + 0 + 1 + 3 + 5 + 6
  REQUIRE(w.ranks.size() == 8);
  CHECK(w.ranks[7].caused_ns == 8263000);
  CHECK(w.ranks[7].blamed == 3);
  CHECK(w.ranks[5].caused_ns == 6282000);
  CHECK(w.ranks[4].caused_ns == 5009000);
  for (int64_t r : {0, 1, 2, 3, 6}) CHECK(w.ranks[static_cast<size_t>(r)].blamed == 0);
  // Their kernels end together: the clocks are checked at every call, and agree.
  CHECK(w.clock_checked == 8);
  CHECK(w.clock_checked_on_device == 8);
  CHECK(w.clock_gaps.empty());
  REQUIRE(w.clock_offsets.size() == 8);
  for (const auto& o : w.clock_offsets) {
    CHECK(o.calls == 8);
    CHECK(std::abs(o.ns) <= 7000);
  }

  // Why: rank 4's GPU sat idle 0.667 ms longer than the median rank's on its way to all_reduce #7:
  // its CPU launched the call later. On the CPU, its way from its call before (all_reduce #6's
  // range, ending 14818 us into its step) to this one's (16187 us) took 1369 us, rank 2's 1043 us
  // (10262 to 11305 us).
  summary.explain_waits();
  CHECK(summary.notes().empty());
  const std::string table = summary.table();
  CHECK_THAT(table, OPTRACE_CONTAINS("; 8 of 8 timed on the GPU, by the NCCL kernels each rank's call launched; the last rank is blamed "
                                     "where at most half the ranks arrived late, 1 ms or more after the others (0.1 ms on the GPU) and "
                                     "after a gap as wide as the others' spread):\n"));
  CHECK_THAT(table, OPTRACE_CONTAINS("  step 10, nccl:all_reduce #7: rank 4 (the last of 2 late ranks) arrived 0.885 ms after the first on "
                                     "the GPU; 7 other rank(s) waited 5.009 ms in all\n"
                                     "    its way there on the GPU took 1.361 ms, the median rank's (rank 2) 0.518 ms; rank 4's GPU spent "
                                     "more time:\n      0.667 ms more outside any kernel (the GPU idle) (1.121 against 0.454 ms)\n"
                                     "      0.047 ms more in void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, "
                                     "int>::Policy800, fa... (0.047 against 0.000 ms)\n"));
  CHECK_THAT(table, OPTRACE_CONTAINS("\n    on the CPU, its way to the call took 1.369 ms, the median rank's (rank 2) 1.043 ms; rank 4 spent "
                                     "more time:\n      0.326 ms more in ## backward ## [] (1.357 against 1.031 ms)\n"));
  CHECK_THAT(table, OPTRACE_CONTAINS("the rank the others waited for most: 7 (8.263 ms at 3 collective(s), steps 10)\n"));
  CHECK_THAT(table, OPTRACE_CONTAINS("clocks: at the 8 all-reduce, all-gather, reduce-scatter, all-to-all or barrier call(s) checked "
                                     "(NCCL's kernels), no rank arrived after another's call had ended: consistent with one clock\n"
                                     "clock offsets, estimated from the ends of NCCL's kernels (those of a call end together; the median "
                                     "over 8 call(s)): every rank's clock reads within 0.001 ms of the others'\n"));
  const auto doc = optrace::json::Document::parse(summary.to_json());
  for (optrace::json::Node c : doc->root()["waits"]["collectives"].array()) CHECK(c["on_device"].as_bool());
  int64_t causes = 0;
  for (optrace::json::Node c : doc->root()["waits"]["causes"].array()) {
    ++causes;
    CHECK(c["on_device"].as_bool());
    if (c["index"].as_int() != 7) continue;
    CHECK(c["way_us"].as_double() == 1361);
    CHECK(c["cpu_way_us"].as_double() == 1369);
    CHECK(c["median_cpu_way_us"].as_double() == 1043);
    // The kernel's name whole, as the trace writes it.
    CHECK((*c["rows"].array().begin())["outside"].as_bool());
    CHECK((*c["cpu_rows"].array().begin())["name"].as_string() == "## backward ##");
  }
  CHECK(causes == 5);
}

TEST_CASE("rank summary: an NCCL call is timed by the kernels launched from within its range, on its thread", "[rank_summary]") {
  namespace rs = optrace::detail::rank_summary;
  const uint64_t main_thread = rs::thread_key("7"), other_thread = rs::thread_key("8");
  rs::RankEvents e;
  e.calls.names = {"nccl:all_reduce", "gloo:all_reduce"};
  e.calls.groups = {""};
  e.calls.group_ranks = {""};
  // nccl:all_reduce [10, 20) us on thread 7, another [40, 50); a gloo range [60, 70) on thread 7.
  for (const auto& [start, name] : {std::pair<int64_t, uint32_t>{10, 0}, {40, 0}, {60, 1}}) {
    rs::CollectiveCall c;
    c.start_ns = start * 1000, c.end_ns = (start + 10) * 1000, c.name = name, c.thread = main_thread;
    e.calls.calls.push_back(c);
  }
  // Launches: 1 and 2 inside the first range (its two kernels), 3 on another thread inside it, 4
  // after its end, 5 inside the gloo range; kernel 9's launch is not in the trace.
  e.launches = {{2, 19000, main_thread}, {1, 12000, main_thread}, {3, 15000, other_thread}, {4, 25000, main_thread}, {5, 65000, main_thread}};
  e.device_collectives = {{100000, 150000, 1}, {90000, 140000, 2}, {30000, 400000, 3}, {30000, 400000, 4}, {30000, 400000, 5}, {1, 2, 9}};
  rs::link_kernels(e);
  const auto& c = e.calls.calls;
  CHECK(c[0].on_device);
  CHECK(c[0].device_start_ns == 90000);  // the earlier kernel's start, the later one's end
  CHECK(c[0].device_end_ns == 150000);
  CHECK_FALSE(c[1].on_device);  // no launch of its own
  CHECK_FALSE(c[2].on_device);  // gloo's ranges run no kernels
}

namespace {
// Rank `r` of a hand-made NCCL job: one step [0, 100) ms, `calls` of "nccl:all_reduce" (their
// name and group left 0: the one name, no group).
RankTrace nccl_rank(int64_t r, std::vector<optrace::detail::rank_summary::CollectiveCall> calls) {
  namespace rs = optrace::detail::rank_summary;
  RankTrace t;
  t.rank = r;
  t.file = "rank" + std::to_string(r);
  t.steps = {{0, 100000, 0, 100000}};
  rs::RankCalls rc;
  rc.names = {"nccl:all_reduce"};
  rc.groups = {""};
  rc.group_ranks = {""};
  rc.calls = std::move(calls);
  t.calls = rs::place_in_steps(std::move(rc), {{0, 0, 100000000}});
  return t;
}
}  // namespace

TEST_CASE("rank summary: a collective is timed on the GPU only where every rank's call launched kernels", "[rank_summary]") {
  namespace rs = optrace::detail::rank_summary;
  // Two ranks, one all-reduce. On the CPU rank 1 enqueues 0.5 ms after rank 0 (noise: under 1
  // ms); on the GPU its kernel starts 0.3 ms after rank 0's (late: 0.1 ms on the GPU). Without
  // rank 1's kernel, the CPU ranges time it, and nobody is late.
  auto rank = [](int64_t r, bool kernels) {
    rs::CollectiveCall c;
    c.start_ns = 10000000 + r * 500000, c.end_ns = c.start_ns + 50000;
    c.on_device = kernels, c.device_start_ns = 30000000 + r * 300000, c.device_end_ns = 31000000;
    return nccl_rank(r, {c});
  };
  const RankSummary on_gpu = RankSummary::from_ranks({rank(0, true), rank(1, true)});
  REQUIRE(on_gpu.waits().collectives.size() == 1);
  CHECK(on_gpu.waits().collectives[0].on_device);
  CHECK(on_gpu.waits().collectives[0].max_wait_ns == 300000);
  CHECK(on_gpu.waits().collectives[0].blamed());
  CHECK(on_gpu.waits().ranks[1].caused_ns == 300000);
  const RankSummary mixed = RankSummary::from_ranks({rank(0, true), rank(1, false)});
  REQUIRE(mixed.waits().collectives.size() == 1);
  CHECK_FALSE(mixed.waits().collectives[0].on_device);
  CHECK(mixed.waits().collectives[0].max_wait_ns == 500000);
  CHECK_FALSE(mixed.waits().collectives[0].blamed());
  CHECK(mixed.waits().on_device == 0);
  CHECK(mixed.waits().clock_offsets.empty());
  CHECK_THAT(mixed.table(), !OPTRACE_CONTAINS("on the GPU"));
  CHECK_THAT(mixed.table(), !OPTRACE_CONTAINS("clock offsets"));
}

TEST_CASE("rank summary: each rank's clock is estimated from the ends of NCCL's kernels", "[rank_summary]") {
  namespace rs = optrace::detail::rank_summary;
  // Three ranks, four all-reduces timed by their kernels, which end together; rank 2's clock reads
  // 2 ms later (its kernels start and end 2 ms later), but at its third call it ends 5 ms late
  // (an outlier the median leaves out).
  auto rank = [](int64_t r) {
    std::vector<rs::CollectiveCall> calls;
    for (int64_t k = 0; k < 4; ++k) {
      rs::CollectiveCall c;
      c.start_ns = 10000000 * (k + 1), c.end_ns = c.start_ns + 50000;
      const int64_t clock = r == 2 ? (k == 2 ? 5000000 : 2000000) : 0;
      c.on_device = true, c.device_start_ns = c.start_ns + 100000 * r + clock, c.device_end_ns = c.start_ns + 3000000 + clock;
      calls.push_back(c);
    }
    return nccl_rank(r, std::move(calls));
  };
  const RankSummary summary = RankSummary::from_ranks({rank(0), rank(1), rank(2)});
  const auto& o = summary.waits().clock_offsets;
  REQUIRE(o.size() == 3);
  CHECK(o[0].ns == 0);
  CHECK(o[1].ns == 0);
  CHECK(o[2].rank == 2);
  CHECK(o[2].ns == 2000000);  // the median of 2, 2, 5 and 2 ms
  CHECK(o[2].calls == 4);
  CHECK_THAT(summary.table(), OPTRACE_CONTAINS("clock offsets, estimated from the ends of NCCL's kernels (those of a call end together; "
                                               "the median over 4 call(s)): 1 rank(s) read 0.1 ms or more off the others':\n"
                                               "  rank 2's clock reads 2.000 ms later (median of 4 call(s))\n"));
  const auto doc = optrace::json::Document::parse(summary.to_json());
  double last_offset_us = 0;
  for (optrace::json::Node n : doc->root()["waits"]["clock_offsets"].array()) last_offset_us = n["offset_us"].as_double();
  CHECK(last_offset_us == 2000);  // rank 2's, the last
}


namespace {
// Rank `r` of a hand-made NCCL job as torch writes it (since 2026): steps 0 and 1 of [0, 100) and
// [100, 200) ms; each call (start ms, name, "Seq" or -1 for none) a record_param_comms of 60 us
// writing "Seq", holding the nccl:* range of 40 us on the same thread (tid 7); read from a file.
RankTrace torch_nccl_rank(int64_t r, const std::vector<std::tuple<double, std::string, int64_t>>& calls) {
  std::string events = "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#0\", \"pid\": 1, \"tid\": 7, \"ts\": 0, \"dur\": 100000},\n"
                       "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#1\", \"pid\": 1, \"tid\": 7, \"ts\": 100000, \"dur\": 100000}";
  for (const auto& [ms, name, seq] : calls) {
    const std::string ts = std::to_string(std::llround(ms * 1000));
    events += ",\n{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"pid\": 1, \"tid\": 7, \"ts\": " + ts +
              ", \"dur\": 60, \"args\": {\"Collective name\": \"" + name.substr(5) + "\", \"Process Group Name\": \"0\"" +
              (seq >= 0 ? ", \"Seq\": " + std::to_string(seq) : std::string()) + "}}";
    events += ",\n{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"" + name + "\", \"pid\": 1, \"tid\": 7, \"ts\": " +
              std::to_string(std::llround(ms * 1000) + 10) + ", \"dur\": 40}";
  }
  const std::string path = optrace_test::temp_path("rank_summary_seq_rank" + std::to_string(r) + ".pt.trace.json");
  optrace::detail::write_file_maybe_gzip(path, "{\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": " + std::to_string(r) +
                                                   ", \"world_size\": 2}, \"traceEvents\": [\n" + events + "\n]}\n");
  return RankTrace::from_kineto_file(path);
}
}  // namespace

TEST_CASE("rank summary: collectives are matched by their groups' sequence numbers where every call writes one", "[rank_summary]") {
  // Rank 1's trace lacks all-reduce 5 (its window opened after it). By order within the step, its
  // all-reduce 6 (at 50.2 ms) would meet rank 0's 5 (at 10 ms) and rank 1 be blamed for 40 ms; by
  // number, 6 meets 6, 0.2 ms apart (noise), and 5 is named as never reached by rank 1. The sends
  // are numbered apart (point to point): send 6 is not all-reduce 6.
  const std::vector<RankTrace> ranks = {
      torch_nccl_rank(0, {{10, "nccl:all_reduce", 5}, {50, "nccl:all_reduce", 6}, {60, "nccl:send", 6}, {150, "nccl:all_reduce", 7}}),
      torch_nccl_rank(1, {{50.2, "nccl:all_reduce", 6}, {60.3, "nccl:send", 6}, {150.1, "nccl:all_reduce", 7}})};
  // The nccl:* range takes the number of the record_param_comms that holds it.
  REQUIRE(ranks[1].calls.calls.size() == 3);
  CHECK(ranks[1].calls.seq(0) == 6);
  CHECK(ranks[1].calls.calls[0].cpu.start_ns == 50210000);
  const RankSummary summary = RankSummary::from_ranks(ranks);
  const auto& w = summary.waits();
  CHECK(w.by_seq == 4);
  REQUIRE(w.collectives.size() == 4);
  std::string got;  // step, index, seq, name, ranks
  for (const auto& c : w.collectives)
    got += std::to_string(c.step) + " #" + std::to_string(c.index) + " " + std::to_string(c.seq) + " " + c.name + " " + std::to_string(c.ranks) + "; ";
  CHECK(got == "0 #0 5 nccl:all_reduce 1; 0 #1 6 nccl:all_reduce 2; 0 #2 6 nccl:send 2; 1 #0 7 nccl:all_reduce 2; ");
  CHECK(w.collectives[1].max_wait_ns == 200000);
  for (const auto& c : w.collectives) CHECK_FALSE(c.blamed());
  const std::string table = summary.table();
  CHECK_THAT(table, OPTRACE_CONTAINS("collective calls matched across ranks by their groups' sequence numbers"));
  CHECK_THAT(table, OPTRACE_CONTAINS("no rank to blame"));
  const auto doc = optrace::json::Document::parse(summary.to_json());
  CHECK(doc->root()["waits"]["matched_by_seq"].as_int() == 4);
  CHECK((*doc->root()["waits"]["collectives"].array().begin())["seq"].as_int() == 5);
  bool never_reached = false;
  for (const std::string& note : w.notes) never_reached = never_reached || note.find("rank 1 made 2 of the 3 collective calls") == 0;
  CHECK(never_reached);

  // The same calls by order, where one rank's calls write no number: rank 1 blamed for 40 ms.
  const RankSummary by_order = RankSummary::from_ranks(
      {ranks[0], torch_nccl_rank(1, {{50.2, "nccl:all_reduce", -1}, {60.3, "nccl:send", -1}, {150.1, "nccl:all_reduce", -1}})});
  CHECK(by_order.waits().by_seq == 0);
  REQUIRE_FALSE(by_order.waits().collectives.empty());
  CHECK(by_order.waits().collectives[0].seq == -1);
  CHECK(by_order.waits().collectives[0].max_wait_ns == 40200000);
  CHECK(by_order.waits().collectives[0].blamed());
  CHECK_THAT(by_order.table(), OPTRACE_CONTAINS("each step's collective calls matched across ranks in order"));

  // The rule that links them: the record_param_comms on the call's thread that holds its start;
  // the record_param_comms then keep no number of their own (a collective's wait shares it).
  {
    namespace rs = optrace::detail::rank_summary;
    rs::RankCalls rc;
    rc.names = {"record_param_comms", "nccl:all_reduce"};
    rc.groups = {""};
    rc.group_ranks = {""};
    auto call = [](int64_t start, int64_t end, uint32_t name, const char* tid, int64_t seq) {
      rs::CollectiveCall c;
      c.start_ns = start, c.end_ns = end, c.name = name, c.thread = rs::thread_key(tid), c.seq = seq;
      c.family = name == 0 ? rs::CallFamily::Record : rs::CallFamily::Backend;
      return c;
    };
    // Held (thread 7), on another thread, after the record's end, and one with its own number.
    rc.calls = {call(0, 60, 0, "7", 9), call(10, 50, 1, "7", -1), call(10, 50, 1, "8", -1), call(61, 90, 1, "7", -1), call(20, 30, 1, "7", 4)};
    rs::link_sequence_numbers(rc);
    CHECK(rc.calls[1].seq == 9);
    CHECK(rc.calls[2].seq == -1);
    CHECK(rc.calls[3].seq == -1);
    CHECK(rc.calls[4].seq == 4);
    CHECK(rc.calls[0].seq == -1);
  }

  // A number twice on one rank: the second call is left out, and said so.
  const RankSummary repeated = RankSummary::from_ranks(
      {ranks[0], torch_nccl_rank(1, {{50.2, "nccl:all_reduce", 6}, {55, "nccl:all_reduce", 6}, {150.1, "nccl:all_reduce", 7}})});
  bool noted = false;
  for (const std::string& note : repeated.waits().notes) noted = noted || note.find("rank 1 made two calls numbered 6") == 0;
  CHECK(noted);

  // A "Seq" that is not a number of at least 0 is refused, at its path; a string of one is read.
  for (const char* bad : {"-1", "\"x\"", "1.5", "\"-3\""}) {
    const std::string path = optrace_test::temp_path("rank_summary_seq_bad.pt.trace.json");
    optrace::detail::write_file_maybe_gzip(path, std::string("{\"distributedInfo\": {\"rank\": 0}, \"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", "
                                                 "\"name\": \"record_param_comms\", \"ts\": 1, \"dur\": 1, \"args\": {\"Seq\": ") + bad + "}}]}");
    CHECK_THAT(error_of([&] { RankTrace::from_kineto_file(path); }),
               OPTRACE_CONTAINS("/traceEvents/0/args/Seq: expected a sequence number (an integer of at least 0)"));
  }
  const std::string path = optrace_test::temp_path("rank_summary_seq_string.pt.trace.json");
  optrace::detail::write_file_maybe_gzip(path, "{\"distributedInfo\": {\"rank\": 0}, \"traceEvents\": [{\"ph\": \"X\", \"cat\": \"user_annotation\", "
                                               "\"name\": \"ProfilerStep#0\", \"ts\": 0, \"dur\": 10}, {\"ph\": \"X\", \"cat\": \"user_annotation\", "
                                               "\"name\": \"gloo:all_reduce\", \"ts\": 1, \"dur\": 1, \"args\": {\"Seq\": \"12\"}}]}");
  const RankTrace one = RankTrace::from_kineto_file(path);
  REQUIRE(one.calls.calls.size() == 1);
  CHECK(one.calls.seq(0) == 12);
}

}  // namespace rank_summary_test
