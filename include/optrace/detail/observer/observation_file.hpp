// optrace/detail/observer/observation_file.hpp: the observation file's JSON: its writer and its reader
#pragma once
// The file holds two kinds of content:
// - what Python tools read: per input a torch.export TensorMeta (dynamic dims as SymInt
//   expressions), range_constraints, the inputs' treespec (treespec_dumps JSON, version 1, with
//   the namedtuple side table), torch's DynamicShapesSpec;
// - what optrace reads back: every distinct call signature with its count, the stored calls'
//   specs, the argument names. Reading rebuilds the analysis input (a CallSet), so a loaded file
//   answers infer_dynamic_shapes() and infer_arguments() as the observer did.

#include <optrace/detail/common/counts.hpp>
#include <optrace/detail/observer/analysis.hpp>
#include <optrace/detail/observer/call_set.hpp>
#include <optrace/dynamic_shapes.hpp>
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/json/tensor_meta.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/value.hpp>

#include <torch/version.h>

#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace optrace::detail {

// The file's format version. A reader accepts any minor version of its major version (newer
// minors only add fields) and refuses a newer major version.
inline constexpr int64_t kObservationsMajor = 1;
// 1.1: history rows' "stand_ins"
// 1.2: inputs' "int_range"
inline constexpr int64_t kObservationsMinor = 2;

// ---- writing ----------------------------------------------------------------------------------

inline void write_value(json::Writer& w, const Value& v) {
  using K = Value::Kind;
  switch (v.kind) {
    case K::None: w.null(); return;
    case K::Tensor:
      w.begin_object().key("tensor");
      json::write_tensor_meta(w, v.spec);
      w.end_object();
      return;
    case K::Int: w.begin_object().key("int").value(v.int_value).end_object(); return;
    case K::Double: w.begin_object().key("float").value(v.double_value).end_object(); return;
    case K::Bool: w.begin_object().key("bool").value(v.bool_value).end_object(); return;
    case K::String: w.begin_object().key("str").value(v.text).end_object(); return;
    case K::List:
    case K::Tuple:
      w.begin_object().key(v.kind == K::List ? "list" : "tuple").begin_array();
      for (const Value& item : v.items) write_value(w, item);
      w.end_array().end_object();
      return;
    case K::Dict:
    case K::Struct:
      w.begin_object();
      if (v.kind == K::Struct) w.key("struct").value(v.text).key("fields");
      else w.key("dict");
      w.begin_object();
      for (size_t k = 0; k < v.items.size(); ++k) {
        w.key(v.keys[k]);
        write_value(w, v.items[k]);
      }
      w.end_object().end_object();
      return;
  }
}

/// `input_ids`, `cache[1]`, `batch.input_ids`, `extra["pos"]`, `#0`.
/// `argument`: the index of `top` among `root`'s keys (Value::find's hint).
inline std::string leaf_name(const std::string& top, const std::vector<PathStep>& path, const Value& root, size_t argument = 0) {
  std::string s = top;
  const Value* node = root.find(top, argument);
  for (const PathStep& step : path) {
    append_leaf_step(s, node->kind, step.key, step.index);
    node = node->is_keyed() ? node->find(step.key, step.index) : &node->items[step.index];
  }
  return s;
}

/// torch.utils._pytree.treespec_dumps, protocol 1: `[1, {"type", "context", "children_spec"}]`.
/// Tensors, scalars and None are leaves; structs are namedtuples named by their type.
inline void write_treespec_node(json::Writer& w, const Value& v) {
  using K = Value::Kind;
  if (!v.is_container()) {
    w.begin_object().key("type").null().key("context").null().key("children_spec").begin_array().end_array().end_object();
    return;
  }
  const char* type = v.kind == K::List ? "builtins.list" : v.kind == K::Tuple ? "builtins.tuple"
                     : v.kind == K::Dict ? "builtins.dict" : "collections.namedtuple";
  std::string context = "null";
  if (v.kind == K::Dict) {
    json::Writer keys;
    keys.begin_array();
    for (const std::string& k : v.keys) keys.value(k);
    keys.end_array();
    context = keys.take();
  } else if (v.kind == K::Struct) {
    context.clear();
    json::Writer::append_string(context, v.text);
  }
  w.begin_object().key("type").value(type).key("context").value(context).key("children_spec").begin_array();
  for (const Value& item : v.items) write_treespec_node(w, item);
  w.end_array().end_object();
}

/// The in_spec torch.export uses: a tuple of (positional args tuple, kwargs dict).
inline std::string treespec_dumps(const Value& tmpl, bool keyed) {
  Value args, kwargs;
  args.kind = Value::Kind::Tuple;
  kwargs.kind = Value::Kind::Dict;
  for (size_t k = 0; k < tmpl.items.size(); ++k) {
    if (keyed) {
      kwargs.keys.push_back(tmpl.keys[k]);
      kwargs.items.push_back(tmpl.items[k]);
    } else {
      args.items.push_back(tmpl.items[k]);
    }
  }
  Value top;
  top.kind = Value::Kind::Tuple;
  top.items = {args, kwargs};
  json::Writer w;
  w.begin_array().value(1);
  write_treespec_node(w, top);
  w.end_array();
  return w.take();
}

inline void collect_structs(const Value& v, std::map<std::string, std::vector<std::string>>& out) {
  if (v.kind == Value::Kind::Struct) out.emplace(v.text, v.keys);
  for (const Value& item : v.items) collect_structs(item, out);
}

/// The arguments as torch.export sees them: their names, whether keyed, the in_spec and its
/// namedtuple side table (empty, or null, when the calls could not be aligned).
inline void write_argument_spec(json::Writer& w, const CallSet& calls, const Analysis* analysis) {
  w.key("arg_names").begin_array();
  if (analysis) for (const std::string& k : analysis->keys()) w.value(k);
  w.end_array();
  w.key("keyed").value(calls.keyed);
  w.key("in_spec");
  if (analysis) w.value(treespec_dumps(analysis->tmpl(), calls.keyed));
  else w.null();
  w.key("treespec_namedtuple_fields").begin_object();
  if (analysis) {
    std::map<std::string, std::vector<std::string>> structs;
    collect_structs(analysis->tmpl(), structs);
    for (const auto& [name, fields] : structs) {
      w.key(name).begin_object().key("field_names").begin_array();
      for (const std::string& f : fields) w.value(f);
      w.end_array().end_object();
    }
  }
  w.end_object();
}

/// The "inputs" entries: per input leaf (depth first, in argument order) a TensorMeta with
/// symbolic dynamic dims, or the leaf's value.
struct InputsWriter {
  json::Writer& w;
  const CallSet& calls;
  const Value& tmpl;
  size_t argument = 0;  // the index of the argument walked (Value::find's hint)

  // `t` (template) with its `shape` and its example `ex`, below argument `top` at `path`.
  void walk(const Value& t, const ShapeNode& shape, const Value* ex, const std::string& top, std::vector<PathStep>& path) {
    if (!t.is_container()) {
      write_leaf(t, shape, ex, top, path);
      return;
    }
    for (size_t k = 0; k < t.items.size(); ++k) {
      path.push_back({k, t.is_keyed() ? t.keys[k] : std::string()});
      const Value* child = ex && ex->kind == t.kind ? (t.is_keyed() ? ex->find(t.keys[k], k) : &ex->items[k]) : nullptr;
      walk(t.items[k], shape.items[k], child, top, path);
      path.pop_back();
    }
  }

  void write_leaf(const Value& t, const ShapeNode& shape, const Value* ex, const std::string& top, const std::vector<PathStep>& path) {
    const std::string name = leaf_name(top, path, tmpl, argument);
    w.begin_object().key("name").value(name).key("argument").value(top);
    w.key("meta");
    if (t.is_tensor()) {
      // The example's spec, so that each symbol's hint is its value in the export arguments.
      TensorSpec spec = ex && ex->is_tensor() ? ex->spec : t.spec;
      if (spec.device.is_meta()) spec.device = t.spec.device;  // synthesized for the example
      std::vector<std::string> symbols;
      for (const DimSpec& d : shape.dims) symbols.push_back(d.dynamic ? d.expr() : std::string());
      json::write_tensor_meta(w, spec, symbols);
      w.key("value").null();
      auto range = calls.int_ranges.find(name);
      if (range != calls.int_ranges.end() && has_int_range(spec.dtype))
        w.key("int_range").begin_array().value(range->second.first).value(range->second.second).end_array();
    } else {
      w.null().key("value");
      write_value(w, t);
    }
    w.end_object();
  }
};

/// What optrace reads back: the call counts, every distinct signature with its count, the stored
/// calls and the overflow ranges.
inline void write_call_history(json::Writer& w, const CallSet& calls) {
  w.key("calls").begin_object().key("total").value(calls.total_calls).key("distinct").value(calls.signatures.size())
      .key("stored").value(calls.stored.size()).key("dropped_signatures").value(calls.dropped_signatures).end_object();
  w.key("history").begin_array();
  for (size_t k = 0; k < calls.signatures.size(); ++k) {
    w.begin_object().key("count").value(calls.counts[k]).key("call");
    write_value(w, calls.signatures[k]);
    if (k < calls.stand_ins.size() && !calls.stand_ins[k].empty()) {
      w.key("stand_ins").begin_array();
      for (const std::string& name : calls.stand_ins[k]) w.value(name);
      w.end_array();
    }
    w.end_object();
  }
  w.end_array();
  w.key("stored").begin_array();
  for (const Value& v : calls.stored) write_value(w, v);
  w.end_array();
  w.key("overflow");
  if (calls.overflow_min) {
    w.begin_object().key("min");
    write_value(w, *calls.overflow_min);
    w.key("max");
    write_value(w, *calls.overflow_max);
    w.end_object();
  } else {
    w.null();
  }
}

/// The observation file of `calls` as JSON.
inline std::string observations_json(const CallSet& calls, int indent = 1) {
  json::Writer w(indent);
  w.begin_object();
  w.key("format").value("optrace.observations");
  w.key("version").begin_object().key("major").value(kObservationsMajor).key("minor").value(kObservationsMinor).end_object();
  w.key("producer").begin_object().key("optrace").value("0.1.0").key("torch").value(TORCH_VERSION).end_object();

  // The analysis (same as infer_dynamic_shapes()) names the inputs and their symbols. If the
  // calls cannot be aligned, the history is still written, with the reason.
  std::string analysis_error;
  std::optional<Analysis> analysis;
  DynamicShapes shapes;
  std::optional<Value> example;
  try {
    analysis.emplace(calls);
    shapes = infer_dynamic_shapes(calls, {});
    if (!calls.stored.empty()) example = infer_argument_value(calls, {}, c10::Device(c10::kMeta), nullptr);
  } catch (const ArgumentError& e) {
    analysis_error = e.what();
    analysis.reset();
  }
  write_argument_spec(w, calls, analysis ? &*analysis : nullptr);

  w.key("inputs").begin_array();
  if (analysis) {
    InputsWriter inputs{w, calls, analysis->tmpl(), 0};
    for (size_t k = 0; k < analysis->keys().size(); ++k) {
      std::vector<PathStep> path;
      inputs.argument = k;
      inputs.walk(analysis->tmpl().items[k], shapes.arguments()[k], example ? &example->items[k] : nullptr, analysis->keys()[k], path);
    }
  }
  w.end_array();

  w.key("range_constraints").begin_object();
  // The ranges the file's dynamic_shapes give torch.export (named symbols): what the exported
  // program's range_constraints say.
  for (const SymbolRange& s : shapes.symbols()) {
    auto [lo, hi] = s.export_range();
    w.key(s.name).begin_object().key("min_val").value(lo).key("max_val").value(hi).end_object();
  }
  w.end_object();
  w.key("dynamic_shapes");
  if (analysis) shapes.write_json(w);
  else w.null();
  w.key("warnings").begin_array();
  for (const std::string& s : shapes.warnings()) w.value(s);
  w.end_array();
  if (!analysis_error.empty()) w.key("analysis_error").value(analysis_error);

  write_call_history(w, calls);
  w.end_object();
  return w.take();
}

// ---- reading ----------------------------------------------------------------------------------

/// The symbol of a SymExpr's `expr_str`: `s0`, sympy's srepr `Symbol('s0', integer=True,
/// positive=True)`, or a linear expression of one symbol (`2*s0 + 1`). Throws JsonError.
inline std::string read_expr_str(const json::Node& v) {
  std::string_view s = v.as_string();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.substr(0, 7) == "Symbol(") {
    size_t open = s.find_first_of("'\"");
    size_t close = open == std::string_view::npos ? open : s.find(s[open], open + 1);
    if (close == std::string_view::npos || close == open + 1) v.fail("expected a symbol in Symbol('name', ...)");
    return std::string(s.substr(open + 1, close - open - 1));
  }
  bool ok = !s.empty();
  for (char c : s) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '*' || c == '+' || c == '-' || c == ' ');
  if (!ok) v.fail("expected a symbol (s0), Symbol('s0', ...) or a linear expression of one");
  return std::string(s);
}

/// A SymInt union: `{"as_int": n}` or `{"as_expr": {"expr_str": ..., "hint": {"as_int": n}}}`.
/// Returns the value (the hint of an expression). Throws JsonError.
inline int64_t read_sym_int(const json::Node& v, std::string* symbol = nullptr) {
  if (!v.is_object() || v.size() != 1) v.fail("expected a SymInt {\"as_int\": n} or {\"as_expr\": {...}}");
  json::Node inner = v;
  if (v.find("as_int", inner)) return inner.as_int();
  if (!v.find("as_expr", inner)) v.fail("expected a SymInt {\"as_int\": n} or {\"as_expr\": {...}}");
  std::string name = read_expr_str(inner["expr_str"]);
  if (symbol) *symbol = name;
  json::Node hint = inner;
  if (!inner.find("hint", hint) || hint.is_null())
    inner.fail_plain("a symbolic size needs a hint (its example value) to be rebuilt");
  return hint["as_int"].as_int();
}

// Runs `read` (a schema mapping that raises JsonError at a path relative to `at`) and puts the
// error under `at`'s path. `Node::path()` walks the document, so it is worked out only on
// failure: asking it for every tensor made loading quadratic in the file's size.
template <class F>
auto under_path(const json::Node& at, F&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const JsonError& e) {
    optrace::detail::throw_error<JsonError>(e.under(at.path()));
  }
}

/// A torch.export TensorMeta. Throws JsonError naming the path and the bad value.
inline TensorSpec read_tensor_meta(const json::Node& v, std::vector<std::string>* symbols = nullptr) {
  TensorSpec spec;
  json::Node dtype = v["dtype"];
  const int64_t dtype_number = dtype.as_int();
  spec.dtype = under_path(dtype, [&] { return json::scalar_type_from_schema(dtype_number); });
  json::Node sizes = v["sizes"];
  for (json::Node s : sizes.array()) {
    std::string symbol;
    int64_t n = read_sym_int(s, &symbol);
    if (n < 0) s.fail_plain(concat("expected a size >= 0, got ", n));
    spec.sizes.push_back(n);
    if (symbols) symbols->push_back(symbol);
  }
  spec.requires_grad = v["requires_grad"].as_bool();
  json::Node device = v["device"];
  json::Node index = device;
  std::optional<int64_t> device_index;
  if (device.find("index", index) && !index.is_null()) device_index = index.as_int();
  const std::string_view device_type = device["type"].as_string();
  spec.device = under_path(device, [&] { return json::device_from_schema(device_type, device_index); });
  json::Node strides = v["strides"];
  for (json::Node s : strides.array()) {
    int64_t n = read_sym_int(s);
    if (n < 0) s.fail_plain(concat("expected a stride >= 0 (negative strides are not supported), got ", n));
    spec.strides.push_back(n);
  }
  if (spec.strides.size() != spec.sizes.size())
    strides.fail_plain(concat("expected ", spec.sizes.size(), " strides (one per size), got ", spec.strides.size()));
  json::Node offset = v["storage_offset"];
  spec.storage_offset = read_sym_int(offset);
  if (spec.storage_offset < 0) offset.fail_plain(concat("expected a storage offset >= 0, got ", spec.storage_offset));
  json::Node layout = v["layout"];
  const int64_t layout_number = layout.as_int();
  spec.layout = under_path(layout, [&] { return json::layout_from_schema(layout_number); });
  return spec;
}

/// A value tree as `write_value` writes it. Throws JsonError.
inline Value read_value(const json::Node& j, int depth = 0) {
  Value v;
  if (j.is_null()) return v;
  if (depth >= json::kMaxValueDepth)
    j.fail("expected values nested at most " + std::to_string(json::kMaxValueDepth) + " deep");
  if (!j.is_object() || j.size() < 1 || j.size() > 2)
    j.fail("expected null or an object with one of tensor, int, float, bool, str, list, tuple, dict, struct");
  json::Node x = j;
  if (j.find("tensor", x)) {
    v.kind = Value::Kind::Tensor;
    v.spec = read_tensor_meta(x);
  } else if (j.find("int", x)) {
    v.kind = Value::Kind::Int;
    v.int_value = x.as_int();
  } else if (j.find("float", x)) {
    v.kind = Value::Kind::Double;
    v.double_value = x.as_double();
  } else if (j.find("bool", x)) {
    v.kind = Value::Kind::Bool;
    v.bool_value = x.as_bool();
  } else if (j.find("str", x)) {
    v.kind = Value::Kind::String;
    v.text = std::string(x.as_string());
  } else if (j.find("list", x) || j.find("tuple", x)) {
    v.kind = j.find("list", x) ? Value::Kind::List : Value::Kind::Tuple;
    for (json::Node item : x.array()) v.items.push_back(read_value(item, depth + 1));
  } else if (j.find("dict", x) || j.find("struct", x)) {
    if (j.find("struct", x)) {
      v.kind = Value::Kind::Struct;
      v.text = std::string(x.as_string());
      x = j["fields"];
    } else {
      v.kind = Value::Kind::Dict;
    }
    for (auto [key, item] : x.object()) {
      v.keys.emplace_back(key);
      v.items.push_back(read_value(item, depth + 1));
    }
  } else {
    j.fail("expected null or an object with one of tensor, int, float, bool, str, list, tuple, dict, struct");
  }
  if (j.size() == 2 && v.kind != Value::Kind::Struct) j.fail("expected one key");
  return v;
}

inline Value read_call(const json::Node& j) {
  Value v = read_value(j);
  if (v.kind != Value::Kind::Dict) j.fail("expected a call: {\"dict\": {argument: value, ...}}");
  return v;
}

/// An input's `"int_range": [min, max]` (1.2), into `ranges` under the input's name. Throws
/// JsonError unless two integers, min <= max, on an integer tensor (has_int_range).
inline void read_int_range(const json::Node& range, const std::optional<TensorSpec>& spec, std::string_view name,
                           std::map<std::string, std::pair<int64_t, int64_t>>& ranges) {
  if (!range.is_array() || range.size() != 2) range.fail("expected [min, max], two integers");
  std::vector<int64_t> bounds = range.as_int_list();
  if (bounds[0] > bounds[1]) range.fail_plain(concat("expected min <= max, got [", bounds[0], ", ", bounds[1], "]"));
  if (!spec || !has_int_range(spec->dtype))
    range.fail_plain("an int_range belongs to an integer tensor (int8, int16, int32, int64, uint8)");
  ranges[std::string(name)] = {bounds[0], bounds[1]};
}

/// The CallSet an observation file's text holds. Throws JsonError naming the path and the bad
/// value; the Python-facing sections are checked too, so a damaged file is refused as a whole.
inline CallSet read_observations(std::string_view text) {
  auto doc = json::Document::parse(text);
  json::Node root = doc->root();
  CallSet out;
  json::Node format = root["format"];
  if (format.as_string() != "optrace.observations") format.fail("expected \"optrace.observations\"");
  json::Node major = root["version"]["major"];
  if (major.as_int() > kObservationsMajor)
    major.fail_plain(concat("unsupported major version ", major.as_int(), " (this optrace reads ",
                                    kObservationsMajor, ".x); upgrade optrace"));
  root["version"]["minor"].as_int();
  out.keyed = root["keyed"].as_bool();
  for (json::Node name : root["arg_names"].array()) out.preferred_order.emplace_back(name.as_string());
  // The Python-facing sections are checked, so a damaged file is refused as a whole.
  for (json::Node input : root["inputs"].array()) {
    const std::string_view name = input["name"].as_string();
    json::Node meta = input["meta"];
    std::optional<TensorSpec> spec;
    if (!meta.is_null()) spec = read_tensor_meta(meta);
    json::Node range = input;
    if (input.find("int_range", range)) read_int_range(range, spec, name, out.int_ranges);
  }
  for (auto [name, range] : root["range_constraints"].object()) {
    int64_t lo = range["min_val"].as_int(), hi = range["max_val"].as_int();
    if (lo > hi) range.fail("expected min_val <= max_val");
  }
  json::Node calls = root["calls"];
  out.total_calls = calls["total"].as_int();
  int64_t listed = 0;
  for (json::Node row : root["history"].array()) {
    json::Node count = row["count"];
    if (count.as_int() < 1) count.fail("expected a count >= 1");
    if (!add_calls(listed, count.as_int())) count.fail_plain(concat("the history's ", kCallsOverflow));
    out.counts.push_back(count.as_int());
    out.signatures.push_back(read_call(row["call"]));
    std::vector<std::string> stand_ins;
    json::Node names = row;
    if (row.find("stand_ins", names))
      for (json::Node name : names.array()) {
        stand_ins.emplace_back(name.as_string());
        if (!out.signatures.back().find(stand_ins.back())) name.fail("expected an argument of this call");
      }
    out.stand_ins.push_back(std::move(stand_ins));
  }
  for (json::Node row : root["stored"].array()) out.stored.push_back(read_call(row));
  json::Node overflow = root["overflow"];
  if (!overflow.is_null()) {
    out.overflow_min = read_call(overflow["min"]);
    out.overflow_max = read_call(overflow["max"]);
  }
  json::Node dropped = calls["dropped_signatures"];
  out.dropped_signatures = dropped.as_int();
  if (out.dropped_signatures < 0) dropped.fail("expected a count >= 0");
  // The calls' counts must add up: each signature listed once, and no more calls in the history
  // than in all (calls past the signature bound are counted in the total only).
  json::Node distinct = calls["distinct"], stored = calls["stored"], total = calls["total"];
  if (distinct.as_int() != static_cast<int64_t>(out.signatures.size()))
    distinct.fail(concat("expected ", out.signatures.size(), " (the signatures in history)"));
  if (stored.as_int() != static_cast<int64_t>(out.stored.size()))
    stored.fail(concat("expected ", out.stored.size(), " (the calls in stored)"));
  if (out.total_calls < listed)
    total.fail_plain(concat("total ", out.total_calls, " is less than the ", listed, " calls the history counts"));
  return out;
}

}  // namespace optrace::detail
