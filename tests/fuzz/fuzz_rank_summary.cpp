// tests/fuzz/fuzz_rank_summary.cpp: `summary --by rank`'s reader (detail/rank_summary/read.hpp) on
// arbitrary bytes, read whole and streamed in pieces of 256 bytes (the streamed read gives the same
// rank, or leaves the text to the whole read; it never reads a text the whole read refuses). A
// trace it reads becomes a RankTrace, beside a copy as another rank in a RankSummary, whose steps
// must add up and whose table and JSON are made: one line per row, JSON that parses. The streamed
// read's rank, steps, capture ("optraceCapture") and collective calls are the whole read's; the
// waits of the collectives matched across the two ranks are possible ones.
#include "harness.hpp"
#include "../text_reader.hpp"

#include <optrace/rank_summary.hpp>

#include <simdjson.h>

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
  for (const auto& c : t.calls.calls)
    out += "call " + std::to_string(c.step) + " " + std::to_string(c.start_ns) + " " + std::to_string(c.end_ns) + " " +
           t.calls.names.at(c.name) + " " + t.calls.groups.at(c.group) + "\n";
  return out;
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
      if (c.max_wait_ns < 0 || c.total_wait_ns < c.max_wait_ns || c.ranks < 1 || c.ranks > 2)
        optrace_fuzz::property_failed("a collective's waits that cannot be");
    const std::string table = summary.table();
    if (!table.empty() && table.back() != '\n') optrace_fuzz::property_failed("a table whose last line is not ended");
    std::string json = summary.to_json();
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (parser.parse(json).get(root)) optrace_fuzz::property_failed("RankSummary::to_json is not JSON");
  });
  if (!read && streamed) optrace_fuzz::property_failed("the streamed read read a text the whole read refuses");
  return 0;
}
