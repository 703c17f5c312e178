// tests/fuzz/fuzz_rank_summary.cpp: `summary --by rank`'s reader (detail/rank_summary/read.hpp) on
// arbitrary bytes, read whole and streamed in pieces of 256 bytes (the streamed read gives the same
// rank, or leaves the text to the whole read; it never reads a text the whole read refuses). A
// trace it reads becomes a RankTrace, beside a copy as another rank in a RankSummary, whose steps
// must add up and whose table and JSON are made: one line per row, JSON that parses. The streamed
// read's rank, steps, capture ("optraceCapture") and collective calls are the whole read's; the
// waits of the collectives matched across the two ranks are possible ones. Why a rank was late
// (explain.hpp): what the trace ran on each call's way (on the CPU, and on the GPU where the call
// is timed by its kernels) is the same read whole and read keeping only the ways, and its time
// outside any op lies within the way.
#include "harness.hpp"
#include "../text_reader.hpp"

#include <optrace/rank_summary.hpp>

#include <simdjson.h>

#include <cmath>
#include <optional>
#include <string>

namespace {

using optrace::detail::rank_summary::RankEvents;
using optrace::detail::rank_summary::Reader;

// A RankTrace as text, to compare two reads of one trace.
std::string shown(const optrace::RankTrace& t) {
  std::string out = std::to_string(t.rank) + " " + std::to_string(t.world_size) + " " + t.backend + "\n";
  if (t.capture)
    out += "capture " + std::to_string(t.capture->step) + " " + std::to_string(t.capture->step_ms) + " " +
           std::to_string(t.capture->median_ms) + " " + std::to_string(t.capture->rank) + " " +
           std::to_string(t.capture->first_step) + " " + std::to_string(t.capture->iterations) + "\n";
  for (const optrace::RankStepTime& s : t.steps)
    out += std::to_string(s.step) + " " + std::to_string(s.step_us) + " " + std::to_string(s.collective_us) + "\n";
  for (size_t k = 0; k < t.calls.calls.size(); ++k) {
    const auto& c = t.calls.calls[k];
    const auto* d = t.calls.device_times(k);
    out += "call " + std::to_string(c.step) + " " + std::to_string(c.cpu.start_ns) + " " + std::to_string(c.cpu.end_ns) + " " +
           (d != nullptr ? std::to_string(d->start_ns) + " " + std::to_string(d->end_ns) + " " : "") +
           t.calls.names.at(c.name) + " " + t.calls.groups.at(c.group) + "\n";
  }
  return out;
}

// Each placed call's way measured in `padded` read whole and read keeping only the ways (as
// RankSummary::explain_waits reads): the same.
void check_ways(const std::string& padded, const optrace::RankTrace& trace) {
  namespace ka = optrace::detail::key_averages;
  namespace rs = optrace::detail::rank_summary;
  std::optional<ka::TraceEvents> whole;
  try {
    whole = ka::Reader().read(padded.data(), padded.size(), padded.capacity());
  } catch (const optrace::Error&) {
    return;  // a trace the rank reader takes and the events' reader refuses: explain_waits notes it
  }
  // The ways: each call's on the CPU, and on the GPU where it is timed there.
  std::vector<std::pair<const rs::CallTimes*, bool>> ways;
  for (size_t k = 0; k < trace.calls.calls.size(); ++k) {
    ways.emplace_back(&trace.calls.calls[k].cpu, false);
    if (const rs::CallTimes* d = trace.calls.device_times(k)) ways.emplace_back(d, true);
  }
  ka::Spans spans;
  for (const auto& [c, on_device] : ways) {
    int64_t from = 0, to = 0;
    if (__builtin_sub_overflow(c->since_ns, trace.calls.base_ns, &from) || __builtin_sub_overflow(c->start_ns, trace.calls.base_ns, &to))
      return;  // saturated times: no way to compare
    spans.emplace_back(from, to);
  }
  if (spans.empty()) return;
  const ka::TraceEvents kept = ka::Reader(ka::union_of(std::move(spans))).read(padded.data(), padded.size(), padded.capacity());
  // The events' float microseconds hold their nanoseconds exactly within ~27 hours of the trace's
  // start (each read has its own): compare the reads there.
  bool exact = true;
  for (const ka::TraceEvents* t : {static_cast<const ka::TraceEvents*>(&*whole), &kept})
    for (const optrace::TimedEvent& e : t->events) exact = exact && std::fabs(e.start_us) < 1e11 && e.dur_us < 1e11;
  for (const auto& [c, on_device] : ways) {
    const rs::WayOps a = rs::ops_on_way(*whole, c->since_ns, c->start_ns, on_device), b = rs::ops_on_way(kept, c->since_ns, c->start_ns, on_device);
    if (exact && (a.self_ns != b.self_ns || a.outside_ns != b.outside_ns))
      optrace_fuzz::property_failed("a way's ops differ between the trace read whole and read keeping only the ways");
    int64_t length = 0;
    const bool fits = !__builtin_sub_overflow(c->start_ns, c->since_ns, &length);
    if (a.outside_ns < 0 || (fits && a.outside_ns > length)) optrace_fuzz::property_failed("time outside any op beyond its way");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = optrace_fuzz::text_of(data, size);
  std::optional<RankEvents> streamed;
  {
    optrace_test::TextReader in{text, 7};
    Reader reader;
    if (optrace::detail::kineto::stream_documents(in, 256, [&](const char* d, size_t n, size_t capacity, bool first) {
          if (first) reader = Reader();
          return reader.feed(d, n, capacity);
        }))
      streamed = reader.take();
  }
  bool read = false;
  optrace_fuzz::expect_only_optrace_errors("read", [&] {
    std::string padded(text);
    padded.reserve(padded.size() + simdjson::SIMDJSON_PADDING);
    Reader reader;
    reader.feed(padded.data(), padded.size(), padded.capacity());
    read = true;
    RankEvents events = reader.take();
    std::optional<std::string> from_stream;
    if (streamed) {
      try {
        from_stream = shown(optrace::RankTrace::from_events(*streamed, "t"));
      } catch (const optrace::Error& e) {
        from_stream = e.what();
      }
    }
    std::string from_whole;
    std::optional<optrace::RankTrace> trace;
    try {
      trace = optrace::RankTrace::from_events(std::move(events), "t");
      from_whole = shown(*trace);
    } catch (const optrace::Error& e) {
      from_whole = e.what();
    }
    if (from_stream && *from_stream != from_whole) optrace_fuzz::property_failed("the streamed read gives another rank than the whole read");
    if (!trace) return;
    for (const optrace::RankStepTime& s : trace->steps)
      if (!(s.step_us >= 0 && s.collective_us >= 0 && s.collective_us <= s.step_us && s.outside_us >= 0))
        optrace_fuzz::property_failed("a step whose collective time is negative or more than the step");
    optrace::RankTrace other = *trace;
    other.rank = trace->rank == 0 ? 1 : trace->rank - 1;
    other.file = "u";
    const optrace::RankSummary summary = optrace::RankSummary::from_ranks({*trace, other});
    for (const auto& c : summary.waits().collectives)
      if (c.max_wait_ns < 0 || c.total_wait_ns < c.max_wait_ns || c.ranks < 1 || c.ranks > 2 || c.late < 0 || c.late * 2 > c.ranks ||
          (c.blamed() && c.max_wait_ns < optrace::detail::rank_summary::kNoiseNs))
        optrace_fuzz::property_failed("a collective's waits that cannot be");
    for (const auto& g : summary.waits().clock_gaps)
      if (g.later == g.earlier || g.ns < optrace::detail::rank_summary::kNoiseNs || !optrace::detail::rank_summary::waits_for_all(g.name))
        optrace_fuzz::property_failed("a clock gap that cannot be");
    const std::string table = summary.table();
    if (!table.empty() && table.back() != '\n') optrace_fuzz::property_failed("a table whose last line is not ended");
    std::string json = summary.to_json();
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (parser.parse(json).get(root)) optrace_fuzz::property_failed("RankSummary::to_json is not JSON");
    check_ways(padded, *trace);
  });
  if (!read && streamed) optrace_fuzz::property_failed("the streamed read read a text the whole read refuses");
  return 0;
}
