// mixlab/scan/ssm.h — `ssm[:N]`: the diagonal SSM row of seed 000 Table 1, with Mamba's
// parameterisation (seed 000 App. A.4, eq. 21–22), state expansion N (default 16).
//
//   u, z = in_proj(x)                         (B,T,C) each
//   Δ_t  = softplus(dt_proj(u_t))             (B,T,C)  per channel step size
//   b_t, c_t = bc_proj(u_t)                   (B,T,N)  input-dependent B and C of the SSM
//   h_t[c,n] = exp(Δ_t[c] a[c,n]) h_{t-1}[c,n] + Δ_t[c] b_t[n] u_t[c]     a = −exp(A_log) < 0
//   y_t[c]   = Σ_n c_t[n] h_t[c,n] + D[c] u_t[c];   out = out_proj(y ⊙ silu(z))
//
// In the Y = (I−B)⁻¹ A X view each (c,n) is an order:1 recurrence with α_tt = Δ_t b_t,
// β_t,t−1 = exp(Δ_t a) (eq. 22). forward, prefill and step run it through the fused selective
// scan (mixlab/scan/selective_scan.h), O(T·C·N) without (B,T,C,N) tensors; its tests
// compare it with the order:1 resolvent op and with a plain loop. Decode: O(C·N) per token,
// state (B,C,N), no growth; a float/double step runs its projections on raw rows
// (core/row_kernels.h), equal to forward to float rounding.
// Initialisation as Mamba: A_log = log(1..N), Δ bias so softplus(bias) ∈ [1e-3, 1e-1]
// log-uniformly, D = 1. Not supported: the depthwise convolution of the Mamba block.
#pragma once

#include "mixlab/mixer/mixer.h"

namespace mixlab {

class SsmState : public MixerState {
 public:
  explicit SsmState(torch::Tensor h) : h_(std::move(h)) {}
  int64_t position() const override { return pos_; }
  int64_t bytes() const override { return tensor_bytes(h_); }
  int64_t batch() const override { return h_.size(0); }
  void io(StateArchive& ar) override {
    ar.scalar("position", pos_);
    ar.tensor("h", h_);
  }
  torch::Tensor h_;  // (B,C,N)
  int64_t pos_ = 0;
};

class SsmMixer : public Mixer {
 public:
  SsmMixer(const MixerDims& dims, int64_t state_size);

  torch::Tensor forward(const torch::Tensor& x) override;
  std::unique_ptr<MixerState> init_state(int64_t batch) override;
  torch::Tensor step(MixerState& state, const torch::Tensor& x_t) override;
  /// A chunk through the fused scan from the state (not a loop of steps).
  torch::Tensor prefill(MixerState& state, const torch::Tensor& x) override;
  std::string spec() const override { return "ssm:" + std::to_string(n_); }
  std::string cost_class() const override { return "O(1)"; }
  std::string pattern_spec() const override { return "order:1"; }

 private:
  struct Coefficients {
    torch::Tensor u, z, delta;  // (B,T,C) (or (B,C) in a step)
    torch::Tensor b, c;         // (B,T,N) (or (B,N))
    torch::Tensor a;            // (C,N) = -exp(A_log)
  };
  Coefficients coefficients(const torch::Tensor& x);
  torch::Tensor finish(const Coefficients& k, const torch::Tensor& y);  // y (…,C) -> out_proj(y ⊙ silu(z))
  /// -exp(A_log), recomputed only when A_log changed (decode reads it every token).
  const torch::Tensor& decay_rates();

  MixerDims dims_;
  int64_t n_;
  torch::nn::Linear in_proj_{nullptr}, dt_proj_{nullptr}, bc_proj_{nullptr}, out_proj_{nullptr};
  torch::Tensor a_log_, d_skip_;
  torch::Tensor a_cache_;  // decay_rates()
  int64_t a_cache_version_ = -1;
  const void* a_cache_data_ = nullptr;
};

}  // namespace mixlab
