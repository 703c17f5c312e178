// optrace/op_trace.hpp: OpTrace, an op trace in the hf op-trace schema, with its JSON form; no libtorch needed
#pragma once
// The recorder lives in optrace/op_tracer.hpp; this header is what readers of traces need
// (replay, the Kineto importer, the CLI): the trace, its JSON writer and reader, merge and
// queries. It includes no libtorch header, so translation units that only read traces compile fast.

#include <optrace/detail/common/dtype_names.hpp>
#include <optrace/detail/common/gzip.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/detail/common/string_map.hpp>
#include <optrace/detail/op_trace/fast_reader.hpp>
#include <optrace/detail/op_trace/hf_json.hpp>
#include <optrace/detail/op_trace/input_checks.hpp>
#include <optrace/detail/op_trace/stream_reader.hpp>
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/op_trace_types.hpp>

#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace optrace {

/// An op trace in the hf op-trace schema (`hf_op_trace.json`): ops in first-seen order, each
/// with its unique inputs and their counts. Made by `OpTracer::trace()`, `OpTrace::load`, or
/// built with `add`; merged with `merge`.
///
/// Example:
///   optrace::OpTrace trace = optrace::OpTrace::load("hf_op_trace.json");
///   for (const optrace::OpEntry& op : trace.ops())
///     std::cout << op.name << ": " << op.total_calls() << " calls\n";
///   trace.merge(optrace::OpTrace::load("rank1.json")).save("merged.json");
class OpTrace {
 public:
  /// The ops, in first-seen order.
  const std::vector<OpEntry>& ops() const { return ops_; }
  /// The op named `name` (`"addmm.default"`), or nullptr.
  const OpEntry* find(std::string_view name) const {
    const size_t* k = index_.find(name);
    return k == nullptr ? nullptr : &ops_[*k];
  }
  /// The op names, in first-seen order.
  std::vector<std::string> op_names() const {
    std::vector<std::string> out;
    for (const OpEntry& e : ops_) out.push_back(e.name);
    return out;
  }
  /// Number of ops.
  size_t size() const { return ops_.size(); }
  bool empty() const { return ops_.empty(); }
  /// Calls of all ops (dropped ones included).
  int64_t total_calls() const {
    int64_t n = 0;
    for (const OpEntry& e : ops_) n += e.total_calls();
    return n;
  }
  /// Calls of op `name`; 0 if it is not in the trace.
  int64_t total_calls(std::string_view name) const {
    const OpEntry* e = find(name);
    return e ? e->total_calls() : 0;
  }
  /// Unique inputs of all ops.
  int64_t unique_input_count() const {
    int64_t n = 0;
    for (const OpEntry& e : ops_) n += static_cast<int64_t>(e.unique_inputs.size());
    return n;
  }
  /// Calls not kept because of the tracer's bound on unique inputs, over all ops.
  int64_t dropped_calls() const {
    int64_t n = 0;
    for (const OpEntry& e : ops_) n += e.dropped_calls;
    return n;
  }
  /// The dtype strings of tensors and dtype arguments that no torch names (`"torch.float99"`:
  /// a newer torch's dtype, or a damaged file), in first-seen order, each with the unique
  /// inputs, calls and ops that have it. Readers keep such strings as read; the `optrace` tool
  /// names them wherever it shows or writes a trace, and replay skips those inputs.
  std::vector<UnknownDtype> unknown_dtypes() const {
    std::vector<UnknownDtype> out;
    std::vector<size_t> in_input;  // the entries of `out` the current input names
    for (const OpEntry& e : ops_)
      for (const OpInput& in : e.unique_inputs) {
        in_input.clear();
        detail::op_trace::for_each_dtype(in, [&](std::string_view dtype) {
          if (detail::is_torch_dtype(dtype)) return;
          size_t k = 0;
          while (k < out.size() && out[k].dtype != dtype) ++k;
          if (k == out.size()) out.push_back(UnknownDtype{std::string(dtype), 0, 0, {}});
          if (std::find(in_input.begin(), in_input.end(), k) != in_input.end()) return;
          in_input.push_back(k);
          UnknownDtype& u = out[k];
          u.unique_inputs += 1;
          u.calls += in.count;
          if (u.ops.empty() || u.ops.back() != e.name) u.ops.push_back(e.name);
        });
      }
    return out;
  }

  /// Adds `input.count` calls of op `name` with `input`: its count grows if the op already has
  /// this input (`OpInput::same_input`; value ranges widen), else it is appended. A new op goes
  /// last. Throws ArgumentError if `input.count` < 1, the parallel vectors differ in length, or
  /// the trace's calls would add up to more than INT64_MAX.
  OpTrace& add(std::string_view name, OpInput input) {
    OPTRACE_CHECK(input.count >= 1, ArgumentError, "OpTrace::add: count must be at least 1, got ", input.count);
    check_parallel(input, "OpTrace::add", name);
    const int64_t calls = add_calls(name, input.count);
    const size_t op = op_index(name);
    Slot& slot = slots_[op];
    std::vector<OpInput>& inputs = ops_[op].unique_inputs;
    // Few inputs: compared one by one. More: looked up by hash (the index built once).
    if (!slot.indexed && inputs.size() >= kIndexFrom) {
      for (size_t i = 0; i < inputs.size(); ++i) slot.inputs.insert(inputs[i].hash(), static_cast<uint32_t>(i));
      slot.indexed = true;
    }
    uint64_t h = 0;
    OpInput* existing = nullptr;
    if (!slot.indexed) {
      for (OpInput& in : inputs)
        if (in.same_input(input)) {
          existing = &in;
          break;
        }
    } else {
      h = input.hash();
      uint32_t position;
      if (slot.inputs.find(h, [&](uint32_t p) { return inputs[p].same_input(input); }, position)) existing = &inputs[position];
    }
    if (existing != nullptr) {
      existing->count += input.count;  // <= calls, which fits
      calls_ = calls;
      widen(existing->input_value_ranges, input.input_value_ranges);
      return *this;
    }
    if (slot.indexed) slot.inputs.insert(h, static_cast<uint32_t>(inputs.size()));
    inputs.push_back(std::move(input));
    calls_ = calls;
    return *this;
  }
  /// Room for `ops` ops in all, added without regrowth (for a reader that knows how many).
  void reserve(size_t ops) {
    ops_.reserve(ops);
    slots_.reserve(ops);
    index_.reserve(ops);
  }
  /// Counts `n` dropped calls of op `name` (adding the op if new). Throws ArgumentError if
  /// `n` < 0 or the trace's calls would add up to more than INT64_MAX.
  OpTrace& add_dropped(std::string_view name, int64_t n) {
    OPTRACE_CHECK(n >= 0, ArgumentError, "OpTrace::add_dropped('", name, "'): n must be >= 0, got ", n);
    const int64_t calls = add_calls(name, n);
    ops_[op_index(name)].dropped_calls += n;
    calls_ = calls;
    return *this;
  }

  /// Adds every op and input of `other`: counts of equal inputs add, new ops and inputs go after
  /// the existing ones in `other`'s order. Traces from many processes or ranks become one.
  OpTrace& merge(const OpTrace& other) {
    for (const OpEntry& e : other.ops_) {
      for (const OpInput& in : e.unique_inputs) add(e.name, in);
      if (e.dropped_calls) add_dropped(e.name, e.dropped_calls);
      if (e.unique_inputs.empty()) op_index(e.name);
    }
    return *this;
  }

  /// The trace as JSON in the hf op-trace schema, pretty-printed with `indent` spaces as the
  /// reference tracer writes it (0: one line).
  std::string to_json(int indent = 1) const { return detail::op_trace::write_trace(ops_, indent); }
  /// Writes `to_json(indent)` to `path` atomically, gzip-compressed when `path` ends in `.gz`.
  /// Throws IoError naming the path.
  void save(const std::string& path, int indent = 1) const { detail::write_file_maybe_gzip(path, to_json(indent)); }

  /// Parses a trace in the hf op-trace schema (Python's `NaN`, `Infinity`, `-Infinity`
  /// accepted; optrace's extended keys read when present, unknown keys ignored).
  /// `total_calls` beyond the counts' sum is read as dropped calls.
  /// Throws JsonError naming the JSON path and the bad value, e.g.
  /// `optrace: JsonError at /convolution.default/unique_inputs/3/input_shapes/0: expected a list of integers, got string "abc"`.
  static OpTrace from_json(std::string_view text) {
    {
      simdjson::padded_string padded(text);
      if (auto ops = detail::op_trace::FastReader::read(padded.data(), padded.size(), padded.size() + simdjson::SIMDJSON_PADDING))
        return from_entries(std::move(*ops));
    }
    return from_document(*json::Document::parse(text));  // names what is wrong
  }
  /// Reads and parses the file at `path`, gzip-compressed or not. A gzip file, or a plain one of
  /// 4 MiB or more, is read in pieces (inflated as it goes): memory holds the trace and about
  /// 1 MiB of its text, whatever the file's size. Throws IoError if it cannot be read, JsonError
  /// as `from_json`, ArgumentError as `from_entries`; each names the file (`Error::file()`).
  static OpTrace load(const std::string& path) {
    return detail::about_file(path, [&] { return load_unnamed(path); });
  }
  /// Builds a trace from a parsed document (see `from_json`).
  static OpTrace from_document(const json::Document& doc) { return from_entries(detail::op_trace::read_trace(doc)); }

  /// The trace made of `ops` as they are (no inputs are merged): what readers build. Throws
  /// ArgumentError for two ops of the same name, an input `add` would refuse (a count below 1,
  /// parallel vectors of different lengths), or calls that add up to more than INT64_MAX.
  static OpTrace from_entries(std::vector<OpEntry> ops) {
    OpTrace trace;
    trace.ops_ = std::move(ops);
    for (size_t k = 0; k < trace.ops_.size(); ++k) {
      const OpEntry& e = trace.ops_[k];
      OPTRACE_CHECK(trace.index_.find(e.name) == nullptr, ArgumentError, "OpTrace::from_entries: duplicate op '", e.name, "'");
      trace.index_.insert(e.name, k);
      OPTRACE_CHECK(e.dropped_calls >= 0, ArgumentError, "OpTrace::from_entries('", e.name, "'): dropped_calls must be >= 0, got ",
                    e.dropped_calls);
      trace.slots_.emplace_back();
      for (const OpInput& in : e.unique_inputs) {
        OPTRACE_CHECK(in.count >= 1, ArgumentError, "OpTrace::from_entries('", e.name, "'): count must be at least 1, got ", in.count);
        check_parallel(in, "OpTrace::from_entries", e.name);
        trace.calls_ = trace.add_calls(e.name, in.count, "OpTrace::from_entries");
      }
      trace.calls_ = trace.add_calls(e.name, e.dropped_calls, "OpTrace::from_entries");
    }
    return trace;
  }

  /// Same ops in the same order with the same inputs in the same order and counts.
  friend bool operator==(const OpTrace& a, const OpTrace& b) { return a.ops_ == b.ops_; }
  friend bool operator!=(const OpTrace& a, const OpTrace& b) { return !(a == b); }

 private:
  static OpTrace load_unnamed(const std::string& path) {
    {
      // Gzip and large files are streamed (bounded memory); what streaming leaves is read whole.
      detail::FileReader in(path);
      if (in.gzip() || in.file_size() >= detail::kStreamFromBytes) {
        if (auto ops = detail::op_trace::stream_ops(in)) return from_entries(std::move(*ops));
        if (in.gzip()) return from_json(detail::read_file_maybe_gzip(path));
      }
    }
    {
      detail::FileBytes file(path, simdjson::SIMDJSON_PADDING);
      if (file.data() != nullptr && detail::is_gzip(std::string_view(file.data(), file.size())))
        return from_json(detail::read_file_maybe_gzip(path));
      if (file.data() != nullptr)
        if (auto ops = detail::op_trace::FastReader::read(file.data(), file.size(), file.capacity()))
          return from_entries(std::move(*ops));
    }
    return from_document(*json::Document::load(path));  // names what is wrong; reads what FileBytes could not
  }

  // An op's inputs are indexed by hash once it has this many (add compares fewer one by one).
  static constexpr size_t kIndexFrom = 8;

  struct Slot {  // slots_[k] is ops_[k]'s
    bool indexed = false;
    detail::HashIndex inputs;  // OpInput::hash -> position in unique_inputs, once indexed
  };

  // The position of op `name` in ops_ and slots_, added if new.
  size_t op_index(std::string_view name) {
    if (const size_t* k = index_.find(name)) return *k;
    const size_t k = ops_.size();
    index_.insert(name, k);
    ops_.push_back(OpEntry{std::string(name), {}, 0});
    slots_.emplace_back();
    return k;
  }

  // The trace's calls after adding `n` to them; throws ArgumentError beyond INT64_MAX (a merge of
  // huge counts), so that no total (op or trace) can overflow.
  int64_t add_calls(std::string_view name, int64_t n, std::string_view caller = "OpTrace::add") const {
    int64_t calls;
    OPTRACE_CHECK(!__builtin_add_overflow(calls_, n, &calls), ArgumentError, caller, "('", name,
                  "'): the trace's calls would add up to more than ", INT64_MAX);
    return calls;
  }

  static void widen(std::vector<std::optional<std::pair<int64_t, int64_t>>>& into,
                    const std::vector<std::optional<std::pair<int64_t, int64_t>>>& from) {
    if (into.empty()) { into = from; return; }
    for (size_t i = 0; i < into.size() && i < from.size(); ++i) {
      if (!from[i]) continue;
      if (!into[i]) { into[i] = from[i]; continue; }
      into[i]->first = std::min(into[i]->first, from[i]->first);
      into[i]->second = std::max(into[i]->second, from[i]->second);
    }
  }

  // `caller` names the entry point in messages ("OpTrace::add").
  static void check_parallel(const OpInput& in, std::string_view caller, std::string_view name) {
    size_t n = in.input_shapes.size();
    OPTRACE_CHECK(in.input_dtypes.size() == n && in.non_tensor_inputs.size() == n, ArgumentError, caller, "('", name,
                  "'): input_shapes, input_dtypes and non_tensor_inputs must have one entry per argument, got ", n, ", ",
                  in.input_dtypes.size(), " and ", in.non_tensor_inputs.size());
    auto ok = [n](size_t m) { return m == 0 || m == n; };
    OPTRACE_CHECK(ok(in.input_strides.size()) && ok(in.input_devices.size()) && ok(in.input_value_ranges.size()),
                  ArgumentError, caller, "('", name, "'): input_strides, input_devices and input_value_ranges must be empty or have ", n,
                  " entries");
  }

  std::vector<OpEntry> ops_;
  std::vector<Slot> slots_;
  detail::StringMap<size_t> index_;  // op name -> position in ops_ and slots_
  int64_t calls_ = 0;  // total_calls(), kept to refuse additions that would overflow it
};

}  // namespace optrace
