// optrace/replay_types.hpp: how a replay runs (ReplayOptions) and what one replayed input gives (ReplayResult)
#pragma once
// Apart from replay.hpp (the function and its report) so that the machinery in detail/replay/
// can use them.

#include <optrace/error.hpp>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace optrace {

/// What `replay` does with each unique input.
enum class ReplayMode {
  run,    ///< call the op once: does it execute on the device?
  check,  ///< call it, and compare the outputs with a CPU reference (float64 for floating inputs)
  time,   ///< call it `warmup` + `repeats` times and report the median time of the repeats
};

/// The outcome of one unique input.
enum class ReplayStatus {
  ok,        ///< ran (and, in check mode, matched the reference)
  mismatch,  ///< ran, but the outputs differ from the reference beyond the tolerances
  error,     ///< could not run: unknown op, schema mismatch, libtorch error, out of memory, ...
  skipped,   ///< not run (over the memory budget; on meta, no meta kernel in this libtorch), or run
             ///< but not compared (random and creation ops, a CPU reference that cannot run)
};

/// "ok", "mismatch", "error", "skipped".
inline const char* to_string(ReplayStatus s) {
  switch (s) {
    case ReplayStatus::ok: return "ok";
    case ReplayStatus::mismatch: return "mismatch";
    case ReplayStatus::error: return "error";
    case ReplayStatus::skipped: return "skipped";
  }
  return "?";
}

/// "run", "check", "time".
inline const char* to_string(ReplayMode m) {
  switch (m) {
    case ReplayMode::run: return "run";
    case ReplayMode::check: return "check";
    case ReplayMode::time: return "time";
  }
  return "?";
}

/// How `replay` runs a trace. Chained setters, defaults as stated.
///
/// Example:
///   auto opts = optrace::ReplayOptions().device(torch::kCPU).mode(optrace::ReplayMode::check).atol(1e-3);
class ReplayOptions {
 public:
  /// The device every op runs on. Default: CUDA when `torch::cuda::is_available()`, else CPU.
  /// `c10::kMeta` is a dry run: shapes and dtypes only, no memory, no values.
  ReplayOptions& device(c10::Device device) {
    device_ = device;
    return *this;
  }
  c10::Device device() const {
    if (device_) return *device_;
    return torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  }

  /// Run, check or time (see ReplayMode). Default: run.
  ReplayOptions& mode(ReplayMode mode) {
    mode_ = mode;
    return *this;
  }
  ReplayMode mode() const { return mode_; }

  /// Untimed calls before the timed ones (time mode). Default: 2.
  /// Throws `optrace::ArgumentError` for a negative count.
  ReplayOptions& warmup(int n) {
    OPTRACE_CHECK(n >= 0, ArgumentError, "ReplayOptions::warmup: need >= 0, got ", n);
    warmup_ = n;
    return *this;
  }
  int warmup() const { return warmup_; }

  /// Timed calls whose median is reported (time mode). Default: 10.
  /// Throws `optrace::ArgumentError` unless n >= 1.
  ReplayOptions& repeats(int n) {
    OPTRACE_CHECK(n >= 1, ArgumentError, "ReplayOptions::repeats: need >= 1, got ", n);
    repeats_ = n;
    return *this;
  }
  int repeats() const { return repeats_; }

  /// Before each timed call, write a buffer larger than the last-level cache, so that inputs
  /// come from memory as in a real model rather than from the cache. Default: false.
  ReplayOptions& flush_cache(bool on) {
    flush_cache_ = on;
    return *this;
  }
  bool flush_cache() const { return flush_cache_; }

  /// Size of the cache-flush buffer. Default: 0, meaning twice the CPU's last-level cache
  /// (64 MiB at least) on the CPU and 256 MiB on a GPU.
  /// Throws `optrace::ArgumentError` for a negative size.
  ReplayOptions& flush_bytes(int64_t bytes) {
    OPTRACE_CHECK(bytes >= 0, ArgumentError, "ReplayOptions::flush_bytes: need >= 0, got ", bytes);
    flush_bytes_ = bytes;
    return *this;
  }
  int64_t flush_bytes() const { return flush_bytes_; }

  /// Absolute tolerance of the check, for every floating output. An element passes when
  /// |out - ref| <= atol + rtol * |ref|; NaN matches NaN, an infinity the same infinity.
  /// Default: by the output's dtype (float64 1e-7, float32 1e-4, float16 1e-3, bfloat16 1e-2,
  /// float8 0.1) times max(1, RMS of the reference output's finite values), since the rounding
  /// error of reductions grows with their terms' magnitude and length, not with each result
  /// element (detail/replay/compare.hpp says why and what was measured). A value set here is used
  /// as is. Integer and bool outputs are compared exactly.
  /// Throws `optrace::ArgumentError` for a negative or NaN tolerance.
  ReplayOptions& atol(double atol) {
    OPTRACE_CHECK(atol >= 0, ArgumentError, "ReplayOptions::atol: need >= 0, got ", atol);
    atol_ = atol;
    return *this;
  }
  std::optional<double> atol() const { return atol_; }

  /// Relative tolerance of the check. Default: by the output's dtype: float64 1e-7, float32
  /// 1e-4, float16 1e-3, bfloat16 1.6e-2, float8 0.125 (see `atol`).
  /// Throws `optrace::ArgumentError` for a negative or NaN tolerance.
  ReplayOptions& rtol(double rtol) {
    OPTRACE_CHECK(rtol >= 0, ArgumentError, "ReplayOptions::rtol: need >= 0, got ", rtol);
    rtol_ = rtol;
    return *this;
  }
  std::optional<double> rtol() const { return rtol_; }

  /// Seed of the materialized inputs: input i of op `name` is filled from a seed derived from
  /// (seed, name, i), so it gets the same values whatever else is replayed. Default: 0.
  ReplayOptions& seed(uint64_t seed) {
    seed_ = seed;
    return *this;
  }
  uint64_t seed() const { return seed_; }

  /// The most bytes one unique input's tensors may take on the device; an input above it is
  /// skipped (status skipped) before anything is allocated. Default: 4 GiB.
  /// Throws `optrace::ArgumentError` for a negative budget.
  ReplayOptions& memory_budget_bytes(int64_t bytes) {
    OPTRACE_CHECK(bytes >= 0, ArgumentError, "ReplayOptions::memory_budget_bytes: need >= 0, got ", bytes);
    memory_budget_bytes_ = bytes;
    return *this;
  }
  int64_t memory_budget_bytes() const { return memory_budget_bytes_; }

  /// Re-type floating tensors and floating dtype arguments (`{'dtype': f16}`) to `dtype`: PyTorch's
  /// logs are recorded in float16 on CUDA, and a CPU build may lack half kernels
  /// (`OperatorInputsLoader.get_inputs_for_operator(dtype=torch.float32)` does the same; it also
  /// re-types integer dtype arguments, which this leaves alone). Default: none, dtypes as recorded.
  /// Throws `optrace::ArgumentError` for a dtype that is not floating.
  ReplayOptions& float_dtype(std::optional<c10::ScalarType> dtype) {
    OPTRACE_CHECK(!dtype || c10::isFloatingType(*dtype), ArgumentError, "ReplayOptions::float_dtype: need a floating dtype, got ",
                  c10::toString(*dtype));
    float_dtype_ = dtype;
    return *this;
  }
  std::optional<c10::ScalarType> float_dtype() const { return float_dtype_; }

  /// A progress bar on stderr while replaying, drawn only when stderr is a terminal and the
  /// replay runs longer than a moment. Default: true.
  ReplayOptions& progress(bool on) {
    progress_ = on;
    return *this;
  }
  bool progress() const { return progress_; }

  /// Asked before each unique input; when it answers true the replay stops there and its report
  /// says so (`ReplayReport::complete` false): what a program does on SIGINT/SIGTERM to keep the
  /// results it has (the optrace CLI sets a flag in its signal handler). An input already running
  /// finishes first. Default: never stop.
  ReplayOptions& stop_when(std::function<bool()> should_stop) {
    stop_when_ = std::move(should_stop);
    return *this;
  }
  const std::function<bool()>& stop_when() const { return stop_when_; }

  /// Replay only these ops: full names (`"addmm.default"`) or names without the overload
  /// (`"addmm"`, every overload). Default: empty, meaning every op.
  ReplayOptions& ops(std::vector<std::string> names) {
    ops_ = std::move(names);
    return *this;
  }
  const std::vector<std::string>& ops() const { return ops_; }

  /// Leave these ops out (names as in `ops`). Default: none.
  ReplayOptions& exclude_ops(std::vector<std::string> names) {
    exclude_ops_ = std::move(names);
    return *this;
  }
  const std::vector<std::string>& exclude_ops() const { return exclude_ops_; }

  /// Replay at most this many unique inputs per op, the most frequent first. Default: 0, all.
  /// Throws `optrace::ArgumentError` for a negative number.
  ReplayOptions& max_inputs_per_op(int64_t n) {
    OPTRACE_CHECK(n >= 0, ArgumentError, "ReplayOptions::max_inputs_per_op: need >= 0, got ", n);
    max_inputs_per_op_ = n;
    return *this;
  }
  int64_t max_inputs_per_op() const { return max_inputs_per_op_; }

  /// Whether op `name` passes the `ops` / `exclude_ops` filters.
  bool selects(const std::string& name) const {
    auto matches = [&name](const std::vector<std::string>& patterns) {
      return std::any_of(patterns.begin(), patterns.end(), [&name](const std::string& p) { return names(p, name); });
    };
    return (ops_.empty() || matches(ops_)) && !matches(exclude_ops_);
  }
  /// Whether `pattern`, as `ops` / `exclude_ops` take it, names op `name`: the full name
  /// (`"addmm.default"`) or the name without the overload (`"addmm"`).
  static bool names(std::string_view pattern, std::string_view name) {
    return pattern == name || pattern == name.substr(0, name.find('.'));
  }

 private:
  std::optional<c10::Device> device_;
  ReplayMode mode_ = ReplayMode::run;
  int warmup_ = 2;
  int repeats_ = 10;
  bool flush_cache_ = false;
  int64_t flush_bytes_ = 0;
  std::optional<double> atol_, rtol_;
  uint64_t seed_ = 0;
  int64_t memory_budget_bytes_ = int64_t{4} << 30;
  std::optional<c10::ScalarType> float_dtype_;
  bool progress_ = true;
  std::function<bool()> stop_when_;
  std::vector<std::string> ops_, exclude_ops_;
  int64_t max_inputs_per_op_ = 0;
};

/// The outcome of replaying one unique input.
struct ReplayResult {
  std::string op;      ///< "addmm.default"
  int64_t index = 0;   ///< position among the op's unique inputs, in the JSON's order (count descending)
  int64_t count = 0;   ///< calls the trace recorded with this input
  std::string inputs;  ///< the input in one line: "f32[5], f32[2, 20], f32[20, 5]"
  ReplayStatus status = ReplayStatus::ok;
  std::string message;  ///< why it is not ok, or a note ("in-place: fresh inputs for every run")
  std::optional<double> max_abs_error;  ///< check mode: max |out - ref| over all outputs
  std::optional<double> max_rel_error;  ///< check mode: max |out - ref| / |ref| where |ref| > atol
  std::optional<double> median_ms;      ///< time mode: median of the timed calls, milliseconds
};

}  // namespace optrace
