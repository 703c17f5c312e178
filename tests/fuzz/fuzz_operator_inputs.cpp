// tests/fuzz/fuzz_operator_inputs.cpp: the operator-inputs log reader (PyTorch's OperatorInputsMode
// format) on arbitrary bytes, and its writer on whatever was read. No libtorch: the writer runs
// without the dispatcher's rules (every op kept), as a libtorch-free tool would.
// Property: whatever it reads, it writes; that text reads back, and writes the same text again
// (the first write may merge lines that differ only in spelling: 'f16', th.float16, f16).
#include "harness.hpp"

#include <optrace/detail/op_trace/operator_inputs_text.hpp>
#include <optrace/op_trace.hpp>

namespace oplog = optrace::detail::op_trace::oplog;

namespace {
std::string write(const std::vector<optrace::OpEntry>& ops) {
  const oplog::OpFactsFn no_rules;
  oplog::WriteReport report;
  return oplog::Writer(no_rules, true).write(ops, report);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  optrace_fuzz::expect_only_optrace_errors("read", [&] {
    oplog::ReadResult r = oplog::Reader(optrace_fuzz::text_of(data, size), "fuzz.txt").run();
    const optrace::OpTrace trace = optrace::OpTrace::from_entries(r.ops);  // the model's invariants hold
    (void)trace.total_calls();
    const std::string text = write(r.ops);
    oplog::ReadResult back;
    try {
      back = oplog::Reader(text, "written.txt").run();
    } catch (const optrace::Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      optrace_fuzz::property_failed("a log that was read cannot be read back after writing it");
    }
    if (write(back.ops) != text) optrace_fuzz::property_failed("write, read, write changed the text");
  });
  return 0;
}
