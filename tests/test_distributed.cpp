// Tests for optrace/distributed.hpp and the Profiler's distributed traces: DistributedInfo from
// torchrun's environment, "distributedInfo" as torch 2.6 writes it (tests/data/distributed: a real
// 2-rank gloo profile), Kineto's base time, async ranges that end on another thread, and the
// collectives' arguments.
#include <optrace/distributed.hpp>
#include <optrace/kineto.hpp>
#include <optrace/profiler.hpp>

#include <torch/torch.h>

#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "optrace_catch.hpp"

namespace distributed_test {

using optrace::DistributedInfo;

// Sets (or unsets, for nullptr) torchrun's variables for one scope.
struct Environment {
  Environment(const char* rank, const char* world, const char* local = nullptr) {
    set("RANK", rank);
    set("WORLD_SIZE", world);
    set("LOCAL_RANK", local);
  }
  ~Environment() {
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK"}) unsetenv(name);
  }
  static void set(const char* name, const char* value) {
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
};

std::string torch_trace() {
  return optrace::detail::read_file_maybe_gzip(optrace_test::data_path("distributed/torch26_gloo_rank0.pt.trace.json.gz"));
}

// The first `"rank": N` of a trace, as HTA finds a file's rank in directory mode.
int64_t hta_rank(const std::string& text) {
  std::smatch m;
  const std::regex rank(R"("rank":\s+(\d+))");
  return std::regex_search(text, m, rank) ? std::stoll(m[1]) : -1;
}

TEST_CASE("distributed: RANK and WORLD_SIZE from the environment", "[distributed]") {
  SECTION("unset: none") {
    Environment env(nullptr, nullptr);
    CHECK_FALSE(DistributedInfo::from_environment().has_value());
  }
  SECTION("torchrun's variables") {
    Environment env("1", "2", "1");
    auto info = DistributedInfo::from_environment();
    REQUIRE(info.has_value());
    CHECK(info->rank == 1);
    CHECK(info->world_size == 2);
    CHECK(info->local_rank == 1);
    CHECK(info->backend == "gloo");
  }
  SECTION("malformed values: one line each") {
    {
      Environment env("one", "2");
      CHECK_THROWS_WITH(DistributedInfo::from_environment(), "optrace: ArgumentError: DistributedInfo: RANK must be an integer, got 'one'");
    }
    {
      Environment env("2", "2");
      CHECK_THROWS_AS(DistributedInfo::from_environment(), optrace::ArgumentError);
      CHECK_THROWS_WITH(DistributedInfo::from_environment(), "optrace: ArgumentError: DistributedInfo: RANK must be in [0, WORLD_SIZE), got RANK=2 WORLD_SIZE=2");
    }
    {
      Environment env("0", nullptr);
      CHECK_THROWS_WITH(DistributedInfo::from_environment(), "optrace: ArgumentError: DistributedInfo: RANK is set but WORLD_SIZE is not");
    }
    {
      Environment env("0", "2", "x1");
      CHECK_THROWS_WITH(DistributedInfo::from_environment(), "optrace: ArgumentError: DistributedInfo: LOCAL_RANK must be an integer, got 'x1'");
    }
  }
}

TEST_CASE("distributed: distributedInfo as torch 2.6 writes it", "[distributed]") {
  const std::string torch = torch_trace();
  const DistributedInfo info{0, 2, "gloo"};
  // torch's line, byte for byte (json.dumps of profiler.py's _get_distributed_info).
  CHECK_THAT(torch, OPTRACE_CONTAINS("\"distributedInfo\": " + info.to_json() + ",\n"));
  CHECK(hta_rank(torch) == 0);
}

TEST_CASE("distributed: the base time is Kineto's 3-month floor", "[distributed]") {
  // torch's trace: its base is the floor of its events' own epoch times.
  const std::string torch = torch_trace();
  auto doc = optrace::json::Document::parse(torch);
  const int64_t base = doc->root()["baseTimeNanoseconds"].as_int();
  const std::string first_ts = [&] {
    std::smatch m;
    std::regex_search(torch, m, std::regex(R"("ts": (\d+)\.)"));
    return m[1].str();
  }();
  const int64_t event_ns = base + std::stoll(first_ts) * 1000;
  CHECK(optrace::detail::profiler::kineto_base_time_ns(event_ns) == base);
  CHECK(base % (optrace::detail::profiler::kKinetoBaseTimeSeconds * 1000000000) == 0);
  CHECK(optrace::detail::profiler::kineto_base_time_ns(base - 1) == base - optrace::detail::profiler::kKinetoBaseTimeSeconds * 1000000000);
}

// An async range as c10d's gloo work makes it: begun here, ended on another thread.
void gloo_like_range(const torch::Tensor& t) {
  auto fn = std::make_shared<at::RecordFunction>(at::RecordScope::USER_SCOPE);
  if (!fn->isActive()) return;
  fn->_setAsync();
  std::vector<c10::IValue> inputs{t};
  fn->before("gloo:all_reduce", c10::ArrayRef<const c10::IValue>(inputs.data(), inputs.size()));
  std::thread worker([fn] { fn->end(); });
  worker.join();
}

// A node's first input value when it is a string ("" otherwise).
std::string first_string_input(optrace::json::Node node) {
  for (optrace::json::Node v : node["inputs"]["values"].array()) return v.is_string() ? std::string(v.as_string()) : "";
  return "";
}

// The groups of torch's "## process_group:init ##" node in the real trace.
std::string torch_process_groups() {
  auto doc = optrace::json::Document::parse(
      optrace::detail::read_file_maybe_gzip(optrace_test::data_path("distributed/torch26_gloo_rank0.et.json.gz")));
  for (optrace::json::Node n : doc->root()["nodes"].array())
    if (n["name"].as_string() == "## process_group:init ##") return first_string_input(n);
  return "(none in torch's trace)";
}

// The execution trace of a rank: torch's process_group:init node, and a record_param_comms node
// under the gloo range with the collective's attributes. Returns that node's rf_id.
int64_t check_execution_trace(const std::string& path) {
  auto doc = optrace::json::Document::parse(optrace::detail::read_file(path));
  const std::string torch_groups = torch_process_groups();
  int comms = 0, groups = 0;
  int64_t rf_id = -1;
  for (optrace::json::Node n : doc->root()["nodes"].array()) {
    const std::string name(n["name"].as_string());
    if (name == "## process_group:init ##") {
      ++groups;
      CHECK(first_string_input(n) == torch_groups);
    }
    if (name != "record_param_comms") continue;
    ++comms;
    std::map<std::string, std::string> attrs;
    for (optrace::json::Node a : n["attrs"].array()) {
      optrace::json::Node v = a["value"];
      attrs[std::string(a["name"].as_string())] = v.is_string() ? std::string(v.as_string()) : std::to_string(v.as_int());
    }
    CHECK(attrs["collective_name"] == "allreduce");
    CHECK(attrs["dtype"] == "Float");
    CHECK(attrs["in_msg_nelems"] == "32");
    CHECK(attrs["out_msg_nelems"] == "32");
    CHECK(attrs["global_rank_start"] == "0");
    CHECK(attrs["global_rank_stride"] == "1");
    CHECK(attrs["pg_name"] == "0");
    CHECK(attrs["pg_desc"] == "default_pg");
    CHECK(attrs["pg_size"] == "2");
    rf_id = std::stoll(attrs["rf_id"]);
  }
  CHECK(groups == 1);
  CHECK(comms == 1);
  return rf_id;
}

TEST_CASE("distributed: the trace of a rank", "[distributed]") {
  const std::string et_path = optrace_test::temp_path("distributed_rank1.et.json");
  optrace::Profiler prof(optrace::ProfilerOptions().record_shapes(true).execution_trace(et_path).distributed(
      DistributedInfo{1, 2, "gloo"}));
  torch::Tensor t = torch::ones({4, 8});
  gloo_like_range(t);
  {
    optrace::RecordScope scope("after");
    t.add_(1);
  }
  prof.stop();
  const std::string text = prof.last_trace()->to_json();
  CHECK(hta_rank(text) == 1);
  CHECK(text.find("\"distributedInfo\"") < text.find("\"traceEvents\""));
  auto doc = optrace::json::Document::parse(text);
  CHECK(doc->root()["baseTimeNanoseconds"].as_int() % (optrace::detail::profiler::kKinetoBaseTimeSeconds * 1000000000) == 0);
  CHECK(doc->root()["distributedInfo"]["world_size"].as_int() == 2);
  int gloo = 0, comms = 0;
  int64_t gloo_rf_id = -1, comms_rf_id = -2;
  std::set<int64_t> external_ids;
  std::vector<double> gloo_times, comms_times;  // ts, dur, tid
  for (optrace::json::Node e : doc->root()["traceEvents"].array()) {
    optrace::json::Node name = e, args = e, id = e;
    if (e.find("args", args) && args.find("External id", id)) CHECK(external_ids.insert(id.as_int()).second);
    if (!e.find("name", name)) continue;
    if (name.as_string() == "record_param_comms") {
      // The record_param_comms made for the gloo range (torch's NCCL backend records one): a
      // cpu_op at its start (0 long), on its thread, with the collective's arguments and an rf_id
      // of its own, which the execution trace's node has (Chakra's trace_link joins the two by it).
      ++comms;
      CHECK(e["cat"].as_string() == "cpu_op");
      CHECK(e["args"]["Collective name"].as_string() == "allreduce");
      CHECK(e["args"]["Process Group Name"].as_string() == "0");
      comms_rf_id = e["args"]["Record function id"].as_int();
      comms_times = {e["ts"].as_double(), e["dur"].as_double(), e["tid"].as_double()};
    }
    if (name.as_string() != "gloo:all_reduce") continue;
    ++gloo;
    gloo_rf_id = e["args"]["Record function id"].as_int();
    gloo_times = {e["ts"].as_double(), e["dur"].as_double(), e["tid"].as_double()};
    CHECK(e["cat"].as_string() == "user_annotation");
    args = e["args"];
    CHECK(args["Collective name"].as_string() == "allreduce");
    CHECK(args["dtype"].as_string() == "Float");
    CHECK(args["In msg nelems"].as_int() == 32);
    CHECK(args["Out msg nelems"].as_int() == 32);
    CHECK(args["Group size"].as_int() == 2);
    CHECK(args["Process Group Name"].as_string() == "0");
    CHECK(args["Process Group Description"].as_string() == "default_pg");
    CHECK(args["Process Group Ranks"].as_string() == "[0, 1]");
    CHECK(args["Rank"].as_int() == 1);
  }
  CHECK(gloo == 1);  // kept, though it ended on another thread
  CHECK(comms == 1);
  CHECK(comms_rf_id == gloo_rf_id + (int64_t{1} << 52));
  REQUIRE(gloo_times.size() == 3);
  CHECK(comms_times == std::vector<double>{gloo_times[0], 0, gloo_times[2]});
  // "after" began after the async range on the same thread, and is not nested in it.
  CHECK(prof.key_averages().table("cpu_time_total", 10).find("after") != std::string::npos);
  // optrace's own readers read such a trace.
  const std::string path = optrace_test::temp_path("distributed_rank1.pt.trace.json");
  prof.export_chrome_trace(path);
  CHECK(optrace::kineto::load(path).trace.to_json().find("add_") != std::string::npos);
  CHECK_FALSE(optrace::KeyAverages::from_kineto_file(path, optrace::GroupBy::Name).table("cpu_time_total", 10).empty());
  CHECK(check_execution_trace(et_path) == comms_rf_id);
}

TEST_CASE("distributed: RANK and WORLD_SIZE are the Profiler's default", "[distributed]") {
  Environment env("1", "4");
  optrace::Profiler prof;
  torch::ones({2}).add_(1);
  prof.stop();
  REQUIRE(prof.options().distributed().has_value());
  CHECK(prof.options().distributed()->world_size == 4);
  CHECK(hta_rank(prof.last_trace()->to_json()) == 1);
}

TEST_CASE("distributed: collective names of c10d's ranges", "[distributed]") {
  using optrace::detail::profiler::collective_name;
  CHECK(collective_name("gloo:all_reduce") == "allreduce");
  CHECK(collective_name("gloo:all_to_all") == "alltoall");
  CHECK(collective_name("gloo:reduce_scatter") == "reduce_scatter");
  CHECK(collective_name("c10d::allreduce_") == "allreduce");
  CHECK(collective_name("c10d::broadcast_") == "broadcast");
  CHECK_FALSE(collective_name("aten::add_").has_value());
}

// Which group a collective call is written with (collectives.hpp's call_group): the one it was
// seen to go to; unseen, the only group, or none. The gloo job of tests/distributed/gloo_ranks.cpp
// --groups tells the groups of real calls.
TEST_CASE("distributed: a collective call is written with its own group", "[distributed]") {
  using optrace::detail::profiler::call_group;
  using optrace::detail::profiler::collective_args;
  using optrace::detail::profiler::kNoGroup;
  const int world_object = 0, pair_object = 0;  // stand-ins for the c10d groups' objects
  DistributedInfo d{3, 4, "gloo"};
  d.pg_config = d.groups();
  d.pg_config[0].handle = &world_object;
  optrace::ProcessGroupConfig pair;
  pair.pg_name = "2";
  pair.pg_desc = "undefined";
  pair.pg_size = 2;
  pair.ranks = {2, 3};
  pair.handle = &pair_object;
  d.pg_config.push_back(pair);
  REQUIRE(call_group(d, 1).has_value());
  CHECK(call_group(d, 1)->pg_name == "2");
  CHECK(call_group(d, 0)->pg_name == "0");
  CHECK_FALSE(call_group(d, kNoGroup).has_value());  // several groups: an unseen call's is not known
  CHECK(call_group(DistributedInfo{3, 4, "gloo"}, kNoGroup)->pg_size == 4);  // one group: every call's
  const std::string in_pair = "{" + collective_args("allreduce", nullptr, d, 1) + "}";
  auto doc = optrace::json::Document::parse(in_pair);
  CHECK(doc->root()["Process Group Name"].as_string() == "2");
  CHECK(doc->root()["Process Group Ranks"].as_string() == "[2, 3]");
  CHECK(doc->root()["Group size"].as_int() == 2);
  CHECK(doc->root()["Global rank start"].as_int() == 2);
  CHECK(doc->root()["Rank"].as_int() == 1);  // rank 3 of the job is rank 1 of the pair, as torch writes it
  const std::string unseen = "{" + collective_args("allreduce", nullptr, d, kNoGroup) + "}";
  CHECK(unseen.find("Process Group") == std::string::npos);
  CHECK(optrace::json::Document::parse(unseen)->root()["Rank"].as_int() == 3);
  // Past 30 ranks the list is cut as torch's saveNcclMeta cuts it for Kineto (format_list).
  auto ranks_listed = [](int64_t world) {
    const std::string args = "{" + collective_args("allreduce", nullptr, DistributedInfo{3, world, "gloo"}, 0) + "}";
    return optrace::json::Document::parse(args)->root()["Process Group Ranks"].as_string();
  };
  std::string thirty = "[0";
  for (int r = 1; r < 30; ++r) thirty += ", " + std::to_string(r);
  CHECK(ranks_listed(30) == thirty + "]");
  CHECK(ranks_listed(31) == thirty + ", ...]");
  CHECK(ranks_listed(16384) == thirty + ", ...]");
  // The trace's distributedInfo lists both groups, as torch.profiler's does.
  auto info = optrace::json::Document::parse(d.to_json());
  CHECK(info->root()["pg_count"].as_int() == 2);
  CHECK(info->root()["pg_config"].array().size() == 2);
}

}  // namespace distributed_test
