// Tests for optrace/observations.hpp: the observation file written, read back, validated, materialized.
#include <optrace/materialize.hpp>
#include <optrace/observations.hpp>
#include <optrace/observer.hpp>

#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <regex>

#include "optrace_catch.hpp"

namespace {

struct MaskedIdsImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor ids, c10::optional<torch::Tensor> mask) { return mask ? ids * *mask : ids; }
};
TORCH_MODULE(MaskedIds);

optrace::InputObserver<MaskedIds> observed() {
  optrace::InputObserver<MaskedIds> observer(MaskedIds{}, optrace::ObserverOptions().arg_names({"input_ids", "attention_mask"}));
  observer(torch::zeros({2, 16}, torch::kLong), c10::optional<torch::Tensor>());
  observer(torch::zeros({4, 24}, torch::kLong), c10::optional<torch::Tensor>(torch::ones({4, 24}, torch::kLong)));
  observer(torch::zeros({4, 24}, torch::kLong), c10::optional<torch::Tensor>(torch::ones({4, 24}, torch::kLong)));
  observer(torch::zeros({3, 9}, torch::kLong), c10::optional<torch::Tensor>(torch::ones({3, 9}, torch::kLong)));
  return observer;
}

/// The file without the producer's torch version, which differs between libtorch versions.
std::string portable(std::string json) {
  return std::regex_replace(json, std::regex("\"torch\": \"[^\"]*\""), "\"torch\": \"X\"");
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A valid file with one replacement applied, for the error paths.
std::string edited(const std::string& from, const std::string& to) {
  std::string text = observed().to_json(0);
  size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// Token ids in [3, 97] over the stored calls (a fourth call, not stored, has 1000), float
// scores, a bool mask.
struct Ranked {
  int64_t operator()(const torch::Tensor& ids, const torch::Tensor& scores, const torch::Tensor& keep) const {
    return ids.size(0) + scores.size(0) + keep.size(0);
  }
};

std::string ranked_json(int indent = 1) {
  optrace::InputObserver<Ranked> observer(Ranked{}, optrace::ObserverOptions().arg_names({"input_ids", "scores", "keep"}));
  for (const torch::Tensor& ids : {torch::arange(3, 41).view({2, 19}), torch::arange(10, 98).view({4, 22}),
                                   torch::full({3, 9}, 50, torch::kLong), torch::full({3, 9}, 1000, torch::kLong)})
    observer(ids, torch::randn({ids.size(0)}), torch::ones({ids.size(0)}, torch::kBool));
  return observer.to_json(indent);
}

/// `text` with `from` replaced by `to` (once; it must be there).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

struct Batch {
  torch::Tensor input_ids;
  c10::optional<torch::Tensor> attention_mask;
  int64_t num_beams;
};
OPTRACE_FIELDS(Batch, input_ids, attention_mask, num_beams)

}  // namespace

// The optrace front end (no libtorch) shows an observation file's arguments through
// describe_arguments: it must read as infer_arguments().describe() for every choice of call.
TEST_CASE("observations: describe_arguments reads as infer_arguments().describe(), building no tensor", "[observations]") {
  auto same_for_every_call = [](const std::string& text) {
    auto obs = optrace::Observations::from_json(text);
    CHECK(obs.describe_arguments() == obs.infer_arguments().describe());
    for (int64_t k = 0; k < obs.num_obs(); ++k) {
      optrace::InferArgumentsOptions choice;
      choice.call_index(k);
      CHECK(obs.describe_arguments(choice) == obs.infer_arguments(choice).describe());
    }
    return obs.describe_arguments();
  };
  // Positional, with a synthesized input (the first call has no mask: int64[4, 0]).
  CHECK(same_for_every_call(observed().to_json()) == "(int64[4, 24]@meta, int64[4, 24]@meta)");
  // A struct (a dict once in IValues), a list, a dict, a tuple with a float, a nullopt field.
  auto fn = [](const Batch&, const std::vector<torch::Tensor>&, const std::map<std::string, torch::Tensor>&,
               const std::tuple<torch::Tensor, double>&) { return 0; };
  optrace::InputObserver<decltype(fn)> nested(fn, optrace::ObserverOptions().arg_names({"batch", "cache", "extra", "pair"}));
  for (int64_t s : {3, 5, 9, 11}) {
    Batch batch{torch::ones({2, s}, torch::kLong), s == 3 ? c10::nullopt : c10::optional<torch::Tensor>(torch::ones({2, s})), 4};
    nested(batch, std::vector<torch::Tensor>{torch::ones({2, 4, s}), torch::ones({2, 4, s})},
           std::map<std::string, torch::Tensor>{{"pos", torch::arange(s)}}, std::make_tuple(torch::ones({7}), 0.5));
  }
  CHECK(same_for_every_call(nested.to_json()) ==
        "(dict(input_ids: int64[2, 5]@meta, attention_mask: float32[2, 5]@meta, num_beams: int 4), "
        "[float32[2, 4, 5]@meta, float32[2, 4, 5]@meta], dict(pos: int64[5]@meta), (float32[7]@meta, float 0.5))");
  // Keyword calls: a dict of the arguments, a synthesized mask where a call had none.
  auto free = [](const std::vector<c10::IValue>&, const torch::jit::Kwargs&) { return c10::IValue(); };
  optrace::InputObserver<decltype(free)> keyed(free);
  keyed.call({}, {{"x", torch::randn({2, 8})}});
  keyed.call({}, {{"x", torch::randn({3, 8})}, {"mask", torch::ones({3, 8})}});
  keyed.call({}, {{"x", torch::randn({4, 8})}, {"mask", torch::ones({4, 8})}});
  CHECK(same_for_every_call(keyed.to_json()) == "dict(x: float32[3, 8]@meta, mask: float32[3, 8]@meta)");
  CHECK(optrace::Observations::from_json(keyed.to_json()).describe_arguments(optrace::InferArgumentsOptions().call_index(0)) ==
        "dict(x: float32[2, 8]@meta, mask: float32[0, 8]@meta)");
}

TEST_CASE("observations: the file has what Python tools read", "[observations]") {
  std::string text = portable(observed().to_json());
  // Regenerate with OPTRACE_UPDATE_GOLDEN=1 after a deliberate format change, and review the diff.
  const std::string golden = optrace_test::data_path("observations/masked.json");
  if (std::getenv("OPTRACE_UPDATE_GOLDEN")) {
    std::ofstream(golden) << text << "\n";
  }
  CHECK(text + "\n" == read_text(golden));
  CHECK_THAT(text, OPTRACE_CONTAINS(R"("range_constraints": {
  "s0": {
   "min_val": 2,
   "max_val": 4
  },)"));
  CHECK_THAT(text, OPTRACE_CONTAINS(R"("as_expr": {
       "expr_str": "s0",
       "hint": {
        "as_int": 4
       }
      })"));
  CHECK_THAT(text, OPTRACE_CONTAINS(
      R"("in_spec": "[1, {\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": [{\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": [{\"type\": null, \"context\": null, \"children_spec\": []}, {\"type\": null, \"context\": null, \"children_spec\": []}]}, {\"type\": \"builtins.dict\", \"context\": \"[]\", \"children_spec\": []}]}]")"));
}

TEST_CASE("observations: save and load round trip", "[observations]") {
  auto observer = observed();
  const std::string path = optrace_test::temp_path("round_trip.json");
  observer.save(path);
  optrace::Observations obs = optrace::load_observations(path);
  CHECK(obs.to_json() == observer.to_json());
  CHECK(obs.num_obs() == 3);
  CHECK(obs.num_calls() == 4);
  REQUIRE(obs.history().size() == 3);
  CHECK(obs.history()[1].second == 2);
  CHECK(obs.infer_dynamic_shapes().to_json() == observer.infer_dynamic_shapes().to_json());
  CHECK(obs.infer_dynamic_shapes(optrace::DynamicShapesOptions().shared_symbols()).to_python() ==
        observer.infer_dynamic_shapes(optrace::DynamicShapesOptions().shared_symbols()).to_python());
  CHECK(obs.infer_arguments().describe() == "(int64[4, 24]@meta, int64[4, 24]@meta)");
  CHECK(observer.infer_arguments().describe() == "(int64[4, 24], int64[4, 24])");
  CHECK(obs.infer_arguments(optrace::InferArgumentsOptions().call_index(0)).describe() ==
        "(int64[2, 16]@meta, int64[4, 0]@meta)");
}

TEST_CASE("observations: materialize on CPU and meta", "[observations]") {
  optrace::Observations obs = optrace::Observations::from_json(observed().to_json());
  auto a = obs.materialize(optrace::MaterializeOptions().seed(7).int_range(0, 5));
  REQUIRE(a.args.size() == 2);
  auto ids = a.args[0].toTensor();
  CHECK(ids.device().is_cpu());
  CHECK(ids.sizes() == std::vector<int64_t>({4, 24}));
  CHECK(ids.scalar_type() == torch::kLong);
  CHECK(ids.min().item<int64_t>() >= 0);
  CHECK(ids.max().item<int64_t>() < 5);
  auto again = obs.materialize(optrace::MaterializeOptions().seed(7).int_range(0, 5));
  CHECK(torch::equal(ids, again.args[0].toTensor()));
  auto other = obs.materialize(optrace::MaterializeOptions().seed(8).int_range(0, 5));
  CHECK_FALSE(torch::equal(ids, other.args[0].toTensor()));
  auto meta = obs.materialize(optrace::MaterializeOptions().device(c10::Device(c10::kMeta)));
  CHECK(meta.args[1].toTensor().is_meta());
  CHECK_THROWS_WITH(obs.materialize(optrace::MaterializeOptions().memory_budget_bytes(100)),
                    OPTRACE_CONTAINS("optrace: MaterializeError: 2 tensors need 1536 bytes on cpu, over the memory budget of 100 bytes"));
}

TEST_CASE("observations: strides and offsets survive the file", "[observations]") {
  auto fn = [](torch::Tensor x) { return x; };
  optrace::InputObserver<decltype(fn)> observer(fn, optrace::ObserverOptions().arg_names({"x"}));
  auto base = torch::zeros({4, 6});
  observer(base.t());                                    // strides (1, 6)
  observer(base.narrow(1, 2, 3));                       // offset 2
  observer(torch::zeros({1, 5}).expand({3, 5}));        // stride 0
  auto obs = optrace::Observations::from_json(observer.to_json());
  auto t = obs.materialize({}, optrace::InferArgumentsOptions().call_index(0)).args[0].toTensor();
  CHECK(t.strides() == std::vector<int64_t>({1, 6}));
  auto n = obs.materialize({}, optrace::InferArgumentsOptions().call_index(1)).args[0].toTensor();
  CHECK(n.storage_offset() == 2);
  CHECK(n.strides() == std::vector<int64_t>({6, 1}));
  auto e = obs.materialize({}, optrace::InferArgumentsOptions().call_index(2)).args[0].toTensor();
  CHECK(e.strides() == std::vector<int64_t>({0, 1}));
  CHECK(torch::equal(e[0], e[2]));
}

TEST_CASE("observations: structs keep their field names", "[observations]") {
  auto fn = [](const c10::IValue&) { return 0; };
  optrace::InputObserver<decltype(fn)> observer(fn);
  for (int64_t n : {2, 3}) {
    c10::Dict<std::string, at::Tensor> d;
    d.insert("k", torch::zeros({n}));
    observer(c10::IValue(d));
  }
  std::string text = observer.to_json(0);
  CHECK_THAT(text, OPTRACE_CONTAINS(R"(\"type\": \"builtins.dict\", \"context\": \"[\\\"k\\\"]\")"));
  CHECK_THAT(text, OPTRACE_CONTAINS(R"("inputs": [{"name": "#0[\"k\"]", "argument": "#0", "meta": {"dtype": 7)"));
}

TEST_CASE("observations: expr_str as sympy srepr", "[observations]") {
  std::string text = edited(R"("expr_str": "s0")", R"x("expr_str": "Symbol('s0', integer=True, positive=True)")x");
  CHECK_NOTHROW(optrace::Observations::from_json(text));
  CHECK_THROWS_WITH(optrace::Observations::from_json(edited(R"("expr_str": "s0")", R"x("expr_str": "Symbol()")x")),
                    "optrace: JsonError at /inputs/0/meta/sizes/0/as_expr/expr_str: expected a symbol in Symbol('name', ...), "
                    "got string \"Symbol()\"");
}

TEST_CASE("observations: every error names the path and the value", "[observations]") {
  auto load = [](const std::string& text) { return optrace::Observations::from_json(text); };
  CHECK_THROWS_WITH(load(edited(R"("major": 1)", R"("major": 2)")),
                    "optrace: JsonError at /version/major: unsupported major version 2 (this optrace reads 1.x); upgrade optrace");
  CHECK_NOTHROW(load(edited(R"("minor": 2)", R"("minor": 7, "new_field": 1)")));
  CHECK_THROWS_WITH(load(edited(R"("format": "optrace.observations")", R"("format": "x")")),
                    "optrace: JsonError at /format: expected \"optrace.observations\", got string \"x\"");
  CHECK_THROWS_WITH(load(edited(R"({"dtype": 5, "sizes": [{"as_int": 2})", R"({"dtype": 5, "sizes": [{"as_int": -2})")),
                    "optrace: JsonError at /history/0/call/dict/input_ids/tensor/sizes/0: expected a size >= 0, got -2");
  CHECK_THROWS_WITH(load(edited(R"({"dtype": 5,)", R"({"dtype": 99,)")),
                    "optrace: JsonError at /inputs/0/meta/dtype: unknown dtype number 99 (torch.export schema ScalarType: 1-13, 28-30)");
  CHECK_THROWS_WITH(load(edited(R"("sizes": [{"as_int": 2})", R"("sizes": ["abc")")),
                    OPTRACE_CONTAINS("optrace: JsonError at /history/0/call/dict/input_ids/tensor/sizes/0: expected a SymInt {\"as_int\": n} or {\"as_expr\": {...}}, got string \"abc\""));
  CHECK_THROWS_WITH(load(edited(R"("strides": [{"as_int": 16}, {"as_int": 1}])", R"("strides": [{"as_int": 1}])")),
                    "optrace: JsonError at /history/0/call/dict/input_ids/tensor/strides: expected 2 strides (one per size), got 1");
  CHECK_THROWS_WITH(load(edited(R"("keyed": false)", R"("keyed": "no")")),
                    "optrace: JsonError at /keyed: expected a boolean, got string \"no\"");
  CHECK_THROWS_WITH(load(edited(R"("count": 1)", R"("count": 0)")),
                    "optrace: JsonError at /history/0/count: expected a count >= 1, got integer 0");
  CHECK_THROWS_WITH(load(edited(R"({"as_expr": {"expr_str": "s0", "hint": {"as_int": 4}}})", R"({"as_expr": {"expr_str": "s0"}})")),
                    "optrace: JsonError at /inputs/0/meta/sizes/0/as_expr: a symbolic size needs a hint (its example value) to be rebuilt");
  CHECK_THROWS_WITH(load(edited(R"("strides": [{"as_int": 16}, {"as_int": 1}])", R"("strides": [{"as_int": 16}, {"as_int": -1}])")),
                    "optrace: JsonError at /history/0/call/dict/input_ids/tensor/strides/1: expected a stride >= 0 (negative strides are "
                    "not supported), got -1");
  // Counts that do not add up.
  CHECK_THROWS_WITH(load(edited(R"("total": 4)", R"("total": 3)")),
                    "optrace: JsonError at /calls/total: total 3 is less than the 4 calls the history counts");
  CHECK_THROWS_WITH(load(edited(R"("distinct": 3)", R"("distinct": 2)")),
                    "optrace: JsonError at /calls/distinct: expected 3 (the signatures in history), got integer 2");
  CHECK_THROWS_WITH(load(edited(R"("stored": 3)", R"("stored": 5)")),
                    "optrace: JsonError at /calls/stored: expected 3 (the calls in stored), got integer 5");
  CHECK_THROWS_WITH(load(edited(R"("dropped_signatures": 0)", R"("dropped_signatures": -1)")),
                    "optrace: JsonError at /calls/dropped_signatures: expected a count >= 0, got integer -1");
  std::string text = observed().to_json(0);
  CHECK_THROWS_WITH(load(text.substr(0, text.size() / 2)), OPTRACE_CONTAINS("optrace: JsonError at /:"));
  CHECK_THROWS_AS(optrace::load_observations(optrace_test::temp_path("no/such/file.json")), optrace::IoError);
}

TEST_CASE("observations: integer inputs keep their observed range", "[observations]") {
  const std::string text = ranked_json(0);
  CHECK_THAT(text, OPTRACE_CONTAINS(R"("version": {"major": 1, "minor": 2})"));
  CHECK_THAT(text, OPTRACE_CONTAINS(R"("value": null, "int_range": [3, 97]})"));
  CHECK(text.find("int_range") == text.rfind("int_range"));  // not on the float or bool input
  auto obs = optrace::Observations::from_json(text);
  CHECK(obs.to_json(0) == text);
  CHECK(optrace::Observations::from_json(ranked_json()).to_json() == ranked_json());
  SECTION("materialize draws within it, unless int_range is set") {
    auto within = [](const c10::IValue& v, int64_t lo, int64_t hi) {
      const at::Tensor t = v.toTensor();
      return t.min().item<int64_t>() >= lo && t.max().item<int64_t>() <= hi;
    };
    for (size_t k = 0; k < obs.history().size(); ++k) {
      auto a = obs.materialize_signature(k);
      CHECK(within(a.args[0], 3, 97));
      CHECK(a.args[0].toTensor().max().item<int64_t>() >= 8);  // not the default [0, 8)
      CHECK(within(obs.materialize_signature(k, optrace::MaterializeOptions().int_range(0, 2)).args[0], 0, 1));
      CHECK(within(obs.materialize_signature(k, optrace::MaterializeOptions().int_range(0, 8)).args[0], 0, 7));
    }
    CHECK(within(obs.materialize().args[0], 3, 97));
    CHECK(within(obs.materialize(optrace::MaterializeOptions().seed(3).int_range(0, 2)).args[0], 0, 1));
  }
  SECTION("a range the dtype cannot hold is clamped to it") {
    auto bytes = [](const torch::Tensor& ids, const torch::Tensor&, const torch::Tensor&) { return ids.size(0); };
    optrace::InputObserver<decltype(bytes)> observer(bytes, optrace::ObserverOptions().arg_names({"input_ids", "scores", "keep"}));
    observer(torch::full({64}, 250, torch::kByte), torch::ones({2}), torch::ones({2}, torch::kBool));
    std::string edited_text = replaced(observer.to_json(0), R"("int_range": [250, 250])", R"("int_range": [250, 900])");
    at::Tensor t = optrace::Observations::from_json(edited_text).materialize_signature(0).args[0].toTensor();
    CHECK(t.min().item<int64_t>() >= 250);
    CHECK(t.max().item<int64_t>() == 255);
  }
  SECTION("a bad int_range names its path") {
    const std::string range = R"("int_range": [3, 97])";
    CHECK_THROWS_WITH(optrace::Observations::from_json(replaced(text, range, R"("int_range": [5, 2])")),
                      "optrace: JsonError at /inputs/0/int_range: expected min <= max, got [5, 2]");
    CHECK_THROWS_WITH(optrace::Observations::from_json(replaced(text, range, R"("int_range": "3-97")")),
                      "optrace: JsonError at /inputs/0/int_range: expected [min, max], two integers, got string \"3-97\"");
    CHECK_THROWS_WITH(optrace::Observations::from_json(replaced(text, range, R"("int_range": [3])")),
                      "optrace: JsonError at /inputs/0/int_range: expected [min, max], two integers, got a list of 1");
    CHECK_THROWS_WITH(optrace::Observations::from_json(replaced(text, range, R"("int_range": [3, 9.5])")),
                      "optrace: JsonError at /inputs/0/int_range/1: expected an integer, got number 9.5");
    const std::string on_float = replaced(replaced(text, ", " + range, ""), R"("name": "scores")",
                                          R"("int_range": [0, 1], "name": "scores")");
    CHECK_THROWS_WITH(optrace::Observations::from_json(on_float),
                      "optrace: JsonError at /inputs/1/int_range: an int_range belongs to an integer tensor (int8, int16, "
                      "int32, int64, uint8)");
  }
  SECTION("a file without ranges (1.1) still loads, and draws integers in [0, 8)") {
    std::string older = replaced(replaced(text, R"(, "int_range": [3, 97])", ""), R"("minor": 2)", R"("minor": 1)");
    auto old_obs = optrace::Observations::from_json(older);
    CHECK(old_obs.materialize_signature(1).args[0].toTensor().max().item<int64_t>() <= 7);
    CHECK(old_obs.to_json(0) == replaced(older, R"("minor": 1)", R"("minor": 2)"));
    auto nested = optrace::Observations::load(optrace_test::data_path("observations/nested.json"));  // written by 1.1
    CHECK(nested.materialize().args[0].toGenericDict().at("input_ids").toTensor().max().item<int64_t>() <= 7);
  }
}

TEST_CASE("observations: a failed save leaves no file", "[observations]") {
  const std::string path = optrace_test::temp_path("no_such_dir/obs.json");
  CHECK_THROWS_WITH(observed().save(path), OPTRACE_CONTAINS("optrace: " + path + ": IoError: cannot create"));
  CHECK_FALSE(std::ifstream(path).good());
}

TEST_CASE("observations: Python rebuilds the tensors with json alone", "[observations][python]") {
  std::string probe = std::string(OPTRACE_PYTHON) + " -c 'import torch' 2>/dev/null";
  if (std::system(probe.c_str()) != 0) OPTRACE_SKIP("python3-torch not installed");
  auto fn = [](torch::Tensor x, torch::Tensor /*y*/) { return x; };
  optrace::InputObserver<decltype(fn)> observer(fn, optrace::ObserverOptions().arg_names({"x", "y"}));
  observer(torch::zeros({4, 6}, torch::kHalf).t(), torch::zeros({3}, torch::kLong));
  observer(torch::zeros({5, 6}, torch::kHalf).t(), torch::zeros({3}, torch::kLong));
  const std::string path = optrace_test::temp_path("for_python.json");
  observer.save(path);
  std::string cmd = std::string(OPTRACE_PYTHON) + " " + OPTRACE_TEST_DATA + "/../../examples/python/load_observations.py " + path;
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[512];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  REQUIRE(pclose(p) == 0);
  CHECK(out ==
        "x: shape (6, 4) dtype torch.float16 strides (1, 6) dynamic {1: 's0'}\n"
        "y: shape (3,) dtype torch.int64 strides (1,) dynamic {}\n"
        "range_constraints: {'s0': (4, 5)}\n");
}
