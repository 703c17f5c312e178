// examples/cli/cli.hpp: the optrace CLI's command line, parsed into an Invocation (no file is
// read here). main.cpp runs it; tests/fuzz/fuzz_cli.cpp fuzzes parse_args.
#pragma once

#include <optrace/error.hpp>
#include <optrace/kineto_types.hpp>
#ifndef OPTRACE_CLI_FRONT_END  // the front end (no libtorch) hands replay to optrace-torch unparsed
#include <optrace/replay.hpp>
#endif

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace cli {

using Args = std::vector<std::string>;

// A bad command line: printed with a pointer to --help, exit status 2. An optrace::Error, so
// that parse_args throws nothing else.
struct UsageError : optrace::Error {
  explicit UsageError(std::string message) : optrace::Error(std::move(message)) {}
};

enum class Command { none, summary, replay, merge, convert, verify, plan, drift };

struct CommandInfo {
  Command command;
  const char* name;
  const char* usage;
  const char* help;
};

inline const CommandInfo kCommands[] = {
    {Command::summary, "summary",
     "optrace summary FILE... [--by calls|time|rank] [--group-by-shape] [--top N] [--json] [--jobs N] [--strides]\n"
     "                [--html REPORT.html] [--force]",
     "  A trace: its ops with calls, share of calls and unique inputs, the most called first, and the\n"
     "  totals (--top N: the first N ops; --json: the same as JSON on stdout).\n"
     "  --by time: a Kineto trace's (*.pt.trace.json[.gz]) ops and annotations by time, as torch's\n"
     "  key_averages().table() prints them: the most self CPU time first, with total and average CPU\n"
     "  time, CUDA time and memory when they were profiled, and calls (--top N: the first N rows;\n"
     "  --json: the rows as JSON; --group-by-shape: a row per name and input shapes). --by calls is\n"
     "  the default.\n"
     "  --by rank: the Kineto traces of a distributed job's ranks (files, or folders: their *.json and\n"
     "  *.json.gz files, as HTA reads a folder), each rank by its trace's distributedInfo: per step\n"
     "  (ProfilerStep#N) and rank, the step time, the time in collectives (gloo:*, nccl:*,\n"
     "  record_param_comms, c10d::* ops, nccl* kernels: the union of their intervals within the step)\n"
     "  and the rest; per step, the slowest rank (the most time outside collectives: the one the\n"
     "  others wait for); each step's collectives matched across ranks, the waits blamed on the rank\n"
     "  that arrived last, and why it was late. --json: the same as JSON; --html REPORT.html: also as\n"
     "  one self-contained page (ranks x steps coloured by the wait each caused; click a cell for its\n"
     "  collectives and ops; an existing file is replaced only with --force); --jobs N: traces read\n"
     "  at once (default: one per core).\n"
     "  An observation file (InputObserver::save): its dynamic shapes, export arguments, warnings\n"
     "  and call signatures with their counts.\n"
     "  Several files: each in turn, in the order given (--json: a list), read --jobs at a time.\n"},
    {Command::replay, "replay",
     "optrace replay TRACE [--device cuda|cpu|meta] [--check] [--time] [--json OUT] [--csv OUT] [--force]\n"
     "                     [--warmup N] [--repeats N] [--flush-cache] [--atol X] [--rtol X] [--seed N]\n"
     "                     [--ops A,B] [--exclude A,B] [--max-inputs N] [--dtype D] [--memory-budget SIZE]\n"
     "                     [--top N] [--all | --failures-only] [--no-progress] [--strides]\n"
     "       optrace replay WINDOW.et.json [--kineto WINDOW.pt.trace.json] [--time] [--warmup N] [--repeats N]\n"
     "                     [--device D] [--json OUT] [--force] [--seed N] [--dtype D] [--memory-budget SIZE]\n"
     "                     [--top N] [--failures-only] [--no-progress] [--unique-inputs]",
     "  Materializes every unique input and runs it through the dispatcher. Prints per-op totals\n"
     "  (time mode: by total time, median x recorded calls, with each op's share; otherwise the ops\n"
     "  with errors first), in time mode the inputs that took the most time, then every input that\n"
     "  is not ok with its whole message, then the summary line.\n"
     "  --device      where to run (default: cuda when available, else cpu; meta: shapes only)\n"
     "  --check       compare with the CPU in float64 (dtype-aware tolerances, or --atol/--rtol)\n"
     "  --time        median time of --repeats calls (default 10) after --warmup calls (default 2);\n"
     "                --flush-cache writes a buffer larger than the last-level cache before each\n"
     "  --json/--csv  also write the report there (checked writable before the replay starts; an\n"
     "                existing file is replaced only with --force)\n"
     "  --top N       at most N rows in the per-op and per-input tables (default: 20 inputs, all ops)\n"
     "  --all         a row for every input (the whole report), instead of the tables\n"
     "  --failures-only  only the inputs that are not ok, and the summary line\n"
     "  --memory-budget  the most memory one input's tensors may take (default 4G; K, M, G, T)\n"
     "  --ops/--exclude  op names (addmm.default) or names without overload (addmm), comma-separated\n"
     "  --max-inputs  at most N unique inputs per op, the most frequent first\n"
     "  --dtype       re-type floating tensors and floating dtype arguments (float32: run logs recorded\n"
     "                in float16 on builds without half kernels, as PyTorch's OperatorInputsLoader does)\n"
     "  Ctrl-C (SIGINT) or SIGTERM stops after the input running, and the report of what ran is\n"
     "  printed and written, marked incomplete (exit status 130 or 143).\n"
     "  Exit status 1 when an input fails or mismatches, or when no input ran (all skipped).\n"
     "  An execution trace (torch's ExecutionTraceObserver's, the Profiler's) is replayed as the window\n"
     "  it recorded: its outermost ops in call order, one id one tensor (an earlier call's output, or\n"
     "  a tensor from outside the window made once; views share their storage), collectives skipped.\n"
     "  Prints per-op totals, the calls not ok and the summary line.\n"
     "  --kineto      the Kineto trace of the same window: each call's recorded time beside its\n"
     "                replayed one (found by RecordFunction id)\n"
     "  --time        --warmup passes over the whole window (default 2), then --repeats timed ones\n"
     "                (default 10), each call's median kept; without it one pass, each call timed once\n"
     "  --unique-inputs  replay its unique inputs instead, as any trace's (--check, --csv, --ops, ...)\n"},
    {Command::merge, "merge", "optrace merge A B ... -o OUT [--force] [--jobs N] [--strides]",
     "  Adds the traces' counts together into one trace; OUT ending in .txt: an operator-inputs log,\n"
     "  in .pt.trace.json: a Kineto trace; .gz: gzip-compressed. Each file is given once. The\n"
     "  files are read --jobs at a time and merged in the order given.\n"},
    {Command::convert, "convert",
     "optrace convert TRACE... -o OUT [--to hf|kineto|text] [--keep-non-compute] [--force] [--quiet] [--jobs N]\n"
     "                        [--strides]",
     "  Writes the trace as an hf op trace, a Kineto trace (OUT ending in .pt.trace.json[.gz], or --to\n"
     "  kineto) or an operator-inputs log as PyTorch's OperatorInputsMode writes it (OUT ending in\n"
     "  .txt, or --to text; --keep-non-compute: also views, constructors and *_like ops); OUT ending\n"
     "  in .gz is gzip-compressed. Prints to stderr (not with --quiet) the import report and what\n"
     "  the output format cannot hold.\n"
     "  Several traces (or OUT an existing directory): OUT is a directory, and each TRACE is written\n"
     "  there under its own name with the format's ending (.hf_op_trace.json, .pt.trace.json, .txt),\n"
     "  --jobs at a time.\n"
     "  Outputs: never an input; an existing file is replaced only with --force.\n"},
    {Command::verify, "verify",
     "optrace verify PACKAGE.pt2|PLAN OBSERVATIONS.json [--reference MODULE.pt] [--device cpu|cuda] [--json OUT]\n"
     "               [--weights FILE] [--force] [--seed N] [--int-range LOW,HIGH] [--runs N] [--atol X] [--rtol X]",
     "  Runs every call signature of an observation file (InputObserver::save) through an AOTInductor\n"
     "  package (compiled by examples/python/compile_package.py, or any .pt2: then only its arity and\n"
     "  structure are checked), on inputs built from the recorded shapes and dtypes, and with\n"
     "  --reference through that TorchScript module too, comparing the outputs with replay's check-mode\n"
     "  tolerance (or --atol/--rtol). Prints per signature: ok, mismatch, refused (outside what the\n"
     "  package was compiled for: export it with wider ranges) or error, the calls observed with it\n"
     "  and the median time per call of both (--runs timed runs, default 5; 0: none).\n"
     "  PLAN (a plan's folder or its plan.json, optrace plan): each package on the signatures it\n"
     "  covers, then the signatures no package covers (not ok).\n"
     "  --weights     the weights of packages compiled without them (compile_plan; a plan's own\n"
     "                weights.pt is found by itself)\n"
     "  --int-range   integers are drawn in [LOW, HIGH) (default: within the values the observation file\n"
     "                recorded for each input, else 0,8): token ids, class labels\n"
     "  --json        also write the report there (an existing file is replaced only with --force)\n"
     "  Needs libtorch >= 2.6. Exit status 1 when a signature is not ok.\n"},
    {Command::plan, "plan", "optrace plan OBSERVATIONS.json... -o DIR [--max-packages K] [--force]",
     "  Plans the AOTInductor packages that cover every observed call: one per call structure (which\n"
     "  arguments are None, the non-tensor values, containers, dtypes and ranks), each with its calls,\n"
     "  the ranges they span and the example it compiles with (its most frequent export-safe call).\n"
     "  Writes DIR/plan.json and DIR/pN.observations.json; compile_plan (examples/python/\n"
     "  compile_package.py) compiles them. Several files merge (their counts add).\n"
     "  --max-packages K  split the widest structure at the median of its widest dim until there are K\n"
     "  An existing plan.json is replaced only with --force.\n"},
    {Command::drift, "drift", "optrace drift PLAN OBSERVATIONS.json... [--json OUT] [--force]",
     "  The share of the observed calls that no package of the plan (DIR or DIR/plan.json) covers, by\n"
     "  call structure, argument and dim, with the sizes seen and the planned ranges.\n"
     "  Exit status 1 when a call is not covered, 0 when all are.\n"},
};

inline const CommandInfo& info(Command c) {
  for (const CommandInfo& i : kCommands)
    if (i.command == c) return i;
  return kCommands[0];
}

// What the command line asks for.
struct Invocation {
  Command command = Command::none;
  // Help: of `command`, or of the tool (command none). `help_error`: no arguments at all (the
  // commands' usage goes to stderr and the exit status is 2).
  bool help = false;
  bool help_error = false;
  std::vector<std::string> inputs;  // summary, replay, convert: one; merge: one or more
  std::string output;               // merge, convert: -o
  bool force = false;               // merge, convert, replay, summary --html: replace existing outputs
  int64_t top = 0;                  // summary, replay: rows in the tables (0: default)
  bool json = false;                // summary: JSON on stdout
  bool by_time = false;             // summary --by time: torch's key_averages table of a Kineto trace
  bool by_rank = false;             // summary --by rank: a distributed job's ranks per step
  std::string html_path;            // summary --by rank --html: the report page
  bool group_by_shape = false;      // summary --by time --group-by-shape: a row per name and input shapes
  int64_t jobs = 0;                 // summary, merge, convert: files read at once (0: one per core)
  // replay
#ifndef OPTRACE_CLI_FRONT_END
  optrace::ReplayOptions replay;
#endif
  std::string json_path, csv_path;
  bool all_rows = false;       // --all: every input's row
  bool failures_only = false;  // --failures-only
  // replay of an execution trace: the window, call by call, unless --unique-inputs
  std::string kineto_path;                 // --kineto: the Kineto trace of the same window
  bool unique_inputs = false;              // --unique-inputs: its unique inputs, as any trace's
  std::vector<std::string> unique_only;    // options given that only a replay of unique inputs takes
  // verify (replay's --json, --seed, --atol/--rtol and --device are its too)
  std::string reference, device, weights;
  uint64_t seed = 0;
  int64_t int_low = 0, int_high = 8;
  bool int_range_given = false;  // verify: else the observed values
  int64_t runs = 5;
  double atol = -1, rtol = -1;  // < 0: by dtype
  int64_t max_packages = 0;     // plan: 0, one per call structure
  // convert
  std::string to;  // "hf", "kineto" or "text" (merge: from -o's extension)
  bool quiet = false;
  bool keep_non_compute = false;  // text output: also the ops PyTorch's logger calls non-compute
  // every command: how Kineto traces are read (--strides: keep non-contiguous strides)
  optrace::kineto::ImportOptions import;
};

namespace detail {

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The format an output file's name asks for (a .gz ending aside: it only says compressed).
inline std::string format_of_output(std::string path) {
  if (ends_with(path, ".gz")) path.resize(path.size() - 3);
  if (ends_with(path, ".txt")) return "text";
  if (ends_with(path, ".pt.trace.json")) return "kineto";
  return "hf";
}

inline bool is_help(const std::string& a) { return a == "--help" || a == "-h"; }

// --name VALUE: the value, or UsageError when it is missing.
inline std::string value_of(const Args& args, size_t& i) {
  if (i + 1 >= args.size()) throw UsageError("option " + args[i] + " needs a value");
  return args[++i];
}

inline int64_t int_of(const std::string& option, const std::string& text, int64_t min, int64_t max = INT64_MAX) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= min && v <= max) return v;
  } catch (const std::exception&) {
  }
  throw UsageError("option " + option + " needs an integer >= " + std::to_string(min) +
                   (max < INT64_MAX ? " and <= " + std::to_string(max) : std::string()) + ", got '" + text + "'");
}

// --name N: the integer in [min, max], or UsageError naming the option. The name is read before
// the value is taken (as two arguments of one call, their order would be the compiler's: GCC
// named the value "option 0").
inline int64_t int_option(const Args& args, size_t& i, int64_t min, int64_t max = INT64_MAX) {
  const std::string& option = args[i];
  const std::string text = value_of(args, i);
  return int_of(option, text, min, max);
}

inline double double_of(const std::string& option, const std::string& text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw UsageError("option " + option + " needs a number >= 0, got '" + text + "'");
}

// "4G", "512M", "64K", "1T" (binary units, an optional "iB" or "B"), or bytes.
inline int64_t size_of(const std::string& option, const std::string& text) {
  static const char* units = "KMGT";
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
  }
  std::string unit = v >= 0 ? text.substr(used) : std::string();
  int shift = 0;
  if (!unit.empty() && unit.size() <= 3) {
    const char* u = std::strchr(units, std::toupper(static_cast<unsigned char>(unit[0])));
    const std::string rest = unit.substr(1);
    if (u != nullptr && *u != '\0' && (rest.empty() || rest == "B" || rest == "iB")) shift = 10 * static_cast<int>(u - units + 1);
    else v = -1;
  } else if (!unit.empty()) {
    v = -1;
  }
  if (v < 0 || (shift > 0 && v > (INT64_MAX >> shift)))
    throw UsageError("option " + option + " needs a size in bytes, or with K, M, G or T (4G), got '" + text + "'");
  return static_cast<int64_t>(v) << shift;
}

inline std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

inline void parse_summary(const Args& args, Invocation& inv) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--strides") inv.import.record_strides(true);
    else if (a == "--json") inv.json = true;
    else if (a == "--top") inv.top = int_option(args, i, 1);
    else if (a == "--jobs") inv.jobs = int_option(args, i, 1, 1024);
    else if (a == "--group-by-shape") inv.group_by_shape = true;
    else if (a == "--html") inv.html_path = value_of(args, i);
    else if (a == "--force") inv.force = true;
    else if (a == "--by") {
      const std::string by = value_of(args, i);
      if (by != "calls" && by != "time" && by != "rank") throw UsageError("option --by takes calls, time or rank, got '" + by + "'");
      inv.by_time = by == "time";
      inv.by_rank = by == "rank";
    } else if (a.rfind("-", 0) == 0) throw UsageError("unknown option '" + a + "' for summary");
    else inv.inputs.push_back(a);
  }
  if (inv.inputs.empty()) throw UsageError("summary needs a file");
  if (inv.group_by_shape && !inv.by_time) throw UsageError("--group-by-shape goes with --by time");
  if (inv.by_rank && inv.top > 0) throw UsageError("--top does not go with --by rank: every step and rank is shown");
  if (!inv.html_path.empty() && !inv.by_rank) throw UsageError("--html goes with --by rank");
  if (inv.force && inv.html_path.empty()) throw UsageError("--force goes with --html: summary writes no other file");
}

#ifndef OPTRACE_CLI_FRONT_END
inline void parse_replay(const Args& args, Invocation& inv) {
  optrace::ReplayOptions& options = inv.replay;
  bool check = false, time = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    static const char* const kUniqueOnly[] = {"--check", "--csv", "--ops", "--exclude", "--max-inputs", "--flush-cache", "--all", "--strides"};
    if (std::find(std::begin(kUniqueOnly), std::end(kUniqueOnly), a) != std::end(kUniqueOnly)) inv.unique_only.push_back(a);
    if (a == "--kineto") {
      inv.kineto_path = value_of(args, i);
    } else if (a == "--unique-inputs") {
      inv.unique_inputs = true;
    } else if (a == "--device") {
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
      inv.json_path = value_of(args, i);
    } else if (a == "--csv") {
      inv.csv_path = value_of(args, i);
    } else if (a == "--warmup") {
      options.warmup(static_cast<int>(int_option(args, i, 0, INT_MAX)));
    } else if (a == "--repeats") {
      options.repeats(static_cast<int>(int_option(args, i, 1, INT_MAX)));
    } else if (a == "--flush-cache") {
      options.flush_cache(true);
    } else if (a == "--atol") {
      options.atol(double_of(a, value_of(args, i)));
    } else if (a == "--rtol") {
      options.rtol(double_of(a, value_of(args, i)));
    } else if (a == "--seed") {
      options.seed(static_cast<uint64_t>(int_option(args, i, 0)));
    } else if (a == "--ops") {
      options.ops(split_commas(value_of(args, i)));
    } else if (a == "--exclude") {
      options.exclude_ops(split_commas(value_of(args, i)));
    } else if (a == "--max-inputs") {
      options.max_inputs_per_op(int_option(args, i, 0));
    } else if (a == "--dtype") {
      const std::string d = value_of(args, i);
      const auto t = optrace::detail::dtype_from_python(d.rfind("torch.", 0) == 0 ? d : "torch." + d);
      if (!t || !c10::isFloatingType(*t)) throw UsageError("--dtype needs a floating dtype (float32, float64, float16, bfloat16), got '" + d + "'");
      options.float_dtype(*t);
    } else if (a == "--memory-budget") {
      options.memory_budget_bytes(size_of(a, value_of(args, i)));
    } else if (a == "--top") {
      inv.top = int_option(args, i, 1);
    } else if (a == "--all") {
      inv.all_rows = true;
    } else if (a == "--failures-only") {
      inv.failures_only = true;
    } else if (a == "--force") {
      inv.force = true;
    } else if (a == "--no-progress") {
      options.progress(false);
    } else if (a == "--strides") {
      inv.import.record_strides(true);
    } else if (a.rfind("-", 0) == 0) {
      throw UsageError("unknown option '" + a + "' for replay");
    } else if (inv.inputs.empty()) {
      inv.inputs.push_back(a);
    } else {
      throw UsageError("replay takes one trace file, got '" + inv.inputs[0] + "' and '" + a + "'");
    }
  }
  if (inv.inputs.empty()) throw UsageError("replay needs a trace file");
  if (check && time) throw UsageError("choose --check or --time, not both");
  if (inv.all_rows && inv.failures_only) throw UsageError("choose --all or --failures-only, not both");
  options.mode(check ? optrace::ReplayMode::check : time ? optrace::ReplayMode::time : optrace::ReplayMode::run);
}
#endif

// cpu, cuda or cuda:N: what verify's c10::Device takes (checked here, where the front end parses too).
inline bool is_verify_device(const std::string& d) {
  if (d == "cpu" || d == "cuda") return true;
  if (d.rfind("cuda:", 0) != 0 || d.size() == 5 || d.size() > 7) return false;  // cuda:0 to cuda:99
  return std::all_of(d.begin() + 5, d.end(), [](char c) { return c >= '0' && c <= '9'; });
}

inline void parse_verify(const Args& args, Invocation& inv) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--reference") inv.reference = value_of(args, i);
    else if (a == "--weights") inv.weights = value_of(args, i);
    else if (a == "--device") inv.device = value_of(args, i);
    else if (a == "--json") inv.json_path = value_of(args, i);
    else if (a == "--force") inv.force = true;
    else if (a == "--seed") inv.seed = static_cast<uint64_t>(int_option(args, i, 0));
    else if (a == "--runs") inv.runs = int_option(args, i, 0, 1000000);
    else if (a == "--atol") inv.atol = double_of(a, value_of(args, i));
    else if (a == "--rtol") inv.rtol = double_of(a, value_of(args, i));
    else if (a == "--int-range") {
      const std::string text = value_of(args, i);
      const std::vector<std::string> bounds = split_commas(text);
      if (bounds.size() != 2) throw UsageError("option --int-range needs LOW,HIGH, got '" + text + "'");
      inv.int_low = int_of(a, bounds[0], INT64_MIN);
      inv.int_high = int_of(a, bounds[1], INT64_MIN);
      if (inv.int_low >= inv.int_high) throw UsageError("option --int-range needs LOW < HIGH, got '" + text + "'");
      inv.int_range_given = true;
    } else if (a.rfind("-", 0) == 0) throw UsageError("unknown option '" + a + "' for verify");
    else inv.inputs.push_back(a);
  }
  if (inv.inputs.size() != 2) throw UsageError("verify needs PACKAGE.pt2 and OBSERVATIONS.json");
  if (!inv.device.empty() && !is_verify_device(inv.device))
    throw UsageError("--device needs cpu, cuda or cuda:N, got '" + inv.device + "'");
}

inline void parse_plan(const Args& args, Invocation& inv) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-o" || args[i] == "--output") inv.output = value_of(args, i);
    else if (args[i] == "--max-packages") inv.max_packages = int_option(args, i, 1, 1024);
    else if (args[i] == "--force") inv.force = true;
    else if (args[i].rfind("-", 0) == 0) throw UsageError("unknown option '" + args[i] + "' for plan");
    else inv.inputs.push_back(args[i]);
  }
  if (inv.inputs.empty()) throw UsageError("plan needs at least one observation file");
  if (inv.output.empty()) throw UsageError("plan needs -o DIR");
}

inline void parse_drift(const Args& args, Invocation& inv) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--json") inv.json_path = value_of(args, i);
    else if (args[i] == "--force") inv.force = true;
    else if (args[i].rfind("-", 0) == 0) throw UsageError("unknown option '" + args[i] + "' for drift");
    else inv.inputs.push_back(args[i]);
  }
  if (inv.inputs.size() < 2) throw UsageError("drift needs a plan and at least one observation file");
}

inline void parse_merge(const Args& args, Invocation& inv) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-o" || args[i] == "--output") inv.output = value_of(args, i);
    else if (args[i] == "--strides") inv.import.record_strides(true);
    else if (args[i] == "--force") inv.force = true;
    else if (args[i] == "--jobs") inv.jobs = int_option(args, i, 1, 1024);
    else if (args[i].rfind("-", 0) == 0) throw UsageError("unknown option '" + args[i] + "' for merge");
    else inv.inputs.push_back(args[i]);
  }
  if (inv.inputs.empty()) throw UsageError("merge needs at least one trace file");
  if (inv.output.empty()) throw UsageError("merge needs -o OUT");
  inv.to = format_of_output(inv.output);
}

inline void parse_convert(const Args& args, Invocation& inv) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-o" || args[i] == "--output") inv.output = value_of(args, i);
    else if (args[i] == "--to") inv.to = value_of(args, i);
    else if (args[i] == "--quiet") inv.quiet = true;
    else if (args[i] == "--keep-non-compute") inv.keep_non_compute = true;
    else if (args[i] == "--force") inv.force = true;
    else if (args[i] == "--jobs") inv.jobs = int_option(args, i, 1, 1024);
    else if (args[i] == "--strides") inv.import.record_strides(true);
    else if (args[i].rfind("-", 0) != 0) inv.inputs.push_back(args[i]);
    else throw UsageError("convert: unexpected argument '" + args[i] + "'");
  }
  if (inv.inputs.empty() || inv.output.empty()) throw UsageError("convert needs TRACE and -o OUT");
  // Several traces go into a directory: the format is --to's, hf by default.
  if (inv.to.empty()) inv.to = inv.inputs.size() > 1 ? "hf" : format_of_output(inv.output);
  if (inv.to != "hf" && inv.to != "kineto" && inv.to != "text")
    throw UsageError("convert: --to is hf, kineto or text, got '" + inv.to + "'");
  if (inv.keep_non_compute && inv.to != "text") throw UsageError("convert: --keep-non-compute is for text output");
}

}  // namespace detail

// The command line `argv[1..argc)`. Throws UsageError (an optrace::Error) for a bad one, and
// nothing else.
inline Invocation parse_args(int argc, const char* const* argv) {
  Invocation inv;
  const Args all(argv + 1, argv + argc);
  if (all.empty()) {
    inv.help = inv.help_error = true;
    return inv;
  }
  if (detail::is_help(all[0]) || all[0] == "help") {
    inv.help = true;
    return inv;
  }
  for (const CommandInfo& c : kCommands) {
    if (all[0] != c.name) continue;
    inv.command = c.command;
    const Args rest(all.begin() + 1, all.end());
    for (const std::string& a : rest)
      if (detail::is_help(a)) {
        inv.help = true;
        return inv;
      }
    switch (c.command) {
      case Command::summary: detail::parse_summary(rest, inv); break;
#ifndef OPTRACE_CLI_FRONT_END
      case Command::replay: detail::parse_replay(rest, inv); break;
#else
      case Command::replay: break;  // run by optrace-torch, which parses it
#endif
      case Command::merge: detail::parse_merge(rest, inv); break;
      case Command::convert: detail::parse_convert(rest, inv); break;
      case Command::verify: detail::parse_verify(rest, inv); break;
      case Command::plan: detail::parse_plan(rest, inv); break;
      case Command::drift: detail::parse_drift(rest, inv); break;
      case Command::none: break;
    }
    return inv;
  }
  throw UsageError("unknown command '" + all[0] + "'");
}

}  // namespace cli
