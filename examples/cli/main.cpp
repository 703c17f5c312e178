// examples/cli: the optrace command-line tool (CMake target optrace_cli, executable optrace).
//
//   optrace summary TRACE
//   optrace replay TRACE [--device cuda|cpu|meta] [--check] [--time] [--json OUT] [--csv OUT] ...
//   optrace merge A B ... -o OUT
//   optrace convert TRACE -o OUT [--to hf|kineto|text] [--keep-non-compute] [--quiet]
//   optrace --help
//
// TRACE is an hf op trace (hf_op_trace.json), a Kineto trace (*.pt.trace.json, .json.gz) or
// PyTorch's operator-inputs log (*.txt), told apart by content; --strides keeps a Kineto trace's
// strides of non-contiguous tensors.
//
// Exit status: 0 success; 1 a replay found errors or mismatches; 2 bad usage or bad input (one
// line on stderr naming the file and, for JSON, the path inside it).
//
// The command line is parsed by cli::parse_args (cli.hpp, fuzzed by tests/fuzz/fuzz_cli.cpp);
// each subcommand here is one function that runs a parsed Invocation.
#include "cli.hpp"

#include <optrace/kineto.hpp>
#include <optrace/op_trace.hpp>
#include <optrace/operator_inputs.hpp>
#include <optrace/replay.hpp>

#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace cli {

// A file that cannot be read or parsed: printed as "optrace: FILE: <what>", exit status 2.
struct FileError : std::runtime_error {
  FileError(const std::string& file, const std::string& what) : std::runtime_error(file + ": " + what) {}
};

// The trace at `path`, an hf op trace or a Kineto trace, with the import report.
optrace::kineto::ImportResult load_file(const std::string& path, const optrace::kineto::ImportOptions& options) {
  try {
    return optrace::kineto::load_any(path, options);
  } catch (const optrace::TextError&) {
    throw;  // names the file, line and column already
  } catch (const optrace::Error& e) {
    throw FileError(path, e.what_without_prefix());
  }
}

optrace::OpTrace load_trace(const std::string& path, const optrace::kineto::ImportOptions& options) {
  return load_file(path, options).trace;
}

// ---------------------------------------------------------------------------------------------

int summary(const Invocation& inv) {
  const std::string& path = inv.inputs[0];
  const optrace::kineto::ImportResult imported = load_file(path, inv.import);
  const optrace::OpTrace& trace = imported.trace;
  size_t width = 2;
  for (const auto& e : trace.ops()) width = std::max(width, e.name.size());
  std::cout << "trace: " << path << "\n";
  std::cout << std::left << std::setw(static_cast<int>(width)) << "op" << std::right << "  " << std::setw(13)
            << "unique inputs" << "  " << std::setw(10) << "calls" << "\n";
  for (const auto& e : trace.ops())
    std::cout << std::left << std::setw(static_cast<int>(width)) << e.name << std::right << "  " << std::setw(13)
              << e.unique_inputs.size() << "  " << std::setw(10) << e.total_calls() << "\n";
  std::cout << "total: " << trace.size() << " ops, " << trace.unique_input_count() << " unique inputs, "
            << trace.total_calls() << " calls";
  if (trace.dropped_calls() > 0) std::cout << " (" << trace.dropped_calls() << " not kept as unique inputs)";
  std::cout << "\n";
  if (imported.report.format == "kineto" || !imported.report.issues.empty())
    std::cout << "\n" << imported.report.to_string();
  return 0;
}

int replay(const Invocation& inv) {
  const optrace::OpTrace trace = load_trace(inv.inputs[0], inv.import);
  const optrace::ReplayReport report = optrace::replay(trace, inv.replay);
  report.print_table(std::cout);
  std::cout.flush();
  try {
    if (!inv.json_path.empty()) report.save_json(inv.json_path);
  } catch (const optrace::Error& e) {
    throw FileError(inv.json_path, e.what_without_prefix());
  }
  try {
    if (!inv.csv_path.empty()) report.save_csv(inv.csv_path);
  } catch (const optrace::Error& e) {
    throw FileError(inv.csv_path, e.what_without_prefix());
  }
  return report.all_ok() ? 0 : 1;
}

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

// Writes `trace` to `path` as `to` ("hf", "kineto", "text"); returns what the format could not hold.
std::vector<std::string> write_trace(const optrace::OpTrace& trace, const std::string& path, const std::string& to,
                                     bool keep_non_compute) {
  try {
    if (to == "text") {
      optrace::operator_inputs::WriteReport report;
      optrace::operator_inputs::save(trace, path, optrace::operator_inputs::WriteOptions().skip_non_compute(!keep_non_compute),
                                     &report);
      return report.lines();
    }
    if (to == "kineto") optrace::kineto::save(trace, path);
    else trace.save(path);
  } catch (const optrace::Error& e) {
    throw FileError(path, e.what_without_prefix());
  }
  return not_carried(trace, to);
}

int merge(const Invocation& inv) {
  optrace::OpTrace merged;
  for (const std::string& path : inv.inputs) merged.merge(load_trace(path, inv.import));
  const std::vector<std::string> notes = write_trace(merged, inv.output, inv.to, false);
  std::cout << "merged " << inv.inputs.size() << " traces into " << inv.output << ": " << merged.size() << " ops, "
            << merged.unique_input_count() << " unique inputs, " << merged.total_calls() << " calls\n";
  for (const std::string& n : notes) std::cerr << "note: " << n << "\n";
  return 0;
}

int convert(const Invocation& inv) {
  const optrace::kineto::ImportResult r = load_file(inv.inputs[0], inv.import);
  const std::vector<std::string> notes = write_trace(r.trace, inv.output, inv.to, inv.keep_non_compute);
  if (!inv.quiet) {
    if (r.report.format == "kineto" || !r.report.issues.empty()) std::cerr << r.report.to_string();
    for (const std::string& n : notes) std::cerr << "note: " << n << "\n";
    std::cerr << "wrote " << inv.output << ": " << r.trace.size() << " ops, " << r.trace.unique_input_count()
              << " unique inputs, " << r.trace.total_calls() << " calls\n";
  }
  return 0;
}

void print_help(std::ostream& out) {
  out << "optrace: read, replay, merge and convert op traces\n\nusage:\n";
  for (const CommandInfo& c : kCommands) out << "  " << c.usage << "\n";
  out << "  optrace --help | optrace COMMAND --help\n\n"
         "TRACE is an hf op trace (hf_op_trace.json), a Kineto trace (*.pt.trace.json, .json.gz) or an\n"
         "operator-inputs log (PyTorch's OperatorInputsMode, BackendBench: *.txt), told apart by content.\n"
         "--strides: keep the strides of a Kineto trace's non-contiguous tensors (input_strides);\n"
         "by default an import holds what OpTracer writes by default.\n\n";
  for (const CommandInfo& c : kCommands) out << c.name << ":\n" << c.help << "\n";
  out << "exit status: 0 success; 1 replay found errors or mismatches; 2 bad usage or bad input\n";
}

// One line, whatever the message holds.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

int run(int argc, char** argv) {
  const Invocation inv = parse_args(argc, argv);
  if (inv.help) {
    if (inv.command != Command::none) {
      std::cout << "usage: " << info(inv.command).usage << "\n" << info(inv.command).help;
      return 0;
    }
    print_help(inv.help_error ? std::cerr : std::cout);
    return inv.help_error ? 2 : 0;
  }
  switch (inv.command) {
    case Command::summary: return summary(inv);
    case Command::replay: return replay(inv);
    case Command::merge: return merge(inv);
    case Command::convert: return convert(inv);
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
  } catch (const cli::FileError& e) {
    std::cerr << "optrace: " << cli::one_line(e.what()) << "\n";
  } catch (const c10::Error& e) {
    std::cerr << "optrace: " << cli::one_line(e.what_without_backtrace()) << "\n";
  } catch (const optrace::Error& e) {
    std::cerr << "optrace: " << cli::one_line(e.what_without_prefix()) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "optrace: " << cli::one_line(e.what()) << "\n";
  }
  return 2;
}
