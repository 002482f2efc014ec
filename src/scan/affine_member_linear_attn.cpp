// member linear_attn — linear attention, "Transformers are RNNs" (Katharopoulos et al. 2020).
//
// Kernel diag_decay with no decay (g = 0): S_t = S_{t-1} + phi(k_t) v_t^T, phi(x) = elu(x) + 1 on
// q and k; normaliser z_t = sum_s phi(k_s) as an extra ones column of v (Dv' = Dv + 1):
//   y_t = (S_t^T phi(q_t)) / (z_t^T phi(q_t) + 1e-6)
// Registers nothing beyond the shared q_proj, k_proj, v_proj, o_proj.
#include "affine_member.h"

namespace mixlab::detail::affine_member {
namespace {

class LinearAttn final : public AffineMemberRows<LinearAttn> {
 public:
  using AffineMemberRows::AffineMemberRows;

  AffinePrepared prepare(const AffineProjected& in) override {
    const int64_t H = sizes.H;
    AffinePrepared p;
    p.q = torch::elu(in.q) + 1;
    p.k = torch::elu(in.k) + 1;
    p.v = with_ones_column(in.v);
    p.g = torch::zeros({in.B, H, in.T, 1}, in.x.options()).expand({in.B, H, in.T, sizes.dk});
    return p;
  }
  torch::Tensor finish(const AffinePrepared&, const torch::Tensor& y) override { return normalised(y, sizes.dv); }

  template <typename T>
  void prepare_head_t(AffineRowHead<T>& r) {
    for (int64_t i = 0; i < sizes.dk; ++i) {
      r.q[i] = elu_plus_one(r.q[i]);
      r.k[i] = elu_plus_one(r.k[i]);
      r.decay[i] = T(1);
    }
  }
  template <typename T>
  void finish_head_t(AffineRowHead<T>& r) {
    normalised_head(r, sizes.dv);
  }
};

std::unique_ptr<AffineMemberImpl> build(torch::nn::Module&, const AffineSizes& s) {
  return std::make_unique<LinearAttn>(s);
}

}  // namespace

const AffineMemberDef kAffineMemberLinearAttn{"linear_attn", __FILE__, 0, &build};

}  // namespace mixlab::detail::affine_member
