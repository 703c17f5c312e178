// tests/fuzz/fuzz_plan_folder.cpp: Plan::load on a plan folder whose plan.json is the input. The
// folder holds a real plan of tests/data/observations/masked.json (its pN.observations.json), and
// what a hostile plan.json would name to get out of it: `linked/` (a symbolic link to a folder
// outside), `link.json` (a symbolic link to a file outside), both outside files observation files
// of 777 calls, and `hard.json` (a hard link, which is a file of the folder: it may be read).
// Only optrace errors may leave Plan::load; a plan it loads names only files beneath the folder
// (files()), none of its packages holds the outside files' calls, and its summary and drift
// against the calls it was planned from work.
#include "harness.hpp"

#include <optrace/observations.hpp>
#include <optrace/plan.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace {

std::string folder;                          // the plan's folder
std::optional<optrace::Observations> calls;  // what the plan was made from

std::string text_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// masked.json with its total calls set to `n`: told apart from the plan's own files when read.
std::string with_calls(std::string text, int n) {
  const std::string key = "\"total\": ";
  const size_t at = text.find(key);
  if (at == std::string::npos) return text;
  const size_t end = text.find_first_of(",}", at);
  return text.replace(at + key.size(), end - at - key.size(), std::to_string(n));
}

bool beneath_folder(const std::string& path) {
  if (path.rfind(folder + "/", 0) != 0) return false;
  std::stringstream rest(path.substr(folder.size() + 1));
  for (std::string part; std::getline(rest, part, '/');)
    if (part.empty() || part == "." || part == "..") return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char base[] = "/tmp/optrace_fuzz_plan_folder_XXXXXX";
  if (mkdtemp(base) == nullptr) std::abort();
  folder = std::string(base) + "/plan";
  const std::string outside = std::string(base) + "/outside";
  std::filesystem::create_directories(outside);
  const std::string masked = text_of_file(std::string(OPTRACE_SOURCE_DIR) + "/tests/data/observations/masked.json");
  calls = optrace::Observations::from_json(masked);
  optrace::Plan::from_observations({*calls}).save(folder);
  std::ofstream(outside + "/o.json") << with_calls(masked, 777);
  std::ofstream(std::string(base) + "/hard_target.json") << with_calls(masked, 555);
  std::filesystem::create_directory_symlink(outside, folder + "/linked");
  std::filesystem::create_symlink(outside + "/o.json", folder + "/link.json");
  std::filesystem::create_hard_link(std::string(base) + "/hard_target.json", folder + "/hard.json");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::ofstream(folder + "/plan.json", std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                               static_cast<std::streamsize>(size));
  optrace_fuzz::expect_only_optrace_errors("load", [&] {
    const optrace::Plan plan = optrace::Plan::load(folder);
    for (const std::string& f : plan.files())
      if (!beneath_folder(f)) optrace_fuzz::property_failed("a loaded plan names a file outside its folder");
    for (const optrace::PlannedPackage& p : plan.packages())
      if (p.observations.num_calls() == 777) optrace_fuzz::property_failed("a package's calls were read from outside the plan's folder");
    (void)plan.summary();
    optrace_fuzz::expect_only_optrace_errors("drift", [&] { (void)plan.drift({*calls}).to_string(); });
  });
  return 0;
}
