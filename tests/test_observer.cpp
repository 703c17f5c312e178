// Tests for optrace/observer.hpp: module kinds, argument kinds, storage, alignment, errors, threads.
#include <optrace/json/reader.hpp>
#include <optrace/observations.hpp>
#include <optrace/observer.hpp>

#include <torch/torch.h>

#include <sstream>
#include <thread>

#include "optrace_catch.hpp"

namespace {

struct AddImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x, torch::Tensor y) { return x + y; }
};
TORCH_MODULE(Add);

struct MaskedImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x, c10::optional<torch::Tensor> mask) { return mask ? x * *mask : x; }
};
TORCH_MODULE(Masked);

torch::jit::Module linear_script() {
  torch::jit::Module m("LinearModel");
  m.register_parameter("weight", torch::randn({4, 8}), false);
  m.register_parameter("bias", torch::zeros({4}), false);
  m.define(R"(
    def forward(self, x, labels: Optional[Tensor] = None):
        logits = torch.matmul(x, self.weight.t()) + self.bias
        return logits
  )");
  return m;
}

torch::jit::Module masked_script() {
  torch::jit::Module m("MaskedModel");
  m.define(R"(
    def forward(self, x, mask: Optional[Tensor] = None):
        if mask is not None:
            return x * mask
        return x
  )");
  return m;
}

std::vector<int64_t> sizes_of(const c10::IValue& v) { return v.toTensor().sizes().vec(); }

}  // namespace

TEST_CASE("observer: seed scenario 1 positional arguments", "[observer]") {
  optrace::InputObserver<Add> observer(Add{});
  std::vector<std::pair<int64_t, int64_t>> shapes = {{2, 6}, {3, 7}, {4, 8}};
  for (auto [b, s] : shapes) {
    auto out = observer(torch::randn({b, s}), torch::randn({b, s}));
    CHECK(out.sizes() == std::vector<int64_t>({b, s}));
  }
  CHECK(observer.num_obs() == 3);
  CHECK(observer.num_calls() == 3);
  auto ds = observer.infer_dynamic_shapes();
  CHECK_FALSE(ds.keyed());
  CHECK(ds.to_python() == "({0: Dim.AUTO, 1: Dim.AUTO}, {0: Dim.AUTO, 1: Dim.AUTO})");
  CHECK(ds.to_json() ==
        R"({"dynamic_shapes": [["_DimHint.AUTO", "_DimHint.AUTO"], ["_DimHint.AUTO", "_DimHint.AUTO"]], "dims": {}})");
  CHECK(ds.warnings().empty());
  auto args = observer.infer_arguments();
  REQUIRE(args.args.size() == 2);
  CHECK(args.kwargs.is_empty());
  CHECK(sizes_of(args.args[0]) == std::vector<int64_t>{2, 6});
  CHECK(sizes_of(args.args[1]) == std::vector<int64_t>{2, 6});
  CHECK(args.describe() == "(float32[2, 6], float32[2, 6])");
  // Every dynamic dim has a symbol and an observed range, named or not.
  REQUIRE(ds.symbols().size() == 4);
  CHECK(ds.symbols()[0].name == "s0");
  CHECK(ds.symbols()[0].min == 2);
  CHECK(ds.symbols()[0].max == 4);
  CHECK(ds.symbols()[1].min == 6);
  CHECK(ds.symbols()[1].max == 8);
}

TEST_CASE("observer: seed scenario 2 keyword arguments of a TorchScript module", "[observer]") {
  optrace::InputObserver<torch::jit::Module> observer(linear_script());
  for (int64_t b : {2, 5, 7}) {
    auto out = observer.call({}, {{"x", torch::randn({b, 8})}, {"labels", torch::randint(0, 4, {b})}});
    CHECK(out.toTensor().sizes() == std::vector<int64_t>({b, 4}));
  }
  auto ds = observer.infer_dynamic_shapes();
  CHECK(ds.keyed());
  CHECK(ds.to_python() == "{'x': {0: Dim.AUTO}, 'labels': {0: Dim.AUTO}}");
  CHECK(ds.to_json() == R"({"dynamic_shapes": {"x": ["_DimHint.AUTO", 8], "labels": ["_DimHint.AUTO"]}, "dims": {}})");
  auto args = observer.infer_arguments();
  CHECK(args.args.empty());
  CHECK(args.describe() == "dict(x: float32[2, 8], labels: int64[2])");
}

TEST_CASE("observer: seed scenario 3 optional mask with value_if_missing", "[observer]") {
  const int64_t seq = 10;
  SECTION("TorchScript keyword calls") {
    optrace::InputObserver<torch::jit::Module> observer(
        masked_script(), optrace::ObserverOptions().value_if_missing("mask", torch::ones({0, seq})));
    observer.call({}, {{"x", torch::randn({2, seq})}});
    observer.call({}, {{"x", torch::randn({3, seq})}, {"mask", torch::ones({3, seq})}});
    observer.call({}, {{"x", torch::randn({4, seq})}, {"mask", torch::ones({4, seq})}});
    CHECK(observer.num_obs() == 3);
    auto ds = observer.infer_dynamic_shapes();
    CHECK(ds.to_python() == "{'x': {0: Dim.AUTO}, 'mask': {0: Dim.AUTO}}");
    // The example is the first export-safe call: the stand-in's dim 0 (0) would be specialized.
    CHECK(observer.infer_arguments().describe() == "dict(x: float32[3, 10], mask: float32[3, 10])");
    CHECK(ds.warnings().empty());
    CHECK(observer.infer_arguments(0).describe() == "dict(x: float32[2, 10], mask: float32[0, 10])");
    // The stand-in counts in mask's range but does not break its equality with x.
    auto named = observer.infer_dynamic_shapes(optrace::DynamicShapesOptions().dim_style(optrace::DimStyle::named));
    CHECK(named.to_python() == "{'x': {0: Dim('s0', min=0, max=4)}, 'mask': {0: Dim('s0', min=0, max=4)}}");
    // The observation file says which signature had the stand-in; a loaded file agrees.
    CHECK_THAT(observer.to_json(0), OPTRACE_CONTAINS(R"("stand_ins": ["mask"])"));
    auto loaded = optrace::Observations::from_json(observer.to_json());
    CHECK(loaded.infer_dynamic_shapes(optrace::DynamicShapesOptions().dim_style(optrace::DimStyle::named)).to_python() ==
          named.to_python());
  }
  SECTION("C++ module with c10::optional by position") {
    optrace::InputObserver<Masked> observer(
        Masked{}, optrace::ObserverOptions().value_if_missing(1, torch::ones({0, seq})));
    observer(torch::randn({2, seq}), c10::optional<torch::Tensor>());
    observer(torch::randn({3, seq}), c10::optional<torch::Tensor>(torch::ones({3, seq})));
    observer(torch::randn({4, seq}), c10::optional<torch::Tensor>(torch::ones({4, seq})));
    CHECK(observer.infer_dynamic_shapes().to_python() == "({0: Dim.AUTO}, {0: Dim.AUTO})");
    CHECK(observer.infer_arguments().describe() == "(float32[3, 10], float32[3, 10])");
  }
  SECTION("c10::nullopt, passed as it is, is a missing input") {
    // c10::nullopt is std::nullopt in libtorch 2.x and a type of its own in 1.13 (Record<std::nullopt_t>
    // alone did not compile there).
    optrace::InputObserver<Masked> observer(
        Masked{}, optrace::ObserverOptions().value_if_missing(1, torch::ones({0, seq})));
    observer(torch::randn({2, seq}), c10::nullopt);
    observer(torch::randn({3, seq}), c10::nullopt);
    observer(torch::randn({4, seq}), c10::optional<torch::Tensor>(torch::ones({4, seq})));
    CHECK(observer.infer_arguments(0).describe() == "(float32[2, 10], float32[0, 10])");
    CHECK(observer.infer_arguments(1).describe() == "(float32[3, 10], float32[0, 10])");
    CHECK(observer.infer_dynamic_shapes().to_python() == "({0: Dim.AUTO}, {0: Dim.AUTO})");
    // What a program prints: operator<< writes the same texts.
    std::ostringstream out;
    out << observer.infer_dynamic_shapes() << " | " << observer.infer_arguments(0);
    CHECK(out.str() == "({0: Dim.AUTO}, {0: Dim.AUTO}) | (float32[2, 10], float32[0, 10])");
  }
  SECTION("C++ module with arg_names and value_if_missing by position") {
    // The position names the argument it stands for ("mask"), also when the names come later
    // in the options than value_if_missing.
    optrace::InputObserver<Masked> observer(
        Masked{}, optrace::ObserverOptions().value_if_missing(1, torch::ones({0, seq})).arg_names({"x", "mask"}));
    observer(torch::randn({2, seq}), c10::optional<torch::Tensor>());
    observer(torch::randn({3, seq}), c10::optional<torch::Tensor>(torch::ones({3, seq})));
    CHECK(observer.infer_dynamic_shapes().to_python() == "({0: Dim.AUTO}, {0: Dim.AUTO})");
    CHECK(observer.infer_arguments().describe() == "(float32[3, 10], float32[3, 10])");
  }
  SECTION("without value_if_missing the first complete call is chosen") {
    optrace::InputObserver<Masked> observer(Masked{}, optrace::ObserverOptions().arg_names({"x", "mask"}));
    observer(torch::randn({2, seq}), c10::optional<torch::Tensor>());
    observer(torch::randn({3, seq}), c10::optional<torch::Tensor>(torch::ones({3, seq})));
    observer(torch::randn({4, seq}), c10::optional<torch::Tensor>(torch::ones({4, seq})));
    CHECK(observer.infer_dynamic_shapes().to_python() == "({0: Dim.AUTO}, {0: Dim.AUTO})");
    CHECK(observer.infer_arguments().describe() == "(float32[3, 10], float32[3, 10])");
    // By index, the missing mask becomes an empty tensor shaped like the others, dynamic dim 0.
    auto first = observer.infer_arguments(0);
    CHECK(first.describe() == "(float32[2, 10], float32[0, 10])");
  }
}

TEST_CASE("observer: a missing input without a dynamic dim becomes zeros", "[observer]") {
  auto fn = [](torch::Tensor x, c10::optional<torch::Tensor> bias) { return bias ? x + *bias : x; };
  optrace::InputObserver<decltype(fn)> observer(fn);
  observer(torch::ones({2, 3}), c10::optional<torch::Tensor>());
  observer(torch::ones({4, 3}), c10::optional<torch::Tensor>(torch::ones({3})));
  auto args = observer.infer_arguments(0);
  REQUIRE(args.args.size() == 2);
  CHECK(sizes_of(args.args[1]) == std::vector<int64_t>{3});
  CHECK(args.args[1].toTensor().sum().item<double>() == 0.0);
}

TEST_CASE("observer: any callable and recorded outputs", "[observer]") {
  auto fn = [](const torch::Tensor& x, int64_t k) { return std::make_tuple(x * k, x.sum()); };
  optrace::InputObserver<decltype(fn)> observer(fn, optrace::ObserverOptions().store_n_calls(1));
  auto [a, b] = observer(torch::ones({2, 2}), int64_t{3});
  CHECK(a.sum().item<double>() == 12.0);
  observer(torch::ones({5, 2}), int64_t{3});
  CHECK(observer.num_obs() == 1);
  CHECK(observer.num_calls() == 2);
  auto outputs = observer.outputs();
  REQUIRE(outputs.size() == 1);
  CHECK(optrace::describe(outputs[0]) == "(float32[2, 2], float32[])");
  CHECK(outputs[0].items[0].data.sum().item<double>() == 12.0);
  // Scalars keep their values; dynamism seen after the store filled up still counts.
  CHECK(observer.infer_dynamic_shapes().to_python() == "({0: Dim.AUTO}, None)");
  auto args = observer.infer_arguments();
  CHECK(args.args[1].toInt() == 3);
}

TEST_CASE("observer: stored tensors are detached copies", "[observer]") {
  auto fn = [](torch::Tensor x) { return x; };
  optrace::InputObserver<decltype(fn)> observer(fn);
  auto x = torch::zeros({2}, torch::requires_grad());
  observer(x);
  x.detach().fill_(5);
  auto args = observer.infer_arguments();
  CHECK(args.args[0].toTensor().sum().item<double>() == 0.0);
  CHECK_FALSE(args.args[0].toTensor().requires_grad());
}

namespace observer_test {  // a user's namespace (test_observations.cpp has a Batch of its own)
struct Batch {
  torch::Tensor input_ids;
  c10::optional<torch::Tensor> attention_mask;
  int64_t num_beams;
};
OPTRACE_FIELDS(Batch, input_ids, attention_mask, num_beams)
}  // namespace observer_test

TEST_CASE("observer: nested structures and a user struct", "[observer]") {
  auto fn = [](const observer_test::Batch& batch, const std::vector<torch::Tensor>& cache,
               const std::map<std::string, torch::Tensor>& extra, const std::tuple<torch::Tensor, double>& pair) {
    return batch.input_ids.sum() + cache[0].sum() + extra.at("pos").sum() + std::get<0>(pair).sum() * std::get<1>(pair);
  };
  optrace::InputObserver<decltype(fn)> observer(fn, optrace::ObserverOptions().arg_names({"batch", "cache", "extra", "pair"}));
  for (int64_t s : {3, 5, 9}) {
    observer_test::Batch batch{torch::ones({2, s}, torch::kLong), torch::ones({2, s}), 4};
    observer(batch, std::vector<torch::Tensor>{torch::ones({2, 4, s}), torch::ones({2, 4, s})},
             std::map<std::string, torch::Tensor>{{"pos", torch::arange(s)}}, std::make_tuple(torch::ones({7}), 0.5));
  }
  auto ds = observer.infer_dynamic_shapes();
  CHECK(ds.to_python() ==
        "({'input_ids': {1: Dim.AUTO}, 'attention_mask': {1: Dim.AUTO}, 'num_beams': None}, "
        "[{2: Dim.AUTO}, {2: Dim.AUTO}], {'pos': {0: Dim.AUTO}}, ({}, None))");
  CHECK(ds["batch"].items[0].dynamic_dims() == std::vector<int64_t>{1});
  auto args = observer.infer_arguments();
  CHECK(args.describe() ==
        "(dict(input_ids: int64[2, 3], attention_mask: float32[2, 3], num_beams: int 4), "
        "[float32[2, 4, 3], float32[2, 4, 3]], dict(pos: int64[3]), (float32[7], float 0.5))");
  SECTION("a struct field that is nullopt in some calls is a missing input") {
    observer_test::Batch partial{torch::ones({2, 11}, torch::kLong), c10::nullopt, 4};
    observer(partial, std::vector<torch::Tensor>{torch::ones({2, 4, 11}), torch::ones({2, 4, 11})},
             std::map<std::string, torch::Tensor>{{"pos", torch::arange(11)}}, std::make_tuple(torch::ones({7}), 0.5));
    CHECK(observer.infer_dynamic_shapes()["batch"].items[1].dims[1].max == 9);
    CHECK(observer.infer_dynamic_shapes()["batch"].items[0].dims[1].max == 11);
  }
}

namespace {
// Each input of an observation file's text with its "int_range" ({} where it has none).
std::map<std::string, std::vector<int64_t>> int_ranges_in(const std::string& text) {
  auto doc = optrace::json::Document::parse(text);
  std::map<std::string, std::vector<int64_t>> out;
  for (optrace::json::Node input : doc->root()["inputs"].array()) {
    optrace::json::Node range = input;
    out[std::string(input["name"].as_string())] = input.find("int_range", range) ? range.as_int_list() : std::vector<int64_t>{};
  }
  return out;
}
}  // namespace

TEST_CASE("observer: stored calls keep the range of integer inputs", "[observer]") {
  auto fn = [](const torch::Tensor& ids, const torch::Tensor& scores, const torch::Tensor& keep,
               const observer_test::Batch& batch, const std::vector<torch::Tensor>& cache) {
    return ids.size(0) + scores.size(0) + keep.size(0) + batch.input_ids.size(0) + cache[1].size(0);
  };
  using Ranges = std::map<std::string, std::vector<int64_t>>;
  auto observe = [&](int64_t store_n_calls) {
    optrace::InputObserver<decltype(fn)> observer(
        fn, optrace::ObserverOptions().arg_names({"input_ids", "scores", "keep", "batch", "cache"}).store_n_calls(store_n_calls));
    auto call = [&](const torch::Tensor& ids, const torch::Tensor& nested_ids, const torch::Tensor& bytes) {
      const int64_t n = ids.size(-1);
      observer(ids, torch::full({n}, 500.0), torch::ones({n}, torch::kBool),
               observer_test::Batch{nested_ids, torch::ones({2, n}), 4}, std::vector<torch::Tensor>{torch::ones({n}), bytes});
    };
    // Stored: ids 3 to 40, 10 to 97, all 50; not stored (store_n_calls 3): 1000.
    call(torch::arange(3, 41).view({2, 19}), torch::arange(-5, 6, torch::kInt), torch::arange(0, 9, torch::kByte));
    call(torch::arange(10, 98).view({4, 22}), torch::full({3}, 7, torch::kInt), torch::full({5}, 200, torch::kByte));
    call(torch::full({3, 9}, 50, torch::kLong), torch::arange(0, 4, torch::kInt), torch::zeros({0}, torch::kByte));
    call(torch::full({3, 9}, 1000, torch::kLong), torch::full({3}, -99, torch::kInt), torch::full({2}, 255, torch::kByte));
    return observer.to_json(0);
  };
  CHECK(int_ranges_in(observe(3)) == Ranges{{"input_ids", {3, 97}},
                                            {"scores", {}},
                                            {"keep", {}},
                                            {"batch.input_ids", {-5, 7}},
                                            {"batch.attention_mask", {}},
                                            {"batch.num_beams", {}},
                                            {"cache[0]", {}},
                                            {"cache[1]", {0, 200}}});
  SECTION("nothing stored, no ranges") {
    for (const auto& [name, range] : int_ranges_in(observe(0))) CHECK(range.empty());
  }
}

TEST_CASE("observer: IValue trees", "[observer]") {
  auto fn = [](const c10::IValue& tree) { return tree.isTuple(); };
  optrace::InputObserver<decltype(fn)> observer(fn);
  for (int64_t n : {2, 3, 4}) {
    c10::Dict<std::string, at::Tensor> dict;
    dict.insert("k", torch::ones({n}));
    c10::List<at::Tensor> list({torch::ones({n, 2}), torch::ones({1})});
    observer(c10::IValue(c10::ivalue::Tuple::create({c10::IValue(list), c10::IValue(dict), c10::IValue(), c10::IValue("s")})));
  }
  CHECK(observer.infer_dynamic_shapes().to_python() == "(([{0: Dim.AUTO}, {}], {'k': {0: Dim.AUTO}}, None, None),)");
  auto args = observer.infer_arguments();
  CHECK(args.describe() == "(([float32[2, 2], float32[1]], dict(k: float32[2]), None, 's'),)");
  CHECK(args.args[0].toTupleRef().elements()[0].isTensorList());
}

TEST_CASE("observer: alignment errors name the argument", "[observer]") {
  SECTION("a scalar that changes") {
    auto fn = [](torch::Tensor x, double scale) { return x * scale; };
    optrace::InputObserver<decltype(fn)> observer(fn, optrace::ObserverOptions().arg_names({"x", "scale"}));
    observer(torch::ones({2}), 0.5);
    observer(torch::ones({3}), 0.25);
    CHECK_THROWS_WITH(observer.infer_dynamic_shapes(),
                      "optrace: ArgumentError: argument 'scale': scalar changed between calls: 0.5 and 0.25 "
                      "(export specializes scalars; pass it as a tensor if it varies)");
  }
  SECTION("a tensor that changes rank") {
    auto fn = [](torch::Tensor x) { return x; };
    optrace::InputObserver<decltype(fn)> observer(fn);
    observer(torch::ones({2, 3}));
    observer(torch::ones({2, 3, 4}));
    CHECK_THROWS_WITH(observer.infer_dynamic_shapes(),
                      "optrace: ArgumentError: argument #0: tensor rank changed between calls: 2 and 3");
  }
  SECTION("a tensor that changes dtype") {
    auto fn = [](torch::Tensor x) { return x; };
    optrace::InputObserver<decltype(fn)> observer(fn, optrace::ObserverOptions().arg_names({"ids"}));
    observer(torch::ones({2}, torch::kLong));
    observer(torch::ones({2}, torch::kInt));
    CHECK_THROWS_WITH(observer.infer_arguments(),
                      "optrace: ArgumentError: argument 'ids': dtype changed between calls: Long and Int");
  }
  SECTION("a container that changes length") {
    auto fn = [](std::vector<torch::Tensor> cache) { return cache.size(); };
    optrace::InputObserver<decltype(fn)> observer(fn, optrace::ObserverOptions().arg_names({"cache"}));
    observer(std::vector<torch::Tensor>{torch::ones({1}), torch::ones({1})});
    observer(std::vector<torch::Tensor>{torch::ones({1}), torch::ones({1}), torch::ones({1})});
    CHECK_THROWS_WITH(observer.infer_dynamic_shapes(),
                      "optrace: ArgumentError: argument 'cache': list length changed between calls: 2 and 3");
  }
  SECTION("no call has all the keyword arguments") {
    optrace::InputObserver<torch::jit::Module> observer(masked_script());
    auto keyed = [](std::vector<std::pair<std::string, c10::IValue>> kv) {
      torch::jit::Kwargs k;
      for (auto& p : kv) k.emplace(p.first, p.second);
      return k;
    };
    // TorchScript fills omitted arguments from the schema, so use a callable with free names.
    auto fn = [](std::vector<c10::IValue>, const torch::jit::Kwargs&) { return c10::IValue(); };
    optrace::InputObserver<decltype(fn)> free(fn);
    free.call({}, keyed({{"x", torch::ones({2})}, {"a", torch::ones({2})}}));
    free.call({}, keyed({{"x", torch::ones({3})}, {"b", torch::ones({3})}}));
    CHECK_THROWS_WITH(free.infer_dynamic_shapes(),
                      "optrace: ArgumentError: no observed call has all the arguments; the call with the most tensors "
                      "lacks 'b': pass every argument in at least one call, or give "
                      "ObserverOptions().value_if_missing('b', ...)");
  }
  SECTION("positional and keyword calls without names") {
    auto fn = [](std::vector<c10::IValue>, const torch::jit::Kwargs&) { return c10::IValue(); };
    optrace::InputObserver<decltype(fn)> observer(fn);
    observer.call({torch::ones({2})}, {{"y", torch::ones({2})}});
    CHECK_THROWS_WITH(observer.infer_dynamic_shapes(),
                      "optrace: ArgumentError: calls mix positional and keyword arguments, but positional argument 0 "
                      "has no name: name the positional arguments with ObserverOptions().arg_names({...})");
  }
  SECTION("index out of range and nothing observed") {
    auto fn = [](torch::Tensor x) { return x; };
    optrace::InputObserver<decltype(fn)> observer(fn);
    CHECK_THROWS_WITH(observer.infer_dynamic_shapes(), "optrace: ArgumentError: no calls were observed");
    observer(torch::ones({2}));
    CHECK_THROWS_WITH(observer.infer_arguments(4),
                      "optrace: ArgumentError: call index 4 is out of range: 1 calls are stored");
    observer(torch::ones({3}));
    CHECK_THROWS_WITH(observer.infer_arguments(optrace::InferArgumentsOptions().call_index(5).export_safe()),
                      OPTRACE_CONTAINS("call index 5 is out of range"));
    auto one = [](torch::Tensor x) { return x; };
    optrace::InputObserver<decltype(one)> small(one, optrace::ObserverOptions().store_n_calls(1));
    small(torch::ones({1}));
    small(torch::ones({3}));
    CHECK_THROWS_WITH(small.infer_arguments(optrace::InferArgumentsOptions().export_safe()),
                      "optrace: ShapeError: no stored call has every dynamic dim >= 2 (export_safe); store more calls "
                      "(store_n_calls) or pick one with call_index");
  }
  SECTION("bad options") {
    CHECK_THROWS_WITH(optrace::ObserverOptions().store_n_calls(-1),
                      "optrace: ArgumentError: store_n_calls must be >= 0, got -1");
  }
}

TEST_CASE("observer: TorchScript positional calls take names and defaults from the schema", "[observer]") {
  optrace::InputObserver<torch::jit::Module> observer(masked_script());
  observer(torch::ones({2, 3}));
  observer(torch::ones({4, 3}), torch::ones({4, 3}));
  auto ds = observer.infer_dynamic_shapes();
  CHECK_FALSE(ds.keyed());
  CHECK(ds.names() == std::vector<std::string>{"x", "mask"});
  CHECK(ds.to_python() == "({0: Dim.AUTO}, {})");
  // Only one call had a mask, so its dim 0 was seen with one value: static.
  CHECK(observer.infer_arguments().describe() == "(float32[4, 3], float32[4, 3])");
}

TEST_CASE("observer: calls from 8 threads are all counted", "[observer]") {
  auto fn = [](torch::Tensor x, torch::Tensor y) { return x.size(0) + y.size(0); };
  optrace::InputObserver<decltype(fn)> observer(fn);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&observer, t] {
      auto x = torch::ones({t + 1, 3});
      auto y = torch::ones({(t % 2) + 1});
      for (int k = 0; k < 1000; ++k) observer(x, y);
    });
  for (auto& th : threads) th.join();
  CHECK(observer.num_calls() == 8000);
  CHECK(observer.num_obs() == 3);
  auto history = observer.history();
  CHECK(history.size() == 8);
  int64_t total = 0;
  for (const auto& [sig, count] : history) {
    CHECK(count == 1000);
    total += count;
  }
  CHECK(total == 8000);
  auto ds = observer.infer_dynamic_shapes();
  CHECK(ds[0].dims[0].min == 1);
  CHECK(ds[0].dims[0].max == 8);
  CHECK(ds[1].dims[0].max == 2);
}

TEST_CASE("observer: calls past max_signatures still count for dynamic dims", "[observer]") {
  auto fn = [](torch::Tensor x) { return x; };
  optrace::InputObserver<decltype(fn)> observer(fn, optrace::ObserverOptions().max_signatures(2).store_n_calls(1));
  for (int64_t n : {2, 3, 4, 5, 6}) observer(torch::ones({n, 5}));
  observer(torch::ones({3, 7}));
  CHECK(observer.history().size() == 2);
  CHECK(observer.num_calls() == 6);
  auto ds = observer.infer_dynamic_shapes();
  CHECK(ds[0].dims[0].max == 6);
  CHECK(ds[0].dims[1].dynamic);
  CHECK(ds[0].dims[1].max == 7);
  REQUIRE(ds.warnings().size() == 1);
  CHECK_THAT(ds.warnings()[0], OPTRACE_CONTAINS("4 distinct call signatures beyond max_signatures"));
}

TEST_CASE("observer: a call that cannot be recorded still runs and is reported", "[observer]") {
  auto fn = [](const c10::IValue& v) { return v.isDevice(); };
  optrace::InputObserver<decltype(fn)> observer(fn);
  CHECK(observer(c10::IValue(c10::Device(c10::kCPU))));
  CHECK_THROWS_WITH(observer.infer_dynamic_shapes(), OPTRACE_CONTAINS("cannot record an IValue of type Device"));
}
