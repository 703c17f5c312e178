// Tests for optrace/value.hpp: recording arguments as values and back.
#include <optrace/value.hpp>

#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <torch/torch.h>

#include "optrace_catch.hpp"

namespace app {
struct Pair {
  torch::Tensor first;
  double weight;
};
OPTRACE_FIELDS(Pair, first, weight)
struct NotRecordable {};
}  // namespace app

static_assert(optrace::is_recordable<app::Pair>::value, "OPTRACE_FIELDS makes a struct recordable");
static_assert(!optrace::is_recordable<app::NotRecordable>::value, "a plain struct is not recordable");
static_assert(optrace::is_recordable<std::vector<std::tuple<at::Tensor, int64_t>>>::value, "containers nest");

TEST_CASE("value: scalars containers and structs", "[value]") {
  auto v = optrace::to_value(std::make_tuple(torch::ones({2, 3}), int64_t{4}, 0.5, true, std::string("s"), c10::IValue(),
                                             std::vector<at::Tensor>{torch::ones({1}, torch::kLong)},
                                             app::Pair{torch::ones({5}, torch::kHalf), 2.0}));
  CHECK(optrace::describe(v) ==
        "(float32[2, 3], int 4, float 0.5, True, 's', None, [int64[1]], Pair(first: float16[5], weight: float 2))");
  CHECK(v.num_tensors() == 3);
  CHECK(v.items[7].kind == optrace::Value::Kind::Struct);
  CHECK(v.items[7].keys == std::vector<std::string>{"first", "weight"});
  CHECK_FALSE(v.items[0].data.defined());
  CHECK(optrace::to_value(torch::ones({2}), true).data.defined());
}

TEST_CASE("value: unordered maps are recorded in sorted key order", "[value]") {
  std::unordered_map<std::string, at::Tensor> m{{"b", torch::ones({1})}, {"a", torch::ones({2})}, {"c", torch::ones({3})}};
  CHECK(optrace::describe(optrace::to_value(m)) == "dict(a: float32[2], b: float32[1], c: float32[3])");
}

TEST_CASE("value: back to IValues with typed lists and dicts", "[value]") {
  auto v = optrace::to_value(std::make_tuple(std::vector<at::Tensor>{torch::ones({1})}, std::vector<int64_t>{1, 2},
                                             app::Pair{torch::ones({1}), 1.5}),
                             true);
  c10::IValue iv = optrace::to_ivalue(v);
  REQUIRE(iv.isTuple());
  const auto& elems = iv.toTupleRef().elements();
  CHECK(elems[0].isTensorList());
  CHECK(elems[1].isIntList());
  CHECK(elems[1].toIntVector() == std::vector<int64_t>{1, 2});
  REQUIRE(elems[2].isGenericDict());
  CHECK(elems[2].toGenericDict().at("weight").toDouble() == 1.5);
  // Back to a value: the struct came back as a dict with the same fields.
  CHECK(optrace::describe(optrace::to_value(iv)) == "([float32[1]], [int 1, int 2], dict(first: float32[1], weight: float 1.5))");
}

TEST_CASE("value: equality ignores data and compares specs", "[value]") {
  auto a = optrace::to_value(torch::ones({2, 3}), true);
  auto b = optrace::to_value(torch::zeros({2, 3}));
  CHECK(a == b);
  CHECK(a != optrace::to_value(torch::zeros({3, 2}).t()));
  CHECK(a != optrace::to_value(torch::zeros({2, 3}, torch::kDouble)));
}

// Plan merges equal signatures by hash_value, confirmed by ==: equal values must hash alike.
TEST_CASE("value: hash_value agrees with ==, NaN and -0.0 included", "[value]") {
  using optrace::hash_value;
  using optrace::to_value;
  auto call = [](double d, const torch::Tensor& t) { return to_value(std::make_tuple(d, t, std::string("k"))); };
  const double nan = std::nan("");
  CHECK(call(nan, torch::ones({2, 3})) == call(-nan, torch::zeros({2, 3})));
  CHECK(hash_value(call(nan, torch::ones({2, 3}))) == hash_value(call(-nan, torch::zeros({2, 3}))));
  CHECK(call(-0.0, torch::ones({2})) == call(0.0, torch::ones({2})));
  CHECK(hash_value(call(-0.0, torch::ones({2}))) == hash_value(call(0.0, torch::ones({2}))));
  // A stride or a device differ: not equal, and the hash (of dtype and sizes) may agree.
  CHECK(call(1.0, torch::zeros({2, 3})) != call(1.0, torch::zeros({3, 2}).t()));
  CHECK(hash_value(call(1.0, torch::zeros({2, 3}))) == hash_value(call(1.0, torch::zeros({3, 2}).t())));
  // What differs in the hashed parts mostly hashes apart.
  CHECK(hash_value(call(1.0, torch::zeros({2, 3}))) != hash_value(call(1.0, torch::zeros({2, 4}))));
  CHECK(hash_value(call(1.0, torch::zeros({2}))) != hash_value(call(2.0, torch::zeros({2}))));
  CHECK(hash_value(to_value(std::vector<int64_t>{1, 2})) != hash_value(to_value(std::vector<int64_t>{2, 1})));
}

// find's hint only changes where the search starts: any hint finds every key, and no absent one.
TEST_CASE("value: find with a hint finds each key wherever the hint points", "[value]") {
  std::map<std::string, int64_t> m;
  for (int k = 0; k < 12; ++k) m["k" + std::to_string(k)] = k;
  const optrace::Value v = optrace::to_value(m);
  REQUIRE(v.keys.size() == 12);
  for (size_t hint : {size_t(0), size_t(3), size_t(11), size_t(12), size_t(1000)})
    for (size_t k = 0; k < v.keys.size(); ++k) {
      const optrace::Value* found = v.find(v.keys[k], hint);
      REQUIRE(found != nullptr);
      CHECK(found->int_value == m[v.keys[k]]);
      CHECK(v.find("absent", hint) == nullptr);
    }
  CHECK(optrace::Value().find("x", 5) == nullptr);
}
