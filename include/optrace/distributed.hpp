// optrace/distributed.hpp: DistributedInfo, what a rank of a distributed job writes in its traces; RankStore, a store all ranks reach
#pragma once
// No libtorch here: a program that only reads RANK/WORLD_SIZE needs no c10d (c10d.hpp reads a
// ProcessGroup). The JSON is what torch.profiler 2.6 writes in a Kineto trace's "distributedInfo"
// (profiler.py, _get_distributed_info) and what its ExecutionTraceObserver writes in the
// "## process_group:init ##" node (distributed_c10d.py, _get_all_pg_configs), key for key.

#include <optrace/error.hpp>
#include <optrace/json/writer.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace optrace {

/// One process group of a job, as torch's `_get_pg_config` describes it.
struct ProcessGroupConfig {
  std::string pg_name = "0";                // c10d's name of the group ("0" for the default one)
  std::string pg_desc = "default_pg";       // its description
  std::string backend_config;               // e.g. "cpu:gloo,cuda:gloo"
  int64_t pg_size = 1;                      // its number of ranks
  std::vector<int64_t> ranks;               // the global ranks in it, in the group's rank order
  /// The group's c10d object in this process (`distributed_info` and `add_process_group` of
  /// <optrace/c10d.hpp> set it): how the Profiler tells which group a collective call went to.
  /// nullptr for a group described by hand. Never written; compared, never dereferenced.
  const void* handle = nullptr;
  /// c10d's count of the group's collectives so far, read from the group's object (`handle`)
  /// while a call through the dispatcher holds it (<optrace/c10d.hpp> sets it): the Profiler
  /// writes each such call's number ("Seq", docs/profiler.md), by which `summary --by rank`
  /// matches the call across ranks. 0 where the group counts none (a gloo group before
  /// setSequenceNumberForGroup, which torch.distributed calls and a C++ job calls itself).
  /// nullptr: none is read.
  uint64_t (*sequence_number)(const void* handle) = nullptr;
};

/// Where this process stands in a distributed job: what torch.profiler writes in each rank's
/// trace ("distributedInfo"), so that HTA and Chakra put the rank's trace in its place, and what
/// the collectives' arguments are computed from (docs/profiler.md, "Distributed jobs").
struct DistributedInfo {
  int64_t rank = 0;
  int64_t world_size = 1;
  std::string backend = "gloo";
  std::vector<ProcessGroupConfig> pg_config;  // empty: the default group, ranks 0..world_size-1
  int64_t local_rank = -1;                    // LOCAL_RANK, -1 when unknown (written nowhere)

  DistributedInfo() = default;
  /// Rank `rank` of `world_size`, on `backend`; `pg_config` empty: the default group only.
  DistributedInfo(int64_t rank, int64_t world_size, std::string backend = "gloo",
                  std::vector<ProcessGroupConfig> pg_config = {})
      : rank(rank), world_size(world_size), backend(std::move(backend)), pg_config(std::move(pg_config)) {}

  /// The groups as written: `pg_config`, or the default group of `world_size` ranks.
  std::vector<ProcessGroupConfig> groups() const {
    if (!pg_config.empty()) return pg_config;
    ProcessGroupConfig g;
    g.backend_config = "cpu:" + backend + ",cuda:" + backend;
    g.pg_size = world_size;
    for (int64_t r = 0; r < world_size; ++r) g.ranks.push_back(r);
    return {g};
  }

  /// Reads torchrun's environment: RANK and WORLD_SIZE (both, or neither), LOCAL_RANK when set;
  /// the backend stays "gloo". Returns nullopt when neither is set. Throws ArgumentError for a
  /// value that is not an integer, or out of range (rank in [0, world_size)).
  ///
  /// Example: `auto info = optrace::DistributedInfo::from_environment();  // torchrun sets them`
  static std::optional<DistributedInfo> from_environment() {
    const char* rank = std::getenv("RANK");
    const char* world = std::getenv("WORLD_SIZE");
    if (rank == nullptr && world == nullptr) return std::nullopt;
    OPTRACE_CHECK(rank != nullptr && world != nullptr, ArgumentError, "DistributedInfo: ",
                  rank == nullptr ? "WORLD_SIZE is set but RANK is not" : "RANK is set but WORLD_SIZE is not");
    DistributedInfo info;
    info.world_size = env_int("WORLD_SIZE", world);
    info.rank = env_int("RANK", rank);
    OPTRACE_CHECK(info.world_size > 0 && info.rank >= 0 && info.rank < info.world_size, ArgumentError,
                  "DistributedInfo: RANK must be in [0, WORLD_SIZE), got RANK=", info.rank, " WORLD_SIZE=", info.world_size);
    if (const char* local = std::getenv("LOCAL_RANK")) info.local_rank = env_int("LOCAL_RANK", local);
    return info;
  }

  /// torch.profiler's "distributedInfo" object: backend, rank, world_size, pg_count, pg_config.
  std::string to_json() const {
    json::Writer w;
    w.begin_object().key("backend").value(backend).key("rank").value(rank).key("world_size").value(world_size);
    const std::vector<ProcessGroupConfig> all = groups();
    w.key("pg_count").value(static_cast<int64_t>(all.size())).key("pg_config").begin_array();
    for (const ProcessGroupConfig& g : all) {
      w.begin_object().key("pg_name").value(g.pg_name).key("pg_desc").value(g.pg_desc);
      w.key("backend_config").value(g.backend_config).key("pg_size").value(g.pg_size).key("ranks").begin_array();
      for (int64_t r : g.ranks) w.value(r);
      w.end_array().end_object();
    }
    w.end_array().end_object();
    return w.take();
  }

 private:
  static int64_t env_int(const char* name, const char* text) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text, &end, 10);
    OPTRACE_CHECK(end != text && *end == '\0' && errno == 0, ArgumentError, "DistributedInfo: ", name,
                  " must be an integer, got '", text, "'");
    return static_cast<int64_t>(v);
  }
};

/// A key-value store that every rank of a job reaches: how the ranks agree on a slow step
/// (OnDemandOptions::slow_steps). c10d's Store (the FileStore or TCPStore the job's process group
/// uses) is one: `optrace::rank_store(store)` in <optrace/c10d.hpp>. Called from the
/// OnDemandProfiler's polling thread only, never from the stepping thread; what it throws is said
/// in one line and the job goes on.
class RankStore {
 public:
  virtual ~RankStore() = default;
  /// Adds `delta` to the integer at `key` (0 when absent) and returns the sum.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  /// Sets `key` to `value`.
  virtual void set(const std::string& key, const std::string& value) = 0;
  /// The value at `key`, which was set.
  virtual std::string get(const std::string& key) = 0;
};

}  // namespace optrace
