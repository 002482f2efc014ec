// member gla — GLA, "Gated Linear Attention Transformers with Hardware-Efficient Training"
// (Yang et al. 2024).
//
// Kernel diag_decay with a data-dependent decay per key: S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T,
//   g_t = logsigmoid(W2 W1 x_t + b2) / 16   (a rank-16 gate; / 16 keeps the gates near 1 at init)
//   y_t = rms_norm(S_t^T q_t) * silu(W_g x_t),   q scaled by 1/sqrt(Dk)
// Registers gate_proj (C -> H*Dv, no bias), decay_proj1 (C -> 16, no bias) and decay_proj2
// (16 -> H*Dk, with bias).
#include "affine_member.h"

namespace mixlab::detail::affine_member {
namespace {

constexpr int64_t kGlaGateRank = 16;

class Gla final : public AffineMemberRows<Gla> {
 public:
  Gla(torch::nn::Module& m, const AffineSizes& s) : AffineMemberRows(s) {
    gate_proj = affine_linear(m, "gate_proj", s.C, s.H * s.dv, false);
    decay_proj = affine_linear(m, "decay_proj1", s.C, kGlaGateRank, false);
    decay_proj2_ = affine_linear(m, "decay_proj2", kGlaGateRank, s.H * s.dk, true);
  }

  AffinePrepared prepare(const AffineProjected& in) override {
    const int64_t H = sizes.H;
    AffinePrepared p;
    p.q = in.q * in.scale;
    p.k = in.k;
    p.v = in.v;
    p.g = heads_first(torch::log_sigmoid(decay_proj2_->forward(decay_proj->forward(in.x))), H) /
          AffineMixer::kGlaDecayNormaliser;
    p.gate = torch::silu(in.gate()).reshape({in.B, in.T, H, sizes.dv});
    return p;
  }
  torch::Tensor finish(const AffinePrepared& p, const torch::Tensor& y) override { return rms_norm(y) * p.gate; }

  /// Every key's log decay before logsigmoid: W2 (W1 x) + b2, with W1 x the stacked decay row.
  template <typename T>
  void begin_row_t(AffineRowHead<T>& r) {
    row::linear<T>(decay_proj2_->weight.data_ptr<T>(), decay_proj2_->bias.data_ptr<T>(), r.decay_row, r.row_scratch,
                   sizes.H * sizes.dk, decay_proj2_->weight.size(1));
  }
  template <typename T>
  void prepare_head_t(AffineRowHead<T>& r) {
    const int64_t Dk = sizes.dk;
    for (int64_t i = 0; i < Dk; ++i) {
      r.q[i] *= r.scale;
      r.decay[i] =
          std::exp(row::log_sigmoid(r.row_scratch[r.h * Dk + i]) / static_cast<T>(AffineMixer::kGlaDecayNormaliser));
    }
  }
  template <typename T>
  void finish_head_t(AffineRowHead<T>& r) {
    rms_norm_head(r, sizes.dv);
  }

 private:
  torch::nn::Linear decay_proj2_{nullptr};  // rank -> H*Dk, after decay_proj (C -> rank)
};

std::unique_ptr<AffineMemberImpl> build(torch::nn::Module& m, const AffineSizes& s) {
  return std::make_unique<Gla>(m, s);
}

}  // namespace

const AffineMemberDef kAffineMemberGla{"gla", __FILE__, 0, &build};

}  // namespace mixlab::detail::affine_member
