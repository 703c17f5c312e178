// optrace/materialize.hpp: tensors rebuilt from recorded specs, filled with seeded random values
#pragma once

#include <optrace/detail/common/compat.hpp>
#include <optrace/detail/common/error_text.hpp>
#include <optrace/detail/materialize/fill.hpp>
#include <optrace/error.hpp>
#include <optrace/tensor_spec.hpp>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace optrace {

/// How `Materializer` and `materialize` build tensors: where, from which seed, with which
/// values, and how much memory they may take. Chained setters, defaults as stated.
///
/// Fill rules, by dtype:
/// - floating (float16, bfloat16, float32, float64): normal(mean, std) (default normal(0, 1),
///   what `torch::randn` draws) or uniform [low, high);
/// - float8 (libtorch 2.1+): drawn like float32 on the same device, then converted;
/// - complex (complex32, complex64, complex128): real and imaginary parts each drawn as floats;
/// - integers (uint8, int8, int16, int32, int64; uint16/32/64 on libtorch 2.3+): uniform in
///   `int_range` [low, high), default [0, 8) (`Observations::materialize` draws an input within
///   the values its observation file records, unless `int_range` is set);
/// - bool: true with probability `bool_probability` (default 0.5);
/// - quantized and other dtypes: `MaterializeError` naming the dtype.
///
/// Example:
///   auto opts = optrace::MaterializeOptions().device(torch::kCUDA).seed(7).uniform(-1, 1);
class MaterializeOptions {
 public:
  /// How floating values are drawn.
  enum class FloatFill { normal, uniform };

  /// The device every tensor is allocated and filled on, whatever device its spec records.
  /// Default: CPU (always present; ask for `torch::kCUDA` or `c10::kMeta` explicitly). A CUDA
  /// device without an index means the current CUDA device.
  MaterializeOptions& device(c10::Device device) {
    device_ = device;
    return *this;
  }
  c10::Device device() const { return device_; }

  /// The base seed. Tensor number i (its "stream", see `Materializer::tensor`) is filled from a
  /// seed derived from (seed, i), so the same seed gives the same values on the same device and
  /// libtorch, whatever else was materialized before. Default: 0.
  MaterializeOptions& seed(uint64_t seed) {
    seed_ = seed;
    return *this;
  }
  uint64_t seed() const { return seed_; }

  /// Floating values drawn from a normal distribution (the default: mean 0, std 1).
  /// Throws `optrace::ArgumentError` for a negative or non-finite `std`.
  MaterializeOptions& normal(double mean = 0.0, double std = 1.0) {
    OPTRACE_CHECK(std >= 0 && std < std::numeric_limits<double>::infinity(), ArgumentError,
                  "MaterializeOptions::normal: std must be finite and >= 0, got ", std);
    float_fill_ = FloatFill::normal;
    float_a_ = mean;
    float_b_ = std;
    return *this;
  }
  /// Floating values drawn uniformly from [low, high) (default when chosen: [0, 1), what
  /// `torch::rand` draws). Throws `optrace::ArgumentError` unless low <= high, both finite.
  MaterializeOptions& uniform(double low = 0.0, double high = 1.0) {
    OPTRACE_CHECK(low <= high && std::isfinite(low) && std::isfinite(high), ArgumentError,
                  "MaterializeOptions::uniform: need finite low <= high, got [", low, ", ", high, ")");
    float_fill_ = FloatFill::uniform;
    float_a_ = low;
    float_b_ = high;
    return *this;
  }
  FloatFill float_fill() const { return float_fill_; }
  /// Mean and std of the normal fill (meaningful when `float_fill()` is `normal`).
  double normal_mean() const { return float_a_; }
  double normal_std() const { return float_b_; }
  /// Bounds of the uniform fill (meaningful when `float_fill()` is `uniform`).
  double uniform_low() const { return float_a_; }
  double uniform_high() const { return float_b_; }

  /// Integer values drawn uniformly from [low, high). Default: [0, 8): non-negative and small,
  /// so integer inputs are valid sizes, valid indices into any dim of 8 or more (embedding
  /// ids, gather/index_select indices, positions), and fit every integer dtype, uint8 and int8
  /// included. Use [1, n) where a zero would divide. A range the dtype cannot hold is refused
  /// at materialization with `MaterializeError`.
  /// An observation file's integer inputs are drawn within the values it recorded for them
  /// (`Observations::materialize`) unless `int_range` is set: then they take this range too.
  /// Throws `optrace::ArgumentError` unless low < high.
  MaterializeOptions& int_range(int64_t low, int64_t high) {
    OPTRACE_CHECK(low < high, ArgumentError, "MaterializeOptions::int_range: need low < high, got [", low, ", ",
                  high, ")");
    int_low_ = low;
    int_high_ = high;
    int_range_set_ = true;
    return *this;
  }
  int64_t int_low() const { return int_low_; }
  int64_t int_high() const { return int_high_; }
  /// Whether `int_range` was called (even with the default [0, 8)): it then wins over the
  /// ranges an observation file records.
  bool int_range_set() const { return int_range_set_; }

  /// Probability that a bool element is true. Default: 0.5.
  /// Throws `optrace::ArgumentError` outside [0, 1].
  MaterializeOptions& bool_probability(double p) {
    OPTRACE_CHECK(p >= 0 && p <= 1, ArgumentError, "MaterializeOptions::bool_probability: need 0 <= p <= 1, got ", p);
    bool_probability_ = p;
    return *this;
  }
  double bool_probability() const { return bool_probability_; }

  /// The most bytes of storage one request may allocate (one `Materializer::tensor` call, or
  /// the sum over one `tensors` / `check_budget` / vector `materialize` call); a request above
  /// it is refused with `MaterializeError` before anything is allocated. Meta tensors take no
  /// memory and do not count. Default: 4 GiB.
  /// Throws `optrace::ArgumentError` for a negative budget.
  MaterializeOptions& memory_budget_bytes(int64_t bytes) {
    OPTRACE_CHECK(bytes >= 0, ArgumentError, "MaterializeOptions::memory_budget_bytes: need >= 0, got ", bytes);
    memory_budget_bytes_ = bytes;
    return *this;
  }
  int64_t memory_budget_bytes() const { return memory_budget_bytes_; }

 private:
  c10::Device device_ = c10::Device(c10::kCPU);
  uint64_t seed_ = 0;
  FloatFill float_fill_ = FloatFill::normal;
  double float_a_ = 0.0;
  double float_b_ = 1.0;
  int64_t int_low_ = 0;
  int64_t int_high_ = 8;
  bool int_range_set_ = false;
  double bool_probability_ = 0.5;
  int64_t memory_budget_bytes_ = int64_t{4} << 30;
};

/// Elements of storage a strided `spec` addresses: `storage_offset + 1 + sum((size_i - 1) *
/// stride_i)`, or `storage_offset` when a size is 0. Empty `strides` stand for contiguous ones.
/// Throws `optrace::ShapeError` for negative sizes, strides or offset, strides of another rank
/// than sizes, or an extent that overflows int64.
inline int64_t storage_elements(const TensorSpec& spec) { return detail::storage_elements(spec, {spec, std::nullopt}); }

/// Builds tensors from specs: allocated directly on the options' device with the spec's
/// sizes, strides and storage offset (the storage spans the true extent, so expanded tensors,
/// with stride 0, get their small storage filled, not a dense copy), filled in place there from
/// a generator seeded per tensor, with `requires_grad` restored on floating and complex
/// tensors (ignored on others, which autograd refuses). On the meta device the tensors have
/// shapes and strides and no memory. Not thread-safe: one Materializer per thread.
///
/// Example:
///   optrace::Materializer m(optrace::MaterializeOptions().device(torch::kCUDA).seed(1));
///   at::Tensor x = m.tensor(spec_x), y = m.tensor(spec_y);  // streams 0 and 1
class Materializer {
 public:
  explicit Materializer(MaterializeOptions options = {}) : options_(std::move(options)) {}

  const MaterializeOptions& options() const { return options_; }

  /// The tensor `spec` describes, filled from the next stream (0 for the first call, then 1,
  /// 2, ...): materializing the same specs in the same order gives the same tensors.
  /// Throws what `tensor(spec, stream)` throws.
  at::Tensor tensor(const TensorSpec& spec) { return tensor(spec, next_stream_++); }

  /// The tensor `spec` describes, filled from stream `stream`: its values depend only on the
  /// seed, the stream, the spec, the device and libtorch, not on the order of calls.
  /// Throws `optrace::MaterializeError` for a non-strided layout, a dtype without a fill
  /// (quantized, ...), an integer range the dtype cannot hold, a storage over the memory
  /// budget (before allocating), or a libtorch failure (device missing, out of memory; the
  /// `c10::Error` is nested); `optrace::ShapeError` for sizes/strides/offset that describe no
  /// tensor (see `storage_elements`).
  at::Tensor tensor(const TensorSpec& spec, uint64_t stream) {
    return tensor(spec, stream, options_.int_low(), options_.int_high());
  }

  /// As `tensor(spec, stream)`, with an integer spec's values drawn from [int_low, int_high)
  /// in place of the options' `int_range` (other dtypes ignore it): `Observations::materialize`
  /// passes the values an observation file records for the input this way.
  /// Throws what `tensor(spec, stream)` throws, and `optrace::ArgumentError` unless
  /// int_low < int_high.
  at::Tensor tensor(const TensorSpec& spec, uint64_t stream, int64_t int_low, int64_t int_high) {
    OPTRACE_CHECK(int_low < int_high, ArgumentError, "Materializer::tensor: need int_low < int_high, got [", int_low,
                  ", ", int_high, ")");
    const detail::Where where{spec, stream};
    const detail::FillKind kind = check(spec, where, int_low, int_high);
    const int64_t elements = detail::storage_elements(spec, where);
    const int64_t bytes = bytes_of(spec, elements, where);
    OPTRACE_CHECK(bytes <= options_.memory_budget_bytes(), MaterializeError, where, " needs ",
                  detail::human_bytes(bytes), " on ", options_.device(), ", over the memory budget of ",
                  detail::human_bytes(options_.memory_budget_bytes()),
                  "; raise MaterializeOptions::memory_budget_bytes or materialize on the meta device");
    try {
      const auto opts = at::TensorOptions().dtype(spec.dtype).device(options_.device());
      at::Tensor storage = at::empty({elements}, opts);
      if (options_.device().type() != c10::kMeta && elements > 0) {
        at::Generator& gen = generator();
        {
          std::lock_guard<std::mutex> lock(gen.mutex());
          gen.set_current_seed(detail::stream_seed(options_.seed(), stream));
        }
        detail::fill_storage(storage, kind, fill_params(int_low, int_high), gen);
      }
      at::Tensor t = at::empty({0}, storage.options());
      t.set_(storage.storage(), spec.storage_offset, spec.sizes, detail::effective_strides(spec));
      if (spec.requires_grad && (c10::isFloatingType(spec.dtype) || c10::isComplexType(spec.dtype)))
        t.set_requires_grad(true);
      return t;
    } catch (const c10::Error& e) {
      detail::raise<MaterializeError>(where, ": libtorch failed on ", options_.device(), ": ", detail::first_line(e));
    }
  }

  /// The tensors `specs` describe, from the next `specs.size()` streams. The whole request is
  /// checked first (`check_budget`): nothing is allocated when any spec is invalid or the sum
  /// is over the budget.
  /// Throws what `check_budget` and `tensor` throw.
  std::vector<at::Tensor> tensors(const std::vector<TensorSpec>& specs) {
    check_budget(specs);
    std::vector<at::Tensor> out;
    out.reserve(specs.size());
    for (const auto& spec : specs) out.push_back(tensor(spec));
    return out;
  }

  /// Checks, without allocating, that every spec can be materialized (layout, dtype, shape)
  /// and that together they fit in the memory budget; a loader calls it before materializing
  /// tensors one by one. Specs are numbered from the next stream, as `tensors` would.
  /// Throws `optrace::MaterializeError` (the message gives the count and total bytes) or
  /// `optrace::ShapeError`, as `tensor` would.
  void check_budget(const std::vector<TensorSpec>& specs) const {
    int64_t total = 0;
    bool overflow = false;
    for (size_t i = 0; i < specs.size(); ++i) {
      const detail::Where where{specs[i], next_stream_ + i};
      check(specs[i], where);
      const int64_t bytes = bytes_of(specs[i], detail::storage_elements(specs[i], where), where);
      overflow = overflow || __builtin_add_overflow(total, bytes, &total);
    }
    OPTRACE_CHECK(!overflow && total <= options_.memory_budget_bytes(), MaterializeError, specs.size(),
                  " tensors need ", overflow ? std::string("more than 2^63 bytes") : detail::human_bytes(total),
                  " on ", options_.device(), ", over the memory budget of ",
                  detail::human_bytes(options_.memory_budget_bytes()),
                  "; raise MaterializeOptions::memory_budget_bytes or materialize on the meta device");
  }

  /// Bytes of storage `spec` takes on the options' device: 0 on meta.
  /// Throws `optrace::ShapeError` as `storage_elements` does, `MaterializeError` on overflow.
  int64_t bytes(const TensorSpec& spec) const {
    const detail::Where where{spec, std::nullopt};
    return bytes_of(spec, detail::storage_elements(spec, where), where);
  }

 private:
  detail::FillKind check(const TensorSpec& spec, const detail::Where& where) const {
    return check(spec, where, options_.int_low(), options_.int_high());
  }
  detail::FillKind check(const TensorSpec& spec, const detail::Where& where, int64_t int_low, int64_t int_high) const {
    OPTRACE_CHECK(spec.layout == c10::kStrided, MaterializeError, where, ": layout ", spec.layout,
                  " cannot be materialized (only strided tensors can)");
    const detail::FillKind kind = detail::fill_kind(spec.dtype, where);
    if (kind == detail::FillKind::integer || kind == detail::FillKind::unsigned_proxy) {
      const auto [lo, hi] = detail::integer_limits(spec.dtype);
      OPTRACE_CHECK(int_low >= lo && int_high - 1 <= hi, MaterializeError, where, ": int_range [", int_low, ", ",
                    int_high, ") does not fit dtype ", c10::toString(spec.dtype), " (values ", lo, " to ", hi, ")");
    }
    return kind;
  }

  int64_t bytes_of(const TensorSpec& spec, int64_t elements, const detail::Where& where) const {
    if (options_.device().type() == c10::kMeta) return 0;
    int64_t bytes = 0;
    OPTRACE_CHECK(!__builtin_mul_overflow(elements, static_cast<int64_t>(c10::elementSize(spec.dtype)), &bytes),
                  MaterializeError, where, ": storage size in bytes overflows int64");
    return bytes;
  }

  detail::FillParams fill_params(int64_t int_low, int64_t int_high) const {
    detail::FillParams p;
    p.uniform = options_.float_fill() == MaterializeOptions::FloatFill::uniform;
    p.mean_or_low = options_.normal_mean();
    p.std_or_high = options_.normal_std();
    p.int_low = int_low;
    p.int_high = int_high;
    p.bool_probability = options_.bool_probability();
    return p;
  }

  // A private generator of the device's kind, so that seeding it never disturbs the user's
  // global random state (torch::manual_seed sequences stay as they were).
  // CPU gets a new generator rather than a clone of the global one: libtorch 1.13's
  // GeneratorImpl::clone leaves the clone's weak count at 0, so it is never freed (LeakSanitizer
  // reports it); createCPUGenerator goes through make_generator and is freed normally.
  at::Generator& generator() {
    if (!generator_) {
      if (options_.device().is_cpu()) {
        generator_ = at::detail::createCPUGenerator();
      } else {
        at::Generator global = at::globalContext().defaultGenerator(options_.device());
        std::lock_guard<std::mutex> lock(global.mutex());
        generator_ = global.clone();
      }
    }
    return *generator_;
  }

  MaterializeOptions options_;
  std::optional<at::Generator> generator_;
  uint64_t next_stream_ = 0;
};

/// The tensor `spec` describes, built with `options` from stream 0 (see `Materializer`).
/// Throws what `Materializer::tensor` throws.
///
/// Example:
///   optrace::TensorSpec spec{{2, 3}, {3, 1}};
///   at::Tensor x = optrace::materialize(spec, optrace::MaterializeOptions().seed(1));
inline at::Tensor materialize(const TensorSpec& spec, const MaterializeOptions& options = {}) {
  return Materializer(options).tensor(spec, 0);
}

/// The tensors `specs` describe, from streams 0, 1, ...; the whole request is checked against
/// the budget before anything is allocated. Throws what `Materializer::tensors` throws.
inline std::vector<at::Tensor> materialize(const std::vector<TensorSpec>& specs, const MaterializeOptions& options = {}) {
  return Materializer(options).tensors(specs);
}

}  // namespace optrace
