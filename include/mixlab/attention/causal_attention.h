// mixlab/attention/causal_attention.h — causal softmax attention on split heads, the op under
// AttentionMixer's full and local:W attention (forward and chunked prefill) and the T-PSM's Inf.
//
//   y[b,h,i] = sum_{j <= S+i} softmax_j(q[b,h,i] . k[b,h,j] / sqrt(D)) v[b,h,j]
//
// With window W > 0 (local attention, AttentionMixer's local:W), j runs over
// max(0, S+i−W) .. S+i only: the query's own key and the W before it. The native form then
// skips the key blocks before the window too, so its cost is O(T (W + block) D), not O(T² D).
//
// Shapes: q (B,H,T,D); k, v (B,H,S+T,D): query i is position S+i (S >= 0 cached positions before
// the queries, 0 in a training forward) and sees keys 0..S+i.
//
// Two forms, equal up to rounding (tests/attention/causal_attention_test.cpp):
//   native    FlashAttention-2's blocked form (src/attention/flash_kernels.inc): query blocks walk
//             the key blocks up to their diagonal with an online softmax; the backward
//             recomputes the probabilities from the rows' log-sum-exps. No (T, S+T) tensor exists,
//             keys above the diagonal cost nothing, and memory is O((S+T) D) per (batch, head).
//             Float32 and float64 with D a multiple of 4 (float) or 2 (double), CPU; one build per
//             instruction set (mixlab/core/cpu_isa.h), D in the widest of its vectors that
//             divides it. First-order gradients (the backward is not itself differentiable).
//   composed  LibTorch ops: scores, mask, softmax, product, in query tiles of kAttentionTile rows
//             (no T x T tensor beyond a tile). Every other case, and everything under
//             ComposedAttentionGuard; differentiable to any order.
//
// Not supported: dropout, ALiBi, grouped-query heads, non-causal masks other than the window.
#pragma once

#include <torch/torch.h>

#include "mixlab/core/reference_guard.h"

namespace mixlab {

/// Query rows per tile in the composed form.
constexpr int64_t kAttentionTile = 1024;

/// While one is alive on this thread, causal_attention runs the composed LibTorch form.
using ComposedAttentionGuard = ReferenceGuard<struct CausalAttentionOp>;

/// See the file header. Throws mixlab::Error naming the argument for undefined or non-CPU
/// tensors, wrong ranks, mismatched B, H, D or dtypes, v not shaped like k, T = 0, fewer keys
/// than queries or a negative window.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               int64_t window = 0);

/// Whether causal_attention takes the native form for these arguments (outside the guard).
bool causal_attention_is_native(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

}  // namespace mixlab
