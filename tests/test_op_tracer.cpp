// Tests for optrace/op_tracer.hpp: recording matches the reference Python tracer.
#include <optrace/op_tracer.hpp>

#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/frontend/ir_emitter.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <thread>

#include "optrace_catch.hpp"

namespace {

using optrace::json::Node;

// Strict equality of parsed JSON: objects as key sets, lists in order, 1 != 1.0, NaN == NaN.
bool json_equal(const Node& a, const Node& b, std::string& where) {
  auto differ = [&](const std::string& why) {
    where = a.path() + ": " + why;
    return false;
  };
  if (a.is_object() != b.is_object() || a.is_array() != b.is_array() || a.is_string() != b.is_string() ||
      a.is_null() != b.is_null() || a.is_bool() != b.is_bool() || a.is_int() != b.is_int())
    return differ(a.describe() + " vs " + b.describe());
  if (a.is_object()) {
    if (a.size() != b.size()) return differ("different keys");
    for (auto [key, va] : a.object()) {
      Node vb(b);
      if (!b.find(key, vb)) return differ("key " + std::string(key) + " missing");
      if (!json_equal(va, vb, where)) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return differ("lengths " + std::to_string(a.size()) + " vs " + std::to_string(b.size()));
    auto ib = b.array().begin();
    for (Node va : a.array()) {
      if (!json_equal(va, *ib, where)) return false;
      ++ib;
    }
    return true;
  }
  if (a.is_null()) return true;
  if (a.is_bool()) return a.as_bool() == b.as_bool() || differ("bools differ");
  if (a.is_int()) return a.as_int() == b.as_int() || differ(a.describe() + " vs " + b.describe());
  if (a.is_string()) return a.as_string() == b.as_string() || differ(a.describe() + " vs " + b.describe());
  double x = a.as_double(), y = b.as_double();
  return x == y || (std::isnan(x) && std::isnan(y)) || differ(a.describe() + " vs " + b.describe());
}

void check_same_json(const std::string& got, const std::string& expected) {
  auto a = optrace::json::Document::parse(got);
  auto b = optrace::json::Document::parse(expected);
  std::string where;
  bool same = json_equal(a->root(), b->root(), where);
  INFO("got:      " << got);
  INFO("expected: " << expected);
  INFO("first difference at " << where);
  CHECK(same);
}

// Inputs as the peer data describe them: {"shape": [...], "dtype": "torch.float32"}; floats
// random normal, integers arange(n) % 7 + 1, bools arange(n) % 2 == 0.
std::vector<std::vector<c10::IValue>> make_calls(const std::string& inputs_json) {
  auto doc = optrace::json::Document::parse(inputs_json);
  std::vector<std::vector<c10::IValue>> calls;
  for (Node call : doc->root().array()) {
    std::vector<c10::IValue> args;
    for (Node spec : call.array()) {
      std::vector<int64_t> shape = spec["shape"].as_int_list();
      auto dtype = optrace::scalar_type_from_python(spec["dtype"].as_string());
      REQUIRE(dtype.has_value());
      int64_t n = 1;
      for (int64_t s : shape) n *= s;
      if (c10::isFloatingType(*dtype)) args.emplace_back(torch::randn(shape, torch::dtype(*dtype)));
      else if (*dtype == c10::kBool) args.emplace_back((torch::arange(n) % 2 == 0).reshape(shape));
      else args.emplace_back((torch::arange(n) % 7 + 1).to(*dtype).reshape(shape));
    }
    calls.push_back(std::move(args));
  }
  return calls;
}

// Runs `source`'s forward over the calls under no_grad, unoptimized graph executor, traced.
// `backward`: as dispatch_tracer.py --backward: floating inputs require grad and every call is
// followed by forward(...).sum().backward(), traced too.
optrace::OpTrace trace_script(const std::string& source, const std::string& inputs_json,
                              const optrace::OpTracerOptions& options = {}, bool backward = false) {
  auto cu = torch::jit::compile(source);
  auto calls = make_calls(inputs_json);
  torch::jit::setGraphExecutorOptimize(false);
  std::optional<torch::NoGradGuard> no_grad;
  if (!backward) no_grad.emplace();
  for (auto& args : calls)
    for (auto& a : args)
      if (backward && a.isTensor() && a.toTensor().is_floating_point()) a.toTensor().requires_grad_(true);
  optrace::OpTracer tracer(options);
  tracer.start();
  for (auto& args : calls) {
    c10::IValue out = cu->get_function("forward")(args);
    if (backward) out.toTensor().sum().backward();
  }
  tracer.stop();
  torch::jit::setGraphExecutorOptimize(true);
  return tracer.trace();
}

using optrace_test::python_torch_available;

// One model for tests/python/dispatch_tracer.py. `backward`: see trace_script; detach.default is
// left out there: how many AccumulateGrad runs depends on reference counts, which the Python
// tracer's own references raise (it records two where a C++ program runs one).
struct PythonJob {
  std::string name, source, inputs_json;
  bool backward = false;
};

// Runs tests/python/dispatch_tracer.py over the same sources and inputs, all in one Python
// process (torch's import takes seconds), and returns each job's trace.
// `batch` names the job list: ctest runs the tests that call this at the same time.
std::vector<std::string> python_traces(const std::string& batch, const std::vector<PythonJob>& jobs) {
  std::string list;
  std::vector<std::string> outs;
  for (const PythonJob& job : jobs) {
    std::string src = optrace_test::temp_path(job.name + ".ts");
    std::string in = optrace_test::temp_path(job.name + ".inputs.json");
    outs.push_back(optrace_test::temp_path(job.name + ".py_trace.json"));
    optrace::detail::write_file_atomic(src, job.source);
    optrace::detail::write_file_atomic(in, job.inputs_json);
    list += src + " " + in + " " + outs.back() + (job.backward ? " --backward --exclude detach.default" : "") + "\n";
  }
  const std::string jobs_path = optrace_test::temp_path(batch + ".dispatch_tracer_jobs.txt");
  optrace::detail::write_file_atomic(jobs_path, list);
  std::string script = std::string(OPTRACE_TEST_DATA) + "/../python/dispatch_tracer.py";
  std::string cmd = std::string(OPTRACE_PYTHON) + " " + script + " --batch " + jobs_path;
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::vector<std::string> traces;
  for (const std::string& out : outs) traces.push_back(optrace::detail::read_file(out));
  return traces;
}

struct Model {
  const char* name;
  const char* source;
  const char* inputs;
};

const Model kModels[] = {
    {"conv", R"(
def forward(x: Tensor, w: Tensor, b: Tensor):
    y = torch.conv2d(x, w, b, [1, 1], [1, 1])
    y = torch.relu_(y)
    y = torch.max_pool2d(y, [2, 2])
    z = torch.batch_norm(y, None, None, None, None, True, 0.1, 1e-5, False)
    return torch.flatten(z, 1).sum(1)
)",
     R"([[{"shape": [1, 3, 8, 8], "dtype": "torch.float32"}, {"shape": [4, 3, 3, 3], "dtype": "torch.float32"}, {"shape": [4], "dtype": "torch.float32"}],
         [{"shape": [2, 3, 8, 8], "dtype": "torch.float32"}, {"shape": [4, 3, 3, 3], "dtype": "torch.float32"}, {"shape": [4], "dtype": "torch.float32"}],
         [{"shape": [1, 3, 8, 8], "dtype": "torch.float32"}, {"shape": [4, 3, 3, 3], "dtype": "torch.float32"}, {"shape": [4], "dtype": "torch.float32"}]])"},
    {"attention", R"(
def forward(ids: Tensor, table: Tensor, g: Tensor, beta: Tensor):
    e = torch.embedding(table, ids)
    h = torch.layer_norm(e, [8], g, beta, 1e-5)
    scores = torch.matmul(h, h.transpose(1, 2)) / 2.0
    mask = torch.triu(torch.ones([ids.size(1), ids.size(1)]), 1) > 0.5
    scores = scores.masked_fill(mask, float('-inf'))
    p = torch.softmax(scores, -1)
    out = torch.bmm(p, h)
    return torch.cat([out, e], -1).mean([1], keepdim=True)
)",
     R"([[{"shape": [2, 5], "dtype": "torch.int64"}, {"shape": [10, 8], "dtype": "torch.float32"}, {"shape": [8], "dtype": "torch.float32"}, {"shape": [8], "dtype": "torch.float32"}],
         [{"shape": [2, 5], "dtype": "torch.int64"}, {"shape": [10, 8], "dtype": "torch.float32"}, {"shape": [8], "dtype": "torch.float32"}, {"shape": [8], "dtype": "torch.float32"}]])"},
    {"arguments", R"(
def forward(x: Tensor, idx: Tensor):
    a = x.to(dtype=6)
    a = x.half()
    b = torch.sum(x, [0], True)
    c = x.add(1.5, alpha=2)
    d = torch.clamp(x, None, 2.0)
    e = torch.zeros([2, 3], dtype=4)
    f = x.clone().mul_(2)
    g = torch.index_select(x, 0, idx)
    h = torch.transpose(x, 0, 1).contiguous()
    i = torch.full([2], 3, dtype=7)
    j = torch.where(x > 0, x, torch.zeros_like(x))
    k = x.new_zeros([3]).fill_(float('nan'))
    m = torch.stack([x, x], 0).view([-1]).unsqueeze(0).expand([2, -1])
    n = torch.sum(x, 1, dtype=5)
    return a.float().sum() + b.sum() + c.sum() + d.sum() + e.sum() + f.sum() + g.sum() + h.sum() + i.sum() + j.sum() + k.sum() + m.sum() + n.float().sum()
)",
     R"([[{"shape": [3, 4], "dtype": "torch.float32"}, {"shape": [2], "dtype": "torch.int64"}],
         [{"shape": [3, 4], "dtype": "torch.float32"}, {"shape": [2], "dtype": "torch.int64"}],
         [{"shape": [4, 4], "dtype": "torch.float32"}, {"shape": [3], "dtype": "torch.int64"}]])"},
};

// One model per context rule (dispatcher.hpp): it takes the composite kernel's branch, so a C++
// program runs `plain` where the reference tracer records `recorded`.
struct RuleModel {
  const char* name;
  const char* plain;     // what the C++ branch runs
  const char* recorded;  // what the reference records (== plain: an argument differs)
  bool since_2_0;        // the branch exists from libtorch 2.0
  bool backward;         // the branch is in a backward helper: run forward(...).sum().backward()
  const char* source;
  const char* inputs;
};

#define OPTRACE_F32(...) "{\"shape\": [" #__VA_ARGS__ "], \"dtype\": \"torch.float32\"}"
#define OPTRACE_I64(...) "{\"shape\": [" #__VA_ARGS__ "], \"dtype\": \"torch.int64\"}"

const RuleModel kRuleModels[] = {
    {"linear_4d", "add_.Tensor", "add.Tensor", false, false, R"(
def forward(x: Tensor, w: Tensor, b: Tensor):
    return torch.linear(x.transpose(1, 2), w, b)
)", "[[" OPTRACE_F32(2, 3, 4, 8) "," OPTRACE_F32(5, 8) "," OPTRACE_F32(5) "]]"},
    {"reshape_strided", "_reshape_alias.default", "view.default", true, false, R"(
def forward(x: Tensor):
    return x.transpose(0, 1).reshape([3, 2, 2, 2])
)", "[[" OPTRACE_F32(2, 3, 4) "]]"},
    {"sdpa_math", "add_.Tensor", "add.Tensor", true, false, R"(
def forward(q: Tensor, k: Tensor, v: Tensor, mask: Tensor):
    return torch.scaled_dot_product_attention(q, k, v, mask)
)", "[[" OPTRACE_F32(2, 4, 8) "," OPTRACE_F32(2, 4, 8) "," OPTRACE_F32(2, 4, 8) "," OPTRACE_F32(4, 4) "]]"},
    {"matrix_rank", "sum.IntList_out", "sum.dim_IntList", true, false, R"(
def forward(x: Tensor):
    return torch.linalg_matrix_rank(x)
)", "[[" OPTRACE_F32(4, 4) "]]"},
    {"eigvalsh", "_linalg_eigh.default", "_linalg_eigh.default", false, false, R"(
def forward(x: Tensor):
    return torch.linalg_eigvalsh(x + x.t())
)", "[[" OPTRACE_F32(4, 4) "]]"},
    {"svdvals", "_linalg_svd.default", "_linalg_svd.default", false, false, R"(
def forward(x: Tensor):
    return torch.linalg_svdvals(x)
)", "[[" OPTRACE_F32(4, 3) "]]"},
    {"eigvals", "_linalg_eigvals.default", "linalg_eig.default", true, false, R"(
def forward(x: Tensor):
    return torch.view_as_real(torch.linalg_eigvals(x))
)", "[[" OPTRACE_F32(4, 4) "]]"},
    {"index_select_backward", "index_add_.default", "index_add.default", false, true, R"(
def forward(x: Tensor, idx: Tensor):
    return torch.index_select(x, 0, idx)
)", "[[" OPTRACE_F32(3, 4) "," OPTRACE_I64(2) "]]"},
    {"gather_backward", "scatter_add_.default", "scatter_add.default", false, true, R"(
def forward(x: Tensor, idx: Tensor):
    return torch.gather(x, 1, idx.unsqueeze(0).expand([3, 2]))
)", "[[" OPTRACE_F32(3, 4) "," OPTRACE_I64(2) "]]"},
    {"cummax_backward", "scatter_add_.default", "scatter_add.default", false, true, R"(
def forward(x: Tensor):
    v, i = torch.cummax(x, 1)
    return v
)", "[[" OPTRACE_F32(3, 4) "]]"},
    {"masked_select_backward", "masked_scatter_.default", "masked_scatter.default", false, true, R"(
def forward(x: Tensor):
    return torch.masked_select(x, x == x)
)", "[[" OPTRACE_F32(3, 4) "]]"},
    {"trace_backward", "index_fill_.int_Tensor", "index_fill.int_Tensor", false, true, R"(
def forward(x: Tensor):
    return torch.trace(x)
)", "[[" OPTRACE_F32(4, 4) "]]"},
    {"max_dim_backward", "scatter_.src", "scatter.src", false, true, R"(
def forward(x: Tensor):
    v, i = torch.max(x, 1)
    w, j = torch.topk(x, 2)
    return v.sum() + w.sum()
)", "[[" OPTRACE_F32(3, 4) "]]"},
    {"grad_accumulation", "add_.Tensor", "add.Tensor", true, true, R"(
def forward(x: Tensor):
    return x.sin() + x.cos()
)", "[[" OPTRACE_F32(3, 4) "]]"},
    {"index_backward", "_index_put_impl_.default", "index_put.default", false, true, R"(
def forward(x: Tensor, idx: Tensor):
    return x[idx]
)", "[[" OPTRACE_F32(3, 4) "," OPTRACE_I64(2) "]]"},
};

}  // namespace

TEST_CASE("op tracer: the peer mlp gives the reference trace", "[op_tracer]") {
  auto module = torch::jit::load(optrace_test::data_path("peer/mlp.pt"));
  std::string inputs = optrace::detail::read_file(optrace_test::data_path("peer/mlp.inputs.json"));
  auto calls = make_calls(inputs);
  torch::jit::setGraphExecutorOptimize(false);
  torch::NoGradGuard no_grad;
  optrace::OpTracer tracer;
  tracer.start();
  for (auto& args : calls) module.forward(args);
  tracer.stop();
  torch::jit::setGraphExecutorOptimize(true);
  optrace::OpTrace trace = tracer.trace();
  check_same_json(trace.to_json(), optrace::detail::read_file(optrace_test::data_path("peer/mlp.hf_op_trace.json")));
  // The reference file is indent=1 as Python writes it: byte for byte too.
  CHECK(trace.to_json() == optrace::detail::read_file(optrace_test::data_path("peer/mlp.hf_op_trace.json")));
  CHECK(trace.to_json() == optrace::OpTrace::load(optrace_test::data_path("peer/mlp.hf_op_trace.json")).to_json());
}

TEST_CASE("op tracer: models of our own match the Python dispatch-mode tracer", "[op_tracer][python]") {
  if (!python_torch_available()) OPTRACE_SKIP("python3-torch is not installed");
  std::vector<PythonJob> jobs;
  std::vector<std::string> ours;
  for (const Model& m : kModels) {
    ours.push_back(trace_script(m.source, m.inputs).to_json());
    jobs.push_back({m.name, m.source, m.inputs});
  }
  const std::vector<std::string> reference = python_traces("models", jobs);
  for (size_t i = 0; i < jobs.size(); ++i) {
    INFO("model " << jobs[i].name);
    check_same_json(ours[i], reference[i]);
  }
}

TEST_CASE("op tracer: each subclass-branch rule matches the Python tracer on a model that takes it", "[op_tracer][python]") {
  std::vector<PythonJob> jobs;
  std::vector<std::string> ours;
  for (const RuleModel& m : kRuleModels) {
    if (m.since_2_0 && !optrace::detail::kTorch2Branches) continue;  // no such branch in this libtorch
    INFO("model " << m.name << " (" << m.plain << " -> " << m.recorded << ")");
    const auto options = m.backward ? optrace::OpTracerOptions().exclude_ops({"detach"}) : optrace::OpTracerOptions();
    optrace::OpTrace trace = trace_script(m.source, m.inputs, options, m.backward);
    INFO(trace.to_json());
    // The model takes the branch: what the rule records is there, and the C++ op is not.
    CHECK(trace.find(m.recorded) != nullptr);
    if (std::string(m.plain) != m.recorded) CHECK(trace.find(m.plain) == nullptr);
    // Everything recorded without the rules' context (all_levels) still shows the C++ branch.
    optrace::OpTrace raw = trace_script(m.source, m.inputs, optrace::OpTracerOptions().all_levels(true), m.backward);
    CHECK(raw.find(m.plain) != nullptr);
    ours.push_back(trace.to_json());
    jobs.push_back({m.name, m.source, m.inputs, m.backward});
  }
  // Each the reference tracer's trace of the same model (one Python process for all).
  if (python_torch_available()) {
    const std::vector<std::string> reference = python_traces("subclass_rules", jobs);
    for (size_t i = 0; i < jobs.size(); ++i) {
      INFO("model " << jobs[i].name);
      check_same_json(ours[i], reference[i]);
    }
  }
  // Outside the composites and the autograd engine, the same ops are the program's own.
  optrace::OpTracer own;
  at::Tensor x = torch::ones({2, 2}), y = torch::ones({2, 2});
  own.start();
  x.add_(y);
  x.reshape({4});
  own.stop();
  CHECK(own.trace().find("add_.Tensor") != nullptr);
  CHECK(own.trace().find("add.Tensor") == nullptr);
  if (!python_torch_available()) OPTRACE_SKIP("python3-torch is not installed: compared without the reference");
}

TEST_CASE("op tracer: what the models record without Python", "[op_tracer]") {
  optrace::OpTrace conv = trace_script(kModels[0].source, kModels[0].inputs);
  REQUIRE(conv.find("convolution.default") != nullptr);
  const optrace::OpInput& c = conv.find("convolution.default")->by_count()[0][0];
  CHECK(c.count == 2);
  CHECK(c.input_dtypes == std::vector<std::string>{"torch.float32", "torch.float32", "torch.float32", "<class 'list'>",
                                                   "<class 'list'>", "<class 'list'>", "<class 'bool'>", "<class 'list'>",
                                                   "<class 'int'>"});
  CHECK(c.non_tensor_inputs[3] == optrace::OpValue::list({optrace::OpValue::integer(1), optrace::OpValue::integer(1)}));
  CHECK(conv.find("relu_.default") != nullptr);  // in-place
  CHECK(conv.find("conv2d.default") == nullptr);  // decomposed

  optrace::OpTrace att = trace_script(kModels[1].source, kModels[1].inputs);
  const optrace::OpEntry* fill = att.find("masked_fill.Scalar");
  REQUIRE(fill != nullptr);
  CHECK(fill->unique_inputs[0].non_tensor_inputs[2] == optrace::OpValue::floating(-std::numeric_limits<double>::infinity()));
  CHECK(att.to_json().find("-Infinity") != std::string::npos);
  CHECK(att.find("embedding.default") != nullptr);
  CHECK(att.find("native_layer_norm.default") != nullptr);
  CHECK(att.find("layer_norm.default") == nullptr);
  const optrace::OpInput& cat = att.find("cat.default")->unique_inputs[0];
  CHECK(cat.tensor_list(0)->length() == 2);
  CHECK(cat.non_tensor_inputs[1] == optrace::OpValue::integer(-1));

  optrace::OpTrace args = trace_script(kModels[2].source, kModels[2].inputs);
  const optrace::OpInput& clamp = args.find("clamp.default")->unique_inputs[0];
  CHECK(clamp.input_dtypes == std::vector<std::string>{"torch.float32", "<class 'NoneType'>", "<class 'float'>"});
  CHECK(clamp.non_tensor_inputs[2] == optrace::OpValue::floating(2.0));
  const optrace::OpInput& sum = args.find("sum.dim_IntList")->unique_inputs[0];
  CHECK(sum.non_tensor_inputs[2] == optrace::OpValue::boolean(true));
  // _to_copy's dtype is keyword-only: not in the plain schema.
  const optrace::OpInput& to = args.find("_to_copy.default")->unique_inputs[0];
  CHECK(to.input_shapes.size() == 1);
  CHECK(args.find("fill_.Scalar")->unique_inputs[0].non_tensor_inputs[1].as_float() != args.find("fill_.Scalar")->unique_inputs[0].non_tensor_inputs[1].as_float());
  optrace::OpTrace back = optrace::OpTrace::from_json(args.to_json());
  CHECK(back.to_json() == args.to_json());
}

TEST_CASE("op tracer: reshape is recorded as the reference tracer of the same libtorch records it", "[op_tracer]") {
  torch::NoGradGuard no_grad;
  auto x = torch::ones({2, 3, 4});
  optrace::OpTracer tracer;
  tracer.start();
  x.reshape({6, 4});   // _reshape_alias in a C++ program
  x.view({6, 4});      // the same call as the reference tracer sees it on 2.x
  x.reshape({4, -1});  // 2.6 runs view(self, [4, -1]) for this one; _reshape_alias gets [4, 6]
  tracer.stop();
  optrace::OpTrace trace = tracer.trace();
  INFO(trace.to_json());
  if (optrace::detail::kTorch2Branches) {
    CHECK(trace.find("_reshape_alias.default") == nullptr);
    const optrace::OpEntry* view = trace.find("view.default");
    REQUIRE(view != nullptr);
    REQUIRE(view->unique_inputs.size() == 2);
    CHECK(view->unique_inputs[0].count == 2);  // reshape and view merge into one input
    CHECK(view->unique_inputs[0].input_shapes.size() == 2);
    CHECK(view->unique_inputs[0].non_tensor_inputs[1] ==
          optrace::OpValue::list({optrace::OpValue::integer(6), optrace::OpValue::integer(4)}));
    const optrace::OpValue& size = view->unique_inputs[1].non_tensor_inputs[1];
    CHECK((size == optrace::OpValue::list({optrace::OpValue::integer(4), optrace::OpValue::integer(6)}) ||
           size == optrace::OpValue::list({optrace::OpValue::integer(4), optrace::OpValue::integer(-1)})));
    // Filters see the recorded name.
    optrace::OpTracer only_view(optrace::OpTracerOptions().include_ops({"view"}));
    only_view.start();
    x.reshape({6, 4});
    only_view.stop();
    REQUIRE(only_view.trace().find("view.default") != nullptr);
  } else {
    const optrace::OpEntry* alias = trace.find("_reshape_alias.default");
    REQUIRE(alias != nullptr);
    CHECK(alias->unique_inputs[0].input_shapes.size() == 3);  // self, size, stride
    REQUIRE(trace.find("view.default") != nullptr);
    CHECK(trace.find("view.default")->unique_inputs[0].count == 1);
  }
}

TEST_CASE("op tracer: nn modules in C++ record the decomposed ops", "[op_tracer]") {
  torch::nn::Sequential net(torch::nn::Linear(4, 3), torch::nn::ReLU(), torch::nn::Linear(3, 2));
  torch::NoGradGuard no_grad;
  auto x = torch::ones({5, 4});
  optrace::OpTracer tracer;
  tracer.start();
  net->forward(x);
  net->forward(x);
  tracer.stop();
  net->forward(x);  // not recorded
  optrace::OpTrace trace = tracer.trace();
  CHECK(trace.op_names() == std::vector<std::string>{"t.default", "addmm.default", "relu.default"});
  CHECK(trace.total_calls("addmm.default") == 4);
  CHECK(trace.find("addmm.default")->unique_inputs.size() == 2);
  // Resuming keeps what was recorded.
  tracer.start();
  net->forward(x);
  tracer.stop();
  CHECK(tracer.trace().total_calls("addmm.default") == 6);
  tracer.clear();
  CHECK(tracer.trace().empty());
}

TEST_CASE("op tracer: options select ops and levels", "[op_tracer]") {
  auto a = torch::ones({2, 3});
  auto w = torch::ones({4, 3});
  auto run = [&](optrace::OpTracerOptions options) {
    optrace::OpTracer tracer(options);
    tracer.start();
    at::linear(a, w);
    at::add(a, a, 2);
    tracer.stop();
    return tracer.trace();
  };
  SECTION("default") { CHECK(run({}).op_names() == std::vector<std::string>{"t.default", "mm.default", "add.Tensor"}); }
  SECTION("include by base and full name") {
    CHECK(run(optrace::OpTracerOptions().include_ops({"mm", "add.Tensor"})).op_names() ==
          std::vector<std::string>{"mm.default", "add.Tensor"});
  }
  SECTION("exclude keeps nesting") {
    optrace::OpTrace t = run(optrace::OpTracerOptions().exclude_ops({"t"}));
    CHECK(t.op_names() == std::vector<std::string>{"mm.default", "add.Tensor"});
  }
  SECTION("all levels") {
    optrace::OpTrace t = run(optrace::OpTracerOptions().all_levels(true));
    CHECK(t.find("linear.default") != nullptr);
    CHECK(t.find("transpose.int") != nullptr);
    CHECK(t.find("mm.default") != nullptr);
  }
  SECTION("extended") {
    auto idx = torch::tensor({3, 0, 2});
    auto strided = torch::ones({3, 4}).t();  // 4 x 3, strides (1, 4)
    optrace::OpTracer tracer(optrace::OpTracerOptions().extended(true));
    tracer.start();
    at::add(a, a, 2);
    at::index_select(strided, 0, idx);
    tracer.stop();
    optrace::OpTrace t = tracer.trace();
    const optrace::OpInput& add = t.find("add.Tensor")->unique_inputs[0];
    REQUIRE(add.kwargs.size() == 1);
    CHECK(add.kwargs[0].name == "alpha");
    CHECK(add.kwargs[0].value == optrace::OpValue::integer(2));
    CHECK(add.kwargs[0].dtype == "<class 'int'>");
    REQUIRE(add.input_devices.size() == 2);
    CHECK(add.input_devices[0].value_or("") == "cpu");
    CHECK(add.input_devices[1].value_or("") == "cpu");
    CHECK(add.input_strides.empty());
    const optrace::OpInput& sel = t.find("index_select.default")->unique_inputs[0];
    REQUIRE(sel.input_strides.size() == 3);
    CHECK(sel.input_strides[0].value_or(std::vector<int64_t>{}) == std::vector<int64_t>{1, 4});
    REQUIRE(sel.input_value_ranges.size() == 3);
    REQUIRE(sel.input_value_ranges[2].has_value());
    CHECK(sel.input_value_ranges[2]->first == 0);
    CHECK(sel.input_value_ranges[2]->second == 3);
    CHECK(optrace::OpTrace::from_json(t.to_json()) == t);
    // A positional dtype is written as Python's str(dtype).
    optrace::OpTracer dt;
    dt.start();
    auto viewed = a.view(at::kInt);
    dt.stop();
    optrace::OpTrace dt_trace = dt.trace();
    const optrace::OpInput& view = dt_trace.find("view.dtype")->unique_inputs.at(0);
    CHECK(view.input_dtypes[1] == "<class 'torch.dtype'>");
    CHECK(view.non_tensor_inputs[1] == optrace::OpValue::string("torch.int32"));
    // The plain schema has none of it.
    CHECK(run({}).find("add.Tensor")->unique_inputs[0].kwargs.empty());
  }
}

TEST_CASE("op tracer: threads record at once with exact counts", "[op_tracer]") {
  constexpr int kThreads = 4, kCalls = 2000;
  optrace::OpTracer tracer;
  tracer.start();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      auto shared = torch::ones({2, 2});
      auto own = torch::ones({t + 3});
      for (int i = 0; i < kCalls; ++i) {
        at::add(shared, shared);
        at::mul(own, own);
      }
    });
  }
  for (auto& th : threads) th.join();
  tracer.stop();
  optrace::OpTrace trace = tracer.trace();
  CHECK(trace.total_calls("add.Tensor") == kThreads * kCalls);
  CHECK(trace.find("add.Tensor")->unique_inputs.size() == 1);
  CHECK(trace.total_calls("mul.Tensor") == kThreads * kCalls);
  CHECK(trace.find("mul.Tensor")->unique_inputs.size() == kThreads);
  for (const auto& in : trace.find("mul.Tensor")->unique_inputs) CHECK(in.count == kCalls);

  SECTION("chosen threads only") {
    auto x = torch::ones({2});
    std::thread other;
    optrace::OpTracer mine(optrace::OpTracerOptions().threads({std::this_thread::get_id()}));
    mine.start();
    other = std::thread([&] { at::neg(x); });
    other.join();
    at::add(x, x);
    mine.stop();
    CHECK(mine.trace().op_names() == std::vector<std::string>{"add.Tensor"});
  }
}

TEST_CASE("op tracer: bounded unique inputs count what they drop", "[op_tracer]") {
  optrace::OpTracer tracer(optrace::OpTracerOptions().max_unique_inputs(3));
  tracer.start();
  for (int n = 1; n <= 5; ++n) {
    auto x = torch::ones({n});
    at::neg(x);
    at::neg(x);
  }
  at::neg(torch::ones({1}));  // a kept input still counts
  tracer.stop();
  optrace::OpTrace trace = tracer.trace();
  const optrace::OpEntry* neg = trace.find("neg.default");
  REQUIRE(neg != nullptr);
  // ones() is recorded too: the bound is shared.
  CHECK(trace.unique_input_count() == 3);
  CHECK(trace.dropped_calls() > 0);
  CHECK(trace.total_calls("neg.default") == 11);
  std::string js = trace.to_json();
  CHECK(optrace::OpTrace::from_json(js).dropped_calls() == trace.dropped_calls());
  const std::vector<optrace::DroppedCalls> dropped = tracer.dropped();
  int64_t sum = 0;
  for (const optrace::DroppedCalls& d : dropped) {
    CHECK(d.calls == d.over_budget);
    CHECK(d.unreadable.empty());
    sum += d.calls;
  }
  CHECK(sum == trace.dropped_calls());
}

TEST_CASE("op tracer: calls on nested tensors are counted with the reason not lost", "[op_tracer]") {
  torch::NoGradGuard no_grad;
  at::Tensor dense = torch::randn({2, 3, 4});
  at::Tensor mask = torch::tensor({1, 1, 0, 1, 0, 0}, torch::kBool).reshape({2, 3});
  optrace::OpTracer tracer;
  tracer.start();
  at::Tensor nested = at::_nested_tensor_from_mask(dense, mask, false);  // dense inputs: recorded
  at::Tensor padded = nested.to_padded_tensor(0.0);                       // a nested input
  tracer.stop();
  CHECK(padded.size(1) == 2);
  optrace::OpTrace trace = tracer.trace();
  INFO(trace.to_json());
  REQUIRE(trace.find("_nested_tensor_from_mask.default") != nullptr);
  const optrace::OpEntry* to_padded = trace.find("to_padded_tensor.default");
  REQUIRE(to_padded != nullptr);  // counted: in total_calls, as a dropped call
  CHECK(to_padded->total_calls() == 1);
  CHECK(to_padded->dropped_calls == 1);
  const std::vector<optrace::DroppedCalls> dropped = tracer.dropped();
  REQUIRE(dropped.size() == 1);
  CHECK(dropped[0].op == "to_padded_tensor.default");
  CHECK(dropped[0].calls == 1);
  CHECK(dropped[0].over_budget == 0);
  CHECK_THAT(dropped[0].unreadable, OPTRACE_CONTAINS("sizes"));  // NestedTensorImpl has no sizes()
  CHECK(dropped[0].unreadable.find('\n') == std::string::npos);
}

TEST_CASE("op tracer: a wrapped number is recorded as the Python number it was", "[op_tracer]") {
  // Python's `x / 2.5` reaches the dispatcher as div.Tensor(x, <0-dim double, wrapped>); the
  // reference tracer's __torch_dispatch__ gets the float back (and a C++ program can build the
  // same call).
  torch::NoGradGuard no_grad;
  at::Tensor x = torch::randn({2, 3});
  at::Tensor half = at::scalar_tensor(2.5, at::kDouble);
  half.unsafeGetTensorImpl()->set_wrapped_number(true);
  at::Tensor three = at::scalar_tensor(3, at::kLong);
  three.unsafeGetTensorImpl()->set_wrapped_number(true);
  at::Tensor plain = at::scalar_tensor(2.5, at::kDouble);  // a real 0-dim tensor stays one
  for (bool extended : {false, true}) {
    optrace::OpTracer tracer(optrace::OpTracerOptions().extended(extended));
    tracer.start();
    at::div(x, half);
    at::add(x, three);
    at::mul(x, plain);
    tracer.stop();
    optrace::OpTrace trace = tracer.trace();
    INFO(trace.to_json());
    const optrace::OpInput& div = trace.find("div.Tensor")->unique_inputs[0];
    CHECK(div.input_dtypes == std::vector<std::string>{"torch.float32", "<class 'float'>"});
    CHECK(div.non_tensor_inputs[1] == optrace::OpValue::floating(2.5));
    const optrace::OpInput& add = trace.find("add.Tensor")->unique_inputs[0];
    CHECK(add.input_dtypes == std::vector<std::string>{"torch.float32", "<class 'int'>"});
    CHECK(add.non_tensor_inputs[1] == optrace::OpValue::integer(3));
    CHECK(trace.find("mul.Tensor")->unique_inputs[0].input_dtypes ==
          std::vector<std::string>{"torch.float32", "torch.float64"});
  }
}

TEST_CASE("op tracer: a call unlike its op's previous one is never counted as a repeat", "[op_tracer]") {
  // A repeat of an op's previous call is counted on a short path that compares the call with
  // that call's encoding (count_repeat); every other call is encoded and looked up. Calls that
  // differ from the previous one in a single token each, alternating, must give what the long
  // path gives (extended recording always takes it: compared on the fields both write).
  torch::NoGradGuard no_grad;
  at::Tensor a = torch::ones({2, 2}), b = torch::ones({2, 3}), c = torch::ones({4}), d = torch::ones({2, 2}, at::kDouble);
  at::Tensor s = torch::ones({}), half = at::scalar_tensor(2.5, at::kDouble), third = at::scalar_tensor(3.5, at::kDouble);
  half.unsafeGetTensorImpl()->set_wrapped_number(true);
  third.unsafeGetTensorImpl()->set_wrapped_number(true);
  const std::vector<int64_t> d0{0}, d1{1}, d01{0, 1};
  // Ranks 1 to 6 (6: sizes stored out of line), differing in the last size only.
  at::Tensor e3 = torch::ones({2, 3, 4}), e3b = torch::ones({2, 3, 5}), e4 = torch::ones({1, 2, 3, 4}),
             e4b = torch::ones({1, 2, 3, 5}), e6 = torch::ones({1, 1, 1, 1, 1, 2}), e6b = torch::ones({1, 1, 1, 1, 1, 3});
  at::Tensor x3 = torch::ones({2, 3, 4}), x4 = torch::ones({2, 3, 4, 5}), x5 = torch::ones({2, 3, 2, 2, 2}),
             w = torch::ones({3});
  const at::Tensor undefined;  // recorded as None, as an absent optional is
  const c10::optional<at::Tensor> none;
  auto calls = [&] {
    for (int round = 0; round < 3; ++round) {
      at::add(a, a); at::add(a, a); at::add(b, b); at::add(a, a);  // sizes
      at::add(d, d); at::add(a, a); at::add(c, c); at::add(a, a);  // dtype, ndim
      at::add(s, s); at::add(s, s); at::add(a, s);  // 0-dim
      at::div(a, half); at::div(a, half); at::div(a, third);  // wrapped numbers: the scalar
      at::sum(a, d0); at::sum(a, d1); at::sum(a, d0, true); at::sum(a, d0, false); at::sum(a, d01);
      at::clamp(a, s, s); at::clamp(a, s, none); at::clamp(a, none, s); at::clamp(a, s);  // None, a default
      at::cat({a, a}); at::cat({a, a, a}); at::cat({a, a}); at::cat({a, b}, 1);  // tensor lists
      // The fast path's values (on_start: tensors, ints, bools, floats, None) and what it leaves
      // to the full path (NaN, a dtype, an undefined tensor).
      at::add(e3, e3); at::add(e3b, e3b); at::add(e4, e4); at::add(e4b, e4b); at::add(e6, e6); at::add(e6b, e6b);
      at::add(e6, e6);
      at::mul(a, 2); at::mul(a, 2); at::mul(a, 2.0); at::mul(a, true); at::mul(a, 1); at::mul(a, 2.0);  // same value, other type
      at::mul(a, NAN); at::mul(a, NAN); at::mul(a, 0.5); at::mul(a, 0.25);
      at::transpose(a, 0, 1); at::transpose(a, 0, 1); at::transpose(a, 1, 0);
      a.view(at::kInt); a.view(at::kInt); a.view(at::kFloat);  // a dtype: its own token
      at::native_batch_norm(x3, w, none, none, none, true, 0.1, 1e-5);
      at::native_batch_norm(x3, w, none, none, none, true, 0.1, 1e-5);
      at::native_batch_norm(x3, undefined, none, none, none, true, 0.1, 1e-5);
      at::native_batch_norm(x3, none, none, none, none, true, 0.1, 1e-5);  // as the undefined tensor
      at::native_batch_norm(x3, w, none, none, none, true, 0.2, 1e-5);
      at::native_batch_norm(x4, w, none, none, none, true, 0.1, 1e-5);
      at::native_batch_norm(x5, w, none, none, none, true, 0.1, 1e-5);
      at::native_dropout(a, 0.5, true); at::native_dropout(a, 0.5, true); at::native_dropout(a, 0.5, false);
      at::native_dropout(a, 0.5, c10::nullopt); at::native_dropout(a, 0.25, true);  // bool? train: None
    }
  };
  auto record = [&](bool extended) {
    optrace::OpTracer tracer(optrace::OpTracerOptions().extended(extended));
    tracer.start();
    calls();
    tracer.stop();
    return tracer.trace();
  };
  const optrace::OpTrace plain = record(false), extended = record(true);
  INFO(plain.to_json());
  REQUIRE(plain.ops().size() == extended.ops().size());
  for (size_t i = 0; i < plain.ops().size(); ++i) {
    const optrace::OpEntry& p = plain.ops()[i];
    const optrace::OpEntry& e = extended.ops()[i];
    INFO(p.name);
    CHECK(p.name == e.name);
    REQUIRE(p.unique_inputs.size() == e.unique_inputs.size());
    for (size_t k = 0; k < p.unique_inputs.size(); ++k) {
      INFO("unique input " << k);
      CHECK((p.unique_inputs[k].input_shapes == e.unique_inputs[k].input_shapes));
      CHECK(p.unique_inputs[k].input_dtypes == e.unique_inputs[k].input_dtypes);
      CHECK((p.unique_inputs[k].non_tensor_inputs == e.unique_inputs[k].non_tensor_inputs));
      CHECK(p.unique_inputs[k].count == e.unique_inputs[k].count);
    }
  }
  // What the calls are, counted by hand: each distinct call once per unique input.
  auto counts = [&](const std::string& op) {
    std::vector<int64_t> out;
    for (const auto& in : plain.find(op)->unique_inputs) out.push_back(in.count);
    return out;
  };
  // a, b, d, c, s, (a, s), e3, e3b, e4, e4b, e6, e6b
  CHECK(counts("add.Tensor") == std::vector<int64_t>{15, 3, 3, 3, 6, 3, 3, 3, 3, 3, 6, 3});
  CHECK(counts("div.Tensor") == std::vector<int64_t>{6, 3});
  CHECK(counts("sum.dim_IntList") == std::vector<int64_t>{6, 3, 3, 3});  // keepdim=false is the default: dropped
  CHECK(counts("clamp.Tensor") == std::vector<int64_t>{3, 6, 3});  // (a, s, None) is (a, s)
  CHECK(counts("cat.default") == std::vector<int64_t>{6, 3, 3});
  CHECK(counts("mul.Scalar") == std::vector<int64_t>{6, 6, 3, 3, 6, 3, 3});  // 2, 2.0, True, 1, nan, 0.5, 0.25
  CHECK(counts("transpose.int") == std::vector<int64_t>{6, 3});
  CHECK(counts("view.dtype") == std::vector<int64_t>{6, 3});
  CHECK(counts("native_batch_norm.default") == std::vector<int64_t>{6, 6, 3, 3, 3});
  CHECK(counts("native_dropout.default") == std::vector<int64_t>{6, 3, 3, 3});
  CHECK(plain.find("view.dtype")->unique_inputs[0].non_tensor_inputs[1] == optrace::OpValue::string("torch.int32"));
}

TEST_CASE("op tracer: a repeat is counted wherever its table stores the call", "[op_tracer]") {
  // Encodings lie end to end in blocks (CallTable); a repeat is compared in place, reading up to
  // three tokens past its encoding. Thousands of unique calls, each repeated at once, put
  // encodings at every place in a block, its end included; a tensor list of 400 is longer than a
  // block.
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> tensors;
  for (int64_t i = 1; i <= 3000; ++i) tensors.push_back(torch::ones({1, i}));
  const std::vector<at::Tensor> many(400, torch::ones({2}));
  optrace::OpTracer tracer;
  tracer.start();
  for (const at::Tensor& t : tensors) {
    at::add(t, t);
    at::add(t, t);
  }
  at::cat(many);
  at::cat(many);
  tracer.stop();
  const optrace::OpTrace trace = tracer.trace();
  const optrace::OpEntry* add = trace.find("add.Tensor");
  REQUIRE(add != nullptr);
  REQUIRE(add->unique_inputs.size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    INFO("call " << i);
    CHECK(add->unique_inputs[i].count == 2);
    CHECK(add->unique_inputs[i].input_shapes[0] == std::vector<int64_t>{1, static_cast<int64_t>(i) + 1});
  }
  const optrace::OpEntry* cat = trace.find("cat.default");
  REQUIRE(cat != nullptr);
  REQUIRE(cat->unique_inputs.size() == 1);
  CHECK(cat->unique_inputs[0].count == 2);
}

TEST_CASE("op tracer: misuse errors", "[op_tracer]") {
  optrace::OpTracer a;
  optrace::OpTracer b;
  a.start();
  CHECK(a.recording());
  CHECK_THROWS_WITH(b.start(), "optrace: Error: another OpTracer is already recording; stop it first");
  CHECK_THROWS_WITH(a.start(), "optrace: Error: another OpTracer is already recording; stop it first");
  CHECK_THROWS_WITH(a.clear(), "optrace: Error: clear() while recording; stop() first");
  a.stop();
  a.stop();  // harmless
  CHECK(!a.recording());
  CHECK_THROWS_WITH(optrace::OpTracer(optrace::OpTracerOptions().max_unique_inputs(-1)).start(),
                    "optrace: ArgumentError: max_unique_inputs must be >= 0, got -1");
  CHECK(optrace::python_dtype_name(c10::kBFloat16) == "torch.bfloat16");
  CHECK(optrace::python_dtype_name(c10::kLong) == "torch.int64");
  CHECK(optrace::python_dtype_name(c10::kComplexFloat) == "torch.complex64");
  CHECK(optrace::scalar_type_from_python("torch.uint8") == c10::kByte);
  CHECK(!optrace::scalar_type_from_python("float32").has_value());
}
