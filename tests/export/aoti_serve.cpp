// aoti_serve: the C++ half of the observe -> compile -> serve test (aoti_e2e.py), on libtorch >= 2.6.
//
//   aoti_serve PACKAGE.pt2 OBSERVATIONS.json MODEL.pt CALLS.pt BAD_CALLS.pt OUT_DIR [INT_HIGH]
//
// As an application would: loads the package (optrace::aoti::Package) and the TorchScript module
// it replaces, verifies the package on every observed signature against the module
// (OUT_DIR/verify.json; for the positional scenario's package, against a C++ module too), serves the calls of CALLS.pt through an InputObserver<Package> and saves
// their outputs (OUT_DIR/outputs.pt, torch::pickle_save; None for a call it refuses) and the served traffic
// (OUT_DIR/served.json), which it then verifies without a reference; and calls the package with
// each input of BAD_CALLS.pt, which the guard must refuse: the one-line messages go to
// OUT_DIR/refusals.json. CALLS.pt and BAD_CALLS.pt hold a list of (positional list, keyword dict).
// INT_HIGH bounds the integers verify builds (class labels of a model with INT_HIGH classes).
#include <optrace/aoti.hpp>
#include <optrace/observer.hpp>

#include <torch/script.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

namespace {

// The positional scenario's model (x + y) as a C++ module: verify takes any module the observer
// takes as its reference, a typed forward too.
struct AddImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x, torch::Tensor y) { return x + y; }
};
TORCH_MODULE(Add);

using Call = std::pair<std::vector<c10::IValue>, std::unordered_map<std::string, c10::IValue>>;

std::vector<Call> read_calls(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<Call> calls;
  const c10::IValue saved = torch::pickle_load(bytes);
  for (const c10::IValue& call : saved.toListRef()) {
    const auto& pieces = call.toTupleRef().elements();
    Call c;
    c.first.assign(pieces.at(0).toListRef().begin(), pieces.at(0).toListRef().end());
    for (const auto& entry : pieces.at(1).toGenericDict()) c.second.emplace(entry.key().toStringRef(), entry.value());
    calls.push_back(std::move(c));
  }
  return calls;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text << "\n"; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    std::cerr << "usage: aoti_serve PACKAGE.pt2 OBSERVATIONS.json MODEL.pt CALLS.pt BAD_CALLS.pt OUT_DIR [INT_HIGH]\n";
    return 2;
  }
  try {
    const std::string out = argv[6];
    optrace::aoti::Package pkg(argv[1]);
    std::cout << "package " << pkg.signature() << " on " << pkg.device() << ", compiled for "
              << pkg.dynamic_shapes().to_python() << "\n";
    for (const std::string& u : pkg.unchecked()) std::cout << "unchecked: " << u << "\n";

    torch::jit::Module module = torch::jit::load(argv[3]);
    module.eval();
    optrace::Observations observations = optrace::load_observations(argv[2]);
    optrace::aoti::VerifyOptions options;
    if (argc == 8) options.inputs(optrace::MaterializeOptions().int_range(0, std::stoll(argv[7])));
    optrace::aoti::VerifyReport report = optrace::aoti::verify(pkg, observations, module, options);
    std::cout << "verify: " << report.summary() << "\n" << report.table();
    write(out + "/verify.json", report.to_json());
    if (pkg.signature() == "(x, y)") {
      Add add;
      std::cout << "C++ module reference: " << optrace::aoti::verify(pkg, observations, add, options).summary() << "\n";
    }

    optrace::InputObserver<optrace::aoti::Package> served(pkg);
    c10::impl::GenericList outputs(c10::AnyType::get());
    torch::NoGradGuard no_grad;
    // A call the package refuses is still recorded (the observer records, then calls): a later
  // verify of served.json shows it. Its output is None here.
  for (Call& c : read_calls(argv[4])) {
    try {
      outputs.push_back(served.call(c.first, c.second));
    } catch (const optrace::Error& e) {
      std::cout << "refused while serving: " << e.what() << "\n";
      outputs.push_back(c10::IValue());
    }
  }
    std::vector<char> bytes = torch::pickle_save(outputs);
    std::ofstream(out + "/outputs.pt", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    served.save(out + "/served.json");
    optrace::aoti::VerifyReport again =
        optrace::aoti::verify(pkg, optrace::load_observations(out + "/served.json"), optrace::aoti::VerifyOptions(options).timed_runs(0));
    std::cout << "served " << served.num_calls() << " calls; verify without a reference: " << again.summary() << "\n";
    if (!again.all_ok()) std::cout << again.table();

    optrace::json::Writer w(1);
    w.begin_array();
    for (Call& c : read_calls(argv[5])) {
      try {
        pkg.call(c.first, c.second);
        w.null();
      } catch (const optrace::Error& e) {
        w.value(e.what());
      }
    }
    w.end_array();
    write(out + "/refusals.json", w.take());
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "aoti_serve: " << e.what() << "\n";
    return 1;
  }
}
