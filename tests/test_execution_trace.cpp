// Execution traces (torch's ExecutionTraceObserver, optrace's Profiler) read into op traces:
// detail/kineto/execution_trace_import.hpp, through kineto::load_any.
#include <optrace/detail/common/io.hpp>
#include <optrace/execution_replay.hpp>
#include <optrace/kineto.hpp>

#include "optrace_catch.hpp"
#include "text_reader.hpp"

#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace {
namespace et_test {

namespace kineto = optrace::kineto;

std::string write(const std::string& name, const std::string& text) {
  const std::string path = optrace_test::temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// An execution trace of `nodes` (each a node object's text), schema 1.1.1.
std::string trace_of(const std::vector<std::string>& nodes, const std::string& schema = "1.1.1-chakra.0.0.4") {
  std::string text = "{\"schema\": \"" + schema + "\", \"pid\": 1, \"time\": \"x\", \"start_ts\": 0, \"nodes\": [";
  for (size_t k = 0; k < nodes.size(); ++k) text += (k ? ",\n" : "\n") + nodes[k];
  return text + "], \"finish_ts\": 1}";
}

// `text` with each {from, to} made once (node() writes the shapes as strides: tests that need
// other strides set them so).
std::string with_edits(std::string text, const std::vector<std::pair<std::string, std::string>>& edits) {
  for (const auto& [from, to] : edits) {
    REQUIRE(text.find(from) != std::string::npos);
    text.replace(text.find(from), from.size(), to);
  }
  return text;
}

// A node as torch 2.6 writes one: inputs {values, shapes, types, strides}, attrs.
std::string node(int64_t id, const std::string& name, int64_t parent, const std::string& values, const std::string& shapes,
                 const std::string& types, const std::string& schema = "", int64_t tid = 1) {
  return "{\"id\": " + std::to_string(id) + ", \"name\": \"" + name + "\", \"ctrl_deps\": " + std::to_string(parent) +
         ", \"inputs\": {\"values\": " + values + ", \"shapes\": " + shapes + ", \"types\": " + types + ", \"strides\": " + shapes +
         "}, \"outputs\": {\"values\": [], \"shapes\": [], \"types\": [], \"strides\": []}, \"attrs\": [{\"name\": \"rf_id\", \"type\": "
         "\"uint64\", \"value\": " + std::to_string(id) + "}, {\"name\": \"tid\", \"type\": \"uint64\", \"value\": " + std::to_string(tid) +
         "}, {\"name\": \"op_schema\", \"type\": \"string\", \"value\": \"" + schema + "\"}]}";
}

std::string thread_root(int64_t id, int64_t tid = 1) { return node(id, "[pytorch|profiler|execution_trace|thread]", 1, "[]", "[]", "[]", "", tid); }

const optrace::OpInput& only_input(const optrace::OpTrace& trace, const std::string& op) {
  const optrace::OpEntry* entry = trace.find(op);
  REQUIRE(entry != nullptr);
  REQUIRE(entry->unique_inputs.size() == 1);
  return entry->unique_inputs.front();
}

}  // namespace et_test
}  // namespace

TEST_CASE("execution trace: torch 2.6's trace of a window reads as the Kineto trace of that window", "[execution_trace]") {
  namespace kineto = optrace::kineto;
  // One rank's window of a gloo job, both traces written by torch 2.6 (tests/data/distributed).
  const std::string et_path = optrace_test::data_path("distributed/torch26_gloo_rank0.et.json.gz");
  CHECK(kineto::detect_format(et_path) == kineto::TraceFormat::ExecutionTrace);
  const auto et = kineto::load_any(et_path);
  const auto kt = kineto::load_any(optrace_test::data_path("distributed/torch26_gloo_rank0.pt.trace.json.gz"));
  CHECK(et.report.format == "execution_trace");
  CHECK(et.report.events == 154);  // every node
  CHECK(et.report.nested == kt.report.nested);
  CHECK(et.report.decomposed == kt.report.decomposed);
  // Every aten op the same: names, shapes, dtypes, strides, scalars, counts, in the same order.
  std::vector<std::string> et_ops, kt_ops;
  for (const auto& entry : et.trace.ops())
    if (entry.name.find("allreduce") == std::string::npos) et_ops.push_back(entry.name);
  for (const auto& entry : kt.trace.ops())
    if (entry.name.find("allreduce") == std::string::npos) kt_ops.push_back(entry.name);
  CHECK(et_ops == kt_ops);
  REQUIRE(et_ops.size() == 12);
  for (const std::string& op : et_ops) {
    INFO(op);
    CHECK((et.trace.find(op)->unique_inputs == kt.trace.find(op)->unique_inputs));
  }
  // c10d::allreduce_ takes a ProcessGroup object: kept where this libtorch's schema takes the
  // node's five arguments (torch 2.6's), else left out and named.
  if (const auto* issue = et.report.find("no overload \"\" takes the recorded arguments")) {
    CHECK(issue->count == 4);
    CHECK(issue->examples.front().rfind("/nodes/59: c10d::allreduce_ (Input type", 0) == 0);
  } else {
    CHECK(et.trace.total_calls("allreduce_.default") == 4);
  }
}

TEST_CASE("execution trace: real models' traces read as their windows' Kineto traces", "[execution_trace]") {
  namespace kineto = optrace::kineto;
  // torch 2.6's ExecutionTraceObserver and profiler over one step (tests/data/execution_trace):
  // the same calls, inputs, counts and order from both, None biases (undefined tensors) and
  // tensor lists included.
  for (const std::string model : {"mobilenet_v3_small", "train_step"}) {
    INFO(model);
    const auto et = kineto::load_any(optrace_test::data_path("execution_trace/" + model + ".et.json.gz"));
    const auto kt = kineto::load_any(optrace_test::data_path("execution_trace/" + model + ".pt.trace.json.gz"));
    INFO(et.report.to_string());
    CHECK(et.report.left_out == 0);
    CHECK(et.trace == kt.trace);
    CHECK(et.trace.total_calls() == (model == "train_step" ? 37 : 192));
  }
  // The tensor lists' dtypes are recorded (the Kineto trace has to guess them).
  const auto train = kineto::load_any(optrace_test::data_path("execution_trace/train_step.et.json.gz"));
  CHECK(train.report.incomplete == 1);  // add_.Tensor's Python number, a 0-dim tensor to the profiler too
  CHECK(et_test::only_input(train.trace, "_foreach_mul_.Scalar").tensor_lists.at(0).second.dtypes.size() == 6);  // the six parameters
}

TEST_CASE("execution trace: optrace's own, with the Kineto trace of its window", "[execution_trace]") {
  namespace kineto = optrace::kineto;
  const auto et = kineto::load_any(optrace_test::data_path("profiler_cuda/optrace_cuda_et.json.gz"));
  const auto kt = kineto::load_any(optrace_test::data_path("profiler_cuda/optrace_cuda.pt.trace.json.gz"));
  CHECK(et.report.format == "execution_trace");
  CHECK(et.trace == kt.trace);
  CHECK(et.trace.total_calls() == 6);
  CHECK(et_test::only_input(et.trace, "mm.default").input_shapes ==
        std::vector<optrace::OptionalShape>{std::vector<int64_t>{256, 256}, std::vector<int64_t>{256, 256}});
}

TEST_CASE("execution trace: the tree decides what is outermost, in any file order", "[execution_trace]") {
  using et_test::node, et_test::only_input, et_test::thread_root, et_test::trace_of, et_test::write;
  const std::string linear_schema =
      "aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor";
  // linear decomposes (its parts are kept); addmm is kept and hides what it calls; a range is
  // transparent. Listed children first, as torch writes them (a node at its op's end).
  const std::vector<std::string> nodes = {
      thread_root(2),
      node(4, "aten::t", 3, "[[10,10,0,12,4,\"cpu\"]]", "[[4,3]]", "[\"Tensor(float)\"]", "aten::t(Tensor(a) self) -> Tensor(a)"),
      node(6, "aten::empty", 5, "[[3],\"<None>\",\"<None>\",\"<None>\",\"<None>\",\"<None>\"]", "[[[]],[],[],[],[],[]]",
           "[\"GenericList[Int]\",\"None\",\"None\",\"None\",\"None\",\"None\"]",
           "aten::empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? "
           "pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"),
      node(5, "aten::addmm", 3, "[[1,1,0,3,4,\"cpu\"],[2,2,0,6,4,\"cpu\"],[11,10,0,12,4,\"cpu\"],1,1]", "[[3],[2,4],[4,3],[],[]]",
           "[\"Tensor(float)\",\"Tensor(float)\",\"Tensor(float)\",\"Int\",\"Int\"]",
           "aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"),
      node(3, "aten::linear", 7, "[[2,2,0,6,4,\"cpu\"],[10,10,0,12,4,\"cpu\"],[1,1,0,3,4,\"cpu\"]]", "[[2,4],[3,4],[3]]",
           "[\"Tensor(float)\",\"Tensor(float)\",\"Tensor(float)\"]", linear_schema),
      node(7, "## forward ##", 2, "[]", "[]", "[]"),
  };
  auto read = [](const std::vector<std::string>& ns, const std::string& name) {
    return optrace::kineto::load_any(write(name, trace_of(ns)));
  };
  const auto r = read(nodes, "et_tree.json");
  CHECK(r.report.decomposed == 1);
  CHECK(r.report.nested == 1);  // empty, inside addmm
  CHECK(r.trace.total_calls() == 2);
  CHECK(only_input(r.trace, "t.default").input_shapes == std::vector<optrace::OptionalShape>{std::vector<int64_t>{4, 3}});
  CHECK(only_input(r.trace, "addmm.default").input_shapes.size() == 3);  // trailing defaults dropped
  CHECK(r.trace.ops().front().name == "t.default");  // called first: ids, not file order
  // Pre-order (as optrace writes) and shuffled give the same.
  const std::vector<std::string> pre = {nodes[0], nodes[5], nodes[4], nodes[1], nodes[3], nodes[2]};
  CHECK(read(pre, "et_tree_pre.json").trace == r.trace);
  // A node on another thread is walked apart: an addmm of thread 2 under thread 1's linear is
  // outermost on its own thread.
  std::vector<std::string> threads = nodes;
  threads.push_back(node(8, "aten::t", 3, "[[10,10,0,12,4,\"cpu\"]]", "[[4,3]]", "[\"Tensor(float)\"]", "aten::t(Tensor(a) self) -> Tensor(a)", 2));
  CHECK(read(threads, "et_threads.json").trace.total_calls("t.default") == 2);
}

TEST_CASE("execution trace: argument types as torch writes them", "[execution_trace]") {
  using et_test::node, et_test::only_input, et_test::thread_root, et_test::trace_of, et_test::write;
  const std::vector<std::string> nodes = {
      thread_root(2),
      // A tensor list with a None (index.Tensor's indices), a scalar list, a double written as a string.
      node(3, "aten::index", 2, "[[1,1,0,12,4,\"cpu\"],[[2,2,0,2,8,\"cpu\"],\"<None>\"]]", "[[3,4],[[2],[]]]",
           "[\"Tensor(float)\",\"GenericList[Tensor(long int),None]\"]", "aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor"),
      node(4, "aten::sum", 2, "[[1,1,0,12,4,\"cpu\"],[0,1],true,\"<None>\"]", "[[3,4],[[],[]],[],[]]",
           "[\"Tensor(float)\",\"GenericList[Int,Int]\",\"Bool\",\"None\"]",
           "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"),
      node(5, "aten::clamp", 2, "[[1,1,0,12,4,\"cpu\"],\"-inf\",0.500000]", "[[3,4],[],[]]", "[\"Tensor(float)\",\"Double\",\"Double\"]",
           "aten::clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor"),
      node(6, "aten::gelu", 2, "[[1,1,0,12,4,\"cpu\"],\"tanh\"]", "[[3,4],[]]", "[\"Tensor(float)\",\"String\"]",
           "aten::gelu(Tensor self, *, str approximate=\\\"none\\\") -> Tensor"),
      node(7, "aten::cat", 2, "[[[1,1,0,12,4,\"cpu\"],[3,3,0,8,4,\"cpu\"]],0]", "[[[3,4],[2,4]],[]]",
           "[\"GenericList[Tensor(float),Tensor(float)]\",\"Int\"]", "aten::cat(Tensor[] tensors, int dim=0) -> Tensor"),
      node(8, "aten::transpose", 2, "[[9,1,1,12,4,\"cpu\"],0,1]", "[[4,3],[],[]]", "[\"Tensor(float)\",\"Int\",\"Int\"]",
           "aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)"),
  };
  // strides: [1, 4] for the transposed tensor
  const std::string text = et_test::with_edits(trace_of(nodes), {{"\"strides\": [[4,3],[],[]]", "\"strides\": [[1,4],[],[]]"}});
  const auto r = optrace::kineto::load_any(write("et_types.json", text), optrace::kineto::ImportOptions().record_strides(true));
  INFO(r.report.to_string());
  CHECK(r.report.incomplete == 0);
  CHECK(r.report.left_out == 0);
  const optrace::OpInput index = only_input(r.trace, "index.Tensor");
  REQUIRE(index.tensor_lists.size() == 1);
  CHECK(index.tensor_lists[0].second.shapes == std::vector<optrace::OptionalShape>{std::vector<int64_t>{2}, std::nullopt});
  CHECK(index.tensor_lists[0].second.dtypes == std::vector<std::string>{"torch.int64", "<class 'NoneType'>"});
  const optrace::OpInput sum = only_input(r.trace, "sum.dim_IntList");
  CHECK(sum.non_tensor_inputs[1] == optrace::OpValue::list({optrace::OpValue::integer(0), optrace::OpValue::integer(1)}));
  CHECK(sum.non_tensor_inputs[2] == optrace::OpValue::boolean(true));
  const optrace::OpInput clamp = only_input(r.trace, "clamp.default");
  CHECK(clamp.non_tensor_inputs[1] == optrace::OpValue::floating(-std::numeric_limits<double>::infinity()));
  CHECK(clamp.non_tensor_inputs[2] == optrace::OpValue::floating(0.5));
  CHECK(r.trace.total_calls("gelu.default") == 1);
  CHECK(only_input(r.trace, "cat.default").tensor_lists[0].second.shapes.size() == 2);
  REQUIRE(only_input(r.trace, "transpose.int").input_strides.size() == 3);
  CHECK(only_input(r.trace, "transpose.int").input_strides.front() == optrace::OptionalShape(std::vector<int64_t>{1, 4}));
  // Schema 1.0 (torch 2.0): inputs, input_shapes, input_types and attributes at the node, "parent".
  std::string flat = trace_of({"{\"id\": 2, \"name\": \"[pytorch|profiler|execution_trace|thread]\", \"parent\": 1, \"inputs\": [], "
                               "\"input_shapes\": [], \"input_types\": [], \"tid\": 1, \"op_schema\": \"\"}",
                               "{\"id\": 3, \"name\": \"aten::transpose\", \"parent\": 2, \"inputs\": [[9,1,1,12,4,\"cpu\"],0,1], "
                               "\"input_shapes\": [[4,3],[],[]], \"input_types\": [\"Tensor(float)\",\"Int\",\"Int\"], \"tid\": 1, "
                               "\"op_schema\": \"aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)\"}"},
                              "1.0.1");
  const auto old = optrace::kineto::load_any(write("et_flat.json", flat));
  CHECK(old.trace.total_calls("transpose.int") == 1);
  CHECK((only_input(old.trace, "transpose.int").non_tensor_inputs == only_input(r.trace, "transpose.int").non_tensor_inputs));
}

TEST_CASE("execution trace: a bad trace is one line naming the node", "[execution_trace][reliability]") {
  using et_test::node, et_test::only_input, et_test::thread_root, et_test::trace_of, et_test::write;
  auto error_of = [](const std::string& name, const std::string& text) {
    const std::string path = write(name, text);
    try {
      optrace::kineto::load_any(path);
    } catch (const optrace::Error& e) {
      const std::string what = e.what();
      CHECK(what.find('\n') == std::string::npos);
      return what.substr(path.size() + std::string("optrace: ").size() + 2);
    }
    return std::string("no error");
  };
  const std::string add = node(3, "aten::neg", 2, "[[1,1,0,3,4,\"cpu\"]]", "[[3]]", "[\"Tensor(float)\"]", "aten::neg(Tensor self) -> Tensor");
  CHECK(error_of("et_bad_schema.json", trace_of({add}, "2.0.0")) ==
        "JsonError at /schema: schema \"2.0.0\" is not one this reader knows (1.0.x or 1.1.x, as torch 2.x writes)");
  CHECK(error_of("et_no_schema.json", "{\"nodes\": []}") == "JsonError at /: missing key \"schema\"");
  CHECK(error_of("et_twice.json", trace_of({thread_root(2), add, add})) ==
        "JsonError at /nodes/2/id: node id 3 again (first at /nodes/1)");
  CHECK(error_of("et_cycle.json", trace_of({node(3, "a", 4, "[]", "[]", "[]"), node(4, "b", 3, "[]", "[]", "[]")})) ==
        "JsonError at /nodes/0/ctrl_deps: node id 3 is its own ancestor (its parents form a cycle)");
  CHECK(error_of("et_lengths.json", trace_of({node(3, "aten::neg", 2, "[]", "[[3]]", "[\"Tensor(float)\"]")})) ==
        "JsonError at /nodes/0/inputs/values: values and types differ in length (0 and 1)");
  CHECK(error_of("et_shape.json", trace_of({node(3, "aten::neg", 2, "[1]", "[[-3]]", "[\"Tensor(float)\"]")})) ==
        "JsonError at /nodes/0/inputs/shapes/0/0: negative size -3");
  CHECK(error_of("et_scalar.json", trace_of({node(3, "aten::add", 2, "[\"x\"]", "[[]]", "[\"Double\"]")})) ==
        "JsonError at /nodes/0/inputs/values/0: expected a number or a boolean, got string \"x\"");
  // Broken after its nodes list closed: refused as it is.
  CHECK(error_of("et_after_nodes.json", trace_of({add}) + "}") == "JsonError at /: malformed JSON: text after the trace's closing brace");
  CHECK(optrace::kineto::load_any(write("et_no_brace.json", trace_of({add}).substr(0, trace_of({add}).size() - 1))).report.cut_short ==
        "after /nodes");
  std::string no_comma = trace_of({thread_root(2), add});
  no_comma.erase(no_comma.find("},\n{") + 1, 1);
  CHECK(error_of("et_no_comma.json", no_comma).rfind("JsonError at /nodes", 0) == 0);
  // What the streamed reader follows itself: the nodes list's own bytes, brackets, depth, size.
  CHECK(error_of("et_bracket.json", trace_of({thread_root(2), "{\"id\": 3, \"name\": \"a\", \"ctrl_deps\": 2]"})) ==
        "JsonError at /nodes/1: malformed JSON: ']' where '}' was expected");
  CHECK(error_of("et_number.json", trace_of({thread_root(2), "5"})) == "JsonError at /nodes/1: expected a node object");
  std::string trailing_comma = trace_of({thread_root(2), add});
  trailing_comma.insert(trailing_comma.rfind("]"), ",");
  CHECK(error_of("et_trailing_comma.json", trailing_comma) == "JsonError at /nodes/2: malformed JSON: expected a node after ','");
  CHECK(error_of("et_nested.json", trace_of({"{\"id\": 2, \"x\": " + std::string(2000, '[') + std::string(2000, ']') + "}"})) ==
        "JsonError at /nodes/0: malformed JSON: nested more than 1024 deep");
  CHECK(error_of("et_two_lists.json", trace_of({thread_root(2)}).insert(1, "\"nodes\": [], ")) ==
        "JsonError at /nodes: a key given twice in one object (JSON readers differ on which value they take)");
  CHECK(error_of("et_nodes_not_list.json", "{\"schema\": \"1.1.1\", \"nodes\": 5}") == "JsonError at /nodes: expected a list of nodes, got integer 5");
  CHECK(error_of("et_outside.json", "{\"schema\": \"1.1.1\", \"time\": \"" + std::string(size_t(17) << 20, 'x') + "\", \"nodes\": []}") ==
        "JsonError at /: more than 16 MiB of text outside \"nodes\": not read, to bound the memory");
  // A key's escapes are read as every JSON reader reads them.
  std::string escaped = trace_of({thread_root(2), add});
  escaped.replace(escaped.find("\"nodes\""), 7, "\"nod\\u0065s\"");
  CHECK(optrace::kineto::load_any(write("et_escaped_key.json", escaped)).report.events == 2);
  // A chain 200,000 deep is walked without recursion.
  std::string deep = "{\"schema\": \"1.1.1\", \"nodes\": [";
  for (int k = 0; k < 200000; ++k)
    deep += (k ? "," : "") + std::string("{\"id\": ") + std::to_string(k + 2) + ", \"name\": \"r\", \"ctrl_deps\": " + std::to_string(k + 1) + "}";
  deep += "]}";
  const auto r = optrace::kineto::load_any(write("et_deep.json", deep));
  CHECK(r.report.events == 200000);
  CHECK(r.report.transparent == 200000);
}

TEST_CASE("execution trace: a trace cut short is read up to its last whole node, and said so", "[execution_trace]") {
  // A process that dies while torch writes its execution trace leaves it cut inside "nodes"
  // (pytorch#126703): the window's ops up to there are what there is to replay.
  const std::string whole = optrace::detail::read_file_maybe_gzip(optrace_test::data_path("execution_trace/mobilenet_v3_small.et.json.gz"));
  const auto full = optrace::kineto::load_any(optrace_test::data_path("execution_trace/mobilenet_v3_small.et.json.gz"));
  CHECK(full.report.cut_short.empty());
  for (size_t cut : {whole.size() / 2, whole.rfind("\"id\": ") + 3, whole.find("\"id\": ") + 3}) {
    INFO(cut);
    const auto r = optrace::kineto::load_any(et_test::write("et_cut.json", whole.substr(0, cut)));
    // Node k is the (k+1)-th "{\n      \"id\"" of torch's layout: the cut one is the last begun.
    size_t begun = 0;
    for (size_t at = whole.find("\"id\": "); at < cut; at = whole.find("\"id\": ", at + 1)) ++begun;
    CHECK(r.report.cut_short == "/nodes/" + std::to_string(begun - 1));
    CHECK(r.report.events == static_cast<int64_t>(begun - 1));
    CHECK(r.trace.total_calls() <= full.trace.total_calls());
    CHECK(r.report.to_string().find("note: the trace is cut short (its process died while writing it?): it ends inside /nodes/") !=
          std::string::npos);
  }
  // Cut in the keys after the nodes: every node read, and said so.
  const auto after = optrace::kineto::load_any(et_test::write("et_cut.json", whole.substr(0, whole.size() - 8)));
  CHECK(after.trace == full.trace);
  CHECK(after.report.cut_short == "after /nodes");
  const auto half = optrace::kineto::load_any(et_test::write("et_cut.json", whole.substr(0, whole.size() / 2)));
  CHECK(half.trace.total_calls() > 40);
  CHECK(half.trace.total_calls() < full.trace.total_calls());
}

TEST_CASE("execution trace: streamed a piece at a time, the same nodes whatever the pieces", "[execution_trace]") {
  namespace et = optrace::detail::kineto::execution_trace;
  const std::string whole = optrace::detail::read_file_maybe_gzip(optrace_test::data_path("execution_trace/train_step.et.json.gz"));
  const et::Trace from_text = et::read_trace_text(whole, true);
  REQUIRE(from_text.nodes.size() > 100);
  // Pieces of one byte and of seven cut every string, escape, number and bracket somewhere.
  for (size_t step : {size_t(1), size_t(7), size_t(4096)}) {
    INFO(step);
    optrace_test::TextReader in{whole, step};
    const et::Trace streamed = et::read_trace(in, true);
    REQUIRE(streamed.nodes.size() == from_text.nodes.size());
    CHECK(streamed.cut_short.empty());
    for (size_t k = 0; k < streamed.nodes.size(); ++k) {
      const et::Node &a = streamed.nodes[k], &b = from_text.nodes[k];
      CHECK((a.id == b.id && a.parent == b.parent && a.rf_id == b.rf_id && a.name == b.name && a.raw.dims == b.raw.dims &&
             a.raw.concrete == b.raw.concrete && a.inputs.size() == b.inputs.size() && a.outputs.size() == b.outputs.size()));
    }
  }
  // Cut short in a piece of its own: the nodes before the cut, and said so.
  optrace_test::TextReader cut{std::string_view(whole).substr(0, whole.size() / 2), 5};
  const et::Trace half = et::read_trace(cut, false);
  CHECK(half.cut_short == "/nodes/" + std::to_string(half.nodes.size()));
  CHECK(half.nodes.size() < from_text.nodes.size());
}

namespace {
namespace et_test {
// `node_text` with its outputs set.
std::string with_outputs(std::string node_text, const std::string& values, const std::string& shapes, const std::string& types) {
  const std::string empty = "\"outputs\": {\"values\": [], \"shapes\": [], \"types\": [], \"strides\": []}";
  node_text.replace(node_text.find(empty), empty.size(),
                    "\"outputs\": {\"values\": " + values + ", \"shapes\": " + shapes + ", \"types\": " + types + ", \"strides\": " + shapes + "}");
  return node_text;
}
}  // namespace et_test
}  // namespace

TEST_CASE("execution trace replay: one id is one tensor, through in-place ops and outputs", "[execution_trace][replay]") {
  using et_test::node, et_test::thread_root, et_test::trace_of, et_test::with_outputs;
  const std::string x = "[5,6,0,6,4,\"cpu\"]", y = "[7,8,0,6,4,\"cpu\"]";
  const std::vector<std::string> nodes = {
      thread_root(2),
      with_outputs(node(3, "aten::ones", 2, "[[2,3],\"<None>\",\"<None>\",\"<None>\",\"<None>\"]", "[[[],[]],[],[],[],[]]",
                        "[\"GenericList[Int,Int]\",\"None\",\"None\",\"None\",\"None\"]",
                        "aten::ones(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"),
                   "[" + x + "]", "[[2,3]]", "[\"Tensor(float)\"]"),
      with_outputs(node(4, "aten::add_", 2, "[" + x + "," + x + ",1]", "[[2,3],[2,3],[]]", "[\"Tensor(float)\",\"Tensor(float)\",\"Int\"]",
                        "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)"),
                   "[" + x + "]", "[[2,3]]", "[\"Tensor(float)\"]"),
      with_outputs(node(6, "aten::mul", 2, "[" + x + "," + x + "]", "[[2,3],[2,3]]", "[\"Tensor(float)\",\"Tensor(float)\"]",
                        "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor"),
                   "[" + y + "]", "[[2,3]]", "[\"Tensor(float)\"]"),
      node(8, "aten::sum", 2, "[" + y + ",\"<None>\"]", "[[2,3],[]]", "[\"Tensor(float)\",\"None\"]",
           "aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor"),
      node(9, "c10d::allreduce_", 2, "[]", "[]", "[]"),
  };
  const auto r = optrace::replay_execution_trace(et_test::write("et_identity.json", trace_of(nodes)),
                                                 optrace::ReplayOptions().device(c10::kCPU));
  INFO(r.summary());
  REQUIRE(r.nodes.size() == 4);
  CHECK(r.count(optrace::ReplayStatus::ok) == 4);
  CHECK(r.collectives == 1);
  CHECK(r.nodes[1].op == "add_.Tensor");
  CHECK(r.nodes[1].inputs_from == std::vector<int64_t>{3, 3});  // ones' output, both
  CHECK(r.nodes[2].inputs_from == std::vector<int64_t>{4, 4});  // add_'s (in-place: the same tensor)
  CHECK(r.nodes[3].inputs_from == std::vector<int64_t>{6});
  CHECK(r.shared_inputs == 5);
  CHECK(r.external_tensors == 0);
}

TEST_CASE("execution trace replay: tensors of one storage are views of one memory, at their offsets", "[execution_trace][replay]") {
  namespace et = optrace::detail::kineto::execution_trace;
  // Storage 20 holds 12 floats; tensor 10 is its first 6 as [2, 3], tensor 11 a [3] view at 3.
  optrace::detail::IdentityState state({{20, 12}}, int64_t{1} << 30);
  state.begin_pass();
  et::TensorRef x{10, 20, 0, 6, 4, "cpu", "float"}, y{11, 20, 3, 3, 4, "cpu", "float"}, z{12, 21, 0, 3, 4, "cpu", "float"};
  at::Tensor a = at::rand({2, 3}), b = at::rand({3}), c = at::rand({3});
  const at::Tensor a_values = a.clone();
  int64_t producer = 0;
  CHECK(state.bind(x, a, producer) == optrace::detail::IdentityState::Bound::external);
  CHECK(producer == -1);
  CHECK(at::equal(a, a_values));  // its values kept, in a memory of its storage's 12 floats
  CHECK(a.storage().nbytes() == 12 * 4);
  CHECK(state.bind(y, b, producer) == optrace::detail::IdentityState::Bound::view);
  CHECK(b.data_ptr<float>() == a.data_ptr<float>() + 3);
  CHECK(at::equal(b, a[1]));
  CHECK(state.bind(z, c, producer) == optrace::detail::IdentityState::Bound::external);
  CHECK(!c.storage().is_alias_of(a.storage()));
  // The same id again is the same tensor; an output with that id replaces it.
  at::Tensor again = at::rand({2, 3});
  CHECK(state.bind(x, again, producer) == optrace::detail::IdentityState::Bound::external_again);
  CHECK(again.data_ptr() == a.data_ptr());
  const at::Tensor out = at::ones({2, 3});
  state.keep_output(x, out, 7);
  at::Tensor read = at::rand({2, 3});
  CHECK(state.bind(x, read, producer) == optrace::detail::IdentityState::Bound::output);
  CHECK(producer == 7);
  CHECK(read.data_ptr() == out.data_ptr());
  // A new pass starts from the tensors from outside the window.
  state.begin_pass();
  at::Tensor first = at::rand({2, 3});
  CHECK(state.bind(x, first, producer) == optrace::detail::IdentityState::Bound::external_again);
  CHECK(first.data_ptr() == a.data_ptr());
}

TEST_CASE("execution trace replay: an in-place op on one view is seen through the other", "[execution_trace][replay]") {
  using et_test::node, et_test::thread_root, et_test::trace_of, et_test::with_outputs;
  // fill_ on [2, 3] tensor 10 (storage 20); then sum of tensor 11, the [3] view at offset 3.
  const std::string x = "[10,20,0,6,4,\"cpu\"]", y = "[11,20,3,3,4,\"cpu\"]";
  const std::vector<std::string> nodes = {
      thread_root(2),
      with_outputs(node(3, "aten::fill_", 2, "[" + x + ",2]", "[[2,3],[]]", "[\"Tensor(float)\",\"Int\"]",
                        "aten::fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)"),
                   "[" + x + "]", "[[2,3]]", "[\"Tensor(float)\"]"),
      node(4, "aten::sum", 2, "[" + y + ",\"<None>\"]", "[[3],[]]", "[\"Tensor(float)\",\"None\"]",
           "aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor"),
  };
  const std::string text = et_test::with_edits(trace_of(nodes), {{"\"strides\": [[2,3],[]]", "\"strides\": [[3,1],[]]"},
                                                                 {"\"strides\": [[3],[]]", "\"strides\": [[1],[]]"}});
  const auto r = optrace::replay_execution_trace(et_test::write("et_views.json", text),
                                                 optrace::ReplayOptions().device(c10::kCPU).progress(false));
  INFO(r.summary());
  REQUIRE(r.nodes.size() == 2);
  CHECK(r.count(optrace::ReplayStatus::ok) == 2);
  CHECK(r.external_tensors == 2);
  CHECK(r.storage_views == 1);
  CHECK(r.nodes[1].inputs_from == std::vector<int64_t>{-1});  // from outside, but fill_'s memory
}

TEST_CASE("execution trace replay: keyword-only arguments run as recorded (clone to contiguous, then view)",
          "[execution_trace][replay]") {
  using et_test::node, et_test::thread_root, et_test::trace_of, et_test::with_outputs;
  // clone(x, memory_format=torch.contiguous_format) of a transposed x: without its keyword the
  // clone keeps x's strides, and the view of its output fails.
  const std::string x = "[10,20,0,6,4,\"cpu\"]", y = "[11,21,0,6,4,\"cpu\"]";
  const std::vector<std::string> nodes = {
      thread_root(2),
      with_outputs(node(3, "aten::clone", 2, "[" + x + ",0]", "[[3,2],[]]", "[\"Tensor(float)\",\"Int\"]",
                        "aten::clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor"),
                   "[" + y + "]", "[[3,2]]", "[\"Tensor(float)\"]"),
      node(4, "aten::view", 2, "[" + y + ",[6]]", "[[3,2],[[]]]", "[\"Tensor(float)\",\"GenericList[Int]\"]",
           "aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)"),
  };
  const std::string text = et_test::with_edits(trace_of(nodes), {{"\"strides\": [[3,2],[]]", "\"strides\": [[1,3],[]]"},
                                                                 {"\"strides\": [[3,2]]", "\"strides\": [[2,1]]"},
                                                                 {"\"strides\": [[3,2],[[]]]", "\"strides\": [[2,1],[[]]]"}});
  const auto r = optrace::replay_execution_trace(et_test::write("et_keyword.json", text),
                                                 optrace::ReplayOptions().device(c10::kCPU).progress(false));
  INFO(r.summary());
  REQUIRE(r.nodes.size() == 2);
  CHECK(r.nodes[1].inputs_from == std::vector<int64_t>{3});
  CHECK(r.count(optrace::ReplayStatus::ok) == 2);
  // An import keeps the reference tracer's positional view unless asked.
  const std::string path = et_test::write("et_keyword_import.json", text);
  CHECK(optrace::kineto::load_any(path).trace.find("clone.default")->unique_inputs[0].kwargs.empty());
  const auto kept = optrace::kineto::load_any(path, optrace::kineto::ImportOptions().keyword_arguments(true));
  const auto& kwargs = kept.trace.find("clone.default")->unique_inputs[0].kwargs;
  REQUIRE(kwargs.size() == 1);
  CHECK(kwargs[0].name == "memory_format");
}

TEST_CASE("execution trace replay: a hostile storage offset gets memory of its own", "[execution_trace][replay]") {
  using et_test::node, et_test::thread_root, et_test::trace_of;
  const std::vector<std::string> nodes = {
      thread_root(2),
      node(3, "aten::sum", 2, "[[12,30,9223372036854775000,3,4,\"cpu\"],\"<None>\"]", "[[3],[]]", "[\"Tensor(float)\",\"None\"]",
           "aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor"),
      node(4, "aten::sum", 2, "[[13,30,1,3,4,\"cpu\"],\"<None>\"]", "[[3],[]]", "[\"Tensor(float)\",\"None\"]",
           "aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor"),
  };
  const auto r = optrace::replay_execution_trace(et_test::write("et_hostile_offset.json", trace_of(nodes)),
                                                 optrace::ReplayOptions().device(c10::kCPU).progress(false));
  INFO(r.summary());
  CHECK(r.count(optrace::ReplayStatus::ok) == 2);
  CHECK(r.storage_views == 0);
}

TEST_CASE("execution trace replay: torch 2.6's traces of real models, every call, timed against their Kineto traces",
          "[execution_trace][replay]") {
  for (const std::string model : {"mobilenet_v3_small", "train_step"}) {
    INFO(model);
    const std::string base = optrace_test::data_path("execution_trace/" + model);
    const auto r = optrace::replay_execution_trace(base + ".et.json.gz", optrace::ReplayOptions().device(c10::kCPU).progress(false),
                                                   base + ".pt.trace.json.gz");
    INFO(r.summary());
    std::string failures;
    for (const auto& n : r.nodes)
      if (n.status != optrace::ReplayStatus::ok) failures += n.op + ": " + n.message + "\n";
    INFO(failures);
    CHECK(r.nodes.size() == (model == "train_step" ? 37u : 192u));
    CHECK(r.count(optrace::ReplayStatus::ok) == static_cast<int64_t>(r.nodes.size()));
    CHECK(r.shared_inputs > 0);
    // Every call found in the Kineto trace by its RecordFunction id, under its own name.
    CHECK(r.recorded_nodes == static_cast<int64_t>(r.nodes.size()));
    CHECK(r.recorded_ms > 0);
    CHECK(r.total_ms > 0);
  }
}

TEST_CASE("execution trace replay: time mode runs warm-up passes over the whole window, then timed ones",
          "[execution_trace][replay]") {
  const auto r = optrace::replay_execution_trace(optrace_test::data_path("execution_trace/train_step.et.json.gz"),
                                                 optrace::ReplayOptions().device(c10::kCPU).progress(false).mode(optrace::ReplayMode::time).warmup(1).repeats(3));
  INFO(r.summary());
  CHECK(r.warmup_passes == 1);
  CHECK(r.timed_passes == 3);
  CHECK(r.count(optrace::ReplayStatus::ok) == 37);
  const auto json = optrace::json::Document::parse(r.to_json());
  CHECK(json->root()["summary"]["ok"].as_int() == 37);
  CHECK(json->root()["nodes"].size() == 37);
  for (optrace::json::Node n : json->root()["nodes"].array()) CHECK(n["recorded_ms"].is_null());
}

TEST_CASE("execution trace replay: stop_when stops between calls and keeps what ran", "[execution_trace][replay]") {
  int asked = 0;
  const auto r = optrace::replay_execution_trace(
      optrace_test::data_path("execution_trace/train_step.et.json.gz"),
      optrace::ReplayOptions().device(c10::kCPU).progress(false).stop_when([&asked] { return ++asked > 5; }));
  CHECK(!r.complete);
  CHECK(r.passes_run == 1);
  int64_t timed = 0;
  for (const auto& n : r.nodes) timed += n.ms > 0;
  CHECK(timed == 5);
  CHECK(r.summary().find("INCOMPLETE") != std::string::npos);
}

TEST_CASE("execution trace replay: a Kineto trace of another window times nothing", "[execution_trace][replay]") {
  const auto r = optrace::replay_execution_trace(optrace_test::data_path("execution_trace/train_step.et.json.gz"),
                                                 optrace::ReplayOptions().device(c10::kCPU).progress(false),
                                                 optrace_test::data_path("execution_trace/mobilenet_v3_small.pt.trace.json.gz"));
  CHECK(r.recorded_nodes < 5);  // rf_ids that name calls of other ops there are not taken
}
