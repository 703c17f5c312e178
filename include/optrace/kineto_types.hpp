// optrace/kineto_types.hpp: the Kineto importer's and exporter's options, and what an import reports
#pragma once
// Apart from kineto.hpp (the functions) so that the machinery in detail/kineto/ can use them.

#include <optrace/error.hpp>
#include <optrace/op_trace.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace optrace {
namespace kineto {

/// Options of `kineto::load` / `kineto::parse`.
class ImportOptions {
 public:
  /// Keep calls whose arguments the trace records only in part (older profilers without
  /// "Concrete Inputs", values the profiler never writes: Device, str, long lists, tensor lists
  /// of old profilers): unknown values are written as `null` and the report counts them. With
  /// false, such calls are left out (and counted as not kept). Default: true.
  ImportOptions& keep_incomplete(bool keep) {
    keep_incomplete_ = keep;
    return *this;
  }
  bool keep_incomplete() const { return keep_incomplete_; }

  /// Record the strides of non-contiguous tensors ("Input Strides") as the trace's
  /// `input_strides` (optrace's extended field; calls with other strides become other unique
  /// inputs, as with OpTracerOptions::extended). Default: false, so that an import equals what
  /// OpTracer and the reference tracer write by default.
  ImportOptions& record_strides(bool record) {
    record_strides_ = record;
    return *this;
  }
  bool record_strides() const { return record_strides_; }

  /// Keep the keyword-only arguments the trace recorded (those not equal to their defaults:
  /// `clone(x, memory_format=torch.contiguous_format)`) as the inputs' `kwargs` (optrace's
  /// extended field), where libtorch's schema names them. Default: false: the reference tracer's
  /// inputs are positional, and an import equals them. Replaying an execution trace's window
  /// keeps them, so that each call runs as it was made.
  ImportOptions& keyword_arguments(bool keep) {
    keyword_arguments_ = keep;
    return *this;
  }
  bool keyword_arguments() const { return keyword_arguments_; }

  /// Examples kept per reason in the report. Default: 3.
  ImportOptions& max_examples(int64_t n) {
    OPTRACE_CHECK(n >= 0, ArgumentError, "max_examples must be >= 0, got ", n);
    max_examples_ = n;
    return *this;
  }
  int64_t max_examples() const { return max_examples_; }

  /// Threads one import may read a trace on: 0 (the default) one per core, 1 the calling thread
  /// only. A trace is cut into pieces of at least 512 KiB at event boundaries, each read on its
  /// own thread; the result is the same whatever the number. Set 1 where the caller already
  /// reads several traces at once.
  ImportOptions& threads(int64_t n) {
    OPTRACE_CHECK(n >= 0, ArgumentError, "threads must be >= 0, got ", n);
    threads_ = n;
    return *this;
  }
  int64_t threads() const { return threads_; }

 private:
  bool keep_incomplete_ = true;
  bool record_strides_ = false;
  bool keyword_arguments_ = false;
  int64_t max_examples_ = 3;
  int64_t threads_ = 0;
};

/// What an import kept, left out, and could not read. Counts are of events (calls), outermost
/// ones unless said otherwise.
struct ImportReport {
  /// Why some calls were left out (`kept == false`) or kept with something missing.
  struct Issue {
    std::string reason;                 ///< e.g. "no overload matches the recorded arguments"
    bool kept = false;                  ///< kept in the trace (with unknowns as null) or left out
    int64_t count = 0;                  ///< calls
    std::vector<std::string> examples;  ///< "/traceEvents/12: aten::foo (Input type [...])"
  };

  std::string format;        ///< "kineto", "hf_op_trace", "operator_inputs" or "execution_trace" (kineto::load_any)
  int64_t events = 0;        ///< entries of traceEvents (a log: its cnt lines)
  int64_t op_events = 0;     ///< cpu_op complete events
  int64_t kept = 0;          ///< calls in the trace (its total_calls)
  int64_t nested = 0;        ///< ops inside a kept op on their thread
  int64_t decomposed = 0;    ///< outermost CompositeImplicitAutograd ops (their parts are kept)
  int64_t transparent = 0;   ///< cpu_op events that are no dispatcher op (autograd nodes, ...)
  int64_t left_out = 0;      ///< outermost ops not kept: see `issues`
  int64_t incomplete = 0;    ///< kept calls with some argument unknown: see `issues`
  bool concrete_inputs = true;  ///< false when no op event has "Concrete Inputs" (older profilers)
  /// An execution trace cut short (its process died while writing it): the place of the node it
  /// ends in ("/nodes/1234"), whose text is lost with the rest; the nodes before are read. "after
  /// /nodes" when it ends in the keys after its nodes, all read. Empty when the trace is whole.
  std::string cut_short;
  std::vector<Issue> issues;

  /// Whether to_string() tells more than the format and the calls: an import's rules were
  /// applied (a Kineto or an execution trace), or something was left out or is missing.
  bool worth_showing() const { return format == "kineto" || format == "execution_trace" || !issues.empty(); }

  /// The issue with `reason`, or nullptr.
  const Issue* find(std::string_view reason) const {
    for (const Issue& i : issues)
      if (i.reason == reason) return &i;
    return nullptr;
  }

  /// A few lines for people: counts, then one line per issue with its examples.
  std::string to_string() const {
    if (format == "operator_inputs") {  // a log: `events` holds its cnt lines
      std::string out = "format: operator_inputs\nlines: " + std::to_string(events) + ", kept calls: " + std::to_string(kept) + "\n";
      for (const Issue& i : issues) {
        out += "left out: " + i.reason + ": " + std::to_string(i.count) + " calls\n";
        for (const std::string& e : i.examples) out += "    e.g. " + e + "\n";
      }
      return out;
    }
    std::string out = "format: " + format + "\nevents: " + std::to_string(events) +
                      ", op events: " + std::to_string(op_events) + "\nkept calls: " + std::to_string(kept) +
                      " (incomplete: " + std::to_string(incomplete) + ")\nnot kept: nested " + std::to_string(nested) +
                      ", decomposed " + std::to_string(decomposed) + ", not ops " + std::to_string(transparent) +
                      ", left out " + std::to_string(left_out) + "\n";
    if (!cut_short.empty())
      out += "note: the trace is cut short (its process died while writing it?): " +
             (cut_short.rfind("after", 0) == 0 ? "it ends " + cut_short + ", every node read\n"
                                               : "it ends inside " + cut_short + "; the nodes before it are read, the rest is lost\n");
    if (!concrete_inputs && format == "kineto")
      out += "note: the trace has no \"Concrete Inputs\" (profiler before PyTorch 2.0): scalar and list values are unknown\n";
    for (const Issue& i : issues) {
      out += (i.kept ? "kept, incomplete: " : "left out: ") + i.reason + ": " + std::to_string(i.count) + " calls\n";
      for (const std::string& e : i.examples) out += "    e.g. " + e + "\n";
    }
    return out;
  }
};

/// Writes `report.to_string()`.
inline std::ostream& operator<<(std::ostream& out, const ImportReport& report) { return out << report.to_string(); }

/// An imported trace and its report.
struct ImportResult {
  OpTrace trace;
  ImportReport report;
};

/// Options of `kineto::save` / `kineto::to_json`.
class ExportOptions {
 public:
  /// The events' "pid". Default: 0.
  ExportOptions& pid(int64_t p) {
    pid_ = p;
    return *this;
  }
  int64_t pid() const { return pid_; }
  /// The events' "tid". Default: 0.
  ExportOptions& tid(int64_t t) {
    tid_ = t;
    return *this;
  }
  int64_t tid() const { return tid_; }

 private:
  int64_t pid_ = 0;
  int64_t tid_ = 0;
};

/// What a trace file holds (`detect_format`): a Kineto trace, an hf op trace, PyTorch's
/// operator-inputs log (operator_inputs.hpp), or none of them.
enum class TraceFormat { Kineto, HfOpTrace, OperatorInputs, ExecutionTrace, Unknown };

}  // namespace kineto
}  // namespace optrace
