// Tests for detail/aoti/: a package's call spec (torch's treespecs) and its input guard, on every
// libtorch (neither needs AOTInductor). The package itself, compiled by torch and loaded by
// optrace::aoti::Package, is tests/export/aoti_e2e.py's (libtorch >= 2.6).
#include <optrace/detail/aoti/guard.hpp>
#include <optrace/detail/aoti/zip_names.hpp>

#include <torch/torch.h>

#include "optrace_catch.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <utility>

namespace {

using optrace::detail::aoti::CallShape;
using optrace::detail::aoti::Guard;
using optrace::detail::aoti::parse_tree_spec;
using optrace::detail::aoti::TreeSpec;
using Kwargs = std::unordered_map<std::string, c10::IValue>;

// What torch 2.6's get_call_spec() gave for forward(self, x, mask=None) exported with
// args (x,) and kwargs {"mask": ...}, and for an output (y, y.sum()).
const char* kInSpec =
    R"([1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": "builtins.tuple", "context": "null", )"
    R"("children_spec": [{"type": null, "context": null, "children_spec": []}]}, {"type": "builtins.dict", "context": )"
    R"("[\"mask\"]", "children_spec": [{"type": null, "context": null, "children_spec": []}]}]}])";
const char* kOutSpec =
    R"([1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": null, "context": null, )"
    R"("children_spec": []}, {"type": null, "context": null, "children_spec": []}]}])";

// compile_package.py's metadata for the same program, x: [s0, 8] float32, mask: [s0, 4] with
// s0 in [1, 64], and an int input baked in as 3.
const char* kGuard =
    R"({"version": 1, "arg_names": ["x", "mask", "n"], "inputs": [)"
    R"({"path": "x", "kind": "tensor", "dtype": "torch.float32", "device": "cpu",)"
    R"( "sizes": [{"expr": "s0", "symbol": "s0", "coeff": 1, "offset": 0, "min": 1, "max": 64}, 8]},)"
    R"({"path": "mask", "kind": "tensor", "dtype": "torch.float32", "device": "cpu",)"
    R"( "sizes": [{"expr": "2*s0", "symbol": "s0", "coeff": 2, "offset": 0, "min": 2, "max": 128}, 4]}],)"
    R"( "symbols": {"s0": [1, 64]}})";

CallShape shape() { return CallShape::of(parse_tree_spec(kInSpec), {"x", "mask"}); }

std::string refusal(const Guard& g, const std::vector<c10::IValue>& args, const Kwargs& kwargs = {}) {
  try {
    g.check(shape().flatten(args, kwargs));
  } catch (const optrace::Error& e) {
    return e.what_without_prefix();
  }
  return "";
}

// A zip archive of empty stored files with these names, as a hostile package may be: local
// headers, the central directory, its end record (APPNOTE.TXT 4.3.7, 4.3.12, 4.3.16).
void write_zip(const std::string& path, const std::vector<std::string>& names) {
  auto put = [](std::string& out, std::initializer_list<std::pair<uint64_t, int>> fields) {  // {value, bytes}, little-endian
    for (const auto& [value, bytes] : fields)
      for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
  };
  std::string local, dir, end;
  for (const std::string& n : names) {  // stored, empty, dated 1980-01-01: the CRC and sizes are 0
    put(dir, {{0x02014b50, 4}, {20, 2}, {20, 2}, {0, 2}, {0, 2}, {0, 2}, {0x21, 2}, {0, 4}, {0, 4}, {0, 4},
              {n.size(), 2}, {0, 2}, {0, 2}, {0, 2}, {0, 2}, {0, 4}, {local.size(), 4}});
    dir += n;
    put(local, {{0x04034b50, 4}, {20, 2}, {0, 2}, {0, 2}, {0, 2}, {0x21, 2}, {0, 4}, {0, 4}, {0, 4}, {n.size(), 2}, {0, 2}});
    local += n;
  }
  put(end, {{0x06054b50, 4}, {0, 2}, {0, 2}, {names.size(), 2}, {names.size(), 2}, {dir.size(), 4}, {local.size(), 4}, {0, 2}});
  std::ofstream(path, std::ios::binary) << local << dir << end;
}

}  // namespace

// torch 2.7 and newer write a package's files under a top folder named after the archive; the
// loader takes the first component of the first two names as that folder when they agree.
TEST_CASE("aoti: a package's top folder, as AOTInductor's loader finds it", "[aoti]") {
  using optrace::detail::aoti::archive_prefix;
  CHECK(archive_prefix({"version", "archive_format", "data/aotinductor/model/a.so"}) == "");  // torch 2.6
  CHECK(archive_prefix({"model/version", "model/archive_format", "model/data/aotinductor/model/a.so"}) == "model/");
  CHECK(archive_prefix({"data/aotinductor/model/a.cpp", "data/aotinductor/model/a.so"}) == "data/");  // the loader's rule
  CHECK(archive_prefix({"model/data/aotinductor/model/a.so"}) == "");
  CHECK(archive_prefix({}) == "");
}

TEST_CASE("aoti: a call flattens by the in_spec, positional or by name", "[aoti]") {
  CallShape s = shape();
  CHECK(s.describe() == "(x, *, mask)");
  at::Tensor x = torch::ones({2, 8}), m = torch::ones({4, 4});
  for (const auto& [args, kwargs] : std::vector<std::pair<std::vector<c10::IValue>, Kwargs>>{
           {{x, m}, {}}, {{x}, {{"mask", m}}}, {{}, {{"x", x}, {"mask", m}}}}) {
    auto flat = s.flatten(args, kwargs);
    REQUIRE(flat.size() == 2);
    CHECK(flat[0].path == "x");
    CHECK(flat[1].path == "mask");
    CHECK(flat[1].value.toTensor().size(0) == 4);
  }
  CHECK_THROWS_WITH(s.flatten({x}, {}), OPTRACE_CONTAINS("missing argument 'mask'; the package takes (x, *, mask)"));
  CHECK_THROWS_WITH(s.flatten({x, m}, {{"labels", x}}), OPTRACE_CONTAINS("has no argument 'labels'"));
  CHECK_THROWS_WITH(s.flatten({x, m}, {{"mask", m}}), OPTRACE_CONTAINS("argument 'mask' is given twice"));
  CHECK_THROWS_WITH(s.flatten({x, m, m}, {}), OPTRACE_CONTAINS("the call gives 3 positional arguments"));
}

TEST_CASE("aoti: nested specs, None and outputs rebuilt", "[aoti]") {
  // ((pair, cfg), {}) with pair a tuple of 2 and cfg a dict {"k": tensor, "none": None}.
  const char* in =
      R"([1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": "builtins.tuple", "context": "null", )"
      R"("children_spec": [{"type": "builtins.tuple", "context": "null", "children_spec": [{"type": null, "context": null, )"
      R"("children_spec": []}, {"type": null, "context": null, "children_spec": []}]}, {"type": "builtins.dict", )"
      R"("context": "[\"k\", \"none\"]", "children_spec": [{"type": null, "context": null, "children_spec": []}, )"
      R"({"type": "builtins.NoneType", "context": "null", "children_spec": []}]}]}, {"type": "builtins.dict", "context": "[]", )"
      R"("children_spec": []}]}])";
  CallShape s = CallShape::of(parse_tree_spec(in), {"pair", "cfg"});
  c10::impl::GenericDict cfg(c10::StringType::get(), c10::AnyType::get());
  cfg.insert("k", torch::ones({3}));
  cfg.insert("none", c10::IValue());
  auto flat = s.flatten({c10::ivalue::Tuple::create({torch::ones({1}), torch::ones({2})}), cfg}, {});
  REQUIRE(flat.size() == 3);
  CHECK(flat[0].path == "pair[0]");
  CHECK(flat[2].path == "cfg['k']");
  CHECK_THROWS_WITH(s.flatten({c10::ivalue::Tuple::create({torch::ones({1})}), cfg}, {}),
                    OPTRACE_CONTAINS("argument pair has 1 items; the package was compiled for 2"));
  cfg.insert_or_assign("none", torch::ones({1}));
  CHECK_THROWS_WITH(s.flatten({c10::ivalue::Tuple::create({torch::ones({1}), torch::ones({2})}), cfg}, {}),
                    OPTRACE_CONTAINS("argument cfg['none'] must be None"));

  TreeSpec out = parse_tree_spec(kOutSpec);
  c10::IValue rebuilt = optrace::detail::aoti::unflatten(out, {torch::ones({2}), torch::zeros({})});
  REQUIRE(rebuilt.isTuple());
  CHECK(rebuilt.toTupleRef().elements().size() == 2);
  CHECK_THROWS_WITH(optrace::detail::aoti::unflatten(out, {torch::ones({2})}),
                    OPTRACE_CONTAINS("the package returned 1 outputs"));
  CHECK_THROWS_AS(parse_tree_spec(R"([1, {"type": "collections.defaultdict", "context": "x", "children_spec": []}])"),
                  optrace::JsonError);
  // A package whose in_spec is an output's is malformed metadata (Package's JsonError), not a
  // call's mistake (ArgumentError).
  CHECK_THROWS_AS(CallShape::of(out, {}), optrace::JsonError);
  CHECK_THROWS_WITH(CallShape::of(out, {}), OPTRACE_CONTAINS("in_spec is not ((args...), {kwargs...})"));
}

TEST_CASE("aoti: the guard refuses what the package was not compiled for, by torch's rules", "[aoti]") {
  Guard g = Guard::parse(kGuard);
  CHECK(g.unchecked.empty());
  CHECK(g.arg_names == std::vector<std::string>{"x", "mask", "n"});
  at::Tensor x = torch::ones({3, 8}), m = torch::ones({6, 4});
  CHECK(refusal(g, {x, m}) == "");
  // torch allows 0 and 1 where the lower bound is 2 or less: so does the guard.
  CHECK(refusal(g, {torch::ones({1, 8}), torch::ones({2, 4})}) == "");
  CHECK(refusal(g, {torch::ones({65, 8}), torch::ones({130, 4})}) ==
        "ShapeError: argument x dim 0 is 65, outside the range [1, 64] of s0 the package was compiled for (export with a "
        "wider range)");
  CHECK(refusal(g, {x, torch::ones({8, 4})}) ==
        "ShapeError: argument mask dim 0 is 8, which makes s0 = 4; but x dim 0 made it 3 (both are s0 in the package: they "
        "must agree)");
  CHECK(refusal(g, {x, torch::ones({7, 4})}) ==
        "ShapeError: argument mask dim 0 is 7; the package was compiled for 2*s0 there, which 7 is not for any integer s0");
  CHECK(refusal(g, {torch::ones({3, 9}), m}) ==
        "ShapeError: argument x dim 1 is 9; the package was compiled for 8 there (a static dim): sizes [3, 9], compiled "
        "for [s0, 8]");
  CHECK(refusal(g, {torch::ones({3}), m}) ==
        "ShapeError: argument x has 1 dims [3]; the package was compiled for 2 ([s0, 8])");
  CHECK(refusal(g, {torch::ones({3, 8}, torch::kDouble), m}) ==
        "ShapeError: argument x has dtype torch.float64; the package was compiled for torch.float32");
  CHECK(refusal(g, {c10::IValue(), m}) == "ShapeError: argument x: the package was compiled for a tensor here, got None");

  // What it was compiled for, as the observer's DynamicShapes.
  optrace::DynamicShapes ds = g.dynamic_shapes(shape());
  CHECK(ds.to_python() == "{'x': {0: Dim('s0', min=1, max=64)}, 'mask': {0: Dim('s0', min=1, max=64)*2}}");
}

TEST_CASE("aoti: baked-in values and metadata the guard cannot read", "[aoti]") {
  const char* baked = R"({"version": 1, "inputs": [{"path": "n", "kind": "int", "value": 3},)"
                      R"( {"path": "w", "kind": "tensor", "dtype": "torch.float32", "device": "cpu",)"
                      R"( "sizes": [{"expr": "s0*s1"}]}], "symbols": {}})";
  Guard g = Guard::parse(baked);
  REQUIRE(g.unchecked.size() == 1);
  CHECK(g.unchecked[0] == "w: a dim of expression s0*s1, not checked");
  std::vector<optrace::detail::aoti::FlatInput> flat{{"n", int64_t{4}}, {"w", torch::ones({6})}};
  CHECK_THROWS_WITH(g.check(flat), "optrace: ShapeError: argument n is 4; the package was compiled with 3 (a non-tensor "
                                   "input is baked into the package)");
  flat[0].value = int64_t{3};
  CHECK_NOTHROW(g.check(flat));
  CHECK_THROWS_WITH(Guard::parse(R"({"version": 2, "inputs": [], "symbols": {}})"),
                    OPTRACE_CONTAINS("guard metadata version 2; this optrace reads version 1"));
  CHECK_THROWS_AS(Guard::parse(R"({"version": 1, "inputs": [{"path": "x"}], "symbols": {}})"), optrace::JsonError);
}

TEST_CASE("aoti: a package is told by its zip directory, before AOTInductor extracts it", "[aoti]") {
  // torch::save writes a zip archive as torch.save does (PyTorchStreamWriter), as a package is one.
  const std::string saved = optrace_test::temp_path("aoti_zip_tensor.pt");
  torch::save(torch::ones({3}), saved);
  std::vector<std::string> names = optrace::detail::aoti::zip_names(saved);
  CHECK(std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.size() > 8 && n.substr(n.size() - 8) == "data.pkl"; }));
  const std::string json = optrace_test::temp_path("aoti_zip_not_a_zip.json");
  std::ofstream(json) << "{\"traceEvents\": [], \"displayTimeUnit\": \"ms\"}";
  CHECK_THROWS_WITH(optrace::detail::aoti::zip_names(json),
                    "optrace: Error: not a zip archive (no end of central directory)");
  std::ifstream in(saved, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = optrace_test::temp_path("aoti_zip_cut.pt");
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 30);  // the end of directory cut off
  CHECK_THROWS_AS(optrace::detail::aoti::zip_names(cut), optrace::Error);
}

// torch 2.6's loader joins each name under data/aotinductor/<model>/ to its folder unchecked:
// Package refuses, before it runs, an archive with a name that would land outside (zip slip).
TEST_CASE("aoti: an archive entry that would be extracted outside the loader's folder is found", "[aoti]") {
  using optrace::detail::aoti::zip_names;
  auto unsafe = [](const std::vector<std::string>& names) {
    return optrace::detail::aoti::unsafe_entry_name(names).value_or("(none)");
  };
  const std::vector<std::string> ordinary{"data/aotinductor/model/model.so", "data/aotinductor/model/a..b.cpp",
                                          "model/data/aotinductor/model/x.json"};
  const std::string path = optrace_test::temp_path("aoti_zip_slip.pt2");
  write_zip(path, ordinary);
  CHECK(zip_names(path) == ordinary);
  CHECK(unsafe(zip_names(path)) == "(none)");
  for (const std::string& bad : std::vector<std::string>{"data/aotinductor/model/../../../../tmp/evil.so", "/etc/evil",
                                                         "model/data/aotinductor/model/..\\..\\x"}) {
    CAPTURE(bad);
    std::vector<std::string> names = ordinary;
    names.insert(names.begin() + 1, bad);
    write_zip(path, names);
    CHECK(zip_names(path) == names);
    CHECK(unsafe(zip_names(path)) == bad);
  }
  for (const std::string& bad :
       std::vector<std::string>{"../x", "x/..", "..", "a/../b", "a\\..", "\\x", "C:x", "c:/x", std::string("a\0b", 3)})
    CHECK(unsafe({"data/aotinductor/model/model.so", bad}) == bad);
  for (const std::string& good : std::vector<std::string>{"..foo", "foo..", "a/..b/c", "a/.../b", "./a", "a/./b", "1:x", ""})
    CHECK(unsafe({good}) == "(none)");
}
