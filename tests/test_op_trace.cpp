// Tests for optrace/op_trace.hpp and its readers (no libtorch header needed).
#include <optrace/json/reader.hpp>
#include <optrace/op_trace.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "optrace_catch.hpp"
#include "text_reader.hpp"

using optrace::OpInput;
using optrace::OpTrace;
using optrace::OpValue;

namespace {

OpInput tensor_input(std::vector<int64_t> shape, int64_t count = 1) {
  OpInput in;
  in.input_shapes.push_back(std::move(shape));
  in.input_dtypes.push_back("torch.float32");
  in.non_tensor_inputs.push_back(OpValue::none());
  in.count = count;
  return in;
}

// A unique input of masked_fill with every kind of non-tensor value next to its tensor.
const char* kValuesTrace = R"({
 "masked_fill.Scalar": {"total_calls": 3, "unique_input_count": 1, "unique_inputs": [
  {"op_name": "masked_fill.Scalar", "input_shapes": [[2, 3], [2, 3], null],
   "input_dtypes": ["torch.float32", "torch.bool", "<class 'float'>"],
   "non_tensor_inputs": [null, null, -Infinity], "tensor_lists": {}, "count": 3}]},
 "misc.default": {"total_calls": 1, "unique_input_count": 1, "unique_inputs": [
  {"op_name": "misc.default", "input_shapes": [null, null, null, null, null, null, null, null, null],
   "input_dtypes": ["<class 'float'>", "<class 'float'>", "<class 'int'>", "<class 'bool'>", "<class 'str'>",
                    "<class 'torch.dtype'>", "<class 'list'>", "<class 'NoneType'>", "<class 'list'>"],
   "non_tensor_inputs": [NaN, Infinity, 7, true, "NaN Infinity \"-Infinity\"", "torch.float16", [1, [2.5, null]], null,
                         {"tensor_list_ref": 0}],
   "tensor_lists": {"0": {"length": 2, "shapes": [[1, 2], [3]], "dtypes": ["torch.float32", "torch.int64"]}},
   "count": 1}]}
})";

}  // namespace

TEST_CASE("op trace: the peer trace reads and writes back unchanged", "[op_trace]") {
  OpTrace trace = OpTrace::load(optrace_test::data_path("peer/mlp.hf_op_trace.json"));
  CHECK(trace.op_names() == std::vector<std::string>{"t.default", "addmm.default", "relu.default", "cat.default", "_softmax.default"});
  CHECK(trace.total_calls() == 27);
  CHECK(trace.total_calls("addmm.default") == 9);
  CHECK(trace.total_calls("nope.default") == 0);
  CHECK(trace.unique_input_count() == 12);
  CHECK(trace.dropped_calls() == 0);
  const optrace::OpEntry* cat = trace.find("cat.default");
  REQUIRE(cat != nullptr);
  const OpInput& in = cat->unique_inputs[0];
  CHECK(in.non_tensor_inputs[0] == OpValue::tensor_list_ref(0));
  CHECK(in.non_tensor_inputs[1] == OpValue::integer(1));
  REQUIRE(in.tensor_list(0) != nullptr);
  CHECK(in.tensor_list(0)->length() == 2);
  CHECK(in.tensor_list(0)->shapes[1].value_or(std::vector<int64_t>{}) == std::vector<int64_t>{2, 5});
  CHECK(in.tensor_list(1) == nullptr);
  // Written with Python's indent=1 layout, byte for byte.
  std::string original = optrace::detail::read_file(optrace_test::data_path("peer/mlp.hf_op_trace.json"));
  CHECK(trace.to_json() == original);
  CHECK(OpTrace::from_json(trace.to_json(0)) == trace);
  std::string path = optrace_test::temp_path("op_trace_roundtrip.json");
  trace.save(path);
  CHECK(OpTrace::load(path) == trace);
}

TEST_CASE("op trace: Python float tokens and every value kind", "[op_trace]") {
  OpTrace trace = OpTrace::from_json(kValuesTrace);
  const auto& fill = trace.find("masked_fill.Scalar")->unique_inputs[0].non_tensor_inputs;
  CHECK(fill[2] == OpValue::floating(-std::numeric_limits<double>::infinity()));
  const auto& v = trace.find("misc.default")->unique_inputs[0].non_tensor_inputs;
  CHECK(std::isnan(v[0].as_float()));
  CHECK(v[0] == OpValue::floating(std::nan("")));
  CHECK(v[1].as_float() == std::numeric_limits<double>::infinity());
  CHECK(v[2] == OpValue::integer(7));
  CHECK(v[2] != OpValue::floating(7.0));
  CHECK(v[3] == OpValue::boolean(true));
  CHECK(v[4].as_string() == "NaN Infinity \"-Infinity\"");
  CHECK(v[5].as_string() == "torch.float16");
  CHECK(v[6] == OpValue::list({OpValue::integer(1), OpValue::list({OpValue::floating(2.5), OpValue::none()})}));
  CHECK(v[7].is_none());
  CHECK(v[8].as_tensor_list_ref() == 0);
  CHECK_THROWS_WITH(v[2].as_string(), "optrace: ArgumentError: OpValue is not a string");
  std::string out = trace.to_json(0);
  CHECK(out.find("[null, null, -Infinity]") != std::string::npos);
  CHECK(out.find("[NaN, Infinity, 7, true, \"NaN Infinity \\\"-Infinity\\\"\", \"torch.float16\", [1, [2.5, null]], null, {\"tensor_list_ref\": 0}]") !=
        std::string::npos);
  CHECK(OpTrace::from_json(out) == trace);
}

TEST_CASE("op trace: merge adds counts and keeps first-seen order", "[op_trace]") {
  OpTrace a;
  a.add("relu.default", tensor_input({2, 3}, 2)).add("t.default", tensor_input({4, 5}));
  OpTrace b;
  b.add("neg.default", tensor_input({1})).add("relu.default", tensor_input({7}, 5)).add("relu.default", tensor_input({2, 3}, 1));
  b.add_dropped("relu.default", 4);
  a.merge(b);
  CHECK(a.op_names() == std::vector<std::string>{"relu.default", "t.default", "neg.default"});
  const optrace::OpEntry* relu = a.find("relu.default");
  REQUIRE(relu->unique_inputs.size() == 2);
  CHECK(relu->unique_inputs[0].count == 3);
  CHECK(relu->unique_inputs[1].count == 5);
  CHECK(relu->dropped_calls == 4);
  CHECK(relu->total_calls() == 12);
  // Written by count, descending; dropped calls are part of total_calls and come back as such.
  auto sorted = relu->by_count();
  CHECK(sorted[0]->count == 5);
  OpTrace back = OpTrace::from_json(a.to_json());
  CHECK(back.find("relu.default")->dropped_calls == 4);
  CHECK(back.find("relu.default")->unique_inputs[0].count == 5);
  // Merging a loaded trace into itself doubles every count.
  OpTrace twice = back;
  twice.merge(back);
  CHECK(twice.total_calls() == 2 * back.total_calls());
  CHECK(twice.unique_input_count() == back.unique_input_count());
  // Ties keep first-seen order.
  OpTrace ties;
  ties.add("x.default", tensor_input({1})).add("x.default", tensor_input({2})).add("x.default", tensor_input({3}, 2));
  auto order = ties.find("x.default")->by_count();
  CHECK(order[0]->input_shapes[0]->at(0) == 3);
  CHECK(order[1]->input_shapes[0]->at(0) == 1);
  CHECK(order[2]->input_shapes[0]->at(0) == 2);
}

TEST_CASE("op trace: extended keys round trip", "[op_trace]") {
  OpInput in = tensor_input({4, 2});
  in.input_shapes.push_back(std::vector<int64_t>{3});
  in.input_dtypes.push_back("torch.int64");
  in.non_tensor_inputs.push_back(OpValue::none());
  in.kwargs.push_back({"alpha", std::nullopt, "<class 'int'>", OpValue::integer(2), std::nullopt});
  in.input_strides = {std::vector<int64_t>{1, 4}, std::nullopt};
  in.input_devices = {std::string("cpu"), std::string("cpu")};
  in.input_value_ranges = {std::nullopt, std::make_pair(int64_t{0}, int64_t{9})};
  OpTrace trace;
  trace.add("add.Tensor", in);
  OpInput wider = in;
  wider.input_value_ranges[1] = std::make_pair(int64_t{-1}, int64_t{3});
  trace.add("add.Tensor", wider);
  const OpInput& got = trace.find("add.Tensor")->unique_inputs.at(0);
  CHECK(got.count == 2);
  CHECK(got.input_value_ranges[1]->first == -1);
  CHECK(got.input_value_ranges[1]->second == 9);
  std::string js = trace.to_json(0);
  CHECK(js.find("\"kwargs\": {\"alpha\": {\"shape\": null, \"dtype\": \"<class 'int'>\", \"value\": 2}}") != std::string::npos);
  CHECK(js.find("\"input_strides\": [[1, 4], null]") != std::string::npos);
  CHECK(js.find("\"input_value_ranges\": [null, [-1, 9]]") != std::string::npos);
  CHECK(OpTrace::from_json(js) == trace);
}

// What OpTrace::load and from_json's fast path (On-Demand) makes of `text`: nullopt where it
// leaves the text to the DOM reader.
std::optional<OpTrace> fast_read(const std::string& text) {
  simdjson::padded_string padded(text);
  auto ops = optrace::detail::op_trace::FastReader::read(padded.data(), padded.size(), padded.size() + simdjson::SIMDJSON_PADDING);
  if (!ops) return std::nullopt;
  return OpTrace::from_entries(std::move(*ops));
}

OpTrace dom_read(const std::string& text) { return OpTrace::from_document(*optrace::json::Document::parse(text)); }

// What OpTrace::load makes of `text` streamed (stream_reader.hpp), unique inputs read
// `batch_bytes` at a time, the text `step` bytes at a time: nullopt where it leaves the text to the
// whole read.
std::optional<OpTrace> streamed(const std::string& text, size_t batch_bytes = 1 << 20, size_t step = 4096) {
  optrace_test::TextReader in{text, step};
  auto ops = optrace::detail::op_trace::stream_ops(in, batch_bytes);
  if (!ops) return std::nullopt;
  return OpTrace::from_entries(std::move(*ops));
}

// Whether streaming `text` (in batches of 1 byte to 1 MiB, 1 byte to 4 KiB at a time) reads what
// the fast reader reads, or leaves it to the whole read as the fast reader does.
void check_streamed_as_fast(const std::string& text) {
  INFO(text.substr(0, 300));
  const std::optional<OpTrace> fast = fast_read(text);
  for (size_t batch : {size_t(1), size_t(100), size_t(1) << 20})
    for (size_t step : {size_t(1), size_t(7), size_t(4096)}) {
      INFO("batch " << batch << ", step " << step);
      const std::optional<OpTrace> got = streamed(text, batch, step);
      REQUIRE(got.has_value() == fast.has_value());
      if (got) CHECK(*got == *fast);
    }
}

TEST_CASE("op trace: the fast reader reads what the DOM reader reads, or leaves it to it", "[op_trace]") {
  OpTrace extended;
  OpInput in = tensor_input({4, 2});
  in.kwargs.push_back({"alpha", std::nullopt, "<class 'float'>", OpValue::floating(-std::numeric_limits<double>::infinity()), std::nullopt});
  in.input_strides = {std::vector<int64_t>{1, 4}};
  in.input_devices = {std::string("cpu")};
  in.input_value_ranges = {std::make_pair(int64_t{0}, int64_t{9})};
  extended.add("add.Tensor", in).add_dropped("add.Tensor", 2);
  const std::string input = R"({"op_name": "neg.default", "input_shapes": [[1]], "input_dtypes": ["torch.float32"], "non_tensor_inputs": [null], "tensor_lists": {}, "count": 1)";
  auto neg = [&](const std::string& extra) {
    return R"({"neg.default": {"total_calls": 1, "unique_input_count": 1, "unique_inputs": [)" + input + extra + "}]}}";
  };
  SECTION("well-formed traces: the fast reader reads them, as the DOM reader does") {
    std::ifstream peer(optrace_test::data_path("peer/mlp.hf_op_trace.json"));
    std::string peer_text((std::istreambuf_iterator<char>(peer)), std::istreambuf_iterator<char>());
    for (const std::string& text : {std::string(kValuesTrace), peer_text, extended.to_json(), extended.to_json(0),
                                    std::string("{}"), neg(R"(, "unknown": {"a": [1, NaN, "x", true, null, {}]})"),
                                    neg(R"(, "input_devices": [null])"), std::string(" { } \n")}) {
      INFO(text);
      std::optional<OpTrace> fast = fast_read(text);
      REQUIRE(fast.has_value());
      CHECK(*fast == dom_read(text));
      CHECK(fast->to_json() == dom_read(text).to_json());
      check_streamed_as_fast(text);
    }
  }
  SECTION("what it does not expect goes to the DOM reader, which reads it or names what is wrong") {
    for (const std::string& text : {neg(R"(, "count": 2)"),                        // a duplicate key
                                    neg(R"(, "unknown": [1, 2)"),                  // malformed, in a key nobody reads
                                    neg(R"(, "unknown": nul)"), neg(R"(, "unknown": NaNa)"),
                                    neg("") + " []",                               // something after the root
                                    neg(R"(, "input_strides": [])"),               // an extended list of the wrong length
                                    std::string(R"({"a": {}, "a": {}})"), std::string("[]"), std::string("")}) {
      INFO(text);
      CHECK_FALSE(fast_read(text).has_value());
      check_streamed_as_fast(text);
    }
    // Escaped key: left to the DOM reader, which reads it.
    std::string escaped = neg("");
    escaped.replace(escaped.find("\"count\""), 7, "\"c\\u006funt\"");
    CHECK_FALSE(fast_read(escaped).has_value());
    check_streamed_as_fast(escaped);
    CHECK(OpTrace::from_json(escaped).total_calls() == 1);
  }
}

// A trace of `n` unique inputs over three ops, with tensor lists, kwargs, every kind of value, and
// an op name JSON must escape.
OpTrace many_inputs_trace(int n) {
  OpTrace trace;
  for (int k = 0; k < n; ++k) {
    OpInput in = tensor_input({k % 97 + 1, k / 97 + 1}, k % 5 + 1);
    if (k % 3 == 0) {
      in.input_shapes.emplace_back(std::nullopt);
      in.input_dtypes.emplace_back("<class 'list'>");
      in.non_tensor_inputs.push_back(OpValue::tensor_list_ref(0));
      in.tensor_lists.emplace_back("0", optrace::TensorListInfo{{std::vector<int64_t>{2, k}, std::nullopt}, {"torch.float32", "<class 'NoneType'>"}, {}});
      trace.add("cat.default", std::move(in));
    } else if (k % 3 == 1) {
      in.kwargs.push_back({"alpha", std::nullopt, "<class 'str'>", OpValue::string("}], \"{[\\"), std::nullopt});
      in.input_shapes.emplace_back(std::nullopt);
      in.input_dtypes.emplace_back("<class 'list'>");
      in.non_tensor_inputs.push_back(OpValue::list({OpValue::floating(std::nan("")), OpValue::integer(-k), OpValue::boolean(true)}));
      trace.add("add.Tensor", std::move(in));
    } else {
      trace.add("we\"ird\n{op}", std::move(in));
    }
  }
  trace.add_dropped("add.Tensor", 3);
  return trace;
}

TEST_CASE("op trace: a trace streamed in batches of bounded size is the trace read whole", "[op_trace]") {
  const OpTrace trace = OpTrace::from_json(many_inputs_trace(200).to_json());  // inputs in the file's order
  std::string text = trace.to_json();
  // Members the reader does not know, before and after the inputs, with brackets in strings.
  text.insert(text.find("\"total_calls\""), R"("note": {"a": [1, "}]\"", NaN, -Infinity, {"b": [[]]}]}, )");
  text.insert(text.rfind("\n }"), R"(, "after": ["]", {"}": 1e5}])");  // in the last op
  CHECK(OpTrace::from_json(text) == trace);
  for (const std::string& t : {text, trace.to_json(0), trace.to_json(3)}) check_streamed_as_fast(t);
  // Every truncation is left to the whole read (which names the error), as are damaged frames.
  const std::string small = many_inputs_trace(6).to_json();
  for (size_t k = 0; k < small.size(); k += 11) check_streamed_as_fast(small.substr(0, k));
  for (const std::string& t : {small + " x", small + "}", "[" + small + "]", std::string(R"({"a": 1})"),
                               std::string(R"({"a": {"total_calls": 0, "unique_input_count": 0, "unique_inputs": [], "unique_inputs": []}})"),
                               std::string(R"({"a": {"total_calls": 0, "unique_input_count": 0, "unique_inputs": {}}})"),
                               std::string(R"({"a": {"total_calls": 1, "unique_input_count": 0, "unique_inputs": [1,]}})"),
                               std::string(R"({"a": {"total_calls": 0 0, "unique_input_count": 0, "unique_inputs": []}})"),
                               std::string(R"({"a": {"total_calls": 0, "unique_input_count": 0, "unique_inputs": []}, })"),
                               std::string(R"({"a" {"total_calls": 0, "unique_input_count": 0, "unique_inputs": []}})"),
                               std::string(R"({"a": {"total_calls": 0, "unique_input_count": 0, "unique_inputs": [], "x": [}]}})")}) {
    CHECK_FALSE(streamed(t, 1, 1).has_value());
    check_streamed_as_fast(t);
  }
}

// [large_file]: a 5 MB trace, written and read 4 times: cmake/sanitize.sh leaves it out (48 s under
// ASan at -O0); the streamed reader's pieces run there in the case above, on small texts.
TEST_CASE("op trace: load streams gzip and large files, and names errors as a whole read does", "[op_trace][large_file]") {
  const OpTrace trace = OpTrace::from_json(many_inputs_trace(30000).to_json());  // inputs in the file's order
  const std::string text = trace.to_json();
  REQUIRE(text.size() >= optrace::detail::kStreamFromBytes);
  const std::string plain = optrace_test::temp_path("op_trace_streamed.json"), gz = plain + ".gz";
  trace.save(plain);
  trace.save(gz);
  CHECK(OpTrace::load(plain) == trace);
  CHECK(OpTrace::load(gz) == trace);
  CHECK(streamed(text, 4096, 1000).has_value());  // in many batches: read as streamed, not whole
  // A negative size in the last input: the whole read names it, and the file.
  std::string damaged = text;
  const size_t at = damaged.rfind("\"input_shapes\": [\n     [\n      ");
  REQUIRE(at != std::string::npos);
  damaged.insert(at + std::strlen("\"input_shapes\": [\n     [\n      "), "-");
  optrace::detail::write_file_maybe_gzip(plain, damaged);
  optrace::detail::write_file_maybe_gzip(gz, damaged);
  std::string message;
  try {
    OpTrace::from_json(damaged);
  } catch (const optrace::JsonError& e) {
    message = e.what();
  }
  REQUIRE(message.find(": negative size -") != std::string::npos);
  const std::string where = message.substr(std::strlen("optrace: "));
  CHECK_THROWS_WITH(OpTrace::load(plain), "optrace: " + plain + ": " + where);
  CHECK_THROWS_WITH(OpTrace::load(gz), "optrace: " + gz + ": " + where);
}

TEST_CASE("op trace: errors name the JSON path and the bad value", "[op_trace]") {
  auto entry = [](const std::string& input) {
    return R"({"convolution.default": {"total_calls": 1, "unique_input_count": 1, "unique_inputs": [)" + input + "]}}";
  };
  const std::string good =
      R"({"op_name": "convolution.default", "input_shapes": [[1, 2]], "input_dtypes": ["torch.float32"], "non_tensor_inputs": [null], "tensor_lists": {}, "count": 1})";
  CHECK(OpTrace::from_json(entry(good)).total_calls() == 1);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    return entry(s);
  };
  CHECK_THROWS_WITH(OpTrace::from_json(with("[[1, 2]]", "[\"abc\"]")),
                    "optrace: JsonError at /convolution.default/unique_inputs/0/input_shapes/0: expected a list of integers, got string \"abc\"");
  CHECK_THROWS_WITH(OpTrace::from_json(with("[[1, 2]]", "[[1, 2.5]]")),
                    "optrace: JsonError at /convolution.default/unique_inputs/0/input_shapes/0/1: expected an integer, got number 2.5");
  CHECK_THROWS_WITH(OpTrace::from_json(with("\"count\": 1", "\"count\": 0")),
                    "optrace: JsonError at /convolution.default/unique_inputs/0/count: expected a count of at least 1, got integer 0");
  CHECK_THROWS_WITH(OpTrace::from_json(with("\"count\": 1", "\"count\": NaN")),
                    "optrace: JsonError at /convolution.default/unique_inputs/0/count: expected an integer, got NaN");
  CHECK_THROWS_WITH(OpTrace::from_json(with(", \"count\": 1", "")),
                    "optrace: JsonError at /convolution.default/unique_inputs/0: missing key \"count\"");
  CHECK_THROWS_WITH(OpTrace::from_json(with("\"torch.float32\"", "3")),
                    "optrace: JsonError at /convolution.default/unique_inputs/0/input_dtypes/0: expected a string, got integer 3");
  CHECK_THROWS_WITH(OpTrace::from_json(with("[null]", "[null, 1]")),
                    "optrace: JsonError at /convolution.default/unique_inputs/0: input_shapes, input_dtypes and non_tensor_inputs differ in length (1, 1, 2)");
  CHECK_THROWS_WITH(OpTrace::from_json(with("[null]", "[{\"x\": 1}]")),
                    "optrace: JsonError at /convolution.default/unique_inputs/0/non_tensor_inputs/0: expected a value or {\"tensor_list_ref\": <int>}, got an object");
  CHECK_THROWS_WITH(OpTrace::from_json(with("[null]", "[18446744073709551615]")),
                    "optrace: JsonError at /convolution.default/unique_inputs/0/non_tensor_inputs/0: expected an integer that fits 64 bits, got integer 18446744073709551615");
  CHECK_THROWS_WITH(OpTrace::from_json(with("\"convolution.default\"", "\"conv.default\"")),
                    "optrace: JsonError at /convolution.default/unique_inputs/0/op_name: expected \"convolution.default\" (the op's key), got string \"conv.default\"");
  CHECK_THROWS_WITH(OpTrace::from_json(with("{}", "{\"0\": {\"length\": 2, \"shapes\": [[1]], \"dtypes\": [\"torch.float32\"]}}")),
                    "optrace: JsonError at /convolution.default/unique_inputs/0/tensor_lists/0/length: expected the number of shapes and dtypes (1, 1), got integer 2");
  CHECK_THROWS_WITH(OpTrace::from_json(with("{}", "[]")),
                    "optrace: JsonError at /convolution.default/unique_inputs/0/tensor_lists: expected an object, got a list of 0");
  CHECK_THROWS_WITH(OpTrace::from_json(entry(good).replace(entry(good).find("\"total_calls\": 1"), 16, "\"total_calls\": 0")),
                    "optrace: JsonError at /convolution.default/total_calls: total_calls 0 is less than the counts' sum 1");
  CHECK_THROWS_WITH(OpTrace::from_json("[1, 2]"), "optrace: JsonError at /: expected an object, got a list of 2");
  CHECK_THROWS_WITH(OpTrace::from_json(R"({"a/b~c": 3})"), "optrace: JsonError at /a~1b~0c: expected an object, got integer 3");
  CHECK_THROWS_WITH(OpTrace::from_json(R"({"a": {}, "a": {}})"), OPTRACE_CONTAINS("JsonError at /"));
  CHECK_THROWS_WITH(OpTrace::from_json(entry(good).substr(0, 60)),
                    OPTRACE_CONTAINS("optrace: JsonError at /: malformed JSON: "));
  CHECK_THROWS_WITH(OpTrace::from_json(""), OPTRACE_CONTAINS("optrace: JsonError at /: malformed JSON: "));
  CHECK_THROWS_WITH(OpTrace::from_json("{\"x\": NaNa}"), OPTRACE_CONTAINS("optrace: JsonError at /: malformed JSON: "));
  CHECK_THROWS_AS(OpTrace::load(optrace_test::temp_path("does/not/exist.json")), optrace::IoError);
  CHECK_THROWS_WITH(OpTrace().add("x.default", tensor_input({1}, 0)),
                    "optrace: ArgumentError: OpTrace::add: count must be at least 1, got 0");
  OpInput bad = tensor_input({1});
  bad.input_dtypes.clear();
  CHECK_THROWS_WITH(OpTrace().add("x.default", bad),
                    "optrace: ArgumentError: OpTrace::add('x.default'): input_shapes, input_dtypes and non_tensor_inputs must have one entry per argument, got 1, 0 and 1");
}

TEST_CASE("op trace: readers refuse what cannot be true, the fast and the DOM one alike", "[op_trace]") {
  const std::string good =
      R"({"op_name": "cat.default", "input_shapes": [null, [2, 3]], "input_dtypes": ["<class 'list'>", "torch.float32"], )"
      R"("non_tensor_inputs": [{"tensor_list_ref": 0}, null], "tensor_lists": {"0": {"length": 2, "shapes": [[2, 5], null], )"
      R"("dtypes": ["torch.float32", "<class 'NoneType'>"]}}, "count": 2, "kwargs": {"out": {"shape": [4], "dtype": "torch.float32", "value": null}}, )"
      R"("input_strides": [null, [1, 2]]})";
  auto trace = [](const std::string& input, const std::string& counts = R"("total_calls": 2, "unique_input_count": 1)") {
    return R"({"cat.default": {)" + counts + R"(, "unique_inputs": [)" + input + "]}}";
  };
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    REQUIRE(s.find(from) != std::string::npos);
    s.replace(s.find(from), from.size(), to);
    return trace(s);
  };
  REQUIRE(fast_read(trace(good)).has_value());
  CHECK(OpTrace::from_json(trace(good)).total_calls() == 2);
  const std::string at = "optrace: JsonError at /cat.default/unique_inputs/0";
  const std::pair<std::string, std::string> damaged[] = {
      {with("[2, 3]]", "[-3, 2]]"), at + "/input_shapes/1/0: negative size -3"},
      {with("[[2, 5]", "[[2, -5]"), at + "/tensor_lists/0/shapes/0/1: negative size -5"},
      {with("\"shape\": [4]", "\"shape\": [-4]"), at + "/kwargs/out/shape/0: negative size -4"},
      {with("[null, [1, 2]]", "[null, [1, -2]]"), at + "/input_strides/1/1: negative stride -2"},
      {with("[null, [1, 2]]", "[[1], null]"), at + "/input_strides/0: strides for an argument that is not a tensor"},
      {with("[null, [1, 2]]", "[null, [1]]"), at + "/input_strides/1: expected 2 strides (one per dimension of the shape), got 1"},
      {with("\"<class 'NoneType'>\"]", "\"<class 'NoneType'>\"], \"strides\": [[1, -1], null]"),
       at + "/tensor_lists/0/strides/0/1: negative stride -1"},
      {with("{\"tensor_list_ref\": 0}", "{\"tensor_list_ref\": 7}"),
       at + "/non_tensor_inputs/0/tensor_list_ref: no tensor list \"7\" in tensor_lists (it has \"0\")"},
      {with("null], \"tensor_lists\"", "[1, {\"tensor_list_ref\": 1}]], \"tensor_lists\""),
       at + "/non_tensor_inputs/1/1/tensor_list_ref: no tensor list \"1\" in tensor_lists (it has \"0\")"},
      {with("\"value\": null", "\"value\": {\"tensor_list_ref\": 3}"),
       at + "/kwargs/out/value/tensor_list_ref: no tensor list \"3\" in tensor_lists (it has \"0\")"},
      {trace(good, R"("total_calls": 2, "unique_input_count": 0)"),
       "optrace: JsonError at /cat.default/unique_input_count: unique_input_count 0 is less than the 1 unique inputs listed"},
      {trace(good, R"("total_calls": 3, "unique_input_count": 3)"),
       "optrace: JsonError at /cat.default/unique_input_count: unique_input_count 3 leaves 2 unique inputs unlisted, but total_calls "
       "leaves 1 calls for them (each had one at least)"},
  };
  for (const auto& [text, message] : damaged) {
    INFO(text);
    CHECK_FALSE(fast_read(text).has_value());  // the fast reader leaves it to the DOM reader, which names it
    CHECK_FALSE(streamed(text, 1, 1).has_value());
    CHECK_FALSE(streamed(text).has_value());
    CHECK_THROWS_WITH(OpTrace::from_json(text), message);
  }
  // Unlisted unique inputs with calls enough for them (a tracer's bound) are dropped calls.
  const std::string bounded = trace(good, R"("total_calls": 4, "unique_input_count": 3)");
  REQUIRE(fast_read(bounded).has_value());
  CHECK(OpTrace::from_json(bounded).dropped_calls() == 2);
}

TEST_CASE("op trace: dtype strings no torch names are read and named as unknown", "[op_trace]") {
  OpTrace trace;
  OpInput a = tensor_input({2});
  a.input_dtypes[0] = "torch.float99";
  OpInput b = tensor_input({3});
  b.input_dtypes[0] = "torch.half";  // an alias torch has
  b.count = 4;
  b.input_shapes.push_back(std::nullopt);
  b.input_dtypes.push_back("<class 'torch.dtype'>");
  b.non_tensor_inputs.push_back(OpValue::string("torch.float99"));  // a dtype argument
  optrace::TensorListInfo list;
  list.shapes = {std::vector<int64_t>{1}, std::nullopt};
  list.dtypes = {"torch.bits8", "<class 'NoneType'>"};
  OpInput c = tensor_input({1});
  c.input_dtypes[0] = "torch.float8_e4m3fn";
  c.input_shapes.push_back(std::nullopt);
  c.input_dtypes.push_back("<class 'list'>");
  c.non_tensor_inputs.push_back(c.add_tensor_list(list));
  c.kwargs.push_back({"dtype", std::nullopt, "<class 'torch.dtype'>", OpValue::string("torch.int128"), std::nullopt});
  trace.add("add.Tensor", a).add("add.Tensor", b).add("cat.default", c);
  const OpTrace back = OpTrace::from_json(trace.to_json());  // read as written
  CHECK(back.to_json() == trace.to_json());  // the JSON lists inputs by count: compared as written
  const std::vector<optrace::UnknownDtype> unknown = back.unknown_dtypes();
  REQUIRE(unknown.size() == 2);
  CHECK(unknown[0].dtype == "torch.float99");
  CHECK(unknown[0].unique_inputs == 2);
  CHECK(unknown[0].calls == 5);
  CHECK(unknown[0].ops == std::vector<std::string>{"add.Tensor"});
  CHECK(unknown[0].to_string() == "torch.float99 (2 unique inputs, 5 calls: add.Tensor)");
  CHECK(unknown[1].to_string() == "torch.int128 (1 unique input, 1 call: cat.default)");
  CHECK(OpTrace::load(optrace_test::data_path("peer/mlp.hf_op_trace.json")).unknown_dtypes().empty());
}

TEST_CASE("op trace: add finds equal inputs however many an op has", "[op_trace]") {
  // Below 8 inputs an op's inputs are compared one by one, from 8 on looked up by hash: both ways
  // must find the same input, including in a trace read from JSON (not indexed until added to).
  for (int64_t n : {3, 7, 8, 9, 40}) {
    OpTrace trace;
    for (int64_t k = 0; k < n; ++k) trace.add("x.default", tensor_input({k + 1, 2}));
    for (int64_t k = n; k-- > 0;) trace.add("x.default", tensor_input({k + 1, 2}, 3));
    const optrace::OpEntry* x = trace.find("x.default");
    REQUIRE(static_cast<int64_t>(x->unique_inputs.size()) == n);
    for (int64_t k = 0; k < n; ++k) {
      CHECK(x->unique_inputs[static_cast<size_t>(k)].input_shapes[0]->at(0) == k + 1);  // first-seen order kept
      CHECK(x->unique_inputs[static_cast<size_t>(k)].count == 4);
    }
    OpTrace back = OpTrace::from_json(trace.to_json());
    back.add("x.default", tensor_input({1, 2})).add("x.default", tensor_input({n + 1, 2}));
    const optrace::OpEntry* y = back.find("x.default");
    CHECK(static_cast<int64_t>(y->unique_inputs.size()) == n + 1);
    CHECK(back.total_calls() == 4 * n + 2);
  }
}

TEST_CASE("OpTrace::reserve adds no op and changes nothing added after it", "[op_trace]") {
  auto input = [](int64_t n) {
    OpInput in;
    in.input_shapes = {std::vector<int64_t>{n}};
    in.input_dtypes = {"torch.float32"};
    in.non_tensor_inputs = {optrace::OpValue::none()};
    return in;
  };
  optrace::OpTrace reserved, plain;
  reserved.reserve(3);
  CHECK(reserved.empty());
  for (optrace::OpTrace* t : {&reserved, &plain})
    for (int k = 0; k < 5; ++k) t->add(k % 2 ? "b.default" : "a.default", input(k % 3));
  CHECK(reserved == plain);
  CHECK(reserved.op_names() == std::vector<std::string>{"a.default", "b.default"});
  CHECK(reserved.total_calls("a.default") == 3);
}
