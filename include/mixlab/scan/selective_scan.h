// mixlab/scan/selective_scan.h — the fused selective scan of the `ssm` mixer (Mamba's
// diagonal SSM, seed 000 App. A.4, eq. 21–22), without materialising the (B,T,C,N) tensors.
//
//   h_t[c,n] = exp(Δ_t[c] a[c,n]) h_{t-1}[c,n] + Δ_t[c] b_t[n] u_t[c]        h_{-1} = h0 (or 0)
//   y_t[c]   = Σ_n c_t[n] h_t[c,n] + d[c] u_t[c]
//
// Shapes: u, delta (B,T,C); a (C,N); b, c (B,T,N); d (C); h0 and the final state (B,C,N).
// delta is the step size after softplus (> 0 in the mixer; any value is accepted here).
//
// Cost: O(B·T·C·N) time, one exp per (b,t,c,n), and O(B·T·C + B·T·N) memory: each (b,c) lane
// keeps its N-vector h in registers / L1 while it walks t. The plain path it replaces
// (selective_scan_reference, and the ssm mixer before it) builds exp(Δa) and Δb as (B,T,C,N)
// tensors and runs them through the order:1 resolvent op. Under autograd the forward also keeps
// the state entering every chunk of 64 steps (B·T/64·N·C values, a quarter of u at N = 16), and
// the backward recomputes one chunk at a time (its states and decays stay in L2) for blocks of 64
// channels (narrower at a short batch), walking t down; the blocks run in parallel (at::parallel_for). The
// gradients of b and c (sums over channels) go to one slice per block, summed after, so no two
// threads write one element.
//
// Autograd: gradients for u, delta, a, b, c and d. h0 is a constant (used by prefill, which runs
// without autograd); the final state is not differentiable.
#pragma once

#include <torch/torch.h>

namespace mixlab {

/// y (B,T,C). With `final_state` non-null it receives h_{T-1} (B,C,N). Checks every shape,
/// dtype (float32 / float64, all the same) and device, naming the argument.
torch::Tensor selective_scan(const torch::Tensor& u, const torch::Tensor& delta, const torch::Tensor& a,
                             const torch::Tensor& b, const torch::Tensor& c, const torch::Tensor& d,
                             const torch::Tensor& h0 = {}, torch::Tensor* final_state = nullptr);

/// The same recurrence in plain LibTorch ops: (B,T,C,N) tensors and a loop over t. The reference
/// the tests compare the kernel with (forward and backward); differentiable through autograd.
torch::Tensor selective_scan_reference(const torch::Tensor& u, const torch::Tensor& delta, const torch::Tensor& a,
                                       const torch::Tensor& b, const torch::Tensor& c, const torch::Tensor& d,
                                       const torch::Tensor& h0 = {}, torch::Tensor* final_state = nullptr);

/// One decode token in place: h (B,C,N) advances by u_t, delta_t (B,C), b_t, c_t (B,N); returns
/// y_t (B,C). No autograd (decode runs under InferenceMode / NoGradGuard). Equals row t of
/// selective_scan with h0 = h.
torch::Tensor selective_scan_step(torch::Tensor& h, const torch::Tensor& u_t, const torch::Tensor& delta_t,
                                  const torch::Tensor& a, const torch::Tensor& b_t, const torch::Tensor& c_t,
                                  const torch::Tensor& d);

}  // namespace mixlab
