// optrace/detail/kineto/profiler_text.hpp: the text forms the PyTorch profiler writes (type names, concrete values)
#pragma once
// What a Kineto `cpu_op` event holds, per argument of the op (torch/csrc/profiler):
// - "Input type": a tensor's dtype as caffe2::TypeMeta names it, which is the C++ type's name as
//   the compiler spells it ("float", "c10::BFloat16", "long int" with GCC, "long" with Clang,
//   "__int64" with MSVC); "Scalar" for an int/float/bool/complex; "ScalarList" for a short list of
//   those; "TensorList"; "" for None, an undefined tensor, or anything the profiler does not
//   record (Device, str, Generator, long lists, Tensor?[]). Profilers before 1.13 wrote
//   IValue::tagKind() names for scalars and lists ("Int", "Double", "IntList", "GenericList").
// - "Concrete Inputs" (PyTorch 2.0+): IValue's printing of scalars and scalar lists ("6", "1.",
//   "-0.001", "True", "[5, 128]", "1.+2.j"); "" for everything else.
// Doubles print as IValue prints them: integral values as "1." / "-0.", others with 17
// significant digits, "inf", "-inf", "nan".

#include <optrace/detail/common/string_map.hpp>
#include <optrace/python_names.hpp>
#include <optrace/json/writer.hpp>

#include <c10/core/ScalarType.h>
#include <c10/core/ScalarTypeToTypeMeta.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace optrace::detail::kineto {

/// The Python dtype name ("torch.int64") of a profiler "Input type" that names a tensor dtype,
/// whichever compiler built the profiling libtorch; nullptr if `type` names no dtype.
/// `std::optional<T>` / `c10::optional<T>` wrappers are looked through.
inline const std::string* python_dtype_of_type_name(std::string_view type) {
  for (std::string_view wrapper : {std::string_view("std::optional<"), std::string_view("c10::optional<")}) {
    if (type.size() > wrapper.size() && type.substr(0, wrapper.size()) == wrapper && type.back() == '>') {
      type = type.substr(wrapper.size(), type.size() - wrapper.size() - 1);
      while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
    }
  }
  static const auto* table = [] {
    auto* m = new StringMap<std::string>;  // looked up once per decoded tensor argument: no copy
    for (auto [type_name, dtype] : std::initializer_list<std::pair<const char*, const char*>>{
        // Spellings of other compilers and older libtorch versions.
        {"float", "torch.float32"},
        {"double", "torch.float64"},
        {"c10::Half", "torch.float16"},
        {"c10::BFloat16", "torch.bfloat16"},
        {"long int", "torch.int64"},
        {"long", "torch.int64"},
        {"long long", "torch.int64"},
        {"long long int", "torch.int64"},
        {"__int64", "torch.int64"},
        {"int64_t", "torch.int64"},
        {"int", "torch.int32"},
        {"short int", "torch.int16"},
        {"short", "torch.int16"},
        {"signed char", "torch.int8"},
        {"unsigned char", "torch.uint8"},
        {"bool", "torch.bool"},
        {"unsigned short", "torch.uint16"},
        {"short unsigned int", "torch.uint16"},
        {"unsigned int", "torch.uint32"},
        {"unsigned long", "torch.uint64"},
        {"long unsigned int", "torch.uint64"},
        {"unsigned long long", "torch.uint64"},
        {"c10::complex<float>", "torch.complex64"},
        {"c10::complex<double>", "torch.complex128"},
        {"c10::complex<c10::Half>", "torch.complex32"},
        {"c10::qint8", "torch.qint8"},
        {"c10::quint8", "torch.quint8"},
        {"c10::qint32", "torch.qint32"},
        {"c10::quint4x2", "torch.quint4x2"},
        {"c10::quint2x4", "torch.quint2x4"},
        {"c10::Float8_e5m2", "torch.float8_e5m2"},
        {"c10::Float8_e4m3fn", "torch.float8_e4m3fn"},
        {"c10::Float8_e5m2fnuz", "torch.float8_e5m2fnuz"},
        {"c10::Float8_e4m3fnuz", "torch.float8_e4m3fnuz"},
    })
      if (m->find(type_name) == nullptr) m->insert(type_name, dtype);
    // And whatever this libtorch's TypeMeta calls its dtypes.
    for (int i = 0; i < static_cast<int>(c10::ScalarType::NumOptions); ++i) {
      auto t = static_cast<c10::ScalarType>(i);
      if (t == c10::ScalarType::Undefined) continue;
      try {
        std::string name(c10::scalarTypeToTypeMeta(t).name());
        if (!name.empty() && m->find(name) == nullptr) m->insert(name, python_dtype_name(t));
      } catch (...) {
      }
    }
    return m;
  }();
  return table->find(type);
}

/// The "Input type" this libtorch's profiler writes for a tensor of Python dtype `dtype`
/// ("torch.float32" -> "float"); nullopt for a name that is no dtype.
inline std::optional<std::string> type_name_of_python_dtype(std::string_view dtype) {
  auto t = scalar_type_from_python(dtype);
  if (!t) return std::nullopt;
  return std::string(c10::scalarTypeToTypeMeta(*t).name());
}

/// One scalar as "Concrete Inputs" writes it.
struct Scalar {
  enum class Kind { Missing, Int, Double, Bool, Complex, Other };
  Kind kind = Kind::Missing;
  int64_t int_value = 0;        // Int
  double real = 0, imag = 0;    // Double: real; Complex: both
  bool bool_value = false;      // Bool
  std::string text;             // Other: the text as written
};

/// Parses one scalar: "6" (int), "1." / "-0.001" / "1e-05" / "inf" / "nan" (double),
/// "True" / "False" (bool), "1.+2.j" or Python's "(1+2j)" (complex); "" is Missing; anything else
/// is Other.
inline Scalar parse_scalar(std::string_view s) {
  Scalar out;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.empty()) return out;
  if (s == "True" || s == "False") {
    out.kind = Scalar::Kind::Bool;
    out.bool_value = s == "True";
    return out;
  }
  {
    int64_t i;
    auto r = std::from_chars(s.data(), s.data() + s.size(), i);
    if (r.ec == std::errc() && r.ptr == s.data() + s.size()) {
      out.kind = Scalar::Kind::Int;
      out.int_value = i;
      return out;
    }
  }
  double d;
  if (parse_double(s, d)) {
    out.kind = Scalar::Kind::Double;
    out.real = d;
    return out;
  }
  if (auto c = parse_complex(s)) {
    out.kind = Scalar::Kind::Complex;
    out.real = c->real();
    out.imag = c->imag();
    return out;
  }
  out.kind = Scalar::Kind::Other;
  out.text = std::string(s);
  return out;
}

/// Parses a scalar list "[5, 128]" / "[0.5, 1.]" / "[True]" / "[]". False if `s` is no list of
/// scalars.
inline bool parse_scalar_list(std::string_view s, std::vector<Scalar>& out) {
  out.clear();
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') return false;
  std::string_view body = s.substr(1, s.size() - 2);
  if (body.find_first_not_of(' ') == std::string_view::npos) return true;
  out.reserve(static_cast<size_t>(std::count(body.begin(), body.end(), ',')) + 1);  // one allocation
  size_t start = 0;
  for (;;) {
    size_t comma = body.find(',', start);
    Scalar item = parse_scalar(body.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (item.kind == Scalar::Kind::Missing || item.kind == Scalar::Kind::Other) return false;
    out.push_back(std::move(item));
    if (comma == std::string_view::npos) return true;
    start = comma + 1;
  }
}

/// A double as IValue prints it: "1.", "-0.", "0.10000000000000001", "inf", "nan".
inline std::string ivalue_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  int c = std::fpclassify(d);
  if ((c == FP_NORMAL || c == FP_ZERO) && std::abs(d) < 1e10) {
    auto i = static_cast<int64_t>(d);
    if (static_cast<double>(i) == d) {
      if (i == 0 && std::signbit(d)) return "-0.";
      return std::to_string(i) + ".";
    }
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  return buf;
}

/// A complex number as IValue prints it: "1.+2.j", "0.5-1.j".
inline std::string ivalue_complex(double re, double im) {
  return ivalue_double(re) + (std::signbit(im) && !std::isnan(im) ? "-" : "+") + ivalue_double(std::abs(im)) + "j";
}

}  // namespace optrace::detail::kineto
