// Tests for optrace/key_averages.hpp: torch's key_averages of hand-made events (nesting, recursion,
// threads, memory, sorting, grouping, the table's text as torch 2.6 printed it for the same
// events) and of real Kineto traces, torch 2.6's own with the tables it printed in that run.
#include <optrace/key_averages.hpp>

#include <limits>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "optrace_catch.hpp"

namespace key_averages_test {  // (a unity group shares one translation unit: names of its own)

using optrace::KeyAverage;
using optrace::KeyAverages;
using optrace::MemoryRecord;
using optrace::TimedEvent;

TimedEvent event(std::string name, int64_t tid, double start_us, double end_us, std::string shapes = "",
                 bool user_annotation = false) {
  return TimedEvent{std::move(name), tid, start_us, end_us - start_us, std::move(shapes), user_annotation};
}

// The rows by name (and input shapes when grouped).
std::map<std::string, KeyAverage> by_name(const KeyAverages& a) {
  std::map<std::string, KeyAverage> out;
  for (const KeyAverage& r : a.rows()) out[r.input_shapes.empty() ? r.name : r.name + " " + r.input_shapes] = r;
  return out;
}

std::vector<std::string> names_in_order(const std::string& table) {
  std::vector<std::string> out;
  std::istringstream in(table);
  std::string line;
  int separators = 0;
  while (std::getline(in, line)) {
    if (line.rfind("---", 0) == 0) {
      ++separators;
      continue;
    }
    if (separators != 2) continue;  // the rows lie between the second and third separator
    std::smatch m;
    if (std::regex_search(line, m, std::regex("^ *(\\S+)"))) out.push_back(m[1]);
  }
  return out;
}

// The steps of a training loop, as torch.profiler's schedule names them: two ProfilerStep#N
// annotations with a linear (t, addmm) in each, and a relu on another thread.
std::vector<TimedEvent> two_steps() {
  return {event("ProfilerStep#1", 1, 0.0, 100.0, "", true),
          event("aten::linear", 1, 10.0, 60.0, "[[2, 3], [4, 3], [4]]"),
          event("aten::t", 1, 12.0, 15.0, "[[4, 3]]"),
          event("aten::addmm", 1, 20.0, 50.5, "[[4], [2, 3], [3, 4], [], []]"),
          event("ProfilerStep#2", 1, 100.0, 180.0, "", true),
          event("aten::linear", 1, 110.0, 150.0, "[[2, 3], [4, 3], [4]]"),
          event("aten::addmm", 1, 115.0, 145.25, "[[4], [2, 3], [3, 4], [], []]"),
          event("aten::relu", 2, 30.0, 35.5, "[[2, 4]]")};
}

TEST_CASE("key_averages: self time is the time less the events nested directly in it", "[key_averages]") {
  // A parent with two children, one of which has a child of its own.
  const KeyAverages a = KeyAverages::from_events(
      {event("parent", 1, 0, 10), event("a", 1, 1, 3), event("b", 1, 4, 8), event("c", 1, 5, 6)}, {}, false);
  auto rows = by_name(a);
  CHECK(rows["parent"].self_cpu_us == 4.0);  // 10 - 2 - 4: c is b's, not the parent's
  CHECK(rows["parent"].cpu_total_us == 10.0);
  CHECK(rows["a"].self_cpu_us == 2.0);
  CHECK(rows["b"].self_cpu_us == 3.0);
  CHECK(rows["c"].self_cpu_us == 1.0);
  CHECK(a.self_cpu_time_total_us() == 10.0);
  CHECK_FALSE(a.has_memory());
  // torch's order: by the start of each row's first event.
  REQUIRE(a.rows().size() == 4);
  CHECK(a.rows()[0].name == "parent");
  CHECK(a.rows()[3].name == "c");
}

TEST_CASE("key_averages: events nest within their own thread only", "[key_averages]") {
  SECTION("another thread's event inside a parent's time is not its child") {
    auto rows = by_name(KeyAverages::from_events({event("p", 1, 0, 10), event("q", 2, 2, 5)}, {}, false));
    CHECK(rows["p"].self_cpu_us == 10.0);
    CHECK(rows["q"].self_cpu_us == 3.0);
  }
  SECTION("an event that outlives the one before it is not its child") {
    auto rows = by_name(KeyAverages::from_events({event("x", 1, 0, 5), event("y", 1, 3, 8)}, {}, false));
    CHECK(rows["x"].self_cpu_us == 5.0);
    CHECK(rows["y"].self_cpu_us == 5.0);
  }
  SECTION("an event that starts as its parent ends is not its child") {
    auto rows = by_name(KeyAverages::from_events({event("x", 1, 0, 5), event("y", 1, 5, 5)}, {}, false));
    CHECK(rows["x"].self_cpu_us == 5.0);
  }
}

TEST_CASE("key_averages: a call nested alone in a call of the same name counts once", "[key_averages]") {
  SECTION("recursion: merged, as torch's _remove_dup_nodes does") {
    const KeyAverages a = KeyAverages::from_events(
        {event("f", 1, 0, 10), event("f", 1, 1, 9), event("f", 1, 2, 8), event("g", 1, 3, 4)}, {}, false);
    auto rows = by_name(a);
    CHECK(rows["f"].calls == 1);
    CHECK(rows["f"].cpu_total_us == 10.0);
    CHECK(rows["f"].self_cpu_us == 9.0);  // g is the outer f's child now
    CHECK(rows["g"].calls == 1);
  }
  SECTION("beside another child it stays a call of its own") {
    auto rows = by_name(KeyAverages::from_events({event("h", 1, 0, 10), event("h", 1, 1, 4), event("k", 1, 5, 6)}, {}, false));
    CHECK(rows["h"].calls == 2);
    CHECK(rows["h"].cpu_total_us == 13.0);
    CHECK(rows["h"].self_cpu_us == 9.0);  // 10 - 3 - 1, and 3
  }
  SECTION("ProfilerStep#N are one row, ProfilerStep*, apart from an op of the same name") {
    auto a = KeyAverages::from_events({event("ProfilerStep#7", 1, 0, 10, "", true), event("ProfilerStep#8", 1, 10, 30, "", true),
                                       event("ProfilerStep*", 1, 40, 41)},
                                      {}, false);
    REQUIRE(a.rows().size() == 2);
    CHECK(a.rows()[0].name == "ProfilerStep*");
    CHECK(a.rows()[0].user_annotation);
    CHECK(a.rows()[0].calls == 2);
    CHECK_FALSE(a.rows()[1].user_annotation);
  }
  SECTION("the utility events torch leaves out leave their time to their parent") {
    auto rows = by_name(KeyAverages::from_events({event("aten::add", 1, 0, 10), event("aten::is_leaf", 1, 1, 3),
                                                  event("profiler::_record_function_enter_new", 1, 4, 5)},
                                                 {}, false));
    CHECK(rows.size() == 1);
    CHECK(rows["aten::add"].self_cpu_us == 10.0);
  }
}

TEST_CASE("key_averages: memory within an event, on any thread, and outside every event", "[key_averages]") {
  const std::vector<TimedEvent> events = {event("p", 1, 0, 10), event("c", 1, 2, 5)};
  const std::vector<MemoryRecord> memory = {
      {1, 3.0, 100, 0},      // in c (and so in p)
      {1, 7.0, 50, 0},       // in p only
      {1, 10.0, -30, 0},     // at p's end: [start, end] holds it
      {2, 4.5, 8, 0},        // another thread's, in c's time: torch counts it there too
      {1, 4.0, 1000, 1},     // CUDA memory: not CPU memory
      {1, 6.0, 64, 2},       // MKLDNN: CPU memory to torch
      {3, 20.0, 7, 0},       // in no event: a "[memory]" row
      {3, 25.0, -7, 0}};
  const KeyAverages a = KeyAverages::from_events(events, memory, false);
  CHECK(a.has_memory());
  auto rows = by_name(a);
  CHECK(rows["p"].cpu_memory == 100 + 50 - 30 + 8 + 64);
  CHECK(rows["p"].self_cpu_memory == 50 - 30 + 64);
  CHECK(rows["c"].cpu_memory == 108);
  CHECK(rows["c"].self_cpu_memory == 108);
  CHECK(rows["[memory]"].calls == 2);
  CHECK(rows["[memory]"].cpu_memory == 0);
  CHECK(rows["[memory]"].cpu_total_us == 0.0);
  CHECK_THAT(a.table(), OPTRACE_CONTAINS("CPU Mem  Self CPU Mem"));
  CHECK_THAT(KeyAverages::from_events(events, {}, false).table(), !OPTRACE_CONTAINS("CPU Mem"));
}

TEST_CASE("key_averages: memory bounds rounded as torch rounds its clock's microseconds", "[key_averages]") {
  // torch takes an event's bounds as float microseconds of its clock (ns since the epoch) x 1000:
  // at today's times, multiples of 256 ns.
  using optrace::detail::key_averages::torch_bound_ns;
  CHECK(torch_bound_ns(1795699829728329297) == 1795699829728329216.0);  // Python: (n / 1000) * 1000
  CHECK(torch_bound_ns(4842763892324422) == 4842763892324422.0);
  CHECK(torch_bound_ns(-1234567) == -1234567.0);
  const std::vector<TimedEvent> events = {event("op", 1, 10, 20)};
  const std::vector<MemoryRecord> memory = {{1, 19.9, 1, 0}, {1, 19.99, 2, 0}};
  // The op ends at ...020000 ns, taken as ...019968: a free 10 ns before its end falls out.
  CHECK(KeyAverages::from_events(events, memory, false, 1790857026000000000).rows()[0].cpu_memory == 1);
  CHECK(KeyAverages::from_events(events, memory, false).rows()[0].cpu_memory == 3);
}

TEST_CASE("key_averages: sort_by and row_limit", "[key_averages]") {
  const KeyAverages a = KeyAverages::from_events(two_steps(), {}, false);
  CHECK(names_in_order(a.table()) == std::vector<std::string>{"ProfilerStep*", "aten::addmm", "aten::linear", "aten::relu", "aten::t"});
  CHECK(names_in_order(a.table("cpu_time_total")) ==
        std::vector<std::string>{"ProfilerStep*", "aten::linear", "aten::addmm", "aten::relu", "aten::t"});
  CHECK(names_in_order(a.table("cpu_time")) ==
        std::vector<std::string>{"ProfilerStep*", "aten::linear", "aten::addmm", "aten::relu", "aten::t"});
  // Ties keep the rows' order (Python's sort is stable): the three rows of 2 calls as they came.
  CHECK(names_in_order(a.table("count")) ==
        std::vector<std::string>{"ProfilerStep*", "aten::linear", "aten::addmm", "aten::t", "aten::relu"});
  CHECK(names_in_order(a.table("")) == std::vector<std::string>{"ProfilerStep*", "aten::linear", "aten::t", "aten::addmm", "aten::relu"});
  CHECK(names_in_order(a.table("self_cpu_time_total", 2)) == std::vector<std::string>{"ProfilerStep*", "aten::addmm"});
  CHECK(names_in_order(a.table("self_cpu_time_total", 0)).empty());
  CHECK(names_in_order(a.table("self_cpu_time_total", -1)).size() == 5);
  // The footer and the shares are of every row, shown or not.
  CHECK_THAT(a.table("self_cpu_time_total", 1), OPTRACE_CONTAINS("Self CPU time total: 185.500us"));
  CHECK(KeyAverages::from_events({}, {}, false).table().empty());
}

TEST_CASE("key_averages: an unknown sort_by names the valid ones", "[key_averages]") {
  const KeyAverages a = KeyAverages::from_events(two_steps(), {}, false);
  const std::string message =
      "optrace: ArgumentError: unknown sort_by 'self_cuda_time_total': expected one of self_cpu_time_total, "
      "cpu_time_total, cpu_time, count, cpu_memory_usage, self_cpu_memory_usage (torch's names), or \"\" for the rows' own order";
  CHECK_THROWS_WITH(a.table("self_cuda_time_total"), message);
  CHECK_THROWS_WITH(a.to_json("self_cuda_time_total"), message);
  CHECK_THROWS_WITH(KeyAverages::from_events({}, {}, false).table("nope"), OPTRACE_STARTS_WITH("optrace: ArgumentError: unknown sort_by 'nope'"));
}

TEST_CASE("key_averages: grouping by input shape", "[key_averages]") {
  const KeyAverages a = KeyAverages::from_events({event("aten::add", 1, 0, 1, "[[2, 3], [2, 3], []]"), event("aten::add", 1, 2, 4, "[[4], [4], []]"),
                                                  event("aten::add", 1, 5, 6, "[[2, 3], [2, 3], []]"), event("step", 1, 10, 20, "", true)},
                                                 {}, true);
  auto rows = by_name(a);
  REQUIRE(rows.size() == 3);
  CHECK(rows["aten::add [[2, 3], [2, 3], []]"].calls == 2);
  CHECK(rows["aten::add [[4], [4], []]"].calls == 1);
  CHECK(rows["step []"].calls == 1);  // no recorded shapes: torch's []
  CHECK_THAT(a.table(), OPTRACE_CONTAINS("Input Shapes"));
  // Not grouped: one row, no shapes, no column.
  const KeyAverages plain = KeyAverages::from_events({event("aten::add", 1, 0, 1, "[[2, 3]]"), event("aten::add", 1, 2, 4, "[[4]]")}, {}, false);
  REQUIRE(plain.rows().size() == 1);
  CHECK(plain.rows()[0].input_shapes.empty());
  CHECK_THAT(plain.table(), !OPTRACE_CONTAINS("Input Shapes"));
  // Grouped, but no row with a shape: no column (torch shows it for a non-empty list only).
  CHECK_THAT(KeyAverages::from_events({event("step", 1, 0, 1, "", true)}, {}, true).table(), !OPTRACE_CONTAINS("Input Shapes"));
  CHECK(optrace::input_shapes_text({std::vector<int64_t>{32, 512}, std::vector<int64_t>{}, std::nullopt}) == "[[32, 512], [], []]");
  CHECK(optrace::input_shapes_text({}) == "[]");
}

TEST_CASE("key_averages: the whole table as torch 2.6 printed it for the same events", "[key_averages]") {
  // torch's EventList of these events (FunctionEvents with the same names, threads, times and
  // input shapes), key_averages(...).table(sort_by="self_cpu_time_total", row_limit=-1).
  const std::string plain =
      "-----------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "             Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls  \n"
      "-----------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "    ProfilerStep*        48.52%      90.000us        97.04%     180.000us      90.000us             2  \n"
      "      aten::addmm        32.75%      60.750us        32.75%      60.750us      30.375us             2  \n"
      "     aten::linear        14.15%      26.250us        48.52%      90.000us      45.000us             2  \n"
      "       aten::relu         2.96%       5.500us         2.96%       5.500us       5.500us             1  \n"
      "          aten::t         1.62%       3.000us         1.62%       3.000us       3.000us             1  \n"
      "-----------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "Self CPU time total: 185.500us\n";
  CHECK(KeyAverages::from_events(two_steps(), {}, false).table("self_cpu_time_total", -1) == plain);
  const std::string grouped =
      "-----------------  ------------  ------------  ------------  ------------  ------------  ------------  ---------------------------------  \n"
      "             Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls                       Input Shapes  \n"
      "-----------------  ------------  ------------  ------------  ------------  ------------  ------------  ---------------------------------  \n"
      "    ProfilerStep*        48.52%      90.000us        97.04%     180.000us      90.000us             2                                 []  \n"
      "      aten::addmm        32.75%      60.750us        32.75%      60.750us      30.375us             2      [[4], [2, 3], [3, 4], [], []]  \n"
      "     aten::linear        14.15%      26.250us        48.52%      90.000us      45.000us             2              [[2, 3], [4, 3], [4]]  \n"
      "       aten::relu         2.96%       5.500us         2.96%       5.500us       5.500us             1                           [[2, 4]]  \n"
      "          aten::t         1.62%       3.000us         1.62%       3.000us       3.000us             1                           [[4, 3]]  \n"
      "-----------------  ------------  ------------  ------------  ------------  ------------  ------------  ---------------------------------  \n"
      "Self CPU time total: 185.500us\n";
  CHECK(KeyAverages::from_events(two_steps(), {}, true).table("self_cpu_time_total", -1) == grouped);
  // Long names are cut as torch cuts them: 52 characters and "...", the column 55 wide.
  const std::string name(60, 'n');
  const std::string table = KeyAverages::from_events({event(name, 1, 0, 1500000)}, {}, false).table();
  CHECK_THAT(table, OPTRACE_CONTAINS("\n" + std::string(52, 'n') + "...       100.00%        1.500s       100.00%        1.500s        1.500s             1  \n"));
  CHECK_THAT(table, OPTRACE_STARTS_WITH(std::string(55, '-') + "  "));
}

TEST_CASE("key_averages: to_json holds the rows the table shows", "[key_averages]") {
  const KeyAverages a = KeyAverages::from_events(two_steps(), {}, true);
  CHECK(a.to_json("count", 1) ==
        "[{\"name\": \"ProfilerStep*\", \"input_shapes\": \"[]\", \"user_annotation\": true, \"calls\": 2, \"self_cpu_us\": 90.0, "
        "\"self_cpu_share\": 0.48517520215633425, \"cpu_total_us\": 180.0, \"cpu_time_avg_us\": 90.0, \"cpu_memory\": 0, "
        "\"self_cpu_memory\": 0}]");
  CHECK_THAT(KeyAverages::from_events(two_steps(), {}, false).to_json(), !OPTRACE_CONTAINS("input_shapes"));
  CHECK(KeyAverages::from_events({}, {}, false).to_json() == "[]");
}

TEST_CASE("key_averages: bad events are ArgumentErrors that name them", "[key_averages]") {
  CHECK_THROWS_WITH(KeyAverages::from_events({event("aten::add", 1, 0, -1)}, {}, false),
                    "optrace: ArgumentError: event 0 (aten::add): dur_us must be a finite number of microseconds of at least 0, got -1");
  TimedEvent nan = event("aten::mul", 1, 0, 1);
  nan.start_us = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(KeyAverages::from_events({event("x", 1, 0, 1), nan}, {}, false),
                    "optrace: ArgumentError: event 1 (aten::mul): start_us must be a finite number of microseconds, got nan");
  CHECK_THROWS_WITH(KeyAverages::from_events({}, {MemoryRecord{0, std::numeric_limits<double>::infinity(), 1, 0}}, false),
                    "optrace: ArgumentError: memory record 0: ts_us must be a finite number of microseconds, got inf");
}

TEST_CASE("key_averages: torch 2.6's own tables of a trace it wrote, character for character", "[key_averages]") {
  // tests/data/kineto/torch26_scripted.*: the trace and what torch printed in that run (with
  // memory, nested record_function ranges, grouped by input shape, every sort key).
  const KeyAverages plain = KeyAverages::from_kineto_file(optrace_test::data_path("kineto/torch26_scripted.pt.trace.json.gz"), false);
  const KeyAverages grouped = KeyAverages::from_kineto_file(optrace_test::data_path("kineto/torch26_scripted.pt.trace.json.gz"), true);
  CHECK(plain.has_memory());
  const std::string text = optrace::detail::read_file(optrace_test::data_path("kineto/torch26_scripted.tables.txt"));
  const std::regex head("== key_averages\\(group_by_input_shape=(True|False)\\)\\.table\\(sort_by=\"(\\w+)\", row_limit=(-?\\d+)\\)\n");
  int tables = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), head), end; it != end; ++it) {
    const size_t from = static_cast<size_t>(it->position() + it->length());
    auto next = std::next(it);
    const std::string expected = text.substr(from, next == end ? std::string::npos : static_cast<size_t>(next->position()) - from);
    const KeyAverages& a = (*it)[1] == "True" ? grouped : plain;
    INFO(it->str());
    CHECK(a.table((*it)[2], std::stoi((*it)[3])) == expected);
    ++tables;
  }
  CHECK(tables == 6);
  // The nested "step" ranges merged (3 calls, not 6); the "outer" ones beside a sibling are not.
  auto rows = by_name(plain);
  CHECK(rows["step"].calls == 3);
  CHECK(rows["outer"].calls == 2);
}

TEST_CASE("key_averages: what a Kineto trace's events count for", "[key_averages]") {
  const std::string text = R"json({"schemaVersion": 1, "traceEvents": [
    {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1000.000, "dur": 500},
    {"ph": "X", "cat": "cpu_op", "name": "aten::cat", "pid": 1, "tid": 7, "ts": 1010.5, "dur": 20.25,
     "args": {"Input Dims": [[[2, 3], [2, 3]], []], "Input type": ["TensorList", "Scalar"]}},
    {"args": {"Input Dims": [[2, 3]]}, "name": "aten::relu", "cat": "cpu_op", "ph": "X", "tid": 7, "ts": 1040, "dur": 2},
    {"ph": "X", "cat": "kernel", "name": "void k()", "pid": 0, "tid": "stream 7", "ts": 1011, "dur": 100},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 7, "ts": 1015, "dur": 3},
    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 7, "ts": 1020,
     "args": {"Total Allocated": 96, "Bytes": 96, "Addr": 1, "Device Id": -1, "Device Type": 0}},
    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 8, "ts": 1200, "args": {"Bytes": -96}},
    {"ph": "X", "cat": "python_function", "name": "nn.Module: Net", "pid": 1, "tid": 7, "ts": 1000, "dur": 300},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "step", "pid": 0, "tid": "stream 7", "ts": 1000, "dur": 300},
    {"ph": "f", "id": 1, "pid": 1, "tid": 7, "ts": 1015, "cat": "ac2g", "name": "ac2g"},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "main"}}
  ], "baseTimeNanoseconds": 1790857026000000000})json";
  const KeyAverages a = KeyAverages::from_kineto_text(text, true);
  REQUIRE(a.rows().size() == 4);
  CHECK(a.has_memory());
  const KeyAverage& cat = a.rows()[0];
  CHECK(cat.name == "aten::cat");
  CHECK(cat.input_shapes == "[[], []]");  // a tensor list shows no sizes, as torch's shapes()
  CHECK(cat.cpu_total_us == 20.25);
  CHECK(cat.self_cpu_us == 17.25);  // cudaLaunchKernel is its child
  CHECK(cat.cpu_memory == 96);
  CHECK(a.rows()[1].name == "cudaLaunchKernel");
  CHECK(a.rows()[2].name == "aten::relu");
  CHECK(a.rows()[2].input_shapes == "[[2, 3]]");
  CHECK(a.rows()[3].name == "[memory]");  // the free in no event
  CHECK(a.rows()[3].cpu_memory == -96);
  // A bare list of events, as older profilers wrote, gives the same rows.
  const std::string list = text.substr(text.find('['), text.rfind(']') - text.find('[') + 1);
  CHECK(KeyAverages::from_kineto_text(list, true).table() == a.table());
}

TEST_CASE("key_averages: the real traces of HolisticTraceAnalysis", "[key_averages]") {
  const KeyAverages small = KeyAverages::from_kineto_file(optrace_test::data_path("kineto/small_base.pt.trace.json.gz"), true);
  auto rows = by_name(small);
  CHECK(rows["ProfilerStep* []"].calls == 2);
  CHECK(rows["nccl:all_reduce [[4432073]]"].calls == 2);
  CHECK(rows["cudaLaunchKernel []"].calls == 2);  // the runtime's calls, as torch's table has them
  CHECK(small.table("self_cpu_time_total", 1).find("Self CPU time total: 223.188ms\n") != std::string::npos);
  const KeyAverages mtia = KeyAverages::from_kineto_file(optrace_test::data_path("kineto/mtia_inference.pt.trace.json.gz"), false);
  CHECK(mtia.rows().size() == 60);
  CHECK_FALSE(mtia.has_memory());
  for (const KeyAverage& r : mtia.rows()) {
    INFO(r.name);
    CHECK(r.self_cpu_us >= 0);
    CHECK(r.self_cpu_us <= r.cpu_total_us);
  }
}

TEST_CASE("key_averages: bad Kineto input is a JsonError at the event", "[key_averages]") {
  auto parse = [](const std::string& text) { return KeyAverages::from_kineto_text(text, true); };
  CHECK_THROWS_WITH(parse(R"({"foo": 1})"), "optrace: JsonError at /: missing key \"traceEvents\"");
  CHECK_THROWS_WITH(parse("3"), "optrace: JsonError at /: expected an object with \"traceEvents\" or a list of events, got integer 3");
  CHECK_THROWS_WITH(parse(R"([{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "x", "dur": 1}])"),
                    "optrace: JsonError at /0/ts: expected a number, got string \"x\"");
  CHECK_THROWS_WITH(parse(R"({"traceEvents": [{}, {"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1}]})"),
                    "optrace: JsonError at /traceEvents/1: missing key \"dur\"");
  CHECK_THROWS_WITH(parse(R"([{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": -1}])"),
                    "optrace: JsonError at /0/dur: expected a duration of at least 0, got integer -1");
  CHECK_THROWS_WITH(parse(R"([{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 9000000000000000, "dur": 9000000000000000}])"),
                    "optrace: JsonError at /0/dur: ts + dur is beyond int64 nanoseconds (ts 9000000000000000, dur 9000000000000000)");
  CHECK_THROWS_WITH(parse(R"([{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "args": {"Input Dims": [[2, "x"]]}}])"),
                    "optrace: JsonError at /0/args/Input Dims/0/1: expected a size (an integer), got string \"x\"");
  CHECK_THROWS_WITH(parse(R"([{"ph": "i", "name": "[memory]", "ts": 1, "args": {"Device Type": 0}}])"),
                    "optrace: JsonError at /0/args: missing key \"Bytes\"");
  CHECK_THROWS_WITH(parse(R"([{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1)"),
                    "optrace: JsonError at /: malformed JSON: JSON document ended early in the middle of an object or array.");
  // Events torch does not count are not read further: a kernel's odd fields are no error.
  CHECK(parse(R"([{"ph": "X", "cat": "kernel", "name": "k", "ts": "x"}])").rows().empty());
  const std::string missing = optrace_test::temp_path("no_such_trace.pt.trace.json");
  CHECK_THROWS_WITH(KeyAverages::from_kineto_file(missing, false),
                    OPTRACE_STARTS_WITH("optrace: " + missing + ": IoError: cannot open '" + missing + "'"));
}

}  // namespace key_averages_test
