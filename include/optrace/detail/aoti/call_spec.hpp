// detail/aoti/call_spec.hpp: an AOTInductor package's call spec (torch's pytree treespecs, as
// AOTIModelPackageLoader::get_call_spec returns them), and flattening a call's IValues by it
#pragma once
// A package's run() takes the flat list of input tensors and returns the flat list of outputs;
// the caller flattens and rebuilds by the in/out treespecs, as torch's Python loader does
// (torch/_inductor/package/package.py, AOTICompiledModel.__call__: tree_flatten((args,
// reorder_kwargs(kwargs, in_spec))), keep the tensors, run, tree_unflatten(outputs, out_spec)).
// Needs no AOTInductor: the tests run it on every libtorch. The same walk flattens a recorded
// call (an observation file's signature, optrace::Value), so that a plan's drift judges calls by
// the rule a package serves by, in the front end that links no torch_cpu.

#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/value.hpp>

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace optrace::detail::aoti {

/// One node of a pytree treespec (torch.utils._pytree.treespec_dumps, protocol 1).
struct TreeSpec {
  enum class Type { Leaf, Tuple, List, Dict, None };
  Type type = Type::Leaf;
  std::string type_name;          ///< torch's: builtins.tuple, collections.OrderedDict, ...
  std::vector<std::string> keys;  ///< Dict: the keys, in order
  std::vector<TreeSpec> children;

  /// The same tree: types, torch's type names, keys and children.
  bool operator==(const TreeSpec& o) const {
    return type == o.type && type_name == o.type_name && keys == o.keys && children == o.children;
  }
  bool operator!=(const TreeSpec& o) const { return !(*this == o); }

  int64_t num_leaves() const {
    if (type == Type::Leaf) return 1;
    int64_t n = 0;
    for (const TreeSpec& c : children) n += c.num_leaves();
    return n;
  }
};

inline TreeSpec read_tree_spec(const json::Node& node) {
  TreeSpec spec;
  json::Node type = node["type"];
  if (type.is_null()) return spec;
  spec.type_name = std::string(type.as_string());
  const std::string& t = spec.type_name;
  if (t == "builtins.tuple" || t == "collections.namedtuple") spec.type = TreeSpec::Type::Tuple;
  else if (t == "builtins.list") spec.type = TreeSpec::Type::List;
  else if (t == "builtins.dict" || t == "collections.OrderedDict") spec.type = TreeSpec::Type::Dict;
  else if (t == "builtins.NoneType") spec.type = TreeSpec::Type::None;
  else optrace::detail::raise_json(type.path(), "a pytree node of type " + t + ", which optrace cannot build from C++ values");
  if (spec.type == TreeSpec::Type::Dict) {
    // The context is itself JSON text: the list of keys.
    json::Node context = node["context"];
    auto keys = json::Document::parse(context.as_string());
    for (json::Node k : keys->root().array()) {
      if (!k.is_string()) optrace::detail::raise_json(context.path(), "dict keys other than strings are not supported");
      spec.keys.emplace_back(k.as_string());
    }
  }
  for (json::Node child : node["children_spec"].array()) spec.children.push_back(read_tree_spec(child));
  if (spec.type == TreeSpec::Type::Dict && spec.keys.size() != spec.children.size())
    optrace::detail::raise_json(node.path(), "a dict node with " + std::to_string(spec.keys.size()) + " keys and " +
                                     std::to_string(spec.children.size()) + " children");
  return spec;
}

/// Parses one treespec string (`[1, {"type": ..., "context": ..., "children_spec": [...]}]`).
inline TreeSpec parse_tree_spec(std::string_view text) {
  auto doc = json::Document::parse(text);
  json::Node root = doc->root();
  auto items = root.array();
  if (items.size() != 2 || !(*items.begin()).is_int() || (*items.begin()).as_int() != 1)
    optrace::detail::raise_json("", "a pytree treespec of protocol 1 ([1, {...}]) was expected");
  auto it = items.begin();
  ++it;
  return read_tree_spec(*it);
}

/// One leaf of a flattened call: its path for messages (`x`, `pair[1]`, `cfg['k']`) and value.
struct FlatInput {
  std::string path;
  c10::IValue value;
};

/// One leaf of a recorded call flattened by the same walk: its path and value (null: an omitted
/// argument, which only a None of the spec takes).
struct FlatValue {
  std::string path;
  const Value* value;
};

// How the walk sees a call's nodes: c10::IValue (a served call) and `const Value*` (a recorded
// one; null is an omitted argument). A Struct is a namedtuple to torch: a tuple of its fields.
namespace tree {
inline bool is_none(const c10::IValue& v) { return v.isNone(); }
inline bool is_sequence(const c10::IValue& v) { return v.isTuple() || v.isList(); }
inline size_t sequence_size(const c10::IValue& v) { return v.isTuple() ? v.toTupleRef().elements().size() : v.toListRef().size(); }
inline const c10::IValue& item(const c10::IValue& v, size_t i) { return v.isTuple() ? v.toTupleRef().elements()[i] : v.toListRef()[i]; }
inline bool is_dict(const c10::IValue& v) { return v.isGenericDict(); }
inline size_t dict_size(const c10::IValue& v) { return v.toGenericDict().size(); }
inline bool lookup(const c10::IValue& v, const std::string& key, size_t /*hint*/, c10::IValue& into) {
  const c10::impl::GenericDict dict = v.toGenericDict();
  auto found = dict.find(c10::IValue(key));
  if (found == dict.end()) return false;
  into = found->value();
  return true;
}
inline std::string kind_name(const c10::IValue& v) { return v.tagKind(); }
inline FlatInput leaf(std::string path, const c10::IValue& v) { return {std::move(path), v}; }

inline bool is_none(const Value* v) { return !v || v->kind == Value::Kind::None; }
inline bool is_sequence(const Value* v) {
  return v && (v->kind == Value::Kind::Tuple || v->kind == Value::Kind::List || v->kind == Value::Kind::Struct);
}
inline size_t sequence_size(const Value* v) { return v->items.size(); }
inline const Value* item(const Value* v, size_t i) { return &v->items[i]; }
inline bool is_dict(const Value* v) { return v && v->kind == Value::Kind::Dict; }
inline size_t dict_size(const Value* v) { return v->items.size(); }
inline bool lookup(const Value* v, const std::string& key, size_t hint, const Value*& into) {
  into = v->find(key, hint);  // the spec's i-th key is most likely the call's i-th: O(1), not a scan
  return into != nullptr;
}
/// As c10::IValue::tagKind names it, so that both calls get one message.
inline std::string kind_name(const Value* v) {
  if (!v) return "None";
  switch (v->kind) {
    case Value::Kind::None: return "None";
    case Value::Kind::Tensor: return "Tensor";
    case Value::Kind::Int: return "Int";
    case Value::Kind::Double: return "Double";
    case Value::Kind::Bool: return "Bool";
    case Value::Kind::String: return "String";
    case Value::Kind::List: return "GenericList";
    case Value::Kind::Tuple:
    case Value::Kind::Struct: return "Tuple";
    case Value::Kind::Dict: return "GenericDict";
  }
  return "None";
}
inline FlatValue leaf(std::string path, const Value* v) { return {std::move(path), v}; }

template <class Node>
const Node& none();
template <>
inline const c10::IValue& none<c10::IValue>() {
  static const c10::IValue n;
  return n;
}
template <>
inline const Value* const& none<const Value*>() {
  static const Value* const n = nullptr;
  return n;
}
}  // namespace tree

/// Why a package does not take a call, as data: what `flatten` or the guard would throw.
/// PackageSet (serve.hpp) routes calls and counts refusals with it, without exceptions; the
/// throwing forms raise `message` as an ArgumentError (the call's arity or structure) or a
/// ShapeError (an input the package was not compiled for).
struct Refusal {
  bool shape = false;       ///< a ShapeError; else an ArgumentError
  std::string argument;     ///< the input's path (`input_ids`, `pair[1]`), where one input is at fault
  int64_t dim = -1;         ///< the dim outside its compiled range, else -1
  int64_t value = 0;        ///< that dim's size
  std::optional<int64_t> min, max;  ///< its compiled range (torch's lower bounds of 2 or less are not enforced)
  /// At a dim: how many dims of the call the package does not take, all counted by the size
  /// rule (aoti::size_verdict), as a plan's drift counts them; PackageSet ranks by it.
  int64_t misses = 0;
  std::string message;      ///< the exception's text (when `want_message`)
  /// False: record why (the fields above) without building the message, which names caller
  /// data and costs a few allocations: what ranking every package of a set needs.
  bool want_message = true;

  [[noreturn]] void raise() const {
    if (shape) detail::raise<ShapeError>(message);
    detail::raise<ArgumentError>(message);
  }
};

/// Records why (when asked: `why` may be null on a fast path) and returns false. `message` is
/// only called when `why` is given, so a refusal nobody reads builds no text.
template <class Message>
bool refuse(Refusal* why, bool shape, Message&& message) {
  if (why) {
    why->shape = shape;
    if (why->want_message) why->message = message();
  }
  return false;
}

/// How far a call got in a package's checks: 2, to its sizes (it has the package's structure:
/// every input's kind, value, dtype, device and rank fit); 1, to another input; 0, its arity or
/// structure.
inline int refusal_stage(const Refusal& r) { return r.dim >= 0 ? 2 : r.shape ? 1 : 0; }

/// The one ranking of the packages that refuse a call (the set's stats and error, a plan's
/// drift): the further stage first, then, among those refusing sizes, the fewest dims outside.
/// A tie keeps the earlier package (most calls).
inline bool closer(const Refusal& a, const Refusal& b) {
  const int sa = refusal_stage(a), sb = refusal_stage(b);
  return sa > sb || (sa == 2 && sb == 2 && a.misses < b.misses);
}

/// How a call's arguments meet the in_spec: the root is `((args...), {kwargs...})`.
struct CallShape {
  TreeSpec args;    ///< Tuple of the positional arguments
  TreeSpec kwargs;  ///< Dict of the keyword arguments
  /// The names of the arguments in forward's order, as the observation file has them; a call
  /// with more positional values than `args` has gives the rest to these names.
  std::vector<std::string> names;
  /// Each argument's place: positional ones by positional_name, then keyword ones (after the
  /// positional count): a call of thousands of arguments is matched in linear time.
  std::unordered_map<std::string, size_t> places;

  static CallShape of(const TreeSpec& in_spec, std::vector<std::string> names) {
    if (in_spec.type != TreeSpec::Type::Tuple || in_spec.children.size() != 2 ||
        in_spec.children[0].type != TreeSpec::Type::Tuple || in_spec.children[1].type != TreeSpec::Type::Dict)
      raise_json("", "the package's in_spec is not ((args...), {kwargs...})");
    return make(in_spec.children[0], in_spec.children[1], std::move(names));
  }

  /// From the positional arguments' Tuple node, the keyword ones' Dict node, and the names.
  static CallShape make(TreeSpec args, TreeSpec kwargs, std::vector<std::string> names) {
    CallShape c{std::move(args), std::move(kwargs), std::move(names), {}};
    for (size_t i = 0; i < c.args.children.size(); ++i) c.places.emplace(c.positional_name(i), i);
    for (size_t k = 0; k < c.kwargs.keys.size(); ++k) c.places.emplace(c.kwargs.keys[k], c.args.children.size() + k);
    return c;
  }

  /// The name of positional argument `i` (observed names first, `#i` otherwise).
  std::string positional_name(size_t i) const { return i < names.size() ? names[i] : "#" + std::to_string(i); }

  /// The call flattened in the in_spec's leaf order. Throws ArgumentError for a call of another
  /// arity or structure (naming the argument and what the package takes).
  std::vector<FlatInput> flatten(const std::vector<c10::IValue>& args,
                                 const std::unordered_map<std::string, c10::IValue>& kwargs) const {
    std::vector<FlatInput> out;
    Refusal why;
    if (!try_flatten(args, kwargs, out, &why)) why.raise();
    return out;
  }

  /// `flatten` without throwing: false when the call does not fit, with the reason in `why`
  /// when given (null: no message is built).
  bool try_flatten(const std::vector<c10::IValue>& args, const std::unordered_map<std::string, c10::IValue>& kwargs,
                   std::vector<FlatInput>& out, Refusal* why) const {
    std::vector<std::pair<const std::string*, const c10::IValue*>> keywords;
    keywords.reserve(kwargs.size());
    for (const auto& [name, value] : kwargs) keywords.emplace_back(&name, &value);
    return flatten_call(args.data(), args.size(), keywords, out, why);
  }

  /// A recorded call (an observation file's signature: its arguments by name, as the observer
  /// records them) flattened by the same rule: what a plan's drift judges calls by. An argument
  /// the call omits is None (a keyword the package has as None takes it; a positional one is
  /// missing, as in a served call).
  bool try_flatten(const Value& call, std::vector<FlatValue>& out, Refusal* why) const {
    std::vector<const Value*> items(call.items.size());
    for (size_t k = 0; k < call.items.size(); ++k) items[k] = &call.items[k];
    std::vector<std::pair<const std::string*, const Value* const*>> keywords;
    if (!call.is_keyed()) return flatten_call<const Value*>(items.data(), items.size(), keywords, out, why);  // positional only
    for (size_t k = 0; k < items.size(); ++k) keywords.emplace_back(&call.keys[k], &items[k]);
    return flatten_call<const Value*>(nullptr, 0, keywords, out, why);
  }

  /// `(x, mask)` or `(x, *, labels)`: what the package takes, for messages.
  std::string describe() const {
    std::string s = "(";
    for (size_t i = 0; i < args.children.size(); ++i) s += (i ? ", " : "") + positional_name(i);
    for (size_t k = 0; k < kwargs.keys.size(); ++k)
      s += (s.size() > 1 ? ", " : "") + std::string(k == 0 && !args.children.empty() ? "*, " : "") + kwargs.keys[k];
    return s + ")";
  }

 private:
  bool has_key(const std::string& name) const {
    const auto found = places.find(name);
    return found != places.end() && found->second >= args.children.size();
  }
  bool is_positional(const std::string& name) const {
    const auto found = places.find(name);
    return found != places.end() && found->second < args.children.size();
  }

  // The one walk of a call, over c10::IValue or `const Value*` nodes (namespace tree).
  template <class Node, class Flat>
  bool flatten_call(const Node* args, size_t nargs, const std::vector<std::pair<const std::string*, const Node*>>& kwargs,
                    std::vector<Flat>& out, Refusal* why) const {
    out.clear();
    size_t positional = this->args.children.size();
    // Positional values beyond the package's positional arguments fill keyword ones, by name.
    std::unordered_map<std::string, const Node*> by_name;
    for (size_t i = positional; i < nargs; ++i) {
      if (i >= names.size() || !has_key(names[i]))
        return refuse(why, false, [&] { return concat("the package takes ", describe(), "; the call gives ", nargs, " positional arguments"); });
      by_name[names[i]] = &args[i];
    }
    for (const auto& [name, value] : kwargs) {
      if (!has_key(*name) && !is_positional(*name))
        return refuse(why, false, [&, n = name] { return concat("the package has no argument '", *n, "'; it takes ", describe()); });
      if (by_name.count(*name)) return refuse(why, false, [&, n = name] { return concat("argument '", *n, "' is given twice"); });
      by_name[*name] = value;
    }
    for (size_t i = 0; i < positional; ++i) {
      std::string name = positional_name(i);
      const Node* v = i < nargs ? &args[i] : nullptr;
      auto found = by_name.find(name);
      if (found != by_name.end()) {
        if (v) return refuse(why, false, [&] { return concat("argument '", name, "' is given twice"); });
        v = found->second;
      }
      if (!v) return refuse(why, false, [&] { return concat("missing argument '", name, "'; the package takes ", describe()); });
      if (!flatten_into(this->args.children[i], *v, name, out, why)) return false;
    }
    for (size_t k = 0; k < this->kwargs.keys.size(); ++k) {
      const std::string& name = this->kwargs.keys[k];
      auto found = by_name.find(name);
      const TreeSpec& spec = this->kwargs.children[k];
      if (found == by_name.end() && spec.type != TreeSpec::Type::None)
        return refuse(why, false, [&] { return concat("missing argument '", name, "'; the package takes ", describe()); });
      if (!flatten_into(spec, found == by_name.end() ? tree::none<Node>() : *found->second, name, out, why)) return false;
    }
    return true;
  }

  template <class Node, class Flat>
  static bool flatten_into(const TreeSpec& spec, const Node& v, const std::string& path, std::vector<Flat>& out, Refusal* why) {
    switch (spec.type) {
      case TreeSpec::Type::Leaf:
        out.push_back(tree::leaf(path, v));
        return true;
      case TreeSpec::Type::None:
        if (!tree::is_none(v))
          return refuse(why, false, [&] {
            return concat("argument ", path, " must be None: the package was compiled without it, got ", tree::kind_name(v));
          });
        return true;
      case TreeSpec::Type::Tuple:
      case TreeSpec::Type::List: {
        if (!tree::is_sequence(v))
          return refuse(why, false, [&] {
            return concat("argument ", path, " must be a ", spec.type == TreeSpec::Type::Tuple ? "tuple" : "list", " of ",
                          spec.children.size(), ", got ", tree::kind_name(v));
          });
        const size_t n = tree::sequence_size(v);
        if (n != spec.children.size())
          return refuse(why, false, [&] {
            return concat("argument ", path, " has ", n, " items; the package was compiled for ", spec.children.size());
          });
        for (size_t i = 0; i < n; ++i)
          if (!flatten_into(spec.children[i], tree::item(v, i), path + "[" + std::to_string(i) + "]", out, why)) return false;
        return true;
      }
      case TreeSpec::Type::Dict: {
        if (!tree::is_dict(v)) return refuse(why, false, [&] { return concat("argument ", path, " must be a dict, got ", tree::kind_name(v)); });
        const size_t n = tree::dict_size(v);
        if (n != spec.keys.size())
          return refuse(why, false, [&] {
            return concat("argument ", path, " has ", n, " keys; the package was compiled for ", spec.keys.size());
          });
        for (size_t i = 0; i < spec.keys.size(); ++i) {
          Node child{};
          if (!tree::lookup(v, spec.keys[i], i, child))
            return refuse(why, false, [&] { return concat("argument ", path, " lacks the key '", spec.keys[i], "'"); });
          if (!flatten_into(spec.children[i], child, path + "['" + spec.keys[i] + "']", out, why)) return false;
        }
        return true;
      }
    }
    return true;
  }
};

/// The outputs rebuilt by the out_spec: a tensor, or tuples, lists and dicts of them (None where
/// the spec has None). Throws ArgumentError when the counts disagree.
inline c10::IValue unflatten(const TreeSpec& spec, const std::vector<at::Tensor>& flat) {
  size_t next = 0;
  std::function<c10::IValue(const TreeSpec&)> build = [&](const TreeSpec& s) -> c10::IValue {
    switch (s.type) {
      case TreeSpec::Type::Leaf:
        if (next >= flat.size()) raise<ArgumentError>("the package returned ", flat.size(), " outputs; its out_spec has more");
        return flat[next++];
      case TreeSpec::Type::None:
        return c10::IValue();
      case TreeSpec::Type::Tuple: {
        std::vector<c10::IValue> items;
        for (const TreeSpec& c : s.children) items.push_back(build(c));
        return c10::ivalue::Tuple::create(std::move(items));
      }
      case TreeSpec::Type::List: {
        c10::impl::GenericList list(c10::AnyType::get());
        for (const TreeSpec& c : s.children) list.push_back(build(c));
        return list;
      }
      case TreeSpec::Type::Dict: {
        c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
        for (size_t i = 0; i < s.children.size(); ++i) dict.insert(s.keys[i], build(s.children[i]));
        return dict;
      }
    }
    return c10::IValue();
  };
  c10::IValue out = build(spec);
  if (next != flat.size()) raise<ArgumentError>("the package returned ", flat.size(), " outputs; its out_spec has ", next);
  return out;
}

}  // namespace optrace::detail::aoti
