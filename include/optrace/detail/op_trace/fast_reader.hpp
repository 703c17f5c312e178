// optrace/detail/op_trace/fast_reader.hpp: reading hf op traces fast (simdjson On-Demand)
#pragma once
// The fast path of `OpTrace::load` and `from_json`: simdjson On-Demand straight into the trace's
// entries, with no DOM, no rewrite of Python's float tokens (On-Demand reads scalars only when
// asked, so `NaN`, `Infinity` and `-Infinity` are read from their raw tokens) and no path
// bookkeeping. At the first thing it does not expect (malformed JSON, a wrong type, a missing or
// duplicate key, lengths that differ), it gives up and the caller reads the text again through
// the DOM reader (hf_json.hpp), which names the JSON path and the bad value. So it only has to
// read well-formed traces right, and it must never accept what the DOM reader rejects: it reads
// every value, unknown keys' included, and checks that nothing follows the root object.

#include <optrace/detail/common/json_text.hpp>
#include <optrace/detail/common/ondemand.hpp>
#include <optrace/detail/op_trace/hf_json.hpp>
#include <optrace/op_trace_types.hpp>

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace optrace::detail::op_trace {

namespace od = simdjson::ondemand;

class FastReader {
 public:
  // The ops of the trace in `text[0..size)`, readable up to `capacity` (>= size +
  // SIMDJSON_PADDING), or nullopt where the DOM reader must tell what is wrong.
  static std::optional<std::vector<OpEntry>> read(const char* text, size_t size, size_t capacity) {
    try {
      FastReader reader;
      return reader.read_trace(simdjson::padded_string_view(text, size, capacity));
    } catch (const Fail&) {
      return std::nullopt;
    }
  }

  // ---- parts of a trace, for the streamed reader (stream_reader.hpp) ----
  // Each reads the JSON list `text` and returns false where the DOM reader must tell what is
  // wrong, as `read` does.

  // The list's items, unique inputs of op `entry.name`, appended to its unique_inputs and their
  // counts added to `sum`.
  bool read_inputs(simdjson::padded_string_view text, OpEntry& entry, int64_t& sum) {
    return in_list(text, [&](od::value item, size_t) { add_input(item, entry, sum); });
  }
  // The list's one item: a string (unescaped), an integer, or any value (read to validate it).
  bool read_string(simdjson::padded_string_view text, std::string& out) {
    return in_list(text, [&](od::value item, size_t k) {
      if (k > 0) give_up();
      out = std::string(get<std::string_view>(item.get_string()));
    });
  }
  bool read_int(simdjson::padded_string_view text, int64_t& out) {
    return in_list(text, [&](od::value item, size_t k) {
      if (k > 0) give_up();
      out = get<int64_t>(item.get_int64());
    });
  }
  bool read_any(simdjson::padded_string_view text) {
    return in_list(text, [&](od::value item, size_t k) {
      if (k > 0) give_up();
      skip(item);
    });
  }
  // Whether an op's keys and counts are what the DOM reader accepts: all three keys, counts that
  // add up (`sum`: the listed inputs' counts, `listed` of them). Sets its dropped calls.
  static bool close_entry(OpEntry& entry, bool all_keys, int64_t total_calls, int64_t sum, int64_t counted) {
    const int64_t listed = static_cast<int64_t>(entry.unique_inputs.size());
    if (!all_keys || total_calls < sum || counted < listed || total_calls - sum < counted - listed) return false;
    entry.dropped_calls = total_calls - sum;
    return true;
  }

 private:
  struct Fail {};

  // The one throw of this reader's signal: what it cannot read fast goes to the DOM reader.
  [[noreturn]] static void give_up() { throw Fail{}; }
  [[noreturn]] static void fail(simdjson::error_code) { give_up(); }
  template <class T, class R>
  static T get(R&& result) {
    return ondemand::take<T>(std::forward<R>(result), fail);
  }

  std::vector<OpEntry> read_trace(simdjson::padded_string_view text) {
    std::vector<OpEntry> ops;
    std::unordered_set<std::string> names;
    int64_t calls = 0;
    auto doc = get<od::document>(parser_.iterate(text));
    for (auto field : get<od::object>(doc.get_object())) {
      std::string name(get<std::string_view>(field.unescaped_key()));
      if (!names.insert(name).second) give_up();  // duplicate op
      OpEntry& entry = ops.emplace_back();
      entry.name = std::move(name);
      read_entry(get<od::value>(field.value()), entry);
      // An overflowing total goes to the DOM reader, which names the path.
      if (__builtin_add_overflow(calls, entry.total_calls(), &calls)) give_up();
    }
    const char* rest = nullptr;
    if (doc.current_location().get(rest) == simdjson::SUCCESS) give_up();  // something after the root
    return ops;
  }

  void read_entry(od::value v, OpEntry& entry) {
    bool have_total = false, have_count = false, have_inputs = false;
    int64_t total_calls = 0, sum = 0, counted = 0;
    for (auto field : get<od::object>(v.get_object())) {
      od::raw_json_string key = get<od::raw_json_string>(field.key());
      od::value value = get<od::value>(field.value());
      if (key == "unique_inputs") {
        if (have_inputs) give_up();
        have_inputs = true;
        for (auto item : get<od::array>(value.get_array())) add_input(get<od::value>(item), entry, sum);
      } else if (key == "total_calls") {
        if (have_total) give_up();
        have_total = true;
        total_calls = get<int64_t>(value.get_int64());
      } else if (key == "unique_input_count") {
        if (have_count) give_up();
        have_count = true;
        // The writer puts it before the inputs: a hint for their vector too (capped: checked after).
        counted = get<int64_t>(value.get_int64());
        if (!have_inputs && counted > 0) entry.unique_inputs.reserve(static_cast<size_t>(std::min<int64_t>(counted, 1 << 20)));
      } else {
        skip(value);
      }
    }
    if (!close_entry(entry, have_total && have_count && have_inputs, total_calls, sum, counted)) give_up();
  }

  void add_input(od::value v, OpEntry& entry, int64_t& sum) {
    entry.unique_inputs.push_back(read_input(v, entry.name));
    if (__builtin_add_overflow(sum, entry.unique_inputs.back().count, &sum)) give_up();
  }

  // Calls `each(item, k)` for the k-th item of the list in `text`; false at a Fail.
  template <class Each>
  bool in_list(simdjson::padded_string_view text, Each&& each) {
    try {
      auto doc = get<od::document>(parser_.iterate(text));
      size_t k = 0;
      for (auto item : get<od::array>(doc.get_array())) each(get<od::value>(item), k++);
      const char* rest = nullptr;
      if (doc.current_location().get(rest) == simdjson::SUCCESS) give_up();  // something after the list
      return true;
    } catch (const Fail&) {
      return false;
    }
  }

  OpInput read_input(od::value v, std::string_view name) {
    OpInput in;
    uint32_t seen = 0;  // bit k: InputKey k read
    auto first = [&seen](InputKey k) {
      if (seen & (1u << k)) give_up();  // a duplicate key
      seen |= 1u << k;
    };
    for (auto field : get<od::object>(v.get_object())) {
      od::raw_json_string key = get<od::raw_json_string>(field.key());
      od::value value = get<od::value>(field.value());
      if (key == "op_name") {
        first(kOpName);
        if (get<std::string_view>(value.get_string()) != name) give_up();
      } else if (key == "input_shapes") {
        first(kInputShapes);
        read_shapes(value, in.input_shapes);
      } else if (key == "input_dtypes") {
        first(kInputDtypes);
        read_strings(value, in.input_dtypes);
      } else if (key == "non_tensor_inputs") {
        first(kNonTensorInputs);
        read_list(value, values_, in.non_tensor_inputs, [this](od::value item) { return read_value(item); });
      } else if (key == "tensor_lists") {
        first(kTensorLists);
        for (auto list_field : get<od::object>(value.get_object())) {
          std::string id(get<std::string_view>(list_field.unescaped_key()));
          in.tensor_lists.emplace_back(std::move(id), read_tensor_list(get<od::value>(list_field.value())));
        }
      } else if (key == "count") {
        first(kCount);
        in.count = get<int64_t>(value.get_int64());
      } else if (key == "kwargs") {
        first(kKwargs);
        for (auto kw_field : get<od::object>(value.get_object())) {
          OpKwarg kw;
          kw.name = std::string(get<std::string_view>(kw_field.unescaped_key()));
          read_kwarg(get<od::value>(kw_field.value()), kw);
          in.kwargs.push_back(std::move(kw));
        }
      } else if (key == "input_strides") {
        first(kInputStrides);
        read_shapes(value, in.input_strides);
      } else if (key == "input_devices") {
        first(kInputDevices);
        for (auto item : get<od::array>(value.get_array())) {
          od::value d = get<od::value>(item);
          if (is_null(d)) in.input_devices.emplace_back();
          else in.input_devices.emplace_back(std::string(get<std::string_view>(d.get_string())));
        }
      } else if (key == "input_value_ranges") {
        first(kInputValueRanges);
        for (auto item : get<od::array>(value.get_array())) {
          od::value r = get<od::value>(item);
          if (is_null(r)) {
            in.input_value_ranges.emplace_back();
            continue;
          }
          read_ints(r);
          if (ints_.size() != 2) give_up();
          in.input_value_ranges.emplace_back(std::make_pair(ints_[0], ints_[1]));
        }
      } else {
        skip(value);
      }
    }
    const size_t n = in.input_shapes.size();
    auto fits = [n](size_t m, bool optional) { return m == n || (optional && m == 0); };
    if ((seen & kRequiredInputKeys) != kRequiredInputKeys || in.count < 1 || !fits(in.input_dtypes.size(), false) ||
        !fits(in.non_tensor_inputs.size(), false))
      give_up();
    // The DOM path checks an extended list present in the JSON even when empty.
    if (((seen & (1u << kInputStrides)) && in.input_strides.size() != n) ||
        ((seen & (1u << kInputDevices)) && in.input_devices.size() != n) ||
        ((seen & (1u << kInputValueRanges)) && in.input_value_ranges.size() != n))
      give_up();
    if (first_problem(in)) give_up();  // the DOM reader names it
    return in;
  }

  TensorListInfo read_tensor_list(od::value v) {
    TensorListInfo list;
    bool have_length = false, have_shapes = false, have_dtypes = false, have_strides = false;
    int64_t length = 0;
    for (auto field : get<od::object>(v.get_object())) {
      od::raw_json_string key = get<od::raw_json_string>(field.key());
      od::value value = get<od::value>(field.value());
      if (key == "length" && !have_length) {
        have_length = true;
        length = get<int64_t>(value.get_int64());
      } else if (key == "shapes" && !have_shapes) {
        have_shapes = true;
        read_shapes(value, list.shapes);
      } else if (key == "dtypes" && !have_dtypes) {
        have_dtypes = true;
        read_strings(value, list.dtypes);
      } else if (key == "strides" && !have_strides) {
        have_strides = true;
        read_shapes(value, list.strides);
      } else {
        give_up();  // a duplicate or unknown key: rare enough to leave to the DOM path
      }
    }
    if (!have_length || !have_shapes || !have_dtypes || length != list.length() || list.dtypes.size() != list.shapes.size() ||
        (have_strides && list.strides.size() != list.shapes.size()))
      give_up();
    return list;
  }

  void read_kwarg(od::value v, OpKwarg& kw) {
    uint32_t seen = 0;
    for (auto field : get<od::object>(v.get_object())) {
      od::raw_json_string key = get<od::raw_json_string>(field.key());
      od::value value = get<od::value>(field.value());
      if (key == "shape" && !(seen & 1)) {
        seen |= 1;
        kw.shape = read_shape(value);
      } else if (key == "dtype" && !(seen & 2)) {
        seen |= 2;
        kw.dtype = std::string(get<std::string_view>(value.get_string()));
      } else if (key == "value" && !(seen & 4)) {
        seen |= 4;
        kw.value = read_value(value);
      } else if (key == "strides" && !(seen & 8)) {
        seen |= 8;
        kw.strides = read_shape(value);
      } else {
        give_up();
      }
    }
    if ((seen & 7) != 7) give_up();
  }

  static bool is_null(od::value& v) {
    return get<bool>(v.is_null());
  }

  // The integers of the list `v`, into ints_ (reused, so that each shape allocates once: its own).
  void read_ints(od::value v) {
    ints_.clear();
    for (auto item : get<od::array>(v.get_array())) ints_.push_back(get<int64_t>(item.get_int64()));
  }
  OptionalShape read_shape(od::value v) {
    if (is_null(v)) return std::nullopt;
    read_ints(v);
    return std::vector<int64_t>(ints_.begin(), ints_.end());
  }
  // On-Demand does not tell an array's length before reading it. The lists below are read into a
  // reused scratch vector and then moved into one of their exact size: one allocation each, where
  // push_back's doublings would take up to four for the usual handful of arguments.
  template <class T, class ReadOne>
  static void read_list(od::value v, std::vector<T>& scratch, std::vector<T>& out, ReadOne&& read_one) {
    scratch.clear();
    for (auto item : get<od::array>(v.get_array())) scratch.push_back(read_one(get<od::value>(item)));
    out.reserve(out.size() + scratch.size());
    for (T& x : scratch) out.push_back(std::move(x));
  }
  void read_shapes(od::value v, std::vector<OptionalShape>& out) {
    read_list(v, shapes_, out, [this](od::value item) { return read_shape(item); });
  }
  void read_strings(od::value v, std::vector<std::string>& out) {
    read_list(v, strings_, out, [](od::value item) { return std::string(get<std::string_view>(item.get_string())); });
  }

  OpValue read_value(od::value v, int depth = 0) {
    od::json_type type;
    if (v.type().get(type) != simdjson::SUCCESS) {  // 'N' or 'I': not a JSON value
      if (auto d = ondemand::python_float(v)) return OpValue::floating(*d);
      give_up();
    }
    switch (type) {
      case od::json_type::null:
        if (!is_null(v)) give_up();
        return OpValue::none();
      case od::json_type::boolean: return OpValue::boolean(get<bool>(v.get_bool()));
      case od::json_type::number: {
        od::number_type kind;
        if (v.get_number_type().get(kind) != simdjson::SUCCESS) {  // "-Infinity"
          if (auto d = ondemand::python_float(v)) return OpValue::floating(*d);
          give_up();
        }
        if (kind == od::number_type::signed_integer) return OpValue::integer(get<int64_t>(v.get_int64()));
        if (kind == od::number_type::floating_point_number) return OpValue::floating(get<double>(v.get_double()));
        give_up();  // beyond int64
      }
      case od::json_type::string: return OpValue::string(std::string(get<std::string_view>(v.get_string())));
      case od::json_type::array: {
        if (depth >= json::kMaxValueDepth) give_up();  // the DOM reader names the path
        std::vector<OpValue> items;  // not values_: a list may sit inside non_tensor_inputs
        items.reserve(4);
        for (auto item : get<od::array>(v.get_array()))
          items.push_back(read_value(get<od::value>(item), depth + 1));
        return OpValue::list(std::move(items));
      }
      case od::json_type::object: {
        std::optional<int64_t> ref;
        for (auto field : get<od::object>(v.get_object())) {
          od::raw_json_string key = get<od::raw_json_string>(field.key());
          if (ref || !(key == "tensor_list_ref")) give_up();
          ref = get<int64_t>(field.value().get_int64());
        }
        if (!ref) give_up();
        return OpValue::tensor_list_ref(*ref);
      }
    }
    give_up();
  }

  // Reads (and so validates) a value nobody asked for: the DOM path rejects malformed JSON
  // anywhere, so this path must not skip over it.
  void skip(od::value v, int depth = 0) {
    od::json_type type;
    if (v.type().get(type) != simdjson::SUCCESS) {
      if (!ondemand::python_float(v)) give_up();
      return;
    }
    if (depth >= json::kMaxValueDepth) give_up();
    switch (type) {
      case od::json_type::array:
        for (auto item : get<od::array>(v.get_array())) skip(get<od::value>(item), depth + 1);
        return;
      case od::json_type::object:
        for (auto field : get<od::object>(v.get_object())) {
          get<std::string_view>(field.unescaped_key());
          skip(get<od::value>(field.value()), depth + 1);
        }
        return;
      default:
        read_value(v);
    }
  }

  od::parser parser_;
  std::vector<int64_t> ints_;
  std::vector<OptionalShape> shapes_;
  std::vector<std::string> strings_;
  std::vector<OpValue> values_;
};


}  // namespace optrace::detail::op_trace
