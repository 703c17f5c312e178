// optrace: the command-line tool (CMake target optrace_cli).
//
//   optrace convert TRACE -o OUT      TRACE: hf_op_trace.json, or a Kineto trace
//                                     (*.pt.trace.json[.gz]); OUT: an hf op trace, or a Kineto
//                                     trace when it ends in .pt.trace.json or with --to kineto
//   optrace summary TRACE             ops, unique inputs, calls; for Kineto traces, the import report
//
// Each subcommand is one function taking its arguments; main only dispatches.
#include <optrace/kineto.hpp>

#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace {

using Args = std::vector<std::string>;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int usage(const char* message = nullptr) {
  if (message) std::cerr << "optrace: " << message << "\n";
  std::cerr << "usage: optrace convert TRACE -o OUT [--to hf|kineto] [--quiet]\n"
               "       optrace summary TRACE\n"
               "TRACE is an hf op trace (hf_op_trace.json) or a Kineto trace (*.pt.trace.json, .json.gz).\n";
  return 2;
}

// optrace convert TRACE -o OUT [--to hf|kineto] [--quiet]
int convert(const Args& args) {
  std::string input, output, to;
  bool quiet = false;
  for (size_t k = 0; k < args.size(); ++k) {
    if ((args[k] == "-o" || args[k] == "--output") && k + 1 < args.size()) output = args[++k];
    else if (args[k] == "--to" && k + 1 < args.size()) to = args[++k];
    else if (args[k] == "--quiet") quiet = true;
    else if (input.empty() && args[k][0] != '-') input = args[k];
    else return usage(("convert: unexpected argument '" + args[k] + "'").c_str());
  }
  if (input.empty() || output.empty()) return usage("convert: needs TRACE and -o OUT");
  if (to.empty()) to = ends_with(output, ".pt.trace.json") ? "kineto" : "hf";
  if (to != "hf" && to != "kineto") return usage("convert: --to is hf or kineto");
  optrace::kineto::ImportResult r = optrace::kineto::load_any(input);
  if (to == "kineto") optrace::kineto::save(r.trace, output);
  else r.trace.save(output);
  if (!quiet) {
    if (r.report.format == "kineto") std::cerr << r.report.to_string();
    std::cerr << "wrote " << output << ": " << r.trace.size() << " ops, " << r.trace.unique_input_count()
              << " unique inputs, " << r.trace.total_calls() << " calls\n";
  }
  return 0;
}

// optrace summary TRACE
int summary(const Args& args) {
  if (args.size() != 1) return usage("summary: needs one TRACE");
  optrace::kineto::ImportResult r = optrace::kineto::load_any(args[0]);
  const optrace::OpTrace& t = r.trace;
  std::printf("%-40s %10s %10s\n", "op", "unique", "calls");
  for (const optrace::OpEntry& e : t.ops())
    std::printf("%-40s %10zu %10lld\n", e.name.c_str(), e.unique_inputs.size(), static_cast<long long>(e.total_calls()));
  std::printf("%-40s %10lld %10lld\n", "total", static_cast<long long>(t.unique_input_count()),
              static_cast<long long>(t.total_calls()));
  std::printf("%zu ops\n", t.size());
  if (r.report.format == "kineto") std::printf("\n%s", r.report.to_string().c_str());
  return 0;
}

struct Command {
  const char* name;
  int (*run)(const Args&);
};

const Command commands[] = {{"convert", convert}, {"summary", summary}};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string name = argv[1];
  Args args(argv + 2, argv + argc);
  for (const Command& c : commands) {
    if (name != c.name) continue;
    try {
      return c.run(args);
    } catch (const std::exception& e) {
      std::cerr << e.what() << "\n";
      return 1;
    }
  }
  return usage(("unknown command '" + name + "'").c_str());
}
