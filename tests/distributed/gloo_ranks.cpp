// A real 2-rank job under optrace's Profiler: two processes (fork), each with a
// c10d::ProcessGroupGloo over a c10d::FileStore, train a tiny model data-parallel (gradients
// all-reduced) for 4 steps under a schedule (warmup 1, active 2) with an execution trace. Writes
// OUT/kineto/rank<r>.*.pt.trace.json (only Kineto traces in that folder: HTA reads a folder) and
// OUT/et/rank<r>.et.json, then checks each rank's trace: distributedInfo with its rank, gloo
// ranges with their collective arguments, the same ProfilerStep#N on both ranks.
//
// Usage: gloo_ranks OUT_DIR. Exit status 0 passed, 1 failed.
#include <optrace/c10d.hpp>
#include <optrace/profiler.hpp>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>

#include <filesystem>
#include <iostream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

constexpr int kWorld = 2;

// One rank's job: a Linear(8, 4), SGD, its gradients all-reduced over gloo, 4 profiled steps.
void run_rank(int rank, const std::string& out, const std::string& store_path) {
  auto store = c10::make_intrusive<c10d::FileStore>(store_path, kWorld);
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, kWorld, options);
  torch::manual_seed(0);
  torch::nn::Linear model(8, 4);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1));
  const std::string name = "rank" + std::to_string(rank);
  optrace::Profiler prof(optrace::ProfilerOptions()
                             .schedule(optrace::Schedule().warmup(1).active(2).repeat(1))
                             .on_trace_ready(optrace::tensorboard_trace_handler(out + "/kineto", name))
                             .record_shapes(true)
                             .execution_trace(out + "/et/" + name + ".et.json")
                             .distributed(optrace::distributed_info(*pg)));
  for (int step = 0; step < 4; ++step) {
    torch::Tensor loss = model->forward(torch::randn({2, 8})).sum();
    opt.zero_grad();
    loss.backward();
    for (torch::Tensor& p : model->parameters()) {
      std::vector<torch::Tensor> grads{p.grad()};
      pg->allreduce(grads)->wait();
      p.grad().div_(kWorld);
    }
    opt.step();
    prof.step();
  }
  prof.stop();
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

bool check(const std::string& out) {
  bool ok = true;
  std::set<std::string> steps;
  for (int rank = 0; rank < kWorld; ++rank) {
    std::vector<fs::path> traces;
    for (const auto& e : fs::directory_iterator(out + "/kineto"))
      if (e.path().filename().string().rfind("rank" + std::to_string(rank) + ".", 0) == 0) traces.push_back(e.path());
    if (traces.size() != 1) {
      std::cerr << "rank " << rank << ": " << traces.size() << " Kineto traces, expected 1\n";
      ok = false;
      continue;
    }
    ok = check_trace(rank, read(traces[0]), steps) && ok;
    const std::string et = read(out + "/et/rank" + std::to_string(rank) + ".et.json");
    for (const char* node : {"gloo:all_reduce", "record_param_comms", "## process_group:init ##"}) {
      if (et.find("\"name\": \"" + std::string(node) + "\"") != std::string::npos) continue;
      std::cerr << "rank " << rank << ": no " << node << " node in the execution trace\n";
      ok = false;
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: gloo_ranks OUT_DIR\n";
    return 2;
  }
  const std::string out = argv[1];
  fs::remove_all(out);
  fs::create_directories(out + "/kineto");
  fs::create_directories(out + "/et");
  const std::string store = out + "/store";
  std::vector<pid_t> children;
  for (int rank = 0; rank < kWorld; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      try {
        run_rank(rank, out, store);
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
  ok = check(out);
  std::cout << (ok ? "gloo_ranks: 2 ranks traced and checked\n" : "gloo_ranks: FAILED\n");
  return ok ? 0 : 1;
}
