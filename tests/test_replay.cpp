// Tests for optrace/replay.hpp: materialize every traced input, run it through the dispatcher,
// check and time it, report.
#include <optrace/op_tracer.hpp>
#include <optrace/replay.hpp>

#include <torch/cuda.h>
#include <torch/torch.h>

#include <fstream>
#include <limits>
#include <sstream>

#include "optrace_catch.hpp"

using optrace::OpTrace;
using optrace::ReplayMode;
using optrace::ReplayOptions;
using optrace::ReplayReport;
using optrace::ReplayResult;
using optrace::ReplayStatus;

namespace {

OpTrace peer_mlp() { return OpTrace::load(optrace_test::data_path("peer/mlp.hf_op_trace.json")); }

ReplayOptions cpu(ReplayMode mode = ReplayMode::run) {
  return ReplayOptions().device(c10::kCPU).mode(mode).progress(false);
}

// One op with one unique input, written as the reference tracer writes it.
std::string input_json(const std::string& op, const std::string& shapes, const std::string& dtypes,
                       const std::string& values, const std::string& lists = "{}", const std::string& extra = "") {
  return "{\"op_name\": \"" + op + "\", \"input_shapes\": " + shapes + ", \"input_dtypes\": " + dtypes +
         ", \"non_tensor_inputs\": " + values + ", \"tensor_lists\": " + lists + ", \"count\": 1" + extra + "}";
}

// A trace of several ops, each with the unique inputs given.
OpTrace trace_of(const std::vector<std::pair<std::string, std::vector<std::string>>>& ops) {
  std::string text = "{";
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto& [name, inputs] = ops[i];
    text += (i ? ", \"" : "\"") + name + "\": {\"total_calls\": " + std::to_string(inputs.size()) +
            ", \"unique_input_count\": " + std::to_string(inputs.size()) + ", \"unique_inputs\": [";
    for (size_t j = 0; j < inputs.size(); ++j) text += (j ? ", " : "") + inputs[j];
    text += "]}";
  }
  return OpTrace::from_json(text + "}");
}

// A trace with one op and one input.
OpTrace one(const std::string& op, const std::string& shapes, const std::string& dtypes, const std::string& values,
            const std::string& lists = "{}", const std::string& extra = "") {
  return trace_of({{op, {input_json(op, shapes, dtypes, values, lists, extra)}}});
}

// A copy: GCC 14's -Wdangling-reference takes a reference returned next to a temporary argument
// for one into that temporary.
ReplayResult result_of(const ReplayReport& report, const std::string& op, int64_t index = 0) {
  for (const ReplayResult& r : report.results)
    if (r.op == op && r.index == index) return r;
  FAIL("no result for " << op << " #" << index);
  throw std::logic_error("unreachable");
}

void require_all_ok(const ReplayReport& report) {
  for (const ReplayResult& r : report.results) {
    INFO(r.op << " #" << r.index << " (" << r.inputs << "): " << r.message);
    CHECK(r.status == ReplayStatus::ok);
  }
}

// A meta dry run: every input ok, or skipped because this libtorch has no meta kernel for the op
// (libtorch 1.13 registers many only from Python); never an error.
void require_meta_ok(const ReplayReport& report) {
  for (const ReplayResult& r : report.results) {
    INFO(r.op << " #" << r.index << " (" << r.inputs << "): " << r.message);
    CHECK((r.status == ReplayStatus::ok ||
           (r.status == ReplayStatus::skipped && r.message.rfind("no meta kernel in this libtorch: ", 0) == 0)));
  }
}

// Index ops whose integer inputs must fall within another input's dims; every indexed dim is
// smaller than 8, so the default integer fill [0, 8) alone would go out of range.
OpTrace index_ops() {
  return trace_of({
      {"embedding.default", {input_json("embedding.default", "[[3, 4], [2, 5]]", R"(["torch.float32", "torch.int64"])", "[null, null]")}},
      {"embedding_dense_backward.default",
       {input_json("embedding_dense_backward.default", "[[5, 4], [5], null, null, null]",
                   R"(["torch.float32", "torch.int64", "<class 'int'>", "<class 'int'>", "<class 'bool'>"])",
                   "[null, null, 3, -1, false]")}},
      {"index_select.default",
       {input_json("index_select.default", "[[2, 5], null, [7]]", R"(["torch.float32", "<class 'int'>", "torch.int64"])",
                   "[null, 0, null]")}},
      {"gather.default",
       {input_json("gather.default", "[[4, 2], null, [4, 6]]", R"(["torch.float32", "<class 'int'>", "torch.int64"])",
                   "[null, -1, null]")}},
      {"scatter_add.default",
       {input_json("scatter_add.default", "[[3, 5], null, [4, 5], [4, 5]]",
                   R"(["torch.float32", "<class 'int'>", "torch.int64", "torch.float32"])", "[null, 0, null, null]")}},
      {"scatter_reduce.two",
       {input_json("scatter_reduce.two", "[[3, 5], null, [4, 5], [4, 5], null]",
                   R"(["torch.float32", "<class 'int'>", "torch.int64", "torch.float32", "<class 'str'>"])",
                   R"([null, 0, null, null, "amax"])")}},
      {"index.Tensor",
       {input_json("index.Tensor", "[[2, 3], null]", R"(["torch.float32", "<class 'list'>"])",
                   R"([null, {"tensor_list_ref": 0}])",
                   R"({"0": {"length": 2, "shapes": [null, [6]], "dtypes": ["<class 'NoneType'>", "torch.int64"]}})")}},
      {"index_put.default",
       {input_json("index_put.default", "[[3, 2], null, [1], null]",
                   R"(["torch.float32", "<class 'list'>", "torch.float32", "<class 'bool'>"])",
                   R"([null, {"tensor_list_ref": 0}, null, true])",
                   R"({"0": {"length": 1, "shapes": [[5]], "dtypes": ["torch.int64"]}})")}},
      {"take.default", {input_json("take.default", "[[2, 2], [10]]", R"(["torch.float32", "torch.int64"])", "[null, null]")}},
      {"nll_loss_forward.default",
       {input_json("nll_loss_forward.default", "[[6, 3], [6], null, null, null]",
                   R"(["torch.float32", "torch.int64", "<class 'NoneType'>", "<class 'int'>", "<class 'int'>"])",
                   "[null, null, null, 1, -100]")}},
      {"nll_loss2d_forward.default",
       {input_json("nll_loss2d_forward.default", "[[2, 3, 4, 4], [2, 4, 4], null, null, null]",
                   R"(["torch.float32", "torch.int64", "<class 'NoneType'>", "<class 'int'>", "<class 'int'>"])",
                   "[null, null, null, 1, 1]")}},
      {"one_hot.default", {input_json("one_hot.default", "[[5], null]", R"(["torch.int64", "<class 'int'>"])", "[null, 3]")}},
      {"div.Tensor", {input_json("div.Tensor", "[[8], [8]]", R"(["torch.int64", "torch.int64"])", "[null, null]")}},
      {"remainder.Tensor", {input_json("remainder.Tensor", "[[8], [8]]", R"(["torch.int32", "torch.int32"])", "[null, null]")}},
  });
}

}  // namespace

TEST_CASE("replay: the peer mlp trace runs on cpu and meta", "[replay]") {
  const OpTrace trace = peer_mlp();
  SECTION("cpu, run") {
    ReplayReport report = optrace::replay(trace, cpu());
    CHECK(report.results.size() == static_cast<size_t>(trace.unique_input_count()));
    require_all_ok(report);
    CHECK(report.all_ok());
    CHECK(report.device == c10::Device(c10::kCPU));
  }
  SECTION("cpu, check against float64") {
    ReplayReport report = optrace::replay(trace, cpu(ReplayMode::check));
    require_all_ok(report);
    for (const ReplayResult& r : report.results) {
      REQUIRE(r.max_abs_error);
      CHECK(*r.max_abs_error < 1e-4);
      CHECK(r.max_rel_error);
    }
  }
  SECTION("meta, run and check") {
    ReplayReport run = optrace::replay(trace, cpu().device(c10::kMeta));
    require_meta_ok(run);
    CHECK(result_of(run, "addmm.default").status == ReplayStatus::ok);
    ReplayReport check = optrace::replay(trace, cpu(ReplayMode::check).device(c10::kMeta));
    require_meta_ok(check);
    CHECK(check.results.front().message == "shapes and dtypes match the CPU");
    CHECK_FALSE(check.results.front().max_abs_error);
  }
  SECTION("results follow the trace: ops in order, inputs by count") {
    ReplayReport report = optrace::replay(trace, cpu());
    CHECK(report.results[0].op == "t.default");
    CHECK(report.results[0].count == 6);
    CHECK(report.results[0].inputs == "f32[5, 20]");
    CHECK(report.results[2].op == "addmm.default");
    CHECK(report.results[2].inputs == "f32[5], f32[2, 20], f32[20, 5]");
  }
}

TEST_CASE("replay: index ops get indices within the indexed dims", "[replay]") {
  const OpTrace trace = index_ops();
  for (ReplayMode mode : {ReplayMode::run, ReplayMode::check}) {
    INFO("mode " << optrace::to_string(mode));
    ReplayReport report = optrace::replay(trace, cpu(mode));
    CHECK(report.results.size() == trace.size());
    require_all_ok(report);
  }
  require_meta_ok(optrace::replay(trace, cpu().device(c10::kMeta)));
}

TEST_CASE("replay: rules and recorded value ranges set integer ranges", "[replay]") {
  using optrace::detail::PlanBuilder;
  const c10::Device dev(c10::kCPU);
  SECTION("embedding: the weight's rows") {
    OpTrace t = one("embedding.default", "[[3, 4], [2, 5]]", R"(["torch.float32", "torch.int64"])", "[null, null]");
    auto plan = PlanBuilder(t.ops()[0].unique_inputs[0], dev).build("embedding.default");
    REQUIRE(plan.tensors.size() == 2);
    CHECK_FALSE(plan.tensors[0].range);
    REQUIRE(plan.tensors[1].range);
    CHECK(*plan.tensors[1].range == std::make_pair<int64_t, int64_t>(0, 3));
  }
  SECTION("recorded ranges are used, within the rule's") {
    const std::string shapes = "[[100, 4], [2, 5]]", dtypes = R"(["torch.float32", "torch.int64"])";
    OpTrace t = one("embedding.default", shapes, dtypes, "[null, null]", "{}", R"(, "input_value_ranges": [null, [40, 60]])");
    auto plan = PlanBuilder(t.ops()[0].unique_inputs[0], dev).build("embedding.default");
    CHECK(*plan.tensors[1].range == std::make_pair<int64_t, int64_t>(40, 61));
    at::Tensor ids = optrace::detail::materialize_plan(plan, dev, 1, 1 << 20)[1];
    CHECK(ids.min().item<int64_t>() >= 40);
    CHECK(ids.max().item<int64_t>() <= 60);
    OpTrace beyond = one("embedding.default", shapes, dtypes, "[null, null]", "{}", R"(, "input_value_ranges": [null, [200, 300]])");
    auto plan2 = PlanBuilder(beyond.ops()[0].unique_inputs[0], dev).build("embedding.default");
    CHECK(*plan2.tensors[1].range == std::make_pair<int64_t, int64_t>(0, 100));
  }
  SECTION("a recorded range with no rule: an attention mask") {
    OpTrace t = one("mul.Tensor", "[[2, 5], [2, 5]]", R"(["torch.int64", "torch.int64"])", "[null, null]", "{}",
                    R"(, "input_value_ranges": [[0, 1], [3, 3]])");
    auto plan = PlanBuilder(t.ops()[0].unique_inputs[0], dev).build("mul.Tensor");
    auto tensors = optrace::detail::materialize_plan(plan, dev, 0, 1 << 20);
    CHECK(tensors[0].max().item<int64_t>() <= 1);
    CHECK(tensors[1].eq(3).all().item<bool>());
  }
  SECTION("nll_loss classes and index.Tensor's per-dim lists") {
    OpTrace t = index_ops();
    auto nll = PlanBuilder(t.find("nll_loss2d_forward.default")->unique_inputs[0], dev).build("nll_loss2d_forward.default");
    CHECK(*nll.tensors[1].range == std::make_pair<int64_t, int64_t>(0, 3));
    auto index = PlanBuilder(t.find("index.Tensor")->unique_inputs[0], dev).build("index.Tensor");
    CHECK(*index.tensors[1].range == std::make_pair<int64_t, int64_t>(0, 3));  // list element 1 indexes dim 1
    auto div = PlanBuilder(t.find("div.Tensor")->unique_inputs[0], dev).build("div.Tensor");
    CHECK_FALSE(div.tensors[0].range);
    CHECK(*div.tensors[1].range == std::make_pair<int64_t, int64_t>(1, 8));
  }
}

TEST_CASE("replay: a failing op is reported and the replay goes on", "[replay]") {
  const std::string f32 = R"(["torch.float32"])";
  OpTrace trace = trace_of({
      {"relu.default", {input_json("relu.default", "[[2, 3]]", f32, "[null]")}},
      {"no_such_op.default", {input_json("no_such_op.default", "[[2, 3]]", f32, "[null]")}},
      {"sigmoid.default", {input_json("sigmoid.default", "[[2, 3], [2, 3], [2, 3]]",
                                      R"(["torch.float32", "torch.float32", "torch.float32"])", "[null, null, null]")}},
      {"mm.default", {input_json("mm.default", "[[2, 3], [4, 5]]", R"(["torch.float32", "torch.float32"])", "[null, null]"),
                      input_json("mm.default", "[[2, 3], [3, 5]]", R"(["torch.float32", "torch.float32"])", "[null, null]")}},
      {"sum.dim_IntList", {input_json("sum.dim_IntList", "[[2, 3], null]", R"(["torch.float32", "<class 'str'>"])",
                                      R"([null, "oops"])")}},
      {"to.dtype", {input_json("to.dtype", "[[2], null]", R"(["torch.float32", "<class 'torch.dtype'>"])",
                               R"([null, "torch.float128"])")}},
      {"neg.default", {input_json("neg.default", "[[2, 3]]", R"(["torch.qint8"])", "[null]")}},
      {"add.Tensor", {input_json("add.Tensor", "[[2, 3], [2, 3]]", R"(["torch.float32", "torch.float32"])", "[null, null]")}},
  });
  for (ReplayMode mode : {ReplayMode::run, ReplayMode::check, ReplayMode::time}) {
    INFO("mode " << optrace::to_string(mode));
    ReplayReport report = optrace::replay(trace, cpu(mode).warmup(0).repeats(1));
    REQUIRE(report.results.size() == 9);
    CHECK(result_of(report, "relu.default").status == ReplayStatus::ok);
    const ReplayResult unknown = result_of(report, "no_such_op.default");
    CHECK(unknown.status == ReplayStatus::skipped);  // a gap of this libtorch, not a failure
    CHECK(unknown.message == "not replayable: this libtorch has no operator aten::no_such_op (renamed or removed since the trace was recorded?)");
    const ReplayResult arity = result_of(report, "sigmoid.default");
    CHECK(arity.status == ReplayStatus::error);
    CHECK_THAT(arity.message, OPTRACE_CONTAINS("schema mismatch: 3 positional arguments recorded, but aten::sigmoid(Tensor self) -> Tensor takes 1"));
    const ReplayResult runtime = result_of(report, "mm.default", 0);
    CHECK(runtime.status == ReplayStatus::error);
    CHECK_THAT(runtime.message, OPTRACE_CONTAINS("cannot be multiplied"));
    CHECK(runtime.message.find('\n') == std::string::npos);
    CHECK(result_of(report, "mm.default", 1).status == ReplayStatus::ok);
    const ReplayResult type = result_of(report, "sum.dim_IntList");
    CHECK(type.status == ReplayStatus::error);
    CHECK_THAT(type.message, OPTRACE_CONTAINS("argument 1 'dim'"));
    CHECK_THAT(type.message, OPTRACE_CONTAINS("but the trace has a string \"oops\""));
    const ReplayResult dtype = result_of(report, "to.dtype");  // a newer torch's dtype, or a damaged trace: not a failure
    CHECK(dtype.status == ReplayStatus::skipped);
    CHECK(dtype.message == "not replayable: argument 1 'dtype' (ScalarType) is dtype \"torch.float128\", which this libtorch does not know");
    const ReplayResult quantized = result_of(report, "neg.default");
    CHECK(quantized.status == ReplayStatus::error);
    CHECK_THAT(quantized.message, OPTRACE_CONTAINS("MaterializeError"));
    CHECK(result_of(report, "add.Tensor").status == ReplayStatus::ok);
    CHECK_FALSE(report.all_ok());
    CHECK(report.num(ReplayStatus::error) == 4);
    CHECK(report.num(ReplayStatus::skipped) == 2);  // the unknown op and dtype
  }
}

TEST_CASE("replay: values the trace never recorded are skipped not failed", "[replay]") {
  // What a profiler leaves: a list without its value (view's size before PyTorch 2.1), a Python
  // number seen as a 0-dim tensor.
  OpTrace trace = trace_of({
      {"view.default", {input_json("view.default", "[[2, 3], null]", R"(["torch.float32", "<class 'list'>"])", "[null, null]")}},
      {"div.Tensor", {input_json("div.Tensor", "[[2, 3], null]", R"(["torch.float32", "<class 'float'>"])", "[null, null]")}},
      {"clamp.default", {input_json("clamp.default", "[[2, 3], null, null]",
                                    R"(["torch.float32", "<class 'NoneType'>", "<class 'float'>"])", "[null, null, 1.5]")}},
  });
  ReplayReport report = optrace::replay(trace, cpu(ReplayMode::check));
  const ReplayResult view = result_of(report, "view.default");
  CHECK(view.status == ReplayStatus::skipped);
  CHECK(view.message == "not replayable: argument 1 'size' (SymInt[]): the trace has <class 'list'> without its value "
                        "(the profiler did not record it)");
  CHECK(result_of(report, "div.Tensor").status == ReplayStatus::skipped);
  CHECK(result_of(report, "clamp.default").status == ReplayStatus::ok);  // a None that is None
  CHECK(report.all_ok());  // gaps are not failures
}

TEST_CASE("replay: check tolerance follows the output's magnitude", "[replay]") {
  // float32 mm with a 3072-long reduction: outputs around 55, rounding errors up to ~5e-4, far
  // beyond a plain 1e-4 but within 1e-4 of the output's RMS (compare.hpp).
  OpTrace trace = one("mm.default", "[[2, 3072], [3072, 768]]", R"(["torch.float32", "torch.float32"])", "[null, null]");
  for (uint64_t seed : {0, 1, 2, 3, 4}) {
    ReplayReport report = optrace::replay(trace, cpu(ReplayMode::check).seed(seed));
    INFO("seed " << seed << ": " << report.results[0].message);
    CHECK(report.results[0].status == ReplayStatus::ok);
  }
  // An explicit atol is absolute: the same rounding is then a mismatch, and says so.
  ReplayReport absolute = optrace::replay(trace, cpu(ReplayMode::check).atol(1e-6).rtol(0));
  CHECK(absolute.results[0].status == ReplayStatus::mismatch);
  CHECK_THAT(absolute.results[0].message, OPTRACE_CONTAINS("beyond atol 1e-06 + rtol 0"));
  // A wrong result is still found: outputs that differ by a fraction of their RMS.
  at::Tensor ref = at::randn({2, 768}, at::kDouble) * 55;
  at::Tensor wrong = (ref + ref.abs().mean() * 0.01).to(at::kFloat);
  optrace::detail::Comparison c;
  optrace::detail::compare_tensors(wrong, ref, "output 0", c);
  CHECK_FALSE(c.ok);
  CHECK_THAT(c.message, OPTRACE_CONTAINS("(0.0001 * rms "));
}

TEST_CASE("replay: a nested output runs and is not compared", "[replay]") {
  // nn.TransformerEncoder's fast path makes nested tensors from a padding mask.
  OpTrace trace = one("_nested_tensor_from_mask.default", "[[2, 3, 4], [2, 3], null]",
                      R"(["torch.float32", "torch.bool", "<class 'bool'>"])", "[null, null, false]");
  ReplayReport report = optrace::replay(trace, cpu(ReplayMode::check));
  INFO(report.results[0].message);
  CHECK(report.results[0].status == ReplayStatus::skipped);
  CHECK(report.results[0].message == "ran; not compared: output 0 is a nested tensor");
}

TEST_CASE("replay: in-place and out ops get fresh inputs", "[replay]") {
  const std::string two_f32 = R"(["torch.float32", "torch.float32"])";
  OpTrace trace = trace_of({
      {"add_.Tensor", {input_json("add_.Tensor", "[[3, 4], [3, 4]]", two_f32, "[null, null]")}},
      {"mul_.Scalar", {input_json("mul_.Scalar", "[[3, 4], null]", R"(["torch.float32", "<class 'float'>"])", "[null, 2.5]")}},
      {"index_put_.default",
       {input_json("index_put_.default", "[[3, 2], null, [4, 2], null]",
                   R"(["torch.float32", "<class 'list'>", "torch.float32", "<class 'bool'>"])",
                   R"([null, {"tensor_list_ref": 0}, null, true])",
                   R"({"0": {"length": 1, "shapes": [[4]], "dtypes": ["torch.int64"]}})")}},
      {"add.out", {input_json("add.out", "[[3, 4], [3, 4]]", two_f32, "[null, null]")}},
      {"copy_.default", {input_json("copy_.default", "[[3, 4], [3, 4]]", R"(["torch.float32", "torch.float16"])", "[null, null]")}},
  });
  for (ReplayMode mode : {ReplayMode::run, ReplayMode::check, ReplayMode::time}) {
    INFO("mode " << optrace::to_string(mode));
    ReplayReport report = optrace::replay(trace, cpu(mode).warmup(1).repeats(3));
    require_all_ok(report);
    if (mode == ReplayMode::check)
      for (const ReplayResult& r : report.results) CHECK(*r.max_abs_error < 1e-3);
    if (mode == ReplayMode::time)
      for (const ReplayResult& r : report.results) CHECK(r.message == "writes its inputs: fresh inputs for every call");
  }
}

TEST_CASE("replay: random and creation ops run but are not compared", "[replay]") {
  OpTrace trace = trace_of({
      {"bernoulli.p", {input_json("bernoulli.p", "[[4, 4], null]", R"(["torch.float32", "<class 'float'>"])", "[null, 0.5]")}},
      {"native_dropout.default",
       {input_json("native_dropout.default", "[[4, 4], null, null]", R"(["torch.float32", "<class 'float'>", "<class 'bool'>"])",
                   "[null, 0.1, true]")}},
      {"uniform_.default", {input_json("uniform_.default", "[[4]]", R"(["torch.float32"])", "[null]")}},
      {"randperm.default", {input_json("randperm.default", "[null]", R"(["<class 'int'>"])", "[6]")}},
      {"empty.memory_format", {input_json("empty.memory_format", "[null]", R"(["<class 'list'>"])", "[[2, 3]]")}},
      {"empty_like.default", {input_json("empty_like.default", "[[2, 3]]", R"(["torch.float16"])", "[null]")}},
      {"relu.default", {input_json("relu.default", "[[2, 3]]", R"(["torch.float32"])", "[null]")}},
  });
  ReplayReport run = optrace::replay(trace, cpu());
  require_all_ok(run);
  ReplayReport check = optrace::replay(trace, cpu(ReplayMode::check));
  for (const char* op : {"bernoulli.p", "native_dropout.default", "uniform_.default", "randperm.default"}) {
    INFO(op);
    CHECK(result_of(check, op).status == ReplayStatus::skipped);
    CHECK(result_of(check, op).message == "random op: ran, outputs not compared (they depend on the random state)");
  }
  for (const char* op : {"empty.memory_format", "empty_like.default"}) {
    CHECK(result_of(check, op).status == ReplayStatus::skipped);
    CHECK(result_of(check, op).message == "creation op: ran, outputs not compared (uninitialized memory)");
  }
  CHECK(result_of(check, "relu.default").status == ReplayStatus::ok);
  CHECK(check.all_ok());
}

TEST_CASE("replay: check mode finds outputs that differ from the reference", "[replay]") {
  // A float32 matmul really differs from the float64 reference by its rounding: within the
  // default float32 tolerance, beyond a tolerance of zero.
  OpTrace trace = one("mm.default", "[[16, 64], [64, 16]]", R"(["torch.float32", "torch.float32"])", "[null, null]");
  ReplayReport loose = optrace::replay(trace, cpu(ReplayMode::check));
  REQUIRE(loose.results.size() == 1);
  CHECK(loose.results[0].status == ReplayStatus::ok);
  REQUIRE(loose.results[0].max_abs_error);
  CHECK(*loose.results[0].max_abs_error > 0);
  CHECK(*loose.results[0].max_abs_error < 1e-4);

  ReplayReport strict = optrace::replay(trace, cpu(ReplayMode::check).atol(0).rtol(0));
  const ReplayResult& r = strict.results[0];
  CHECK(r.status == ReplayStatus::mismatch);
  CHECK_THAT(r.message, OPTRACE_CONTAINS("output 0: "));
  CHECK_THAT(r.message, OPTRACE_CONTAINS(" of 256 elements differ beyond atol 0 + rtol 0 * |ref|"));
  CHECK(*r.max_abs_error == *loose.results[0].max_abs_error);
  CHECK_FALSE(strict.all_ok());

  SECTION("float64 inputs match the float64 reference exactly enough") {
    OpTrace f64 = one("mm.default", "[[16, 64], [64, 16]]", R"(["torch.float64", "torch.float64"])", "[null, null]");
    ReplayReport report = optrace::replay(f64, cpu(ReplayMode::check).atol(0).rtol(0));
    CHECK(report.results[0].status == ReplayStatus::ok);
    CHECK(*report.results[0].max_abs_error == 0.0);
  }
  SECTION("float16 is held to its own tolerance") {
    OpTrace f16 = one("add.Tensor", "[[64], [64]]", R"(["torch.float16", "torch.float16"])", "[null, null]");
    ReplayReport report = optrace::replay(f16, cpu(ReplayMode::check));
    CHECK(report.results[0].status == ReplayStatus::ok);
    CHECK(*report.results[0].max_abs_error > 0);  // float16 rounding, compared with float64
  }
}

TEST_CASE("replay: non-tensor arguments are rebuilt from the schema", "[replay]") {
  OpTrace trace = trace_of({
      {"masked_fill.Scalar",
       {input_json("masked_fill.Scalar", "[[2, 8], [2, 8], null]", R"(["torch.float32", "torch.bool", "<class 'float'>"])",
                   "[null, null, -Infinity]")}},
      {"convolution.default",
       {input_json("convolution.default", "[[1, 4, 6, 6], [8, 4, 3, 3], null, null, null, null, null, null, null]",
                   R"(["torch.float32", "torch.float32", "<class 'NoneType'>", "<class 'list'>", "<class 'list'>", "<class 'list'>", "<class 'bool'>", "<class 'list'>", "<class 'int'>"])",
                   "[null, null, null, [1, 1], [1, 1], [1, 1], false, [0, 0], 1]")}},
      {"sum.dim_IntList",
       {input_json("sum.dim_IntList", "[[3, 4], null, null]", R"(["torch.float32", "<class 'list'>", "<class 'bool'>"])",
                   "[null, [1], true]")}},
      {"_to_copy.default",
       {input_json("_to_copy.default", "[[3, 4]]", R"(["torch.float32"])", "[null]", "{}",
                   R"(, "kwargs": {"dtype": {"shape": null, "dtype": "<class 'torch.dtype'>", "value": "torch.float16"}})")}},
      {"div.Tensor_mode",
       {input_json("div.Tensor_mode", "[[5], [5]]", R"(["torch.float32", "torch.float32"])", "[null, null]", "{}",
                   R"(, "kwargs": {"rounding_mode": {"shape": null, "dtype": "<class 'str'>", "value": "trunc"}})")}},
      {"add.Tensor", {input_json("add.Tensor", "[[5], null]", R"(["torch.float32", "<class 'int'>"])", "[null, 2]")}},
      {"native_layer_norm.default",
       {input_json("native_layer_norm.default", "[[2, 8], null, [8], [8], null]",
                   R"(["torch.float32", "<class 'list'>", "torch.float32", "torch.float32", "<class 'float'>"])",
                   "[null, [8], null, null, 1e-05]")}},
      {"split.Tensor", {input_json("split.Tensor", "[[6, 2], null]", R"(["torch.float32", "<class 'int'>"])", "[null, 2]")}},
      {"clamp.default", {input_json("clamp.default", "[[6], null, null]", R"(["torch.float32", "<class 'NoneType'>", "<class 'float'>"])",
                                    "[null, null, 0.5]")}},
      {"full.default", {input_json("full.default", "[null, null]", R"(["<class 'list'>", "<class 'float'>"])", "[[2, 3], 1.5]")}},
      {"arange.start", {input_json("arange.start", "[null, null]", R"(["<class 'int'>", "<class 'int'>"])", "[2, 9]")}},
      {"_softmax.default", {input_json("_softmax.default", "[[2, 5], null, null]",
                                       R"(["torch.float32", "<class 'int'>", "<class 'bool'>"])", "[null, -1, false]")}},
      {"topk.default", {input_json("topk.default", "[[10], null]", R"(["torch.float32", "<class 'int'>"])", "[null, 3]")}},
      {"stack.default", {input_json("stack.default", "[null, null]", R"(["<class 'list'>", "<class 'int'>"])",
                                    R"([{"tensor_list_ref": 0}, 1])",
                                    R"({"0": {"length": 3, "shapes": [[2, 2], [2, 2], [2, 2]], "dtypes": ["torch.float32", "torch.float32", "torch.float32"]}})")}},
      {"clone.default",
       {input_json("clone.default", "[[1, 3, 2, 2]]", R"(["torch.float32"])", "[null]", "{}",
                   R"(, "kwargs": {"memory_format": {"shape": null, "dtype": "<class 'torch.memory_format'>", "value": "torch.channels_last"}})")}},
      {"new_zeros.default", {input_json("new_zeros.default", "[[2], null]", R"(["torch.bfloat16", "<class 'list'>"])", "[null, [4, 4]]")}},
  });
  ReplayReport report = optrace::replay(trace, cpu(ReplayMode::check));
  require_all_ok(report);
  require_meta_ok(optrace::replay(trace, cpu().device(c10::kMeta)));
}

TEST_CASE("replay: strided views get a storage that holds them", "[replay]") {
  // Traced tensors are often views of a larger buffer (q, k, v split from one projection):
  // _reshape_alias and as_strided then view storage beyond the tensor's own elements.
  OpTrace trace = trace_of({
      {"_reshape_alias.default",
       {input_json("_reshape_alias.default", "[[1, 4, 7, 8], null, null]", R"(["torch.float32", "<class 'list'>", "<class 'list'>"])",
                   "[null, [4, 7, 8], [8, 96, 1]]")}},
      {"as_strided.default",
       {input_json("as_strided.default", "[[4, 4], null, null, null]",
                   R"(["torch.float32", "<class 'list'>", "<class 'list'>", "<class 'int'>"])", "[null, [3, 3], [5, 1], 7]")}},
      {"as_strided_scatter.default",
       {input_json("as_strided_scatter.default", "[[2, 3], [2, 2], null, null]",
                   R"(["torch.float32", "torch.float32", "<class 'list'>", "<class 'list'>"])", "[null, null, [2, 2], [1, 4]]")}},
  });
  const auto& in = trace.find("_reshape_alias.default")->unique_inputs[0];
  auto plan = optrace::detail::PlanBuilder(in, c10::kCPU).build("_reshape_alias.default");
  CHECK(plan.tensors[0].min_storage == 1 + 3 * 8 + 6 * 96 + 7);
  at::Tensor x = optrace::detail::materialize_plan(plan, c10::kCPU, 0, 1 << 20)[0];
  CHECK(x.sizes() == c10::IntArrayRef({1, 4, 7, 8}));
  CHECK(static_cast<int64_t>(x.storage().nbytes()) == 4 * (1 + 3 * 8 + 6 * 96 + 7));
  ReplayReport report = optrace::replay(trace, cpu(ReplayMode::check));
  require_all_ok(report);
  for (const ReplayResult& r : report.results) CHECK(*r.max_abs_error == 0.0);
}

TEST_CASE("replay: filters and the memory budget", "[replay]") {
  const OpTrace trace = peer_mlp();
  ReplayReport only = optrace::replay(trace, cpu().ops({"addmm", "relu.default"}));
  CHECK(only.results.size() == 6);
  for (const ReplayResult& r : only.results) CHECK((r.op == "addmm.default" || r.op == "relu.default"));
  ReplayReport exclude = optrace::replay(trace, cpu().exclude_ops({"addmm.default"}));
  CHECK(exclude.results.size() == static_cast<size_t>(trace.unique_input_count()) - 4);
  ReplayReport first = optrace::replay(trace, cpu().max_inputs_per_op(1));
  CHECK(first.results.size() == trace.size());
  ReplayReport small = optrace::replay(trace, cpu().memory_budget_bytes(100));
  const ReplayResult t = result_of(small, "t.default");  // 5 x 20 floats: 400 bytes
  CHECK(t.status == ReplayStatus::skipped);
  CHECK(t.message == "inputs need 400 bytes on cpu, over the memory budget of 100 bytes");
  CHECK(small.all_ok());
  // The check's float64 CPU copies count too: 800 bytes for the 400 of t.default's input.
  const ReplayReport checked = optrace::replay(trace, cpu(ReplayMode::check).memory_budget_bytes(500));
  const ReplayResult ref = result_of(checked, "t.default");
  CHECK(ref.status == ReplayStatus::skipped);
  CHECK(ref.message == "ran; not compared: the CPU reference needs 800 bytes, over the memory budget of 500 bytes");
  // Meta tensors take no memory: nothing is over any budget.
  ReplayReport meta = optrace::replay(trace, cpu().memory_budget_bytes(0).device(c10::kMeta));
  require_meta_ok(meta);
  CHECK(result_of(meta, "t.default").status == ReplayStatus::ok);
}

TEST_CASE("replay: stop_when stops before the next input and the report says so", "[replay]") {
  const OpTrace trace = peer_mlp();
  int asked = 0;
  const ReplayReport report = optrace::replay(trace, cpu().stop_when([&asked] { return ++asked > 5; }));
  CHECK(asked == 6);
  CHECK(report.results.size() == 5);
  CHECK(report.planned == 12);
  CHECK_FALSE(report.complete);
  CHECK_THAT(report.summary(), OPTRACE_CONTAINS("; INCOMPLETE: stopped after 5 of 12 inputs"));
  CHECK_THAT(report.to_json(), OPTRACE_CONTAINS("\"complete\": false"));
  CHECK_THAT(report.to_json(), OPTRACE_CONTAINS("\"planned\": 12"));
  const ReplayReport whole = optrace::replay(trace, cpu().stop_when([] { return false; }));
  CHECK(whole.complete);
  CHECK(whole.results.size() == 12);
  CHECK_THAT(whole.to_json(), OPTRACE_CONTAINS("\"complete\": true"));
}

TEST_CASE("replay: per-op totals, the slowest inputs, what is not ok", "[replay]") {
  const OpTrace relu = trace_of({{"relu.default", {input_json("relu.default", "[[2, 3]]", R"(["torch.float32"])", "[null]")}}});
  OpTrace trace = relu;
  trace.merge(relu).merge(relu);  // one input, 3 calls
  trace.merge(trace_of(
      {{"mm.default", {input_json("mm.default", "[[2, 3], [4, 5]]", R"(["torch.float32", "torch.float32"])", "[null, null]")}}}));
  const ReplayReport run = optrace::replay(trace, cpu());
  const auto totals = run.op_totals();
  REQUIRE(totals.size() == 2);
  CHECK(totals[0].op == "relu.default");
  CHECK((totals[0].inputs == 1 && totals[0].calls == 3 && totals[0].ok == 1 && !totals[0].total_ms));
  CHECK((totals[1].op == "mm.default" && totals[1].error == 1));
  std::ostringstream table;
  run.print_op_totals(table);
  // The op with an error first; shares of the calls.
  CHECK(table.str() ==
        "op            inputs  calls  ok  mismatch  error  skipped  call share\n"
        "mm.default         1      1   0         0      1        0       25.0%\n"
        "relu.default       1      3   1         0      0        0       75.0%\n");
  std::ostringstream top;
  run.print_op_totals(top, 1);
  CHECK_THAT(top.str(), OPTRACE_CONTAINS("(1 more ops; --top to show more)\n"));
  std::ostringstream not_ok;
  run.print_not_ok(not_ok);
  CHECK(not_ok.str() == "mm.default #0 error: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)\n    inputs: f32[2, 3], f32[4, 5]\n");
  std::ostringstream summary;
  summary << run;
  CHECK(summary.str() == run.summary());

  const ReplayReport timed = optrace::replay(trace, cpu(ReplayMode::time).repeats(2).warmup(0));
  const auto t = timed.op_totals();
  REQUIRE(t[0].total_ms);
  CHECK(*t[0].total_ms == *timed.results[0].median_ms * 3);  // median x recorded calls
  std::ostringstream slow;
  timed.print_slowest(slow, 5);
  CHECK_THAT(slow.str(), OPTRACE_STARTS_WITH("op            #  count  median ms  total ms  time share  inputs\nrelu.default  0      3  "));
  CHECK_THAT(slow.str(), OPTRACE_CONTAINS("100.0%  f32[2, 3]\n"));
}

TEST_CASE("replay: the progress bar shows the rate and the time left", "[replay]") {
  using optrace::detail::ProgressBar;
  CHECK(ProgressBar::line(30, 120, 10.0, "addmm.default") ==
        "[#######.......................] 30/120 3.0/s 30s left addmm.default                           ");
  CHECK(ProgressBar::line(0, 120, 0.5, "relu.default").find(" 0/120 0.0/s -- left relu.default") != std::string::npos);
  CHECK(ProgressBar::duration_text(59.4) == "59s");
  CHECK(ProgressBar::duration_text(185) == "3m05s");
  CHECK(ProgressBar::duration_text(7620) == "2h07m");
}

TEST_CASE("replay: time mode reports a median", "[replay]") {
  ReplayReport report = optrace::replay(peer_mlp(), cpu(ReplayMode::time).warmup(1).repeats(3).flush_cache(true).flush_bytes(1 << 20));
  require_all_ok(report);
  for (const ReplayResult& r : report.results) {
    REQUIRE(r.median_ms);
    CHECK(*r.median_ms > 0);
    CHECK_FALSE(r.max_abs_error);
  }
  std::ostringstream table;
  report.print_table(table);
  CHECK_THAT(table.str(), OPTRACE_CONTAINS("median ms"));
}

TEST_CASE("replay: report as table JSON and CSV", "[replay]") {
  OpTrace trace = trace_of({
      {"relu.default", {input_json("relu.default", "[[2, 3]]", R"(["torch.float32"])", "[null]")}},
      {"no_such_op.default", {input_json("no_such_op.default", "[[2, 3]]", R"(["torch.float32"])", "[null]")}},
  });
  ReplayReport report = optrace::replay(trace, cpu(ReplayMode::check));
  SECTION("json") {
    const std::string path = optrace_test::temp_path("replay_report.json");
    report.save_json(path);
    auto doc = optrace::json::Document::load(path);
    auto root = doc->root();
    CHECK(root["device"].as_string() == "cpu");
    CHECK(root["mode"].as_string() == "check");
    CHECK(root["summary"]["ok"].as_int() == 1);
    CHECK(root["summary"]["error"].as_int() == 0);
    CHECK(root["summary"]["skipped"].as_int() == 1);
    CHECK(root["summary"]["total"].as_int() == 2);
    std::vector<optrace::json::Node> results;
    for (optrace::json::Node v : root["results"].array()) results.push_back(v);
    REQUIRE(results.size() == 2);
    auto first = results[0];
    CHECK(first["op"].as_string() == "relu.default");
    CHECK(first["status"].as_string() == "ok");
    CHECK(first["message"].as_string() == "");
    CHECK(first["inputs"].as_string() == "f32[2, 3]");
    CHECK(first["max_abs_error"].as_double() == 0.0);
    CHECK(first["median_ms"].is_null());
    auto second = results[1];
    CHECK(second["op"].as_string() == "no_such_op.default");
    CHECK(second["status"].as_string() == "skipped");
    CHECK(second["message"].as_string() == "not replayable: this libtorch has no operator aten::no_such_op (renamed or removed since the trace was recorded?)");
    CHECK(second["max_abs_error"].is_null());
  }
  SECTION("csv") {
    const std::string csv = report.to_csv();
    CHECK(csv ==
          "op,index,count,status,max_abs_error,max_rel_error,median_ms,inputs,message\n"
          "relu.default,0,1,ok,0.0,0.0,,\"f32[2, 3]\",\n"
          "no_such_op.default,0,1,skipped,,,,\"f32[2, 3]\",not replayable: this libtorch has no operator aten::no_such_op (renamed or removed since the trace was recorded?)\n");
    const std::string path = optrace_test::temp_path("replay_report.csv");
    report.save_csv(path);
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    CHECK(ss.str() == csv);
  }
  SECTION("table") {
    std::ostringstream out;
    report.print_table(out);
    const std::string table = out.str();
    CHECK_THAT(table, OPTRACE_CONTAINS("op                  #  count  status   max abs  max rel  inputs     message"));
    CHECK_THAT(table, OPTRACE_CONTAINS("relu.default        0      1  ok             0        0  f32[2, 3]"));
    CHECK_THAT(table, OPTRACE_CONTAINS("1 ok, 0 mismatch, 0 error, 1 skipped (2 unique inputs on cpu, check mode, "));
  }
}

TEST_CASE("replay: options and python value strings", "[replay]") {
  using namespace optrace::detail;
  CHECK(dtype_from_python("torch.float32") == c10::kFloat);
  CHECK(dtype_from_python("torch.long") == c10::kLong);
  CHECK(dtype_from_python("torch.bfloat16") == c10::kBFloat16);
  CHECK_FALSE(dtype_from_python("float32"));
  CHECK(memory_format_from_python("torch.channels_last") == c10::MemoryFormat::ChannelsLast);
  CHECK(layout_from_python("torch.strided") == c10::kStrided);
  CHECK(*parse_complex("(1+2j)") == c10::complex<double>(1, 2));
  CHECK(*parse_complex("(-1.5e-3-2j)") == c10::complex<double>(-1.5e-3, -2));
  CHECK(*parse_complex("3j") == c10::complex<double>(0, 3));
  CHECK(*parse_complex("1.+2.j") == c10::complex<double>(1, 2));  // IValue's printing (Kineto)
  CHECK_FALSE(parse_complex("abc"));
  CHECK(dispatcher_name("addmm.default") == c10::OperatorName("aten::addmm", ""));
  CHECK(dispatcher_name("add.Tensor") == c10::OperatorName("aten::add", "Tensor"));
  CHECK(dispatcher_name("myops::f.out") == c10::OperatorName("myops::f", "out"));
  CHECK(dispatcher_name("relu") == c10::OperatorName("aten::relu", ""));
  CHECK(display_name("aten::addmm", "") == "addmm.default");
  CHECK(display_name("myops::f", "out") == "f.out");
  CHECK(base_name("aten::scatter_add.default") == "scatter_add");

  ReplayOptions o;
  CHECK(o.mode() == ReplayMode::run);
  CHECK(o.warmup() == 2);
  CHECK(o.repeats() == 10);
  CHECK(o.device() == (torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU)));
  CHECK_FALSE(o.atol());
  CHECK(o.memory_budget_bytes() == int64_t{4} << 30);
  CHECK_THROWS_WITH(ReplayOptions().repeats(0), "optrace: ArgumentError: ReplayOptions::repeats: need >= 1, got 0");
  CHECK(o.selects("addmm.default"));
  CHECK(ReplayOptions().ops({"addmm"}).selects("addmm.default"));
  CHECK_FALSE(ReplayOptions().ops({"addmm"}).selects("add.Tensor"));
  CHECK_FALSE(ReplayOptions().exclude_ops({"add.Tensor"}).selects("add.Tensor"));
}

TEST_CASE("replay: a trace recorded from a small model", "[replay]") {
  torch::manual_seed(3);
  torch::NoGradGuard no_grad;
  torch::nn::Embedding embedding(50, 16);
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({16}));
  torch::nn::Linear head(16, 10);
  struct Batch {
    torch::Tensor ids, targets, gather_index, select, mask;
  };
  std::vector<Batch> batches;
  for (int64_t b : {2, 3}) {
    batches.push_back({torch::randint(0, 50, {b, 5}), torch::randint(0, 10, {b * 5}), torch::randint(0, 10, {b, 5, 2}),
                       torch::tensor({0, 4, 2}), torch::rand({b, 5, 10}) > 0.5});
  }
  optrace::OpTracer tracer(optrace::OpTracerOptions().extended(true));
  tracer.start();
  for (const Batch& x : batches) {
    torch::Tensor logits = head(torch::gelu(norm(embedding(x.ids))));
    torch::nn::functional::cross_entropy(logits.reshape({-1, 10}), x.targets);
    logits.gather(2, x.gather_index);
    logits.index_select(1, x.select);
    torch::softmax(logits.masked_fill(x.mask, -std::numeric_limits<double>::infinity()), -1);
  }
  tracer.stop();
  const OpTrace trace = tracer.trace();
  for (const char* op : {"embedding.default", "nll_loss_forward.default", "gather.default", "index_select.default",
                         "masked_fill.Scalar", "_softmax.default", "native_layer_norm.default", "gelu.default"}) {
    INFO(op);
    CHECK(trace.find(op) != nullptr);
  }
  require_all_ok(optrace::replay(trace, cpu(ReplayMode::check)));
  require_meta_ok(optrace::replay(trace, cpu().device(c10::kMeta)));
  // Through the file, as another process would get it.
  const std::string path = optrace_test::temp_path("recorded_model.hf_op_trace.json");
  trace.save(path);
  require_all_ok(optrace::replay(OpTrace::load(path), cpu(ReplayMode::check)));
}

TEST_CASE("replay: the example of docs/replay.md", "[replay]") {
  // The first example of docs/replay.md (compiled there, run here), on the peer trace, with the
  // files written to the build folder.
  const std::string trace_path = optrace_test::data_path("peer/mlp.hf_op_trace.json");
  const std::string json_path = optrace_test::temp_path("readme_replay.json");
  const std::string csv_path = optrace_test::temp_path("readme_times.csv");
  std::ostringstream out;
  // --- docs/replay.md begin (paths and std::cout replaced)
  optrace::OpTrace trace = optrace::OpTrace::load(trace_path);

  // Does every op run here? (CUDA when available, else the CPU.)
  optrace::ReplayReport run = optrace::replay(trace);
  out << run.summary() << "\n";

  // Compare every op with the CPU in float64, float32 outputs within 1e-5.
  optrace::ReplayReport check = optrace::replay(
      trace, optrace::ReplayOptions().mode(optrace::ReplayMode::check).atol(1e-5).rtol(1e-5));
  check.print_table(out);
  check.save_json(json_path);  // {"results": [{"op", "index", "status", "message", ...}, ...]}
  for (const optrace::ReplayResult& r : check.results)
    if (r.status == optrace::ReplayStatus::mismatch) out << r.op << " #" << r.index << ": " << r.message << "\n";

  // Time the matmuls: median of 20 calls after 5 warm-up calls (.flush_cache(true): from a cold cache).
  optrace::ReplayReport time = optrace::replay(trace, optrace::ReplayOptions()
                                                          .mode(optrace::ReplayMode::time)
                                                          .ops({"addmm", "mm", "bmm"})
                                                          .warmup(5)
                                                          .repeats(20));
  time.save_csv(csv_path);
  // --- docs/replay.md end
  CHECK(run.all_ok());
  CHECK(check.all_ok());
  CHECK(time.results.size() == 4);
  CHECK(time.all_ok());
  CHECK_THAT(out.str(), OPTRACE_CONTAINS("12 ok, 0 mismatch, 0 error, 0 skipped"));
}

TEST_CASE("replay: the peer mlp trace on cuda", "[replay][cuda]") {
  if (!torch::cuda::is_available()) OPTRACE_SKIP("no CUDA device");
  const OpTrace trace = peer_mlp();
  ReplayReport run = optrace::replay(trace, ReplayOptions().progress(false));
  CHECK(run.device.is_cuda());
  require_all_ok(run);
  require_all_ok(optrace::replay(trace, ReplayOptions().device(c10::kCUDA).mode(ReplayMode::check).progress(false)));
  require_all_ok(optrace::replay(index_ops(), ReplayOptions().device(c10::kCUDA).mode(ReplayMode::check).progress(false)));
  ReplayReport timed = optrace::replay(trace, ReplayOptions().device(c10::kCUDA).mode(ReplayMode::time).flush_cache(true).progress(false));
  require_all_ok(timed);
  for (const ReplayResult& r : timed.results) CHECK(*r.median_ms > 0);
}
