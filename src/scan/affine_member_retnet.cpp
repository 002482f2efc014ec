// member retnet — RetNet's retention, "Retentive Network" (Sun et al. 2023).
//
// Kernel diag_decay with a fixed scalar decay per head: S_t = gamma_h S_{t-1} + k_t v_t^T,
// gamma_h = 1 - 2^(-5 - h), h = 0..H-1 (the paper's and fla's schedule: 1 - 1/32, 1 - 1/64, ...),
// q scaled by 1/sqrt(Dk);
//   y_t = rms_norm(S_t^T q_t) * silu(W_g x_t)
// No xPos rotation. Registers gate_proj (C -> H*Dv, no bias) and the buffer log_gamma (H,
// float: log gamma_h). Before 2026-11-27 the schedule was 1 - 2^(-5 - 4h/(H-1)) (the same two
// ends, 1 - 1/32 and 1 - 1/512, interpolated; equal to the paper's only at H = 5). log_gamma is a
// buffer, so a checkpoint or weight file saved before keeps its own decays when it loads.
#include "affine_member.h"

namespace mixlab::detail::affine_member {
namespace {

class RetNet final : public AffineMemberRows<RetNet> {
 public:
  RetNet(torch::nn::Module& m, const AffineSizes& s) : AffineMemberRows(s) {
    const int64_t H = s.H;
    gate_proj = affine_linear(m, "gate_proj", s.C, H * s.dv, false);
    // gamma_h = 1 - 2^(-5 - h) (Sun et al. 2023, §2.2 "gamma = 1 - 2^(-5 - arange(0, h))").
    const auto h = torch::arange(H, torch::kDouble);
    log_gamma_ = m.register_buffer("log_gamma", torch::log1p(-torch::pow(2.0, -5.0 - h)).to(torch::kFloat));
  }

  AffinePrepared prepare(const AffineProjected& in) override {
    const int64_t H = sizes.H;
    AffinePrepared p;
    p.q = in.q * in.scale;
    p.k = in.k;
    p.v = in.v;
    p.g = log_gamma_.to(in.x.scalar_type()).view({1, H, 1, 1}).expand({in.B, H, in.T, sizes.dk});
    p.gate = torch::silu(in.gate()).reshape({in.B, in.T, H, sizes.dv});
    return p;
  }
  torch::Tensor finish(const AffinePrepared& p, const torch::Tensor& y) override { return rms_norm(y) * p.gate; }

  template <typename T>
  void prepare_head_t(AffineRowHead<T>& r) {
    const T d = std::exp(log_gamma_.data_ptr<T>()[r.h]);
    for (int64_t i = 0; i < sizes.dk; ++i) {
      r.q[i] *= r.scale;
      r.decay[i] = d;
    }
  }
  template <typename T>
  void finish_head_t(AffineRowHead<T>& r) {
    rms_norm_head(r, sizes.dv);
  }

 private:
  torch::Tensor log_gamma_;  // (H)
};

std::unique_ptr<AffineMemberImpl> build(torch::nn::Module& m, const AffineSizes& s) {
  return std::make_unique<RetNet>(m, s);
}

}  // namespace

const AffineMemberDef kAffineMemberRetNet{"retnet", __FILE__, 0, &build};

}  // namespace mixlab::detail::affine_member
