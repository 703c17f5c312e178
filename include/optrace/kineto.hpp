// optrace/kineto.hpp: Kineto (torch.profiler) traces: import into an OpTrace, export an OpTrace as one
#pragma once
// Import. A `*.pt.trace.json[.gz]` written by torch.profiler(record_shapes=True) holds one
// `cpu_op` complete event ("ph": "X") per RecordFunction, with the op's arguments in
// "Input Dims", "Input type", "Input Strides" and "Concrete Inputs". The importer keeps the calls
// OpTracer would have recorded, per (pid, tid):
// - dispatcher ops (aten and any namespace the local libtorch knows), after CompositeImplicitAutograd
//   decomposition: ops whose resolved overload only has that kernel (`linear`) are transparent;
// - outermost only: an op inside a kept op's [ts, ts + dur] is not kept;
// - events that are no dispatcher op (autograd nodes, `ProfilerStep#`, annotations, unknown
//   namespaces) are transparent: their children can be outermost. Unknown `aten::` names are
//   taken as ops (a newer libtorch wrote them): not kept, reported, and they hide their children.
// Kineto names carry no overload: it is resolved by matching each argument's recorded kind and
// value against every overload's schema (see detail::kineto::match_score).
//
// Streaming: the file is read (and inflated) into memory once, then walked with simdjson's
// On-Demand API; no DOM of the trace is built. Each distinct (name, argument fields) combination
// is decoded once: its argument fields' raw JSON text is the cache key, and only then parsed
// (into a small DOM of that event's fields, to reuse optrace's path-naming reader).

#include <optrace/detail/compat.hpp>
#include <optrace/detail/gzip.hpp>
#include <optrace/detail/io.hpp>
#include <optrace/detail/kineto_text.hpp>
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/op_trace.hpp>

#include <ATen/core/dispatch/Dispatcher.h>
#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optrace {
namespace kineto {

/// Options of `kineto::load` / `kineto::parse`.
class ImportOptions {
 public:
  /// Keep calls whose arguments the trace records only in part (older profilers without
  /// "Concrete Inputs", values the profiler never writes: Device, str, long lists, tensor lists
  /// of old profilers): unknown values are written as `null` and the report counts them. With
  /// false, such calls are left out (and counted as not kept). Default: true.
  ImportOptions& keep_incomplete(bool keep) {
    keep_incomplete_ = keep;
    return *this;
  }
  bool keep_incomplete() const { return keep_incomplete_; }

  /// Record the strides of non-contiguous tensors ("Input Strides") as the trace's
  /// `input_strides` (optrace's extended field; calls with other strides become other unique
  /// inputs, as with OpTracerOptions::extended). Default: true.
  ImportOptions& record_strides(bool record) {
    record_strides_ = record;
    return *this;
  }
  bool record_strides() const { return record_strides_; }

  /// Examples kept per reason in the report. Default: 3.
  ImportOptions& max_examples(int64_t n) {
    OPTRACE_CHECK(n >= 0, ArgumentError, "max_examples must be >= 0, got ", n);
    max_examples_ = n;
    return *this;
  }
  int64_t max_examples() const { return max_examples_; }

 private:
  bool keep_incomplete_ = true;
  bool record_strides_ = true;
  int64_t max_examples_ = 3;
};

/// What an import kept, left out, and could not read. Counts are of events (calls), outermost
/// ones unless said otherwise.
struct ImportReport {
  /// Why some calls were left out (`kept == false`) or kept with something missing.
  struct Issue {
    std::string reason;                 ///< e.g. "no overload matches the recorded arguments"
    bool kept = false;                  ///< kept in the trace (with unknowns as null) or left out
    int64_t count = 0;                  ///< calls
    std::vector<std::string> examples;  ///< "/traceEvents/12: aten::foo (Input type [...])"
  };

  std::string format;        ///< "kineto" or "hf_op_trace" (kineto::load_any)
  int64_t events = 0;        ///< entries of traceEvents
  int64_t op_events = 0;     ///< cpu_op complete events
  int64_t kept = 0;          ///< calls in the trace (its total_calls)
  int64_t nested = 0;        ///< ops inside a kept op on their thread
  int64_t decomposed = 0;    ///< outermost CompositeImplicitAutograd ops (their parts are kept)
  int64_t transparent = 0;   ///< cpu_op events that are no dispatcher op (autograd nodes, ...)
  int64_t left_out = 0;      ///< outermost ops not kept: see `issues`
  int64_t incomplete = 0;    ///< kept calls with some argument unknown: see `issues`
  bool concrete_inputs = true;  ///< false when no op event has "Concrete Inputs" (older profilers)
  std::vector<Issue> issues;

  /// The issue with `reason`, or nullptr.
  const Issue* find(std::string_view reason) const {
    for (const Issue& i : issues)
      if (i.reason == reason) return &i;
    return nullptr;
  }

  /// A few lines for people: counts, then one line per issue with its examples.
  std::string to_string() const {
    std::string out = "format: " + format + "\nevents: " + std::to_string(events) +
                      ", op events: " + std::to_string(op_events) + "\nkept calls: " + std::to_string(kept) +
                      " (incomplete: " + std::to_string(incomplete) + ")\nnot kept: nested " + std::to_string(nested) +
                      ", decomposed " + std::to_string(decomposed) + ", not ops " + std::to_string(transparent) +
                      ", left out " + std::to_string(left_out) + "\n";
    if (!concrete_inputs && format == "kineto")
      out += "note: the trace has no \"Concrete Inputs\" (profiler before PyTorch 2.0): scalar and list values are unknown\n";
    for (const Issue& i : issues) {
      out += (i.kept ? "kept, incomplete: " : "left out: ") + i.reason + ": " + std::to_string(i.count) + " calls\n";
      for (const std::string& e : i.examples) out += "    e.g. " + e + "\n";
    }
    return out;
  }
};

/// An imported trace and its report.
struct ImportResult {
  OpTrace trace;
  ImportReport report;
};

/// Options of `kineto::save` / `kineto::to_json`.
class ExportOptions {
 public:
  /// The events' "pid". Default: 0.
  ExportOptions& pid(int64_t p) {
    pid_ = p;
    return *this;
  }
  int64_t pid() const { return pid_; }
  /// The events' "tid". Default: 0.
  ExportOptions& tid(int64_t t) {
    tid_ = t;
    return *this;
  }
  int64_t tid() const { return tid_; }

 private:
  int64_t pid_ = 0;
  int64_t tid_ = 0;
};

/// What a trace file holds (`detect_format`).
enum class TraceFormat { Kineto, HfOpTrace, Unknown };

}  // namespace kineto

namespace detail::kineto {

using optrace::kineto::ImportOptions;
using optrace::kineto::ImportReport;
using optrace::kineto::ImportResult;

// ---- the local dispatcher ----

struct Overload {
  c10::OperatorHandle handle;
  const c10::FunctionSchema* schema;
  std::string name;  // "add.Tensor"
  bool decomposes;
  size_t kwarg_only_start;
};

// Same rule as OpTracer: the CompositeImplicitAutograd kernel is what runs (it fills the
// Autograd and backend slots that have no kernel of their own).
inline bool decomposes(const c10::OperatorHandle& h) {
  using K = c10::DispatchKey;
  return h.hasKernelForDispatchKey(K::CompositeImplicitAutograd) && !h.hasKernelForDispatchKey(K::AutogradCPU) &&
         !h.hasKernelForDispatchKey(K::CPU) && !h.hasKernelForDispatchKey(K::CompositeExplicitAutograd);
}

// Every overload of every op the dispatcher knows, by qualified name ("aten::add"); the default
// overload first. Built once.
inline const std::unordered_map<std::string, std::vector<Overload>>& overloads_by_name() {
  static std::mutex mutex;
  static std::unique_ptr<std::unordered_map<std::string, std::vector<Overload>>> index;
  std::lock_guard<std::mutex> lock(mutex);
  if (index) return *index;
  index = std::make_unique<std::unordered_map<std::string, std::vector<Overload>>>();
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    auto handle = c10::Dispatcher::singleton().findSchema(name);
    if (!handle || !handle->hasSchema()) continue;
    const c10::FunctionSchema& schema = handle->schema();
    std::string base = name.name.substr(name.name.find("::") == std::string::npos ? 0 : name.name.find("::") + 2);
    Overload o{*handle, &schema, base + "." + (name.overload_name.empty() ? std::string("default") : name.overload_name),
               decomposes(*handle), 0};
    const auto& args = schema.arguments();
    o.kwarg_only_start = args.size();
    while (o.kwarg_only_start > 0 && args[o.kwarg_only_start - 1].kwarg_only()) --o.kwarg_only_start;
    auto& list = (*index)[name.name];
    if (name.overload_name.empty()) list.insert(list.begin(), std::move(o));
    else list.push_back(std::move(o));
  }
  return *index;
}

// ---- one event's arguments ----

enum class Want { Tensor, Int, Float, Bool, Number, Complex, Dtype, Layout, MemoryFormat, List, String, Device, Generator, Other };

inline Want want_of(const c10::TypePtr& t) {
  switch (t->kind()) {
    case c10::TypeKind::TensorType: return Want::Tensor;
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType: return Want::Int;
    case c10::TypeKind::FloatType:
    case c10::TypeKind::SymFloatType: return Want::Float;
    case c10::TypeKind::BoolType: return Want::Bool;
    case c10::TypeKind::NumberType: return Want::Number;
    case c10::TypeKind::ComplexType: return Want::Complex;
    case c10::TypeKind::ScalarTypeType: return Want::Dtype;
    case c10::TypeKind::LayoutType: return Want::Layout;
    case c10::TypeKind::MemoryFormatType: return Want::MemoryFormat;
    case c10::TypeKind::ListType: return Want::List;
    case c10::TypeKind::StringType: return Want::String;
    case c10::TypeKind::DeviceObjType: return Want::Device;
    case c10::TypeKind::GeneratorType: return Want::Generator;
    default: return t->str() == "SymBool" ? Want::Bool : Want::Other;
  }
}

// An argument's type: optional or not, and what is inside.
struct ArgType {
  bool optional = false;
  Want want = Want::Other;
  Want element = Want::Other;     // List: the elements' (optional stripped)
  bool element_optional = false;  // List: `Tensor?[]`, `int?[]`
};

inline ArgType arg_type(const c10::Argument& a) {
  ArgType out;
  c10::TypePtr t = a.real_type();
  if (auto o = t->cast<c10::OptionalType>()) {
    out.optional = true;
    t = o->getElementType();
  }
  out.want = want_of(t);
  if (auto l = t->cast<c10::ListType>()) {
    c10::TypePtr e = l->getElementType();
    if (auto o = e->cast<c10::OptionalType>()) {
      out.element_optional = true;
      e = o->getElementType();
    }
    out.element = want_of(e);
  }
  return out;
}

inline const char* python_type_of(Want w) {
  switch (w) {
    case Want::Int: return "<class 'int'>";
    case Want::Float: return "<class 'float'>";
    case Want::Bool: return "<class 'bool'>";
    case Want::Number: return "<class 'float'>";
    case Want::Complex: return "<class 'complex'>";
    case Want::Dtype: return "<class 'torch.dtype'>";
    case Want::Layout: return "<class 'torch.layout'>";
    case Want::MemoryFormat: return "<class 'torch.memory_format'>";
    case Want::List: return "<class 'list'>";
    case Want::String: return "<class 'str'>";
    case Want::Device: return "<class 'torch.device'>";
    case Want::Generator: return "<class 'torch._C.Generator'>";
    default: return "<class 'object'>";
  }
}

// One recorded argument.
struct RecArg {
  enum class Kind { Tensor, Empty, Scalar, ScalarList, TensorList, GenericList };
  Kind kind = Kind::Empty;
  std::string type;   // "Input type" as written
  std::string dtype;  // Tensor: Python dtype
  std::vector<int64_t> shape;
  std::optional<std::vector<int64_t>> strides;
  Scalar scalar;                  // Scalar: Missing when no Concrete Inputs
  std::optional<std::vector<Scalar>> list;  // ScalarList: nullopt when unknown
  std::optional<std::vector<OptionalShape>> list_shapes;  // TensorList
  std::optional<std::vector<std::string>> list_dtypes;    // TensorList (optrace's export only)
  std::string text;  // Concrete Inputs text of Empty / GenericList entries (optrace's export)
};

inline bool is_numeric(Want w) {
  return w == Want::Int || w == Want::Float || w == Want::Bool || w == Want::Number || w == Want::Complex ||
         w == Want::Dtype || w == Want::Layout || w == Want::MemoryFormat;
}

// How well `r` fits an argument of type `t`: -1 (not at all) to 3 (exactly).
inline int match_score(const RecArg& r, const ArgType& t) {
  using K = RecArg::Kind;
  auto numeric = is_numeric;
  auto scalar_fits = [](const Scalar& s, Want w) -> int {
    using SK = Scalar::Kind;
    if (s.kind == SK::Missing) return is_numeric(w) ? 3 : -1;
    switch (w) {
      case Want::Int:
      case Want::Dtype:
      case Want::Layout:
      case Want::MemoryFormat: return s.kind == SK::Int ? 3 : -1;
      case Want::Float: return s.kind == SK::Double ? 3 : s.kind == SK::Int ? 1 : -1;
      case Want::Bool: return s.kind == SK::Bool ? 3 : -1;
      case Want::Number: return s.kind == SK::Other ? -1 : 3;
      case Want::Complex: return s.kind == SK::Complex ? 3 : (s.kind == SK::Int || s.kind == SK::Double) ? 2 : -1;
      default: return -1;
    }
  };
  switch (r.kind) {
    case K::Tensor: return t.want == Want::Tensor ? 3 : -1;
    case K::Empty:
      if (t.optional) return 3;
      if (t.want == Want::Tensor) return 1;  // an undefined tensor
      if (t.want == Want::List) return t.element == Want::Tensor && t.element_optional ? 2 : 1;
      if (numeric(t.want)) return -1;
      return 2;  // Device, str, Generator, ...: never recorded
    case K::Scalar: return numeric(t.want) ? scalar_fits(r.scalar, t.want) : -1;
    case K::ScalarList: {
      if (t.want != Want::List || !numeric(t.element) || t.element == Want::Complex) return -1;
      if (!r.list) return 2;
      int worst = 3;
      for (const Scalar& s : *r.list) worst = std::min(worst, scalar_fits(s, t.element));
      return worst;
    }
    case K::TensorList:
      if (t.want != Want::List || t.element != Want::Tensor) return -1;
      return t.element_optional ? 2 : 3;
    case K::GenericList:
      if (t.want != Want::List) return -1;
      return t.element == Want::Tensor && t.element_optional ? 3 : 2;
  }
  return -1;
}

// ---- decoding one distinct (name, argument fields) combination ----

// The raw JSON text of an event's argument fields; empty when absent.
struct RawFields {
  std::string_view dims, types, concrete, strides, overload, list_dtypes;
};

enum class Status { Kept, Decomposed, LeftOut, Dropped };

struct KeyInfo {
  Status status = Status::LeftOut;
  bool blocks = true;  // hides the ops inside it (a dispatcher op, kept or not)
  std::string op;      // "add.Tensor"
  OpInput input;
  std::vector<std::string> reasons;  // Kept: what is missing; LeftOut: why (one)
  std::string example;
};

inline std::string shorten(std::string_view s, size_t n = 160) {
  if (s.size() <= n) return std::string(s);
  return std::string(s.substr(0, n - 3)) + "...";
}

// Re-raises a JsonError of a sub-document with its path put under `prefix`.
[[noreturn]] inline void rethrow_under(const JsonError& e, const std::string& prefix) {
  std::string what = e.what();
  std::string head = "optrace: JsonError at " + (e.path().empty() ? std::string("/") : e.path()) + ": ";
  std::string message = what.compare(0, head.size(), head) == 0 ? what.substr(head.size()) : what;
  throw JsonError(prefix + e.path(), message);
}

inline bool is_contiguous(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  if (strides.size() != shape.size()) return true;
  int64_t expected = 1;
  bool beyond = false;  // the contiguous stride no longer fits int64 (a shape no tensor has)
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k] == 0) return true;
    if (shape[k] != 1 && (beyond || strides[k] != expected)) return false;
    beyond = beyond || __builtin_mul_overflow(expected, shape[k], &expected);
  }
  return true;
}

inline bool scalar_equals_default(const Scalar& s, const c10::IValue& d) {
  switch (s.kind) {
    case Scalar::Kind::Missing: return true;  // unknown: taken as the default
    case Scalar::Kind::Int: return d.isInt() && d.toInt() == s.i;
    case Scalar::Kind::Double: return d.isDouble() && (d.toDouble() == s.d || (std::isnan(d.toDouble()) && std::isnan(s.d)));
    case Scalar::Kind::Bool: return d.isBool() && d.toBool() == s.b;
    case Scalar::Kind::Complex:
      return d.isComplexDouble() && d.toComplexDouble().real() == s.d && d.toComplexDouble().imag() == s.imag;
    default: return false;
  }
}

// Whether the recorded argument is its schema default (what PyTorch drops before calling
// Python). Values the trace does not hold count as the default.
inline bool equals_default(const RecArg& r, const c10::Argument& a) {
  if (!a.default_value().has_value()) return false;
  const c10::IValue& d = *a.default_value();
  switch (r.kind) {
    case RecArg::Kind::Empty:
      if (d.isNone() || r.text.empty()) return true;
      if (d.isString()) return d.toStringRef() == r.text;
      if (d.isDevice()) return d.toDevice().str() == r.text;
      return false;
    case RecArg::Kind::Scalar: return scalar_equals_default(r.scalar, d);
    case RecArg::Kind::ScalarList: {
      if (!r.list) return true;
      if (!d.isList()) return false;
      auto items = d.toListRef();
      if (items.size() != r.list->size()) return false;
      for (size_t k = 0; k < items.size(); ++k)
        if (!scalar_equals_default((*r.list)[k], items[k])) return false;
      return true;
    }
    default: return false;
  }
}

// One argument as the hf op-trace schema holds it.
struct Converted {
  OptionalShape shape;
  std::string dtype;
  OpValue value;
  std::optional<TensorListInfo> list;
  OptionalShape strides;
};

inline OpValue scalar_value(const Scalar& s, Want w, std::string& dtype, bool& unknown) {
  using SK = Scalar::Kind;
  if (s.kind == SK::Missing || s.kind == SK::Other) {
    unknown = true;
    dtype = python_type_of(w);
    return OpValue::none();
  }
  switch (w) {
    case Want::Dtype:
      dtype = "<class 'torch.dtype'>";
      if (s.i >= 0 && s.i < static_cast<int64_t>(c10::ScalarType::NumOptions))
        return OpValue::string(python_dtype_name(static_cast<c10::ScalarType>(s.i)));
      unknown = true;
      return OpValue::none();
    case Want::Layout: dtype = "<class 'torch.layout'>"; return OpValue::string(layout_name(s.i));
    case Want::MemoryFormat: dtype = "<class 'torch.memory_format'>"; return OpValue::string(memory_format_name(s.i));
    case Want::Float:
      dtype = "<class 'float'>";
      return OpValue::floating(s.kind == SK::Int ? static_cast<double>(s.i) : s.d);
    case Want::Complex:
      dtype = "<class 'complex'>";
      return OpValue::string(python_complex(s.kind == SK::Int ? static_cast<double>(s.i) : s.d, s.imag));
    default: break;
  }
  switch (s.kind) {
    case SK::Int: dtype = "<class 'int'>"; return OpValue::integer(s.i);
    case SK::Double: dtype = "<class 'float'>"; return OpValue::floating(s.d);
    case SK::Bool: dtype = "<class 'bool'>"; return OpValue::boolean(s.b);
    default: dtype = "<class 'complex'>"; return OpValue::string(python_complex(s.d, s.imag));
  }
}

// Converts `r` for argument type `t`; adds to `missing` what the trace does not hold.
inline Converted convert(const RecArg& r, const ArgType& t, const std::string& list_dtype_guess, bool record_strides,
                         std::vector<std::string>& missing) {
  Converted c;
  bool unknown = false;
  switch (r.kind) {
    case RecArg::Kind::Tensor:
      c.shape = r.shape;
      c.dtype = r.dtype;
      if (record_strides && r.strides && !is_contiguous(r.shape, *r.strides)) c.strides = r.strides;
      break;
    case RecArg::Kind::Empty:
      if (!r.text.empty() && (t.want == Want::String || t.want == Want::Device)) {
        c.dtype = python_type_of(t.want);
        c.value = OpValue::string(r.text);
      } else if (t.optional || t.want == Want::Tensor) {
        c.dtype = "<class 'NoneType'>";
      } else {
        c.dtype = python_type_of(t.want);
        if (t.want != Want::Generator) missing.push_back(std::string("value not recorded by the profiler (") + (t.want == Want::List ? "list" : c.dtype) + ")");
      }
      break;
    case RecArg::Kind::Scalar:
      c.value = scalar_value(r.scalar, t.want, c.dtype, unknown);
      if (unknown) missing.push_back("scalar value not recorded (no Concrete Inputs)");
      break;
    case RecArg::Kind::ScalarList:
      c.dtype = "<class 'list'>";
      if (!r.list) {
        missing.push_back("list value not recorded (no Concrete Inputs)");
        break;
      } else {
        std::vector<OpValue> items;
        std::string ignored;
        for (const Scalar& s : *r.list) items.push_back(scalar_value(s, t.element, ignored, unknown));
        c.value = OpValue::list(std::move(items));
      }
      break;
    case RecArg::Kind::TensorList:
      c.dtype = "<class 'list'>";
      if (!r.list_shapes) {
        missing.push_back("tensor list not recorded (profiler before PyTorch 2.1)");
        break;
      } else {
        TensorListInfo info;
        info.shapes = *r.list_shapes;
        if (r.list_dtypes) {
          info.dtypes = *r.list_dtypes;
        } else {
          for (const auto& s : info.shapes) info.dtypes.push_back(s ? list_dtype_guess : "<class 'NoneType'>");
          missing.push_back("tensor list dtypes not recorded (taken from the first tensor argument, else float32)");
        }
        c.list = std::move(info);
      }
      break;
    case RecArg::Kind::GenericList:
      c.dtype = "<class 'list'>";
      if (!r.text.empty()) {
        try {
          auto doc = json::Document::parse(r.text);
          c.value = OpValue::read(doc->root());
          break;
        } catch (const JsonError&) {
        }
      }
      missing.push_back("list value not recorded by the profiler");
      break;
  }
  return c;
}

// The recorded arguments of one event, from its fields' DOM. Throws JsonError (paths relative to
// the args object); returns a non-empty reason when the fields do not line up.
inline std::string read_args(const json::Value& root, std::vector<RecArg>& out) {
  json::Value dims(root), types(root), concrete(root), strides(root), list_dtypes(root);
  bool has_dims = root.find("Input Dims", dims), has_types = root.find("Input type", types);
  bool has_concrete = root.find("Concrete Inputs", concrete), has_strides = root.find("Input Strides", strides);
  bool has_list_dtypes = root.find("TensorList dtypes", list_dtypes);
  if (!has_dims && !has_types) return "no Input Dims and Input type (profiled without record_shapes)";
  if (!has_types) return "no Input type";
  if (!has_dims) return "no Input Dims";
  types.array();  // both must be lists (JsonError otherwise)
  dims.array();
  if (has_concrete) concrete.array();
  if (has_strides) strides.array();
  if (has_list_dtypes) list_dtypes.array();
  size_t n = types.size();
  if (dims.size() != n) return "Input Dims and Input type differ in length";
  if (has_concrete && concrete.size() != n) return "Concrete Inputs and Input type differ in length";
  if (has_strides && strides.size() != n) has_strides = false;
  if (has_list_dtypes && list_dtypes.size() != n) return "TensorList dtypes and Input type differ in length";
  std::vector<json::Value> d, c, s, l;
  for (json::Value v : dims.array()) d.push_back(v);
  if (has_concrete)
    for (json::Value v : concrete.array()) c.push_back(v);
  if (has_strides)
    for (json::Value v : strides.array()) s.push_back(v);
  if (has_list_dtypes)
    for (json::Value v : list_dtypes.array()) l.push_back(v);
  size_t i = 0;
  out.clear();
  for (json::Value tv : types.array()) {
    RecArg r;
    r.type = std::string(tv.as_string());
    std::string_view type = r.type;
    std::string text = has_concrete ? std::string(c[i].as_string()) : std::string();
    if (type.empty() || type == "None") {
      r.kind = RecArg::Kind::Empty;
      r.text = text;
    } else if (type == "Scalar" || type == "Int" || type == "Double" || type == "Bool" || type == "ComplexDouble" ||
               type == "SymInt" || type == "SymFloat" || type == "SymBool") {
      r.kind = RecArg::Kind::Scalar;
      r.scalar = parse_scalar(text);
    } else if (type == "ScalarList" || type == "IntList" || type == "DoubleList" || type == "BoolList" || type == "SymIntList") {
      r.kind = RecArg::Kind::ScalarList;
      std::vector<Scalar> items;
      if (has_concrete && parse_scalar_list(text, items)) r.list = std::move(items);
    } else if (type == "TensorList") {
      r.kind = RecArg::Kind::TensorList;
      std::vector<OptionalShape> shapes;
      for (json::Value sv : d[i].array()) shapes.push_back(sv.as_int_list());
      if (has_list_dtypes && !l[i].is_null()) {
        std::vector<std::string> dtypes;
        size_t k = 0;
        for (json::Value dv : l[i].array()) {
          std::string_view name = dv.as_string();
          if (k >= shapes.size()) dv.fail_plain("more dtypes than Input Dims has shapes");
          if (name.empty()) {
            shapes[k] = std::nullopt;
            dtypes.push_back("<class 'NoneType'>");
          } else {
            auto py = python_dtype_of_type_name(name);
            if (!py) return "unknown tensor type \"" + std::string(name) + "\" in TensorList dtypes";
            dtypes.push_back(*py);
          }
          ++k;
        }
        if (dtypes.size() != shapes.size()) l[i].fail_plain("TensorList dtypes and Input Dims differ in length");
        r.list_dtypes = std::move(dtypes);
        r.list_shapes = std::move(shapes);
      } else if (!shapes.empty()) {
        r.list_shapes = std::move(shapes);
      }
    } else if (type == "GenericList" || type == "List" || type == "TupleList") {
      r.kind = RecArg::Kind::GenericList;
      r.text = text;
    } else if (auto py = python_dtype_of_type_name(type)) {
      r.kind = RecArg::Kind::Tensor;
      r.dtype = *py;
      r.shape = d[i].as_int_list();
      if (has_strides && s[i].is_array() && s[i].size() == r.shape.size()) r.strides = s[i].as_int_list();
    } else {
      return "unknown Input type \"" + r.type + "\"";
    }
    out.push_back(std::move(r));
    ++i;
  }
  return "";
}

inline KeyInfo decode(std::string_view name, const RawFields& raw, const std::string& args_path,
                      const ImportOptions& options) {
  KeyInfo info;
  info.example = args_path.substr(0, args_path.size() - 5) + ": " + std::string(name) + " (Input type " +
                 (raw.types.empty() ? std::string("absent") : shorten(raw.types)) + ")";
  const auto& index = overloads_by_name();
  auto found = index.find(std::string(name));
  const std::vector<Overload>* overloads = found == index.end() ? nullptr : &found->second;
  auto left_out = [&](std::string reason) {
    info.status = Status::LeftOut;
    bool all_decompose = overloads != nullptr && !overloads->empty();
    if (overloads)
      for (const Overload& o : *overloads) all_decompose = all_decompose && o.decomposes;
    info.blocks = !all_decompose;
    info.reasons = {std::move(reason)};
    return info;
  };
  if (overloads == nullptr) return left_out("op not in this libtorch");

  // The fields, as one small document for the path-naming reader.
  std::string text = "{";
  auto add = [&text](const char* key, std::string_view value) {
    if (value.empty()) return;
    if (text.size() > 1) text += ',';
    text += '"';
    text += key;
    text += "\":";
    text += value;
  };
  add("Input Dims", raw.dims);
  add("Input type", raw.types);
  add("Concrete Inputs", raw.concrete);
  add("Input Strides", raw.strides);
  add("TensorList dtypes", raw.list_dtypes);
  add("Overload name", raw.overload);
  text += '}';
  std::vector<RecArg> args;
  std::string overload_hint;
  bool has_hint = false;
  try {
    auto doc = json::Document::parse(text);
    json::Value hint(doc->root());
    if (doc->root().find("Overload name", hint)) {
      overload_hint = std::string(hint.as_string());
      has_hint = true;
    }
    std::string problem = read_args(doc->root(), args);
    if (!problem.empty()) return left_out(problem);
  } catch (const JsonError& e) {
    rethrow_under(e, args_path);
  }

  // The overload: the best-fitting schema.
  // Boxed calls (the TorchScript interpreter's) hand RecordFunction the caller's whole stack: when
  // no schema takes all the recorded inputs, the op's arguments are the last ones (as OpTracer
  // reads them).
  const Overload* best = nullptr;
  int best_score = -1;
  size_t skip = 0;  // recorded inputs before the op's arguments
  std::vector<const Overload*> tied;
  for (int pass = 0; pass < 2 && best == nullptr; ++pass) {
    if (pass == 1 && has_hint) break;
    for (const Overload& o : *overloads) {
      const auto& params = o.schema->arguments();
      if (has_hint) {
        if (o.schema->overload_name() != overload_hint || args.size() > params.size()) continue;
      } else if (pass == 0 ? params.size() != args.size() : params.size() >= args.size()) {
        continue;
      }
      size_t offset = pass == 0 ? 0 : args.size() - params.size();
      int score = 0;
      for (size_t k = offset; k < args.size() && score >= 0; ++k) {
        int s = match_score(args[k], arg_type(params[k - offset]));
        score = s < 0 ? -1 : score + s;
      }
      if (score < 0) continue;
      if (score > best_score || (score == best_score && pass == 1 && offset < skip)) {
        best = &o;
        best_score = score;
        skip = offset;
        tied.clear();
      } else if (score == best_score && offset == skip) {
        tied.push_back(&o);
      }
    }
  }
  if (skip > 0) args.erase(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(skip));
  if (best == nullptr)
    return left_out(has_hint ? "no overload \"" + overload_hint + "\" takes the recorded arguments"
                             : "no overload matches the recorded arguments");
  info.op = best->name;
  if (best->decomposes) {
    info.status = Status::Decomposed;
    info.blocks = false;
    return info;
  }
  if (!tied.empty()) {
    std::string names;
    for (const Overload* o : tied) names += ", " + o->name;
    info.reasons.push_back("ambiguous overload (took the first)");
    info.example += " took " + best->name + " over" + names.substr(1);
  }

  // The arguments as Python's __torch_dispatch__ gets them: positional ones, trailing defaults dropped.
  const auto& params = best->schema->arguments();
  size_t positional = std::min(best->kwarg_only_start, args.size());
  while (positional > 0 && equals_default(args[positional - 1], params[positional - 1])) --positional;
  if (auto reference = detail::reference_op_for(best->schema->operator_name())) {
    // As OpTracer records it: as the op the reference tracer sees, with its leading arguments.
    const Overload& as = overloads_by_name().at(reference->name).front();  // the default overload first
    info.op = as.name;
    positional = std::min(positional, as.schema->arguments().size());
  }
  std::string guess = "torch.float32";
  for (const RecArg& r : args)
    if (r.kind == RecArg::Kind::Tensor) {
      guess = r.dtype;
      break;
    }
  OpInput& in = info.input;
  bool any_strides = false;
  std::vector<std::string> missing;
  for (size_t k = 0; k < positional; ++k) {
    Converted c = convert(args[k], arg_type(params[k]), guess, options.record_strides(), missing);
    if (c.list) {
      int64_t id = static_cast<int64_t>(in.tensor_lists.size());
      in.tensor_lists.emplace_back(std::to_string(id), std::move(*c.list));
      c.value = OpValue::tensor_list_ref(id);
    }
    in.input_shapes.push_back(std::move(c.shape));
    in.input_dtypes.push_back(std::move(c.dtype));
    in.non_tensor_inputs.push_back(std::move(c.value));
    any_strides = any_strides || c.strides.has_value();
    in.input_strides.push_back(std::move(c.strides));
  }
  if (!any_strides) in.input_strides.clear();
  for (std::string& m : missing)
    if (std::find(info.reasons.begin(), info.reasons.end(), m) == info.reasons.end()) info.reasons.push_back(std::move(m));
  info.status = Status::Kept;
  if (!options.keep_incomplete()) {
    for (const std::string& r : info.reasons)
      if (r.rfind("ambiguous", 0) != 0) return left_out("incomplete: " + r);
  }
  return info;
}

// ---- the streaming pass over traceEvents ----

namespace od = simdjson::ondemand;

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && json::detail::is_json_space(s.back())) s.remove_suffix(1);
  while (!s.empty() && json::detail::is_json_space(s.front())) s.remove_prefix(1);
  return s;
}

[[noreturn]] inline void malformed(const std::string& path, simdjson::error_code e) {
  throw JsonError(path, "malformed JSON: " + json::detail::simdjson_message(e));
}

inline std::string_view token_of(od::value& v) { return v.raw_json_token(); }
inline std::string_view token_of(od::document& d) {
  std::string_view s;
  if (d.raw_json_token().get(s)) return {};
  return s;
}

// What a value is, for messages (as json::Value::describe words it).
template <class V>
std::string describe(V& v) {
  od::json_type t;
  if (v.type().get(t)) return "malformed JSON";
  switch (t) {
    case od::json_type::string: {
      std::string_view s;
      if (v.get_string().get(s)) return "a malformed string";
      return "string \"" + shorten(s, 60) + "\"";
    }
    case od::json_type::number: {
      std::string_view s = trim(token_of(v));
      bool integer = s.find_first_of(".eE") == std::string_view::npos;
      return (integer ? "integer " : "number ") + std::string(s);
    }
    case od::json_type::boolean: {
      bool b = false;
      if (v.get_bool().get(b)) return "a boolean";
      return b ? "true" : "false";
    }
    case od::json_type::null: return "null";
    case od::json_type::array: {
      size_t n = 0;
      if (v.count_elements().get(n)) return "a list";
      return "a list of " + std::to_string(n);
    }
    case od::json_type::object: return "an object";
  }
  return "an unknown value";
}

template <class V>
[[noreturn]] void expected(V& v, const std::string& path, const char* what) {
  throw JsonError(path, std::string(what) + ", got " + describe(v));
}

// A Kineto time ("4203669604595.407" microseconds) as integer nanoseconds, exactly. False for
// anything else, and for times beyond int64 nanoseconds (292 years).
inline bool parse_time_ns(std::string_view s, int64_t& out) {
  s = trim(s);
  bool negative = !s.empty() && s[0] == '-';
  if (negative) s.remove_prefix(1);
  if (s.empty() || s.find_first_of("eE") != std::string_view::npos) {
    double d;
    if (!parse_double(s, d) || !(std::fabs(d) < 9.2e15)) return false;  // NaN and inf fail too
    out = static_cast<int64_t>(std::llround(d * 1000.0)) * (negative ? -1 : 1);
    return true;
  }
  int64_t us = 0, ns = 0;
  size_t k = 0;
  for (; k < s.size() && s[k] >= '0' && s[k] <= '9'; ++k)
    if (__builtin_mul_overflow(us, 10, &us) || __builtin_add_overflow(us, s[k] - '0', &us)) return false;
  if (k == 0) return false;
  if (k < s.size()) {
    if (s[k] != '.') return false;
    int digits = 0;
    for (++k; k < s.size() && s[k] >= '0' && s[k] <= '9'; ++k, ++digits)
      if (digits < 3) ns = ns * 10 + (s[k] - '0');
    if (k != s.size()) return false;
    for (; digits < 3; ++digits) ns *= 10;
  }
  if (__builtin_mul_overflow(us, 1000, &us) || __builtin_add_overflow(us, ns, &out)) return false;
  if (negative) out = -out;
  return true;
}

// A field's key without unescaping it: the text after the opening quote, up to the closing one.
// Keys with escapes never equal the plain names compared against, as none of optrace's are.
inline std::string_view raw_key(const od::field& f) {
  const char* k = f.key().raw();
  const char* end = static_cast<const char*>(std::memchr(k, '"', 64));
  while (end != nullptr && end > k && end[-1] == '\\') end = static_cast<const char*>(std::memchr(end + 1, '"', 64));
  return end == nullptr ? std::string_view(k, 64) : std::string_view(k, static_cast<size_t>(end - k));
}

// The raw JSON text of `v`; `path()` names it in errors (called only then).
template <class V, class PathFn>
std::string_view raw_of(V& v, const PathFn& path) {
  od::json_type t;
  if (auto e = v.type().get(t)) malformed(path(), e);
  std::string_view s;
  simdjson::error_code e = simdjson::SUCCESS;
  if (t == od::json_type::array) {
    od::array a;
    e = v.get_array().get(a);
    if (!e) e = a.raw_json().get(s);
  } else if (t == od::json_type::object) {
    od::object o;
    e = v.get_object().get(o);
    if (!e) e = o.raw_json().get(s);
  } else {
    s = token_of(v);
  }
  if (e) malformed(path(), e);
  return trim(s);
}

class Importer {
 public:
  explicit Importer(const ImportOptions& options) : options_(options) {}

  ImportResult run(const char* data, size_t size, size_t capacity) {
    od::parser parser;
    od::document doc;
    if (auto e = parser.iterate(data, size, capacity).get(doc)) malformed("", e);
    od::json_type t;
    if (auto e = doc.type().get(t)) malformed("", e);
    if (t == od::json_type::array) {
      od::array events;
      if (auto e = doc.get_array().get(events)) malformed("", e);
      read_events(events, "");
    } else if (t == od::json_type::object) {
      od::object root;
      if (auto e = doc.get_object().get(root)) malformed("", e);
      bool found = false;
      for (auto member : root) {
        od::field f;
        if (auto e = std::move(member).get(f)) malformed("", e);
        std::string_view key;
        if (auto e = f.unescaped_key().get(key)) malformed("", e);
        if (key != "traceEvents") continue;
        found = true;
        od::array events;
        if (f.value().get_array().get(events)) expected(f.value(), "/traceEvents", "expected a list of events");
        read_events(events, "/traceEvents");
        break;
      }
      if (!found) throw JsonError("", "missing key \"traceEvents\"");
    } else {
      expected(doc, "", "expected an object with \"traceEvents\" or a list of events");
    }
    return finish();
  }

 private:
  struct EventRec {
    uint32_t thread;
    uint32_t key;
    int64_t ts, end;
    uint32_t index;
    int64_t count;
  };

  struct Event {
    std::string_view ph, cat, name, pid, tid, ts, dur, args;
    RawFields raw;
    int64_t count = 1;
    std::optional<int64_t> dropped;
    bool args_seen = false;
    std::optional<bool> op_name;  // is_op_name(name), once asked
  };

  static bool is_op_event(const Event& e) { return e.ph == "X" && (e.cat == "cpu_op" || e.cat == "Operator"); }

  // Whether `name` may be a dispatcher op (else the event is transparent).
  bool is_op_name(std::string_view name) {
    name_scratch_.assign(name.data(), name.size());
    auto it = op_names_.find(name_scratch_);
    if (it != op_names_.end()) return it->second;
    bool op = overloads_by_name().count(name_scratch_) > 0 ||
              (name.rfind("aten::", 0) == 0 && name.find(' ') == std::string_view::npos);
    op_names_.emplace(name_scratch_, op);
    return op;
  }

  template <class Obj>
  void read_args(Obj& args, Event& ev, const std::string& path) {
    for (auto member : args) {
      od::field f;
      if (auto e = std::move(member).get(f)) malformed(path, e);
      std::string_view key = raw_key(f);
      if (key.empty() || (key[0] != 'I' && key[0] != 'C' && key[0] != 'O' && key[0] != 'T' && key[0] != 'c' && key[0] != 'D'))
        continue;
      auto field_path = [&path, key] { return path + "/" + std::string(key); };
      // The fields are lists: take their text directly (raw_of words the error otherwise).
      // An On-Demand value is read once: a list whose text cannot be taken (malformed inside)
      // is an error here, not read again through raw_of (which broke simdjson's invariants).
      auto list_field = [&f, &field_path](std::string_view& into) {
        od::array a;
        if (f.value().get_array().get(a)) {
          into = raw_of(f.value(), field_path);
          return;
        }
        if (auto e = a.raw_json().get(into)) malformed(field_path(), e);
        into = trim(into);
      };
      if (key == "Input Dims") list_field(ev.raw.dims);
      else if (key == "Input type") list_field(ev.raw.types);
      else if (key == "Concrete Inputs") list_field(ev.raw.concrete);
      else if (key == "Input Strides") list_field(ev.raw.strides);
      else if (key == "Overload name") ev.raw.overload = raw_of(f.value(), field_path);
      else if (key == "TensorList dtypes") list_field(ev.raw.list_dtypes);
      else if (key == "count" || key == "Dropped calls") {
        int64_t n;
        if (f.value().get_int64().get(n) || n < (key == "count" ? 1 : 0))
          expected(f.value(), field_path(), key == "count" ? "expected a count of at least 1" : "expected a count");
        if (key == "count") ev.count = n;
        else ev.dropped = n;
      }
    }
  }

  void read_events(od::array& events, const std::string& base) {
    uint32_t index = 0;
    for (auto element : events) {
      std::string path;
      auto event_path = [&]() -> const std::string& {
        if (path.empty()) path = base + "/" + std::to_string(index);
        return path;
      };
      od::value v;
      if (auto e = element.get(v)) malformed(event_path(), e);
      od::object obj;
      if (v.get_object().get(obj)) expected(v, event_path(), "expected an event object");
      ++report_.events;
      Event ev;
      for (auto member : obj) {
        od::field f;
        if (auto e = std::move(member).get(f)) malformed(event_path(), e);
        std::string_view key = raw_key(f);
        if (key.size() > 4) continue;
        auto string_field = [&](std::string_view& into) {
          if (f.value().get_string().get(into)) expected(f.value(), event_path() + "/" + std::string(key), "expected a string");
        };
        auto number_field = [&](std::string_view& into) {
          into = trim(token_of(f.value()));
          if (into.empty() || !(into[0] == '-' || (into[0] >= '0' && into[0] <= '9')))
            expected(f.value(), event_path() + "/" + std::string(key), "expected a number");
        };
        if (key == "ph") string_field(ev.ph);
        else if (key == "cat") string_field(ev.cat);
        else if (key == "name") string_field(ev.name);
        else if (key == "ts") number_field(ev.ts);
        else if (key == "dur") number_field(ev.dur);
        else if (key == "pid") ev.pid = trim(token_of(f.value()));
        else if (key == "tid") ev.tid = trim(token_of(f.value()));
        else if (key == "args") {
          ev.args_seen = true;
          bool known = !ev.ph.empty() && !ev.cat.empty() && !ev.name.empty();
          if (known && (!is_op_event(ev) || !(ev.op_name = is_op_name(ev.name)))) continue;  // skipped unread
          od::object args;
          if (f.value().get_object().get(args)) expected(f.value(), event_path() + "/args", "expected an object");
          if (known) read_args(args, ev, event_path() + "/args");
          else if (auto e = args.raw_json().get(ev.args)) malformed(event_path() + "/args", e);
        }
      }
      if (is_op_event(ev)) add_event(ev, index, event_path);
      ++index;
    }
  }

  template <class PathFn>
  void add_event(Event& ev, uint32_t index, PathFn& event_path) {
    ++report_.op_events;
    if (!(ev.op_name ? *ev.op_name : is_op_name(ev.name))) {
      ++report_.transparent;
      return;
    }
    if (!ev.args.empty()) {  // "args" came before "ph", "cat" or "name": read it now
      od::document sub;
      if (auto e = sub_parser_.iterate(ev.args.data(), ev.args.size(), ev.args.size() + simdjson::SIMDJSON_PADDING).get(sub))
        malformed(event_path() + "/args", e);
      od::object args;
      if (auto e = sub.get_object().get(args)) malformed(event_path() + "/args", e);
      read_args(args, ev, event_path() + "/args");
    }
    if (ev.ts.empty()) throw JsonError(event_path(), "missing key \"ts\"");
    if (ev.dur.empty()) throw JsonError(event_path(), "missing key \"dur\"");
    EventRec rec;
    if (!parse_time_ns(ev.ts, rec.ts)) throw JsonError(event_path() + "/ts", "expected a time in microseconds, got number " + std::string(ev.ts));
    int64_t dur;
    if (!parse_time_ns(ev.dur, dur) || dur < 0)
      throw JsonError(event_path() + "/dur", "expected a duration of at least 0, got number " + std::string(ev.dur));
    if (__builtin_add_overflow(rec.ts, dur, &rec.end))
      throw JsonError(event_path() + "/dur", "ts + dur is beyond int64 nanoseconds (ts " + std::string(ev.ts) + ", dur " + std::string(ev.dur) + ")");
    rec.index = index;
    rec.count = ev.count;
    if (!ev.raw.concrete.empty()) saw_concrete_ = true;

    if (ev.pid != last_pid_ || ev.tid != last_tid_ || records_.empty()) {
      scratch_.clear();
      scratch_.append(ev.pid).append("\x1f").append(ev.tid);
      auto thread = threads_.find(scratch_);
      if (thread == threads_.end()) thread = threads_.emplace(scratch_, static_cast<uint32_t>(threads_.size())).first;
      last_thread_ = thread->second;
      last_pid_.assign(ev.pid.data(), ev.pid.size());
      last_tid_.assign(ev.tid.data(), ev.tid.size());
    }
    rec.thread = last_thread_;

    scratch_.assign(ev.dropped ? "\x1e" : "").append(ev.name);
    for (std::string_view part : {ev.raw.dims, ev.raw.types, ev.raw.concrete, ev.raw.strides, ev.raw.overload, ev.raw.list_dtypes})
      scratch_.append("\x1f").append(part);
    auto key = keys_.find(scratch_);
    if (key == keys_.end()) {
      KeyInfo info;
      if (ev.dropped) {
        info.status = Status::Dropped;
        info.blocks = false;
        std::string overload = "default";
        if (!ev.raw.overload.empty()) {
          auto doc = json::Document::parse(ev.raw.overload);
          overload = std::string(doc->root().as_string());
          if (overload.empty()) overload = "default";
        }
        std::string base(ev.name.substr(ev.name.find("::") == std::string_view::npos ? 0 : ev.name.find("::") + 2));
        info.op = base + "." + overload;
        rec.count = *ev.dropped;
      } else {
        info = decode(ev.name, ev.raw, event_path() + "/args", options_);
      }
      key = keys_.emplace(scratch_, static_cast<uint32_t>(infos_.size())).first;
      infos_.push_back(std::move(info));
    } else if (ev.dropped) {
      rec.count = *ev.dropped;
    }
    rec.key = key->second;
    // Every count the report and the trace add up is part of this sum: it must fit int64.
    if (__builtin_add_overflow(calls_, rec.count, &calls_))
      throw JsonError(event_path() + (ev.dropped ? "/args/Dropped calls" : "/args/count"),
                      "the events' counts add up to more than " + std::to_string(INT64_MAX) + " calls");
    records_.push_back(rec);
  }

  void note(const std::string& reason, bool kept, int64_t count, const std::string& example) {
    auto it = issue_index_.find(reason);
    if (it == issue_index_.end()) {
      it = issue_index_.emplace(reason, report_.issues.size()).first;
      ImportReport::Issue issue;
      issue.reason = reason;
      issue.kept = kept;
      report_.issues.push_back(std::move(issue));
    }
    ImportReport::Issue& issue = report_.issues[it->second];
    issue.count += count;
    if (static_cast<int64_t>(issue.examples.size()) < options_.max_examples() &&
        std::find(issue.examples.begin(), issue.examples.end(), example) == issue.examples.end())
      issue.examples.push_back(example);
  }

  ImportResult finish() {
    // Nesting, per thread: ops in start order, a parent before the children that share its start.
    std::vector<uint32_t> order(records_.size());
    for (uint32_t k = 0; k < order.size(); ++k) order[k] = k;
    std::sort(order.begin(), order.end(), [this](uint32_t a, uint32_t b) {
      const EventRec& x = records_[a];
      const EventRec& y = records_[b];
      if (x.thread != y.thread) return x.thread < y.thread;
      if (x.ts != y.ts) return x.ts < y.ts;
      if (x.end != y.end) return x.end > y.end;
      return x.index < y.index;
    });
    std::vector<uint32_t> kept;
    uint32_t thread = UINT32_MAX;
    int64_t open_start = 0, open_end = 0;
    bool open = false;
    for (uint32_t k : order) {
      const EventRec& r = records_[k];
      const KeyInfo& info = infos_[r.key];
      if (r.thread != thread) {
        thread = r.thread;
        open = false;
      }
      if (info.status == Status::Dropped) {
        kept.push_back(k);
        continue;
      }
      if (open && r.ts >= open_start && r.end <= open_end) {
        report_.nested += r.count;
        continue;
      }
      if (info.blocks) {
        open = true;
        open_start = r.ts;
        open_end = r.end;
      }
      switch (info.status) {
        case Status::Kept: kept.push_back(k); break;
        case Status::Decomposed: report_.decomposed += r.count; break;
        case Status::LeftOut:
          report_.left_out += r.count;
          note(info.reasons.front(), false, r.count, info.example);
          break;
        default: break;
      }
    }
    // First-seen order: by start time over all threads, then file order.
    std::sort(kept.begin(), kept.end(), [this](uint32_t a, uint32_t b) {
      const EventRec& x = records_[a];
      const EventRec& y = records_[b];
      return x.ts != y.ts ? x.ts < y.ts : x.index < y.index;
    });
    std::vector<int64_t> totals(infos_.size(), 0);
    std::vector<uint32_t> first_seen;
    for (uint32_t k : kept) {
      const EventRec& r = records_[k];
      if (totals[r.key] == 0) first_seen.push_back(r.key);
      totals[r.key] += r.count;
      const KeyInfo& info = infos_[r.key];
      if (info.status != Status::Kept) continue;
      report_.kept += r.count;
      if (!info.reasons.empty()) report_.incomplete += r.count;
      for (const std::string& reason : info.reasons) note(reason, true, r.count, info.example);
    }
    ImportResult result;
    for (uint32_t key : first_seen) {
      KeyInfo& info = infos_[key];
      if (info.status == Status::Dropped) {
        result.trace.add_dropped(info.op, totals[key]);
        continue;
      }
      OpInput in = info.input;
      in.count = totals[key];
      result.trace.add(info.op, std::move(in));
    }
    report_.format = "kineto";
    report_.concrete_inputs = saw_concrete_ || report_.op_events == report_.transparent;
    result.report = std::move(report_);
    return result;
  }

  ImportOptions options_;
  ImportReport report_;
  od::parser sub_parser_;
  std::string scratch_, name_scratch_;
  std::string last_pid_, last_tid_;  // the previous op event's thread
  uint32_t last_thread_ = 0;
  std::unordered_map<std::string, bool> op_names_;
  std::unordered_map<std::string, uint32_t> threads_;
  std::unordered_map<std::string, uint32_t> keys_;
  std::vector<KeyInfo> infos_;
  std::vector<EventRec> records_;
  std::unordered_map<std::string, size_t> issue_index_;
  bool saw_concrete_ = false;
  int64_t calls_ = 0;  // the op events' counts, summed
};

}  // namespace detail::kineto

namespace detail::kineto {

// Runs the importer over `data`, growing its capacity by simdjson's padding first (no copy when
// the string has room, as read_file's and gunzip's results usually do).
inline ImportResult import_text(std::string& data, const ImportOptions& options) {
  if (data.capacity() < data.size() + simdjson::SIMDJSON_PADDING) data.reserve(data.size() + simdjson::SIMDJSON_PADDING);
  Importer importer(options);
  return importer.run(data.data(), data.size(), data.capacity());
}

inline optrace::kineto::TraceFormat detect_text(std::string& data) {
  using optrace::kineto::TraceFormat;
  if (data.capacity() < data.size() + simdjson::SIMDJSON_PADDING) data.reserve(data.size() + simdjson::SIMDJSON_PADDING);
  od::parser parser;
  od::document doc;
  if (parser.iterate(data.data(), data.size(), data.capacity()).get(doc)) return TraceFormat::Unknown;
  od::json_type t;
  if (doc.type().get(t)) return TraceFormat::Unknown;
  if (t == od::json_type::array) return TraceFormat::Kineto;
  od::object root;
  if (t != od::json_type::object || doc.get_object().get(root)) return TraceFormat::Unknown;
  bool empty = true;
  for (auto member : root) {
    empty = false;
    od::field f;
    std::string_view key;
    if (std::move(member).get(f) || f.unescaped_key().get(key)) return TraceFormat::Unknown;
    if (key == "traceEvents") return TraceFormat::Kineto;
    od::object entry;
    if (f.value().get_object().get(entry)) continue;
    for (auto inner : entry) {
      od::field g;
      std::string_view k;
      if (std::move(inner).get(g) || g.unescaped_key().get(k)) return TraceFormat::Unknown;
      if (k == "unique_inputs" || k == "total_calls") return TraceFormat::HfOpTrace;
    }
  }
  return empty ? TraceFormat::HfOpTrace : TraceFormat::Unknown;
}

// Saturates at INT64_MAX for shapes whose strides do not fit (read from a file, no tensor has them).
inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    strides[k] = s;
    if (__builtin_mul_overflow(s, std::max<int64_t>(shape[k], 1), &s)) s = INT64_MAX;
  }
  return strides;
}

inline void write_ints(json::Writer& w, const std::vector<int64_t>& xs) {
  w.begin_array();
  for (int64_t x : xs) w.value(x);
  w.end_array();
}

// One argument in the profiler's words: "Input type", "Concrete Inputs".
inline void export_value(const std::string& dtype, const OpValue& v, std::string& type, std::string& concrete) {
  using Kind = OpValue::Kind;
  type = "Scalar";
  switch (v.kind()) {
    case Kind::Int: concrete = std::to_string(v.as_int()); return;
    case Kind::Float: concrete = ivalue_double(v.as_float()); return;
    case Kind::Bool: concrete = v.as_bool() ? "True" : "False"; return;
    case Kind::String: {
      const std::string& s = v.as_string();
      if (dtype == "<class 'torch.dtype'>") {
        if (auto t = scalar_type_from_python(s)) {
          concrete = std::to_string(static_cast<int>(*t));
          return;
        }
      } else if (dtype == "<class 'torch.layout'>") {
        if (auto n = layout_number(s)) {
          concrete = std::to_string(*n);
          return;
        }
      } else if (dtype == "<class 'torch.memory_format'>") {
        if (auto n = memory_format_number(s)) {
          concrete = std::to_string(*n);
          return;
        }
      } else if (dtype == "<class 'complex'>") {
        Scalar c = parse_scalar(s);
        if (c.kind == Scalar::Kind::Complex) {
          concrete = ivalue_complex(c.d, c.imag);
          return;
        }
      }
      type.clear();  // str, device, ...: the profiler writes "" and no value; optrace writes the value
      concrete = s;
      return;
    }
    case Kind::List: {
      bool scalars = true;
      for (const OpValue& item : v.as_list())
        scalars = scalars && (item.kind() == Kind::Int || item.kind() == Kind::Float || item.kind() == Kind::Bool);
      if (scalars) {
        type = "ScalarList";
        concrete = "[";
        std::string ignored, text;
        for (const OpValue& item : v.as_list()) {
          if (concrete.size() > 1) concrete += ", ";
          export_value("", item, ignored, text);
          concrete += text;
        }
        concrete += "]";
      } else {
        type = "GenericList";
        json::Writer w;
        v.write(w);
        concrete = w.take();
      }
      return;
    }
    case Kind::None: {
      static const char* scalar_types[] = {"<class 'int'>", "<class 'float'>", "<class 'bool'>", "<class 'complex'>",
                                           "<class 'torch.dtype'>", "<class 'torch.layout'>", "<class 'torch.memory_format'>"};
      bool scalar = false;
      for (const char* s : scalar_types) scalar = scalar || dtype == s;
      if (!scalar) type.clear();
      concrete.clear();
      return;
    }
    default: type.clear(); concrete.clear(); return;
  }
}

inline void export_input(json::Writer& w, const std::string& op, const OpInput& in, int64_t ts, int64_t id,
                         const optrace::kineto::ExportOptions& options) {
  size_t dot = op.find('.');
  std::string base = op.substr(0, dot);
  std::string overload = dot == std::string::npos ? "" : op.substr(dot + 1);
  if (overload == "default") overload.clear();
  std::vector<std::string> types, concretes;
  bool any_list = false;
  for (size_t k = 0; k < in.input_shapes.size(); ++k) {
    std::string type, concrete;
    if (in.input_shapes[k]) {
      auto name = type_name_of_python_dtype(in.input_dtypes[k]);
      type = name ? *name : in.input_dtypes[k];
    } else if (in.non_tensor_inputs[k].kind() == OpValue::Kind::TensorListRef) {
      type = "TensorList";
      any_list = true;
    } else {
      export_value(in.input_dtypes[k], in.non_tensor_inputs[k], type, concrete);
    }
    types.push_back(std::move(type));
    concretes.push_back(std::move(concrete));
  }
  auto list_of = [&](size_t k) -> const TensorListInfo* {
    const OpValue& v = in.non_tensor_inputs[k];
    return v.kind() == OpValue::Kind::TensorListRef ? in.tensor_list(v.as_tensor_list_ref()) : nullptr;
  };
  w.begin_object();
  w.key("ph").value("X").key("cat").value("cpu_op").key("name").value("aten::" + base);
  w.key("pid").value(options.pid()).key("tid").value(options.tid()).key("ts").value(ts).key("dur").value(int64_t{1});
  w.key("args").begin_object();
  w.key("External id").value(id);
  w.key("Input Dims").begin_array();
  for (size_t k = 0; k < types.size(); ++k) {
    if (in.input_shapes[k]) {
      write_ints(w, *in.input_shapes[k]);
    } else if (const TensorListInfo* list = list_of(k)) {
      w.begin_array();
      for (const auto& s : list->shapes) write_ints(w, s ? *s : std::vector<int64_t>{});
      w.end_array();
    } else {
      w.begin_array().end_array();
    }
  }
  w.end_array();
  w.key("Input type").begin_array();
  for (const auto& t : types) w.value(t);
  w.end_array();
  w.key("Input Strides").begin_array();
  for (size_t k = 0; k < types.size(); ++k) {
    if (in.input_shapes[k]) {
      bool given = k < in.input_strides.size() && in.input_strides[k];
      write_ints(w, given ? *in.input_strides[k] : contiguous_strides(*in.input_shapes[k]));
    } else if (const TensorListInfo* list = list_of(k)) {
      w.begin_array();
      for (const auto& s : list->shapes) write_ints(w, s ? contiguous_strides(*s) : std::vector<int64_t>{});
      w.end_array();
    } else {
      w.begin_array().end_array();
    }
  }
  w.end_array();
  w.key("Concrete Inputs").begin_array();
  for (const auto& c : concretes) w.value(c);
  w.end_array();
  if (any_list) {
    w.key("TensorList dtypes").begin_array();
    for (size_t k = 0; k < types.size(); ++k) {
      const TensorListInfo* list = list_of(k);
      if (!list) {
        w.null();
        continue;
      }
      w.begin_array();
      for (size_t e = 0; e < list->dtypes.size(); ++e) {
        auto name = type_name_of_python_dtype(list->dtypes[e]);
        w.value(list->shapes[e] ? (name ? *name : list->dtypes[e]) : std::string());
      }
      w.end_array();
    }
    w.end_array();
  }
  w.key("Overload name").value(overload);
  w.key("count").value(in.count);
  w.end_object();
  w.end_object();
}

}  // namespace detail::kineto

namespace kineto {

/// Imports the Kineto trace `text` (Trace Event Format: `{"traceEvents": [...]}` or a bare list of
/// events). Throws JsonError naming the JSON path of what it cannot read, e.g.
/// `optrace: JsonError at /traceEvents/12/args/Input Dims: expected a list, got string "x"`.
/// Events it reads but cannot use are not errors: they are counted in the report.
///
/// Example:
///   auto [trace, report] = optrace::kineto::parse(text);
inline ImportResult parse(std::string_view text, const ImportOptions& options = {}) {
  std::string data;
  data.reserve(text.size() + simdjson::SIMDJSON_PADDING);
  data.assign(text.data(), text.size());
  return detail::kineto::import_text(data, options);
}

/// Imports the Kineto trace at `path` (`*.pt.trace.json`, or gzip-compressed `*.json.gz`; the
/// file's first bytes decide). Throws IoError if it cannot be read or inflated, JsonError as
/// `parse`.
///
/// Example:
///   optrace::kineto::ImportResult r = optrace::kineto::load("step.pt.trace.json.gz");
///   r.trace.save("hf_op_trace.json");
///   std::cerr << r.report.to_string();
inline ImportResult load(const std::string& path, const ImportOptions& options = {}) {
  {
    optrace::detail::MappedFile file(path, simdjson::SIMDJSON_PADDING);
    if (file.data() && !optrace::detail::is_gzip(std::string_view(file.data(), file.size()))) {
      detail::kineto::Importer importer(options);
      return importer.run(file.data(), file.size(), file.capacity());
    }
  }
  std::string data = optrace::detail::read_file_maybe_gzip(path);
  return detail::kineto::import_text(data, options);
}

/// What the file at `path` (gzip-compressed or not) holds: a Kineto trace (an object with
/// "traceEvents", or a list of events), an hf op trace (ops mapping to objects with
/// "unique_inputs"), or neither (also for malformed JSON). Throws IoError if it cannot be read.
inline TraceFormat detect_format(const std::string& path) {
  std::string data = optrace::detail::read_file_maybe_gzip(path);
  return detail::kineto::detect_text(data);
}

/// Loads the op trace at `path` whatever its format: an hf op trace (`OpTrace::load`; the report
/// then only says `format = "hf_op_trace"` and the calls), or a Kineto trace (`kineto::load`).
/// Throws IoError, or JsonError for a file that is neither (at "/") or malformed.
///
/// Example (what `optrace convert` does):
///   optrace::kineto::load_any("trace.pt.trace.json.gz").trace.save("hf_op_trace.json");
inline ImportResult load_any(const std::string& path, const ImportOptions& options = {}) {
  std::string data = optrace::detail::read_file_maybe_gzip(path);
  TraceFormat format = detail::kineto::detect_text(data);
  if (format == TraceFormat::Kineto) return detail::kineto::import_text(data, options);
  if (format == TraceFormat::Unknown) {
    // Let the Kineto reader name the problem (malformed JSON, or not a trace at all).
    auto probe = json::Document::parse(data);
    throw JsonError("", "expected a Kineto trace (\"traceEvents\") or an hf op trace (ops with \"unique_inputs\"), got " +
                            probe->root().describe());
  }
  ImportResult result;
  result.trace = OpTrace::from_json(data);
  result.report.format = "hf_op_trace";
  result.report.kept = result.trace.total_calls();
  return result;
}

/// The op trace as a Kineto-style trace (Trace Event Format, which chrome://tracing, Perfetto and
/// torch's trace tools load): `{"traceEvents": [...], "displayTimeUnit": "ms"}` with one `cpu_op`
/// complete event per unique input, in the trace's order (ops first-seen, inputs first-seen) on
/// one `pid`/`tid`, `ts` 0, 2, 4, ... and `dur` 1 microsecond (the trace holds no timing).
/// Each event's args hold what the profiler writes ("Input Dims", "Input type", "Input
/// Strides", "Concrete Inputs") plus optrace's "Overload name", "count" (the input's calls),
/// and for tensor lists "TensorList dtypes" (the profiler records none); calls dropped by
/// `max_unique_inputs` become an event with "Dropped calls". `kineto::parse` reads it back to the
/// same trace (kwargs, input_devices and input_value_ranges are not written).
///
/// Example:
///   optrace::kineto::save(tracer.trace(), "optrace.pt.trace.json");  // open it in Perfetto
inline std::string to_json(const OpTrace& trace, const ExportOptions& options = {}) {
  json::Writer w;
  w.begin_object();
  w.key("schemaVersion").value(int64_t{1});
  w.key("traceName").value("optrace");
  w.key("displayTimeUnit").value("ms");
  w.key("traceEvents").begin_array();
  w.begin_object().key("ph").value("M").key("name").value("process_name").key("pid").value(options.pid());
  w.key("tid").value(options.tid()).key("args").begin_object().key("name").value("optrace").end_object().end_object();
  int64_t slot = 0;
  for (const OpEntry& e : trace.ops()) {
    for (const OpInput& in : e.unique_inputs) {
      detail::kineto::export_input(w, e.name, in, 2 * slot, slot + 1, options);
      ++slot;
    }
    if (e.dropped_calls > 0) {
      size_t dot = e.name.find('.');
      std::string overload = dot == std::string::npos ? "" : e.name.substr(dot + 1);
      if (overload == "default") overload.clear();
      w.begin_object().key("ph").value("X").key("cat").value("cpu_op").key("name").value("aten::" + e.name.substr(0, dot));
      w.key("pid").value(options.pid()).key("tid").value(options.tid()).key("ts").value(2 * slot).key("dur").value(int64_t{1});
      w.key("args").begin_object().key("External id").value(slot + 1).key("Overload name").value(overload);
      w.key("Dropped calls").value(e.dropped_calls).end_object().end_object();
      ++slot;
    }
  }
  w.end_array();
  w.end_object();
  return w.take();
}

/// Writes `to_json(trace, options)` to `path` atomically. Throws IoError.
inline void save(const OpTrace& trace, const std::string& path, const ExportOptions& options = {}) {
  optrace::detail::write_file_atomic(path, to_json(trace, options));
}

}  // namespace kineto
}  // namespace optrace
