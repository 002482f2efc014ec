// mixlab/core/split_heads.h — one fused input projection split into per-head tensors.
//
// Mixers project x (B,T,C) once to n blocks of C (q, k, v, ...) and read each block as (B,H,T,D).
// Taking the blocks with select() or [i] costs the backward one zero-filled (n,B,T,C) tensor per
// block plus n − 1 full-size additions to combine them (SelectBackward), each in fresh memory
// (a profile of a pow2 layer's forward+backward at T = 4096 put 383 of 584 ms there,
// docs/log/benchmarks-2026-11.md, "The resolvent layer"). unbind's backward stacks the n gradients into one tensor in
// the projection's own layout instead: one allocation, one pass, and the Linear's backward reads it without a copy.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace mixlab {

/// proj (B,T,n·H·D) → n views (B,H,T,D) (strided; last dim contiguous). Throws mixlab::Error if
/// proj is not (B,T,n·H·D).
std::vector<torch::Tensor> split_heads(const torch::Tensor& proj, int64_t n, int64_t H, int64_t D);

}  // namespace mixlab
