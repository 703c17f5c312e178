// optrace/plan.hpp: the packages that cover observed traffic, planned from observation files, and the drift of new traffic from them
#pragma once
// A plan groups every observed call signature by its call structure (which arguments are None,
// the non-tensor values, the containers, each tensor's dtype, rank and device: what torch.export
// bakes into a program) and gives each group a package: its calls as an observation file of
// their own (whose example is their most frequent export-safe signature) and the named
// dynamic-shapes spec of their observed ranges. examples/python/compile_package.py's
// compile_plan compiles it; serve.hpp's PackageSet serves it. Needs no AOTInductor: `optrace
// plan` and `optrace drift` run on every libtorch. docs/serve.md describes the format.

#include <optrace/detail/aoti/guard.hpp>
#include <optrace/detail/common/beneath.hpp>
#include <optrace/detail/common/counts.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/detail/common/printable.hpp>
#include <optrace/detail/common/string_map.hpp>
#include <optrace/detail/observer/analysis.hpp>
#include <optrace/detail/observer/call_set.hpp>
#include <optrace/dynamic_shapes.hpp>
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/observations.hpp>
#include <optrace/python_names.hpp>
#include <optrace/value.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace optrace {

inline constexpr std::string_view kPlanFormat = "optrace.plan";
inline constexpr int64_t kPlanVersion = 1;
/// What compile_plan writes beside plan.json: the packages' one copy of the weights
/// (PackageSet::load reads it), and the module they replace (`optrace verify --reference`).
inline constexpr std::string_view kPlanWeightsFile = "weights.pt";
inline constexpr std::string_view kPlanReferenceFile = "reference.pt";

/// How `Plan::from_observations` groups the calls.
struct PlanOptions {
  /// At most this many packages (0, the default: one per call structure). More packages than
  /// structures split the structure of widest range at the median of its widest dim, again
  /// until there are `k`; fewer than the structures is an ArgumentError (each structure needs a
  /// package of its own).
  PlanOptions& max_packages(int k) {
    OPTRACE_CHECK(k >= 0, ArgumentError, "PlanOptions::max_packages: need >= 0, got ", k);
    max_packages_ = k;
    return *this;
  }
  /// What max_packages(k) set (0 by default: one package per call structure).
  int max_packages() const { return max_packages_; }

 private:
  int max_packages_ = 0;
};

/// One package of a plan: the calls it covers and what it is compiled for.
struct PlannedPackage {
  std::string name;          ///< `p0`, `p1`, ... (most calls first)
  std::string file;          ///< the package, relative to the plan's folder: `p0.pt2`
  std::string observations_file;  ///< its calls, relative to the plan's folder: `p0.observations.json`
  std::string structure;     ///< `input_ids: int64[*, *], attention_mask: None`
  int64_t calls = 0;         ///< observed calls it covers
  Observations observations;  ///< those calls; its example (infer_arguments) is the most frequent export-safe one
  DynamicShapes dynamic_shapes;  ///< the named spec of their ranges: what compile_plan exports with
  /// What the compiled package takes, as compile_plan recorded it in plan.json (`guard`): the
  /// text of the package's guard metadata ("optrace.guard", docs/aoti.md), with the ranges torch
  /// compiled (which may be narrower or wider than the planned ones, or static). Empty until
  /// compile_plan compiles the package: drift and assign then use the planned ranges.
  std::string compiled_guard;
  /// The package's in_spec as compile_plan recorded it in plan.json (`in_spec`: torch's treespec
  /// text, what the package's call spec holds): with `compiled_guard`, drift and assign judge a
  /// call by the very check the package serves by (aoti::CallCheck). Empty before compile_plan
  /// recorded it: the tree is then the package's calls'.
  std::string compiled_in_spec;
};

/// One way observed calls leave a plan: an argument's dim outside every planned range (or, with
/// `dim` -1, a call structure no package has), with the sizes seen and the planned range.
struct DriftRow {
  std::string structure;
  std::string argument;  ///< empty for a structure no package has
  int64_t dim = -1;
  int64_t calls = 0;     ///< calls refused here
  int64_t seen_min = 0, seen_max = 0;
  int64_t planned_min = 0, planned_max = 0;  ///< the package's range (kUnboundedDim: no max)
  std::string package;   ///< the closest package (aoti::closer: the one the set blames too)
  /// Whose range: "compiled" (the package as compile_plan compiled it) or "planned" (the plan's
  /// observed range: the package is not compiled yet); empty for a structure no package has.
  std::string source;
};

/// What `Plan::drift` found: the share of observed calls no package of the plan covers.
struct DriftReport {
  struct Structure {
    std::string structure;
    int64_t calls = 0, covered = 0;
    bool planned = false;
  };
  std::string plan;  ///< the plan's file, for the report's first line
  int64_t calls = 0, covered = 0;
  std::vector<Structure> structures;  ///< in the order first seen
  std::vector<DriftRow> rows;         ///< most calls first

  /// Every call is covered: some package has its structure and takes every dim of it.
  bool all_covered() const { return covered == calls; }
  /// `plan.json: 12 of 40 observed calls (30%) are not covered`, then per structure and dim.
  std::string to_string() const {
    std::ostringstream out;
    int64_t missed = calls - covered;
    // Names come from files (keys, paths): printed escaped (detail::printable).
    using detail::printable;
    out << (plan.empty() ? "the plan" : printable(plan)) << ": ";
    if (missed == 0) out << "all " << calls << " observed calls are covered\n";
    else out << missed << " of " << calls << " observed calls (" << percent(missed, calls) << ") are not covered\n";
    for (const Structure& s : structures) {
      out << "  (" << printable(s.structure) << "): ";
      if (!s.planned) out << s.calls << " calls, a call structure no package has\n";
      else if (s.covered == s.calls) out << "all " << s.calls << " calls covered\n";
      else out << s.calls - s.covered << " of " << s.calls << " calls not covered\n";
      for (const DriftRow& r : rows) {
        if (r.structure != s.structure || r.dim < 0) continue;
        out << "    " << printable(r.argument) << " dim " << r.dim << ": " << r.calls << " calls at " << r.seen_min;
        if (r.seen_max != r.seen_min) out << ".." << r.seen_max;
        out << ", " << r.source << " [" << r.planned_min << ", ";
        if (r.planned_max == kUnboundedDim) out << "inf";
        else out << r.planned_max;
        out << "] (" << printable(r.package) << ")\n";
      }
    }
    return out.str();
  }
  /// The report as `optrace drift --json` writes it: the fields above, `rows` with `seen` and `planned`.
  std::string to_json(int indent = 1) const {
    json::Writer w(indent);
    w.begin_object().key("plan").value(plan).key("calls").value(calls).key("covered").value(covered);
    w.key("structures").begin_array();
    for (const Structure& s : structures)
      w.begin_object().key("structure").value(s.structure).key("planned").value(s.planned).key("calls").value(s.calls)
          .key("covered").value(s.covered).end_object();
    w.end_array().key("refusals").begin_array();
    for (const DriftRow& r : rows) {
      w.begin_object().key("structure").value(r.structure).key("argument").value(r.argument).key("dim").value(r.dim);
      w.key("calls").value(r.calls).key("seen").begin_array().value(r.seen_min).value(r.seen_max).end_array();
      w.key("planned").begin_array().value(r.planned_min);
      if (r.planned_max == kUnboundedDim) w.null();
      else w.value(r.planned_max);
      w.end_array().key("source").value(r.source).key("package").value(r.package).end_object();
    }
    w.end_array().end_object();
    return w.take();
  }

 private:
  static std::string percent(int64_t part, int64_t whole) {
    std::ostringstream out;
    out.precision(3);
    out << (whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0) << "%";
    return out.str();
  }
};

namespace detail::plan {

/// A value's call structure: what torch.export bakes into a program. Tensors by dtype, rank and
/// device (`int64[*, *]`, `float32[*]@cuda`), None, scalars by value, containers by kind, length
/// and keys. Sizes and strides are left out: they are what a package's ranges cover.
inline void structure_into(std::string& out, const Value* v) {
  using K = Value::Kind;
  if (!v || v->is_none()) {
    out += "None";
    return;
  }
  switch (v->kind) {
    case K::None: out += "None"; return;
    case K::Tensor: {
      out += python_dtype_name(v->spec.dtype).substr(6);  // "torch." dropped
      out += "[";
      for (size_t d = 0; d < v->spec.sizes.size(); ++d) out += d ? ", *" : "*";
      out += "]";
      if (v->spec.device.type() != c10::kCPU) out += "@" + c10::DeviceTypeName(v->spec.device.type(), true);
      return;
    }
    case K::Int: out += std::to_string(v->int_value); return;
    case K::Double: out += json::Writer().value(v->double_value).str(); return;
    case K::Bool: out += v->bool_value ? "True" : "False"; return;
    case K::String: out += json::Writer().value(v->text).str(); return;
    case K::List:
    case K::Tuple:
      out += v->kind == K::List ? "[" : "(";
      for (size_t k = 0; k < v->items.size(); ++k) {
        if (k) out += ", ";
        structure_into(out, &v->items[k]);
      }
      out += v->kind == K::List ? "]" : (v->items.size() == 1 ? ",)" : ")");
      return;
    case K::Dict:
    case K::Struct:
      out += v->kind == K::Struct ? v->text + "(" : "{";
      for (size_t k = 0; k < v->items.size(); ++k) {
        out += (k ? ", " : "") + v->keys[k] + (v->kind == K::Struct ? "=" : ": ");
        structure_into(out, &v->items[k]);
      }
      out += v->kind == K::Struct ? ")" : "}";
      return;
  }
}

/// A call's structure over the arguments `order` (a missing argument counts as None).
inline std::string structure_of(const Value& call, const std::vector<std::string>& order) {
  std::string out;
  size_t found = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    if (k) out += ", ";
    out += display_key(order[k]) + ": ";
    const Value* v = call.find(order[k], k);
    found += v != nullptr;
    structure_into(out, v);
  }
  // An argument the plan's calls never had (even None) is a structure no package has: every
  // package refuses it ("the package has no argument 'z'").
  if (call.is_keyed() && found < call.keys.size())
    for (size_t k = 0; k < call.keys.size(); ++k)
      if (std::find(order.begin(), order.end(), call.keys[k]) == order.end()) {
        out += (out.empty() ? "" : ", ") + display_key(call.keys[k]) + ": ";
        structure_into(out, &call.items[k]);
      }
  return out;
}

/// The argument keys of every call, in the order the analysis uses: the observed order of
/// forward's arguments first, then any others as first seen.
inline std::vector<std::string> argument_order(const std::vector<const CallSet*>& sets) {
  std::vector<std::string> seen_order, out;
  std::unordered_set<std::string> seen, added;  // linear in the keys (a call may have thousands)
  for (const CallSet* c : sets)
    for (const Value& sig : c->signatures)
      for (const std::string& k : sig.keys)
        if (seen.insert(k).second) seen_order.push_back(k);
  for (const CallSet* c : sets)
    for (const std::string& k : c->preferred_order)
      if (seen.count(k) && added.insert(k).second) out.push_back(k);
  for (const std::string& k : seen_order)
    if (added.insert(k).second) out.push_back(k);
  return out;
}

/// Signatures of one structure, with their counts: what one package covers.
struct Group {
  std::string structure;
  std::vector<Value> signatures;
  std::vector<int64_t> counts;
  std::vector<std::vector<std::string>> stand_ins;
  std::map<std::string, std::pair<int64_t, int64_t>> int_ranges;  ///< every file's, merged (the observed values of integer inputs)
  HashIndex by_hash;  ///< hash_value of each signature -> its index: merging is linear

  int64_t calls() const {
    int64_t n = 0;
    for (int64_t c : counts) n += c;
    return n;
  }
};

/// The CallSet of a group: its signatures and counts; stored, the one signature the analysis
/// picks as example among them ordered by count (the most frequent one whose dynamic dims are
/// all >= 2, as infer_arguments picks among stored calls).
inline CallSet group_call_set(const Group& g, bool keyed, const std::vector<std::string>& order) {
  CallSet c;
  c.keyed = keyed;
  c.preferred_order = order;
  c.signatures = g.signatures;
  c.counts = g.counts;
  c.stand_ins = g.stand_ins;
  c.int_ranges = g.int_ranges;
  c.total_calls = g.calls();
  std::vector<size_t> by_count(g.signatures.size());
  for (size_t i = 0; i < by_count.size(); ++i) by_count[i] = i;
  std::stable_sort(by_count.begin(), by_count.end(), [&](size_t a, size_t b) { return g.counts[a] > g.counts[b]; });
  for (size_t i : by_count) c.stored.push_back(g.signatures[i]);
  Analysis a(c);
  size_t chosen = choose_stored_call(a, dim_facts(a, {}), {}, c.stored);
  c.stored = {c.stored[chosen]};
  return c;
}

/// Splits `g` in two at the median (by calls) of its widest dynamic dim (largest max/min);
/// false when no dim varies.
/// A group's widest dim: the largest max/min among the dims that vary (ratio 1: none varies).
struct WidestDim {
  double ratio = 1;
  size_t leaf = 0, dim = 0;
};

inline WidestDim widest_dim(const Analysis& a) {
  const DimFacts f = dim_facts(a, {});
  WidestDim w;
  for (size_t l = 0; l < f.dynamic.size(); ++l)
    for (size_t d = 0; d < f.dynamic[l].size(); ++d) {
      double ratio = static_cast<double>(f.max[l][d]) / static_cast<double>(std::max<int64_t>(f.min[l][d], 1));
      if (f.min[l][d] != f.max[l][d] && ratio > w.ratio) w = {ratio, l, d};
    }
  return w;
}

inline bool split_group(const Group& g, bool keyed, const std::vector<std::string>& order, Group& low, Group& high) {
  CallSet c = group_call_set(g, keyed, order);
  Analysis a(c);
  const WidestDim w = widest_dim(a);
  if (w.ratio <= 1) return false;
  const size_t leaf = w.leaf, dim = w.dim;
  auto size_of = [&](size_t s) {
    const Value* v = a.leaves()[leaf].per_signature[s];
    return v ? v->spec.sizes[dim] : 0;
  };
  std::map<int64_t, int64_t> calls_at;
  for (size_t s = 0; s < g.signatures.size(); ++s) calls_at[size_of(s)] += g.counts[s];
  // The largest size whose calls at or below it make at most half, but at least the smallest.
  int64_t half = g.calls() / 2, sum = 0, cut = calls_at.begin()->first;
  for (const auto& [size, n] : calls_at) {
    if (size == calls_at.rbegin()->first) break;
    if (sum + n > half && sum > 0) break;
    sum += n;
    cut = size;
  }
  low = Group{g.structure, {}, {}, {}, g.int_ranges, {}};
  high = Group{g.structure, {}, {}, {}, g.int_ranges, {}};
  for (size_t s = 0; s < g.signatures.size(); ++s) {
    Group& to = size_of(s) <= cut ? low : high;
    to.signatures.push_back(g.signatures[s]);
    to.counts.push_back(g.counts[s]);
    if (s < g.stand_ins.size()) {
      to.stand_ins.resize(to.signatures.size() - 1);
      to.stand_ins.push_back(g.stand_ins[s]);
    }
  }
  return true;
}

/// A path inside the plan's folder, by the one rule for names beneath a folder
/// (beneath_name_problem: relative, plain components).
inline std::string safe_relative(const json::Node& node) {
  std::string p(node.as_string());
  if (const std::string problem = optrace::detail::beneath_name_problem(p); !problem.empty())
    optrace::detail::raise_json(node.path(), "'" + p + "' is not a file name inside the plan's folder (" + problem + ")");
  return p;
}

/// A plan's id: 16 hex digits of FNV-1a over its plan.json text (written without the id).
inline std::string id_of(std::string_view plan_json) {
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(optrace::detail::fnv1a(plan_json)));
  return out;
}

/// plan.json's "id": 1 to 64 letters, digits, '.', '_' or '-' (it is shown in stats and stored in
/// packages' metadata; a hand-written plan may name itself).
inline std::string checked_id(const json::Node& node) {
  std::string id(node.as_string());
  const bool plain = std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
  if (id.empty() || id.size() > 64 || !plain)
    optrace::detail::raise_json(node.path(), "a plan's id is 1 to 64 letters, digits, '.', '_' or '-'");
  return id;
}

/// A planned dim as the guard has a compiled one: static at its example, or its symbol (`coeff *
/// s + offset`) within the observed range.
inline aoti::GuardDim guard_dim(const DimSpec& spec) {
  aoti::GuardDim g;
  g.is_static = !spec.dynamic;
  g.size = spec.example;
  if (spec.dynamic) {
    g.expr = spec.expr();
    g.symbol = spec.symbol;
    g.solvable = !spec.symbol.empty();
    g.coeff = spec.coeff;
    g.offset = spec.offset;
    g.min = spec.min;
    if (spec.max != kUnboundedDim) g.max = spec.max;
  }
  return g;
}

/// One node of a package's in_spec as planned, from its calls' template `v` and their dims `shape`:
/// a None (an argument the calls omit or pass as None), a leaf (a tensor, with its dims and
/// dtype, or a scalar, baked in as torch.export bakes it), or a container of them. Its leaves go
/// to `inputs` in the order the walk flattens them, each with torch's path.
inline aoti::TreeSpec planned_node(const Value* v, const ShapeNode* shape, const std::string& path,
                                   std::vector<aoti::GuardInput>& inputs) {
  using K = Value::Kind;
  aoti::TreeSpec spec;
  if (!v || v->kind == K::None) {
    spec.type = aoti::TreeSpec::Type::None;
    return spec;
  }
  if (v->is_container()) {
    spec.type = v->kind == K::List ? aoti::TreeSpec::Type::List : v->kind == K::Dict ? aoti::TreeSpec::Type::Dict : aoti::TreeSpec::Type::Tuple;
    if (v->kind == K::Dict) spec.keys = v->keys;
    for (size_t i = 0; i < v->items.size(); ++i) {
      const ShapeNode* item = shape && i < shape->items.size() ? &shape->items[i] : nullptr;
      const std::string below = v->kind == K::Dict     ? path + "['" + v->keys[i] + "']"
                                : v->kind == K::Struct ? path + "." + v->keys[i]
                                                       : path + "[" + std::to_string(i) + "]";
      spec.children.push_back(planned_node(&v->items[i], item, below, inputs));
    }
    return spec;
  }
  aoti::GuardInput in;
  in.path = path;
  if (v->is_tensor()) {
    in.kind = "tensor";
    in.scalar_type = v->spec.dtype;
    in.dtype = std::string(python_dtype_name(v->spec.dtype));
    in.device = c10::DeviceTypeName(v->spec.device.type(), /*lower_case=*/true);
    for (size_t d = 0; d < v->spec.sizes.size(); ++d) {
      if (shape && d < shape->dims.size()) {
        in.dims.push_back(guard_dim(shape->dims[d]));
      } else {  // no planned dim: static at the template's size
        aoti::GuardDim g;
        g.size = v->spec.sizes[d];
        in.dims.push_back(g);
      }
    }
  } else {
    in.kind = v->kind == K::Int ? "int" : v->kind == K::Double ? "float" : v->kind == K::Bool ? "bool" : "str";
    in.value = *v;
  }
  inputs.push_back(std::move(in));
  return spec;
}

/// What a package takes before compile_plan records what torch compiled (`in_spec` and `guard`
/// in plan.json): the tree and inputs of its calls, every argument of the plan by name (none
/// positional: a recorded call names them all), its dims as planned. With the `compiled_guard`
/// of a plan that recorded no in_spec (compiled before it was recorded), each tensor's dims are
/// the compiled ones, found by torch's path; a guard that names a tensor the calls do not have
/// throws JsonError at its `path` (not echoed: the file may be hostile), below `where`.
inline aoti::CallCheck planned_check(const Analysis& a, const DynamicShapes& ds, const std::vector<std::string>& order,
                                     const std::string& compiled_guard, const std::string& where) {
  aoti::TreeSpec args{aoti::TreeSpec::Type::Tuple, "builtins.tuple", {}, {}};
  aoti::TreeSpec kwargs{aoti::TreeSpec::Type::Dict, "builtins.dict", {}, {}};
  aoti::CallCheck check;
  check.guarded = true;
  std::unordered_map<std::string, size_t> argument;  // the calls' arguments, by key
  for (size_t k = 0; k < a.keys().size(); ++k) argument.emplace(a.keys()[k], k);
  for (const std::string& key : order) {
    const auto found = argument.find(key);
    const Value* v = found == argument.end() ? nullptr : &a.tmpl().items[found->second];
    const ShapeNode* shape = found == argument.end() || found->second >= ds.arguments().size() ? nullptr : &ds.arguments()[found->second];
    kwargs.keys.push_back(key);
    kwargs.children.push_back(planned_node(v, shape, key, check.guard.inputs));
  }
  check.shape = aoti::CallShape::make(std::move(args), std::move(kwargs), {});
  if (compiled_guard.empty()) return check;
  std::unordered_map<std::string, aoti::GuardInput*> tensors;  // the calls' tensors, by torch's path
  for (aoti::GuardInput& in : check.guard.inputs)
    if (in.kind == "tensor") tensors.emplace(in.path, &in);
  std::string missing;  // the JSON pointer of a tensor the guard names that the calls do not have
  try {
    auto doc = json::Document::parse(compiled_guard);
    const json::Node root = doc->root();
    aoti::check_guard_version(root);
    for (json::Node in : root["inputs"].array()) {
      if (in["kind"].as_string() != "tensor") continue;
      const json::Node path = in["path"];
      const auto found = tensors.find(std::string(path.as_string()));
      if (found == tensors.end()) {
        missing = path.path();
        break;
      }
      found->second->dims = aoti::read_guard_dims(in["sizes"], "", nullptr);
    }
  } catch (const JsonError& e) {
    throw e.under(where);  // the text is a JSON document of its own
  }
  if (!missing.empty()) optrace::detail::raise_json(where + missing, "the compiled package takes a tensor the package's calls do not have");
  return check;
}

/// One dim of a call a package does not take: a row of drift.
struct Miss {
  std::string argument;
  int64_t dim, value, min, max;
};

}  // namespace detail::plan

/// The packages that cover a server's observed calls: one per call structure at least, each with
/// the calls it covers and the ranges it is compiled for.
///
/// Example:
///   optrace::Plan plan = optrace::Plan::from_observations({optrace::load_observations("served.json")});
///   plan.save("plan");                                    // plan/plan.json, plan/p0.observations.json, ...
///   // compile: compile_plan(model, "plan/plan.json") (examples/python/compile_package.py)
///   optrace::DriftReport d = plan.drift({optrace::load_observations("today.json")});
///   if (!d.all_covered()) std::cerr << d.to_string();  // which argument and dim left which range
class Plan {
 public:
  /// Plans packages for every call of the observation files (several merge: their counts add).
  /// Throws ArgumentError when there is no call, or `max_packages` is below the number of call
  /// structures; a group whose calls the analysis cannot align names the structure.
  static Plan from_observations(const std::vector<Observations>& files, const PlanOptions& options = {},
                                const std::vector<std::string>& sources = {}) {
    std::vector<const detail::CallSet*> sets;
    for (const Observations& o : files) sets.push_back(o.calls_.get());
    OPTRACE_CHECK(!sets.empty(), ArgumentError, "a plan needs at least one observation file");
    Plan plan;
    plan.sources_ = sources;
    plan.order_ = detail::plan::argument_order(sets);
    bool keyed = false;
    for (const detail::CallSet* c : sets) keyed |= c->keyed;
    std::vector<detail::plan::Group> groups;
    std::unordered_map<std::string, size_t> group_of;
    std::map<std::string, std::pair<int64_t, int64_t>> int_ranges;
    for (const detail::CallSet* c : sets) detail::merge_int_ranges(int_ranges, c->int_ranges);
    for (size_t f = 0; f < sets.size(); ++f) {
      const detail::CallSet& c = *sets[f];
      // Each file's counts are checked against its own total (the reader): once the totals add
      // up, every sum below (a group's, a package's) is smaller and cannot overflow.
      if (!detail::add_calls(plan.total_calls_, c.total_calls))
        detail::raise<ArgumentError>(sources.size() > f ? "'" + sources[f] + "'" : "file " + std::to_string(f),
                                     ": with the files before it, its ", detail::kCallsOverflow, ": plan fewer files");
      if (c.dropped_signatures > 0)
        plan.warnings_.push_back(detail::concat(sources.size() > f ? sources[f] : "file " + std::to_string(f), ": ",
                                                c.total_calls - sum(c.counts), " calls were past the observer's max_signatures: only their "
                                                "ranges are known, and the plan does not cover them"));
      for (size_t s = 0; s < c.signatures.size(); ++s) {
        std::string structure = detail::plan::structure_of(c.signatures[s], plan.order_);
        auto [it, fresh] = group_of.emplace(structure, groups.size());
        if (fresh) groups.push_back(detail::plan::Group{structure, {}, {}, {}, int_ranges, {}});
        detail::plan::Group& g = groups[it->second];
        const uint64_t hash = hash_value(c.signatures[s]);
        uint32_t same = 0;
        if (g.by_hash.find(hash, [&](uint32_t i) { return g.signatures[i] == c.signatures[s]; }, same)) {
          g.counts[same] += c.counts[s];
          continue;
        }
        g.by_hash.insert(hash, static_cast<uint32_t>(g.signatures.size()));
        g.signatures.push_back(c.signatures[s]);
        g.counts.push_back(c.counts[s]);
        g.stand_ins.push_back(s < c.stand_ins.size() ? c.stand_ins[s] : std::vector<std::string>{});
      }
    }
    OPTRACE_CHECK(!groups.empty(), ArgumentError, "the observation files hold no call");
    const size_t limit = static_cast<size_t>(options.max_packages());
    OPTRACE_CHECK(limit == 0 || limit >= groups.size(), ArgumentError, "max_packages ", limit, " is below the ", groups.size(),
                  " call structures observed: each structure needs a package of its own");
    while (limit > groups.size()) {
      size_t widest = groups.size();
      double widest_ratio = 1;
      for (size_t i = 0; i < groups.size(); ++i) {
        double r = range_ratio(groups[i], keyed, plan.order_);
        if (r > widest_ratio) widest = i, widest_ratio = r;
      }
      detail::plan::Group low, high;
      if (widest == groups.size() || !detail::plan::split_group(groups[widest], keyed, plan.order_, low, high)) break;
      groups[widest] = std::move(low);
      groups.insert(groups.begin() + static_cast<std::ptrdiff_t>(widest) + 1, std::move(high));
    }
    std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.calls() > b.calls(); });
    for (size_t i = 0; i < groups.size(); ++i) {
      PlannedPackage p;
      p.name = "p" + std::to_string(i);
      p.file = p.name + ".pt2";
      p.observations_file = p.name + ".observations.json";
      p.structure = groups[i].structure;
      p.calls = groups[i].calls();
      try {
        p.observations = Observations(detail::plan::group_call_set(groups[i], keyed, plan.order_));
      } catch (const ArgumentError& e) {
        detail::raise<ArgumentError>("the calls of structure (", p.structure, ") cannot be planned: ", e.message());
      }
      plan.add(std::move(p));
    }
    plan.id_ = detail::plan::id_of(plan.to_json());
    return plan;
  }

  /// Reads a plan: `DIR/plan.json` or `DIR` (and each package's observation file beside it).
  /// Throws IoError or JsonError naming the file: not a plan, another version, a package path
  /// outside the plan's folder, a missing observation file.
  static Plan load(const std::string& path) {
    std::error_code unread;  // a path that cannot be examined (a link loop) is read as a file: the read names it
    std::string file = std::filesystem::is_directory(path, unread) ? (std::filesystem::path(path) / "plan.json").string() : path;
    Plan plan;
    plan.path_ = file;
    const std::string dir = std::filesystem::path(file).parent_path().string();
    detail::about_file(file, [&] {
      auto doc = json::Document::parse(detail::read_file(file));
      json::Node root = doc->root();
      json::Node format = root["format"];
      if (!format.is_string() || format.as_string() != kPlanFormat)
        optrace::detail::raise_json(format.path(), "not an optrace plan (expected \"format\": \"optrace.plan\")");
      int64_t version = root["version"].as_int();
      if (version != kPlanVersion)
        optrace::detail::raise_json("/version", "plan version " + std::to_string(version) + "; this optrace reads version " +
                                        std::to_string(kPlanVersion));
      json::Node id(root);
      if (root.find("id", id)) plan.id_ = detail::plan::checked_id(id);  // a plan written before ids: none
      for (json::Node s : root["sources"].array()) plan.sources_.emplace_back(s.as_string());
      for (json::Node a : root["arg_names"].array()) plan.order_.emplace_back(a.as_string());
      plan.total_calls_ = root["calls"].as_int();
      if (plan.total_calls_ < 0) optrace::detail::raise_json("/calls", "a count of calls is >= 0");
      int64_t packaged = 0;
      // Each file once, by device and inode: packages that name one observation file (by one name
      // or through links) share one copy of its calls, not one each (1,000 packages naming one
      // 5 MB file ran out of memory).
      std::map<std::pair<dev_t, ino_t>, Observations> loaded;
      for (json::Node w : root["warnings"].array()) plan.warnings_.emplace_back(w.as_string());
      auto packages = root["packages"].array();
      if (packages.size() == 0) optrace::detail::raise_json("/packages", "a plan without packages");
      for (json::Node p : packages) {
        PlannedPackage pkg;
        pkg.name = std::string(p["name"].as_string());
        for (const PlannedPackage& other : plan.packages_)
          if (other.name == pkg.name) optrace::detail::raise_json(p["name"].path(), "two packages named '" + pkg.name + "'");
        pkg.file = detail::plan::safe_relative(p["file"]);
        pkg.observations_file = detail::plan::safe_relative(p["observations"]);
        pkg.structure = std::string(p["structure"].as_string());
        pkg.calls = p["calls"].as_int();
        if (pkg.calls < 0 || !detail::add_calls(packaged, pkg.calls) || packaged > plan.total_calls_)
          optrace::detail::raise_json(p["calls"].path(), "the packages' calls add up past the plan's " +
                                                             std::to_string(plan.total_calls_) + " (or one is negative)");
        json::Node guard(p);
        if (p.find("guard", guard) && !guard.is_null()) pkg.compiled_guard = std::string(guard.as_string());
        json::Node in_spec(p);
        if (p.find("in_spec", in_spec) && !in_spec.is_null()) pkg.compiled_in_spec = std::string(in_spec.as_string());
        const std::string observations = detail::beneath_shown(dir, pkg.observations_file);
        pkg.observations = detail::about_file(observations, [&] {
          const detail::Fd fd = detail::open_file_beneath(dir, pkg.observations_file);
          struct stat st {};
          if (::fstat(fd.get(), &st) != 0) detail::raise<IoError>("cannot read it: ", std::strerror(errno));
          auto [at, first] = loaded.try_emplace({st.st_dev, st.st_ino});
          if (first) at->second = Observations::from_json(detail::read_all(fd.get(), 0, observations));
          return at->second;
        });
        plan.add(std::move(pkg), p.path());
      }
    });
    return plan;
  }

  /// The packages, most calls first (plan.json's order: the order PackageSet tries them in).
  const std::vector<PlannedPackage>& packages() const { return packages_; }
  /// The argument keys in order, as the observation files name them.
  const std::vector<std::string>& argument_names() const { return order_; }
  /// The observation files it was planned from, as given.
  const std::vector<std::string>& sources() const { return sources_; }
  /// What to know: calls the plan cannot cover (past the observer's max_signatures).
  const std::vector<std::string>& warnings() const { return warnings_; }
  /// Calls observed in all.
  int64_t num_calls() const { return total_calls_; }
  /// The file it was loaded from (empty when planned here).
  const std::string& path() const { return path_; }
  /// Every file of a loaded plan a command may read, as messages show them: plan.json, then each
  /// package's observation file and package, then the weights and the module compile_plan writes
  /// beside them (kPlanWeightsFile, kPlanReferenceFile), whether they exist yet or not. An output
  /// must land on none of them (the CLI checks it). Empty for a plan made here and not loaded.
  std::vector<std::string> files() const {
    if (path_.empty()) return {};
    const std::string dir = std::filesystem::path(path_).parent_path().string();
    std::vector<std::string> out{path_};
    for (const PlannedPackage& p : packages_) {
      out.push_back(detail::beneath_shown(dir, p.observations_file));
      out.push_back(detail::beneath_shown(dir, p.file));
    }
    out.push_back(detail::beneath_shown(dir, std::string(kPlanWeightsFile)));
    out.push_back(detail::beneath_shown(dir, std::string(kPlanReferenceFile)));
    return out;
  }
  /// What names this plan: 16 hex digits of the hash of its plan.json (packages, ranges, sources,
  /// versions), made when it is planned (the same files planned alike give the same id), stored
  /// in plan.json and in each package compile_plan compiles for it (metadata "optrace.plan"), so
  /// that a package of another plan is refused at load and the serving stats say which plan each
  /// row came from. Empty for a plan.json written before ids (optrace 0.1.0 before issue 57).
  const std::string& id() const { return id_; }

  /// plan.json's text (docs/serve.md, "The plan").
  std::string to_json(int indent = 1) const {
    json::Writer w(indent);
    w.begin_object().key("format").value(kPlanFormat).key("version").value(kPlanVersion);
    if (!id_.empty()) w.key("id").value(id_);
    w.key("producer").begin_object().key("optrace").value("0.1.0").key("torch").value(TORCH_VERSION).end_object();
    w.key("sources").begin_array();
    for (const std::string& s : sources_) w.value(s);
    w.end_array().key("arg_names").begin_array();
    for (const std::string& a : order_) w.value(a);
    w.end_array().key("calls").value(total_calls_).key("warnings").begin_array();
    for (const std::string& s : warnings_) w.value(s);
    w.end_array().key("packages").begin_array();
    for (const PlannedPackage& p : packages_) {
      w.begin_object().key("name").value(p.name).key("file").value(p.file).key("observations").value(p.observations_file);
      w.key("structure").value(p.structure).key("calls").value(p.calls);
      w.key("signatures").value(static_cast<int64_t>(p.observations.history().size()));
      w.key("example").value(p.observations.describe_arguments());
      w.key("ranges").begin_object();
      for (const SymbolRange& s : p.dynamic_shapes.symbols()) w.key(s.name).begin_array().value(s.min).value(s.max).end_array();
      w.end_object().key("dynamic_shapes");
      p.dynamic_shapes.write_json(w);
      if (!p.compiled_guard.empty()) w.key("guard").value(p.compiled_guard);
      if (!p.compiled_in_spec.empty()) w.key("in_spec").value(p.compiled_in_spec);
      w.end_object();
    }
    w.end_array().end_object();
    return w.take();
  }

  /// Writes `DIR/plan.json` and each package's observation file into `dir` (made if missing),
  /// each atomically. Throws IoError.
  void save(const std::string& dir) const {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) detail::raise_about_file<IoError>(dir, "cannot make the plan's folder: ", ec.message());
    for (const PlannedPackage& p : packages_) p.observations.save((std::filesystem::path(dir) / p.observations_file).string());
    detail::write_file_atomic((std::filesystem::path(dir) / "plan.json").string(), to_json() + "\n");
  }

  /// The share of the calls in `files` that no package covers, by call structure, argument and
  /// dim, with the sizes seen and the package's ranges. A call is covered when a package takes
  /// it by the check the package serves by (aoti::CallCheck: its tree, then every input's kind,
  /// value, dtype, device and rank, then every size by the guard's rule), over what compile_plan
  /// recorded in plan.json (`in_spec`, `guard`), else over the plan's calls and ranges; each row
  /// says which (DriftRow::source). A call no package takes is blamed on the closest one by the
  /// set's own ranking (aoti::closer): its rows are that package's dims outside, or, when no
  /// package got to its sizes, one row for a structure no package has.
  DriftReport drift(const std::vector<Observations>& files) const {
    DriftReport report;
    report.plan = path_;
    int64_t total = 0;  // checked once: the report's sums are below it
    for (const Observations& o : files)
      OPTRACE_CHECK(detail::add_calls(total, o.calls_->total_calls), ArgumentError, "the observation files' ", detail::kCallsOverflow,
                    ": drift fewer files at a time");
    std::map<std::tuple<std::string, std::string, int64_t>, size_t> row_of;
    std::vector<detail::aoti::FlatValue> flat;
    auto structure_row = [&](const std::string& s, bool planned) -> DriftReport::Structure& {
      for (DriftReport::Structure& r : report.structures)
        if (r.structure == s) return r;
      report.structures.push_back({s, 0, 0, planned});
      return report.structures.back();
    };
    for (const Observations& o : files) {
      const detail::CallSet& c = *o.calls_;
      for (size_t s = 0; s < c.signatures.size(); ++s) {
        const Value& call = c.signatures[s];
        const int64_t n = c.counts[s];
        const std::string structure = detail::plan::structure_of(call, order_);
        report.calls += n;
        const Routed routed = route(call, flat);
        const bool taken = routed.package != Routed::kNone;
        // A call that got to a package's sizes has its structure: its rows are that package's
        // dims outside, each judged by the guard's size rule.
        const bool sized = !taken && routed.closest != Routed::kNone && detail::aoti::refusal_stage(routed.why) == 2;
        std::vector<detail::plan::Miss> closest_misses;
        if (sized) {
          const detail::aoti::CallCheck& check = checks_[routed.closest];
          check.shape.try_flatten(call, flat, nullptr);
          std::vector<detail::aoti::Guard::Miss> misses;
          check.guard.size_misses(flat, &misses);
          for (const detail::aoti::Guard::Miss& m : misses) {
            const detail::aoti::GuardInput& in = check.guard.inputs[m.input];
            const detail::aoti::GuardDim& g = in.dims[m.dim];
            closest_misses.push_back({in.path, static_cast<int64_t>(m.dim), m.value, g.is_static ? g.size : g.min.value_or(0),
                                      g.is_static ? g.size : g.max.value_or(kUnboundedDim)});
          }
        } else if (!taken) {
          closest_misses.push_back({"", -1, 0, 0, 0});
        }
        DriftReport::Structure& row = structure_row(structure, taken || sized);
        row.calls += n;
        if (taken) {
          row.covered += n;
          report.covered += n;
          continue;
        }
        for (const detail::plan::Miss& m : closest_misses) {
          auto [it, fresh] = row_of.emplace(std::make_tuple(structure, m.argument, m.dim), report.rows.size());
          if (fresh) {
            DriftRow r;
            r.structure = structure;
            r.argument = m.argument;
            r.dim = m.dim;
            r.seen_min = r.seen_max = m.value;
            r.planned_min = m.min;
            r.planned_max = m.max;
            r.package = sized ? packages_[routed.closest].name : "";
            r.source = sized ? source_of(packages_[routed.closest]) : "";
            report.rows.push_back(r);
          }
          DriftRow& r = report.rows[it->second];
          r.calls += n;
          r.seen_min = std::min(r.seen_min, m.value);
          r.seen_max = std::max(r.seen_max, m.value);
        }
      }
    }
    std::stable_sort(report.rows.begin(), report.rows.end(), [](const DriftRow& a, const DriftRow& b) { return a.calls > b.calls; });
    return report;
  }

  /// The signatures of `observations` each package covers, as observations of their own: element
  /// i for package i (a signature goes to the first package that covers it, as PackageSet routes
  /// a call), and a last one for the signatures no package covers. `optrace verify PLAN` verifies
  /// each package on its own.
  std::vector<Observations> assign(const Observations& observations) const {
    const detail::CallSet& c = *observations.calls_;
    std::vector<detail::CallSet> sets(packages_.size() + 1);
    std::vector<detail::aoti::FlatValue> flat;
    for (detail::CallSet& o : sets) {
      o.keyed = c.keyed;
      o.preferred_order = c.preferred_order;
      o.int_ranges = c.int_ranges;
    }
    for (size_t s = 0; s < c.signatures.size(); ++s) {
      const Routed routed = route(c.signatures[s], flat);
      const size_t to = routed.package == Routed::kNone ? packages_.size() : routed.package;
      detail::CallSet& into = sets[to];
      into.signatures.push_back(c.signatures[s]);
      into.counts.push_back(c.counts[s]);
      into.total_calls += c.counts[s];
      if (s < c.stand_ins.size()) {
        into.stand_ins.resize(into.signatures.size() - 1);
        into.stand_ins.push_back(c.stand_ins[s]);
      }
    }
    std::vector<Observations> out;
    out.reserve(sets.size());
    for (detail::CallSet& set : sets) out.push_back(Observations(std::move(set)));
    return out;
  }

  /// One line per package: name, calls, structure, ranges, example.
  std::string summary() const {
    std::ostringstream out;
    int64_t planned = 0;
    for (const PlannedPackage& p : packages_) planned += p.calls;
    out << packages_.size() << " packages for " << planned << " of " << total_calls_ << " observed calls\n";
    for (const PlannedPackage& p : packages_) {
      out << "  " << p.name << "  " << p.calls << " calls  (" << p.structure << ")\n      ";
      if (p.dynamic_shapes.symbols().empty()) out << "static";
      for (size_t k = 0; k < p.dynamic_shapes.symbols().size(); ++k) {
        const SymbolRange& s = p.dynamic_shapes.symbols()[k];
        out << (k ? ", " : "") << s.name << " in [" << s.min << ", " << s.max << "]";
      }
      out << "; example " << p.observations.describe_arguments() << "\n";
    }
    for (const std::string& w : warnings_) out << "warning: " << w << "\n";
    return out.str();
  }

 private:
  // `where`: the package in plan.json, for an error.
  void add(PlannedPackage p, const std::string& where = "") {
    p.dynamic_shapes = p.observations.infer_dynamic_shapes(DynamicShapesOptions().dim_style(DimStyle::named));
    if (!p.compiled_guard.empty() && !p.compiled_in_spec.empty()) {
      // Each text is a JSON document of its own: an error names the member it is in.
      std::optional<detail::aoti::Guard> guard;
      try {
        guard = detail::aoti::Guard::parse(p.compiled_guard);
      } catch (const JsonError& e) {
        throw e.under(where + "/guard");
      }
      try {
        checks_.push_back(detail::aoti::CallCheck::of(p.compiled_in_spec, std::move(guard)));
      } catch (const JsonError& e) {
        throw e.under(where + "/in_spec");
      }
    } else {
      const detail::Analysis analysis(*p.observations.calls_);
      checks_.push_back(detail::plan::planned_check(analysis, p.dynamic_shapes, order_, p.compiled_guard, where + "/guard"));
    }
    packages_.push_back(std::move(p));
  }

  // Whose record a package's check is: "compiled" (plan.json's guard, with its in_spec or on the
  // plan's tree) or "planned".
  static const char* source_of(const PlannedPackage& p) { return p.compiled_guard.empty() ? "planned" : "compiled"; }

  // Which package takes a call (the first that does, as PackageSet routes), and when none does,
  // the closest by the set's own ranking (aoti::closer), with its refusal.
  struct Routed {
    static constexpr size_t kNone = static_cast<size_t>(-1);
    size_t package = kNone, closest = kNone;
    detail::aoti::Refusal why;
  };
  Routed route(const Value& call, std::vector<detail::aoti::FlatValue>& flat) const {
    Routed r;
    for (size_t i = 0; i < checks_.size(); ++i) {
      detail::aoti::Refusal why;
      why.want_message = false;
      if (checks_[i].accepts(call, flat, &why)) {
        r.package = i;
        return r;
      }
      if (r.closest == Routed::kNone || detail::aoti::closer(why, r.why)) r.closest = i, r.why = std::move(why);
    }
    return r;
  }

  static int64_t sum(const std::vector<int64_t>& xs) {
    int64_t n = 0;
    for (int64_t x : xs) n += x;
    return n;
  }

  static double range_ratio(const detail::plan::Group& g, bool keyed, const std::vector<std::string>& order) {
    const detail::CallSet c = detail::plan::group_call_set(g, keyed, order);
    return detail::plan::widest_dim(detail::Analysis(c)).ratio;
  }

  std::vector<PlannedPackage> packages_;
  std::vector<detail::aoti::CallCheck> checks_;  ///< per package: what drift and assign judge calls by
  std::vector<std::string> sources_, order_, warnings_;
  int64_t total_calls_ = 0;
  std::string path_, id_;
};

}  // namespace optrace
