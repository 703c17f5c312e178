// observe_scripted: the C++ half of the observe -> export end-to-end test (export_e2e.py).
//
//   observe_scripted MODEL.pt CALLS.pt OUT_DIR
//
// Loads a TorchScript module, wraps it in an InputObserver and calls it with the inputs that
// export_e2e.py saved with torch.save: a tuple (calls, value_if_missing), `calls` a list of
// (positional list, keyword dict), `value_if_missing` a dict of name -> tensor. Writes what a
// user's application writes: OUT_DIR/observations.json (InputObserver::save) and
// OUT_DIR/dynamic_shapes.json (DynamicShapes::save, default options) and
// OUT_DIR/dynamic_shapes.named.json (DimStyle::named); prints the Python forms and the warnings.
#include <optrace/observer.hpp>

#include <torch/script.h>
#include <torch/serialize.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: observe_scripted MODEL.pt CALLS.pt OUT_DIR\n";
    return 2;
  }
  try {
    torch::jit::Module module = torch::jit::load(argv[1]);
    module.eval();
    std::ifstream in(argv[2], std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    c10::IValue saved = torch::pickle_load(bytes);
    const auto& parts = saved.toTupleRef().elements();

    optrace::ObserverOptions options;
    for (const auto& entry : parts.at(1).toGenericDict()) options.value_if_missing(entry.key().toStringRef(), entry.value());
    optrace::InputObserver<torch::jit::Module> observer(module, options);

    torch::NoGradGuard no_grad;
    for (const c10::IValue& call : parts.at(0).toListRef()) {
      const auto& pieces = call.toTupleRef().elements();
      std::vector<c10::IValue> args(pieces.at(0).toListRef().begin(), pieces.at(0).toListRef().end());
      torch::jit::Kwargs kwargs;
      for (const auto& entry : pieces.at(1).toGenericDict()) kwargs.emplace(entry.key().toStringRef(), entry.value());
      observer.call(std::move(args), kwargs);
    }

    const std::string out = argv[3];
    observer.save(out + "/observations.json");
    optrace::DynamicShapes ds = observer.infer_dynamic_shapes();
    ds.save(out + "/dynamic_shapes.json");
    optrace::DynamicShapes named =
        observer.infer_dynamic_shapes(optrace::DynamicShapesOptions().dim_style(optrace::DimStyle::named));
    named.save(out + "/dynamic_shapes.named.json");
    std::cout << "calls: " << observer.num_calls() << "\ndynamic_shapes: " << ds.to_python()
              << "\nnamed: " << named.to_python() << "\n";
    for (const std::string& w : ds.warnings()) std::cout << "warning: " << w << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "observe_scripted: " << e.what() << "\n";
    return 1;
  }
}
