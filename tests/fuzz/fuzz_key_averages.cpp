// tests/fuzz/fuzz_key_averages.cpp: the key averages' Kineto reader (KeyAverages::from_kineto_text)
// on arbitrary bytes, grouped by input shape or not, then its table (CUDA columns included) and JSON.
// The streamed reader (from_kineto_file's for gzip and large files), in pieces of 256 bytes,
// gives the same table, or leaves the text to the whole read; never a text the whole read refuses.
#include "harness.hpp"
#include "../text_reader.hpp"

#include <optrace/key_averages.hpp>

#include <optional>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<optrace::detail::key_averages::TraceEvents> streamed;
  {
    optrace_test::TextReader in{optrace_fuzz::text_of(data, size), 7};
    streamed = optrace::detail::key_averages::stream_events(in, 256);
  }
  bool read = false;
  for (optrace::GroupBy group_by : {optrace::GroupBy::Name, optrace::GroupBy::InputShape}) {
    optrace_fuzz::expect_only_optrace_errors("from_kineto_text", [&] {
      const optrace::KeyAverages a = optrace::KeyAverages::from_kineto_text(optrace_fuzz::text_of(data, size), group_by);
      read = true;
      if (streamed) {
        const optrace::KeyAverages s = optrace::KeyAverages::from_events(streamed->events, streamed->memory, group_by, streamed->time_zero_ns);
        if (s.table("", -1) != a.table("", -1)) optrace_fuzz::property_failed("the streamed reader's table differs from the whole read's");
      }
      int64_t calls = 0;
      for (const optrace::KeyAverage& r : a.rows()) {
        if (r.calls < 1) optrace_fuzz::property_failed("a row without calls");
        if ((group_by == optrace::GroupBy::InputShape) == r.input_shapes.empty())
          optrace_fuzz::property_failed("input shapes on a row not grouped by them, or none on one that is");
        calls += r.calls;
      }
      // Every sort key works; a table ends with its total, and with the device's where it has
      // the CUDA columns.
      for (const char* key : {"self_cpu_time_total", "cpu_time_total", "cpu_time", "count", "cpu_memory_usage", "self_cpu_memory_usage",
                              "self_cuda_time_total", "cuda_time_total", "cuda_time", "cuda_memory_usage", "self_device_memory_usage", ""}) {
        const std::string table = a.table(key, -1);
        if (table.empty() != a.rows().empty() || (!table.empty() && table.rfind("\nSelf CPU time total: ") == std::string::npos))
          optrace_fuzz::property_failed("a table without its total line");
        const size_t head = table.find('\n') + 1;  // the second line: the columns' names
        const std::string names = table.empty() ? "" : table.substr(head, table.find('\n', head) - head);
        if ((names.find("  Self CUDA  ") != std::string::npos) != (table.rfind("\nSelf CUDA time total: ") != std::string::npos))
          optrace_fuzz::property_failed("CUDA columns without their total line, or the reverse");
      }
      (void)a.to_json("count", 3, 1);
      if (calls < static_cast<int64_t>(a.rows().size())) optrace_fuzz::property_failed("fewer calls than rows");
    });
  }
  if (!read && streamed) optrace_fuzz::property_failed("the streamed reader read a text the whole read refuses");
  return 0;
}
