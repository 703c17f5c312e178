// optrace/op_trace.hpp: the hf op-trace data model (OpTrace) and its JSON form; no libtorch needed
#pragma once
// The recorder lives in optrace/op_tracer.hpp; this header is what readers of traces need
// (replay, the Kineto importer, the CLI): the parsed trace, its JSON writer and reader, merge and
// queries. It includes no libtorch header, so translation units that only read traces compile fast.

#include <optrace/detail/io.hpp>
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/json/writer.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace optrace {

class OpTrace;
namespace detail {
class OpTraceFastReader;
}  // namespace detail

/// A tensor's shape, or `std::nullopt` where the argument is not a tensor (JSON `null`).
using OptionalShape = std::optional<std::vector<int64_t>>;

/// A non-tensor argument as the hf op-trace schema stores it in `non_tensor_inputs`:
/// None, bool, int, float (NaN and ±inf included), string, a (nested) list of those, or a
/// reference to an entry of `tensor_lists` (`{"tensor_list_ref": 0}`).
///
/// Values Python writes as strings are strings here too, exactly as the reference tracer's
/// JSON holds them: a `torch.dtype` is `"torch.float16"`, a `torch.device` is `"cpu"` /
/// `"cuda:0"`, a layout `"torch.strided"`, a memory format `"torch.contiguous_format"`, a
/// complex number `"(1+2j)"`. The argument's type string (`input_dtypes`) tells them apart.
///
/// Equality is exact and typed: `1`, `1.0` and `true` differ; NaN equals NaN.
class OpValue {
 public:
  enum class Kind { None, Bool, Int, Float, String, List, TensorListRef };

  /// None.
  OpValue() = default;
  static OpValue none() { return OpValue(); }
  static OpValue boolean(bool b) { return OpValue(Storage(std::in_place_index<1>, b)); }
  static OpValue integer(int64_t i) { return OpValue(Storage(std::in_place_index<2>, i)); }
  static OpValue floating(double d) { return OpValue(Storage(std::in_place_index<3>, d)); }
  static OpValue string(std::string s) { return OpValue(Storage(std::in_place_index<4>, std::move(s))); }
  static OpValue list(std::vector<OpValue> items) { return OpValue(Storage(std::in_place_index<5>, std::move(items))); }
  /// `{"tensor_list_ref": id}`: the tensor list stored under key `std::to_string(id)` in
  /// the unique input's `tensor_lists`.
  static OpValue tensor_list_ref(int64_t id) { return OpValue(Storage(std::in_place_index<6>, Ref{id})); }

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_none() const { return kind() == Kind::None; }

  /// The payload. Each throws ArgumentError when the value is of another kind.
  bool as_bool() const { return get<1>("a bool"); }
  int64_t as_int() const { return get<2>("an int"); }
  double as_float() const { return get<3>("a float"); }
  const std::string& as_string() const { return get<4>("a string"); }
  const std::vector<OpValue>& as_list() const { return get<5>("a list"); }
  int64_t as_tensor_list_ref() const { return get<6>("a tensor list reference").id; }

  friend bool operator==(const OpValue& a, const OpValue& b) {
    if (a.v_.index() != b.v_.index()) return false;
    switch (a.kind()) {
      case Kind::None: return true;
      case Kind::Bool: return std::get<1>(a.v_) == std::get<1>(b.v_);
      case Kind::Int: return std::get<2>(a.v_) == std::get<2>(b.v_);
      case Kind::Float: {
        double x = std::get<3>(a.v_), y = std::get<3>(b.v_);
        return x == y || (std::isnan(x) && std::isnan(y));
      }
      case Kind::String: return std::get<4>(a.v_) == std::get<4>(b.v_);
      case Kind::List: return std::get<5>(a.v_) == std::get<5>(b.v_);
      case Kind::TensorListRef: return std::get<6>(a.v_).id == std::get<6>(b.v_).id;
    }
    return false;
  }
  friend bool operator!=(const OpValue& a, const OpValue& b) { return !(a == b); }

  /// Writes the value as the reference tracer's JSON holds it.
  void write(json::Writer& w) const {
    switch (kind()) {
      case Kind::None: w.null(); break;
      case Kind::Bool: w.value(std::get<1>(v_)); break;
      case Kind::Int: w.value(std::get<2>(v_)); break;
      case Kind::Float: w.value(std::get<3>(v_)); break;
      case Kind::String: w.value(std::get<4>(v_)); break;
      case Kind::List:
        w.begin_array();
        for (const OpValue& item : std::get<5>(v_)) item.write(w);
        w.end_array();
        break;
      case Kind::TensorListRef: w.begin_object().key("tensor_list_ref").value(std::get<6>(v_).id).end_object(); break;
    }
  }

  /// Reads a value written by `write` (or by Python's json). Throws JsonError for objects other
  /// than `{"tensor_list_ref": <int>}` and integers beyond int64.
  static OpValue read(const json::Value& v, int depth = 0) {
    using simdjson::dom::element_type;
    switch (v.element().type()) {
      case element_type::NULL_VALUE: return none();
      case element_type::BOOL: return boolean(v.as_bool());
      case element_type::INT64: return integer(v.as_int());
      case element_type::UINT64: v.fail("expected an integer that fits 64 bits");
      case element_type::DOUBLE: return floating(v.as_double());
      case element_type::STRING:
        if (v.is_number()) return floating(v.as_double());
        return string(std::string(v.as_string()));
      case element_type::ARRAY: {
        if (depth >= json::kMaxValueDepth)
          v.fail("expected lists nested at most " + std::to_string(json::kMaxValueDepth) + " deep");
        std::vector<OpValue> items;
        items.reserve(v.size());
        for (json::Value item : v.array()) items.push_back(read(item, depth + 1));
        return list(std::move(items));
      }
      case element_type::OBJECT: {
        json::Value ref(v);
        if (v.size() != 1 || !v.find("tensor_list_ref", ref))
          v.fail("expected a value or {\"tensor_list_ref\": <int>}");
        return tensor_list_ref(ref.as_int());
      }
    }
    v.fail("expected a value");
  }

  /// A hash consistent with `==`.
  size_t hash() const {
    uint64_t h = (v_.index() + 1) * 0x9E3779B97F4A7C15ull;
    auto mix = [&h](uint64_t x) {
      h = (h ^ x) * 0xff51afd7ed558ccdull;
      h ^= h >> 32;
    };
    switch (kind()) {
      case Kind::None: break;
      case Kind::Bool: mix(std::get<1>(v_)); break;
      case Kind::Int: mix(std::hash<int64_t>()(std::get<2>(v_))); break;
      case Kind::Float: {
        double d = std::get<3>(v_);
        mix(std::isnan(d) ? 0x7ff8ull : std::hash<double>()(d));
        break;
      }
      case Kind::String: mix(std::hash<std::string>()(std::get<4>(v_))); break;
      case Kind::List:
        for (const OpValue& item : std::get<5>(v_)) mix(item.hash());
        break;
      case Kind::TensorListRef: mix(std::hash<int64_t>()(std::get<6>(v_).id)); break;
    }
    return h;
  }

 private:
  struct Ref {
    int64_t id;
  };
  using Storage = std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<OpValue>, Ref>;
  explicit OpValue(Storage v) : v_(std::move(v)) {}

  template <size_t I>
  const std::variant_alternative_t<I, Storage>& get(const char* what) const {
    if (v_.index() != I) detail::raise<ArgumentError>("OpValue is not ", what);
    return std::get<I>(v_);
  }

  Storage v_;
};

/// One tensor list argument, exploded (`tensor_lists["0"]`): shapes and dtype strings of its
/// elements. optrace extension: an element that is None (a `Tensor?[]` list such as
/// `index.Tensor`'s indices) has shape `null` and dtype `"<class 'NoneType'>"`.
struct TensorListInfo {
  std::vector<OptionalShape> shapes;
  std::vector<std::string> dtypes;

  int64_t length() const { return static_cast<int64_t>(shapes.size()); }
  friend bool operator==(const TensorListInfo& a, const TensorListInfo& b) {
    return a.shapes == b.shapes && a.dtypes == b.dtypes;
  }
  friend bool operator!=(const TensorListInfo& a, const TensorListInfo& b) { return !(a == b); }
};

/// A keyword-only argument (extended traces only): what Python passes in `kwargs`, i.e. those
/// not equal to their schema default.
struct OpKwarg {
  std::string name;
  OptionalShape shape;  ///< the tensor's shape; nullopt for a non-tensor
  std::string dtype;    ///< as in `input_dtypes`
  OpValue value;        ///< None for a tensor, as in `non_tensor_inputs`

  friend bool operator==(const OpKwarg& a, const OpKwarg& b) {
    return a.name == b.name && a.shape == b.shape && a.dtype == b.dtype && a.value == b.value;
  }
};

/// One unique input of an op: the positional arguments' shapes, type strings and values, with
/// how many calls had exactly these. The first four vectors are parallel, one entry per
/// positional argument (trailing arguments equal to their schema default are left out).
struct OpInput {
  std::vector<OptionalShape> input_shapes;
  std::vector<std::string> input_dtypes;
  std::vector<OpValue> non_tensor_inputs;
  /// Tensor lists referenced from `non_tensor_inputs`, in order of their ids ("0", "1", ...).
  std::vector<std::pair<std::string, TensorListInfo>> tensor_lists;
  int64_t count = 1;

  /// @name Extended fields (OpTracerOptions::extended); empty when not recorded, and then not
  /// written. Each is parallel to `input_shapes` when present.
  ///@{
  std::vector<OpKwarg> kwargs;                              ///< "kwargs": {name: {"shape", "dtype", "value"}}
  std::vector<OptionalShape> input_strides;                 ///< "input_strides": strides of non-contiguous tensors, else null
  std::vector<std::optional<std::string>> input_devices;    ///< "input_devices": "cpu", "cuda:0"; null for non-tensors
  /// "input_value_ranges": [min, max] of small integer tensors, else null. Not part of the
  /// input's identity: merging widens the range.
  std::vector<std::optional<std::pair<int64_t, int64_t>>> input_value_ranges;
  ///@}

  /// The tensor list with id `ref`, or nullptr.
  const TensorListInfo* tensor_list(int64_t ref) const {
    std::string key = std::to_string(ref);
    for (const auto& [k, list] : tensor_lists)
      if (k == key) return &list;
    return nullptr;
  }

  /// Whether `other` is the same input (everything but `count` and `input_value_ranges`).
  bool same_input(const OpInput& other) const {
    return input_shapes == other.input_shapes && input_dtypes == other.input_dtypes &&
           non_tensor_inputs == other.non_tensor_inputs && tensor_lists == other.tensor_lists &&
           kwargs == other.kwargs && input_strides == other.input_strides && input_devices == other.input_devices;
  }

  /// A hash consistent with `same_input`.
  size_t hash() const {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    auto mix = [&h](uint64_t x) {
      h = (h ^ x) * 0xff51afd7ed558ccdull;
      h ^= h >> 32;
    };
    for (const auto& s : input_shapes) {
      mix(s ? s->size() + 1 : 0);
      if (s)
        for (int64_t d : *s) mix(std::hash<int64_t>()(d));
    }
    for (const auto& d : input_dtypes) mix(std::hash<std::string>()(d));
    for (const auto& v : non_tensor_inputs) mix(v.hash());
    mix(tensor_lists.size());
    for (const auto& [k, l] : tensor_lists)
      for (const auto& s : l.shapes)
        if (s)
          for (int64_t d : *s) mix(std::hash<int64_t>()(d));
    mix(kwargs.size());
    return h;
  }

  /// Exact equality, count and value ranges included.
  friend bool operator==(const OpInput& a, const OpInput& b) {
    return a.count == b.count && a.input_value_ranges == b.input_value_ranges && a.same_input(b);
  }
  friend bool operator!=(const OpInput& a, const OpInput& b) { return !(a == b); }
};

/// Everything recorded for one op (`"addmm.default"`).
struct OpEntry {
  std::string name;
  /// In first-seen order. The JSON lists them by count, descending, ties in first-seen order
  /// (`by_count()`).
  std::vector<OpInput> unique_inputs;
  /// Calls not kept because the tracer's bound on unique inputs was reached
  /// (OpTracerOptions::max_unique_inputs). Written as part of `total_calls`.
  int64_t dropped_calls = 0;

  /// Calls of this op: the counts' sum plus `dropped_calls` (the JSON's `total_calls`).
  int64_t total_calls() const {
    int64_t n = dropped_calls;
    for (const OpInput& in : unique_inputs) n += in.count;
    return n;
  }
  /// The unique inputs in the JSON's order: count descending, ties in first-seen order.
  std::vector<const OpInput*> by_count() const {
    std::vector<const OpInput*> out;
    out.reserve(unique_inputs.size());
    for (const OpInput& in : unique_inputs) out.push_back(&in);
    std::stable_sort(out.begin(), out.end(), [](const OpInput* a, const OpInput* b) { return a->count > b->count; });
    return out;
  }

  friend bool operator==(const OpEntry& a, const OpEntry& b) {
    return a.name == b.name && a.dropped_calls == b.dropped_calls && a.unique_inputs == b.unique_inputs;
  }
  friend bool operator!=(const OpEntry& a, const OpEntry& b) { return !(a == b); }
};

/// An op trace in the hf op-trace schema (`hf_op_trace.json`): ops in first-seen order, each
/// with its unique inputs and their counts. Made by `OpTracer::trace()`, `OpTrace::load`, or
/// built with `add`; merged with `merge`.
///
/// Example:
///   optrace::OpTrace trace = optrace::OpTrace::load("hf_op_trace.json");
///   for (const optrace::OpEntry& op : trace.ops())
///     std::cout << op.name << ": " << op.total_calls() << " calls\n";
///   trace.merge(optrace::OpTrace::load("rank1.json")).save("merged.json");
class OpTrace {
 public:
  /// The ops, in first-seen order.
  const std::vector<OpEntry>& ops() const { return ops_; }
  /// The op named `name` (`"addmm.default"`), or nullptr.
  const OpEntry* find(std::string_view name) const {
    auto it = index_.find(std::string(name));
    return it == index_.end() ? nullptr : &ops_[it->second];
  }
  /// The op names, in first-seen order.
  std::vector<std::string> op_names() const {
    std::vector<std::string> out;
    for (const OpEntry& e : ops_) out.push_back(e.name);
    return out;
  }
  /// Number of ops.
  size_t size() const { return ops_.size(); }
  bool empty() const { return ops_.empty(); }
  /// Calls of all ops (dropped ones included).
  int64_t total_calls() const {
    int64_t n = 0;
    for (const OpEntry& e : ops_) n += e.total_calls();
    return n;
  }
  /// Calls of op `name`; 0 if it is not in the trace.
  int64_t total_calls(std::string_view name) const {
    const OpEntry* e = find(name);
    return e ? e->total_calls() : 0;
  }
  /// Unique inputs of all ops.
  int64_t unique_input_count() const {
    int64_t n = 0;
    for (const OpEntry& e : ops_) n += static_cast<int64_t>(e.unique_inputs.size());
    return n;
  }
  /// Calls not kept because of the tracer's bound on unique inputs, over all ops.
  int64_t dropped_calls() const {
    int64_t n = 0;
    for (const OpEntry& e : ops_) n += e.dropped_calls;
    return n;
  }

  /// Adds `input.count` calls of op `name` with `input`: its count grows if the op already has
  /// this input (`OpInput::same_input`; value ranges widen), else it is appended. A new op goes
  /// last. Throws ArgumentError if `input.count` < 1, the parallel vectors differ in length, or
  /// the trace's calls would add up to more than INT64_MAX.
  OpTrace& add(std::string_view name, OpInput input) {
    OPTRACE_CHECK(input.count >= 1, ArgumentError, "OpTrace::add: count must be at least 1, got ", input.count);
    check_parallel(input, name);
    const int64_t calls = add_calls(name, input.count);
    Slot& slot = slot_for(name);
    OpEntry& entry = ops_[slot.op];
    size_t h = input.hash();
    auto range = slot.inputs.equal_range(h);
    for (auto it = range.first; it != range.second; ++it) {
      OpInput& existing = entry.unique_inputs[it->second];
      if (existing.same_input(input)) {
        existing.count += input.count;  // <= calls, which fits
        calls_ = calls;
        widen(existing.input_value_ranges, input.input_value_ranges);
        return *this;
      }
    }
    slot.inputs.emplace(h, entry.unique_inputs.size());
    entry.unique_inputs.push_back(std::move(input));
    calls_ = calls;
    return *this;
  }
  /// Counts `n` dropped calls of op `name` (adding the op if new). Throws ArgumentError if
  /// `n` < 0 or the trace's calls would add up to more than INT64_MAX.
  OpTrace& add_dropped(std::string_view name, int64_t n) {
    OPTRACE_CHECK(n >= 0, ArgumentError, "OpTrace::add_dropped('", name, "'): n must be >= 0, got ", n);
    const int64_t calls = add_calls(name, n);
    ops_[slot_for(name).op].dropped_calls += n;
    calls_ = calls;
    return *this;
  }

  /// Adds every op and input of `other`: counts of equal inputs add, new ops and inputs go after
  /// the existing ones in `other`'s order. Traces from many processes or ranks become one.
  OpTrace& merge(const OpTrace& other) {
    for (const OpEntry& e : other.ops_) {
      for (const OpInput& in : e.unique_inputs) add(e.name, in);
      if (e.dropped_calls) add_dropped(e.name, e.dropped_calls);
      if (e.unique_inputs.empty()) slot_for(e.name);
    }
    return *this;
  }

  /// The trace as JSON in the hf op-trace schema, pretty-printed with `indent` spaces as the
  /// reference tracer writes it (0: one line).
  std::string to_json(int indent = 1) const {
    json::Writer w(indent);
    w.begin_object();
    for (const OpEntry& e : ops_) {
      w.key(e.name).begin_object();
      w.key("total_calls").value(e.total_calls());
      w.key("unique_input_count").value(static_cast<int64_t>(e.unique_inputs.size()));
      w.key("unique_inputs").begin_array();
      for (const OpInput* in : e.by_count()) write_input(w, e.name, *in);
      w.end_array();
      w.end_object();
    }
    w.end_object();
    return w.take();
  }
  /// Writes `to_json(indent)` to `path` atomically. Throws IoError.
  void save(const std::string& path, int indent = 1) const { detail::write_file_atomic(path, to_json(indent)); }

  /// Parses a trace in the hf op-trace schema (Python's `NaN`, `Infinity`, `-Infinity`
  /// accepted; optrace's extended keys read when present, unknown keys ignored).
  /// `total_calls` beyond the counts' sum is read as dropped calls.
  /// Throws JsonError naming the JSON path and the bad value, e.g.
  /// `optrace: JsonError at /convolution.default/unique_inputs/3/input_shapes/0: expected a list of integers, got string "abc"`.
  static OpTrace from_json(std::string_view text);
  /// Reads and parses the file at `path`. Throws IoError if it cannot be read, JsonError as `from_json`.
  static OpTrace load(const std::string& path);
  /// Builds a trace from a parsed document (see `from_json`).
  static OpTrace from_document(const json::Document& doc) {
    OpTrace trace;
    for (auto [name, entry_value] : doc.root().object()) {
      if (trace.find(name) != nullptr) entry_value.fail_plain("duplicate op \"" + std::string(name) + "\"");
      OpEntry& entry = trace.ops_[trace.slot_for(name, /*index=*/false).op];
      json::Value inputs = entry_value["unique_inputs"];
      json::Value total = entry_value["total_calls"];
      int64_t total_calls = total.as_int();
      entry_value["unique_input_count"].as_int();
      entry.unique_inputs.reserve(inputs.size());
      int64_t sum = 0;
      for (json::Value in : inputs.array()) {
        entry.unique_inputs.push_back(read_input(in, name));
        // Counts are >= 1, so a sum that fits int64 keeps every later total in range.
        if (__builtin_add_overflow(sum, entry.unique_inputs.back().count, &sum))
          in["count"].fail_plain("the counts add up to more than " + std::to_string(INT64_MAX) + " calls");
      }
      if (total_calls < sum)
        total.fail_plain("total_calls " + std::to_string(total_calls) + " is less than the counts' sum " + std::to_string(sum));
      if (__builtin_add_overflow(trace.calls_, total_calls, &trace.calls_))
        total.fail_plain("the trace's calls add up to more than " + std::to_string(INT64_MAX));
      entry.dropped_calls = total_calls - sum;
    }
    return trace;
  }

  /// Same ops in the same order with the same inputs in the same order and counts.
  friend bool operator==(const OpTrace& a, const OpTrace& b) { return a.ops_ == b.ops_; }
  friend bool operator!=(const OpTrace& a, const OpTrace& b) { return !(a == b); }

 private:
  friend class detail::OpTraceFastReader;

  struct Slot {
    size_t op;
    bool indexed = false;
    std::unordered_multimap<size_t, size_t> inputs;  // OpInput::hash -> position
  };

  // The op's slot, added if new. `index` false (the reader) defers indexing its inputs to the
  // first `add`.
  Slot& slot_for(std::string_view name, bool index = true) {
    std::string key(name);
    auto it = index_.find(key);
    if (it == index_.end()) {
      it = index_.emplace(key, ops_.size()).first;
      ops_.push_back(OpEntry{key, {}, 0});
      slots_.push_back(Slot{it->second, false, {}});
    }
    Slot& slot = slots_[it->second];
    if (index && !slot.indexed) {  // read from JSON: index on first add
      const auto& inputs = ops_[slot.op].unique_inputs;
      for (size_t i = 0; i < inputs.size(); ++i) slot.inputs.emplace(inputs[i].hash(), i);
      slot.indexed = true;
    }
    return slot;
  }

  // The trace's calls after adding `n` to them; throws ArgumentError beyond INT64_MAX (a merge of
  // huge counts), so that no total (op or trace) can overflow.
  int64_t add_calls(std::string_view name, int64_t n) const {
    int64_t calls;
    OPTRACE_CHECK(!__builtin_add_overflow(calls_, n, &calls), ArgumentError, "OpTrace::add('", name, "'): the trace's calls would add up to more than ",
                  INT64_MAX);
    return calls;
  }

  static void widen(std::vector<std::optional<std::pair<int64_t, int64_t>>>& into,
                    const std::vector<std::optional<std::pair<int64_t, int64_t>>>& from) {
    if (into.empty()) { into = from; return; }
    for (size_t i = 0; i < into.size() && i < from.size(); ++i) {
      if (!from[i]) continue;
      if (!into[i]) { into[i] = from[i]; continue; }
      into[i]->first = std::min(into[i]->first, from[i]->first);
      into[i]->second = std::max(into[i]->second, from[i]->second);
    }
  }

  static void check_parallel(const OpInput& in, std::string_view name) {
    size_t n = in.input_shapes.size();
    OPTRACE_CHECK(in.input_dtypes.size() == n && in.non_tensor_inputs.size() == n, ArgumentError, "OpTrace::add('", name,
                  "'): input_shapes, input_dtypes and non_tensor_inputs must have one entry per argument, got ", n, ", ",
                  in.input_dtypes.size(), " and ", in.non_tensor_inputs.size());
    auto ok = [n](size_t m) { return m == 0 || m == n; };
    OPTRACE_CHECK(ok(in.input_strides.size()) && ok(in.input_devices.size()) && ok(in.input_value_ranges.size()),
                  ArgumentError, "OpTrace::add('", name, "'): input_strides, input_devices and input_value_ranges must be empty or have ", n,
                  " entries");
  }

  static void write_shape(json::Writer& w, const OptionalShape& s) {
    if (!s) { w.null(); return; }
    w.begin_array();
    for (int64_t d : *s) w.value(d);
    w.end_array();
  }

  static void write_input(json::Writer& w, const std::string& name, const OpInput& in) {
    w.begin_object();
    w.key("op_name").value(name);
    w.key("input_shapes").begin_array();
    for (const auto& s : in.input_shapes) write_shape(w, s);
    w.end_array();
    w.key("input_dtypes").begin_array();
    for (const auto& d : in.input_dtypes) w.value(d);
    w.end_array();
    w.key("non_tensor_inputs").begin_array();
    for (const auto& v : in.non_tensor_inputs) v.write(w);
    w.end_array();
    w.key("tensor_lists").begin_object();
    for (const auto& [id, list] : in.tensor_lists) {
      w.key(id).begin_object();
      w.key("length").value(list.length());
      w.key("shapes").begin_array();
      for (const auto& s : list.shapes) write_shape(w, s);
      w.end_array();
      w.key("dtypes").begin_array();
      for (const auto& d : list.dtypes) w.value(d);
      w.end_array();
      w.end_object();
    }
    w.end_object();
    w.key("count").value(in.count);
    if (!in.kwargs.empty()) {
      w.key("kwargs").begin_object();
      for (const OpKwarg& k : in.kwargs) {
        w.key(k.name).begin_object();
        w.key("shape");
        write_shape(w, k.shape);
        w.key("dtype").value(k.dtype);
        w.key("value");
        k.value.write(w);
        w.end_object();
      }
      w.end_object();
    }
    if (!in.input_strides.empty()) {
      w.key("input_strides").begin_array();
      for (const auto& s : in.input_strides) write_shape(w, s);
      w.end_array();
    }
    if (!in.input_devices.empty()) {
      w.key("input_devices").begin_array();
      for (const auto& d : in.input_devices) d ? (void)w.value(*d) : (void)w.null();
      w.end_array();
    }
    if (!in.input_value_ranges.empty()) {
      w.key("input_value_ranges").begin_array();
      for (const auto& r : in.input_value_ranges) {
        if (r) w.begin_array().value(r->first).value(r->second).end_array();
        else w.null();
      }
      w.end_array();
    }
    w.end_object();
  }

  static OptionalShape read_shape(const json::Value& v) {
    if (v.is_null()) return std::nullopt;
    return v.as_int_list();
  }

  static std::vector<std::string> read_strings(const json::Value& v) {
    std::vector<std::string> out;
    out.reserve(v.size());
    for (json::Value s : v.array()) out.emplace_back(s.as_string());
    return out;
  }

  static std::vector<OptionalShape> read_shapes(const json::Value& v) {
    std::vector<OptionalShape> out;
    out.reserve(v.size());
    for (json::Value s : v.array()) out.push_back(read_shape(s));
    return out;
  }

  // The members of a unique input, in the order the writer puts them.
  enum InputKey { kOpName, kInputShapes, kInputDtypes, kNonTensorInputs, kTensorLists, kCount, kKwargs, kInputStrides,
                  kInputDevices, kInputValueRanges, kInputKeyCount };

  // Finds the members of the unique input `v` in one pass over it: looking each key up would scan
  // the object once per key, absent optional keys included. Each key is tried first where the
  // writer's order puts it, so a file optrace or the reference tracer wrote matches at the first
  // compare. The first of duplicate keys wins, as with `operator[]`; unknown keys are ignored.
  static void find_input_keys(const json::Value& v, std::optional<json::Value> (&found)[kInputKeyCount]) {
    static constexpr std::string_view names[kInputKeyCount] = {
        "op_name", "input_shapes", "input_dtypes", "non_tensor_inputs", "tensor_lists",
        "count",   "kwargs",       "input_strides", "input_devices",   "input_value_ranges"};
    int next = 0;
    for (auto [key, member] : v.object()) {
      for (int k = 0; k < kInputKeyCount; ++k) {
        int i = (next + k) % kInputKeyCount;
        if (key != names[i]) continue;
        if (!found[i]) found[i] = member;
        next = i + 1;
        break;
      }
    }
  }

  static OpInput read_input(const json::Value& v, std::string_view name) {
    std::optional<json::Value> found[kInputKeyCount];
    find_input_keys(v, found);
    auto required = [&](InputKey k, const char* key) -> const json::Value& {
      if (!found[k]) v.fail_plain("missing key \"" + std::string(key) + "\"");
      return *found[k];
    };
    OpInput in;
    const json::Value& op_name = required(kOpName, "op_name");
    if (op_name.as_string() != name) op_name.fail("expected \"" + std::string(name) + "\" (the op's key)");
    in.input_shapes = read_shapes(required(kInputShapes, "input_shapes"));
    in.input_dtypes = read_strings(required(kInputDtypes, "input_dtypes"));
    const json::Value& values = required(kNonTensorInputs, "non_tensor_inputs");
    in.non_tensor_inputs.reserve(values.size());
    for (json::Value x : values.array()) in.non_tensor_inputs.push_back(OpValue::read(x));
    size_t n = in.input_shapes.size();
    if (in.input_dtypes.size() != n || in.non_tensor_inputs.size() != n)
      v.fail_plain("input_shapes, input_dtypes and non_tensor_inputs differ in length (" + std::to_string(n) + ", " +
                   std::to_string(in.input_dtypes.size()) + ", " + std::to_string(in.non_tensor_inputs.size()) + ")");
    for (auto [id, list_value] : required(kTensorLists, "tensor_lists").object()) {
      TensorListInfo list;
      json::Value length = list_value["length"];
      list.shapes = read_shapes(list_value["shapes"]);
      list.dtypes = read_strings(list_value["dtypes"]);
      if (length.as_int() != list.length() || list.dtypes.size() != list.shapes.size())
        length.fail("expected the number of shapes and dtypes (" + std::to_string(list.shapes.size()) + ", " +
                    std::to_string(list.dtypes.size()) + ")");
      in.tensor_lists.emplace_back(std::string(id), std::move(list));
    }
    const json::Value& count = required(kCount, "count");
    in.count = count.as_int();
    if (in.count < 1) count.fail("expected a count of at least 1");
    if (found[kKwargs]) {
      for (auto [key, k] : found[kKwargs]->object()) {
        OpKwarg kw;
        kw.name = std::string(key);
        kw.shape = read_shape(k["shape"]);
        kw.dtype = std::string(k["dtype"].as_string());
        kw.value = OpValue::read(k["value"]);
        in.kwargs.push_back(std::move(kw));
      }
    }
    auto check_length = [n](const json::Value& list, size_t m) {
      if (m != n) list.fail("expected a list of " + std::to_string(n) + " (one per argument)");
    };
    if (const auto& extra = found[kInputStrides]) {
      in.input_strides = read_shapes(*extra);
      check_length(*extra, in.input_strides.size());
    }
    if (const auto& extra = found[kInputDevices]) {
      for (json::Value d : extra->array()) in.input_devices.push_back(d.is_null() ? std::nullopt : std::optional<std::string>(d.as_string()));
      check_length(*extra, in.input_devices.size());
    }
    if (const auto& extra = found[kInputValueRanges]) {
      for (json::Value r : extra->array()) {
        if (r.is_null()) { in.input_value_ranges.emplace_back(); continue; }
        std::vector<int64_t> mm = r.as_int_list();
        if (mm.size() != 2) r.fail("expected [min, max]");
        in.input_value_ranges.emplace_back(std::make_pair(mm[0], mm[1]));
      }
      check_length(*extra, in.input_value_ranges.size());
    }
    return in;
  }

  std::vector<OpEntry> ops_;
  std::vector<Slot> slots_;
  std::unordered_map<std::string, size_t> index_;
  int64_t calls_ = 0;  // total_calls(), kept to refuse additions that would overflow it
};

}  // namespace optrace

// The fast reader behind `load` and `from_json`, and their definitions.
#include <optrace/detail/op_trace_fast_reader.hpp>
