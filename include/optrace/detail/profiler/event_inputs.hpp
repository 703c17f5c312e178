// optrace/detail/profiler/event_inputs.hpp: an event's inputs, encoded as the callbacks record them and decoded as the writers read them
#pragma once
// Inputs are encoded by OpTracer's own encoder (encode_value, extended: devices and strides) into
// the thread's token arena, and decoded by OpTracer's decoder: one encoding for both recorders.

#include <optrace/detail/op_tracer/decoder.hpp>
#include <optrace/detail/op_tracer/recorder.hpp>
#include <optrace/detail/profiler/window.hpp>
#include <optrace/op_trace_types.hpp>

#include <ATen/record_function.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace optrace::detail::profiler {

// The op's own inputs: boxed calls (the TorchScript interpreter's) hand over the caller's stack.
inline c10::ArrayRef<const c10::IValue> op_inputs(const Event& e, const at::RecordFunction& fn) {
  c10::ArrayRef<const c10::IValue> inputs = fn.inputs();
  return e.op != nullptr && e.op->live != nullptr ? op_tracer::op_arguments(*e.op, inputs) : inputs;
}

// A call's own outputs: boxed calls leave the caller's stack before them (as op_inputs), and
// num_outputs() is the schema's count (all of them for a range that is not an op's), as torch's
// ExecutionTraceObserver takes them.
inline c10::ArrayRef<const c10::IValue> op_outputs(const at::RecordFunction& fn) {
  const std::vector<c10::IValue>& outputs = fn.outputs();
  const size_t n = std::min(fn.num_outputs(), outputs.size());
  return c10::ArrayRef<const c10::IValue>(outputs.data() + (outputs.size() - n), n);
}

// Encodes a call's inputs as OpTracer does (every argument, extended: devices and strides).
inline void record_inputs(ThreadBuffer& b, Event& e, const at::RecordFunction& fn) {
  c10::ArrayRef<const c10::IValue> inputs = op_inputs(e, fn);
  const size_t begin = b.tokens.size();
  try {
    for (size_t i = 0; i < inputs.size(); ++i) {
      ArgKind kind = e.op != nullptr && i < e.op->args.size() ? e.op->args[i].kind : ArgKind::Other;
      op_tracer::encode_value(b.tokens, inputs[i], kind, /*extended=*/true);
    }
  } catch (...) {  // an argument that cannot be read (a nested tensor): the event keeps no inputs
    b.tokens.truncate(begin);
    return;
  }
  e.tokens_begin = static_cast<uint32_t>(begin);
  e.tokens_end = static_cast<uint32_t>(b.tokens.size());
  e.num_args = static_cast<uint32_t>(inputs.size());
}

// An event's inputs as an OpInput (shapes, dtypes, values, strides of non-contiguous tensors).
inline OpInput decode_inputs(const ThreadBuffer& b, const Event& e) {
  OpInput in;
  op_tracer::Decoder dec(b.tokens.data(), b.tokens.size(), e.tokens_begin, /*extended=*/true);
  for (uint32_t i = 0; i < e.num_args; ++i) {
    op_tracer::Decoded d = dec.value();
    if (d.list) d.value = in.add_tensor_list(std::move(*d.list));
    in.input_shapes.push_back(std::move(d.shape));
    in.input_dtypes.push_back(std::move(d.dtype));
    in.non_tensor_inputs.push_back(std::move(d.value));
    in.input_strides.push_back(std::move(d.strides));
  }
  return in;
}

}  // namespace optrace::detail::profiler
