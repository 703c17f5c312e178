// optrace/detail/kineto/execution_trace_import.hpp: PyTorch's host execution trace read into an op trace
#pragma once
// An execution trace (torch.profiler.ExecutionTraceObserver's JSON, or the Profiler's
// `execution_trace_dir`) holds one node per RecordFunction: its name, its parent ("ctrl_deps"),
// its inputs' values, shapes, types and strides, and attributes (thread, op_schema, rf_id).
// Each node's inputs are written as the Kineto fields the importer decodes ("Input type",
// "Input Dims", "Concrete Inputs", "Input Strides", "TensorList dtypes", the overload from the
// op_schema), and each node is handed to the Kineto importer (Importer::add_call) with a span made
// from the tree: a node's span holds its children's. So an execution trace keeps the calls a
// Kineto trace of the same window keeps, by the same rules (outermost dispatcher ops after
// decomposition, the reference tracer's context rules), and reports what it leaves out the same
// way, with the node's place ("/nodes/17") in each example.
//
// Read: the schema versions torch 2.x and optrace write, "1.0.x" (a node's "inputs",
// "input_shapes", "input_types" and attributes at its top level; "parent" before "ctrl_deps")
// and "1.1.x" ("inputs": {"values", "shapes", "types", "strides"}, "attrs": [{name, type,
// value}]), with or without Chakra's "-chakra.x.y.z" suffix. The text is streamed (NodeScanner): a
// piece at a time, each node read through a small DOM of its own as soon as it is whole (errors
// name its path), so what is held is the nodes' calls, never the text.

#include <optrace/detail/common/json_text.hpp>
#include <optrace/detail/common/pieces.hpp>
#include <optrace/detail/kineto/decode.hpp>
#include <optrace/detail/kineto/events.hpp>
#include <optrace/detail/kineto/importer.hpp>
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/kineto_types.hpp>

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace optrace::detail::kineto {

namespace execution_trace {

// Whether `schema` is a version this reader reads: 1.0.x or 1.1.x, any suffix after the third
// number ("1.1.1-chakra.0.0.4").
inline bool schema_supported(std::string_view schema) {
  return schema.rfind("1.0.", 0) == 0 || schema.rfind("1.1.", 0) == 0;
}

// The element types of a list type: "GenericList[Int,Tensor(float)]" -> {"Int", "Tensor(float)"},
// split at the commas outside brackets and parentheses. False unless `type` is `open` + "[...]".
inline bool element_types(std::string_view type, std::string_view open, std::vector<std::string_view>& out) {
  out.clear();
  if (type.size() < open.size() + 2 || type.compare(0, open.size(), open) != 0 || type[open.size()] != '[' || type.back() != ']')
    return false;
  std::string_view inner = type.substr(open.size() + 1, type.size() - open.size() - 2);
  int depth = 0;
  size_t start = 0;
  for (size_t k = 0; k < inner.size(); ++k) {
    const char c = inner[k];
    if (c == '[' || c == '(') ++depth;
    else if ((c == ']' || c == ')') && --depth < 0) return false;
    else if (c == ',' && depth == 0) {
      out.push_back(inner.substr(start, k - start));
      start = k + 1;
    }
  }
  if (depth != 0) return false;
  if (!inner.empty()) out.push_back(inner.substr(start));
  return true;
}

// "Tensor(float)" -> "float"; empty when `type` is no tensor's.
inline std::string_view tensor_element_type(std::string_view type) {
  if (type.size() > 8 && type.compare(0, 7, "Tensor(") == 0 && type.back() == ')') return type.substr(7, type.size() - 8);
  return {};
}

inline bool is_scalar_type(std::string_view type) {
  return type == "Int" || type == "Double" || type == "Bool" || type == "SymInt" || type == "SymFloat" || type == "SymBool" ||
         type == "ComplexDouble";
}

// A scalar's value as the profiler's "Concrete Inputs" prints it: 3, 0.5, True, inf, nan.
inline std::string scalar_text(const json::Node& v) {
  using simdjson::dom::element_type;
  switch (v.element().type()) {
    case element_type::BOOL: return v.as_bool() ? "True" : "False";
    case element_type::INT64: return std::to_string(v.as_int());
    case element_type::DOUBLE: {
      char buf[32];
      auto r = std::to_chars(buf, buf + sizeof buf, v.as_double());
      std::string out(buf, r.ptr);
      if (out.find_first_of(".eEn") == std::string::npos) out += ".0";  // a double stays one
      return out;
    }
    case element_type::STRING: {  // torch writes inf and nan as strings
      const std::string_view s = v.element().get_string().value_unsafe();
      double d;
      if (json::detail::parse_double(s, d)) return std::string(s);
      break;
    }
    default: break;
  }
  v.fail("expected a number or a boolean");
}

// A list of sizes or strides (`what`) as JSON text; JsonError naming it, or its first negative
// element (no tensor has one, and the hf reader refuses a trace that holds one), otherwise.
inline void append_ints(std::string& out, const json::Node& v, const char* what) {
  out += '[';
  bool first = true;
  for (json::Node e : v.array()) {
    const int64_t i = e.as_int();
    if (i < 0) e.fail_plain(std::string("negative ") + what + " " + std::to_string(i));
    if (!first) out += ',';
    first = false;
    out += std::to_string(i);
  }
  out += ']';
}

inline void append_quoted(std::string& out, std::string_view s) { json::Writer::append_string(out, s); }

// One node's inputs as the Kineto fields' text (RawFields' parts).
struct Fields {
  std::string types = "[", dims = "[", concrete = "[", strides = "[", list_dtypes = "[";
  bool any_list = false;  // a tensor list: list_dtypes is written
  void close() {
    for (std::string* s : {&types, &dims, &concrete, &strides, &list_dtypes}) *s += ']';
  }
  // One input that is no tensor and no tensor list: its "Input type" (JSON text) and "Concrete
  // Inputs" (plain text).
  void add_plain(std::string_view type_json, std::string_view concrete_text) {
    types += type_json;
    dims += "[]";
    append_quoted(concrete, concrete_text);
    strides += "[]";
    list_dtypes += "null";
  }
};

// Appends one input (`type`, `value`, `shape`, `strides`: the node's i-th) to `f`.
inline void add_input(Fields& f, std::string_view type, const json::Node& value, const json::Node& shape,
                      const json::Node* strides, std::vector<std::string_view>& elements) {
  if (f.types.size() > 1)
    for (std::string* s : {&f.types, &f.dims, &f.concrete, &f.strides, &f.list_dtypes}) *s += ',';
  const std::string_view tensor = tensor_element_type(type);
  if (tensor == "nullptr (uninitialized)") return f.add_plain("\"\"", "");  // an undefined tensor (a None bias)
  if (!tensor.empty()) {
    append_quoted(f.types, tensor);
    append_ints(f.dims, shape, "size");
    if (strides != nullptr && strides->is_array() && strides->size() == shape.size()) append_ints(f.strides, *strides, "stride");
    else f.strides += "[]";
    f.concrete += "\"\"";
    f.list_dtypes += "null";
    return;
  }
  if (is_scalar_type(type)) {
    std::string quoted_type;
    append_quoted(quoted_type, type);
    return f.add_plain(quoted_type, scalar_text(value));
  }
  if (type == "String" || type == "Device") return f.add_plain("\"\"", value.as_string());  // Kineto's empty type, the value its text
  if (element_types(type, "GenericList", elements)) {
    if (elements.empty()) return f.add_plain("\"GenericList\"", "[]");  // fits an int list and a tensor list alike
    bool scalars = true, tensors = true, any_tensor = false;
    for (std::string_view e : elements) {
      const bool t = !tensor_element_type(e).empty();
      scalars = scalars && is_scalar_type(e);
      tensors = tensors && (t || e == "None");
      any_tensor = any_tensor || t;
    }
    if (scalars) {
      std::string text = "[";
      size_t k = 0;
      for (json::Node item : value.array()) text += (k++ ? ", " : "") + scalar_text(item);
      if (k != elements.size()) value.fail_plain("expected " + std::to_string(elements.size()) + " values, as its type lists");
      return f.add_plain("\"ScalarList\"", text + "]");
    }
    if (tensors && any_tensor) {
      if (shape.size() != elements.size()) shape.fail_plain("expected " + std::to_string(elements.size()) + " shapes, as its type lists");
      f.any_list = true;
      f.types += "\"TensorList\"";
      f.concrete += "\"\"";
      f.strides += "[]";
      f.dims += '[';
      f.list_dtypes += '[';
      size_t k = 0;
      for (json::Node s : shape.array()) {
        if (k) f.dims += ',', f.list_dtypes += ',';
        const std::string_view e = elements[k++];
        if (e == "None") {
          f.dims += "[]";
          f.list_dtypes += "\"\"";
        } else {
          append_ints(f.dims, s, "size");
          append_quoted(f.list_dtypes, tensor_element_type(e));
        }
      }
      f.dims += ']';
      f.list_dtypes += ']';
      return;
    }
  }
  if (type == "None" || type == "Tensor") return f.add_plain("\"\"", "");  // None, or an undefined tensor
  // A list of lists, a tuple, an object, a generator, ...: its value is not represented.
  const bool list = type.rfind("GenericList[", 0) == 0 || type.rfind("Tuple[", 0) == 0;
  f.add_plain(list ? "\"GenericList\"" : "\"\"", "");
}

// The overload an op_schema names: "aten::add.Tensor(Tensor self, ...) -> Tensor" -> "Tensor",
// "aten::relu(Tensor self) -> Tensor" -> "" (the default). False when it is no schema.
inline bool schema_overload(std::string_view schema, std::string_view& overload) {
  const size_t paren = schema.find('(');
  if (paren == std::string_view::npos || paren == 0) return false;
  const std::string_view name = schema.substr(0, paren);
  const size_t ns = name.find("::");
  const size_t dot = name.find('.', ns == std::string_view::npos ? 0 : ns + 2);
  overload = dot == std::string_view::npos ? std::string_view() : name.substr(dot + 1);
  return true;
}

// A tensor as a node's value names it: [tensor id, storage id, offset (elements), numel, itemsize
// (bytes), device]. Ids come from one counter keyed by address in torch, so one id may name
// tensors that lived one after the other; an op that outputs an id makes its new one.
struct TensorRef {
  int64_t id = -1, storage = -1, offset = 0, numel = 0, itemsize = 0;
  std::string_view device;  // "cpu", "cuda:0"
  std::string_view dtype;   // as its type names it: "float", "long int"
};

// A node as the walk needs it: its place, its parent and its call for the importer; with
// keep_tensors (replay), the tensors of each input and output: none for a value, one for a
// tensor, one per element for a tensor list (id -1 for a None).
struct Node {
  int64_t id = 0, parent = 0;
  uint32_t index = 0;  // in "nodes"
  std::string_view name, thread;
  int64_t rf_id = -1;       // its RecordFunction's id: the Kineto event's "Record function id" (-1: none)
  RawFields raw;
  std::vector<std::vector<TensorRef>> inputs, outputs;
};

// Texts kept for the import (the importer holds views of them until it finishes): each distinct
// text once.
class Texts {
 public:
  std::string_view keep(std::string s) { return *texts_.insert(std::move(s)).first; }

 private:
  std::unordered_set<std::string> texts_;
};

// The tensors of value `v` of type `type`, into `out` (see Node).
inline void read_tensors(std::string_view type, const json::Node& v, std::vector<TensorRef>& out, Texts& texts,
                         std::vector<std::string_view>& elements) {
  auto one = [&texts](const json::Node& t, std::string_view dtype) {
    if (!t.is_array()) return TensorRef{};  // "<None>", an undefined tensor
    if (t.size() != 6) t.fail_plain("expected a tensor as [id, storage id, offset, numel, itemsize, device]");
    TensorRef r;
    size_t k = 0;
    for (json::Node x : t.array()) {
      switch (k++) {
        case 0: r.id = x.as_int(); break;
        case 1: r.storage = x.as_int(); break;
        case 2: r.offset = x.as_int(); break;
        case 3: r.numel = x.as_int(); break;
        case 4: r.itemsize = x.as_int(); break;
        default: r.device = texts.keep(std::string(x.as_string()));
      }
    }
    if (r.offset < 0 || r.numel < 0 || r.itemsize < 0) t.fail_plain("expected a tensor's offset, numel and itemsize of at least 0");
    r.dtype = texts.keep(std::string(dtype));
    return r;
  };
  const std::string_view tensor = tensor_element_type(type);
  if (!tensor.empty()) {
    if (tensor != "nullptr (uninitialized)") out.push_back(one(v, tensor));
    return;
  }
  if (!element_types(type, "GenericList", elements) || elements.empty()) return;
  for (std::string_view e : elements)
    if (tensor_element_type(e).empty() && e != "None") return;  // not a tensor list
  if (!v.is_array() || v.size() != elements.size()) v.fail_plain("expected " + std::to_string(elements.size()) + " tensors, as its type lists");
  size_t k = 0;
  for (json::Node t : v.array()) out.push_back(one(t, tensor_element_type(elements[k++])));
}

// Where a node's inputs (or outputs) are: 1.1 groups them ("inputs": {"values", "shapes",
// "types", "strides"}); 1.0 writes "inputs", "input_shapes" and "input_types" at the node's top
// level, without strides.
struct Args {
  explicit Args(const json::Node& node) : where(node), values(node), types(node) {}
  json::Node where;  // the group (1.1), or the node (1.0)
  json::Node values, types;
  const char* shapes_key = "shapes";  // in `where`
  bool grouped = false;               // 1.1: "strides" may be in `where`
};

// Finds a node's inputs (or outputs) into `args`; false when the node has none.
inline bool find_args(const json::Node& node, bool outputs, Args& args) {
  const char* key = outputs ? "outputs" : "inputs";
  if (node.find(key, args.where) && args.where.is_object()) {
    args.values = args.where["values"];
    args.types = args.where["types"];
    args.grouped = true;
    return true;
  }
  args.where = node;
  if (!node.find(outputs ? "output_types" : "input_types", args.types)) return false;
  args.values = node[key];
  args.shapes_key = outputs ? "output_shapes" : "input_shapes";
  return true;
}

// Reads node `index` (its text) into `out`; JsonError with paths under "/nodes/<index>".
inline void read_node(std::string_view text, uint32_t index, Node& out, Texts& texts, bool keep_tensors = false) {
  const std::string base = "/nodes/" + std::to_string(index);
  try {
    auto doc = json::Document::parse(text);
    const json::Node node = doc->root();
    if (!node.is_object()) node.fail("expected a node object");
    out.index = index;
    out.id = node["id"].as_int();
    out.name = texts.keep(std::string(node["name"].as_string()));
    json::Node parent(node);
    if (node.find("ctrl_deps", parent) || node.find("parent", parent)) out.parent = parent.as_int();
    else out.parent = -1;
    // Attributes: 1.1 lists them in "attrs", 1.0 writes them as the node's members.
    std::string thread = "0";
    std::string_view schema;
    json::Node attrs(node), v(node);
    if (node.find("attrs", attrs)) {
      for (json::Node a : attrs.array()) {
        const std::string_view name = a["name"].as_string();
        if (name == "tid") thread = std::to_string(a["value"].as_int());
        else if (name == "op_schema") schema = a["value"].as_string();
        else if (name == "rf_id") out.rf_id = a["value"].as_int();
      }
    } else {
      if (node.find("tid", v)) thread = std::to_string(v.as_int());
      if (node.find("op_schema", v)) schema = v.as_string();
      if (node.find("rf_id", v)) out.rf_id = v.as_int();
    }
    out.thread = texts.keep(std::move(thread));
    Args args(node), output_args(node);
    const bool has_inputs = find_args(node, false, args);
    if (keep_tensors) {
      std::vector<std::string_view> elements;
      for (auto [found, a, into] : {std::make_tuple(has_inputs, &args, &out.inputs),
                                    std::make_tuple(find_args(node, true, output_args), &output_args, &out.outputs)}) {
        if (!found) continue;
        if (a->values.size() != a->types.size())
          a->values.fail_plain(std::string("values and types differ in length (") + std::to_string(a->values.size()) + " and " +
                               std::to_string(a->types.size()) + ")");
        std::vector<json::Node> vs;
        for (json::Node x : a->values.array()) vs.push_back(x);
        size_t k = 0;
        for (json::Node t : a->types.array()) {
          into->emplace_back();
          read_tensors(t.as_string(), vs[k++], into->back(), texts, elements);
        }
      }
    }
    if (!has_inputs) {
      out.raw = RawFields{};
      return;  // no inputs recorded: a range, or a node of a trace without shapes
    }
    const json::Node values = args.values, types = args.types, shapes = args.where[args.shapes_key];
    json::Node strides(node);
    bool has_strides = args.grouped && args.where.find("strides", strides);
    const size_t n = types.size();
    auto same_length = [n](const json::Node& list, const char* what) {
      if (list.size() != n) list.fail_plain(std::string(what) + " and types differ in length (" + std::to_string(list.size()) + " and " + std::to_string(n) + ")");
    };
    same_length(values, "values");
    same_length(shapes, "shapes");
    if (has_strides && strides.is_array() && strides.size() != n) has_strides = false;
    std::vector<json::Node> vs, ss, sts;
    for (json::Node x : values.array()) vs.push_back(x);
    for (json::Node x : shapes.array()) ss.push_back(x);
    if (has_strides)
      for (json::Node x : strides.array()) sts.push_back(x);
    Fields f;
    std::vector<std::string_view> elements;
    size_t k = 0;
    for (json::Node t : types.array()) {
      add_input(f, t.as_string(), vs[k], ss[k], has_strides ? &sts[k] : nullptr, elements);
      ++k;
    }
    f.close();
    out.raw.types = texts.keep(std::move(f.types));
    out.raw.dims = texts.keep(std::move(f.dims));
    out.raw.concrete = texts.keep(std::move(f.concrete));
    out.raw.strides = has_strides ? texts.keep(std::move(f.strides)) : std::string_view();
    out.raw.list_dtypes = f.any_list ? texts.keep(std::move(f.list_dtypes)) : std::string_view();
    std::string_view overload;
    if (schema_overload(schema, overload)) {
      std::string quoted;
      json::Writer::append_string(quoted, overload);
      out.raw.overload = texts.keep(std::move(quoted));
    }
  } catch (const JsonError& e) {
    optrace::detail::throw_error<JsonError>(e.under(base));
  }
}

// Whether `head` (a text's first bytes) begins as torch and optrace write an execution trace:
// an object whose first key is "schema", a string (a Kineto trace's "schemaVersion" is a number;
// an hf op trace's members are objects). Tells a trace cut short too, which no parser takes.
inline bool surely_execution_trace(std::string_view head) {
  size_t i = 0;
  auto space = [&] {
    while (i < head.size() && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) ++i;
  };
  auto eat = [&](std::string_view s) {
    space();
    if (head.compare(i, s.size(), s) != 0) return false;
    i += s.size();
    return true;
  };
  return eat("{") && eat("\"schema\"") && eat(":") && eat("\"");
}

// The text outside "nodes" (torch writes a few short keys: schema, pid, time, start_ts,
// finish_ts) is kept to be read at the end; past this it is refused, to bound the memory.
inline constexpr size_t kMaxOutsideNodesBytes = size_t(16) << 20;

// The streamed reader's one pass over the text, a piece at a time (feed): each node of the root's
// "nodes" list is handed to on_node(text, index) as soon as it is whole, as a text of its own;
// the text outside the list is kept in `outside`, the list written "[]", to be read as a document
// (read_outside). A pass over the bytes that follows strings and their escapes across pieces;
// memory: one node and the text outside the list, whatever the trace's size.
// A process that dies while torch writes its execution trace leaves the text ending inside the
// "nodes" list (pytorch#126703): finish() then closes `outside` after the list's '[' and names
// where it ends (`cut_short`: "/nodes/17", the node begun or next); a text that ends after the
// list closed, in the keys that follow, is closed after the list ("after /nodes": every node is
// whole). Text after the root's closing brace is refused, as Python's json (Chakra, et_replay)
// refuses it.
class NodeScanner {
 public:
  template <class OnNode>
  void feed(const char* p, size_t n, OnNode&& on_node) {
    for (size_t i = 0; i < n;) {
      std::string& sink = phase_ == Phase::in ? node_ : outside;  // between nodes nothing is kept (between_nodes)
      if (in_string_) {
        size_t j = i;
        for (; j < n; ++j) {
          if (escaped_) escaped_ = false;
          else if (p[j] == '\\') escaped_ = true;
          else if (p[j] == '"') break;
        }
        const bool closes = j < n;
        keep(sink, p + i, j - i + closes);
        i = j + closes;
        if (closes) {
          in_string_ = false;
          if (depth() == 1) key_end_ = outside.size() - 1;
        }
        continue;
      }
      if (depth() >= (phase_ == Phase::in ? 3u : 2u)) {  // inside a node, or inside another key's value
        size_t j = i;
        while (j < n && p[j] != '"' && p[j] != '{' && p[j] != '}' && p[j] != '[' && p[j] != ']') ++j;
        keep(sink, p + i, j - i);
        if ((i = j) == n) break;
      }
      const char c = p[i++];
      if (json::detail::is_json_space(c)) {
        if (phase_ != Phase::in || depth() != 2) keep(sink, &c, 1);
        continue;
      }
      if (root_closed_) optrace::detail::raise_json("", "malformed JSON: text after the trace's closing brace");
      if (depth() == 0 && c != '{') optrace::detail::raise_json("", "expected an execution trace (an object with \"schema\" and \"nodes\")");
      if (phase_ == Phase::in && depth() == 2) {
        between_nodes(c);
        continue;
      }
      keep(sink, &c, 1);
      const bool list_follows = pending_list_;
      if (depth() == 1) pending_list_ = false;
      switch (c) {
        case '"':
          in_string_ = true;
          if (depth() == 1) key_begin_ = outside.size();
          break;
        case ':':
          if (depth() == 1 && is_key(outside.data() + key_begin_, outside.data() + key_end_, "nodes")) {
            if (phase_ != Phase::before) duplicate_key("/nodes");
            pending_list_ = true;
          }
          break;
        case '[':
        case '{':
          open(c);
          if (depth() == 2 && list_follows && c == '[') {
            phase_ = Phase::in;
            expect_ = Expect::node_or_end;
            read_outside(outside + "]}", false);  // the schema, before any node is read by it
          }
          break;
        case ']':
        case '}':
          close(c);
          if (depth() == 0) root_closed_ = true;
          if (phase_ == Phase::in && depth() == 2) {  // a node's end
            if (index_ == UINT32_MAX) optrace::detail::raise_json("/nodes", "more than " + std::to_string(UINT32_MAX) + " nodes");
            on_node(std::string_view(node_), index_++);
            node_.clear();
            expect_ = Expect::comma_or_end;
          }
          break;
        default: break;
      }
    }
  }

  // After the last piece: `outside` closed where the text was cut short, and read.
  void finish() {
    if (!root_closed_ && phase_ == Phase::in) {
      outside += "]}";
      cut_short = "/nodes/" + std::to_string(index_);
    } else if (!root_closed_ && phase_ == Phase::after) {
      outside.resize(nodes_end_);
      outside += '}';
      cut_short = "after /nodes";
    }
    read_outside(outside, true);  // a text cut before its nodes: the parser names it
  }

  std::string outside;
  std::string cut_short;

 private:
  enum class Phase { before, in, after };
  enum class Expect { node_or_end, node, comma_or_end };

  // The nodes list's own bytes, between its nodes: white space, commas, a node's '{', the ']'.
  void between_nodes(char c) {
    const std::string at = "/nodes/" + std::to_string(index_);
    switch (c) {
      case '{':
        if (expect_ == Expect::comma_or_end) optrace::detail::raise_json(at, "malformed JSON: expected ',' or ']' before it");
        node_.assign(1, '{');
        open(c);
        return;
      case ',':
        if (expect_ != Expect::comma_or_end) optrace::detail::raise_json(at, "malformed JSON: expected a node before ','");
        expect_ = Expect::node;
        return;
      case ']':
        if (expect_ == Expect::node) optrace::detail::raise_json(at, "malformed JSON: expected a node after ','");
        outside += ']';
        close(c);
        phase_ = Phase::after;
        nodes_end_ = outside.size();
        return;
      default: optrace::detail::raise_json(at, "expected a node object");
    }
  }

  // Where an error in the text read now lies: the node's, or the root's.
  std::string here() const { return phase_ == Phase::in ? "/nodes/" + std::to_string(index_) : std::string(); }

  // A bracket opened, or closed: it must close the last one open (else the list or object the
  // scanner follows would not be the one a parser reads). As deep as simdjson reads, no deeper.
  void open(char c) {
    if (open_.size() == simdjson::DEFAULT_MAX_DEPTH)
      optrace::detail::raise_json(here(), "malformed JSON: nested more than " + std::to_string(simdjson::DEFAULT_MAX_DEPTH) + " deep");
    open_ += c;
  }
  void close(char c) {
    const char expected = open_.back() == '{' ? '}' : ']';
    if (c != expected) optrace::detail::raise_json(here(), std::string("malformed JSON: '") + c + "' where '" + expected + "' was expected");
    open_.pop_back();
  }
  size_t depth() const { return open_.size(); }

  void keep(std::string& into, const char* p, size_t n) {
    if (n == 0) return;
    if (&into == &node_ && node_.size() + n > kMaxPieceBytes)
      optrace::detail::raise_json("/nodes/" + std::to_string(index_), "a node longer than " + std::to_string(kMaxPieceBytes >> 20) +
                                                                           " MiB: not read, to bound the memory");
    if (&into == &outside && outside.size() + n > kMaxOutsideNodesBytes)
      optrace::detail::raise_json("", "more than " + std::to_string(kMaxOutsideNodesBytes >> 20) +
                                          " MiB of text outside \"nodes\": not read, to bound the memory");
    into.append(p, n);
  }

  // The root as `text` holds it (its nodes list empty): an object with a supported "schema" and
  // a "nodes" list; `whole`: the text's end was read, so a missing key is missing.
  static void read_outside(const std::string& text, bool whole) {
    auto doc = json::Document::parse(text);
    const json::Node root = doc->root();
    if (!root.is_object()) root.fail("expected an execution trace (an object with \"schema\" and \"nodes\")");
    json::Node v(root);
    if (whole && !root.find("nodes", v)) optrace::detail::raise_json("", "missing key \"nodes\"");
    if (whole && !v.is_array()) v.fail("expected a list of nodes");
    if (!root.find("schema", v)) {
      if (whole) optrace::detail::raise_json("", "missing key \"schema\"");
      return;
    }
    const std::string_view schema = v.as_string();
    if (!schema_supported(schema))
      optrace::detail::raise_json("/schema", "schema \"" + std::string(schema.substr(0, 40)) +
                                                 "\" is not one this reader knows (1.0.x or 1.1.x, as torch 2.x writes)");
  }

  Phase phase_ = Phase::before;
  Expect expect_ = Expect::node_or_end;
  std::string open_;  // the brackets open, outermost first
  bool in_string_ = false, escaped_ = false, root_closed_ = false, pending_list_ = false;
  size_t key_begin_ = 0, key_end_ = 0;  // in `outside`: the last string at depth 1 (a key, when ':' follows)
  size_t nodes_end_ = 0;                // in `outside`: after the list's ']'
  std::string node_;
  uint32_t index_ = 0;
};

// A trace's nodes, read (see read_node), and where it was cut short ("" when whole).
struct Trace {
  std::vector<Node> nodes;
  Texts texts;  // what the nodes' views name
  std::string cut_short;
};

// Reads a trace whose text `feed(scanner, on_node)` hands to the scanner. Throws JsonError naming the node.
template <class Feed>
Trace read_trace_from(bool keep_tensors, Feed&& feed) {
  Trace trace;
  NodeScanner scanner;
  feed(scanner, [&](std::string_view text, uint32_t index) {
    trace.nodes.emplace_back();
    read_node(text, index, trace.nodes.back(), trace.texts, keep_tensors);
  });
  scanner.finish();
  trace.cut_short = std::move(scanner.cut_short);
  return trace;
}

// Reads the execution trace `in` hands (`size_t read(char*, size_t)`, 0 at its end:
// detail::FileReader, gzip inflated), streamed: a piece at a time, each node read as soon as it
// is whole. Throws JsonError naming the node.
template <class Source>
Trace read_trace(Source& in, bool keep_tensors) {
  return read_trace_from(keep_tensors, [&in](NodeScanner& scanner, auto&& on_node) {
    std::unique_ptr<char[]> piece(new char[kStreamPieceBytes]);
    for (size_t n; (n = in.read(piece.get(), kStreamPieceBytes)) > 0;) scanner.feed(piece.get(), n, on_node);
  });
}

// Reads the execution trace whose whole text is `text`.
inline Trace read_trace_text(std::string_view text, bool keep_tensors) {
  return read_trace_from(keep_tensors, [text](NodeScanner& scanner, auto&& on_node) { scanner.feed(text.data(), text.size(), on_node); });
}

// The tree of a trace's nodes: their pre-order (children by id: the order they were called in,
// whatever order the file lists them in), each node's parent (UINT32_MAX for a root) and span
// around its children's, on a clock of steps. Walked without recursion (a hostile trace may
// nest a million deep). Throws JsonError for two nodes with one id and for parents in a cycle.
struct Tree {
  std::vector<uint32_t> order, parent_of;
  std::vector<int64_t> start, end;
};

inline Tree walk_tree(const std::vector<Node>& nodes) {
  const uint32_t n = static_cast<uint32_t>(nodes.size());
  std::unordered_map<int64_t, uint32_t> by_id;
  by_id.reserve(n);
  for (uint32_t k = 0; k < n; ++k) {
    auto [it, fresh] = by_id.emplace(nodes[k].id, k);
    if (!fresh)
      optrace::detail::raise_json("/nodes/" + std::to_string(k) + "/id", "node id " + std::to_string(nodes[k].id) +
                                                                          " again (first at /nodes/" + std::to_string(it->second) + ")");
  }
  Tree tree;
  std::vector<uint32_t> first_child(n + 1, 0), children, roots;
  tree.parent_of.assign(n, UINT32_MAX);
  for (uint32_t k = 0; k < n; ++k) {
    auto it = by_id.find(nodes[k].parent);
    if (it != by_id.end() && it->second != k) {
      tree.parent_of[k] = it->second;
      ++first_child[it->second + 1];
    } else {
      roots.push_back(k);
    }
  }
  for (uint32_t k = 0; k < n; ++k) first_child[k + 1] += first_child[k];
  children.resize(first_child[n]);
  {
    std::vector<uint32_t> fill(first_child.begin(), first_child.end() - 1);
    for (uint32_t k = 0; k < n; ++k)
      if (tree.parent_of[k] != UINT32_MAX) children[fill[tree.parent_of[k]]++] = k;
  }
  auto by_node_id = [&nodes](uint32_t a, uint32_t b) { return nodes[a].id < nodes[b].id; };
  for (uint32_t k = 0; k < n; ++k) std::sort(children.begin() + first_child[k], children.begin() + first_child[k + 1], by_node_id);
  std::sort(roots.begin(), roots.end(), by_node_id);

  tree.start.assign(n, -1);
  tree.end.assign(n, 0);
  tree.order.reserve(n);
  int64_t clock = 0;
  std::vector<std::pair<uint32_t, uint32_t>> stack;  // (node, its next child)
  for (uint32_t root : roots) {
    stack.emplace_back(root, first_child[root]);
    tree.start[root] = clock++;
    tree.order.push_back(root);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next == first_child[node + 1]) {
        tree.end[node] = clock++;
        stack.pop_back();
        continue;
      }
      const uint32_t child = children[next++];
      tree.start[child] = clock++;
      tree.order.push_back(child);
      stack.emplace_back(child, first_child[child]);
    }
  }
  if (tree.order.size() != n)  // nodes whose parents lead round in a circle, never to a root
    for (uint32_t k = 0; k < n; ++k)
      if (tree.start[k] < 0)
        optrace::detail::raise_json("/nodes/" + std::to_string(k) + "/ctrl_deps",
                                    "node id " + std::to_string(nodes[k].id) + " is its own ancestor (its parents form a cycle)");
  return tree;
}

}  // namespace execution_trace

// The calls a Kineto trace of the same window gives (see the top of this file), of `trace`.
inline ImportResult import_execution_trace(execution_trace::Trace trace, const ImportOptions& options, const OpCatalog& catalog) {
  namespace et = execution_trace;
  const et::Tree tree = et::walk_tree(trace.nodes);
  Importer importer(options, catalog);
  importer.set_events_path("/nodes");
  for (uint32_t k : tree.order) {
    const et::Node& node = trace.nodes[k];
    importer.add_call(node.name, node.thread, tree.start[k], tree.end[k], node.raw, node.index);
  }
  ImportResult result = importer.finish();
  result.report.format = "execution_trace";
  result.report.cut_short = std::move(trace.cut_short);
  return result;
}

// The same, of the execution trace whose whole text is `text`.
inline ImportResult import_execution_trace(std::string_view text, const ImportOptions& options, const OpCatalog& catalog) {
  return import_execution_trace(execution_trace::read_trace_text(text, false), options, catalog);
}

}  // namespace optrace::detail::kineto
