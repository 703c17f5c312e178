// optrace/detail/op_trace/operator_inputs_read.hpp: reading operator-inputs logs into an OpTrace (no libtorch)
#pragma once
// The reading half of optrace/operator_inputs.hpp (which users include): it needs no dispatcher,
// so the `optrace` tool's front end, built without libtorch, reads logs through it too.

#include <optrace/detail/common/gzip.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/detail/common/pieces.hpp>
#include <optrace/detail/op_trace/operator_inputs_text.hpp>
#include <optrace/error.hpp>
#include <optrace/op_trace.hpp>

#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace optrace {
namespace operator_inputs {

/// What reading a log kept and left out.
struct ReadReport {
  int64_t lines = 0;  ///< `cnt:` lines read
  int64_t calls = 0;  ///< calls kept (the trace's total_calls)
  /// Lines left out by reason ("sparse tensor (ST): ..."), with their calls and up to three
  /// examples ("log.txt:12: aten._sparse_coo_tensor_with_dims_and_tensors.default").
  std::vector<detail::op_trace::oplog::LeftOut> left_out;

  /// A few lines for people.
  std::string to_string() const {
    std::string out = "format: operator_inputs\nlines: " + std::to_string(lines) + ", kept calls: " + std::to_string(calls) + "\n";
    for (const auto& l : left_out) {
      out += "left out: " + l.reason + ": " + std::to_string(l.lines) + " lines, " + std::to_string(l.calls) + " calls\n";
      for (const std::string& e : l.examples) out += "    e.g. " + e + "\n";
    }
    return out;
  }
};

/// Writes `report.to_string()`.
inline std::ostream& operator<<(std::ostream& out, const ReadReport& report) { return out << report.to_string(); }

/// A log read into a trace, with the report.
struct ReadResult {
  OpTrace trace;
  ReadReport report;
};

/// Reads a log from memory. `source` names it in errors. Every construct PyTorch's loaders
/// evaluate is read: `T(size, dtype[, stride])` (keyword or positional stride), the dtype
/// abbreviations (`f16`, `b8`, ... also quoted, as `deserialize_args` unquotes them) and
/// `torch.*` / `th.*` dtypes, layouts and memory formats, nested lists and tuples, None,
/// True/False, ints, floats (`1e-05`, `inf`, `-inf`, `nan`), quoted strings (`'cuda'`,
/// `"torch.device('cpu')"`). Lines with a sparse tensor (`ST(...)`) are left out and reported.
/// Repeated lines (and repeated `Operator:` blocks, as in concatenated logs) add their counts;
/// `aten.sum.SymInt` is read as `sum.dim_IntList`, as both loaders do. Ops are named as in the
/// hf schema (`addmm.default`; other namespaces `quantized::linear.default`).
/// Throws TextError naming source, line and column, e.g.
/// `optrace: TextError at log.txt:2:28: expected ')' closing (args, kwargs), got the end of the line`.
inline ReadResult parse(std::string_view text, const std::string& source = "<text>");

}  // namespace operator_inputs

namespace detail::op_trace::oplog {
inline operator_inputs::ReadResult result_of(ReadResult r) {
  operator_inputs::ReadResult out;
  out.trace = OpTrace::from_entries(std::move(r.ops));
  out.report.lines = r.lines;
  out.report.calls = out.trace.total_calls();
  out.report.left_out = std::move(r.left_out);
  return out;
}

// The log `in` reads, a piece of whole lines at a time (`piece_bytes`, 1 MiB; more for a longer
// line): memory stays bounded by the longest line and the result. `source` names it in errors.
// Tests give small pieces, to cross many boundaries with a small log.
inline operator_inputs::ReadResult read_log(FileReader& in, const std::string& source, size_t piece_bytes = size_t(1) << 20) {
  Reader reader(source);
  PieceBuffer buffer(piece_bytes);
  for (;;) {
    buffer.fill(in);
    const void* newline = buffer.end() ? nullptr : ::memrchr(buffer.data(), '\n', buffer.size());
    if (!buffer.end() && newline == nullptr) {  // a line longer than the buffer
      buffer.grow();
      continue;
    }
    const size_t lines = buffer.end() ? buffer.size() : static_cast<size_t>(static_cast<const char*>(newline) - buffer.data()) + 1;
    reader.feed(std::string_view(buffer.data(), lines));
    if (buffer.end()) break;
    buffer.carry(lines);
  }
  return result_of(reader.finish());
}
}  // namespace detail::op_trace::oplog

namespace operator_inputs {

inline ReadResult parse(std::string_view text, const std::string& source) {
  return detail::op_trace::oplog::result_of(detail::op_trace::oplog::Reader(text, source).run());
}

/// Reads the log at `path` (gzip-compressed or not), a piece at a time: memory does not grow with
/// the log, only with what it holds. Throws IoError, or TextError as `parse`.
///
/// Example:
///   optrace::OpTrace trace = optrace::operator_inputs::load("resnet18_training.txt").trace;
///   optrace::replay(trace, optrace::ReplayOptions().device(torch::kMeta));
inline ReadResult load(const std::string& path) {
  return detail::about_file(path, [&] {
    detail::FileReader in(path);
    return detail::op_trace::oplog::read_log(in, path);
  });
}

/// Whether `text` looks like a log rather than JSON: its first non-blank line starts with
/// `Operator:` (or, malformed, `cnt:`). What `kineto::load_any` decides a file's format by.
inline bool looks_like(std::string_view text) {
  size_t i = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) ++i;
  text.remove_prefix(i);
  return text.rfind("Operator:", 0) == 0 || text.rfind("cnt:", 0) == 0;
}

}  // namespace operator_inputs
}  // namespace optrace
