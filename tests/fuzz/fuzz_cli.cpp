// tests/fuzz/fuzz_cli.cpp: the optrace CLI's argument parsing (cli::parse_args, examples/cli/cli.hpp).
// The input is the command line without argv[0]: arguments separated by NUL bytes.
#include "harness.hpp"

#include "cli.hpp"

#include <string>
#include <vector>

// The output formats main writes (write_trace): hf JSON, Kineto, operator-inputs text (each
// gzip-compressed when the name ends in .gz).
static bool known_format(const std::string& to) { return to == "hf" || to == "kineto" || to == "text"; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"optrace"};
  std::string_view text = optrace_fuzz::text_of(data, size);
  if (!text.empty()) {
    size_t from = 0;
    for (;;) {
      size_t nul = text.find('\0', from);
      args.emplace_back(text.substr(from, nul == std::string_view::npos ? std::string_view::npos : nul - from));
      if (nul == std::string_view::npos) break;
      from = nul + 1;
    }
  }
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  optrace_fuzz::expect_only_optrace_errors("parse_args", [&] {
    cli::Invocation inv = cli::parse_args(static_cast<int>(args.size()), argv.data());
    // What main relies on: each command has the inputs and output it needs.
    bool ok = inv.help;
    switch (inv.command) {
      case cli::Command::summary:
        ok = ok || (!inv.inputs.empty() && (inv.by_time || !inv.group_by_shape) && !(inv.by_rank && (inv.by_time || inv.top > 0)));
        break;
      case cli::Command::replay: ok = ok || (inv.inputs.size() == 1 && !(inv.all_rows && inv.failures_only)); break;
      case cli::Command::convert: ok = ok || (!inv.inputs.empty() && !inv.output.empty() && known_format(inv.to)); break;
      case cli::Command::merge: ok = ok || (!inv.inputs.empty() && !inv.output.empty() && known_format(inv.to)); break;
      case cli::Command::verify:
        ok = ok || (inv.inputs.size() == 2 && (inv.device.empty() || cli::detail::is_verify_device(inv.device)) &&
                    inv.int_low < inv.int_high && inv.runs >= 0);
        break;
      case cli::Command::plan: ok = ok || (!inv.inputs.empty() && !inv.output.empty() && inv.max_packages >= 0); break;
      case cli::Command::drift: ok = ok || inv.inputs.size() >= 2; break;
      case cli::Command::none: break;
    }
    if (!ok) optrace_fuzz::property_failed("parse_args accepted a command line main cannot run");
  });
  return 0;
}
