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
// The facts themselves (OpInfo, the names, the context rules) are libtorch-free, in
// op_schema.hpp; this header fills them from the live dispatcher. They are worked out once per
// operator (`op_info`) and kept: operators live as long as the process, and OpTracer's hot path
// reads them through a pointer.

#include <optrace/detail/common/compat.hpp>
#include <optrace/detail/common/op_schema.hpp>
#include <optrace/detail/common/string_map.hpp>

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

// ---- names ----

/// The dispatcher name of an op-trace name: "addmm.default" -> ("aten::addmm", ""),
/// "add.Tensor" -> ("aten::add", "Tensor"), "myops::f.default" -> ("myops::f", ""). A name
/// without a namespace is aten's; one without a dot has the empty overload.
inline c10::OperatorName dispatcher_name(std::string_view display) {
  auto [name, overload] = qualified_name(display);
  return c10::OperatorName(std::move(name), std::move(overload));
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

/// An argument's default as the Kineto importer compares with it (op_schema.hpp).
inline DefaultValue default_value_of(const c10::IValue& d) {
  DefaultValue out;
  using K = DefaultValue::Kind;
  if (d.isNone()) {
    out.kind = K::None;
  } else if (d.isInt()) {
    out.kind = K::Int;
    out.int_value = d.toInt();
  } else if (d.isDouble()) {
    out.kind = K::Double;
    out.real = d.toDouble();
  } else if (d.isBool()) {
    out.kind = K::Bool;
    out.bool_value = d.toBool();
  } else if (d.isComplexDouble()) {
    out.kind = K::Complex;
    out.real = d.toComplexDouble().real();
    out.imag = d.toComplexDouble().imag();
  } else if (d.isString()) {
    out.kind = K::String;
    out.text = d.toStringRef();
  } else if (d.isDevice()) {
    out.kind = K::Device;
    out.text = d.toDevice().str();
  } else if (d.isList()) {
    out.kind = K::List;
    for (const c10::IValue& item : d.toListRef()) out.items.push_back(default_value_of(item));
  }
  return out;
}

/// The live dispatcher's side of an OpInfo: what OpTracer and replay call through.
struct LiveOp {
  c10::OperatorHandle handle;
  const c10::FunctionSchema* schema = nullptr;
  explicit LiveOp(c10::OperatorHandle h) : handle(std::move(h)), schema(&handle.schema()) {}
};

inline bool contains_tensor_type(const c10::TypePtr& t) {
  if (t->kind() == c10::TypeKind::TensorType) return true;
  for (const c10::TypePtr& inner : t->containedTypes())
    if (contains_tensor_type(inner)) return true;
  return false;
}

// The index of the op's c10d process group argument (c10d's collective ops take one, of the
// custom class `__torch__.torch.classes.c10d.ProcessGroup`, on libtorch 1.13 as on 2.x), or -1.
inline int process_group_arg(const c10::FunctionSchema& schema) {
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].type()->kind() == c10::TypeKind::ClassType && args[i].type()->str() == "__torch__.torch.classes.c10d.ProcessGroup")
      return static_cast<int>(i);
  return -1;
}

// What PyTorch's operator-inputs logger decides from the schema (operator_inp_utils.py:
// non_compute_operator, and its __torch_dispatch__'s checks): OpInfo's returns_tensor,
// storage_arg, non_compute.
inline void set_logger_facts(const c10::FunctionSchema& schema, OpInfo& info) {
  const auto& args = schema.arguments();
  const auto& returns = schema.returns();
  info.returns_tensor = false;
  for (const c10::Argument& r : returns) info.returns_tensor = info.returns_tensor || contains_tensor_type(r.type());
  bool tensor_arg = false;
  for (size_t i = 0; i < args.size(); ++i) {
    tensor_arg = tensor_arg || contains_tensor_type(args[i].type());
    if (info.storage_arg < 0 && args[i].type()->kind() == c10::TypeKind::StorageType) info.storage_arg = static_cast<int>(i);
  }
  const std::string full = schema.name() + "." + schema.overload_name();
  if (!tensor_arg || full.find("_like") != std::string::npos) {
    info.non_compute = true;  // constructors and *_like
    return;
  }
  if (schema.is_mutable()) return;  // in-place writes are kept
  const c10::Argument* out = nullptr;
  int tensor_outputs = 0;
  for (const c10::Argument& r : returns)
    if (r.type()->kind() == c10::TypeKind::TensorType) {
      ++tensor_outputs;
      out = &r;
    }
  if (tensor_outputs != 1 || out->alias_info() == nullptr) return;
  for (const c10::Argument& a : args) {
    if (a.type()->kind() != c10::TypeKind::TensorType || a.alias_info() == nullptr) continue;
    for (const auto& set : a.alias_info()->beforeSets())
      if (out->alias_info()->afterSets().count(set)) info.non_compute = true;  // a view of an input
  }
}

/// The facts of the dispatcher op `name`; nullptr if the dispatcher has no such op with a schema.
/// Thread-safe; the first call for an op takes a lock, later ones too (callers cache the pointer).
inline const OpInfo* op_info(const c10::OperatorName& name) {
  static std::mutex mutex;
  static auto* infos = new std::unordered_map<std::string, std::unique_ptr<OpInfo>>();  // used at exit: never freed
  static auto* lives = new std::vector<std::unique_ptr<LiveOp>>();
  // The rules' ops before taking the lock (no rule records an op that has rules of its own).
  const std::string display = display_name(name.name, name.overload_name);
  std::vector<OpInfo::Rule> rules =
      rules_of(display, kTorch2Branches, [](const char* recorded) { return op_info(dispatcher_name(recorded)); });
  std::string key = name.name + "." + name.overload_name;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = infos->find(key);
  if (it != infos->end()) return it->second.get();
  auto handle = c10::Dispatcher::singleton().findSchema(name);
  if (!handle || !handle->hasSchema()) return infos->emplace(key, nullptr).first->second.get();
  lives->push_back(std::make_unique<LiveOp>(*handle));
  auto info = std::make_unique<OpInfo>();
  info->live = lives->back().get();
  const c10::FunctionSchema& schema = *info->live->schema;
  info->qualified = name.name;
  info->overload = name.overload_name;
  info->name = display;
  info->base = base_name(info->name);
  info->decomposes = decomposes(*handle);
  const auto& args = schema.arguments();
  info->positional = args.size();
  while (info->positional > 0 && args[info->positional - 1].kwarg_only()) --info->positional;
  info->defaults_from = info->positional;
  while (info->defaults_from > 0 && args[info->defaults_from - 1].default_value()) --info->defaults_from;
  for (const auto& a : args) {
    info->args.push_back(arg_type(a));
    info->defaults.push_back(a.default_value() ? std::optional<DefaultValue>(default_value_of(*a.default_value())) : std::nullopt);
    info->arg_names.push_back(a.name());
  }
  set_logger_facts(schema, *info);
  info->process_group_arg = process_group_arg(schema);
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
  // A function-local static, not std::call_once: libstdc++'s call_once costs a pthread_once call
  // per lookup, and the importer looks up every op name it meets.
  static const auto* index = [] {
    auto* built = new StringMap<std::vector<const OpInfo*>>();  // never freed
    for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
      const OpInfo* info = op_info(name);
      if (info == nullptr) continue;
      std::vector<const OpInfo*>& list = built->find_or_insert(name.name);
      if (name.overload_name.empty()) list.insert(list.begin(), info);
      else list.push_back(info);
    }
    return built;
  }();
  static const std::vector<const OpInfo*> none;
  const std::vector<const OpInfo*>* list = index->find(qualified);
  return list == nullptr ? none : *list;
}

/// Every op of the live dispatcher (with a schema).
inline std::vector<const OpInfo*> all_ops() {
  std::vector<const OpInfo*> out;
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames())
    if (const OpInfo* info = op_info(name)) out.push_back(info);
  return out;
}

/// The live dispatcher as the Kineto importer's catalog.
inline const OpCatalog& live_catalog() {
  struct Live final : OpCatalog {
    const OpInfo* find(std::string_view display) const override { return find_op(display); }
    const std::vector<const OpInfo*>& overloads_of(std::string_view qualified) const override {
      return detail::overloads_of(qualified);
    }
  };
  static const Live* live = new Live();
  return *live;
}

}  // namespace optrace::detail
