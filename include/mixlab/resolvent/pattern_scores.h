// mixlab/resolvent/pattern_scores.h — attention scores sampled on a pattern, and their softmax.
//
// s_ij = <q_i, k_j> / sqrt(D) only for the positions j a row reads (seed 000 B.1: alpha and beta
// are two attention matrices over the pattern), in the slot order of the resolvent op
// (mixlab/resolvent/resolvent.h): with the diagonal, slot 0 = j = i and slot s+1 = past slot s;
// without it, slot s = past slot s.
//
// Shapes: q, k (B,H,T,D) → scores (B,H,T,W+1) with the diagonal, (B,H,T,W) without, W =
// pattern_index(p, t0 + T).W. Slots past a row's true width hold 0; pattern_softmax gives them
// weight 0 (a row with no slot at all, e.g. row 0 of B, is all zeros, not NaN).
// Cost O(T·W·D) forward and backward (a sampled product: no T×T tensor).
//
// Chunked prefill: with `past`, the rows are absolute positions t0.. (t0 = past->position()) and
// keys of positions < t0 come from past->extra_slots(past_key_channel) (no gradient to them).
// Not supported: causal masks other than the pattern's, GPU.
#pragma once

#include <torch/torch.h>

#include "mixlab/pattern/pattern.h"
#include "mixlab/resolvent/resolvent.h"

namespace mixlab {

/// Sampled scores (see the file header). Differentiable in q and k.
torch::Tensor pattern_scores(const torch::Tensor& q, const torch::Tensor& k, const Pattern& pattern, bool with_diagonal,
                             const ResolventState* past = nullptr, int past_key_channel = -1);

/// Softmax over each row's valid slots; invalid slots get exactly 0 weight. scores as returned by
/// pattern_scores for rows t0..t0+T−1. Differentiable (plain torch ops on (B,H,T,W) tensors).
torch::Tensor pattern_softmax(const torch::Tensor& scores, const Pattern& pattern, bool with_diagonal, int64_t t0 = 0);

/// One decode row t = state.position(): scores of q_t (B,H,D) against k_t (B,H,D) (the diagonal,
/// when with_diagonal) and the held keys of P(t) in extra channel `key_channel`:
/// (B,H,|P(t)| + diag). No autograd.
torch::Tensor pattern_scores_step(const ResolventState& state, const torch::Tensor& q_t, const torch::Tensor& k_t,
                                  bool with_diagonal, int key_channel);

}  // namespace mixlab
