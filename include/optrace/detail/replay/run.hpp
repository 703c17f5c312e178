// optrace/detail/replay/run.hpp: materializing a call plan, comparing outputs, timing, progress
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

#include <optrace/detail/common/compat.hpp>
#include <optrace/detail/common/error_text.hpp>
#include <optrace/detail/common/progress.hpp>
#include <optrace/detail/common/string_map.hpp>
#include <optrace/detail/materialize/fill.hpp>
#include <optrace/detail/replay/compare.hpp>
#include <optrace/detail/replay/describe.hpp>
#include <optrace/detail/replay/plan.hpp>
#include <optrace/materialize.hpp>
#include <optrace/op_trace.hpp>
#include <optrace/replay_types.hpp>

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
#include <unordered_map>
#include <vector>

#include <unistd.h>

namespace optrace::detail {

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

// Whether `e` says the op has no kernel for `device` in this build (a CUDA-only op such as
// `_cudnn_rnn` replayed on the CPU, as PyTorch's logs recorded on CUDA have): a gap of the
// build, not a failure of the kernel.
inline bool is_missing_kernel(const c10::Error& e, c10::Device device) {
  if (device.type() == c10::kMeta) return is_missing_meta_kernel(e);
  const std::string backend = device.is_cuda() ? "CUDA" : device.is_cpu() ? "CPU" : "";
  return !backend.empty() && first_line(e).find("with arguments from the '" + backend + "' backend") != std::string::npos;
}

// The median of `v` (0 when empty): of an even count, the mean of the middle two.
inline double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The median milliseconds of the timed calls of `stack`, after the warmup ones; in-place and out=
// ops get fresh inputs for every call, and with flush_cache the cache is overwritten before each
// timed one.
inline double median_call_ms(const CallPlan& plan, torch::jit::Stack& stack, c10::Device device, uint64_t seed,
                             const ReplayOptions& options, std::optional<at::Tensor>& flush_buffer) {
  const bool meta = device.type() == c10::kMeta;
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
  return median_of(std::move(ms));
}

// The target's outputs (`stack`) against the CPU reference run on `reference`, into `r`'s status
// and message. The reference runs in float64 where it can, else in the recorded dtypes (some
// kernels take only those); on meta only shapes and dtypes are compared.
inline void compare_with_reference(const CallPlan& plan, const torch::jit::Stack& stack, const std::vector<at::Tensor>& reference,
                                   c10::Device device, uint64_t seed, const ReplayOptions& options, ReplayResult& r) {
  const bool meta = device.type() == c10::kMeta;
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
      return;
    }
    c.exact_dtypes = true;
    note = "reference in the recorded dtypes (float64 failed: " + first_line(first) + ")";
  }
  compare_stacks(stack, ref, c);
  if (c.ok && !c.not_compared.empty()) {
    r.status = ReplayStatus::skipped;
    r.message = "ran; not compared: " + c.not_compared;
    return;
  }
  if (!meta && c.compared) {
    r.max_abs_error = c.max_abs;
    r.max_rel_error = c.max_rel;
  }
  r.status = c.ok ? ReplayStatus::ok : ReplayStatus::mismatch;
  r.message = c.ok ? note : c.message;
  if (c.ok && meta) r.message = "shapes and dtypes match the CPU";
}

// Why the inputs of `plan` are not made: more bytes on `device` than `budget` ("" when they fit).
inline std::string over_memory_budget(const CallPlan& plan, c10::Device device, int64_t budget) {
  const int64_t bytes = plan_bytes(plan, device);
  if (bytes <= budget) return {};
  return "inputs need " + human_bytes(bytes) + " on " + device.str() + ", over the memory budget of " + human_bytes(budget);
}

// Plans input `index` of `op`, materializes it and runs it as the mode asks (once, timed, or
// checked against the CPU), into `r`. Throws what planning and the op throw.
inline void plan_and_run(const std::string& op, const OpInput& in, int64_t index, const ReplayOptions& options, c10::Device device,
                         std::optional<at::Tensor>& flush_buffer, ReplayResult& r) {
  const ReplayMode mode = options.mode();
  const CallPlan plan = PlanBuilder(in, device, options.float_dtype()).build(op);
  if (std::string why = over_memory_budget(plan, device, options.memory_budget_bytes()); !why.empty()) {
    r.status = ReplayStatus::skipped;
    r.message = std::move(why);
    return;
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
  if (mode != ReplayMode::time) plan.op.callBoxed(&stack);
  else r.median_ms = median_call_ms(plan, stack, device, seed, options, flush_buffer);

  if (mode == ReplayMode::check && (random || creation || !not_compared.empty())) {
    r.status = ReplayStatus::skipped;
    r.message = random     ? "random op: ran, outputs not compared (they depend on the random state)"
                : creation ? "creation op: ran, outputs not compared (uninitialized memory)"
                           : not_compared;
    return;
  }
  if (compare) compare_with_reference(plan, stack, reference, device, seed, options, r);
  else if (plan.mutates && mode == ReplayMode::time) r.message = "writes its inputs: fresh inputs for every call";
}

// Runs `fn` (a call planned and run into `r`) and turns what it throws into `r.status` and
// `r.message`: the one rule of what replay calls skipped (a gap in the trace, no kernel for
// `device` in this build) and what an error. True when the op has no kernel for `device`.
template <class Result, class Fn>
bool run_classified(c10::Device device, Result& r, Fn&& fn) {
  try {
    fn();
  } catch (const NotRecorded& e) {  // a gap in the trace, not a failure
    r.status = ReplayStatus::skipped;
    r.message = "not replayable: " + e.message();
  } catch (const UnsupportedDtype& e) {
    r.status = ReplayStatus::skipped;
    r.message = "not replayable: " + e.message();
  } catch (const UnknownOp& e) {
    r.status = ReplayStatus::skipped;
    r.message = "not replayable: " + e.message();
  } catch (const c10::Error& e) {
    const bool missing = is_missing_kernel(e, device);
    r.status = missing ? ReplayStatus::skipped : ReplayStatus::error;
    r.message = (missing ? "no " + std::string(device.type() == c10::kMeta ? "meta" : c10::DeviceTypeName(device.type(), true)) +
                               " kernel in this libtorch: "
                         : std::string()) +
                describe_exception(e);
    return missing;
  } catch (const std::exception& e) {  // c10::Error (OOM included), optrace errors, std errors
    r.status = ReplayStatus::error;
    r.message = describe_exception(e);
  } catch (...) {
    r.status = ReplayStatus::error;
    r.message = "unknown exception";
  }
  return false;
}

// Replays one unique input; never throws for the input's own failures (they become the result).
// `no_meta`: ops already found without a kernel for the device (meta or other), with the message: on libtorch 1.13 a
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
  if (auto it = no_meta.find(op); it != no_meta.end()) {
    r.status = ReplayStatus::skipped;
    r.message = it->second;
    return r;
  }
  if (run_classified(device, r, [&] { plan_and_run(op, in, index, options, device, flush_buffer, r); }))
    no_meta.emplace(op, r.message);
  return r;
}

}  // namespace optrace::detail
