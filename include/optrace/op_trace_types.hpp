// optrace/op_trace_types.hpp: what an op trace is made of: values, unique inputs, per-op entries
#pragma once
// The hf op-trace schema's vocabulary (OpValue, OpInput, OpEntry), apart from the trace itself
// (op_trace.hpp) so that the readers and writers in detail/op_trace/ can build it. No libtorch.

#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/json/writer.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace optrace {

namespace detail {

/// Contiguous strides for `sizes` (what a freshly allocated tensor has). Saturates at INT64_MAX
/// for sizes no tensor can have (read from a file).
inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t running = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = running;
    if (__builtin_mul_overflow(running, sizes[i] > 1 ? sizes[i] : 1, &running)) running = INT64_MAX;
  }
  return strides;
}

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
  static OpValue read(const json::Node& v, int depth = 0) {
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
        for (json::Node item : v.array()) items.push_back(read(item, depth + 1));
        return list(std::move(items));
      }
      case element_type::OBJECT: {
        json::Node ref(v);
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
  /// Extended (optrace's "strides" key): the elements' strides where not contiguous, else
  /// nullopt; empty when none is (or they were not recorded), else parallel to `shapes`.
  std::vector<OptionalShape> strides;

  int64_t length() const { return static_cast<int64_t>(shapes.size()); }
  friend bool operator==(const TensorListInfo& a, const TensorListInfo& b) {
    return a.shapes == b.shapes && a.dtypes == b.dtypes && a.strides == b.strides;
  }
  friend bool operator!=(const TensorListInfo& a, const TensorListInfo& b) { return !(a == b); }
};

/// A keyword-only argument (extended traces only): what Python passes in `kwargs`, i.e. those
/// not equal to their schema default.
struct OpKwarg {
  std::string name;
  OptionalShape shape;    ///< the tensor's shape; nullopt for a non-tensor
  std::string dtype;      ///< as in `input_dtypes`
  OpValue value;          ///< None for a tensor, as in `non_tensor_inputs`
  OptionalShape strides;  ///< a non-contiguous tensor's strides, else nullopt ("strides")

  friend bool operator==(const OpKwarg& a, const OpKwarg& b) {
    return a.name == b.name && a.shape == b.shape && a.dtype == b.dtype && a.value == b.value && a.strides == b.strides;
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

  /// Adds `list` to `tensor_lists` under the next id ("0", "1", ...) and returns the value that
  /// refers to it (`{"tensor_list_ref": id}`), for `non_tensor_inputs` or a keyword argument.
  OpValue add_tensor_list(TensorListInfo list) {
    const int64_t id = static_cast<int64_t>(tensor_lists.size());
    tensor_lists.emplace_back(std::to_string(id), std::move(list));
    return OpValue::tensor_list_ref(id);
  }

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

/// A dtype string that no torch names, as `OpTrace::unknown_dtypes` finds it.
struct UnknownDtype {
  std::string dtype;             ///< as read: "torch.float99"
  int64_t unique_inputs = 0;     ///< unique inputs that name it
  int64_t calls = 0;             ///< their calls
  std::vector<std::string> ops;  ///< the ops that have them, in the trace's order

  /// "torch.float99 (2 unique inputs, 5 calls: add.Tensor, mul.Tensor)", at most five ops named.
  std::string to_string() const {
    std::string out = dtype + " (" + std::to_string(unique_inputs) + (unique_inputs == 1 ? " unique input, " : " unique inputs, ") +
                      std::to_string(calls) + (calls == 1 ? " call: " : " calls: ");
    for (size_t k = 0; k < ops.size() && k < 5; ++k) out += (k ? ", " : "") + ops[k];
    if (ops.size() > 5) out += ", and " + std::to_string(ops.size() - 5) + " more ops";
    return out + ")";
  }
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

}  // namespace optrace
