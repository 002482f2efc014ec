// mixlab/core/rope.h — rotary position embedding (Su et al.), shared by every mixer with q/k.
//
// rope_apply(x (B,H,T,D), start) rotates channel pairs (d, d + D/2) of position start+t by
// angle (start+t) * base^(-2d/D). D must be even. Differentiable (plain torch ops).
// rope_rows is the same rotation for one position on raw rows (decode steps without ATen ops).
// rope_table gives the cos/sin tables both use, computed once per (start, T, D, base, dtype) and
// kept in a small process-wide cache: a training step asks for the same table in every layer and
// every step, and building it (T·D cos and sin in double) costs more than the rotation itself.
// On CPU float/double tensors rope_apply runs one native pass forward and one backward (an
// autograd node: the composed form's seven ops and their backward nodes cost more than the
// rotation at training sizes, issue 38); the composed form (narrow, mul, cat) is its reference,
// taken under ComposedRopeGuard, for other dtypes and devices, and for double backward.
// The output is a contiguous (B,H,T,D) tensor on both paths, whatever x's strides.
// Not supported: scaled/NTK variants.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "mixlab/core/reference_guard.h"

namespace mixlab {

/// While alive on a thread, rope_apply runs its composed reference there (reference_guard.h).
using ComposedRopeGuard = ReferenceGuard<struct RopeOp>;

/// x (B,H,T,D) → same shape, positions start..start+T-1. Throws mixlab::Error if D is odd.
torch::Tensor rope_apply(const torch::Tensor& x, int64_t start = 0, double base = 10000.0);

/// The rotation tables of positions start..start+T−1: cos and sin (T, D/2) of dtype, angle
/// (start+t)·base^(-2d/D) computed in double then rounded. Read-only tensors shared through the
/// cache (never write into them). Throws mixlab::Error for odd or non-positive D, start < 0, T < 0.
struct RopeTable {
  torch::Tensor cos, sin;  // (T, D/2), contiguous
};
RopeTable rope_table(int64_t start, int64_t T, int64_t D, double base, torch::ScalarType dtype);

/// base^(-2d/D) for d < D/2: rope_apply's rotation rates, computed as it computes them (double).
std::vector<double> rope_inv_freq(int64_t D, double base = 10000.0);

/// rope_apply at one position on raw rows: rotates `rows` rows of D channels at x, in place, as
/// position pos; inv_freq = rope_inv_freq(D, base). Angles in double, cos and sin rounded to T,
/// then the rotation in T, as rope_apply. T is float or double.
template <typename T>
void rope_rows(T* x, int64_t rows, int64_t D, int64_t pos, const std::vector<double>& inv_freq);

}  // namespace mixlab
