// optrace/detail/common/op_catalog.hpp: operator facts written out and read back (no libtorch)
#pragma once
// The `optrace` tool's front end imports Kineto traces without loading libtorch (whose loading
// and operator registrations cost ~0.3 s per run). It decodes events by the facts of every
// dispatcher op (op_schema.hpp), captured at build time from the libtorch the tool is built
// against: `optrace_op_catalog` (examples/cli/) writes `write_catalog(all_ops())`, and the front
// end reads it back into a `CapturedCatalog`. The context rules are not written: they are
// derived again from `context_rules()` by the same function the live dispatcher uses.
//
// The text, one line per op, then one per argument:
//   optrace-op-catalog 2 torch2=1
//   op aten::add Tensor 0 2 1 -1 0 3
//   a 0 0 0 0 -
//   a 0 0 0 0 -
//   a 0 4 0 0 i1
// `op QUALIFIED OVERLOAD|- DECOMPOSES POSITIONAL RETURNS_TENSOR STORAGE_ARG NON_COMPUTE ARGS`;
// `a OPTIONAL KIND ELEMENT ELEMENT_OPTIONAL DEFAULT`, kinds as ArgKind's numbers, DEFAULT `-`
// (none) or a DefaultValue: `N` None, `i7`, `d<%a>` (exact), `b0`/`b1`, `c<%a>,<%a>`,
// `s<bytes>:<text>` (a string), `v<bytes>:<text>` (a device), `l<n>:` then n values each ended
// by `;`, `o` (another kind).

#include <optrace/detail/common/op_schema.hpp>
#include <optrace/detail/common/string_map.hpp>
#include <optrace/error.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace optrace::detail {

namespace catalog_text {

inline void write_double(double d, std::string& out) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", d);
  out += buf;
}

inline void write_default(const DefaultValue& d, std::string& out) {
  using K = DefaultValue::Kind;
  switch (d.kind) {
    case K::None: out += 'N'; break;
    case K::Int: out += 'i' + std::to_string(d.int_value); break;
    case K::Double: out += 'd'; write_double(d.real, out); break;
    case K::Bool: out += d.bool_value ? "b1" : "b0"; break;
    case K::Complex:
      out += 'c';
      write_double(d.real, out);
      out += ',';
      write_double(d.imag, out);
      break;
    case K::String:
    case K::Device: out += (d.kind == K::String ? 's' : 'v') + std::to_string(d.text.size()) + ':' + d.text; break;
    case K::List:
      out += 'l' + std::to_string(d.items.size()) + ':';
      for (const DefaultValue& item : d.items) {
        write_default(item, out);
        out += ';';
      }
      break;
    case K::Other: out += 'o'; break;
  }
}

// A cursor over the catalog's text; a malformed spot is an optrace::Error naming its line.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  bool done() const { return at_ >= text_.size(); }
  [[noreturn]] void fail(const std::string& what) const {
    raise<Error>("malformed op catalog, line ", line_, ": ", what);
  }
  std::string_view word() {
    skip_spaces();
    size_t start = at_;
    while (at_ < text_.size() && text_[at_] != ' ' && text_[at_] != '\n') ++at_;
    if (start == at_) fail("expected a word");
    return text_.substr(start, at_ - start);
  }
  int64_t number() { return integer(std::string(word())); }
  void end_line() {
    skip_spaces();
    if (at_ < text_.size() && text_[at_] != '\n') fail("expected the end of the line");
    if (at_ < text_.size()) ++at_;
    ++line_;
  }
  // A default value (no spaces inside, but strings and devices may hold any byte: length-prefixed).
  std::optional<DefaultValue> default_value() {
    skip_spaces();
    if (at_ < text_.size() && text_[at_] == '-') {
      ++at_;
      return std::nullopt;
    }
    return value();
  }

 private:
  void skip_spaces() {
    while (at_ < text_.size() && text_[at_] == ' ') ++at_;
  }
  char next() {
    if (at_ >= text_.size()) fail("unexpected end");
    return text_[at_++];
  }
  // The text up to the next separator of the default-value encoding.
  std::string token() {
    size_t start = at_;
    while (at_ < text_.size() && std::strchr(" \n;,:", text_[at_]) == nullptr) ++at_;
    return std::string(text_.substr(start, at_ - start));
  }
  void expect(char c) {
    if (next() != c) fail(std::string("expected '") + c + "'");
  }
  int64_t integer(const std::string& s) {
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0') fail("expected an integer, got '" + s + "'");
    return v;
  }
  double real(const std::string& s) {
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0') fail("expected a number, got '" + s + "'");
    return d;
  }
  size_t length() {
    const int64_t n = integer(token());
    expect(':');
    if (n < 0 || static_cast<size_t>(n) > text_.size() - at_) fail("length past the end");
    return static_cast<size_t>(n);
  }
  DefaultValue value() {
    DefaultValue d;
    using K = DefaultValue::Kind;
    switch (next()) {
      case 'N': d.kind = K::None; break;
      case 'o': d.kind = K::Other; break;
      case 'b': d.kind = K::Bool; d.bool_value = next() == '1'; break;
      case 'i': d.kind = K::Int; d.int_value = integer(token()); break;
      case 'd': d.kind = K::Double; d.real = real(token()); break;
      case 'c':
        d.kind = K::Complex;
        d.real = real(token());
        expect(',');
        d.imag = real(token());
        break;
      case 's':
      case 'v': {
        d.kind = text_[at_ - 1] == 's' ? K::String : K::Device;
        const size_t n = length();
        d.text = std::string(text_.substr(at_, n));
        at_ += n;
        break;
      }
      case 'l': {
        d.kind = K::List;
        const size_t n = length();
        for (size_t k = 0; k < n; ++k) {
          d.items.push_back(value());
          expect(';');
        }
        break;
      }
      default: fail("unknown default value");
    }
    return d;
  }

  std::string_view text_;
  size_t at_ = 0;
  int64_t line_ = 1;
};

}  // namespace catalog_text

/// The catalog text of `ops` (op_info's facts; the rules are not written).
inline std::string write_catalog(const std::vector<const OpInfo*>& ops, bool torch2) {
  std::string out = std::string("optrace-op-catalog 2 torch2=") + (torch2 ? "1" : "0") + "\n";
  for (const OpInfo* op : ops) {
    out += "op " + op->qualified + " " + (op->overload.empty() ? "-" : op->overload) + " " + (op->decomposes ? "1" : "0") +
           " " + std::to_string(op->positional) + " " + (op->returns_tensor ? "1" : "0") + " " + std::to_string(op->storage_arg) +
           " " + (op->non_compute ? "1" : "0") + " " + std::to_string(op->args.size()) + "\n";
    for (size_t k = 0; k < op->args.size(); ++k) {
      const ArgType& t = op->args[k];
      out += "a " + std::to_string(t.optional) + " " + std::to_string(static_cast<int>(t.kind)) + " " +
             std::to_string(static_cast<int>(t.element)) + " " + std::to_string(t.element_optional) + " ";
      if (op->defaults[k]) catalog_text::write_default(*op->defaults[k], out);
      else out += '-';
      out += '\n';
    }
  }
  return out;
}

/// Operator facts read from a catalog text (`write_catalog`): what the Kineto importer asks the
/// live dispatcher for, without libtorch. Throws optrace::Error for a malformed text.
class CapturedCatalog final : public OpCatalog {
 public:
  explicit CapturedCatalog(std::string_view text) {
    catalog_text::Reader in(text);
    if (in.word() != "optrace-op-catalog" || in.number() != 2) in.fail("not an optrace op catalog (version 2)");
    const std::string_view flag = in.word();
    if (flag != "torch2=0" && flag != "torch2=1") in.fail("expected torch2=0|1");
    const bool torch2 = flag == "torch2=1";
    in.end_line();
    while (!in.done()) {
      if (in.word() != "op") in.fail("expected 'op'");
      auto info = std::make_unique<OpInfo>();
      info->qualified = std::string(in.word());
      const std::string_view overload = in.word();
      info->overload = overload == "-" ? "" : std::string(overload);
      info->decomposes = in.number() != 0;
      info->positional = static_cast<size_t>(in.number());
      info->returns_tensor = in.number() != 0;
      info->storage_arg = static_cast<int>(in.number());
      info->non_compute = in.number() != 0;
      const int64_t n = in.number();
      in.end_line();
      info->name = display_name(info->qualified, info->overload);
      info->base = base_name(info->name);
      for (int64_t k = 0; k < n; ++k) {
        if (in.word() != "a") in.fail("expected 'a'");
        ArgType t;
        t.optional = in.number() != 0;
        t.kind = kind(in, in.number());
        t.element = kind(in, in.number());
        t.element_optional = in.number() != 0;
        info->args.push_back(t);
        info->defaults.push_back(in.default_value());
        in.end_line();
      }
      by_name_[info->qualified + "." + info->overload] = info.get();
      std::vector<const OpInfo*>& list = overloads_.find_or_insert(info->qualified);
      if (info->overload.empty()) list.insert(list.begin(), info.get());
      else list.push_back(info.get());
      ops_.push_back(std::move(info));
    }
    // The rules, as op_info derives them (after every op is known: a rule names another op).
    for (auto& op : ops_) {
      op->rules = rules_of(op->name, torch2, [this](const char* recorded) { return find(recorded); });
      for (OpInfo::Rule& r : op->rules)
        if (r.recorded == nullptr) r.recorded = op.get();
    }
  }

  const std::vector<const OpInfo*>& overloads_of(std::string_view qualified) const override {
    static const std::vector<const OpInfo*> none;
    const std::vector<const OpInfo*>* list = overloads_.find(qualified);
    return list == nullptr ? none : *list;
  }

  /// The op named `display` as the op-trace schema names it ("add.Tensor", "myops::f.default"),
  /// or nullptr (what find_op answers from the live dispatcher).
  const OpInfo* find(std::string_view display) const override {
    auto [name, overload] = qualified_name(display);
    auto it = by_name_.find(name + "." + overload);
    return it == by_name_.end() ? nullptr : it->second;
  }

  /// Every op, in the catalog's order.
  std::vector<const OpInfo*> ops() const {
    std::vector<const OpInfo*> out;
    for (const auto& op : ops_) out.push_back(op.get());
    return out;
  }

 private:
  static ArgKind kind(catalog_text::Reader& in, int64_t k) {
    if (k < 0 || k > static_cast<int64_t>(ArgKind::Other)) in.fail("unknown argument kind " + std::to_string(k));
    return static_cast<ArgKind>(k);
  }

  std::vector<std::unique_ptr<OpInfo>> ops_;
  StringMap<std::vector<const OpInfo*>> overloads_;
  std::unordered_map<std::string, const OpInfo*> by_name_;
};

}  // namespace optrace::detail
