// tests/fuzz/fuzz_on_demand_config.cpp: an OnDemandProfiler's trigger file (OnDemandRequest::parse) on
// arbitrary bytes — whoever writes it steers a running job — then the ACTIVITIES_LOG_FILE it names
// resolved against an output folder: an optrace error, or a request whose fields hold together and
// a path inside the folder, with no `..` in it.
#include "harness.hpp"

#include <optrace/detail/on_demand/files.hpp>
#include <optrace/detail/on_demand/request.hpp>

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  optrace_fuzz::expect_only_optrace_errors("parse", [&] {
    std::vector<std::string> ignored;
    const optrace::OnDemandRequest r = optrace::OnDemandRequest::parse(optrace_fuzz::text_of(data, size), &ignored);
    if (r.iterations < 0 || r.duration_ms < 1 || r.start_iteration_roundup < 0 || r.start_time_ms < 0)
      optrace_fuzz::property_failed("a field out of its range");
    if (r.by_iteration() && (!r.start_iteration || *r.start_iteration < 0))
      optrace_fuzz::property_failed("an iteration window without a start");
    if (r.log_file.empty()) return;
    const std::string dir = "/nonexistent-optrace-fuzz/traces";
    const std::string path = optrace::detail::on_demand::resolve_inside(dir, r.log_file);
    if (path.rfind(dir + "/", 0) != 0) optrace_fuzz::property_failed("a log file outside the output folder");
    for (const auto& part : std::filesystem::path(path))
      if (part == "..") optrace_fuzz::property_failed("a log file path with '..'");
  });
  return 0;
}
