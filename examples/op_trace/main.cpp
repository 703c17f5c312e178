// example_op_trace: record the aten ops a small model runs and write hf_op_trace.json.
//
// Usage: example_op_trace [out=hf_op_trace.json]
#include <optrace/op_tracer.hpp>

#include <torch/torch.h>

#include <iostream>

int main(int argc, char** argv) {
  std::string out = argc > 1 ? argv[1] : "hf_op_trace.json";
  torch::nn::Sequential model(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)), torch::nn::ReLU(),
                              torch::nn::Flatten(), torch::nn::Linear(8 * 16 * 16, 10));
  model->eval();
  std::vector<torch::Tensor> batches = {torch::randn({1, 3, 16, 16}), torch::randn({4, 3, 16, 16}),
                                        torch::randn({1, 3, 16, 16})};

  torch::NoGradGuard no_grad;
  optrace::OpTracer tracer;  // optrace::OpTracerOptions().extended(true) adds devices, strides, kwargs
  tracer.start();
  for (const auto& x : batches) model->forward(x);
  tracer.stop();

  optrace::OpTrace trace = tracer.trace();
  trace.save(out);
  for (const optrace::OpEntry& op : trace.ops())
    std::cout << op.name << ": " << op.total_calls() << " calls, " << op.unique_inputs.size() << " unique inputs\n";
  std::cout << "wrote " << out << "\n";
  return 0;
}
