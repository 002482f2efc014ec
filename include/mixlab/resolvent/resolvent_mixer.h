// mixlab/resolvent/resolvent_mixer.h — the generalized linear token mixing layer (seed 000).
//
//   u (B,T,C) → heads (H, D = C/H) → alpha = softmax over P(i) ∪ {i} of <q^A_i, k^A_j>/sqrt(D)
//                                     beta  = softmax over P(i)       of <q^B_i, k^B_j>/sqrt(D)
//                                     g     = sigmoid(W_g u + b_g) ∈ [0,1]^D per head (B.2)
//   y = (I − diag(g) B)⁻¹ diag(1 − g) A v, per channel (mixlab/resolvent/resolvent.h) → out proj.
// RoPE (mixlab/core/rope.h) on q^A, k^A, q^B, k^B. Row-normalised Ã, B̃ with A = (1 − g)Ã and
// B = gB̃ give (A + B)1 = 1 for every row i ≥ 1 (row 0 has no past: its A row sums to 1 − g_0).
// Non-recurrent patterns (causal, band:W) have B = 0 and no gate: plain (local) softmax
// attention.
//
// Weight sharing (options.share_weights, seed 000 B.3): A = B·D + D' with, per channel,
// D' = diag(1 − g) and D = diag((1 − g)·δ), δ_i = W_δ u_i + b_δ one scalar per head and position.
// Then z_i = g_i ⊙ Σ_j β̃_ij z_j + (1 − g_i)(1 + δ_i) x_i and y_i = z_i − (1 − g_i) δ_i x_i: one
// solve with a diagonal A, no A scores, and the decode cache holds only z and k^B.
//
// Initialisation: q/k/v/gate/out projections use torch's default Linear init (Kaiming uniform);
// the gate bias b_g is logit(gate_init) in every channel (default 0.5: the A path, the token's
// own attention, and the B path, the recurrence, start with equal weight), and the gate weight is
// scaled by 0.1 so the gate starts close to its bias. W_δ = 0, b_δ = 0 (δ = 0: A = diag(1 − g)).
// gate_init = kGateInitSpectrum draws b_g per channel as logit(exp(−Δ·a)), Δ log-uniform in
// [1e-3, 1e-1], a uniform in [1, 16] (Mamba-2's decay init: g ≈ 0.2..0.999, most channels above
// 0.9, so the A path starts about 10x weaker). It was the default until 2026-11-24: at lr 1e-3
// the dense recurrence then stayed on the MQAR plateau for 3000 steps and reached 71 % recall
// in 8000, against 99.6 % with 0.5 (docs/log/results-2026-11.md, "The gate's initial value").
//
// Spec (the registry's `resolvent:<pattern>[:gate=G]`): G is a number in (0, 1) or `spectrum`
// (`mamba2`, its name until 2026-11-27, is kept as an alias so old specs and checkpoints load:
// it is an initialisation borrowed from Mamba-2, not a Mamba layer; docs/MIXERS.md);
// resolvent_spec_parse splits it from the pattern spec (pattern specs never contain '=').
//
// Cost per token: O(|P(t)|·D) per head; decode cache: see ResolventState (the positions future
// rows read: O(log t) for pow2+cache, O(√t) for square+cache, all t for pow2/square/dense/causal).
// Decode state: ResolventState (mixlab/resolvent/resolvent.h) with extra channels k^A [, k^B].
// Not supported: D odd (RoPE pairs channels), softmax normalisation of the full T = (I−B)⁻¹A
// (B.2's alternative: overflows), GPU.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "mixlab/mixer/mixer.h"
#include "mixlab/pattern/pattern.h"
#include "mixlab/resolvent/resolvent.h"

namespace mixlab {

/// ResolventOptions::gate_init value that selects the decay spectrum of Mamba-2's init, one draw
/// per channel (spec `gate=spectrum`, alias `gate=mamba2`).
constexpr double kGateInitSpectrum = -1.0;

struct ResolventOptions {
  bool gate = true;            // input-dependent gate g (recurrent patterns only)
  double gate_init = 0.5;      // g at init in (0, 1), every channel; or kGateInitSpectrum
  bool share_weights = false;  // A = B·D + D' (B.3); recurrent patterns only
  bool rope = true;
  double rope_base = 10000.0;
};

/// Splits `args` ("dense", "band:64:gate=0.5", "pow2+cache:gate=spectrum") into the pattern spec
/// it returns and the key=value items it applies to `options` (key: gate). Throws mixlab::Error
/// naming `spec` for an unknown key or a value out of range.
std::string resolvent_spec_parse(const std::string& spec, const std::string& args, ResolventOptions& options);

/// What the layer computes before the solve, exposed for tests and analysis (shapes (B,H,T,·)).
struct ResolventCoeffs {
  // After RoPE; qa/ka undefined with share_weights, qb/kb for B = 0. They carry no gradient (the
  // fused pattern_attention returns them as plain results) unless computed under a
  // ComposedPatternAttentionGuard (mixlab/resolvent/pattern_attention.h).
  torch::Tensor qa, ka, qb, kb;
  torch::Tensor alpha;  // (B,H,T,W+1), or (B,H,T,1) = 1 + δ with share_weights
  torch::Tensor beta;   // (B,H,T,W) or (B,H,T,0)
  torch::Tensor gate;   // (B,H,T,D) or undefined
  torch::Tensor delta;  // (B,H,T,1) with share_weights
  torch::Tensor v;      // (B,H,T,D)
};

class ResolventMixer : public Mixer {
 public:
  /// pattern_spec: mixlab/pattern/pattern.h grammar (e.g. "pow2+cache"); dims.d_model must be a
  /// multiple of dims.n_heads with an even head dim. Throws mixlab::Error otherwise.
  ResolventMixer(const std::string& pattern_spec, const MixerDims& dims, ResolventOptions options = {});

  torch::Tensor forward(const torch::Tensor& x) override;
  /// Chunked prefill: x (B,T,C) continues `state` (rows state.position()..), and the state is
  /// advanced by T. Equals the matching rows of one long forward.
  torch::Tensor forward_chunk(const torch::Tensor& x, ResolventState& state);
  std::unique_ptr<MixerState> init_state(int64_t batch) override;
  /// Chunked prefill: forward_chunk (rows read the state's past, then append the chunk).
  torch::Tensor prefill(MixerState& state, const torch::Tensor& x) override;
  torch::Tensor step(MixerState& state, const torch::Tensor& x_t) override;
  std::string spec() const override { return "resolvent:" + pattern_.spec(); }
  std::string cost_class() const override { return pattern_.time_class(); }
  std::string pattern_spec() const override { return pattern_.spec(); }

  /// The coefficients for x (B,T,C) continuing `past` (or from position 0).
  ResolventCoeffs coefficients(const torch::Tensor& x, const ResolventState* past = nullptr);
  /// y (B,H,T,D) → (B,T,C) through the output projection.
  torch::Tensor output(const torch::Tensor& y_heads);
  const Pattern& pattern() const { return pattern_; }
  const ResolventOptions& options() const { return options_; }
  /// Whether step(state, x_t) runs on raw rows (src/resolvent/resolvent_step_rows.cpp) rather
  /// than ATen ops: no autograd; x_t (B,C) (strided is fine: a contiguous copy is taken), every
  /// parameter and the state's slot tensors CPU tensors of one float or double dtype, the latter
  /// contiguous; a state of this mixer's sizes and layout (any other takes the ATen step, whose
  /// checks name the problem). Tests and benchmarks ask it to know which path they measure.
  bool decodes_on_rows(const torch::Tensor& x_t, const ResolventState& state) const;

 private:
  bool gated() const { return pattern_.recurrent() && options_.gate; }
  bool shared() const { return pattern_.recurrent() && options_.share_weights; }
  int key_channel_a() const { return 0; }
  int key_channel_b() const { return shared() ? 0 : 1; }
  std::vector<torch::Tensor> keys_of(const ResolventCoeffs& c) const;
  void check_input(const char* fn, const torch::Tensor& x) const;
  /// What this mixer's decode state stores (init_state's layout).
  ResolventStateLayout state_layout() const;
  /// The decode step on raw rows (src/resolvent/resolvent_step_rows.cpp): the same formulas as
  /// the ATen step (projections, RoPE, scores, softmax, resolvent_step, output) without a
  /// dispatched op per piece; writes the new position into the state's slots in place.
  torch::Tensor step_rows(ResolventState& state, const torch::Tensor& x_t);
  template <typename T>
  void step_rows_typed(ResolventState& state, const torch::Tensor& x_t, torch::Tensor& out);

  Pattern pattern_;
  MixerDims dims_;
  ResolventOptions options_;
  int64_t heads_, head_dim_;
  int64_t n_proj_ = 0;  // blocks of C in in_proj: [q^A, k^A,] [q^B, k^B,] v [, gate]
  torch::nn::Linear in_proj_{nullptr}, out_proj_{nullptr}, delta_proj_{nullptr};
  std::vector<double> rope_inv_;  // step_rows: RoPE's inverse frequencies (D/2), as rope_apply's
};

}  // namespace mixlab
