// optrace/detail/profiler/collectives.hpp: the collective arguments of c10d's ranges, computed from their inputs and the DistributedInfo
#pragma once
// torch writes "Collective name", "dtype", "In msg nelems", ... (profiler/util.cpp, saveNcclMeta)
// only for the ranges its backends describe with record_param_comms (NCCL); gloo describes none:
// its `gloo:<op>` ranges and the dispatcher's `c10d::<op>` ops carry inputs only. optrace
// computes the same keys for them, at write time: the message sizes from the recorded inputs
// (record_shapes), the group from the DistributedInfo: the one the call went to (call_group).

#include <optrace/distributed.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/op_trace_types.hpp>
#include <optrace/python_names.hpp>

#include <c10/core/ScalarType.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace optrace::detail::profiler {

// The collective's name of a range ("allreduce" for gloo:all_reduce and c10d::allreduce_), or
// nullopt when the range is not one of c10d's.
inline std::optional<std::string> collective_name(std::string_view range) {
  std::string name;
  if (range.rfind("gloo:", 0) == 0) {
    range.remove_prefix(5);
  } else if (range.rfind("c10d::", 0) == 0) {
    range.remove_prefix(6);
    if (!range.empty() && range.back() == '_') range.remove_suffix(1);  // in-place variants
  } else {
    return std::nullopt;
  }
  // gloo's all_reduce, all_gather, all_to_all are c10d's (and torch's) allreduce, allgather, alltoall.
  const bool joined = range.rfind("all_", 0) == 0;
  for (char c : range)
    if (c != '_' || !joined) name += c;
  return name;
}

// Whether the writers describe the range with a record_param_comms of its own: gloo's range of
// a collective (torch's NCCL backend records one per call; gloo none). The Kineto trace gets a
// `record_param_comms` cpu_op over the range, the execution trace a node under the range's, both
// with param_comms_rf_id: Chakra's trace_link joins the two by it.
inline bool records_param_comms(std::string_view range) { return range.rfind("gloo:", 0) == 0; }

// The RecordFunction id of the record_param_comms made for a range of id `range_rf_id`: above
// any handle torch's RecordFunction hands out (a counter from 1), exact in a double.
inline constexpr uint64_t kParamCommsRfIdBase = uint64_t{1} << 52;
inline uint64_t param_comms_rf_id(uint64_t range_rf_id) { return kParamCommsRfIdBase + range_rf_id; }

// The first input's element count and dtype: the tensor, or the tensors of a list.
inline std::pair<int64_t, std::string> message_of(const OpInput& in) {
  auto numel = [](const OptionalShape& s) {
    int64_t n = 1;
    if (s)
      for (int64_t d : *s) n *= d;
    return s ? n : int64_t{0};
  };
  auto dtype = [](const std::string& python) {
    auto t = scalar_type_from_python(python);
    return t ? std::string(c10::toString(*t)) : python;
  };
  if (in.input_shapes.empty()) return {0, ""};
  if (in.input_shapes[0]) return {numel(in.input_shapes[0]), dtype(in.input_dtypes[0])};
  const OpValue& v = in.non_tensor_inputs[0];
  if (v.kind() != OpValue::Kind::TensorListRef) return {0, ""};
  const TensorListInfo* list = in.tensor_list(v.as_tensor_list_ref());
  if (list == nullptr || list->shapes.empty()) return {0, ""};
  int64_t n = 0;
  for (const auto& s : list->shapes) n += numel(s);
  return {n, dtype(list->dtypes[0])};
}

// The received message's element count: allreduce, broadcast and reduce give back what they sent.
inline int64_t out_nelems(const std::string& collective, int64_t in_nelems, int64_t group_size) {
  if (collective == "allgather" || collective == "gather") return in_nelems * group_size;
  if (collective == "reduce_scatter" && group_size > 0) return in_nelems / group_size;
  return in_nelems;
}

// torch's "Global rank stride": the step between a group's ranks when it is regular, else -1.
inline int64_t rank_stride(const std::vector<int64_t>& ranks) {
  if (ranks.size() < 2) return 1;
  const int64_t stride = ranks[1] - ranks[0];
  for (size_t k = 2; k < ranks.size(); ++k)
    if (ranks[k] - ranks[k - 1] != stride) return -1;
  return stride;
}

// The group a collective call is written with, `group` being the one it was seen to go to
// (Event::group, collective_group.hpp): that group; when it is unknown, the DistributedInfo's
// group if it lists one only (every call of the job is that group's), else none (the call did not
// go through the dispatcher, a 2.x Backend called directly, or went to a group not listed).
inline std::optional<ProcessGroupConfig> call_group(const DistributedInfo& d, uint16_t group) {
  std::vector<ProcessGroupConfig> groups = d.groups();
  if (group < groups.size()) return std::move(groups[group]);
  if (groups.size() == 1) return std::move(groups.front());
  return std::nullopt;
}

// This rank's rank in `g` (its index in the group's ranks), as torch's "Rank" of a collective;
// the global rank where the group does not list it.
inline int64_t group_rank(const ProcessGroupConfig& g, int64_t global_rank) {
  for (size_t k = 0; k < g.ranks.size(); ++k)
    if (g.ranks[k] == global_rank) return static_cast<int64_t>(k);
  return global_rank;
}

// The keys torch's saveNcclMeta writes, as "key": value pairs without braces, for a call that
// went to `group` (call_group). `in`: the recorded inputs, or nullptr without record_shapes (then
// the message keys are left out). A call whose group is not known gets no group keys, and its
// "Out msg nelems" as if the group were the world. `seq`: its number in the group's sequence
// (collective_group.hpp's op_group), written as "Seq", the key torch's saveNcclMeta writes it
// under for NCCL (kSeqNum, 2026); 0: none, not written.
inline std::string collective_args(const std::string& collective, const OpInput* in, const DistributedInfo& d, uint16_t group,
                                   uint64_t seq = 0) {
  const std::optional<ProcessGroupConfig> known = call_group(d, group);
  json::Writer w;
  w.begin_object().key("Collective name").value(collective);
  if (in != nullptr) {
    auto [nelems, dtype] = message_of(*in);
    w.key("dtype").value(dtype).key("In msg nelems").value(nelems);
    w.key("Out msg nelems").value(out_nelems(collective, nelems, known ? known->pg_size : d.world_size));
    w.key("In split size").begin_array().end_array().key("Out split size").begin_array().end_array();
  }
  if (known) {
    const ProcessGroupConfig& g = *known;
    // torch's format_list with truncate on, as saveNcclMeta writes it for Kineto: past
    // kTruncatLength (30) ranks, the first 30 and ", ..." (a 16,384-rank world's list would be
    // ~100 KB on every collective event).
    constexpr size_t kMaxRanksListed = 30;
    std::string ranks = "[";
    for (size_t k = 0; k < std::min(g.ranks.size(), kMaxRanksListed); ++k) ranks += (k ? ", " : "") + std::to_string(g.ranks[k]);
    ranks += g.ranks.size() > kMaxRanksListed ? ", ...]" : "]";
    w.key("Global rank start").value(g.ranks.empty() ? int64_t{0} : g.ranks.front());
    w.key("Global rank stride").value(rank_stride(g.ranks));
    w.key("Group size").value(g.pg_size).key("Process Group Name").value(g.pg_name);
    w.key("Process Group Description").value(g.pg_desc).key("Process Group Ranks").value(ranks);
  }
  w.key("Rank").value(known ? group_rank(*known, d.rank) : d.rank);
  if (seq != 0 && known) w.key("Seq").value(seq);
  w.end_object();
  std::string text = w.take();
  return text.substr(1, text.size() - 2);
}

}  // namespace optrace::detail::profiler
