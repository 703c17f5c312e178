// Keeps include/optrace/ layered: it reads every header's `#include <optrace/...>` lines and checks
// them against the one declared list of layers below. docs/architecture.md ("Layers") shows
// the same list.
#include "optrace_catch.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

// Lowest first. A header may include headers of its own layer or of a lower one, never of a
// higher one, and no chain of includes may come back to where it started. An entry ending in '/'
// stands for every header in that folder. Each layer is one concern; the order says which may use
// which (replay may use materialization, the observer may not be used by replay, ...).
struct Layer {
  const char* name;
  std::vector<std::string> headers;
};
const std::vector<Layer> kLayers = {
    {"foundation (no libtorch, no simdjson)",
     {"error.hpp", "json/writer.hpp", "detail/common/io.hpp", "detail/common/beneath.hpp", "detail/common/gzip.hpp",
      "detail/common/pieces.hpp", "detail/common/per_thread.hpp", "detail/common/text_table.hpp", "detail/common/progress.hpp",
      "detail/common/string_map.hpp", "detail/common/dtype_names.hpp", "detail/common/block_vector.hpp",
      "detail/common/kineto_names.hpp", "detail/common/counts.hpp", "detail/common/printable.hpp"}},
    {"JSON reading (simdjson)", {"detail/common/json_text.hpp", "json/reader.hpp", "detail/common/ondemand.hpp"}},
    {"op trace model (no libtorch)", {"op_trace_types.hpp", "detail/op_trace/", "op_trace.hpp"}},
    {"timed events: key averages (no libtorch)",
     {"detail/kineto/events.hpp", "key_averages_types.hpp", "detail/key_averages/", "key_averages.hpp",
      "detail/rank_summary/", "rank_summary.hpp"}},
    {"operator facts (no libtorch)", {"detail/common/op_schema.hpp", "detail/common/op_catalog.hpp"}},
    {"libtorch vocabulary",
     {"detail/common/compat.hpp", "detail/common/error_text.hpp", "python_names.hpp", "detail/common/dispatcher.hpp", "tensor_spec.hpp",
      "json/tensor_meta.hpp"}},
    {"materialization", {"detail/materialize/", "materialize.hpp"}},
    {"recorded values", {"value.hpp", "dynamic_shapes.hpp"}},
    {"recording core: the active recording of RecordFunction callbacks", {"detail/recording/"}},
    {"OpTracer", {"detail/op_tracer/", "op_tracer.hpp"}},
    {"trace formats: operator-inputs logs, Kineto traces", {"operator_inputs.hpp", "kineto_types.hpp", "detail/kineto/", "kineto.hpp"}},
    {"distributed jobs: DistributedInfo, and of a c10d process group", {"distributed.hpp", "c10d.hpp"}},
    {"Profiler", {"detail/profiler/", "profiler.hpp"}},
    {"on-demand profiling of running jobs", {"detail/on_demand/", "on_demand.hpp"}},
    {"replay", {"replay_types.hpp", "detail/replay/", "replay.hpp", "execution_replay.hpp"}},
    {"observation files", {"detail/observer/", "observations.hpp"}},
    {"a package's inputs, without AOTInductor: its call spec and guard (what plans and drift judge calls by)",
     {"detail/aoti/call_spec.hpp", "detail/aoti/guard.hpp"}},
    {"plans of packages", {"plan.hpp"}},
    {"InputObserver", {"observer.hpp"}},
    {"AOTInductor packages", {"detail/aoti/", "aoti.hpp", "serve.hpp"}},
    {"umbrella", {"optrace.hpp"}},
};

const std::filesystem::path kInclude = std::filesystem::path(OPTRACE_SOURCE_DIR) / "include";

// Header (relative to include/optrace/) -> the optrace headers it includes.
std::map<std::string, std::vector<std::string>> read_includes() {
  std::map<std::string, std::vector<std::string>> out;
  const std::regex include_line(R"(^\s*#\s*include\s*<optrace/([^>]+)>)");
  for (const auto& entry : std::filesystem::recursive_directory_iterator(kInclude / "optrace")) {
    if (!entry.is_regular_file() || entry.path().extension() != ".hpp") continue;
    const std::string name = std::filesystem::relative(entry.path(), kInclude / "optrace").generic_string();
    std::ifstream in(entry.path());
    std::vector<std::string>& includes = out[name];
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (std::regex_search(line, m, include_line)) includes.push_back(m[1]);
    }
  }
  return out;
}

// The layer of `header`, or -1 when no layer lists it.
int layer_of(const std::string& header) {
  for (size_t k = 0; k < kLayers.size(); ++k)
    for (const std::string& entry : kLayers[k].headers) {
      const bool folder = !entry.empty() && entry.back() == '/';
      if (folder ? header.rfind(entry, 0) == 0 && header.find('/', entry.size()) == std::string::npos : header == entry)
        return static_cast<int>(k);
    }
  return -1;
}

using Includes = std::map<std::string, std::vector<std::string>>;

// "a -> b (layer names)" for each include of a higher layer's header.
std::vector<std::string> upward_includes(const Includes& includes) {
  std::vector<std::string> out;
  for (const auto& [header, list] : includes) {
    const int own = layer_of(header);
    for (const std::string& target : list) {
      const int other = layer_of(target);
      if (own >= 0 && other > own)
        out.push_back(header + " (layer \"" + kLayers[own].name + "\") includes " + target + " (layer \"" +
                      kLayers[other].name + "\")");
    }
  }
  return out;
}

// Each include cycle as "a -> b -> a". Depth-first search; a header met again while still on the
// path closes a cycle.
std::vector<std::string> include_cycles(const Includes& includes) {
  std::map<std::string, int> state;  // 0 unseen, 1 on the path, 2 done
  std::vector<std::string> path, cycles;
  std::function<void(const std::string&)> visit = [&](const std::string& h) {
    state[h] = 1;
    path.push_back(h);
    auto it = includes.find(h);
    if (it != includes.end()) {
      for (const std::string& next : it->second) {
        if (state[next] == 1) {
          std::string cycle;
          for (auto p = std::find(path.begin(), path.end(), next); p != path.end(); ++p) cycle += *p + " -> ";
          cycles.push_back(cycle + next);
        } else if (state[next] == 0) {
          visit(next);
        }
      }
    }
    path.pop_back();
    state[h] = 2;
  };
  for (const auto& entry : includes)
    if (state[entry.first] == 0) visit(entry.first);
  return cycles;
}

}  // namespace

TEST_CASE("layers: every header is in a declared layer", "[layers]") {
  const auto includes = read_includes();
  REQUIRE(includes.size() > 20);
  for (const auto& [header, list] : includes) {
    INFO("include/optrace/" << header << ": add it to a layer in tests/test_layers.cpp");
    CHECK(layer_of(header) >= 0);
    for (const std::string& target : list) {
      INFO(header << " includes <optrace/" << target << ">, which does not exist");
      CHECK(includes.count(target) == 1);
    }
  }
}

TEST_CASE("layers: no header includes one of a higher layer", "[layers]") {
  const auto upward = upward_includes(read_includes());
  for (const std::string& u : upward) UNSCOPED_INFO(u);
  CHECK(upward.empty());
}

TEST_CASE("layers: no include cycle", "[layers]") {
  const auto cycles = include_cycles(read_includes());
  for (const std::string& c : cycles) UNSCOPED_INFO("cycle: " << c);
  CHECK(cycles.empty());
}

TEST_CASE("layers: the checks see violations", "[layers]") {
  // What the tree once had: materialize.hpp included observations.hpp at its end, which
  // includes materialize.hpp back (a cycle, and an upward include).
  const Includes bad = {{"materialize.hpp", {"observations.hpp"}}, {"observations.hpp", {"materialize.hpp"}}};
  CHECK(include_cycles(bad) == std::vector<std::string>{"materialize.hpp -> observations.hpp -> materialize.hpp"});
  CHECK(upward_includes(bad).size() == 1);
  CHECK(upward_includes({{"replay.hpp", {"observer.hpp"}}}).size() == 1);
  CHECK(include_cycles({{"a.hpp", {"b.hpp"}}, {"b.hpp", {"c.hpp"}}}).empty());
  CHECK(layer_of("detail/kineto/importer.hpp") == layer_of("kineto.hpp"));
  CHECK(layer_of("detail/no_such_folder/x.hpp") == -1);
  CHECK(layer_of("detail/kineto/sub/x.hpp") == -1);  // a folder entry covers its own files only
}

// Calls `line(path relative to the source folder, line number, text)` for each line of every .hpp
// and .cpp under `folders`; returns how many files it read.
template <class Line>
size_t for_each_source_line(std::initializer_list<const char*> folders, Line&& line) {
  const std::filesystem::path root(OPTRACE_SOURCE_DIR);
  size_t files = 0;
  for (const char* folder : folders)
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".hpp" && ext != ".cpp")) continue;
      ++files;
      std::ifstream in(entry.path());
      const std::string relative = entry.path().lexically_relative(root).string();
      int n = 0;
      for (std::string text; std::getline(in, text);) line(relative, ++n, text);
    }
  return files;
}

// std::filesystem::remove_all crashes a program linked to PyTorch's wheels (2.5 to at least 2.11,
// pytorch#133437: libtorch.so exports its own copy, which calls a weak symbol left null; seen on an
// H200 with 2.11, 2026-12-01): optrace removes trees with detail::remove_tree (common/io.hpp).
TEST_CASE("layers: no source of optrace's calls std::filesystem::remove_all", "[layers]") {
  const std::string needle = std::string("remove_") + "all(";  // spelled apart: this file is read too
  std::vector<std::string> calls;
  const size_t files = for_each_source_line({"include", "tests", "benchmarks", "examples"},
                                            [&](const std::string& path, int n, const std::string& text) {
                                              if (text.find(needle) != std::string::npos)
                                                calls.push_back(path + ":" + std::to_string(n));
                                            });
  for (const std::string& c : calls) UNSCOPED_INFO(c << ": use optrace::detail::remove_tree");
  CHECK(calls.empty());
  CHECK(files > 100);
}

// ctest knows each test case by its name in a CMake list (catch_discover_tests): a ';' in a name
// splits it into two tests that both fail (a fresh-clone run of 2026-12-01).
TEST_CASE("layers: no test case's name holds a semicolon", "[layers]") {
  const std::string head = std::string("TEST_") + "CASE(\"";  // spelled apart: this file is read too
  std::vector<std::string> names;
  size_t cases = 0;
  for_each_source_line({"tests"}, [&](const std::string& path, int n, const std::string& text) {
    const size_t at = text.find(head);
    if (at == std::string::npos) return;
    ++cases;
    const size_t begin = at + head.size();
    const std::string name = text.substr(begin, text.find('"', begin) - begin);
    if (name.find(';') != std::string::npos) names.push_back(path + ":" + std::to_string(n) + ": " + name);
  });
  for (const std::string& name : names) UNSCOPED_INFO(name);
  CHECK(names.empty());
  CHECK(cases > 300);
}
