// member deltanet — DeltaNet's delta rule, "Linear Transformers Are Secretly Fast Weight
// Programmers" (Schlag et al. 2021).
//
// Kernel delta_rule: S_t = S_{t-1} + beta_t k_t (v_t - S_{t-1}^T k_t)^T,
//   k, q = L2-normalised silu projections (q also / sqrt(Dk)), beta_t = sigmoid(w_b x_t + b_b),
//   y_t = rms_norm(S_t^T q_t)
// Registers beta_proj (C -> H, with bias).
#include "affine_member.h"

namespace mixlab::detail::affine_member {
namespace {

class DeltaNet final : public AffineMemberRows<DeltaNet> {
 public:
  DeltaNet(torch::nn::Module& m, const AffineSizes& s) : AffineMemberRows(s) {
    aux_proj = affine_linear(m, "beta_proj", s.C, s.H, true);
  }

  AffinePrepared prepare(const AffineProjected& in) override {
    AffinePrepared p;
    delta_rule_features(in, p);
    p.v = in.v;
    p.beta = per_head(torch::sigmoid(aux_proj->forward(in.x)));
    return p;
  }
  torch::Tensor finish(const AffinePrepared&, const torch::Tensor& y) override { return rms_norm(y); }

  template <typename T>
  void prepare_head_t(AffineRowHead<T>& r) {
    delta_rule_features_head(r, sizes.dk);
    r.beta = row::sigmoid(r.aux_row[r.h]);
  }
  template <typename T>
  void finish_head_t(AffineRowHead<T>& r) {
    rms_norm_head(r, sizes.dv);
  }
};

std::unique_ptr<AffineMemberImpl> build(torch::nn::Module& m, const AffineSizes& s) {
  return std::make_unique<DeltaNet>(m, s);
}

}  // namespace

const AffineMemberDef kAffineMemberDeltaNet{"deltanet", __FILE__, 0, &build};

}  // namespace mixlab::detail::affine_member
