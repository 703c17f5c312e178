// detail/aoti/guard.hpp: the input guard of an AOTInductor package, from the metadata that
// compile_package.py stores ("optrace.guard"), and the DynamicShapes it was compiled for
#pragma once
// The rules are torch's own for an exported program's inputs (torch/_export/utils.py,
// _check_input_constraints_for_graph, which ExportedProgram.module() runs on every call): a
// tensor where the program has one, the same rank, static dims equal, the dims of one symbol
// consistent (a derived dim `coeff*s + offset` solved for s), each dim's range with torch's
// allowance for 0 and 1 (a lower bound of 2 or less is not enforced); and a non-tensor input
// equal to the value the program was exported with. To these optrace adds what AOTInductor's run
// would not say clearly: the dtype and the device type. Needs no AOTInductor, and judges a
// served call (c10::IValue) and a recorded one (optrace::Value, in a plan's drift) alike.

#include <optrace/detail/aoti/call_spec.hpp>
#include <optrace/dynamic_shapes.hpp>
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/python_names.hpp>

#include <ATen/core/ivalue.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace optrace::detail::aoti {

inline constexpr std::string_view kGuardKey = "optrace.guard";
inline constexpr int64_t kGuardVersion = 1;

/// One dim of a tensor input as exported.
struct GuardDim {
  bool is_static = true;
  int64_t size = 0;       ///< static
  std::string expr;       ///< dynamic: torch's expression (`s0`, `2*s0`)
  std::string symbol;     ///< its one free symbol; empty when it has several
  bool solvable = false;  ///< value = coeff * symbol + offset
  int64_t coeff = 1, offset = 0;
  std::optional<int64_t> min, max;  ///< the expression's range as exported (max: none when unbounded)
};

/// One flat input as exported.
struct GuardInput {
  std::string path;
  std::string kind;  ///< tensor, int, float, bool, str, NoneType, unknown
  std::string dtype, device;
  std::optional<c10::ScalarType> scalar_type;  ///< `dtype` in this libtorch (compared per call without a string)
  std::vector<GuardDim> dims;
  Value value;  ///< non-tensor: the exported value (None: not checked)
};

// How the guard sees one flat input: of a served call (FlatInput, a c10::IValue) or of a
// recorded one (FlatValue, an optrace::Value; its tensors are specs).
namespace leaf {
inline bool is_tensor(const FlatInput& f) { return f.value.isTensor(); }
inline bool is_none(const FlatInput& f) { return f.value.isNone(); }
inline std::string kind_name(const FlatInput& f) { return f.value.tagKind(); }
inline c10::ScalarType dtype(const FlatInput& f) { return f.value.toTensor().scalar_type(); }
inline c10::Device device(const FlatInput& f) { return f.value.toTensor().device(); }
inline c10::IntArrayRef sizes(const FlatInput& f) { return f.value.toTensor().sizes(); }
inline bool equals(const Value& baked, const FlatInput& f) {
  const c10::IValue& v = f.value;
  switch (baked.kind) {
    case Value::Kind::Int: return v.isInt() && v.toInt() == baked.int_value;
    case Value::Kind::Double: return v.isDouble() && v.toDouble() == baked.double_value;
    case Value::Kind::Bool: return v.isBool() && v.toBool() == baked.bool_value;
    case Value::Kind::String: return v.isString() && v.toStringRef() == baked.text;
    default: return false;
  }
}
inline std::string show(const FlatInput& f) {
  std::ostringstream out;
  out << f.value;
  return out.str();
}

inline bool is_tensor(const FlatValue& f) { return f.value && f.value->is_tensor(); }
inline bool is_none(const FlatValue& f) { return tree::is_none(f.value); }
inline std::string kind_name(const FlatValue& f) { return tree::kind_name(f.value); }
inline c10::ScalarType dtype(const FlatValue& f) { return f.value->spec.dtype; }
inline c10::Device device(const FlatValue& f) { return f.value->spec.device; }
inline c10::IntArrayRef sizes(const FlatValue& f) { return f.value->spec.sizes; }
// Not Value's operator==, which takes NaN for NaN (to group signatures): a baked NaN takes no
// call here, as in the served call's twin above.
inline bool equals(const Value& baked, const FlatValue& f) {
  if (!f.value || f.value->kind != baked.kind) return false;
  switch (baked.kind) {
    case Value::Kind::Int: return f.value->int_value == baked.int_value;
    case Value::Kind::Double: return f.value->double_value == baked.double_value;
    case Value::Kind::Bool: return f.value->bool_value == baked.bool_value;
    case Value::Kind::String: return f.value->text == baked.text;
    default: return false;
  }
}
}  // namespace leaf

/// A baked-in value as a message shows it: as c10::IValue prints one.
inline std::string show_baked(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Int: return std::to_string(v.int_value);
    case Value::Kind::Bool: return v.bool_value ? "True" : "False";
    case Value::Kind::String: return "\"" + v.text + "\"";
    case Value::Kind::Double: {  // c10's rule: an integral value as `3.`, else every digit
      const double d = v.double_value;
      const int c = std::fpclassify(d);
      if ((c == FP_NORMAL || c == FP_ZERO) && std::abs(d) < 1e10 && static_cast<double>(static_cast<int64_t>(d)) == d)
        return (std::signbit(d) && d == 0 ? "-" : "") + std::to_string(static_cast<int64_t>(d)) + ".";
      std::ostringstream out;
      out << std::setprecision(std::numeric_limits<double>::max_digits10) << d;
      return out.str();
    }
    default: return "None";
  }
}
namespace leaf {
inline std::string show(const FlatValue& f) { return f.value ? show_baked(*f.value) : "None"; }
}  // namespace leaf

/// The guard metadata's version, checked: throws JsonError for another.
inline void check_guard_version(const json::Node& root) {
  const int64_t version = root["version"].as_int();
  if (version != kGuardVersion)
    optrace::detail::raise_json("/version", "guard metadata version " + std::to_string(version) + "; this optrace reads version " +
                                    std::to_string(kGuardVersion));
}

/// A tensor input's "sizes" in the guard metadata: an int, or {"expr", "symbol", "coeff",
/// "offset", "min", "max"}. Adds what cannot be checked to `unchecked`. Needs no IValue, so a
/// plan's drift reads them in the front end, which links no torch_cpu.
inline std::vector<GuardDim> read_guard_dims(const json::Node& sizes, const std::string& path, std::vector<std::string>* unchecked) {
  std::vector<GuardDim> dims;
  for (json::Node d : sizes.array()) {
    GuardDim dim;
    if (d.is_int()) {
      dim.size = d.as_int();
    } else {
      dim.is_static = false;
      dim.expr = std::string(d["expr"].as_string());
      json::Node n = d;
      if (d.find("symbol", n)) dim.symbol = std::string(n.as_string());
      if (d.find("coeff", n) && !n.is_null()) {
        dim.solvable = true;
        dim.coeff = n.as_int();
        dim.offset = d["offset"].as_int();
        if (dim.coeff == 0) optrace::detail::raise_json(n.path(), "a dim of coefficient 0 is static");
      }
      if (d.find("min", n) && !n.is_null()) dim.min = n.as_int();
      if (d.find("max", n) && !n.is_null()) dim.max = n.as_int();
      if (!dim.solvable && unchecked)
        unchecked->push_back(path + ": a dim of expression " + dim.expr + (dim.min ? ", checked by its range only" : ", not checked"));
    }
    dims.push_back(std::move(dim));
  }
  return dims;
}

/// A symbol a call has bound so far: its value, and the input and dim that bound it (named only
/// in a message). A call binds a few: a linear search beats a map.
struct Binding {
  const std::string* symbol;
  int64_t value;
  size_t input, dim;
};
using Bindings = std::vector<Binding>;

/// How one dim of a call meets the dim a package was compiled for.
enum class SizeVerdict : uint8_t { fits, static_size, not_multiple, outside, disagrees };

/// The one size rule, of the guard (which stops at the first dim that does not fit) and of a
/// plan's drift (which counts every one), checked in this order: a static dim is equal; a dim
/// `coeff*s + offset` is so for an integer s; the dim is within its range (a lower bound of 2 or
/// less not enforced: torch's rule, sizes 0 and 1 run); then s agrees with the value the first
/// dim of s within its range bound (`*other`; a dim outside its range binds nothing, so a row
/// never blames a dim in range for one that is not). A dim whose expression optrace does not
/// solve is checked by its range only.
inline SizeVerdict size_verdict(const GuardDim& g, int64_t n, Bindings& bound, size_t input, size_t dim,
                                const Binding** other = nullptr) {
  if (g.is_static) return n == g.size ? SizeVerdict::fits : SizeVerdict::static_size;
  const bool solved = g.solvable && !g.symbol.empty();
  // The metadata may be hostile: n - offset and its quotient are computed without overflow (a
  // size no integer symbol gives is not a multiple).
  int64_t shifted = 0;
  if (solved && (__builtin_sub_overflow(n, g.offset, &shifted) || (g.coeff == -1 && shifted == INT64_MIN) || shifted % g.coeff != 0))
    return SizeVerdict::not_multiple;
  if ((g.min && *g.min > 2 && n < *g.min) || (g.max && n > *g.max)) return SizeVerdict::outside;
  if (!solved) return SizeVerdict::fits;
  const int64_t s = shifted / g.coeff;
  auto it = std::find_if(bound.begin(), bound.end(), [&](const Binding& b) { return *b.symbol == g.symbol; });
  if (it == bound.end()) {
    bound.push_back({&g.symbol, s, input, dim});
    return SizeVerdict::fits;
  }
  if (other) *other = &*it;
  return it->value == s ? SizeVerdict::fits : SizeVerdict::disagrees;
}

struct Guard {
  std::vector<GuardInput> inputs;
  std::map<std::string, std::pair<int64_t, std::optional<int64_t>>> symbols;
  std::vector<std::string> unchecked;  ///< what this guard cannot check, for the user
  std::vector<std::string> arg_names;  ///< the arguments in forward's order, as observed (may be empty)

  static Guard parse(std::string_view text) {
    auto doc = json::Document::parse(text);
    json::Node root = doc->root();
    check_guard_version(root);
    Guard g;
    json::Node names = root;
    if (root.find("arg_names", names))
      for (json::Node name : names.array()) g.arg_names.emplace_back(name.as_string());
    for (json::Node in : root["inputs"].array()) {
      GuardInput input;
      input.path = std::string(in["path"].as_string());
      input.kind = std::string(in["kind"].as_string());
      if (input.kind == "tensor") {
        input.dtype = std::string(in["dtype"].as_string());
        input.scalar_type = scalar_type_from_python(input.dtype);
        input.device = std::string(in["device"].as_string());
        input.dims = read_guard_dims(in["sizes"], input.path, &g.unchecked);
      } else if (input.kind == "int") {
        input.value.kind = Value::Kind::Int;
        input.value.int_value = in["value"].as_int();
      } else if (input.kind == "float") {
        input.value.kind = Value::Kind::Double;
        input.value.double_value = in["value"].as_double();
      } else if (input.kind == "bool") {
        input.value.kind = Value::Kind::Bool;
        input.value.bool_value = in["value"].as_bool();
      } else if (input.kind == "str") {
        input.value.kind = Value::Kind::String;
        input.value.text = std::string(in["value"].as_string());
      } else if (input.kind != "NoneType") {
        g.unchecked.push_back(input.path + ": an input of kind " + input.kind + ", not checked");
      }
      g.inputs.push_back(std::move(input));
    }
    for (auto [name, range] : root["symbols"].object()) {
      auto bounds = range.array();
      if (bounds.size() != 2) optrace::detail::raise_json(range.path(), "a range is [min, max]");
      auto it = bounds.begin();
      int64_t lo = (*it).as_int();
      ++it;
      std::optional<int64_t> hi;
      if (!(*it).is_null()) hi = (*it).as_int();
      g.symbols[std::string(name)] = {lo, hi};
    }
    return g;
  }

  /// Checks the flat inputs. Throws ShapeError naming the argument, the dim, the value and what
  /// the package was compiled for, ArgumentError for a count that differs.
  template <class Flat>
  void check(const std::vector<Flat>& flat) const {
    Refusal why;
    if (!accepts(flat, &why)) why.raise();
  }

  /// `check` without throwing: false when the package was not compiled for these inputs, with
  /// the reason in `why` when given (null: no message is built, for routing). `Flat`: FlatInput
  /// (a served call) or FlatValue (a recorded one, for a plan's drift): one rule for both.
  ///
  /// Every input's kind, baked-in value, dtype, device and rank is checked before any size, so a
  /// refusal with a dim (`why->dim >= 0`) means the call has the package's structure: whichever
  /// input comes first, a None where a tensor was compiled is told before another input's size.
  /// Packages that refuse a call are ranked by it (aoti::closer: structure before sizes).
  template <class Flat>
  bool accepts(const std::vector<Flat>& flat, Refusal* why) const {
    if (flat.size() != inputs.size())
      return refuse(why, false, [&] { return concat("the call has ", flat.size(), " inputs; the package was compiled for ", inputs.size()); });
    for (size_t i = 0; i < inputs.size(); ++i) {
      const GuardInput& in = inputs[i];
      const Flat& v = flat[i];
      if (in.kind == "tensor") {
        if (!leaf::is_tensor(v))
          return refuse_input(why, in, [&] { return concat("argument ", in.path, ": the package was compiled for a tensor here, got ", leaf::kind_name(v)); });
        if (!tensor_fits(in, v, why)) return false;
      } else if (in.kind == "NoneType") {
        if (!leaf::is_none(v))
          return refuse_input(why, in, [&] { return concat("argument ", in.path, ": the package was compiled with None here, got ", leaf::kind_name(v)); });
      } else if (!in.value.is_none() && !leaf::equals(in.value, v)) {
        return refuse_input(why, in, [&] {
          return concat("argument ", in.path, " is ", leaf::show(v), "; the package was compiled with ", show_baked(in.value),
                        " (a non-tensor input is baked into the package)");
        });
      }
    }
    Bindings bound;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].kind == "tensor" && !sizes_fit(i, leaf::sizes(flat[i]), bound, why)) {
        if (why) why->misses = size_misses(flat);
        return false;
      }
    return true;
  }

  /// One dim of a call the package does not take (drift's rows).
  struct Miss {
    size_t input, dim;
    int64_t value;
  };

  /// How many dims of `flat` (of this guard's structure: `accepts` got to the sizes) the package
  /// does not take, each judged by size_verdict (each listed in `rows` when given): what a plan's
  /// drift counts for a package.
  template <class Flat>
  int64_t size_misses(const std::vector<Flat>& flat, std::vector<Miss>* rows = nullptr) const {
    Bindings bound;
    int64_t n = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].kind != "tensor") continue;
      const c10::IntArrayRef sizes = leaf::sizes(flat[i]);
      for (size_t d = 0; d < inputs[i].dims.size(); ++d) {
        if (size_verdict(inputs[i].dims[d], sizes[d], bound, i, d) == SizeVerdict::fits) continue;
        ++n;
        if (rows) rows->push_back({i, d, sizes[d]});
      }
    }
    return n;
  }

  /// A keyword argument exported as None (a call structure without it: torch 2.6 keeps it as a
  /// leaf of the in_spec, and no input of the program) becomes a None node of `shape`, which a
  /// call may omit or pass as None, and leaves the inputs checked here.
  void none_keywords_into(CallShape& shape) {
    for (size_t k = 0; k < shape.kwargs.keys.size(); ++k) {
      TreeSpec& spec = shape.kwargs.children[k];
      if (spec.type != TreeSpec::Type::Leaf) continue;
      auto none = std::find_if(inputs.begin(), inputs.end(), [&](const GuardInput& in) {
        return in.path == shape.kwargs.keys[k] && in.kind == "NoneType";
      });
      if (none == inputs.end()) continue;
      spec.type = TreeSpec::Type::None;
      inputs.erase(none);
    }
  }

  /// The tensor inputs in the order run() takes them.
  static std::vector<at::Tensor> tensors(const std::vector<FlatInput>& flat) {
    std::vector<at::Tensor> out;
    for (const FlatInput& f : flat)
      if (f.value.isTensor()) out.push_back(f.value.toTensor());
    return out;
  }

  /// What the package was compiled for, as the observer's DynamicShapes: one ShapeNode per
  /// argument of the call shape, the symbols with their exported ranges.
  DynamicShapes dynamic_shapes(const CallShape& shape) const {
    std::vector<std::string> names;
    std::vector<ShapeNode> arguments;
    size_t next = 0;
    for (size_t i = 0; i < shape.args.children.size(); ++i) {
      names.push_back(shape.positional_name(i));
      arguments.push_back(node(shape.args.children[i], next));
    }
    for (size_t k = 0; k < shape.kwargs.keys.size(); ++k) {
      names.push_back(shape.kwargs.keys[k]);
      arguments.push_back(node(shape.kwargs.children[k], next));
    }
    std::vector<SymbolRange> ranges;
    for (const auto& [name, range] : symbols) {
      SymbolRange r;
      r.name = name;
      r.min = range.first;
      r.max = range.second.value_or(kUnboundedDim);
      for (const GuardInput& in : inputs)
        for (const GuardDim& d : in.dims)
          if (!d.is_static && d.symbol == name && d.expr != name &&
              std::find(r.derived.begin(), r.derived.end(), d.expr) == r.derived.end())
            r.derived.push_back(d.expr);
      ranges.push_back(std::move(r));
    }
    return DynamicShapes(!shape.kwargs.keys.empty(), std::move(names), std::move(arguments), std::move(ranges), unchecked,
                         DimStyle::named);
  }

 private:
  // A tensor input's dtype, device type and rank.
  template <class Flat>
  static bool tensor_fits(const GuardInput& in, const Flat& v, Refusal* why) {
    const c10::ScalarType dtype = leaf::dtype(v);
    if (in.scalar_type ? dtype != *in.scalar_type : python_dtype_name(dtype) != in.dtype)
      return refuse_input(why, in, [&] {
        return concat("argument ", in.path, " has dtype ", python_dtype_name(dtype), "; the package was compiled for ", in.dtype);
      });
    const c10::Device device = leaf::device(v);
    std::string_view want = std::string_view(in.device).substr(0, in.device.find(':'));
    if (c10::DeviceTypeName(device.type(), /*lower_case=*/true) != want)
      return refuse_input(why, in, [&] { return concat("argument ", in.path, " is on ", device, "; the package runs on ", in.device); });
    const c10::IntArrayRef sizes = leaf::sizes(v);
    if (sizes.size() != in.dims.size())
      return refuse_input(why, in, [&] {
        return concat("argument ", in.path, " has ", sizes.size(), " dims ", sizes, "; the package was compiled for ", in.dims.size(),
                      " (", describe_sizes(in), ")");
      });
    return true;
  }

  // A tensor input's sizes (its rank fits), by the one size rule (size_verdict).
  bool sizes_fit(size_t index, c10::IntArrayRef sizes, Bindings& bound, Refusal* why) const {
    const GuardInput& in = inputs[index];
    for (size_t d = 0; d < in.dims.size(); ++d) {
      const GuardDim& g = in.dims[d];
      const int64_t n = sizes[d];
      const Binding* other = nullptr;
      switch (size_verdict(g, n, bound, index, d, &other)) {
        case SizeVerdict::fits:
          continue;
        case SizeVerdict::static_size:
          return refuse_dim(why, in, d, n, [&] {
            return concat("argument ", in.path, " dim ", d, " is ", n, "; the package was compiled for ", g.size,
                          " there (a static dim): sizes ", sizes, ", compiled for ", describe_sizes(in));
          });
        case SizeVerdict::not_multiple:
          return refuse_dim(why, in, d, n, [&] {
            return concat("argument ", in.path, " dim ", d, " is ", n, "; the package was compiled for ", g.expr, " there, which ", n,
                          " is not for any integer ", g.symbol);
          });
        case SizeVerdict::outside:
          return refuse_dim(why, in, d, n, [&] {
            return concat("argument ", in.path, " dim ", d, " is ", n, ", outside the range ", range(g), " of ", g.expr,
                          " the package was compiled for (export with a wider range)");
          });
        case SizeVerdict::disagrees:
          return refuse_dim(why, in, d, n, [&] {
            return concat("argument ", in.path, " dim ", d, " is ", n, ", which makes ", g.symbol, " = ", (n - g.offset) / g.coeff,
                          "; but ", inputs[other->input].path, " dim ", other->dim, " made it ", other->value, " (both are ",
                          g.symbol, " in the package: they must agree)");
          });
      }
    }
    return true;
  }

  // A refusal of the input `in` as a whole (its kind, dtype, device, rank or baked-in value): it
  // names the argument, never the caller's value, so stats can key rows by it.
  template <class Message>
  static bool refuse_input(Refusal* why, const GuardInput& in, Message&& message) {
    if (why) why->argument = in.path;
    return refuse(why, true, std::forward<Message>(message));
  }

  template <class Message>
  static bool refuse_dim(Refusal* why, const GuardInput& in, size_t d, int64_t n, Message&& message) {
    if (!why) return false;
    why->argument = in.path;
    why->dim = static_cast<int64_t>(d);
    why->value = n;
    const GuardDim& g = in.dims[d];
    why->min = g.is_static ? std::optional<int64_t>(g.size) : g.min;
    why->max = g.is_static ? std::optional<int64_t>(g.size) : g.max;
    return refuse(why, true, std::forward<Message>(message));
  }

  static std::string range(const GuardDim& g) {
    return "[" + (g.min ? std::to_string(*g.min) : std::string("0")) + ", " + (g.max ? std::to_string(*g.max) : "inf") + "]";
  }

  static std::string describe_sizes(const GuardInput& in) {
    std::string s = "[";
    for (size_t d = 0; d < in.dims.size(); ++d)
      s += (d ? ", " : "") + (in.dims[d].is_static ? std::to_string(in.dims[d].size) : in.dims[d].expr);
    return s + "]";
  }

  ShapeNode node(const TreeSpec& spec, size_t& next) const {
    ShapeNode n;
    switch (spec.type) {
      case TreeSpec::Type::None:
        return n;
      case TreeSpec::Type::Leaf: {
        if (next >= inputs.size()) return n;
        const GuardInput& in = inputs[next++];
        if (in.kind != "tensor") return n;
        n.kind = Value::Kind::Tensor;
        for (const GuardDim& g : in.dims) {
          DimSpec d;
          d.dynamic = !g.is_static;
          if (g.is_static) {
            d.example = d.min = d.max = g.size;
          } else {
            d.symbol = g.symbol.empty() ? g.expr : g.symbol;
            d.named = true;
            d.coeff = g.solvable ? g.coeff : 1;
            d.offset = g.solvable ? g.offset : 0;
            d.min = g.min.value_or(0);
            d.max = g.max.value_or(kUnboundedDim);
          }
          n.dims.push_back(d);
        }
        return n;
      }
      case TreeSpec::Type::Tuple:
      case TreeSpec::Type::List:
      case TreeSpec::Type::Dict:
        n.kind = spec.type == TreeSpec::Type::Dict ? Value::Kind::Dict
                 : spec.type == TreeSpec::Type::List ? Value::Kind::List
                                                     : Value::Kind::Tuple;
        n.keys = spec.keys;
        for (const TreeSpec& c : spec.children) n.items.push_back(node(c, next));
        return n;
    }
    return n;
  }
};

/// What one package takes, whole: its call spec (the in_spec's tree, with the arguments' names)
/// and its guard. The one rule of whether a package takes a call and, if not, why: Package and
/// PackageSet judge served calls by it, a plan's drift and assign recorded ones.
struct CallCheck {
  CallShape shape;
  Guard guard;
  bool guarded = false;  ///< with optrace's guard metadata; else only the tree is checked

  /// From the package's in_spec (treespec text) and its guard metadata (null: none; the tree
  /// only). Throws JsonError for either malformed.
  static CallCheck of(std::string_view in_spec, const std::string* guard_text) {
    return guard_text ? of(in_spec, Guard::parse(*guard_text)) : of(in_spec, std::nullopt);
  }
  /// The same from a guard already parsed (a caller that names where each text failed).
  static CallCheck of(std::string_view in_spec, std::optional<Guard> guard) {
    CallCheck c;
    std::vector<std::string> names;
    if (guard) {
      c.guard = std::move(*guard);
      c.guarded = true;
      names = c.guard.arg_names;
    }
    c.shape = CallShape::of(parse_tree_spec(in_spec), std::move(names));
    if (c.guarded) c.guard.none_keywords_into(c.shape);
    return c;
  }

  /// Whether the package takes a served call, its flat inputs left in `flat`.
  bool accepts(const std::vector<c10::IValue>& args, const std::unordered_map<std::string, c10::IValue>& kwargs,
               std::vector<FlatInput>& flat, Refusal* why) const {
    return shape.try_flatten(args, kwargs, flat, why) && (!guarded || guard.accepts(flat, why));
  }
  /// Whether the package takes a recorded call (an observation file's signature).
  bool accepts(const Value& call, std::vector<FlatValue>& flat, Refusal* why) const {
    return shape.try_flatten(call, flat, why) && (!guarded || guard.accepts(flat, why));
  }
};

}  // namespace optrace::detail::aoti
