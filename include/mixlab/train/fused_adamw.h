// mixlab/train/fused_adamw.h — the trainer's AdamW update and gradient clipping as two passes over
// raw memory, instead of ~10 ATen ops per parameter tensor (issue 38 item 2).
//
//   norm = grad_norm(params)                       (one pass, double accumulation)
//   s    = grad_clip_coef(norm, max_norm)          = min(1, max_norm / (norm + 1e-6))
//   adamw_fused_step(optimizer, s)                 (one pass per tensor: clip, decay, moments, update)
//
// equals clip_grad_norm_(params, max_norm) followed by torch::optim::AdamW::step() to float
// rounding (tests/train/fused_adamw_test.cpp, several steps, both weight-decay groups, clipping
// on and off). Per element of a tensor in group options (lr, betas, eps, weight_decay), step n:
//   g = s·grad;  p *= 1 − lr·wd;  m = β1 m + (1−β1) g;  v = β2 v + (1−β2) g²;
//   p −= lr/(1−β1ⁿ) · m / (√v / √(1−β2ⁿ) + eps)
// in the element type, as LibTorch's kernels compute it; the clipped g is written back to the
// gradient (as clip_grad_norm_ leaves it).
//
// The state lives where torch::optim::AdamW keeps it (its state() map, AdamWParamState: step,
// exp_avg, exp_avg_sq, keyed by the tensor), so optimizer.save/load and the checkpoint format
// (mixlab/train/checkpoint.h) are unchanged, and a library step and a fused one may alternate.
// Not supported on the fused path (they take the library step, after the same scaling): amsgrad,
// sparse or non-CPU gradients, element types other than float/double, non-contiguous tensors.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace mixlab {

/// The L2 norm of all gradients of `params` together (undefined gradients skipped; 0 when none),
/// accumulated in double. Non-finite when a gradient holds inf or NaN.
double grad_norm(const std::vector<torch::Tensor>& params);

/// The factor clip_grad_norm_ scales gradients by for a total norm `norm`: min(1, max_norm /
/// (norm + 1e-6)). Throws mixlab::Error unless max_norm > 0.
double grad_clip_coef(double norm, double max_norm);

/// optimizer.step() with every gradient first multiplied by `grad_scale` (> 0, finite), as
/// above. Throws mixlab::Error naming the argument for a bad grad_scale.
void adamw_fused_step(torch::optim::AdamW& optimizer, double grad_scale);

}  // namespace mixlab
