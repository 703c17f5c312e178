// PyTorch's operator-inputs logs (optrace/operator_inputs.hpp): every construct read, strict
// errors, Python's repr written, the logger's rules, real logs round trip, OpTracer's output.
#include <optrace/kineto.hpp>
#include <optrace/op_tracer.hpp>
#include <optrace/operator_inputs.hpp>
#include <optrace/replay.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "optrace_catch.hpp"

using optrace::OpInput;
using optrace::OpTrace;
using optrace::OpValue;
namespace oi = optrace::operator_inputs;

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const OpInput& only_input(const OpTrace& t, const char* op, size_t i = 0) {
  const optrace::OpEntry* e = t.find(op);
  REQUIRE(e != nullptr);
  REQUIRE(e->unique_inputs.size() > i);
  return e->unique_inputs[i];
}

std::string error_of(const std::string& text) {
  try {
    oi::parse(text, "t.txt");
  } catch (const optrace::TextError& e) {
    return e.what();
  }
  return "no error";
}

// The log with its `aten.sum.SymInt` block renamed and moved where the sorted order puts it: what
// a reader that applies PyTorch's rename writes back.
std::string renamed_and_sorted(const std::string& log) {
  std::vector<std::string> blocks;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Operator: ", 0) == 0) {
      if (line == "Operator: aten.sum.SymInt") line = "Operator: aten.sum.dim_IntList";
      blocks.push_back("");
    }
    blocks.back() += line + "\n";
  }
  std::sort(blocks.begin(), blocks.end());
  std::string out;
  for (const std::string& b : blocks) out += b;
  return out;
}

}  // namespace

TEST_CASE("operator inputs: every construct of PyTorch's loaders is read", "[operator_inputs]") {
  const std::string log =
      "Operator: aten.addmm.default\n"
      "cnt: 2, ((T([768], f16), T([4096, 768], f16), T([768, 768], f16, stride=(1, 768))), {})\n"
      "cnt: 3, ((T([768], f16), T([4096, 768], f16), T([768, 768], f16, stride=(1, 768))), {})\r\n"
      "\n"
      "Operator: aten._to_copy.default\n"
      "cnt: 1, ((T([64, 1, 1, 128], f32),), {'dtype': f16, 'layout': torch.strided, 'device': 'cuda', 'pin_memory': None})\n"
      "cnt: 4, ((T([6, 474], i64),), {'dtype': torch.bool, 'device': \"torch.device('cpu')\"})\n"
      "Operator: aten.masked_fill.Scalar\n"
      "cnt: 1, ((T([2, 3], f32), T([2, 3], b8), -inf), {})\n"
      "Operator: aten.cat.default\n"
      "cnt: 1, (([T([64, 1, 768], f16, stride=(0, 768, 1)), T([64, 196, 768], f16)], 1), {})\n"
      "Operator: aten.index.Tensor\n"
      "cnt: 1, ((T([5, 6], f32), [None, T([4], i64)]), {})\n"
      "Operator: aten.sum.SymInt\n"
      "cnt: 1, ((T([64, 256], f16), [1], True), {})\n"
      "Operator: aten.native_batch_norm.default\n"
      "cnt: 2, ((T([64, 32], f16), T([32], f16), None, None, False, 0.1, 1e-05), {})\n"
      "Operator: aten._sparse_coo_tensor_with_dims_and_tensors.default\n"
      "cnt: 2, ((1, 1, [965, 192], ST([1, 54765], i64, torch.sparse_coo, True, 7), T([54765, 192], f16)), {})\n"
      "Operator: custom.foo.default\n"
      "cnt: 1, ((T([2, 2], bf16, [1, 2]), th.float32, 'f32', [c128, u8, i8, i16, i32, f64, c32, c64], nan, 1.5e+20, "
      "(1, (2, 3)), torch.channels_last, 'it\\'s', -7, T(size=[3], dtype=f64, stride=None)), {'k': T([3], f64, stride=(2,))})\n"
      "Operator: aten.addmm.default\n"
      "cnt: 1, ((T([768], f16), T([4096, 768], f16), T([768, 768], f16, stride=(1, 768))), {})\n";
  const oi::ReadResult r = oi::parse(log, "t.txt");
  const OpTrace& t = r.trace;
  CHECK(t.op_names() == std::vector<std::string>{"addmm.default", "_to_copy.default", "masked_fill.Scalar", "cat.default",
                                                 "index.Tensor", "sum.dim_IntList", "native_batch_norm.default",
                                                 "custom::foo.default"});
  // Equal lines and a repeated Operator: block add up.
  REQUIRE(t.find("addmm.default")->unique_inputs.size() == 1);
  const OpInput& addmm = only_input(t, "addmm.default");
  CHECK(addmm.count == 6);
  CHECK((addmm.input_shapes[2] == std::vector<int64_t>{768, 768}));
  CHECK(addmm.input_dtypes == std::vector<std::string>{"torch.float16", "torch.float16", "torch.float16"});
  CHECK((addmm.input_strides == std::vector<optrace::OptionalShape>{std::nullopt, std::nullopt, std::vector<int64_t>{1, 768}}));

  const OpInput& to = only_input(t, "_to_copy.default");
  CHECK(to.input_strides.empty());
  REQUIRE(to.kwargs.size() == 4);
  CHECK(to.kwargs[0].name == "dtype");
  CHECK(to.kwargs[0].dtype == "<class 'torch.dtype'>");
  CHECK(to.kwargs[0].value == OpValue::string("torch.float16"));
  CHECK(to.kwargs[1].dtype == "<class 'torch.layout'>");
  CHECK(to.kwargs[1].value == OpValue::string("torch.strided"));
  CHECK(to.kwargs[2].dtype == "<class 'str'>");
  CHECK(to.kwargs[2].value == OpValue::string("cuda"));
  CHECK(to.kwargs[3].value.is_none());
  const OpInput& to_bool = only_input(t, "_to_copy.default", 1);
  CHECK(to_bool.count == 4);
  CHECK(to_bool.kwargs[0].value == OpValue::string("torch.bool"));
  CHECK(to_bool.kwargs[1].value == OpValue::string("torch.device('cpu')"));

  const OpInput& fill = only_input(t, "masked_fill.Scalar");
  CHECK(fill.input_dtypes[1] == "torch.bool");
  CHECK(fill.input_dtypes[2] == "<class 'float'>");
  CHECK(fill.non_tensor_inputs[2] == OpValue::floating(-std::numeric_limits<double>::infinity()));

  const OpInput& cat = only_input(t, "cat.default");
  CHECK(cat.input_dtypes == std::vector<std::string>{"<class 'list'>", "<class 'int'>"});
  REQUIRE(cat.tensor_lists.size() == 1);
  const optrace::TensorListInfo& list = cat.tensor_lists[0].second;
  CHECK((list.shapes == std::vector<optrace::OptionalShape>{std::vector<int64_t>{64, 1, 768}, std::vector<int64_t>{64, 196, 768}}));
  CHECK((list.strides == std::vector<optrace::OptionalShape>{std::vector<int64_t>{0, 768, 1}, std::nullopt}));
  const optrace::TensorListInfo& indices = only_input(t, "index.Tensor").tensor_lists.at(0).second;
  CHECK((indices.shapes[0] == std::nullopt));
  CHECK(indices.dtypes == std::vector<std::string>{"<class 'NoneType'>", "torch.int64"});
  CHECK(indices.strides.empty());

  const OpInput& bn = only_input(t, "native_batch_norm.default");
  CHECK(bn.non_tensor_inputs[5] == OpValue::floating(0.1));
  CHECK(bn.non_tensor_inputs[6] == OpValue::floating(1e-05));
  CHECK(bn.input_dtypes[4] == "<class 'bool'>");

  const OpInput& foo = only_input(t, "custom::foo.default");
  CHECK((foo.input_strides.at(0) == std::vector<int64_t>{1, 2}));  // BackendBench's positional stride
  CHECK(foo.input_dtypes[0] == "torch.bfloat16");
  CHECK(foo.input_dtypes[1] == "<class 'torch.dtype'>");
  CHECK(foo.non_tensor_inputs[1] == OpValue::string("torch.float32"));
  CHECK(foo.non_tensor_inputs[2] == OpValue::string("torch.float32"));  // 'f32' is unquoted by deserialize_args
  std::vector<OpValue> dtypes;
  for (const char* d : {"torch.complex128", "torch.uint8", "torch.int8", "torch.int16", "torch.int32", "torch.float64",
                        "torch.complex32", "torch.complex64"})
    dtypes.push_back(OpValue::string(d));
  CHECK(foo.non_tensor_inputs[3] == OpValue::list(dtypes));
  CHECK(std::isnan(foo.non_tensor_inputs[4].as_float()));
  CHECK(foo.non_tensor_inputs[5] == OpValue::floating(1.5e20));
  CHECK(foo.input_dtypes[6] == "<class 'tuple'>");
  CHECK(foo.non_tensor_inputs[6] == OpValue::list({OpValue::integer(1), OpValue::list({OpValue::integer(2), OpValue::integer(3)})}));
  CHECK(foo.input_dtypes[7] == "<class 'torch.memory_format'>");
  CHECK(foo.non_tensor_inputs[7] == OpValue::string("torch.channels_last"));
  CHECK(foo.non_tensor_inputs[8] == OpValue::string("it's"));
  CHECK(foo.non_tensor_inputs[9] == OpValue::integer(-7));
  CHECK((foo.input_shapes[10] == std::vector<int64_t>{3}));
  CHECK(foo.input_dtypes[10] == "torch.float64");
  REQUIRE(foo.kwargs.size() == 1);
  CHECK((foo.kwargs[0].shape == std::vector<int64_t>{3}));
  CHECK((foo.kwargs[0].strides == std::vector<int64_t>{2}));

  // The sparse line is left out and reported, not an error.
  CHECK(t.find("_sparse_coo_tensor_with_dims_and_tensors.default") == nullptr);
  CHECK(r.report.lines == 12);
  CHECK(r.report.calls == t.total_calls());
  REQUIRE(r.report.left_out.size() == 1);
  CHECK(r.report.left_out[0].calls == 2);
  CHECK(r.report.left_out[0].examples == std::vector<std::string>{"t.txt:19: aten._sparse_coo_tensor_with_dims_and_tensors.default"});
  CHECK_THAT(r.report.to_string(), OPTRACE_CONTAINS("left out: sparse tensor (ST): the op-trace model has no sparse tensors: 1 lines, 2 calls"));
}

TEST_CASE("operator inputs: malformed logs name file, line, column and what was expected", "[operator_inputs]") {
  const std::string op = "Operator: aten.relu.default\n";
  CHECK(error_of("cnt: 1, ((T([2], f16),), {})\n") ==
        "optrace: TextError at t.txt:1:1: expected an 'Operator: ' line before the first 'cnt: ' line, got 'cnt: 1, ((T([2], f16),),...'");
  CHECK(error_of("Operator: addmm\n") ==
        "optrace: TextError at t.txt:1:11: expected an operator written namespace.name.overload (aten.addmm.default), got 'addmm'");
  CHECK(error_of(op + "random text\n") == "optrace: TextError at t.txt:2:1: expected 'Operator: ' or 'cnt: ', got 'random text'");
  CHECK(error_of(op + "cnt: x, ((), {})\n") ==
        "optrace: TextError at t.txt:2:6: expected the call count: an integer that fits 64 bits, got 'x, ((), {})'");
  CHECK(error_of(op + "cnt: 0, ((), {})\n") ==
        "optrace: TextError at t.txt:2:6: expected a count of at least 1 (BackendBench's synthetic cnt: 0 lines are not calls), got '0, ((), {})'");
  CHECK(error_of(op + "cnt: 1, ((T([2], f16)), {})\n") ==
        "optrace: TextError at t.txt:2:11: expected the positional arguments: a tuple, such as (T([2], f32),), got 'T([2], f16)), {})'");
  CHECK(error_of(op + "cnt: 1, ((T([2], f17),), {})\n") ==
        "optrace: TextError at t.txt:2:18: expected a value (None, True, False, inf, nan, T(...), ST(...), a dtype such as f16, "
        "or torch.<attr>), got 'f17),), {})'");
  CHECK(error_of(op + "cnt: 1, ((T([2, 3], f16, stride=(1,)),), {})\n") ==
        "optrace: TextError at t.txt:2:33: expected 2 strides (one per dimension), got '(1,)),), {})'");
  CHECK(error_of(op + "cnt: 1, (('abc,), {})\n") == "optrace: TextError at t.txt:2:11: expected a string closed by ', got ''abc,), {})'");
  CHECK(error_of(op + "cnt: 1, ((T([2], f16),), {}) x\n") ==
        "optrace: TextError at t.txt:2:30: expected the end of the line after (args, kwargs), got 'x'");
  CHECK(error_of(op + "cnt: 1, ((99999999999999999999,), {})\n") ==
        "optrace: TextError at t.txt:2:11: expected an integer that fits 64 bits, got '99999999999999999999,), ...'");
  CHECK(error_of(op + "cnt: 1, ((T([2], f16) T([2], f16)), {})\n") ==
        "optrace: TextError at t.txt:2:23: expected ',' or ')', got 'T([2], f16)), {})'");
  CHECK(error_of(op + "cnt: 1, ((torch.float17,), {})\n") ==
        "optrace: TextError at t.txt:2:17: expected a dtype, layout or memory format after torch., got 'float17,), {})'");
  CHECK(error_of(op + "cnt: 1, (([T([2], f16), 3],), {})\n") ==
        "optrace: TextError at t.txt:2:25: expected a tensor or None (a list holding tensors holds nothing else), got '3],), {})'");
  CHECK(error_of(op + "cnt: 1, ((T([2], f16),), {'a': 1, 'a': 2})\n") ==
        "optrace: TextError at t.txt:2:35: expected keyword names that differ (\"a\" twice), got ''a': 2})'");
  CHECK(error_of(op + "cnt: 1, ((T([2], f16),), [])\n") ==
        "optrace: TextError at t.txt:2:26: expected the keyword arguments: a dict, such as {} or {'dtype': f16}, got '[])'");
  CHECK(error_of(op + "cnt: 1, ((T(['a'], f16),), {})\n") ==
        "optrace: TextError at t.txt:2:14: expected a tensor size: a list of integers, got ''a'], f16),), {})'");
  // What no tensor can have.
  CHECK(error_of(op + "cnt: 1, ((T([-3, 2], f16),), {})\n") == "optrace: TextError at t.txt:2:14: negative size -3");
  CHECK(error_of(op + "cnt: 1, ((T([3, 2], f16, stride=(2, -1)),), {})\n") == "optrace: TextError at t.txt:2:37: negative stride -1");
  CHECK(error_of(op + "cnt: 1, ((T([3, 2], f16, (-2, 1)),), {})\n") == "optrace: TextError at t.txt:2:27: negative stride -2");
  // torch.<name> torch lacks: a tensor's dtype may be a newer torch's, nothing else may.
  CHECK(error_of(op + "cnt: 1, ((T([2], f16), torch.float17), {})\n") ==
        "optrace: TextError at t.txt:2:30: expected a dtype, layout or memory format after torch., got 'float17), {})'");
}

TEST_CASE("operator inputs: a tensor's dtype torch lacks is read as written, and named unknown", "[operator_inputs]") {
  const std::string log = "Operator: aten.add.Tensor\ncnt: 3, ((T([2], torch.float99), T([2], f32)), {})\n";
  const optrace::OpTrace trace = optrace::operator_inputs::parse(log, "t.txt").trace;
  REQUIRE(trace.find("add.Tensor") != nullptr);
  CHECK(trace.find("add.Tensor")->unique_inputs[0].input_dtypes[0] == "torch.float99");
  REQUIRE(trace.unknown_dtypes().size() == 1);
  CHECK(trace.unknown_dtypes()[0].to_string() == "torch.float99 (1 unique input, 3 calls: add.Tensor)");
}

TEST_CASE("operator inputs: floats and strings are written as Python's repr writes them", "[operator_inputs]") {
  namespace oplog = optrace::detail::op_trace::oplog;
  auto f = [](double d) {
    std::string s;
    oplog::append_python_float(s, d);
    return s;
  };
  // Each as CPython 3's repr(float) writes it.
  CHECK(f(1e-05) == "1e-05");
  CHECK(f(0.0001) == "0.0001");
  CHECK(f(0.1) == "0.1");
  CHECK(f(100.0) == "100.0");
  CHECK(f(1e16) == "1e+16");
  CHECK(f(1234567890123456.0) == "1234567890123456.0");
  CHECK(f(-0.0) == "-0.0");
  CHECK(f(1.5e-07) == "1.5e-07");
  CHECK(f(2.5e20) == "2.5e+20");
  CHECK(f(5e-324) == "5e-324");
  CHECK(f(1.7976931348623157e308) == "1.7976931348623157e+308");
  CHECK(f(0.3333333333333333) == "0.3333333333333333");
  CHECK(f(-std::numeric_limits<double>::infinity()) == "-inf");
  CHECK(f(std::nan("")) == "nan");
  auto s = [](std::string_view v) {
    std::string out;
    oplog::append_python_string(out, v);
    return out;
  };
  CHECK(s("cuda") == "'cuda'");
  CHECK(s("it's") == "\"it's\"");
  CHECK(s("a\"b'c") == "'a\"b\\'c'");
  CHECK(s("back\\slash\n") == "'back\\\\slash\\n'");
}

TEST_CASE("operator inputs: PyTorch's three shared logs read and write back byte for byte", "[operator_inputs]") {
  struct Log {
    const char* file;
    size_t ops;
    int64_t lines, calls;
  };
  for (const Log& log : {Log{"resnet18_training.txt", 22, 66, 165}, Log{"BertForMaskedLM_training.txt", 25, 56, 707},
                         Log{"tts_angular_training.txt", 20, 31, 46}}) {
    INFO(log.file);
    const std::string path = optrace_test::data_path(std::string("oplogs/") + log.file);
    const oi::ReadResult r = oi::load(path);
    CHECK(r.trace.size() == log.ops);
    CHECK(r.report.lines == log.lines);
    CHECK(r.trace.total_calls() == log.calls);
    CHECK(r.report.left_out.empty());
    oi::WriteReport report;
    const std::string text = oi::to_text(r.trace, {}, &report);
    CHECK(text == renamed_and_sorted(read(path)));
    CHECK(report.lines().empty());  // nothing left out: every line passed the logger's rules once
    // Through the hf JSON (extended keys) and back: nothing lost.
    CHECK(OpTrace::from_json(r.trace.to_json()).to_json() == r.trace.to_json());
    CHECK(optrace::kineto::load_any(path).trace == r.trace);
    CHECK(optrace::kineto::detect_format(path) == optrace::kineto::TraceFormat::OperatorInputs);
  }
  const OpTrace bert = oi::load(optrace_test::data_path("oplogs/BertForMaskedLM_training.txt")).trace;
  bool dtype_kwarg = false;
  for (const OpInput& in : bert.find("_to_copy.default")->unique_inputs)
    for (const optrace::OpKwarg& k : in.kwargs) dtype_kwarg = dtype_kwarg || (k.name == "dtype" && k.value == OpValue::string("torch.float16"));
  CHECK(dtype_kwarg);
}

TEST_CASE("operator inputs: the writer applies PyTorch's logger's rules and reports what it leaves out", "[operator_inputs]") {
  optrace::OpTracer tracer(optrace::OpTracerOptions().extended(true));
  torch::NoGradGuard no_grad;
  torch::Tensor a = torch::randn({4, 6});
  tracer.start();
  torch::Tensor b = a.t();                      // t: a view (non-compute)
  torch::Tensor c = torch::cat({b, b}, 1);      // a list of strided tensors
  torch::Tensor h = a.to(torch::kHalf);         // _to_copy with a dtype keyword
  torch::Tensor z = torch::zeros_like(a);       // *_like (non-compute)
  a.add_(1.5);                                  // in place: kept
  torch::Tensor k = a.clone(at::MemoryFormat::Contiguous);  // a memory-format argument: left out
  const float item = a.sum().item<float>();     // _local_scalar_dense returns no tensor: left out
  tracer.stop();
  (void)item;
  const OpTrace trace = tracer.trace();
  oi::WriteReport report;
  const std::string text = oi::to_text(trace, {}, &report);
  CHECK_THAT(text, OPTRACE_CONTAINS("Operator: aten.cat.default\ncnt: 1, (([T([6, 4], f32, stride=(1, 6)), T([6, 4], f32, stride=(1, 6))], 1), {})\n"));
  CHECK_THAT(text, OPTRACE_CONTAINS("Operator: aten._to_copy.default\ncnt: 1, ((T([4, 6], f32),), {'dtype': f16})\n"));
  CHECK_THAT(text, OPTRACE_CONTAINS("Operator: aten.add_.Scalar\ncnt: 1, ((T([4, 6], f32), 1.5), {})\n"));
  CHECK(text.find("aten.t.default") == std::string::npos);
  CHECK(text.find("zeros_like") == std::string::npos);
  CHECK(text.find("clone") == std::string::npos);
  CHECK(text.find("_local_scalar_dense") == std::string::npos);
  std::vector<std::string> skipped;
  for (const auto& [op, calls] : report.non_compute) skipped.push_back(op);
  CHECK(skipped == std::vector<std::string>{"t.default", "zeros_like.default"});
  CHECK(report.no_tensor_output == 1);
  CHECK(report.memory_format == 1);
  CHECK(report.devices > 0);  // an extended trace names devices, which a log cannot
  // Operators sorted as Python sorts their names.
  CHECK(text.find("aten._to_copy.default") < text.find("aten.add_.Scalar"));
  CHECK(text.find("aten.add_.Scalar") < text.find("aten.cat.default"));
  // skip_non_compute(false) keeps the views and *_like ops.
  const std::string all = oi::to_text(trace, oi::WriteOptions().skip_non_compute(false));
  CHECK_THAT(all, OPTRACE_CONTAINS("Operator: aten.t.default\ncnt: 1, ((T([4, 6], f32),), {})\n"));
  CHECK_THAT(all, OPTRACE_CONTAINS("Operator: aten.zeros_like.default\n"));
  // Read back: the strides of the list's elements and the keyword survive, and hf JSON keeps them.
  const OpTrace back = oi::parse(text).trace;
  CHECK((back.find("cat.default")->unique_inputs[0].tensor_lists[0].second.strides ==
         std::vector<optrace::OptionalShape>{std::vector<int64_t>{1, 6}, std::vector<int64_t>{1, 6}}));
  CHECK(OpTrace::from_json(back.to_json()).to_json() == back.to_json());
  // The DOM reader (strict path) reads the extended "strides" keys as the fast one does.
  CHECK(OpTrace::from_document(*optrace::json::Document::parse(back.to_json())).to_json() == back.to_json());
  CHECK(OpTrace::from_json(trace.to_json()).to_json() == trace.to_json());
}

TEST_CASE("operator inputs: replay honours keywords, strides and tensor lists, and skips a missing op", "[operator_inputs]") {
  const std::string log =
      "Operator: aten.cat.default\n"
      "cnt: 1, (([T([4, 1, 8], f16, stride=(0, 8, 1)), T([4, 3, 8], f16)], 1), {})\n"
      "Operator: aten._to_copy.default\n"
      "cnt: 2, ((T([4, 8], f32),), {'dtype': f16, 'layout': torch.strided, 'device': 'cuda', 'pin_memory': None})\n"
      "Operator: aten.add.Tensor\n"
      "cnt: 1, ((T([8, 4], f16, stride=(1, 8)), T([8, 4], f16)), {'alpha': 2})\n"
      "Operator: aten.no_such_backward.default\n"
      "cnt: 1, ((T([2], f16),), {})\n";
  const OpTrace trace = oi::parse(log).trace;
  const optrace::ReplayReport report = optrace::replay(
      trace, optrace::ReplayOptions().device(torch::kCPU).mode(optrace::ReplayMode::check).float_dtype(torch::kFloat).progress(false));
  REQUIRE(report.results.size() == 4);
  for (const optrace::ReplayResult& r : report.results) {
    INFO(r.op << ": " << r.message);
    if (r.op == "no_such_backward.default") {
      CHECK(r.status == optrace::ReplayStatus::skipped);
      CHECK(r.message == "not replayable: this libtorch has no operator aten::no_such_backward (renamed or removed since the trace was recorded?)");
    } else {
      CHECK(r.status == optrace::ReplayStatus::ok);
    }
  }
  // float_dtype re-types floating tensors and floating dtype arguments (--dtype float32).
  CHECK(report.results[1].inputs.find("f32[4, 8]") != std::string::npos);
  CHECK_THROWS_AS(optrace::ReplayOptions().float_dtype(torch::kLong), optrace::ArgumentError);
}

TEST_CASE("operator inputs: a log is loaded a piece at a time, as parse reads it whole", "[operator_inputs]") {
  // The three logs over and over (each repeat adds to the counts), CRLF and LF, a line longer than
  // a piece, and no final line break; read 4 KiB at a time (the reader's own pieces are 1 MiB: a
  // small log crosses as many boundaries, at every kind of place, and runs fast under ASan).
  std::string text;
  for (int k = 0; text.size() < 96u << 10; ++k)
    for (const char* file : {"resnet18_training.txt", "BertForMaskedLM_training.txt", "tts_angular_training.txt"})
      text += read(optrace_test::data_path(std::string("oplogs/") + file)) + (k % 2 ? "\r\n" : "\n");
  std::string long_list;
  for (int k = 0; k < 6000; ++k) long_list += (k ? ", " : "") + std::to_string(k % 7);
  text += "Operator: aten.sum.dim_IntList\ncnt: 2, ((T([2, 3], f16), [" + long_list + "]), {})";
  REQUIRE(long_list.size() > 3 * 4096);
  const oi::ReadResult whole = oi::parse(text, "big.txt");
  auto read_in_pieces = [](const std::string& path) {
    optrace::detail::FileReader in(path);
    return optrace::detail::op_trace::oplog::read_log(in, path, 4096);
  };
  for (bool gzip : {false, true}) {
    const std::string path = optrace_test::temp_path(gzip ? "big_oplog.txt.gz" : "big_oplog.txt");
    optrace::detail::write_file_maybe_gzip(path, text);
    for (const oi::ReadResult& loaded : {read_in_pieces(path), oi::load(path)}) {
      CHECK(loaded.trace == whole.trace);
      CHECK(loaded.report.to_string() == whole.report.to_string());
    }
    CHECK(optrace::kineto::load_any(path).trace == whole.trace);
    CHECK(optrace::kineto::detect_format(path) == optrace::kineto::TraceFormat::OperatorInputs);
    // An error past the first pieces: the same line and column.
    std::string bad = text;
    bad.insert(bad.rfind("Operator: aten.sum.dim_IntList"), "cnt: 1, ((T([2], f17),), {})\n");
    optrace::detail::write_file_maybe_gzip(path, bad);
    std::string parsed, read_back;
    try {
      (void)oi::parse(bad, path);
    } catch (const optrace::TextError& e) {
      parsed = e.what();
    }
    try {
      (void)read_in_pieces(path);
    } catch (const optrace::TextError& e) {
      read_back = e.what();
    }
    CHECK(parsed.find("f17") != std::string::npos);
    CHECK(read_back == parsed);
  }
}
