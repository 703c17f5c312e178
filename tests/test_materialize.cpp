// Tests for optrace/materialize.hpp and optrace/json/tensor_meta.hpp (one TU: each torch TU
// costs ~15 s to compile).
#include <optrace/json/tensor_meta.hpp>
#include <optrace/materialize.hpp>

#include <torch/cuda.h>
#include <torch/torch.h>

#include <fstream>
#include <sstream>

#include "optrace_catch.hpp"

using optrace::MaterializeOptions;
using optrace::Materializer;
using optrace::TensorSpec;

namespace {

TensorSpec spec(std::vector<int64_t> sizes, c10::ScalarType dtype = c10::kFloat, std::vector<int64_t> strides = {},
                int64_t offset = 0) {
  TensorSpec s;
  s.sizes = std::move(sizes);
  s.strides = strides.empty() ? TensorSpec::contiguous_strides(s.sizes) : std::move(strides);
  s.storage_offset = offset;
  s.dtype = dtype;
  return s;
}

// Every dtype optrace fills on the installed libtorch: the schema's, plus uint32/64 and the
// float8 fnuz variants where they exist.
std::vector<c10::ScalarType> all_dtypes() {
  using optrace::detail::NewerDtype;
  std::vector<c10::ScalarType> out = {c10::kByte,  c10::kChar,   c10::kShort,        c10::kInt,
                                      c10::kLong,  c10::kHalf,   c10::kFloat,        c10::kDouble,
                                      c10::kComplexHalf, c10::kComplexFloat, c10::kComplexDouble,
                                      c10::kBool,  c10::kBFloat16};
  for (auto w : {NewerDtype::Float8_e5m2, NewerDtype::Float8_e4m3fn, NewerDtype::Float8_e5m2fnuz,
                 NewerDtype::Float8_e4m3fnuz, NewerDtype::UInt16, NewerDtype::UInt32, NewerDtype::UInt64})
    if (auto d = optrace::detail::newer_dtype(w)) out.push_back(*d);
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int64_t storage_numel(const at::Tensor& t) { return static_cast<int64_t>(t.storage().nbytes() / t.element_size()); }

}  // namespace

TEST_CASE("materialize: every dtype on cpu and meta", "[materialize]") {
  for (auto dtype : all_dtypes()) {
    INFO("dtype " << c10::toString(dtype));
    TensorSpec s = spec({3, 5}, dtype);
    at::Tensor t = optrace::materialize(s);
    CHECK(t.scalar_type() == dtype);
    CHECK(t.sizes().vec() == s.sizes);
    CHECK(t.strides().vec() == s.strides);
    CHECK(t.device() == c10::Device(c10::kCPU));
    CHECK(TensorSpec::of(t) == s);
    if (c10::isFloatingType(dtype) || c10::isComplexType(dtype)) {
      at::Tensor wide = t.to(c10::isComplexType(dtype) ? c10::kComplexDouble : c10::kDouble);
      CHECK(at::isfinite(wide).all().item<bool>());
      CHECK(at::abs(wide).sum().item<double>() > 0);  // actually filled
    } else if (dtype != c10::kBool) {
      at::Tensor wide = t.to(c10::kLong);
      CHECK(wide.min().item<int64_t>() >= 0);
      CHECK(wide.max().item<int64_t>() < 8);
    }

    at::Tensor m = optrace::materialize(s, MaterializeOptions().device(c10::kMeta));
    CHECK(m.is_meta());
    CHECK(m.scalar_type() == dtype);
    CHECK(m.sizes().vec() == s.sizes);
    CHECK(m.strides().vec() == s.strides);
  }
}

TEST_CASE("materialize: strides and storage offsets", "[materialize]") {
  for (auto device : {c10::Device(c10::kCPU), c10::Device(c10::kMeta)}) {
    INFO("device " << device);
    auto opts = MaterializeOptions().device(device);
    SECTION("expanded: the small storage is filled, not a dense copy") {
      at::Tensor t = optrace::materialize(spec({4, 3}, c10::kFloat, {0, 1}), opts);
      CHECK(t.strides().vec() == std::vector<int64_t>{0, 1});
      CHECK(storage_numel(t) == 3);
      if (!device.is_meta()) CHECK(at::equal(t[0], t[3]));
    }
    SECTION("zero-size dim") {
      at::Tensor t = optrace::materialize(spec({0, 5}), opts);
      CHECK(t.numel() == 0);
      CHECK(t.sizes().vec() == std::vector<int64_t>{0, 5});
      CHECK(storage_numel(t) == 0);
    }
    SECTION("storage offset") {
      TensorSpec s = spec({2, 2}, c10::kDouble, {2, 1}, 5);
      at::Tensor t = optrace::materialize(s, opts);
      CHECK(t.storage_offset() == 5);
      CHECK(storage_numel(t) == 9);
      CHECK(optrace::storage_elements(s) == 9);
      CHECK(TensorSpec::of(t).strides == s.strides);
    }
    SECTION("transposed") {
      at::Tensor t = optrace::materialize(spec({3, 2}, c10::kFloat, {1, 3}), opts);
      CHECK(t.strides().vec() == std::vector<int64_t>{1, 3});
      CHECK_FALSE(t.is_contiguous());
      CHECK(storage_numel(t) == 6);
    }
    SECTION("scalar and empty strides mean contiguous") {
      TensorSpec s;
      s.sizes = {2, 3, 4};
      CHECK(optrace::materialize(s, opts).strides().vec() == std::vector<int64_t>{12, 4, 1});
      s.sizes = {};
      at::Tensor t = optrace::materialize(s, opts);
      CHECK(t.dim() == 0);
      CHECK(t.numel() == 1);
    }
  }
}

TEST_CASE("materialize: specs that describe no tensor", "[materialize]") {
  CHECK_THROWS_WITH(optrace::materialize(spec({3, 2}, c10::kFloat, {-1, 3})),
                    "optrace: ShapeError: tensor #0 (Float [3, 2]): negative stride -1 in dim 0 "
                    "(libtorch tensors cannot have negative strides)");
  CHECK_THROWS_WITH(optrace::materialize(spec({3, -2})),
                    "optrace: ShapeError: tensor #0 (Float [3, -2]): negative size -2 in dim 1");
  CHECK_THROWS_WITH(optrace::materialize(spec({3, 2}, c10::kFloat, {2, 1, 1})),
                    "optrace: ShapeError: tensor #0 (Float [3, 2]): 3 strides for 2 sizes");
  CHECK_THROWS_WITH(optrace::materialize(spec({3}, c10::kFloat, {1}, -4)),
                    "optrace: ShapeError: tensor #0 (Float [3]): negative storage offset -4");
  CHECK_THROWS_WITH(optrace::materialize(spec({int64_t{1} << 40, int64_t{1} << 40}, c10::kFloat, {int64_t{1} << 40, 1})),
                    "optrace: ShapeError: tensor #0 (Float [1099511627776, 1099511627776]): storage extent overflows int64");
  TensorSpec sparse = spec({4, 4});
  sparse.layout = c10::kSparse;
  CHECK_THROWS_WITH(optrace::materialize(sparse),
                    "optrace: MaterializeError: tensor #0 (Float [4, 4]): layout Sparse cannot be materialized "
                    "(only strided tensors can)");
  CHECK_THROWS_WITH(optrace::materialize(spec({2}, c10::kQInt8)),
                    "optrace: MaterializeError: tensor #0 (QInt8 [2]): quantized dtype QInt8 cannot be "
                    "materialized (a TensorSpec records no scale or zero point)");
  CHECK_THROWS_AS(optrace::materialize(spec({2}, c10::kQUInt4x2)), optrace::MaterializeError);
}

TEST_CASE("materialize: memory budget refused before allocation", "[materialize]") {
  SECTION("one tensor") {
    auto opts = MaterializeOptions().memory_budget_bytes(int64_t{1} << 20);
    CHECK_THROWS_WITH(optrace::materialize(spec({512, 1024}), opts),
                      "optrace: MaterializeError: tensor #0 (Float [512, 1024]) needs 2097152 bytes (2.0 MiB) on cpu, "
                      "over the memory budget of 1048576 bytes (1.0 MiB); raise "
                      "MaterializeOptions::memory_budget_bytes or materialize on the meta device");
    CHECK(optrace::materialize(spec({256, 1024}), opts).numel() == 256 * 1024);  // exactly the budget
  }
  SECTION("default budget: 4 GiB") {
    CHECK(MaterializeOptions().memory_budget_bytes() == int64_t{4} << 30);
    CHECK_THROWS_WITH(optrace::materialize(spec({int64_t{1} << 31}, c10::kDouble)),
                      "optrace: MaterializeError: tensor #0 (Double [2147483648]) needs 17179869184 bytes (16.0 GiB) "
                      "on cpu, over the memory budget of 4294967296 bytes (4.0 GiB); raise "
                      "MaterializeOptions::memory_budget_bytes or materialize on the meta device");
  }
  SECTION("a set is checked as a whole, before any allocation") {
    auto opts = MaterializeOptions().memory_budget_bytes(int64_t{1} << 20);
    std::vector<TensorSpec> specs = {spec({100, 1024}), spec({100, 1024}), spec({100, 1024})};
    CHECK_THROWS_WITH(optrace::materialize(specs, opts),
                      "optrace: MaterializeError: 3 tensors need 1228800 bytes (1.2 MiB) on cpu, over the memory "
                      "budget of 1048576 bytes (1.0 MiB); raise MaterializeOptions::memory_budget_bytes or "
                      "materialize on the meta device");
    specs.pop_back();
    CHECK(optrace::materialize(specs, opts).size() == 2);
    // an invalid spec anywhere refuses the whole set
    specs.push_back(spec({2}, c10::kQInt8));
    Materializer m(opts);
    CHECK_THROWS_WITH(m.check_budget(specs), OPTRACE_CONTAINS("tensor #2 (QInt8 [2]): quantized dtype"));
  }
  SECTION("meta takes no memory") {
    auto opts = MaterializeOptions().device(c10::kMeta).memory_budget_bytes(0);
    at::Tensor t = optrace::materialize(spec({int64_t{1} << 20, int64_t{1} << 20}), opts);
    CHECK(t.numel() == int64_t{1} << 40);
    CHECK(Materializer(opts).bytes(spec({1024})) == 0);
    CHECK(Materializer().bytes(spec({4, 3}, c10::kDouble, {0, 1})) == 24);
  }
}

TEST_CASE("materialize: same seed same values and different seed different values", "[materialize]") {
  std::vector<TensorSpec> specs = {spec({64, 33}), spec({100}, c10::kLong), spec({7, 7}, c10::kBool),
                                   spec({16}, c10::kComplexFloat), spec({5, 9}, c10::kBFloat16, {1, 5})};
  auto a = optrace::materialize(specs, MaterializeOptions().seed(42));
  auto b = optrace::materialize(specs, MaterializeOptions().seed(42));
  auto c = optrace::materialize(specs, MaterializeOptions().seed(43));
  for (size_t i = 0; i < specs.size(); ++i) {
    INFO("tensor " << i);
    CHECK(at::equal(a[i], b[i]));
    CHECK_FALSE(at::equal(a[i], c[i]));
  }
  SECTION("a tensor's values depend on its stream, not on the order of calls") {
    Materializer m(MaterializeOptions().seed(42));
    at::Tensor later = m.tensor(specs[1], 1);
    CHECK(at::equal(later, a[1]));
    CHECK(at::equal(m.tensor(specs[0], 0), a[0]));
    CHECK_FALSE(at::equal(optrace::materialize(specs[0], MaterializeOptions().seed(42)),
                          Materializer(MaterializeOptions().seed(42)).tensor(specs[0], 1)));
  }
  SECTION("the global generator is left alone") {
    torch::manual_seed(3);
    at::Tensor r1 = torch::rand({8});
    torch::manual_seed(3);
    optrace::materialize(specs);
    at::Tensor r2 = torch::rand({8});
    CHECK(at::equal(r1, r2));
  }
}

TEST_CASE("materialize: fill ranges", "[materialize]") {
  SECTION("integers in the default range 0 to 7") {
    for (auto dtype : {c10::kByte, c10::kChar, c10::kShort, c10::kInt, c10::kLong}) {
      at::Tensor t = optrace::materialize(spec({4000}, dtype)).to(c10::kLong);
      CHECK(t.min().item<int64_t>() == 0);
      CHECK(t.max().item<int64_t>() == 7);
    }
  }
  SECTION("integers in a chosen range") {
    at::Tensor t = optrace::materialize(spec({4000}, c10::kChar), MaterializeOptions().int_range(-3, 3));
    CHECK(t.min().item<int64_t>() == -3);
    CHECK(t.max().item<int64_t>() == 2);
    at::Tensor big = optrace::materialize(spec({1000}, c10::kLong), MaterializeOptions().int_range(1000000, 1000002));
    CHECK(big.min().item<int64_t>() == 1000000);
    CHECK(big.max().item<int64_t>() == 1000001);
  }
  SECTION("a range the dtype cannot hold") {
    CHECK_THROWS_WITH(optrace::materialize(spec({4}, c10::kByte), MaterializeOptions().int_range(-1, 5)),
                      "optrace: MaterializeError: tensor #0 (Byte [4]): int_range [-1, 5) does not fit dtype Byte "
                      "(values 0 to 255)");
    CHECK_THROWS_WITH(MaterializeOptions().int_range(5, 5),
                      "optrace: ArgumentError: MaterializeOptions::int_range: need low < high, got [5, 5)");
  }
  SECTION("a range per tensor, and whether the options set one") {
    CHECK_FALSE(MaterializeOptions().int_range_set());
    CHECK(MaterializeOptions().int_range(0, 8).int_range_set());
    Materializer m;
    at::Tensor t = m.tensor(spec({4000}, c10::kShort), 0, 100, 103).to(c10::kLong);
    CHECK(t.min().item<int64_t>() == 100);
    CHECK(t.max().item<int64_t>() == 102);
    CHECK(torch::equal(m.tensor(spec({40}), 1, 100, 103), m.tensor(spec({40}), 1)));  // floats ignore it
    CHECK_THROWS_WITH(m.tensor(spec({4}, c10::kByte), 0, 300, 301),
                      "optrace: MaterializeError: tensor #0 (Byte [4]): int_range [300, 301) does not fit dtype Byte "
                      "(values 0 to 255)");
    CHECK_THROWS_WITH(m.tensor(spec({4}, c10::kLong), 0, 3, 3),
                      "optrace: ArgumentError: Materializer::tensor: need int_low < int_high, got [3, 3)");
  }
  SECTION("uniform floats") {
    at::Tensor t = optrace::materialize(spec({10000}, c10::kHalf), MaterializeOptions().uniform(2, 3)).to(c10::kFloat);
    CHECK(t.min().item<float>() >= 2.0f);
    CHECK(t.max().item<float>() <= 3.0f);
    CHECK_THROWS_AS(MaterializeOptions().uniform(3, 2), optrace::ArgumentError);
  }
  SECTION("normal floats") {
    at::Tensor t = optrace::materialize(spec({100000}, c10::kDouble), MaterializeOptions().normal(10, 2));
    CHECK(std::abs(t.mean().item<double>() - 10) < 0.05);
    CHECK(std::abs(t.std().item<double>() - 2) < 0.05);
  }
  SECTION("bool probability") {
    CHECK_FALSE(optrace::materialize(spec({100}, c10::kBool), MaterializeOptions().bool_probability(0)).any().item<bool>());
    CHECK(optrace::materialize(spec({100}, c10::kBool), MaterializeOptions().bool_probability(1)).all().item<bool>());
  }
}

TEST_CASE("materialize: requires_grad restored on floating tensors", "[materialize]") {
  TensorSpec f = spec({2, 3});
  f.requires_grad = true;
  at::Tensor t = optrace::materialize(f);
  CHECK(t.requires_grad());
  CHECK(t.is_leaf());
  CHECK(TensorSpec::of(t) == f);
  TensorSpec i = spec({2, 3}, c10::kLong);
  i.requires_grad = true;  // autograd refuses it: ignored
  CHECK_FALSE(optrace::materialize(i).requires_grad());
  CHECK_FALSE(optrace::materialize(spec({2})).requires_grad());
}

TEST_CASE("materialize: the example of docs/materialize.md", "[materialize]") {
  // Kept in step with the first example of docs/materialize.md (compiled there, run here).
  optrace::TensorSpec x;
  x.sizes = {2, 3};
  x.strides = {1, 2};  // a transposed recording
  x.dtype = torch::kBFloat16;
  optrace::TensorSpec ids;
  ids.sizes = {2, 16};
  ids.dtype = torch::kLong;

  auto options = optrace::MaterializeOptions()
                     .device(torch::cuda::is_available() ? c10::Device(torch::kCUDA) : c10::Device(torch::kCPU))
                     .seed(1234)
                     .int_range(0, 1000)  // token ids below the vocabulary size
                     .memory_budget_bytes(int64_t{1} << 30);
  std::vector<at::Tensor> inputs = optrace::materialize({x, ids}, options);

  CHECK(inputs[0].strides().vec() == std::vector<int64_t>{1, 2});
  CHECK(inputs[1].max().item<int64_t>() < 1000);
}

TEST_CASE("materialize: a missing cuda device is a clear error", "[materialize]") {
  if (torch::cuda::is_available()) OPTRACE_SKIP("a CUDA device is present");
  try {
    optrace::materialize(spec({2}), MaterializeOptions().device(torch::kCUDA));
    FAIL("no error");
  } catch (const optrace::MaterializeError& e) {
    CHECK_THAT(e.what(), OPTRACE_CONTAINS("optrace: MaterializeError: tensor #0 (Float [2]): libtorch failed on cuda: "));
    CHECK_THROWS_AS(std::rethrow_if_nested(e), c10::Error);
  }
}

TEST_CASE("materialize: cuda tensors filled on the device", "[materialize][cuda]") {
  if (!torch::cuda::is_available()) OPTRACE_SKIP("no CUDA device");
  auto opts = MaterializeOptions().device(torch::kCUDA).seed(5);
  for (auto dtype : all_dtypes()) {
    INFO("dtype " << c10::toString(dtype));
    TensorSpec s = spec({3, 5}, dtype, {1, 3});
    at::Tensor t = optrace::materialize(s, opts);
    CHECK(t.is_cuda());
    CHECK(t.scalar_type() == dtype);
    CHECK(t.strides().vec() == s.strides);
    // libtorch 2.11's CPU equal() has no ComplexHalf kernel: compared as its real pairs.
    auto host = [](const at::Tensor& x) {
      at::Tensor c = x.cpu();
      return c.scalar_type() == c10::kComplexHalf ? at::view_as_real(c.contiguous()) : c;
    };
    CHECK(at::equal(host(t), host(optrace::materialize(s, opts))));
  }
  at::Tensor e = optrace::materialize(spec({4, 3}, c10::kFloat, {0, 1}, 2), opts);
  CHECK(storage_numel(e) == 5);
  CHECK(e.storage_offset() == 2);
  at::Tensor ints = optrace::materialize(spec({100000}, c10::kInt), opts).cpu();
  CHECK(ints.min().item<int>() == 0);
  CHECK(ints.max().item<int>() == 7);
  CHECK_FALSE(at::equal(optrace::materialize(spec({64}), opts).cpu(),
                        optrace::materialize(spec({64}), MaterializeOptions(opts).seed(6)).cpu()));
  std::vector<TensorSpec> big = {spec({int64_t{1} << 28}), spec({int64_t{1} << 28})};  // 2 GiB
  CHECK_THROWS_WITH(optrace::materialize(big, MaterializeOptions(opts).memory_budget_bytes(int64_t{1} << 30)),
                    OPTRACE_CONTAINS("2 tensors need 2147483648 bytes (2.0 GiB) on cuda"));
}

// ---- optrace/json/tensor_meta.hpp

TEST_CASE("tensor_meta: dtype numbers of the torch.export schema", "[tensor_meta]") {
  using namespace optrace::json;
  CHECK(schema_scalar_type(c10::kByte) == 1);
  CHECK(schema_scalar_type(c10::kLong) == 5);
  CHECK(schema_scalar_type(c10::kFloat) == 7);
  CHECK(schema_scalar_type(c10::kComplexHalf) == 9);
  CHECK(schema_scalar_type(c10::kBool) == 12);
  CHECK(schema_scalar_type(c10::kBFloat16) == 13);
  for (int64_t n = 1; n <= 13; ++n) CHECK(schema_scalar_type(scalar_type_from_schema(n)) == n);
  for (auto dtype : all_dtypes()) {
    if (auto n = try_schema_scalar_type(dtype)) CHECK(scalar_type_from_schema(*n) == dtype);
  }
  CHECK_FALSE(try_schema_scalar_type(c10::kQInt8).has_value());
  CHECK_THROWS_WITH(schema_scalar_type(c10::kQInt8),
                    "optrace: ArgumentError: dtype QInt8 has no number in the torch.export serialization schema");
  CHECK_THROWS_WITH(scalar_type_from_schema(14, "/inputs/0/meta/dtype"),
                    "optrace: JsonError at /inputs/0/meta/dtype: unknown dtype number 14 (torch.export schema "
                    "ScalarType: 1-13, 28-30)");
  CHECK_THROWS_AS(scalar_type_from_schema(0), optrace::JsonError);
  if (!optrace::detail::newer_dtype(optrace::detail::NewerDtype::UInt16)) {
    CHECK_THROWS_WITH(scalar_type_from_schema(28, "/d"),
                      OPTRACE_CONTAINS("optrace: JsonError at /d: dtype 28 (UINT16) is not supported by the "
                                       "installed libtorch "));
  } else {
    CHECK(schema_scalar_type(scalar_type_from_schema(28)) == 28);
    CHECK(schema_scalar_type(scalar_type_from_schema(29)) == 29);
    CHECK(schema_scalar_type(scalar_type_from_schema(30)) == 30);
  }
}

TEST_CASE("tensor_meta: layouts and devices", "[tensor_meta]") {
  using namespace optrace::json;
  CHECK(schema_layout(c10::kStrided) == 7);
  CHECK(schema_layout(c10::kSparse) == 1);
  for (int64_t n = 1; n <= 7; ++n) CHECK(schema_layout(layout_from_schema(n)) == n);
  CHECK_THROWS_WITH(layout_from_schema(0, "/l"),
                    "optrace: JsonError at /l: unknown layout number 0 (torch.export schema Layout: 1-7)");

  optrace::json::Writer w;
  w.begin_array();
  write_device(w, c10::Device(c10::kCPU));
  write_device(w, c10::Device(c10::kCUDA, 1));
  write_device(w, c10::Device(c10::kMeta));
  w.end_array();
  CHECK(w.str() == R"([{"type": "cpu", "index": null}, {"type": "cuda", "index": 1}, {"type": "meta", "index": null}])");
  CHECK(device_from_schema("cuda", 1) == c10::Device(c10::kCUDA, 1));
  CHECK(device_from_schema("cpu", std::nullopt) == c10::Device(c10::kCPU));
  CHECK(device_from_schema("meta", std::nullopt) == c10::Device(c10::kMeta));
  CHECK_THROWS_WITH(device_from_schema("tpu", std::nullopt, "/inputs/0/meta/device"),
                    "optrace: JsonError at /inputs/0/meta/device/type: unknown device type \"tpu\"");
  CHECK_THROWS_WITH(device_from_schema("cuda:0", std::nullopt, "/d"),
                    "optrace: JsonError at /d/type: unknown device type \"cuda:0\"");
  CHECK_THROWS_WITH(device_from_schema("cuda", -1, "/d"),
                    "optrace: JsonError at /d/index: invalid index -1 for device type \"cuda\"");
}

TEST_CASE("tensor_meta: golden file", "[tensor_meta]") {
  TensorSpec x = spec({2, 3, 8});
  x.requires_grad = true;
  TensorSpec expanded = spec({4, 3}, c10::kLong, {0, 1}, 2);
  expanded.device = c10::Device(c10::kCUDA, 0);
  TensorSpec mask = spec({}, c10::kBool);
  TensorSpec half = spec({5, 7}, c10::kBFloat16, {1, 5});
  half.device = c10::Device(c10::kMeta);

  optrace::json::Writer w(1);
  w.begin_array();
  optrace::json::write_tensor_meta(w, x, {"s0", "", "s1"});
  optrace::json::write_tensor_meta(w, expanded);
  optrace::json::write_tensor_meta(w, mask);
  optrace::json::write_tensor_meta(w, half, {"", ""});
  w.end_array();
  std::string golden = read_file(optrace_test::data_path("tensor_meta/specs.json"));
  while (!golden.empty() && golden.back() == '\n') golden.pop_back();
  CHECK(w.str() == golden);

  CHECK(optrace::json::tensor_meta_json(mask) ==
        R"({"dtype": 12, "sizes": [], "requires_grad": false, "device": {"type": "cpu", "index": null}, )"
        R"("strides": [], "storage_offset": {"as_int": 0}, "layout": 7})");
  CHECK_THROWS_WITH(optrace::json::tensor_meta_json(x, {"s0"}),
                    "optrace: ArgumentError: write_tensor_meta: 1 dim symbols for a tensor of rank 3");
}
