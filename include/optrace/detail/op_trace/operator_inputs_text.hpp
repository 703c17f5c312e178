// optrace/detail/op_trace/operator_inputs_text.hpp: PyTorch's operator-inputs log, read into ops and written from them
#pragma once
// The format of `OperatorInputsMode.log_to_file` (pytorch benchmarks/dynamo/microbenchmarks/
// operator_inp_utils.py), which `OperatorInputsLoader` and BackendBench's `deserialize_args` read
// back by evaluating each line as Python:
//
//   Operator: aten.addmm.default
//   cnt: 24, ((T([768], f16), T([4096, 768], f16), T([768, 768], f16, stride=(1, 768))), {})
//
// The reader is a parser for the Python expressions those loaders accept (no eval): strict, every
// error names the source, line and column. The writer formats values as Python's repr does, so
// that what OpTracer records is written byte for byte as the Python logger writes it. Which ops
// and calls the logger keeps depends on their schemas: the writer asks `OpFacts` (given by
// operator_inputs.hpp from libtorch's dispatcher), so that this file needs no libtorch.

#include <optrace/detail/common/dtype_names.hpp>
#include <optrace/error.hpp>
#include <optrace/op_trace_types.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optrace::detail::op_trace::oplog {

// ---- vocabulary ----

// Python's str(type(x)) of the values a log holds, as the hf schema's input_dtypes has them.
inline constexpr std::string_view kIntType = "<class 'int'>", kFloatType = "<class 'float'>",
                                  kBoolType = "<class 'bool'>", kNoneType = "<class 'NoneType'>",
                                  kStrType = "<class 'str'>", kListType = "<class 'list'>",
                                  kTupleType = "<class 'tuple'>", kComplexType = "<class 'complex'>",
                                  kDtypeType = "<class 'torch.dtype'>", kLayoutType = "<class 'torch.layout'>",
                                  kMemoryFormatType = "<class 'torch.memory_format'>",
                                  kDeviceType = "<class 'torch.device'>";
// The type of `torch.<attr>` where torch has no such attribute: a newer torch's dtype when it is
// a tensor's (T's dtype, kept as read and named unknown where shown), an error anywhere else.
inline constexpr std::string_view kUnknownTorchAttr = "<unknown torch attribute>";

// operator_inp_utils.dtype_abbrs, in its order.
struct DtypeAbbr {
  std::string_view abbr, name;
};
inline constexpr DtypeAbbr kDtypeAbbrs[] = {
    {"bf16", "torch.bfloat16"}, {"f64", "torch.float64"},  {"f32", "torch.float32"},     {"f16", "torch.float16"},
    {"c32", "torch.complex32"}, {"c64", "torch.complex64"}, {"c128", "torch.complex128"}, {"i8", "torch.int8"},
    {"i16", "torch.int16"},     {"i32", "torch.int32"},    {"i64", "torch.int64"},       {"b8", "torch.bool"},
    {"u8", "torch.uint8"}};

// "f16" -> "torch.float16"; empty if not an abbreviation.
inline std::string_view dtype_of_abbr(std::string_view abbr) {
  for (const DtypeAbbr& d : kDtypeAbbrs)
    if (d.abbr == abbr) return d.name;
  return {};
}
// "torch.float16" -> "f16"; empty if the dtype has none.
inline std::string_view abbr_of_dtype(std::string_view name) {
  for (const DtypeAbbr& d : kDtypeAbbrs)
    if (d.name == name) return d.abbr;
  return {};
}

// What `torch.<attr>` names in a log: a dtype (aliases resolved to torch's canonical name), a
// layout or a memory format.
struct TorchAttr {
  std::string_view type;  // kDtypeType, kLayoutType or kMemoryFormatType
  std::string name;       // "torch.float16"
};
inline std::optional<TorchAttr> torch_attr(std::string_view attr) {
  static const std::string_view layouts[] = {"strided", "sparse_coo", "sparse_csr", "sparse_csc",
                                             "sparse_bsr", "sparse_bsc", "_mkldnn", "jagged"};
  static const std::string_view formats[] = {"contiguous_format", "preserve_format", "channels_last",
                                             "channels_last_3d"};
  if (std::string_view d = canonical_dtype(attr); !d.empty()) return TorchAttr{kDtypeType, "torch." + std::string(d)};
  for (std::string_view l : layouts)
    if (attr == l) return TorchAttr{kLayoutType, "torch." + std::string(l)};
  for (std::string_view f : formats)
    if (attr == f) return TorchAttr{kMemoryFormatType, "torch." + std::string(f)};
  return std::nullopt;
}

// "aten.addmm.default" -> "addmm.default", "quantized.linear.default" -> "quantized::linear.default";
// nullopt when not namespace.name.overload. Both of PyTorch's loaders read `aten.sum.SymInt`
// (what old logs name it) as `aten.sum.dim_IntList`.
inline std::optional<std::string> op_of_logged(std::string_view logged) {
  if (logged == "aten.sum.SymInt") return std::string("sum.dim_IntList");
  const size_t first = logged.find('.'), last = logged.rfind('.');
  if (first == std::string_view::npos || first == last || first == 0 || last + 1 == logged.size() || last == first + 1)
    return std::nullopt;
  for (char c : logged)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return std::nullopt;
  if (logged.substr(0, first) == "aten") return std::string(logged.substr(first + 1));
  return std::string(logged.substr(0, first)) + "::" + std::string(logged.substr(first + 1));
}
// The way back: "addmm.default" -> "aten.addmm.default"; "ns::name.overload" -> "ns.name.overload".
inline std::string logged_of_op(std::string_view op) {
  const size_t colons = op.find("::");
  if (colons == std::string_view::npos) return "aten." + std::string(op);
  return std::string(op.substr(0, colons)) + "." + std::string(op.substr(colons + 2));
}

// ---- reading ----

// A value of the log's expression language, as parsed.
struct Expr {
  enum class Kind { tensor, sparse, none, boolean, integer, floating, string, torch, list, tuple };
  Kind kind = Kind::none;
  size_t column = 0;  // 0-based, in the line
  bool b = false;
  int64_t i = 0;
  double d = 0;
  std::string s;                             // string; torch: the canonical "torch.float16"; tensor: dtype name
  std::string_view torch_type;               // torch: kDtypeType, kLayoutType, kMemoryFormatType
  std::vector<int64_t> shape;                // tensor
  std::optional<std::vector<int64_t>> stride;  // tensor
  std::vector<Expr> items;                   // list, tuple
};

// Calls left out of a read, by reason (sparse tensors: the hf model has no place for them).
struct LeftOut {
  std::string reason;
  int64_t lines = 0, calls = 0;
  std::vector<std::string> examples;  // "log.txt:12: aten._sparse_coo_tensor_with_dims_and_tensors.default"
};

struct ReadResult {
  std::vector<OpEntry> ops;  // in file order; equal lines (and repeated Operator: blocks) summed
  int64_t lines = 0;         // cnt lines read
  std::vector<LeftOut> left_out;
};

// A line left out (kept in the report, not an error): the parser's signal, thrown by
// `left_out_line` only and caught by the reader of the line.
struct Unsupported {
  std::string reason;
};
[[noreturn]] inline void left_out_line(const char* reason) { throw Unsupported{reason}; }

class LineParser {
 public:
  LineParser(std::string_view line, const std::string& source, int64_t line_no)
      : s_(line), source_(source), line_no_(line_no) {}

  [[noreturn]] void fail(size_t column, const std::string& expected) const {
    std::string got;
    if (column >= s_.size()) {
      got = "the end of the line";
    } else {
      std::string_view rest = s_.substr(column, 24);
      got = "'" + std::string(rest) + (column + 24 < s_.size() ? "...'" : "'");
    }
    optrace::detail::throw_error<TextError>(source_, line_no_, static_cast<int64_t>(column) + 1, "expected " + expected + ", got " + got);
  }
  // A value read as it is written but that cannot be true ("negative size -3").
  [[noreturn]] void fail_plain(size_t column, const std::string& message) const {
    optrace::detail::throw_error<TextError>(source_, line_no_, static_cast<int64_t>(column) + 1, message);
  }

  void skip_space() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t')) ++p_;
  }
  bool accept(char c) {
    skip_space();
    if (p_ < s_.size() && s_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  void expect(char c, const char* what) {
    if (!accept(c)) fail(p_, what);
  }
  size_t pos() const { return p_; }
  void seek(size_t p) { p_ = p; }
  char peek() const { return p_ < s_.size() ? s_[p_] : '\0'; }
  // A quoted string at the position (which must hold a quote).
  std::string quoted() { return string_literal(); }
  bool at_end() {
    skip_space();
    return p_ >= s_.size();
  }

  Expr value(int depth = 0) {
    skip_space();
    if (depth > 64) fail(p_, "values nested at most 64 deep");
    Expr e;
    e.column = p_;
    if (p_ >= s_.size()) fail(p_, "a value");
    const char c = s_[p_];
    if (c == '(') return sequence(e, ')', Expr::Kind::tuple, depth);
    if (c == '[') return sequence(e, ']', Expr::Kind::list, depth);
    if (c == '{') fail(p_, "a value (a dict holds the keyword arguments only)");
    if (c == '\'' || c == '"') {
      e.kind = Expr::Kind::string;
      e.s = string_literal();
      // deserialize_args unquotes dtype abbreviations ('f16' is f16) before evaluating.
      if (std::string_view d = dtype_of_abbr(e.s); !d.empty()) {
        e.kind = Expr::Kind::torch;
        e.torch_type = kDtypeType;
        e.s = std::string(d);
      }
      return e;
    }
    if (c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9')) return number(e);
    if (is_name_start(c)) return named(e, depth);
    fail(p_, "a value (a number, string, list, tuple, None, True, False, T(...) or a dtype)");
  }

 private:
  static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
  static bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }

  std::string_view name() {
    const size_t start = p_;
    while (p_ < s_.size() && is_name_char(s_[p_])) ++p_;
    return s_.substr(start, p_ - start);
  }

  Expr& sequence(Expr& e, char close, Expr::Kind kind, int depth) {
    ++p_;
    e.kind = kind;
    e.items.reserve(4);
    bool comma = false;
    while (!accept(close)) {
      if (!e.items.empty() && !comma) fail(p_, std::string("',' or '") + close + "'");
      e.items.push_back(value(depth + 1));
      comma = accept(',');
    }
    // (x) is x in parentheses, not a tuple: (x,) is.
    if (kind == Expr::Kind::tuple && e.items.size() == 1 && !comma) {
      Expr inner = std::move(e.items[0]);
      e = std::move(inner);
    }
    return e;
  }

  std::string string_literal() {
    const char quote = s_[p_];
    const size_t start = p_++;
    std::string out;
    while (true) {
      if (p_ >= s_.size()) fail(start, std::string("a string closed by ") + quote);
      const char c = s_[p_++];
      if (c == quote) return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (p_ >= s_.size()) fail(p_, "an escaped character");
      const char x = s_[p_++];
      switch (x) {
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'x': {
          int v = 0;
          for (int k = 0; k < 2; ++k) {
            if (p_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[p_]))) fail(p_, "two hex digits after \\x");
            const char h = s_[p_++];
            v = v * 16 + (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
          }
          out += static_cast<char>(v);
          break;
        }
        default: fail(p_ - 2, "an escape Python's repr writes (\\\\ \\' \\\" \\n \\t \\r \\xhh)");
      }
    }
  }

  Expr& number(Expr& e) {
    const size_t start = p_;
    bool negative = false;
    if (s_[p_] == '-' || s_[p_] == '+') {
      negative = s_[p_] == '-';
      ++p_;
      skip_space();
      if (p_ < s_.size() && is_name_start(s_[p_])) {
        const size_t at = p_;
        if (!special_float(name(), e)) fail(at, "a number after the sign");
        if (negative) e.d = -e.d;
        return e;
      }
    }
    const size_t digits = p_;
    bool is_float = false;
    while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
    if (p_ < s_.size() && s_[p_] == '.') {
      is_float = true;
      ++p_;
      while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
    }
    if (p_ == digits || (p_ == digits + 1 && s_[digits] == '.')) fail(start, "a number");
    if (p_ < s_.size() && (s_[p_] == 'e' || s_[p_] == 'E')) {
      is_float = true;
      ++p_;
      if (p_ < s_.size() && (s_[p_] == '+' || s_[p_] == '-')) ++p_;
      const size_t exp = p_;
      while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
      if (p_ == exp) fail(exp, "the exponent's digits");
    }
    if (p_ < s_.size() && (is_name_char(s_[p_]) || s_[p_] == '.')) fail(p_, "the end of the number");
    std::string_view text = s_.substr(digits, p_ - digits);
    if (!is_float) {
      if (text.size() > 1 && text[0] == '0') fail(digits, "a number without leading zeros (Python reads none)");
      uint64_t u = 0;
      auto r = std::from_chars(text.data(), text.data() + text.size(), u);
      if (r.ec != std::errc() || u > static_cast<uint64_t>(INT64_MAX) + (negative ? 1 : 0))
        fail(start, "an integer that fits 64 bits");
      e.kind = Expr::Kind::integer;
      e.i = negative ? static_cast<int64_t>(0 - u) : static_cast<int64_t>(u);
      return e;
    }
    std::string copy(text);  // strtod needs a terminator; from_chars for doubles needs GCC 11
    e.kind = Expr::Kind::floating;
    e.d = std::strtod(copy.c_str(), nullptr);
    if (negative) e.d = -e.d;
    return e;
  }

  // `inf` and `nan` (the loaders' globals have `inf`; the logger writes both) into `e`.
  static bool special_float(std::string_view n, Expr& e) {
    if (n != "inf" && n != "nan") return false;
    e.kind = Expr::Kind::floating;
    e.d = n == "inf" ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    return true;
  }

  Expr& named(Expr& e, int depth) {
    const size_t at = p_;
    std::string_view n = name();
    if (n == "None") return e.kind = Expr::Kind::none, e;
    if (n == "True" || n == "False") {
      e.kind = Expr::Kind::boolean;
      e.b = n == "True";
      return e;
    }
    if (special_float(n, e)) return e;
    if (std::string_view d = dtype_of_abbr(n); !d.empty()) {
      e.kind = Expr::Kind::torch;
      e.torch_type = kDtypeType;
      e.s = std::string(d);
      return e;
    }
    if (n == "torch" || n == "th") {
      if (p_ >= s_.size() || s_[p_] != '.') fail(p_, "'.' after " + std::string(n));
      ++p_;
      const size_t attr_at = p_;
      std::string_view attr = name();
      auto t = torch_attr(attr);
      if (!t) {  // judged by where it stands (kUnknownTorchAttr)
        if (attr.empty()) fail(attr_at, "a dtype, layout or memory format after torch.");
        t = TorchAttr{kUnknownTorchAttr, "torch." + std::string(attr)};
        e.column = attr_at;
      }
      e.kind = Expr::Kind::torch;
      e.torch_type = t->type;
      e.s = std::move(t->name);
      return e;
    }
    if (n == "T" || n == "ST") return tensor(e, n == "ST", depth);
    fail(at, "a value (None, True, False, inf, nan, T(...), ST(...), a dtype such as f16, or torch.<attr>)");
  }

  // T(size, dtype, stride=None) as deserialize_tensor takes it (stride also positional, as
  // BackendBench writes it); ST(size, dtype, layout, is_coalesced, nnz=None).
  Expr& tensor(Expr& e, bool sparse, int depth) {
    expect('(', sparse ? "'(' after ST" : "'(' after T");
    // The common T([sizes], dtype[, stride=(...)]): sizes and strides read straight into
    // integers, not through a list of values (the reader's hot path).
    if (!sparse) {
      const size_t save = p_;
      if (fast_tensor(e)) return e;
      p_ = save;  // read it again, in full, for the error (or for what the fast path does not take)
      e.shape.clear();
      e.stride.reset();
    }
    std::vector<Expr> positional;
    std::vector<std::pair<std::string, Expr>> named_args;
    bool comma = true;
    while (!accept(')')) {
      if (!comma) fail(p_, "',' or ')'");
      skip_space();
      const size_t save = p_;
      if (p_ < s_.size() && is_name_start(s_[p_])) {
        std::string_view n = name();
        skip_space();
        if (p_ < s_.size() && s_[p_] == '=' ) {
          ++p_;
          named_args.emplace_back(std::string(n), value(depth + 1));
          comma = accept(',');
          continue;
        }
        p_ = save;
      }
      if (!named_args.empty()) fail(p_, "keyword arguments after the positional ones");
      positional.push_back(value(depth + 1));
      comma = accept(',');
    }
    if (sparse) {
      e.kind = Expr::Kind::sparse;
      return e;
    }
    const Expr* size = positional.size() > 0 ? &positional[0] : nullptr;
    const Expr* dtype = positional.size() > 1 ? &positional[1] : nullptr;
    const Expr* stride = positional.size() > 2 ? &positional[2] : nullptr;
    if (positional.size() > 3) fail(positional[3].column, "at most T(size, dtype, stride)");
    for (const auto& [key, v] : named_args) {
      const Expr** slot = key == "size" ? &size : key == "dtype" ? &dtype : key == "stride" ? &stride : nullptr;
      if (slot == nullptr) fail(v.column, "size=, dtype= or stride= (got '" + key + "=')");
      if (*slot != nullptr) fail(v.column, "'" + key + "' given once");
      *slot = &v;
    }
    if (size == nullptr) fail(p_, "T's size");
    if (dtype == nullptr) fail(p_, "T's dtype");
    e.kind = Expr::Kind::tensor;
    e.shape = ints(*size, "a tensor size: a list of integers", "size");
    if (dtype->kind != Expr::Kind::torch || (dtype->torch_type != kDtypeType && dtype->torch_type != kUnknownTorchAttr))
      fail(dtype->column, "a dtype (f16, torch.float16, ...)");
    e.s = dtype->s;  // an unknown torch.<name> too: a newer torch's dtype is possible
    if (stride != nullptr && stride->kind != Expr::Kind::none) {
      e.stride = ints(*stride, "strides: a tuple or list of integers", "stride");
      if (e.stride->size() != e.shape.size())
        fail(stride->column, std::to_string(e.shape.size()) + " strides (one per dimension)");
    }
    return e;
  }

  // [1, 2] or (1, 2) of plain non-negative integers into `out`; false (position unspecified) for
  // anything else, which the general path then reads and judges.
  bool fast_ints(std::vector<int64_t>& out) {
    skip_space();
    if (p_ >= s_.size() || (s_[p_] != '[' && s_[p_] != '(')) return false;
    const char close = s_[p_] == '[' ? ']' : ')';
    ++p_;
    skip_space();
    if (p_ < s_.size() && s_[p_] == close) {
      ++p_;
      return close == ']';  // () is a tuple only with care: the general path
    }
    while (true) {
      skip_space();
      const size_t start = p_;
      uint64_t v = 0;
      while (p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9') {
        if (v > (static_cast<uint64_t>(INT64_MAX) - 9) / 10) return false;
        v = v * 10 + static_cast<uint64_t>(s_[p_] - '0');
        ++p_;
      }
      if (p_ == start || (p_ - start > 1 && s_[start] == '0')) return false;
      if (p_ < s_.size() && (is_name_char(s_[p_]) || s_[p_] == '.')) return false;
      out.push_back(static_cast<int64_t>(v));
      skip_space();
      if (p_ < s_.size() && s_[p_] == ',') {
        ++p_;
        skip_space();
        if (p_ < s_.size() && s_[p_] == close) {
          ++p_;
          return true;
        }
        continue;
      }
      if (p_ < s_.size() && s_[p_] == close) {
        ++p_;
        return close == ']' || out.size() > 1;  // (5) is 5, not a tuple
      }
      return false;
    }
  }

  bool fast_tensor(Expr& e) {
    if (!fast_ints(e.shape)) return false;
    if (!accept(',')) return false;
    skip_space();
    const size_t at = p_;
    std::string_view n = name();
    std::string_view d = dtype_of_abbr(n);
    if (d.empty() || (p_ < s_.size() && s_[p_] == '.')) {
      p_ = at;
      return false;
    }
    if (accept(',')) {
      skip_space();
      if (s_.compare(p_, 7, "stride=") != 0) return false;
      p_ += 7;
      std::vector<int64_t> stride;
      if (!fast_ints(stride) || stride.size() != e.shape.size()) return false;
      e.stride = std::move(stride);
      accept(',');
    }
    if (!accept(')')) return false;
    e.kind = Expr::Kind::tensor;
    e.s = std::string(d);
    return true;
  }

  // A tensor's sizes or strides (`dim`: "size", "stride"): integers, none negative.
  std::vector<int64_t> ints(const Expr& v, const char* what, const char* dim) const {
    if (v.kind != Expr::Kind::list && v.kind != Expr::Kind::tuple) fail(v.column, what);
    std::vector<int64_t> out;
    out.reserve(v.items.size());
    for (const Expr& x : v.items) {
      if (x.kind != Expr::Kind::integer) fail(x.column, what);
      if (x.i < 0) fail_plain(x.column, std::string("negative ") + dim + " " + std::to_string(x.i));
      out.push_back(x.i);
    }
    return out;
  }

  std::string_view s_;
  const std::string& source_;
  int64_t line_no_;
  size_t p_ = 0;
};

// Expr -> the hf model's argument (shape, dtype string, value, strides).
class InputBuilder {
 public:
  InputBuilder(OpInput& in, const LineParser& parser) : in_(in), parser_(parser) {}

  struct Arg {
    OptionalShape shape;
    std::string dtype;
    OpValue value;
    OptionalShape strides;
  };

  Arg arg(Expr& e) {
    Arg a;
    if (e.kind == Expr::Kind::sparse) left_out_line("sparse tensor (ST): the op-trace model has no sparse tensors");
    if (e.kind == Expr::Kind::tensor) {
      a.shape = std::move(e.shape);
      a.dtype = std::move(e.s);
      a.strides = std::move(e.stride);
      return a;
    }
    if ((e.kind == Expr::Kind::list || e.kind == Expr::Kind::tuple) && holds_tensor(e)) {
      TensorListInfo list;
      bool any_strides = false;
      for (Expr& x : e.items) {
        if (x.kind == Expr::Kind::sparse) left_out_line("sparse tensor (ST): the op-trace model has no sparse tensors");
        if (x.kind == Expr::Kind::none) {
          list.shapes.emplace_back();
          list.dtypes.emplace_back(kNoneType);
          list.strides.emplace_back();
          continue;
        }
        if (x.kind != Expr::Kind::tensor) parser_.fail(x.column, "a tensor or None (a list holding tensors holds nothing else)");
        list.shapes.push_back(std::move(x.shape));
        list.dtypes.push_back(std::move(x.s));
        list.strides.push_back(std::move(x.stride));
        any_strides = any_strides || x.stride.has_value();
      }
      if (!any_strides) list.strides.clear();
      a.dtype = e.kind == Expr::Kind::list ? kListType : kTupleType;
      a.value = in_.add_tensor_list(std::move(list));
      return a;
    }
    a.value = plain(e, a.dtype, 0);
    return a;
  }

 private:
  static bool holds_tensor(const Expr& e) {
    for (const Expr& x : e.items)
      if (x.kind == Expr::Kind::tensor || x.kind == Expr::Kind::sparse) return true;
    return false;
  }

  OpValue plain(const Expr& e, std::string& type, int depth) {
    switch (e.kind) {
      case Expr::Kind::none: type = kNoneType; return OpValue::none();
      case Expr::Kind::boolean: type = kBoolType; return OpValue::boolean(e.b);
      case Expr::Kind::integer: type = kIntType; return OpValue::integer(e.i);
      case Expr::Kind::floating: type = kFloatType; return OpValue::floating(e.d);
      case Expr::Kind::string: type = kStrType; return OpValue::string(e.s);
      case Expr::Kind::torch:
        if (e.torch_type == kUnknownTorchAttr) parser_.fail(e.column, "a dtype, layout or memory format after torch.");
        type = std::string(e.torch_type);
        return OpValue::string(e.s);
      case Expr::Kind::list:
      case Expr::Kind::tuple: {
        type = e.kind == Expr::Kind::list ? kListType : kTupleType;
        std::vector<OpValue> items;
        items.reserve(e.items.size());
        std::string ignored;
        for (const Expr& x : e.items) {
          if ((x.kind == Expr::Kind::list || x.kind == Expr::Kind::tuple) && holds_tensor(x))
            parser_.fail(x.column, "no tensors inside a nested list");
          items.push_back(plain(x, ignored, depth + 1));
        }
        return OpValue::list(std::move(items));
      }
      case Expr::Kind::tensor:
      case Expr::Kind::sparse: parser_.fail(e.column, "no tensor inside a nested list");
    }
    parser_.fail(e.column, "a value");
  }

  OpInput& in_;
  const LineParser& parser_;
};

// Positions of an op's unique inputs by hash: open addressing in one array (a node-based map
// spent most of the reader's time allocating, freeing and chasing its nodes).
class InputIndex {
 public:
  // Calls `same(position)` for each input with hash `h` until it returns true; false if none did.
  template <class Same>
  bool find(size_t h, Same&& same) const {
    if (slots_.empty()) return false;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.position == kEmpty) return false;
      if (s.hash == h && same(s.position)) return true;
    }
  }
  void insert(size_t h, size_t position) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    place(h, position);
    ++size_;
  }

 private:
  static constexpr size_t kEmpty = SIZE_MAX;
  struct Slot {
    size_t hash = 0, position = kEmpty;
  };
  void place(size_t h, size_t position) {
    size_t i = h & mask_;
    while (slots_[i].position != kEmpty) i = (i + 1) & mask_;
    slots_[i] = Slot{h, position};
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old)
      if (s.position != kEmpty) place(s.hash, s.position);
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
};

// Reads a log, whole (run) or in pieces of whole lines as they come (feed, then finish: what
// reading a file in bounded memory does). `source` names it in errors ("log.txt").
class Reader {
 public:
  Reader(std::string_view text, std::string source) : text_(text), source_(std::move(source)) {}
  explicit Reader(std::string source) : source_(std::move(source)) {}

  ReadResult run() {
    feed(text_);
    return finish();
  }

  // Reads `text`, whole lines of the log after those fed before (the last one may lack its '\n'
  // only at the end of the log).
  void feed(std::string_view text) {
    size_t at = 0;
    if (line_no_ == 0 && text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") at = 3;  // a UTF-8 byte-order mark
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(at, end - at);
      at = end + 1;
      ++line_no_;
      read_line(line);
    }
  }

  ReadResult finish() {
    // An Operator: line with no (kept) input line: nothing was recorded for it.
    out_.ops.erase(std::remove_if(out_.ops.begin(), out_.ops.end(), [](const OpEntry& e) { return e.unique_inputs.empty(); }),
                   out_.ops.end());
    return std::move(out_);
  }

 private:
  void read_line(std::string_view line) {
    const int64_t line_no = line_no_;
    ReadResult& out = out_;
    std::optional<size_t>& op = op_;  // the op of the last Operator: line
    std::string& op_logged = op_logged_;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) return;  // blank lines (concatenated logs)
    LineParser parser(line, source_, line_no);
    if (line.rfind("Operator: ", 0) == 0) {
      op_logged = std::string(line.substr(10));
      while (!op_logged.empty() && (op_logged.back() == ' ' || op_logged.back() == '\t')) op_logged.pop_back();
      auto name = op_of_logged(op_logged);
      if (!name) parser.fail(10, "an operator written namespace.name.overload (aten.addmm.default)");
      auto it = index_.find(*name);
      if (it == index_.end()) {
        it = index_.emplace(*name, out.ops.size()).first;
        out.ops.push_back(OpEntry{*name, {}, 0});
        seen_.emplace_back();
      }
      op = it->second;
      return;
    }
    if (line.rfind("cnt: ", 0) != 0) parser.fail(0, "'Operator: ' or 'cnt: '");
    if (!op) parser.fail(0, "an 'Operator: ' line before the first 'cnt: ' line");
    // cnt: N, ((args), {kwargs})
    size_t p = 5;
    const size_t digits = p;
    while (p < line.size() && std::isdigit(static_cast<unsigned char>(line[p]))) ++p;
    int64_t count = 0;
    auto r = std::from_chars(line.data() + digits, line.data() + p, count);
    if (p == digits || r.ec != std::errc()) parser.fail(digits, "the call count: an integer that fits 64 bits");
    if (count < 1) parser.fail(digits, "a count of at least 1 (BackendBench's synthetic cnt: 0 lines are not calls)");
    if (p + 2 > line.size() || line[p] != ',' || line[p + 1] != ' ') parser.fail(p, "', ' after the count");
    ++out.lines;
    OpInput in;
    in.count = count;
    try {
      parse_call(line, p + 2, line_no, in);
    } catch (const Unsupported& u) {
      note_left_out(out, u.reason, line_no, op_logged, count);
      return;
    }
    OpEntry& entry = out.ops[*op];
    if (__builtin_add_overflow(calls_, count, &calls_)) parser.fail(digits, "counts that add up to at most 2^63-1");
    const size_t h = in.hash();
    const bool merged = seen_[*op].find(h, [&](size_t position) {
      OpInput& existing = entry.unique_inputs[position];
      if (!existing.same_input(in)) return false;
      existing.count += count;
      return true;
    });
    if (!merged) {
      seen_[*op].insert(h, entry.unique_inputs.size());
      entry.unique_inputs.push_back(std::move(in));
    }
  }

  void parse_call(std::string_view line, size_t from, int64_t line_no, OpInput& in) {
    // deserialize_args strips quotes around the whole expression (f-strings put them there).
    std::string_view rest = line.substr(from);
    while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
    if (rest.size() > 2 && (rest.front() == '\'' || rest.front() == '"') && rest.back() == rest.front() && rest[1] == '(') {
      line = line.substr(0, from + rest.size() - 1);
      ++from;
    }
    LineParser parser(line, source_, line_no);
    parser.seek(from);
    // ((args), {kwargs}), each argument converted as soon as it is read (no tree of the line).
    const size_t start = parser.pos();
    if (!parser.accept('(')) parser.fail(start, "(args, kwargs): a tuple of the positional arguments and a dict of the keyword ones");
    parser.skip_space();
    const size_t args_at = parser.pos();
    const char open = parser.peek();
    if (open != '(' && open != '[') parser.fail(args_at, "the positional arguments: a tuple, such as (T([2], f32),)");
    parser.seek(args_at + 1);
    const char close = open == '(' ? ')' : ']';
    InputBuilder build(in, parser);
    in.input_shapes.reserve(8);
    in.input_dtypes.reserve(8);
    in.non_tensor_inputs.reserve(8);
    in.input_strides.reserve(8);
    bool any_strides = false, comma = false;
    size_t first_column = 0;
    while (!parser.accept(close)) {
      if (!in.input_shapes.empty() && !comma) parser.fail(parser.pos(), std::string("',' or '") + close + "'");
      Expr a = parser.value(1);
      if (in.input_shapes.empty()) first_column = a.column;
      InputBuilder::Arg x = build.arg(a);
      any_strides = any_strides || x.strides.has_value();
      in.input_shapes.push_back(std::move(x.shape));
      in.input_dtypes.push_back(std::move(x.dtype));
      in.non_tensor_inputs.push_back(std::move(x.value));
      in.input_strides.push_back(std::move(x.strides));
      comma = parser.accept(',');
    }
    // (x) is x in parentheses, not a tuple of one.
    if (open == '(' && in.input_shapes.size() == 1 && !comma)
      parser.fail(first_column, "the positional arguments: a tuple, such as (T([2], f32),)");
    if (!any_strides) in.input_strides.clear();
    parser.expect(',', "',' and the keyword arguments after the positional ones");
    parser.skip_space();
    if (parser.peek() != '{') parser.fail(parser.pos(), "the keyword arguments: a dict, such as {} or {'dtype': f16}");
    parser.seek(parser.pos() + 1);
    comma = false;
    while (!parser.accept('}')) {
      if (!in.kwargs.empty() && !comma) parser.fail(parser.pos(), "',' or '}'");
      parser.skip_space();
      const size_t at = parser.pos();
      if (parser.peek() != '\'' && parser.peek() != '"') parser.fail(at, "a quoted keyword name");
      std::string key = parser.quoted();
      for (const OpKwarg& k : in.kwargs)
        if (k.name == key) parser.fail(at, "keyword names that differ (\"" + key + "\" twice)");
      parser.expect(':', "':' after the keyword name");
      Expr v = parser.value(1);
      InputBuilder::Arg x = build.arg(v);
      in.kwargs.push_back(OpKwarg{std::move(key), std::move(x.shape), std::move(x.dtype), std::move(x.value), std::move(x.strides)});
      comma = parser.accept(',');
    }
    parser.accept(',');
    parser.expect(')', "')' closing (args, kwargs)");
    if (!parser.at_end()) parser.fail(parser.pos(), "the end of the line after (args, kwargs)");
  }

  void note_left_out(ReadResult& out, const std::string& reason, int64_t line_no, const std::string& op, int64_t count) {
    LeftOut* slot = nullptr;
    for (LeftOut& l : out.left_out)
      if (l.reason == reason) slot = &l;
    if (slot == nullptr) slot = &out.left_out.emplace_back(LeftOut{reason, 0, 0, {}});
    ++slot->lines;
    slot->calls += count;
    if (slot->examples.size() < 3) slot->examples.push_back(source_ + ":" + std::to_string(line_no) + ": " + op);
  }

  std::string_view text_;
  std::string source_;
  int64_t calls_ = 0;
  // What the lines read so far make, and where they are.
  ReadResult out_;
  std::unordered_map<std::string, size_t> index_;  // op -> position in out_.ops
  std::vector<InputIndex> seen_;  // per op: its inputs by hash
  std::optional<size_t> op_;  // the op of the last Operator: line
  std::string op_logged_;
  int64_t line_no_ = 0;
};

// ---- writing ----

// Python's repr(float): the shortest digits that read back, in fixed notation for exponents
// -4..15 and scientific (at least two exponent digits) beyond: 0.0001, 1e-05, 1e+16, 100.0.
inline void append_python_float(std::string& out, double d) {
  if (std::isnan(d)) { out += "nan"; return; }
  if (std::isinf(d)) { out += d > 0 ? "inf" : "-inf"; return; }
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(r.ptr - buf));  // "-1.2345e+02"
  const size_t e = sci.find('e');
  std::string_view mantissa = sci.substr(0, e);
  const int exponent = std::atoi(std::string(sci.substr(e + 1)).c_str());
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.remove_prefix(1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  if (negative) out += '-';
  const int decpt = exponent + 1;  // digits d1d2... mean 0.d1d2... * 10^decpt
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    out += 'e';
    out += exponent < 0 ? '-' : '+';
    const int a = exponent < 0 ? -exponent : exponent;
    if (a < 10) out += '0';
    out += std::to_string(a);
    return;
  }
  if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-decpt), '0');
    out += digits;
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out += digits;
    out.append(static_cast<size_t>(decpt) - digits.size(), '0');
    out += ".0";
  } else {
    out.append(digits, 0, static_cast<size_t>(decpt));
    out += '.';
    out.append(digits, static_cast<size_t>(decpt), std::string::npos);
  }
}

// Python's repr(str) for the ASCII and UTF-8 text an argument holds: single quotes unless the
// string has one and no double quote.
inline void append_python_string(std::string& out, std::string_view s) {
  const bool dq = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos;
  const char quote = dq ? '"' : '\'';
  static const char* hex = "0123456789abcdef";
  out += quote;
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
}

// What the writer needs to know of an op, from its schema (operator_inputs.hpp asks libtorch).
struct OpFacts {
  bool non_compute = false;     // OperatorInputsMode's non_compute_operator: skipped by default
  bool returns_tensor = true;   // a tensor among its returns (calls returning none are not logged)
  int storage_arg = -1;         // the first Storage argument's index (calls passing one are not logged)
};
using OpFactsFn = std::function<OpFacts(std::string_view op)>;

// What writing a trace as a log left out or could not carry.
struct WriteReport {
  int64_t ops = 0, lines = 0, calls = 0;              // written
  std::vector<std::pair<std::string, int64_t>> non_compute;  // ops skipped as non-compute, with their calls
  int64_t no_tensor_input = 0;   // calls without a tensor among their inputs (the logger keeps none)
  int64_t no_tensor_output = 0;  // calls of ops returning no tensor
  int64_t memory_format = 0;     // calls with a memory format or storage argument (the logger skips them)
  int64_t unknown_values = 0;    // calls with an argument whose value the trace lacks (Kineto imports)
  int64_t dropped = 0;           // calls counted but not kept as unique inputs (no line can hold them)
  int64_t devices = 0;           // unique inputs whose devices were recorded: a log names none
  int64_t value_ranges = 0;      // unique inputs with integer value ranges: a log holds none
  int64_t merged = 0;            // unique inputs that became the same line as an earlier one
};

class Writer {
 public:
  Writer(const OpFactsFn& facts, bool skip_non_compute) : facts_(facts), skip_non_compute_(skip_non_compute) {}

  std::string write(const std::vector<OpEntry>& ops, WriteReport& report) {
    std::vector<std::pair<std::string, const OpEntry*>> sorted;
    sorted.reserve(ops.size());
    for (const OpEntry& e : ops) sorted.emplace_back(logged_of_op(e.name), &e);
    std::sort(sorted.begin(), sorted.end());  // Python's sorted() of str(func_overload)
    std::string out;
    for (const auto& [logged, entry] : sorted) {
      const OpFacts facts = facts_ ? facts_(entry->name) : OpFacts{};
      report.dropped += entry->dropped_calls;
      if (skip_non_compute_ && facts.non_compute) {
        report.non_compute.emplace_back(entry->name, entry->total_calls() - entry->dropped_calls);
        continue;
      }
      // Lines in first-seen order of their text; equal texts summed (Python's Counter).
      std::vector<std::pair<std::string, int64_t>> lines;
      std::unordered_map<std::string, size_t> line_index;
      for (const OpInput& in : entry->unique_inputs) {
        if (!in.input_devices.empty()) ++report.devices;
        if (!in.input_value_ranges.empty()) ++report.value_ranges;
        if (!facts.returns_tensor) { report.no_tensor_output += in.count; continue; }
        if (!has_tensor(in)) { report.no_tensor_input += in.count; continue; }
        if (skipped_argument(in, facts)) { report.memory_format += in.count; continue; }
        std::string text;
        if (!call_text(in, text)) { report.unknown_values += in.count; continue; }
        auto [it, fresh] = line_index.emplace(std::move(text), lines.size());
        if (fresh) lines.emplace_back(it->first, in.count);
        else {
          lines[it->second].second += in.count;
          ++report.merged;
        }
      }
      if (lines.empty()) continue;
      out += "Operator: ";
      out += logged;
      out += '\n';
      for (const auto& [text, count] : lines) {
        out += "cnt: ";
        out += std::to_string(count);
        out += ", ";
        out += text;
        out += '\n';
        ++report.lines;
        report.calls += count;
      }
      ++report.ops;
    }
    return out;
  }

 private:
  static bool has_tensor(const OpInput& in) {
    for (const auto& s : in.input_shapes)
      if (s) return true;
    for (const auto& [id, list] : in.tensor_lists)
      for (const auto& s : list.shapes)
        if (s) return true;
    for (const OpKwarg& k : in.kwargs)
      if (k.shape) return true;
    return false;
  }

  static bool skipped_argument(const OpInput& in, const OpFacts& facts) {
    for (const std::string& d : in.input_dtypes)
      if (d == kMemoryFormatType) return true;
    for (const OpKwarg& k : in.kwargs)
      if (k.dtype == kMemoryFormatType) return true;
    return facts.storage_arg >= 0 && static_cast<size_t>(facts.storage_arg) < in.input_shapes.size() &&
           !in.non_tensor_inputs[facts.storage_arg].is_none();
  }

  static void tensor(std::string& out, const std::vector<int64_t>& shape, std::string_view dtype, const OptionalShape& strides) {
    out += "T([";
    for (size_t i = 0; i < shape.size(); ++i) {
      if (i) out += ", ";
      out += std::to_string(shape[i]);
    }
    out += "], ";
    std::string_view abbr = abbr_of_dtype(dtype);
    out += abbr.empty() ? dtype : abbr;
    if (strides) {
      out += ", stride=(";
      for (size_t i = 0; i < strides->size(); ++i) {
        if (i) out += ", ";
        out += std::to_string((*strides)[i]);
      }
      if (strides->size() == 1) out += ',';
      out += ')';
    }
    out += ')';
  }

  // A plain value; false when it is unknown (a type without a value).
  static bool value(std::string& out, const OpValue& v, std::string_view type) {
    using K = OpValue::Kind;
    switch (v.kind()) {
      case K::None:
        if (type != kNoneType && !type.empty() && type != "None") return false;
        out += "None";
        return true;
      case K::Bool: out += v.as_bool() ? "True" : "False"; return true;
      case K::Int: out += std::to_string(v.as_int()); return true;
      case K::Float: append_python_float(out, v.as_float()); return true;
      case K::String: {
        const std::string& s = v.as_string();
        if (type == kDtypeType) {
          std::string_view abbr = abbr_of_dtype(s);
          out += abbr.empty() ? std::string_view(s) : abbr;
        } else if (type == kLayoutType || type == kMemoryFormatType || type == kComplexType) {
          out += s;
        } else if (type == kDeviceType) {
          append_python_string(out, std::string_view(s).substr(0, s.find(':')));  // truncate_inp: device.type
        } else {
          append_python_string(out, s);
        }
        return true;
      }
      case K::List: {
        const bool tuple = type == kTupleType;
        out += tuple ? '(' : '[';
        const auto& items = v.as_list();
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += ", ";
          const OpValue& x = items[i];
          // A list's items carry no type string of their own: a string naming a torch dtype,
          // layout or memory format is written as one (as a list of dtypes was read).
          std::string_view item_type;
          if (x.kind() == K::List) item_type = kListType;
          else if (x.kind() == K::String && x.as_string().rfind("torch.", 0) == 0)
            if (auto attr = torch_attr(std::string_view(x.as_string()).substr(6)); attr && attr->name == x.as_string())
              item_type = attr->type;
          if (!value(out, x, item_type)) return false;
        }
        if (tuple && items.size() == 1) out += ',';
        out += tuple ? ')' : ']';
        return true;
      }
      case K::TensorListRef: return false;  // handled by the caller
    }
    return false;
  }

  static bool argument(std::string& out, const OpInput& in, const OptionalShape& shape, const std::string& dtype,
                       const OpValue& v, const OptionalShape& strides) {
    if (shape) {
      tensor(out, *shape, dtype, strides);
      return true;
    }
    if (v.kind() == OpValue::Kind::TensorListRef) {
      const TensorListInfo* list = in.tensor_list(v.as_tensor_list_ref());
      if (list == nullptr) return false;
      const bool tuple = dtype == kTupleType;
      out += tuple ? '(' : '[';
      for (int64_t i = 0; i < list->length(); ++i) {
        if (i) out += ", ";
        const auto& s = list->shapes[static_cast<size_t>(i)];
        if (!s) out += "None";
        else tensor(out, *s, list->dtypes[static_cast<size_t>(i)], list->strides.empty() ? std::nullopt : list->strides[static_cast<size_t>(i)]);
      }
      if (tuple && list->length() == 1) out += ',';
      out += tuple ? ')' : ']';
      return true;
    }
    return value(out, v, dtype);
  }

  // repr((args, kwargs)) as OperatorInputsMode writes it.
  static bool call_text(const OpInput& in, std::string& out) {
    out += "((";
    const size_t n = in.input_shapes.size();
    for (size_t i = 0; i < n; ++i) {
      if (i) out += ", ";
      const OptionalShape none;
      if (!argument(out, in, in.input_shapes[i], in.input_dtypes[i], in.non_tensor_inputs[i],
                    in.input_strides.empty() ? none : in.input_strides[i]))
        return false;
    }
    if (n == 1) out += ',';
    out += "), {";
    for (size_t k = 0; k < in.kwargs.size(); ++k) {
      const OpKwarg& kw = in.kwargs[k];
      if (k) out += ", ";
      append_python_string(out, kw.name);
      out += ": ";
      if (!argument(out, in, kw.shape, kw.dtype, kw.value, kw.strides)) return false;
    }
    out += "})";
    return true;
  }

  const OpFactsFn& facts_;
  bool skip_non_compute_;
};

}  // namespace optrace::detail::op_trace::oplog
