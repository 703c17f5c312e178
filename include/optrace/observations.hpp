// optrace/observations.hpp: the observation file: what an InputObserver saw, without the data
#pragma once
// The file holds two kinds of content:
// - what Python tools read: per input a torch.export TensorMeta (dynamic dims as SymInt
//   expressions), range_constraints, the inputs' treespec (treespec_dumps JSON, version 1, with
//   the namedtuple side table), torch's DynamicShapesSpec;
// - what optrace reads back: every distinct call signature with its count, the stored calls'
//   specs, the argument names. Loading rebuilds the analysis input (detail::CallSet), so a
//   loaded file answers infer_dynamic_shapes() and infer_arguments() as the observer did.

#include <optrace/detail/analysis.hpp>
#include <optrace/detail/io.hpp>
#include <optrace/dynamic_shapes.hpp>
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/json/tensor_meta.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/materialize.hpp>
#include <optrace/value.hpp>

#include <torch/version.h>

#include <cctype>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace optrace {

/// The observation file's format version. A reader accepts any minor version of its major
/// version (newer minors only add fields) and refuses a newer major version.
inline constexpr int64_t kObservationsMajorVersion = 1;
inline constexpr int64_t kObservationsMinorVersion = 0;

namespace detail {

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
    case K::Int: w.begin_object().key("int").value(v.i).end_object(); return;
    case K::Double: w.begin_object().key("float").value(v.d).end_object(); return;
    case K::Bool: w.begin_object().key("bool").value(v.b).end_object(); return;
    case K::String: w.begin_object().key("str").value(v.s).end_object(); return;
    case K::List:
    case K::Tuple:
      w.begin_object().key(v.kind == K::List ? "list" : "tuple").begin_array();
      for (const Value& item : v.items) write_value(w, item);
      w.end_array().end_object();
      return;
    case K::Dict:
    case K::Struct:
      w.begin_object();
      if (v.kind == K::Struct) w.key("struct").value(v.s).key("fields");
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
inline std::string leaf_name(const std::string& top, const std::vector<PathStep>& path, const Value& root) {
  std::string s = top;
  const Value* node = root.find(top);
  for (const PathStep& step : path) {
    if (node->kind == Value::Kind::Struct) s += "." + step.key;
    else if (node->kind == Value::Kind::Dict) s += "[\"" + step.key + "\"]";
    else s += "[" + std::to_string(step.index) + "]";
    node = node->is_keyed() ? node->find(step.key) : &node->items[step.index];
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
    json::Writer::append_string(context, v.s);
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
  if (v.kind == Value::Kind::Struct) out.emplace(v.s, v.keys);
  for (const Value& item : v.items) collect_structs(item, out);
}

/// The observation file of `calls` as JSON.
inline std::string observations_json(const CallSet& calls, int indent = 1) {
  json::Writer w(indent);
  w.begin_object();
  w.key("format").value("optrace.observations");
  w.key("version").begin_object().key("major").value(kObservationsMajorVersion).key("minor").value(kObservationsMinorVersion).end_object();
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
    if (!calls.stored.empty()) example = infer_argument_value(calls, {}, c10::Device(c10::kMeta));
  } catch (const ArgumentError& e) {
    analysis_error = e.what();
    analysis.reset();
  }

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

  // Per input leaf (depth first, in argument order): TensorMeta with symbolic dynamic dims.
  w.key("inputs").begin_array();
  if (analysis) {
    std::function<void(const Value&, const ShapeNode&, const Value*, const std::string&, std::vector<PathStep>&)> walk =
        [&](const Value& t, const ShapeNode& shape, const Value* ex, const std::string& top, std::vector<PathStep>& path) {
          if (t.is_container()) {
            for (size_t k = 0; k < t.items.size(); ++k) {
              path.push_back({k, t.is_keyed() ? t.keys[k] : std::string()});
              const Value* child = ex && ex->kind == t.kind ? (t.is_keyed() ? ex->find(t.keys[k]) : &ex->items[k]) : nullptr;
              walk(t.items[k], shape.items[k], child, top, path);
              path.pop_back();
            }
            return;
          }
          w.begin_object().key("name").value(leaf_name(top, path, analysis->tmpl())).key("argument").value(top);
          w.key("meta");
          if (t.is_tensor()) {
            // The example's spec, so that each symbol's hint is its value in the export arguments.
            TensorSpec spec = ex && ex->is_tensor() ? ex->spec : t.spec;
            if (spec.device.is_meta()) spec.device = t.spec.device;  // synthesized for the example
            std::vector<std::string> symbols;
            for (const DimSpec& d : shape.dims) symbols.push_back(d.dynamic ? d.expr() : std::string());
            json::write_tensor_meta(w, spec, symbols);
            w.key("value").null();
          } else {
            w.null().key("value");
            write_value(w, t);
          }
          w.end_object();
        };
    for (size_t k = 0; k < analysis->keys().size(); ++k) {
      std::vector<PathStep> path;
      walk(analysis->tmpl().items[k], shapes.arguments()[k], example ? &example->items[k] : nullptr, analysis->keys()[k], path);
    }
  }
  w.end_array();

  w.key("range_constraints").begin_object();
  for (const SymbolRange& s : shapes.symbols())
    w.key(s.name).begin_object().key("min_val").value(s.min).key("max_val").value(s.max).end_object();
  w.end_object();
  w.key("dynamic_shapes");
  if (analysis) shapes.write_json(w);
  else w.null();
  w.key("warnings").begin_array();
  for (const std::string& s : shapes.warnings()) w.value(s);
  w.end_array();
  if (!analysis_error.empty()) w.key("analysis_error").value(analysis_error);

  w.key("calls").begin_object().key("total").value(calls.total_calls).key("distinct").value(calls.signatures.size())
      .key("stored").value(calls.stored.size()).key("dropped_signatures").value(calls.dropped_signatures).end_object();
  w.key("history").begin_array();
  for (size_t k = 0; k < calls.signatures.size(); ++k) {
    w.begin_object().key("count").value(calls.counts[k]).key("call");
    write_value(w, calls.signatures[k]);
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
  w.end_object();
  return w.take();
}

// ---- reading ----------------------------------------------------------------------------------

/// The symbol of a SymExpr's `expr_str`: `s0`, sympy's srepr `Symbol('s0', integer=True,
/// positive=True)`, or a linear expression of one symbol (`2*s0 + 1`). Throws JsonError.
inline std::string read_expr_str(const json::Value& v) {
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
inline int64_t read_sym_int(const json::Value& v, std::string* symbol = nullptr) {
  if (!v.is_object() || v.size() != 1) v.fail("expected a SymInt {\"as_int\": n} or {\"as_expr\": {...}}");
  json::Value inner = v;
  if (v.find("as_int", inner)) return inner.as_int();
  if (!v.find("as_expr", inner)) v.fail("expected a SymInt {\"as_int\": n} or {\"as_expr\": {...}}");
  std::string name = read_expr_str(inner["expr_str"]);
  if (symbol) *symbol = name;
  json::Value hint = inner;
  if (!inner.find("hint", hint) || hint.is_null())
    inner.fail_plain("a symbolic size needs a hint (its example value) to be rebuilt");
  return hint["as_int"].as_int();
}

// Runs `read` (a schema mapping that raises JsonError at a path relative to `at`) and puts the
// error under `at`'s path. `Value::path()` walks the document, so it is worked out only on
// failure: asking it for every tensor made loading quadratic in the file's size.
template <class F>
auto under_path(const json::Value& at, F&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const JsonError& e) {
    std::string what = e.what();
    std::string head = "optrace: JsonError at " + (e.path().empty() ? std::string("/") : e.path()) + ": ";
    throw JsonError(at.path() + e.path(), what.compare(0, head.size(), head) == 0 ? what.substr(head.size()) : what);
  }
}

/// A torch.export TensorMeta. Throws JsonError naming the path and the bad value.
inline TensorSpec read_tensor_meta(const json::Value& v, std::vector<std::string>* symbols = nullptr) {
  TensorSpec spec;
  json::Value dtype = v["dtype"];
  const int64_t dtype_number = dtype.as_int();
  spec.dtype = under_path(dtype, [&] { return json::scalar_type_from_schema(dtype_number); });
  json::Value sizes = v["sizes"];
  for (json::Value s : sizes.array()) {
    std::string symbol;
    int64_t n = read_sym_int(s, &symbol);
    if (n < 0) s.fail_plain(concat("expected a size >= 0, got ", n));
    spec.sizes.push_back(n);
    if (symbols) symbols->push_back(symbol);
  }
  spec.requires_grad = v["requires_grad"].as_bool();
  json::Value device = v["device"];
  json::Value index = device;
  std::optional<int64_t> device_index;
  if (device.find("index", index) && !index.is_null()) device_index = index.as_int();
  const std::string_view device_type = device["type"].as_string();
  spec.device = under_path(device, [&] { return json::device_from_schema(device_type, device_index); });
  json::Value strides = v["strides"];
  for (json::Value s : strides.array()) {
    int64_t n = read_sym_int(s);
    if (n < 0) s.fail_plain(concat("expected a stride >= 0 (negative strides are not supported), got ", n));
    spec.strides.push_back(n);
  }
  if (spec.strides.size() != spec.sizes.size())
    strides.fail_plain(concat("expected ", spec.sizes.size(), " strides (one per size), got ", spec.strides.size()));
  json::Value offset = v["storage_offset"];
  spec.storage_offset = read_sym_int(offset);
  if (spec.storage_offset < 0) offset.fail_plain(concat("expected a storage offset >= 0, got ", spec.storage_offset));
  json::Value layout = v["layout"];
  const int64_t layout_number = layout.as_int();
  spec.layout = under_path(layout, [&] { return json::layout_from_schema(layout_number); });
  return spec;
}

/// A value tree as `write_value` writes it. Throws JsonError.
inline Value read_value(const json::Value& j, int depth = 0) {
  Value v;
  if (j.is_null()) return v;
  if (depth >= json::kMaxValueDepth)
    j.fail("expected values nested at most " + std::to_string(json::kMaxValueDepth) + " deep");
  if (!j.is_object() || j.size() < 1 || j.size() > 2)
    j.fail("expected null or an object with one of tensor, int, float, bool, str, list, tuple, dict, struct");
  json::Value x = j;
  if (j.find("tensor", x)) {
    v.kind = Value::Kind::Tensor;
    v.spec = read_tensor_meta(x);
  } else if (j.find("int", x)) {
    v.kind = Value::Kind::Int;
    v.i = x.as_int();
  } else if (j.find("float", x)) {
    v.kind = Value::Kind::Double;
    v.d = x.as_double();
  } else if (j.find("bool", x)) {
    v.kind = Value::Kind::Bool;
    v.b = x.as_bool();
  } else if (j.find("str", x)) {
    v.kind = Value::Kind::String;
    v.s = std::string(x.as_string());
  } else if (j.find("list", x) || j.find("tuple", x)) {
    v.kind = j.find("list", x) ? Value::Kind::List : Value::Kind::Tuple;
    for (json::Value item : x.array()) v.items.push_back(read_value(item, depth + 1));
  } else if (j.find("dict", x) || j.find("struct", x)) {
    if (j.find("struct", x)) {
      v.kind = Value::Kind::Struct;
      v.s = std::string(x.as_string());
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

inline Value read_call(const json::Value& j) {
  Value v = read_value(j);
  if (v.kind != Value::Kind::Dict) j.fail("expected a call: {\"dict\": {argument: value, ...}}");
  return v;
}

}  // namespace detail

/// An observation file loaded back: answers infer_dynamic_shapes() and infer_arguments() as
/// the observer did, and builds export arguments of the same shapes, dtypes and strides on any
/// device, without the data.
///
/// Example:
///   optrace::Observations obs = optrace::load_observations("observations.json");
///   optrace::Arguments a = obs.materialize(optrace::MaterializeOptions().device(torch::kCUDA));
class Observations {
 public:
  /// Parses an observation file's text. Throws JsonError naming the path and the bad value
  /// (wrong types, negative sizes, sizes and strides of different rank, an unknown dtype or
  /// layout number, a newer major version, malformed or truncated JSON).
  static Observations from_json(std::string_view text) {
    auto doc = json::Document::parse(text);
    json::Value root = doc->root();
    Observations obs;
    json::Value format = root["format"];
    if (format.as_string() != "optrace.observations") format.fail("expected \"optrace.observations\"");
    json::Value major = root["version"]["major"];
    if (major.as_int() > kObservationsMajorVersion)
      major.fail_plain(detail::concat("unsupported major version ", major.as_int(), " (this optrace reads ",
                                      kObservationsMajorVersion, ".x); upgrade optrace"));
    root["version"]["minor"].as_int();
    obs.calls_.keyed = root["keyed"].as_bool();
    for (json::Value name : root["arg_names"].array()) obs.calls_.preferred_order.emplace_back(name.as_string());
    // The Python-facing sections are checked, so a damaged file is refused as a whole.
    for (json::Value input : root["inputs"].array()) {
      input["name"].as_string();
      json::Value meta = input["meta"];
      if (!meta.is_null()) detail::read_tensor_meta(meta);
    }
    for (auto [name, range] : root["range_constraints"].object()) {
      int64_t lo = range["min_val"].as_int(), hi = range["max_val"].as_int();
      if (lo > hi) range.fail("expected min_val <= max_val");
    }
    json::Value calls = root["calls"];
    obs.calls_.total_calls = calls["total"].as_int();
    for (json::Value row : root["history"].array()) {
      json::Value count = row["count"];
      if (count.as_int() < 1) count.fail("expected a count >= 1");
      obs.calls_.counts.push_back(count.as_int());
      obs.calls_.signatures.push_back(detail::read_call(row["call"]));
    }
    for (json::Value row : root["stored"].array()) obs.calls_.stored.push_back(detail::read_call(row));
    json::Value overflow = root["overflow"];
    if (!overflow.is_null()) {
      obs.calls_.overflow_min = detail::read_call(overflow["min"]);
      obs.calls_.overflow_max = detail::read_call(overflow["max"]);
    }
    obs.calls_.dropped_signatures = calls["dropped_signatures"].as_int();
    return obs;
  }

  /// Loads the observation file at `path`. Throws IoError if it cannot be read, JsonError as
  /// `from_json` (the message names the JSON path; prefix the file name when reporting).
  static Observations load(const std::string& path) { return from_json(detail::read_file(path)); }

  /// As InputObserver::infer_dynamic_shapes.
  DynamicShapes infer_dynamic_shapes(const DynamicShapesOptions& options = {}) const {
    return detail::infer_dynamic_shapes(calls_, options);
  }
  /// As InputObserver::infer_arguments, with tensors on the meta device (shapes, dtypes and
  /// strides, no memory); `materialize` gives real ones.
  Arguments infer_arguments(const InferArgumentsOptions& options = {}) const {
    return materialize(MaterializeOptions().device(c10::Device(c10::kMeta)), options);
  }
  /// The export arguments of `infer_arguments(choice)`, with tensors allocated and filled on
  /// `options.device()` from `options.seed()`. Throws what infer_arguments throws, and
  /// MaterializeError (unsupported dtype, over the memory budget: refused before allocating).
  Arguments materialize(const MaterializeOptions& options = {}, const InferArgumentsOptions& choice = {}) const {
    // Inputs the chosen call lacks come back synthesized on meta (empty or zeros, see
    // infer_arguments); they are allocated here, after the budget check, with the others.
    Value call = detail::infer_argument_value(calls_, choice, c10::Device(c10::kMeta));
    std::vector<Value*> recorded, synthesized;
    std::function<void(Value&)> collect = [&](Value& v) {
      if (v.is_tensor()) (v.data.defined() ? synthesized : recorded).push_back(&v);
      for (Value& item : v.items) collect(item);
    };
    collect(call);
    std::vector<TensorSpec> specs;
    for (Value* v : recorded) specs.push_back(v->spec);
    for (Value* v : synthesized) specs.push_back(TensorSpec::of(v->data));
    Materializer materializer(options);
    materializer.check_budget(specs);
    for (Value* v : recorded) v->data = materializer.tensor(v->spec);
    for (Value* v : synthesized) v->data = at::zeros(v->data.sizes(), v->data.options().device(options.device()));
    return detail::to_arguments(calls_, call);
  }

  /// Number of stored calls.
  int64_t num_obs() const { return static_cast<int64_t>(calls_.stored.size()); }
  /// Number of calls the observer recorded.
  int64_t num_calls() const { return calls_.total_calls; }
  /// Every distinct call signature with its number of calls.
  std::vector<std::pair<Value, int64_t>> history() const {
    std::vector<std::pair<Value, int64_t>> out;
    for (size_t k = 0; k < calls_.signatures.size(); ++k) out.emplace_back(calls_.signatures[k], calls_.counts[k]);
    return out;
  }
  /// The same file again (a round trip gives the same text).
  std::string to_json(int indent = 1) const { return detail::observations_json(calls_, indent); }
  /// Writes `to_json()` to `path` atomically. Throws IoError.
  void save(const std::string& path) const { detail::write_file_atomic(path, to_json() + "\n"); }

  const detail::CallSet& call_set() const { return calls_; }

 private:
  detail::CallSet calls_;
};

/// Loads an observation file (`Observations::load`).
inline Observations load_observations(const std::string& path) { return Observations::load(path); }

}  // namespace optrace
