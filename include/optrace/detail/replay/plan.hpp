// optrace/detail/replay/plan.hpp: a recorded unique input turned into a dispatcher stack
#pragma once
// How replay rebuilds a call, and why:
// - The op is looked up by `name.overload` in the dispatcher's schema registry; its schema, not
//   the trace's type strings, decides how a recorded value becomes an IValue (an `int` recorded
//   for a `float` argument becomes a double, a string for a `ScalarType` a dtype, a number for a
//   `Tensor` a wrapped-number scalar tensor, as Python's argument parser would make it).
// - Arguments the trace left out (trailing ones equal to their default, keyword-only ones) get
//   their schema default, or the extended trace's recorded keyword value; `out=` tensors get
//   empty tensors that the kernel resizes.
// - Integer tensors are drawn in [0, 8) by default (MaterializeOptions), valid for most uses; ops
//   whose integer arguments index another argument get ranges from a table of per-op rules
//   (`kRangeRules`), computed from the recorded shapes and values before anything is allocated,
//   narrowed by the value ranges an extended trace recorded.

#include <optrace/detail/common/compat.hpp>
#include <optrace/detail/common/dispatcher.hpp>
#include <optrace/python_names.hpp>
#include <optrace/error.hpp>
#include <optrace/materialize.hpp>
#include <optrace/op_trace.hpp>

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace optrace::detail {

// ---------------------------------------------------------------------------------------------
// Per-op rules for integer arguments that must fit other arguments.

enum class RangeKind {
  index_dim,    // [0, size(source, dim)); dim from argument `dim` (an int; None: numel) or `fixed_dim`
  index_numel,  // [0, numel(source))
  index_bound,  // [0, value of int argument `dim`) (num_weights, num_classes; ignored when <= 0)
  classes,      // [0, C): C = size(source, 1) when source has 2+ dims, else size(source, 0)
  index_list,   // `target` is a Tensor?[]: its k-th element indexes dim k of source
  nonzero,      // [1, 8): a divisor
  offsets,      // sorted, first 0, last <= numel(source): embedding_bag's offsets
  sorted,       // sorted along the last dim: searchsorted's sequence, bucketize's boundaries
  view_storage, // `target`'s storage holds the view the op makes of it: sizes from argument
                // `source`, strides from `dim`, storage offset from `fixed_dim` (-1: target's own).
                // A traced input was often a view of a larger buffer (q, k, v of one projection).
};

struct RangeRule {
  std::string_view op;  // base name, in-place variant included by stripping a trailing '_'
  RangeKind kind;
  int target;           // the argument whose values are constrained
  int source = -1;      // the argument indexed
  int dim = -1;         // the argument giving the dim or the bound
  int fixed_dim = 0;
};

inline const std::vector<RangeRule>& range_rules() {
  using K = RangeKind;
  static const std::vector<RangeRule> rules = {
      {"embedding", K::index_dim, 1, 0, -1, 0},
      {"embedding_bag", K::index_dim, 1, 0, -1, 0},
      {"embedding_bag", K::offsets, 2, 1},
      {"_embedding_bag", K::index_dim, 1, 0, -1, 0},
      {"_embedding_bag", K::offsets, 2, 1},
      {"_embedding_bag_forward_only", K::index_dim, 1, 0, -1, 0},
      {"_embedding_bag_forward_only", K::offsets, 2, 1},
      {"embedding_dense_backward", K::index_bound, 1, -1, 2},
      {"embedding_backward", K::index_bound, 1, -1, 2},
      {"embedding_sparse_backward", K::index_bound, 1, -1, 2},
      {"embedding_renorm", K::index_dim, 1, 0, -1, 0},
      {"index_select", K::index_dim, 2, 0, 1},
      {"gather", K::index_dim, 2, 0, 1},
      {"scatter", K::index_dim, 2, 0, 1},
      {"scatter_add", K::index_dim, 2, 0, 1},
      {"scatter_reduce", K::index_dim, 2, 0, 1},
      {"index_add", K::index_dim, 2, 0, 1},
      {"index_copy", K::index_dim, 2, 0, 1},
      {"index_fill", K::index_dim, 2, 0, 1},
      {"index_reduce", K::index_dim, 2, 0, 1},
      {"take_along_dim", K::index_dim, 1, 0, 2},
      {"take", K::index_numel, 1, 0},
      {"put", K::index_numel, 1, 0},
      {"index", K::index_list, 1, 0},
      {"_unsafe_index", K::index_list, 1, 0},
      {"index_put", K::index_list, 1, 0},
      {"_index_put_impl", K::index_list, 1, 0},
      {"_unsafe_index_put", K::index_list, 1, 0},
      {"nll_loss", K::classes, 1, 0},
      {"nll_loss_forward", K::classes, 1, 0},
      {"nll_loss2d", K::classes, 1, 0},
      {"nll_loss2d_forward", K::classes, 1, 0},
      {"nll_loss_nd", K::classes, 1, 0},
      {"nll_loss_backward", K::classes, 2, 1},
      {"nll_loss2d_backward", K::classes, 2, 1},
      {"cross_entropy_loss", K::classes, 1, 0},
      {"multi_margin_loss", K::classes, 1, 0},
      {"multilabel_margin_loss", K::classes, 1, 0},
      {"multilabel_margin_loss_forward", K::classes, 1, 0},
      {"one_hot", K::index_bound, 0, -1, 1},
      {"div", K::nonzero, 1},
      {"floor_divide", K::nonzero, 1},
      {"remainder", K::nonzero, 1},
      {"fmod", K::nonzero, 1},
      {"searchsorted", K::sorted, 0},
      {"bucketize", K::sorted, 1},
      {"_reshape_alias", K::view_storage, 0, 1, 2, -1},
      {"as_strided", K::view_storage, 0, 1, 2, 3},
      {"as_strided_scatter", K::view_storage, 0, 2, 3, 4},
  };
  return rules;
}

// The rules that apply to op `base` (its in-place variant `base_` shares them).
inline std::vector<const RangeRule*> rules_for(std::string base) {
  std::vector<const RangeRule*> out;
  if (base.size() > 1 && base.back() == '_') base.pop_back();
  for (const RangeRule& r : range_rules())
    if (r.op == base) out.push_back(&r);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Op categories whose outputs are not compared.

// Ops whose results are drawn from the random state.
inline bool is_random_op(const std::string& base) {
  static const std::string_view names[] = {
      "bernoulli", "bernoulli_", "multinomial", "normal", "normal_", "uniform_", "exponential_", "geometric_",
      "cauchy_", "log_normal_", "random_", "poisson", "binomial", "_standard_gamma", "_sample_dirichlet",
      "rrelu", "rrelu_", "rrelu_with_noise", "rrelu_with_noise_", "_fused_dropout", "_fused_moving_avg_obs_fq_helper"};
  for (std::string_view n : names)
    if (n == base) return true;
  return base.rfind("rand", 0) == 0 || base.find("dropout") != std::string::npos;
}

// Ops whose results are (partly) uninitialized memory.
inline bool is_creation_op(const std::string& base) {
  return base.rfind("empty", 0) == 0 || base.rfind("new_empty", 0) == 0 || base.rfind("_empty", 0) == 0 ||
         base == "resize_" || base == "resize_as_" || base == "set_";
}

// ---------------------------------------------------------------------------------------------
// The plan of one call: how each schema argument is built, with tensors left as slots so that a
// replay can materialize fresh ones for every run of an in-place op and rebuild the stack.

// One tensor to materialize: its spec (device: the replay's, or CPU for a 0-dim tensor recorded
// on the CPU beside device tensors), its integer range and the fix-up it needs once filled.
// An argument the trace names the type of but has no value for (the profiler records no list
// values before PyTorch 2.1, no value of a wrapped Python number): the input cannot be rebuilt,
// so replay skips it; no kernel failed.
class NotRecorded : public ArgumentError {
 public:
  explicit NotRecorded(const std::string& what) : ArgumentError(what) {}
};

// An op the trace names but this libtorch's dispatcher lacks (PyTorch's logs name
// `aten.im2col_backward`, removed since): replay skips its inputs; no kernel failed.
class UnknownOp : public ArgumentError {
 public:
  explicit UnknownOp(const std::string& what) : ArgumentError(what) {}
};

// A dtype this libtorch does not have (a newer torch's, or a damaged trace's: the readers keep
// it as read): replay skips the input; no kernel failed.
class UnsupportedDtype : public ArgumentError {
 public:
  explicit UnsupportedDtype(const std::string& what) : ArgumentError(what) {}
};

struct TensorSlot {
  TensorSpec spec;
  std::optional<std::pair<int64_t, int64_t>> range;  // [low, high) for integer tensors
  std::optional<RangeKind> fixup;                    // offsets / sorted
  bool on_cpu = false;
  int64_t min_storage = 0;  // elements the storage must hold (view_storage), when above the spec's own
};

struct ArgPlan {
  enum class Kind { value, tensor, tensor_list, optional_tensor_list, out_tensor, wrapped_number };
  Kind kind = Kind::value;
  c10::IValue value;           // value; wrapped_number: the Scalar
  int64_t slot = -1;           // tensor
  std::vector<int64_t> slots;  // tensor lists, -1 for None
};

struct CallPlan {
  c10::OperatorHandle op;
  std::string base;  // "scatter_add"
  std::vector<ArgPlan> args;
  std::vector<TensorSlot> tensors;
  c10::ScalarType out_dtype = c10::ScalarType::Float;  // of empty out= tensors: the first input's
  bool mutates = false;  // writes an argument (in-place or out=): fresh inputs for every run

  explicit CallPlan(c10::OperatorHandle h) : op(std::move(h)) {}
};

class PlanBuilder {
 public:
  // `float_dtype`: ReplayOptions::float_dtype.
  PlanBuilder(const OpInput& in, c10::Device device, std::optional<c10::ScalarType> float_dtype = std::nullopt)
      : in_(in), device_(device), float_dtype_(float_dtype) {}

  CallPlan build(const std::string& op_name) {
    const OpInfo* info = find_op(op_name);
    if (info == nullptr) {
      const c10::OperatorName name = dispatcher_name(op_name);
      raise<UnknownOp>("this libtorch has no operator ", name.name, name.overload_name.empty() ? "" : ".",
                       name.overload_name, " (renamed or removed since the trace was recorded?)");
    }
    CallPlan plan(info->live->handle);
    plan.base = info->base;
    const c10::FunctionSchema& schema = plan.op.schema();
    plan.mutates = schema.is_mutable() || (!plan.base.empty() && plan.base.back() == '_');
    const auto& args = schema.arguments();
    const size_t positional = info->positional;
    const size_t recorded = in_.input_shapes.size();
    OPTRACE_CHECK(recorded <= positional, ArgumentError, "schema mismatch: ", recorded,
                  " positional arguments recorded, but ", schema, " takes ", positional);
    plan_ = &plan;
    for (const OpKwarg& k : in_.kwargs) {
      bool known = false;
      for (const c10::Argument& a : args) known = known || a.name() == k.name;
      OPTRACE_CHECK(known, ArgumentError, "schema mismatch: keyword argument '", k.name, "' recorded, but ", schema,
                    " has no such argument");
    }
    for (size_t i = 0; i < args.size(); ++i) {
      const c10::Argument& a = args[i];
      where_ = i;
      if (i < recorded) {
        std::optional<std::pair<int64_t, int64_t>> range;
        if (!in_.input_value_ranges.empty() && in_.input_value_ranges[i])
          range = std::make_pair(in_.input_value_ranges[i]->first, in_.input_value_ranges[i]->second + 1);
        const bool cpu = !in_.input_devices.empty() && in_.input_devices[i] && *in_.input_devices[i] == "cpu";
        const std::vector<int64_t>* strides =
            in_.input_strides.empty() || !in_.input_strides[i] ? nullptr : &*in_.input_strides[i];
        plan.args.push_back(convert(a, in_.input_shapes[i], strides, in_.input_dtypes[i], in_.non_tensor_inputs[i],
                                    range, cpu));
        continue;
      }
      const OpKwarg* kw = nullptr;
      for (const OpKwarg& k : in_.kwargs)
        if (k.name == a.name()) kw = &k;
      if (kw != nullptr) {
        plan.args.push_back(convert(a, kw->shape, kw->strides ? &*kw->strides : nullptr, kw->dtype, kw->value, std::nullopt, false));
      } else if (a.default_value()) {
        plan.args.push_back(value(*a.default_value()));
      } else if (a.is_out() || (a.alias_info() != nullptr && a.alias_info()->isWrite())) {
        ArgPlan p;
        p.kind = ArgPlan::Kind::out_tensor;
        plan.args.push_back(p);
      } else if (a.real_type()->kind() == c10::TypeKind::OptionalType) {
        plan.args.push_back(value(c10::IValue()));
      } else {
        fail("was not recorded and has no default");
      }
    }
    for (const TensorSlot& t : plan.tensors) {
      plan.out_dtype = t.spec.dtype;
      break;
    }
    apply_rules(plan);
    return plan;
  }

 private:
  template <class E = ArgumentError, class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    const c10::Argument& a = plan_->op.schema().arguments()[where_];
    raise<E>("argument ", where_, " '", a.name(), "' (", a.real_type()->str(), ") ", parts...);
  }

  static ArgPlan value(c10::IValue v) {
    ArgPlan p;
    p.value = std::move(v);
    return p;
  }

  // `strides`: recorded strides, or nullptr for contiguous ones.
  int64_t add_tensor(const std::vector<int64_t>& shape, const std::vector<int64_t>* strides, std::string_view dtype,
                     std::optional<std::pair<int64_t, int64_t>> range, bool cpu) {
    auto type = dtype_from_python(dtype);
    if (!type) fail<UnsupportedDtype>("has dtype \"", dtype, "\", which this libtorch does not know");
    if (float_dtype_ && c10::isFloatingType(*type)) type = float_dtype_;
    TensorSlot slot;
    slot.spec.sizes = shape;
    if (strides && strides->size() == shape.size()) slot.spec.strides = *strides;
    slot.spec.dtype = *type;
    slot.spec.device = device_;
    if (range && c10::isIntegralType(*type, /*includeBool=*/false) && range->first < range->second) slot.range = range;
    // A 0-dim tensor recorded on the CPU beside device tensors stays there (PyTorch lets CPU
    // scalars mix with CUDA tensors; a CUDA one would be a different call).
    slot.on_cpu = cpu && shape.empty() && device_.is_cuda();
    plan_->tensors.push_back(std::move(slot));
    return static_cast<int64_t>(plan_->tensors.size()) - 1;
  }

  ArgPlan convert(const c10::Argument& a, const OptionalShape& shape, const std::vector<int64_t>* strides,
                  const std::string& dtype, const OpValue& v, std::optional<std::pair<int64_t, int64_t>> range,
                  bool cpu) {
    if (!shape && v.is_none() && !dtype.empty() && dtype != python_type_name(ArgKind::None) && dtype != "None")
      raise<NotRecorded>("argument ", where_, " '", a.name(), "' (", a.real_type()->str(), "): the trace has ", dtype,
                         " without its value (the profiler did not record it)");
    if (shape) {
      c10::TypePtr t = a.real_type();
      if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
      if (t->kind() != c10::TypeKind::TensorType) fail("expects no tensor, but the trace has a ", dtype, " tensor");
      ArgPlan p;
      p.kind = ArgPlan::Kind::tensor;
      p.slot = add_tensor(*shape, strides, dtype, range, cpu);
      return p;
    }
    const auto n = a.N();  // c10::optional before libtorch 2.4, std::optional after
    return convert_value(a.real_type(), v, n ? std::optional<int32_t>(*n) : std::nullopt);
  }

  ArgPlan convert_value(c10::TypePtr type, const OpValue& v, std::optional<int32_t> n) {
    using K = c10::TypeKind;
    if (type->kind() == K::OptionalType) {
      if (v.is_none()) return value(c10::IValue());
      type = type->cast<c10::OptionalType>()->getElementType();
    }
    const auto kind = v.kind();
    const bool is_number = kind == OpValue::Kind::Int || kind == OpValue::Kind::Float || kind == OpValue::Kind::Bool;
    switch (type->kind()) {
      case K::TensorType: {
        if (!is_number) fail("expects a tensor, but the trace has ", describe(v));
        ArgPlan p = value(scalar(v));
        p.kind = ArgPlan::Kind::wrapped_number;
        return p;
      }
      case K::IntType:
      case K::SymIntType:
        if (kind == OpValue::Kind::Int) return value(v.as_int());
        if (kind == OpValue::Kind::Bool) return value(static_cast<int64_t>(v.as_bool()));
        if (kind == OpValue::Kind::Float && v.as_float() == static_cast<double>(static_cast<int64_t>(v.as_float())))
          return value(static_cast<int64_t>(v.as_float()));
        fail("expects an int, but the trace has ", describe(v));
      case K::FloatType:
      case K::SymFloatType:
        if (kind == OpValue::Kind::Float) return value(v.as_float());
        if (kind == OpValue::Kind::Int) return value(static_cast<double>(v.as_int()));
        fail("expects a float, but the trace has ", describe(v));
      case K::BoolType:
        if (kind == OpValue::Kind::Bool) return value(v.as_bool());
        if (kind == OpValue::Kind::Int) return value(v.as_int() != 0);
        fail("expects a bool, but the trace has ", describe(v));
      case K::NumberType:
        if (is_number) return value(scalar(v));
        if (kind == OpValue::Kind::String)
          if (auto c = parse_complex(v.as_string())) return value(c10::IValue(*c));
        fail("expects a number, but the trace has ", describe(v));
      case K::ComplexType:
        if (kind == OpValue::Kind::String)
          if (auto c = parse_complex(v.as_string())) return value(c10::IValue(*c));
        if (is_number) return value(c10::IValue(c10::complex<double>(scalar(v).toDouble(), 0.0)));
        fail("expects a complex number, but the trace has ", describe(v));
      case K::StringType:
        if (kind == OpValue::Kind::String) return value(c10::IValue(v.as_string()));
        fail("expects a string, but the trace has ", describe(v));
      case K::ScalarTypeType:
        if (kind == OpValue::Kind::Int) return value(v.as_int());
        if (kind == OpValue::Kind::String) {
          if (auto d = dtype_from_python(v.as_string()))
            return value(static_cast<int64_t>(float_dtype_ && c10::isFloatingType(*d) ? *float_dtype_ : *d));
          if (v.as_string().rfind("torch.", 0) == 0)
            fail<UnsupportedDtype>("is dtype \"", v.as_string(), "\", which this libtorch does not know");
        }
        fail("expects a dtype (\"torch.float16\"), but the trace has ", describe(v));
      case K::LayoutType:
        if (kind == OpValue::Kind::Int) return value(v.as_int());
        if (kind == OpValue::Kind::String)
          if (auto l = layout_from_python(v.as_string())) return value(static_cast<int64_t>(*l));
        fail("expects a layout (\"torch.strided\"), but the trace has ", describe(v));
      case K::MemoryFormatType:
        if (kind == OpValue::Kind::Int) return value(v.as_int());
        if (kind == OpValue::Kind::String)
          if (auto m = memory_format_from_python(v.as_string())) return value(static_cast<int64_t>(*m));
        fail("expects a memory format (\"torch.contiguous_format\"), but the trace has ", describe(v));
      case K::DeviceObjType:
        // Devices are the replay's: a call recorded with device="cuda:0" replays on the target.
        if (kind == OpValue::Kind::String) return value(c10::IValue(device_));
        fail("expects a device (\"cuda:0\"), but the trace has ", describe(v));
      case K::GeneratorType:
        if (v.is_none()) return value(c10::IValue());
        fail("expects a generator, which a trace cannot hold");
      case K::ListType: return convert_list(type->cast<c10::ListType>()->getElementType(), v, n);
      default:
        if (v.is_none()) return value(c10::IValue());
        // SymBool (libtorch 2.1+, no TypeKind before): a plain bool in a boxed call.
        if (type->str() == "SymBool" && kind == OpValue::Kind::Bool) return value(v.as_bool());
        fail("has a type replay does not build");
    }
  }

  ArgPlan convert_list(const c10::TypePtr& elem, const OpValue& v, std::optional<int32_t> n) {
    using K = c10::TypeKind;
    c10::TypePtr inner = elem;
    const bool optional_elems = elem->kind() == K::OptionalType;
    if (optional_elems) inner = elem->cast<c10::OptionalType>()->getElementType();
    if (inner->kind() == K::TensorType) {
      if (v.kind() != OpValue::Kind::TensorListRef) fail("expects a list of tensors, but the trace has ", describe(v));
      const TensorListInfo* list = in_.tensor_list(v.as_tensor_list_ref());
      if (list == nullptr) fail("refers to tensor list ", v.as_tensor_list_ref(), ", which the input's tensor_lists lacks");
      ArgPlan p;
      p.kind = optional_elems ? ArgPlan::Kind::optional_tensor_list : ArgPlan::Kind::tensor_list;
      for (int64_t i = 0; i < list->length(); ++i) {
        if (!list->shapes[i]) {
          if (!optional_elems) fail("holds None at position ", i, " of a list that takes tensors only");
          p.slots.push_back(-1);
        } else {
          const bool strided = !list->strides.empty() && list->strides[i];
          p.slots.push_back(add_tensor(*list->shapes[i], strided ? &*list->strides[i] : nullptr, list->dtypes[i],
                                       std::nullopt, false));
        }
      }
      return p;
    }
    std::vector<OpValue> items;
    if (v.kind() == OpValue::Kind::List) {
      items = v.as_list();
    } else if (v.kind() == OpValue::Kind::Int || v.kind() == OpValue::Kind::Float || v.kind() == OpValue::Kind::Bool) {
      items.assign(n && *n > 0 ? static_cast<size_t>(*n) : 1, v);  // int[2] given as one int
    } else {
      fail("expects a list, but the trace has ", describe(v));
    }
    std::vector<c10::IValue> converted;
    for (const OpValue& item : items) {
      ArgPlan p = convert_value(elem, item, std::nullopt);
      if (p.kind != ArgPlan::Kind::value) fail("holds a tensor inside a list of numbers");
      converted.push_back(std::move(p.value));
    }
    switch (inner->kind()) {
      case K::IntType:
      case K::SymIntType: {
        if (optional_elems) break;
        c10::List<int64_t> out;
        for (const auto& x : converted) out.push_back(x.toInt());
        return value(out);
      }
      case K::FloatType: {
        if (optional_elems) break;
        c10::List<double> out;
        for (const auto& x : converted) out.push_back(x.toDouble());
        return value(out);
      }
      case K::BoolType: {
        if (optional_elems) break;
        c10::List<bool> out;
        for (const auto& x : converted) out.push_back(x.toBool());
        return value(out);
      }
      default: break;
    }
    c10::impl::GenericList out(elem);
    for (auto& x : converted) out.push_back(std::move(x));
    return value(out);
  }

  static c10::IValue scalar(const OpValue& v) {
    switch (v.kind()) {
      case OpValue::Kind::Int: return c10::IValue(v.as_int());
      case OpValue::Kind::Float: return c10::IValue(v.as_float());
      default: return c10::IValue(v.as_bool());
    }
  }

  static std::string describe(const OpValue& v) {
    static const char* names[] = {"None", "a bool", "an int", "a float", "a string", "a list", "a tensor list"};
    std::string out = names[static_cast<int>(v.kind())];
    if (v.kind() == OpValue::Kind::String) out += " \"" + v.as_string() + "\"";
    return out;
  }

  // The tensor slot of argument `i`, or nullptr when it is not one tensor.
  static const TensorSlot* slot_of(const CallPlan& plan, int i) {
    if (i < 0 || static_cast<size_t>(i) >= plan.args.size() || plan.args[i].kind != ArgPlan::Kind::tensor) return nullptr;
    return &plan.tensors[static_cast<size_t>(plan.args[i].slot)];
  }

  static void narrow_range(TensorSlot& slot, int64_t lo, int64_t hi) {
    if (!c10::isIntegralType(slot.spec.dtype, /*includeBool=*/false) || hi <= lo) return;
    if (slot.range) {
      const int64_t a = std::max(lo, slot.range->first), b = std::min(hi, slot.range->second);
      if (a < b) {  // the recorded range, where it is valid
        slot.range = std::make_pair(a, b);
        return;
      }
    }
    slot.range = std::make_pair(lo, hi);
  }

  // The int of argument `i`, or nullopt when it is no int.
  static std::optional<int64_t> int_arg(const CallPlan& plan, int i) {
    if (i < 0 || static_cast<size_t>(i) >= plan.args.size()) return std::nullopt;
    const ArgPlan& p = plan.args[i];
    if (p.kind == ArgPlan::Kind::value && p.value.isInt()) return p.value.toInt();
    return std::nullopt;
  }

  // The int list of argument `i`, or nullopt when it is no int list.
  static std::optional<std::vector<int64_t>> int_list_arg(const CallPlan& plan, int i) {
    if (i < 0 || static_cast<size_t>(i) >= plan.args.size()) return std::nullopt;
    const c10::IValue& v = plan.args[i].value;
    if (plan.args[i].kind != ArgPlan::Kind::value || !v.isIntList()) return std::nullopt;
    return v.toIntVector();
  }

  // index_list: each tensor of the target list indexes the matching dim of the source.
  static void apply_index_list(CallPlan& plan, const RangeRule& rule) {
    const TensorSlot* source = slot_of(plan, rule.source);
    if (source == nullptr || static_cast<size_t>(rule.target) >= plan.args.size()) return;
    const ArgPlan& list = plan.args[rule.target];
    for (size_t k = 0; k < list.slots.size() && k < source->spec.sizes.size(); ++k)
      if (list.slots[k] >= 0) narrow_range(plan.tensors[list.slots[k]], 0, source->spec.sizes[k]);
  }

  // index_dim: the target indexes the source along a dim (an argument, or the rule's fixed one).
  static void apply_index_dim(const CallPlan& plan, const RangeRule& rule, const TensorSlot& source, TensorSlot& target) {
    const auto& sizes = source.spec.sizes;
    std::optional<int64_t> dim = rule.dim >= 0 ? int_arg(plan, rule.dim) : std::optional<int64_t>(rule.fixed_dim);
    if (rule.dim >= 0 && !dim && rule.dim < static_cast<int>(plan.args.size()) && plan.args[rule.dim].value.isNone()) {
      narrow_range(target, 0, source.spec.numel());  // take_along_dim(dim=None)
      return;
    }
    if (!dim) return;
    const int64_t rank = static_cast<int64_t>(sizes.size());
    int64_t d = *dim < 0 ? *dim + std::max<int64_t>(rank, 1) : *dim;
    if (rank == 0 && d == 0) narrow_range(target, 0, 1);  // 0-dim source: index 0
    else if (d >= 0 && d < rank) narrow_range(target, 0, sizes[static_cast<size_t>(d)]);
  }

  // view_storage: the target is viewed with the sizes, strides and offset of arguments source,
  // dim and fixed_dim, so its storage must reach the view's last element.
  static void apply_view_storage(const CallPlan& plan, const RangeRule& rule, TensorSlot& target) {
    const auto sizes = int_list_arg(plan, rule.source), strides = int_list_arg(plan, rule.dim);
    if (!sizes || !strides || sizes->size() != strides->size()) return;
    const int64_t offset = int_arg(plan, rule.fixed_dim).value_or(target.spec.storage_offset);
    int64_t extent = offset + 1;
    bool empty = false, bad = offset < 0;
    for (size_t i = 0; i < sizes->size(); ++i) {
      empty = empty || (*sizes)[i] == 0;
      bad = bad || (*sizes)[i] < 0 || (*strides)[i] < 0 ||
            __builtin_add_overflow(extent, ((*sizes)[i] - 1) * (*strides)[i], &extent);
    }
    if (!empty && !bad) target.min_storage = extent;
  }

  static void apply_rules(CallPlan& plan) {
    for (const RangeRule* rule : rules_for(plan.base)) {
      if (rule->kind == RangeKind::index_list) {
        apply_index_list(plan, *rule);
        continue;
      }
      if (slot_of(plan, rule->target) == nullptr) continue;
      TensorSlot& target = plan.tensors[static_cast<size_t>(plan.args[rule->target].slot)];
      const TensorSlot* source = slot_of(plan, rule->source);
      switch (rule->kind) {
        case RangeKind::index_dim:
          if (source != nullptr) apply_index_dim(plan, *rule, *source, target);
          break;
        case RangeKind::index_numel:
          if (source != nullptr) narrow_range(target, 0, source->spec.numel());
          break;
        case RangeKind::index_bound:
          if (auto bound = int_arg(plan, rule->dim); bound && *bound > 0) narrow_range(target, 0, *bound);
          break;
        case RangeKind::classes: {
          if (source == nullptr) break;
          const auto& sizes = source->spec.sizes;
          const int64_t c = sizes.size() >= 2 ? sizes[1] : sizes.empty() ? 1 : sizes[0];
          narrow_range(target, 0, c);
          break;
        }
        case RangeKind::nonzero: {
          int64_t lo = target.range ? std::max<int64_t>(target.range->first, 1) : 1;
          int64_t hi = target.range ? std::max(target.range->second, lo + 1) : 8;
          if (c10::isIntegralType(target.spec.dtype, false)) target.range = std::make_pair(lo, hi);
          break;
        }
        case RangeKind::offsets:
          if (source != nullptr) {
            narrow_range(target, 0, source->spec.numel() + 1);
            target.fixup = RangeKind::offsets;
          }
          break;
        case RangeKind::sorted: target.fixup = RangeKind::sorted; break;
        case RangeKind::view_storage: apply_view_storage(plan, *rule, target); break;
        case RangeKind::index_list: break;
      }
    }
  }

  const OpInput& in_;
  c10::Device device_;
  std::optional<c10::ScalarType> float_dtype_;
  CallPlan* plan_ = nullptr;
  size_t where_ = 0;
};

}  // namespace optrace::detail
