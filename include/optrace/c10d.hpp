// optrace/c10d.hpp: DistributedInfo of a c10d process group (libtorch's distributed package)
#pragma once
// Apart from distributed.hpp: c10d's headers need gloo's (Debian: libgloo-dev), which a program
// that only reads RANK/WORLD_SIZE should not need.

#include <optrace/distributed.hpp>

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
