// A real 2-rank job under optrace's Profiler: two processes (fork), each with a
// c10d::ProcessGroupGloo over a c10d::FileStore, train a tiny model data-parallel (gradients
// all-reduced) for 4 steps under a schedule (warmup 1, active 2) with an execution trace. Writes
// OUT/kineto/rank<r>.*.pt.trace.json (only Kineto traces in that folder: HTA reads a folder) and
// OUT/et/rank<r>.et.json, then checks each rank's trace: distributedInfo with its rank, gloo
// ranges with their collective arguments, the same ProfilerStep#N on both ranks.
//
// With --on-demand, the same job runs 40 steps under an OnDemandProfiler each (nothing recorded
// until asked), and rank 0 writes the trigger file OUT/trigger.conf at step 5, as an operator
// would (PROFILE_START_ITERATION_ROUNDUP=20, ACTIVITIES_ITERATIONS=3): every rank must record
// exactly its steps 20, 21 and 22, to OUT/kineto/rank<r>.<ns>.pt.trace.json and
// OUT/et/rank<r>.<ns>.et.json, and the ranks' ProfilerStep#20 must start together on one clock.
//
// With --slow-step N, N ranks (2 or 4) run 60 steps of ~16 ms under an OnDemandProfiler with
// SlowSteps sharing the job's FileStore (optrace::rank_store), and the last rank sleeps 300 ms
// before its step 25's all-reduce: every rank (the others wait in that all-reduce) must write one
// trace of the same 3 steps after step 25, saying in "optraceCapture" that step 25 was slow, and
// the ranks' first recorded step must start together. Prints the time from the end of the slow
// step to the last rank's window opening. A third argument sets the poll interval in ms (10 by
// default; the job runs longer with longer polls): `--slow-step 4 1000` measures the default's.
// With --slow-ring N, the same job keeps a ring of cycles of 8 steps (SlowSteps::ring_steps):
// every rank must write one trace of steps 16..31 (the cycle that holds step 25 and the one
// before), the same on every rank, saying why; prints when the last rank's trace was written.
//
// With --straggler N S, N ranks (2 to 64) record 6 steps under the Profiler (steps 1-5 kept) and
// rank S runs 20 aten::mm of [384, 384] x [384, 384] more before its all-reduces at
// steps 2 and 4: optrace's RankSummary must blame S for the two longest waits, at those steps,
// and name aten::mm with those shapes as what it ran longer than the median rank; it must be the
// rank the others waited for most. Prints the longest wait at the other collectives (the noise of
// N ranks forked on this machine: summary --by rank's threshold is set by it, docs/cli.md).
//
// With --groups N S, N ranks (even, 4 to 64) in two kinds of process groups, as a model-parallel
// job has: the world, and pairs {2k, 2k+1} (a second ProcessGroupGloo per pair over a PrefixStore,
// named "1", "2", ... as torch.distributed's new_group numbers them), each registered with
// optrace::add_process_group. Each of 6 steps (steps 1-5 kept) all-reduces the gradients in the
// world, then a tensor in the pair, both through the dispatcher (c10d::allreduce_, as
// torch.distributed calls them); rank S runs 20 aten::mm more (120 past 8 ranks: 64 ranks forked
// on 2 cores keep one another waiting up to ~0.7 s) before its pair's all-reduce at steps 2 and 4. Each rank's trace must list its two groups in distributedInfo and write every
// collective call with the group it went to ("Process Group Name", its ranks, "Rank" in the
// group); both groups count their collectives (setSequenceNumberForGroup, as torch.distributed
// calls it), so every call must be written with its number ("Seq", consecutive in its group) and
// RankSummary match every collective by it, with all its group's ranks. RankSummary must blame S
// at its pair's all-reduce of steps 2 and 4, its partner the one who waited, with aten::mm the why.
//
// In the default mode, each rank also checks that distributed_info of a c10d::ProcessGroup over its
// gloo backend names the group as the backend is named (libtorch 2.x).
//
// Usage: gloo_ranks OUT_DIR [--on-demand | --slow-step N [POLL_MS] | --slow-ring N [POLL_MS] |
// --straggler N S | --groups N S]. Exit status 0
// passed, 1 failed.
#include <optrace/c10d.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/on_demand.hpp>
#include <optrace/profiler.hpp>
#include <optrace/rank_summary.hpp>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#if TORCH_VERSION_MAJOR < 2
#include <torch/csrc/distributed/c10d/Ops.hpp>
#endif
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

int world = 2;
constexpr int kSlowStep = 25;

// One rank's job: a Linear(8, 4), SGD, its gradients all-reduced over gloo.
struct Rank {
  int rank;
  c10::intrusive_ptr<c10d::FileStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  torch::nn::Linear model{8, 4};
  torch::optim::SGD opt{model->parameters(), torch::optim::SGDOptions(0.1)};

  Rank(int rank, const std::string& store_path) : rank(rank) {
    store = c10::make_intrusive<c10d::FileStore>(store_path, world);
    auto options = c10d::ProcessGroupGloo::Options::create();
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
  }

  void train_step() {
    torch::Tensor loss = model->forward(torch::randn({2, 8})).sum();
    opt.zero_grad();
    loss.backward();
    for (torch::Tensor& p : model->parameters()) {
      std::vector<torch::Tensor> grads{p.grad()};
      pg->allreduce(grads)->wait();
      p.grad().div_(world);
    }
    opt.step();
  }
};

// A c10d::ProcessGroup (what torch.distributed hands out on 2.x) over the rank's gloo backend:
// distributed_info names it as its backend is named (ProcessGroup::getGroupName). Throws if not.
void check_process_group_name(Rank& job) {
#if TORCH_VERSION_MAJOR >= 2
  auto group = c10::make_intrusive<c10d::ProcessGroup>(job.store, job.rank, world);
  const optrace::DistributedInfo unnamed = optrace::distributed_info(*group);  // no backend yet: no name
  group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, job.pg);
  group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
  const std::string uid = job.pg->getGroupUid();
  group->setGroupName("optrace_group");  // the backend's uid: put back below, the traces keep "0"
  const optrace::DistributedInfo info = optrace::distributed_info(*group);
  group->setGroupName(uid);
  if (unnamed.pg_config.at(0).pg_name != "0")
    throw std::runtime_error("a ProcessGroup without a backend got the name '" + unnamed.pg_config.at(0).pg_name + "'");
  if (info.pg_config.at(0).pg_name != "optrace_group" || info.backend != "gloo" || info.rank != job.rank)
    throw std::runtime_error("distributed_info of a c10d::ProcessGroup: name '" + info.pg_config.at(0).pg_name +
                             "', backend '" + info.backend + "'");
#else
  (void)job;  // 1.13's ProcessGroupGloo is the ProcessGroup, and groups have no names
#endif
}

// 4 steps under a Profiler with a schedule.
void run_rank(int rank, const std::string& out, const std::string& store_path) {
  torch::manual_seed(0);
  Rank job(rank, store_path);
  check_process_group_name(job);
  const std::string name = "rank" + std::to_string(rank);
  optrace::Profiler prof(optrace::ProfilerOptions()
                             .schedule(optrace::Schedule().warmup(1).active(2).repeat(1))
                             .on_trace_ready(optrace::tensorboard_trace_handler(out + "/kineto", name))
                             .record_shapes(true)
                             .execution_trace(out + "/et/" + name + ".et.json")
                             .distributed(optrace::distributed_info(*job.pg)));
  for (int step = 0; step < 4; ++step) {
    job.train_step();
    prof.step();
  }
  prof.stop();
}

// 40 steps of ~30 ms under an OnDemandProfiler polling OUT/trigger.conf, which rank 0 writes at
// step 5: 15 steps (~450 ms) before step 20, for every rank's poller (every 10 ms) to read it.
void run_rank_on_demand(int rank, const std::string& out, const std::string& store_path) {
  torch::manual_seed(0);
  Rank job(rank, store_path);
  const std::string trigger = out + "/trigger.conf";
  optrace::OnDemandProfiler od(optrace::OnDemandOptions()
                                   .config_file(trigger)
                                   .poll_interval(std::chrono::milliseconds(10))
                                   .output_dir(out + "/kineto")
                                   .execution_trace_dir(out + "/et")
                                   .worker_name("rank" + std::to_string(rank))
                                   .profiler(optrace::ProfilerOptions().record_shapes(true).distributed(
                                       optrace::distributed_info(*job.pg))));
  for (int step = 0; step < 40; ++step) {
    job.train_step();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    if (rank == 0 && step == 5) {
      std::ofstream(trigger + ".new") << "PROFILE_START_ITERATION_ROUNDUP=20\nACTIVITIES_ITERATIONS=3\n";
      fs::rename(trigger + ".new", trigger);
    }
    od.step();
  }
  od.flush();
}

// Steps of ~16 ms (10 ms of them asleep) under an OnDemandProfiler polling every `poll_ms` that
// captures slow steps through the job's store; the last rank is late at step kSlowStep. Enough
// steps for the window, which opens two polls and 100 ms after the slow step: 60 with 10 ms polls,
// and two more for each 10 ms of poll beyond. Each rank writes OUT/rank<r>.slow_end: when (system
// clock, ns) its slow step ended. `ring`: SlowSteps::ring_steps (0: none).
void run_rank_slow_step(int rank, const std::string& out, const std::string& store_path, int poll_ms, int ring) {
  torch::manual_seed(0);
  Rank job(rank, store_path);
  const int steps = 60 + 2 * (poll_ms - 10) / 10;
  optrace::OnDemandProfiler od(
      optrace::OnDemandOptions()
          .poll_interval(std::chrono::milliseconds(poll_ms))
          .output_dir(out + "/kineto")
          .worker_name("rank" + std::to_string(rank))
          .profiler(optrace::ProfilerOptions().distributed(optrace::distributed_info(*job.pg)))
          // 150 ms at least: no step of a loaded CI machine is taken for the slow one.
          .slow_steps(optrace::SlowSteps().history(10).iterations(3).max_captures(1).min_duration(std::chrono::milliseconds(150))
                          .ring_steps(ring)
                          .store(optrace::rank_store(job.store))));
  for (int step = 0; step < steps; ++step) {
    if (rank == world - 1 && step == kSlowStep) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    job.train_step();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (step == kSlowStep)
      std::ofstream(out + "/rank" + std::to_string(rank) + ".slow_end")
          << std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    od.step();
  }
  od.flush();
}

// 6 steps under a Profiler (steps 1-5 kept); rank `straggler` runs kStragglerMms matrix products
// more at kStragglerSteps, before its all-reduces. One intra-op thread: N ranks share 2 cores.
constexpr int kStragglerMms = 20;
const std::set<int64_t> kStragglerSteps = {2, 4};
void run_rank_straggler(int rank, int straggler, const std::string& out, const std::string& store_path) {
  torch::manual_seed(0);
  torch::set_num_threads(1);
  Rank job(rank, store_path);
  const torch::Tensor a = torch::randn({384, 384});
  optrace::Profiler prof(optrace::ProfilerOptions()
                             .schedule(optrace::Schedule().warmup(1).active(5).repeat(1))
                             .on_trace_ready(optrace::tensorboard_trace_handler(out + "/kineto", "rank" + std::to_string(rank)))
                             .record_shapes(true)
                             .distributed(optrace::distributed_info(*job.pg)));
  for (int step = 0; step < 6; ++step) {
    if (rank == straggler && kStragglerSteps.count(step) > 0)
      for (int k = 0; k < kStragglerMms; ++k) (void)torch::mm(a, a);
    job.train_step();
    prof.step();
  }
  prof.stop();
}

// The straggler, blamed: by RankSummary on the ranks' traces, as `summary --by rank` reads them.
bool check_straggler(const std::string& out, int straggler) {
  bool ok = true;
  auto expect = [&](bool cond, const std::string& what) {
    if (!cond) std::cerr << "straggler: " << what << "\n";
    ok = ok && cond;
  };
  std::vector<optrace::RankTrace> ranks;
  for (const auto& e : fs::directory_iterator(out + "/kineto")) ranks.push_back(optrace::RankTrace::from_kineto_file(e.path().string()));
  expect(static_cast<int>(ranks.size()) == world, std::to_string(ranks.size()) + " traces, expected " + std::to_string(world));
  optrace::RankSummary summary = optrace::RankSummary::from_ranks(std::move(ranks));
  summary.explain_waits();
  const auto& waits = summary.waits();
  const std::vector<size_t> longest = optrace::detail::rank_summary::longest_waits(waits, 2);
  std::set<int64_t> steps;
  for (size_t k : longest) {
    const auto& c = waits.collectives[k];
    steps.insert(c.step);
    expect(c.last_rank == straggler, "step " + std::to_string(c.step) + "'s longest wait is for rank " + std::to_string(c.last_rank));
  }
  expect(steps == kStragglerSteps, "the two longest waits are not at steps 2 and 4");
  for (const auto& why : summary.causes()) {
    const auto& c = waits.collectives[why.collective];
    if (c.last_rank != straggler || kStragglerSteps.count(c.step) == 0) continue;
    expect(why.read && !why.rows.empty() && why.rows[0].name == "aten::mm" && why.rows[0].input_shapes == "[[384, 384], [384, 384]]",
           "step " + std::to_string(c.step) + ": aten::mm [[384, 384], [384, 384]] is not the first reason given");
  }
  const auto most = std::max_element(waits.ranks.begin(), waits.ranks.end(),
                                     [](const auto& a, const auto& b) { return a.caused_ns < b.caused_ns; });
  expect(most != waits.ranks.end() && most->rank == straggler, "the rank the others waited for most is not rank " + std::to_string(straggler));
  int64_t noise = 0, injected = std::numeric_limits<int64_t>::max();
  for (const auto& c : waits.collectives) {
    if (c.last_rank == straggler && kStragglerSteps.count(c.step) > 0 && c.index == 0) injected = std::min(injected, c.max_wait_ns);
    else noise = std::max(noise, c.max_wait_ns);
  }
  std::cout << world << " ranks: the straggler's shortest injected wait " << injected / 1e6 << " ms; the longest wait elsewhere "
            << noise / 1e6 << " ms\n";
  if (!ok) std::cerr << summary.table();
  return ok;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The checks of one rank's trace text; prints what failed.
bool check_trace(int rank, const std::string& text, std::set<std::string>& steps) {
  bool ok = true;
  auto expect = [&](bool cond, const std::string& what) {
    if (!cond) std::cerr << "rank " << rank << ": " << what << "\n";
    ok = ok && cond;
  };
  std::smatch m;
  expect(std::regex_search(text, m, std::regex(R"("rank":\s+(\d+))")) && std::stoi(m[1]) == rank,
         "HTA's regex finds no \"rank\": " + std::to_string(rank));
  expect(text.find("\"distributedInfo\": {\"backend\": \"gloo\"") != std::string::npos, "no distributedInfo");
  expect(text.find("\"name\": \"gloo:all_reduce\"") != std::string::npos, "no gloo:all_reduce range");
  expect(text.find("\"Collective name\": \"allreduce\"") != std::string::npos, "no collective arguments");
  expect(text.find("\"Rank\": " + std::to_string(rank)) != std::string::npos, "no \"Rank\" argument");
  std::set<std::string> own;
  const std::regex step(R"(ProfilerStep#\d+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), step); it != std::sregex_iterator(); ++it)
    own.insert(it->str());
  expect(!own.empty(), "no ProfilerStep#N");
  if (steps.empty()) steps = own;
  expect(own == steps, "ProfilerStep#N differ between ranks");
  return ok;
}

// Where ProfilerStep#`step` starts in a trace, in ns on the trace's clock (its base time plus the
// event's "ts"); -1 when it has none.
double step_start_ns(const std::string& text, int step) {
  auto doc = optrace::json::Document::parse(text);
  const double base = static_cast<double>(doc->root()["baseTimeNanoseconds"].as_int());
  for (optrace::json::Node e : doc->root()["traceEvents"].array()) {
    optrace::json::Node name(e), ts(e);
    if (e.find("name", name) && name.is_string() && name.as_string() == "ProfilerStep#" + std::to_string(step) &&
        e.find("ts", ts))
      return base + ts.as_double() * 1000.0;
  }
  return -1;
}

// The one file of `rank` in `dir` whose name ends in `suffix`, or an empty path (said on stderr).
fs::path rank_file(const std::string& dir, int rank, const std::string& suffix) {
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("rank" + std::to_string(rank) + ".", 0) == 0 && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      found.push_back(e.path());
  }
  if (found.size() == 1) return found[0];
  std::cerr << "rank " << rank << ": " << found.size() << " files *" << suffix << " in " << dir << ", expected 1\n";
  return {};
}

// When `path` was last written (system clock, ns).
double written_ns(const fs::path& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_mtim.tv_sec) * 1e9 + static_cast<double>(st.st_mtim.tv_nsec);
}

// The slow-step capture: one trace per rank, of the same steps, saying why: the 3 after
// kSlowStep, or with the ring (`ring` steps a cycle) the cycle that holds it and the one before.
bool check_slow_step(const std::string& out, int ring) {
  bool ok = true;
  auto expect = [&](bool cond, const std::string& what) {
    if (!cond) std::cerr << what << "\n";
    ok = ok && cond;
  };
  std::set<std::string> steps;
  std::vector<double> first_start;
  double latest_open_ms = 0, latest_written_ms = 0;
  int64_t first_step = -1;
  const int64_t expected_first = ring > 0 ? (kSlowStep / ring - 1) * ring : -1;
  const int64_t expected_steps = ring > 0 ? 2 * ring : 3;
  for (int rank = 0; rank < world; ++rank) {
    const fs::path trace = rank_file(out + "/kineto", rank, ".pt.trace.json");
    if (trace.empty()) {
      ok = false;
      continue;
    }
    const std::string text = read(trace);
    ok = check_trace(rank, text, steps) && ok;
    auto doc = optrace::json::Document::parse(text);
    optrace::json::Node why = doc->root()["optraceCapture"];
    expect(why["step"].as_int() == kSlowStep, "rank " + std::to_string(rank) + ": the capture names another step than 25");
    expect(why["step_ms"].as_double() >= 250, "rank " + std::to_string(rank) + ": the slow step took < 250 ms");
    if (first_step < 0) first_step = why["first_step"].as_int();
    expect(why["first_step"].as_int() == first_step && (ring > 0 ? first_step == expected_first : first_step > kSlowStep),
           "rank " + std::to_string(rank) + ": the window's first step differs");
    expect(why["iterations"].as_int() == expected_steps, "rank " + std::to_string(rank) + ": the capture's step count differs");
    const double start = step_start_ns(text, static_cast<int>(first_step));
    expect(start > 0, "rank " + std::to_string(rank) + ": no ProfilerStep#" + std::to_string(first_step));
    first_start.push_back(start);
    const double slow_end = std::stod(read(out + "/rank" + std::to_string(rank) + ".slow_end"));
    latest_open_ms = std::max(latest_open_ms, (start - slow_end) / 1e6);
    latest_written_ms = std::max(latest_written_ms, (written_ns(trace) - slow_end) / 1e6);
  }
  expect(static_cast<int64_t>(steps.size()) == expected_steps,
         "the ranks recorded " + std::to_string(steps.size()) + " steps, not " + std::to_string(expected_steps));
  if (ring > 0)
    expect(steps.count("ProfilerStep#" + std::to_string(kSlowStep)) == 1, "the ring's trace has no step " + std::to_string(kSlowStep));
  if (ok) {
    const auto [lo, hi] = std::minmax_element(first_start.begin(), first_start.end());
    expect(*hi - *lo < 50e6, "ProfilerStep#" + std::to_string(first_step) + " does not start within 50 ms on every rank");
    std::cout << "slow step " << kSlowStep << ": every rank recorded steps " << first_step << ".."
              << first_step + expected_steps - 1;
    if (ring > 0) std::cout << " (the ring), the last trace written " << latest_written_ms << " ms after the slow step ended";
    else std::cout << ", the last " << latest_open_ms << " ms after the slow step ended";
    std::cout << "; their first step starts " << (*hi - *lo) / 1e6 << " ms apart\n";
  }
  return ok;
}

// A process group as torch.distributed hands it out, over a gloo backend, whose collectives go
// through the dispatcher (c10d::allreduce_ with the group as its argument): 2.x's ProcessGroup
// over the backend; 1.13's ProcessGroupGloo is the group, called through c10d::ops.
struct DispatchedGroup {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> backend;
  c10::intrusive_ptr<c10d::ProcessGroup> group;

  DispatchedGroup(c10::intrusive_ptr<c10d::Store> store, int rank, int size) {
    auto options = c10d::ProcessGroupGloo::Options::create();
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
#if TORCH_VERSION_MAJOR >= 2
    group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, size);
    group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, backend);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
#else
    group = backend;
#endif
  }

  void allreduce(std::vector<torch::Tensor>& tensors) {
#if TORCH_VERSION_MAJOR >= 2
    group->allreduce(tensors)->wait();
#else
    c10d::ops::allreduce(group, tensors)->wait();
#endif
  }
};

// The pair group of `rank` and its name, as torch.distributed's new_group would number the pairs.
std::vector<int64_t> pair_of(int rank) { return {rank & ~1, rank | 1}; }
std::string pair_name(int rank) { return std::to_string(1 + rank / 2); }

// 6 steps under a Profiler (steps 1-5 kept): the gradients' world all-reduces, then a pair
// all-reduce, both dispatched; rank `straggler` runs group_straggler_mms() products more before
// the pair's at kStragglerSteps.
int group_straggler_mms() { return world > 8 ? 6 * kStragglerMms : kStragglerMms; }

void run_rank_groups(int rank, int straggler, const std::string& out, const std::string& store_path) {
  torch::manual_seed(0);
  torch::set_num_threads(1);
  auto store = c10::make_intrusive<c10d::FileStore>(store_path, world);
  DispatchedGroup all(store, rank, world);
  DispatchedGroup pair(c10::make_intrusive<c10d::PrefixStore>("pair" + pair_name(rank), store), rank % 2, 2);
  optrace::DistributedInfo info = optrace::distributed_info(*all.group);
  // Refused, in one line: global ranks of another size than the group's, or not holding this
  // rank at its rank in the group.
  for (const std::vector<int64_t>& wrong : {std::vector<int64_t>{rank & ~1}, std::vector<int64_t>{rank | 1, rank & ~1}}) {
    optrace::DistributedInfo copy = info;
    bool refused = false;
    try {
      optrace::add_process_group(copy, *pair.group, wrong);
    } catch (const optrace::ArgumentError& e) {
      refused = e.message().rfind("add_process_group: ", 0) == 0;
    }
    if (!refused) throw std::runtime_error("add_process_group took the wrong global ranks of a pair");
  }
  optrace::add_process_group(info, *pair.group, pair_of(rank), pair_name(rank));
  // Both groups count their collectives, as torch.distributed makes them do: the Profiler writes
  // each call's number ("Seq"), by which RankSummary matches it (check_groups).
  all.group->setSequenceNumberForGroup();
  pair.group->setSequenceNumberForGroup();
  torch::nn::Linear model{8, 4};
  torch::optim::SGD opt{model->parameters(), torch::optim::SGDOptions(0.1)};
  const torch::Tensor a = torch::randn({384, 384});
  optrace::Profiler prof(optrace::ProfilerOptions()
                             .schedule(optrace::Schedule().warmup(1).active(5).repeat(1))
                             .on_trace_ready(optrace::tensorboard_trace_handler(out + "/kineto", "rank" + std::to_string(rank)))
                             .record_shapes(true)
                             .execution_trace(out + "/et/rank" + std::to_string(rank) + ".et.json")
                             .distributed(info));
  for (int step = 0; step < 6; ++step) {
    torch::Tensor loss = model->forward(torch::randn({2, 8})).sum();
    opt.zero_grad();
    loss.backward();
    for (torch::Tensor& p : model->parameters()) {
      std::vector<torch::Tensor> grads{p.grad()};
      all.allreduce(grads);
    }
    opt.step();
    // The pair's exchange ends the step: the straggler's partner waits for it there, and the two
    // then hold up the next step's world all-reduce, where either may arrive last (the wait passes
    // on to the straggler: check_groups).
    if (rank == straggler && kStragglerSteps.count(step) > 0)
      for (int k = 0; k < group_straggler_mms(); ++k) (void)torch::mm(a, a);
    std::vector<torch::Tensor> token{torch::ones({4})};
    pair.allreduce(token);
    prof.step();
  }
  prof.stop();
}

// The groups job's traces: every collective call written with its group, and the straggler blamed
// at its pair's all-reduce.
bool check_groups(const std::string& out, int straggler) {
  bool ok = true;
  auto expect = [&](bool cond, const std::string& what) {
    if (!cond) std::cerr << "groups: " << what << "\n";
    ok = ok && cond;
  };
  std::vector<optrace::RankTrace> ranks;
  for (int rank = 0; rank < world; ++rank) {
    const fs::path trace = rank_file(out + "/kineto", rank, ".pt.trace.json");
    const fs::path et = rank_file(out + "/et", rank, ".et.json");
    if (trace.empty() || et.empty()) return false;
    const std::string r = "rank " + std::to_string(rank) + ": ";
    auto doc = optrace::json::Document::parse(read(trace));
    optrace::json::Node groups = doc->root()["distributedInfo"]["pg_config"];
    expect(doc->root()["distributedInfo"]["pg_count"].as_int() == 2, r + "distributedInfo lists other than 2 groups");
    const std::string pair = pair_name(rank);
    const std::string pair_ranks = "[" + std::to_string(rank & ~1) + ", " + std::to_string(rank | 1) + "]";
    int64_t group_ranks_seen = 0;
    for (optrace::json::Node g : groups.array())
      if (g["pg_name"].as_string() == pair) group_ranks_seen = static_cast<int64_t>(g["ranks"].array().size());
    expect(group_ranks_seen == 2, r + "distributedInfo does not list its pair \"" + pair + "\" with 2 ranks");
    // Per kind of range, the calls of each group: the dispatcher's op and gloo's own range.
    std::map<std::string, std::map<std::string, int>> calls;  // range name -> group name -> count
    std::map<std::pair<std::string, std::string>, std::vector<int64_t>> seqs;  // (range name, group) -> "Seq"s in order
    for (optrace::json::Node e : doc->root()["traceEvents"].array()) {
      optrace::json::Node name(e), args(e), group(e);
      if (!e.find("name", name) || !name.is_string()) continue;
      const std::string n(name.as_string());
      if (n != "c10d::allreduce_" && n != "gloo:all_reduce") continue;
      if (!e.find("args", args) || !args.find("Process Group Name", group)) {
        ++calls[n]["(none)"];
        continue;
      }
      const std::string g(group.as_string());
      ++calls[n][g];
      optrace::json::Node seq(args);
      seqs[{n, g}].push_back(args.find("Seq", seq) ? seq.as_int() : -1);
      const bool in_pair = g == pair;
      expect((!in_pair || args["Process Group Ranks"].as_string() == pair_ranks) &&
                 args["Group size"].as_int() == (in_pair ? 2 : world) &&
                 args["Rank"].as_int() == (in_pair ? rank % 2 : rank),
             r + n + " of group " + g + ": its ranks, size or rank in the group are wrong");
    }
    // 5 kept steps: one pair all-reduce and two gradient all-reduces each.
    for (const char* n : {"c10d::allreduce_", "gloo:all_reduce"}) {
      const auto& by_group = calls[n];
      const auto count = [&by_group](const std::string& g) { auto it = by_group.find(g); return it == by_group.end() ? 0 : it->second; };
      expect(count(pair) == 5 && count("0") == 10 && by_group.size() == 2,
             r + n + ": " + std::to_string(count(pair)) + " calls of its pair, " + std::to_string(count("0")) + " of the world, " +
                 std::to_string(by_group.size()) + " groups (expected 5, 10, 2)");
    }
    // Each group's calls numbered one after another by c10d's count: the op and its gloo range alike
    // (the trace lists gloo's ranges by worker thread, so the numbers are sorted first).
    for (auto& [where, numbers] : seqs) {
      std::sort(numbers.begin(), numbers.end());
      bool consecutive = numbers.front() > 0;
      for (size_t k = 1; k < numbers.size(); ++k) consecutive = consecutive && numbers[k] == numbers[k - 1] + 1;
      expect(consecutive, r + where.first + " of group " + where.second + ": its \"Seq\"s are not consecutive from 1 or more");
    }
    expect(seqs[{"c10d::allreduce_", pair}] == seqs[{"gloo:all_reduce", pair}], r + "the pair's ops and gloo ranges are numbered apart");
    const std::string et_text = read(et);
    expect(et_text.find("{\"name\": \"pg_name\", \"type\": \"string\", \"value\": \"" + pair + "\"}") != std::string::npos,
           r + "no record_param_comms of its pair in the execution trace");
    ranks.push_back(optrace::RankTrace::from_kineto_file(trace.string()));
  }
  optrace::RankSummary summary = optrace::RankSummary::from_ranks(std::move(ranks));
  summary.explain_waits();
  const auto& waits = summary.waits();
  // Every collective matched by its number, with every rank of its group: the ranks number alike.
  expect(waits.by_seq == static_cast<int64_t>(waits.collectives.size()),
         std::to_string(waits.by_seq) + " of " + std::to_string(waits.collectives.size()) + " collectives matched by their numbers");
  for (const auto& c : waits.collectives)
    expect(c.seq > 0 && c.ranks == (c.group == "0" ? world : 2),
           "step " + std::to_string(c.step) + ", seq " + std::to_string(c.seq) + " of group " + c.group + ": " + std::to_string(c.ranks) + " ranks");
  const std::string pair = pair_name(straggler);
  const int partner = straggler ^ 1;
  std::set<int64_t> blamed_steps;
  int64_t injected = std::numeric_limits<int64_t>::max();  // the shortest wait at the straggler's pair all-reduces
  for (const auto& c : waits.collectives) {
    if (c.group != pair) continue;
    if (kStragglerSteps.count(c.step) > 0) {
      injected = std::min(injected, c.max_wait_ns);
      expect(c.blamed() && c.last_rank == straggler && c.ranks == 2,
             "step " + std::to_string(c.step) + ": the pair's all-reduce (" + std::to_string(c.ranks) + " ranks) is " +
                 (c.blamed() ? "blamed on rank " + std::to_string(c.last_rank) : std::string("blamed on nobody")) + ", not rank " +
                 std::to_string(straggler));
      blamed_steps.insert(c.step);
    }
  }
  expect(blamed_steps == kStragglerSteps, "the straggler's pair all-reduce is not found at steps 2 and 4");
  bool explained = false;
  for (const auto& why : summary.causes()) {
    const auto& c = waits.collectives[why.collective];
    if (c.group != pair || c.last_rank != straggler) continue;
    explained = explained || (why.read && !why.rows.empty() && why.rows[0].name == "aten::mm");
  }
  expect(explained, "no wait at the pair's all-reduce explained by aten::mm");
  // Only the partner waited for it there; the world's all-reduces that follow find the two on time.
  const auto most = std::max_element(waits.ranks.begin(), waits.ranks.end(),
                                     [](const auto& a, const auto& b) { return a.caused_ns < b.caused_ns; });
  expect(most != waits.ranks.end() && most->rank == straggler, "the rank the others waited for most is not rank " + std::to_string(straggler));
  // Every long wait (at least half the shortest injected one and 100 ms: the products take ~400
  // ms at 4 ranks, ~2.5 s at 64, where noise waits reach ~0.7 s) is blamed on the straggler, the
  // world's too, where its partner, held up with it at their pair's all-reduce, may arrive last:
  // the blame passes through the partner's wait.
  const int64_t long_wait = std::max<int64_t>(100'000'000, injected / 2);
  int64_t passed = 0, longest_elsewhere = 0;
  for (const auto& c : waits.collectives) {
    if (!c.blamed()) continue;
    if (c.blamed_rank != straggler) longest_elsewhere = std::max(longest_elsewhere, c.max_wait_ns);
    if (c.max_wait_ns < long_wait) continue;
    expect(c.blamed_rank == straggler, "step " + std::to_string(c.step) + ", #" + std::to_string(c.index) + " of group " + c.group +
                                           ": a wait of " + std::to_string(c.max_wait_ns / 1'000'000) + " ms blamed on rank " +
                                           std::to_string(c.blamed_rank));
    if (c.last_rank == partner) ++passed;
  }
  std::cout << "the partner (rank " << partner << ") arrived last at " << passed << " long wait(s) of the world, passed on to rank "
            << straggler << "; the shortest injected wait " << injected / 1e6 << " ms, the longest blamed on another rank "
            << longest_elsewhere / 1e6 << " ms\n";
  if (!ok) std::cerr << summary.table();
  else std::cout << world << " ranks in the world and " << world / 2 << " pairs: rank " << straggler << " blamed at its pair \"" << pair << "\"'s all-reduce of steps 2 and 4\n";
  return ok;
}

bool check(const std::string& out, bool on_demand) {
  bool ok = true;
  std::set<std::string> steps;
  std::vector<double> step20;
  for (int rank = 0; rank < world; ++rank) {
    const fs::path trace = rank_file(out + "/kineto", rank, ".pt.trace.json");
    const fs::path et_path = rank_file(out + "/et", rank, ".et.json");
    if (trace.empty() || et_path.empty()) {
      ok = false;
      continue;
    }
    const std::string text = read(trace);
    ok = check_trace(rank, text, steps) && ok;
    if (on_demand) step20.push_back(step_start_ns(text, 20));
    const std::string et = read(et_path);
    for (const char* node : {"gloo:all_reduce", "record_param_comms", "## process_group:init ##"}) {
      if (et.find("\"name\": \"" + std::string(node) + "\"") != std::string::npos) continue;
      std::cerr << "rank " << rank << ": no " << node << " node in the execution trace\n";
      ok = false;
    }
  }
  if (on_demand) {
    // Exactly the requested steps, on every rank; and their first step starts together: the
    // all-reduce of step 19 ends on both ranks at once, so one clock shows them within a few ms.
    const std::set<std::string> requested{"ProfilerStep#20", "ProfilerStep#21", "ProfilerStep#22"};
    if (steps != requested) {
      std::cerr << "on demand: the ranks recorded other steps than 20, 21 and 22\n";
      ok = false;
    }
    if (step20.size() != 2 || step20[0] < 0 || step20[1] < 0 || std::fabs(step20[0] - step20[1]) > 50e6) {
      std::cerr << "on demand: ProfilerStep#20 does not start within 50 ms on both ranks' clocks";
      for (double t : step20) std::cerr << " " << static_cast<int64_t>(t);
      std::cerr << "\n";
      ok = false;
    } else {
      std::cout << "ProfilerStep#20 starts " << std::fabs(step20[0] - step20[1]) / 1e6 << " ms apart on the two ranks\n";
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const bool on_demand = argc == 3 && std::string(argv[2]) == "--on-demand";
  const bool slow_ring = (argc == 4 || argc == 5) && std::string(argv[2]) == "--slow-ring";
  const bool slow_step = ((argc == 4 || argc == 5) && std::string(argv[2]) == "--slow-step") || slow_ring;
  const int ring = slow_ring ? 8 : 0;
  const int poll_ms = slow_step && argc == 5 ? std::atoi(argv[4]) : 10;
  const bool groups = argc == 5 && std::string(argv[2]) == "--groups";
  const bool straggling = (argc == 5 && std::string(argv[2]) == "--straggler") || groups;
  if (slow_step || straggling) world = std::atoi(argv[3]);
  const int straggler = straggling ? std::atoi(argv[4]) : -1;
  if ((argc != 2 && !on_demand && !slow_step && !straggling) || world < 2 || world > (straggling ? 64 : 8) ||
      (straggling && (straggler < 0 || straggler >= world)) || (groups && (world < 4 || world % 2 != 0)) || poll_ms < 10 ||
      poll_ms > 5000) {
    std::cerr << "usage: gloo_ranks OUT_DIR [--on-demand | --slow-step RANKS [POLL_MS] | --slow-ring RANKS [POLL_MS] | "
                 "--straggler RANKS RANK | --groups RANKS RANK]\n";
    return 2;
  }
  const std::string out = argv[1];
  optrace::detail::remove_tree(out);
  fs::create_directories(out + "/kineto");
  if ((!slow_step && !straggling) || groups) fs::create_directories(out + "/et");
  const std::string store = out + "/store";
  std::vector<pid_t> children;
  for (int rank = 0; rank < world; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      try {
        if (slow_step) run_rank_slow_step(rank, out, store, poll_ms, ring);
        else if (groups) run_rank_groups(rank, straggler, out, store);
        else if (straggling) run_rank_straggler(rank, straggler, out, store);
        else if (on_demand) run_rank_on_demand(rank, out, store);
        else run_rank(rank, out, store);
      } catch (const std::exception& e) {
        std::cerr << "rank " << rank << ": " << e.what() << "\n";
        _exit(1);
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!ok) return 1;
  fs::remove(store);
  ok = slow_step    ? check_slow_step(out, ring)
       : groups     ? check_groups(out, straggler)
       : straggling ? check_straggler(out, straggler)
                    : check(out, on_demand);
  std::cout << (ok ? "gloo_ranks: " + std::to_string(world) + " ranks traced and checked\n" : std::string("gloo_ranks: FAILED\n"));
  return ok ? 0 : 1;
}
