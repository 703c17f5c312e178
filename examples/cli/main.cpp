// examples/cli: the optrace command-line tool (CMake target optrace_cli, executable optrace).
//
//   optrace summary TRACE|OBSERVATIONS [--top N] [--json]
//   optrace summary --by time KINETO_TRACE [--group-by-shape] [--top N] [--json]
//   optrace summary --by rank KINETO_TRACE...|DIR [--json] [--html REPORT.html [--force]] [--jobs N]
//   optrace replay TRACE [--device cuda|cpu|meta] [--check] [--time] [--json OUT] [--csv OUT] ...
//   optrace merge A B ... -o OUT
//   optrace convert TRACE -o OUT [--to hf|kineto|text] [--keep-non-compute] [--quiet]
//   optrace verify PACKAGE.pt2 OBSERVATIONS.json [--reference MODULE.pt] [--json OUT] ...  (libtorch >= 2.6)
//   optrace plan OBSERVATIONS.json... -o DIR [--max-packages K] [--force]
//   optrace drift PLAN OBSERVATIONS.json... [--json OUT] [--force]
//   optrace --help
//
// TRACE is an hf op trace (hf_op_trace.json), a Kineto trace (*.pt.trace.json, .json.gz) or
// PyTorch's operator-inputs log (*.txt), told apart by content; --strides keeps a Kineto trace's
// strides of non-contiguous tensors.
//
// Exit status: 0 success; 1 a replay found errors or mismatches, or ran nothing, or verify found a
// signature not ok; 2 bad usage or
// bad input (one line on stderr naming the file and, for JSON, the path inside it); 130/143 a
// replay stopped by SIGINT/SIGTERM (its partial report printed and written).
//
// Nothing is lost: an output is never one of the inputs, an existing output is replaced only
// with --force, and outputs are checked writable before any work (files.hpp).
//
// The command line is parsed by cli::parse_args (cli.hpp, fuzzed by tests/fuzz/fuzz_cli.cpp);
// each subcommand here is one function that runs a parsed Invocation.
//
// This file is built twice. `optrace-torch` (target optrace_cli_torch) is the whole tool, linked
// with libtorch. `optrace` (target optrace_cli, OPTRACE_CLI_FRONT_END) is built without libtorch,
// whose loading costs ~0.3 s per run: it runs summary, merge and convert of traces itself, reading
// Kineto traces by the operator facts captured from the same libtorch at build time
// (op_catalog.inc, written by op_catalog.cpp), writes logs by the same facts, and shows
// observation files from their specs (Observations::describe_arguments builds no tensor); it
// hands replay and verify to optrace-torch next to it, by exec, with the same arguments.
#include "cli.hpp"
#include "files.hpp"
#include "parallel.hpp"

#include <optrace/json/writer.hpp>
#include <optrace/key_averages.hpp>
#include <optrace/observations.hpp>
#include <optrace/op_trace.hpp>
#include <optrace/plan.hpp>
#include <optrace/rank_summary.hpp>
#ifdef OPTRACE_CLI_FRONT_END
#include <optrace/detail/common/op_catalog.hpp>
#include <optrace/detail/common/printable.hpp>
#include <optrace/detail/common/text_table.hpp>
#include <optrace/detail/kineto/exporter.hpp>
#include <optrace/detail/kineto/load.hpp>
#include <optrace/detail/op_trace/operator_inputs_write.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "op_catalog.inc"
#else
#include <optrace/kineto.hpp>
#include <optrace/operator_inputs.hpp>
#include <optrace/execution_replay.hpp>
#include <optrace/replay.hpp>
#include <optrace/detail/common/compat.hpp>
#if OPTRACE_HAS_AOTI
#define OPTRACE_CLI_AOTI 1
#include <optrace/serve.hpp>
#endif
#endif

#include <algorithm>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace cli {

#ifdef OPTRACE_CLI_FRONT_END
// The operator facts of the libtorch optrace-torch is built with, read (~7 ms) only when a
// Kineto trace or a text output first asks for an op, once for all threads.
class BuiltInCatalog final : public optrace::detail::OpCatalog {
 public:
  const std::vector<const optrace::detail::OpInfo*>& overloads_of(std::string_view qualified) const override {
    return captured().overloads_of(qualified);
  }
  const optrace::detail::OpInfo* find(std::string_view display) const override { return captured().find(display); }

 private:
  const optrace::detail::CapturedCatalog& captured() const {
    std::call_once(once_, [this] {
      std::string text;
      for (const char* part : kOpCatalog) text += part;
      catalog_ = std::make_unique<optrace::detail::CapturedCatalog>(text);
    });
    return *catalog_;
  }

  mutable std::once_flag once_;
  mutable std::unique_ptr<optrace::detail::CapturedCatalog> catalog_;
};

const optrace::detail::OpCatalog& op_catalog() {
  static const BuiltInCatalog catalog;
  return catalog;
}

// The trace at `path`, whatever its format, with the import report. The library's errors name
// the file (optrace::Error::file).
optrace::kineto::ImportResult load_file(const std::string& path, const optrace::kineto::ImportOptions& options) {
  return optrace::detail::kineto::load_any(path, options, op_catalog());
}
#else
const optrace::detail::OpCatalog& op_catalog() { return optrace::detail::live_catalog(); }

// The trace at `path`, whatever its format, with the import report.
optrace::kineto::ImportResult load_file(const std::string& path, const optrace::kineto::ImportOptions& options) {
  return optrace::kineto::load_any(path, options);
}
#endif

std::string one_line(std::string s);

optrace::OpTrace load_trace(const std::string& path, const optrace::kineto::ImportOptions& options) {
  return load_file(path, options).trace;
}

// ---------------------------------------------------------------------------------------------

// An observation file (InputObserver::save) in one view: what export needs, then the history.
std::string summary_of_observations(const Invocation& inv, const std::string& path) {
  std::ostringstream out;
  const optrace::Observations obs = optrace::load_observations(path);
  const auto history = obs.history();
  std::string shapes, named, arguments, why_not;
  std::vector<std::string> warnings;
  try {
    const optrace::DynamicShapes ds = obs.infer_dynamic_shapes();
    shapes = ds.to_python();
    named = obs.infer_dynamic_shapes(optrace::DynamicShapesOptions().dim_style(optrace::DimStyle::named)).to_python();
    warnings = ds.warnings();
    arguments = obs.describe_arguments();  // meta tensors: shapes and dtypes, no device to show
    for (size_t at; (at = arguments.find("@meta")) != std::string::npos;) arguments.erase(at, 5);
  } catch (const optrace::Error& e) {
    why_not = e.what_without_prefix();  // calls that do not fit together: said, not fatal here
  }
  if (inv.json) {
    optrace::json::Writer w(1);
    w.begin_object();
    w.key("file").value(path);
    w.key("format").value("optrace.observations");
    w.key("calls").value(obs.num_calls());
    w.key("stored_calls").value(obs.num_obs());
    if (why_not.empty()) {
      w.key("dynamic_shapes").value(shapes);
      w.key("dynamic_shapes_named").value(named);
      w.key("arguments").value(arguments);
    } else {
      w.key("error").value(why_not);
    }
    w.key("warnings").begin_array();
    for (const std::string& x : warnings) w.value(x);
    w.end_array();
    w.key("signatures").begin_array();
    for (const auto& [signature, count] : history) {
      w.begin_object();
      w.key("count").value(count);
      w.key("signature").value(optrace::describe(signature));
      w.end_object();
    }
    w.end_array();
    w.end_object();
    return w.take();
  }
  out << "observations: " << optrace::detail::printable(path) << " (" << obs.num_calls() << " calls, " << obs.num_obs() << " stored, "
            << history.size() << " distinct signatures)\n";
  if (why_not.empty()) {
    out << "dynamic shapes: " << shapes << "\n";
    out << "named:          " << named << "\n";
    out << "arguments:      " << arguments << "\n";
  } else {
    out << "cannot infer dynamic shapes and arguments: " << why_not << "\n";
  }
  out << "warnings:       " << (warnings.empty() ? "none" : std::to_string(warnings.size())) << "\n";
  for (const std::string& x : warnings) out << "  " << x << "\n";
  out << "signatures (calls, most first):\n";
  std::vector<size_t> order(history.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return history[x].second > history[y].second; });
  const size_t shown = inv.top > 0 ? std::min(order.size(), static_cast<size_t>(inv.top)) : order.size();
  for (size_t k = 0; k < shown; ++k)
    out << std::setw(8) << history[order[k]].second << "  " << optrace::describe(history[order[k]].first) << "\n";
  if (shown < order.size()) out << "(" << order.size() - shown << " more; --top to show more)\n";
  return out.str();
}

// `summary --by time`: torch's key_averages table of the Kineto trace at `path` (key_averages.hpp,
// no libtorch), the most self CPU time first; --json: its rows. A file of another format is refused
// in one line.
std::string summary_by_time(const Invocation& inv, const std::string& path) {
  auto refuse = [&path](const char* what) {
    throw UsageError("summary --by time reads Kineto traces (*.pt.trace.json[.gz]); " + path + " is " + what);
  };
  if (files::is_observation_file(path)) refuse("an observation file");
  const optrace::KeyAverages averages = [&] {
    try {
      return optrace::KeyAverages::from_kineto_file(path, inv.group_by_shape ? optrace::GroupBy::InputShape : optrace::GroupBy::Name);
    } catch (const optrace::Error&) {
      // The reader speaks of JSON: a trace of another format is better called by its name (a
      // second read, on this path only). Anything else is the reader's error.
      const optrace::kineto::TraceFormat format = optrace::detail::kineto::detect_format(path);
      if (format == optrace::kineto::TraceFormat::HfOpTrace) refuse("an hf op trace");
      if (format == optrace::kineto::TraceFormat::OperatorInputs) refuse("an operator-inputs log");
      if (format == optrace::kineto::TraceFormat::ExecutionTrace) refuse("an execution trace");
      if (files::declares_observations(path)) refuse("an observation file");
      throw;
    }
  }();
  if (!averages.times_measured())
    optrace::detail::raise_about_file<optrace::Error>(
        path, "no measured times to show: optrace convert wrote it from an op trace (one event per unique input, 1 us each; "
              "the calls are in each event's args.count, which optrace summary counts)");
  const int rows = inv.top > 0 ? static_cast<int>(std::min<int64_t>(inv.top, INT_MAX)) : -1;
  if (inv.json) return averages.to_json("self_cpu_time_total", rows, 1);
  const std::string table = averages.table("self_cpu_time_total", rows);
  return "trace: " + optrace::detail::printable(path) + "\n" + (table.empty() ? "no ops, annotations or runtime calls to time\n" : table);
}

// What `summary` prints for the file at `path` (a trace or an observation file); JSON without
// its final newline.
std::string summary_of(const Invocation& inv, const std::string& path) {
  if (inv.by_time) return summary_by_time(inv, path);
  if (files::is_observation_file(path)) return summary_of_observations(inv, path);
  std::optional<optrace::kineto::ImportResult> loaded;
  try {
    loaded.emplace(load_file(path, inv.import));
  } catch (const optrace::Error&) {
    if (!files::declares_observations(path)) throw;
  }
  if (!loaded) return summary_of_observations(inv, path);
  const optrace::kineto::ImportResult& imported = *loaded;
  std::ostringstream out;
  const optrace::OpTrace& trace = imported.trace;
  // The most called ops first; ties in the trace's order.
  std::vector<const optrace::OpEntry*> ops;
  for (const auto& e : trace.ops()) ops.push_back(&e);
  std::stable_sort(ops.begin(), ops.end(),
                   [](const optrace::OpEntry* a, const optrace::OpEntry* b) { return a->total_calls() > b->total_calls(); });
  const double all_calls = static_cast<double>(trace.total_calls());
  const size_t shown = inv.top > 0 ? std::min(ops.size(), static_cast<size_t>(inv.top)) : ops.size();
  const std::vector<optrace::UnknownDtype> unknown = trace.unknown_dtypes();
  if (inv.json) {
    optrace::json::Writer w(1);
    w.begin_object();
    w.key("file").value(path);
    w.key("format").value(imported.report.format);
    w.key("ops").begin_array();
    for (size_t k = 0; k < shown; ++k) {
      w.begin_object();
      w.key("op").value(ops[k]->name);
      w.key("calls").value(ops[k]->total_calls());
      w.key("call_share").value(all_calls > 0 ? static_cast<double>(ops[k]->total_calls()) / all_calls : 0.0);
      w.key("unique_inputs").value(static_cast<int64_t>(ops[k]->unique_inputs.size()));
      w.end_object();
    }
    w.end_array();
    w.key("total").begin_object();
    w.key("ops").value(static_cast<int64_t>(trace.size()));
    w.key("unique_inputs").value(static_cast<int64_t>(trace.unique_input_count()));
    w.key("calls").value(trace.total_calls());
    w.key("dropped_calls").value(trace.dropped_calls());
    w.end_object();
    w.key("unknown_dtypes").begin_array();
    for (const optrace::UnknownDtype& u : unknown) {
      w.begin_object();
      w.key("dtype").value(u.dtype);
      w.key("unique_inputs").value(u.unique_inputs);
      w.key("calls").value(u.calls);
      w.key("ops").begin_array();
      for (const std::string& op : u.ops) w.value(op);
      w.end_array();
      w.end_object();
    }
    w.end_array();
    w.end_object();
    return w.take();
  }
  out << "trace: " << optrace::detail::printable(path) << "\n";
  optrace::detail::TextTable table({"op", "calls", "share", "unique inputs"}, {"calls", "share", "unique inputs"});
  for (const optrace::OpEntry* e : ops)
    table.row({e->name, std::to_string(e->total_calls()), optrace::detail::percent(static_cast<double>(e->total_calls()), all_calls),
               std::to_string(e->unique_inputs.size())});
  table.print(out, static_cast<size_t>(inv.top), "ops");
  out << "total: " << trace.size() << " ops, " << trace.unique_input_count() << " unique inputs, "
      << trace.total_calls() << " calls";
  if (trace.dropped_calls() > 0) out << " (" << trace.dropped_calls() << " not kept as unique inputs)";
  out << "\n";
  if (!unknown.empty()) {
    out << "unknown dtypes (a newer torch's, or a damaged file; replay skips these inputs):\n";
    for (const optrace::UnknownDtype& u : unknown) out << "  " << u.to_string() << "\n";
  }
  if (imported.report.worth_showing()) out << "\n" << imported.report.to_string();
  return out.str();
}

// The traces `summary --by rank` reads: each file as given; a folder's *.json and *.json.gz files
// (not its subfolders'), by name, as HTA reads a folder of rank traces.
std::vector<std::string> rank_trace_files(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (const std::string& input : inputs) {
    if (!files::is_directory(input)) {
      out.push_back(input);
      continue;
    }
    std::vector<std::string> found;
    std::error_code error;
    // Without exceptions: an entry that cannot be examined (a link loop, a dangling link) is named.
    for (std::filesystem::directory_iterator it(input, error), end; !error && it != end; it.increment(error)) {
      const std::string name = it->path().filename().string();
      if (!detail::ends_with(name, ".json") && !detail::ends_with(name, ".json.gz")) continue;
      std::error_code unread;
      const bool regular = it->is_regular_file(unread);
      if (unread) files::fail(it->path().string(), "cannot read it: " + unread.message());
      if (regular) found.push_back(it->path().string());
    }
    if (error) files::fail(input, "cannot list the folder: " + error.message());
    if (found.empty()) files::fail(input, "holds no trace (*.json or *.json.gz) to summarize by rank");
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  files::check_distinct_inputs(out);
  return out;
}

// `summary --by rank`: the ranks of a distributed job side by side (rank_summary.hpp), the traces
// read --jobs at a time, then the longest waits explained (the two ranks compared at each read
// again); its notes (steps that differ, ranks missing) on stderr, one line each. --html: the page
// too, its path checked before any trace is read.
int summary_by_rank(const Invocation& inv) {
  const std::vector<std::string> paths = rank_trace_files(inv.inputs);
  if (!inv.html_path.empty()) files::check_outputs(paths, {inv.html_path}, inv.force);
  std::vector<optrace::RankTrace> ranks;
  in_order(paths, inv.jobs, [&paths](size_t i) { return optrace::RankTrace::from_kineto_file(paths[i]); },
           [&ranks](size_t, optrace::RankTrace trace) { ranks.push_back(std::move(trace)); });
  optrace::RankSummary summary = optrace::RankSummary::from_ranks(std::move(ranks));
  summary.explain_waits();
  for (const std::string& note : summary.notes()) std::cerr << "optrace: note: " << one_line(note) << "\n";
  if (!inv.html_path.empty()) optrace::detail::write_file_atomic(inv.html_path, summary.to_html());
  std::cout << (inv.json ? summary.to_json(1) + "\n" : summary.table());
  return 0;
}

// Each file's summary in the order given, read --jobs at a time; several JSON summaries make a list.
int summary(const Invocation& inv) {
  if (inv.by_rank) return summary_by_rank(inv);
  const bool list = inv.json && inv.inputs.size() > 1;
  if (list) std::cout << "[\n";
  in_order(inv.inputs, inv.jobs, [&inv](size_t i) { return summary_of(inv, inv.inputs[i]); },
           [&](size_t i, std::string text) {
             if (i > 0) std::cout << (list ? ",\n" : "\n");
             std::cout << text << (inv.json && !list ? "\n" : "");
             std::cout.flush();
           });
  if (list) std::cout << "\n]\n";
  return 0;
}

// What a command given a plan reads: its arguments, and every file of the plan (Plan::files: an
// output onto plan.json, an observation file, a package or the weights would destroy the plan,
// whatever the output's spelling, a hard link included).
std::vector<std::string> inputs_with_plan(const std::vector<std::string>& inputs, const optrace::Plan& plan) {
  std::vector<std::string> out = inputs;
  for (const std::string& f : plan.files()) out.push_back(f);
  return out;
}

#ifndef OPTRACE_CLI_FRONT_END
// The signal that asked a replay to stop (0: none). The handler only sets it, and puts the
// default action back, so that a second Ctrl-C ends the program at once.
volatile std::sig_atomic_t stop_signal = 0;
extern "C" void on_stop_signal(int signal) {
  stop_signal = signal;
  std::signal(signal, SIG_DFL);
}

// SIGINT and SIGTERM ask the replay to stop (stop_signal) while one lives.
struct StopOnSignals {
  StopOnSignals() {
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
  }
  ~StopOnSignals() {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  }
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;
};

// The line that says a replay was stopped, and its exit status (128 + the signal).
int stopped(const std::string& how_far, bool written) {
  const int signal = stop_signal;
  std::cerr << "optrace: stopped by " << (signal == SIGTERM ? "SIGTERM" : "SIGINT") << how_far << "; the report"
            << (written ? " (written, \"complete\": false)" : "") << " holds those\n";
  return 128 + signal;
}

// "not ok (N):" and the results' lines (print_not_ok), after a blank line unless they come first.
template <class Report>
void print_not_ok(const Report& report, int64_t not_ok, bool first) {
  if (not_ok == 0) return;
  std::cout << (first ? "" : "\n") << "not ok (" << not_ok << "):\n";
  report.print_not_ok(std::cout);
}

// Each name in --ops that no op of the trace answers to (a typo would otherwise replay nothing).
std::vector<std::string> unmatched_ops(const optrace::OpTrace& trace, const optrace::ReplayOptions& options) {
  std::vector<std::string> out;
  for (const std::string& name : options.ops()) {
    const bool found = std::any_of(trace.ops().begin(), trace.ops().end(),
                                   [&](const optrace::OpEntry& e) { return optrace::ReplayOptions::names(name, e.name); });
    if (!found) out.push_back(name);
  }
  return out;
}

// An execution trace replayed as the window it recorded (optrace/execution_replay.hpp).
int replay_window(const Invocation& inv) {
  if (!inv.unique_only.empty())
    throw UsageError(inv.unique_only.front() + " goes with a replay of unique inputs: " + inv.inputs[0] +
                     " is an execution trace, replayed as its window (add --unique-inputs to replay its unique inputs)");
  std::vector<std::string> outputs;
  if (!inv.json_path.empty()) outputs.push_back(inv.json_path);
  std::vector<std::string> inputs = inv.inputs;
  if (!inv.kineto_path.empty()) inputs.push_back(inv.kineto_path);
  files::check_outputs(inputs, outputs, inv.force);  // before the long part, not after

  optrace::ReplayOptions options = inv.replay;
  options.stop_when([] { return stop_signal != 0; });
  if (options.progress())
    std::cerr << "optrace: replaying the window of " << inv.inputs[0] << " call by call (Ctrl-C stops and keeps the report)\n";
  const optrace::ExecutionReplayReport report = [&] {
    StopOnSignals signals;
    return optrace::replay_execution_trace(inv.inputs[0], options, inv.kineto_path);
  }();
  if (report.nodes.empty()) throw UsageError("nothing to replay: " + inv.inputs[0] + " holds no op this libtorch's dispatcher has");

  if (!inv.failures_only) {
    report.print_ops(std::cout, static_cast<size_t>(inv.top));
    if (!inv.kineto_path.empty() && report.recorded_nodes == 0)
      std::cout << "\nnote: no call of " << inv.inputs[0] << " was found in " << inv.kineto_path
                << " (by RecordFunction id and name): is it the Kineto trace of another window?\n";
  }
  const int64_t not_ok = static_cast<int64_t>(report.nodes.size()) - report.count(optrace::ReplayStatus::ok);
  print_not_ok(report, not_ok, inv.failures_only);
  std::cout << report.summary() << "\n";
  std::cout.flush();
  if (!inv.json_path.empty()) report.save_json(inv.json_path);
  if (!report.complete) return stopped(" during pass " + std::to_string(report.passes_run) + " of " +
                                           std::to_string(report.warmup_passes + report.timed_passes), !outputs.empty());
  if (report.count(optrace::ReplayStatus::ok) + report.count(optrace::ReplayStatus::error) == 0) {
    std::cerr << "optrace: nothing ran: all " << report.nodes.size() << " calls were skipped (see their messages)\n";
    return 1;
  }
  return not_ok == 0 ? 0 : 1;
}

int replay(const Invocation& inv) {
  // An execution trace is told by its first bytes (torch and optrace write "schema" first), or,
  // with its keys in another order, by its import: a large trace is read once either way.
  using optrace::kineto::TraceFormat;
  const TraceFormat by_head = optrace::detail::kineto::format_by_first_bytes(inv.inputs[0]);
  if (by_head == TraceFormat::ExecutionTrace && !inv.unique_inputs) return replay_window(inv);
  auto refuse_kineto = [&](bool window) {
    if (!inv.kineto_path.empty())
      throw UsageError("--kineto goes with an execution trace's window: " + inv.inputs[0] +
                       (window ? " is replayed by unique inputs (--unique-inputs)" : " is no execution trace"));
  };
  if (by_head != TraceFormat::Unknown) refuse_kineto(by_head == TraceFormat::ExecutionTrace);  // before the long part
  std::vector<std::string> outputs;
  if (!inv.json_path.empty()) outputs.push_back(inv.json_path);
  if (!inv.csv_path.empty()) outputs.push_back(inv.csv_path);
  files::check_outputs(inv.inputs, outputs, inv.force);  // before the long part, not after
  const optrace::kineto::ImportResult loaded = load_file(inv.inputs[0], inv.import);
  const bool window = loaded.report.format == "execution_trace";
  if (window && !inv.unique_inputs) return replay_window(inv);
  refuse_kineto(window);
  const optrace::OpTrace& trace = loaded.trace;
  const std::vector<std::string> unmatched = unmatched_ops(trace, inv.replay);
  if (!unmatched.empty()) {
    std::string names, known;
    for (const std::string& n : unmatched) names += (names.empty() ? "" : ", ") + n;
    for (const auto& e : trace.ops())
      if (known.size() < 300) known += (known.empty() ? "" : ", ") + e.name;
    throw UsageError("--ops " + names + ": no op of " + inv.inputs[0] + " has that name (its ops: " + known + ")");
  }

  optrace::ReplayOptions options = inv.replay;
  options.stop_when([] { return stop_signal != 0; });
  if (options.progress())
    std::cerr << "optrace: replaying " << inv.inputs[0] << " (Ctrl-C stops after the input running and keeps the report)\n";
  const optrace::ReplayReport report = [&] {
    StopOnSignals signals;
    return optrace::replay(trace, options);
  }();
  if (report.planned == 0) throw UsageError("nothing to replay: the options select no input of " + inv.inputs[0]);

  if (inv.all_rows) {
    report.print_table(std::cout);
  } else {
    if (!inv.failures_only) {
      report.print_op_totals(std::cout, inv.top);
      if (report.mode == optrace::ReplayMode::time) {
        std::cout << "\ninputs by total time (median x recorded calls):\n";
        report.print_slowest(std::cout, inv.top > 0 ? inv.top : 20);
      }
    }
    print_not_ok(report, static_cast<int64_t>(report.results.size()) - report.num(optrace::ReplayStatus::ok), inv.failures_only);
    std::cout << report.summary() << "\n";
  }
  std::cout.flush();
  if (!inv.json_path.empty()) report.save_json(inv.json_path);
  if (!inv.csv_path.empty()) report.save_csv(inv.csv_path);
  if (!report.complete)
    return stopped(" after " + std::to_string(report.results.size()) + " of " + std::to_string(report.planned) + " inputs",
                   !outputs.empty());
  const int64_t ran = report.num(optrace::ReplayStatus::ok) + report.num(optrace::ReplayStatus::mismatch) +
                      report.num(optrace::ReplayStatus::error);
  if (ran == 0) {
    std::cerr << "optrace: nothing ran: all " << report.results.size() << " inputs were skipped (see their messages)\n";
    return 1;
  }
  return report.all_ok() ? 0 : 1;
}

std::string one_line(std::string s);

#ifdef OPTRACE_CLI_AOTI
torch::jit::Module load_reference(const std::string& path) {
  torch::jit::Module module;
  try {
    module = torch::jit::load(path);
  } catch (const c10::Error& e) {
    optrace::detail::raise_about_file<optrace::IoError>(path, "cannot load it as a TorchScript module: ",
                                                        one_line(e.what_without_backtrace()));
  }
  module.eval();
  return module;
}

// A plan's folder, or a file whose first KiB names the plan format (anything else is read as a
// package, and refused as one when it is not).
bool is_plan_file(const std::string& path) {
  if (files::is_directory(path)) return true;
  std::ifstream in(path, std::ios::binary);
  char head[1024] = {};
  in.read(head, sizeof head - 1);
  return std::string(head, static_cast<size_t>(in.gcount())).find("\"optrace.plan\"") != std::string::npos;
}

optrace::aoti::LoadOptions load_options(const Invocation& inv) {
  optrace::aoti::LoadOptions options;
  if (!inv.weights.empty()) options.weights(inv.weights);
  return options;
}

// optrace verify PLAN: each package of a plan on the observed signatures it covers (the first
// package that covers a signature takes it, as PackageSet routes a call), then the signatures no
// package covers.
int verify_plan(const Invocation& inv, const optrace::Plan& plan, const optrace::aoti::VerifyOptions& options) {
  const std::vector<optrace::Observations> parts = plan.assign(optrace::load_observations(inv.inputs[1]));
  std::optional<torch::jit::Module> module;
  if (!inv.reference.empty()) module = load_reference(inv.reference);
  // Loaded as a set is served: the plan's weights read once, for the packages compiled without them.
  const optrace::aoti::PackageSet set = optrace::aoti::PackageSet::load(inv.inputs[0], load_options(inv));
  optrace::json::Writer w(1);
  w.begin_object().key("plan").value(plan.path()).key("packages").begin_array();
  bool all_ok = true;
  for (size_t i = 0; i < plan.packages().size(); ++i) {
    const optrace::PlannedPackage& planned = plan.packages()[i];
    if (parts[i].history().empty()) continue;
    optrace::aoti::Package pkg = set.package(i);
    optrace::aoti::VerifyReport report =
        module ? optrace::aoti::verify(pkg, parts[i], *module, options) : optrace::aoti::verify(pkg, parts[i], options);
    std::cout << planned.name << " (" << planned.file << ") " << pkg.signature() << " on " << pkg.device() << "\n"
              << report.table() << report.summary() << "\n";
    all_ok &= report.all_ok();
    w.begin_object().key("name").value(planned.name).key("file").value(planned.file).key("report").raw(report.to_json(0)).end_object();
  }
  const std::vector<std::pair<optrace::Value, int64_t>> uncovered = parts.back().history();
  int64_t calls = 0;
  for (const auto& [signature, count] : uncovered) {
    calls += count;
    std::cout << "not covered: " << count << " calls  " << optrace::describe(signature) << "\n";
  }
  if (!uncovered.empty())
    std::cout << uncovered.size() << " signatures (" << calls << " calls) no package covers: optrace drift "
              << plan.path() << " " << inv.inputs[1] << " says why\n";
  w.end_array().key("uncovered_signatures").value(static_cast<int64_t>(uncovered.size())).key("uncovered_calls").value(calls);
  w.end_object();
  std::cout.flush();
  if (!inv.json_path.empty()) optrace::detail::write_file_atomic(inv.json_path, w.take() + "\n");
  return all_ok && uncovered.empty() ? 0 : 1;
}
#endif

// optrace verify: an AOTInductor package on every observed call signature (optrace/aoti.hpp), or
// each package of a plan on the signatures it covers.
int verify(const Invocation& inv) {
#ifdef OPTRACE_CLI_AOTI
  std::vector<std::string> outputs;
  if (!inv.json_path.empty()) outputs.push_back(inv.json_path);
  const bool is_plan = is_plan_file(inv.inputs[0]);
  std::optional<optrace::Plan> plan;
  if (is_plan) plan = optrace::Plan::load(inv.inputs[0]);
  files::check_outputs(plan ? inputs_with_plan(inv.inputs, *plan) : inv.inputs, outputs, inv.force);
  optrace::aoti::VerifyOptions options;
  // Integers: in --int-range when given, else within the values the observation file recorded
  // for each input (else [0, 8)).
  optrace::MaterializeOptions inputs = optrace::MaterializeOptions().seed(inv.seed);
  if (inv.int_range_given) inputs.int_range(inv.int_low, inv.int_high);
  options.inputs(inputs);
  options.timed_runs(static_cast<int>(inv.runs));
  if (!inv.device.empty()) options.device(c10::Device(inv.device));
  if (inv.atol >= 0) options.atol(inv.atol);
  if (inv.rtol >= 0) options.rtol(inv.rtol);
  if (plan) return verify_plan(inv, *plan, options);
  optrace::aoti::Package pkg(inv.inputs[0], load_options(inv));
  const optrace::Observations observations = optrace::load_observations(inv.inputs[1]);
  for (const std::string& note : pkg.unchecked()) std::cerr << "optrace: note: " << note << "\n";
  optrace::aoti::VerifyReport report;
  if (inv.reference.empty()) {
    report = optrace::aoti::verify(pkg, observations, options);
  } else {
    torch::jit::Module module = load_reference(inv.reference);
    report = optrace::aoti::verify(pkg, observations, module, options);
  }
  std::cout << inv.inputs[0] << " " << pkg.signature() << " on " << pkg.device() << "\n" << report.table()
            << report.summary() << "\n";
  std::cout.flush();
  if (!inv.json_path.empty()) optrace::detail::write_file_atomic(inv.json_path, report.to_json() + "\n");
  return report.all_ok() ? 0 : 1;
#else
  (void)inv;
  throw optrace::Error("optrace verify needs libtorch >= 2.6 (AOTInductor's package loader); this optrace-torch is built with "
                       "libtorch " TORCH_VERSION);
#endif
}

#endif

// What writing `trace` as format `to` ("hf", "kineto") cannot carry, one line each: the extended
// fields a plain reader ignores or the format has no place for. (Text: operator_inputs::WriteReport.)
std::vector<std::string> not_carried(const optrace::OpTrace& trace, const std::string& to) {
  int64_t kwargs = 0, strides = 0, list_strides = 0, devices = 0, ranges = 0;
  for (const optrace::OpEntry& e : trace.ops())
    for (const optrace::OpInput& in : e.unique_inputs) {
      kwargs += !in.kwargs.empty();
      strides += !in.input_strides.empty();
      bool lists = false;
      for (const auto& [id, list] : in.tensor_lists) lists = lists || !list.strides.empty();
      for (const auto& k : in.kwargs) lists = lists || k.strides.has_value();
      list_strides += lists;
      devices += !in.input_devices.empty();
      ranges += !in.input_value_ranges.empty();
    }
  std::vector<std::string> out;
  auto add = [&out](int64_t n, const std::string& what) {
    if (n > 0) out.push_back(std::to_string(n) + " unique inputs' " + what);
  };
  if (to == "hf") {
    add(kwargs, "keyword arguments kept in optrace's extended key \"kwargs\" (plain hf readers ignore it)");
    add(strides + list_strides, "strides kept in optrace's extended keys \"input_strides\"/\"strides\" (plain hf readers ignore them)");
  } else if (to == "kineto") {
    add(kwargs, "keyword arguments not written (a Kineto event has no keyword arguments)");
    add(list_strides, "strides of tensor-list elements and keyword tensors not written");
    add(devices, "devices not written");
    add(ranges, "integer value ranges not written");
  }
  return out;
}

// Writes `trace` to `path` as `to` ("hf", "kineto", "text"); returns what the format could not
// hold, and the dtypes no torch names (written as read).
std::vector<std::string> write_trace(const optrace::OpTrace& trace, const std::string& path, const std::string& to,
                                     bool keep_non_compute) {
  std::vector<std::string> notes;
  if (to == "text") {
    optrace::operator_inputs::WriteReport report;
    const auto options = optrace::operator_inputs::WriteOptions().skip_non_compute(!keep_non_compute);
    optrace::detail::save_operator_inputs(trace, path, op_catalog(), options, &report);
    notes = report.lines();
  } else {
    if (to == "kineto") optrace::detail::kineto::save_trace(trace, path, {});
    else trace.save(path);
    notes = not_carried(trace, to);
  }
  for (const optrace::UnknownDtype& u : trace.unknown_dtypes())
    notes.push_back("unknown dtype " + u.to_string() + " written as read (a newer torch's, or a damaged file)");
  return notes;
}

int merge(const Invocation& inv) {
  files::check_distinct_inputs(inv.inputs);
  files::check_outputs(inv.inputs, {inv.output}, inv.force);
  optrace::OpTrace merged;
  in_order(inv.inputs, inv.jobs, [&inv](size_t i) { return load_trace(inv.inputs[i], inv.import); },
           [&merged](size_t, optrace::OpTrace trace) { merged.merge(trace); });
  const std::vector<std::string> notes = write_trace(merged, inv.output, inv.to, false);
  std::cout << "merged " << inv.inputs.size() << " traces into " << inv.output << ": " << merged.size() << " ops, "
            << merged.unique_input_count() << " unique inputs, " << merged.total_calls() << " calls\n";
  for (const std::string& n : notes) std::cerr << "note: " << n << "\n";
  return 0;
}

// Converts `input` into `output`; returns what convert prints on stderr for it.
std::string convert_one(const Invocation& inv, const std::string& input, const std::string& output) {
  const optrace::kineto::ImportResult r = load_file(input, inv.import);
  const std::vector<std::string> notes = write_trace(r.trace, output, inv.to, inv.keep_non_compute);
  std::ostringstream out;
  if (r.report.worth_showing()) out << r.report.to_string();
  for (const std::string& n : notes) out << "note: " << n << "\n";
  out << "wrote " << output << ": " << r.trace.size() << " ops, " << r.trace.unique_input_count() << " unique inputs, "
      << r.trace.total_calls() << " calls\n";
  return out.str();
}

int convert(const Invocation& inv) {
  // Several traces, or an existing directory as OUT: one output per trace in that directory.
  const bool into_directory = inv.inputs.size() > 1 || files::is_directory(inv.output);
  const std::vector<std::string> outputs =
      into_directory ? files::outputs_in_directory(inv.inputs, inv.output, inv.to) : std::vector<std::string>{inv.output};
  files::check_outputs(inv.inputs, outputs, inv.force);
  in_order(inv.inputs, inv.jobs,
           [&](size_t i) { return convert_one(inv, inv.inputs[i], outputs[i]); },
           [&inv](size_t, std::string text) {
             if (!inv.quiet) std::cerr << text;
           });
  return 0;
}

// optrace plan: the packages that cover the observed calls (optrace/plan.hpp).
int plan(const Invocation& inv) {
  // Checked before any work (planning many signatures takes seconds): in an existing folder,
  // plan.json and every package file a plan there has, which this plan would replace. The exact
  // list is checked again once the plan is made.
  if (files::is_directory(inv.output)) {
    std::vector<std::string> existing{inv.output + "/plan.json"};
    std::error_code unread;
    for (std::filesystem::directory_iterator it(inv.output, unread), end; !unread && it != end; it.increment(unread)) {
      const std::string name = it->path().filename().string();
      if (name.size() > 19 && name[0] == 'p' && detail::ends_with(name, ".observations.json") &&
          std::all_of(name.begin() + 1, name.end() - 18, [](char c) { return c >= '0' && c <= '9'; }))
        existing.push_back(inv.output + "/" + name);
    }
    files::check_outputs(inv.inputs, existing, inv.force);
  }
  std::vector<optrace::Observations> observations;
  for (const std::string& path : inv.inputs) observations.push_back(optrace::load_observations(path));
  const optrace::Plan p = optrace::Plan::from_observations(
      observations, optrace::PlanOptions().max_packages(static_cast<int>(inv.max_packages)), inv.inputs);
  // Every file the plan writes is an output: none an input, none replaced without --force.
  const std::string plan_file = inv.output + "/plan.json";
  std::vector<std::string> outputs{plan_file};
  for (const optrace::PlannedPackage& package : p.packages()) outputs.push_back(inv.output + "/" + package.observations_file);
  std::error_code made;
  std::filesystem::create_directories(inv.output, made);
  files::check_outputs(inv.inputs, outputs, inv.force);
  p.save(inv.output);
  std::cout << p.summary() << "wrote " << plan_file << "\n";
  return 0;
}

// optrace drift: the observed calls a plan does not cover (optrace/plan.hpp).
int drift(const Invocation& inv) {
  std::vector<std::string> outputs;
  if (!inv.json_path.empty()) outputs.push_back(inv.json_path);
  const optrace::Plan p = optrace::Plan::load(inv.inputs[0]);
  files::check_outputs(inputs_with_plan(inv.inputs, p), outputs, inv.force);
  std::vector<optrace::Observations> observations;
  for (size_t i = 1; i < inv.inputs.size(); ++i) observations.push_back(optrace::load_observations(inv.inputs[i]));
  const optrace::DriftReport report = p.drift(observations);
  std::cout << report.to_string();
  std::cout.flush();
  if (!inv.json_path.empty()) optrace::detail::write_file_atomic(inv.json_path, report.to_json() + "\n");
  return report.all_covered() ? 0 : 1;
}

// What `optrace` alone prints (on stderr, status 2): a line on what it is, and each command's usage.
void print_usage(std::ostream& out) {
  out << "optrace: read, replay, merge and convert op traces; show observation files; plan, verify AOTInductor packages\n\nusage:\n";
  for (const CommandInfo& c : kCommands) out << "  " << c.usage << "\n";
  out << "  optrace --help | optrace COMMAND --help\n";
}

void print_help(std::ostream& out) {
  print_usage(out);
  out << "\n"
         "TRACE is an hf op trace (hf_op_trace.json), a Kineto trace (*.pt.trace.json, .json.gz) or an\n"
         "operator-inputs log (PyTorch's OperatorInputsMode, BackendBench: *.txt), told apart by content.\n"
         "--strides: keep the strides of a Kineto trace's non-contiguous tensors (input_strides);\n"
         "by default an import holds what OpTracer writes by default.\n\n";
  for (const CommandInfo& c : kCommands) out << c.name << ":\n" << c.help << "\n";
  out << "exit status: 0 success; 1 replay found errors or mismatches, or ran nothing, or verify found a\n"
         "signature not ok, or drift found a call not covered; 2 bad usage or bad input; 130/143 replay stopped by SIGINT/SIGTERM (partial report kept)\n";
}

// One line, whatever the message holds.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

#ifdef OPTRACE_CLI_FRONT_END
// Runs optrace-torch (next to this program) with the same arguments, in this process's place.
int hand_to_optrace_torch(char** argv) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string(argv[0]);
  dir = dir.find('/') == std::string::npos ? "." : dir.substr(0, dir.rfind('/'));
  const std::string full = dir + "/optrace-torch";
  std::cout.flush();
  ::execv(full.c_str(), argv);
  throw optrace::IoError("this command needs libtorch, and " + full + " (the tool built with it) cannot be run: " +
                         std::strerror(errno));
}

#endif

int run(int argc, char** argv) {
#ifdef OPTRACE_CLI_FRONT_END
  if (argc > 1 && (std::string(argv[1]) == "replay" || std::string(argv[1]) == "verify")) return hand_to_optrace_torch(argv);
#endif
  Invocation inv = parse_args(argc, argv);
  // Files read at once share the cores: each import reads its trace on its share of them.
  const size_t at_once = jobs_for(inv.jobs, inv.inputs.size());
  if (at_once > 1) inv.import.threads(std::max<int64_t>(1, std::thread::hardware_concurrency() / at_once));
  if (inv.help) {
    if (inv.command != Command::none) {
      std::cout << "usage: " << info(inv.command).usage << "\n" << info(inv.command).help;
      return 0;
    }
    if (inv.help_error) print_usage(std::cerr);  // no arguments: the usage, not the whole help
    else print_help(std::cout);
    return inv.help_error ? 2 : 0;
  }
#ifdef OPTRACE_CLI_FRONT_END
  if (inv.command == Command::replay || inv.command == Command::verify) return hand_to_optrace_torch(argv);  // need libtorch
#endif
  switch (inv.command) {
    case Command::summary: return summary(inv);
#ifndef OPTRACE_CLI_FRONT_END
    case Command::replay: return replay(inv);
    case Command::verify: return verify(inv);
#else
    case Command::replay:
    case Command::verify: break;
#endif
    case Command::merge: return merge(inv);
    case Command::convert: return convert(inv);
    case Command::plan: return plan(inv);
    case Command::drift: return drift(inv);
    case Command::none: break;
  }
  return 2;
}

}  // namespace cli

int main(int argc, char** argv) {
  try {
    return cli::run(argc, argv);
  } catch (const cli::UsageError& e) {
    std::cerr << "optrace: " << cli::one_line(e.message()) << " (see optrace --help)\n";
#ifndef OPTRACE_CLI_FRONT_END
  } catch (const c10::Error& e) {
    std::cerr << "optrace: " << cli::one_line(e.what_without_backtrace()) << "\n";
#endif
  } catch (const optrace::Error& e) {
    std::cerr << "optrace: " << cli::one_line(e.what_without_prefix()) << "\n";
  } catch (const std::filesystem::filesystem_error& e) {  // in the usual form: the file, then why
    std::cerr << "optrace: " << cli::one_line(e.path1().string() + ": IoError: " + e.code().message()) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "optrace: " << cli::one_line(e.what()) << "\n";
  }
  return 2;
}
