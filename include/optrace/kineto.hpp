// optrace/kineto.hpp: Kineto (torch.profiler) traces: import into an OpTrace, export an OpTrace as one
#pragma once
// Import: a `*.pt.trace.json[.gz]` written by torch.profiler(record_shapes=True) becomes the op
// trace OpTracer would have recorded for the same program: dispatcher ops after
// CompositeImplicitAutograd decomposition, outermost only, overloads resolved from the recorded
// arguments, in the hf op-trace schema. What the profiler did not record is counted in the
// report, never invented. How: detail/kineto/ (importer.hpp: the streaming pass; decode.hpp: one
// event's arguments; exporter.hpp: the way back).

#include <optrace/detail/common/dispatcher.hpp>
#include <optrace/detail/common/gzip.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/detail/kineto/exporter.hpp>
#include <optrace/detail/kineto/load.hpp>
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/kineto_types.hpp>
#include <optrace/op_trace.hpp>
#include <optrace/operator_inputs.hpp>

#include <simdjson.h>

#include <string>
#include <string_view>

namespace optrace {
namespace kineto {

/// Imports the Kineto trace `text` (Trace Event Format: `{"traceEvents": [...]}` or a bare list of
/// events). Throws JsonError naming the JSON path of what it cannot read, e.g.
/// `optrace: JsonError at /traceEvents/12/args/Input Dims: expected a list, got string "x"`.
/// Events it reads but cannot use are not errors: they are counted in the report.
///
/// Example:
///   auto [trace, report] = optrace::kineto::parse(text);
inline ImportResult parse(std::string_view text, const ImportOptions& options = {}) {
  return detail::kineto::parse(text, options, detail::live_catalog());
}

/// As above; a string with simdjson's padding spare in its capacity
/// (`text.reserve(text.size() + simdjson::SIMDJSON_PADDING)`) is parsed in place, not copied.
inline ImportResult parse(const std::string& text, const ImportOptions& options = {}) {
  return detail::kineto::parse(text, options, detail::live_catalog());
}
inline ImportResult parse(const char* text, const ImportOptions& options = {}) {
  return parse(std::string_view(text), options);
}

/// Imports the Kineto trace at `path` (`*.pt.trace.json`, or gzip-compressed `*.json.gz`; the
/// file's first bytes decide). Throws IoError if it cannot be read or inflated, JsonError as
/// `parse`.
///
/// Example:
///   optrace::kineto::ImportResult r = optrace::kineto::load("step.pt.trace.json.gz");
///   r.trace.save("hf_op_trace.json");
///   std::cerr << r.report.to_string();
inline ImportResult load(const std::string& path, const ImportOptions& options = {}) {
  return detail::kineto::load(path, options, detail::live_catalog());
}

/// What the file at `path` (gzip-compressed or not) holds: a Kineto trace (an object with
/// "traceEvents", or a list of events), an hf op trace (ops mapping to objects with
/// "unique_inputs"), an execution trace ("schema" a string, "nodes" a list), an operator-inputs
/// log (starting with `Operator:`), or none of them (also for malformed JSON). Throws IoError if
/// it cannot be read.
inline TraceFormat detect_format(const std::string& path) { return detail::kineto::detect_format(path); }

/// Loads the op trace at `path` whatever its format, decided by its content: an hf op trace
/// (`OpTrace::load`; the report then only says `format = "hf_op_trace"` and the calls), a Kineto
/// trace (`kineto::load`), an execution trace (torch's ExecutionTraceObserver's or the Profiler's:
/// its nodes read by the Kineto import's rules, `format = "execution_trace"`; held whole in
/// memory), or an operator-inputs log (`operator_inputs::load`; the report says
/// `format = "operator_inputs"`, and lines left out are its issues). Throws IoError, TextError
/// for a malformed log, or JsonError for a file that is none of them (at "/") or malformed.
///
/// Example (what `optrace convert` does):
///   optrace::kineto::load_any("trace.pt.trace.json.gz").trace.save("hf_op_trace.json");
inline ImportResult load_any(const std::string& path, const ImportOptions& options = {}) {
  return detail::kineto::load_any(path, options, detail::live_catalog());
}

/// The op trace as a Kineto-style trace (Trace Event Format, which chrome://tracing, Perfetto and
/// torch's trace tools load): `{"traceEvents": [...], "displayTimeUnit": "ms"}` with one `cpu_op`
/// complete event per unique input, in the trace's order (ops first-seen, inputs first-seen) on
/// one `pid`/`tid`, `ts` 0, 2, 4, ... and `dur` 1 microsecond (the trace holds no timing).
/// Each event's args hold what the profiler writes ("Input Dims", "Input type", "Input
/// Strides", "Concrete Inputs") plus optrace's "Overload name", "count" (the input's calls),
/// and for tensor lists "TensorList dtypes" (the profiler records none); calls dropped by
/// `max_unique_inputs` become an event with "Dropped calls". `kineto::parse` reads it back to the
/// same trace (kwargs, input_devices and input_value_ranges are not written).
///
/// Example:
///   optrace::kineto::save(tracer.trace(), "optrace.pt.trace.json");  // open it in Perfetto
inline std::string to_json(const OpTrace& trace, const ExportOptions& options = {}) {
  return detail::kineto::export_trace(trace, options);
}

/// Writes `to_json(trace, options)` to `path` atomically, gzip-compressed when `path` ends in
/// `.gz` (`step.pt.trace.json.gz`, as tensorboard_trace_handler(use_gzip=True) names them).
/// Throws IoError naming the path.
inline void save(const OpTrace& trace, const std::string& path, const ExportOptions& options = {}) {
  detail::kineto::save_trace(trace, path, options);
}
}  // namespace kineto
}  // namespace optrace
