// member mamba — Mamba's selective SSM (S6), "Mamba: Linear-Time Sequence Modeling with
// Selective State Spaces" (Gu & Dao 2023), in the Mamba-2 style (Dao & Gu 2024).
//
// Kernel diag_decay per key, with Dk = N = 16 state rows per head and Dv = D channels:
//   u_t = silu(W_in x_t),  Δ_t = softplus(W_Δ x_t + dt_bias)  (ONE Δ per head, Mamba-2 style)
//   q = C_t,  k = Δ_t B_t,  v = u_t,  g_t = Δ_t a,  a = -exp(A_log) per (head, n)
//   y_t = (S_t^T C_t + D u_t) * silu(z_t)
// One Δ per head keeps the decay diagonal on the key (state) axis; S6's per-channel Δ would make
// it depend on (n, channel) and is not supported (the `ssm` mixer, mixlab/scan/ssm.h, has it).
// No depthwise convolution. Registers gate_proj (z: C -> H*Dv, no bias), dt_proj (Δ: C -> H, no
// bias), then the parameters A_log (H,N) = log(1..N), D (H,Dv) = 1 and dt_bias (H), softplus(dt_bias)
// log-uniform in [1e-3, 1e-1] (one torch::rand draw).
#include "affine_member.h"

namespace mixlab::detail::affine_member {
namespace {

constexpr int64_t kMambaState = 16;  // N

class Mamba final : public AffineMemberRows<Mamba> {
 public:
  Mamba(torch::nn::Module& m, const AffineSizes& s) : AffineMemberRows(s) {
    const int64_t H = s.H;
    gate_proj = affine_linear(m, "gate_proj", s.C, H * s.dv, false);  // z
    aux_proj = affine_linear(m, "dt_proj", s.C, H, false);            // Δ
    a_log_ = m.register_parameter("A_log", torch::log(torch::arange(1, kMambaState + 1, torch::kFloat)).repeat({H, 1}));
    d_skip_ = m.register_parameter("D", torch::ones({H, s.dv}));
    dt_bias_ = m.register_parameter("dt_bias", mamba_dt_bias_init(H));  // softplus(dt_bias) in [1e-3, 1e-1]
  }

  AffinePrepared prepare(const AffineProjected& in) override {
    const int64_t H = sizes.H;
    AffinePrepared p;
    auto u = torch::silu(in.v);                                                  // (B,H,T,D)
    auto delta = per_head(torch::softplus(aux_proj->forward(in.x) + dt_bias_));  // (B,H,T)
    auto a = -torch::exp(a_log_);                                                // (H,N)
    p.q = in.q;                                                                  // C_t
    p.k = delta.unsqueeze(-1) * in.k;                                            // Δ_t B_t
    p.v = u;
    p.g = delta.unsqueeze(-1) * a.view({1, H, 1, sizes.dk});
    p.gate = torch::silu(in.gate()).reshape({in.B, in.T, H, sizes.dv});
    p.skip = u.permute({0, 2, 1, 3}) * d_skip_;  // (B,T,H,D)
    return p;
  }
  torch::Tensor finish(const AffinePrepared& p, const torch::Tensor& y) override { return (y + p.skip) * p.gate; }

  template <typename T>
  void prepare_head_t(AffineRowHead<T>& r) {
    const T delta = row::softplus(r.aux_row[r.h] + dt_bias_.data_ptr<T>()[r.h]);
    const T* a_log = a_log_.data_ptr<T>() + r.h * sizes.dk;
    for (int64_t i = 0; i < sizes.dk; ++i) {
      r.k[i] *= delta;
      r.decay[i] = std::exp(delta * -std::exp(a_log[i]));
    }
    for (int64_t j = 0; j < sizes.dv; ++j) r.v[j] = row::silu(r.v[j]);  // u, kept for the skip
  }
  template <typename T>
  void finish_head_t(AffineRowHead<T>& r) {
    const T* gate = r.gate_row + r.h * sizes.dv;
    const T* d_skip = d_skip_.data_ptr<T>() + r.h * sizes.dv;
    for (int64_t j = 0; j < sizes.dv; ++j) r.y[j] = (r.o[j] + r.v[j] * d_skip[j]) * row::silu(gate[j]);
  }

 private:
  torch::Tensor a_log_, d_skip_, dt_bias_;  // (H,N), (H,Dv), (H)
};

std::unique_ptr<AffineMemberImpl> build(torch::nn::Module& m, const AffineSizes& s) {
  return std::make_unique<Mamba>(m, s);
}

}  // namespace

const AffineMemberDef kAffineMemberMamba{"mamba", __FILE__, kMambaState, &build};

}  // namespace mixlab::detail::affine_member
