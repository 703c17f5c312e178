// optrace/dynamic_shapes.hpp: which dims of which inputs are dynamic, and how to write that for torch.export
#pragma once

#include <optrace/detail/common/io.hpp>
#include <optrace/error.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/value.hpp>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace optrace {

/// How a dynamic dim is written for torch.export (`to_python`, `to_json`). What each does at
/// export time, measured with torch 2.6's `_load_dynamic_shapes` and `torch.export.export` (the
/// proof is in docs/observer.md, "Exporting from observations"):
enum class DimStyle {
  /// `Dim.AUTO` / `"_DimHint.AUTO"` for every dim not tied to another (tied dims, shared or
  /// derived, are named). Loads on torch 2.6 and later. torch keeps the dim dynamic, finds the
  /// equalities between dims itself and accepts the size guards a model needs (resnet18's
  /// height and width); it specializes silently a dim the model forces, or whose example is 0
  /// or 1 (the example is export-safe whenever a stored call allows, and warnings() names the
  /// dims otherwise). Its ranges are its own: min 2 (sizes 0 and 1 run but are not promised),
  /// no max. The default.
  hint_auto,
  /// Every dynamic dim a named symbol with its observed range: `Dim('s0', min=1, max=8)`,
  /// `"s0"` with `dims: {"s0": {"min": 1, "max": 8, "derived": []}}`. Loads on torch 2.6 and
  /// later; the exported program's ranges are the observed ones; torch.export fails ("Constraints
  /// violated") rather than specialize a dim or accept a guard that some size in the range
  /// breaks (resnet18's height and width fail so), and needs every equality between dims
  /// spelled out (shared_symbols, on by default in this style).
  named,
  /// `Dim.DYNAMIC` / `"_DimHint.DYNAMIC"` for every dim not tied to another. torch 2.6's loader
  /// refuses it; later loaders read it (PyTorch's current source). In Python (`to_python`)
  /// torch 2.6 takes Dim.DYNAMIC and exports as with Dim.AUTO.
  hint_dynamic,
};

/// The largest `max` written for a named symbol: torch.export's Dim needs max > min, and
/// torch 2.6's loader needs an int (it refuses its own `None`). A symbol seen with one value
/// only (made dynamic by `dim0_dynamic`) gets [value, kUnboundedDim].
inline constexpr int64_t kUnboundedDim = INT64_MAX - 1;

/// How `infer_dynamic_shapes` decides and writes. Defaults: only dims seen with more than one
/// value are dynamic, each written `Dim.AUTO` (DimStyle::hint_auto).
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
  /// Give one symbol to dynamic dims whose values were equal in every call (values that
  /// value_if_missing stood in for do not count). Shared dims are written by name with their
  /// observed range. Default: on in the named style, where torch.export needs the equalities a
  /// model ties (`x + y`, an attention mask) spelled out or fails; off in the hint styles, where
  /// torch finds them itself and a coincidence (batch == heads in every call) would tie dims
  /// in the exported program for nothing.
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
  /// How dynamic dims are written (DimStyle). Default: DimStyle::hint_auto.
  DynamicShapesOptions& dim_style(DimStyle style) {
    dim_style_ = style;
    return *this;
  }

  const std::vector<std::string>& dim0_dynamic() const { return dim0_dynamic_; }
  bool dim0_dynamic_all() const { return dim0_dynamic_all_; }
  bool shared_symbols() const { return shared_symbols_.value_or(dim_style_ == DimStyle::named); }
  bool derived_dims() const { return derived_dims_; }
  DimStyle dim_style() const { return dim_style_; }

 private:
  std::vector<std::string> dim0_dynamic_;
  bool dim0_dynamic_all_ = false;
  std::optional<bool> shared_symbols_;  // unset: by style
  bool derived_dims_ = false;
  DimStyle dim_style_ = DimStyle::hint_auto;
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
  /// Tied to another dim: shares its symbol, or takes part in a derived relation. Tied dims
  /// are written by name in every DimStyle.
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

/// A symbol and its observed range.
struct SymbolRange {
  std::string name;
  int64_t min = 0;
  int64_t max = 0;
  std::vector<std::string> derived;  ///< expressions derived from it (`2*s0 + 1`)

  /// The range written for torch.export (its Dim needs max > min): the observed one, or
  /// [min, kUnboundedDim] for a symbol seen with one value only.
  std::pair<int64_t, int64_t> export_range() const { return {min, max > min ? max : kUnboundedDim}; }
};

/// What `infer_dynamic_shapes()` returns: per argument, which dims are dynamic.
///
/// Example (x: [batch, 16], y: [batch], batch from 2 to 8):
///   auto ds = observer.infer_dynamic_shapes();
///   ds.to_python();  // ({0: Dim.AUTO}, {0: Dim.AUTO})
///   ds.to_json();    // {"dynamic_shapes": [["_DimHint.AUTO", 16], ["_DimHint.AUTO"]], "dims": {}}
///   ds.with_style(optrace::DimStyle::named).to_python();  // (tied only with shared_symbols)
///                    // ({0: Dim('s0', min=2, max=8)}, {0: Dim('s1', min=2, max=8)})
class DynamicShapes {
 public:
  DynamicShapes() = default;
  DynamicShapes(bool keyed, std::vector<std::string> names, std::vector<ShapeNode> arguments,
                std::vector<SymbolRange> symbols, std::vector<std::string> warnings,
                DimStyle style = DimStyle::hint_auto)
      : keyed_(keyed),
        names_(std::move(names)),
        arguments_(std::move(arguments)),
        symbols_(std::move(symbols)),
        warnings_(std::move(warnings)),
        style_(style) {}

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
  /// (no stored call has them >= 2; torch.export fails or specializes them, by DimStyle), dims
  /// that were 0 in every call, dropped history.
  const std::vector<std::string>& warnings() const { return warnings_; }
  /// How dynamic dims are written (DynamicShapesOptions::dim_style).
  DimStyle style() const { return style_; }
  /// The same dims, written in another style (symbols stay as inferred: infer with
  /// `DynamicShapesOptions().dim_style(s)` to get the style's shared_symbols default).
  DynamicShapes with_style(DimStyle style) const {
    DynamicShapes out = *this;
    out.style_ = style;
    return out;
  }

  /// A Python expression to paste as `dynamic_shapes=` (with `from torch.export import Dim`):
  /// named dims `Dim('s0', min=2, max=7)` (derived: `Dim('s0', min=2, max=7)*2 + 1`), or by
  /// style `Dim.AUTO` / `Dim.DYNAMIC` for dims tied to no other; a static tensor `{}`, a
  /// non-tensor `None`.
  std::string to_python() const {
    std::string out;
    out += keyed_ ? "{" : "(";
    std::unordered_map<std::string_view, const SymbolRange*> symbols;  // each dim's symbol found once, not by a scan
    for (const SymbolRange& s : symbols_) symbols.emplace(s.name, &s);
    for (size_t k = 0; k < arguments_.size(); ++k) {
      if (k) out += ", ";
      if (keyed_) out += python_string(names_[k]) + ": ";
      python_into(out, arguments_[k], symbols);
    }
    if (!keyed_ && arguments_.size() == 1) out += ",";
    out += keyed_ ? "}" : ")";
    return out;
  }

  /// torch's DynamicShapesSpec as JSON (`torch._export.serde.dynamic_shapes._load_dynamic_shapes(
  /// json.loads(s), from_dict=True)` reads it, on torch 2.6 and later unless the style is
  /// hint_dynamic): per tensor a list with an int per static dim and a string per dynamic one
  /// (a symbol, a derived expression, or by style `_DimHint.AUTO` / `_DimHint.DYNAMIC`); `dims`
  /// maps each symbol written to its integer `min`, `max` (SymbolRange::export_range) and
  /// `derived` expressions.
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
    std::unordered_set<std::string_view> named;  // the symbols some dim is written by: one walk, not one per symbol
    for_each_dim([&](const DimSpec& d) {
      if (by_name(d)) named.insert(d.symbol);
    });
    for (const SymbolRange& s : symbols_) {
      if (named.count(s.name) == 0) continue;
      auto [lo, hi] = s.export_range();
      w.key(s.name).begin_object().key("min").value(lo).key("max").value(hi).key("derived").begin_array();
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
  /// Written by name: tied to another dim, or every dynamic dim in the named style.
  bool by_name(const DimSpec& d) const { return d.dynamic && (d.named || style_ == DimStyle::named); }
  const char* hint(bool python) const {
    if (style_ == DimStyle::hint_auto) return python ? "Dim.AUTO" : "_DimHint.AUTO";
    return python ? "Dim.DYNAMIC" : "_DimHint.DYNAMIC";
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
  void python_into(std::string& out, const ShapeNode& n,
                   const std::unordered_map<std::string_view, const SymbolRange*>& symbols) const {
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
          if (!by_name(d)) {
            out += hint(true);
            continue;
          }
          auto found = symbols.find(d.symbol);
          const SymbolRange* s = found == symbols.end() ? nullptr : found->second;
          out += "Dim(" + python_string(d.symbol);
          if (s) {
            out += ", min=" + std::to_string(s->min);
            if (s->max > s->min) out += ", max=" + std::to_string(s->max);  // else unbounded
          }
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
          python_into(out, n.items[k], symbols);
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
          python_into(out, n.items[k], symbols);
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
          else if (!by_name(d)) w.value(hint(false));
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
  DimStyle style_ = DimStyle::hint_auto;
};

/// Writes `ds.to_python()`: `std::cout << observer.infer_dynamic_shapes() << "\n";`.
inline std::ostream& operator<<(std::ostream& out, const DynamicShapes& ds) { return out << ds.to_python(); }

}  // namespace optrace
