// mixlab/brl/brl_mixer.h — BRL-Attention (seed 001, Alg. 1, eqs. 7-12, App. B.2): sliding-window
// attention plus m evolving compressed tokens that carry information beyond the window.
//
//   F_gen   local attention over W past tokens: the `local:W` mixer of the attention area, reused.
//   F_comp  differential cross-attention, the compressed tokens query the history x̄ (eq. 11-12):
//             (S1 − γ S2) h_V,  S_i = σ(h_Q h_Ki^T / (m √d_ct)),  γ = exp(γQ γK1) − exp(γQ γK2)
//           per head (γQ, γK1, γK2 ~ N(0, 0.1)), then a group norm per head (Alg. 1 F_comp l.7).
//   evolve  ct' = (1−β) LN(F_comp(ct, x̄)) + β f^M(ct)       (Alg. 1 F_BRL l.7; eq. 7's outer relu
//           is not in Alg. 1 and not applied here)
//   F_prop  the tokens query ct': λ_h σ(z_Q z_K^T / √D) z_V per head (eq. 9, λ learnable per head)
//   y       F_gen(x) + relu(LN(F_prop(x, ct')))           (Alg. 1 F_BRL l.8-9)
// The compressed tokens are a memory stream (mixlab/mixer/memory_mixer.h): `delta` = ct'; the
// backbone adds it to the stream and applies the stream's own LN + FFN (Alg. 1 brl_block).
//
// Block-causal training (App. B.2, Fig. 11). The sequence is cut into blocks of N tokens
// (`block=`, default W). Block k uses compressed tokens compressed from its history only: the
// n_hist = `hist=` tokens before it (a multiple of N, default N: block k−1; fewer at the start),
// Alg. 1's x_hist of n_hist tokens. Block 0 has no history and uses the evolved incoming memory
// without F_comp (Alg. 1 F_BRL l.4). So one layer lets a token read the W tokens before it and
// the hist tokens before its block, nothing earlier; a stack of L layers reaches about L times
// as far. The analysis' path figure (cost_figures) says which pairs one layer reaches. With the default
// hist at w = 8, MAD's compression (answers 31 tokens back, two layers) is out of reach
// (docs/RESULTS.md). Choice: the history is read per layer — each layer compresses its *own
// input* over its history — so one parallel pass trains every block (Alg. 1's literal segment
// recurrence reads the last layer's output of the previous segment and is sequential; not
// offered). The memory therefore has one entry per block: (B,K,M,C), K = ceil(T/N).
//
// Cost: forward O(T·(W + m + m·hist/N)·C) time and memory, never a T×T tensor (scores are
// (T,W+1), (m,hist) per block and (N,m) per block). Decode: O((W + m)·C) per token plus F_comp
// once per block boundary (O(m·hist·C) per block = amortised O(m·hist/N·C) per token). Cache:
// the local window (2·W·C), the last hist inputs (hist·C) and the propagation keys/values of
// the m compressed tokens (2·m·C) per layer: constant in the context length. Without autograd, decode runs on raw rows
// (src/brl/brl_step_rows.cpp: F_prop per token, F_comp + evolution + keys/values per boundary;
// F_gen is the local mixer's own step), equal to the ATen ops to float rounding.
//
// Not supported: d_ct ≠ d (d_ct = d, as the seed's defaults), relative bias b_rel, the φ_spiky
// feature map (f^φ is a linear map), the sequential segment recurrence, decode-state save/restore.
#pragma once

#include <string>

#include "mixlab/attention/attention.h"
#include "mixlab/mixer/memory_mixer.h"

namespace mixlab {

/// σ_attn of eqs. 9 and 12.
enum class BrlAttn { kSoftmax, kLaplace, kRelu2 };

struct BrlOptions {
  int64_t window = 8;   // W, F_gen's window (past tokens)
  int64_t slots = 8;    // m, compressed tokens
  int64_t block = 0;    // N, block length (how often the compressed tokens are recomputed); 0 = W
  int64_t hist = 0;     // n_hist, history length in tokens, a multiple of N; 0 = N (one block)
  double beta = 0.5;    // β of the evolution, in [0, 1]
  double lambda = 0.5;  // initial λ per head
  BrlAttn attn = BrlAttn::kSoftmax;
  bool diff = true;  // differential F_comp; false = plain cross-attention (γ = 0, no K2)
};

/// Parses the arguments of `brl:w=W:m=M[:block=N][:hist=H][:beta=B][:lambda=L][:attn=softmax|laplace|relu2][:diff=0|1]`
/// (`args` is the part after "brl:"); errors name `spec` and the key.
BrlOptions brl_options_parse(const std::string& spec, const std::string& args);

/// Decode state: the local window's KV cache, the inputs of the current block, and the
/// propagation keys/values of the current compressed tokens.
class BrlState : public MixerState {
 public:
  int64_t position() const override { return pos; }
  int64_t bytes() const override;
  int64_t cached_positions() const override { return local->cached_positions(); }
  int64_t batch() const override { return block_inputs.size(0); }
  void io(StateArchive& ar) override;

  std::unique_ptr<MixerState> local;  // F_gen's KV cache
  torch::Tensor block_inputs;         // (B,hist,C): the last hist inputs, a ring, slot t mod hist
  torch::Tensor prop_k, prop_v;       // (B,H,M,D): F_prop keys/values of the current ct'
  int64_t pos = 0;
};

/// The parameters a BrlMixer with these options holds at `dims`, counted without allocating; the
/// constructor checks it against the mixer parameter budget (mixlab/mixer/parameter_budget.h).
double brl_parameter_count(const MixerDims& dims, const BrlOptions& options);

class BrlMixer : public MemoryMixer {
 public:
  /// Throws mixlab::Error for sizes out of range or over the mixer parameter budget.
  BrlMixer(const MixerDims& dims, const BrlOptions& options);

  MemoryDims memory_dims() const override { return {opt_.slots, dims_.d_model}; }
  torch::Tensor memory_init(int64_t batch, int64_t T) override;
  torch::Tensor memory_init_step(int64_t batch) override;
  MemoryOutput forward_memory(const torch::Tensor& x, const torch::Tensor& memory) override;
  MemoryOutput step_memory(MixerState& state, const torch::Tensor& x_t, const torch::Tensor& memory) override;
  std::unique_ptr<MixerState> init_state(int64_t batch) override;
  std::string spec() const override;
  std::string cost_class() const override { return "O(k)"; }
  /// Counted from the definition per layer (src/brl/brl_cost.cpp).
  MixerCostFigures cost_figures(int64_t T) const override;

  const BrlOptions& options() const { return opt_; }
  int64_t block() const { return opt_.block; }
  /// Number of blocks (memory segments) for T tokens.
  int64_t blocks_for(int64_t T) const { return (T + opt_.block - 1) / opt_.block; }
  /// γ per head (H), 0 when diff is off.
  torch::Tensor gamma() const;
  /// σ_attn applied to scores (...,keys) along the last dim.
  torch::Tensor attn_weights(const torch::Tensor& scores) const;
  /// Decode on raw rows (src/brl/brl_step_rows.cpp; otherwise step takes the ATen ops, its
  /// tested reference). Per token: whether step computes F_prop, the sum with F_gen (the local
  /// mixer's own step) and the inputs ring's write on raw rows: no autograd, x_t (B,C) (strided
  /// is fine: a contiguous copy is taken), the state's block inputs and F_prop keys/values
  /// contiguous CPU tensors of the layer's float or double dtype. Ask it after the step's block
  /// boundary (the keys/values are set there).
  bool decodes_on_rows(const torch::Tensor& x_t, const BrlState& state) const;
  /// At a block boundary: whether step computes F_comp, the evolution and F_prop's keys/values on
  /// raw rows: no autograd, memory (B,M,C) of the layer's dtype (strided is fine), the inputs
  /// ring and every parameter they read contiguous CPU tensors of that dtype.
  bool boundary_on_rows(const torch::Tensor& memory, const BrlState& state) const;

  // The parts, on any leading dims "...": shared by forward and step (the dense reference in
  // brl_reference.h recomputes them independently).
  /// ct (...,M,C), history (...,L,C) (any length L) -> F_comp (...,M,C), group-normed.
  torch::Tensor compress(const torch::Tensor& ct, const torch::Tensor& history);
  /// ct (...,M,C), ct_bar (...,M,C) -> ct' (...,M,C).
  torch::Tensor evolve(const torch::Tensor& ct, const torch::Tensor& ct_bar);
  /// ct' (...,M,C) -> F_prop keys, values (...,H,M,D).
  std::pair<torch::Tensor, torch::Tensor> prop_keys_values(const torch::Tensor& ct_out);
  /// x (...,T,C), keys/values (...,H,M,D) -> relu(LN(F_prop)) (...,T,C).
  torch::Tensor propagate(const torch::Tensor& x, const torch::Tensor& k, const torch::Tensor& v);

 private:
  /// comp_norm_ on rows (...,C): a layer norm over each head's D channels, then the group norm's
  /// affine map (the same groups, eps and values as GroupNorm(H, C)).
  torch::Tensor comp_normed(const torch::Tensor& rows) const;
  /// forward_memory for softmax σ on blocks xb (B,K,N,C): F_comp and F_prop through
  /// block_attention (mixlab/attention/block_attention.h) on unsplit heads, the layer input's four maps
  /// (K1, K2, V, F_prop's Q) as one product. Returns {relu(LN(F_prop)) (B,K,N,C), ct' (B,K,M,C)}.
  MemoryOutput forward_softmax(const torch::Tensor& xb, const torch::Tensor& memory);
  /// Raw-row boundary: ct' (B,M,C) from memory (contiguous); sets state.prop_k/prop_v.
  torch::Tensor boundary_rows(const torch::Tensor& memory, BrlState& state);
  template <typename T>
  void boundary_rows_typed(const torch::Tensor& memory, BrlState& state, torch::Tensor& delta);
  /// Raw-row token: y = y_gen + F_prop(x) (x, y_gen contiguous (B,C)); x into the inputs ring.
  torch::Tensor token_rows(const torch::Tensor& x, const torch::Tensor& y_gen, BrlState& state, int64_t slot);
  template <typename T>
  void token_rows_typed(const torch::Tensor& x, const torch::Tensor& y_gen, BrlState& state, int64_t slot,
                        torch::Tensor& y);

  MixerDims dims_;
  BrlOptions opt_;
  int64_t head_dim_;
  std::shared_ptr<AttentionMixer> local_;
  torch::Tensor ct0_;  // (M,C) x_ct^(0) ~ N(0,1)
  torch::nn::Linear comp_q_{nullptr}, comp_k1_{nullptr}, comp_k2_{nullptr}, comp_v_{nullptr};
  torch::Tensor gamma_q_, gamma_k1_, gamma_k2_;  // (H) each, diff only
  torch::nn::GroupNorm comp_norm_{nullptr};
  torch::nn::LayerNorm evolve_norm_{nullptr};
  torch::nn::Linear evolve_m_{nullptr};  // f^M
  torch::nn::Linear prop_q_{nullptr}, prop_k_{nullptr}, prop_v_{nullptr};
  torch::Tensor lambda_;  // (H)
  torch::nn::LayerNorm prop_norm_{nullptr};
};

/// The registry's factory: spec "brl[:args]".
MixerPtr brl_mixer_create(const std::string& spec, const std::string& args, const MixerDims& dims);

}  // namespace mixlab
