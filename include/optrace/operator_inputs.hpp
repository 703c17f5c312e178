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
// writer live in detail/op_trace/operator_inputs_text.hpp (no libtorch), reading a log into a trace
// in detail/op_trace/operator_inputs_read.hpp (no libtorch); this header adds what only the
// dispatcher knows: which ops and calls PyTorch's logger leaves out.

#include <optrace/detail/common/dispatcher.hpp>
#include <optrace/detail/common/gzip.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/detail/op_trace/operator_inputs_read.hpp>
#include <optrace/detail/op_trace/operator_inputs_text.hpp>
#include <optrace/error.hpp>
#include <optrace/op_trace.hpp>

#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace optrace {
namespace detail {

inline bool contains_tensor_type(const c10::TypePtr& t) {
  if (t->kind() == c10::TypeKind::TensorType) return true;
  for (const c10::TypePtr& inner : t->containedTypes())
    if (contains_tensor_type(inner)) return true;
  return false;
}

// What PyTorch's logger decides from op's schema (operator_inp_utils.py: non_compute_operator,
// and its __torch_dispatch__'s checks). An op this libtorch lacks is written as recorded.
inline op_trace::oplog::OpFacts op_facts(std::string_view op) {
  op_trace::oplog::OpFacts f;
  const OpInfo* info = find_op(op);
  if (info == nullptr) return f;
  const c10::FunctionSchema& schema = *info->live->schema;
  const auto& args = schema.arguments();
  const auto& returns = schema.returns();
  f.returns_tensor = false;
  for (const c10::Argument& r : returns) f.returns_tensor = f.returns_tensor || contains_tensor_type(r.type());
  bool tensor_arg = false;
  for (size_t i = 0; i < args.size(); ++i) {
    tensor_arg = tensor_arg || contains_tensor_type(args[i].type());
    if (f.storage_arg < 0 && args[i].type()->kind() == c10::TypeKind::StorageType) f.storage_arg = static_cast<int>(i);
  }
  const std::string full = schema.name() + "." + schema.overload_name();
  if (!tensor_arg || full.find("_like") != std::string::npos) {
    f.non_compute = true;  // constructors and *_like
    return f;
  }
  if (schema.is_mutable()) return f;  // in-place writes are kept
  const c10::Argument* out = nullptr;
  int tensor_outputs = 0;
  for (const c10::Argument& r : returns)
    if (r.type()->kind() == c10::TypeKind::TensorType) {
      ++tensor_outputs;
      out = &r;
    }
  if (tensor_outputs != 1 || out->alias_info() == nullptr) return f;
  for (const c10::Argument& a : args) {
    if (a.type()->kind() != c10::TypeKind::TensorType || a.alias_info() == nullptr) continue;
    for (const auto& set : a.alias_info()->beforeSets())
      if (out->alias_info()->afterSets().count(set)) f.non_compute = true;  // a view of an input
  }
  return f;
}

}  // namespace detail

namespace operator_inputs {

/// Options of `to_text` / `save`.
class WriteOptions {
 public:
  /// Leave out ops PyTorch's logger calls non-compute (`log_to_file(skip_non_compute_operators=True)`):
  /// those with no tensor argument (constructors), `*_like` ops, and views (one tensor output
  /// aliasing an input). Default: true, as the logger.
  WriteOptions& skip_non_compute(bool skip) {
    skip_non_compute_ = skip;
    return *this;
  }
  bool skip_non_compute() const { return skip_non_compute_; }

 private:
  bool skip_non_compute_ = true;
};

/// What writing a trace as a log left out (PyTorch's logger's rules) or could not carry.
struct WriteReport : detail::op_trace::oplog::WriteReport {
  /// One line per kind of loss, empty when nothing was lost.
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    auto add = [&out](int64_t n, const std::string& what) {
      if (n > 0) out.push_back(std::to_string(n) + " " + what);
    };
    if (!non_compute.empty()) {
      int64_t calls = 0;
      std::string names;
      for (const auto& [op, n] : non_compute) {
        calls += n;
        if (names.size() < 200) names += (names.empty() ? "" : ", ") + op;
      }
      out.push_back(std::to_string(non_compute.size()) + " non-compute ops (" + std::to_string(calls) +
                    " calls) left out, as PyTorch's logger does: " + names);
    }
    add(no_tensor_input, "calls without a tensor argument left out, as PyTorch's logger does");
    add(no_tensor_output, "calls of ops that return no tensor left out, as PyTorch's logger does");
    add(memory_format, "calls with a memory format or storage argument left out, as PyTorch's logger does");
    add(unknown_values, "calls with an argument whose value the trace lacks left out");
    add(dropped, "calls counted but not kept as unique inputs not written (a log holds inputs only)");
    add(devices, "unique inputs' devices not written (a log names none)");
    add(value_ranges, "unique inputs' integer value ranges not written (a log holds none)");
    add(merged, "unique inputs written on the line of an equal earlier one (they differed only in what a log does not hold)");
    return out;
  }
};

/// Writes `report.lines()`, one per line ("" when nothing was lost).
inline std::ostream& operator<<(std::ostream& out, const WriteReport& report) {
  for (const std::string& line : report.lines()) out << line << '\n';
  return out;
}


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
  WriteReport local;
  const optrace::detail::op_trace::oplog::OpFactsFn facts = [](std::string_view op) { return optrace::detail::op_facts(op); };
  std::string text = optrace::detail::op_trace::oplog::Writer(facts, options.skip_non_compute()).write(trace.ops(), local);
  if (report) *report = std::move(local);
  return text;
}

/// Writes `to_text(trace, options, report)` to `path` atomically, gzip-compressed when `path` ends
/// in `.gz`. Throws IoError naming the path.
inline void save(const OpTrace& trace, const std::string& path, const WriteOptions& options = {}, WriteReport* report = nullptr) {
  optrace::detail::write_file_maybe_gzip(path, to_text(trace, options, report));
}

}  // namespace operator_inputs
}  // namespace optrace
