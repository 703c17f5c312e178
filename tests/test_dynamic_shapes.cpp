// Tests for optrace/dynamic_shapes.hpp: dynamic dims, shared symbols, derived dims, warnings, output forms.
#include <optrace/detail/common/io.hpp>
#include <optrace/observer.hpp>

#include <torch/torch.h>

#include <cstdio>
#include <deque>
#include <random>

#include "optrace_catch.hpp"

namespace {

auto pass_through = [](const torch::Tensor& x, const torch::Tensor& y) { return x.size(0) + y.size(0); };
using Observer = optrace::InputObserver<decltype(pass_through)>;

Observer observe(const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>& calls) {
  Observer observer(pass_through, optrace::ObserverOptions().arg_names({"x", "y"}));
  for (const auto& [x, y] : calls) observer(torch::zeros(x), torch::zeros(y));
  return observer;
}

// What tests/python/check_dynamic_shapes_spec.py prints for each spec (its lines, or
// "refused: ..."), all checked in one Python process (torch's import takes seconds).
std::vector<std::string> run_python_checks(const std::vector<std::string>& specs) {
  std::string cmd = std::string(OPTRACE_PYTHON) + " " + OPTRACE_TEST_DATA + "/../python/check_dynamic_shapes_spec.py";
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string spec = optrace_test::temp_path("spec_check_" + std::to_string(i) + ".json");
    optrace::detail::write_file_atomic(spec, specs[i]);
    cmd += " " + spec;
  }
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[256];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  int rc = p ? pclose(p) : -1;
  REQUIRE(rc == 0);
  std::vector<std::string> outputs;
  size_t start = 0;
  for (size_t end; (end = out.find("== end\n", start)) != std::string::npos; start = end + 7)
    outputs.push_back(out.substr(start, end - start));
  REQUIRE(outputs.size() == specs.size());
  return outputs;
}

bool python_has_sympy() {
  std::string cmd = std::string(OPTRACE_PYTHON) + " -c 'import sympy' 2>/dev/null";
  return std::string(OPTRACE_PYTHON).size() > 0 && std::system(cmd.c_str()) == 0;
}

}  // namespace

TEST_CASE("dynamic shapes: a dim is dynamic when it took more than one value", "[dynamic_shapes]") {
  auto ds = observe({{{2, 8}, {2}}, {{3, 8}, {2}}, {{3, 8}, {2}}}).infer_dynamic_shapes();
  CHECK(ds["x"].dynamic_dims() == std::vector<int64_t>{0});
  CHECK(ds["y"].dynamic_dims().empty());
  CHECK(ds.to_python() == "({0: Dim.AUTO}, {})");
  CHECK(ds["x"].dims[0].min == 2);
  CHECK(ds["x"].dims[0].max == 3);
  CHECK(ds["x"].dims[0].example == 2);
  CHECK(ds["x"].dims[1].example == 8);
  CHECK_THROWS_WITH(ds["z"], "optrace: ArgumentError: no argument named 'z'");
}

TEST_CASE("dynamic shapes: forcing dim 0 dynamic", "[dynamic_shapes]") {
  Observer observer = observe({{{4, 8}, {4}}, {{4, 9}, {4}}});
  CHECK(observer.infer_dynamic_shapes().to_python() == "({1: Dim.AUTO}, {})");
  CHECK(observer.infer_dynamic_shapes(optrace::DynamicShapesOptions().dim0_dynamic({"y"})).to_python() ==
        "({1: Dim.AUTO}, {0: Dim.AUTO})");
  CHECK(observer.infer_dynamic_shapes(optrace::DynamicShapesOptions().dim0_dynamic_all()).to_python() ==
        "({0: Dim.AUTO, 1: Dim.AUTO}, {0: Dim.AUTO})");
}

TEST_CASE("dynamic shapes: shared symbols off in the hint styles and on in the named style", "[dynamic_shapes]") {
  Observer observer = observe({{{2, 5}, {2}}, {{3, 6}, {3}}, {{7, 6}, {7}}});
  CHECK(observer.infer_dynamic_shapes().to_python() == "({0: Dim.AUTO, 1: Dim.AUTO}, {0: Dim.AUTO})");
  auto ds = observer.infer_dynamic_shapes(optrace::DynamicShapesOptions().shared_symbols());
  CHECK(ds.to_python() == "({0: Dim('s0', min=2, max=7), 1: Dim.AUTO}, {0: Dim('s0', min=2, max=7)})");
  CHECK(ds.to_json() ==
        R"({"dynamic_shapes": [["s0", "_DimHint.AUTO"], ["s0"]], "dims": {"s0": {"min": 2, "max": 7, "derived": []}}})");
  CHECK(ds["x"].dims[0].symbol == ds["y"].dims[0].symbol);
  CHECK(ds["x"].dims[1].symbol == "s1");
  CHECK_FALSE(ds["x"].dims[1].named);
  CHECK(ds.with_style(optrace::DimStyle::hint_dynamic).to_json() ==
        R"({"dynamic_shapes": [["s0", "_DimHint.DYNAMIC"], ["s0"]], "dims": {"s0": {"min": 2, "max": 7, "derived": []}}})");

  auto named = observer.infer_dynamic_shapes(optrace::DynamicShapesOptions().dim_style(optrace::DimStyle::named));
  CHECK(named.style() == optrace::DimStyle::named);
  CHECK(named.to_python() == "({0: Dim('s0', min=2, max=7), 1: Dim('s1', min=5, max=6)}, {0: Dim('s0', min=2, max=7)})");
  CHECK(named.to_json() ==
        R"({"dynamic_shapes": [["s0", "s1"], ["s0"]], "dims": {"s0": {"min": 2, "max": 7, "derived": []}, )"
        R"("s1": {"min": 5, "max": 6, "derived": []}}})");
  auto separate = optrace::DynamicShapesOptions().dim_style(optrace::DimStyle::named).shared_symbols(false);
  CHECK(observer.infer_dynamic_shapes(separate).to_python() ==
        "({0: Dim('s0', min=2, max=7), 1: Dim('s1', min=5, max=6)}, {0: Dim('s2', min=2, max=7)})");
}

TEST_CASE("dynamic shapes: a named dim seen with one value has no upper bound", "[dynamic_shapes]") {
  // torch.export's Dim needs max > min, and torch 2.6's loader an int max.
  Observer observer = observe({{{4, 8}, {4}}, {{4, 9}, {4}}});
  auto options = optrace::DynamicShapesOptions().dim_style(optrace::DimStyle::named).dim0_dynamic({"y"});
  auto ds = observer.infer_dynamic_shapes(options);
  CHECK(ds.to_python() == "({1: Dim('s0', min=8, max=9)}, {0: Dim('s1', min=4)})");
  CHECK(ds.to_json() == R"({"dynamic_shapes": [[4, "s0"], ["s1"]], "dims": {"s0": {"min": 8, "max": 9, "derived": []}, )"
                        R"("s1": {"min": 4, "max": 9223372036854775806, "derived": []}}})");
  CHECK(ds.symbols()[1].max == 4);  // the observed range stays as observed
  CHECK(ds.symbols()[1].export_range() == std::make_pair(int64_t{4}, optrace::kUnboundedDim));
}

TEST_CASE("dynamic shapes: derived dims need three distinct values", "[dynamic_shapes]") {
  auto derived = optrace::DynamicShapesOptions().derived_dims();
  SECTION("two distinct values are not enough") {
    Observer observer = observe({{{2}, {5}}, {{3}, {7}}, {{3}, {7}}});
    CHECK(observer.infer_dynamic_shapes(derived).to_python() == "({0: Dim.AUTO}, {0: Dim.AUTO})");
  }
  SECTION("y = 2*x + 1 from three values") {
    Observer observer = observe({{{2}, {5}}, {{3}, {7}}, {{6}, {13}}});
    auto ds = observer.infer_dynamic_shapes(derived);
    CHECK(ds.to_python() == "({0: Dim('s0', min=2, max=6)}, {0: Dim('s0', min=2, max=6)*2 + 1})");
    CHECK(ds.to_json() ==
          R"({"dynamic_shapes": [["s0"], ["2*s0 + 1"]], "dims": {"s0": {"min": 2, "max": 6, "derived": ["2*s0 + 1"]}}})");
    CHECK(ds["y"].dims[0].coeff == 2);
    CHECK(ds["y"].dims[0].offset == 1);
  }
  SECTION("the root is the smaller dim whichever comes first") {
    Observer observer = observe({{{5}, {2}}, {{7}, {3}}, {{13}, {6}}});
    auto ds = observer.infer_dynamic_shapes(derived);
    CHECK(ds.to_json() ==
          R"({"dynamic_shapes": [["2*s0 + 1"], ["s0"]], "dims": {"s0": {"min": 2, "max": 6, "derived": ["2*s0 + 1"]}}})");
  }
  SECTION("x - 1 and a relation that breaks once") {
    Observer observer = observe({{{4}, {3}}, {{5}, {4}}, {{9}, {8}}});
    CHECK(observer.infer_dynamic_shapes(derived).to_json() ==
          R"({"dynamic_shapes": [["s0 + 1"], ["s0"]], "dims": {"s0": {"min": 3, "max": 8, "derived": ["s0 + 1"]}}})");
    observer(torch::zeros({10}), torch::zeros({2}));
    CHECK(observer.infer_dynamic_shapes(derived).to_python() == "({0: Dim.AUTO}, {0: Dim.AUTO})");
  }
  SECTION("equal dims are shared symbols, not derived ones") {
    Observer observer = observe({{{2}, {2}}, {{3}, {3}}, {{4}, {4}}});
    CHECK(observer.infer_dynamic_shapes(derived).to_python() == "({0: Dim.AUTO}, {0: Dim.AUTO})");
  }
}

TEST_CASE("dynamic shapes: the example is export-safe when a stored call allows and warned otherwise", "[dynamic_shapes]") {
  SECTION("a stored call with every dynamic dim >= 2 is the example") {
    Observer observer = observe({{{1, 0}, {3}}, {{4, 0}, {3}}});
    auto ds = observer.infer_dynamic_shapes();
    CHECK(ds["x"].dims[0].example == 4);
    CHECK(observer.infer_arguments().describe() == "(float32[4, 0], float32[3])");
    REQUIRE(ds.warnings().size() == 1);
    CHECK(ds.warnings()[0] == "argument 'x' dim 1 is 0 in every call");
  }
  SECTION("none: the warning names the dim and says what torch.export does, by style") {
    Observer observer(pass_through, optrace::ObserverOptions().arg_names({"x", "y"}).store_n_calls(2));
    for (int64_t n : {1, 0, 5}) observer(torch::zeros({n}), torch::zeros({3}));
    auto ds = observer.infer_dynamic_shapes();
    CHECK(ds["x"].dims[0].example == 1);
    REQUIRE(ds.warnings().size() == 1);
    CHECK(ds.warnings()[0] ==
          "argument 'x' dim 0 is dynamic but its example value is 1 (no stored call has every dynamic dim >= 2): "
          "torch.export treats sizes 0 and 1 as constants, so it specializes it to 1 (torch 2.6: silently) and the "
          "program rejects every other size; store a call where it is >= 2 (ObserverOptions().store_n_calls)");
    auto named = observer.infer_dynamic_shapes(optrace::DynamicShapesOptions().dim_style(optrace::DimStyle::named));
    REQUIRE(named.warnings().size() == 1);
    CHECK_THAT(named.warnings()[0], OPTRACE_CONTAINS("so it fails on this named dim (\"Constraints violated\")"));
  }
}

TEST_CASE("dynamic shapes: keyword calls give a dict and nested names", "[dynamic_shapes]") {
  auto fn = [](std::vector<c10::IValue>, const torch::jit::Kwargs&) { return 0; };
  optrace::InputObserver<decltype(fn)> observer(fn);
  for (int64_t n : {2, 3}) {
    c10::Dict<std::string, at::Tensor> d;
    d.insert("a'b", torch::zeros({n}));
    observer.call({}, {{"inputs", d}});
  }
  auto ds = observer.infer_dynamic_shapes();
  CHECK(ds.to_python() == R"({'inputs': {'a\'b': {0: Dim.AUTO}}})");
  CHECK(ds.to_json() == R"({"dynamic_shapes": {"inputs": {"a'b": ["_DimHint.AUTO"]}}, "dims": {}})");
}

TEST_CASE("dynamic shapes: torch's loader reads the JSON", "[dynamic_shapes][python]") {
  // The real _load_dynamic_shapes where torch has it (trixie: 2.6), torch 2.6's rules otherwise.
  if (!python_has_sympy()) OPTRACE_SKIP("python3 with sympy not installed");
  Observer observer = observe({{{2, 5}, {5}}, {{3, 6}, {7}}, {{6, 9}, {13}}});
  auto ds = observer.infer_dynamic_shapes(optrace::DynamicShapesOptions().derived_dims().shared_symbols());
  Observer two = observe({{{2, 5}, {5}}, {{3, 5}, {5}}});
  auto named = two.infer_dynamic_shapes(optrace::DynamicShapesOptions().dim_style(optrace::DimStyle::named).dim0_dynamic({"y"}));
  const std::vector<std::string> loaded = run_python_checks({
      ds.to_json(), two.infer_dynamic_shapes().to_json(), named.to_json(),
      two.infer_dynamic_shapes().with_style(optrace::DimStyle::hint_dynamic).to_json(),
      R"({"dynamic_shapes": [["s0"]], "dims": {}})"});
  // x dim 1 = x dim 0 + 3 and y = 2 * x dim 0 + 1: both derived from one symbol.
  CHECK(loaded[0] == "s0*1+0\ns0*1+3\ns0*2+1\n");
  CHECK(loaded[1] == "_DimHint.AUTO\n5\n5\n");
  CHECK(loaded[2] == "s0*1+0\n5\ns1*1+0\n");
  // The check is live: torch 2.6 refuses _DimHint.DYNAMIC, and a symbol missing from dims.
  CHECK_THAT(loaded[3], OPTRACE_CONTAINS("refused:"));
  CHECK_THAT(loaded[4], OPTRACE_CONTAINS("refused:"));
}

namespace dim_classes_property {

using optrace::detail::DimClasses;
using optrace::detail::DimFacts;
using optrace::detail::DynamicDim;
using optrace::detail::Leaf;

// The rules as first written: every dim against every class before it (O(D^2) comparisons).
// group_dynamic_dims and find_derived_dims narrow the comparisons by DimKeys; they must give
// these classes and relations exactly.
DimClasses reference_classes(const std::vector<Leaf>& leaves, const DimFacts& facts, bool shared, bool derived) {
  DimClasses classes;
  for (size_t l = 0; l < leaves.size(); ++l)
    for (size_t d = 0; d < facts.dynamic[l].size(); ++d) {
      if (!facts.dynamic[l][d]) continue;
      bool placed = false;
      if (shared)
        for (auto& cls : classes.members)
          if (optrace::detail::same_sequence(leaves[cls[0].leaf], cls[0].dim, leaves[l], d)) {
            cls.push_back({l, d});
            placed = true;
            break;
          }
      if (!placed) classes.members.push_back({{l, d}});
    }
  classes.relation.resize(classes.members.size());
  classes.is_base.resize(classes.members.size(), false);
  if (!derived) return classes;
  auto& rel = classes.relation;
  auto& is_base = classes.is_base;
  for (size_t c = 0; c < classes.members.size(); ++c) {
    const DynamicDim& mc = classes.members[c][0];
    for (size_t r = 0; r < c; ++r) {
      if (rel[r].root >= 0) continue;
      const DynamicDim& mr = classes.members[r][0];
      auto forward = optrace::detail::linear_relation(leaves[mr.leaf], mr.dim, leaves[mc.leaf], mc.dim);
      if (forward && (forward->first > 1 || forward->second > 0 || is_base[r])) {
        rel[c] = {static_cast<int64_t>(r), forward->first, forward->second};
        is_base[r] = true;
        break;
      }
      if (!is_base[r]) {
        if (auto backward = optrace::detail::linear_relation(leaves[mc.leaf], mc.dim, leaves[mr.leaf], mr.dim)) {
          rel[r] = {static_cast<int64_t>(c), backward->first, backward->second};
          is_base[c] = true;
          break;
        }
      }
      if (forward) {
        rel[c] = {static_cast<int64_t>(r), forward->first, forward->second};
        is_base[r] = true;
        break;
      }
    }
  }
  return classes;
}

std::string show(const DimClasses& c) {
  std::string out;
  for (size_t k = 0; k < c.members.size(); ++k) {
    out += "[";
    for (const DynamicDim& m : c.members[k]) out += std::to_string(m.leaf) + "." + std::to_string(m.dim) + " ";
    out += "] root " + std::to_string(c.relation[k].root) + " = " + std::to_string(c.relation[k].coeff) + "*r + " +
           std::to_string(c.relation[k].offset) + (c.is_base[k] ? " base" : "") + "\n";
  }
  return out;
}

}  // namespace dim_classes_property

TEST_CASE("dynamic shapes: shared and derived dims found by their keys are those of comparing every pair", "[dynamic_shapes]") {
  using namespace dim_classes_property;
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  for (int round = 0; round < 300; ++round) {
    const size_t signatures = 1 + static_cast<size_t>(pick(6));
    const bool overflow = pick(4) == 0;
    // A few base sequences; each dim follows one of them, a multiple of one plus an offset, or
    // one of its own, so that classes and relations are common.
    std::vector<std::vector<int64_t>> bases(3);
    for (auto& b : bases)
      for (size_t s = 0; s < signatures + 2; ++s) b.push_back(2 + pick(6));
    std::deque<optrace::Value> values;  // stable addresses
    auto value_of = [&](std::vector<int64_t> sizes) {
      optrace::Value v;
      v.kind = optrace::Value::Kind::Tensor;
      v.spec.sizes = std::move(sizes);
      values.push_back(std::move(v));
      return &values.back();
    };
    const size_t n_leaves = 1 + static_cast<size_t>(pick(6));
    std::vector<Leaf> leaves(n_leaves);
    DimFacts facts;
    for (Leaf& leaf : leaves) {
      const size_t rank = 1 + static_cast<size_t>(pick(3));
      std::vector<std::vector<int64_t>> per_dim(rank);  // sizes per signature, then overflow min, max
      for (auto& seq : per_dim) {
        const int how = pick(4);
        const auto& base = bases[static_cast<size_t>(pick(3))];
        const int64_t a = 1 + pick(3), b = pick(3);
        for (size_t s = 0; s < signatures + 2; ++s)
          seq.push_back(how == 0 ? 2 + pick(9) : how == 1 ? base[s] : a * base[s] + b);
      }
      const bool sometimes_absent = pick(3) == 0;
      for (size_t s = 0; s < signatures; ++s) {
        const bool absent = sometimes_absent && pick(2) == 0;
        std::vector<int64_t> sizes;
        for (const auto& seq : per_dim) sizes.push_back(seq[s]);
        leaf.per_signature.push_back(absent ? nullptr : value_of(sizes));
        leaf.stand_in.push_back(!absent && sometimes_absent && pick(4) == 0);
      }
      if (overflow && pick(5) != 0) {
        std::vector<int64_t> low, high;
        for (const auto& seq : per_dim) {
          low.push_back(seq[signatures]);
          high.push_back(seq[signatures + 1]);
        }
        leaf.overflow_min = value_of(low);
        leaf.overflow_max = value_of(high);
      }
      facts.dynamic.emplace_back();
      for (size_t d = 0; d < rank; ++d) facts.dynamic.back().push_back(pick(5) != 0);
    }
    for (bool shared : {false, true})
      for (bool derived : {false, true}) {
        DimClasses got = optrace::detail::group_dynamic_dims(leaves, facts, shared);
        if (derived) optrace::detail::find_derived_dims(leaves, got);
        CAPTURE(round, shared, derived);
        REQUIRE(show(got) == show(reference_classes(leaves, facts, shared, derived)));
      }
  }
}
