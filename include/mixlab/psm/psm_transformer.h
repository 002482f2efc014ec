// mixlab/psm/psm_transformer.h — the small GPT-2-style transformer both halves of the
// Transformer-PSM are made of (seed 004 §3.4): Agg_θ with a bidirectional mask, Inf_φ causal.
//
//   h = x + pos[0:S]                                   learned positions, S <= max_positions
//   per layer: h += proj(MHA(LN1(h)))  ;  h += fc2(gelu(fc1(LN2(h))))     (pre-LN, GPT-2)
// Option rope: no position table (h = x); instead q and k of every head are rotated by their
// position 0..S-1 (mixlab/core/rope.h, as the attention mixer does), so scores depend on relative
// position only. Offered because the attention mixer, which learns MQAR where T-PSM does not,
// uses it; alone it did not take T-PSM off the MQAR plateau (docs/log/results-2026-11.md, "MQAR: attention
// solves it, T-PSM stays on the plateau").
//   y = LN_f(h)
// Option attention_only (the T-PSM's inf=attention): no MLP sublayer and no final LayerNorm; y is
// what the layers added to the input, y = h_L - h_0 (h_0 = x + pos). Inside a backbone block, which
// has its own LayerNorm, FFN and residual, the transformer is then one more attention layer; the
// GPT-2 form instead hands the block a normalised copy of its input plus an extra MLP, and with it
// the T-PSM did not learn MQAR where this form does (docs/log/results-2026-11.md, "What held T-PSM back").
// With keep_input as well (the T-PSM's agg=attention), y = x + h_L - h_0: the input rows plus what
// the layers wrote into them, the residual stream without the position table. Agg's output is a
// state, not an update to one, so it must carry its input forward.
// Shapes: x (N,S,d) -> y (N,S,d); N is any batch (the T-PSM stacks tree nodes or chunks into N).
// Init: GPT-2 (normal with std init_std = 0.02; the two residual projections scaled by
// 1/sqrt(2L)). GPT-2 chose 0.02 for width 768; at d = 64 it starts every score near 0, hence the
// option (measured on MQAR in the same RESULTS section as rope: no help alone).
//
// Cost: O(N L (S d^2 + S^2 d)). The attention runs on mixlab/attention's kernels, block_attention
// (bidirectional) and causal_attention (causal), which take each (row, head) pair's S scores in
// scratch: S is 2c, the concatenated pair of chunks, never the sequence length. Their backward is
// not itself differentiable, so forward is differentiable to first order; under
// ComposedAttentionGuard and ComposedBlockAttentionGuard it runs LibTorch ops, to any order.
//
// Decode on raw rows (step_rows, src/psm/psm_transformer_step.cpp): the same math for ONE
// sequence, row by row, with the keys and values of every layer kept in a caller-owned cache, so
// a causal network can be extended by a few rows without recomputing the earlier ones (the
// T-PSM's Inf step), and a bidirectional one can be run on its S rows without an ATen dispatch
// per op (the T-PSM's Agg during decode). Only for autograd off and contiguous CPU float/double
// parameters of one dtype (rows_ok); forward stays the reference.
// Not supported: dropout.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace mixlab {

struct PsmTransformerOptions {
  int64_t d = 64;               // model width d
  int64_t heads = 4;            // H, d % H == 0
  int64_t layers = 1;           // L >= 1
  int64_t max_positions = 32;   // S <= max_positions (2c for the T-PSM)
  bool causal = false;          // false: bidirectional (Agg); true: causal (Inf)
  bool rope = false;            // false: learned positions added to x; true: rotary q/k (D even)
  double init_std = 0.02;       // std of the normal init of the weights and the position table
  bool attention_only = false;  // true: no MLP, no LN_f, y = h_L - h_0 (see above)
  bool keep_input = false;      // with attention_only: y = x + h_L - h_0
};

/// The parameters a PsmTransformer with these options holds (a double: a spec's sizes may make
/// the count overflow int64). Counted from the options alone, so a caller can check a size before
/// anything is allocated (mixlab/mixer/parameter_budget.h).
double psm_transformer_parameter_count(const PsmTransformerOptions& options);

class PsmTransformerImpl : public torch::nn::Module {
 public:
  /// Throws mixlab::Error naming `what` when d, heads or layers are invalid.
  PsmTransformerImpl(const PsmTransformerOptions& options, const char* what);

  /// x (N,S,d) -> (N,S,d). S must be in [1, max_positions].
  torch::Tensor forward(const torch::Tensor& x);

  /// True when step_rows may run for `dtype`: every parameter is a contiguous CPU tensor of that
  /// dtype (float or double). The caller checks autograd is off.
  bool rows_ok(c10::ScalarType dtype) const;
  /// Elements of one sequence's key/value cache: layers x max_positions x 2d, per layer and
  /// position the row [k | v] (heads side by side, as forward's qkv split).
  int64_t rows_cache_numel() const { return options_.layers * options_.max_positions * 2 * options_.d; }
  /// One sequence on raw rows: x (n,d) are the rows at positions [p, p+n); `cache`
  /// (rows_cache_numel()) already holds the keys/values of positions [0, p) and receives those
  /// of [p, p+n). Writes y (n - y_from, d) = forward's output rows [y_from, n) of these n rows:
  /// causal: forward([earlier rows | x]) at positions p+y_from..p+n-1; bidirectional (p must be
  /// 0): forward(x) rows y_from..n-1. Rows below y_from still get every layer's keys/values, but
  /// the last layer stops there for them (its attention, MLP and final LayerNorm are skipped).
  /// S = p + n may be below max_positions (the T-PSM's empty identity: a state of 0 rows).
  /// p + n <= max_positions, 0 <= y_from <= n; y may be null when y_from == n.
  template <typename T>
  void step_rows(const T* x, int64_t n, int64_t p, T* cache, T* y, int64_t y_from);

  const PsmTransformerOptions& options() const { return options_; }

 private:
  struct Block {
    torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
    torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
  };
  PsmTransformerOptions options_;
  torch::Tensor pos_;                  // (max_positions, d); undefined with rope
  std::vector<double> rope_inv_freq_;  // rope_inv_freq(d / heads); empty without rope
  std::vector<Block> blocks_;
  torch::nn::LayerNorm ln_f_{nullptr};
};
TORCH_MODULE(PsmTransformer);

}  // namespace mixlab
