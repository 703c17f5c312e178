// snippet_context.hpp: the names the C++ blocks of README.md and docs/ may use without declaring
// them (tests/docs/doc_check.py puts each block in a namespace that sees these). Declarations
// only: the blocks are compiled, not linked or run.
#pragma once

#include <torch/script.h>
#include <torch/torch.h>

#include <optrace/op_trace.hpp>

#include <string>
#include <vector>

namespace optrace_doc_context {

// A model like the demo's: token ids and an optional attention mask.
struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor input_ids, c10::optional<torch::Tensor> attention_mask);
};
TORCH_MODULE(Net);

// One request of the traffic a served model sees.
struct Request {
  torch::Tensor ids, mask, x;
};

extern torch::jit::Module model;     // model.forward(inputs)
extern std::vector<c10::IValue> inputs;
extern Net net;                      // net->forward(ids, mask)
extern std::vector<Request> traffic;
extern torch::Tensor x, y, mask;
extern std::string text, path;
extern optrace::OpTrace trace;

}  // namespace optrace_doc_context
