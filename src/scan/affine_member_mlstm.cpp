// member mlstm — mLSTM, xLSTM's matrix memory, "xLSTM: Extended Long Short-Term Memory" (Beck et
// al. 2024).
//
// Kernel diag_decay with a scalar gate per head: S_t = f_t S_{t-1} + i_t k_t v_t^T,
//   f_t = sigmoid(W_f x_t + b_f) (log f = logsigmoid; b_f = 3 at init, f ~ 0.95),
//   i_t = sigmoid(W_i x_t + b_i): the stabilised form used here, a bounded input gate instead of
//   exp(i~) with a running max m_t, so the state stays a plain affine recurrence;
//   normaliser n_t via a ones column of v (Dv' = Dv + 1), q scaled by 1/sqrt(Dk):
//   h_t = (S_t^T q_t) / max(|n_t^T q_t|, 1) * sigmoid(W_o x_t)
// Registers out_gate_proj (C -> H*Dv, no bias), forget_proj (C -> H, bias filled with 3) and
// input_proj (C -> H, with bias).
#include "affine_member.h"

namespace mixlab::detail::affine_member {
namespace {

class Mlstm final : public AffineMemberRows<Mlstm> {
 public:
  Mlstm(torch::nn::Module& m, const AffineSizes& s) : AffineMemberRows(s) {
    gate_proj = affine_linear(m, "out_gate_proj", s.C, s.H * s.dv, false);
    decay_proj = affine_linear(m, "forget_proj", s.C, s.H, true);
    decay_proj->bias.fill_(3.0);  // forget gates start near 1 (sigmoid(3) = 0.95)
    aux_proj = affine_linear(m, "input_proj", s.C, s.H, true);
  }

  AffinePrepared prepare(const AffineProjected& in) override {
    AffinePrepared p;
    auto input = per_head(torch::sigmoid(aux_proj->forward(in.x)));  // (B,H,T)
    p.q = in.q * in.scale;
    p.k = in.k * input.unsqueeze(-1);
    p.v = with_ones_column(in.v);
    p.g = expand_keys(per_head(torch::log_sigmoid(decay_proj->forward(in.x))), sizes.dk);
    p.gate = torch::sigmoid(in.gate()).reshape({in.B, in.T, sizes.H, sizes.dv});
    return p;
  }
  torch::Tensor finish(const AffinePrepared& p, const torch::Tensor& y) override {
    const int64_t dv = sizes.dv;
    return y.narrow(-1, 0, dv) / torch::clamp_min(y.narrow(-1, dv, 1).abs(), 1.0) * p.gate;
  }

  template <typename T>
  void prepare_head_t(AffineRowHead<T>& r) {
    const T input = row::sigmoid(r.aux_row[r.h]);
    const T forget = std::exp(row::log_sigmoid(r.decay_row[r.h]));
    for (int64_t i = 0; i < sizes.dk; ++i) {
      r.q[i] *= r.scale;
      r.k[i] *= input;
      r.decay[i] = forget;
    }
  }
  template <typename T>
  void finish_head_t(AffineRowHead<T>& r) {
    const int64_t Dv = sizes.dv;
    const T* gate = r.gate_row + r.h * Dv;
    const T z = std::max(std::abs(r.o[Dv]), T(1));
    for (int64_t j = 0; j < Dv; ++j) r.y[j] = r.o[j] / z * row::sigmoid(gate[j]);
  }
};

std::unique_ptr<AffineMemberImpl> build(torch::nn::Module& m, const AffineSizes& s) {
  return std::make_unique<Mlstm>(m, s);
}

}  // namespace

const AffineMemberDef kAffineMemberMlstm{"mlstm", __FILE__, 0, &build};

}  // namespace mixlab::detail::affine_member
