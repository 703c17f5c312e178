// examples/cli: the optrace command-line tool (CMake target optrace_cli, executable optrace).
//
//   optrace summary TRACE
//   optrace replay TRACE [--device cuda|cpu|meta] [--check] [--time] [--json OUT] [--csv OUT] ...
//   optrace merge A B ... -o OUT
//   optrace convert TRACE -o OUT [--to hf|kineto] [--quiet]
//   optrace --help
//
// TRACE is an hf op trace (hf_op_trace.json) or a Kineto trace (*.pt.trace.json, .json.gz).
//
// Exit status: 0 success; 1 a replay found errors or mismatches; 2 bad usage or bad input (one
// line on stderr naming the file and, for JSON, the path inside it).
//
// Each subcommand is one function with the same signature, listed in kCommands: a new one (a
// Kineto `convert`, ...) is a function and a line there.
#include <optrace/kineto.hpp>
#include <optrace/op_trace.hpp>
#include <optrace/replay.hpp>

#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace cli {

using Args = std::vector<std::string>;

// A bad command line: printed with a pointer to --help, exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A file that cannot be read or parsed: printed as "optrace: FILE: <what>", exit status 2.
struct FileError : std::runtime_error {
  FileError(const std::string& file, const std::string& what) : std::runtime_error(file + ": " + what) {}
};

// optrace's own "optrace: JsonError at /a/b: ..." without the "optrace: " it starts with.
std::string strip_prefix(std::string s) {
  if (s.rfind("optrace: ", 0) == 0) s.erase(0, 9);
  return s;
}

// The trace at `path`, an hf op trace or a Kineto trace, with the import report.
optrace::kineto::ImportResult load_any(const std::string& path) {
  try {
    return optrace::kineto::load_any(path);
  } catch (const optrace::Error& e) {
    throw FileError(path, strip_prefix(e.what()));
  }
}

optrace::OpTrace load_trace(const std::string& path) { return load_any(path).trace; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// --name VALUE: the value, or UsageError when it is missing.
std::string value_of(const Args& args, size_t& i) {
  if (i + 1 >= args.size()) throw UsageError("option " + args[i] + " needs a value");
  return args[++i];
}

int64_t int_of(const std::string& option, const std::string& text, int64_t min) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= min) return v;
  } catch (const std::exception&) {
  }
  throw UsageError("option " + option + " needs an integer >= " + std::to_string(min) + ", got '" + text + "'");
}

double double_of(const std::string& option, const std::string& text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw UsageError("option " + option + " needs a number >= 0, got '" + text + "'");
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

bool is_help(const std::string& a) { return a == "--help" || a == "-h"; }

// ---------------------------------------------------------------------------------------------

int summary(const Args& args) {
  if (args.size() != 1 || args[0].rfind("-", 0) == 0) throw UsageError("summary takes one trace file");
  const optrace::kineto::ImportResult imported = load_any(args[0]);
  const optrace::OpTrace& trace = imported.trace;
  size_t width = 2;
  for (const auto& e : trace.ops()) width = std::max(width, e.name.size());
  std::cout << "trace: " << args[0] << "\n";
  std::cout << std::left << std::setw(static_cast<int>(width)) << "op" << std::right << "  " << std::setw(13)
            << "unique inputs" << "  " << std::setw(10) << "calls" << "\n";
  for (const auto& e : trace.ops())
    std::cout << std::left << std::setw(static_cast<int>(width)) << e.name << std::right << "  " << std::setw(13)
              << e.unique_inputs.size() << "  " << std::setw(10) << e.total_calls() << "\n";
  std::cout << "total: " << trace.size() << " ops, " << trace.unique_input_count() << " unique inputs, "
            << trace.total_calls() << " calls";
  if (trace.dropped_calls() > 0) std::cout << " (" << trace.dropped_calls() << " not kept as unique inputs)";
  std::cout << "\n";
  if (imported.report.format == "kineto") std::cout << "\n" << imported.report.to_string();
  return 0;
}

int replay(const Args& args) {
  std::string trace_path, json_path, csv_path;
  optrace::ReplayOptions options;
  bool check = false, time = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--device") {
      const std::string d = value_of(args, i);
      try {
        options.device(c10::Device(d));
      } catch (const c10::Error&) {
        throw UsageError("--device needs cuda, cuda:N, cpu or meta, got '" + d + "'");
      }
    } else if (a == "--check") {
      check = true;
    } else if (a == "--time") {
      time = true;
    } else if (a == "--json") {
      json_path = value_of(args, i);
    } else if (a == "--csv") {
      csv_path = value_of(args, i);
    } else if (a == "--warmup") {
      options.warmup(static_cast<int>(int_of(a, value_of(args, i), 0)));
    } else if (a == "--repeats") {
      options.repeats(static_cast<int>(int_of(a, value_of(args, i), 1)));
    } else if (a == "--flush-cache") {
      options.flush_cache(true);
    } else if (a == "--atol") {
      options.atol(double_of(a, value_of(args, i)));
    } else if (a == "--rtol") {
      options.rtol(double_of(a, value_of(args, i)));
    } else if (a == "--seed") {
      options.seed(static_cast<uint64_t>(int_of(a, value_of(args, i), 0)));
    } else if (a == "--ops") {
      options.ops(split_commas(value_of(args, i)));
    } else if (a == "--exclude") {
      options.exclude_ops(split_commas(value_of(args, i)));
    } else if (a == "--max-inputs") {
      options.max_inputs_per_op(int_of(a, value_of(args, i), 0));
    } else if (a == "--no-progress") {
      options.progress(false);
    } else if (a.rfind("-", 0) == 0) {
      throw UsageError("unknown option '" + a + "' for replay");
    } else if (trace_path.empty()) {
      trace_path = a;
    } else {
      throw UsageError("replay takes one trace file, got '" + trace_path + "' and '" + a + "'");
    }
  }
  if (trace_path.empty()) throw UsageError("replay needs a trace file");
  if (check && time) throw UsageError("choose --check or --time, not both");
  options.mode(check ? optrace::ReplayMode::check : time ? optrace::ReplayMode::time : optrace::ReplayMode::run);

  const optrace::OpTrace trace = load_trace(trace_path);
  const optrace::ReplayReport report = optrace::replay(trace, options);
  report.print_table(std::cout);
  std::cout.flush();
  try {
    if (!json_path.empty()) report.save_json(json_path);
  } catch (const optrace::Error& e) {
    throw FileError(json_path, strip_prefix(e.what()));
  }
  try {
    if (!csv_path.empty()) report.save_csv(csv_path);
  } catch (const optrace::Error& e) {
    throw FileError(csv_path, strip_prefix(e.what()));
  }
  return report.all_ok() ? 0 : 1;
}

int merge(const Args& args) {
  std::vector<std::string> inputs;
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-o" || args[i] == "--output") out = value_of(args, i);
    else if (args[i].rfind("-", 0) == 0) throw UsageError("unknown option '" + args[i] + "' for merge");
    else inputs.push_back(args[i]);
  }
  if (inputs.empty()) throw UsageError("merge needs at least one trace file");
  if (out.empty()) throw UsageError("merge needs -o OUT");
  optrace::OpTrace merged;
  for (const std::string& path : inputs) merged.merge(load_trace(path));
  try {
    merged.save(out);
  } catch (const optrace::Error& e) {
    throw FileError(out, strip_prefix(e.what()));
  }
  std::cout << "merged " << inputs.size() << " traces into " << out << ": " << merged.size() << " ops, "
            << merged.unique_input_count() << " unique inputs, " << merged.total_calls() << " calls\n";
  return 0;
}

int convert(const Args& args) {
  std::string input, output, to;
  bool quiet = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-o" || args[i] == "--output") output = value_of(args, i);
    else if (args[i] == "--to") to = value_of(args, i);
    else if (args[i] == "--quiet") quiet = true;
    else if (input.empty() && args[i].rfind("-", 0) != 0) input = args[i];
    else throw UsageError("convert: unexpected argument '" + args[i] + "'");
  }
  if (input.empty() || output.empty()) throw UsageError("convert needs TRACE and -o OUT");
  if (to.empty()) to = ends_with(output, ".pt.trace.json") ? "kineto" : "hf";
  if (to != "hf" && to != "kineto") throw UsageError("convert: --to is hf or kineto, got '" + to + "'");
  const optrace::kineto::ImportResult r = load_any(input);
  try {
    if (to == "kineto") optrace::kineto::save(r.trace, output);
    else r.trace.save(output);
  } catch (const optrace::Error& e) {
    throw FileError(output, strip_prefix(e.what()));
  }
  if (!quiet) {
    if (r.report.format == "kineto") std::cerr << r.report.to_string();
    std::cerr << "wrote " << output << ": " << r.trace.size() << " ops, " << r.trace.unique_input_count()
              << " unique inputs, " << r.trace.total_calls() << " calls\n";
  }
  return 0;
}

struct Command {
  const char* name;
  const char* usage;
  const char* help;
  int (*run)(const Args&);
};

const Command kCommands[] = {
    {"summary", "optrace summary TRACE", "  Lists the trace's ops with their unique inputs and calls, and the totals.\n",
     summary},
    {"replay",
     "optrace replay TRACE [--device cuda|cpu|meta] [--check] [--time] [--json OUT] [--csv OUT]\n"
     "                     [--warmup N] [--repeats N] [--flush-cache] [--atol X] [--rtol X] [--seed N]\n"
     "                     [--ops A,B] [--exclude A,B] [--max-inputs N] [--no-progress]",
     "  Materializes every unique input and runs it through the dispatcher; prints a table.\n"
     "  --device      where to run (default: cuda when available, else cpu; meta: shapes only)\n"
     "  --check       compare with the CPU in float64 (dtype-aware tolerances, or --atol/--rtol)\n"
     "  --time        median time of --repeats calls (default 10) after --warmup calls (default 2);\n"
     "                --flush-cache writes a buffer larger than the last-level cache before each\n"
     "  --json/--csv  also write the report there\n"
     "  --ops/--exclude  op names (addmm.default) or names without overload (addmm), comma-separated\n"
     "  --max-inputs  at most N unique inputs per op, the most frequent first\n"
     "  Exit status 1 when an input fails or mismatches.\n",
     replay},
    {"merge", "optrace merge A B ... -o OUT", "  Adds the traces' counts together into one trace.\n", merge},
    {"convert", "optrace convert TRACE -o OUT [--to hf|kineto] [--quiet]",
     "  Writes the trace as an hf op trace, or as a Kineto trace when OUT ends in .pt.trace.json or\n"
     "  with --to kineto; prints the Kineto import report (not with --quiet) to stderr.\n",
     convert},
};

void print_help(std::ostream& out) {
  out << "optrace: read, replay, merge and convert op traces\n\nusage:\n";
  for (const Command& c : kCommands) out << "  " << c.usage << "\n";
  out << "  optrace --help | optrace COMMAND --help\n\n"
         "TRACE is an hf op trace (hf_op_trace.json) or a Kineto trace (*.pt.trace.json, .json.gz).\n\n";
  for (const Command& c : kCommands) out << c.name << ":\n" << c.help << "\n";
  out << "exit status: 0 success; 1 replay found errors or mismatches; 2 bad usage or bad input\n";
}

// One line, whatever the message holds.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

int run(int argc, char** argv) {
  const Args all(argv + 1, argv + argc);
  if (all.empty()) {
    print_help(std::cerr);
    return 2;
  }
  if (is_help(all[0]) || all[0] == "help") {
    print_help(std::cout);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (all[0] != c.name) continue;
    const Args rest(all.begin() + 1, all.end());
    for (const std::string& a : rest)
      if (is_help(a)) {
        std::cout << "usage: " << c.usage << "\n" << c.help;
        return 0;
      }
    return c.run(rest);
  }
  throw UsageError("unknown command '" + all[0] + "'");
}

}  // namespace cli

int main(int argc, char** argv) {
  try {
    return cli::run(argc, argv);
  } catch (const cli::UsageError& e) {
    std::cerr << "optrace: " << cli::one_line(e.what()) << " (see optrace --help)\n";
  } catch (const cli::FileError& e) {
    std::cerr << "optrace: " << cli::one_line(e.what()) << "\n";
  } catch (const c10::Error& e) {
    std::cerr << "optrace: " << cli::one_line(e.what_without_backtrace()) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "optrace: " << cli::one_line(cli::strip_prefix(e.what())) << "\n";
  }
  return 2;
}
