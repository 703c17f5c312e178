// optrace/detail/common/dispatcher.hpp: what optrace knows about dispatcher operators, in one place
#pragma once
// OpTracer (recording), the Kineto importer (matching profiler events to overloads) and replay
// (calling ops) share these rules; each is written here once:
// - names: the op-trace schema's `add.Tensor` / `addmm.default` (OpOverload.__name__: no
//   namespace, `default` for the empty overload), and back to a dispatcher name;
// - the decomposition rule: ops whose CompositeImplicitAutograd kernel runs are never seen by the
//   reference tracer (a TorchDispatchMode sees their parts: `linear` is `t` + `addmm`);
// - the reference tracer's renamings (`reference_op_for`);
// - which arguments are positional (the ones before the first keyword-only one);
// - each argument's type in Python's words (`<class 'int'>`).
// Facts are worked out once per operator (`op_info`) and kept: operators live as long as the
// process, and OpTracer's hot path reads them through a pointer.

#include <optrace/detail/common/compat.hpp>

#include <ATen/core/dispatch/Dispatcher.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optrace::detail {

// ---- argument types ----

/// What an argument of a schema takes, as Python sees it.
enum class ArgKind { Tensor, Int, Float, Bool, Number, Complex, Dtype, Layout, MemoryFormat, List, Tuple, String, Device,
                     Generator, None, Other };

/// An argument's type: optional or not, what it takes, and for a list what its elements take.
struct ArgType {
  bool optional = false;
  ArgKind kind = ArgKind::Other;
  ArgKind element = ArgKind::Other;  ///< List: the elements' kind (optional stripped)
  bool element_optional = false;     ///< List: `Tensor?[]`, `int?[]`
};

inline ArgKind arg_kind_of(const c10::TypePtr& t) {
  switch (t->kind()) {
    case c10::TypeKind::TensorType: return ArgKind::Tensor;
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType: return ArgKind::Int;
    case c10::TypeKind::FloatType:
    case c10::TypeKind::SymFloatType: return ArgKind::Float;
    case c10::TypeKind::BoolType: return ArgKind::Bool;
    case c10::TypeKind::NumberType: return ArgKind::Number;
    case c10::TypeKind::ComplexType: return ArgKind::Complex;
    case c10::TypeKind::ScalarTypeType: return ArgKind::Dtype;
    case c10::TypeKind::LayoutType: return ArgKind::Layout;
    case c10::TypeKind::MemoryFormatType: return ArgKind::MemoryFormat;
    case c10::TypeKind::ListType: return ArgKind::List;
    case c10::TypeKind::TupleType: return ArgKind::Tuple;
    case c10::TypeKind::StringType: return ArgKind::String;
    case c10::TypeKind::DeviceObjType: return ArgKind::Device;
    case c10::TypeKind::GeneratorType: return ArgKind::Generator;
    case c10::TypeKind::NoneType: return ArgKind::None;
    // SymBool (libtorch 2.1+) has no TypeKind of its own before it: a bool for Python.
    default: return t->str() == "SymBool" ? ArgKind::Bool : ArgKind::Other;
  }
}

inline ArgType arg_type(const c10::Argument& a) {
  ArgType out;
  c10::TypePtr t = a.real_type();
  if (auto o = t->cast<c10::OptionalType>()) {
    out.optional = true;
    t = o->getElementType();
  }
  out.kind = arg_kind_of(t);
  if (auto l = t->cast<c10::ListType>()) {
    c10::TypePtr e = l->getElementType();
    if (auto o = e->cast<c10::OptionalType>()) {
      out.element_optional = true;
      e = o->getElementType();
    }
    out.element = arg_kind_of(e);
  }
  return out;
}

/// `str(type(x))` for a value `x` of kind `k`, as the op-trace schema's `input_dtypes` holds it.
/// A `Number` argument is written as a float (what the profiler and Python's scalars give).
inline const char* python_type_name(ArgKind k) {
  switch (k) {
    case ArgKind::Int: return "<class 'int'>";
    case ArgKind::Float:
    case ArgKind::Number: return "<class 'float'>";
    case ArgKind::Bool: return "<class 'bool'>";
    case ArgKind::Complex: return "<class 'complex'>";
    case ArgKind::Dtype: return "<class 'torch.dtype'>";
    case ArgKind::Layout: return "<class 'torch.layout'>";
    case ArgKind::MemoryFormat: return "<class 'torch.memory_format'>";
    case ArgKind::List: return "<class 'list'>";
    case ArgKind::Tuple: return "<class 'tuple'>";
    case ArgKind::String: return "<class 'str'>";
    case ArgKind::Device: return "<class 'torch.device'>";
    case ArgKind::Generator: return "<class 'torch._C.Generator'>";
    case ArgKind::None: return "<class 'NoneType'>";
    default: return "<class 'object'>";
  }
}

/// Whether `type` (an `input_dtypes` entry) names a Python scalar type the profiler records a
/// value for: int, float, bool, complex, dtype, layout, memory format.
inline bool is_python_scalar_type(std::string_view type) {
  for (ArgKind k : {ArgKind::Int, ArgKind::Float, ArgKind::Bool, ArgKind::Complex, ArgKind::Dtype, ArgKind::Layout,
                    ArgKind::MemoryFormat})
    if (type == python_type_name(k)) return true;
  return false;
}

// ---- names ----

/// The op-trace name of a dispatcher op: ("aten::add", "Tensor") -> "add.Tensor",
/// ("aten::addmm", "") -> "addmm.default". The namespace is dropped, as OpOverload.__name__ does.
inline std::string display_name(std::string_view qualified, std::string_view overload) {
  const size_t colons = qualified.find("::");
  if (colons != std::string_view::npos) qualified.remove_prefix(colons + 2);
  std::string out(qualified);
  out += '.';
  out += overload.empty() ? std::string_view("default") : overload;
  return out;
}

/// The dispatcher name of an op-trace name: "addmm.default" -> ("aten::addmm", ""),
/// "add.Tensor" -> ("aten::add", "Tensor"), "myops::f.default" -> ("myops::f", ""). A name
/// without a namespace is aten's; one without a dot has the empty overload.
inline c10::OperatorName dispatcher_name(std::string_view display) {
  std::string name, overload;
  const size_t colons = display.find("::");
  const size_t dot = display.rfind('.');
  if (dot == std::string_view::npos || (colons != std::string_view::npos && dot < colons)) {
    name = std::string(display);
  } else {
    name = std::string(display.substr(0, dot));
    overload = std::string(display.substr(dot + 1));
  }
  if (overload == "default") overload.clear();
  if (colons == std::string_view::npos) name = "aten::" + name;
  return c10::OperatorName(std::move(name), std::move(overload));
}

/// The op's name without namespace and overload: "aten::scatter_add.default" -> "scatter_add".
inline std::string base_name(std::string_view display) {
  const size_t colons = display.find("::");
  if (colons != std::string_view::npos) display.remove_prefix(colons + 2);
  return std::string(display.substr(0, display.find('.')));
}

// ---- the reference tracer's view ----

/// Whether the op's CompositeImplicitAutograd kernel is what runs: it fills the Autograd and
/// backend slots that have no kernel of their own. (hasKernelForDispatchKey(Autograd) is true for
/// it too, so that one tells nothing.) Such ops decompose before the reference tracer sees them.
inline bool decomposes(const c10::OperatorHandle& h) {
  using K = c10::DispatchKey;
  return h.hasKernelForDispatchKey(K::CompositeImplicitAutograd) && !h.hasKernelForDispatchKey(K::AutogradCPU) &&
         !h.hasKernelForDispatchKey(K::CPU) && !h.hasKernelForDispatchKey(K::CompositeExplicitAutograd);
}

/// The op the reference tracer records in place of `name` when it differs; a call is then
/// recorded as that op, with as many leading arguments as its schema has. nullopt for every
/// other op. The rules (see compat.hpp for why each holds):
/// - `_reshape_alias(self, size, stride)` is `view(self, size)` on libtorch >= 2.0.
inline std::optional<c10::OperatorName> reference_op_for(const c10::OperatorName& name) {
  if (kReshapeAliasRecordedAsView && name.name == "aten::_reshape_alias" && name.overload_name.empty())
    return c10::OperatorName("aten::view", "");
  return std::nullopt;
}

// ---- per-operator facts ----

/// What optrace knows about one dispatcher op. Made once per op by `op_info`, never freed.
struct OpInfo {
  c10::OperatorHandle handle;
  const c10::FunctionSchema* schema = nullptr;
  std::string name;  ///< "addmm.default"
  std::string base;  ///< "addmm"
  bool decomposes = false;
  size_t positional = 0;      ///< arguments before the first keyword-only one
  std::vector<ArgType> args;  ///< one per schema argument
  /// The op the reference tracer records this one as (reference_op_for), or nullptr.
  const OpInfo* recorded_as = nullptr;

  /// The op calls are recorded under: `recorded_as`, or this one.
  const OpInfo& as_recorded() const { return recorded_as != nullptr ? *recorded_as : *this; }

  explicit OpInfo(c10::OperatorHandle h) : handle(std::move(h)) {}
};

/// The facts of the dispatcher op `name`; nullptr if the dispatcher has no such op with a schema.
/// Thread-safe; the first call for an op takes a lock, later ones too (callers cache the pointer).
inline const OpInfo* op_info(const c10::OperatorName& name) {
  static std::mutex mutex;
  static auto* infos = new std::unordered_map<std::string, std::unique_ptr<OpInfo>>();  // used at exit: never freed
  const OpInfo* recorded_as = nullptr;
  if (auto reference = reference_op_for(name)) recorded_as = op_info(*reference);  // before taking the lock
  std::string key = name.name + "." + name.overload_name;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = infos->find(key);
  if (it != infos->end()) return it->second.get();
  auto handle = c10::Dispatcher::singleton().findSchema(name);
  if (!handle || !handle->hasSchema()) return infos->emplace(key, nullptr).first->second.get();
  auto info = std::make_unique<OpInfo>(*handle);
  const c10::FunctionSchema& schema = handle->schema();
  info->schema = &schema;
  info->name = display_name(name.name, name.overload_name);
  info->base = base_name(info->name);
  info->decomposes = decomposes(*handle);
  const auto& args = schema.arguments();
  info->positional = args.size();
  while (info->positional > 0 && args[info->positional - 1].kwarg_only()) --info->positional;
  for (const auto& a : args) info->args.push_back(arg_type(a));
  info->recorded_as = recorded_as;
  return infos->emplace(key, std::move(info)).first->second.get();
}

/// The facts of the op named `display` as the op-trace schema names it ("add.Tensor"); nullptr
/// if the dispatcher has no such op.
inline const OpInfo* find_op(std::string_view display) { return op_info(dispatcher_name(display)); }

/// Every overload of the op `qualified` ("aten::add"), the default overload first; empty if the
/// dispatcher knows none. The index of all ops is built on the first call.
inline const std::vector<const OpInfo*>& overloads_of(std::string_view qualified) {
  static std::once_flag once;
  static auto* index = new std::unordered_map<std::string, std::vector<const OpInfo*>>();  // never freed
  std::call_once(once, [] {
    for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
      const OpInfo* info = op_info(name);
      if (info == nullptr) continue;
      auto& list = (*index)[name.name];
      if (name.overload_name.empty()) list.insert(list.begin(), info);
      else list.push_back(info);
    }
  });
  static const std::vector<const OpInfo*> none;
  auto it = index->find(std::string(qualified));
  return it == index->end() ? none : it->second;
}

}  // namespace optrace::detail
