// Tests for optrace/key_averages.hpp: torch's key_averages of hand-made events (nesting, recursion,
// threads, memory, sorting, grouping, device events and the CUDA columns, the table's text as
// torch 2.6 printed it for the same events) and of real Kineto traces: torch 2.6's own and torch
// 2.11's CUDA trace, with the tables torch printed in those runs.
#include <optrace/detail/common/gzip.hpp>
#include <optrace/detail/kineto/exporter.hpp>
#include <optrace/key_averages.hpp>
#include <optrace/op_trace.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "optrace_catch.hpp"
#include "text_reader.hpp"

namespace key_averages_test {  // (a unity group shares one translation unit: names of its own)

using optrace::GroupBy;
using optrace::KeyAverage;
using optrace::KeyAverages;
using optrace::MemoryRecord;
using optrace::TimedEvent;

TimedEvent event(std::string name, int64_t tid, double start_us, double end_us, std::string shapes = "",
                 bool user_annotation = false) {
  return TimedEvent{std::move(name), tid, start_us, end_us - start_us, std::move(shapes), user_annotation};
}

// Whether two times agree to well below the nanosecond (torch's floats of the same integers may
// differ in their last bits from a literal).
bool near(double a, double b) { return std::fabs(a - b) < 1e-9; }

// The rows by name (and input shapes when grouped); a device row's name ends in " @device".
std::map<std::string, KeyAverage> by_name(const KeyAverages& a) {
  std::map<std::string, KeyAverage> out;
  for (const KeyAverage& r : a.rows())
    out[(r.input_shapes.empty() ? r.name : r.name + " " + r.input_shapes) + (r.on_device ? " @device" : "")] = r;
  return out;
}

// A device event (a kernel; `annotation`: a GPU annotation) linked to the op of correlation id
// `linked` (0: none).
TimedEvent on_device(std::string name, double start_us, double end_us, int64_t linked, bool annotation = false) {
  TimedEvent e = event(std::move(name), 7, start_us, end_us, "", annotation);
  e.on_device = true;
  e.linked_correlation_id = linked;
  return e;
}

// A CPU event with its correlation id, linked to the op of correlation id `linked` (0: none).
TimedEvent with_ids(TimedEvent e, int64_t id, int64_t linked = 0) {
  e.correlation_id = id;
  e.linked_correlation_id = linked;
  return e;
}

// The tables torch printed in a run (tests/data/kineto/*.tables.txt): each after a line
// `== key_averages(group_by_input_shape=G).table(sort_by="S", row_limit=N)`.
struct PrintedTable {
  std::string call;
  GroupBy group_by = GroupBy::Name;  // G: True is GroupBy::InputShape
  std::string sort_by;
  int row_limit = 0;
  std::string text;
};
std::vector<PrintedTable> printed_tables(const std::string& name) {
  const std::string text = optrace::detail::read_file(optrace_test::data_path(name));
  const std::regex head("== key_averages\\(group_by_input_shape=(True|False)\\)\\.table\\(sort_by=\"(\\w+)\", row_limit=(-?\\d+)\\)\n");
  std::vector<PrintedTable> out;
  for (std::sregex_iterator it(text.begin(), text.end(), head), end; it != end; ++it) {
    const size_t from = static_cast<size_t>(it->position() + it->length());
    auto next = std::next(it);
    out.push_back({it->str(), (*it)[1] == "True" ? GroupBy::InputShape : GroupBy::Name, (*it)[2], std::stoi((*it)[3]),
                   text.substr(from, next == end ? std::string::npos : static_cast<size_t>(next->position()) - from)});
  }
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// A table line's cells: what lies between runs of two spaces or more (no name or shape holds two).
std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> out;
  const std::regex cell("\\S+(?: \\S+)*");
  for (std::sregex_iterator it(line.begin(), line.end(), cell), end; it != end; ++it) out.push_back(it->str());
  return out;
}

// "57.439us" or "1.484ms" as microseconds.
double us_of(const std::string& cell) {
  const double v = std::stod(cell);
  return cell.size() > 2 && cell.compare(cell.size() - 2, 2, "ms") == 0 ? v * 1000.0 : v;
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

TEST_CASE("key_averages: a trace that says its times were not measured says so", "[key_averages]") {
  // kineto::save of an op trace: one event per unique input, 1 us each, its calls in args.count.
  const optrace::OpTrace trace = optrace::OpTrace::load(optrace_test::data_path("peer/mlp.hf_op_trace.json"));
  const std::string exported = optrace::detail::kineto::export_trace(trace, optrace::kineto::ExportOptions());
  const KeyAverages untimed = KeyAverages::from_kineto_text(exported, GroupBy::Name);
  CHECK_FALSE(untimed.times_measured());
  CHECK_FALSE(untimed.rows().empty());
  const KeyAverages measured = KeyAverages::from_kineto_file(optrace_test::data_path("kineto/small_base.pt.trace.json.gz"), GroupBy::Name);
  CHECK(measured.times_measured());
  CHECK(KeyAverages::from_events({}, {}, GroupBy::Name).times_measured());
}

TEST_CASE("key_averages: self time is the time less the events nested directly in it", "[key_averages]") {
  // A parent with two children, one of which has a child of its own.
  const KeyAverages a = KeyAverages::from_events(
      {event("parent", 1, 0, 10), event("a", 1, 1, 3), event("b", 1, 4, 8), event("c", 1, 5, 6)}, {}, GroupBy::Name);
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
    auto rows = by_name(KeyAverages::from_events({event("p", 1, 0, 10), event("q", 2, 2, 5)}, {}, GroupBy::Name));
    CHECK(rows["p"].self_cpu_us == 10.0);
    CHECK(rows["q"].self_cpu_us == 3.0);
  }
  SECTION("an event that outlives the one before it is not its child") {
    auto rows = by_name(KeyAverages::from_events({event("x", 1, 0, 5), event("y", 1, 3, 8)}, {}, GroupBy::Name));
    CHECK(rows["x"].self_cpu_us == 5.0);
    CHECK(rows["y"].self_cpu_us == 5.0);
  }
  SECTION("an event that starts as its parent ends is not its child") {
    auto rows = by_name(KeyAverages::from_events({event("x", 1, 0, 5), event("y", 1, 5, 5)}, {}, GroupBy::Name));
    CHECK(rows["x"].self_cpu_us == 5.0);
  }
}

TEST_CASE("key_averages: a call nested alone in a call of the same name counts once", "[key_averages]") {
  SECTION("recursion: merged, as torch's _remove_dup_nodes does") {
    const KeyAverages a = KeyAverages::from_events(
        {event("f", 1, 0, 10), event("f", 1, 1, 9), event("f", 1, 2, 8), event("g", 1, 3, 4)}, {}, GroupBy::Name);
    auto rows = by_name(a);
    CHECK(rows["f"].calls == 1);
    CHECK(rows["f"].cpu_total_us == 10.0);
    CHECK(rows["f"].self_cpu_us == 9.0);  // g is the outer f's child now
    CHECK(rows["g"].calls == 1);
  }
  SECTION("beside another child it stays a call of its own") {
    auto rows = by_name(KeyAverages::from_events({event("h", 1, 0, 10), event("h", 1, 1, 4), event("k", 1, 5, 6)}, {}, GroupBy::Name));
    CHECK(rows["h"].calls == 2);
    CHECK(rows["h"].cpu_total_us == 13.0);
    CHECK(rows["h"].self_cpu_us == 9.0);  // 10 - 3 - 1, and 3
  }
  SECTION("ProfilerStep#N are one row, ProfilerStep*, apart from an op of the same name") {
    auto a = KeyAverages::from_events({event("ProfilerStep#7", 1, 0, 10, "", true), event("ProfilerStep#8", 1, 10, 30, "", true),
                                       event("ProfilerStep*", 1, 40, 41)},
                                      {}, GroupBy::Name);
    REQUIRE(a.rows().size() == 2);
    CHECK(a.rows()[0].name == "ProfilerStep*");
    CHECK(a.rows()[0].user_annotation);
    CHECK(a.rows()[0].calls == 2);
    CHECK_FALSE(a.rows()[1].user_annotation);
  }
  SECTION("the utility events torch leaves out leave their time to their parent") {
    auto rows = by_name(KeyAverages::from_events({event("aten::add", 1, 0, 10), event("aten::is_leaf", 1, 1, 3),
                                                  event("profiler::_record_function_enter_new", 1, 4, 5)},
                                                 {}, GroupBy::Name));
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
  const KeyAverages a = KeyAverages::from_events(events, memory, GroupBy::Name);
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
  CHECK_THAT(KeyAverages::from_events(events, {}, GroupBy::Name).table(), !OPTRACE_CONTAINS("CPU Mem"));
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
  CHECK(KeyAverages::from_events(events, memory, GroupBy::Name, 1790857026000000000).rows()[0].cpu_memory == 1);
  CHECK(KeyAverages::from_events(events, memory, GroupBy::Name).rows()[0].cpu_memory == 3);
}

TEST_CASE("key_averages: sort_by and row_limit", "[key_averages]") {
  const KeyAverages a = KeyAverages::from_events(two_steps(), {}, GroupBy::Name);
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
  CHECK(KeyAverages::from_events({}, {}, GroupBy::Name).table().empty());
}

TEST_CASE("key_averages: an unknown sort_by names the valid ones", "[key_averages]") {
  const KeyAverages a = KeyAverages::from_events(two_steps(), {}, GroupBy::Name);
  const std::string message =
      "optrace: ArgumentError: unknown sort_by 'self_gpu_time_total': expected one of self_cpu_time_total, "
      "cpu_time_total, cpu_time, count, cpu_memory_usage, self_cpu_memory_usage, self_cuda_time_total "
      "(self_device_time_total), cuda_time_total (device_time_total), cuda_time (device_time), cuda_memory_usage "
      "(device_memory_usage), self_cuda_memory_usage (self_device_memory_usage) (torch's names), or \"\" for the rows' "
      "own order";
  CHECK_THROWS_WITH(a.table("self_gpu_time_total"), message);
  CHECK_THROWS_WITH(a.to_json("self_gpu_time_total"), message);
  // The device keys of a CPU-only profile sort nothing (every row has 0), as in torch.
  CHECK(names_in_order(a.table("self_cuda_time_total")) == names_in_order(a.table("")));
  CHECK_THROWS_WITH(KeyAverages::from_events({}, {}, GroupBy::Name).table("nope"),
                    OPTRACE_STARTS_WITH("optrace: ArgumentError: unknown sort_by 'nope'"));
}

TEST_CASE("key_averages: grouping by input shape", "[key_averages]") {
  const KeyAverages a = KeyAverages::from_events({event("aten::add", 1, 0, 1, "[[2, 3], [2, 3], []]"), event("aten::add", 1, 2, 4, "[[4], [4], []]"),
                                                  event("aten::add", 1, 5, 6, "[[2, 3], [2, 3], []]"), event("step", 1, 10, 20, "", true)},
                                                 {}, GroupBy::InputShape);
  auto rows = by_name(a);
  REQUIRE(rows.size() == 3);
  CHECK(rows["aten::add [[2, 3], [2, 3], []]"].calls == 2);
  CHECK(rows["aten::add [[4], [4], []]"].calls == 1);
  CHECK(rows["step []"].calls == 1);  // no recorded shapes: torch's []
  CHECK_THAT(a.table(), OPTRACE_CONTAINS("Input Shapes"));
  // Not grouped: one row, no shapes, no column.
  const KeyAverages plain =
      KeyAverages::from_events({event("aten::add", 1, 0, 1, "[[2, 3]]"), event("aten::add", 1, 2, 4, "[[4]]")}, {}, GroupBy::Name);
  REQUIRE(plain.rows().size() == 1);
  CHECK(plain.rows()[0].input_shapes.empty());
  CHECK_THAT(plain.table(), !OPTRACE_CONTAINS("Input Shapes"));
  // Grouped, but no row with a shape: no column (torch shows it for a non-empty list only).
  CHECK_THAT(KeyAverages::from_events({event("step", 1, 0, 1, "", true)}, {}, GroupBy::InputShape).table(), !OPTRACE_CONTAINS("Input Shapes"));
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
  CHECK(KeyAverages::from_events(two_steps(), {}, GroupBy::Name).table("self_cpu_time_total", -1) == plain);
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
  CHECK(KeyAverages::from_events(two_steps(), {}, GroupBy::InputShape).table("self_cpu_time_total", -1) == grouped);
  // Long names are cut as torch cuts them: 52 characters and "...", the column 55 wide.
  const std::string name(60, 'n');
  const std::string table = KeyAverages::from_events({event(name, 1, 0, 1500000)}, {}, GroupBy::Name).table();
  CHECK_THAT(table, OPTRACE_CONTAINS("\n" + std::string(52, 'n') + "...       100.00%        1.500s       100.00%        1.500s        1.500s             1  \n"));
  CHECK_THAT(table, OPTRACE_STARTS_WITH(std::string(55, '-') + "  "));
}

TEST_CASE("key_averages: to_json holds the rows the table shows", "[key_averages]") {
  const KeyAverages a = KeyAverages::from_events(two_steps(), {}, GroupBy::InputShape);
  CHECK(a.to_json("count", 1) ==
        "[{\"name\": \"ProfilerStep*\", \"input_shapes\": \"[]\", \"user_annotation\": true, \"calls\": 2, \"self_cpu_us\": 90.0, "
        "\"self_cpu_share\": 0.48517520215633425, \"cpu_total_us\": 180.0, \"cpu_time_avg_us\": 90.0, \"cpu_memory\": 0, "
        "\"self_cpu_memory\": 0}]");
  CHECK_THAT(KeyAverages::from_events(two_steps(), {}, GroupBy::Name).to_json(), !OPTRACE_CONTAINS("input_shapes"));
  CHECK(KeyAverages::from_events({}, {}, GroupBy::Name).to_json() == "[]");
}

// A linear layer on the GPU as torch holds it: ops with their correlation ids, the runtime calls
// linked to them (one on another thread), kernels, a GPU annotation, and a synchronize linked to
// no op whose CUPTI correlation id (3) is also aten::relu's.
std::vector<TimedEvent> gpu_step() {
  return {with_ids(event("aten::linear", 1, 0, 100), 1),
          with_ids(event("aten::addmm", 1, 10, 90), 2),
          with_ids(event("cudaLaunchKernel", 9, 20, 30), 501, 2),
          on_device("gemm", 40, 50, 2),
          on_device("gemm", 60, 65, 2),
          with_ids(event("aten::relu", 1, 100, 120), 3),
          with_ids(event("cudaLaunchKernel", 1, 105, 110), 502, 3),
          on_device("relu_kernel", 130, 132, 3),
          on_device("step", 39, 140, 0, /*annotation=*/true),
          with_ids(event("cudaDeviceSynchronize", 1, 150, 160), 3)};
}

TEST_CASE("key_averages: kernels count toward the op that launched them, and are rows of their own", "[key_averages]") {
  const KeyAverages a = KeyAverages::from_events(gpu_step(), {}, GroupBy::Name);
  CHECK(a.has_device());
  auto rows = by_name(a);
  // addmm launched both gemms; linear holds them through addmm, its child.
  CHECK(rows["aten::addmm"].self_device_us == 15.0);
  CHECK(rows["aten::addmm"].device_total_us == 15.0);
  CHECK(rows["aten::linear"].self_device_us == 0.0);
  CHECK(rows["aten::linear"].device_total_us == 15.0);
  // The call on thread 9 is linked to addmm: on addmm's thread, its child.
  CHECK(rows["aten::addmm"].self_cpu_us == 70.0);
  CHECK(rows["cudaLaunchKernel"].calls == 2);
  CHECK(rows["cudaLaunchKernel"].device_total_us == 0.0);  // linked to an op: takes no kernel
  // The kernels' own rows: device time, no CPU time.
  const KeyAverage& gemm = rows["gemm @device"];
  CHECK(gemm.calls == 2);
  CHECK(gemm.self_device_us == 15.0);
  CHECK(gemm.cpu_total_us == 0.0);
  CHECK(gemm.device_time_avg_us() == 7.5);
  // torch matches ids without asking what they are: the synchronize, linked to nothing, has the
  // correlation id 3 of aten::relu, and takes relu's kernel too.
  CHECK(rows["cudaDeviceSynchronize"].self_device_us == 2.0);
  CHECK(rows["aten::relu"].self_device_us == 2.0);
  // The GPU annotation is a row, left out of the device total (gemm, gemm, relu_kernel).
  CHECK(rows["step @device"].self_device_us == 101.0);
  CHECK(a.self_device_time_total_us() == 17.0);
  // What torch 2.6 prints for the same FunctionEvents (tests/python/key_averages_device_golden.py):
  // the annotation's share of a total that leaves it out, too.
  const std::string expected =
      "-------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "                     Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg     Self CUDA   Self CUDA %    CUDA total  CUDA time avg    # of Calls  \n"
      "-------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "                     step         0.00%       0.000us         0.00%       0.000us       0.000us     101.000us       594.12%     101.000us     101.000us             1  \n"
      "              aten::addmm        53.85%      70.000us        61.54%      80.000us      80.000us      15.000us        88.24%      15.000us      15.000us             1  \n"
      "                     gemm         0.00%       0.000us         0.00%       0.000us       0.000us      15.000us        88.24%      15.000us       7.500us             2  \n"
      "               aten::relu        11.54%      15.000us        15.38%      20.000us      20.000us       2.000us        11.76%       2.000us       2.000us             1  \n"
      "              relu_kernel         0.00%       0.000us         0.00%       0.000us       0.000us       2.000us        11.76%       2.000us       2.000us             1  \n"
      "    cudaDeviceSynchronize         7.69%      10.000us         7.69%      10.000us      10.000us       2.000us        11.76%       2.000us       2.000us             1  \n"
      "             aten::linear        15.38%      20.000us        76.92%     100.000us     100.000us       0.000us         0.00%      15.000us      15.000us             1  \n"
      "         cudaLaunchKernel        11.54%      15.000us        11.54%      15.000us       7.500us       0.000us         0.00%       0.000us       0.000us             2  \n"
      "-------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "Self CPU time total: 130.000us\n"
      "Self CUDA time total: 17.000us\n";
  CHECK(a.table("self_cuda_time_total", -1) == expected);
  // torch's newer names and the other devices' read the same ("cuda", "xpu", "privateuse1" are
  // "device" to it).
  for (const char* key : {"self_device_time_total", "self_xpu_time_total", "self_privateuse1_time_total"}) {
    INFO(key);
    CHECK(a.table(key, -1) == expected);
  }
  const std::vector<std::string> by_total = {"step",       "aten::linear",          "aten::addmm",     "gemm",
                                             "aten::relu", "relu_kernel", "cudaDeviceSynchronize", "cudaLaunchKernel"};
  CHECK(names_in_order(a.table("cuda_time_total", -1)) == by_total);
  CHECK(names_in_order(a.table("device_time_total", -1)) == by_total);
  CHECK(names_in_order(a.table("cuda_time", -1)) == names_in_order(a.table("device_time", -1)));
  CHECK(names_in_order(a.table("cuda_time", -1))[3] == "gemm");  // 7.5 us a call: after linear's and addmm's 15
}

TEST_CASE("key_averages: a merged call's kernels replace the outer call's, and device memory", "[key_averages]") {
  // f nested alone in f: torch merges them, the inner call's kernels in place of the outer's
  // (`_remove_dup_nodes`: parent.kernels = child.kernels). Memory on the device (CUDA, type 1)
  // within the ops, and a free in no op.
  const std::vector<TimedEvent> events = {with_ids(event("f", 1, 0, 50, "[[2, 3]]"), 10),
                                          with_ids(event("f", 1, 5, 45, "[[2, 3]]"), 11),
                                          with_ids(event("g", 1, 10, 20, "[[4]]"), 12),
                                          on_device("k1", 60, 61, 10),
                                          on_device("k2", 62, 65, 11),
                                          on_device("k3", 70, 74, 12)};
  const std::vector<MemoryRecord> memory = {{1, 15, 1024, 1}, {1, 30, 2048, 1}, {1, 40, 100, 0}, {1, 200, -512, 1}};
  const KeyAverages a = KeyAverages::from_events(events, memory, GroupBy::Name);
  auto rows = by_name(a);
  CHECK(rows["f"].calls == 1);
  CHECK(rows["f"].self_device_us == 3.0);  // k2, not k1
  CHECK(rows["f"].device_total_us == 7.0);
  CHECK(rows["f"].device_memory == 3072);
  CHECK(rows["f"].self_device_memory == 2048);
  CHECK(rows["k1 @device"].self_device_us == 1.0);  // still a row of its own
  CHECK(rows["[memory]"].device_memory == -512);
  CHECK(rows["k1 @device"].device_memory == 0);  // device events get no memory
  // What torch 2.6 prints for the same events (tests/python/key_averages_device_golden.py): the
  // CUDA memory columns after the CPU ones, "Self CUDA Mem" wider than its column.
  const std::string expected =
      "------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "        Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg     Self CUDA   Self CUDA %    CUDA total  CUDA time avg       CPU Mem  Self CPU Mem      CUDA Mem  Self CUDA Mem    # of Calls  \n"
      "------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "           f        80.00%      40.000us       100.00%      50.000us      50.000us       3.000us        37.50%       7.000us       7.000us         100 b         100 b       3.00 Kb       2.00 Kb             1  \n"
      "           g        20.00%      10.000us        20.00%      10.000us      10.000us       4.000us        50.00%       4.000us       4.000us           0 b           0 b       1.00 Kb       1.00 Kb             1  \n"
      "          k1         0.00%       0.000us         0.00%       0.000us       0.000us       1.000us        12.50%       1.000us       1.000us           0 b           0 b           0 b           0 b             1  \n"
      "          k2         0.00%       0.000us         0.00%       0.000us       0.000us       3.000us        37.50%       3.000us       3.000us           0 b           0 b           0 b           0 b             1  \n"
      "          k3         0.00%       0.000us         0.00%       0.000us       0.000us       4.000us        50.00%       4.000us       4.000us           0 b           0 b           0 b           0 b             1  \n"
      "    [memory]         0.00%       0.000us         0.00%       0.000us       0.000us       0.000us         0.00%       0.000us       0.000us           0 b           0 b        -512 b        -512 b             1  \n"
      "------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "Self CPU time total: 50.000us\n"
      "Self CUDA time total: 8.000us\n";
  CHECK(a.table("self_cuda_memory_usage", -1) == expected);
  CHECK(a.table("self_device_memory_usage", -1) == expected);
  // torch 2.11 spells the units in capitals.
  const std::string later = a.table("self_cuda_memory_usage", -1, optrace::TableOptions().memory_units(optrace::MemoryUnits::kTorch211));
  CHECK_THAT(later, OPTRACE_CONTAINS("         100 B         100 B       3.00 KB       2.00 KB             1  \n"));
  CHECK_THAT(later, OPTRACE_CONTAINS("        -512 B        -512 B             1  \n"));
  // Grouped by input shape: the device rows show [].
  CHECK_THAT(KeyAverages::from_events(events, memory, GroupBy::InputShape).table("self_cuda_memory_usage", -1),
             OPTRACE_CONTAINS("             1      [[2, 3]]  \n"));
  // Device memory alone, without a device event: the profile had no accelerator (torch's
  // use_device None), no CUDA columns.
  const KeyAverages cpu_only = KeyAverages::from_events({event("f", 1, 0, 50)}, memory, GroupBy::Name);
  CHECK_FALSE(cpu_only.has_device());
  CHECK(by_name(cpu_only)["f"].device_memory == 3072);
  CHECK_THAT(cpu_only.table(), !OPTRACE_CONTAINS("CUDA"));
}

TEST_CASE("key_averages: the CUDA columns only where a row has device time", "[key_averages]") {
  // Device events of no duration: the profile had an accelerator, but torch shows no columns
  // for time none of its rows has.
  const KeyAverages idle = KeyAverages::from_events({with_ids(event("aten::add", 1, 0, 10), 1), on_device("k", 5, 5, 1)}, {}, GroupBy::Name);
  CHECK(idle.has_device());
  CHECK_THAT(idle.table(), !OPTRACE_CONTAINS("CUDA"));
  // The JSON has the device fields with an accelerator, and only then.
  const std::string json = KeyAverages::from_events(gpu_step(), {}, GroupBy::Name).to_json("self_cuda_time_total", 1);
  CHECK(json ==
        "[{\"name\": \"step\", \"user_annotation\": true, \"calls\": 1, \"self_cpu_us\": 0.0, \"self_cpu_share\": 0.0, "
        "\"cpu_total_us\": 0.0, \"cpu_time_avg_us\": 0.0, \"cpu_memory\": 0, \"self_cpu_memory\": 0, \"on_device\": true, "
        "\"self_device_us\": 101.0, \"self_device_share\": 5.9411764705882355, \"device_total_us\": 101.0, "
        "\"device_time_avg_us\": 101.0, \"device_memory\": 0, \"self_device_memory\": 0}]");
  CHECK_THAT(KeyAverages::from_events(two_steps(), {}, GroupBy::Name).to_json(), !OPTRACE_CONTAINS("device"));
  CHECK_THROWS_WITH(KeyAverages::from_events({with_ids(event("x", 1, 0, 1), -1)}, {}, GroupBy::Name),
                    "optrace: ArgumentError: event 0 (x): correlation ids must be >= 0 (0: none), got correlation_id -1 and "
                    "linked_correlation_id 0");
}

TEST_CASE("key_averages: bad events are ArgumentErrors that name them", "[key_averages]") {
  CHECK_THROWS_WITH(KeyAverages::from_events({event("aten::add", 1, 0, -1)}, {}, GroupBy::Name),
                    "optrace: ArgumentError: event 0 (aten::add): dur_us must be a finite number of microseconds of at least 0, got -1");
  TimedEvent nan = event("aten::mul", 1, 0, 1);
  nan.start_us = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(KeyAverages::from_events({event("x", 1, 0, 1), nan}, {}, GroupBy::Name),
                    "optrace: ArgumentError: event 1 (aten::mul): start_us must be a finite number of microseconds, got nan");
  CHECK_THROWS_WITH(KeyAverages::from_events({}, {MemoryRecord{0, std::numeric_limits<double>::infinity(), 1, 0}}, GroupBy::Name),
                    "optrace: ArgumentError: memory record 0: ts_us must be a finite number of microseconds, got inf");
}

TEST_CASE("key_averages: torch 2.6's own tables of a trace it wrote, character for character", "[key_averages]") {
  // tests/data/kineto/torch26_scripted.*: the trace and what torch printed in that run (with
  // memory, nested record_function ranges, grouped by input shape, every sort key).
  const std::string trace = optrace_test::data_path("kineto/torch26_scripted.pt.trace.json.gz");
  const KeyAverages plain = KeyAverages::from_kineto_file(trace, GroupBy::Name);
  const KeyAverages grouped = KeyAverages::from_kineto_file(trace, GroupBy::InputShape);
  CHECK(plain.has_memory());
  CHECK_FALSE(plain.has_device());
  const std::vector<PrintedTable> tables = printed_tables("kineto/torch26_scripted.tables.txt");
  for (const PrintedTable& t : tables) {
    INFO(t.call);
    CHECK((t.group_by == GroupBy::InputShape ? grouped : plain).table(t.sort_by, t.row_limit) == t.text);
  }
  CHECK(tables.size() == 6);
  // The nested "step" ranges merged (3 calls, not 6); the "outer" ones beside a sibling are not.
  auto rows = by_name(plain);
  CHECK(rows["step"].calls == 3);
  CHECK(rows["outer"].calls == 2);
}

// tests/data/kineto/torch211_cuda_train.*: two training steps of a small MLP on an H100, torch
// 2.11's trace of them and the tables it printed in that run (CUDA columns, CUDA memory, grouped
// by input shape, the CUDA sort keys).
const char* const kCudaTrace = "kineto/torch211_cuda_train.pt.trace.json.gz";
const char* const kCudaTables = "kineto/torch211_cuda_train.tables.txt";
const optrace::TableOptions kTorch211 = optrace::TableOptions().memory_units(optrace::MemoryUnits::kTorch211);

TEST_CASE("key_averages: torch 2.11's CUDA tables, character for character, given the one id its trace leaves out",
          "[key_averages]") {
  // The trace's events as from_kineto_file reads them, with what torch held in memory and the
  // file does not: the correlation id of CUPTI's first "Activity Buffer Request" (an overhead
  // event, written without args), 6, which is also the first aten::addmm's External id, so that
  // torch counted that op's kernels (11.680 us) toward the overhead too. With it, every table is
  // torch's to the character: everything else the tables hold, the file holds.
  std::string text = optrace::detail::read_file_maybe_gzip(optrace_test::data_path(kCudaTrace), simdjson::SIMDJSON_PADDING);
  const auto read = [&] { return optrace::detail::key_averages::Reader().read(text.data(), text.size(), text.capacity()); };
  std::vector<TimedEvent*> overheads;
  optrace::detail::key_averages::TraceEvents events = read();
  for (TimedEvent& e : events.events)
    if (e.name == "Activity Buffer Request") overheads.push_back(&e);
  REQUIRE(overheads.size() == 2);
  TimedEvent& first = *(overheads[0]->start_us < overheads[1]->start_us ? overheads[0] : overheads[1]);
  CHECK(first.correlation_id == 0);  // not in the file
  first.correlation_id = 6;
  const std::vector<PrintedTable> tables = printed_tables(kCudaTables);
  CHECK(tables.size() == 7);
  for (const PrintedTable& t : tables) {
    INFO(t.call);
    const KeyAverages a = KeyAverages::from_events(events.events, events.memory, t.group_by, events.time_zero_ns);
    CHECK(a.table(t.sort_by, t.row_limit, kTorch211) == t.text);
  }
}

TEST_CASE("key_averages: torch 2.11's CUDA tables of the trace it wrote, all but the overhead's kernels", "[key_averages]") {
  // From the file alone, the overhead's 11.680 us of kernels (see above) count toward no event:
  // "Activity Buffer Request" has no device time, and the first aten::addmm and its aten::linear,
  // around it, 11.680 us less device time in all. Every other line, every other cell of those
  // rows, the order of every other row and the totals are torch's.
  const KeyAverages plain = KeyAverages::from_kineto_file(optrace_test::data_path(kCudaTrace), GroupBy::Name);
  const KeyAverages grouped = KeyAverages::from_kineto_file(optrace_test::data_path(kCudaTrace), GroupBy::InputShape);
  CHECK((plain.has_device() && plain.has_memory()));
  const std::set<std::string> differing = {"Activity Buffer Request", "aten::addmm", "aten::linear"};
  for (const PrintedTable& t : printed_tables(kCudaTables)) {
    INFO(t.call);
    const bool by_shape = t.group_by == GroupBy::InputShape;
    const std::vector<std::string> ours = lines_of((by_shape ? grouped : plain).table(t.sort_by, t.row_limit, kTorch211));
    const std::vector<std::string> theirs = lines_of(t.text);
    REQUIRE(ours.size() == theirs.size());
    std::vector<std::string> ours_rest, theirs_rest;
    std::map<std::string, std::vector<std::string>> ours_differing, theirs_differing;  // name and shapes -> cells
    auto split = [&](const std::vector<std::string>& lines, std::vector<std::string>& rest,
                     std::map<std::string, std::vector<std::string>>& apart) {
      for (const std::string& line : lines) {
        const std::vector<std::string> cells = cells_of(line);
        if (!cells.empty() && differing.count(cells[0]) > 0) apart[cells[0] + " " + cells.back()] = cells;
        else rest.push_back(line);
      }
    };
    split(ours, ours_rest, ours_differing);
    split(theirs, theirs_rest, theirs_differing);
    CHECK(ours_rest == theirs_rest);
    // The overhead's row; addmm's and linear's (each in two rows, grouped: the two layers' shapes).
    CHECK(theirs_differing.size() == (by_shape ? 5u : 3u));
    REQUIRE(ours_differing.size() == theirs_differing.size());
    for (const auto& [row, cells] : theirs_differing) {
      INFO(row);
      const std::vector<std::string>& mine = ours_differing[row];
      REQUIRE(mine.size() == cells.size());
      // Name and CPU columns (0-5), memory, calls and shapes (10-): torch's.
      for (size_t i = 0; i < cells.size(); ++i)
        if (i < 6 || i >= 10) CHECK(mine[i] == cells[i]);
      const int64_t calls = std::stoll(cells[cells.size() - (by_shape ? 2 : 1)]);
      const double lost = us_of(cells[8]) - us_of(mine[8]);  // CUDA total
      if (cells[0] == "Activity Buffer Request") {
        CHECK(cells[6] == "11.680us");
        CHECK((mine[6] == "0.000us" && mine[7] == "0.00%" && mine[8] == "0.000us" && mine[9] == "0.000us"));
      } else {
        CHECK(mine[6] == cells[6]);  // self device time: their own kernels
        CHECK(mine[7] == cells[7]);
        // The row that holds the first layer's calls lost the overhead's kernels; the second
        // layer's addmm (grouped apart) lost nothing.
        CHECK((std::fabs(lost - 11.680) < 0.0015 || lost == 0.0));
        CHECK(std::fabs(us_of(cells[9]) - us_of(mine[9]) - lost / static_cast<double>(calls)) < 0.0015);
      }
    }
  }
  // The rows themselves.
  auto rows = by_name(plain);
  CHECK(rows.size() == 74);
  CHECK(rows["aten::addmm"].calls == 4);
  CHECK(near(rows["aten::addmm"].self_device_us, 45.759));
  CHECK(near(rows["aten::addmm"].device_total_us, 45.759));   // torch: 57.439, with the overhead's
  CHECK(near(rows["aten::mm"].self_device_us, 20.417));
  CHECK(rows["aten::mm"].device_memory == 106 * 1024);
  CHECK(rows["Activity Buffer Request"].self_device_us == 0.0);  // torch: 11.680
  CHECK(near(rows["Activity Buffer Request"].self_cpu_us, 5171.888));
  CHECK(rows["cudaLaunchKernel"].calls == 34);
  CHECK(near(rows["cudaDeviceSynchronize"].self_device_us, 3.520));  // aten::sum's kernel, by correlation 597
  CHECK(rows["Optimizer.step#SGD.step"].user_annotation);
  CHECK(near(rows["Optimizer.step#SGD.step"].device_total_us, 4.448));  // its _foreach_add_'s kernels
  CHECK(near(rows["Optimizer.step#SGD.step @device"].self_device_us, 4.448));  // the GPU annotation
  CHECK(near(rows["Memcpy DtoH (Device -> Pinned) @device"].self_device_us, 2.911));
  CHECK(rows["[memory]"].device_memory == -37 * 1024);
  CHECK(near(plain.self_device_time_total_us(), 108.799));
  CHECK(near(plain.self_cpu_time_total_us(), 11264.894));
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
  const KeyAverages a = KeyAverages::from_kineto_text(text, GroupBy::InputShape);
  REQUIRE(a.rows().size() == 6);
  CHECK(a.has_memory());
  CHECK(a.has_device());
  // In the order of the rows' first events: step (the GPU annotation, 1000-1300), aten::cat
  // (1010.5), the kernel (1011), cudaLaunchKernel (1015), aten::relu (1040), [memory] (1200).
  const KeyAverage& step = a.rows()[0];
  CHECK(step.name == "step");
  CHECK((step.on_device && step.user_annotation));
  CHECK(near(step.self_device_us, 299.998));  // Kineto's 1 ns widening on each side, undone
  const KeyAverage& cat = a.rows()[1];
  CHECK(cat.name == "aten::cat");
  CHECK(cat.input_shapes == "[[], []]");  // a tensor list shows no sizes, as torch's shapes()
  CHECK(cat.cpu_total_us == 20.25);
  CHECK(cat.self_cpu_us == 17.25);  // cudaLaunchKernel is its child
  CHECK(cat.cpu_memory == 96);
  CHECK(cat.device_total_us == 0);  // the kernel names no op: it counts toward none
  const KeyAverage& kernel = a.rows()[2];
  CHECK(kernel.name == "void k()");
  CHECK((kernel.on_device && !kernel.user_annotation));
  CHECK(kernel.self_device_us == 100);
  CHECK(kernel.cpu_total_us == 0);
  CHECK(a.rows()[3].name == "cudaLaunchKernel");
  CHECK_FALSE(a.rows()[3].on_device);
  CHECK(a.rows()[4].name == "aten::relu");
  CHECK(a.rows()[4].input_shapes == "[[2, 3]]");
  CHECK(a.rows()[5].name == "[memory]");  // the free in no event
  CHECK(a.rows()[5].cpu_memory == -96);
  CHECK(a.self_device_time_total_us() == 100);  // the kernel; not the annotation
  // A bare list of events, as older profilers wrote, gives the same rows.
  const std::string list = text.substr(text.find('['), text.rfind(']') - text.find('[') + 1);
  CHECK(KeyAverages::from_kineto_text(list, GroupBy::InputShape).table() == a.table());
}

TEST_CASE("key_averages: a Kineto trace's ids link kernels and runtime calls to the ops", "[key_averages]") {
  // aten::mm (External id 5) on the main thread (tid = pid = 1) launches a kernel from a runtime
  // call made on thread 8; a kernel whose External id names no op (an older writer's
  // correlation); a synchronize outside any op whose correlation is 5; a GPU annotation whose
  // External id is the mm's; CUPTI's overhead, written on thread 0, in the mm's time.
  const std::string text = R"json({"traceEvents": [
    {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1000, "dur": 500},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1010, "dur": 100, "args": {"External id": 5}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 8, "ts": 1020, "dur": 10,
     "args": {"External id": 5, "correlation": 40}},
    {"ph": "X", "cat": "overhead", "name": "Activity Buffer Request", "pid": -1, "tid": 0, "ts": 1050, "dur": 20},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1040, "dur": 3, "args": {"External id": 5, "correlation": 40}},
    {"ph": "X", "cat": "kernel", "name": "stray", "pid": 0, "tid": 7, "ts": 1200, "dur": 4, "args": {"External id": 41, "correlation": 41}},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "aten::mm", "pid": 0, "tid": 7, "ts": 1039.999, "dur": 3.002,
     "args": {"External id": 5}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 1300, "dur": 50,
     "args": {"External id": 0, "correlation": 5}}
  ]})json";
  const KeyAverages a = KeyAverages::from_kineto_text(text, GroupBy::Name);
  auto rows = by_name(a);
  // The call (thread 8) and the overhead (thread 0) are on the mm's thread, its children.
  CHECK(rows["aten::mm"].self_cpu_us == 70.0);
  CHECK(rows["aten::mm"].self_device_us == 3.0);  // gemm; not the GPU annotation
  CHECK(rows["aten::mm @device"].self_device_us == 3.0);  // the annotation, 1 ns after and before the file's
  CHECK(rows["aten::mm @device"].user_annotation);
  CHECK(rows["cudaLaunchKernel"].self_device_us == 0.0);
  CHECK(rows["stray @device"].self_device_us == 4.0);
  CHECK(rows["Activity Buffer Request"].self_device_us == 0.0);
  // Linked to no op, with correlation 5: the mm's kernel, as torch counts it.
  CHECK(rows["cudaDeviceSynchronize"].self_device_us == 3.0);
  CHECK(a.self_device_time_total_us() == 7.0);  // gemm and stray
  // The mm of a process 2 on thread 1: the overhead goes to thread 2, the main thread, where the
  // mm is not: no child of it.
  std::string other = text;
  other.replace(other.find("\"pid\": 1, \"tid\": 1, \"ts\": 1010"), 10, "\"pid\": 2,");
  CHECK(by_name(KeyAverages::from_kineto_text(other, GroupBy::Name))["aten::mm"].self_cpu_us == 90.0);
}

TEST_CASE("key_averages: the real traces of HolisticTraceAnalysis", "[key_averages]") {
  const KeyAverages small = KeyAverages::from_kineto_file(optrace_test::data_path("kineto/small_base.pt.trace.json.gz"), GroupBy::InputShape);
  auto rows = by_name(small);
  CHECK(rows["ProfilerStep* []"].calls == 2);
  CHECK(rows["nccl:all_reduce [[4432073]]"].calls == 2);
  CHECK(rows["cudaLaunchKernel []"].calls == 2);  // the runtime's calls, as torch's table has them
  CHECK(small.table("self_cpu_time_total", 1).find("Self CPU time total: 223.188ms\n") != std::string::npos);
  const KeyAverages mtia = KeyAverages::from_kineto_file(optrace_test::data_path("kineto/mtia_inference.pt.trace.json.gz"), GroupBy::Name);
  CHECK(mtia.rows().size() == 60);
  CHECK_FALSE(mtia.has_memory());
  for (const KeyAverage& r : mtia.rows()) {
    INFO(r.name);
    CHECK(r.self_cpu_us >= 0);
    CHECK(r.self_cpu_us <= r.cpu_total_us);
  }
}

// The tables of `text` streamed in pieces of `piece_bytes` (handed 1000 bytes at a time), both
// groupings and every column, or "" where streaming leaves the text to the whole read.
// The tables of `text` streamed in pieces of `piece_bytes`, or "" where it was read whole;
// `most_asked` is set to the most bytes one read asked for (the buffer, less what it held).
std::string streamed_tables(const std::string& text, size_t piece_bytes, size_t* most_asked = nullptr) {
  std::string out;
  for (GroupBy group : {GroupBy::Name, GroupBy::InputShape}) {
    struct Asked : optrace_test::TextReader {
      size_t most = 0;
      size_t read(char* into, size_t n) {
        most = std::max(most, n);
        return TextReader::read(into, n);
      }
    } in{{text, 1000}};
    auto read = optrace::detail::key_averages::stream_events(in, piece_bytes);
    if (most_asked != nullptr) *most_asked = in.most;
    if (!read) return "";
    const KeyAverages k = KeyAverages::from_events(std::move(read->events), read->memory, group, read->time_zero_ns);
    out += k.table("", -1) + k.to_json();
  }
  return out;
}
std::string whole_tables(const std::string& text) {
  std::string out;
  for (GroupBy group : {GroupBy::Name, GroupBy::InputShape}) {
    const KeyAverages k = KeyAverages::from_kineto_text(text, group);
    out += k.table("", -1) + k.to_json();
  }
  return out;
}

TEST_CASE("key_averages: a trace streamed in pieces gives the tables of the trace read whole", "[key_averages]") {
  // Real traces: memory records, device events, baseTimeNanoseconds after the events (torch 2.6, 2.11).
  for (const char* name : {"mtia_inference", "rocm_minitoy_train", "small_base", "torch211_cuda_train", "torch26_scripted"}) {
    const std::string text = optrace::detail::read_file_maybe_gzip(optrace_test::data_path(std::string("kineto/") + name + ".pt.trace.json.gz"));
    INFO(name);
    const std::string whole = whole_tables(text);
    for (size_t piece : {size_t(700), size_t(64) << 10}) CHECK(streamed_tables(text, piece) == whole);
  }
  const std::string event = R"({"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10, "dur": 5})";
  std::string events;
  for (int k = 0; k < 300; ++k) events += (k ? ",\n  " : "") + event;
  // A bare list of events; keys before and after the events.
  const std::string list = "[\n  " + events + "\n]";
  CHECK(streamed_tables(list, 700) == whole_tables(list));
  const std::string keyed = "{\"schemaVersion\": 1, \"traceEvents\": [\n  " + events + "\n], \"baseTimeNanoseconds\": 1700000000000000000}";
  CHECK(streamed_tables(keyed, 700) == whole_tables(keyed));
  // json.dump's layouts (`}, {`, `},{`) and a line break alone: cut by the text's tokens, braces in
  // strings left alone, in pieces of their size.
  for (const std::string& space : {std::string(", "), std::string(","), std::string(",\n")}) {
    INFO("between events: '" << space << "'");
    std::string laid;
    for (int k = 0; k < 300; ++k)
      laid += (k ? space : "") + (k % 10 == 5 ? R"({"ph": "X", "cat": "cpu_op", "name": "a},{\"b", "pid": 1, "tid": 1, "ts": 20, "dur": 1})" : event);
    const std::string text = "{\"schemaVersion\": 1,\"traceEvents\": [" + laid + "], \"baseTimeNanoseconds\": 1700000000000000000}";
    const std::string whole = whole_tables(text);
    REQUIRE(whole.find("a},{\"b") != std::string::npos);
    size_t most_asked = 0;
    CHECK(streamed_tables(text, 700, &most_asked) == whole);
    CHECK(most_asked <= 2 * 700);
    CHECK(text.size() > 20 * 700);
  }
  // Objects after the events, one a line: a cut among them is no event boundary. Streaming gives
  // up there (the whole read takes the trace), and never reads them as events.
  std::string objects;
  for (int k = 0; k < 300; ++k) objects += (k ? ",\n  " : "") + std::string(R"({"ph": "X", "cat": "cpu_op", "name": "not an event", "ts": 1, "dur": 1})");
  const std::string after = "{\"traceEvents\": [\n  " + events + "\n], \"after\": [\n  " + objects + "\n]}";
  CHECK(streamed_tables(after, 700).empty());
  CHECK(whole_tables(after).find("not an event") == std::string::npos);
  // from_kineto_file streams a gzip file and a large plain one; a bad event past the first pieces
  // is named by the whole read, with the file.
  const std::string big_text = optrace::detail::read_file_maybe_gzip(optrace_test::data_path("kineto/mtia_inference.pt.trace.json.gz"));
  REQUIRE(big_text.size() >= optrace::detail::kStreamFromBytes);
  const std::string plain = optrace_test::temp_path("key_averages_streamed.pt.trace.json"), gz = plain + ".gz";
  optrace::detail::write_file_maybe_gzip(plain, big_text);
  optrace::detail::write_file_maybe_gzip(gz, keyed);
  CHECK(KeyAverages::from_kineto_file(plain, GroupBy::Name).table("", -1) ==
        KeyAverages::from_kineto_text(big_text, GroupBy::Name).table("", -1));
  CHECK(KeyAverages::from_kineto_file(gz, GroupBy::InputShape).table("", -1) ==
        KeyAverages::from_kineto_text(keyed, GroupBy::InputShape).table("", -1));
  std::string bad = keyed;
  bad.replace(bad.rfind("\"dur\": 5"), 8, "\"dur\": -5");
  optrace::detail::write_file_maybe_gzip(gz, bad);
  CHECK_THROWS_WITH(KeyAverages::from_kineto_file(gz, GroupBy::Name),
                    "optrace: " + gz + ": JsonError at /traceEvents/299/dur: expected a duration of at least 0, got integer -5");
}

TEST_CASE("key_averages: bad Kineto input is a JsonError at the event", "[key_averages]") {
  auto parse = [](const std::string& text) { return KeyAverages::from_kineto_text(text, GroupBy::InputShape); };
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
  CHECK_THROWS_WITH(parse(R"([{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {"External id": "7"}}])"),
                    "optrace: JsonError at /0/args/External id: expected an id (an integer of at least 0), got string \"7\"");
  CHECK_THROWS_WITH(parse(R"([{"ph": "X", "cat": "cuda_runtime", "name": "c", "ts": 1, "dur": 1, "args": {"correlation": -2}}])"),
                    "optrace: JsonError at /0/args/correlation: expected an id (an integer of at least 0), got integer -2");
  // A key it reads, given twice in one object (Python's json would take the last).
  const std::string twice = ": a key given twice in one object (JSON readers differ on which value they take)";
  CHECK_THROWS_WITH(parse(R"([{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "dur": 2}])"), "optrace: JsonError at /0/dur" + twice);
  CHECK_THROWS_WITH(parse(R"([{"ph": "X", "cat": "cpu_op", "pid": 1, "pid": 2, "name": "a", "ts": 1, "dur": 1}])"), "optrace: JsonError at /0/pid" + twice);
  CHECK_THROWS_WITH(parse(R"([{"ph": "i", "name": "[memory]", "ts": 1, "args": {"Bytes": 8, "Device Type": 0, "Bytes": -8}}])"),
                    "optrace: JsonError at /0/args/Bytes" + twice);
  CHECK_THROWS_WITH(parse(R"([{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "args": {"Input Dims": [[2]], "Input Dims": [[3]]}}])"),
                    "optrace: JsonError at /0/args/Input Dims" + twice);
  CHECK_THROWS_WITH(parse(R"([{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "args": {}, "args": {"Input Dims": [[3]]}}])"),
                    "optrace: JsonError at /0/args" + twice);
  CHECK_THROWS_WITH(parse(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}], "traceEvents": []})"),
                    "optrace: JsonError at /traceEvents" + twice);
  // Events torch does not count are not read further: a flow's or a Python function's odd fields
  // are no error.
  CHECK(parse(R"([{"ph": "X", "cat": "python_function", "name": "k", "ts": "x"}, {"ph": "s", "ts": "y"}])").rows().empty());
  const std::string missing = optrace_test::temp_path("no_such_trace.pt.trace.json");
  CHECK_THROWS_WITH(KeyAverages::from_kineto_file(missing, GroupBy::Name),
                    OPTRACE_STARTS_WITH("optrace: " + missing + ": IoError: cannot open '" + missing + "'"));
}

}  // namespace key_averages_test
