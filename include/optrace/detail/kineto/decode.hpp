// optrace/detail/kineto/decode.hpp: one profiler event's arguments matched to an overload and converted
#pragma once
// A Kineto `cpu_op` event names the op without its overload and records each argument's kind
// ("Input type"), shape and, for scalars, value ("Concrete Inputs"). Each distinct combination of
// an op name and those fields is decoded once (the importer caches it by the fields' text):
// - the overload is the one whose schema fits the recorded arguments best (match_score);
// - the arguments become what OpTracer records for the same call: positional ones, trailing
//   defaults dropped, in Python's words (the rules of detail/common/dispatcher.hpp);
// - what the profiler did not record is reported, not invented.
// The fields are read straight from their text (read_args_fast) when they are what the profiler
// writes; anything else goes through a small DOM (read_args), whose errors name the path.

#include <optrace/detail/common/op_schema.hpp>
#include <optrace/detail/kineto/events.hpp>
#include <optrace/detail/kineto/profiler_text.hpp>
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/kineto_types.hpp>
#include <optrace/op_trace.hpp>
#include <optrace/python_names.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace optrace::detail::kineto {

using optrace::kineto::ImportOptions;

// One recorded argument, as the profiler wrote it.
struct RecArg {
  enum class Kind { Tensor, Empty, Scalar, ScalarList, TensorList, GenericList };
  // User-provided: value-initialization (emplace_back(), resize) then runs only the member
  // initializers, not a zero fill of the whole ~300 bytes first (a `rep stos` per argument).
  RecArg() {}
  Kind kind = Kind::Empty;
  std::string dtype;  // Tensor: Python dtype
  std::vector<int64_t> shape;
  std::optional<std::vector<int64_t>> strides;  // Tensor: only strides that are not the contiguous ones
  Scalar scalar;                  // Scalar: Missing when no Concrete Inputs
  std::optional<std::vector<Scalar>> list;  // ScalarList: nullopt when unknown
  std::optional<std::vector<OptionalShape>> list_shapes;  // TensorList
  std::optional<std::vector<std::string>> list_dtypes;    // TensorList (optrace's export only)
  std::string text;  // Concrete Inputs text of Empty / GenericList entries (optrace's export)
};

inline bool is_numeric(ArgKind w) {
  return w == ArgKind::Int || w == ArgKind::Float || w == ArgKind::Bool || w == ArgKind::Number || w == ArgKind::Complex ||
         w == ArgKind::Dtype || w == ArgKind::Layout || w == ArgKind::MemoryFormat;
}

// How well `r` fits an argument of type `t`: -1 (not at all) to 3 (exactly).
inline int match_score(const RecArg& r, const ArgType& t) {
  using K = RecArg::Kind;
  auto numeric = is_numeric;
  auto scalar_fits = [](const Scalar& s, ArgKind w) -> int {
    using SK = Scalar::Kind;
    if (s.kind == SK::Missing) return is_numeric(w) ? 3 : -1;
    switch (w) {
      case ArgKind::Int:
      case ArgKind::Dtype:
      case ArgKind::Layout:
      case ArgKind::MemoryFormat: return s.kind == SK::Int ? 3 : -1;
      case ArgKind::Float: return s.kind == SK::Double ? 3 : s.kind == SK::Int ? 1 : -1;
      case ArgKind::Bool: return s.kind == SK::Bool ? 3 : -1;
      case ArgKind::Number: return s.kind == SK::Other ? -1 : 3;
      case ArgKind::Complex: return s.kind == SK::Complex ? 3 : (s.kind == SK::Int || s.kind == SK::Double) ? 2 : -1;
      default: return -1;
    }
  };
  switch (r.kind) {
    case K::Tensor: return t.kind == ArgKind::Tensor ? 3 : -1;
    case K::Empty:
      if (t.optional) return 3;
      if (t.kind == ArgKind::Tensor) return 1;  // an undefined tensor
      if (t.kind == ArgKind::List) return t.element == ArgKind::Tensor && t.element_optional ? 2 : 1;
      if (numeric(t.kind)) return -1;
      return 2;  // Device, str, Generator, ...: never recorded
    case K::Scalar: return numeric(t.kind) ? scalar_fits(r.scalar, t.kind) : -1;
    case K::ScalarList: {
      if (t.kind != ArgKind::List || !numeric(t.element) || t.element == ArgKind::Complex) return -1;
      if (!r.list) return 2;
      int worst = 3;
      for (const Scalar& s : *r.list) worst = std::min(worst, scalar_fits(s, t.element));
      return worst;
    }
    case K::TensorList:
      if (t.kind != ArgKind::List || t.element != ArgKind::Tensor) return -1;
      return t.element_optional ? 2 : 3;
    case K::GenericList:
      if (t.kind != ArgKind::List) return -1;
      return t.element == ArgKind::Tensor && t.element_optional ? 3 : 2;
  }
  return -1;
}

// The raw JSON text of an event's argument fields; empty when absent.
struct RawFields {
  std::string_view dims, types, concrete, strides, overload, list_dtypes;
};

enum class Status { Kept, Decomposed, LeftOut, Dropped };

struct KeyInfo {
  KeyInfo() {}  // no zero fill before the member initializers (see RecArg)
  Status status = Status::LeftOut;
  bool blocks = true;  // hides the ops inside it (a dispatcher op, kept or not)
  std::string_view op;     // "add.Tensor": the catalog's OpInfo::name (it outlives the import)
  std::string dropped_op;  // Dropped: the name the event gave, with its overload
  OpInput input;
  std::vector<std::string> reasons;  // Kept: what is missing; LeftOut: why (one)
  std::string example;  // where, for the report: set when there are reasons (its only use)
  const OpInfo* decomposed = nullptr;  // Decomposed: the op (a context of context rules)
  // Kept ops with context rules: what decode_within needs to read the call again under one (the
  // arguments it reads again from the event's fields, rather than keeping a copy of them).
  struct Rebuild {
    const OpInfo* best = nullptr;  // nullptr: no context rules
    size_t skip = 0;               // recorded inputs before the op's arguments
    std::vector<std::string> reasons;  // before fill_input's
  };
  Rebuild rebuild;
};

inline std::string shorten(std::string_view s, size_t n = 160) {
  if (s.size() <= n) return std::string(s);
  return std::string(s.substr(0, n - 3)) + "...";
}

inline bool is_contiguous(const std::vector<int64_t>& shape, const int64_t* strides, size_t n) {
  if (n != shape.size()) return true;
  int64_t expected = 1;
  bool beyond = false;  // the contiguous stride no longer fits int64 (a shape no tensor has)
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k] == 0) return true;
    if (shape[k] != 1 && (beyond || strides[k] != expected)) return false;
    beyond = beyond || __builtin_mul_overflow(expected, shape[k], &expected);
  }
  return true;
}

inline bool is_contiguous(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  return is_contiguous(shape, strides.data(), strides.size());
}

inline bool scalar_equals_default(const Scalar& s, const DefaultValue& d) {
  using K = DefaultValue::Kind;
  switch (s.kind) {
    case Scalar::Kind::Missing: return true;  // unknown: taken as the default
    case Scalar::Kind::Int: return d.kind == K::Int && d.int_value == s.int_value;
    case Scalar::Kind::Double: return d.kind == K::Double && (d.real == s.real || (std::isnan(d.real) && std::isnan(s.real)));
    case Scalar::Kind::Bool: return d.kind == K::Bool && d.bool_value == s.bool_value;
    case Scalar::Kind::Complex: return d.kind == K::Complex && d.real == s.real && d.imag == s.imag;
    default: return false;
  }
}

// Whether the recorded argument is its schema default (what PyTorch drops before calling
// Python). Values the trace does not hold count as the default.
inline bool equals_default(const RecArg& r, const std::optional<DefaultValue>& default_value) {
  if (!default_value) return false;
  const DefaultValue& d = *default_value;
  using K = DefaultValue::Kind;
  switch (r.kind) {
    case RecArg::Kind::Empty:
      if (d.kind == K::None || r.text.empty()) return true;
      if (d.kind == K::String || d.kind == K::Device) return d.text == r.text;
      return false;
    case RecArg::Kind::Scalar: return scalar_equals_default(r.scalar, d);
    case RecArg::Kind::ScalarList: {
      if (!r.list) return true;
      if (d.kind != K::List) return false;
      if (d.items.size() != r.list->size()) return false;
      for (size_t k = 0; k < d.items.size(); ++k)
        if (!scalar_equals_default((*r.list)[k], d.items[k])) return false;
      return true;
    }
    default: return false;
  }
}

// One argument as the hf op-trace schema holds it.
struct Converted {
  OptionalShape shape;
  std::string dtype;
  OpValue value;
  std::optional<TensorListInfo> list;
  OptionalShape strides;
};

inline OpValue scalar_value(const Scalar& s, ArgKind w, std::string& dtype, bool& unknown) {
  using SK = Scalar::Kind;
  if (s.kind == SK::Missing || s.kind == SK::Other) {
    unknown = true;
    dtype = python_type_name(w);
    return OpValue::none();
  }
  switch (w) {
    case ArgKind::Dtype:
      dtype = python_type_name(ArgKind::Dtype);
      if (s.int_value >= 0 && s.int_value < static_cast<int64_t>(c10::ScalarType::NumOptions))
        return OpValue::string(python_dtype_name(static_cast<c10::ScalarType>(s.int_value)));
      unknown = true;
      return OpValue::none();
    case ArgKind::Layout: dtype = python_type_name(ArgKind::Layout); return OpValue::string(layout_name(s.int_value));
    case ArgKind::MemoryFormat: dtype = python_type_name(ArgKind::MemoryFormat); return OpValue::string(memory_format_name(s.int_value));
    case ArgKind::Float:
      dtype = python_type_name(ArgKind::Float);
      return OpValue::floating(s.kind == SK::Int ? static_cast<double>(s.int_value) : s.real);
    case ArgKind::Complex:
      dtype = python_type_name(ArgKind::Complex);
      return OpValue::string(python_complex(s.kind == SK::Int ? static_cast<double>(s.int_value) : s.real, s.imag));
    default: break;
  }
  switch (s.kind) {
    case SK::Int: dtype = python_type_name(ArgKind::Int); return OpValue::integer(s.int_value);
    case SK::Double: dtype = python_type_name(ArgKind::Float); return OpValue::floating(s.real);
    case SK::Bool: dtype = python_type_name(ArgKind::Bool); return OpValue::boolean(s.bool_value);
    default: dtype = python_type_name(ArgKind::Complex); return OpValue::string(python_complex(s.real, s.imag));
  }
}

// Whether a recorded tensor is a wrapped Python number: `x / 2.8` reaches the profiler as
// div.Tensor(x, <0-dim float64 tensor>) with no value, where a TorchDispatchMode (and OpTracer)
// sees the Python float. The pattern: a 0-dim float64 / int64 / bool tensor given for a plain
// `Tensor` parameter after the first (Python's binary operators wrap their right operand). A
// real 0-dim tensor of those dtypes there reads the same, and is taken as a number too.
inline bool is_wrapped_number(const RecArg& r, const ArgType& t, size_t position) {
  return position > 0 && r.kind == RecArg::Kind::Tensor && r.shape.empty() && t.kind == ArgKind::Tensor &&
         !t.optional && (r.dtype == "torch.float64" || r.dtype == "torch.int64" || r.dtype == "torch.bool");
}

// Converts `r` for argument type `t` (argument `position`), taking its shape and list; adds to
// `missing` what the trace does not hold.
inline Converted convert(RecArg& r, const ArgType& t, size_t position, const std::string& list_dtype_guess,
                         bool record_strides, std::vector<std::string>& missing) {
  Converted c;
  bool unknown = false;
  if (is_wrapped_number(r, t, position)) {
    c.dtype = python_type_name(r.dtype == "torch.float64" ? ArgKind::Float
                               : r.dtype == "torch.int64" ? ArgKind::Int
                                                          : ArgKind::Bool);
    missing.push_back("Python number (a 0-dim " + r.dtype + " tensor to the profiler): value not recorded");
    return c;
  }
  switch (r.kind) {
    case RecArg::Kind::Tensor:
      if (record_strides && r.strides && !is_contiguous(r.shape, *r.strides)) c.strides = std::move(r.strides);
      c.shape = std::move(r.shape);
      c.dtype = std::move(r.dtype);
      break;
    case RecArg::Kind::Empty:
      if (!r.text.empty() && (t.kind == ArgKind::String || t.kind == ArgKind::Device)) {
        c.dtype = python_type_name(t.kind);
        c.value = OpValue::string(r.text);
      } else if (t.optional || t.kind == ArgKind::Tensor) {
        c.dtype = python_type_name(ArgKind::None);
      } else {
        c.dtype = python_type_name(t.kind);
        if (t.kind != ArgKind::Generator) missing.push_back(std::string("value not recorded by the profiler (") + (t.kind == ArgKind::List ? "list" : c.dtype) + ")");
      }
      break;
    case RecArg::Kind::Scalar:
      c.value = scalar_value(r.scalar, t.kind, c.dtype, unknown);
      if (unknown) missing.push_back("scalar value not recorded (no Concrete Inputs)");
      break;
    case RecArg::Kind::ScalarList:
      c.dtype = python_type_name(ArgKind::List);
      if (!r.list) {
        missing.push_back("list value not recorded (no Concrete Inputs)");
        break;
      } else {
        std::vector<OpValue> items;
        items.reserve(r.list->size());
        std::string ignored;
        for (const Scalar& s : *r.list) items.push_back(scalar_value(s, t.element, ignored, unknown));
        c.value = OpValue::list(std::move(items));
      }
      break;
    case RecArg::Kind::TensorList:
      c.dtype = python_type_name(ArgKind::List);
      if (!r.list_shapes) {
        missing.push_back("tensor list not recorded (profiler before PyTorch 2.1)");
        break;
      } else {
        TensorListInfo info;
        info.shapes = std::move(*r.list_shapes);
        if (r.list_dtypes) {
          info.dtypes = std::move(*r.list_dtypes);
        } else {
          for (const auto& s : info.shapes) info.dtypes.push_back(s ? list_dtype_guess : python_type_name(ArgKind::None));
          missing.push_back("tensor list dtypes not recorded (taken from the first tensor argument, else float32)");
        }
        c.list = std::move(info);
      }
      break;
    case RecArg::Kind::GenericList:
      c.dtype = python_type_name(ArgKind::List);
      if (!r.text.empty()) {
        try {
          auto doc = json::Document::parse(r.text);
          c.value = OpValue::read(doc->root());
          break;
        } catch (const JsonError&) {
        }
      }
      missing.push_back("list value not recorded by the profiler");
      break;
  }
  return c;
}

// The kind of a recorded argument by its "Input type"; Tensor for any other name (a dtype's, which
// the caller checks).
inline RecArg::Kind kind_of_input_type(std::string_view type) {
  using K = RecArg::Kind;
  if (type.empty()) return K::Empty;
  if (type[0] < 'A' || type[0] > 'Z') return K::Tensor;  // dtype names: "float", "c10::Half", "long int", ...
  if (type == "None") return K::Empty;
  if (type == "Scalar" || type == "Int" || type == "Double" || type == "Bool" || type == "ComplexDouble" || type == "SymInt" ||
      type == "SymFloat" || type == "SymBool")
    return K::Scalar;
  if (type == "ScalarList" || type == "IntList" || type == "DoubleList" || type == "BoolList" || type == "SymIntList")
    return K::ScalarList;
  if (type == "TensorList") return K::TensorList;
  if (type == "GenericList" || type == "List" || type == "TupleList") return K::GenericList;
  return K::Tensor;
}

// What the argument's "Concrete Inputs" text says, by its kind (tensors and lists of them: nothing).
inline void set_concrete(RecArg& r, std::string_view text, bool has_concrete) {
  switch (r.kind) {
    case RecArg::Kind::Empty:
    case RecArg::Kind::GenericList: r.text = std::string(text); break;
    case RecArg::Kind::Scalar: r.scalar = parse_scalar(text); break;
    case RecArg::Kind::ScalarList: {
      std::vector<Scalar> items;
      if (has_concrete && parse_scalar_list(text, items)) r.list = std::move(items);
      break;
    }
    default: break;
  }
}

// The integers of `list` (Input Dims' or Input Strides' element), refused with a JsonError at the
// first negative one (`what`: "size", "stride"): no tensor has one, and the hf reader refuses a
// trace that holds one, so a converted trace could not be read back.
inline std::vector<int64_t> nonnegative_ints(const json::Node& list, const char* what) {
  std::vector<int64_t> values = list.as_int_list();
  for (size_t j = 0; j < values.size(); ++j)
    if (values[j] < 0) {
      size_t k = 0;
      for (json::Node v : list.array())
        if (k++ == j) v.fail_plain(std::string("negative ") + what + " " + std::to_string(values[j]));
    }
  return values;
}

// The recorded arguments of one event, from its fields' DOM. Throws JsonError (paths relative to
// the args object); returns a non-empty reason when the fields do not line up.
inline std::string read_args(const json::Node& root, std::vector<RecArg>& out) {
  json::Node dims(root), types(root), concrete(root), strides(root), list_dtypes(root);
  bool has_dims = root.find("Input Dims", dims), has_types = root.find("Input type", types);
  bool has_concrete = root.find("Concrete Inputs", concrete), has_strides = root.find("Input Strides", strides);
  bool has_list_dtypes = root.find("TensorList dtypes", list_dtypes);
  if (!has_dims && !has_types) return "no Input Dims and Input type (profiled without record_shapes)";
  if (!has_types) return "no Input type";
  if (!has_dims) return "no Input Dims";
  types.array();  // both must be lists (JsonError otherwise)
  dims.array();
  if (has_concrete) concrete.array();
  if (has_strides) strides.array();
  if (has_list_dtypes) list_dtypes.array();
  size_t n = types.size();
  if (dims.size() != n) return "Input Dims and Input type differ in length";
  if (has_concrete && concrete.size() != n) return "Concrete Inputs and Input type differ in length";
  if (has_strides && strides.size() != n) has_strides = false;
  if (has_list_dtypes && list_dtypes.size() != n) return "TensorList dtypes and Input type differ in length";
  std::vector<json::Node> d, c, s, l;
  for (json::Node v : dims.array()) d.push_back(v);
  if (has_concrete)
    for (json::Node v : concrete.array()) c.push_back(v);
  if (has_strides)
    for (json::Node v : strides.array()) s.push_back(v);
  if (has_list_dtypes)
    for (json::Node v : list_dtypes.array()) l.push_back(v);
  size_t i = 0;
  out.clear();
  for (json::Node tv : types.array()) {
    RecArg r;
    const std::string_view type = tv.as_string();
    const std::string_view text = has_concrete ? c[i].as_string() : std::string_view();
    r.kind = kind_of_input_type(type);
    set_concrete(r, text, has_concrete);
    if (r.kind == RecArg::Kind::TensorList) {
      std::vector<OptionalShape> shapes;
      for (json::Node sv : d[i].array()) shapes.push_back(nonnegative_ints(sv, "size"));
      if (has_list_dtypes && !l[i].is_null()) {
        std::vector<std::string> dtypes;
        size_t k = 0;
        for (json::Node dv : l[i].array()) {
          std::string_view name = dv.as_string();
          if (k >= shapes.size()) dv.fail_plain("more dtypes than Input Dims has shapes");
          if (name.empty()) {
            shapes[k] = std::nullopt;
            dtypes.push_back(python_type_name(ArgKind::None));
          } else {
            const std::string* py = python_dtype_of_type_name(name);
            if (py == nullptr) return "unknown tensor type \"" + std::string(name) + "\" in TensorList dtypes";
            dtypes.push_back(*py);
          }
          ++k;
        }
        if (dtypes.size() != shapes.size()) l[i].fail_plain("TensorList dtypes and Input Dims differ in length");
        r.list_dtypes = std::move(dtypes);
        r.list_shapes = std::move(shapes);
      } else if (!shapes.empty()) {
        r.list_shapes = std::move(shapes);
      }
    } else if (r.kind != RecArg::Kind::Tensor) {
      // a scalar, a list of them, a generic list or nothing: its concrete value, set above
    } else if (const std::string* py = python_dtype_of_type_name(type)) {
      r.dtype = *py;
      r.shape = nonnegative_ints(d[i], "size");
      if (has_strides && s[i].is_array() && s[i].size() == r.shape.size()) {
        std::vector<int64_t> st = nonnegative_ints(s[i], "stride");
        if (!is_contiguous(r.shape, st)) r.strides = std::move(st);
      }
    } else {
      return "unknown Input type \"" + std::string(type) + "\"";
    }
    out.push_back(std::move(r));
    ++i;
  }
  return "";
}

// The fields as the profiler writes them, read straight from their text: lists of plain strings
// (no escapes), of integers and of lists of them. Anything else (escapes, floats, objects, deeper
// lists, malformed text) is left to read_args above, which names the path of what is wrong: a
// field text this reader accepts reads the same there.
namespace fast_fields {

struct Cursor {
  const char* p;
  const char* end;
  static Cursor of(std::string_view text) { return Cursor{text.data(), text.data() + text.size()}; }
  void skip_spaces() {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')) ++p;
  }
  bool eat(char c) {
    skip_spaces();
    if (p >= end || *p != c) return false;
    ++p;
    return true;
  }
  // The written-out list readers' steps (int_elements, strings): `[` and the spaces after it,
  // `empty` when `]` follows (eaten too);
  bool open_list(bool& empty) {
    if (!eat('[')) return false;
    skip_spaces();
    empty = p < end && *p == ']';
    if (empty) ++p;
    return true;
  }
  // after an item, `,` (`more`, the spaces after it skipped) or `]`; false for anything else;
  bool after_item(bool& more) {
    skip_spaces();
    if (p == end) return false;
    const char separator = *p++;
    more = separator == ',';
    if (more) skip_spaces();
    return more || separator == ']';
  }
  // nothing but spaces left.
  bool finished() {
    skip_spaces();
    return p == end;
  }
};

// An integer at `c.p` (no spaces before it), `c.p` moved past it.
inline bool integer_here(Cursor& c, int64_t& out) {
  const bool negative = c.p < c.end && *c.p == '-';
  if (negative) ++c.p;
  const char* start = c.p;
  uint64_t v = 0;  // unsigned: digits beyond 18 wrap harmlessly before they are refused
  for (; c.p < c.end && static_cast<unsigned>(*c.p - '0') < 10; ++c.p) v = v * 10 + static_cast<unsigned>(*c.p - '0');
  const size_t digits = static_cast<size_t>(c.p - start);
  // JSON's integers: no leading zero; at most 18 digits (no overflow); no fraction or exponent.
  if (digits == 0 || digits > 18 || (digits > 1 && *start == '0')) return false;
  if (c.p < c.end && (*c.p == '.' || *c.p == 'e' || *c.p == 'E')) return false;
  out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

inline bool integer(Cursor& c, int64_t& out) {
  c.skip_spaces();
  return integer_here(c, out);
}

inline bool string(Cursor& c, std::string_view& out) {
  if (!c.eat('"')) return false;
  const char* start = c.p;
  while (c.p < c.end && *c.p != '"') {
    if (*c.p == '\\' || static_cast<unsigned char>(*c.p) < 0x20) return false;
    ++c.p;
  }
  if (c.p >= c.end) return false;
  out = std::string_view(start, static_cast<size_t>(c.p - start));
  ++c.p;
  return true;
}

// Whether `text` is one plain string (spaces around it aside); `out` its characters.
inline bool whole_string(std::string_view text, std::string_view& out) {
  Cursor c = Cursor::of(text);
  if (!string(c, out)) return false;
  c.skip_spaces();
  return c.p == c.end;
}

// `[v, v, ...]`, calling item(cursor) for each element (which reads it).
template <class Item>
bool list(Cursor& c, Item item) {
  if (!c.eat('[')) return false;
  if (c.eat(']')) return true;
  do {
    if (!item(c)) return false;
  } while (c.eat(','));
  return c.eat(']');
}

// `[1, 2, 3]`, its integers in `out` (a TensorList's shapes: int_elements reads the others).
inline bool int_list(Cursor& c, std::vector<int64_t>& out) {
  out.clear();
  return list(c, [&out](Cursor& c) {
    int64_t v;
    if (!integer(c, v)) return false;
    out.push_back(v);
    return true;
  });
}

// Skips an integer list, or (depth 2) a list of them; false for anything else.
inline bool skip_int_lists(Cursor& c, int depth) {
  return list(c, [depth](Cursor& c) {
    if (depth == 2) return skip_int_lists(c, 1);
    int64_t ignored;
    return integer(c, ignored);
  });
}

// One element of Input Dims / Input Strides: an integer list, its values flat[begin, end), or a
// list of them (`nested`: a TensorList's shapes, read from `text`).
struct IntElement {
  std::string_view text;
  uint32_t begin = 0, end = 0;
  bool nested = false;
};

// The elements of the list `text`, each read once (integers gathered in `flat`). Written out
// rather than through list(): the generic one's calls cost more than the reading on the short
// lists of a profiler's fields (Input Dims, Input Strides of every decoded input).
inline bool int_elements(std::string_view text, std::vector<IntElement>& out, std::vector<int64_t>& flat) {
  out.clear();
  flat.clear();
  Cursor c = Cursor::of(text);
  bool empty;
  if (!c.open_list(empty)) return false;
  for (bool more = !empty; more;) {  // an element: `[1, 2]` or (a TensorList's shapes) `[[1], [2]]`
    if (c.p == c.end || *c.p != '[') return false;
    // Filled in place: a copy from the stack, just after its fields' narrower stores, stalled on
    // store forwarding.
    IntElement& e = out.emplace_back();
    const char* start = c.p;
    e.begin = static_cast<uint32_t>(flat.size());
    bool no_values;
    if (!c.open_list(no_values)) return false;
    if (!no_values && c.p < c.end && *c.p == '[') {
      e.nested = true;
      c.p = start;
      if (!skip_int_lists(c, 2)) return false;
    } else {
      for (bool values = !no_values; values;) {
        int64_t v;
        if (!integer_here(c, v)) return false;
        flat.push_back(v);
        if (!c.after_item(values)) return false;
      }
    }
    e.end = static_cast<uint32_t>(flat.size());
    e.text = std::string_view(start, static_cast<size_t>(c.p - start));
    if (!c.after_item(more)) return false;
  }
  return c.finished();
}

// The contents of the list of plain strings `text` (Input type, Concrete Inputs), unquoted.
// Written out, as int_elements.
inline bool strings(std::string_view text, std::vector<std::string_view>& out) {
  out.clear();
  Cursor c = Cursor::of(text);
  bool empty;
  if (!c.open_list(empty)) return false;
  for (bool more = !empty; more;) {
    if (c.p == c.end || *c.p != '"') return false;
    const char* start = ++c.p;
    for (; c.p < c.end && *c.p != '"'; ++c.p)
      if (*c.p == '\\' || static_cast<unsigned char>(*c.p) < 0x20) return false;
    if (c.p == c.end) return false;
    out.emplace_back(start, static_cast<size_t>(c.p - start));
    ++c.p;
    if (!c.after_item(more)) return false;
  }
  return c.finished();
}

}  // namespace fast_fields

// read_args from the fields' text, for what fast_fields reads: true when done (`problem` set when
// the fields do not line up), false to read them with read_args (the DOM, naming paths).
inline bool read_args_fast(const RawFields& raw, std::vector<RecArg>& out, std::string& problem) {
  using namespace fast_fields;
  if (!raw.list_dtypes.empty()) return false;  // optrace's own export only
  const bool has_dims = !raw.dims.empty(), has_types = !raw.types.empty(), has_concrete = !raw.concrete.empty();
  bool has_strides = !raw.strides.empty();
  // The elements (texts of Input Dims' and Input Strides', contents of the strings of the others);
  // kept between calls (a decode per distinct input of a trace).
  thread_local std::vector<std::string_view> types, concrete;
  thread_local std::vector<IntElement> dims, strides;
  thread_local std::vector<int64_t> dim_values, stride_values;
  types.clear(), dims.clear(), concrete.clear(), strides.clear();
  if ((has_types && !strings(raw.types, types)) || (has_dims && !int_elements(raw.dims, dims, dim_values)) ||
      (has_concrete && !strings(raw.concrete, concrete)) || (has_strides && !int_elements(raw.strides, strides, stride_values)))
    return false;
  if (!has_dims && !has_types) problem = "no Input Dims and Input type (profiled without record_shapes)";
  else if (!has_types) problem = "no Input type";
  else if (!has_dims) problem = "no Input Dims";
  if (!problem.empty()) return true;
  const size_t n = types.size();
  if (dims.size() != n) problem = "Input Dims and Input type differ in length";
  else if (has_concrete && concrete.size() != n) problem = "Concrete Inputs and Input type differ in length";
  if (!problem.empty()) return true;
  if (has_strides && strides.size() != n) has_strides = false;
  for (int64_t v : dim_values)
    if (v < 0) return false;  // read_args names it
  out.clear();
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string_view type = types[i], text = has_concrete ? concrete[i] : std::string_view();
    out.emplace_back();
    RecArg& r = out.back();
    r.kind = kind_of_input_type(type);
    set_concrete(r, text, has_concrete);
    if (r.kind == RecArg::Kind::TensorList) {
      std::vector<OptionalShape> shapes;
      Cursor c = Cursor::of(dims[i].text);
      std::vector<int64_t> shape;
      if (!list(c, [&](Cursor& c) {
            if (!int_list(c, shape)) return false;
            for (int64_t v : shape)
              if (v < 0) return false;  // read_args names it
            shapes.emplace_back(shape);
            return true;
          }))
        return false;
      if (!shapes.empty()) r.list_shapes = std::move(shapes);
    } else if (r.kind != RecArg::Kind::Tensor) {
      // a scalar, a list of them, a generic list or nothing: its concrete value, set above
    } else if (const std::string* py = python_dtype_of_type_name(type)) {
      r.dtype = *py;
      if (dims[i].nested) return false;
      r.shape.assign(dim_values.begin() + dims[i].begin, dim_values.begin() + dims[i].end);
      if (has_strides) {
        if (strides[i].nested) return false;  // a list, but not of integers: read_args says what is wrong where
        const int64_t* st = stride_values.data() + strides[i].begin;
        const size_t rank = strides[i].end - strides[i].begin;
        if (rank == r.shape.size()) {
          for (size_t k = 0; k < rank; ++k)
            if (st[k] < 0) return false;  // read_args names it
          if (!is_contiguous(r.shape, st, rank)) r.strides.emplace(st, st + rank);  // most are not kept
        }
      }
    } else {
      problem = "unknown Input type \"" + std::string(type) + "\"";
      return true;
    }
  }
  return true;
}

// Fills `info` (status Kept, or LeftOut when incomplete calls are not kept) with the call of
// `best` with `args` as Python's __torch_dispatch__ gets it: positional arguments, trailing
// defaults dropped; under a context `rule`, as the op and argument value the reference sees.
inline void fill_input(KeyInfo& info, const OpInfo& best, std::vector<RecArg>& args, const OpInfo::Rule* rule,
                       const ImportOptions& options) {
  const OpInfo& recorded = rule != nullptr ? *rule->recorded : best;
  info.op = recorded.name;
  if (rule != nullptr && rule->set_arg >= 0 && static_cast<size_t>(rule->set_arg) < args.size()) {
    RecArg& a = args[static_cast<size_t>(rule->set_arg)];
    a.kind = RecArg::Kind::Scalar;
    a.scalar = Scalar{};
    a.scalar.kind = Scalar::Kind::Bool;
    a.scalar.bool_value = rule->set_to;
  }
  size_t positional = std::min(best.positional, args.size());
  while (positional > 0 && equals_default(args[positional - 1], best.defaults[positional - 1])) --positional;
  positional = std::min(positional, recorded.args.size());
  std::string guess = "torch.float32";
  for (const RecArg& r : args)
    if (r.kind == RecArg::Kind::Tensor) {
      guess = r.dtype;
      break;
    }
  OpInput& in = info.input;
  in.input_shapes.reserve(positional);
  in.input_dtypes.reserve(positional);
  in.non_tensor_inputs.reserve(positional);
  std::vector<std::string> missing;
  for (size_t k = 0; k < positional; ++k) {
    Converted c = convert(args[k], best.args[k], k, guess, options.record_strides(), missing);
    if (c.list) c.value = in.add_tensor_list(std::move(*c.list));
    in.input_shapes.push_back(std::move(c.shape));
    in.input_dtypes.push_back(std::move(c.dtype));
    in.non_tensor_inputs.push_back(std::move(c.value));
    if (c.strides) {  // input_strides: one per argument once any tensor's say more than its shape
      in.input_strides.resize(k);
      in.input_strides.push_back(std::move(c.strides));
    } else if (!in.input_strides.empty()) {
      in.input_strides.emplace_back();
    }
  }
  // Keyword-only arguments, by name, where they differ from their defaults (as Python passes them).
  if (options.keyword_arguments() && rule == nullptr && best.arg_names.size() == best.args.size())
    for (size_t k = best.positional; k < args.size() && k < best.args.size(); ++k) {
      if (equals_default(args[k], best.defaults[k])) continue;
      Converted c = convert(args[k], best.args[k], k, guess, options.record_strides(), missing);
      if (c.list) continue;  // a keyword-only tensor list: none in aten's schemas
      in.kwargs.push_back(OpKwarg{best.arg_names[k], std::move(c.shape), std::move(c.dtype), std::move(c.value), std::move(c.strides)});
    }
  for (std::string& m : missing)
    if (std::find(info.reasons.begin(), info.reasons.end(), m) == info.reasons.end()) info.reasons.push_back(std::move(m));
  info.status = Status::Kept;
  if (!options.keep_incomplete()) {
    for (const std::string& r : info.reasons)
      if (r.rfind("ambiguous", 0) != 0) {
        info.status = Status::LeftOut;
        info.reasons = {"incomplete: " + r};
        return;
      }
  }
}

// The fields, as one small document for the path-naming reader (read_args).
inline void read_args_dom(const RawFields& raw, const std::string& args_path, std::vector<RecArg>& args,
                          std::string& overload_hint, bool& has_hint, std::string& problem) {
  std::string text = "{";
  auto add = [&text](const char* key, std::string_view value) {
    if (value.empty()) return;
    if (text.size() > 1) text += ',';
    text += '"';
    text += key;
    text += "\":";
    text += value;
  };
  add("Input Dims", raw.dims);
  add("Input type", raw.types);
  add("Concrete Inputs", raw.concrete);
  add("Input Strides", raw.strides);
  add("TensorList dtypes", raw.list_dtypes);
  add("Overload name", raw.overload);
  text += '}';
  try {
    auto doc = json::Document::parse(text);
    json::Node hint(doc->root());
    if (doc->root().find("Overload name", hint)) {
      overload_hint = std::string(hint.as_string());
      has_hint = true;
    }
    problem = read_args(doc->root(), args);
  } catch (const JsonError& e) {
    optrace::detail::throw_error<JsonError>(e.under(args_path));
  }
}

// Kept between reads (a decode per distinct input of a trace): fill_input takes what it holds.
inline std::vector<RecArg>& recorded_args_scratch() {
  thread_local std::vector<RecArg> args;
  return args;
}

// The recorded arguments of an event's fields into `args`, read straight from their text, else
// through the DOM (whose errors name the path: `event_path()` + "/args..."); `problem` says
// why when they do not line up.
template <class PathFn>
void read_recorded(const RawFields& raw, const PathFn& event_path, std::vector<RecArg>& args, std::string& overload_hint,
                   bool& has_hint, std::string& problem) {
  args.clear();
  std::string_view hint;
  if ((raw.overload.empty() || fast_fields::whole_string(raw.overload, hint)) && read_args_fast(raw, args, problem)) {
    has_hint = !raw.overload.empty();
    overload_hint = std::string(hint);
  } else {
    read_args_dom(raw, event_path() + "/args", args, overload_hint, has_hint, problem);
  }
}

// Where a call was, for the report's examples: "/traceEvents/7: aten::add (Input type [...])".
inline std::string example_of(std::string_view events_path, uint32_t index, std::string_view name, const RawFields& raw) {
  return event_path_of(events_path, index) + ": " + std::string(name) + " (Input type " +
         (raw.types.empty() ? std::string("absent") : shorten(raw.types)) + ")";
}

// The overload a call's recorded arguments fit best, and how many recorded values before them are
// not its arguments (`skip`); `tied`: others that fit as well, at the same skip.
struct OverloadChoice {
  const OpInfo* best = nullptr;
  size_t skip = 0;
  std::vector<const OpInfo*> tied;
};

// The best fit of `args` among `overloads`, at `offset` recorded values skipped (the last
// `args.size() - offset` are the arguments), kept in `choice` when better than what it holds.
inline void fit_overloads(const std::vector<const OpInfo*>& overloads, const std::vector<RecArg>& args,
                          const std::string* hint, bool skipping, OverloadChoice& choice, int& best_score) {
  for (const OpInfo* o : overloads) {
    const auto& params = o->args;
    if (hint != nullptr) {
      if (o->overload != *hint || args.size() > params.size()) continue;
    } else if (!skipping ? params.size() != args.size() : params.size() >= args.size()) {
      continue;
    }
    const size_t offset = skipping ? args.size() - params.size() : 0;
    int score = 0;
    for (size_t k = offset; k < args.size() && score >= 0; ++k) {
      const int s = match_score(args[k], params[k - offset]);
      score = s < 0 ? -1 : score + s;
    }
    if (score < 0) continue;
    if (score > best_score || (score == best_score && skipping && offset < choice.skip)) {
      choice.best = o;
      choice.skip = offset;
      choice.tied.clear();
      best_score = score;
    } else if (score == best_score && offset == choice.skip) {
      choice.tied.push_back(o);
    }
  }
}

// The overload of a call: the schema `args` fit best, the one the trace names (`hint`) if any.
// Boxed calls (the TorchScript interpreter's) hand RecordFunction the caller's whole stack: when
// no schema takes all the recorded inputs, the op's arguments are the last ones (as OpTracer
// reads them). With one value too many, an `.out` overload can take them all by arity
// (linear.out(input, weight, bias, *, out) for the stack's value then linear's three), every
// argument shifted; its out= is keyword-only, a call passes it by name, and a profiler before 2.1
// (no Overload name) around TorchScript makes such bindings far more often than calls with out=:
// an overload on the last arguments is preferred to one that binds keyword-only out= tensors.
inline OverloadChoice choose_overload(const std::vector<const OpInfo*>& overloads, const std::vector<RecArg>& args,
                                      const std::string* hint) {
  OverloadChoice choice;
  int best_score = -1;
  fit_overloads(overloads, args, hint, false, choice, best_score);
  if (hint != nullptr) return choice;
  bool binds_out = choice.best != nullptr && choice.best->positional < args.size();
  for (size_t k = binds_out ? choice.best->positional : args.size(); k < args.size(); ++k)
    binds_out = binds_out && choice.best->args[k].kind == ArgKind::Tensor;  // out=, not dtype= or alpha=
  if (choice.best == nullptr || binds_out) {
    OverloadChoice skipped;
    int skipped_score = -1;
    fit_overloads(overloads, args, nullptr, true, skipped, skipped_score);
    if (skipped.best != nullptr) return skipped;
  }
  return choice;
}

// Decodes, into the default `info`, the key of event `index` of the list at `events_path` (the
// paths of errors and examples, built only for them): a call of op `name`, of the catalog's
// `overloads` of it.
inline void decode(KeyInfo& info, const std::vector<const OpInfo*>& overloads, std::string_view name, const RawFields& raw,
                   std::string_view events_path, uint32_t index, const ImportOptions& options) {
  auto event_path = [&] { return event_path_of(events_path, index); };
  auto set_example = [&] { info.example = example_of(events_path, index, name, raw); };
  auto left_out = [&](std::string reason) {
    info.status = Status::LeftOut;
    bool all_decompose = !overloads.empty();
    for (const OpInfo* o : overloads) all_decompose = all_decompose && o->decomposes;
    info.blocks = !all_decompose;
    info.reasons = {std::move(reason)};
    set_example();
  };
  if (overloads.empty()) return left_out("op not in this libtorch");

  std::vector<RecArg>& args = recorded_args_scratch();
  std::string overload_hint;
  bool has_hint = false;
  std::string problem;
  read_recorded(raw, event_path, args, overload_hint, has_hint, problem);
  if (!problem.empty()) return left_out(problem);

  const OverloadChoice choice = choose_overload(overloads, args, has_hint ? &overload_hint : nullptr);
  const OpInfo* best = choice.best;
  const size_t skip = choice.skip;
  const std::vector<const OpInfo*>& tied = choice.tied;
  if (skip > 0) args.erase(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(skip));
  if (best == nullptr)
    return left_out(has_hint ? "no overload \"" + overload_hint + "\" takes the recorded arguments"
                             : "no overload matches the recorded arguments");
  info.op = best->name;  // the catalog outlives the import
  if (best->decomposes) {
    info.status = Status::Decomposed;
    info.blocks = false;
    info.decomposed = best;
    return;
  }
  std::string took;
  if (!tied.empty()) {
    std::string names;
    for (const OpInfo* o : tied) names += ", " + o->name;
    info.reasons.push_back("ambiguous overload (took the first)");
    took = " took " + best->name + " over" + names.substr(1);
  }

  if (!best->rules.empty()) info.rebuild = KeyInfo::Rebuild{best, skip, info.reasons};
  fill_input(info, *best, args, nullptr, options);
  if (!info.reasons.empty()) {
    set_example();
    info.example += took;  // (`took` implies a reason)
  }
}

// The same call as the reference sees it under `rule` (the composites open around the event
// matched it): the rule's op and argument value. `plain` is the key's decode, from the same
// fields (read again here: they read as they did then) of event `index`, a call of `name`.
inline KeyInfo decode_within(const KeyInfo& plain, const OpInfo::Rule& rule, std::string_view name, const RawFields& raw,
                             std::string_view events_path, uint32_t index, const ImportOptions& options) {
  KeyInfo info;
  info.reasons = plain.rebuild.reasons;
  std::vector<RecArg>& args = recorded_args_scratch();
  std::string overload_hint, problem;
  bool has_hint = false;
  read_recorded(raw, [&] { return event_path_of(events_path, index); }, args, overload_hint, has_hint, problem);
  args.erase(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(plain.rebuild.skip));
  fill_input(info, *plain.rebuild.best, args, &rule, options);
  if (!info.reasons.empty()) info.example = plain.reasons.empty() ? example_of(events_path, index, name, raw) : plain.example;
  return info;
}

}  // namespace optrace::detail::kineto
