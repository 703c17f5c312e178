// examples/demo/model.hpp: a small transformer-like model (token ids, optional attention mask)
#pragma once

#include <torch/torch.h>

#include <cmath>

namespace demo {

/// Embedding → one self-attention block with a padding mask → layer norm → vocabulary logits.
struct TinyTransformerImpl : torch::nn::Module {
  TinyTransformerImpl(int64_t vocab = 100, int64_t dim = 32, int64_t heads = 4)
      : heads_(heads),
        embed(register_module("embed", torch::nn::Embedding(vocab, dim))),
        qkv(register_module("qkv", torch::nn::Linear(dim, 3 * dim))),
        proj(register_module("proj", torch::nn::Linear(dim, dim))),
        norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
        head(register_module("head", torch::nn::Linear(dim, vocab))) {}

  /// input_ids: [batch, seq] int64; attention_mask: [batch, seq], 1 for tokens, 0 for padding.
  torch::Tensor forward(torch::Tensor input_ids, c10::optional<torch::Tensor> attention_mask) {
    auto x = embed(input_ids);
    const int64_t b = x.size(0), s = x.size(1), d = x.size(2), hd = d / heads_;
    auto q_k_v = qkv(x).view({b, s, 3, heads_, hd}).permute({2, 0, 3, 1, 4});
    auto scores = torch::matmul(q_k_v[0], q_k_v[1].transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
    if (attention_mask) {
      auto pad = attention_mask->view({b, 1, 1, s}).eq(0);
      scores = scores.masked_fill(pad, -std::numeric_limits<float>::infinity());
    }
    auto attended = torch::matmul(torch::softmax(scores, -1), q_k_v[2]).transpose(1, 2).reshape({b, s, d});
    return head(norm(x + proj(attended)));
  }

  int64_t heads_;
  torch::nn::Embedding embed;
  torch::nn::Linear qkv, proj;
  torch::nn::LayerNorm norm;
  torch::nn::Linear head;
};
TORCH_MODULE(TinyTransformer);

}  // namespace demo
