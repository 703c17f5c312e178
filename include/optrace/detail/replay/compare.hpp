// optrace/detail/replay/compare.hpp: a replayed op's outputs compared with the CPU reference's
#pragma once
// Check mode runs each op on the target device and on the CPU (float64 for floating inputs) with
// the same input values, and compares every output here: shapes and dtypes exactly, values within
// a tolerance that follows the output's dtype and the computation's magnitude:
//
//   |out - ref| <= atol(dtype) * max(1, rms(ref)) + rtol(dtype) * |ref|
//
// Why the RMS: the rounding error of a reduction (a dot product in mm, conv, attention; a sum)
// grows with the magnitude of its terms, not with the result element, which cancellation can
// leave near 0; and with random inputs the output's RMS grows with both the terms' magnitude and
// the reduction length (sqrt(K)). Measured on the CPU in float32 against float64
// (benchmarks/check_tolerance.py): max |error| / rms(ref) stays below 1e-5 for mm with K = 3072,
// bmm, conv2d, sum over 1e5 elements, softmax and exp, so atol 1e-4 keeps a 10x margin, while a
// wrong kernel errs by the order of the RMS itself. An explicit atol is absolute (not scaled).

#include <optrace/detail/materialize/fill.hpp>
#include <optrace/json/writer.hpp>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace optrace::detail {

// Absolute and relative tolerance when comparing an output of dtype `dtype` with the float64
// reference: a little above the rounding error of one result in that dtype plus accumulation.
inline std::pair<double, double> default_tolerance(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Double:
    case c10::ScalarType::ComplexDouble: return {1e-7, 1e-7};
    case c10::ScalarType::Float:
    case c10::ScalarType::ComplexFloat: return {1e-4, 1e-4};
    case c10::ScalarType::Half:
    case c10::ScalarType::ComplexHalf: return {1e-3, 1e-3};
    case c10::ScalarType::BFloat16: return {1e-2, 1.6e-2};
    default: break;
  }
  if (is_float8(dtype)) return {1e-1, 1.25e-1};
  return {0.0, 0.0};  // integers and bool: exact
}

// The root mean square of `ref`'s finite values (0 when none): the scale of its elements.
inline double finite_rms(const at::Tensor& ref) {
  const at::Tensor finite = ref.isfinite();
  const at::Tensor values = ref.masked_select(finite);
  if (values.numel() == 0) return 0.0;
  return values.pow(2).mean().sqrt().item<double>();
}

struct Comparison {
  bool ok = true;
  bool compared = false;  // any value compared at all
  double max_abs = 0.0;
  double max_rel = 0.0;
  std::string message;  // the first mismatch
  std::optional<double> atol, rtol;  // overrides of default_tolerance
  bool exact_dtypes = false;         // the reference ran in the target's dtypes
  bool shapes_only = false;          // meta target: shapes and dtypes only
  std::string not_compared;          // an output that cannot be compared (nested tensors)

  void mismatch(const std::string& where, const std::string& what) {
    if (ok) message = where + ": " + what;
    ok = false;
  }
};

inline std::string shape_string(c10::IntArrayRef sizes) {
  std::ostringstream out;
  out << sizes;
  return out.str();
}

inline std::string number_string(double d) {
  std::string s;
  if (std::isfinite(d)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", d);
    s = buf;
  } else {
    json::Writer::append_double(s, d);
  }
  return s;
}

inline void compare_tensors(const at::Tensor& got, const at::Tensor& ref, const std::string& where, Comparison& c) {
  if (!got.defined() || !ref.defined()) {
    if (got.defined() != ref.defined()) c.mismatch(where, got.defined() ? "reference is undefined" : "undefined tensor");
    return;
  }
  if (got.is_nested() || ref.is_nested()) {  // no sizes(), no elementwise comparison
    if (c.not_compared.empty()) c.not_compared = where + " is a nested tensor";
    return;
  }
  c.compared = true;
  if (got.sizes() != ref.sizes()) {
    c.mismatch(where, "shape " + shape_string(got.sizes()) + ", reference " + shape_string(ref.sizes()));
    return;
  }
  const c10::ScalarType gt = got.scalar_type(), rt = ref.scalar_type();
  const bool got_float = c10::isFloatingType(gt) || c10::isComplexType(gt);
  const bool same_kind = gt == rt || (!c.exact_dtypes && got_float &&
                                      (c10::isComplexType(gt) == c10::isComplexType(rt)) &&
                                      (c10::isFloatingType(rt) || c10::isComplexType(rt)));
  if (!same_kind) {
    c.mismatch(where, std::string("dtype ") + c10::toString(gt) + ", reference " + c10::toString(rt));
    return;
  }
  if (c.shapes_only || got.numel() == 0) return;
  at::Tensor g = got.to(at::TensorOptions().device(c10::kCPU).dtype(c10::isComplexType(gt) ? c10::ScalarType::ComplexDouble : c10::ScalarType::Double));
  at::Tensor r = ref.to(at::TensorOptions().device(c10::kCPU).dtype(g.scalar_type()));
  if (g.is_complex()) {
    g = at::view_as_real(g);
    r = at::view_as_real(r);
  }
  const auto [def_atol, def_rtol] = default_tolerance(gt);
  const double scale = c.atol || def_atol == 0.0 ? 1.0 : std::max(1.0, finite_rms(r));
  const double atol = c.atol.value_or(def_atol * scale), rtol = c.rtol.value_or(def_rtol);
  const at::Tensor nan_g = g.isnan(), nan_r = r.isnan();
  if (!nan_g.equal(nan_r)) {
    const int64_t n = nan_g.ne(nan_r).sum().item<int64_t>();
    c.max_abs = std::numeric_limits<double>::infinity();
    c.max_rel = std::numeric_limits<double>::infinity();
    c.mismatch(where, std::to_string(n) + " of " + std::to_string(g.numel()) + " elements are NaN in one and not the other");
    return;
  }
  // Equal values (infinities of one sign included) and NaN pairs count as no error.
  at::Tensor diff = at::where(g.eq(r).logical_or(nan_r), at::zeros_like(g), (g - r).abs());
  const at::Tensor mag = r.abs().nan_to_num(0.0);
  const double max_abs = diff.max().item<double>();
  const at::Tensor big = mag.gt(std::max(atol, 1e-30));  // relative error where |ref| is not negligible
  const double max_rel = big.any().item<bool>() ? (diff.masked_select(big) / mag.masked_select(big)).max().item<double>() : 0.0;
  c.max_abs = std::max(c.max_abs, max_abs);
  c.max_rel = std::max(c.max_rel, max_rel);
  const at::Tensor bad = diff.gt(mag * rtol + atol);
  const int64_t n_bad = bad.sum().item<int64_t>();
  if (n_bad > 0) {
    std::string what = std::to_string(n_bad) + " of " + std::to_string(g.numel()) + " elements differ";
    if (got_float)
      what += " beyond atol " + number_string(atol) +
              (scale > 1.0 ? " (" + number_string(def_atol) + " * rms " + number_string(scale) + ")" : std::string()) +
              " + rtol " + number_string(rtol) + " * |ref| (max abs error " + number_string(max_abs) +
              ", max rel error " + number_string(max_rel) + ")";
    else
      what += " (max abs difference " + number_string(max_abs) + ")";
    c.mismatch(where, what);
  }
}

inline void compare_values(const c10::IValue& got, const c10::IValue& ref, const std::string& where, Comparison& c) {
  if (got.isTensor() && ref.isTensor()) return compare_tensors(got.toTensor(), ref.toTensor(), where, c);
  if (got.isTensorList() && ref.isTensorList()) {
    auto g = got.toTensorVector(), r = ref.toTensorVector();
    if (g.size() != r.size()) return c.mismatch(where, std::to_string(g.size()) + " tensors, reference " + std::to_string(r.size()));
    for (size_t i = 0; i < g.size(); ++i) compare_tensors(g[i], r[i], where + "[" + std::to_string(i) + "]", c);
    return;
  }
  if ((got.isTuple() && ref.isTuple()) || (got.isList() && ref.isList())) {
    std::vector<c10::IValue> g, r;
    if (got.isTuple()) {
      for (const auto& x : got.toTupleRef().elements()) g.push_back(x);
      for (const auto& x : ref.toTupleRef().elements()) r.push_back(x);
    } else {
      for (const auto& x : got.toListRef()) g.push_back(x);
      for (const auto& x : ref.toListRef()) r.push_back(x);
    }
    if (g.size() != r.size()) return c.mismatch(where, std::to_string(g.size()) + " values, reference " + std::to_string(r.size()));
    for (size_t i = 0; i < g.size(); ++i) compare_values(g[i], r[i], where + "[" + std::to_string(i) + "]", c);
    return;
  }
  if (got.isNone() && ref.isNone()) return;
  if (c.shapes_only) return;
  if (got.isDouble() && ref.isDouble()) {
    c.compared = true;
    const double g = got.toDouble(), r = ref.toDouble();
    if ((std::isnan(g) && std::isnan(r)) || g == r) return;
    const auto [def_atol, def_rtol] = default_tolerance(c10::ScalarType::Float);
    const double diff = std::abs(g - r);
    c.max_abs = std::max(c.max_abs, diff);
    if (!(diff <= c.atol.value_or(def_atol) + c.rtol.value_or(def_rtol) * std::abs(r)))
      c.mismatch(where, "value " + number_string(g) + ", reference " + number_string(r));
    return;
  }
  if ((got.isInt() && ref.isInt()) || (got.isBool() && ref.isBool())) {
    c.compared = true;
    if (got.isInt() ? got.toInt() != ref.toInt() : got.toBool() != ref.toBool()) {
      std::ostringstream out;
      out << "value " << got << ", reference " << ref;
      c.mismatch(where, out.str());
    }
    return;
  }
  std::ostringstream out;
  out << "a " << got.tagKind() << ", reference a " << ref.tagKind();
  if (got.tagKind() != ref.tagKind()) c.mismatch(where, out.str());
}

// Compares the outputs left on two stacks by callBoxed.
inline void compare_stacks(const torch::jit::Stack& got, const torch::jit::Stack& ref, Comparison& c) {
  if (got.size() != ref.size()) {
    c.mismatch("outputs", std::to_string(got.size()) + " values, reference " + std::to_string(ref.size()));
    return;
  }
  for (size_t i = 0; i < got.size(); ++i) compare_values(got[i], ref[i], "output " + std::to_string(i), c);
}

}  // namespace optrace::detail
