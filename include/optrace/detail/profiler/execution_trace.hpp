// optrace/detail/profiler/execution_trace.hpp: recorded windows written as PyTorch's host execution trace
#pragma once
// The file torch's ExecutionTraceObserver writes (schema "1.1.1-chakra.0.0.4"), which Chakra's
// converter turns into a Chakra ET and chakra_trace_link joins with the Kineto trace of the same
// steps by `rf_id` == the Kineto event's "Record function id". Its layout, as torch writes it:
// - a header ("schema", "pid", "time", "start_ts"/"finish_ts": steady-clock milliseconds), and
//   "nodes": a tree by "ctrl_deps" rooted at the process node (id 1, its own parent), one
//   "[pytorch|profiler|execution_trace|thread]" node per thread under it, each range recorded on
//   the thread under its enclosing range (or the thread node);
// - per node "inputs"/"outputs" as parallel "values", "shapes", "types", "strides"; a tensor's
//   value is [tensor_id, storage_id, offset, numel, itemsize, device], the ids taken from one
//   counter shared with the nodes, by TensorImpl and by storage data address;
// - "attrs": rf_id, fw_parent, seq_id, scope, tid (RecordFunction's thread id), fw_tid, op_schema,
//   kernel_backend, kernel_file. Chakra's converter needs every one of the first seven.
// On libtorch 1.13 too: its own observer writes only the older "execution graph" form, which
// Chakra refuses.

#include <optrace/detail/common/io.hpp>
#include <optrace/detail/profiler/collectives.hpp>
#include <optrace/detail/profiler/et_values.hpp>
#include <optrace/detail/profiler/window.hpp>
#include <optrace/json/writer.hpp>

#include <ATen/core/function_schema.h>
#include <c10/core/ScalarTypeToTypeMeta.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ctime>
#include <sstream>
#include <string>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optrace::detail::profiler {

inline int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A file written through a folder held open (OnDemandProfiler's traces): the write goes to the
// folder opened then, whatever is renamed or linked on its path meanwhile, and never replaces a file.
struct HeldTarget {
  FileTarget target;
  std::shared_ptr<const Fd> folder;  // keeps target.folder open
};

class ExecutionTraceWriter {
 public:
  ExecutionTraceWriter(std::string path, int64_t pid, std::optional<DistributedInfo> distributed = std::nullopt)
      : ExecutionTraceWriter(HeldTarget{FileTarget::path(path), nullptr}, pid, std::move(distributed)) {}
  ExecutionTraceWriter(HeldTarget target, int64_t pid, std::optional<DistributedInfo> distributed)
      : target_(std::move(target)), path_(target_.target.shown), pid_(pid), start_ms_(steady_ms()),
        distributed_(std::move(distributed)) {
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char text[64];
    std::strftime(text, sizeof text, "%Y-%m-%d %X", &local);
    time_ = text;
  }

  const std::string& path() const { return path_; }

  // Adds the nodes of one recording window.
  void add(const Window& window) {
    for (const auto& b : window.buffers) add_thread(*b);
  }

  // Writes the file (atomically: a failed write leaves none). Throws IoError.
  void finish() {
    json::Writer w;
    w.begin_object();
    w.key("schema").value("1.1.1-chakra.0.0.4");
    w.key("pid").value(pid_);
    w.key("time").value(time_);
    w.key("start_ts").value(start_ms_);
    w.key("nodes").begin_array();
    for (const std::string& node : nodes_) w.raw(node);
    w.raw(node_text(1, "[pytorch|profiler|execution_trace|process]", 1, Values{}, Values{}, Attrs{0, 0, -1, 7, 0, 0, ""}));
    w.end_array();
    w.key("finish_ts").value(steady_ms());
    w.end_object();
    // A held folder's file (OnDemandProfiler's) is new: never one written over; a path is the user's.
    write_file_atomic(target_.target, w.take(), target_.folder ? ExistingFile::Keep : ExistingFile::Replace);
  }

 private:
  struct Values {
    json::Writer values, shapes, types, strides;
    Values() {
      for (json::Writer* x : {&values, &shapes, &types, &strides}) x->begin_array();
    }
  };
  struct Attrs {
    int64_t rf_id, fw_parent, seq_id, scope, tid, fw_tid;
    std::string op_schema;
  };

  // As torch's getObjectID: one id per address (a null storage data pointer too).
  int64_t id_of(int64_t address) {
    auto [it, fresh] = object_ids_.emplace(address, 0);
    if (fresh) it->second = next_id_++;
    return it->second;
  }

  // One encoded value (et_values.hpp) from `k[p]` on, written into the values, shapes and strides
  // lists; returns its type ("Tensor(float)", "GenericList[Int,Int]", ...).
  std::string value(const int64_t* k, size_t& p, json::Writer& values, json::Writer& shapes,
                    json::Writer& strides) {
    const int64_t tag = k[p++];
    auto string_at = [&k, &p] {
      const size_t n = static_cast<size_t>(k[p++]);
      std::string s(n, '\0');
      for (size_t i = 0; i < n; i += 8) {
        const int64_t packed = k[p++];
        std::memcpy(&s[i], &packed, std::min<size_t>(8, n - i));
      }
      return s;
    };
    switch (tag) {
      case kEtTensor: {
        const int64_t impl = k[p++], stored = k[p++], data = k[p++], offset = k[p++], numel = k[p++], itemsize = k[p++];
        const auto device_type = static_cast<c10::DeviceType>(k[p++]);
        const auto device_index = static_cast<c10::DeviceIndex>(k[p++]);
        const auto dtype = static_cast<c10::ScalarType>(k[p++]);
        const size_t ndim = static_cast<size_t>(k[p++]);
        const int64_t tensor_id = id_of(impl), storage_id = stored != 0 ? id_of(data) : 0;
        values.begin_array().value(tensor_id).value(storage_id).value(offset).value(numel).value(itemsize);
        values.value(stored != 0 ? c10::Device(device_type, device_index).str() : std::string()).end_array();
        shapes.begin_array();
        for (size_t i = 0; i < ndim; ++i) shapes.value(k[p + i]);
        shapes.end_array();
        strides.begin_array();
        for (size_t i = 0; i < ndim; ++i) strides.value(k[p + ndim + i]);
        strides.end_array();
        p += 2 * ndim;
        // An undefined tensor's dtype is TypeMeta's uninitialized one, "nullptr (uninitialized)".
        const caffe2::TypeMeta meta = dtype == c10::ScalarType::Undefined ? caffe2::TypeMeta() : c10::scalarTypeToTypeMeta(dtype);
        return "Tensor(" + std::string(meta.name()) + ")";
      }
      case kEtList:
      case kEtTuple: {
        const size_t n = static_cast<size_t>(k[p++]);
        std::string types;
        values.begin_array();
        shapes.begin_array();
        strides.begin_array();
        for (size_t i = 0; i < n; ++i) types += (i > 0 ? "," : "") + value(k, p, values, shapes, strides);
        values.end_array();
        shapes.end_array();
        strides.end_array();
        return (tag == kEtList ? "GenericList[" : "Tuple[") + types + "]";
      }
      default: break;
    }
    shapes.begin_array().end_array();
    strides.begin_array().end_array();
    switch (tag) {
      case kEtInt: values.value(k[p++]); return "Int";
      case kEtBool: values.value(k[p++] != 0); return "Bool";
      case kEtDouble: {
        double d;
        std::memcpy(&d, &k[p++], sizeof d);
        if (std::isfinite(d)) values.raw(std::to_string(d));  // torch: std::to_string, "0.010000"
        else values.value(std::isnan(d) ? "nan" : d > 0 ? "inf" : "-inf");
        return "Double";
      }
      case kEtString: values.value(string_at()); return "String";
      case kEtDevice: {
        const auto type = static_cast<c10::DeviceType>(k[p++]);
        values.value(c10::Device(type, static_cast<c10::DeviceIndex>(k[p++])).str());
        return "Device";
      }
      case kEtOther: {
        const std::string tag_name = string_at();
        values.value("<" + tag_name + ">");
        return tag_name;
      }
      default: values.value("<None>"); return "None";
    }
  }

  void values_of(const ThreadBuffer& b, uint32_t begin, uint32_t end, Values& out) {
    size_t p = begin;
    while (p < end) out.types.value(value(b.et_tokens.data(), p, out.values, out.shapes, out.strides));
  }

  static std::string node_text(int64_t id, const std::string& name, int64_t parent, Values&& inputs, Values&& outputs,
                               const Attrs& a) {
    json::Writer w;
    w.begin_object();
    w.key("id").value(id).key("name").value(name).key("ctrl_deps").value(parent);
    for (const auto& io : {std::pair<const char*, Values*>{"inputs", &inputs}, {"outputs", &outputs}}) {
      Values* v = io.second;
      w.key(io.first).begin_object();
      w.key("values").raw(v->values.end_array().take());
      w.key("shapes").raw(v->shapes.end_array().take());
      w.key("types").raw(v->types.end_array().take());
      w.key("strides").raw(v->strides.end_array().take());
      w.end_object();
    }
    w.key("attrs").begin_array();
    auto attr = [&w](const char* name, const char* type, auto value) {
      w.begin_object().key("name").value(name).key("type").value(type).key("value").value(value).end_object();
    };
    attr("rf_id", "uint64", a.rf_id);
    attr("fw_parent", "uint64", a.fw_parent);
    attr("seq_id", "int64", a.seq_id);
    attr("scope", "uint64", a.scope);
    attr("tid", "uint64", a.tid);
    attr("fw_tid", "uint64", a.fw_tid);
    attr("op_schema", "string", a.op_schema);
    attr("kernel_backend", "string", "");
    attr("kernel_file", "string", "");
    w.end_array();
    w.end_object();
    return w.take();
  }

  // torch's "## process_group:init ##" node: the groups as one JSON string (its Python observer's
  // _get_all_pg_configs: "ranks" empty for a group of the whole world, then group_size and
  // group_count), under the first thread's node, where torch puts it and where Chakra's converter,
  // which walks the threads' nodes, keeps it.
  std::string process_group_init(int64_t thread_node) {
    const std::vector<ProcessGroupConfig> groups = distributed_->groups();
    json::Writer g;
    g.begin_array();
    for (const ProcessGroupConfig& c : groups) {
      g.begin_object().key("pg_name").value(c.pg_name).key("pg_desc").value(c.pg_desc);
      g.key("backend_config").value(c.backend_config).key("ranks").begin_array();
      if (c.pg_size != distributed_->world_size)
        for (int64_t r : c.ranks) g.value(r);
      g.end_array().key("group_size").value(c.pg_size).key("group_count").value(static_cast<int64_t>(groups.size()));
      g.end_object();
    }
    g.end_array();
    Values inputs;
    inputs.values.value(g.take());
    inputs.shapes.begin_array().end_array();
    inputs.types.value("String");
    inputs.strides.begin_array().end_array();
    return node_text(next_id_++, "## process_group:init ##", thread_node, std::move(inputs), Values{},
                     Attrs{0, 0, -1, 7, 0, 0, ""});
  }

  // The first input's element count and dtype, from its encoding (et_values.hpp: a tensor is its
  // tag, impl, stored, data, offset, numel, itemsize, device type and index, dtype, ndim, sizes,
  // strides): a tensor, or the tensors of a list.
  static std::pair<int64_t, std::string> message_of(const int64_t* k, size_t p, size_t end) {
    int64_t total = 0;
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    auto tensor = [k, &total, &dtype](size_t at) {  // returns where the next value begins
      total += k[at + 5];
      dtype = static_cast<c10::ScalarType>(k[at + 9]);
      return at + 11 + 2 * static_cast<size_t>(k[at + 10]);
    };
    if (p < end && k[p] == kEtTensor) {
      tensor(p);
    } else if (p < end && k[p] == kEtList) {
      const size_t n = static_cast<size_t>(k[p + 1]);
      size_t at = p + 2;
      for (size_t i = 0; i < n && at < end && k[at] == kEtTensor; ++i) at = tensor(at);
    }
    return {total, dtype == c10::ScalarType::Undefined ? std::string() : std::string(c10::toString(dtype))};
  }

  // The record_param_comms node torch's backends record inside a collective (NCCL's; gloo records
  // none), under c10d's `gloo:<op>` range: its inputs, and the collective's attributes as torch's
  // observer writes them, computed (collectives.hpp).
  std::string param_comms_node(const ThreadBuffer& b, const Event& e, const std::string& collective, int64_t parent,
                               int64_t tid) {
    const std::optional<ProcessGroupConfig> g = call_group(*distributed_, e.group);
    auto [nelems, dtype] = message_of(b.et_tokens.data(), e.et_inputs_begin, e.et_inputs_end);
    Values inputs;
    values_of(b, e.et_inputs_begin, e.et_inputs_end, inputs);
    std::string text = node_text(next_id_++, "record_param_comms", parent, std::move(inputs), Values{},
                                 Attrs{static_cast<int64_t>(param_comms_rf_id(e.rf_id)), 0, -1, e.scope, tid, 0, ""});
    json::Writer w;
    w.begin_array();
    auto attr = [&w](const char* name, const char* type, auto value) {
      w.begin_object().key("name").value(name).key("type").value(type).key("value").value(value).end_object();
    };
    attr("collective_name", "string", collective);
    attr("dtype", "string", dtype);
    attr("in_msg_nelems", "uint64", nelems);
    attr("out_msg_nelems", "uint64", out_nelems(collective, nelems, g ? g->pg_size : distributed_->world_size));
    attr("in_split_size", "string", "[]");
    attr("out_split_size", "string", "[]");
    if (g) {  // a call whose group is not known gets none of the group's attributes (collectives.hpp)
      attr("global_rank_start", "uint64", g->ranks.empty() ? int64_t{0} : g->ranks.front());
      attr("global_rank_stride", "uint64", rank_stride(g->ranks));
      attr("pg_name", "string", g->pg_name);
      attr("pg_desc", "string", g->pg_desc);
      attr("pg_size", "uint64", g->pg_size);
    }
    // node_text ends with the attrs' "]}": the collective's go before it, without their brackets.
    const std::string list = w.end_array().take();
    text.insert(text.size() - 2, ", " + list.substr(1, list.size() - 2));
    return text;
  }

  void add_thread(const ThreadBuffer& b) {
    const int64_t tid = static_cast<int64_t>(b.rf_thread_id);
    const int64_t thread_node = next_id_++;
    nodes_.push_back(node_text(thread_node, "[pytorch|profiler|execution_trace|thread]", 1, Values{}, Values{},
                               Attrs{0, 0, -1, 7, tid, 0, ""}));
    if (distributed_ && !groups_written_) {
      nodes_.push_back(process_group_init(thread_node));
      groups_written_ = true;
    }
    std::vector<int64_t> ids(b.events.size(), thread_node);  // a range left out: its children go to the thread
    for (size_t i = 0; i < b.events.size(); ++i) {
      const Event& e = b.events[i];
      if (e.end_ns < 0) continue;
      Values inputs, outputs;
      values_of(b, e.et_inputs_begin, e.et_inputs_end, inputs);  // input tensors' ids come before the op's
      ids[i] = next_id_++;
      values_of(b, e.et_outputs_begin, e.et_outputs_end, outputs);
      const int64_t parent = e.parent >= 0 ? ids[static_cast<size_t>(e.parent)] : thread_node;
      // fw_parent: the range open on the forward thread when the autograd node began; known here
      // when that is this thread (libtorch runs CPU backward on the calling thread).
      const int64_t fw_parent = e.fwd_thread_id != 0 && e.fwd_thread_id == b.rf_thread_id ? parent : 0;
      std::string schema;
      if (e.op != nullptr && e.op->live != nullptr) {
        std::ostringstream s;
        s << *e.op->live->schema;
        schema = s.str();
      }
      const std::string name = event_name(b, e);
      nodes_.push_back(node_text(ids[i], name, parent, std::move(inputs), std::move(outputs),
                                 Attrs{static_cast<int64_t>(e.rf_id), fw_parent, e.seq_nr, e.scope, tid,
                                       static_cast<int64_t>(e.fwd_thread_id), std::move(schema)}));
      if (distributed_ && records_param_comms(name))
        nodes_.push_back(param_comms_node(b, e, *collective_name(name), ids[i], tid));
    }
  }

  HeldTarget target_;
  std::string path_;
  int64_t pid_;
  int64_t start_ms_;
  std::string time_;
  int64_t next_id_ = 2;
  std::unordered_map<int64_t, int64_t> object_ids_;
  std::vector<std::string> nodes_;
  std::optional<DistributedInfo> distributed_;
  bool groups_written_ = false;
};

}  // namespace optrace::detail::profiler
