// trace_scripted: the C++ half of the OpTracer-vs-reference parity test (tracer_parity.py).
//
//   trace_scripted MODEL.pt CALLS.txt OUT.json
//   trace_scripted MODEL.pt CALLS.txt OUT.txt    (oplog_parity.py)
//
// Loads a TorchScript module and the calls tracer_parity.py wrote, one per line, each a list of
// float32 tensor shapes separated by ';' with sizes separated by ',' ("2,3,160,160"); runs every
// call (randn inputs) under an OpTracer with default options, as a C++ application would
// (no-grad, the graph executor's optimizations off, as the Python side runs them), and saves the
// trace; prints the calls it counted but could not keep (nested tensors). With OUT ending in .txt
// it traces with extended options (keyword arguments, strides) and writes PyTorch's
// operator-inputs log instead, with the logger's default rules. (libtorch 1.13's
// torch::pickle_load cannot read Python's torch.save, hence the text.)
#include <optrace/op_tracer.hpp>
#include <optrace/operator_inputs.hpp>

#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: trace_scripted MODEL.pt CALLS.pt OUT.json\n";
    return 2;
  }
  try {
    torch::jit::Module module = torch::jit::load(argv[1]);
    module.eval();
    std::vector<std::vector<c10::IValue>> calls;
    std::ifstream in(argv[2]);
    for (std::string line; std::getline(in, line);) {
      std::vector<c10::IValue> args;
      std::istringstream tensors(line);
      for (std::string shape; std::getline(tensors, shape, ';');) {
        std::vector<int64_t> sizes;
        std::istringstream dims(shape);
        for (std::string d; std::getline(dims, d, ',');) sizes.push_back(std::stoll(d));
        args.emplace_back(torch::randn(sizes));
      }
      calls.push_back(std::move(args));
    }
    torch::jit::setGraphExecutorOptimize(false);

    const std::string out = argv[3];
    const bool text = out.size() > 4 && out.compare(out.size() - 4, 4, ".txt") == 0;
    optrace::OpTracer tracer(optrace::OpTracerOptions().extended(text));
    torch::NoGradGuard no_grad;
    tracer.start();
    for (auto& args : calls) module.forward(std::move(args));
    tracer.stop();
    optrace::OpTrace trace = tracer.trace();
    if (text) optrace::operator_inputs::save(trace, out);
    else trace.save(out);
    std::cout << "ops: " << trace.ops().size() << ", calls: " << trace.total_calls() << "\n";
    for (const optrace::DroppedCalls& d : tracer.dropped())
      std::cout << "not kept: " << d.op << ": " << d.calls << " calls" << (d.unreadable.empty() ? "" : ": " + d.unreadable)
                << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "trace_scripted: " << e.what() << "\n";
    return 1;
  }
}
