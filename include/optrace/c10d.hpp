// optrace/c10d.hpp: DistributedInfo of a c10d process group (libtorch's distributed package)
#pragma once
// Apart from distributed.hpp: c10d's headers need gloo's (Debian: libgloo-dev), which a program
// that only reads RANK/WORLD_SIZE should not need.

#include <optrace/distributed.hpp>
#include <optrace/error.hpp>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace optrace {
namespace detail::c10d_info {

template <class G, class = void>
struct HasGroupUid : std::false_type {};
template <class G>
struct HasGroupUid<G, std::void_t<decltype(std::declval<const G&>().getGroupUid())>> : std::true_type {};
template <class G, class = void>
struct HasGroupName : std::false_type {};
template <class G>
struct HasGroupName<G, std::void_t<decltype(std::declval<const G&>().getGroupName())>> : std::true_type {};
template <class G, class = void>
struct HasGroupDesc : std::false_type {};
template <class G>
struct HasGroupDesc<G, std::void_t<decltype(std::declval<const G&>().getGroupDesc())>> : std::true_type {};

// The object c10d's ops hold a ProcessGroup argument as (ProcessGroupConfig::handle).
inline const void* handle_of(const c10d::ProcessGroup& group) {
  return static_cast<const void*>(static_cast<const torch::CustomClassHolder*>(&group));
}

// c10d's sequence number of the group whose object `handle` is (handle_of), or 0 where its
// backend counts none: 1.13's base ProcessGroup and 2.x's without a backend throw, a gloo group
// before setSequenceNumberForGroup says 0 (which it never is after: rank 0 draws 1 + rand()).
// Called by the Profiler while a c10d op's argument holds the group.
inline uint64_t sequence_number_of(const void* handle) {
  auto* group = const_cast<c10d::ProcessGroup*>(static_cast<const c10d::ProcessGroup*>(static_cast<const torch::CustomClassHolder*>(handle)));
  try {
    return group->getSequenceNumberForGroup();
  } catch (const std::exception&) {
    return 0;
  }
}

// A group's rank, size, backend and, where the libtorch version has them (2.x), its name and
// description; libtorch 1.13 names none: the default group's "0" and "default_pg" stay.
template <class G>
DistributedInfo of(const G& group) {
  DistributedInfo info;
  info.rank = group.getRank();
  info.world_size = group.getSize();
  info.backend = group.getBackendName();
  ProcessGroupConfig config;
  config.backend_config = "cpu:" + info.backend + ",cuda:" + info.backend;
  config.pg_size = info.world_size;
  for (int64_t r = 0; r < info.world_size; ++r) config.ranks.push_back(r);
  if constexpr (HasGroupUid<G>::value) {  // a Backend (2.x)
    if (!group.getGroupUid().empty()) config.pg_name = group.getGroupUid();
  } else if constexpr (HasGroupName<G>::value) {  // a ProcessGroup (2.x): its backend's name
    try {
      const std::string& name = group.getGroupName();
      if (!name.empty()) config.pg_name = name;
    } catch (const std::exception&) {  // no backend set yet: c10d's "ProcessGroup name not set"
    }
  }
  if constexpr (HasGroupDesc<G>::value) {
    if (!group.getGroupDesc().empty()) config.pg_desc = group.getGroupDesc();
  }
  // What c10d's collective ops are handed (a 2.x Backend never is: its ProcessGroup is).
  if constexpr (std::is_base_of_v<c10d::ProcessGroup, G>) {
    config.handle = handle_of(group);
    config.sequence_number = &sequence_number_of;
  }
  info.pg_config.push_back(std::move(config));
  return info;
}

}  // namespace detail::c10d_info

/// The DistributedInfo of a job's default process group: its rank, size and backend name, and
/// (libtorch 2.x) the group's name and description when set; `pg_config` lists the group with
/// ranks 0..size-1. Throws what c10d throws (c10::Error) for a group that has no backend name.
///
/// Example:
///   auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
///   optrace::Profiler prof(optrace::ProfilerOptions().distributed(optrace::distributed_info(*pg)));
inline DistributedInfo distributed_info(const c10d::ProcessGroup& group) { return detail::c10d_info::of(group); }

/// Adds `group`, one of the job's process groups besides the default one (a subgroup: a pair, a
/// tensor-parallel group), to `info`'s groups, so that the Profiler writes each collective call
/// with the group it went to (its "Process Group Name", "Process Group Ranks", "Group size" and
/// "Rank" in the group) and the trace's "distributedInfo" lists it, as torch.profiler does.
/// `ranks`: the global ranks in the group, in the group's rank order (what was passed to
/// torch.distributed.new_group; c10d itself does not know them). `name`: libtorch 2.x's groups
/// have their own, used when `name` is empty; 1.13's have none, and the default is the group's
/// place in `info` ("1" for the first added), as torch numbers the groups new_group makes. `desc`
/// likewise, torch's default "undefined". The default group stays first (added from `info` when
/// `pg_config` was empty). Throws ArgumentError when `ranks` has not the group's size or does not
/// hold this rank at its rank in the group.
///
/// Calls are told apart by the group object they go to, seen where they go through the
/// dispatcher: torch.distributed, 2.x's ProcessGroup methods, 1.13's c10d::ops functions. A call
/// made on a 2.x Backend directly (a ProcessGroupGloo's allreduce) is not: with several groups
/// listed, it is written without group keys.
///
/// Example:
///   optrace::DistributedInfo info = optrace::distributed_info(*world);
///   optrace::add_process_group(info, *pair, {rank & ~1, rank | 1});
///   optrace::Profiler prof(optrace::ProfilerOptions().distributed(info));
inline void add_process_group(DistributedInfo& info, const c10d::ProcessGroup& group, std::vector<int64_t> ranks,
                              std::string name = "", std::string desc = "") {
  const int64_t size = group.getSize(), rank = group.getRank();
  OPTRACE_CHECK(static_cast<int64_t>(ranks.size()) == size, ArgumentError, "add_process_group: the group has ", size,
                " ranks, but ", ranks.size(), " global ranks were given");
  OPTRACE_CHECK(rank >= 0 && rank < size && ranks[static_cast<size_t>(rank)] == info.rank, ArgumentError,
                "add_process_group: this process is rank ", rank, " of the group and rank ", info.rank,
                " of the job, but the group's ranks hold ", rank >= 0 && rank < size ? ranks[static_cast<size_t>(rank)] : -1,
                " there");
  if (info.pg_config.empty()) info.pg_config = info.groups();
  ProcessGroupConfig config = detail::c10d_info::of(group).pg_config.front();
  config.pg_size = size;
  config.ranks = std::move(ranks);
  const bool named = config.pg_name != ProcessGroupConfig().pg_name;  // 2.x: the group's own
  if (!name.empty()) config.pg_name = std::move(name);
  else if (!named) config.pg_name = std::to_string(info.pg_config.size());
  const bool described = config.pg_desc != ProcessGroupConfig().pg_desc;
  if (!desc.empty()) config.pg_desc = std::move(desc);
  else if (!described) config.pg_desc = "undefined";
  info.pg_config.push_back(std::move(config));
}

/// The job's c10d store (the FileStore or TCPStore its process group was made with) as the
/// RankStore through which the ranks agree on a slow step (SlowSteps::store). Its keys are under
/// "optrace/slow_steps/"; the calls are made on the OnDemandProfiler's polling thread.
///
/// Example:
///   auto store = c10::make_intrusive<c10d::FileStore>(path, world_size);
///   optrace::OnDemandProfiler od(optrace::OnDemandOptions().output_dir("traces").slow_steps(
///       optrace::SlowSteps().store(optrace::rank_store(store))));
inline std::shared_ptr<RankStore> rank_store(c10::intrusive_ptr<c10d::Store> store) {
  struct Adapter final : RankStore {
    explicit Adapter(c10::intrusive_ptr<c10d::Store> s) : store(std::move(s)) {}
    int64_t add(const std::string& key, int64_t delta) override { return store->add(key, delta); }
    void set(const std::string& key, const std::string& value) override {
      store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
    }
    std::string get(const std::string& key) override {
      const std::vector<uint8_t> v = store->get(key);
      return std::string(v.begin(), v.end());
    }
    c10::intrusive_ptr<c10d::Store> store;
  };
  return std::make_shared<Adapter>(std::move(store));
}

#if TORCH_VERSION_MAJOR >= 2
/// The same for a c10d backend (libtorch 2.x: c10d::ProcessGroupGloo is a c10d::Backend).
inline DistributedInfo distributed_info(const c10d::Backend& group) { return detail::c10d_info::of(group); }
#endif

}  // namespace optrace
