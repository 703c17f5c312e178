// optrace/detail/replay_run.hpp: materializing a call plan, comparing outputs, timing, progress
#pragma once
// Why things are done this way:
// - Tensors are materialized per slot from streams 0, 1, ... of a seed derived from the op name and
//   the input's position, so an input gets the same values whatever else is replayed (filters,
//   limits) and a fresh copy for an in-place op is a second materialization, not a clone kept
//   around.
// - The check reference is the target's own inputs copied to the CPU (floating ones to float64):
//   the reference sees exactly the target's values, so argmax/sort/topk agree, and the error
//   measured is the target's rounding and algorithm error. Copies are taken before the target
//   runs, since in-place and out= ops write their arguments.
// - Timing on CUDA uses device events where libtorch has generic ones (compat.hpp); otherwise
//   it synchronizes and reads the host clock, which adds the launch and synchronization cost.

#include <optrace/detail/compat.hpp>
#include <optrace/detail/fill.hpp>
#include <optrace/detail/replay_args.hpp>
#include <optrace/materialize.hpp>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace optrace::detail {

// FNV-1a: a hash of the op name that is the same on every platform and run.
inline uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// The materialization seed of input `index` of op `op` under the replay seed `seed`.
inline uint64_t input_seed(uint64_t seed, std::string_view op, int64_t index) {
  return stream_seed(seed, fnv1a(op) + static_cast<uint64_t>(index));
}

// Bytes the plan's tensors take on `device` (0 on meta).
inline int64_t plan_bytes(const CallPlan& plan, c10::Device device) {
  if (device.type() == c10::kMeta) return 0;
  int64_t total = 0;
  for (const TensorSlot& s : plan.tensors) {
    const Where where{s.spec, std::nullopt};
    int64_t bytes = 0;
    if (__builtin_mul_overflow(std::max(storage_elements(s.spec, where), s.min_storage),
                               static_cast<int64_t>(c10::elementSize(s.spec.dtype)),
                               &bytes) ||
        __builtin_add_overflow(total, bytes, &total))
      return std::numeric_limits<int64_t>::max();
  }
  return total;
}

// Bytes the check's CPU reference copies take: floating tensors as float64, complex ones as
// complex128 when `upcast`.
inline int64_t reference_bytes(const CallPlan& plan, bool upcast) {
  int64_t total = 0;
  for (const TensorSlot& s : plan.tensors) {
    const Where where{s.spec, std::nullopt};
    int64_t size = static_cast<int64_t>(c10::elementSize(s.spec.dtype)), bytes = 0;
    if (upcast && c10::isFloatingType(s.spec.dtype)) size = 8;
    if (upcast && c10::isComplexType(s.spec.dtype)) size = 16;
    if (__builtin_mul_overflow(std::max(storage_elements(s.spec, where), s.min_storage), size, &bytes) ||
        __builtin_add_overflow(total, bytes, &total))
      return std::numeric_limits<int64_t>::max();
  }
  return total;
}

// The plan's tensors on `device`, slot i from stream i of `seed`, integer ranges and fix-ups
// applied. Throws MaterializeError / ShapeError as Materializer does.
inline std::vector<at::Tensor> materialize_plan(const CallPlan& plan, c10::Device device, uint64_t seed,
                                                int64_t budget) {
  const MaterializeOptions base = MaterializeOptions().device(device).seed(seed).memory_budget_bytes(budget);
  Materializer plain(base);
  std::vector<at::Tensor> out;
  out.reserve(plan.tensors.size());
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const TensorSlot& s = plan.tensors[i];
    const c10::Device d = s.on_cpu ? c10::Device(c10::kCPU) : device;
    at::Tensor t;
    const Where where{s.spec, i};
    if (s.min_storage > storage_elements(s.spec, where)) {
      // The op views more of the storage than the tensor spans: a storage that large, the
      // tensor a strided view into it (as the traced program's tensor was).
      TensorSpec flat = s.spec;
      flat.sizes = {s.min_storage};
      flat.strides = {1};
      flat.storage_offset = 0;
      MaterializeOptions o = base;
      o.device(d);
      t = Materializer(o).tensor(flat, i).as_strided(s.spec.sizes, effective_strides(s.spec), s.spec.storage_offset);
    } else if (!s.range && d == device) {
      t = plain.tensor(s.spec, i);
    } else {
      MaterializeOptions o = base;
      o.device(d);
      if (s.range) {
        const auto [lo, hi] = integer_limits(s.spec.dtype);
        const int64_t a = std::max(s.range->first, lo);
        const int64_t b = std::min(s.range->second - 1, hi);
        if (a <= b) o.int_range(a, b == std::numeric_limits<int64_t>::max() ? b : b + 1);
      }
      t = Materializer(o).tensor(s.spec, i);
    }
    if (s.fixup && d.type() != c10::kMeta && t.dim() >= 1 && t.numel() > 0) {
      t.copy_(std::get<0>(t.sort(-1)));
      if (*s.fixup == RangeKind::offsets) t.select(-1, 0).zero_();
    }
    out.push_back(std::move(t));
  }
  return out;
}

// Copies for the CPU reference, taken before the target runs: floating tensors as float64 and
// complex ones as complex128 when `upcast`, others (and all when not) in their own dtype.
// The copy keeps the storage layout (the whole storage is copied and the same strided view taken
// of it): ops that view or write storage beyond the tensor's own elements see the same values,
// and expanded (stride 0) inputs stay expanded.
inline std::vector<at::Tensor> reference_copies(const std::vector<at::Tensor>& inputs, bool upcast) {
  std::vector<at::Tensor> out;
  out.reserve(inputs.size());
  for (const at::Tensor& t : inputs) {
    c10::ScalarType dtype = t.scalar_type();
    if (upcast && c10::isFloatingType(dtype)) dtype = c10::ScalarType::Double;
    else if (upcast && c10::isComplexType(dtype)) dtype = c10::ScalarType::ComplexDouble;
    const auto options = at::TensorOptions().device(c10::kCPU).dtype(dtype);
    const int64_t storage_numel = static_cast<int64_t>(t.storage().nbytes() / t.element_size());
    if (t.layout() != c10::kStrided || !t.has_storage() || storage_numel == 0) {
      out.push_back(t.to(options, /*non_blocking=*/false, /*copy=*/true));
      continue;
    }
    at::Tensor base = at::empty({0}, t.options());
    base.set_(t.storage(), 0, {storage_numel}, {1});
    out.push_back(base.to(options, /*non_blocking=*/false, /*copy=*/true).as_strided(t.sizes(), t.strides(), t.storage_offset()));
  }
  return out;
}

// The boxed arguments of the plan with `tensors` in its slots; out= tensors are empty tensors
// of `out_dtype` on `device`, numbers given for tensors are CPU wrapped numbers (as Python's
// argument parser makes them).
inline torch::jit::Stack build_stack(const CallPlan& plan, const std::vector<at::Tensor>& tensors, c10::Device device,
                                     c10::ScalarType out_dtype) {
  torch::jit::Stack stack;
  stack.reserve(plan.args.size());
  for (const ArgPlan& a : plan.args) {
    switch (a.kind) {
      case ArgPlan::Kind::value: stack.push_back(a.value); break;
      case ArgPlan::Kind::tensor: stack.emplace_back(tensors[static_cast<size_t>(a.slot)]); break;
      case ArgPlan::Kind::tensor_list: {
        c10::List<at::Tensor> list;
        for (int64_t s : a.slots) list.push_back(tensors[static_cast<size_t>(s)]);
        stack.emplace_back(std::move(list));
        break;
      }
      case ArgPlan::Kind::optional_tensor_list: {
        c10::List<c10::optional<at::Tensor>> list;
        for (int64_t s : a.slots)
          list.push_back(s < 0 ? c10::optional<at::Tensor>() : c10::optional<at::Tensor>(tensors[static_cast<size_t>(s)]));
        stack.emplace_back(std::move(list));
        break;
      }
      case ArgPlan::Kind::out_tensor: stack.emplace_back(at::empty({0}, at::TensorOptions().device(device).dtype(out_dtype))); break;
      case ArgPlan::Kind::wrapped_number: {
        const c10::ScalarType dtype = a.value.isInt()    ? c10::ScalarType::Long
                                      : a.value.isBool() ? c10::ScalarType::Bool
                                                         : c10::ScalarType::Double;
        at::Tensor t = at::scalar_tensor(a.value.toScalar(), at::TensorOptions().dtype(dtype));
        t.unsafeGetTensorImpl()->set_wrapped_number(true);
        stack.emplace_back(std::move(t));
        break;
      }
    }
  }
  return stack;
}

// The out= dtype for a reference run: the target's, upcast as the reference's inputs are.
inline c10::ScalarType reference_dtype(c10::ScalarType dtype, bool upcast) {
  if (upcast && c10::isFloatingType(dtype)) return c10::ScalarType::Double;
  if (upcast && c10::isComplexType(dtype)) return c10::ScalarType::ComplexDouble;
  return dtype;
}

// ---------------------------------------------------------------------------------------------
// Comparison

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

struct Comparison {
  bool ok = true;
  bool compared = false;  // any value compared at all
  double max_abs = 0.0;
  double max_rel = 0.0;
  std::string message;  // the first mismatch
  std::optional<double> atol, rtol;  // overrides of default_tolerance
  bool exact_dtypes = false;         // the reference ran in the target's dtypes
  bool shapes_only = false;          // meta target: shapes and dtypes only

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
  const double atol = c.atol.value_or(def_atol), rtol = c.rtol.value_or(def_rtol);
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
      what += " beyond atol " + number_string(atol) + " + rtol " + number_string(rtol) + " * |ref| (max abs error " +
              number_string(max_abs) + ", max rel error " + number_string(max_rel) + ")";
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

// ---------------------------------------------------------------------------------------------
// Timing

inline void synchronize(c10::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : -1);
}

// Milliseconds one call of `fn` takes on `device`: device events on CUDA where libtorch has
// generic ones, else the host clock around synchronizations.
template <class Fn>
double time_ms(c10::Device device, Fn&& fn) {
  if (device.is_cuda() && kHasEventTiming) return event_time_ms(device, fn);
  synchronize(device);
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  synchronize(device);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Bytes to write between timed runs so that no input stays in the last-level cache: twice the
// CPU's L3 (or L2) as the C library reports it, 64 MiB at least; 256 MiB on a GPU (above the
// L2 of current GPUs).
inline int64_t default_flush_bytes(c10::Device device) {
  if (!device.is_cpu()) return int64_t{256} << 20;
  long llc = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
  llc = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
  if (llc <= 0) llc = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  return std::max<int64_t>(int64_t{64} << 20, 2 * static_cast<int64_t>(std::max(llc, 0L)));
}

// ---------------------------------------------------------------------------------------------
// Progress bar on stderr, drawn only on a terminal and only once a replay has run a while.

class ProgressBar {
 public:
  ProgressBar(bool wanted, int64_t total) : enabled_(wanted && total > 1 && ::isatty(STDERR_FILENO) == 1), total_(total) {}
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  ~ProgressBar() { finish(); }

  void update(int64_t done, const std::string& op) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - start_ < std::chrono::milliseconds(300) || now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    constexpr int width = 30;
    const int filled = static_cast<int>(width * done / std::max<int64_t>(total_, 1));
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(width, '.');
    std::string name = op.size() > 40 ? op.substr(0, 37) + "..." : op;
    std::fprintf(stderr, "\r[%s] %lld/%lld %-40s", bar.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total_), name.c_str());
    std::fflush(stderr);
  }

  void finish() {
    if (!drawn_) return;
    std::fprintf(stderr, "\r%*s\r", 30 + 2 + 24 + 40, "");
    std::fflush(stderr);
    drawn_ = false;
  }

 private:
  bool enabled_;
  int64_t total_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_{};
};

// The text of an exception for a report line: libtorch's first line without its backtrace,
// optrace's message without the "optrace: " prefix.
inline std::string describe_exception(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) {
    // "Could not run 'aten::relu' with arguments from the 'Meta' backend. This could be because
    // ..., backends: [CPU, ...]": the first sentence says it all.
    std::string s = first_line(*c);
    const size_t cut = s.find("' backend. ");
    if (s.rfind("Could not run '", 0) == 0 && cut != std::string::npos) s.resize(cut + 10);
    return s;
  }
  std::string s = e.what();
  if (s.rfind("optrace: ", 0) == 0) s.erase(0, 9);
  return s;
}

// Whether `e`, raised by an op on the meta device, says that this libtorch has no meta kernel
// (shape function) for it or for an op it calls, rather than that the arguments are wrong.
// libtorch 1.13 registers many meta kernels only from Python (torch._meta_registrations), so a
// C++ program sees them missing; such ops are skipped in a meta dry run, not failed.
inline bool is_missing_meta_kernel(const c10::Error& e) {
  if (dynamic_cast<const c10::NotImplementedError*>(&e) != nullptr) return true;
  const std::string s = first_line(e);
  return s.find("'Meta' backend") != std::string::npos || s.find("meta tensor") != std::string::npos ||
         s.find("not implemented") != std::string::npos;
}

}  // namespace optrace::detail
