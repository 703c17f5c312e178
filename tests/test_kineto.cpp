// tests/test_kineto.cpp: Kineto trace import and export (optrace/kineto.hpp)
#include <optrace/detail/common/op_catalog.hpp>
#include <optrace/key_averages.hpp>
#include <optrace/kineto.hpp>

#include "optrace_catch.hpp"
#include "text_reader.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

// Printing for Catch's messages (glog's stl_logging, which libtorch pulls in, declares
// operator<< for every std::vector, so Catch needs one for the elements too).
namespace optrace {
inline std::ostream& operator<<(std::ostream& out, const OpValue& v) {
  json::Writer w;
  v.write(w);
  return out << w.str();
}
}  // namespace optrace
namespace std {
inline ostream& operator<<(ostream& out, const optional<vector<int64_t>>& s) {
  if (!s) return out << "null";
  out << "[";
  for (size_t k = 0; k < s->size(); ++k) out << (k ? ", " : "") << (*s)[k];
  return out << "]";
}
}  // namespace std

namespace {

namespace kineto = optrace::kineto;
using optrace::OpInput;
using optrace::OpTrace;
using optrace::OpValue;

// One cpu_op complete event; `args` is the JSON inside "args" (without braces).
std::string op(const std::string& name, double ts, double dur, const std::string& args, int tid = 1,
               const std::string& cat = "cpu_op") {
  return R"({"ph": "X", "cat": ")" + cat + R"(", "name": ")" + name + R"(", "pid": 7, "tid": )" + std::to_string(tid) +
         R"(, "ts": )" + std::to_string(ts) + R"(, "dur": )" + std::to_string(dur) + R"(, "args": {)" + args + "}}";
}

std::string trace_of(const std::vector<std::string>& events) {
  std::string out = R"({"schemaVersion": 1, "traceEvents": [)";
  for (size_t k = 0; k < events.size(); ++k) out += (k ? ",\n" : "\n") + events[k];
  return out + "\n], \"displayTimeUnit\": \"ms\"}";
}

// "Input Dims", "Input type", "Concrete Inputs" (and strides: none).
std::string in(const std::string& dims, const std::string& types, const std::string& concrete = "") {
  std::string out = R"("Input Dims": )" + dims + R"(, "Input type": )" + types;
  if (!concrete.empty()) out += R"(, "Concrete Inputs": )" + concrete;
  return out;
}

std::string write_temp(const std::string& name, const std::string& content, bool gzip = false) {
  std::string path = optrace_test::temp_path(name);
  if (gzip) {
    gzFile gz = gzopen(path.c_str(), "wb");
    gzwrite(gz, content.data(), static_cast<unsigned>(content.size()));
    gzclose(gz);
  } else {
    std::ofstream(path, std::ios::binary) << content;
  }
  return path;
}

const OpInput& only_input(const OpTrace& t, std::string_view op_name) {
  const optrace::OpEntry* e = t.find(op_name);
  REQUIRE(e != nullptr);
  REQUIRE(e->unique_inputs.size() == 1);
  return e->unique_inputs[0];
}

}  // namespace

TEST_CASE("kineto: a training step recorded by torch.profiler", "[kineto]") {
  auto r = kineto::load(optrace_test::data_path("kineto/rocm_minitoy_train.pt.trace.json.gz"),
                        kineto::ImportOptions().record_strides(true));
  const OpTrace& t = r.trace;
  SECTION("CompositeImplicitAutograd ops are replaced by their parts") {
    CHECK(t.find("linear.default") == nullptr);
    CHECK(t.find("to.dtype_layout") == nullptr);
    CHECK(t.total_calls("_to_copy.default") == 2);
    const OpInput& addmm = only_input(t, "addmm.default");
    CHECK(addmm.input_shapes == std::vector<optrace::OptionalShape>{std::vector<int64_t>{128}, std::vector<int64_t>{5, 128},
                                                                     std::vector<int64_t>{128, 128}});
    CHECK(addmm.input_dtypes == std::vector<std::string>(3, "torch.float32"));
    // The transposed weight is not contiguous: its strides are kept when asked (not by default,
    // as OpTracer and the reference write none).
    REQUIRE(addmm.input_strides.size() == 3);
    CHECK(addmm.input_strides[2] == std::vector<int64_t>{1, 128});
    const auto plain = kineto::load(optrace_test::data_path("kineto/rocm_minitoy_train.pt.trace.json.gz"));
    CHECK(only_input(plain.trace, "addmm.default").input_strides.empty());
    CHECK(plain.trace.to_json().find("input_strides") == std::string::npos);
  }
  SECTION("ops inside a kept op are not kept; autograd nodes are transparent") {
    CHECK(t.find("transpose.int") == nullptr);
    CHECK(t.find("as_strided.default") == nullptr);
    CHECK(t.find("clamp_min.default") == nullptr);
    CHECK(t.find("empty.memory_format") == nullptr);
    CHECK(t.total_calls("mse_loss_backward.default") == 1);
    CHECK(t.total_calls("threshold_backward.default") == 1);
    CHECK(t.total_calls("add_.Tensor") == 2);  // inside AccumulateGrad
    CHECK(r.report.transparent == 12);
  }
  SECTION("scalars, scalar lists and tensor lists") {
    const OpInput& sum = only_input(t, "sum.dim_IntList");
    CHECK(sum.input_dtypes == std::vector<std::string>{"torch.float32", "<class 'list'>", "<class 'bool'>"});
    CHECK(sum.non_tensor_inputs == std::vector<OpValue>{OpValue::none(), OpValue::list({OpValue::integer(0)}), OpValue::boolean(true)});
    const OpInput& foreach_add = only_input(t, "_foreach_add_.List");
    REQUIRE(foreach_add.tensor_lists.size() == 2);
    CHECK(foreach_add.tensor_lists[0].second.shapes ==
          std::vector<optrace::OptionalShape>{std::vector<int64_t>{128, 128}, std::vector<int64_t>{128}});
    CHECK(foreach_add.non_tensor_inputs == std::vector<OpValue>{OpValue::tensor_list_ref(0), OpValue::tensor_list_ref(1)});
  }
  SECTION("the report adds up") {
    const auto& rep = r.report;
    CHECK(rep.format == "kineto");
    CHECK(rep.op_events == 70);
    CHECK(rep.kept == t.total_calls());
    CHECK(rep.kept + rep.nested + rep.decomposed + rep.transparent + rep.left_out == rep.op_events);
    const auto* guessed = rep.find("tensor list dtypes not recorded (taken from the first tensor argument, else float32)");
    REQUIRE(guessed != nullptr);
    CHECK(guessed->kept);
    CHECK(guessed->count == 1);
  }
}

TEST_CASE("kineto: a trace from a profiler without Concrete Inputs", "[kineto]") {
  auto r = kineto::load(optrace_test::data_path("kineto/small_base.pt.trace.json.gz"));
  CHECK_FALSE(r.report.concrete_inputs);
  CHECK(r.report.kept == 6);
  CHECK(r.report.incomplete == 5);
  CHECK(OPTRACE_CONTAINS("no \"Concrete Inputs\"").match(r.report.to_string()));
  // The size list was not recorded: kept as null.
  const OpInput& empty = only_input(r.trace, "empty.memory_format");
  CHECK(empty.input_dtypes == std::vector<std::string>{"<class 'list'>"});
  CHECK(empty.non_tensor_inputs[0].is_none());
  CHECK(empty.count == 2);
}

TEST_CASE("kineto: a bf16 inference trace with custom ops", "[kineto]") {
  auto r = kineto::load(optrace_test::data_path("kineto/mtia_inference.pt.trace.json.gz"));
  const auto& rep = r.report;
  CHECK(rep.op_events == 10346);
  CHECK(rep.kept + rep.nested + rep.decomposed + rep.transparent + rep.left_out == rep.op_events);
  CHECK(rep.transparent > 0);  // fbgemm:: ops this libtorch does not know
  const auto* lists = rep.find("tensor list not recorded (profiler before PyTorch 2.1)");
  REQUIRE(lists != nullptr);
  CHECK(lists->count == 7);
  const optrace::OpEntry* slice = r.trace.find("slice.Tensor");
  REQUIRE(slice != nullptr);
  bool bf16 = false;
  for (const OpInput& i : slice->unique_inputs) bf16 = bf16 || i.input_dtypes[0] == "torch.bfloat16";
  CHECK(bf16);
  // The file, inflated, reads the same.
  std::string text = optrace::detail::read_file_maybe_gzip(optrace_test::data_path("kineto/mtia_inference.pt.trace.json.gz"));
  CHECK(kineto::parse(text).trace == r.trace);
}

TEST_CASE("kineto: nesting per thread", "[kineto]") {
  const std::string mm = in("[[2, 3], [3, 4]]", R"(["float", "float"])", R"(["", ""])");
  const std::string t23 = in("[[2, 3]]", R"(["float"])", R"([""])");
  std::string text = trace_of({
      // Listed out of order: nesting follows ts/dur, not the file.
      op("aten::t", 12, 3, t23),                       // inside linear: kept (linear decomposes)
      op("aten::linear", 10, 20, in("[[2, 3], [4, 3], [4]]", R"(["float", "float", "float"])", R"(["", "", ""])")),
      op("aten::transpose", 13, 1, in("[[2, 3], [], []]", R"(["float", "Scalar", "Scalar"])", R"(["", "0", "1"])")),
      op("ProfilerStep#3", 0, 100, "", 1, "user_annotation"),
      op("aten::mm", 16, 10, mm),                      // kept
      op("aten::mm", 18, 2, mm),                       // inside mm: not kept
      op("aten::mm", 18, 2, mm, /*tid=*/2),            // another thread: kept
      op("autograd::engine::evaluate_function: MmBackward0", 40, 20, ""),
      op("MmBackward0", 41, 18, t23),
      op("aten::mm", 42, 5, mm),                       // inside autograd nodes only: kept
      op("aten::mm", 50, 0, mm),                       // zero duration: kept
      op("aten::mm", 50, 0, mm),                       // same start and end: inside the first
  });
  auto r = kineto::parse(text);
  CHECK(r.trace.op_names() == std::vector<std::string>{"t.default", "mm.default"});
  CHECK(r.trace.total_calls("t.default") == 1);
  CHECK(r.trace.total_calls("mm.default") == 4);
  CHECK(r.report.nested == 3);
  CHECK(r.report.decomposed == 1);
  CHECK(r.report.transparent == 2);
  CHECK(r.report.op_events == 12 - 1);  // ProfilerStep is a user_annotation
}

TEST_CASE("kineto: a call inside a decomposed op is read as the reference sees it there", "[kineto]") {
  // linear's kernel adds the bias in place (add_); the reference tracer records add.Tensor there
  // (a context rule). The same fields outside linear stay add_.Tensor: one key, read twice.
  const std::string add = in("[[2, 4], [4], []]", R"(["float", "float", "Scalar"])", R"(["", "", "1"])");
  auto r = kineto::parse(trace_of({
      op("aten::linear", 10, 20, in("[[2, 3], [4, 3], [4]]", R"(["float", "float", "float"])", R"(["", "", ""])")),
      op("aten::add_", 15, 2, add),
      op("aten::add_", 40, 2, add),
      op("aten::linear", 50, 20, in("[[2, 3], [4, 3], [4]]", R"(["float", "float", "float"])", R"(["", "", ""])")),
      op("aten::add_", 55, 2, add),
  }));
  CHECK(r.trace.op_names() == std::vector<std::string>{"add.Tensor", "add_.Tensor"});
  CHECK(r.trace.total_calls("add.Tensor") == 2);
  CHECK(r.trace.total_calls("add_.Tensor") == 1);
  const std::vector<optrace::OptionalShape> shapes = {std::vector<int64_t>{2, 4}, std::vector<int64_t>{4}};
  CHECK(only_input(r.trace, "add.Tensor").input_shapes == shapes);  // alpha 1, the default: dropped
  CHECK(only_input(r.trace, "add_.Tensor").input_shapes == shapes);
  CHECK(r.report.decomposed == 2);
}

TEST_CASE("kineto: argument kinds and overload resolution", "[kineto]") {
  SECTION("dtype names of every compiler") {
    const std::vector<std::pair<std::string, std::string>> names = {
        {"float", "torch.float32"},          {"double", "torch.float64"},       {"c10::Half", "torch.float16"},
        {"c10::BFloat16", "torch.bfloat16"}, {"long int", "torch.int64"},       {"long", "torch.int64"},
        {"int", "torch.int32"},              {"short int", "torch.int16"},      {"signed char", "torch.int8"},
        {"unsigned char", "torch.uint8"},    {"bool", "torch.bool"},            {"c10::complex<float>", "torch.complex64"},
        {"c10::complex<double>", "torch.complex128"}, {"std::optional<float>", "torch.float32"}};
    std::vector<std::string> events;
    double ts = 0;
    for (const auto& [name, dtype] : names) events.push_back(op("aten::neg", ts += 10, 1, in("[[3]]", "[\"" + name + "\"]", R"([""])")));
    auto r = kineto::parse(trace_of(events));
    const optrace::OpEntry* neg = r.trace.find("neg.default");
    REQUIRE(neg != nullptr);
    std::vector<std::string> got;
    for (const OpInput& i : neg->unique_inputs) got.push_back(i.input_dtypes[0]);
    std::vector<std::string> want;
    for (const auto& p : names) want.push_back(p.second);
    want.pop_back();                 // std::optional<float> is float: the same input as the first
    want.erase(want.begin() + 5);    // "long" (Clang) is "long int" (GCC): the same input
    CHECK(got == want);
    CHECK(neg->unique_inputs[0].count == 2);
    CHECK(neg->unique_inputs[4].count == 2);
  }
  SECTION("scalars by the schema's type") {
    auto r = kineto::parse(trace_of({
        op("aten::mul", 0, 1, in("[[3], []]", R"(["float", "Scalar"])", R"(["", "1.+2.j"])")),
        op("aten::mul", 2, 1, in("[[3], []]", R"(["float", "Scalar"])", R"(["", "2"])")),
        op("aten::view", 4, 1, in("[[3], []]", R"(["float", "Scalar"])", R"(["", "5"])")),
        op("aten::leaky_relu", 6, 1, in("[[3], []]", R"(["float", "Scalar"])", R"(["", "0.01"])")),
        op("aten::leaky_relu", 8, 1, in("[[3], []]", R"(["float", "Scalar"])", R"(["", "0.20000000000000001"])")),
        op("aten::add", 10, 1, in("[[3], [3], []]", R"(["float", "float", "Scalar"])", R"(["", "", "-inf"])")),
    }));
    const optrace::OpEntry* mul = r.trace.find("mul.Scalar");
    REQUIRE(mul != nullptr);
    CHECK(mul->unique_inputs[0].input_dtypes[1] == "<class 'complex'>");
    CHECK(mul->unique_inputs[0].non_tensor_inputs[1] == OpValue::string("(1+2j)"));
    CHECK(mul->unique_inputs[1].non_tensor_inputs[1] == OpValue::integer(2));
    const OpInput& view = only_input(r.trace, "view.dtype");
    CHECK(view.input_dtypes[1] == "<class 'torch.dtype'>");
    CHECK(view.non_tensor_inputs[1] == OpValue::string("torch.float16"));
    const optrace::OpEntry* leaky = r.trace.find("leaky_relu.default");
    REQUIRE(leaky != nullptr);
    CHECK(leaky->unique_inputs[0].input_shapes.size() == 1);  // the default slope is dropped
    CHECK(leaky->unique_inputs[1].non_tensor_inputs[1] == OpValue::floating(0.2));
    const OpInput& add = only_input(r.trace, "add.Tensor");  // alpha is keyword-only
    CHECK(add.input_shapes.size() == 2);
  }
  SECTION("undefined tensors and TensorList") {
    auto r = kineto::parse(trace_of({
        op("aten::convolution", 0, 1,
           in("[[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], [], [], []]",
              R"(["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"])",
              R"(["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"])")),
        op("aten::cat", 2, 1, in("[[[2, 3], [4, 3]], []]", R"(["TensorList", "Scalar"])", R"(["", "0"])")),
    }));
    const OpInput& conv = only_input(r.trace, "convolution.default");
    CHECK(conv.input_dtypes[2] == "<class 'NoneType'>");
    CHECK(conv.non_tensor_inputs[2].is_none());
    CHECK(conv.non_tensor_inputs[6] == OpValue::boolean(false));
    const OpInput& cat = only_input(r.trace, "cat.default");  // dim=0 is the default
    CHECK(cat.non_tensor_inputs == std::vector<OpValue>{OpValue::tensor_list_ref(0)});
    CHECK(cat.tensor_lists[0].second.dtypes == std::vector<std::string>(2, "torch.float32"));
  }
  SECTION("the TorchScript interpreter's whole stack") {
    auto r = kineto::parse(trace_of({op("aten::view", 0, 1, in("[[3], [3], []]", R"(["int", "long", "ScalarList"])", R"(["", "", "[3, 1]"])"))}));
    const OpInput& view = only_input(r.trace, "view.default");
    CHECK(view.input_dtypes == std::vector<std::string>{"torch.int64", "<class 'list'>"});
  }
  SECTION("the interpreter's stack before a call whose .out overload takes as many arguments") {
    // A profiler before 2.1 (no Overload name) around TorchScript: the value before linear's
    // (input, weight, bias) would bind linear.out(input, weight, bias, *, out) by arity, with
    // every argument shifted. out= is keyword-only: the default overload on the last three,
    // which decomposes (its t and addmm are kept).
    auto r = kineto::parse(trace_of({
        op("aten::linear", 0, 10, in("[[2048, 200], [2048, 512], [200, 512], [200]]", R"(["float", "float", "float", "float"])")),
        op("aten::t", 1, 1, in("[[200, 512]]", R"(["float"])")),
    }));
    CHECK(r.trace.find("linear.out") == nullptr);
    CHECK(r.report.decomposed == 1);
    CHECK(only_input(r.trace, "t.default").input_shapes[0] == std::vector<int64_t>{200, 512});
  }
  SECTION("events it cannot use are reported") {
    auto r = kineto::parse(trace_of({
        op("aten::surely_not_an_op", 0, 10, in("[[3]]", R"(["float"])", R"([""])")),
        op("aten::neg", 2, 1, in("[[3]]", R"(["float"])", R"([""])")),  // inside the unknown op: hidden
        op("aten::mm", 20, 1, in("[[3], []]", R"(["float", "Scalar"])", R"(["", "1"])")),
        op("aten::neg", 30, 1, in("[[3]]", R"(["weird"])", R"([""])")),
        op("aten::neg", 40, 1, ""),
        op("aten::neg", 50, 1, in("[[3], []]", R"(["float"])", R"([""])")),
    }));
    CHECK(r.trace.empty());
    CHECK(r.report.left_out == 5);
    CHECK(r.report.nested == 1);
    const auto* unknown = r.report.find("op not in this libtorch");
    REQUIRE(unknown != nullptr);
    CHECK(unknown->examples == std::vector<std::string>{"/traceEvents/0: aten::surely_not_an_op (Input type [\"float\"])"});
    CHECK(r.report.find("no overload matches the recorded arguments") != nullptr);
    CHECK(r.report.find("unknown Input type \"weird\"") != nullptr);
    CHECK(r.report.find("no Input Dims and Input type (profiled without record_shapes)") != nullptr);
    CHECK(r.report.find("Input Dims and Input type differ in length") != nullptr);
  }
  SECTION("without Concrete Inputs") {
    std::string text = trace_of({op("aten::mul", 0, 1, in("[[3], []]", R"(["float", "Scalar"])"))});
    auto r = kineto::parse(text);
    const OpInput& mul = only_input(r.trace, "mul.Scalar");
    CHECK(mul.non_tensor_inputs[1].is_none());
    CHECK(r.report.incomplete == 1);
    CHECK_FALSE(r.report.concrete_inputs);
    auto strict = kineto::parse(text, kineto::ImportOptions().keep_incomplete(false));
    CHECK(strict.trace.empty());
    CHECK(strict.report.find("incomplete: scalar value not recorded (no Concrete Inputs)") != nullptr);
  }
}

TEST_CASE("kineto: calls inside composites are imported as the reference sees them", "[kineto]") {
  const std::string alias_args =
      in("[[2, 3, 4], [], []]", R"(["float", "ScalarList", "ScalarList"])", R"(["", "[6, 4]", "[4, 1]"])");
  const std::string add_args = in("[[2, 3, 4, 5], [5], []]", R"(["float", "float", "Scalar"])", R"(["", "", "1"])");
  auto r = kineto::parse(trace_of({
      // reshape's kernel calls _reshape_alias; the reference sees view (libtorch 2.x).
      op("aten::reshape", 0, 10, in("[[2, 3, 4], []]", R"(["float", "ScalarList"])", R"(["", "[6, 4]"])")),
      op("aten::_reshape_alias", 1, 1, alias_args),
      // called directly (no reshape around it): itself.
      op("aten::_reshape_alias", 20, 1, alias_args),
      // linear on a 4-D input: matmul, then add_ of the bias; the reference sees add.
      op("aten::linear", 30, 10, in("[[2, 3, 4, 8], [5, 8], [5]]", R"(["float", "float", "float"])", R"(["", "", ""])")),
      op("aten::matmul", 31, 3, in("[[2, 3, 4, 8], [8, 5]]", R"(["float", "float"])", R"(["", ""])")),
      op("aten::add_", 35, 1, add_args),
      // a program's own add_: itself.
      op("aten::add_", 50, 1, add_args),
  }));
  INFO(r.trace.to_json());
  if (optrace::detail::kTorch2Branches) {
    const OpInput& view = only_input(r.trace, "view.default");
    CHECK(view.input_shapes.size() == 2);  // self, size: the stride is dropped
    CHECK(view.non_tensor_inputs[1] == OpValue::list({OpValue::integer(6), OpValue::integer(4)}));
    CHECK(only_input(r.trace, "_reshape_alias.default").count == 1);
  } else {
    CHECK(only_input(r.trace, "_reshape_alias.default").count == 2);
  }
  const OpInput& add = only_input(r.trace, "add.Tensor");
  CHECK(add.count == 1);
  CHECK(add.input_shapes.size() == 2);  // alpha = 1 is the default: dropped, as for add_
  CHECK(only_input(r.trace, "add_.Tensor").count == 1);
  CHECK(r.report.kept == 4);
}

TEST_CASE("kineto: a Python number the profiler saw as a 0-dim tensor", "[kineto]") {
  // x / 2.8 from Python: div.Tensor with a wrapped 0-dim double, value not recorded.
  auto r = kineto::parse(trace_of({
      op("aten::div", 0, 1, in("[[2, 3], []]", R"(["float", "double"])", R"(["", ""])")),
      op("aten::add", 2, 1, in("[[2, 3], [], []]", R"(["float", "long", "Scalar"])", R"(["", "", "1"])")),
      op("aten::mul", 4, 1, in("[[], [2, 3]]", R"(["double", "float"])", R"(["", ""])")),  // self: a tensor
  }));
  const OpInput& div = only_input(r.trace, "div.Tensor");
  CHECK(div.input_dtypes == std::vector<std::string>{"torch.float32", "<class 'float'>"});
  CHECK(div.input_shapes[1] == std::nullopt);
  CHECK(div.non_tensor_inputs[1].is_none());
  const OpInput& add = only_input(r.trace, "add.Tensor");
  CHECK(add.input_dtypes == std::vector<std::string>{"torch.float32", "<class 'int'>"});
  CHECK(only_input(r.trace, "mul.Tensor").input_dtypes == std::vector<std::string>{"torch.float64", "torch.float32"});
  CHECK(r.report.incomplete == 2);
  const auto* issue = r.report.find("Python number (a 0-dim torch.float64 tensor to the profiler): value not recorded");
  REQUIRE(issue != nullptr);
  CHECK(issue->count == 1);
}

TEST_CASE("kineto: files, formats and gzip", "[kineto]") {
  std::string text = trace_of({op("aten::neg", 0, 1, in("[[3]]", R"(["float"])", R"([""])"))});
  std::string plain = write_temp("kineto_plain.pt.trace.json", text);
  std::string gz = write_temp("kineto_gz.pt.trace.json.gz", text, true);
  CHECK(kineto::load(plain).trace == kineto::load(gz).trace);
  CHECK(kineto::load(gz).trace.total_calls("neg.default") == 1);
  CHECK(kineto::detect_format(gz) == kineto::TraceFormat::Kineto);
  // A bare list of events is Trace Event Format too.
  std::string list = write_temp("kineto_list.json", "[" + op("aten::neg", 0, 1, in("[[3]]", R"(["float"])", R"([""])")) + "]");
  CHECK(kineto::detect_format(list) == kineto::TraceFormat::Kineto);
  CHECK(kineto::load(list).trace.total_calls("neg.default") == 1);
  // An hf op trace.
  OpTrace hf = kineto::load(plain).trace;
  std::string hf_path = optrace_test::temp_path("kineto_hf.json");
  hf.save(hf_path);
  CHECK(kineto::detect_format(hf_path) == kineto::TraceFormat::HfOpTrace);
  auto any = kineto::load_any(hf_path);
  CHECK(any.report.format == "hf_op_trace");
  CHECK(any.trace == hf);
  CHECK(kineto::load_any(gz).trace == hf);
  // A large hf op trace is streamed, as a gzip one; a damaged one is read whole to name the error.
  OpTrace big;
  for (int64_t k = 0; k < 30000; ++k) {
    optrace::OpInput input;
    input.input_shapes = {std::vector<int64_t>{k + 1, 3}};
    input.input_dtypes = {"torch.float32"};
    input.non_tensor_inputs = {optrace::OpValue::none()};
    big.add(k % 2 ? "neg.default" : "abs.default", input);
  }
  std::string big_text = big.to_json();
  REQUIRE(big_text.size() >= (size_t(4) << 20));
  const std::string big_plain = write_temp("kineto_hf_big.json", big_text), big_gz = write_temp("kineto_hf_big.json.gz", big_text, true);
  for (const std::string& path : {big_plain, big_gz}) {
    CHECK(kineto::detect_format(path) == kineto::TraceFormat::HfOpTrace);
    auto read = kineto::load_any(path);
    CHECK(read.report.format == "hf_op_trace");
    CHECK(read.trace == big);
    CHECK(read.report.kept == 30000);
  }
  big_text.replace(big_text.rfind("\"count\": 1"), 11, "\"count\": 0");
  const std::string damaged = write_temp("kineto_hf_damaged.json.gz", big_text, true);
  CHECK_THROWS_WITH(kineto::load_any(damaged), OPTRACE_STARTS_WITH("optrace: " + damaged + ": JsonError at /neg.default/unique_inputs/14999/count: "
                                                                   "expected a count of at least 1"));
  CHECK(kineto::detect_format(write_temp("kineto_other.json", R"({"a": [1]})")) == kineto::TraceFormat::Unknown);
  CHECK_THROWS_WITH(kineto::load_any(optrace_test::temp_path("kineto_other.json")),
                    "optrace: " + optrace_test::temp_path("kineto_other.json") + ": JsonError at /: expected a Kineto trace (\"traceEvents\"), an execution trace (\"schema\" and \"nodes\") or an hf op trace (ops with "
                    "\"unique_inputs\"), got an object");
  // A large file of junk is refused by its first bytes, not read whole first; one that may begin
  // JSON (a byte order mark, white space, '[') still is, for the parser to name what is wrong.
  const std::string junk = write_temp("kineto_junk.bin", std::string(size_t(5) << 20, '\x07'));
  const std::string not_json = "optrace: " + junk + ": JsonError at /: not a trace: its first bytes begin no JSON object or list";
  CHECK_THROWS_WITH(kineto::load_any(junk), not_json);
  CHECK_THROWS_WITH(kineto::detect_format(junk), not_json);
  CHECK_THROWS_WITH(kineto::load(junk), not_json);  // the streamed readers' rule (stream_pieces)
  CHECK_THROWS_WITH(optrace::KeyAverages::from_kineto_file(junk, optrace::GroupBy::Name), not_json);
  const std::string junk_gz = write_temp("kineto_junk.bin.gz", std::string(size_t(5) << 20, '\x07'), true);
  CHECK_THROWS_WITH(kineto::load_any(junk_gz), OPTRACE_CONTAINS(": JsonError at /: not a trace: its first bytes begin no JSON"));
  const std::string array = write_temp("kineto_junk_array.json", "\xEF\xBB\xBF \n[" + std::string(size_t(5) << 20, '\x07'));
  CHECK_THROWS_WITH(kineto::load_any(array), OPTRACE_STARTS_WITH("optrace: " + array + ": JsonError at /: malformed JSON"));
}

TEST_CASE("kineto: escaped strings, events left unread, bytes parsed in place", "[kineto]") {
  const std::string neg = in("[[3]]", R"(["float"])", R"([""])");
  // Escapes in ph, cat and name are read as JSON says (the fast path takes unescaped ones only).
  std::string escaped = R"({"ph": "\u0058", "cat": "cpu\u005fop", "name": "aten::ne\u0067", "pid": 7, "tid": 1, "ts": 1, "dur": 1, "args": {)" + neg + "}}";
  // An event that ph or cat says is no op is left as soon as they are read: what follows is
  // not checked (a ts that is no number, an args that is no object).
  std::string text = trace_of({escaped, op("aten::neg", 5, 1, neg),
                               R"({"ph": "M", "ts": "not a number", "args": 3, "name": "process_name"})",
                               R"({"ph": "X", "cat": "kernel", "name": "k", "ts": [], "dur": {}})"});
  auto r = kineto::parse(text);
  CHECK(r.trace.op_names() == std::vector<std::string>{"neg.default"});
  CHECK(r.trace.total_calls("neg.default") == 2);
  CHECK(only_input(r.trace, "neg.default").count == 2);  // one key: the escaped name is the same op
  CHECK(r.report.events == 4);
  CHECK(r.report.op_events == 2);
  // An op event's fields are still checked.
  CHECK_THROWS_WITH(kineto::parse(trace_of({R"({"ph": "X", "cat": "cpu_op", "name": "aten::neg", "ts": "x", "dur": 1})"})),
                    "optrace: JsonError at /traceEvents/0/ts: expected a number, got string \"x\"");
  // A padded std::string is parsed where it is; an unpadded one, a string_view and a literal are
  // copied first: all read the same.
  std::string padded = text;
  padded.reserve(padded.size() + simdjson::SIMDJSON_PADDING);
  CHECK(kineto::parse(padded).trace.to_json() == r.trace.to_json());
  std::string tight = text;
  tight.shrink_to_fit();
  CHECK(kineto::parse(tight).trace.to_json() == r.trace.to_json());
  CHECK(kineto::parse(std::string_view(text)).trace.to_json() == r.trace.to_json());
  CHECK(kineto::parse(R"({"traceEvents": []})").trace.size() == 0);
}

TEST_CASE("kineto: keys are matched whole, times read exactly", "[kineto]") {
  // Keys that start like the ones read, or spell them with an escape, are other keys.
  const std::string lookalikes =
      R"({"phase": "M", "p\u0068": "M", "ph": "X", "cats": 1, "cat": "cpu_op", "names": 2, "name": "aten::neg", "pid": 7,)"
      R"( "tid": 1, "tidy": 0, "ts": 1, "tsx": "x", "dur": 2, "durs": [], "argsx": 3, "args": {"Input Dimsx": 5,)"
      R"( "Input Dims": [[3]], "Input types": 1, "Input type": ["float"], "counts": 0, "Concrete Input": 1, "Input Dim": 2}})";
  auto r = kineto::parse(trace_of({lookalikes}));
  CHECK(r.report.kept == 1);
  CHECK(only_input(r.trace, "neg.default").input_shapes == std::vector<optrace::OptionalShape>{std::vector<int64_t>{3}});
  // Times: microseconds to integer nanoseconds, exactly in the usual form, through a double with
  // an exponent. Each second event starts inside the first (1000 to 1010 us) or after it.
  auto nested = [](const std::string& ts) {
    const std::string neg = in("[[3]]", R"(["float"])");
    std::string second = op("aten::neg", 0, 0, neg);  // dur 0: inside when it starts inside
    second.replace(second.find("\"ts\": ") + 6, second.find(", \"dur\"") - second.find("\"ts\": ") - 6, ts);
    return kineto::parse(trace_of({op("aten::neg", 1000, 10, neg), second})).report.nested;
  };
  CHECK(nested("1000.5") == 1);
  CHECK(nested("1009.999") == 1);
  CHECK(nested("1009.9999") == 1);  // beyond nanoseconds: cut, as written
  CHECK(nested("1010.001") == 0);
  CHECK(nested("1.0005e3") == 1);
  CHECK(nested("1.0105E3") == 0);
  CHECK(nested("10000000000000000000e-16") == 1);  // 1000 us: a long mantissa is fine with an exponent
  CHECK(nested("999.999") == 0);
  CHECK_THROWS_WITH(kineto::parse(trace_of({R"({"ph": "X", "cat": "cpu_op", "name": "aten::neg", "ts": 99999999999999999999, "dur": 1})"})),
                    "optrace: JsonError at /traceEvents/0/ts: expected a time in microseconds, got number 99999999999999999999");
}

TEST_CASE("kineto: the usual time form reads as the general reader reads it", "[kineto]") {
  // parse_time_ns reads "123.456" in one pass and hands anything else to parse_time_ns_general:
  // both must agree on every text, the edges of the one-pass form included.
  using optrace::detail::kineto::parse_time_ns;
  using optrace::detail::kineto::parse_time_ns_general;
  const std::vector<std::string> texts = {"0", "1", "1.", "1.5", "01.5", "1.0005", "7181293421083.613", "3.276",
                                          "999999999999999.999", "999999999999999", "1000000000000000", "1000000000000000.5",
                                          "9223372036854775.807", "9223372036854775.808", "-1.5", " 1.5", "1.5 ", "1.5e3",
                                          "1E3", "", ".5", "1.x", "x", "1..5", "12345678901234567890", "0.0009"};
  for (const std::string& t : texts) {
    int64_t fast = -7, general = -7;
    const bool fast_ok = parse_time_ns(t, fast), general_ok = parse_time_ns_general(t, general);
    INFO("time text \"" << t << "\"");
    CHECK(fast_ok == general_ok);
    if (fast_ok && general_ok) CHECK(fast == general);
  }
  int64_t ns = 0;
  CHECK((parse_time_ns("999999999999999.999", ns) && ns == 999999999999999999));
  CHECK((parse_time_ns("7181293421083.613", ns) && ns == 7181293421083613));
}

TEST_CASE("kineto: a trace known by its first bytes is one detect_text calls Kineto", "[kineto]") {
  using optrace::detail::kineto::detect_text;
  using optrace::detail::kineto::surely_kineto;
  auto kineto = [](std::string text) {
    const bool sure = surely_kineto(text);
    INFO(text.substr(0, 100));
    if (sure) CHECK(detect_text(text) == optrace::kineto::TraceFormat::Kineto);  // never a wrong guess
    return sure;
  };
  for (const char* name : {"mtia_inference.pt.trace.json.gz", "rocm_minitoy_train.pt.trace.json.gz", "small_base.pt.trace.json.gz",
                           "torch26_scripted.pt.trace.json.gz", "torch211_cuda_train.pt.trace.json.gz"}) {
    INFO(name);
    CHECK(kineto(optrace::detail::read_file_maybe_gzip(std::string(OPTRACE_TEST_DATA) + "/kineto/" + name)));
  }
  CHECK(kineto(R"( [{"ph": "X"}] )"));
  CHECK(kineto(R"({"schemaVersion": 1, "deviceProperties": [{"name": "H100", "x": "a]}\"b"}], "s": "}", "n": -1.5e3,
                  "o": {"k": [1, {"z": null}]}, "traceEvents": []})"));
  CHECK_FALSE(kineto(optrace::detail::read_file(optrace_test::data_path("peer/mlp.hf_op_trace.json"))));
  CHECK_FALSE(kineto(optrace::detail::read_file(optrace_test::data_path("observations/masked.json"))));
  CHECK_FALSE(kineto("{}"));
  CHECK_FALSE(kineto(R"({"a.default": {"total_calls": 1}, "traceEvents": []})"));  // detect_text: an hf op trace
  CHECK_FALSE(kineto(R"({"a": {"x": 1, "unique_inputs": []}, "traceEvents": []})"));
  CHECK_FALSE(kineto(R"({"trace\u0045vents": []})"));  // an escaped key: detect_text decides
  CHECK_FALSE(kineto(R"({"a": [1, 2)"));
  // Malformed past the first bytes: taken for a trace, whose import names what is wrong.
  CHECK(surely_kineto(R"({"traceEvents": [{"ph": "X"}, {"ph": )"));
  const std::string cut = optrace_test::temp_path("kineto_cut.pt.trace.json");
  std::ofstream(cut) << R"({"traceEvents": [{"ph": "X", "cat": "cpu_op"}, {"ph": )";
  CHECK_THROWS_WITH(kineto::load_any(cut), OPTRACE_STARTS_WITH("optrace: " + cut + ": JsonError at /: malformed JSON: "));
  CHECK_FALSE(kineto(""));
  CHECK_FALSE(kineto("Operator: aten.add.Tensor\n"));
  CHECK_FALSE(surely_kineto(R"({"x": ")" + std::string(2 << 20, 'a') + R"(", "traceEvents": []})"));  // past its limit
}

TEST_CASE("kineto: malformed input", "[kineto]") {
  auto check = [](const std::string& text, const std::string& message) {
    CHECK_THROWS_WITH(kineto::parse(text), message);
    CHECK_THROWS_AS(kineto::parse(text), optrace::JsonError);
  };
  check(R"({"foo": 1})", "optrace: JsonError at /: missing key \"traceEvents\"");
  check(R"("x")", "optrace: JsonError at /: expected an object with \"traceEvents\" or a list of events, got string \"x\"");
  check(R"({"traceEvents": 3})", "optrace: JsonError at /traceEvents: expected a list of events, got integer 3");
  check(R"({"traceEvents": [{"ph": "X"}, 1]})", "optrace: JsonError at /traceEvents/1: expected an event object, got integer 1");
  check(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::neg", "ts": "x", "dur": 1}]})",
        "optrace: JsonError at /traceEvents/0/ts: expected a number, got string \"x\"");
  check(R"({"traceEvents": [{"ph": "X", "cat": 3}]})", "optrace: JsonError at /traceEvents/0/cat: expected a string, got integer 3");
  check(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::neg", "ts": 1, "args": {}}]})",
        "optrace: JsonError at /traceEvents/0: missing key \"dur\"");
  check(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::neg", "ts": 1, "dur": -2, "args": {}}]})",
        "optrace: JsonError at /traceEvents/0/dur: expected a duration of at least 0, got number -2");
  check(trace_of({op("aten::neg", 0, 1, R"("Input Dims": "x", "Input type": ["float"])")}),
        "optrace: JsonError at /traceEvents/0/args/Input Dims: expected a list, got string \"x\"");
  check(trace_of({op("aten::neg", 0, 1, R"("Input Dims": [["a"]], "Input type": ["float"])")}),
        "optrace: JsonError at /traceEvents/0/args/Input Dims/0/0: expected an integer, got string \"a\"");
  // Sizes and strides no tensor has (the hf reader would refuse the converted trace).
  check(trace_of({op("aten::neg", 0, 1, R"("Input Dims": [[3, -2]], "Input type": ["float"])")}),
        "optrace: JsonError at /traceEvents/0/args/Input Dims/0/1: negative size -2");
  check(trace_of({op("aten::neg", 0, 1, R"("Input Dims": [[3, 2]], "Input type": ["float"], "Input Strides": [[-1, 3]])")}),
        "optrace: JsonError at /traceEvents/0/args/Input Strides/0/0: negative stride -1");
  check(trace_of({op("aten::cat", 0, 1, R"("Input Dims": [[[2], [-4]], []], "Input type": ["TensorList", "Int"])")}),
        "optrace: JsonError at /traceEvents/0/args/Input Dims/0/1/0: negative size -4");
  check(trace_of({op("aten::neg", 0, 1, R"("Input Dims": [[3]], "Input type": [7])")}),
        "optrace: JsonError at /traceEvents/0/args/Input type/0: expected a string, got integer 7");
  check(trace_of({op("aten::neg", 0, 1, R"("Input Dims": [[3]], "Input type": ["float"], "count": 0)")}),
        "optrace: JsonError at /traceEvents/0/args/count: expected a count of at least 1, got integer 0");
  // A key the reader reads, given twice in one event or args: Python's json would take the last.
  const std::string twice = ": a key given twice in one object (JSON readers differ on which value they take)";
  check(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::neg", "ts": 1, "ts": 5, "dur": 1, "args": {}}]})",
        "optrace: JsonError at /traceEvents/0/ts" + twice);
  check(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::neg", "name": "aten::relu", "ts": 1, "dur": 1}]})",
        "optrace: JsonError at /traceEvents/0/name" + twice);
  check(R"({"traceEvents": [{"ph": "X", "tid": 1, "tid": 2, "cat": "cpu_op", "name": "aten::neg", "ts": 1, "dur": 1}]})",
        "optrace: JsonError at /traceEvents/0/tid" + twice);
  check(trace_of({op("aten::neg", 0, 1, R"("Input Dims": [[3]], "Input type": ["float"], "Input Dims": [[4]])")}),
        "optrace: JsonError at /traceEvents/0/args/Input Dims" + twice);
  check(trace_of({op("aten::neg", 0, 1, R"("Input Dims": [[3]], "Input type": ["float"], "count": 2, "count": 3)")}),
        "optrace: JsonError at /traceEvents/0/args/count" + twice);
  check(R"({"traceEvents": [{"args": {"Input Dims": [[3]], "Input type": ["float"]}, "ph": "X", "cat": "cpu_op", "name": "aten::neg", "ts": 1, "dur": 1, "args": {}}]})",
        "optrace: JsonError at /traceEvents/0/args" + twice);
  // Two events lists: Python's json (HTA, Chakra) reads the last, a reader that stops at the first
  // would read another trace. Found as a key, escaped or not, only at the top level.
  const std::string neg_op = op("aten::neg", 0, 1, in("[[3]]", R"(["float"])"));
  check(R"({"traceEvents": [)" + neg_op + R"(], "traceName": "x", "traceEvents": []})", "optrace: JsonError at /traceEvents" + twice);
  check(R"({"traceEvents": [)" + neg_op + R"(], "trace\u0045vents" : [)" + neg_op + "]}", "optrace: JsonError at /traceEvents" + twice);
  check(R"({"traceEvents": [], "traceEvents": [)" + neg_op + "]}", "optrace: JsonError at /traceEvents" + twice);
  for (const std::string& after : {std::string(R"("traceName": "traceEvents")"), std::string(R"("meta": {"traceEvents": [1]})"),
                                   std::string(R"("x\"traceEvents": [], "y": ["traceEvents", {"traceEvents": 2}])"),
                                   std::string(R"("traceEventsX": [])")})
    CHECK(kineto::parse(R"({"traceEvents": [)" + neg_op + "], " + after + "}").trace.size() == 1);
  // An op's fields are read when the op is used: the fields of a call hidden inside a kept op
  // (its inner calls) are not, so their faults are not errors; the same call outermost is one.
  const std::string bad_inner = R"("Input Dims": [["a"]], "Input type": ["float"])";
  CHECK(kineto::parse(trace_of({op("aten::neg", 0, 10, in("[[3]]", R"(["float"])")), op("aten::neg", 2, 3, bad_inner)}))
            .report.nested == 1);
  check(trace_of({op("aten::neg", 0, 10, in("[[3]]", R"(["float"])")), op("aten::neg", 20, 3, bad_inner)}),
        "optrace: JsonError at /traceEvents/1/args/Input Dims/0/0: expected an integer, got string \"a\"");
  // args before name: read after the event's other fields, errors still name the path.
  check(R"({"traceEvents": [{"args": {"Input Dims": {}, "Input type": ["float"]}, "ph": "X", "cat": "cpu_op", "name": "aten::neg", "ts": 1, "dur": 1}]})",
        "optrace: JsonError at /traceEvents/0/args/Input Dims: expected a list, got an object");
  CHECK_THROWS_WITH(kineto::parse(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::n)"),
                    OPTRACE_CONTAINS("malformed JSON"));
  CHECK_THROWS_WITH(kineto::load(optrace_test::temp_path("no_such_trace.json")),
                    OPTRACE_CONTAINS(": IoError: cannot open '"));
  // A truncated gzip file.
  std::string gz = write_temp("kineto_trunc.json.gz", trace_of({op("aten::neg", 0, 1, in("[[3]]", R"(["float"])"))}), true);
  std::string bytes = optrace::detail::read_file(gz);
  std::string cut = write_temp("kineto_cut.json.gz", bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_WITH(kineto::load(cut), "optrace: " + cut + ": IoError: cannot inflate '" + cut + "': the gzip data is truncated");
}

TEST_CASE("kineto: export reads back to the same trace", "[kineto]") {
  auto tensor = [](std::vector<int64_t> shape, std::string dtype = "torch.float32") {
    return std::make_tuple(optrace::OptionalShape(std::move(shape)), std::move(dtype), OpValue::none());
  };
  auto value = [](std::string dtype, OpValue v) { return std::make_tuple(optrace::OptionalShape(), std::move(dtype), std::move(v)); };
  auto input = [](std::vector<std::tuple<optrace::OptionalShape, std::string, OpValue>> args, int64_t count) {
    OpInput in;
    for (auto& [s, d, v] : args) {
      in.input_shapes.push_back(s);
      in.input_dtypes.push_back(d);
      in.non_tensor_inputs.push_back(v);
    }
    in.count = count;
    return in;
  };
  OpTrace t;
  t.add("addmm.default", input({tensor({4}), tensor({2, 3}), tensor({3, 4})}, 5));
  OpInput strided = input({tensor({2, 3}, "torch.bfloat16")}, 2);
  strided.input_strides = {std::vector<int64_t>{1, 2}};
  t.add("neg.default", strided);
  t.add("neg.default", input({tensor({}, "torch.int64")}, 1));
  t.add("leaky_relu.default", input({tensor({8}), value("<class 'float'>", OpValue::floating(0.1))}, 3));
  t.add("view.dtype", input({tensor({8}), value("<class 'torch.dtype'>", OpValue::string("torch.float16"))}, 1));
  t.add("sum.dim_IntList", input({tensor({2, 3}), value("<class 'list'>", OpValue::list({OpValue::integer(1)})),
                                  value("<class 'bool'>", OpValue::boolean(true))}, 1));
  t.add("mul.Scalar", input({tensor({2}), value("<class 'complex'>", OpValue::string("(1.5-2j)"))}, 1));
  t.add("mul.Scalar", input({tensor({2}), value("<class 'float'>", OpValue::floating(-std::numeric_limits<double>::infinity()))}, 1));
  t.add("convolution.default",
        input({tensor({1, 3, 8, 8}), tensor({4, 3, 3, 3}), value("<class 'NoneType'>", OpValue::none()),
               value("<class 'list'>", OpValue::list({OpValue::integer(1), OpValue::integer(1)})),
               value("<class 'list'>", OpValue::list({OpValue::integer(0), OpValue::integer(0)})),
               value("<class 'list'>", OpValue::list({OpValue::integer(1), OpValue::integer(1)})),
               value("<class 'bool'>", OpValue::boolean(false)),
               value("<class 'list'>", OpValue::list({OpValue::integer(0), OpValue::integer(0)})),
               value("<class 'int'>", OpValue::integer(1))},
              4));
  OpInput cat = input({value("<class 'list'>", OpValue::tensor_list_ref(0)), value("<class 'int'>", OpValue::integer(1))}, 6);
  cat.tensor_lists.emplace_back("0", optrace::TensorListInfo{{std::vector<int64_t>{2, 3}, std::vector<int64_t>{2, 5}},
                                                             {"torch.float16", "torch.float16"}, {}});
  t.add("cat.default", cat);
  OpInput index = input({tensor({5, 6}), value("<class 'list'>", OpValue::tensor_list_ref(0))}, 1);
  index.tensor_lists.emplace_back("0", optrace::TensorListInfo{{std::nullopt, std::vector<int64_t>{4}},
                                                               {"<class 'NoneType'>", "torch.int64"}, {}});
  t.add("index.Tensor", index);
  t.add_dropped("neg.default", 7);

  std::string json = kineto::to_json(t);
  auto doc = optrace::json::Document::parse(json);  // valid JSON
  CHECK(doc->root()["displayTimeUnit"].as_string() == "ms");
  CHECK(doc->root()["traceEvents"].size() == 13);  // process name, 11 inputs, dropped calls
  const auto with_strides = kineto::ImportOptions().record_strides(true);  // t has some
  auto back = kineto::parse(json, with_strides);
  CHECK(back.report.left_out == 0);
  CHECK(back.report.incomplete == 0);
  CHECK(back.trace.to_json() == t.to_json());
  CHECK(back.trace == t);

  std::string path = optrace_test::temp_path("kineto_export.pt.trace.json");
  kineto::save(t, path, kineto::ExportOptions().pid(3).tid(4));
  CHECK(kineto::load(path, with_strides).trace == t);
  CHECK(kineto::load(path).trace.to_json().find("input_strides") == std::string::npos);  // by default, none
}

namespace {

bool same_default(const optrace::detail::DefaultValue& a, const optrace::detail::DefaultValue& b) {
  auto same_real = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  if (a.kind != b.kind || a.int_value != b.int_value || !same_real(a.real, b.real) || !same_real(a.imag, b.imag) ||
      a.bool_value != b.bool_value || a.text != b.text || a.items.size() != b.items.size())
    return false;
  for (size_t k = 0; k < a.items.size(); ++k)
    if (!same_default(a.items[k], b.items[k])) return false;
  return true;
}

}  // namespace

TEST_CASE("op catalog: every op of the live dispatcher, written and read back, has the same facts", "[kineto]") {
  using namespace optrace::detail;
  const std::vector<const OpInfo*> live = all_ops();
  REQUIRE(live.size() > 1000);
  const CapturedCatalog captured(write_catalog(live, kTorch2Branches));
  REQUIRE(captured.ops().size() == live.size());
  size_t with_rules = 0, with_defaults = 0;
  for (const OpInfo* op : live) {
    INFO(op->qualified << "." << op->overload);
    const OpInfo* c = captured.find(op->name.find("::") == std::string::npos && op->qualified.rfind("aten::", 0) != 0
                                        ? op->qualified + "." + (op->overload.empty() ? "default" : op->overload)
                                        : op->name);
    REQUIRE(c != nullptr);
    CHECK(c->qualified == op->qualified);
    CHECK(c->overload == op->overload);
    CHECK(c->name == op->name);
    CHECK(c->base == op->base);
    CHECK(c->decomposes == op->decomposes);
    CHECK(c->positional == op->positional);
    CHECK(c->returns_tensor == op->returns_tensor);
    CHECK(c->storage_arg == op->storage_arg);
    CHECK(c->non_compute == op->non_compute);
    REQUIRE(c->args.size() == op->args.size());
    for (size_t k = 0; k < op->args.size(); ++k) {
      CHECK(c->args[k].optional == op->args[k].optional);
      CHECK(c->args[k].kind == op->args[k].kind);
      CHECK(c->args[k].element == op->args[k].element);
      CHECK(c->args[k].element_optional == op->args[k].element_optional);
      REQUIRE(c->defaults[k].has_value() == op->defaults[k].has_value());
      if (op->defaults[k]) {
        ++with_defaults;
        CHECK(same_default(*c->defaults[k], *op->defaults[k]));
      }
    }
    REQUIRE(c->rules.size() == op->rules.size());
    for (size_t k = 0; k < op->rules.size(); ++k) {
      ++with_rules;
      CHECK(c->rules[k].within == op->rules[k].within);
      CHECK(c->rules[k].recorded->name == op->rules[k].recorded->name);
      CHECK(c->rules[k].set_arg == op->rules[k].set_arg);
      CHECK(c->rules[k].set_to == op->rules[k].set_to);
      CHECK(c->rules[k].engine == op->rules[k].engine);
    }
    // The overloads in the live index's order (the importer's tie-break takes the first).
    const auto& mine = captured.overloads_of(op->qualified);
    const auto& theirs = overloads_of(op->qualified);
    REQUIRE(mine.size() == theirs.size());
    for (size_t k = 0; k < mine.size(); ++k) CHECK(mine[k]->overload == theirs[k]->overload);
  }
  CHECK(with_rules >= 10);
  CHECK(with_defaults > 1000);
  CHECK_THROWS_WITH(CapturedCatalog("optrace-op-catalog 2 torch2=1\nop aten::x - 0 1 1 -1 0 1\na 0 99 0 0 -\n"),
                    "optrace: Error: malformed op catalog, line 3: unknown argument kind 99");
  CHECK_THROWS_WITH(CapturedCatalog("not a catalog"), OPTRACE_CONTAINS("not an optrace op catalog"));
  CHECK_THROWS_WITH(CapturedCatalog("optrace-op-catalog 2 torch2=1\nop aten::x - 0 1 1 -1 0 1\na 0 0 0 0 s99:ab\n"),
                    "optrace: Error: malformed op catalog, line 3: length past the end");
  CHECK_THROWS_WITH(CapturedCatalog("optrace-op-catalog 2 torch2=1\nop aten::x - 0 1 1 -1 0 1\na 0 0 0 0 l1:i3\n"),
                    "optrace: Error: malformed op catalog, line 3: expected ';'");
}

TEST_CASE("op catalog: traces imported by captured facts equal the live dispatcher's imports", "[kineto]") {
  using namespace optrace::detail;
  const CapturedCatalog captured(write_catalog(all_ops(), kTorch2Branches));
  std::vector<std::string> files;
  for (const char* name : {"mtia_inference.pt.trace.json.gz", "rocm_minitoy_train.pt.trace.json.gz", "small_base.pt.trace.json.gz"})
    files.push_back(std::string(OPTRACE_TEST_DATA) + "/kineto/" + name);
  for (const char* name : {"oplogs/resnet18_training.txt", "peer/mlp.hf_op_trace.json"})
    files.push_back(std::string(OPTRACE_TEST_DATA) + "/" + name);
  for (const std::string& file : files) {
    INFO(file);
    for (bool strides : {false, true}) {
      const auto options = optrace::kineto::ImportOptions().record_strides(strides);
      const auto live = optrace::kineto::load_any(file, options);
      const auto mine = optrace::detail::kineto::load_any(file, options, captured);
      CHECK(mine.trace.to_json() == live.trace.to_json());
      CHECK(mine.report.to_string() == live.report.to_string());
    }
  }
  // The synthetic traces of this file: composites, rules, ambiguous overloads, 0-dim numbers.
  const std::string mm = in("[[2, 3], [3, 4]]", R"(["float", "float"])", R"(["", ""])");
  const std::string text = trace_of({
      op("aten::linear", 10, 20, in("[[2, 3], [4, 3], [4]]", R"(["float", "float", "float"])", R"(["", "", ""])")),
      op("aten::addmm", 11, 5, in("[[4], [2, 3], [3, 4], [], []]", R"(["float", "float", "float", "Scalar", "Scalar"])", R"(["", "", "", "1", "1"])")),
      op("aten::add_", 17, 2, in("[[2, 4], [4], []]", R"(["float", "float", "Scalar"])", R"(["", "", "1"])")),
      op("aten::mm", 40, 5, mm),
      op("aten::sum", 50, 1, in("[[2, 3], [], [], []]", R"(["float", "ScalarList", "Scalar", ""])", R"(["", "[1]", "False", ""])")),
      op("aten::to", 60, 1, in("[[2, 3], [], [], [], []]", R"(["float", "Scalar", "Scalar", "Scalar", ""])", R"(["", "6", "False", "False", ""])")),
      op("aten::empty", 70, 1, in("[[], [], [], [], [], []]", R"(["ScalarList", "Scalar", "", "", "Scalar", ""])", R"(["[2, 3]", "6", "", "", "False", ""])")),
  });
  CHECK(optrace::detail::kineto::parse(text, {}, captured).trace.to_json() == optrace::kineto::parse(text).trace.to_json());
  CHECK(optrace::detail::kineto::parse(text, {}, captured).report.to_string() == optrace::kineto::parse(text).report.to_string());
}

namespace {

// A recorded argument in one line, every field.
std::string describe_rec(const optrace::detail::kineto::RecArg& r) {
  std::ostringstream out;
  out << static_cast<int>(r.kind) << "|" << r.dtype << "|" << optrace::detail::kineto::shorten(r.text, 1000) << "|";
  for (int64_t d : r.shape) out << d << ",";
  out << "|";
  if (r.strides)
    for (int64_t d : *r.strides) out << d << ",";
  out << "|" << static_cast<int>(r.scalar.kind) << " " << r.scalar.int_value << " " << r.scalar.real << " " << r.scalar.imag << " "
      << r.scalar.bool_value << " " << r.scalar.text << "|";
  if (r.list)
    for (const auto& s : *r.list) out << static_cast<int>(s.kind) << ":" << s.int_value << ":" << s.real << ",";
  out << "|";
  if (r.list_shapes)
    for (const auto& s : *r.list_shapes) {
      out << "[";
      if (s)
        for (int64_t d : *s) out << d << ",";
      out << "]";
    }
  return out.str();
}

// Both readers of one event's fields: when the fast one reads them, the DOM one reads the same.
// Returns whether the fast one did.
bool same_read(const optrace::detail::kineto::RawFields& raw) {
  using namespace optrace::detail::kineto;
  std::vector<RecArg> fast, dom;
  std::string fast_problem, dom_problem, hint;
  bool has_hint = false;
  if (!read_args_fast(raw, fast, fast_problem)) return false;
  read_args_dom(raw, "/x/args", dom, hint, has_hint, dom_problem);
  INFO("dims " << raw.dims << " types " << raw.types << " concrete " << raw.concrete << " strides " << raw.strides);
  CHECK(fast_problem == dom_problem);
  if (fast_problem.empty()) {
    REQUIRE(fast.size() == dom.size());
    for (size_t k = 0; k < fast.size(); ++k) CHECK(describe_rec(fast[k]) == describe_rec(dom[k]));
  }
  return true;
}

}  // namespace

TEST_CASE("kineto: the fast field reader reads what the path-naming reader reads", "[kineto]") {
  namespace od = simdjson::ondemand;
  using optrace::detail::kineto::RawFields;
  // Every op event of the real traces.
  size_t events = 0, fast = 0;
  for (const char* name : {"mtia_inference.pt.trace.json.gz", "rocm_minitoy_train.pt.trace.json.gz", "small_base.pt.trace.json.gz"}) {
    std::string text = optrace::detail::read_file_maybe_gzip(std::string(OPTRACE_TEST_DATA) + "/kineto/" + name);
    text.reserve(text.size() + simdjson::SIMDJSON_PADDING);
    od::parser parser;
    od::document doc = parser.iterate(text.data(), text.size(), text.capacity());
    for (auto event : doc["traceEvents"].get_array()) {
      od::object args;
      if (event["args"].get_object().get(args)) continue;
      RawFields raw;
      for (auto field : args) {
        std::string_view key = field.unescaped_key().value(), value;
        if (key != "Input Dims" && key != "Input type" && key != "Concrete Inputs" && key != "Input Strides") continue;
        auto v = field.value();
        REQUIRE_FALSE(optrace::detail::ondemand::raw_json(v, value));
        (key == "Input Dims" ? raw.dims : key == "Input type" ? raw.types : key == "Concrete Inputs" ? raw.concrete : raw.strides) = value;
      }
      if (raw.types.empty()) continue;
      ++events;
      fast += same_read(raw);
    }
  }
  CHECK(events > 4000);
  CHECK(fast == events);  // the profiler's own fields all take the fast path
  // Fields the fast reader leaves to the other (escapes, floats, null, deeper lists, bad text),
  // and ones it reads (spaces, negative scalars, lists of shapes, odd strides, mismatches).
  auto fields = [](const char* dims, const char* types, const char* concrete = "", const char* strides = "") {
    RawFields r;
    r.dims = dims;
    r.types = types;
    r.concrete = concrete;
    r.strides = strides;
    return r;
  };
  CHECK_FALSE(same_read(fields("[[2]]", R"(["fl\u006fat"])")));
  CHECK_FALSE(same_read(fields("[[2.0]]", R"(["float"])")));
  CHECK_FALSE(same_read(fields("[null]", R"(["float"])")));
  CHECK_FALSE(same_read(fields("[[[[2]]]]", R"(["TensorList"])")));
  CHECK_FALSE(same_read(fields("[[2]", R"(["float"])")));
  CHECK_FALSE(same_read(fields("[[01]]", R"(["float"])")));
  CHECK_FALSE(same_read(fields("[[12345678901234567890]]", R"(["float"])")));
  CHECK_FALSE(same_read(fields("[[2]]", R"(["float"])", "", "[[[1]]]")));  // strides not integers: DOM says where
  CHECK_FALSE(same_read(fields("[[2]]", R"(["float"])", "[3]")));          // a concrete input not a string
  CHECK_FALSE(same_read(fields("[[2, -3]]", R"(["float"])")));                     // a negative size: DOM says where
  CHECK_FALSE(same_read(fields("[[[2], [-3]]]", R"(["TensorList"])")));
  CHECK_FALSE(same_read(fields("[[2, 3]]", R"(["float"])", "", "[[-1, 2]]")));     // a negative stride
  CHECK(same_read(fields("[[2, 3]]", R"(["float"])", "", "[[-1]]")));             // of another rank: not read by either
  CHECK(same_read(fields(" [ [ 2 , 3 ] , [ ] ] ", R"( [ "float" , "Scalar" ] )", R"(["", "-1.5"])")));
  CHECK(same_read(fields("[[[2, 3], [4]], []]", R"(["TensorList", "ScalarList"])", R"(["", "[1, 2]"])")));
  CHECK(same_read(fields("[[2, 3]]", R"(["float"])", "", "[[1, 2]]")));
  {  // strides that are the contiguous ones say nothing: kept by neither reader
    std::vector<optrace::detail::kineto::RecArg> args;
    std::string problem;
    REQUIRE(optrace::detail::kineto::read_args_fast(fields("[[2, 3], [4]]", R"(["float", "float"])", "", "[[3, 1], [2]]"), args, problem));
    REQUIRE(args.size() == 2);
    CHECK_FALSE(args[0].strides.has_value());
    CHECK(args[1].strides == std::vector<int64_t>{2});
    CHECK(same_read(fields("[[2, 3], [4]]", R"(["float", "float"])", "", "[[3, 1], [2]]")));
  }
  CHECK(same_read(fields("[[2, 3]]", R"(["float"])", "", "[[1]]")));  // strides of another rank: none
  CHECK(same_read(fields("[[2, 3]]", R"(["float"])", "", "[[1], [1]]")));  // strides of another length: none
  CHECK(same_read(fields("[[2], []]", R"(["float"])")));
  CHECK(same_read(fields("[[2]]", R"(["float"])", R"(["", ""])")));
  CHECK(same_read(fields("[[2]]", R"(["no_such_type"])")));
  CHECK(same_read(fields("", R"(["float"])")));
  CHECK(same_read(fields("[[2]]", "")));
  CHECK(same_read(fields("[[2]]", R"(["", "None", "GenericList"])", R"(["x", "", "[[1], 2]"])")));
  // The list readers' edges: empty lists and elements, spaces of every kind, signs, separators.
  CHECK(same_read(fields("[]", "[]")));
  CHECK(same_read(fields("[[]]", "[\"float\"]")));
  CHECK(same_read(fields("[\t[ ]\n,\r[ -0 ]]", "[ \"float\" ,\"float\" ]")));
  for (const char* dims : {"[[1,]]", "[[1 2]]", "[[1],]", "[[1]] x", "[[-]]", "[[1e3]]", "[[--1]]", "[1]", "[[1]"})
    CHECK_FALSE(same_read(fields(dims, R"(["float"])")));
  for (const char* types : {R"(["a" "b"])", R"(["a",])", R"(["a)", R"(["a"] x)", "[\"a\x01\"]", R"([a])"})
    CHECK_FALSE(same_read(fields("[[1]]", types)));
  // Mutations of a profiler's fields (a character added, dropped or changed, from the lists'
  // own alphabet): wherever the fast reader still reads them, it reads what the DOM reads.
  const std::string alphabet = "[]\", -0123456789 \tabe.";
  const std::string dims0 = "[[2, 3], [], [4, 5, 6]]", types0 = R"(["float", "Scalar", "long int"])", concrete0 = R"(["", "1", ""])",
                    strides0 = "[[3, 1], [], [30, 1, 5]]";
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state](size_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<size_t>((state >> 33) % n);
  };
  auto mutate = [&](std::string text) {
    for (size_t edits = 1 + next(3); edits-- > 0;) {
      const size_t at = next(text.size() + 1);
      const char c = alphabet[next(alphabet.size())];
      switch (next(3)) {
        case 0: text.insert(at, 1, c); break;
        case 1: if (at < text.size()) text.erase(at, 1); break;
        default: if (at < text.size()) text[at] = c; break;
      }
    }
    return text;
  };
  size_t read_fast = 0;
  for (int k = 0; k < 4000; ++k) {
    const std::string dims = k % 4 == 0 ? mutate(dims0) : dims0, types = k % 4 == 1 ? mutate(types0) : types0,
                      concrete = k % 4 == 2 ? mutate(concrete0) : concrete0, strides = k % 4 == 3 ? mutate(strides0) : strides0;
    RawFields raw;
    raw.dims = dims;
    raw.types = types;
    raw.concrete = concrete;
    raw.strides = strides;
    try {
      read_fast += same_read(raw);
    } catch (const optrace::JsonError&) {
      // the DOM found the text malformed where the fast reader read it: same_read's CHECKs
      // cannot run, so this is a failure
      FAIL("the fast reader read fields the DOM reader refuses: " << dims << " " << types << " " << concrete << " " << strides);
    }
  }
  CHECK(read_fast > 500);  // the mutations exercise both ways (854 of 4000 read fast)
}

namespace {

// What reading `text` gives, as text: the trace's JSON and the report, or the error. Read in up
// to `wanted` pieces (1: whole); `pieces` is set to the pieces it was read in. The text must come
// back unchanged (the pieces are made by writing brackets between events).
std::string read_in_pieces(const std::string& text, size_t wanted, size_t* pieces = nullptr) {
  std::string data = text;
  data.reserve(data.size() + simdjson::SIMDJSON_PADDING);
  std::string out;
  try {
    auto r = optrace::detail::kineto::import_in_pieces(data.data(), data.size(), data.capacity(), {},
                                                       optrace::detail::live_catalog(), wanted, pieces);
    out = r.trace.to_json() + r.report.to_string();
  } catch (const optrace::Error& e) {
    out = std::string("error: ") + e.what();
  }
  CHECK(data == text);
  return out;
}

// A trace laid out as torch.profiler writes it: one event per line, ",\n  " between events.
std::string profiler_layout(const std::vector<std::string>& events, const std::string& before = "",
                            const std::string& after = ", \"traceName\": \"x]\", \"INFO\": [\"a]\", [1]]") {
  std::string out = "{\n  \"schemaVersion\": 1," + before + "\n  \"traceEvents\": [\n  ";
  for (size_t k = 0; k < events.size(); ++k) out += (k ? ",\n  " : "") + events[k];
  return out + "\n  ]" + after + "\n}\n";
}

// `n` op events on two threads: calls of a few ops and shapes, some nested in others.
std::vector<std::string> many_events(int n) {
  std::vector<std::string> events;
  const std::string neg = in("[[3]]", R"(["float"])", R"([""])");
  for (int k = 0; k < n; ++k) {
    const double ts = 10.0 * k;
    const int tid = 1 + k % 2;
    const std::string dims = "[[" + std::to_string(2 + k % 5) + ", 4], [" + std::to_string(2 + k % 5) + ", 4], []]";
    events.push_back(op("aten::add", ts, 5, in(dims, R"(["float", "float", "Scalar"])", R"(["", "", "1"])"), tid));
    if (k % 3 == 0) events.push_back(op("aten::neg", ts + 1, 1, neg, tid));  // inside add: not kept
    if (k % 4 == 0) events.push_back(R"({"ph": "X", "cat": "kernel", "name": "k},\n  {", "pid": 7, "tid": 9, "ts": 1, "dur": 1})");
  }
  return events;
}

}  // namespace

TEST_CASE("kineto: a trace read in pieces on several threads is the trace read whole", "[kineto]") {
  namespace dk = optrace::detail::kineto;
  // Real traces: the profiler's layout is cut; small_base's ("}, {": no room for "]}" and "[")
  // is read whole.
  for (const char* name : {"mtia_inference.pt.trace.json.gz", "rocm_minitoy_train.pt.trace.json.gz", "small_base.pt.trace.json.gz"}) {
    INFO(name);
    const std::string text = optrace::detail::read_file_maybe_gzip(optrace_test::data_path(std::string("kineto/") + name));
    const std::string whole = read_in_pieces(text, 1);
    CHECK(whole.rfind("error", 0) != 0);
    for (size_t wanted : {2, 3, 7}) {
      size_t pieces = 0;
      CHECK(read_in_pieces(text, wanted, &pieces) == whole);
      CHECK(pieces == (std::string(name) == "small_base.pt.trace.json.gz" ? 1 : wanted));
    }
  }
  const std::vector<std::string> events = many_events(60);
  SECTION("an object with keys after the events, a bare list") {
    std::string list = "[\n  ";
    for (size_t k = 0; k < events.size(); ++k) list += (k ? ",\n  " : "") + events[k];
    list += "\n]\n";
    for (const std::string& text : {profiler_layout(events), list}) {
      const std::string whole = read_in_pieces(text, 1);
      CHECK(whole.find("add.Tensor") != std::string::npos);
      for (size_t wanted : {2, 4, 9}) {
        size_t pieces = 0;
        CHECK(read_in_pieces(text, wanted, &pieces) == whole);
        CHECK(pieces == wanted);
      }
    }
  }
  SECTION("cuts that are no event boundary: the trace is read whole") {
    // Objects in a list inside an event (its middle), in a list before the events (its first
    // two thirds), in one after them (its last two thirds): the cuts made there are found to be
    // no boundary between events.
    std::string objects;
    for (int k = 0; k < 3000; ++k) objects += (k ? ",\n  " : "") + std::string("{\"id\": ") + std::to_string(k) + "}";
    std::vector<std::string> inner = events;
    inner[inner.size() / 2] = R"({"ph": "X", "cat": "user_annotation", "name": "a", "pid": 7, "tid": 1, "ts": 1, "dur": 1, "args": {"l": [)" + objects + "]}}";
    const std::string texts[] = {profiler_layout(inner), profiler_layout(events, "\n  \"deviceProperties\": [" + objects + "],"),
                                 profiler_layout(events, "", ",\n  \"after\": [" + objects + "]")};
    for (const std::string& text : texts) {
      const std::string whole = read_in_pieces(text, 1);
      CHECK(whole.find("add.Tensor") != std::string::npos);
      size_t pieces = 0;
      CHECK(read_in_pieces(text, 2, &pieces) == whole);
      CHECK(pieces == 1);
      for (size_t wanted : {3, 5, 8, 16, 40}) CHECK(read_in_pieces(text, wanted) == whole);
    }
  }
  SECTION("malformed traces give the whole read's error") {
    const std::string good = profiler_layout(events);
    std::vector<std::string> bad_ts = events;
    bad_ts[bad_ts.size() * 3 / 4] = R"({"ph": "X", "cat": "cpu_op", "name": "aten::neg", "pid": 7, "tid": 1, "ts": "x", "dur": 1})";
    const std::string no_close = good.substr(0, good.rfind("\n  ]")) + "\n}\n";  // the events list not closed
    const std::string texts[] = {profiler_layout(bad_ts), no_close, good.substr(0, good.size() - 3) + "]\n",
                                 good.substr(0, good.size() / 2) + "\"" + good.substr(good.size() / 2)};
    for (const std::string& text : texts) {
      const std::string whole = read_in_pieces(text, 1);
      INFO(whole);
      CHECK(whole.rfind("error: ", 0) == 0);
      for (size_t wanted : {2, 3, 6}) CHECK(read_in_pieces(text, wanted) == whole);
    }
    CHECK(read_in_pieces(profiler_layout(bad_ts), 1) ==
          "error: optrace: JsonError at /traceEvents/" + std::to_string(events.size() * 3 / 4) + "/ts: expected a number, got string \"x\"");
  }
  SECTION("threads: how many pieces") {
    CHECK(dk::pieces_for(100, 0) == 1);
    CHECK(dk::pieces_for(dk::kMinPieceBytes * 4, 2) == 2);
    CHECK(dk::pieces_for(dk::kMinPieceBytes * 4, 8) == 4);
    CHECK(dk::pieces_for(dk::kMinPieceBytes * 4, 1) == 1);
    CHECK_THROWS_AS(kineto::ImportOptions().threads(-1), optrace::ArgumentError);
    // load and parse: one thread or several, the same trace.
    const std::string path = write_temp("kineto_pieces.pt.trace.json", profiler_layout(many_events(12000)));
    REQUIRE(optrace::detail::read_file(path).size() > 2 * dk::kMinPieceBytes);
    auto one = kineto::load(path, kineto::ImportOptions().threads(1));
    auto two = kineto::load(path, kineto::ImportOptions().threads(2));
    CHECK(one.trace == two.trace);
    CHECK(one.report.to_string() == two.report.to_string());
    CHECK(kineto::parse(std::string_view(optrace::detail::read_file(path)), kineto::ImportOptions().threads(3)).trace == one.trace);
  }
}

namespace {

// A TextReader that keeps the most bytes a read asked for: the streamed reader's buffer, less
// what it holds (a buffer that grows asks for more than a piece).
struct AskedReader : optrace_test::TextReader {
  size_t most_asked = 0;
  size_t read(char* into, size_t n) {
    most_asked = std::max(most_asked, n);
    return TextReader::read(into, n);
  }
};

// What streaming `text` in pieces of `piece_bytes` gives, as read_in_pieces writes it; `whole`
// is set when it fell back to reading the text whole, `rewinds` to the reads again, `most_asked`
// to the most bytes one read asked for.
std::string stream(const std::string& text, size_t piece_bytes, int threads, bool* whole = nullptr, int* rewinds = nullptr,
                   size_t* most_asked = nullptr) {
  AskedReader reader{{text}};
  bool fell_back = false;
  std::string out;
  try {
    const kineto::ImportOptions options = kineto::ImportOptions().threads(threads);
    auto r = optrace::detail::kineto::import_stream(
        reader, options, optrace::detail::live_catalog(),
        [&] {
          fell_back = true;
          std::string data = text;
          return optrace::detail::kineto::import_text(data, options, optrace::detail::live_catalog());
        },
        piece_bytes);
    out = r.trace.to_json() + r.report.to_string();
  } catch (const optrace::Error& e) {
    out = std::string("error: ") + e.what();
  }
  if (whole != nullptr) *whole = fell_back;
  if (rewinds != nullptr) *rewinds = reader.rewinds;
  if (most_asked != nullptr) *most_asked = reader.most_asked;
  return out;
}

// `text` (a trace in the profiler's layout, no line break inside a string) with each line break
// and the indentation after it replaced by `space`: the layouts json.dump and other tools write.
std::string relaid(const std::string& text, const std::string& space) {
  std::string out;
  for (size_t k = 0; k < text.size(); ++k) {
    if (text[k] != '\n') {
      out += text[k];
      continue;
    }
    while (k + 1 < text.size() && text[k + 1] == ' ') ++k;
    out += space;
  }
  return out;
}

}  // namespace

TEST_CASE("kineto: a trace streamed in pieces of bounded size is the trace read whole", "[kineto]") {
  SECTION("real traces and an object with keys after the events, a bare list; one thread or two") {
    std::vector<std::string> texts;
    for (const char* name : {"mtia_inference.pt.trace.json.gz", "rocm_minitoy_train.pt.trace.json.gz"})
      texts.push_back(optrace::detail::read_file_maybe_gzip(optrace_test::data_path(std::string("kineto/") + name)));
    const std::vector<std::string> events = many_events(400);
    texts.push_back(profiler_layout(events));
    std::string list = "[\n  ";
    for (size_t k = 0; k < events.size(); ++k) list += (k ? ",\n  " : "") + events[k];
    texts.push_back(list + "\n]\n");
    for (const std::string& text : texts) {
      const std::string whole = read_in_pieces(text, 1);
      REQUIRE(whole.rfind("error", 0) != 0);
      std::vector<std::pair<size_t, int>> ways;  // piece bytes, threads
      for (size_t piece : {size_t(700), size_t(4096), size_t(64 * 1024)})
        for (int threads : {1, 2, 3}) ways.emplace_back(piece, threads);
      if (optrace_test::kSanitized) ways = {{700, 1}, {4096, 3}, {64 * 1024, 2}};  // each size and count once
      for (const auto& [piece, threads] : ways) {
        INFO("piece " << piece << ", threads " << threads);
        bool fell_back = true;
        CHECK(stream(text, piece, threads, &fell_back) == whole);
        CHECK(fell_back == false);
      }
    }
  }
  SECTION("a thread's ops out of start order: read again, keeping the records") {
    // Two copies of the events, the second shifted back in time: its ops start before the
    // first copy's on the same threads.
    std::vector<std::string> events = many_events(200);
    std::vector<std::string> earlier;
    for (int k = 0; k < 200; ++k)
      earlier.push_back(op("aten::mul", -10.0 * k - 10, 5, in("[[2, 4], [2, 4]]", R"(["float", "float"])"), 1 + k % 2));
    events.insert(events.end(), earlier.begin(), earlier.end());
    const std::string text = profiler_layout(events);
    const std::string whole = read_in_pieces(text, 1);
    CHECK(whole.find("mul.Tensor") != std::string::npos);
    int rewinds = 0;
    bool fell_back = true;
    CHECK(stream(text, 2048, 2, &fell_back, &rewinds) == whole);
    CHECK(rewinds == 1);
    CHECK(fell_back == false);
    // In order, nothing is read twice.
    CHECK(stream(profiler_layout(many_events(200)), 2048, 2, &fell_back, &rewinds) == read_in_pieces(profiler_layout(many_events(200)), 1));
    CHECK(rewinds == 0);
  }
  SECTION("what streaming cannot cut: one line, no boundary, a cut inside an event") {
    std::string one_line = "{\"traceEvents\": [";
    const std::vector<std::string> events = many_events(300);
    for (size_t k = 0; k < events.size(); ++k) one_line += (k ? ", " : "") + events[k];
    one_line += "]}";
    // Without a boundary, what is read grows until one is found: here, to the end.
    CHECK(stream(one_line, 1024, 2) == read_in_pieces(one_line, 1));
    // Cuts that are no boundary between events (objects in a list inside an event).
    std::string objects;
    for (int k = 0; k < 300; ++k) objects += (k ? ",\n  " : "") + std::string("{\"id\": ") + std::to_string(k) + "}";
    std::vector<std::string> inner = many_events(300);
    inner[inner.size() / 2] = R"({"ph": "X", "cat": "user_annotation", "name": "a", "pid": 7, "tid": 1, "ts": 1, "dur": 1, "args": {"l": [)" + objects + "]}}";
    const std::string nested = profiler_layout(inner);
    CHECK(stream(nested, 1024, 2) == read_in_pieces(nested, 1));
    // A list of objects after the events, cut where the events list has ended: not events.
    const std::string after = profiler_layout(many_events(300), "", ",\n  \"after\": [" + objects + "]");
    for (int threads : {1, 2}) CHECK(stream(after, 1024, threads) == read_in_pieces(after, 1));
    std::string list = "[\n  ";
    for (size_t k = 0; k < inner.size(); ++k) list += (k ? ",\n  " : "") + inner[k];
    list += "\n]\n";
    for (int threads : {1, 2}) CHECK(stream(list, 1024, threads) == read_in_pieces(list, 1));
  }
  SECTION("malformed traces give the whole read's error") {
    std::vector<std::string> events = many_events(300);
    std::vector<std::string> bad_ts = events;
    bad_ts[bad_ts.size() * 3 / 4] = R"({"ph": "X", "cat": "cpu_op", "name": "aten::neg", "pid": 7, "tid": 1, "ts": "x", "dur": 1})";
    std::vector<std::string> bad_dims = events;  // malformed where only decoding reads
    bad_dims[bad_dims.size() * 3 / 4] = op("aten::exp", 1e9, 1, in("[[2, 4]", R"(["float"])"));
    const std::string good = profiler_layout(events);
    const std::string texts[] = {profiler_layout(bad_ts), profiler_layout(bad_dims), good.substr(0, good.rfind("\n  ]")) + "\n}\n",
                                 good.substr(0, good.size() - 3) + "]\n", good.substr(0, good.size() / 2),
                                 good.substr(0, good.size() / 2) + "\"" + good.substr(good.size() / 2)};
    for (const std::string& text : texts) {
      const std::string whole = read_in_pieces(text, 1);
      INFO(whole);
      CHECK(whole.rfind("error: ", 0) == 0);
      for (int threads : {1, 2}) CHECK(stream(text, 2048, threads) == whole);
    }
  }
}

TEST_CASE("kineto: a second events list after the first is refused however the trace is read", "[kineto]") {
  // Read in pieces, the last piece's events are followed by the root object's last members: the
  // second list is there, where no piece reads; the whole read then names it.
  const std::string twice = "error: optrace: JsonError at /traceEvents: a key given twice in one object (JSON readers differ on which value they take)";
  const std::vector<std::string> events = many_events(400);
  const std::string text = profiler_layout(events, "", ", \"traceName\": \"x\", \"traceEvents\": []");
  size_t pieces = 0;
  CHECK(read_in_pieces(text, 1) == twice);
  CHECK(read_in_pieces(text, 3, &pieces) == twice);
  for (size_t piece : {size_t(4096), size_t(64 * 1024)})
    for (int threads : {1, 2}) {
      INFO("piece " << piece << ", threads " << threads);
      CHECK(stream(text, piece, threads) == twice);
    }
  // The same trace with the key's name as a value, and in a nested object: read in pieces.
  const std::string fine = profiler_layout(events, "", ", \"traceName\": \"traceEvents\", \"m\": {\"traceEvents\": []}");
  const std::string whole = read_in_pieces(fine, 1);
  REQUIRE(whole.rfind("error", 0) != 0);
  CHECK(read_in_pieces(fine, 3, &pieces) == whole);
  CHECK(pieces == 3);
  CHECK(stream(fine, 4096, 2) == whole);
}

TEST_CASE("kineto: a trace streamed in any layout, in bounded memory", "[kineto]") {
  namespace dk = optrace::detail::kineto;
  SECTION("json.dump's layouts and one line break between events: read in pieces, as read whole") {
    std::vector<std::string> texts;
    for (const char* name : {"mtia_inference.pt.trace.json.gz", "small_base.pt.trace.json.gz"})
      texts.push_back(optrace::detail::read_file_maybe_gzip(optrace_test::data_path(std::string("kineto/") + name)));
    texts.push_back(profiler_layout(many_events(400)));
    for (const std::string& text : texts) {
      const std::string whole = read_in_pieces(text, 1);
      REQUIRE(whole.rfind("error", 0) != 0);
      for (const char* space : {"", " ", "\n"}) {  // `},{`, `}, {`, `},\n{`
        const std::string laid = relaid(text, space);
        REQUIRE(laid.size() > 10 * 1024);
        for (int threads : {1, 2}) {
          INFO("space '" << space << "', threads " << threads);
          bool fell_back = true;
          size_t most_asked = 0;
          CHECK(stream(laid, 1024, threads, &fell_back, nullptr, &most_asked) == whole);
          CHECK(fell_back == false);
          CHECK(most_asked <= 2 * 1024 * static_cast<size_t>(threads));  // 1 KiB per thread, the first piece grown once at most: never the text
        }
      }
    }
  }
  SECTION("braces and commas inside strings are no boundary") {
    // Each tricky event between op events, in one line: a cut inside one of its strings would
    // make pieces that fail, and the whole read.
    std::vector<std::string> events = many_events(300);
    const std::string tricky[] = {
        R"({"ph": "X", "cat": "user_annotation", "name": "},{", "pid": 7, "tid": 1, "ts": 1, "dur": 1})",
        R"({"ph": "X", "cat": "user_annotation", "name": "a\"},{\"b", "pid": 7, "tid": 1, "ts": 1, "dur": 1, "args": {"s": "}, {"}})",
        R"({"ph": "X", "cat": "user_annotation", "name": "a\\", "pid": 7, "tid": 1, "ts": 1, "dur": 1, "args": {"l": [{}, {"x": "\\\"},{"}]}})"};
    for (size_t k = 0; k < events.size(); k += 7) events.insert(events.begin() + k, tricky[k % 3]);
    const std::string text = relaid(profiler_layout(events), "");
    const std::string whole = read_in_pieces(text, 1);
    REQUIRE(whole.rfind("error", 0) != 0);
    for (size_t piece : {size_t(700), size_t(4096)}) {
      bool fell_back = true;
      size_t most_asked = 0;
      CHECK(stream(text, piece, 1, &fell_back, nullptr, &most_asked) == whole);
      CHECK(fell_back == false);
      CHECK(most_asked <= 2 * piece);
    }
    // The cuts the tokens give: between the events of the events list only.
    const std::string small = R"({"deviceProperties": [{"a": 1},{"b": 2}], "traceEvents": [{"name": "},{"},)"
                              R"({"name": "a\\"},{"args": {"l": [{},{}]}}], "after": [{},{}]})";
    std::vector<size_t> commas;
    dk::for_each_event_cut(small.data(), small.size(), [&](const dk::Cut& cut) {
      CHECK(small[cut.open] == '{');
      commas.push_back(cut.comma);
      return true;
    });
    CHECK(commas == std::vector<size_t>{small.find("},{\"name\": \"a") + 1, small.find("},{\"args") + 1});
  }
  SECTION("what has no boundary is refused at the cap, in one line") {
    const std::string events = relaid(profiler_layout(many_events(50)), "");
    const std::string open = events.substr(0, events.find("\"traceEvents\": [") + 16);
    const std::string texts[] = {
        open + R"({"name": ")" + std::string(100000, 'a'),                 // a string never closed
        open + R"({"name": "x", "args": {"l": )" + std::string(100000, '['),  // deep nesting
        open + R"({"name": "x", "args": {"l": ")" + std::string(100000, 'b') + "\"}}, " + events.substr(open.size())};  // one huge event
    for (const std::string& text : texts) {
      AskedReader in{{text}};
      int pieces = 0;
      try {
        dk::stream_pieces(
            in, 1024, dk::LastPiece::AsTrace,
            [&](const dk::StreamPiece&, const char*&) {
              ++pieces;
              return dk::PieceRead::Read;
            },
            32 * 1024);
        FAIL("streamed");
      } catch (const optrace::JsonError& e) {
        CHECK(std::string(e.what()).rfind("optrace: JsonError at /: no boundary between two events in the 32768 bytes from byte 0 on", 0) == 0);
      }
      CHECK(pieces == 0);
      CHECK(in.most_asked <= 32 * 1024);
    }
    // A gzip bomb (64 MiB of one string in 64 KiB): inflated no further than the cap.
    std::string bomb_text = open + R"({"name": ")";
    bomb_text.resize(bomb_text.size() + (size_t(64) << 20), 'a');
    const std::string bomb = write_temp("kineto_bomb.pt.trace.json.gz", bomb_text, true);
    bomb_text = std::string();
    optrace::detail::FileReader file(bomb);
    struct Inflated {
      optrace::detail::FileReader& file;
      size_t bytes = 0;
      size_t read(char* into, size_t n) {
        n = file.read(into, n);
        bytes += n;
        return n;
      }
    } in{file};
    CHECK_THROWS_AS(dk::stream_pieces(
                        in, 4096, dk::LastPiece::AsTail, [](const dk::StreamPiece&, const char*&) { return dk::PieceRead::Read; },
                        size_t(1) << 20),
                    optrace::JsonError);
    CHECK(in.bytes <= size_t(1) << 20);
  }
}

TEST_CASE("kineto: load streams large and compressed traces", "[kineto]") {
  namespace dk = optrace::detail::kineto;
  std::string text = profiler_layout(many_events(30000));
  REQUIRE(text.size() > optrace::detail::kStreamFromBytes);
  const std::string plain = write_temp("kineto_stream.pt.trace.json", text);
  const std::string gz = write_temp("kineto_stream.pt.trace.json.gz", text, true);
  // Two gzip members, as `cat a.gz b.gz` makes them: one stream.
  const size_t half = text.size() / 2;
  const std::string two = write_temp("kineto_stream_two.pt.trace.json.gz",
                                     optrace::detail::gzip(text.substr(0, half)) + optrace::detail::gzip(text.substr(half)));
  const kineto::ImportResult expected = kineto::parse(text);
  for (const std::string& path : {plain, gz, two}) {
    INFO(path);
    for (int threads : {1, 2}) {
      const kineto::ImportResult r = kineto::load(path, kineto::ImportOptions().threads(threads));
      CHECK(r.trace == expected.trace);
      CHECK(r.report.to_string() == expected.report.to_string());
    }
    CHECK(kineto::load_any(path).trace == expected.trace);
    CHECK(kineto::detect_format(path) == kineto::TraceFormat::Kineto);
  }
  // A truncated gzip file: the whole read's error.
  std::string bytes = optrace::detail::read_file(gz);
  const std::string cut = write_temp("kineto_stream_cut.pt.trace.json.gz", bytes.substr(0, bytes.size() * 2 / 3));
  try {
    (void)kineto::load(cut);
    FAIL("a truncated gzip file was read");
  } catch (const optrace::IoError& e) {
    CHECK(std::string(e.what()).find("cannot inflate '" + cut + "': the gzip data is truncated") != std::string::npos);
  }
  // FileReader: the bytes, again after rewind.
  optrace::detail::FileReader reader(two);
  CHECK(reader.gzip());
  std::string back(text.size() + 10, '\0');
  size_t got = 0;
  for (size_t n; (n = reader.read(&back[got], std::min<size_t>(back.size() - got, 70000))) > 0;) got += n;
  CHECK(got == text.size());
  back.resize(got);
  CHECK(back == text);
  reader.rewind();
  char first[9] = {};
  CHECK(reader.read(first, 8) == 8);
  CHECK(std::string(first) == text.substr(0, 8));
}
