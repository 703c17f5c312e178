// detail/aoti/weights.hpp: a plan's weights, read once and handed to every package compiled without them
#pragma once
// compile_plan (examples/python/compile_package.py) compiles a plan's packages without their
// weights (aot_inductor.package_constants_in_so=False) and writes them once beside plan.json with
// torch.save of a plain dict {fully qualified name: tensor}: torch's own format, which libtorch
// reads without Python (torch::pickle_load) and Python reads with torch.load, so a checkpoint
// needs no converter. Each package records in its metadata (kWeightsKey) the file and, for every
// tensor it needs, the dtype, sizes and strides it was compiled for; AOTInductor itself checks
// names only, and a tensor of another shape would be read out of bounds. So every tensor is
// checked against that record before a runner gets it (check_weights).
//
// The runner takes the tensors themselves (update_constant_buffer with a TensorConstantMap of
// `new at::Tensor`, whose ownership it takes): on CPU, libtorch 2.6 keeps them as they are, so
// every package of a set and every model of a runner reads one copy. On CUDA, 2.6 copies each
// tensor into a blob of its own per runner (model_container.h): one host copy, one device copy per
// package.

#include <optrace/detail/common/error_text.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>

#include <torch/serialize.h>

#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <sys/stat.h>

namespace optrace::detail::aoti {

/// The metadata key under which compile_package stores what a package compiled without its
/// weights needs: {"file": name beside plan.json, "tensors": {fqn: {"dtype", "sizes", "strides"}}}.
inline constexpr std::string_view kWeightsKey = "optrace.weights";

/// Tensors by fully qualified name, as read from one weights file (`path` names it).
struct Weights {
  std::string path;
  std::unordered_map<std::string, at::Tensor> tensors;
};

/// The weights in the file open at `fd` (`shown` names it): torch.save of a dict of tensors by
/// name. Throws IoError naming the file for anything else.
inline std::shared_ptr<const Weights> read_weights(int fd, const std::string& shown) {
  struct stat st {};
  const size_t size = ::fstat(fd, &st) == 0 && st.st_size > 0 ? static_cast<size_t>(st.st_size) : 0;
  std::vector<char> bytes;  // what pickle_load takes, read into directly: no second copy of the file
  try {
    bytes = read_all<std::vector<char>>(fd, size, shown);
  } catch (const std::bad_alloc&) {  // one line, not the standard's
    raise_about_file<IoError>(shown, "the weights file of ", size, " bytes does not fit in memory");
  } catch (const std::length_error&) {
    raise_about_file<IoError>(shown, "the weights file of ", size, " bytes does not fit in memory");
  }
  c10::IValue value;
  try {
    value = torch::pickle_load(bytes);
  } catch (const std::exception& e) {
    raise_about_file<IoError>(shown, "not a weights file torch::pickle_load reads (torch.save of a dict of tensors): ",
                              first_line(e));
  }
  std::vector<char>().swap(bytes);  // the tensors hold copies: the file's bytes go now
  if (!value.isGenericDict())
    raise_about_file<IoError>(shown, "not a weights file: torch.save of a dict of tensors by name, not a ", value.tagKind());
  auto weights = std::make_shared<Weights>();
  weights->path = shown;
  for (const auto& item : value.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor())
      raise_about_file<IoError>(shown, "not a weights file: its dict maps ", item.key().tagKind(), " to ",
                                item.value().tagKind(), "; it must map names to tensors");
    weights->tensors.emplace(item.key().toStringRef(), item.value().toTensor());
  }
  return weights;
}

/// What a package compiled without its weights needs of them, from its metadata (kWeightsKey).
struct WeightsNeed {
  struct Tensor {
    std::string dtype;  // "torch.float32"
    std::vector<int64_t> sizes, strides;
  };
  std::string file;  // beside plan.json
  std::unordered_map<std::string, Tensor> tensors;

  static WeightsNeed parse(std::string_view text) {
    auto doc = json::Document::parse(text);
    json::Node root = doc->root();
    WeightsNeed need;
    need.file = std::string(root["file"].as_string());
    for (auto [name, t] : root["tensors"].object())
      need.tensors.emplace(std::string(name), Tensor{std::string(t["dtype"].as_string()), t["sizes"].as_int_list(),
                                                     t["strides"].as_int_list()});
    return need;
  }
};

/// "torch.float32" for at::kFloat: how Python prints a dtype, as compile_package records it.
inline std::string python_dtype(at::ScalarType t) {
  std::string name = c10::toString(t);  // "Float"
  static const std::unordered_map<std::string, std::string> kNames = {
      {"Float", "float32"}, {"Double", "float64"}, {"Half", "float16"}, {"BFloat16", "bfloat16"}, {"Long", "int64"},
      {"Int", "int32"},     {"Short", "int16"},    {"Char", "int8"},    {"Byte", "uint8"},        {"Bool", "bool"},
      {"ComplexFloat", "complex64"}, {"ComplexDouble", "complex128"}};
  auto it = kNames.find(name);
  return "torch." + (it != kNames.end() ? it->second : name);
}

/// `float32[64, 32]`
inline std::string describe_tensor(const std::string& dtype, const std::vector<int64_t>& sizes) {
  std::string out = dtype.rfind("torch.", 0) == 0 ? dtype.substr(6) : dtype;
  out += "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

/// The tensors of `weights` a runner gets, by the runner's constant names (`fqns`: constant name
/// -> fully qualified name, getConstantNamesToOriginalFQNs), each checked against what the package
/// was compiled for, and on the package's `device` (moved there when the file's is another).
/// Throws ArgumentError naming the weights file, the package and the first tensor that is missing
/// or of another dtype, shape or layout.
inline std::unordered_map<std::string, at::Tensor> check_weights(const Weights& weights, const WeightsNeed& need,
                                                                 const std::unordered_map<std::string, std::string>& fqns,
                                                                 const std::string& package, c10::Device device) {
  std::unordered_map<std::string, at::Tensor> out;
  auto refuse = [&](auto&&... what) {
    raise_about_file<ArgumentError>(weights.path, "the weights do not fit the package '", package, "': ", what...);
  };
  for (const auto& [constant, fqn] : fqns) {
    auto have = weights.tensors.find(fqn);
    if (have == weights.tensors.end()) refuse("no tensor '", fqn, "', which it needs");
    const at::Tensor& t = have->second;
    if (t.layout() != at::kStrided || !(t.device().is_cpu() || t.device() == device))
      refuse("'", fqn, "' is not a dense tensor on the CPU or the package's device (", t.toString(), ", ", t.device().str(), ")");
    auto want = need.tensors.find(fqn);
    if (want == need.tensors.end()) refuse("it needs '", fqn, "', which its metadata does not describe (a damaged package)");
    const std::string dtype = python_dtype(t.scalar_type());
    const std::vector<int64_t> sizes = t.sizes().vec(), strides = t.strides().vec();
    if (dtype != want->second.dtype || sizes != want->second.sizes)
      refuse("'", fqn, "' is ", describe_tensor(dtype, sizes), "; it was compiled for ",
             describe_tensor(want->second.dtype, want->second.sizes));
    if (strides != want->second.strides) refuse("'", fqn, "' has other strides than it was compiled for (save it contiguous)");
    out.emplace(constant, t.device() == device ? t : t.to(device));
  }
  return out;
}

}  // namespace optrace::detail::aoti
