// optrace/execution_replay.hpp: an execution trace replayed call by call, its tensors shared as they were
#pragma once
// An op trace holds each op's unique inputs; an execution trace holds each call, and which
// tensors were the same tensor. `replay_execution_trace` runs the trace's outermost ops (those an
// import keeps: dispatcher ops after decomposition, a child being part of its parent) in the
// order they were called, each through the dispatcher as `replay` builds a call
// (detail/replay/plan.hpp: schema defaults, integer tensors drawn within the sizes they index),
// and keeps identity (detail::IdentityState): a tensor id an earlier op output is that op's
// result (in-place updates and views included); a tensor from outside the window is
// materialized once, and one that shares a storage with a tensor held is made a view of it at
// its offset. Collectives (c10d ops, record_param_comms) are skipped and counted: replay runs
// on one process. With the Kineto trace of the same window, each call's recorded time is found
// by its RecordFunction id (detail/kineto/record_function_times.hpp).

#include <optrace/detail/common/dispatcher.hpp>
#include <optrace/detail/common/error_text.hpp>
#include <optrace/detail/common/gzip.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/detail/common/progress.hpp>
#include <optrace/detail/common/text_table.hpp>
#include <optrace/detail/kineto/execution_trace_import.hpp>
#include <optrace/detail/kineto/record_function_times.hpp>
#include <optrace/detail/replay/plan.hpp>
#include <optrace/detail/replay/run.hpp>
#include <optrace/error.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/replay_types.hpp>

#include <ATen/MemoryOverlap.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace optrace {

/// One replayed call of an execution trace.
struct ExecutionReplayNode {
  uint32_t index = 0;  ///< its place in the trace's "nodes"
  int64_t id = 0;      ///< its node id
  int64_t rf_id = -1;  ///< its RecordFunction id (the Kineto event's "Record function id"), -1: none
  std::string name;    ///< as the trace names it: "aten::addmm"
  std::string op;      ///< the overload run: "addmm.default"
  ReplayStatus status = ReplayStatus::ok;
  std::string message;                ///< why it is not ok
  double ms = 0;                      ///< its time: one call (run mode), the median of the timed passes (time mode)
  std::optional<double> recorded_ms;  ///< its time in the Kineto trace given (its children's included)
  /// Per tensor input (in schema order, a list's elements in turn): the id of the node whose
  /// output it is, or -1 when it comes from outside the window (materialized once, then shared).
  std::vector<int64_t> inputs_from;
};

/// What `replay_execution_trace` did.
struct ExecutionReplayReport {
  std::vector<ExecutionReplayNode> nodes;  ///< the outermost ops, in call order
  c10::Device device = c10::kCPU;
  ReplayMode mode = ReplayMode::run;  ///< run or time
  int warmup_passes = 0;              ///< passes over the window before the timed ones
  int timed_passes = 1;               ///< passes whose times are kept (their median per call)
  bool complete = true;               ///< false when ReplayOptions::stop_when stopped it
  int passes_run = 0;                 ///< passes begun (all of them when complete)
  int64_t trace_nodes = 0;            ///< every node read
  int64_t collectives = 0;            ///< collective nodes skipped (c10d ops, record_param_comms)
  int64_t shared_inputs = 0;          ///< tensor inputs that were an earlier op's output
  int64_t external_tensors = 0;       ///< tensors from outside the window, materialized once
  int64_t storage_views = 0;          ///< of those, views of a storage another tensor held (at its offset)
  double total_ms = 0;                ///< the calls' times added up
  std::string cut_short;              ///< as ImportReport::cut_short
  // With a Kineto trace (`kineto_path`):
  std::string kineto_path;
  int64_t recorded_nodes = 0;          ///< calls the Kineto trace timed (found by RecordFunction id, same name)
  double recorded_ms = 0;              ///< their recorded times added up
  double replayed_ms_of_recorded = 0;  ///< their replayed times added up

  int64_t count(ReplayStatus s) const {
    int64_t n = 0;
    for (const ExecutionReplayNode& r : nodes) n += r.status == s;
    return n;
  }

  /// Per op (the name the trace gives): calls, replayed and recorded milliseconds, most time
  /// first (recorded time when there is one).
  struct OpTotal {
    std::string name;
    int64_t calls = 0;
    double ms = 0, recorded_ms = 0;
  };
  std::vector<OpTotal> op_totals() const {
    std::map<std::string, OpTotal> by;
    for (const ExecutionReplayNode& r : nodes) {
      OpTotal& t = by[r.name];
      t.name = r.name;
      ++t.calls;
      t.ms += r.ms;
      t.recorded_ms += r.recorded_ms.value_or(0);
    }
    std::vector<OpTotal> out;
    for (auto& [name, t] : by) out.push_back(std::move(t));
    const bool recorded = recorded_nodes > 0;
    std::stable_sort(out.begin(), out.end(), [recorded](const OpTotal& a, const OpTotal& b) {
      return recorded ? a.recorded_ms > b.recorded_ms : a.ms > b.ms;
    });
    return out;
  }

  /// Of the `n` ops with the most recorded time, how many are among the `n` with the most
  /// replayed time (0 without a Kineto trace).
  int64_t top_ops_kept(size_t n = 10) const {
    if (recorded_nodes == 0) return 0;
    std::vector<OpTotal> by_recorded = op_totals(), by_replayed = by_recorded;
    std::stable_sort(by_replayed.begin(), by_replayed.end(), [](const OpTotal& a, const OpTotal& b) { return a.ms > b.ms; });
    std::unordered_set<std::string> top;
    for (size_t i = 0; i < n && i < by_replayed.size(); ++i) top.insert(by_replayed[i].name);
    int64_t kept = 0;
    for (size_t i = 0; i < n && i < by_recorded.size(); ++i) kept += top.count(by_recorded[i].name) > 0;
    return kept;
  }

  /// "replayed 192 of 192 calls on cpu (ok 192, error 0, skipped 0), 1 pass; tensor inputs: 310
  /// an earlier call's output, 64 from outside the window (2 views of a storage held); 0
  /// collectives skipped; 12.300 ms", then with a Kineto trace "; recorded 14.100 ms for the 192
  /// calls it timed (replayed 12.300 ms, 87.2%), top 10 ops by recorded time: 9 in replay's top 10".
  std::string summary() const {
    const int64_t ok = count(ReplayStatus::ok), error = count(ReplayStatus::error), skipped = count(ReplayStatus::skipped);
    const int passes = warmup_passes + timed_passes;
    std::string s = "replayed " + std::to_string(ok + error) + " of " + std::to_string(nodes.size()) + " calls on " + device.str() +
                    " (ok " + std::to_string(ok) + ", error " + std::to_string(error) + ", skipped " + std::to_string(skipped) + "), " +
                    std::to_string(passes) + (passes == 1 ? " pass" : " passes") +
                    (mode == ReplayMode::time ? " (" + std::to_string(warmup_passes) + " warm-up)" : std::string()) +
                    "; tensor inputs: " + std::to_string(shared_inputs) + " an earlier call's output, " +
                    std::to_string(external_tensors) + " from outside the window (" + std::to_string(storage_views) +
                    " views of a storage held); " + std::to_string(collectives) + " collectives skipped; " + detail::fixed(total_ms, 3) + " ms";
    if (!kineto_path.empty())
      s += "; recorded " + detail::fixed(recorded_ms, 3) + " ms for the " + std::to_string(recorded_nodes) + " calls it timed (replayed " +
           detail::fixed(replayed_ms_of_recorded, 3) + " ms, " + detail::percent(replayed_ms_of_recorded, recorded_ms) +
           "), top 10 ops by recorded time: " + std::to_string(top_ops_kept(10)) + " in replay's top 10";
    if (!cut_short.empty()) s += "; the trace was cut short (" + cut_short + ")";
    if (!complete) s += "; INCOMPLETE: stopped";
    return s;
  }

  /// The per-op table: op, calls, replayed ms and share, and with a Kineto trace recorded ms and
  /// replayed/recorded. `top` > 0: at most that many rows.
  void print_ops(std::ostream& out, size_t top = 0) const {
    const bool recorded = recorded_nodes > 0;
    std::vector<std::string> head = {"op", "calls", "ms", "share"};
    if (recorded) head.insert(head.end(), {"recorded ms", "replayed/recorded"});
    detail::TextTable table(head, {"calls", "ms", "share", "recorded ms", "replayed/recorded"});
    for (const OpTotal& t : op_totals()) {
      std::vector<std::string> row = {t.name, std::to_string(t.calls), detail::fixed(t.ms, 3), detail::percent(t.ms, total_ms)};
      if (recorded) row.insert(row.end(), {detail::fixed(t.recorded_ms, 3), detail::percent(t.ms, t.recorded_ms)});
      table.row(std::move(row));
    }
    table.print(out, top, "ops");
  }

  /// Each call that is not ok: "/nodes/17 (id 42) aten::foo: skipped: message".
  void print_not_ok(std::ostream& out) const {
    for (const ExecutionReplayNode& r : nodes)
      if (r.status != ReplayStatus::ok)
        out << "/nodes/" << r.index << " (id " << r.id << ") " << detail::printable(r.name) << ": " << to_string(r.status) << ": "
            << detail::printable(r.message) << '\n';
  }

  /// The report as JSON: `{"format": "optrace.execution_replay", "version": 1, "device",
  /// "mode", "warmup_passes", "timed_passes", "complete", "passes_run", "summary": {...the counts and totals},
  /// "nodes": [{"index", "id", "rf_id", "name", "op", "status", "message", "ms", "recorded_ms",
  /// "inputs_from"}]}`; a time not recorded is null.
  std::string to_json(int indent = 1) const {
    json::Writer w(indent);
    w.begin_object();
    w.key("format").value("optrace.execution_replay");
    w.key("version").value(1);
    w.key("device").value(device.str());
    w.key("mode").value(to_string(mode));
    w.key("warmup_passes").value(warmup_passes);
    w.key("timed_passes").value(timed_passes);
    w.key("complete").value(complete);
    w.key("passes_run").value(passes_run);
    w.key("summary").begin_object();
    for (ReplayStatus s : {ReplayStatus::ok, ReplayStatus::error, ReplayStatus::skipped}) w.key(to_string(s)).value(count(s));
    w.key("calls").value(static_cast<int64_t>(nodes.size()));
    w.key("trace_nodes").value(trace_nodes);
    w.key("collectives").value(collectives);
    w.key("shared_inputs").value(shared_inputs);
    w.key("external_tensors").value(external_tensors);
    w.key("storage_views").value(storage_views);
    w.key("total_ms").value(total_ms);
    w.key("cut_short").value(cut_short);
    w.key("kineto").value(kineto_path);
    w.key("recorded_nodes").value(recorded_nodes);
    w.key("recorded_ms").value(recorded_ms);
    w.key("replayed_ms_of_recorded").value(replayed_ms_of_recorded);
    w.end_object();
    w.key("nodes").begin_array();
    for (const ExecutionReplayNode& r : nodes) {
      w.begin_object();
      w.key("index").value(r.index);
      w.key("id").value(r.id);
      w.key("rf_id").value(r.rf_id);
      w.key("name").value(r.name);
      w.key("op").value(r.op);
      w.key("status").value(to_string(r.status));
      w.key("message").value(r.message);
      w.key("ms").value(r.ms);
      w.key("recorded_ms");
      if (r.recorded_ms) w.value(*r.recorded_ms);
      else w.null();
      w.key("inputs_from").begin_array();
      for (int64_t from : r.inputs_from) w.value(from);
      w.end_array();
      w.end_object();
    }
    w.end_array();
    w.end_object();
    return w.take();
  }

  /// Writes `to_json()` to `path` atomically. Throws `optrace::IoError`.
  void save_json(const std::string& path) const { detail::write_file_atomic(path, to_json() + "\n"); }
};

namespace detail {

// Whether node `name` is a collective: replay runs on one process.
inline bool is_collective_node(std::string_view name) {
  return name.rfind("c10d::", 0) == 0 || name == "record_param_comms" || name.rfind("nccl:", 0) == 0 || name.rfind("gloo:", 0) == 0;
}

// The elements a tensor of `sizes` and `strides` reaches past its offset (0 when it has none).
inline int64_t reach_of(c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  int64_t reach = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
    reach += (sizes[i] - 1) * strides[i];
  }
  return reach;
}

// The tensors of one replay, by the trace's ids. Torch names a tensor by [id, storage id,
// offset, ...]: one id, one tensor; one storage id, one memory, which views share at their
// offsets. Replay keeps:
// - `tensors`: the tensor each id names now (the latest output with that id, or the tensor from
//   outside the window), while a later call reads it;
// - `storages`: per storage id, a tensor over the memory replay gave it, and the difference
//   between replay's offsets in it and the trace's;
// - `externals`: the tensors from outside the window, and their storages, kept for every pass.
class IdentityState {
 public:
  // How an input was bound (bind).
  enum class Bound { output, external, external_again, view };

  // `storage_elements`: per storage id, the elements the trace's tensors reach in it (offset +
  // numel at most); `budget`: the most bytes one storage from outside the window may take.
  IdentityState(std::unordered_map<int64_t, int64_t> storage_elements, int64_t budget)
      : storage_elements_(std::move(storage_elements)), budget_(budget) {}

  // A new pass over the window: only the tensors from outside it are held.
  void begin_pass() {
    tensors_ = external_tensors_;
    storages_ = external_storages_;
    producer_.clear();
  }

  // Binds input `ref` to `slot` (materialized for it, as the plan wants it): the tensor its id
  // names (an earlier output, or a tensor from outside the window met before), else a view of
  // the memory its storage id names, else `slot` itself, its values in a memory of its storage's
  // size. `producer` is set to the node that output it, or -1.
  Bound bind(const kineto::execution_trace::TensorRef& ref, at::Tensor& slot, int64_t& producer) {
    producer = -1;
    auto it = tensors_.find(ref.id);
    if (it != tensors_.end() && it->second.sizes() == slot.sizes() && it->second.scalar_type() == slot.scalar_type() &&
        it->second.device() == slot.device()) {
      slot = it->second;
      auto from = producer_.find(ref.id);
      if (from == producer_.end()) return Bound::external_again;
      producer = from->second;
      return Bound::output;
    }
    const bool view = view_of_held(ref, slot);
    if (!view) own_storage(ref, slot);
    tensors_[ref.id] = slot;
    producer_.erase(ref.id);
    external_tensors_[ref.id] = slot;
    return view ? Bound::view : Bound::external;
  }

  // Output `ref` of node `node_id` is `t`.
  void keep_output(const kineto::execution_trace::TensorRef& ref, const at::Tensor& t, int64_t node_id) {
    if (ref.id < 0 || !t.defined()) return;
    tensors_[ref.id] = t;
    producer_[ref.id] = node_id;
    if (ref.storage < 0 || !t.has_storage()) return;
    const at::Tensor* held = holder(ref.storage);
    if (held != nullptr && held->has_storage() && held->storage().is_alias_of(t.storage())) return;  // its memory, held
    storages_[ref.storage] = Memory{at::Tensor(), ref.id, t.storage_offset() - ref.offset};
  }

  // Id `id` is read no more in this pass.
  void forget(int64_t id) {
    tensors_.erase(id);
    producer_.erase(id);
  }

 private:
  struct Memory {
    at::Tensor base;      // a tensor from outside the window over it, or
    int64_t holder = -1;  // the id of the output that holds it
    int64_t delta = 0;    // replay's offset in it - the trace's
  };

  const at::Tensor* holder(int64_t storage) const {
    auto it = storages_.find(storage);
    if (it == storages_.end()) return nullptr;
    if (it->second.base.defined()) return &it->second.base;
    auto t = tensors_.find(it->second.holder);
    return t == tensors_.end() ? nullptr : &t->second;
  }

  // `slot` made a view of the memory replay holds for `ref`'s storage, at its offset, when that
  // memory has its dtype and device and is large enough.
  bool view_of_held(const kineto::execution_trace::TensorRef& ref, at::Tensor& slot) {
    if (ref.storage < 0) return false;
    const at::Tensor* held = holder(ref.storage);
    if (held == nullptr || !held->has_storage() || held->scalar_type() != slot.scalar_type() || held->device() != slot.device())
      return false;
    const int64_t reach = reach_of(slot.sizes(), slot.strides());
    int64_t offset = 0, end = 0;  // a hostile trace's offsets may overflow
    if (__builtin_add_overflow(ref.offset, storages_[ref.storage].delta, &offset) || offset < 0 ||
        __builtin_add_overflow(offset, reach, &end) || end > static_cast<int64_t>(held->storage().nbytes() / held->element_size()))
      return false;
    slot = held->as_strided(slot.sizes(), slot.strides(), offset);
    return true;
  }

  // `slot` (a tensor from outside the window, the first of its storage) given a memory as large
  // as the trace's tensors of its storage reach, at the trace's offset, its values kept.
  void own_storage(const kineto::execution_trace::TensorRef& ref, at::Tensor& slot) {
    if (ref.storage < 0) return;
    const int64_t reach = reach_of(slot.sizes(), slot.strides());
    int64_t elements = 0;
    if (__builtin_add_overflow(ref.offset, reach, &elements)) return;  // a hostile offset: memory of its own
    if (auto it = storage_elements_.find(ref.storage); it != storage_elements_.end()) elements = std::max(elements, it->second);
    const int64_t item = static_cast<int64_t>(slot.element_size());
    if (elements > budget_ / std::max<int64_t>(item, 1)) {  // over the budget: a tensor of its own, sharing nothing
      return;
    }
    if (ref.offset > 0 || elements > reach || slot.storage_offset() != 0) {
      at::Tensor base = at::zeros({elements}, slot.options());
      at::Tensor view = base.as_strided(slot.sizes(), slot.strides(), ref.offset);
      if (at::has_internal_overlap(view) != at::MemOverlap::Yes) view.copy_(slot);  // an expanded tensor stays zeros
      slot = view;
      storages_[ref.storage] = external_storages_[ref.storage] = Memory{base, -1, 0};
      return;
    }
    storages_[ref.storage] = external_storages_[ref.storage] = Memory{slot, -1, 0};
  }

  std::unordered_map<int64_t, int64_t> storage_elements_;
  int64_t budget_;
  std::unordered_map<int64_t, at::Tensor> tensors_, external_tensors_;
  std::unordered_map<int64_t, int64_t> producer_;
  std::unordered_map<int64_t, Memory> storages_, external_storages_;
};

// One call replay runs: its node, the op and input decoded from it.
struct WindowCall {
  uint32_t node = 0;  // in the trace's nodes
  size_t result = 0;  // in the report's nodes
  std::string op;
  OpInput input;
  std::vector<double> ms;  // per timed pass
};

// Runs `call` (node `node`) once with identity kept in `state`; `first`: the first pass, which
// counts how its inputs were bound into `report` and `r`. Returns its time.
inline double run_call(const kineto::execution_trace::Node& node, const WindowCall& call, const ReplayOptions& options,
                       c10::Device device, IdentityState& state, bool first, ExecutionReplayReport& report, ExecutionReplayNode& r) {
  const CallPlan plan = PlanBuilder(call.input, device, options.float_dtype()).build(call.op);
  if (std::string why = over_memory_budget(plan, device, options.memory_budget_bytes()); !why.empty()) {
    r.status = ReplayStatus::skipped;
    r.message = std::move(why);
    return 0;
  }
  std::vector<at::Tensor> tensors = materialize_plan(plan, device, input_seed(options.seed(), call.op, node.index), options.memory_budget_bytes());
  for (size_t i = 0; i < plan.args.size() && i < node.inputs.size(); ++i) {
    const ArgPlan& a = plan.args[i];
    std::vector<int64_t> slots;
    if (a.kind == ArgPlan::Kind::tensor) slots = {a.slot};
    else if (a.kind == ArgPlan::Kind::tensor_list || a.kind == ArgPlan::Kind::optional_tensor_list) slots = a.slots;
    else continue;
    const auto& refs = node.inputs[i];
    for (size_t j = 0; j < slots.size() && j < refs.size(); ++j) {
      if (slots[j] < 0 || refs[j].id < 0) continue;
      int64_t producer = -1;
      const IdentityState::Bound bound = state.bind(refs[j], tensors[static_cast<size_t>(slots[j])], producer);
      if (!first) continue;
      r.inputs_from.push_back(producer);
      report.shared_inputs += bound == IdentityState::Bound::output;
      report.external_tensors += bound == IdentityState::Bound::external || bound == IdentityState::Bound::view;
      report.storage_views += bound == IdentityState::Bound::view;
    }
  }
  torch::jit::Stack stack = build_stack(plan, tensors, device, plan.out_dtype);
  const double ms = time_ms(device, [&] { plan.op.callBoxed(&stack); });
  for (size_t k = 0; k < stack.size() && k < node.outputs.size(); ++k) {
    const auto& refs = node.outputs[k];
    if (stack[k].isTensor() && refs.size() == 1) {
      state.keep_output(refs[0], stack[k].toTensor(), node.id);
    } else if (stack[k].isTensorList()) {
      const std::vector<at::Tensor> list = stack[k].toTensorVector();
      for (size_t j = 0; j < list.size() && j < refs.size(); ++j) state.keep_output(refs[j], list[j], node.id);
    }
  }
  return ms;
}

}  // namespace detail

/// Replays the execution trace at `path` (torch's ExecutionTraceObserver's or the Profiler's,
/// gzip-compressed or not; a trace cut short up to its last whole node) on `options.device()`:
/// each outermost op in call order, with the tensors its nodes share kept shared. Run mode
/// (and check, which runs as run): one pass, each call timed once. Time mode:
/// `options.warmup()` passes over the whole window, then `options.repeats()` timed ones, each
/// call's median kept. With `kineto_path` (the Kineto trace of the same window), each call's
/// recorded time too. `options.seed`, `float_dtype`, `memory_budget_bytes`, `stop_when` and
/// `progress` apply; `ops`, `exclude_ops` and `max_inputs_per_op` do not (a window runs whole).
/// Never throws for an op's own failure (it becomes the call's status); throws IoError or
/// JsonError (naming the node or event) for a file it cannot read.
inline ExecutionReplayReport replay_execution_trace(const std::string& path, const ReplayOptions& options = {},
                                                    const std::string& kineto_path = {}) {
  namespace et = detail::kineto::execution_trace;
  et::Trace trace = detail::about_file(path, [&] {
    detail::FileReader in(path);
    return et::read_trace(in, true);
  });
  const et::Tree tree = detail::about_file(path, [&] { return et::walk_tree(trace.nodes); });

  const detail::OpCatalog& catalog = detail::live_catalog();
  ExecutionReplayReport report;
  report.device = options.device();
  report.mode = options.mode() == ReplayMode::time ? ReplayMode::time : ReplayMode::run;
  report.warmup_passes = report.mode == ReplayMode::time ? options.warmup() : 0;
  report.timed_passes = report.mode == ReplayMode::time ? options.repeats() : 1;
  report.trace_nodes = static_cast<int64_t>(trace.nodes.size());
  report.cut_short = trace.cut_short;
  report.kineto_path = kineto_path;

  // The calls: the outermost dispatcher ops (a Decomposed op's children run instead of it).
  std::vector<detail::WindowCall> calls;
  std::vector<char> covered(trace.nodes.size(), 0);  // a node inside a call (or a skipped one)
  for (uint32_t k : tree.order) {
    const uint32_t parent = tree.parent_of[k];
    if (parent != UINT32_MAX && covered[parent]) {
      covered[k] = 1;
      continue;
    }
    const et::Node& node = trace.nodes[k];
    if (detail::is_collective_node(node.name)) {
      ++report.collectives;
      covered[k] = 1;
      continue;
    }
    const auto& overloads = catalog.overloads_of(node.name);
    const bool unknown_aten = overloads.empty() && node.name.rfind("aten::", 0) == 0;
    if (overloads.empty() && !unknown_aten) continue;  // no dispatcher op: its children may be
    ExecutionReplayNode r;
    r.index = node.index;
    r.id = node.id;
    r.rf_id = node.rf_id;
    r.name = std::string(node.name);
    r.op = r.name;
    if (unknown_aten) {
      covered[k] = 1;
      r.status = ReplayStatus::skipped;
      r.message = "not replayable: op not in this libtorch";
      report.nodes.push_back(std::move(r));
      continue;
    }
    detail::kineto::KeyInfo info;
    detail::kineto::decode(info, overloads, node.name, node.raw, "/nodes", node.index, kineto::ImportOptions().record_strides(true).keyword_arguments(true));
    if (info.status == detail::kineto::Status::Decomposed) continue;  // its parts run
    covered[k] = 1;
    if (info.status != detail::kineto::Status::Kept) {
      r.status = ReplayStatus::skipped;
      r.message = "not replayable: " + (info.reasons.empty() ? std::string("not decoded") : info.reasons.front());
      report.nodes.push_back(std::move(r));
      continue;
    }
    r.op = std::string(info.op);
    // The profiler's view of a 0-dim tensor after the first argument as a Python number
    // (decode.hpp's is_wrapped_number) does not hold here: the trace has the tensor itself.
    OpInput input = std::move(info.input);
    for (size_t i = 0; i < input.input_shapes.size() && i < node.inputs.size(); ++i) {
      if (input.input_shapes[i] || node.inputs[i].size() != 1 || node.inputs[i][0].id < 0) continue;
      const std::string* dtype = detail::kineto::python_dtype_of_type_name(node.inputs[i][0].dtype);
      if (dtype == nullptr) continue;
      input.input_shapes[i] = std::vector<int64_t>{};
      input.input_dtypes[i] = *dtype;
      input.non_tensor_inputs[i] = OpValue::none();
    }
    calls.push_back(detail::WindowCall{k, report.nodes.size(), r.op, std::move(input), {}});
    report.nodes.push_back(std::move(r));
  }

  // The recorded times, read before the replay (a bad file stops it before it starts).
  std::unordered_map<int64_t, detail::kineto::RecordedCall> recorded;
  if (!kineto_path.empty()) {
    std::unordered_set<int64_t> wanted;
    for (const ExecutionReplayNode& r : report.nodes)
      if (r.rf_id >= 0) wanted.insert(r.rf_id);
    recorded = detail::kineto::read_record_function_times_file(kineto_path, wanted);
  }

  // What identity needs to know ahead: the memory each storage's tensors reach, and the last
  // call that reads each id (after it, replay lets the tensor go).
  std::unordered_map<int64_t, int64_t> storage_elements, last_read;
  for (const et::Node& node : trace.nodes)
    for (const auto* args : {&node.inputs, &node.outputs})
      for (const auto& refs : *args)
        for (const et::TensorRef& ref : refs) {
          if (ref.storage < 0 || ref.numel > INT64_MAX - ref.offset) continue;
          int64_t& e = storage_elements[ref.storage];
          e = std::max(e, ref.offset + ref.numel);
        }
  for (size_t c = 0; c < calls.size(); ++c)
    for (const auto& refs : trace.nodes[calls[c].node].inputs)
      for (const et::TensorRef& ref : refs) last_read[ref.id] = static_cast<int64_t>(c);
  auto forget_after = [&](detail::IdentityState& state, size_t c) {
    const et::Node& node = trace.nodes[calls[c].node];
    for (const auto* args : {&node.inputs, &node.outputs})
      for (const auto& refs : *args)
        for (const et::TensorRef& ref : refs) {
          auto it = last_read.find(ref.id);
          if (it == last_read.end() || it->second <= static_cast<int64_t>(c)) state.forget(ref.id);
        }
  };

  const c10::Device device = options.device();
  detail::IdentityState state(std::move(storage_elements), options.memory_budget_bytes());
  const int passes = report.warmup_passes + report.timed_passes;
  detail::ProgressBar progress(options.progress(), static_cast<int64_t>(calls.size()) * passes);
  for (int pass = 0; pass < passes && report.complete; ++pass) {
    state.begin_pass();
    report.passes_run = pass + 1;
    const bool timed = pass >= report.warmup_passes;
    for (size_t c = 0; c < calls.size(); ++c) {
      if (options.stop_when() && options.stop_when()()) {
        report.complete = false;
        break;
      }
      detail::WindowCall& call = calls[c];
      ExecutionReplayNode& r = report.nodes[call.result];
      progress.update(static_cast<int64_t>(pass * calls.size() + c), r.name);
      if (r.status != ReplayStatus::ok) continue;  // failed in an earlier pass
      double ms = 0;
      detail::run_classified(device, r, [&] {
        ms = detail::run_call(trace.nodes[call.node], call, options, device, state, pass == 0, report, r);
      });
      if (timed && r.status == ReplayStatus::ok) call.ms.push_back(ms);
      forget_after(state, c);
    }
  }
  progress.finish();

  for (const detail::WindowCall& call : calls) {
    ExecutionReplayNode& r = report.nodes[call.result];
    r.ms = detail::median_of(call.ms);
    report.total_ms += r.ms;
  }
  for (ExecutionReplayNode& r : report.nodes) {
    auto it = r.rf_id >= 0 ? recorded.find(r.rf_id) : recorded.end();
    if (it == recorded.end() || it->second.name != r.name) continue;  // no such call in that trace: not its window
    r.recorded_ms = static_cast<double>(it->second.dur_ns) / 1e6;
    ++report.recorded_nodes;
    report.recorded_ms += *r.recorded_ms;
    report.replayed_ms_of_recorded += r.ms;
  }
  return report;
}

}  // namespace optrace
