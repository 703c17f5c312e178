// optrace/python_names.hpp: how Python spells dtypes, layouts, memory formats, floats and
// complex numbers, as the op-trace schema stores them. One place for the writer (OpTracer), the
// Kineto importer and the readers (replay), so that what one writes the others read.
#pragma once

#include <optrace/detail/common/dtype_names.hpp>
#include <optrace/detail/common/json_text.hpp>
#include <optrace/json/writer.hpp>

#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

#include <c10/util/complex.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace optrace {

/// Python's name of a dtype (`torch.float32`, `torch.int64`, `torch.bfloat16`), as `str(dtype)`.
inline std::string python_dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Byte: return "torch.uint8";
    case c10::ScalarType::Char: return "torch.int8";
    case c10::ScalarType::Short: return "torch.int16";
    case c10::ScalarType::Int: return "torch.int32";
    case c10::ScalarType::Long: return "torch.int64";
    case c10::ScalarType::Half: return "torch.float16";
    case c10::ScalarType::Float: return "torch.float32";
    case c10::ScalarType::Double: return "torch.float64";
    case c10::ScalarType::ComplexHalf: return "torch.complex32";
    case c10::ScalarType::ComplexFloat: return "torch.complex64";
    case c10::ScalarType::ComplexDouble: return "torch.complex128";
    default: break;
  }
  std::string c = c10::toString(t);  // "BFloat16", "Bool", "QInt8", "Float8_e4m3fn", ...
  for (char& ch : c) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return "torch." + c;
}

/// The dtype named `name` exactly as `python_dtype_name` writes it (`"torch.float32"`), among
/// those the installed libtorch has; nullopt otherwise.
inline std::optional<c10::ScalarType> scalar_type_from_python(std::string_view name) {
  static const auto* table = [] {
    auto* m = new std::unordered_map<std::string, c10::ScalarType>();  // never freed: used at exit
    for (int i = 0; i < static_cast<int>(c10::ScalarType::NumOptions); ++i) {
      auto t = static_cast<c10::ScalarType>(i);
      m->emplace(python_dtype_name(t), t);
    }
    return m;
  }();
  auto it = table->find(std::string(name));
  if (it == table->end()) return std::nullopt;
  return it->second;
}

namespace detail {

/// A dtype from Python's names: `str(dtype)` ("torch.float32") and the aliases a hand-written
/// trace may use ("torch.float", "torch.long", "torch.half", ...); nullopt otherwise.
inline std::optional<c10::ScalarType> dtype_from_python(std::string_view s) {
  if (auto t = scalar_type_from_python(s)) return t;
  if (s.substr(0, 6) != "torch.") return std::nullopt;
  for (const auto& [alias, name] : kTorchDtypeAliases)
    if (s.substr(6) == alias) return scalar_type_from_python("torch." + std::string(name));
  return std::nullopt;
}

// PyTorch's short dtype names, as its operator-inputs logs and tables write them.
inline constexpr std::pair<std::string_view, std::string_view> kShortDtypeNames[] = {
    {"torch.float32", "f32"},  {"torch.float64", "f64"},    {"torch.float16", "f16"},     {"torch.bfloat16", "bf16"},
    {"torch.int64", "i64"},    {"torch.int32", "i32"},      {"torch.int16", "i16"},       {"torch.int8", "i8"},
    {"torch.uint8", "u8"},     {"torch.bool", "b8"},        {"torch.complex32", "c32"},   {"torch.complex64", "c64"},
    {"torch.complex128", "c128"}};

/// The short name of a Python dtype name ("torch.float32" -> "f32"); others lose "torch."
/// ("torch.float8_e4m3fn" -> "float8_e4m3fn").
inline std::string short_dtype_name(std::string_view python_name) {
  for (const auto& [long_name, short_name] : kShortDtypeNames)
    if (long_name == python_name) return std::string(short_name);
  if (python_name.substr(0, 6) == "torch.") python_name.remove_prefix(6);
  return std::string(python_name);
}

/// Parses a double as Python and IValue print it ("1.0", "1.", "-0.001", "1e-05", "inf",
/// "-inf", "nan"). False for anything else. (Defined with the JSON text facts, which need no
/// libtorch: the Kineto readers that have none use it too.)
using json::detail::parse_double;

/// Parses a complex number as Python prints it ("(1+2j)", "2j", "(-0-1.5j)", "(nan+infj)") or
/// IValue does ("1.+2.j"); nullopt for anything else.
inline std::optional<c10::complex<double>> parse_complex(std::string_view s) {
  if (s.size() >= 2 && s.front() == '(' && s.back() == ')') s = s.substr(1, s.size() - 2);
  if (s.empty() || s.back() != 'j') return std::nullopt;
  s.remove_suffix(1);
  // The imaginary part starts at the last sign that does not follow an exponent's 'e'.
  size_t split = std::string_view::npos;
  for (size_t k = s.size(); k-- > 1;)
    if ((s[k] == '+' || s[k] == '-') && s[k - 1] != 'e' && s[k - 1] != 'E') {
      split = k;
      break;
    }
  double re = 0, im = 0;
  if (split == std::string_view::npos) {
    if (!parse_double(s, im)) return std::nullopt;
  } else if (!parse_double(s.substr(0, split), re) || !parse_double(s.substr(split), im)) {
    return std::nullopt;
  }
  return c10::complex<double>(re, im);
}

/// Python's repr of a float: "1.0", "0.1", "1e-05", "inf", "-inf", "nan".
inline std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  std::string s;
  json::Writer::append_double(s, d);
  return s;
}

/// Python's str(complex): "(1+2j)", "2j", "(1.5-0j)".
inline std::string python_complex(double re, double im) {
  auto part = [](double d) {
    std::string s = python_float(d);
    if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
    return s;
  };
  if (re == 0.0 && !std::signbit(re)) return part(im) + "j";
  std::string im_s = part(im);
  if (im_s[0] != '-') im_s = "+" + im_s;
  return "(" + part(re) + im_s + "j)";
}

// c10::Layout and c10::MemoryFormat by number, as Python's str() names them. The numbering is
// c10's (also the torch.export schema's for layouts); libtorch 1.13 lacks `jagged`.
inline constexpr const char* kLayoutNames[] = {"torch.strided",    "torch.sparse_coo", "torch.sparse_csr",
                                               "torch._mkldnn",    "torch.sparse_csc", "torch.sparse_bsr",
                                               "torch.sparse_bsc", "torch.jagged"};
inline constexpr const char* kMemoryFormatNames[] = {"torch.contiguous_format", "torch.preserve_format",
                                                     "torch.channels_last", "torch.channels_last_3d"};

/// Python's `str(layout)` for c10::Layout number `l`.
inline std::string layout_name(int64_t l) {
  return l >= 0 && l < static_cast<int64_t>(std::size(kLayoutNames)) ? kLayoutNames[l]
                                                                     : "torch.layout(" + std::to_string(l) + ")";
}

/// Python's `str(memory_format)` for c10::MemoryFormat number `m`.
inline std::string memory_format_name(int64_t m) {
  return m >= 0 && m < static_cast<int64_t>(std::size(kMemoryFormatNames))
             ? kMemoryFormatNames[m]
             : "torch.memory_format(" + std::to_string(m) + ")";
}

/// The number of a layout from its Python name; nullopt if unknown.
inline std::optional<int64_t> layout_number(std::string_view name) {
  for (size_t i = 0; i < std::size(kLayoutNames); ++i)
    if (name == kLayoutNames[i]) return static_cast<int64_t>(i);
  return std::nullopt;
}

/// The number of a memory format from its Python name; nullopt if unknown.
inline std::optional<int64_t> memory_format_number(std::string_view name) {
  for (size_t i = 0; i < std::size(kMemoryFormatNames); ++i)
    if (name == kMemoryFormatNames[i]) return static_cast<int64_t>(i);
  return std::nullopt;
}

/// The layout Python names `name`, if the installed libtorch has it.
inline std::optional<c10::Layout> layout_from_python(std::string_view name) {
  auto n = layout_number(name);
  if (!n || *n >= static_cast<int64_t>(c10::Layout::NumOptions)) return std::nullopt;
  return static_cast<c10::Layout>(*n);
}

/// The memory format Python names `name`.
inline std::optional<c10::MemoryFormat> memory_format_from_python(std::string_view name) {
  auto n = memory_format_number(name);
  if (!n || *n >= static_cast<int64_t>(c10::MemoryFormat::NumOptions)) return std::nullopt;
  return static_cast<c10::MemoryFormat>(*n);
}

}  // namespace detail
}  // namespace optrace
