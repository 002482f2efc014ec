// mixlab/resolvent/pattern_attention.h — RoPE, sampled scores and the masked softmax of a
// pattern in one op: the coefficients alpha / beta of the ResolventMixer (seed 000 B.1).
//
//   probs_i,s = softmax over row i's valid slots of <R_i q_i, R_j k_j> / sqrt(D)
//
// R_t the rotary rotation of position t (mixlab/core/rope.h; none when rope_base <= 0), j the
// position slot s of row i reads, in the slot order of pattern_scores (with the diagonal: slot 0
// = j = i, slot s+1 = past slot s; without it: slot s = past slot s). Invalid slots get exactly
// 0, and a row with no valid slot (row 0 of B) is all zeros.
//
// It computes what rope_apply → pattern_scores → pattern_softmax compute (those stay as the
// reference the tests compare against) without their intermediate tensors: one pass rotates q
// and k into contiguous rows, one pass per row computes its W+1 scores, their softmax and writes
// the row of probs. The backward recomputes nothing: it reads probs, the rotated q and k, and
// rotates dq, dk back in place. So the layer's ~14 autograd nodes of RoPE, scores, mask and
// softmax become one, and q, k may be strided views (e.g. the permuted in-projection output; the
// last dim must be contiguous, else a contiguous copy is taken).
//
// Shapes: q, k (B,H,T,D), D even with RoPE → probs (B,H,T,W+1) with the diagonal, (B,H,T,W)
// without (W = pattern_index(p, t0 + T).W); queries, keys (B,H,T,D): the rotated q and k
// (contiguous, no gradient; the decode state caches the keys).
// Cost O(T·W·D) forward and backward, no T×T tensor (for dense / causal patterns W = T − 1, so
// probs itself is T×T there, as with pattern_scores).
//
// Chunked prefill: with `past`, the rows are positions t0.. (t0 = past->position(), also the
// first RoPE position) and keys of positions < t0 come, already rotated, from
// past->extra_slots(past_key_channel) (no gradient to them).
// ComposedPatternAttentionGuard makes the op compute the composed form instead (queries and keys
// are then differentiable too): tests compare the two, benchmarks time both.
// Head dims of whole 16-byte vectors (a multiple of 4 floats or 2 doubles) run vector loops
// compiled per instruction set (src/resolvent/pattern_attention_kernels.inc; equal to the plain
// loops to rounding), other head dims the plain loops.
// Not supported: double backward, GPU.
#pragma once

#include <torch/torch.h>

#include "mixlab/core/reference_guard.h"
#include "mixlab/pattern/pattern.h"
#include "mixlab/resolvent/resolvent.h"

namespace mixlab {

struct PatternAttention {
  torch::Tensor probs;    // (B,H,T,W[+1]) differentiable in q and k
  torch::Tensor queries;  // (B,H,T,D) rotated q, no gradient
  torch::Tensor keys;     // (B,H,T,D) rotated k, no gradient
};

/// While one is alive on this thread, pattern_attention runs rope_apply → pattern_scores →
/// pattern_softmax (the form before the fused op).
using ComposedPatternAttentionGuard = ReferenceGuard<struct PatternAttentionOp>;
/// While one is alive on this thread, the fused op runs its plain loops (any head dim) instead of
/// the vector loops it takes for head dims of whole 16-byte vectors: tests compare the two,
/// benchmarks time both.
using PatternAttentionPlainLoopsGuard = ReferenceGuard<struct PatternAttentionVectorLoopsOp>;

/// See the file header. rope_base <= 0 disables the rotation. Throws mixlab::Error naming the
/// argument for bad shapes, dtypes, devices, odd D with RoPE, or a state that does not match.
PatternAttention pattern_attention(const torch::Tensor& q, const torch::Tensor& k, const Pattern& pattern,
                                   bool with_diagonal, double rope_base, const ResolventState* past = nullptr,
                                   int past_key_channel = -1);

/// Whether pattern_attention runs its vector loops for this head dim and dtype (float or double;
/// D a multiple of 4 floats or 2 doubles), ignoring the guards above.
bool pattern_attention_runs_vector_loops(int64_t head_dim, torch::ScalarType dtype);

}  // namespace mixlab
