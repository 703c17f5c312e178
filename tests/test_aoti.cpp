// Tests for detail/aoti/: a package's call spec (torch's treespecs) and its input guard, on every
// libtorch (neither needs AOTInductor). The package itself, compiled by torch and loaded by
// optrace::aoti::Package, is tests/export/aoti_e2e.py's (libtorch >= 2.6).
#include <optrace/detail/aoti/extract.hpp>
#include <optrace/detail/aoti/guard.hpp>
#include <optrace/detail/aoti/weights.hpp>
#include <optrace/detail/aoti/zip_names.hpp>

#include <torch/torch.h>

#include "miniz_names.hpp"
#include "optrace_catch.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <random>
#include <string_view>
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

// ((pair, cfg), {}) with pair a tuple of 2 and cfg a dict {"k": tensor, "none": None}.
const char* kNestedInSpec =
    R"([1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": "builtins.tuple", "context": "null", )"
    R"("children_spec": [{"type": "builtins.tuple", "context": "null", "children_spec": [{"type": null, "context": null, )"
    R"("children_spec": []}, {"type": null, "context": null, "children_spec": []}]}, {"type": "builtins.dict", )"
    R"("context": "[\"k\", \"none\"]", "children_spec": [{"type": null, "context": null, "children_spec": []}, )"
    R"({"type": "builtins.NoneType", "context": "null", "children_spec": []}]}]}, {"type": "builtins.dict", "context": "[]", )"
    R"("children_spec": []}]}])";

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
  CallShape s = CallShape::of(parse_tree_spec(kNestedInSpec), {"pair", "cfg"});
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

TEST_CASE("aoti: a recorded call is flattened and refused as the same call served", "[aoti]") {
  // A plan's drift flattens an observation file's
  // signature (optrace::Value) by the walk a served call (c10::IValue) takes, for one answer.
  const CallShape s = CallShape::of(parse_tree_spec(kNestedInSpec), {"pair", "cfg"});
  auto dict = [](bool with_none, const c10::IValue& none) {
    c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
    d.insert("k", torch::ones({3}));
    if (with_none) d.insert("none", none);
    return d;
  };
  const at::Tensor a = torch::ones({1}), b = torch::ones({2});
  c10::impl::GenericList list(c10::AnyType::get());
  list.push_back(a);
  list.push_back(b);
  struct Case {
    const char* what;
    Kwargs call;
    const char* refusal;  // null: taken
  };
  const std::vector<Case> cases = {
      {"a tuple and a dict", {{"pair", c10::ivalue::Tuple::create({a, b})}, {"cfg", dict(true, c10::IValue())}}, nullptr},
      {"a list for the tuple", {{"pair", list}, {"cfg", dict(true, c10::IValue())}}, nullptr},
      {"one item", {{"pair", c10::ivalue::Tuple::create({a})}, {"cfg", dict(true, c10::IValue())}},
       "argument pair has 1 items; the package was compiled for 2"},
      {"None for the tuple", {{"pair", c10::IValue()}, {"cfg", dict(true, c10::IValue())}},
       "argument pair must be a tuple of 2, got None"},
      {"an int for the tuple", {{"pair", int64_t{3}}, {"cfg", dict(true, c10::IValue())}}, "argument pair must be a tuple of 2, got Int"},
      {"a key short", {{"pair", c10::ivalue::Tuple::create({a, b})}, {"cfg", dict(false, c10::IValue())}},
       "argument cfg has 1 keys; the package was compiled for 2"},
      {"a tensor for None", {{"pair", c10::ivalue::Tuple::create({a, b})}, {"cfg", dict(true, a)}},
       "argument cfg['none'] must be None: the package was compiled without it, got Tensor"},
      {"a dict for the tuple", {{"pair", dict(true, c10::IValue())}, {"cfg", dict(true, c10::IValue())}},
       "argument pair must be a tuple of 2, got GenericDict"},
      {"an argument omitted", {{"pair", c10::ivalue::Tuple::create({a, b})}}, "missing argument 'cfg'; the package takes (pair, cfg)"},
      {"an argument it has not", {{"pair", c10::ivalue::Tuple::create({a, b})}, {"cfg", dict(true, c10::IValue())}, {"z", a}},
       "the package has no argument 'z'; it takes (pair, cfg)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    optrace::Value recorded;  // as the observer records a call: its arguments by name
    recorded.kind = optrace::Value::Kind::Dict;
    for (const auto& [name, value] : c.call) {
      recorded.keys.push_back(name);
      recorded.items.push_back(optrace::to_value(value));
    }
    std::vector<optrace::detail::aoti::FlatInput> flat;
    std::vector<optrace::detail::aoti::FlatValue> flat_value;
    optrace::detail::aoti::Refusal served, seen;
    const bool takes = s.try_flatten({}, c.call, flat, &served);
    CHECK(takes == s.try_flatten(recorded, flat_value, &seen));
    CHECK(takes == (c.refusal == nullptr));
    CHECK(served.message == seen.message);
    if (c.refusal) CHECK(served.message == c.refusal);
    REQUIRE(flat.size() == flat_value.size());
    for (size_t i = 0; i < flat.size(); ++i) CHECK(flat[i].path == flat_value[i].path);
  }
  // A struct recorded through OPTRACE_FIELDS is a namedtuple to torch: a tuple of its fields.
  optrace::Value pair;
  pair.kind = optrace::Value::Kind::Struct;
  pair.text = "Pair";
  pair.keys = {"first", "second"};
  pair.items = {optrace::to_value(c10::IValue(a)), optrace::to_value(c10::IValue(b))};
  optrace::Value recorded;
  recorded.kind = optrace::Value::Kind::Dict;
  recorded.keys = {"pair", "cfg"};
  recorded.items = {pair, optrace::to_value(c10::IValue(dict(true, c10::IValue())))};
  std::vector<optrace::detail::aoti::FlatValue> flat;
  CHECK(s.try_flatten(recorded, flat, nullptr));
  CHECK(flat.size() == 3);
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
  // A refusal at a size counts every dim the package does not take, by the rule a plan's drift
  // counts with: PackageSet names the package with the fewest, as drift does.
  auto misses = [&](const at::Tensor& a, const at::Tensor& b) {
    optrace::detail::aoti::Refusal r;
    r.want_message = false;
    CHECK_FALSE(g.accepts(shape().flatten({a, b}, {}), &r));
    return r.misses;
  };
  CHECK(misses(torch::ones({65, 9}), torch::ones({130, 5})) == 4);  // both dims 0 outside, both static dims other
  CHECK(misses(torch::ones({3, 9}), m) == 1);
  CHECK(misses(x, torch::ones({7, 4})) == 1);   // not 2*s0
  CHECK(misses(x, torch::ones({8, 4})) == 1);   // s0 = 4 against 3
  CHECK(misses(torch::ones({65, 8}), torch::ones({8, 4})) == 1);  // x binds nothing outside its range: mask is not blamed
  // Hostile metadata: an offset at the edge of int64 is judged without overflow (UBSan in CI).
  const Guard edge = Guard::parse(
      R"({"version": 1, "inputs": [{"path": "x", "kind": "tensor", "dtype": "torch.float32", "device": "cpu", "sizes": )"
      R"([{"expr": "-s0 - 9223372036854775808", "symbol": "s0", "coeff": -1, "offset": -9223372036854775808}, 8]},)"
      R"( {"path": "mask", "kind": "NoneType", "value": null}], "symbols": {}})");
  CHECK(refusal(edge, {torch::ones({3, 8}), c10::IValue()}) ==
        "ShapeError: argument x dim 0 is 3; the package was compiled for -s0 - 9223372036854775808 there, which 3 is not for any "
        "integer s0");
  CHECK(refusal(g, {torch::ones({3, 8}, torch::kDouble), m}) ==
        "ShapeError: argument x has dtype torch.float64; the package was compiled for torch.float32");
  CHECK(refusal(g, {c10::IValue(), m}) == "ShapeError: argument x: the package was compiled for a tensor here, got None");
  // Structure before sizes: a later input's None or dtype is told before an earlier input's size.
  CHECK(refusal(g, {torch::ones({65, 8}), c10::IValue()}) ==
        "ShapeError: argument mask: the package was compiled for a tensor here, got None");
  CHECK(refusal(g, {torch::ones({65, 8}), torch::ones({6, 4}, torch::kHalf)}) ==
        "ShapeError: argument mask has dtype torch.float16; the package was compiled for torch.float32");

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
  // torch::save writes a zip archive as torch.save does (PyTorchStreamWriter, with ZIP64 end
  // records), as a package is one.
  const std::string saved = optrace_test::temp_path("aoti_zip_tensor.pt");
  torch::save(torch::ones({3}), saved);
  std::vector<std::string> names = optrace::detail::aoti::zip_names(saved);
  CHECK(std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.size() > 8 && n.substr(n.size() - 8) == "data.pkl"; }));
  const std::string bytes = optrace::detail::read_file(saved);
  CHECK(optrace_test::miniz_names(bytes) == names);
  const std::string json = optrace_test::temp_path("aoti_zip_not_a_zip.json");
  std::ofstream(json) << "{\"traceEvents\": [], \"displayTimeUnit\": \"ms\"}";
  CHECK_THROWS_WITH(optrace::detail::aoti::zip_names(json),
                    "optrace: Error: not a zip archive (no end of central directory)");
  const std::string cut = optrace_test::temp_path("aoti_zip_cut.pt");
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 30);  // the end of directory cut off
  CHECK_THROWS_AS(optrace::detail::aoti::zip_names(cut), optrace::Error);
  CHECK_THROWS_WITH(optrace::detail::aoti::zip_names(optrace_test::temp_path("")), OPTRACE_CONTAINS("it is a directory"));
}

namespace {

std::string zip_corpus(const std::string& name) {
  return optrace::detail::read_file(std::string(OPTRACE_SOURCE_DIR) + "/tests/fuzz/corpus/zip/" + name);
}

std::string zip_refusal(std::string_view bytes) {
  try {
    optrace::detail::aoti::zip_names_in(bytes);
  } catch (const optrace::Error& e) {
    return e.message();
  }
  return "(read)";
}

}  // namespace

// The archives of tests/export/crafted_zips.py (fuzz_zip's corpus), held to the miniz libtorch
// carries, which is what AOTInductor's loader extracts with.
TEST_CASE("aoti: the archive check reads the directory miniz reads", "[aoti]") {
  for (const char* name : {"ordinary.zip", "commented.zip"}) {
    CAPTURE(name);
    const std::string bytes = zip_corpus(name);
    REQUIRE(optrace_test::miniz_names(bytes).has_value());
    CHECK(optrace::detail::aoti::zip_names_in(bytes) == *optrace_test::miniz_names(bytes));
  }
  // Two directories: miniz (and Python's zipfile) read the one the ZIP64 record names, with an
  // entry that escapes the loader's folder; the classic record names a benign one.
  const std::string two = zip_corpus("two_directories.zip");
  const std::optional<std::vector<std::string>> miniz = optrace_test::miniz_names(two);
  REQUIRE(miniz.has_value());
  CHECK(miniz->back() == "data/aotinductor/model/../../../../tmp/x");
  CHECK(zip_refusal(two) == "its classic and ZIP64 end records disagree (3 entries, 243 directory bytes at 282 against 4, "
                            "329 at 525): readers would see different archives");
  // 98 bytes naming a directory of 64 GiB whose offset + size wrap past 2^64 to 0 (the check
  // once asked for 64 GiB: std::bad_alloc): refused before anything is allocated, by miniz's
  // limit; within the limit, by bounds checked apart.
  const std::string wrap = zip_corpus("wrapping_directory.zip");
  REQUIRE(wrap.size() == 98);
  CHECK(zip_refusal(wrap) == "a zip directory of more than 2^32-1 bytes");
  CHECK_FALSE(optrace_test::miniz_names(wrap).has_value());
  std::string small_wrap = wrap;
  const std::string size = {'\x50', 0, 0, 0, 0, 0, 0, 0}, offset = {'\xc0', '\xff', '\xff', '\xff', '\xff', '\xff', '\xff', '\xff'};
  small_wrap.replace(40, 8, size).replace(48, 8, offset);  // 80 bytes at 2^64 - 64: they end at 16
  CHECK(zip_refusal(small_wrap) == "a zip directory beyond the end of the file");
  CHECK_FALSE(optrace_test::miniz_names(small_wrap).has_value());
}

TEST_CASE("aoti: the archive check refuses what two readers could read apart", "[aoti]") {
  const std::string ordinary = zip_corpus("ordinary.zip");
  const size_t end = ordinary.size() - 22;
  auto with = [&](size_t at, std::string_view bytes, std::string base = {}) {
    if (base.empty()) base = ordinary;
    base.replace(at, bytes.size(), bytes);
    return base;
  };
  auto le32 = [](uint32_t v) { return std::string{char(v), char(v >> 8), char(v >> 16), char(v >> 24)}; };
  const uint32_t dir_size = static_cast<uint32_t>(optrace::detail::aoti::zip::le(ordinary.data() + end + 12, 4));
  // Bytes after the last entry, inside the directory the end record names: miniz takes the
  // archive; the check refuses what no reader accounts for.
  const std::string padded = ordinary.substr(0, end) + std::string(8, '\0') + with(end + 12, le32(dir_size + 8)).substr(end);
  CHECK(optrace_test::miniz_names(padded).has_value());
  CHECK(zip_refusal(padded) == "a zip directory not filled by its 3 entries (8 bytes after them)");
  // A directory past the file's end, and an entry count the directory cannot hold.
  CHECK(zip_refusal(with(end + 16, le32(0xFFFFFFF0))) == "a zip directory beyond the end of the file");
  CHECK(zip_refusal(with(end + 8, std::string("\x09\x00\x09\x00", 4))) == "a damaged zip directory (9 entries in 243 bytes)");
  CHECK(zip_refusal(with(end + 10, std::string("\x09\x00", 2))) ==
        "a damaged or multi-disk zip archive (9 entries, 3 of them on this disk)");
  // A comment of 65,535 bytes is the longest; an end record further back is not searched. Both
  // readers search back from the end in 4 KiB steps; in a small archive miniz's next step would
  // start before byte 0, where its read fails: it finds no end record, nor does the check.
  const std::string longest_comment = with(end + 20, std::string("\xff\xff", 2)) + std::string(0xFFFF, 'c');
  CHECK_FALSE(optrace_test::miniz_names(longest_comment).has_value());
  CHECK(zip_refusal(longest_comment) == "not a zip archive (no end of central directory)");
  const uint32_t dir_at = static_cast<uint32_t>(optrace::detail::aoti::zip::le(ordinary.data() + end + 16, 4));
  const std::string large = std::string(8192, '\0') + with(end + 16, le32(dir_at + 8192), longest_comment);
  REQUIRE(optrace_test::miniz_names(large).has_value());
  CHECK(optrace::detail::aoti::zip_names_in(large) == *optrace_test::miniz_names(large));
  CHECK_FALSE(optrace_test::miniz_names(large + std::string(4200, 'c')).has_value());
  CHECK(zip_refusal(large + std::string(4200, 'c')) == "not a zip archive (no end of central directory)");
  // Flipped bytes in the tail: whatever miniz reads, the check refuses or reads alike.
  std::mt19937 rng(7);
  for (int i = 0; i < 4000; ++i) {
    std::string bytes = i % 2 ? ordinary : zip_corpus("two_directories.zip");
    for (int k = 0; k < 1 + i % 3; ++k) bytes[bytes.size() - 1 - rng() % 400] = static_cast<char>(rng());
    const std::optional<std::vector<std::string>> miniz = optrace_test::miniz_names(bytes);
    if (!miniz) continue;
    std::vector<std::string> ours;
    try {
      ours = optrace::detail::aoti::zip_names_in(bytes);
    } catch (const optrace::Error&) {
      continue;
    }
    CAPTURE(i);
    REQUIRE(ours == *miniz);
  }
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

namespace {

// The files extract_model writes of the archive `bytes` (by their path below the model's folder,
// and "library" and "metadata" for what it found), or the message of what it threw.
std::map<std::string, std::string> extracted(const std::string& bytes, std::string* error) {
  using namespace optrace::detail::aoti;
  const std::string path = optrace_test::temp_path("aoti_extract.pt2");
  std::ofstream(path, std::ios::binary) << bytes;
  size_t size = 0;
  const optrace::detail::Fd fd(optrace::detail::open_regular_file(path, &size));
  std::map<std::string, std::string> files;
  std::string folder_path;
  try {
    const ExtractionFolder folder;
    folder_path = folder.path();
    const ExtractedModel got = extract_model(fd.get(), size, zip_entries_of(fd.get(), size, path), "data/aotinductor/model/",
                                             folder, path);
    files["library"] = got.library.substr(folder.path().size());
    files["metadata"] = got.metadata.substr(folder.path().size());
    for (const auto& f : std::filesystem::directory_iterator(folder.path()))
      files[f.path().filename().string()] = optrace::detail::read_file(f.path().string());
  } catch (const optrace::Error& e) {
    *error = e.message();
  }
  CHECK_FALSE(std::filesystem::exists(folder_path));  // removed with its owner, whatever happened
  return files;
}

}  // namespace

// What torch 2.6's loader extracts, optrace extracts itself (it needs the library's path to build
// a runner of several models): stored and deflated entries, each checked against the directory.
TEST_CASE("aoti: a package's model files are extracted as its directory describes them", "[aoti]") {
  std::string error;
  std::map<std::string, std::string> files = extracted(zip_corpus("ordinary.zip"), &error);
  CHECK(error.empty());
  CHECK(files["model.so"] == "\x7f" "ELF");
  CHECK(files["model_metadata.json"] == "{}");
  CHECK(files["library"] == "/model.so");
  CHECK(files["metadata"] == "/model_metadata.json");

  std::string so;  // crafted_zips.py's DEFLATED_SO
  for (int i = 0; i < 5000; ++i) {
    char line[16];
    std::snprintf(line, sizeof line, "optrace %05d\n", i);
    so += line;
  }
  files = extracted(zip_corpus("deflated.zip"), &error);
  CHECK(error.empty());
  CHECK(files["model.so"] == so);
  CHECK(files["model.cpp"] == "// source\n");

  // A byte of stored data changed: its CRC-32 no longer matches (as miniz checks on extracting).
  std::string bytes = zip_corpus("ordinary.zip");
  bytes[bytes.find("ELF")] = 'X';
  extracted(bytes, &error);
  CHECK(error == "entry 'data/aotinductor/model/model.so': its CRC-32 does not match: the archive is damaged");
  // No local header where the directory says.
  bytes = zip_corpus("ordinary.zip");
  bytes[0] = 'X';
  extracted(bytes, &error);
  CHECK(error == "entry 'data/aotinductor/model/model.so': no local header where the directory says");
  // A deflated entry that declares more than deflate can give (a disk filler): refused before
  // anything is written.
  bytes = zip_corpus("deflated.zip");
  const size_t central = bytes.find("PK\x01\x02");
  bytes.replace(central + 24, 4, std::string("\xf0\xff\xff\xff", 4));
  extracted(bytes, &error);
  CHECK(error == "entry 'data/aotinductor/model/model.so': declares 4294967280 bytes from 11417, more than deflate gives");
  // Deflated data damaged in the middle: refused, whichever check sees it first.
  bytes = zip_corpus("deflated.zip");
  const size_t data = bytes.find("data/aotinductor/model/model.so") + 31;
  for (size_t i = data + 100; i < data + 140; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  error.clear();
  extracted(bytes, &error);
  CHECK_FALSE(error.empty());
}

// A plan's weights (weights.hpp): torch.save of a dict read by torch::pickle_load, every tensor a
// runner gets checked against what its package recorded.
TEST_CASE("aoti: weights are checked against what the package was compiled for", "[aoti]") {
  using namespace optrace::detail::aoti;
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  dict.insert("head.weight", torch::ones({4, 3}));
  dict.insert("head.bias", torch::zeros({4}));
  const std::vector<char> pickled = torch::pickle_save(c10::IValue(dict));
  const std::string path = optrace_test::temp_path("aoti_weights.pt");
  std::ofstream(path, std::ios::binary).write(pickled.data(), static_cast<std::streamsize>(pickled.size()));
  size_t size = 0;
  optrace::detail::Fd fd(optrace::detail::open_regular_file(path, &size));
  const std::shared_ptr<const Weights> weights = read_weights(fd.get(), "w.pt");
  REQUIRE(weights->tensors.size() == 2);

  const WeightsNeed need = WeightsNeed::parse(
      R"({"file": "weights.pt", "tensors": {"head.weight": {"dtype": "torch.float32", "sizes": [4, 3], "strides": [3, 1]},)"
      R"( "head.bias": {"dtype": "torch.float32", "sizes": [4], "strides": [1]}}})");
  CHECK(need.file == "weights.pt");
  const std::unordered_map<std::string, std::string> fqns = {{"head_weight", "head.weight"}, {"head_bias", "head.bias"}};
  const auto tensors = check_weights(*weights, need, fqns, "p0.pt2", c10::Device("cpu"));
  REQUIRE(tensors.size() == 2);
  CHECK(tensors.at("head_weight").data_ptr() == weights->tensors.at("head.weight").data_ptr());  // shared, not copied

  auto refusal = [&](const Weights& w) {
    try {
      check_weights(w, need, fqns, "p0.pt2", c10::Device("cpu"));
    } catch (const optrace::ArgumentError& e) {
      return std::string(e.what());
    }
    return std::string("(taken)");
  };
  Weights other = *weights;
  other.tensors["head.bias"] = torch::zeros({7});
  CHECK(refusal(other) == "optrace: w.pt: ArgumentError: the weights do not fit the package 'p0.pt2': 'head.bias' is "
                          "float32[7]; it was compiled for float32[4]");
  other.tensors["head.bias"] = torch::zeros({4}, torch::kFloat64);
  CHECK(refusal(other) == "optrace: w.pt: ArgumentError: the weights do not fit the package 'p0.pt2': 'head.bias' is "
                          "float64[4]; it was compiled for float32[4]");
  other = *weights;
  other.tensors["head.weight"] = torch::ones({3, 4}).t();
  CHECK(refusal(other) == "optrace: w.pt: ArgumentError: the weights do not fit the package 'p0.pt2': 'head.weight' has "
                          "other strides than it was compiled for (save it contiguous)");
  other.tensors["head.weight"] = torch::ones({4, 3}, torch::kMeta);
  CHECK_THAT(refusal(other), OPTRACE_CONTAINS("'head.weight' is not a dense tensor on the CPU or the package's device"));
  other.tensors["head.weight"] = torch::ones({4, 3}).to_sparse();
  CHECK_THAT(refusal(other), OPTRACE_CONTAINS("'head.weight' is not a dense tensor on the CPU or the package's device"));
  other.tensors.erase("head.weight");
  CHECK(refusal(other) == "optrace: w.pt: ArgumentError: the weights do not fit the package 'p0.pt2': no tensor "
                          "'head.weight', which it needs");

  // Not a dict of tensors: one line naming the file.
  const std::vector<char> listed = torch::pickle_save(c10::IValue(std::vector<int64_t>{1, 2}));
  std::ofstream(path, std::ios::binary).write(listed.data(), static_cast<std::streamsize>(listed.size()));
  fd = optrace::detail::Fd(optrace::detail::open_regular_file(path, &size));
  CHECK_THROWS_WITH(read_weights(fd.get(), "w.pt"), OPTRACE_CONTAINS("optrace: w.pt: IoError: not a weights file: "
                                                                     "torch.save of a dict of tensors by name, not a "));
  std::ofstream(path, std::ios::binary) << "{}";
  fd = optrace::detail::Fd(optrace::detail::open_regular_file(path, &size));
  CHECK_THROWS_WITH(read_weights(fd.get(), "w.pt"), OPTRACE_CONTAINS("not a weights file torch::pickle_load reads"));
}
