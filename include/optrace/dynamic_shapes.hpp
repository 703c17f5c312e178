// optrace/dynamic_shapes.hpp: which dims of which inputs are dynamic, and how to write that for torch.export
#pragma once

#include <optrace/detail/common/io.hpp>
#include <optrace/error.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/value.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace optrace {

/// How `infer_dynamic_shapes` decides. Defaults: only dims seen with more than one value are
/// dynamic, each on its own.
struct DynamicShapesOptions {
  /// Also mark dim 0 of every tensor under these top-level arguments dynamic (a batch dim that
  /// happened not to vary). Names as the arguments are keyed; `#0`, `#1`, ... for unnamed
  /// positional ones. Default: none.
  DynamicShapesOptions& dim0_dynamic(std::vector<std::string> argument_names) {
    dim0_dynamic_ = std::move(argument_names);
    return *this;
  }
  /// Mark dim 0 of every tensor dynamic. Default: false.
  DynamicShapesOptions& dim0_dynamic_all(bool on = true) {
    dim0_dynamic_all_ = on;
    return *this;
  }
  /// Give one symbol to dynamic dims whose values were equal in every call. Default: false,
  /// because a coincidence (batch == heads) would over-constrain the export.
  DynamicShapesOptions& shared_symbols(bool on = true) {
    shared_symbols_ = on;
    return *this;
  }
  /// Detect derived dims `d_j = a*d_i + b` (integer a >= 1), each only from >= 3 distinct
  /// values of d_i. Default: false.
  DynamicShapesOptions& derived_dims(bool on = true) {
    derived_dims_ = on;
    return *this;
  }

  const std::vector<std::string>& dim0_dynamic() const { return dim0_dynamic_; }
  bool dim0_dynamic_all() const { return dim0_dynamic_all_; }
  bool shared_symbols() const { return shared_symbols_; }
  bool derived_dims() const { return derived_dims_; }

 private:
  std::vector<std::string> dim0_dynamic_;
  bool dim0_dynamic_all_ = false;
  bool shared_symbols_ = false;
  bool derived_dims_ = false;
};

/// One dim of one tensor input.
struct DimSpec {
  bool dynamic = false;
  int64_t example = 0;  ///< its value in the export arguments (`infer_arguments()`)
  int64_t min = 0;      ///< smallest observed value
  int64_t max = 0;      ///< largest observed value
  /// Dynamic dims: the symbol (`s0`, `s1`, ...) for this dim, or for its root when derived.
  /// Every dynamic dim has one (the observation file writes them as SymInt expressions).
  std::string symbol;
  /// Printed by name rather than as Dim.DYNAMIC: shares its symbol with another dim, or takes
  /// part in a derived relation.
  bool named = false;
  int64_t coeff = 1;   ///< derived: value = coeff * symbol + offset
  int64_t offset = 0;  ///< derived: see coeff

  bool derived() const { return coeff != 1 || offset != 0; }
  /// `s0`, or sympy's form of a derived dim: `2*s0 + 1`, `s0 - 1`.
  std::string expr() const {
    std::string e = coeff == 1 ? symbol : std::to_string(coeff) + "*" + symbol;
    if (offset > 0) e += " + " + std::to_string(offset);
    if (offset < 0) e += " - " + std::to_string(-offset);
    return e;
  }
};

/// The dynamic-shape spec of one input, mirroring its structure: a Tensor has one DimSpec per
/// dim; a non-tensor is `None`; containers hold their items (Dict and Struct with keys).
struct ShapeNode {
  Value::Kind kind = Value::Kind::None;
  std::vector<DimSpec> dims;
  std::vector<ShapeNode> items;
  std::vector<std::string> keys;

  /// Indices of the dynamic dims of a tensor.
  std::vector<int64_t> dynamic_dims() const {
    std::vector<int64_t> out;
    for (size_t k = 0; k < dims.size(); ++k)
      if (dims[k].dynamic) out.push_back(static_cast<int64_t>(k));
    return out;
  }
};

/// A symbol and its observed range (torch.export's RangeConstraint).
struct SymbolRange {
  std::string name;
  int64_t min = 0;
  int64_t max = 0;
  std::vector<std::string> derived;  ///< expressions derived from it (`2*s0 + 1`)
};

/// What `infer_dynamic_shapes()` returns: per argument, which dims are dynamic.
///
/// Example:
///   auto ds = observer.infer_dynamic_shapes();
///   ds.to_python();  // ({0: Dim.DYNAMIC, 1: Dim.DYNAMIC}, {0: Dim.DYNAMIC})
///   ds.to_json();    // {"dynamic_shapes": [["_DimHint.DYNAMIC", ...], ...], "dims": {}}
class DynamicShapes {
 public:
  DynamicShapes() = default;
  DynamicShapes(bool keyed, std::vector<std::string> names, std::vector<ShapeNode> arguments,
                std::vector<SymbolRange> symbols, std::vector<std::string> warnings)
      : keyed_(keyed),
        names_(std::move(names)),
        arguments_(std::move(arguments)),
        symbols_(std::move(symbols)),
        warnings_(std::move(warnings)) {}

  /// True when the spec is keyed by argument name (calls used keyword arguments), false when
  /// it is a tuple in positional order.
  bool keyed() const { return keyed_; }
  /// The argument keys in order (names; `#i` for unnamed positional arguments).
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<ShapeNode>& arguments() const { return arguments_; }
  /// The spec of one top-level argument. Throws ArgumentError for an unknown name.
  const ShapeNode& operator[](const std::string& name) const {
    for (size_t k = 0; k < names_.size(); ++k)
      if (names_[k] == name) return arguments_[k];
    detail::raise<ArgumentError>("no argument named '", name, "'");
  }
  const ShapeNode& operator[](size_t position) const {
    OPTRACE_CHECK(position < arguments_.size(), ArgumentError, "no argument at position ", position,
                  " (there are ", arguments_.size(), ")");
    return arguments_[position];
  }
  /// Every symbol of every dynamic dim, with its observed range (named or not).
  const std::vector<SymbolRange>& symbols() const { return symbols_; }
  /// What a user should know before exporting: dynamic dims whose example value is 0 or 1
  /// (torch.export specializes them), dims that were 0 in every call, dropped history.
  const std::vector<std::string>& warnings() const { return warnings_; }

  /// A Python expression to paste as `dynamic_shapes=` (with `from torch.export import Dim`):
  /// dynamic dims are `Dim.DYNAMIC`, named ones `Dim('s0', min=2, max=7)` (derived:
  /// `Dim('s0', min=2, max=7)*2 + 1`), a static tensor `{}`, a non-tensor `None`.
  std::string to_python() const {
    std::string out;
    out += keyed_ ? "{" : "(";
    for (size_t k = 0; k < arguments_.size(); ++k) {
      if (k) out += ", ";
      if (keyed_) out += python_string(names_[k]) + ": ";
      python_into(out, arguments_[k]);
    }
    if (!keyed_ && arguments_.size() == 1) out += ",";
    out += keyed_ ? "}" : ")";
    return out;
  }

  /// torch's DynamicShapesSpec as JSON (`torch._export.serde.dynamic_shapes._load_dynamic_shapes(
  /// json.loads(s), from_dict=True)` reads it): per tensor a list with an int per static dim
  /// and a string per dynamic one (`_DimHint.DYNAMIC`, a symbol, or a derived expression);
  /// `dims` maps each named symbol to its integer `min`, `max` and `derived` expressions.
  std::string to_json(int indent = 0) const {
    json::Writer w(indent);
    write_json(w);
    return w.take();
  }
  /// Writes `to_json(2)` to `path` atomically (a temporary file, then rename). Throws IoError.
  void save(const std::string& path) const { detail::write_file_atomic(path, to_json(2) + "\n"); }

  /// Writes the same object into a larger document.
  void write_json(json::Writer& w) const {
    w.begin_object().key("dynamic_shapes");
    if (keyed_) w.begin_object();
    else w.begin_array();
    for (size_t k = 0; k < arguments_.size(); ++k) {
      if (keyed_) w.key(names_[k]);
      json_into(w, arguments_[k]);
    }
    if (keyed_) w.end_object();
    else w.end_array();
    w.key("dims").begin_object();
    for (const SymbolRange& s : symbols_) {
      if (!is_named(s.name)) continue;
      w.key(s.name).begin_object().key("min").value(s.min).key("max").value(s.max).key("derived").begin_array();
      for (const std::string& d : s.derived) w.value(d);
      w.end_array().end_object();
    }
    w.end_object().end_object();
  }

 private:
  static std::string python_string(const std::string& s) {
    std::string out = "'";
    for (char c : s) {
      if (c == '\'' || c == '\\') out += '\\';
      out += c;
    }
    return out + "'";
  }
  const SymbolRange* symbol(const std::string& name) const {
    for (const SymbolRange& s : symbols_)
      if (s.name == name) return &s;
    return nullptr;
  }
  bool is_named(const std::string& name) const {
    bool named = false;
    for_each_dim([&](const DimSpec& d) { named = named || (d.named && d.symbol == name); });
    return named;
  }
  template <class F>
  void for_each_dim(F&& f) const {
    std::vector<const ShapeNode*> todo;
    for (const ShapeNode& a : arguments_) todo.push_back(&a);
    while (!todo.empty()) {
      const ShapeNode* n = todo.back();
      todo.pop_back();
      for (const DimSpec& d : n->dims) f(d);
      for (const ShapeNode& c : n->items) todo.push_back(&c);
    }
  }
  void python_into(std::string& out, const ShapeNode& n) const {
    using K = Value::Kind;
    switch (n.kind) {
      case K::Tensor: {
        out += "{";
        bool first = true;
        for (size_t k = 0; k < n.dims.size(); ++k) {
          const DimSpec& d = n.dims[k];
          if (!d.dynamic) continue;
          if (!first) out += ", ";
          first = false;
          out += std::to_string(k) + ": ";
          if (!d.named) {
            out += "Dim.DYNAMIC";
            continue;
          }
          const SymbolRange* s = symbol(d.symbol);
          out += "Dim(" + python_string(d.symbol);
          if (s) out += ", min=" + std::to_string(s->min) + ", max=" + std::to_string(s->max);
          out += ")";
          if (d.coeff != 1) out += "*" + std::to_string(d.coeff);
          if (d.offset > 0) out += " + " + std::to_string(d.offset);
          if (d.offset < 0) out += " - " + std::to_string(-d.offset);
        }
        out += "}";
        return;
      }
      case K::List:
      case K::Tuple:
        out += n.kind == K::List ? "[" : "(";
        for (size_t k = 0; k < n.items.size(); ++k) {
          if (k) out += ", ";
          python_into(out, n.items[k]);
        }
        if (n.kind == K::Tuple && n.items.size() == 1) out += ",";
        out += n.kind == K::List ? "]" : ")";
        return;
      case K::Dict:
      case K::Struct:
        out += "{";
        for (size_t k = 0; k < n.items.size(); ++k) {
          if (k) out += ", ";
          out += python_string(n.keys[k]) + ": ";
          python_into(out, n.items[k]);
        }
        out += "}";
        return;
      default:
        out += "None";
    }
  }
  void json_into(json::Writer& w, const ShapeNode& n) const {
    using K = Value::Kind;
    switch (n.kind) {
      case K::Tensor:
        w.begin_array();
        for (const DimSpec& d : n.dims) {
          if (!d.dynamic) w.value(d.example);
          else if (!d.named) w.value("_DimHint.DYNAMIC");
          else w.value(d.expr());
        }
        w.end_array();
        return;
      case K::List:
      case K::Tuple:
        w.begin_array();
        for (const ShapeNode& c : n.items) json_into(w, c);
        w.end_array();
        return;
      case K::Dict:
      case K::Struct:
        w.begin_object();
        for (size_t k = 0; k < n.items.size(); ++k) {
          w.key(n.keys[k]);
          json_into(w, n.items[k]);
        }
        w.end_object();
        return;
      default:
        w.null();
    }
  }

  bool keyed_ = false;
  std::vector<std::string> names_;
  std::vector<ShapeNode> arguments_;
  std::vector<SymbolRange> symbols_;
  std::vector<std::string> warnings_;
};

}  // namespace optrace
