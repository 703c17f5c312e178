// optrace/detail/common/dispatcher.hpp: what optrace knows about dispatcher operators, in one place
#pragma once
// OpTracer (recording), the Kineto importer (matching profiler events to overloads) and replay
// (calling ops) share these rules; each is written here once:
// - names: the op-trace schema's `add.Tensor` / `addmm.default` (OpOverload.__name__: no
//   namespace, `default` for the empty overload), and back to a dispatcher name;
// - the decomposition rule: ops whose CompositeImplicitAutograd kernel runs are never seen by the
//   reference tracer (a TorchDispatchMode sees their parts: `linear` is `t` + `addmm`);
// - the reference tracer's view of composite kernels' subclass branches (`context_rules`);
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

/// Where the reference tracer sees a different call than a C++ program runs. CompositeImplicit-
/// Autograd kernels (and the backward helpers that are such ops) branch on
/// `at::isTensorSubclassLike`, which is true for every tensor while a Python dispatch mode is
/// active: under the reference tracer they take their functional branch, in C++ the in-place or
/// out= one. Each rule names the composites open around the call, the op the C++ branch runs
/// directly in them and what the other branch runs instead: another op taking the same leading
/// arguments, and/or one bool argument with another value. Every call site of those predicates
/// in PyTorch 1.13 and 2.6 was read; the README ("What OpTracer records") lists them all, with
/// the branches no rule can express (another sequence of ops) and the test of each rule.
struct ContextRule {
  /// The decomposing ops open around the call, outermost first, by name without overload; the
  /// last one's kernel makes the call. Empty: none open (a backward formula's direct call).
  std::vector<std::string> within;
  const char* op;            ///< what a C++ program runs: "add_.Tensor"
  const char* recorded;      ///< what the reference records: "add.Tensor" (may be `op`)
  int set_arg = -1;          ///< an argument of `op` the reference gets with another value, or -1
  bool set_to = false;       ///< that value
  bool since_2_0 = false;    ///< the branch exists from libtorch 2.0 (not in 1.13)
  /// Made by the autograd engine itself, between backward nodes (`within` empty): adding up the
  /// gradients that several uses of a tensor give it.
  bool engine = false;
};

inline const std::vector<ContextRule>& context_rules() {
  static const auto* rules = new std::vector<ContextRule>{
      // Forward (inference).
      {{"linear"}, "add_.Tensor", "add.Tensor"},  // output.add_(bias) after matmul
      {{"reshape"}, "_reshape_alias.default", "view.default", -1, false, true},  // view(self, size)
      {{"_scaled_dot_product_attention_math"}, "add_.Tensor", "add.Tensor", -1, false, true},  // + attn_mask
      {{"linalg_matrix_rank"}, "sum.IntList_out", "sum.dim_IntList", -1, false, true},  // sum(S > tol, -1)
      {{"linalg_eigvalsh"}, "_linalg_eigh.default", "_linalg_eigh.default", 2, true},    // compute_v
      {{"linalg_svdvals"}, "_linalg_svd.default", "_linalg_svd.default", 2, true},       // compute_uv
      {{"linalg_eigvals"}, "_linalg_eigvals.default", "linalg_eig.default", -1, false, true},
      // Backward (loss.backward()): the helpers derivatives.yaml calls.
      {{"index_select_backward"}, "index_add_.default", "index_add.default"},
      {{"gather_backward"}, "scatter_add_.default", "scatter_add.default"},
      {{"cummaxmin_backward"}, "scatter_add_.default", "scatter_add.default"},
      {{"masked_select_backward"}, "masked_scatter_.default", "masked_scatter.default"},
      {{"trace_backward"}, "index_fill_.int_Tensor", "index_fill.int_Tensor"},
      {{"value_selecting_reduction_backward"}, "scatter_.src", "scatter.src"},
      {{}, "_index_put_impl_.default", "index_put.default"},  // index_backward (x[idx])
      // The engine's InputBuffer::add: old.add_(new), or old + new (2.x).
      {{}, "add_.Tensor", "add.Tensor", -1, false, true, true},
  };
  return *rules;
}

/// What optrace knows about one dispatcher op. Made once per op by `op_info`, never freed.
struct OpInfo {
  c10::OperatorHandle handle;
  const c10::FunctionSchema* schema = nullptr;
  std::string name;  ///< "addmm.default"
  std::string base;  ///< "addmm"
  bool decomposes = false;
  size_t positional = 0;      ///< arguments before the first keyword-only one
  std::vector<ArgType> args;  ///< one per schema argument
  /// The context rules for calls of this op (rarely more than one).
  struct Rule {
    std::vector<std::string> within;
    const OpInfo* recorded = nullptr;
    int set_arg = -1;
    bool set_to = false;
    bool engine = false;
  };
  std::vector<Rule> rules;

  /// The rule for a call made with `composites` open (outermost first), or nullptr.
  /// `between_nodes()`: whether the autograd engine made it outside any backward node; asked
  /// only for an engine rule (it reads libtorch's thread state).
  template <class BetweenNodes>
  const Rule* rule_within(const std::vector<const OpInfo*>& composites, BetweenNodes between_nodes) const {
    for (const Rule& r : rules) {
      if (r.within.empty() ? !composites.empty() : composites.size() < r.within.size()) continue;
      if (r.engine && !between_nodes()) continue;
      const size_t skip = composites.size() - r.within.size();
      bool match = true;
      for (size_t i = 0; i < r.within.size() && match; ++i) match = composites[skip + i]->base == r.within[i];
      if (match) return &r;
    }
    return nullptr;
  }

  explicit OpInfo(c10::OperatorHandle h) : handle(std::move(h)) {}
};

/// The facts of the dispatcher op `name`; nullptr if the dispatcher has no such op with a schema.
/// Thread-safe; the first call for an op takes a lock, later ones too (callers cache the pointer).
inline const OpInfo* op_info(const c10::OperatorName& name) {
  static std::mutex mutex;
  static auto* infos = new std::unordered_map<std::string, std::unique_ptr<OpInfo>>();  // used at exit: never freed
  // The rules' ops before taking the lock (no rule records an op that has rules of its own).
  std::vector<OpInfo::Rule> rules;
  std::string display;
  for (const ContextRule& rule : context_rules()) {
    if (rule.since_2_0 && !kTorch2Branches) continue;
    if (display.empty()) display = display_name(name.name, name.overload_name);
    if (display != rule.op) continue;
    const bool renames = std::string_view(rule.recorded) != rule.op;  // else: the op itself, set below
    const OpInfo* recorded = renames ? op_info(dispatcher_name(rule.recorded)) : nullptr;
    if (renames && recorded == nullptr) continue;  // not in this libtorch
    rules.push_back(OpInfo::Rule{rule.within, recorded, rule.set_arg, rule.set_to, rule.engine});
  }
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
  info->rules = std::move(rules);
  for (OpInfo::Rule& r : info->rules)
    if (r.recorded == nullptr) r.recorded = info.get();
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
