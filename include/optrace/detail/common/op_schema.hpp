// optrace/detail/common/op_schema.hpp: what optrace knows about an operator, without libtorch
#pragma once
// The facts the Kineto importer and the rules of the reference tracer need about a dispatcher op
// (its name, argument types and defaults, whether it decomposes, its context rules), in types
// of optrace's own. dispatcher.hpp fills them from the live dispatcher (with the handle, for
// OpTracer and replay); op_catalog.hpp writes them out and reads them back, so that a program
// built without libtorch (the `optrace` tool's front end) decodes traces by the same facts,
// captured from the libtorch it was built against.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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

/// The qualified name and overload of an op-trace name: "addmm.default" -> ("aten::addmm", ""),
/// "add.Tensor" -> ("aten::add", "Tensor"), "myops::f.default" -> ("myops::f", ""). A name
/// without a namespace is aten's; one without a dot has the empty overload.
inline std::pair<std::string, std::string> qualified_name(std::string_view display) {
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
  return {std::move(name), std::move(overload)};
}

/// The op's name without namespace and overload: "aten::scatter_add.default" -> "scatter_add".
inline std::string base_name(std::string_view display) {
  const size_t colons = display.find("::");
  if (colons != std::string_view::npos) display.remove_prefix(colons + 2);
  return std::string(display.substr(0, display.find('.')));
}

// ---- defaults ----

/// A schema argument's default value, as the Kineto importer compares recorded values with it
/// (what c10::IValue holds for it: dtypes, layouts, memory formats and reductions are ints).
struct DefaultValue {
  enum class Kind { None, Int, Double, Bool, Complex, String, Device, List, Other };
  Kind kind = Kind::Other;
  int64_t int_value = 0;
  double real = 0, imag = 0;
  bool bool_value = false;
  std::string text;                 ///< String, Device (`str(device)`)
  std::vector<DefaultValue> items;  ///< List
};

// ---- the reference tracer's view ----

/// Where the reference tracer sees a different call than a C++ program runs. CompositeImplicit-
/// Autograd kernels (and the backward helpers that are such ops) branch on
/// `at::isTensorSubclassLike`, which is true for every tensor while a Python dispatch mode is
/// active: under the reference tracer they take their functional branch, in C++ the in-place or
/// out= one. Each rule names the composites open around the call, the op the C++ branch runs
/// directly in them and what the other branch runs instead: another op taking the same leading
/// arguments, and/or one bool argument with another value. Every call site of those predicates
/// in PyTorch 1.13 and 2.6 was read; docs/op-tracer.md ("Where C++ and the reference run
/// different ops") lists them all, with
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

struct LiveOp;  // dispatcher.hpp: the handle and schema, where libtorch is linked

/// What optrace knows about one dispatcher op. Made once per op by `op_info`, never freed.
struct OpInfo {
  /// The live dispatcher's handle and schema (dispatcher.hpp); nullptr for facts read from a
  /// captured catalog (op_catalog.hpp), which a program without libtorch uses.
  const LiveOp* live = nullptr;
  std::string qualified;  ///< "aten::addmm"
  std::string overload;   ///< "" for the default overload
  std::string name;  ///< "addmm.default"
  std::string base;  ///< "addmm"
  bool decomposes = false;
  size_t positional = 0;      ///< arguments before the first keyword-only one
  /// The positional arguments from this index on all have defaults: only they can be dropped as
  /// trailing defaults (0 where unknown: every one is checked).
  size_t defaults_from = 0;
  std::vector<ArgType> args;  ///< one per schema argument
  std::vector<std::optional<DefaultValue>> defaults;  ///< one per schema argument: its default, if any
  /// One per schema argument: its name, where libtorch's schema is at hand (empty in a captured
  /// catalog): what a keyword-only argument is passed by (ImportOptions::keyword_arguments).
  std::vector<std::string> arg_names;
  /// What PyTorch's operator-inputs logger reads of the schema (operator_inputs.hpp's rules).
  bool returns_tensor = true;  ///< a tensor among its returns (calls returning none are not logged)
  int storage_arg = -1;        ///< the first Storage argument's index (calls passing one are not logged)
  bool non_compute = false;    ///< no tensor argument, a `*_like` op, or one tensor output viewing an input
  /// The index of its c10d ProcessGroup argument (c10d's collective ops), -1 when none or unknown
  /// (a captured catalog does not keep it): how the Profiler tells a collective call's group.
  int process_group_arg = -1;
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
};

/// Where the Kineto importer and the log writer find ops: the live dispatcher (`live_catalog()`,
/// dispatcher.hpp) or facts captured from it (`CapturedCatalog`, op_catalog.hpp).
class OpCatalog {
 public:
  virtual ~OpCatalog() = default;
  /// The op named `display` as the op-trace schema names it ("add.Tensor"), or nullptr.
  virtual const OpInfo* find(std::string_view display) const = 0;
  /// Every overload of the op `qualified` ("aten::add"), the default overload first; empty if
  /// the catalog knows none.
  virtual const std::vector<const OpInfo*>& overloads_of(std::string_view qualified) const = 0;
};

/// The context rules of the op `info` (its display name set), in the order of `context_rules()`.
/// `find(display)`: the op a rule records under another name, or nullptr (then the rule is
/// left out: not in this libtorch). `torch2`: whether the libtorch has the 2.x branches.
template <class Find>
std::vector<OpInfo::Rule> rules_of(const std::string& display, bool torch2, Find find) {
  std::vector<OpInfo::Rule> out;
  for (const ContextRule& rule : context_rules()) {
    if (rule.since_2_0 && !torch2) continue;
    if (display != rule.op) continue;
    const bool renames = std::string_view(rule.recorded) != rule.op;  // else: the op itself, set by the caller
    const OpInfo* recorded = renames ? find(rule.recorded) : nullptr;
    if (renames && recorded == nullptr) continue;  // not in this libtorch
    out.push_back(OpInfo::Rule{rule.within, recorded, rule.set_arg, rule.set_to, rule.engine});
  }
  return out;
}

}  // namespace optrace::detail
