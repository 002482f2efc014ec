// mixlab/core/rope.h — rotary position embedding (Su et al.), shared by every mixer with q/k.
//
// rope_apply(x (B,H,T,D), start) rotates channel pairs (d, d + D/2) of position start+t by
// angle (start+t) * base^(-2d/D). D must be even. Differentiable (plain torch ops).
// Not supported: scaled/NTK variants.
#pragma once

#include <torch/torch.h>

namespace mixlab {

/// x (B,H,T,D) → same shape, positions start..start+T-1. Throws mixlab::Error if D is odd.
torch::Tensor rope_apply(const torch::Tensor& x, int64_t start = 0, double base = 10000.0);

}  // namespace mixlab
