// mixlab/scan/affine_mixer.h — the affine-recurrence layers of seed 004 Table 1 as mixers:
// `linear_attn`, `retnet`, `gla`, `mamba`, `mlstm`, `gated_rfa`, `deltanet`, `gated_deltanet`
// (spec "<name>[:<chunk>]", chunk of the training form, default 64).
//
// Each member is a parametrisation of one of the two kernels of mixlab/scan/affine.h; per head
// (H heads, D = C/H) the state is S (Dk,Dv) and o_t = S_t^T q_t.
//
// One block per member, so that grepping a member's name (spec name or paper name: GLA, Mamba,
// RetNet, DeltaNet, mLSTM, ...) lands here with its formulas, its file, its row and its tests.
// Every member has one file, src/scan/affine_member_<spec name>.cpp, which holds all of its code:
// the parameters it registers (after the shared q/k/v/o projections), its prepare() and finish()
// on ATen tensors and its per-head hooks of the raw-row decode step (float and double), behind
// the interface of src/scan/affine_member.h. Its row `AffineMember::k<Name>` in kMembers
// (src/scan/affine_mixer.cpp: kernel, normaliser, and `impl`, the file's AffineMemberDef) is how
// AffineMixer finds that file; AffineMixer itself has no per-member code. Its tests are in
// tests/scan/affine_mixer_test.cpp, the suite `All/AffineMembers.*/<spec name>` (chunked =
// recurrent = scan form = reference forward and backward, step = forward row by row, prefill in
// pieces, gradcheck, spec), on top of the kernel tests of tests/scan/affine_kernel_test.cpp
// (DiagDecay.* or DeltaRule.*); tests/scan/affine_member_test.cpp checks the table against the
// files and each file's parameter names.
//
// member linear_attn — linear attention (Katharopoulos 2020); kernel diag_decay, row kLinearAttn
//   q,k = elu+1 feature map, g = 0, normaliser z_t = sum k (an extra ones column of v):
//   y = (S^T q) / (z^T q + 1e-6)
// member retnet — RetNet, retention (Sun 2023); kernel diag_decay (scalar gate), row kRetNet
//   g = log gamma_h, gamma_h = 1 - 2^(-5 - h) fixed per head (the paper's and fla's; before
//   2026-11-27: 1 - 2^(-5 - 4h/(H-1)), saved weights keep theirs); per-head RMS norm, swish
//   output gate; no xPos rotation
// member gla — GLA, gated linear attention (Yang 2024); kernel diag_decay (per key), row kGla
//   g_t = logsigmoid(W2 W1 x_t) / 16 per key (rank-16 gate), RMS norm, swish gate
// member mamba — Mamba / S6 selective SSM, Mamba-2 style; kernel diag_decay (per key), row kMamba
//   Dk = N = 16 state per channel, Dv = D channels of the head: q = C_t, k = Δ_t B_t,
//   v = u_t = silu(W_in x_t), g = Δ_t a (a = -exp(A_log) per (head, n)); y = o + D u, gated by
//   silu(z). Δ_t is ONE softplus per head (Mamba-2 style), which keeps the decay diagonal on the
//   key (state) axis; S6's per-channel Δ would make the decay depend on (n, channel) and is not
//   supported here (the `ssm` mixer, mixlab/scan/ssm.h, has it). No depthwise convolution.
// member mlstm — mLSTM, xLSTM's matrix memory (Beck 2024); kernel diag_decay (scalar), row kMlstm
//   f_t = sigmoid(.) forget gate (log f = logsigmoid), input gate i_t = sigmoid(.) (the stabilised
//   form used here: a bounded input gate instead of exp(i~) with a running max m_t, so the state
//   stays a plain affine recurrence with no stabiliser state), normaliser n_t via a ones column of
//   v: h = (S^T q) / max(|n^T q|, 1), times the sigmoid output gate
// member gated_rfa — gated random-feature attention (Peng 2021); kernel diag_decay, row kGatedRfa
//   positive random features phi(x) = exp(W x - 1/2)/sqrt(D) on unit-norm q, k (W fixed N(0,1), a
//   buffer), scalar gate g_t = sigmoid(.): S_t = g_t S_{t-1} + (1 - g_t) phi(k_t) v_t^T,
//   normalised like linear_attn
// member deltanet — DeltaNet, delta rule (Schlag 2021); kernel delta_rule, row kDeltaNet
//   k, q = L2-normalised silu projections, beta_t = sigmoid(.), RMS norm
// member gated_deltanet — gated DeltaNet (Yang 2025); kernel delta_rule, row kGatedDeltaNet
//   deltanet + alpha_t = exp(-exp(A_log_h) softplus(W x_t + b)), swish output gate
//
// Training forward uses the chunked form; set_form switches to the recurrent, scan or reference
// form (tests, benchmarks). Decode: O(H Dk Dv) per token, state (B,H,Dk,Dv') float32 for a float
// model (Dv' = Dv + 1 with a normaliser column), no growth with n. Without autograd, on
// contiguous float/double CPU tensors, step runs on raw rows (src/scan/affine_mixer_step_rows.cpp:
// one stacked input projection, the member's formulas per head from its file's row hooks, the
// state updated in place);
// otherwise it runs the same formulas as ATen ops (the tested reference of the raw step).
// Not supported: CUDA, multi-layer blocks (the mixer is one layer), per-channel Δ for mamba.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "mixlab/mixer/mixer.h"
#include "mixlab/scan/affine.h"

namespace mixlab {

namespace detail::affine_member {  // src/scan/affine_member.h
struct AffineMemberDef;
class AffineMemberImpl;
struct AffinePrepared;
}  // namespace detail::affine_member

enum class AffineMember { kLinearAttn, kRetNet, kGla, kMamba, kMlstm, kGatedRfa, kDeltaNet, kGatedDeltaNet, kCount };
enum class AffineKernel { kDiagDecay, kDeltaRule };
/// Which evaluation of the recurrence forward() uses.
enum class AffineForm { kChunked, kRecurrent, kScan, kReference };

struct AffineMemberInfo {
  AffineMember member;
  const char* name;  // spec family name
  AffineKernel kernel;
  bool normaliser;                                     // v carries an extra ones column (Dv' = Dv + 1)
  const detail::affine_member::AffineMemberDef* impl;  // the member's file, src/scan/affine_member_<name>.cpp
  // No description here: `mixlab mixers` prints the registry's (src/registry/registry.cpp), the
  // only one a user sees; a second copy here had drifted ("O(D^2)" against "O(1) per token").
};

/// The single table of members, in enum order.
const std::array<AffineMemberInfo, static_cast<size_t>(AffineMember::kCount)>& affine_members();
const AffineMemberInfo& affine_member_info(AffineMember member);

/// Decode state: S (B,H,Dk,Dv').
class AffineState : public MixerState {
 public:
  explicit AffineState(torch::Tensor s) : s_(std::move(s)) {}
  int64_t position() const override { return pos_; }
  int64_t bytes() const override { return tensor_bytes(s_); }
  int64_t batch() const override { return s_.size(0); }
  void io(StateArchive& ar) override {
    ar.scalar("position", pos_);
    ar.tensor("S", s_);
  }
  torch::Tensor s_;
  int64_t pos_ = 0;
};

class AffineMixer : public Mixer {
 public:
  /// GLA's log decay is logsigmoid(.) / 16 (keeps the gates near 1 at init).
  static constexpr double kGlaDecayNormaliser = 16.0;
  /// chunk: the chunked form's chunk size (a power of two for the diagonal kernel).
  AffineMixer(AffineMember member, const MixerDims& dims, int64_t chunk = 64);

  torch::Tensor forward(const torch::Tensor& x) override;
  /// Forward from a given state (B,H,Dk,Dv') (undefined = zeros); writes the final state.
  /// Prefill in pieces: feed each piece the previous piece's final state.
  torch::Tensor forward_from(const torch::Tensor& x, const torch::Tensor& initial_state, torch::Tensor* final_state);
  std::unique_ptr<MixerState> init_state(int64_t batch) override;
  torch::Tensor step(MixerState& state, const torch::Tensor& x_t) override;
  /// Chunked prefill: forward_from the state's S (the chunked kernel), then S = its final state.
  torch::Tensor prefill(MixerState& state, const torch::Tensor& x) override;
  std::string spec() const override;
  std::string cost_class() const override { return "O(1)"; }
  /// S_t depends on S_{t-1} and x_t only: the graph of `order:1`, its one cached position the
  /// matrix state.
  MixerCostFigures cost_figures(int64_t T) const override;

  void set_form(AffineForm form) { form_ = form; }
  AffineForm form() const { return form_; }
  AffineMember member() const { return member_; }
  /// State sizes: Dk and Dv' per head.
  int64_t state_dk() const { return dk_; }
  int64_t state_dv() const { return dv_ + (info().normaliser ? 1 : 0); }

 private:
  const AffineMemberInfo& info() const { return affine_member_info(member_); }
  /// Whether step may run on raw rows: no autograd, and x_t, the state, every parameter and
  /// buffer contiguous CPU tensors of one float or double dtype.
  bool rows_ready(const torch::Tensor& x_t, const torch::Tensor& s);
  /// The decode step on raw rows (src/scan/affine_mixer_step_rows.cpp): the same formulas as
  /// prepare(), the kernel's step and finish(), with the state updated in place.
  torch::Tensor step_rows(AffineState& state, const torch::Tensor& x_t);
  template <typename T>
  void step_rows_typed(AffineState& state, const torch::Tensor& x_t, torch::Tensor& out);
  /// Packs [q; k; v; gate; decay; aux] weights and biases into rows_w_ / rows_b_ (once per
  /// weight version).
  void rows_pack();
  /// The kernel's inputs: the shared projections, then the member's prepare().
  /// fused: decode's single matmul over [q; k; v; gate] (fused_projection), or undefined for
  /// one Linear per projection (training, prefill).
  detail::affine_member::AffinePrepared prepare(const torch::Tensor& x, const torch::Tensor& fused = {});
  /// x (B,T,C) -> [q | k | v | gate] (B,T,·) through one matmul with the concatenated weights,
  /// rebuilt when a weight changed (version counter). Decode only (no autograd).
  torch::Tensor fused_projection(const torch::Tensor& x);
  /// o (B,H,T,Dv') -> (B,T,C): the member's finish(), then o_proj.
  torch::Tensor finish(const detail::affine_member::AffinePrepared& p, const torch::Tensor& o);
  AffineResult run(const detail::affine_member::AffinePrepared& p, const torch::Tensor& initial_state);

  AffineMember member_;
  MixerDims dims_;
  int64_t chunk_;
  int64_t heads_, dk_, dv_;
  AffineForm form_ = AffineForm::kChunked;
  torch::nn::Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, o_proj_{nullptr};
  // The member's parameters (registered on this module) and code, from its file (info().impl).
  std::shared_ptr<detail::affine_member::AffineMemberImpl> impl_;
  torch::Tensor fused_w_;                // (Nq+Nk+Nv+Ngate, C), decode cache of the weights
  std::vector<int64_t> fused_versions_;  // the weights' version counters it was built from
  torch::Tensor rows_w_, rows_b_;        // (N, C), (N): step_rows' stacked input projections
  std::vector<int64_t> rows_versions_;   // the weights' and biases' version counters they came from
  int64_t rows_gate_ = -1, rows_decay_ = -1, rows_aux_ = -1;  // offsets in rows_w_'s N, -1 = none
};

/// Factory for the registry: `name` one of the table's names, `args` "" or a chunk size.
MixerPtr affine_mixer_create(const std::string& name, const std::string& spec, const std::string& args,
                             const MixerDims& dims);

}  // namespace mixlab
