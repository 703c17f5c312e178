// optrace/replay.hpp: run every unique input of an op trace through the dispatcher; check and time it
#pragma once

#include <optrace/detail/compat.hpp>
#include <optrace/detail/io.hpp>
#include <optrace/detail/replay_args.hpp>
#include <optrace/detail/replay_run.hpp>
#include <optrace/error.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/materialize.hpp>
#include <optrace/op_trace.hpp>

#include <c10/core/GradMode.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iomanip>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <unordered_map>
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

  /// Absolute tolerance of the check, for every floating output. Default: by the output's
  /// dtype: float64 1e-7, float32 1e-4, float16 1e-3, bfloat16 1e-2, float8 0.1; integer and
  /// bool outputs are compared exactly. An element passes when
  /// |out - ref| <= atol + rtol * |ref|; NaN matches NaN, an infinity the same infinity.
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

  /// A progress bar on stderr while replaying, drawn only when stderr is a terminal and the
  /// replay runs longer than a moment. Default: true.
  ReplayOptions& progress(bool on) {
    progress_ = on;
    return *this;
  }
  bool progress() const { return progress_; }

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
      const std::string base = name.substr(0, name.find('.'));
      for (const std::string& p : patterns)
        if (p == name || p == base) return true;
      return false;
    };
    return (ops_.empty() || matches(ops_)) && !matches(exclude_ops_);
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
  bool progress_ = true;
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

/// What `replay` found: one result per unique input replayed, ops in the trace's order, each
/// op's inputs in the JSON's order.
class ReplayReport {
 public:
  std::vector<ReplayResult> results;
  c10::Device device = c10::Device(c10::kCPU);
  ReplayMode mode = ReplayMode::run;
  double seconds = 0.0;  ///< wall time of the whole replay

  /// Results with status `s`.
  int64_t num(ReplayStatus s) const {
    return std::count_if(results.begin(), results.end(), [s](const ReplayResult& r) { return r.status == s; });
  }
  /// No error and no mismatch.
  bool all_ok() const { return num(ReplayStatus::error) == 0 && num(ReplayStatus::mismatch) == 0; }
  /// "9 ok, 0 mismatch, 0 error, 0 skipped (9 unique inputs on cpu, check mode, 0.01 s)"
  std::string summary() const {
    std::ostringstream out;
    out << num(ReplayStatus::ok) << " ok, " << num(ReplayStatus::mismatch) << " mismatch, " << num(ReplayStatus::error)
        << " error, " << num(ReplayStatus::skipped) << " skipped (" << results.size() << " unique inputs on " << device
        << ", " << to_string(mode) << " mode, " << std::fixed << std::setprecision(2) << seconds << " s)";
    return out.str();
  }

  /// The report as JSON: `{"device", "mode", "seconds", "summary": {"ok", "mismatch", "error",
  /// "skipped", "total"}, "results": [{"op", "index", "count", "inputs", "status", "message",
  /// "max_abs_error", "max_rel_error", "median_ms"}]}`; numbers not measured are null.
  std::string to_json(int indent = 1) const {
    json::Writer w(indent);
    auto opt = [&w](const std::optional<double>& d) -> json::Writer& { return d ? w.value(*d) : w.null(); };
    w.begin_object();
    w.key("device").value(device.str());
    w.key("mode").value(to_string(mode));
    w.key("seconds").value(seconds);
    w.key("summary").begin_object();
    for (ReplayStatus s : {ReplayStatus::ok, ReplayStatus::mismatch, ReplayStatus::error, ReplayStatus::skipped})
      w.key(to_string(s)).value(num(s));
    w.key("total").value(static_cast<int64_t>(results.size()));
    w.end_object();
    w.key("results").begin_array();
    for (const ReplayResult& r : results) {
      w.begin_object();
      w.key("op").value(r.op);
      w.key("index").value(r.index);
      w.key("count").value(r.count);
      w.key("inputs").value(r.inputs);
      w.key("status").value(to_string(r.status));
      w.key("message").value(r.message);
      w.key("max_abs_error");
      opt(r.max_abs_error);
      w.key("max_rel_error");
      opt(r.max_rel_error);
      w.key("median_ms");
      opt(r.median_ms);
      w.end_object();
    }
    w.end_array();
    w.end_object();
    return w.take();
  }

  /// The results as CSV (RFC 4180, header `op,index,count,status,max_abs_error,max_rel_error,
  /// median_ms,inputs,message`); numbers not measured are empty fields.
  std::string to_csv() const {
    std::string out = "op,index,count,status,max_abs_error,max_rel_error,median_ms,inputs,message\n";
    auto field = [&out](const std::string& s) {
      if (s.find_first_of(",\"\n\r") == std::string::npos) {
        out += s;
        return;
      }
      out += '"';
      for (char c : s) {
        if (c == '"') out += '"';
        out += c;
      }
      out += '"';
    };
    auto number = [&out](const std::optional<double>& d) {
      if (d) json::Writer::append_double(out, *d);
    };
    for (const ReplayResult& r : results) {
      field(r.op);
      out += ',' + std::to_string(r.index) + ',' + std::to_string(r.count) + ',' + to_string(r.status) + ',';
      number(r.max_abs_error);
      out += ',';
      number(r.max_rel_error);
      out += ',';
      number(r.median_ms);
      out += ',';
      field(r.inputs);
      out += ',';
      field(r.message);
      out += '\n';
    }
    return out;
  }

  /// Prints the results as an aligned table (error columns in check mode, the median in time
  /// mode), then the summary line.
  void print_table(std::ostream& out) const {
    auto cut = [](const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; };
    auto num = [](const std::optional<double>& d) { return d ? detail::number_string(*d) : std::string("-"); };
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> head = {"op", "#", "count", "status"};
    if (mode == ReplayMode::check) head.insert(head.end(), {"max abs", "max rel"});
    if (mode == ReplayMode::time) head.push_back("median ms");
    head.insert(head.end(), {"inputs", "message"});
    rows.push_back(head);
    for (const ReplayResult& r : results) {
      std::vector<std::string> row = {r.op, std::to_string(r.index), std::to_string(r.count), to_string(r.status)};
      if (mode == ReplayMode::check) row.insert(row.end(), {num(r.max_abs_error), num(r.max_rel_error)});
      if (mode == ReplayMode::time) {
        std::ostringstream ms;
        if (r.median_ms) ms << std::fixed << std::setprecision(4) << *r.median_ms;
        row.push_back(r.median_ms ? ms.str() : "-");
      }
      row.insert(row.end(), {cut(r.inputs, 48), cut(r.message, 100)});
      rows.push_back(std::move(row));
    }
    std::vector<size_t> width(head.size(), 0);
    for (const auto& row : rows)
      for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
    for (const auto& row : rows) {
      std::string line;
      for (size_t i = 0; i < row.size(); ++i) {
        const bool right = head[i] == "#" || head[i] == "count" || head[i] == "max abs" || head[i] == "max rel" ||
                           head[i] == "median ms";
        const std::string pad(width[i] - row[i].size(), ' ');
        if (i + 1 == row.size()) line += row[i];
        else line += (right ? pad + row[i] : row[i] + pad) + "  ";
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out << line << '\n';
    }
    out << summary() << '\n';
  }

  /// Writes `to_json()` to `path` atomically. Throws `optrace::IoError`.
  void save_json(const std::string& path) const { detail::write_file_atomic(path, to_json() + "\n"); }
  /// Writes `to_csv()` to `path` atomically. Throws `optrace::IoError`.
  void save_csv(const std::string& path) const { detail::write_file_atomic(path, to_csv()); }
};

namespace detail {

// Replays one unique input; never throws for the input's own failures (they become the result).
// `no_meta`: ops already found without a meta kernel, with the message: on libtorch 1.13 a
// c10::Error costs milliseconds (its backtrace is symbolized when made), so each such op raises
// one, not one per input.
inline ReplayResult replay_input(const std::string& op, const OpInput& in, int64_t index, const ReplayOptions& options,
                                 c10::Device device, std::optional<at::Tensor>& flush_buffer,
                                 std::unordered_map<std::string, std::string>& no_meta) {
  ReplayResult r;
  r.op = op;
  r.index = index;
  r.count = in.count;
  r.inputs = describe_input(in);
  const ReplayMode mode = options.mode();
  if (auto it = no_meta.find(op); it != no_meta.end() && device.type() == c10::kMeta) {
    r.status = ReplayStatus::skipped;
    r.message = it->second;
    return r;
  }
  try {
    const CallPlan plan = PlanBuilder(in, device).build(op);
    const int64_t bytes = plan_bytes(plan, device);
    if (bytes > options.memory_budget_bytes()) {
      r.status = ReplayStatus::skipped;
      r.message = "inputs need " + human_bytes(bytes) + " on " + device.str() + ", over the memory budget of " +
                  human_bytes(options.memory_budget_bytes());
      return r;
    }
    const bool random = is_random_op(plan.base), creation = is_creation_op(plan.base);
    const uint64_t seed = input_seed(options.seed(), op, index);
    const bool meta = device.type() == c10::kMeta;
    std::vector<at::Tensor> inputs = materialize_plan(plan, device, seed, options.memory_budget_bytes());
    bool compare = mode == ReplayMode::check && !random && !creation;
    std::string not_compared;
    if (compare) {
      const int64_t ref_bytes = reference_bytes(plan, /*upcast=*/!meta);
      if (ref_bytes > options.memory_budget_bytes()) {
        compare = false;
        not_compared = "ran; not compared: the CPU reference needs " + human_bytes(ref_bytes) +
                       ", over the memory budget of " + human_bytes(options.memory_budget_bytes());
      }
    }
    std::vector<at::Tensor> reference;
    if (compare)  // before the target runs: in-place and out= ops write their inputs
      reference = meta ? materialize_plan(plan, c10::kCPU, seed, options.memory_budget_bytes())
                       : reference_copies(inputs, /*upcast=*/true);

    torch::jit::Stack stack = build_stack(plan, inputs, device, plan.out_dtype);
    if (mode != ReplayMode::time) {
      plan.op.callBoxed(&stack);
    } else {
      const torch::jit::Stack args = stack;
      auto fresh = [&]() {  // in-place and out= ops: new inputs for every call
        if (plan.mutates) stack = build_stack(plan, materialize_plan(plan, device, seed, options.memory_budget_bytes()), device, plan.out_dtype);
        else stack = args;
      };
      for (int i = 0; i < options.warmup(); ++i) {
        if (i > 0) fresh();
        plan.op.callBoxed(&stack);
      }
      std::vector<double> ms;
      for (int i = 0; i < options.repeats(); ++i) {
        if (i > 0 || options.warmup() > 0) fresh();
        if (options.flush_cache() && !meta) {
          if (!flush_buffer) {
            const int64_t n = options.flush_bytes() > 0 ? options.flush_bytes() : default_flush_bytes(device);
            flush_buffer = at::empty({n}, at::TensorOptions().device(device).dtype(c10::ScalarType::Byte));
          }
          flush_buffer->fill_(static_cast<int64_t>(i & 0x7f));
        }
        ms.push_back(time_ms(device, [&]() { plan.op.callBoxed(&stack); }));
      }
      std::sort(ms.begin(), ms.end());
      const size_t n = ms.size();
      r.median_ms = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
    }

    if (mode == ReplayMode::check && (random || creation || !not_compared.empty())) {
      r.status = ReplayStatus::skipped;
      r.message = random     ? "random op: ran, outputs not compared (they depend on the random state)"
                  : creation ? "creation op: ran, outputs not compared (uninitialized memory)"
                             : not_compared;
      return r;
    }
    if (compare) {
      Comparison c;
      c.atol = options.atol();
      c.rtol = options.rtol();
      c.shapes_only = meta;
      c.exact_dtypes = meta;
      torch::jit::Stack ref = build_stack(plan, reference, c10::kCPU, reference_dtype(plan.out_dtype, !meta));
      std::string note;
      try {
        plan.op.callBoxed(&ref);
      } catch (const c10::Error& first) {
        if (meta) throw;
        // Some kernels take only the recorded dtypes (half_to_float softmax, fp8 matmuls):
        // compare with the CPU in those dtypes instead.
        std::vector<at::Tensor> again = materialize_plan(plan, device, seed, options.memory_budget_bytes());
        ref = build_stack(plan, reference_copies(again, /*upcast=*/false), c10::kCPU, plan.out_dtype);
        try {
          plan.op.callBoxed(&ref);
        } catch (const c10::Error& second) {
          r.status = ReplayStatus::skipped;
          r.message = "ran on " + device.str() + "; not compared: the CPU reference failed: " + first_line(second);
          return r;
        }
        c.exact_dtypes = true;
        note = "reference in the recorded dtypes (float64 failed: " + first_line(first) + ")";
      }
      compare_stacks(stack, ref, c);
      if (!meta && c.compared) {
        r.max_abs_error = c.max_abs;
        r.max_rel_error = c.max_rel;
      }
      r.status = c.ok ? ReplayStatus::ok : ReplayStatus::mismatch;
      r.message = c.ok ? note : c.message;
      if (c.ok && meta) r.message = "shapes and dtypes match the CPU";
      return r;
    }
    if (plan.mutates && mode == ReplayMode::time) r.message = "writes its inputs: fresh inputs for every call";
  } catch (const c10::Error& e) {
    const bool missing = device.type() == c10::kMeta && is_missing_meta_kernel(e);
    r.status = missing ? ReplayStatus::skipped : ReplayStatus::error;
    r.message = (missing ? "no meta kernel in this libtorch: " : "") + describe_exception(e);
    if (missing) no_meta.emplace(op, r.message);
  } catch (const std::exception& e) {  // c10::Error (OOM included), optrace errors, std errors
    r.status = ReplayStatus::error;
    r.message = describe_exception(e);
  } catch (...) {
    r.status = ReplayStatus::error;
    r.message = "unknown exception";
  }
  return r;
}

}  // namespace detail

/// Replays `trace`: for each unique input of each selected op, materializes its tensors on the
/// options' device (seeded; integer arguments that index other arguments drawn within range,
/// from a table of per-op rules and the trace's recorded value ranges), rebuilds the call from
/// the op's schema (omitted arguments take their defaults, keyword arguments of extended traces
/// their recorded values) and calls the op through the dispatcher; in check mode compares the
/// outputs with the CPU in float64, in time mode reports the median time. In-place and out= ops
/// get fresh inputs for every call; random and creation ops run but are not compared.
///
/// A failing input (unknown op, schema mismatch, libtorch error, out of memory) is reported in
/// its result and the replay goes on: per-input failures never throw. Throws only what the
/// device setup throws (a CUDA device asked for and absent: `optrace::ArgumentError`).
///
/// Example:
///   optrace::OpTrace trace = optrace::OpTrace::load("hf_op_trace.json");
///   optrace::ReplayReport report = optrace::replay(trace, optrace::ReplayOptions().mode(optrace::ReplayMode::check));
///   report.print_table(std::cout);
///   report.save_json("replay.json");
inline ReplayReport replay(const OpTrace& trace, const ReplayOptions& options = {}) {
  const auto start = std::chrono::steady_clock::now();
  ReplayReport report;
  report.device = options.device();
  report.mode = options.mode();
  OPTRACE_CHECK(!report.device.is_cuda() || torch::cuda::is_available(), ArgumentError,
                "replay: device ", report.device, " asked for, but libtorch sees no CUDA device");
  c10::NoGradGuard no_grad;

  std::vector<std::pair<const OpEntry*, std::vector<const OpInput*>>> work;
  int64_t total = 0;
  for (const OpEntry& e : trace.ops()) {
    if (!options.selects(e.name)) continue;
    std::vector<const OpInput*> inputs = e.by_count();
    if (options.max_inputs_per_op() > 0 && static_cast<int64_t>(inputs.size()) > options.max_inputs_per_op())
      inputs.resize(static_cast<size_t>(options.max_inputs_per_op()));
    total += static_cast<int64_t>(inputs.size());
    work.emplace_back(&e, std::move(inputs));
  }
  report.results.reserve(static_cast<size_t>(total));
  detail::ProgressBar progress(options.progress(), total);
  std::optional<at::Tensor> flush_buffer;
  std::unordered_map<std::string, std::string> no_meta;
  for (const auto& [entry, inputs] : work) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      progress.update(static_cast<int64_t>(report.results.size()), entry->name);
      report.results.push_back(
          detail::replay_input(entry->name, *inputs[i], static_cast<int64_t>(i), options, report.device, flush_buffer,
                               no_meta));
    }
  }
  progress.finish();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace optrace
