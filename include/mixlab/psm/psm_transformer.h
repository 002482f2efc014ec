// mixlab/psm/psm_transformer.h — the small GPT-2-style transformer both halves of the
// Transformer-PSM are made of (seed 004 §3.4): Agg_θ with a bidirectional mask, Inf_φ causal.
//
//   h = x + pos[0:S]                                   learned positions, S <= max_positions
//   per layer: h += proj(MHA(LN1(h)))  ;  h += fc2(gelu(fc1(LN2(h))))     (pre-LN, GPT-2)
//   y = LN_f(h)
// Shapes: x (N,S,d) -> y (N,S,d); N is any batch (the T-PSM stacks tree nodes or chunks into N).
// Init: GPT-2 (normal 0.02; the two residual projections scaled by 1/sqrt(2L)).
//
// Cost: O(N L (S d^2 + S^2 d)). The S x S score matrix is materialised: S is 2c, the concatenated
// pair of chunks, never the sequence length.
// Not supported: dropout, KV caching (the T-PSM re-runs Inf on at most 2c tokens per step).
#pragma once

#include <torch/torch.h>

#include <vector>

namespace mixlab {

struct PsmTransformerOptions {
  int64_t d = 64;              // model width d
  int64_t heads = 4;           // H, d % H == 0
  int64_t layers = 1;          // L >= 1
  int64_t max_positions = 32;  // S <= max_positions (2c for the T-PSM)
  bool causal = false;         // false: bidirectional (Agg); true: causal (Inf)
};

class PsmTransformerImpl : public torch::nn::Module {
 public:
  /// Throws mixlab::Error naming `what` when d, heads or layers are invalid.
  PsmTransformerImpl(const PsmTransformerOptions& options, const char* what);

  /// x (N,S,d) -> (N,S,d). S must be in [1, max_positions].
  torch::Tensor forward(const torch::Tensor& x);

  const PsmTransformerOptions& options() const { return options_; }

 private:
  struct Block {
    torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
    torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
  };
  PsmTransformerOptions options_;
  torch::Tensor pos_;  // (max_positions, d)
  std::vector<Block> blocks_;
  torch::nn::LayerNorm ln_f_{nullptr};
};
TORCH_MODULE(PsmTransformer);

}  // namespace mixlab
