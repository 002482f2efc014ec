// mixlab/attention/block_attention.h — softmax attention of many small independent groups, every
// key seen, on heads that are NOT split off: the op under BRL's F_prop (each block's tokens query
// its m compressed tokens) and F_comp (the m compressed tokens query their history), and the
// T-PSM's bidirectional Agg (each tree node's 2c rows attend to each other):
//
//   out[g,i,h] = sum_{j < Lk} softmax_j(scale q[g,i,h] . k[g,j,h]) v[g,j,h]     (every key, no mask)
//
// Shapes: q (G,Lq,H,D); k, v (G,Lk,H,D); out (G,Lq,H,D), contiguous. The (G,L,H·D) rows of a
// linear layer's output are these tensors as a view (reshape), so no split or merge of heads is
// copied; any strides are read (a tensor whose D is not unit-stride is copied first).
//
// Two forms, equal up to rounding (tests/attention/block_attention_test.cpp):
//   native    one (group, head) at a time on raw rows, forward and backward (the backward
//             recomputes the probabilities from the rows' log-sum-exps), one build per instruction
//             set (src/attention/block_attention_kernels.inc); any D (the products in the set's
//             widest vectors that fit, then narrower ones, then lanes). It replaced batched
//             matmuls of (L,D) x (D,m) matrices, which LibTorch runs as one BLAS call per group and
//             head. First-order gradients only.
//   composed  LibTorch ops (split heads, matmul, softmax, matmul, merge): everything under
//             ComposedBlockAttentionGuard; differentiable to any order.
// Both take float32 and float64 CPU tensors.
#pragma once

#include <torch/torch.h>

#include "mixlab/core/reference_guard.h"

namespace mixlab {

/// While one is alive on this thread, block_attention runs the composed LibTorch form.
using ComposedBlockAttentionGuard = ReferenceGuard<struct BlockAttentionOp>;

/// See the file header. Throws mixlab::Error naming the argument for undefined or non-CPU
/// tensors, ranks other than 4, dtypes other than float32/float64 or not q's, mismatched G, H or
/// D, v not shaped like k, or Lq, Lk = 0.
torch::Tensor block_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale);

}  // namespace mixlab
