// optrace/replay.hpp: run every unique input of an op trace through the dispatcher; check and time it
#pragma once
// The options and one input's result are in replay_types.hpp; how a call is rebuilt from its
// recorded input in detail/replay/plan.hpp, run and timed in run.hpp, compared in compare.hpp.

#include <optrace/detail/common/io.hpp>
#include <optrace/detail/common/text_table.hpp>
#include <optrace/detail/replay/compare.hpp>
#include <optrace/detail/replay/run.hpp>
#include <optrace/error.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/op_trace.hpp>
#include <optrace/replay_types.hpp>

#include <c10/core/GradMode.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iomanip>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace optrace {

/// What `replay` found: one result per unique input replayed, ops in the trace's order, each
/// op's inputs in the JSON's order.
class ReplayReport {
 public:
  std::vector<ReplayResult> results;
  c10::Device device = c10::Device(c10::kCPU);
  ReplayMode mode = ReplayMode::run;
  double seconds = 0.0;  ///< wall time of the whole replay
  /// Unique inputs the options selected; `results` holds fewer when the replay was stopped.
  int64_t planned = 0;
  /// False when `ReplayOptions::stop_when` stopped the replay before every selected input ran.
  bool complete = true;

  /// One op's results added up (`op_totals`).
  struct OpTotals {
    std::string op;
    int64_t inputs = 0, calls = 0;  ///< unique inputs replayed, and the calls the trace recorded for them
    int64_t ok = 0, mismatch = 0, error = 0, skipped = 0;
    /// Time mode: sum over the op's timed inputs of median x recorded calls, the time the traced
    /// program spent in the op if each call took its input's median; nullopt when none was timed.
    std::optional<double> total_ms;
  };

  /// Results with status `s`.
  int64_t num(ReplayStatus s) const {
    return std::count_if(results.begin(), results.end(), [s](const ReplayResult& r) { return r.status == s; });
  }
  /// No error and no mismatch.
  bool all_ok() const { return num(ReplayStatus::error) == 0 && num(ReplayStatus::mismatch) == 0; }
  /// "9 ok, 0 mismatch, 0 error, 0 skipped (9 unique inputs on cpu, check mode, 0.01 s)"
  std::string summary() const {
    std::ostringstream out;
    out << num(ReplayStatus::ok) << " ok, " << num(ReplayStatus::mismatch) << " mismatch, " << num(ReplayStatus::error)
        << " error, " << num(ReplayStatus::skipped) << " skipped (" << results.size() << " unique inputs on " << device
        << ", " << to_string(mode) << " mode, " << std::fixed << std::setprecision(2) << seconds << " s)";
    if (!complete) out << "; INCOMPLETE: stopped after " << results.size() << " of " << planned << " inputs";
    return out.str();
  }

  /// Each op's results added up, ops in the report's order.
  std::vector<OpTotals> op_totals() const {
    std::vector<OpTotals> out;
    std::unordered_map<std::string, size_t> at;
    for (const ReplayResult& r : results) {
      auto [it, added] = at.emplace(r.op, out.size());
      if (added) {
        out.emplace_back();
        out.back().op = r.op;
      }
      OpTotals& t = out[it->second];
      ++t.inputs;
      t.calls += r.count;
      switch (r.status) {
        case ReplayStatus::ok: ++t.ok; break;
        case ReplayStatus::mismatch: ++t.mismatch; break;
        case ReplayStatus::error: ++t.error; break;
        case ReplayStatus::skipped: ++t.skipped; break;
      }
      if (r.median_ms) t.total_ms = t.total_ms.value_or(0.0) + *r.median_ms * static_cast<double>(r.count);
    }
    return out;
  }

  /// The per-op totals as a table, sorted: in time mode by total time (share of the whole),
  /// otherwise by errors and mismatches, then calls. `top` > 0: only the first `top` ops.
  void print_op_totals(std::ostream& out, int64_t top = 0) const {
    std::vector<OpTotals> totals = op_totals();
    double all_ms = 0.0;
    int64_t all_calls = 0;
    for (const OpTotals& t : totals) {
      all_ms += t.total_ms.value_or(0.0);
      all_calls += t.calls;
    }
    std::stable_sort(totals.begin(), totals.end(), [this](const OpTotals& a, const OpTotals& b) {
      if (mode == ReplayMode::time) return a.total_ms.value_or(-1.0) > b.total_ms.value_or(-1.0);
      if (a.error + a.mismatch != b.error + b.mismatch) return a.error + a.mismatch > b.error + b.mismatch;
      return a.calls > b.calls;
    });
    const bool timed = mode == ReplayMode::time;
    std::vector<std::string> head = {"op", "inputs", "calls", "ok", "mismatch", "error", "skipped"};
    if (timed) head.insert(head.end(), {"total ms", "time share"});
    else head.push_back("call share");
    detail::TextTable table(head, {"inputs", "calls", "ok", "mismatch", "error", "skipped", "total ms", "time share", "call share"});
    for (const OpTotals& t : totals) {
      std::vector<std::string> row = {t.op, std::to_string(t.inputs), std::to_string(t.calls), std::to_string(t.ok),
                                      std::to_string(t.mismatch), std::to_string(t.error), std::to_string(t.skipped)};
      if (timed) row.insert(row.end(), {t.total_ms ? detail::fixed(*t.total_ms, 4) : "-", t.total_ms ? detail::percent(*t.total_ms, all_ms) : "-"});
      else row.push_back(detail::percent(static_cast<double>(t.calls), static_cast<double>(all_calls)));
      table.row(std::move(row));
    }
    table.print(out, static_cast<size_t>(std::max<int64_t>(top, 0)), "ops");
  }

  /// Time mode: the timed inputs by total time (median x recorded calls), with their share of
  /// the whole; `top` > 0: only the first `top`.
  void print_slowest(std::ostream& out, int64_t top = 0) const {
    std::vector<const ReplayResult*> timed;
    double all_ms = 0.0;
    for (const ReplayResult& r : results)
      if (r.median_ms) {
        timed.push_back(&r);
        all_ms += *r.median_ms * static_cast<double>(r.count);
      }
    auto total = [](const ReplayResult* r) { return *r->median_ms * static_cast<double>(r->count); };
    std::stable_sort(timed.begin(), timed.end(), [&](const ReplayResult* a, const ReplayResult* b) { return total(a) > total(b); });
    detail::TextTable table({"op", "#", "count", "median ms", "total ms", "time share", "inputs"},
                           {"#", "count", "median ms", "total ms", "time share"});
    for (const ReplayResult* r : timed)
      table.row({r->op, std::to_string(r->index), std::to_string(r->count), detail::fixed(*r->median_ms, 4),
                 detail::fixed(total(r), 4), detail::percent(total(r), all_ms), r->inputs});
    table.print(out, static_cast<size_t>(std::max<int64_t>(top, 0)), "inputs");
  }

  /// Every result that is not ok, one line each with its whole message, then its inputs:
  /// `addmm.default #3 error: <message>` / `    inputs: f32[5], ...`. Nothing when all are ok.
  void print_not_ok(std::ostream& out) const {
    for (const ReplayResult& r : results) {
      if (r.status == ReplayStatus::ok) continue;
      out << r.op << " #" << r.index << " " << to_string(r.status) << ": " << r.message << "\n    inputs: " << r.inputs
          << "\n";
    }
  }

  /// The report as JSON: `{"device", "mode", "seconds", "complete", "summary": {"ok", "mismatch",
  /// "error", "skipped", "total", "planned"}, "results": [{"op", "index", "count", "inputs", "status", "message",
  /// "max_abs_error", "max_rel_error", "median_ms"}]}`; numbers not measured are null.
  std::string to_json(int indent = 1) const {
    json::Writer w(indent);
    auto opt = [&w](const std::optional<double>& d) -> json::Writer& { return d ? w.value(*d) : w.null(); };
    w.begin_object();
    w.key("device").value(device.str());
    w.key("mode").value(to_string(mode));
    w.key("seconds").value(seconds);
    w.key("complete").value(complete);
    w.key("summary").begin_object();
    for (ReplayStatus s : {ReplayStatus::ok, ReplayStatus::mismatch, ReplayStatus::error, ReplayStatus::skipped})
      w.key(to_string(s)).value(num(s));
    w.key("total").value(static_cast<int64_t>(results.size()));
    w.key("planned").value(planned);
    w.end_object();
    w.key("results").begin_array();
    for (const ReplayResult& r : results) {
      w.begin_object();
      w.key("op").value(r.op);
      w.key("index").value(r.index);
      w.key("count").value(r.count);
      w.key("inputs").value(r.inputs);
      w.key("status").value(to_string(r.status));
      w.key("message").value(r.message);
      w.key("max_abs_error");
      opt(r.max_abs_error);
      w.key("max_rel_error");
      opt(r.max_rel_error);
      w.key("median_ms");
      opt(r.median_ms);
      w.end_object();
    }
    w.end_array();
    w.end_object();
    return w.take();
  }

  /// The results as CSV (RFC 4180, header `op,index,count,status,max_abs_error,max_rel_error,
  /// median_ms,inputs,message`); numbers not measured are empty fields.
  std::string to_csv() const {
    std::string out = "op,index,count,status,max_abs_error,max_rel_error,median_ms,inputs,message\n";
    auto field = [&out](const std::string& s) {
      if (s.find_first_of(",\"\n\r") == std::string::npos) {
        out += s;
        return;
      }
      out += '"';
      for (char c : s) {
        if (c == '"') out += '"';
        out += c;
      }
      out += '"';
    };
    auto number = [&out](const std::optional<double>& d) {
      if (d) json::Writer::append_double(out, *d);
    };
    for (const ReplayResult& r : results) {
      field(r.op);
      out += ',' + std::to_string(r.index) + ',' + std::to_string(r.count) + ',' + to_string(r.status) + ',';
      number(r.max_abs_error);
      out += ',';
      number(r.max_rel_error);
      out += ',';
      number(r.median_ms);
      out += ',';
      field(r.inputs);
      out += ',';
      field(r.message);
      out += '\n';
    }
    return out;
  }

  /// Prints the results as an aligned table (error columns in check mode, the median in time
  /// mode), then the summary line.
  void print_table(std::ostream& out) const {
    auto cut = [](const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; };
    auto num = [](const std::optional<double>& d) { return d ? detail::number_string(*d) : std::string("-"); };
    std::vector<std::string> head = {"op", "#", "count", "status"};
    if (mode == ReplayMode::check) head.insert(head.end(), {"max abs", "max rel"});
    if (mode == ReplayMode::time) head.push_back("median ms");
    head.insert(head.end(), {"inputs", "message"});
    detail::TextTable table(head, {"#", "count", "max abs", "max rel", "median ms"});
    for (const ReplayResult& r : results) {
      std::vector<std::string> row = {r.op, std::to_string(r.index), std::to_string(r.count), to_string(r.status)};
      if (mode == ReplayMode::check) row.insert(row.end(), {num(r.max_abs_error), num(r.max_rel_error)});
      if (mode == ReplayMode::time) row.push_back(r.median_ms ? detail::fixed(*r.median_ms, 4) : "-");
      row.insert(row.end(), {cut(r.inputs, 48), cut(r.message, 100)});
      table.row(std::move(row));
    }
    table.print(out);
    out << summary() << '\n';
  }

  /// Writes `to_json()` to `path` atomically. Throws `optrace::IoError`.
  void save_json(const std::string& path) const { detail::write_file_atomic(path, to_json() + "\n"); }
  /// Writes `to_csv()` to `path` atomically. Throws `optrace::IoError`.
  void save_csv(const std::string& path) const { detail::write_file_atomic(path, to_csv()); }
};

/// Writes `report.summary()`: `9 ok, 0 mismatch, 0 error, 0 skipped (9 unique inputs on cpu, ...)`.
inline std::ostream& operator<<(std::ostream& out, const ReplayReport& report) { return out << report.summary(); }

/// Replays `trace`: for each unique input of each selected op, materializes its tensors on the
/// options' device (seeded; integer arguments that index other arguments drawn within range,
/// from a table of per-op rules and the trace's recorded value ranges), rebuilds the call from
/// the op's schema (omitted arguments take their defaults, keyword arguments of extended traces
/// their recorded values) and calls the op through the dispatcher; in check mode compares the
/// outputs with the CPU in float64, in time mode reports the median time. In-place and out= ops
/// get fresh inputs for every call; random and creation ops run but are not compared.
///
/// A failing input (unknown op, schema mismatch, libtorch error, out of memory) is reported in
/// its result and the replay goes on: per-input failures never throw. Throws only what the
/// device setup throws (a CUDA device asked for and absent: `optrace::ArgumentError`).
///
/// Example:
///   optrace::OpTrace trace = optrace::OpTrace::load("hf_op_trace.json");
///   optrace::ReplayReport report = optrace::replay(trace, optrace::ReplayOptions().mode(optrace::ReplayMode::check));
///   report.print_table(std::cout);
///   report.save_json("replay.json");
inline ReplayReport replay(const OpTrace& trace, const ReplayOptions& options = {}) {
  const auto start = std::chrono::steady_clock::now();
  ReplayReport report;
  report.device = options.device();
  report.mode = options.mode();
  OPTRACE_CHECK(!report.device.is_cuda() || torch::cuda::is_available(), ArgumentError,
                "replay: device ", report.device, " asked for, but libtorch sees no CUDA device");
  c10::NoGradGuard no_grad;

  std::vector<std::pair<const OpEntry*, std::vector<const OpInput*>>> work;
  int64_t total = 0;
  for (const OpEntry& e : trace.ops()) {
    if (!options.selects(e.name)) continue;
    std::vector<const OpInput*> inputs = e.by_count();
    if (options.max_inputs_per_op() > 0 && static_cast<int64_t>(inputs.size()) > options.max_inputs_per_op())
      inputs.resize(static_cast<size_t>(options.max_inputs_per_op()));
    total += static_cast<int64_t>(inputs.size());
    work.emplace_back(&e, std::move(inputs));
  }
  report.planned = total;
  report.results.reserve(static_cast<size_t>(total));
  detail::ProgressBar progress(options.progress(), total);
  std::optional<at::Tensor> flush_buffer;
  std::unordered_map<std::string, std::string> no_meta;
  for (const auto& [entry, inputs] : work) {
    for (size_t i = 0; i < inputs.size() && report.complete; ++i) {
      if (options.stop_when() && options.stop_when()()) {
        report.complete = false;
        break;
      }
      progress.update(static_cast<int64_t>(report.results.size()), entry->name);
      report.results.push_back(
          detail::replay_input(entry->name, *inputs[i], static_cast<int64_t>(i), options, report.device, flush_buffer,
                               no_meta));
    }
  }
  progress.finish();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace optrace
