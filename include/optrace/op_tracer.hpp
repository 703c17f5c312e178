// optrace/op_tracer.hpp: OpTracer, which records every aten op a libtorch program runs in the hf op-trace schema
#pragma once

// libtorch's inline RecordFunction::inputs() reads a member that exists only in debug builds of
// libtorch; packaged libtorch (Debian, pytorch.org, pip) is built with NDEBUG, so a program
// compiled without it would read garbage. Refused here, at compile time, rather than at run time.
#ifndef NDEBUG
#error "optrace/op_tracer.hpp needs NDEBUG, as libtorch is built with it: configure with -DCMAKE_BUILD_TYPE=Release (or RelWithDebInfo), or add -DNDEBUG; a Debug build can still use the other headers (observer.hpp, op_trace.hpp, kineto.hpp, replay.hpp, ...) instead of optrace.hpp"
#endif

#include <optrace/detail/op_tracer/decoder.hpp>
#include <optrace/detail/op_tracer/recorder.hpp>
#include <optrace/error.hpp>
#include <optrace/op_trace.hpp>

#include <ATen/record_function.h>
#include <torch/arg.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace optrace {

/// Options of an `OpTracer`, as chained setters: `OpTracerOptions().exclude_ops({"detach"}).extended(true)`.
struct OpTracerOptions {
  /// Record only these ops: full names (`"add.Tensor"`) or base names for every overload
  /// (`"add"`). Empty (the default): every op.
  TORCH_ARG(std::vector<std::string>, include_ops) = {};
  /// Never record these ops (full or base names). They still count as nesting: ops they call
  /// are not recorded in their place. Default: none.
  TORCH_ARG(std::vector<std::string>, exclude_ops) = {};
  /// Record ops at every nesting level, CompositeImplicitAutograd ops (`linear`) and the ops they
  /// and other kernels call included. Default false: only what the reference Python tracer
  /// sees, the outermost ops after CompositeImplicitAutograd decomposition.
  TORCH_ARG(bool, all_levels) = false;
  /// Record only calls made on these threads. Empty (the default): every thread.
  TORCH_ARG(std::vector<std::thread::id>, threads) = {};
  /// Keep at most this many unique inputs (summed over ops and recording threads); calls that
  /// would add one more are counted as dropped (`OpEntry::dropped_calls`, part of
  /// `total_calls`; `OpTracer::dropped()` says why). 0 (the default): no bound.
  TORCH_ARG(int64_t, max_unique_inputs) = 0;
  /// Also record what the plain schema loses, in extra keys of each unique input: keyword-only
  /// arguments not at their default (`kwargs`), devices (`input_devices`), strides of
  /// non-contiguous tensors (`input_strides`) and the value range of small integer tensors
  /// (`input_value_ranges`, so that a replay can build valid indices). Default false.
  TORCH_ARG(bool, extended) = false;
  /// In extended mode, integer tensors of at most this many elements get a value range (read
  /// with one min and one max per call: a device sync on GPU). Default 4096.
  TORCH_ARG(int64_t, value_range_max_numel) = 4096;
};

/// Calls of one op that an OpTracer counted (in the trace's `total_calls`) but did not keep as
/// unique inputs, and why.
struct DroppedCalls {
  std::string op;            ///< as recorded: "add.Tensor"
  int64_t calls = 0;         ///< all dropped calls of the op
  int64_t over_budget = 0;   ///< of `calls`: beyond `max_unique_inputs`
  /// The rest had an argument the hf schema cannot hold, e.g. a nested tensor
  /// (`_transformer_encoder_layer_fwd` on nn.TransformerEncoder's fast path): the first such
  /// call's error, empty when none.
  std::string unreadable;
};

/// Records every aten op the program dispatches while started, on every thread (or chosen
/// ones), aggregated as it goes into unique inputs with counts: memory grows with the number
/// of unique inputs, not with calls. By default the output equals what the reference Python
/// tracer (a TorchDispatchMode) writes for the same program: the outermost ops after
/// CompositeImplicitAutograd decomposition, their positional arguments with trailing defaults
/// dropped.
///
/// One tracer records at a time in a process. Built on RecordFunction observers: ops called
/// with RecordFunction disabled (`at::RecordFunctionGuard(false)`) are not seen.
///
/// Example:
///   optrace::OpTracer tracer;
///   tracer.start();
///   model.forward({x});
///   tracer.stop();
///   tracer.trace().save("hf_op_trace.json");
class OpTracer {
 public:
  explicit OpTracer(OpTracerOptions options = {}) : options_(std::move(options)) {}
  OpTracer(const OpTracer&) = delete;
  OpTracer& operator=(const OpTracer&) = delete;
  /// Stops recording if started.
  ~OpTracer() {
    try {
      stop();
    } catch (...) {
    }
  }

  /// Starts (or resumes) recording; what was recorded before is kept. Throws Error if this or
  /// another tracer is already recording, ArgumentError for a negative option.
  void start() {
    OPTRACE_CHECK(options_.max_unique_inputs() >= 0, ArgumentError, "max_unique_inputs must be >= 0, got ",
                  options_.max_unique_inputs());
    if (!session_) {
      session_ = std::make_shared<detail::op_tracer::Session>();
      detail::op_tracer::Settings& s = session_->settings;
      s.include_ops = options_.include_ops();
      s.exclude_ops = options_.exclude_ops();
      s.all_levels = options_.all_levels();
      s.threads = options_.threads();
      s.max_unique_inputs = options_.max_unique_inputs();
      s.extended = options_.extended();
      s.value_range_max_numel = options_.value_range_max_numel();
    }
    OPTRACE_CHECK(recording_.install(session_), Error, "another OpTracer is already recording; stop it first");
    recording_.add_callbacks(at::RecordFunctionCallback(&detail::op_tracer::on_start, &detail::op_tracer::on_end)
                                 .needsInputs(true)
                                 .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  }

  /// Stops recording. Does nothing if not recording. Ops running on other threads at that
  /// moment may still be recorded until they return.
  void stop() { recording_.retract(); }

  /// Whether this tracer is recording.
  bool recording() const { return recording_.installed(); }

  /// What was recorded so far, all threads merged: ops in first-seen order, each op's unique
  /// inputs in first-seen order (written by count). May be called while recording: a call made
  /// on another thread while it reads may or may not be counted in it.
  OpTrace trace() const { return session_ ? detail::op_tracer::collect(*session_) : OpTrace(); }

  /// The calls counted but not kept as unique inputs (`OpEntry::dropped_calls`), per op in
  /// first-seen order, with why: over `max_unique_inputs`, or an argument that the schema cannot
  /// hold (nested tensors). Empty when every call was kept.
  std::vector<DroppedCalls> dropped() const {
    std::vector<DroppedCalls> out;
    if (!session_) return out;
    for (const auto& [op, d] : detail::op_tracer::collect_dropped(*session_))
      out.push_back(DroppedCalls{op->name, d.count, d.over_budget, d.unreadable});
    return out;
  }

  /// Forgets what was recorded. Throws Error while recording.
  void clear() {
    OPTRACE_CHECK(!recording(), Error, "clear() while recording; stop() first");
    session_.reset();
  }

  const OpTracerOptions& options() const { return options_; }

 private:
  OpTracerOptions options_;
  std::shared_ptr<detail::op_tracer::Session> session_;
  detail::op_tracer::ActiveSession recording_;
};

}  // namespace optrace
