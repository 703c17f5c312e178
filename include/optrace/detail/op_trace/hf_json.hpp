// optrace/detail/op_trace/hf_json.hpp: the hf op-trace schema's JSON: its keys, the writer, the DOM reader
#pragma once
// The DOM reader is the strict one: every error names the JSON path and the bad value. The
// On-Demand reader (fast_reader.hpp) reads well-formed files faster and hands anything else to
// this one, so both must accept exactly the same files.

#include <optrace/detail/common/json_text.hpp>
#include <optrace/detail/op_trace/input_checks.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/op_trace_types.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace optrace::detail::op_trace {

// The members of a unique input, in the order the writer puts them.
enum InputKey {
  kOpName, kInputShapes, kInputDtypes, kNonTensorInputs, kTensorLists, kCount,  // the schema's
  kKwargs, kInputStrides, kInputDevices, kInputValueRanges,                     // optrace's extended keys
  kInputKeyCount
};
inline constexpr std::string_view kInputKeyNames[kInputKeyCount] = {
    "op_name", "input_shapes", "input_dtypes", "non_tensor_inputs", "tensor_lists",
    "count",   "kwargs",       "input_strides", "input_devices",   "input_value_ranges"};
inline constexpr uint32_t kRequiredInputKeys = (1u << kOpName) | (1u << kInputShapes) | (1u << kInputDtypes) |
                                               (1u << kNonTensorInputs) | (1u << kTensorLists) | (1u << kCount);

// ---- writing ----

inline void write_shape(json::Writer& w, const OptionalShape& s) {
  if (!s) {
    w.null();
    return;
  }
  w.begin_array();
  for (int64_t d : *s) w.value(d);
  w.end_array();
}

inline void write_input(json::Writer& w, const std::string& name, const OpInput& in) {
  w.begin_object();
  w.key("op_name").value(name);
  w.key("input_shapes").begin_array();
  for (const auto& s : in.input_shapes) write_shape(w, s);
  w.end_array();
  w.key("input_dtypes").begin_array();
  for (const auto& d : in.input_dtypes) w.value(d);
  w.end_array();
  w.key("non_tensor_inputs").begin_array();
  for (const auto& v : in.non_tensor_inputs) v.write(w);
  w.end_array();
  w.key("tensor_lists").begin_object();
  for (const auto& [id, list] : in.tensor_lists) {
    w.key(id).begin_object();
    w.key("length").value(list.length());
    w.key("shapes").begin_array();
    for (const auto& s : list.shapes) write_shape(w, s);
    w.end_array();
    w.key("dtypes").begin_array();
    for (const auto& d : list.dtypes) w.value(d);
    w.end_array();
    if (!list.strides.empty()) {
      w.key("strides").begin_array();
      for (const auto& s : list.strides) write_shape(w, s);
      w.end_array();
    }
    w.end_object();
  }
  w.end_object();
  w.key("count").value(in.count);
  if (!in.kwargs.empty()) {
    w.key("kwargs").begin_object();
    for (const OpKwarg& k : in.kwargs) {
      w.key(k.name).begin_object();
      w.key("shape");
      write_shape(w, k.shape);
      w.key("dtype").value(k.dtype);
      w.key("value");
      k.value.write(w);
      if (k.strides) {
        w.key("strides");
        write_shape(w, k.strides);
      }
      w.end_object();
    }
    w.end_object();
  }
  if (!in.input_strides.empty()) {
    w.key("input_strides").begin_array();
    for (const auto& s : in.input_strides) write_shape(w, s);
    w.end_array();
  }
  if (!in.input_devices.empty()) {
    w.key("input_devices").begin_array();
    for (const auto& d : in.input_devices) d ? (void)w.value(*d) : (void)w.null();
    w.end_array();
  }
  if (!in.input_value_ranges.empty()) {
    w.key("input_value_ranges").begin_array();
    for (const auto& r : in.input_value_ranges) {
      if (r) w.begin_array().value(r->first).value(r->second).end_array();
      else w.null();
    }
    w.end_array();
  }
  w.end_object();
}

/// The trace `ops` as the reference tracer writes it: ops in order, each op's unique inputs by
/// count, descending, ties in first-seen order.
inline std::string write_trace(const std::vector<OpEntry>& ops, int indent) {
  json::Writer w(indent);
  w.begin_object();
  for (const OpEntry& e : ops) {
    w.key(e.name).begin_object();
    w.key("total_calls").value(e.total_calls());
    w.key("unique_input_count").value(static_cast<int64_t>(e.unique_inputs.size()));
    w.key("unique_inputs").begin_array();
    for (const OpInput* in : e.by_count()) write_input(w, e.name, *in);
    w.end_array();
    w.end_object();
  }
  w.end_object();
  return w.take();
}

// ---- the DOM reader ----

inline OptionalShape read_shape(const json::Node& v) {
  if (v.is_null()) return std::nullopt;
  return v.as_int_list();
}

inline std::vector<std::string> read_strings(const json::Node& v) {
  std::vector<std::string> out;
  out.reserve(v.size());
  for (json::Node s : v.array()) out.emplace_back(s.as_string());
  return out;
}

inline std::vector<OptionalShape> read_shapes(const json::Node& v) {
  std::vector<OptionalShape> out;
  out.reserve(v.size());
  for (json::Node s : v.array()) out.push_back(read_shape(s));
  return out;
}

// Finds the members of the unique input `v` in one pass over it: looking each key up would scan
// the object once per key, absent optional keys included. Each key is tried first where the
// writer's order puts it, so a file optrace or the reference tracer wrote matches at the first
// compare. The first of duplicate keys wins, as with `operator[]`; unknown keys are ignored.
inline void find_input_keys(const json::Node& v, std::optional<json::Node> (&found)[kInputKeyCount]) {
  int next = 0;
  for (auto [key, member] : v.object()) {
    for (int k = 0; k < kInputKeyCount; ++k) {
      int i = (next + k) % kInputKeyCount;
      if (key != kInputKeyNames[i]) continue;
      if (!found[i]) found[i] = member;
      next = i + 1;
      break;
    }
  }
}

inline OpInput read_input(const json::Node& v, std::string_view name) {
  std::optional<json::Node> found[kInputKeyCount];
  find_input_keys(v, found);
  auto required = [&](InputKey k) -> const json::Node& {
    if (!found[k]) v.fail_plain("missing key \"" + std::string(kInputKeyNames[k]) + "\"");
    return *found[k];
  };
  OpInput in;
  const json::Node& op_name = required(kOpName);
  if (op_name.as_string() != name) op_name.fail("expected \"" + std::string(name) + "\" (the op's key)");
  in.input_shapes = read_shapes(required(kInputShapes));
  in.input_dtypes = read_strings(required(kInputDtypes));
  const json::Node& values = required(kNonTensorInputs);
  in.non_tensor_inputs.reserve(values.size());
  for (json::Node x : values.array()) in.non_tensor_inputs.push_back(OpValue::read(x));
  size_t n = in.input_shapes.size();
  if (in.input_dtypes.size() != n || in.non_tensor_inputs.size() != n)
    v.fail_plain("input_shapes, input_dtypes and non_tensor_inputs differ in length (" + std::to_string(n) + ", " +
                 std::to_string(in.input_dtypes.size()) + ", " + std::to_string(in.non_tensor_inputs.size()) + ")");
  for (auto [id, list_value] : required(kTensorLists).object()) {
    TensorListInfo list;
    json::Node length = list_value["length"];
    list.shapes = read_shapes(list_value["shapes"]);
    list.dtypes = read_strings(list_value["dtypes"]);
    if (length.as_int() != list.length() || list.dtypes.size() != list.shapes.size())
      length.fail("expected the number of shapes and dtypes (" + std::to_string(list.shapes.size()) + ", " +
                  std::to_string(list.dtypes.size()) + ")");
    json::Node strides(list_value);
    if (list_value.find("strides", strides)) {
      list.strides = read_shapes(strides);
      if (list.strides.size() != list.shapes.size())
        strides.fail("expected a list of " + std::to_string(list.shapes.size()) + " (one per element)");
    }
    in.tensor_lists.emplace_back(std::string(id), std::move(list));
  }
  const json::Node& count = required(kCount);
  in.count = count.as_int();
  if (in.count < 1) count.fail("expected a count of at least 1");
  if (found[kKwargs]) {
    for (auto [key, k] : found[kKwargs]->object()) {
      OpKwarg kw;
      kw.name = std::string(key);
      kw.shape = read_shape(k["shape"]);
      kw.dtype = std::string(k["dtype"].as_string());
      kw.value = OpValue::read(k["value"]);
      json::Node strides(k);
      if (k.find("strides", strides)) kw.strides = read_shape(strides);
      in.kwargs.push_back(std::move(kw));
    }
  }
  auto check_length = [n](const json::Node& list, size_t m) {
    if (m != n) list.fail("expected a list of " + std::to_string(n) + " (one per argument)");
  };
  if (const auto& extra = found[kInputStrides]) {
    in.input_strides = read_shapes(*extra);
    check_length(*extra, in.input_strides.size());
  }
  if (const auto& extra = found[kInputDevices]) {
    for (json::Node d : extra->array())
      in.input_devices.push_back(d.is_null() ? std::nullopt : std::optional<std::string>(d.as_string()));
    check_length(*extra, in.input_devices.size());
  }
  if (const auto& extra = found[kInputValueRanges]) {
    for (json::Node r : extra->array()) {
      if (r.is_null()) {
        in.input_value_ranges.emplace_back();
        continue;
      }
      std::vector<int64_t> mm = r.as_int_list();
      if (mm.size() != 2) r.fail("expected [min, max]");
      in.input_value_ranges.emplace_back(std::make_pair(mm[0], mm[1]));
    }
    check_length(*extra, in.input_value_ranges.size());
  }
  if (auto problem = first_problem(in)) optrace::detail::raise_json(v.path() + problem->where, problem->message);
  return in;
}

/// The ops of a parsed trace, in file order. Throws JsonError naming the path and the bad value:
/// wrong types, missing keys, counts that do not add up or overflow int64, and what no input can
/// be (input_checks.hpp: negative sizes or strides, dangling tensor_list_refs). An op named twice
/// never gets here: json::Document refuses a key given twice.
inline std::vector<OpEntry> read_trace(const json::Document& doc) {
  std::vector<OpEntry> ops;
  int64_t calls = 0;
  for (auto [name, entry_value] : doc.root().object()) {
    OpEntry& entry = ops.emplace_back();
    entry.name = std::string(name);
    json::Node inputs = entry_value["unique_inputs"];
    json::Node total = entry_value["total_calls"];
    const int64_t total_calls = total.as_int();
    json::Node unique_count = entry_value["unique_input_count"];
    const int64_t counted = unique_count.as_int(), listed = static_cast<int64_t>(inputs.size());
    if (counted < listed)
      unique_count.fail_plain("unique_input_count " + std::to_string(counted) + " is less than the " + std::to_string(listed) +
                              " unique inputs listed");
    entry.unique_inputs.reserve(inputs.size());
    int64_t sum = 0;
    for (json::Node in : inputs.array()) {
      entry.unique_inputs.push_back(read_input(in, name));
      // Counts are >= 1, so a sum that fits int64 keeps every later total in range.
      if (__builtin_add_overflow(sum, entry.unique_inputs.back().count, &sum))
        in["count"].fail_plain("the counts add up to more than " + std::to_string(INT64_MAX) + " calls");
    }
    if (total_calls < sum)
      total.fail_plain("total_calls " + std::to_string(total_calls) + " is less than the counts' sum " + std::to_string(sum));
    // Unique inputs counted but not listed (a tracer's bound) each had a call at least.
    if (total_calls - sum < counted - listed)
      unique_count.fail_plain("unique_input_count " + std::to_string(counted) + " leaves " + std::to_string(counted - listed) +
                              " unique inputs unlisted, but total_calls leaves " + std::to_string(total_calls - sum) +
                              " calls for them (each had one at least)");
    if (__builtin_add_overflow(calls, total_calls, &calls))
      total.fail_plain("the trace's calls add up to more than " + std::to_string(INT64_MAX));
    entry.dropped_calls = total_calls - sum;
  }
  return ops;
}

}  // namespace optrace::detail::op_trace
