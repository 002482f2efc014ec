// member gated_deltanet — gated DeltaNet, "Gated Delta Networks: Improving Mamba2 with Delta Rule"
// (Yang et al. 2025).
//
// Kernel delta_rule with a decay: S_t = alpha_t S_{t-1} + beta_t k_t (v_t - alpha_t S_{t-1}^T k_t)^T,
//   deltanet's q, k, beta, and alpha_t = exp(-exp(A_log_h) softplus(w_a x_t + dt_bias_h)),
//   y_t = rms_norm(S_t^T q_t) * silu(W_g x_t)
// Registers gate_proj (C -> H*Dv, no bias), alpha_proj (C -> H, no bias), beta_proj (C -> H, with
// bias), then the parameters A_log (H) = log U(0, 16) (one uniform_ draw) and dt_bias (H) with
// softplus(dt_bias) log-uniform in [1e-3, 1e-1], fla's GatedDeltaNet initialisation. Until
// 2026-11-29 A was U(1, 16) and dt_bias 0, so every head started near Δ = ln 2 and kept about
// half of its state per token: at MAD's model gated DeltaNet then stayed at the uniform loss on
// induction and compression for 4000 steps, where DeltaNet solved induction in 500
// (docs/log/results-2026-11.md). Checkpoints keep their saved A_log and dt_bias.
#include "affine_member.h"

namespace mixlab::detail::affine_member {
namespace {

class GatedDeltaNet final : public AffineMemberRows<GatedDeltaNet> {
 public:
  GatedDeltaNet(torch::nn::Module& m, const AffineSizes& s) : AffineMemberRows(s) {
    const int64_t H = s.H;
    gate_proj = affine_linear(m, "gate_proj", s.C, H * s.dv, false);
    decay_proj = affine_linear(m, "alpha_proj", s.C, H, false);
    aux_proj = affine_linear(m, "beta_proj", s.C, H, true);
    a_log_ = m.register_parameter("A_log", torch::log(torch::empty({H}).uniform_(0, 16)));
    dt_bias_ = m.register_parameter("dt_bias", mamba_dt_bias_init(H));
  }

  AffinePrepared prepare(const AffineProjected& in) override {
    AffinePrepared p;
    delta_rule_features(in, p);
    p.v = in.v;
    p.beta = per_head(torch::sigmoid(aux_proj->forward(in.x)));
    p.log_alpha = per_head(-torch::exp(a_log_) * torch::softplus(decay_proj->forward(in.x) + dt_bias_));
    p.gate = torch::silu(in.gate()).reshape({in.B, in.T, sizes.H, sizes.dv});
    return p;
  }
  torch::Tensor finish(const AffinePrepared& p, const torch::Tensor& y) override { return rms_norm(y) * p.gate; }

  template <typename T>
  void prepare_head_t(AffineRowHead<T>& r) {
    delta_rule_features_head(r, sizes.dk);
    r.beta = row::sigmoid(r.aux_row[r.h]);
    r.alpha =
        std::exp(-std::exp(a_log_.data_ptr<T>()[r.h]) * row::softplus(r.decay_row[r.h] + dt_bias_.data_ptr<T>()[r.h]));
  }
  template <typename T>
  void finish_head_t(AffineRowHead<T>& r) {
    rms_norm_head(r, sizes.dv);
  }

 private:
  torch::Tensor a_log_, dt_bias_;  // (H), (H)
};

std::unique_ptr<AffineMemberImpl> build(torch::nn::Module& m, const AffineSizes& s) {
  return std::make_unique<GatedDeltaNet>(m, s);
}

}  // namespace

const AffineMemberDef kAffineMemberGatedDeltaNet{"gated_deltanet", __FILE__, 0, &build};

}  // namespace mixlab::detail::affine_member
