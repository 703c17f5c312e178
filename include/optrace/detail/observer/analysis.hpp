// optrace/detail/observer/analysis.hpp: from recorded calls to dynamic shapes and export arguments
#pragma once
// The same analysis serves a live InputObserver and an observation file loaded from disk: both
// hand over a CallSet. Calls are aligned on one template built by merging every distinct call
// signature (so a tensor that is None in one call and present in another is still a tensor
// input); the merge is where mismatches (rank, length, scalar value) become errors.

#include <optrace/detail/observer/call_set.hpp>
#include <optrace/dynamic_shapes.hpp>
#include <optrace/error.hpp>
#include <optrace/value.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace optrace::detail {

struct PathStep {
  size_t index;
  std::string key;  // for Dict/Struct: looked up by key, so key order may differ between calls
};

inline const Value* follow(const Value& root, const std::vector<PathStep>& path) {
  const Value* v = &root;
  for (const PathStep& step : path) {
    if (v->is_keyed()) v = v->find(step.key, step.index);
    else if (v->is_container() && step.index < v->items.size()) v = &v->items[step.index];
    else return nullptr;
    if (v == nullptr) return nullptr;
  }
  return v;
}

/// The tensor at `path` below argument `key` of a call (a Dict keyed by argument), or nullptr
/// where the call has none there. `argument`: the key's index among the template's (Value::find's hint).
inline const Value* tensor_at(const Value& call, const std::string& key, const std::vector<PathStep>& path, size_t argument = 0) {
  const Value* top = call.find(key, argument);
  const Value* v = top ? follow(*top, path) : nullptr;
  return v && v->is_tensor() ? v : nullptr;
}

inline std::string display_key(const std::string& key) {
  return key.size() > 1 && key[0] == '#' ? "#" + key.substr(1) : key;
}

/// `'cache[1]'`, `'batch.input_ids'`, `'inputs["ids"]'`, `#0[2]`.
inline std::string display_path(const std::string& top, const std::vector<PathStep>& path,
                                const std::vector<Value::Kind>& kinds) {
  std::string s = display_key(top);
  for (size_t k = 0; k < path.size(); ++k) {
    if (kinds[k] == Value::Kind::Struct) s += "." + path[k].key;
    else if (kinds[k] == Value::Kind::Dict) s += "[\"" + path[k].key + "\"]";
    else s += "[" + std::to_string(path[k].index) + "]";
  }
  return top.size() > 1 && top[0] == '#' ? "argument " + s : "argument '" + s + "'";
}

inline const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::None: return "None";
    case Value::Kind::Tensor: return "a tensor";
    case Value::Kind::Int: return "an int";
    case Value::Kind::Double: return "a float";
    case Value::Kind::Bool: return "a bool";
    case Value::Kind::String: return "a string";
    case Value::Kind::List: return "a list";
    case Value::Kind::Tuple: return "a tuple";
    case Value::Kind::Dict: return "a dict";
    case Value::Kind::Struct: return "a struct";
  }
  return "?";
}

inline std::string scalar_text(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Int: return std::to_string(v.int_value);
    case Value::Kind::Double: return concat(v.double_value);
    case Value::Kind::Bool: return v.bool_value ? "True" : "False";
    case Value::Kind::String: return "'" + v.text + "'";
    default: return describe(v);
  }
}

inline std::string join_keys(const std::vector<std::string>& keys) {
  std::string s = "[";
  for (size_t k = 0; k < keys.size(); ++k) s += (k ? ", " : "") + keys[k];
  return s + "]";
}

/// Merges `v` into the template `t`, or throws ArgumentError naming the argument.
/// `top`, `path`, `kinds` name where we are.
inline void merge_into(Value& t, const Value& v, const std::string& top, std::vector<PathStep>& path,
                       std::vector<Value::Kind>& kinds) {
  using K = Value::Kind;
  if (v.is_none()) return;
  if (t.is_none()) {
    t = strip_data(v);
    return;
  }
  auto where = [&] { return display_path(top, path, kinds); };
  if (t.kind != v.kind) raise<ArgumentError>(where(), ": ", kind_name(t.kind), " in one call and ", kind_name(v.kind), " in another");
  switch (t.kind) {
    case K::Tensor:
      if (t.spec.dim() != v.spec.dim())
        raise<ArgumentError>(where(), ": tensor rank changed between calls: ", t.spec.dim(), " and ", v.spec.dim());
      if (t.spec.dtype != v.spec.dtype)
        raise<ArgumentError>(where(), ": dtype changed between calls: ", c10::toString(t.spec.dtype), " and ",
                             c10::toString(v.spec.dtype));
      return;
    case K::Int:
    case K::Double:
    case K::Bool:
    case K::String:
      if (t != v)
        raise<ArgumentError>(where(), ": scalar changed between calls: ", scalar_text(t), " and ", scalar_text(v),
                             " (export specializes scalars; pass it as a tensor if it varies)");
      return;
    case K::List:
    case K::Tuple:
      if (t.items.size() != v.items.size())
        raise<ArgumentError>(where(), ": ", t.kind == K::List ? "list" : "tuple", " length changed between calls: ",
                             t.items.size(), " and ", v.items.size());
      for (size_t k = 0; k < t.items.size(); ++k) {
        path.push_back({k, {}});
        kinds.push_back(t.kind);
        merge_into(t.items[k], v.items[k], top, path, kinds);
        path.pop_back();
        kinds.pop_back();
      }
      return;
    case K::Dict:
    case K::Struct: {
      std::vector<std::string> a = t.keys, b = v.keys;
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      if (a != b)
        raise<ArgumentError>(where(), ": ", t.kind == K::Dict ? "dict keys" : "struct fields", " changed between calls: ",
                             join_keys(t.keys), " and ", join_keys(v.keys));
      for (size_t k = 0; k < t.items.size(); ++k) {
        path.push_back({k, t.keys[k]});
        kinds.push_back(t.kind);
        merge_into(t.items[k], *v.find(t.keys[k], k), top, path, kinds);
        path.pop_back();
        kinds.pop_back();
      }
      return;
    }
    default: return;
  }
}

/// One tensor input, wherever it sits in the argument structure.
struct Leaf {
  size_t argument;             // index into Analysis::keys
  std::vector<PathStep> path;  // below the argument
  std::string where;           // "argument 'x'" for messages
  const Value* node;           // in the template
  std::vector<const Value*> per_signature;  // nullptr where absent or None
  std::vector<bool> stand_in;               // per signature: a value_if_missing value
  const Value* overflow_min = nullptr;
  const Value* overflow_max = nullptr;
};

/// The aligned view of a CallSet. Throws ArgumentError when the calls cannot be aligned.
class Analysis {
 public:
  explicit Analysis(const CallSet& calls) : calls_(calls) {
    if (!calls.recording_errors.empty())
      raise<ArgumentError>("a call could not be recorded: ", calls.recording_errors.front());
    OPTRACE_CHECK(!calls.signatures.empty(), ArgumentError, "no calls were observed");
    collect_keys();
    if (calls.keyed)
      for (const std::string& k : keys_)
        OPTRACE_CHECK(k.empty() || k[0] != '#', ArgumentError, "calls mix positional and keyword arguments, but positional argument ",
                      k.substr(1), " has no name: name the positional arguments with ObserverOptions().arg_names({...})");
    require_a_complete_call();
    build_template();
    collect_leaves(tmpl_);
  }

  const std::vector<std::string>& keys() const { return keys_; }
  const Value& tmpl() const { return tmpl_; }
  const std::vector<Leaf>& leaves() const { return leaves_; }
  const CallSet& calls() const { return calls_; }

 private:
  void collect_keys() {
    std::set<std::string> seen;
    std::vector<std::string> in_order;
    for (const Value& sig : calls_.signatures)
      for (const std::string& k : sig.keys)
        if (seen.insert(k).second) in_order.push_back(k);
    std::set<std::string> added;  // a call may have thousands of arguments: no scan per key
    for (const std::string& k : calls_.preferred_order)
      if (seen.count(k) && added.insert(k).second) keys_.push_back(k);
    for (const std::string& k : in_order)
      if (added.insert(k).second) keys_.push_back(k);
  }

  void require_a_complete_call() {
    int64_t best = -1, best_any = 0;
    for (size_t s = 0; s < calls_.signatures.size(); ++s) {
      const Value& sig = calls_.signatures[s];
      if (sig.num_tensors() > calls_.signatures[best_any].num_tensors()) best_any = static_cast<int64_t>(s);
      bool has_all = true;
      for (size_t k = 0; k < keys_.size() && has_all; ++k) has_all = sig.find(keys_[k], k) != nullptr;
      if (has_all && (best < 0 || sig.num_tensors() > calls_.signatures[best].num_tensors())) best = static_cast<int64_t>(s);
    }
    if (best < 0) {
      const Value& sig = calls_.signatures[best_any];
      std::vector<std::string> lacking;
      for (size_t k = 0; k < keys_.size(); ++k)
        if (!sig.find(keys_[k], k)) lacking.push_back("'" + display_key(keys_[k]) + "'");
      std::string list;
      for (size_t k = 0; k < lacking.size(); ++k) list += (k ? ", " : "") + lacking[k];
      raise<ArgumentError>("no observed call has all the arguments; the call with the most tensors lacks ", list,
                           ": pass every argument in at least one call, or give ObserverOptions().value_if_missing(",
                           lacking.front(), ", ...)");
    }
  }

  // Merged in first-seen order, so messages read "first value and later value".
  void build_template() {
    tmpl_.kind = Value::Kind::Dict;
    tmpl_.keys = keys_;
    tmpl_.items.resize(keys_.size());
    auto merge_call = [&](const Value& sig) {
      for (size_t k = 0; k < keys_.size(); ++k) {
        const Value* v = sig.find(keys_[k], k);
        if (!v) continue;
        std::vector<PathStep> path;
        std::vector<Value::Kind> kinds;
        merge_into(tmpl_.items[k], *v, keys_[k], path, kinds);
      }
    };
    for (const Value& sig : calls_.signatures) merge_call(sig);
    // Stored calls and the overflow ranges come from the same calls; merging them too keeps a
    // damaged observation file from pairing a stored tensor with a template of another rank.
    for (const Value& call : calls_.stored) merge_call(call);
    if (calls_.overflow_min) merge_call(*calls_.overflow_min);
    if (calls_.overflow_max) merge_call(*calls_.overflow_max);
  }

  void collect_leaves(const Value& root) {
    for (size_t k = 0; k < keys_.size(); ++k) {
      std::vector<PathStep> path;
      std::vector<Value::Kind> kinds;
      walk(k, root.items[k], path, kinds);
    }
  }

  void walk(size_t argument, const Value& node, std::vector<PathStep>& path, std::vector<Value::Kind>& kinds) {
    if (node.is_tensor()) {
      Leaf leaf;
      leaf.argument = argument;
      leaf.path = path;
      leaf.where = display_path(keys_[argument], path, kinds);
      leaf.node = &node;
      auto present = [&](const Value& call) { return tensor_at(call, keys_[argument], path, argument); };
      for (size_t s = 0; s < calls_.signatures.size(); ++s) {
        leaf.per_signature.push_back(present(calls_.signatures[s]));
        const auto* filled = s < calls_.stand_ins.size() ? &calls_.stand_ins[s] : nullptr;
        leaf.stand_in.push_back(filled && std::find(filled->begin(), filled->end(), keys_[argument]) != filled->end());
      }
      if (calls_.overflow_min) {
        leaf.overflow_min = present(*calls_.overflow_min);
        leaf.overflow_max = present(*calls_.overflow_max);
      }
      leaves_.push_back(std::move(leaf));
      return;
    }
    for (size_t k = 0; k < node.items.size(); ++k) {
      path.push_back({k, node.is_keyed() ? node.keys[k] : std::string()});
      kinds.push_back(node.kind);
      walk(argument, node.items[k], path, kinds);
      path.pop_back();
      kinds.pop_back();
    }
  }

  const CallSet& calls_;
  std::vector<std::string> keys_;
  Value tmpl_;
  std::vector<Leaf> leaves_;
};

/// Per-dim facts of every leaf: which dims vary, their ranges.
struct DimFacts {
  std::vector<std::vector<bool>> dynamic;  // [leaf][dim]
  std::vector<std::vector<int64_t>> min, max;
};

inline DimFacts dim_facts(const Analysis& a, const DynamicShapesOptions& options) {
  DimFacts f;
  for (const Leaf& leaf : a.leaves()) {
    size_t rank = leaf.node->spec.sizes.size();
    std::vector<bool> dyn(rank, false);
    std::vector<int64_t> mn(rank, INT64_MAX), mx(rank, INT64_MIN);
    auto see = [&](const Value* v, bool as_min, bool as_max) {
      if (!v) return;
      for (size_t d = 0; d < rank; ++d) {
        int64_t x = v->spec.sizes[d];
        if (as_min) mn[d] = std::min(mn[d], x);
        if (as_max) mx[d] = std::max(mx[d], x);
      }
    };
    for (const Value* v : leaf.per_signature) see(v, true, true);
    see(leaf.overflow_min, true, false);
    see(leaf.overflow_max, false, true);
    const std::string& top = a.keys()[leaf.argument];
    bool force0 = options.dim0_dynamic_all() ||
                  std::find(options.dim0_dynamic().begin(), options.dim0_dynamic().end(), top) !=
                      options.dim0_dynamic().end();
    for (size_t d = 0; d < rank; ++d) {
      if (mn[d] == INT64_MAX) mn[d] = mx[d] = leaf.node->spec.sizes[d];
      dyn[d] = mn[d] != mx[d] || (d == 0 && force0);
    }
    f.dynamic.push_back(std::move(dyn));
    f.min.push_back(std::move(mn));
    f.max.push_back(std::move(mx));
  }
  return f;
}

/// How many dynamic dims of `call` are below 2 (torch.export specializes sizes 0 and 1).
inline size_t count_unsafe_dims(const Analysis& a, const DimFacts& facts, const Value& call) {
  size_t n = 0;
  for (size_t l = 0; l < a.leaves().size(); ++l) {
    const Leaf& leaf = a.leaves()[l];
    const Value* v = tensor_at(call, a.keys()[leaf.argument], leaf.path, leaf.argument);
    if (!v) continue;
    for (size_t d = 0; d < facts.dynamic[l].size(); ++d) n += facts.dynamic[l][d] && v->spec.sizes[d] < 2;
  }
  return n;
}

/// The stored call `infer_arguments` starts from (see InferArgumentsOptions): by default the
/// first one that has every argument and every dynamic dim >= 2 (export-safe); failing that,
/// the complete one with the fewest dynamic dims below 2, then the one with most tensors.
inline size_t choose_stored_call(const Analysis& a, const DimFacts& facts, const InferArgumentsOptions& options,
                                 const std::vector<Value>& stored) {
  OPTRACE_CHECK(!stored.empty(), ArgumentError, "no calls were stored (store_n_calls is 0)");
  if (options.call_index() >= 0) {
    OPTRACE_CHECK(static_cast<size_t>(options.call_index()) < stored.size(), ArgumentError, "call index ",
                  options.call_index(), " is out of range: ", stored.size(), " calls are stored");
    return static_cast<size_t>(options.call_index());
  }
  auto complete = [&](const Value& call) {
    for (size_t k = 0; k < a.keys().size(); ++k)
      if (!call.find(a.keys()[k], k)) return false;
    for (const Leaf& leaf : a.leaves())
      if (!tensor_at(call, a.keys()[leaf.argument], leaf.path, leaf.argument)) return false;
    return true;
  };
  std::optional<size_t> best;
  size_t best_unsafe = SIZE_MAX;
  for (size_t c = 0; c < stored.size(); ++c) {
    if (!complete(stored[c])) continue;
    size_t unsafe = count_unsafe_dims(a, facts, stored[c]);
    if (unsafe < best_unsafe) best = c, best_unsafe = unsafe;
    if (unsafe == 0) break;
  }
  OPTRACE_CHECK(!options.export_safe() || best_unsafe == 0, ShapeError,
                "no stored call has every dynamic dim >= 2 (export_safe); store more calls (store_n_calls) or pick one "
                "with call_index");
  if (best) return *best;
  size_t most = 0;
  for (size_t c = 1; c < stored.size(); ++c)
    if (stored[c].num_tensors() > stored[most].num_tensors()) most = c;
  return most;
}

/// Builds the export arguments from a stored call, filling what it lacks: a missing tensor
/// becomes an empty tensor shaped like the same input in other calls with its highest dynamic
/// dim set to 0 (zeros of that shape when no dim is dynamic); a missing scalar takes the
/// template's value.
/// Synthesized tensors go to `device` (default: the device they were seen on). They always have
/// their spec; their data comes from `make` (zeros_of_spec), and stays undefined without it:
/// the analysis only needs sizes, and the optrace front end has no libtorch to build tensors.
using TensorMaker = at::Tensor (*)(const TensorSpec&);

/// A tensor of zeros of `spec`'s sizes, dtype and device (contiguous).
inline at::Tensor zeros_of_spec(const TensorSpec& spec) {
  return at::zeros(spec.sizes, at::TensorOptions().dtype(spec.dtype).device(spec.device));
}

inline Value complete_call(const Analysis& a, const DimFacts& facts, const Value& call, std::optional<c10::Device> device,
                           TensorMaker make) {
  std::unordered_map<const Value*, size_t> leaf_of;
  for (size_t l = 0; l < a.leaves().size(); ++l) leaf_of[a.leaves()[l].node] = l;

  std::function<Value(const Value&, const Value*)> fill = [&](const Value& t, const Value* v) -> Value {
    if (t.is_tensor()) {
      if (v && v->is_tensor()) return *v;
      size_t l = leaf_of.at(&t);
      const Leaf& leaf = a.leaves()[l];
      const Value* ref = &t;
      for (const Value* s : leaf.per_signature)
        if (s) {
          ref = s;
          break;
        }
      // What a freshly allocated tensor has: contiguous, offset 0, no grad.
      Value out;
      out.kind = Value::Kind::Tensor;
      out.spec.sizes = ref->spec.sizes;
      for (size_t d = out.spec.sizes.size(); d-- > 0;)
        if (facts.dynamic[l][d]) {  // the last dynamic dim is 0: no data to make up
          out.spec.sizes[d] = 0;
          break;
        }
      out.spec.strides = TensorSpec::contiguous_strides(out.spec.sizes);
      out.spec.dtype = ref->spec.dtype;
      out.spec.device = device.value_or(ref->spec.device);
      if (make != nullptr) out.data = make(out.spec);
      return out;
    }
    if (!t.is_container()) return v && !v->is_none() ? *v : t;
    Value out = t;
    for (size_t k = 0; k < t.items.size(); ++k) {
      const Value* child = nullptr;
      if (v && v->kind == t.kind) child = t.is_keyed() ? v->find(t.keys[k], k) : (k < v->items.size() ? &v->items[k] : nullptr);
      out.items[k] = fill(t.items[k], child);
    }
    return out;
  };
  return fill(a.tmpl(), &call);
}

/// Dim sequences across signatures, compared where both are present and passed by the caller
/// (a value_if_missing stand-in says nothing about how the model ties its dims).
inline bool same_sequence(const Leaf& la, size_t da, const Leaf& lb, size_t db) {
  std::set<int64_t> distinct;
  for (size_t s = 0; s < la.per_signature.size(); ++s) {
    const Value* x = la.per_signature[s];
    const Value* y = lb.per_signature[s];
    if (!x || !y || la.stand_in[s] || lb.stand_in[s]) continue;
    if (x->spec.sizes[da] != y->spec.sizes[db]) return false;
    distinct.insert(x->spec.sizes[da]);
  }
  if (la.overflow_min && lb.overflow_min &&
      (la.overflow_min->spec.sizes[da] != lb.overflow_min->spec.sizes[db] ||
       la.overflow_max->spec.sizes[da] != lb.overflow_max->spec.sizes[db]))
    return false;
  return distinct.size() >= 2;
}

/// Finds integers a >= 1, b with y = a*x + b wherever both are present, from >= 3 distinct x.
inline std::optional<std::pair<int64_t, int64_t>> linear_relation(const Leaf& lx, size_t dx, const Leaf& ly, size_t dy) {
  std::map<int64_t, int64_t> points;
  for (size_t s = 0; s < lx.per_signature.size(); ++s) {
    const Value* x = lx.per_signature[s];
    const Value* y = ly.per_signature[s];
    if (!x || !y || lx.stand_in[s] || ly.stand_in[s]) continue;
    auto [it, inserted] = points.emplace(x->spec.sizes[dx], y->spec.sizes[dy]);
    if (!inserted && it->second != y->spec.sizes[dy]) return std::nullopt;
  }
  if (points.size() < 3) return std::nullopt;
  auto p0 = *points.begin(), p1 = *std::next(points.begin());
  int64_t rise = p1.second - p0.second, run = p1.first - p0.first;
  if (rise % run != 0) return std::nullopt;
  int64_t coeff = rise / run;
  int64_t offset = p0.second - coeff * p0.first;
  if (coeff < 1 || (coeff == 1 && offset == 0)) return std::nullopt;
  for (const auto& [x, y] : points)
    if (y != coeff * x + offset) return std::nullopt;
  if (lx.overflow_min && ly.overflow_min &&
      (ly.overflow_min->spec.sizes[dy] != coeff * lx.overflow_min->spec.sizes[dx] + offset ||
       ly.overflow_max->spec.sizes[dy] != coeff * lx.overflow_max->spec.sizes[dx] + offset))
    return std::nullopt;
  return std::make_pair(coeff, offset);
}

/// A dynamic dim: dim `dim` of leaf `leaf`.
struct DynamicDim {
  size_t leaf, dim;
};

/// How a class of dynamic dims derives from another: value = coeff * root + offset (root -1: none).
struct DimRelation {
  int64_t root = -1, coeff = 1, offset = 0;
};

/// The dynamic dims in classes that share one symbol, and how the classes derive from each other.
struct DimClasses {
  std::vector<std::vector<DynamicDim>> members;
  std::vector<DimRelation> relation;  // per class
  std::vector<bool> is_base;          // per class: another class derives from it
};

/// What may relate dim `dim` of `leaf` to other dims, when the leaf is present (and not a stand-in)
/// in every signature, and has overflow sizes exactly when `overflow` (the calls have them):
/// `exact`, its sizes per signature then at the overflow; `shape`, those sizes less their minimum,
/// divided by the gcd of what is left. Dims of one sequence (same_sequence) have one `exact`; dims
/// related by y = a*x + b with a >= 1 (linear_relation) have one `shape`. A dim without them (a
/// leaf missing from a signature) may relate to any dim. Both keys only narrow whom a dim is
/// compared with: the comparisons decide, so the classes are those of comparing every pair.
struct DimKeys {
  std::vector<int64_t> exact, shape;
  bool complete = false;
};

inline DimKeys dim_keys(const Leaf& leaf, size_t dim, bool overflow) {
  DimKeys k;
  for (size_t s = 0; s < leaf.per_signature.size(); ++s) {
    if (leaf.per_signature[s] == nullptr || leaf.stand_in[s]) return k;
    k.exact.push_back(leaf.per_signature[s]->spec.sizes[dim]);
  }
  if (overflow != (leaf.overflow_min != nullptr && leaf.overflow_max != nullptr)) return k;
  if (overflow) {
    k.exact.push_back(leaf.overflow_min->spec.sizes[dim]);
    k.exact.push_back(leaf.overflow_max->spec.sizes[dim]);
  }
  k.complete = true;
  // The shape is of the signatures' sizes only: linear_relation fits its line through them.
  const size_t n = leaf.per_signature.size();
  if (n == 0) return k;
  const int64_t low = *std::min_element(k.exact.begin(), k.exact.begin() + static_cast<std::ptrdiff_t>(n));
  uint64_t g = 0;
  for (size_t s = 0; s < n; ++s) g = std::gcd(g, static_cast<uint64_t>(k.exact[s]) - static_cast<uint64_t>(low));
  for (size_t s = 0; s < n; ++s)
    k.shape.push_back(g == 0 ? 0 : static_cast<int64_t>((static_cast<uint64_t>(k.exact[s]) - static_cast<uint64_t>(low)) / g));
  return k;
}

/// Whether some leaf has overflow sizes (the calls went past max_signatures): dim_keys' `overflow`.
inline bool any_overflow(const std::vector<Leaf>& leaves) {
  return std::any_of(leaves.begin(), leaves.end(), [](const Leaf& l) { return l.overflow_min != nullptr; });
}

/// The classes made so far, for the comparisons a new dim needs: a dim with a key (DimKeys'
/// `exact` or `shape`) is compared with the classes of that key and those without one; a dim
/// without one with every class. Always in class order, as comparing with every earlier class.
class ClassIndex {
 public:
  /// Calls `f(c)` for those classes in order, until it returns true.
  template <class F>
  void visit(const std::vector<int64_t>* key, F&& f) const {
    if (key == nullptr) {
      for (size_t c = 0; c < count_; ++c)
        if (f(c)) return;
      return;
    }
    static const std::vector<size_t> none;
    auto it = by_key_.find(*key);
    const std::vector<size_t>& keyed = it == by_key_.end() ? none : it->second;
    size_t i = 0, j = 0;  // the two ascending lists merged
    while (i < keyed.size() || j < keyless_.size()) {
      const size_t c = j == keyless_.size() || (i < keyed.size() && keyed[i] < keyless_[j]) ? keyed[i++] : keyless_[j++];
      if (f(c)) return;
    }
  }
  /// The next class, with its first dim's key (null: none; taken).
  void add(std::vector<int64_t>* key) {
    if (key) by_key_[std::move(*key)].push_back(count_);
    else keyless_.push_back(count_);
    ++count_;
  }

 private:
  std::map<std::vector<int64_t>, std::vector<size_t>> by_key_;
  std::vector<size_t> keyless_;
  size_t count_ = 0;
};

/// Equivalence classes of the dynamic dims: with shared_symbols, a dim joins the first class whose
/// first dim follows the same sizes in every signature (same_sequence). A dim of a leaf present in
/// every signature is compared only with the classes of its own sizes and those whose first dim
/// lacks a signature (DimKeys): linear in the dims where the calls pass every argument.
inline DimClasses group_dynamic_dims(const std::vector<Leaf>& leaves, const DimFacts& facts, bool shared_symbols) {
  DimClasses classes;
  const bool overflow = any_overflow(leaves);
  ClassIndex index;  // by their first dim's sizes
  for (size_t l = 0; l < leaves.size(); ++l)
    for (size_t d = 0; d < facts.dynamic[l].size(); ++d) {
      if (!facts.dynamic[l][d]) continue;
      DimKeys key = dim_keys(leaves[l], d, overflow);
      std::optional<size_t> joined;
      auto join = [&](size_t c) {
        const DynamicDim& first = classes.members[c][0];
        if (!same_sequence(leaves[first.leaf], first.dim, leaves[l], d)) return false;
        joined = c;
        return true;
      };
      if (shared_symbols) index.visit(key.complete ? &key.exact : nullptr, join);
      if (joined) {
        classes.members[*joined].push_back({l, d});
        continue;
      }
      classes.members.push_back({{l, d}});
      index.add(key.complete ? &key.exact : nullptr);
    }
  classes.relation.resize(classes.members.size());
  classes.is_base.resize(classes.members.size(), false);
  return classes;
}

/// Derived dims: each class related linearly (linear_relation) to the first earlier root class
/// that fits; the root is the smaller dim. A class whose first dim's leaf is in every signature
/// is compared only with the classes of its shape and those whose first dim lacks a signature
/// (DimKeys): a class of another shape relates to it in neither direction.
inline void find_derived_dims(const std::vector<Leaf>& leaves, DimClasses& classes) {
  std::vector<DimRelation>& rel = classes.relation;
  std::vector<bool>& is_base = classes.is_base;
  const bool overflow = any_overflow(leaves);
  ClassIndex index;  // by their first dim's shape
  for (size_t c = 0; c < classes.members.size(); ++c) {
    const DynamicDim& mc = classes.members[c][0];
    // Whether class r < c settles c's relation (the loop over every earlier class stops there).
    auto relate = [&](size_t r) {
      if (rel[r].root >= 0) return false;
      const DynamicDim& mr = classes.members[r][0];
      // The root is the smaller dim: c = a*r + b with b >= 0 when a == 1 (s0 + 1, not s0 - 1).
      auto forward = linear_relation(leaves[mr.leaf], mr.dim, leaves[mc.leaf], mc.dim);
      if (forward && (forward->first > 1 || forward->second > 0 || is_base[r])) {
        rel[c] = {static_cast<int64_t>(r), forward->first, forward->second};
        is_base[r] = true;
        return true;
      }
      if (!is_base[r]) {
        if (auto backward = linear_relation(leaves[mc.leaf], mc.dim, leaves[mr.leaf], mr.dim)) {
          rel[r] = {static_cast<int64_t>(c), backward->first, backward->second};
          is_base[c] = true;
          return true;
        }
      }
      if (forward) {
        rel[c] = {static_cast<int64_t>(r), forward->first, forward->second};
        is_base[r] = true;
        return true;
      }
      return false;
    };
    DimKeys key = dim_keys(leaves[mc.leaf], mc.dim, overflow);
    index.visit(key.complete ? &key.shape : nullptr, relate);
    index.add(key.complete ? &key.shape : nullptr);
  }
}

/// Each dynamic dim's DimSpec, by (leaf, dim).
using DynamicDimSpecs = std::map<std::pair<size_t, size_t>, DimSpec>;

/// Symbols, one per root class numbered in order of first appearance, into `symbols` (with the
/// expressions derived from each); returns each dynamic dim's DimSpec by (leaf, dim).
inline DynamicDimSpecs assign_symbols(const DimClasses& classes, const DimFacts& facts, std::vector<SymbolRange>& symbols) {
  const std::vector<DimRelation>& rel = classes.relation;
  std::vector<std::string> symbol_of(classes.members.size());
  for (size_t c = 0; c < classes.members.size(); ++c) {
    if (rel[c].root >= 0) continue;
    SymbolRange s;
    s.name = "s" + std::to_string(symbols.size());
    s.min = INT64_MAX;
    s.max = INT64_MIN;
    for (const DynamicDim& m : classes.members[c]) {
      s.min = std::min(s.min, facts.min[m.leaf][m.dim]);
      s.max = std::max(s.max, facts.max[m.leaf][m.dim]);
    }
    symbol_of[c] = s.name;
    symbols.push_back(std::move(s));
  }
  DynamicDimSpecs dim_specs;
  for (size_t c = 0; c < classes.members.size(); ++c) {
    size_t root = rel[c].root >= 0 ? static_cast<size_t>(rel[c].root) : c;
    bool named = classes.members[c].size() > 1 || rel[c].root >= 0 || classes.is_base[c];
    for (const DynamicDim& m : classes.members[c]) {
      DimSpec spec;
      spec.dynamic = true;
      spec.symbol = symbol_of[root];
      spec.named = named;
      spec.coeff = rel[c].coeff;
      spec.offset = rel[c].offset;
      dim_specs[{m.leaf, m.dim}] = spec;
    }
    if (rel[c].root >= 0) {
      std::string e = dim_specs[{classes.members[c][0].leaf, classes.members[c][0].dim}].expr();
      for (SymbolRange& s : symbols)
        if (s.name == symbol_of[root] && std::find(s.derived.begin(), s.derived.end(), e) == s.derived.end())
          s.derived.push_back(e);
    }
  }
  return dim_specs;
}

/// The tree of ShapeNodes, mirroring the template, with the warnings its dims call for.
struct ShapeTreeBuilder {
  const Analysis& a;
  const DimFacts& facts;
  const DynamicDimSpecs& dim_specs;
  const DynamicShapesOptions& options;
  std::unordered_map<const Value*, size_t> leaf_of;
  std::vector<std::string> warnings;

  ShapeTreeBuilder(const Analysis& analysis, const DimFacts& leaf_facts, const DynamicDimSpecs& specs,
                   const DynamicShapesOptions& shape_options)
      : a(analysis), facts(leaf_facts), dim_specs(specs), options(shape_options) {
    for (size_t l = 0; l < a.leaves().size(); ++l) leaf_of[a.leaves()[l].node] = l;
  }

  ShapeNode build(const Value& t, const Value* ex) {
    ShapeNode n;
    n.kind = t.kind;
    if (t.is_tensor()) {
      size_t l = leaf_of.at(&t);
      for (size_t d = 0; d < t.spec.sizes.size(); ++d) n.dims.push_back(dim_spec(l, d, t, ex));
      return n;
    }
    if (!t.is_container()) {
      n.kind = Value::Kind::None;
      return n;
    }
    n.keys = t.keys;
    for (size_t k = 0; k < t.items.size(); ++k) {
      const Value* child = nullptr;
      if (ex && ex->kind == t.kind) child = t.is_keyed() ? ex->find(t.keys[k], k) : &ex->items[k];
      n.items.push_back(build(t.items[k], child));
    }
    return n;
  }

  // Dim `d` of leaf `l` (template node `t`, example `ex`), warning where torch.export will not
  // take it as the analysis does.
  DimSpec dim_spec(size_t l, size_t d, const Value& t, const Value* ex) {
    DimSpec spec;
    auto it = dim_specs.find({l, d});
    if (it != dim_specs.end()) spec = it->second;
    spec.min = facts.min[l][d];
    spec.max = facts.max[l][d];
    spec.example = ex && ex->is_tensor() ? ex->spec.sizes[d] : t.spec.sizes[d];
    const std::string& where = a.leaves()[l].where;
    if (spec.dynamic && spec.example <= 1)
      warnings.push_back(concat(
          where, " dim ", d, " is dynamic but its example value is ", spec.example,
          " (no stored call has every dynamic dim >= 2): torch.export treats sizes 0 and 1 as constants, so it ",
          options.dim_style() == DimStyle::named || spec.named
              ? std::string("fails on this named dim (\"Constraints violated\")")
              : concat("specializes it to ", spec.example, " (torch 2.6: silently) and the program rejects every other size"),
          "; store a call where it is >= 2 (ObserverOptions().store_n_calls)"));
    if (spec.max == 0) warnings.push_back(concat(where, " dim ", d, " is 0 in every call"));
    return spec;
  }
};

/// infer_dynamic_shapes over a CallSet; the examples come from the default export arguments.
inline DynamicShapes infer_dynamic_shapes(const CallSet& calls, const DynamicShapesOptions& options) {
  Analysis a(calls);
  DimFacts facts = dim_facts(a, options);
  std::optional<Value> example;
  // The example is infer_arguments()' default choice (made on the dims that varied: a dim
  // made dynamic by dim0_dynamic has one value in every call). Only its sizes are needed:
  // synthesized inputs go to the meta device.
  if (!calls.stored.empty()) {
    DimFacts varied = dim_facts(a, {});
    example = complete_call(a, varied, calls.stored[choose_stored_call(a, varied, {}, calls.stored)], c10::Device(c10::kMeta), nullptr);
  }
  DimClasses classes = group_dynamic_dims(a.leaves(), facts, options.shared_symbols());
  if (options.derived_dims()) find_derived_dims(a.leaves(), classes);
  std::vector<SymbolRange> symbols;
  const DynamicDimSpecs dim_specs = assign_symbols(classes, facts, symbols);

  ShapeTreeBuilder tree(a, facts, dim_specs, options);
  std::vector<ShapeNode> arguments;
  for (size_t k = 0; k < a.keys().size(); ++k)
    arguments.push_back(tree.build(a.tmpl().items[k], example ? &example->items[k] : nullptr));
  if (calls.dropped_signatures > 0)
    tree.warnings.push_back(concat(calls.dropped_signatures,
                                   " distinct call signatures beyond max_signatures were kept only as per-dim ranges; "
                                   "shared and derived dims were found from the others"));
  return DynamicShapes(calls.keyed, a.keys(), std::move(arguments), std::move(symbols), std::move(tree.warnings),
                       options.dim_style());
}

/// The export arguments as a Dict Value keyed by argument (tensors without data where the
/// stored call has none: a loaded observation file; synthesized ones made by `make`, see
/// complete_call).
inline Value infer_argument_value(const CallSet& calls, const InferArgumentsOptions& options, std::optional<c10::Device> device,
                                  TensorMaker make) {
  Analysis a(calls);
  DimFacts facts = dim_facts(a, {});
  return complete_call(a, facts, calls.stored[choose_stored_call(a, facts, options, calls.stored)], device, make);
}

inline Arguments to_arguments(const CallSet& calls, const Value& call) {
  Arguments out;
  for (size_t k = 0; k < call.keys.size(); ++k) {
    if (calls.keyed) out.kwargs.insert(call.keys[k], to_ivalue(call.items[k]));
    else out.args.push_back(to_ivalue(call.items[k]));
  }
  return out;
}

/// infer_arguments over a CallSet.
inline Arguments infer_arguments(const CallSet& calls, const InferArgumentsOptions& options) {
  return to_arguments(calls, infer_argument_value(calls, options, std::nullopt, zeros_of_spec));
}

}  // namespace optrace::detail
