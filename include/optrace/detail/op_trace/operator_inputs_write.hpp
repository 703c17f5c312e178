// optrace/detail/op_trace/operator_inputs_write.hpp: writing an OpTrace as an operator-inputs log, given the ops' facts (no libtorch)
#pragma once
// The writing half of optrace/operator_inputs.hpp (which users include). PyTorch's logger's rules
// need three facts of each op's schema (OpInfo's returns_tensor, storage_arg, non_compute), which
// an OpCatalog (op_schema.hpp, a layer above this one: hence the template) finds: the live
// dispatcher's there, a captured catalog (op_catalog.hpp) in the `optrace` tool's front end,
// built without libtorch.

#include <optrace/detail/common/gzip.hpp>
#include <optrace/detail/op_trace/operator_inputs_text.hpp>
#include <optrace/op_trace.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace optrace {
namespace operator_inputs {

/// Options of `to_text` / `save`.
class WriteOptions {
 public:
  /// Leave out ops PyTorch's logger calls non-compute (`log_to_file(skip_non_compute_operators=True)`):
  /// those with no tensor argument (constructors), `*_like` ops, and views (one tensor output
  /// aliasing an input). Default: true, as the logger.
  WriteOptions& skip_non_compute(bool skip) {
    skip_non_compute_ = skip;
    return *this;
  }
  bool skip_non_compute() const { return skip_non_compute_; }

 private:
  bool skip_non_compute_ = true;
};

/// What writing a trace as a log left out (PyTorch's logger's rules) or could not carry.
struct WriteReport : detail::op_trace::oplog::WriteReport {
  /// One line per kind of loss, empty when nothing was lost.
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    auto add = [&out](int64_t n, const std::string& what) {
      if (n > 0) out.push_back(std::to_string(n) + " " + what);
    };
    if (!non_compute.empty()) {
      int64_t calls = 0;
      std::string names;
      for (const auto& [op, n] : non_compute) {
        calls += n;
        if (names.size() < 200) names += (names.empty() ? "" : ", ") + op;
      }
      out.push_back(std::to_string(non_compute.size()) + " non-compute ops (" + std::to_string(calls) +
                    " calls) left out, as PyTorch's logger does: " + names);
    }
    add(no_tensor_input, "calls without a tensor argument left out, as PyTorch's logger does");
    add(no_tensor_output, "calls of ops that return no tensor left out, as PyTorch's logger does");
    add(memory_format, "calls with a memory format or storage argument left out, as PyTorch's logger does");
    add(unknown_values, "calls with an argument whose value the trace lacks left out");
    add(dropped, "calls counted but not kept as unique inputs not written (a log holds inputs only)");
    add(devices, "unique inputs' devices not written (a log names none)");
    add(value_ranges, "unique inputs' integer value ranges not written (a log holds none)");
    add(merged, "unique inputs written on the line of an equal earlier one (they differed only in what a log does not hold)");
    return out;
  }
};

/// Writes `report.lines()`, one per line ("" when nothing was lost).
inline std::ostream& operator<<(std::ostream& out, const WriteReport& report) {
  for (const std::string& line : report.lines()) out << line << '\n';
  return out;
}

}  // namespace operator_inputs

namespace detail {

// What the logger's rules need of `op`; an op `catalog` (an OpCatalog) lacks is written as recorded.
template <class Catalog>
op_trace::oplog::OpFacts op_facts(const Catalog& catalog, std::string_view op) {
  op_trace::oplog::OpFacts f;
  if (const auto* info = catalog.find(op)) {
    f.non_compute = info->non_compute;
    f.returns_tensor = info->returns_tensor;
    f.storage_arg = info->storage_arg;
  }
  return f;
}

// operator_inputs::to_text with the ops' facts from `catalog` (an OpCatalog).
template <class Catalog>
std::string operator_inputs_text(const OpTrace& trace, const Catalog& catalog, const operator_inputs::WriteOptions& options,
                                 operator_inputs::WriteReport* report) {
  operator_inputs::WriteReport local;
  const op_trace::oplog::OpFactsFn facts = [&catalog](std::string_view op) { return op_facts(catalog, op); };
  std::string text = op_trace::oplog::Writer(facts, options.skip_non_compute()).write(trace.ops(), local);
  if (report) *report = std::move(local);
  return text;
}

// operator_inputs::save with the ops' facts from `catalog`: what the CLI's front end, built
// without libtorch, calls too.
template <class Catalog>
void save_operator_inputs(const OpTrace& trace, const std::string& path, const Catalog& catalog,
                          const operator_inputs::WriteOptions& options, operator_inputs::WriteReport* report) {
  write_file_maybe_gzip(path, operator_inputs_text(trace, catalog, options, report));
}

}  // namespace detail
}  // namespace optrace
