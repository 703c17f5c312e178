// optrace/value.hpp: the recorded value tree, and how C++ arguments become one
#pragma once

#include <optrace/detail/common/compat.hpp>
#include <optrace/detail/common/string_map.hpp>
#include <optrace/error.hpp>
#include <optrace/python_names.hpp>
#include <optrace/tensor_spec.hpp>

#include <ATen/core/ivalue.h>
#include <torch/ordered_dict.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optrace {

/// One recorded argument: a tensor (its spec, and its data when the call was stored), a
/// scalar, None, or a container of values. Structs recorded through OPTRACE_FIELDS keep their
/// type and field names.
struct Value {
  enum class Kind : uint8_t { None, Tensor, Int, Double, Bool, String, List, Tuple, Dict, Struct };

  Kind kind = Kind::None;
  TensorSpec spec;                ///< Tensor
  at::Tensor data;                ///< Tensor: a detached copy for stored calls, else undefined
  int64_t int_value = 0;          ///< Int
  double double_value = 0;        ///< Double
  bool bool_value = false;        ///< Bool
  std::string text;               ///< String: the string; Struct: the type's name
  std::vector<Value> items;       ///< List, Tuple; the values of a Dict or the fields of a Struct
  std::vector<std::string> keys;  ///< Dict keys, Struct field names (same order as items)

  bool is_tensor() const { return kind == Kind::Tensor; }
  bool is_none() const { return kind == Kind::None; }
  bool is_container() const { return kind >= Kind::List; }
  bool is_keyed() const { return kind == Kind::Dict || kind == Kind::Struct; }

  static Value none() { return Value(); }
  static Value tensor(const at::Tensor& t, bool keep_data) {
    Value v;
    v.kind = Kind::Tensor;
    v.spec = TensorSpec::of(t);
    if (keep_data) v.data = t.detach().clone();
    return v;
  }

  /// Number of tensor leaves below this value (None leaves do not count).
  int64_t num_tensors() const {
    if (kind == Kind::Tensor) return 1;
    int64_t n = 0;
    for (const Value& item : items) n += item.num_tensors();
    return n;
  }

  /// The value under `key` of a Dict or Struct, or nullptr. `hint`: where the key likely is
  /// (its index among the arguments of the calls' template): looked at first, then the keys
  /// before it (a call that omits some), then those after. A call's arguments looked up in their
  /// order cost O(1) each, not a scan: a call of 30,000 arguments is not 30,000 squared. (A
  /// Value's keys are distinct: a JSON object with a key twice is refused when read.)
  const Value* find(std::string_view key, size_t hint = 0) const {
    if (keys.empty()) return nullptr;
    const size_t start = std::min(hint, keys.size() - 1);
    for (size_t k = start + 1; k-- > 0;)
      if (keys[k] == key) return &items[k];
    for (size_t k = start + 1; k < keys.size(); ++k)
      if (keys[k] == key) return &items[k];
    return nullptr;
  }

  /// Same structure, specs and scalars (tensor data is not compared).
  friend bool operator==(const Value& a, const Value& b) {
    if (a.kind != b.kind) return false;
    switch (a.kind) {
      case Kind::None: return true;
      case Kind::Tensor: return a.spec == b.spec;
      case Kind::Int: return a.int_value == b.int_value;
      case Kind::Double: return a.double_value == b.double_value || (a.double_value != a.double_value && b.double_value != b.double_value);
      case Kind::Bool: return a.bool_value == b.bool_value;
      case Kind::String: return a.text == b.text;
      default: return a.text == b.text && a.keys == b.keys && a.items == b.items;
    }
  }
  friend bool operator!=(const Value& a, const Value& b) { return !(a == b); }
};

/// A hash of what `operator==` compares (equal values hash alike: every NaN alike, -0.0 as 0.0),
/// of part of it only (a tensor's dtype and sizes): to find equal values among many in linear
/// time, each candidate confirmed by `==`.
inline size_t hash_value(const Value& v) {
  // The foundation's mixer (string_map.hpp), its operands offset so that a zero mixes too.
  auto mix = [](uint64_t h, uint64_t x) { return detail::hash_mix(h ^ 0xa0761d6478bd642full, x ^ 0xe7037ed1a0b428dbull); };
  uint64_t h = mix(0, static_cast<uint64_t>(v.kind));
  switch (v.kind) {
    case Value::Kind::None: return h;
    case Value::Kind::Tensor:
      h = mix(h, static_cast<uint64_t>(v.spec.dtype));
      for (int64_t s : v.spec.sizes) h = mix(h, static_cast<uint64_t>(s));
      return h;
    case Value::Kind::Int: return mix(h, static_cast<uint64_t>(v.int_value));
    case Value::Kind::Double: {
      const double d = v.double_value;
      if (d != d) return mix(h, 1);   // NaN: every NaN is equal to every other
      if (d == 0) return mix(h, 0);   // -0.0 == 0.0
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      return mix(h, bits);
    }
    case Value::Kind::Bool: return mix(h, v.bool_value);
    case Value::Kind::String: return detail::hash_mix_bytes(v.text, h);
    default:
      h = detail::hash_mix_bytes(v.text, h);
      for (const std::string& k : v.keys) h = detail::hash_mix_bytes(k, h);
      for (const Value& item : v.items) h = mix(h, hash_value(item));
      return h;
  }
}

/// A representative set of export arguments: positional `args`, or keyword `kwargs` in
/// argument order (`torch.export.export(model, tuple(args), kwargs=dict(kwargs))`).
struct Arguments {
  std::vector<c10::IValue> args;
  torch::OrderedDict<std::string, c10::IValue> kwargs{"argument"};

  /// Shapes and values, e.g. `(float32[2, 6], float32[2, 6])` or `dict(x: float32[2, 8])`.
  std::string describe() const;
};

/// How `infer_arguments` picks the call it returns (InputObserver and Observations).
struct InferArgumentsOptions {
  /// Use the stored call at this index (0-based, in recording order). Default: -1, the first
  /// stored call that has every argument (optional ones filled by value_if_missing count).
  InferArgumentsOptions& call_index(int64_t index) {
    call_index_ = index;
    return *this;
  }
  /// Pick the first stored call whose dynamic dims are all >= 2, which torch.export does not
  /// specialize. Throws ShapeError when no stored call qualifies. Default: false.
  InferArgumentsOptions& export_safe(bool on = true) {
    export_safe_ = on;
    return *this;
  }
  int64_t call_index() const { return call_index_; }
  bool export_safe() const { return export_safe_; }

 private:
  int64_t call_index_ = -1;
  bool export_safe_ = false;
};

/// A short human-readable form: `float32[2, 10]`, `int 3`, `dict(x: float32[2], y: None)`.
std::string describe(const Value& v);

/// Writes `describe(v)`: `float32[2, 6]`, `(float32[2, 6], 3)`.
inline std::ostream& operator<<(std::ostream& out, const Value& v) { return out << describe(v); }
/// Writes `a.describe()`: `std::cout << observer.infer_arguments() << "\n";`.
inline std::ostream& operator<<(std::ostream& out, const Arguments& a) { return out << a.describe(); }

// ---------------------------------------------------------------------------------------------
// The customization point: how an argument of type T is walked.
//
// A visitor V receives, depth first:
//   v.tensor(const at::Tensor&)  v.none()  v.integer(int64_t)  v.floating(double)
//   v.boolean(bool)  v.string(std::string_view)
//   v.begin(Value::Kind container, size_t size, std::string_view struct_name)  v.key(name)  v.end()
// (`key` comes before each item of a Dict or Struct.)
// ---------------------------------------------------------------------------------------------

namespace detail {
template <class T>
inline constexpr bool always_false = false;

template <class T, class = void>
struct has_adl_fields : std::false_type {};
struct NullVisitor;
}  // namespace detail

/// Specialize `optrace::Record<T>` to teach optrace an argument type:
/// ```
/// template <> struct optrace::Record<MyType> {
///   template <class V> static void visit(const MyType& x, V& v) { ... }
/// };
/// ```
/// For a plain struct, OPTRACE_FIELDS(MyType, field1, field2, ...) writes it for you.
template <class T, class Enable = void>
struct Record {
  using unsupported = void;  // lets optrace tell recordable types apart (is_recordable)
  template <class V>
  static void visit(const T&, V&) {
    static_assert(detail::always_false<T>,
                  "optrace cannot record arguments of this type: describe its fields with "
                  "OPTRACE_FIELDS(Type, field1, field2, ...) in the type's namespace, or "
                  "specialize optrace::Record<Type>");
  }
};

/// Whether optrace can record arguments of type `T`: true when `Record<T>` is specialized (by
/// optrace for tensors, scalars, strings, optionals, containers and IValues; by OPTRACE_FIELDS or
/// by hand for other types). A container is recordable whatever its elements are; recording
/// one of unrecordable elements fails to compile with the static_assert above.
template <class T, class = void>
struct is_recordable : std::true_type {};
template <class T>
struct is_recordable<T, std::void_t<typename Record<T>::unsupported>> : std::false_type {};
template <class T>
inline constexpr bool is_recordable_v = is_recordable<T>::value;

/// Walks `x` with visitor `v` through `Record<T>`.
template <class T, class V>
void visit_value(const T& x, V& v) {
  Record<std::decay_t<T>>::visit(x, v);
}

template <>
struct Record<at::Tensor> {
  template <class V>
  static void visit(const at::Tensor& t, V& v) {
    if (t.defined()) v.tensor(t);
    else v.none();
  }
};

template <class T>
struct Record<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  template <class V>
  static void visit(T x, V& v) { v.integer(static_cast<int64_t>(x)); }
};
template <class T>
struct Record<T, std::enable_if_t<std::is_floating_point_v<T>>> {
  template <class V>
  static void visit(T x, V& v) { v.floating(static_cast<double>(x)); }
};
template <>
struct Record<bool> {
  template <class V>
  static void visit(bool x, V& v) { v.boolean(x); }
};
template <>
struct Record<std::string> {
  template <class V>
  static void visit(const std::string& x, V& v) { v.string(x); }
};
template <>
struct Record<std::string_view> {
  template <class V>
  static void visit(std::string_view x, V& v) { v.string(x); }
};
template <>
struct Record<const char*> {
  template <class V>
  static void visit(const char* x, V& v) { v.string(x); }
};
template <>
struct Record<char*> {
  template <class V>
  static void visit(const char* x, V& v) { v.string(x); }
};
template <size_t N>
struct Record<char[N]> {
  template <class V>
  static void visit(const char* x, V& v) { v.string(x); }
};
template <>
struct Record<std::nullptr_t> {
  template <class V>
  static void visit(std::nullptr_t, V& v) { v.none(); }
};
template <>
struct Record<std::nullopt_t> {
  template <class V>
  static void visit(std::nullopt_t, V& v) { v.none(); }
};
/// c10::nullopt: std::nullopt in libtorch 2.x, a type of its own in 1.13; None either way.
template <class T>
struct Record<T, std::enable_if_t<std::is_same_v<T, std::decay_t<decltype(c10::nullopt)>> &&
                                  !std::is_same_v<T, std::nullopt_t>>> {
  template <class V>
  static void visit(const T&, V& v) { v.none(); }
};

/// std::optional (and c10::optional): nullopt is None, which counts as a missing input.
template <class T>
struct Record<T, std::enable_if_t<detail::is_optional<T>::value>> {
  template <class V>
  static void visit(const T& x, V& v) {
    if (x.has_value()) visit_value(*x, v);
    else v.none();
  }
};

template <class T, class A>
struct Record<std::vector<T, A>> {
  template <class V>
  static void visit(const std::vector<T, A>& xs, V& v) {
    v.begin(Value::Kind::List, xs.size(), {});
    for (const T& x : xs) visit_value(x, v);
    v.end();
  }
};
template <class T>
struct Record<c10::ArrayRef<T>> {
  template <class V>
  static void visit(const c10::ArrayRef<T>& xs, V& v) {
    v.begin(Value::Kind::List, xs.size(), {});
    for (const T& x : xs) visit_value(x, v);
    v.end();
  }
};

template <class... Ts>
struct Record<std::tuple<Ts...>> {
  template <class V>
  static void visit(const std::tuple<Ts...>& xs, V& v) {
    v.begin(Value::Kind::Tuple, sizeof...(Ts), {});
    std::apply([&v](const auto&... x) { (visit_value(x, v), ...); }, xs);
    v.end();
  }
};
template <class A, class B>
struct Record<std::pair<A, B>> {
  template <class V>
  static void visit(const std::pair<A, B>& x, V& v) {
    v.begin(Value::Kind::Tuple, 2, {});
    visit_value(x.first, v);
    visit_value(x.second, v);
    v.end();
  }
};

template <class T, class C, class A>
struct Record<std::map<std::string, T, C, A>> {
  template <class V>
  static void visit(const std::map<std::string, T, C, A>& m, V& v) {
    v.begin(Value::Kind::Dict, m.size(), {});
    for (const auto& kv : m) {
      v.key(kv.first);
      visit_value(kv.second, v);
    }
    v.end();
  }
};
/// Unordered maps are walked in sorted key order, so equal maps give equal records.
template <class T, class H, class E, class A>
struct Record<std::unordered_map<std::string, T, H, E, A>> {
  template <class V>
  static void visit(const std::unordered_map<std::string, T, H, E, A>& m, V& v) {
    std::vector<const std::pair<const std::string, T>*> sorted;
    sorted.reserve(m.size());
    for (const auto& kv : m) sorted.push_back(&kv);
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
    v.begin(Value::Kind::Dict, m.size(), {});
    for (const auto* kv : sorted) {
      v.key(kv->first);
      visit_value(kv->second, v);
    }
    v.end();
  }
};
template <class T>
struct Record<torch::OrderedDict<std::string, T>> {
  template <class V>
  static void visit(const torch::OrderedDict<std::string, T>& m, V& v) {
    v.begin(Value::Kind::Dict, m.size(), {});
    for (const auto& item : m) {
      v.key(item.key());
      visit_value(item.value(), v);
    }
    v.end();
  }
};

/// IValue trees: None, tensors, scalars, strings, lists, tuples, dicts with string keys
/// (other keys are written with their string form).
template <>
struct Record<c10::IValue> {
  template <class V>
  static void visit(const c10::IValue& x, V& v) {
    if (x.isNone()) v.none();
    else if (x.isTensor()) Record<at::Tensor>::visit(x.toTensor(), v);
    else if (x.isBool()) v.boolean(x.toBool());
    else if (x.isInt()) v.integer(x.toInt());
    else if (x.isDouble()) v.floating(x.toDouble());
    else if (x.isString()) v.string(x.toStringRef());
    else if (x.isTuple()) {
      const auto& elems = x.toTupleRef().elements();
      v.begin(Value::Kind::Tuple, elems.size(), {});
      for (const auto& e : elems) visit(e, v);
      v.end();
    } else if (x.isList()) {
      auto list = x.toListRef();
      v.begin(Value::Kind::List, list.size(), {});
      for (const auto& e : list) visit(e, v);
      v.end();
    } else if (x.isGenericDict()) {
      auto dict = x.toGenericDict();
      v.begin(Value::Kind::Dict, dict.size(), {});
      for (const auto& entry : dict) {
        if (entry.key().isString()) v.key(entry.key().toStringRef());
        else v.key(detail::concat(entry.key()));
        visit(entry.value(), v);
      }
      v.end();
    } else {
      detail::raise<ArgumentError>("cannot record an IValue of type ", x.tagKind());
    }
  }
};

namespace detail {
template <class T>
struct has_adl_fields<T, std::void_t<decltype(optrace_fields(std::declval<const T&>(), std::declval<NullVisitor&>()))>>
    : std::true_type {};
}  // namespace detail

/// Types described by OPTRACE_FIELDS.
template <class T>
struct Record<T, std::enable_if_t<detail::has_adl_fields<T>::value>> {
  template <class V>
  static void visit(const T& x, V& v) { optrace_fields(x, v); }
};

namespace detail {

/// A visitor that ignores everything: only used to detect OPTRACE_FIELDS by overload resolution.
struct NullVisitor {
  void tensor(const at::Tensor&) {}
  void none() {}
  void integer(int64_t) {}
  void floating(double) {}
  void boolean(bool) {}
  void string(std::string_view) {}
  void begin(Value::Kind, size_t, std::string_view) {}
  void key(std::string_view) {}
  void end() {}
};

/// Builds a Value tree; `keep_data` stores detached copies of the tensors.
class ValueBuilder {
 public:
  explicit ValueBuilder(bool keep_data) : keep_data_(keep_data) {}

  void tensor(const at::Tensor& t) { put(Value::tensor(t, keep_data_)); }
  void none() { put(Value::none()); }
  void integer(int64_t x) { Value v; v.kind = Value::Kind::Int; v.int_value = x; put(std::move(v)); }
  void floating(double x) { Value v; v.kind = Value::Kind::Double; v.double_value = x; put(std::move(v)); }
  void boolean(bool x) { Value v; v.kind = Value::Kind::Bool; v.bool_value = x; put(std::move(v)); }
  void string(std::string_view x) { Value v; v.kind = Value::Kind::String; v.text = std::string(x); put(std::move(v)); }
  void begin(Value::Kind kind, size_t size, std::string_view struct_name) {
    Value v;
    v.kind = kind;
    v.text = std::string(struct_name);
    v.items.reserve(size);
    stack_.push_back(std::move(v));
  }
  void key(std::string_view k) { stack_.back().keys.emplace_back(k); }
  void end() {
    Value v = std::move(stack_.back());
    stack_.pop_back();
    put(std::move(v));
  }

  Value take() { return std::move(result_); }

 private:
  void put(Value v) {
    if (stack_.empty()) result_ = std::move(v);
    else stack_.back().items.push_back(std::move(v));
  }
  bool keep_data_;
  std::vector<Value> stack_;
  Value result_;
};

}  // namespace detail

/// Records any supported argument as a Value (`keep_data`: keep detached tensor copies).
template <class T>
Value to_value(const T& x, bool keep_data = false) {
  detail::ValueBuilder builder(keep_data);
  visit_value(x, builder);
  return builder.take();
}

/// Turns a Value back into an IValue: tensors give their stored data (an undefined tensor
/// when none was stored), lists of tensors/ints/doubles/bools become typed lists, dicts
/// and structs become `Dict[str, ...]`.
c10::IValue to_ivalue(const Value& v);

// ---------------------------------------------------------------------------------------------

namespace detail {

inline void describe_into(std::string& out, const Value& v) {
  using K = Value::Kind;
  switch (v.kind) {
    case K::None: out += "None"; return;
    case K::Tensor: {
      out += python_dtype_name(v.spec.dtype).substr(6);  // "float32"
      out += '[';
      for (size_t k = 0; k < v.spec.sizes.size(); ++k) {
        if (k) out += ", ";
        out += std::to_string(v.spec.sizes[k]);
      }
      out += ']';
      if (!v.spec.device.is_cpu()) out += "@" + v.spec.device.str();
      return;
    }
    case K::Int: out += "int " + std::to_string(v.int_value); return;
    case K::Double: out += concat("float ", v.double_value); return;
    case K::Bool: out += v.bool_value ? "True" : "False"; return;
    case K::String: out += "'" + v.text + "'"; return;
    default: break;
  }
  const char* open = v.kind == K::List ? "[" : v.kind == K::Tuple ? "(" : "(";
  const char* close = v.kind == K::List ? "]" : ")";
  if (v.kind == K::Dict) out += "dict";
  if (v.kind == K::Struct) out += v.text;
  out += open;
  for (size_t k = 0; k < v.items.size(); ++k) {
    if (k) out += ", ";
    if (v.is_keyed()) out += v.keys[k] + ": ";
    describe_into(out, v.items[k]);
  }
  if (v.kind == K::Tuple && v.items.size() == 1) out += ",";
  out += close;
}

inline c10::TypePtr common_element_type(const std::vector<c10::IValue>& xs) {
  if (xs.empty()) return c10::TensorType::get();
  c10::TypePtr t = xs.front().type();
  for (const auto& x : xs) {
    auto u = c10::unifyTypes(t, x.type());
    if (!u) return c10::AnyType::get();
    t = *u;
  }
  return t;
}

}  // namespace detail

inline std::string describe(const Value& v) {
  std::string out;
  detail::describe_into(out, v);
  return out;
}

namespace detail {

// Arguments::describe's text for arguments of these values: keyword arguments named `names`
// when `keyed`, else positional ones.
inline std::string describe_argument_list(bool keyed, const std::vector<std::string>& names, const std::vector<Value>& values) {
  std::string out;
  if (keyed || values.empty()) {
    out = "dict(";
    for (size_t k = 0; k < values.size(); ++k) out += (k ? ", " : "") + names[k] + ": " + optrace::describe(values[k]);
    return out + ")";
  }
  out = "(";
  for (size_t k = 0; k < values.size(); ++k) out += (k ? ", " : "") + optrace::describe(values[k]);
  if (values.size() == 1) out += ",";
  return out + ")";
}

// `v` as it comes back from Arguments (to_value(to_ivalue(v))), given its tensors' device:
// IValues have no struct, so structs come back as dicts.
inline Value as_argument_reads_back(Value v, c10::Device device) {
  if (v.is_tensor()) v.spec.device = device;
  if (v.kind == Value::Kind::Struct) {
    v.kind = Value::Kind::Dict;
    v.text.clear();
  }
  for (Value& item : v.items) item = as_argument_reads_back(std::move(item), device);
  return v;
}

// Arguments::describe() of the arguments made from `call` (infer_argument_value's Dict of them),
// with every tensor on `device`, without making the tensors.
inline std::string describe_arguments(bool keyed, const Value& call, c10::Device device) {
  std::vector<Value> values;
  for (const Value& item : call.items) values.push_back(as_argument_reads_back(item, device));
  return describe_argument_list(keyed, call.keys, values);
}

}  // namespace detail

inline std::string Arguments::describe() const {
  std::vector<std::string> names;
  std::vector<Value> values;
  for (const auto& item : kwargs) {
    names.push_back(item.key());
    values.push_back(to_value(item.value()));
  }
  if (kwargs.is_empty())  // keyword arguments, when there are, are what is shown
    for (const c10::IValue& arg : args) values.push_back(to_value(arg));
  return detail::describe_argument_list(!kwargs.is_empty(), names, values);
}

inline c10::IValue to_ivalue(const Value& v) {
  using K = Value::Kind;
  switch (v.kind) {
    case K::None: return c10::IValue();
    case K::Tensor: return v.data;
    case K::Int: return v.int_value;
    case K::Double: return v.double_value;
    case K::Bool: return v.bool_value;
    case K::String: return v.text;
    case K::Tuple: {
      std::vector<c10::IValue> elems;
      for (const Value& item : v.items) elems.push_back(to_ivalue(item));
      return c10::ivalue::Tuple::create(std::move(elems));
    }
    case K::List: {
      std::vector<c10::IValue> elems;
      for (const Value& item : v.items) elems.push_back(to_ivalue(item));
      c10::impl::GenericList list(detail::common_element_type(elems));
      for (auto& e : elems) list.push_back(std::move(e));
      return list;
    }
    case K::Dict:
    case K::Struct: {
      std::vector<c10::IValue> values;
      for (const Value& item : v.items) values.push_back(to_ivalue(item));
      c10::impl::GenericDict dict(c10::StringType::get(), detail::common_element_type(values));
      for (size_t k = 0; k < values.size(); ++k) dict.insert(v.keys[k], std::move(values[k]));
      return dict;
    }
  }
  return c10::IValue();
}

}  // namespace optrace

// ---------------------------------------------------------------------------------------------
// OPTRACE_FIELDS(Type, field1, field2, ...): makes a plain struct recordable, field by field.
// Use it in the namespace of Type (it defines a function found by argument-dependent lookup).
// Up to 24 fields.
// ---------------------------------------------------------------------------------------------

#define OPTRACE_DETAIL_EXPAND(x) x
#define OPTRACE_DETAIL_FIELD(f)   \
  optrace_visitor.key(#f);        \
  ::optrace::visit_value(optrace_object.f, optrace_visitor);
#define OPTRACE_DETAIL_F1(f) OPTRACE_DETAIL_FIELD(f)
#define OPTRACE_DETAIL_F2(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F1(__VA_ARGS__))
#define OPTRACE_DETAIL_F3(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F2(__VA_ARGS__))
#define OPTRACE_DETAIL_F4(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F3(__VA_ARGS__))
#define OPTRACE_DETAIL_F5(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F4(__VA_ARGS__))
#define OPTRACE_DETAIL_F6(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F5(__VA_ARGS__))
#define OPTRACE_DETAIL_F7(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F6(__VA_ARGS__))
#define OPTRACE_DETAIL_F8(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F7(__VA_ARGS__))
#define OPTRACE_DETAIL_F9(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F8(__VA_ARGS__))
#define OPTRACE_DETAIL_F10(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F9(__VA_ARGS__))
#define OPTRACE_DETAIL_F11(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F10(__VA_ARGS__))
#define OPTRACE_DETAIL_F12(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F11(__VA_ARGS__))
#define OPTRACE_DETAIL_F13(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F12(__VA_ARGS__))
#define OPTRACE_DETAIL_F14(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F13(__VA_ARGS__))
#define OPTRACE_DETAIL_F15(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F14(__VA_ARGS__))
#define OPTRACE_DETAIL_F16(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F15(__VA_ARGS__))
#define OPTRACE_DETAIL_F17(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F16(__VA_ARGS__))
#define OPTRACE_DETAIL_F18(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F17(__VA_ARGS__))
#define OPTRACE_DETAIL_F19(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F18(__VA_ARGS__))
#define OPTRACE_DETAIL_F20(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F19(__VA_ARGS__))
#define OPTRACE_DETAIL_F21(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F20(__VA_ARGS__))
#define OPTRACE_DETAIL_F22(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F21(__VA_ARGS__))
#define OPTRACE_DETAIL_F23(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F22(__VA_ARGS__))
#define OPTRACE_DETAIL_F24(f, ...) OPTRACE_DETAIL_FIELD(f) OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_F23(__VA_ARGS__))
#define OPTRACE_DETAIL_COUNT(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, \
                             _19, _20, _21, _22, _23, _24, N, ...)                                         \
  N
#define OPTRACE_DETAIL_NARGS(...)                                                                         \
  OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_COUNT(__VA_ARGS__, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, \
                                             12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0))
#define OPTRACE_DETAIL_CAT2(a, b) a##b
#define OPTRACE_DETAIL_CAT(a, b) OPTRACE_DETAIL_CAT2(a, b)

/// OPTRACE_FIELDS(Type, field1, field2, ...): records `Type` as a struct with these fields,
/// in this order, under these names (they name its dims in dynamic shapes and the observation
/// file). Place it in Type's namespace.
#define OPTRACE_FIELDS(Type, ...)                                                                      \
  template <class OptraceVisitor>                                                                      \
  inline void optrace_fields(const Type& optrace_object, OptraceVisitor& optrace_visitor) {            \
    optrace_visitor.begin(::optrace::Value::Kind::Struct, OPTRACE_DETAIL_NARGS(__VA_ARGS__), #Type);   \
    OPTRACE_DETAIL_EXPAND(OPTRACE_DETAIL_CAT(OPTRACE_DETAIL_F, OPTRACE_DETAIL_NARGS(__VA_ARGS__))(__VA_ARGS__)) \
    optrace_visitor.end();                                                                             \
  }
