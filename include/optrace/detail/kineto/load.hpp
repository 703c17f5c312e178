// optrace/detail/kineto/load.hpp: reading a trace file of any format, with the ops of a catalog (no libtorch)
#pragma once
// What kineto.hpp's parse / load / detect_format / load_any do, given the catalog of ops to decode
// Kineto events by: kineto.hpp passes the live dispatcher's; the `optrace` tool's front end, built
// without libtorch, passes one captured from the same libtorch at build time (op_catalog.hpp).

#include <optrace/detail/common/gzip.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/detail/common/op_schema.hpp>
#include <optrace/detail/kineto/events.hpp>
#include <optrace/detail/kineto/execution_trace_import.hpp>
#include <optrace/detail/kineto/importer.hpp>
#include <optrace/detail/op_trace/operator_inputs_read.hpp>
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/kineto_types.hpp>
#include <optrace/op_trace.hpp>

#include <simdjson.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

namespace optrace::detail::kineto {

using optrace::kineto::ImportOptions;
using optrace::kineto::ImportReport;
using optrace::kineto::ImportResult;
using optrace::kineto::TraceFormat;

// Whether `in` is read streamed: a gzip file, or a plain one from kStreamFromBytes on.
inline bool is_large(const optrace::detail::FileReader& in) { return in.gzip() || in.file_size() >= kStreamFromBytes; }

inline ImportResult parse(std::string_view text, const ImportOptions& options, const OpCatalog& catalog) {
  std::string data;
  data.reserve(text.size() + simdjson::SIMDJSON_PADDING);
  data.assign(text.data(), text.size());
  return import_text(data, options, catalog);
}

inline ImportResult parse(const std::string& text, const ImportOptions& options, const OpCatalog& catalog) {
  if (text.capacity() < text.size() + simdjson::SIMDJSON_PADDING) return parse(std::string_view(text), options, catalog);
  Importer importer(options, catalog);
  return importer.run(text.data(), text.size(), text.capacity());
}

// The plain trace in `file` read from its bytes (a mapping, for a large file), in pieces on
// options.threads() threads: how load and load_any read a trace that is not compressed.
inline ImportResult import_file(optrace::detail::FileBytes& file, const ImportOptions& options, const OpCatalog& catalog) {
  return import_in_pieces(file.data(), file.size(), file.capacity(), options, catalog, pieces_for(file.size(), options.threads()));
}

// A Kineto trace from `in`, streamed in bounded memory; `path`'s whole text read in memory when
// streaming cannot take it (import_stream says when).
inline ImportResult stream_file(optrace::detail::FileReader& in, const std::string& path, const ImportOptions& options,
                                const OpCatalog& catalog) {
  return import_stream(in, options, catalog, [&] {
    refuse_unless_json(in);
    std::string data = optrace::detail::read_file_maybe_gzip(path);
    return import_text(data, options, catalog);
  });
}

inline ImportResult load(const std::string& path, const ImportOptions& options, const OpCatalog& catalog) {
  return optrace::detail::about_file(path, [&]() -> ImportResult {
    optrace::detail::FileReader in(path);
    if (!is_large(in)) {
      optrace::detail::FileBytes file(path, simdjson::SIMDJSON_PADDING);
      if (file.data() && !optrace::detail::is_gzip(std::string_view(file.data(), file.size())))
        return import_file(file, options, catalog);
    }
    return stream_file(in, path, options, catalog);
  });
}

// What the first `bytes` of `in` (rewound after) surely tell of its format: a log, an execution
// trace, a Kineto trace, or Unknown, where only more of it tells.
inline TraceFormat format_by_head(optrace::detail::FileReader& in, size_t bytes) {
  std::string head(bytes, '\0');
  head.resize(in.read(head.data(), head.size()));
  in.rewind();
  if (operator_inputs::looks_like(head)) return TraceFormat::OperatorInputs;
  if (execution_trace::surely_execution_trace(head)) return TraceFormat::ExecutionTrace;
  return surely_kineto(head) ? TraceFormat::Kineto : TraceFormat::Unknown;
}

// format_by_head of the first bytes every reader here looks at: 1 MiB of a large file, at most
// 64 KiB of a small one.
inline TraceFormat format_by_head(optrace::detail::FileReader& in) {
  return format_by_head(in, is_large(in) ? size_t(1) << 20 : std::min<size_t>(in.file_size(), 64 * 1024));
}

// What the first bytes of the file at `path` surely tell of its format (Unknown where only more
// of it tells), for a caller that must not read a large file twice to choose what to do with it.
inline TraceFormat format_by_first_bytes(const std::string& path) {
  return optrace::detail::about_file(path, [&] {
    optrace::detail::FileReader in(path);
    return format_by_head(in);
  });
}

inline TraceFormat detect_format(const std::string& path) {
  return optrace::detail::about_file(path, [&] {
    optrace::detail::FileReader in(path);
    const bool large = is_large(in);
    // Told by the first bytes (an execution trace cut short too), or by reading it as an hf op
    // trace (streamed), as load_any tells it: what neither tells is read whole below.
    const TraceFormat format = format_by_head(in);
    if (format != TraceFormat::Unknown) return format;
    if (large) {
      refuse_unless_json(in);
      if (op_trace::stream_ops(in)) return TraceFormat::HfOpTrace;
    }
    std::string data = optrace::detail::read_file_maybe_gzip(path);
    if (operator_inputs::looks_like(data)) return TraceFormat::OperatorInputs;
    return detect_text(data);
  });
}

// An hf op trace as load_any returns it.
inline ImportResult hf_result(OpTrace trace) {
  ImportResult result;
  result.trace = std::move(trace);
  result.report.format = "hf_op_trace";
  result.report.kept = result.trace.total_calls();
  return result;
}

inline ImportResult load_any(const std::string& path, const ImportOptions& options, const OpCatalog& catalog) {
  return optrace::detail::about_file(path, [&]() -> ImportResult {
    optrace::detail::FileReader in(path);
    const bool large = is_large(in);
    if (!large) {
      // A plain Kineto trace, known by its first bytes, is read as `load` reads it: from its
      // mapping, in pieces, without a copy of the text or a first pass over it to tell its format.
      optrace::detail::FileBytes file(path, simdjson::SIMDJSON_PADDING);
      const std::string_view text(file.data() ? file.data() : "", file.data() ? file.size() : 0);
      if (file.data() && !optrace::detail::is_gzip(text) && !operator_inputs::looks_like(text) && surely_kineto(text))
        return import_file(file, options, catalog);
    }
    // The first bytes tell a log, and a large Kineto trace: both are streamed.
    const TraceFormat by_head = format_by_head(in);
    if (by_head == TraceFormat::OperatorInputs) {
      operator_inputs::ReadResult read = op_trace::oplog::read_log(in, path);
      ImportResult result;
      result.trace = std::move(read.trace);
      result.report.format = "operator_inputs";
      result.report.events = read.report.lines;
      result.report.kept = result.trace.total_calls();
      for (auto& l : read.report.left_out) {
        result.report.left_out += l.calls;
        result.report.issues.push_back(ImportReport::Issue{l.reason, false, l.calls, std::move(l.examples)});
      }
      return result;
    }
    if (large && by_head == TraceFormat::Kineto) return stream_file(in, path, options, catalog);
    if (by_head == TraceFormat::ExecutionTrace) return import_execution_trace(execution_trace::read_trace(in, false), options, catalog);
    if (large) {
      refuse_unless_json(in);
      // An hf op trace, streamed; anything else leaves it at its first bytes and is told below.
      if (auto ops = op_trace::stream_ops(in)) return hf_result(OpTrace::from_entries(std::move(*ops)));
    }
    std::string data = optrace::detail::read_file_maybe_gzip(path);
    TraceFormat format = detect_text(data);
    if (format == TraceFormat::Kineto) return import_text(data, options, catalog);
    if (format == TraceFormat::ExecutionTrace) return import_execution_trace(data, options, catalog);
    if (format == TraceFormat::Unknown) {
      // Let the Kineto reader name the problem (malformed JSON, or not a trace at all).
      auto probe = json::Document::parse(data);
      optrace::detail::raise_json("", "expected a Kineto trace (\"traceEvents\"), an execution trace (\"schema\" and \"nodes\") "
                                      "or an hf op trace (ops with \"unique_inputs\"), got " + probe->root().describe());
    }
    return hf_result(OpTrace::from_json(data));
  });
}

}  // namespace optrace::detail::kineto
