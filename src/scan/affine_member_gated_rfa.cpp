// member gated_rfa — gated random-feature attention, "Random Feature Attention" (Peng et al. 2021).
//
// Kernel diag_decay with a scalar gate per head, g_t = sigmoid(w_g x_t + b_g):
//   S_t = g_t S_{t-1} + (1 - g_t) phi(k_t) v_t^T,
//   phi(x) = exp(W x/|x| - 1/2) / sqrt(Dk)   (positive random features on unit-norm q and k; W
//   fixed N(0,1) per head),
// normalised like linear_attn: y_t = (S_t^T phi(q_t)) / (z_t^T phi(q_t) + 1e-6), z by a ones
// column of v. Registers gate_proj (C -> H, with bias: the gate g, kept as the decay projection)
// and the buffer random_features (H,Dk,Dk), one torch::randn draw.
#include "affine_member.h"

namespace mixlab::detail::affine_member {
namespace {

class GatedRfa final : public AffineMemberRows<GatedRfa> {
 public:
  GatedRfa(torch::nn::Module& m, const AffineSizes& s) : AffineMemberRows(s) {
    decay_proj = affine_linear(m, "gate_proj", s.C, s.H, true);
    rfa_w_ = m.register_buffer("random_features", torch::randn({s.H, s.dk, s.dk}));
  }

  AffinePrepared prepare(const AffineProjected& in) override {
    const int64_t dk = sizes.dk;
    AffinePrepared p;
    auto w = rfa_w_.to(in.x.scalar_type()).unsqueeze(0);  // (1,H,m,Dk)
    auto phi = [&](const torch::Tensor& t) {
      return torch::exp(torch::matmul(l2_normalise(t), w.transpose(-1, -2)) - 0.5) * (1.0 / std::sqrt(double(dk)));
    };
    auto logit = per_head(decay_proj->forward(in.x));  // (B,H,T)
    p.q = phi(in.q);
    p.k = phi(in.k) * torch::sigmoid(-logit).unsqueeze(-1);  // (1 - g_t) phi(k_t)
    p.v = with_ones_column(in.v);
    p.g = expand_keys(torch::log_sigmoid(logit), dk);
    return p;
  }
  torch::Tensor finish(const AffinePrepared&, const torch::Tensor& y) override { return normalised(y, sizes.dv); }

  template <typename T>
  void prepare_head_t(AffineRowHead<T>& r) {
    // phi(t) = exp(W_h t/|t| - 1/2) / sqrt(Dk); k' = phi(k) (1 - g), decay g = sigmoid(logit).
    const int64_t Dk = sizes.dk;
    const T logit = r.decay_row[r.h];
    const T* Wf = rfa_w_.data_ptr<T>() + r.h * Dk * Dk;
    const T inv_sqrt = static_cast<T>(1.0 / std::sqrt(double(Dk)));
    auto phi = [&](T* t, T post) {
      l2_normalise(t, Dk);
      row::linear<T>(Wf, nullptr, t, r.scratch, Dk, Dk);
      for (int64_t i = 0; i < Dk; ++i) t[i] = std::exp(r.scratch[i] - T(0.5)) * inv_sqrt * post;
    };
    phi(r.q, T(1));
    phi(r.k, row::sigmoid(-logit));
    const T g = std::exp(row::log_sigmoid(logit));
    for (int64_t i = 0; i < Dk; ++i) r.decay[i] = g;
  }
  template <typename T>
  void finish_head_t(AffineRowHead<T>& r) {
    normalised_head(r, sizes.dv);
  }

 private:
  torch::Tensor rfa_w_;  // (H,Dk,Dk)
};

std::unique_ptr<AffineMemberImpl> build(torch::nn::Module& m, const AffineSizes& s) {
  return std::make_unique<GatedRfa>(m, s);
}

}  // namespace

const AffineMemberDef kAffineMemberGatedRfa{"gated_rfa", __FILE__, 0, &build};

}  // namespace mixlab::detail::affine_member
