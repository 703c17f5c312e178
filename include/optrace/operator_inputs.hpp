// optrace/operator_inputs.hpp: PyTorch's operator-inputs logs (OperatorInputsMode, BackendBench): read into an OpTrace, write one
#pragma once
// The text format PyTorch's operator benchmarks (`OperatorInputsLoader`) and BackendBench's
// TorchBench suite (`--ops-source file.txt`) read:
//
//   Operator: aten.addmm.default
//   cnt: 24, ((T([768], f16), T([4096, 768], f16), T([768, 768], f16, stride=(1, 768))), {})
//
// It holds keyword arguments and strides, which an OpTrace keeps in its extended fields
// (`OpInput::kwargs`, `input_strides`, `TensorListInfo::strides`). The parser and the Python-repr
// writer live in detail/op_trace/operator_inputs_text.hpp, reading a log into a trace in
// detail/op_trace/operator_inputs_read.hpp, writing one by PyTorch's logger's rules given each
// op's schema facts in detail/op_trace/operator_inputs_write.hpp (all three without libtorch);
// this header gives the writer those facts from the live dispatcher.

#include <optrace/detail/common/dispatcher.hpp>
#include <optrace/detail/op_trace/operator_inputs_read.hpp>
#include <optrace/detail/op_trace/operator_inputs_text.hpp>
#include <optrace/detail/op_trace/operator_inputs_write.hpp>
#include <optrace/op_trace.hpp>

#include <string>

namespace optrace {
namespace operator_inputs {

/// The trace as PyTorch's `OperatorInputsMode.log_to_file` writes the same calls: operators
/// sorted by name (`aten.addmm.default`), each op's lines in first-seen order, each line
/// `cnt: N, (args, kwargs)` with Python's repr of the arguments as `__torch_dispatch__` receives
/// them. The logger's rules apply: calls with no tensor among their arguments, of ops returning
/// no tensor, or with a memory format or storage argument are left out, and non-compute ops
/// unless `skip_non_compute(false)`. Keyword arguments and strides come from an extended trace
/// (`OpTracerOptions().extended(true)`, or a log read back); a plain trace's tensors are written
/// contiguous and without keyword arguments. `report` (optional) says what was left out or could
/// not be carried (devices, value ranges, dropped calls).
///
/// Example:
///   optrace::OpTracer tracer(optrace::OpTracerOptions().extended(true));
///   ... tracer.start(); model.forward(inputs); tracer.stop();
///   optrace::operator_inputs::save(tracer.trace(), "model_inputs.txt");  // for BackendBench
inline std::string to_text(const OpTrace& trace, const WriteOptions& options = {}, WriteReport* report = nullptr) {
  return detail::operator_inputs_text(trace, detail::live_catalog(), options, report);
}

/// Writes `to_text(trace, options, report)` to `path` atomically, gzip-compressed when `path` ends
/// in `.gz`. Throws IoError naming the path.
inline void save(const OpTrace& trace, const std::string& path, const WriteOptions& options = {}, WriteReport* report = nullptr) {
  detail::save_operator_inputs(trace, path, detail::live_catalog(), options, report);
}

}  // namespace operator_inputs
}  // namespace optrace
