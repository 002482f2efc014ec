// Private: the native block cross-attention of mixlab/attention/block_attention.h on raw rows of one
// (group, head), compiled once per instruction set (block_attention_kernels_*.cpp) and picked at
// run time (block_attention.cpp). No LibTorch header: the per-ISA objects are built with their own
// -m flags and must not share the precompiled header.
//
// A (group, head) is small (BRL's F_prop: 64 queries over 16 keys of 16 channels; its F_comp: 16
// queries over 64 keys; the T-PSM's Agg: 2c rows over the same 2c): all Lq x Lk scores fit in scratch, so there is no
// key blocking or online softmax; the keys (and values, backward) are transposed once so that every product is a
// register tile of 4 rows over contiguous vectors and no product sums across lanes.
#pragma once

#include <cstdint>

#include "mixlab/core/isa_dispatch.h"

namespace mixlab::detail::block_attn {

/// One (group, head): out[i] = sum_j softmax_j(scale q[i] . k[j]) v[j], i < Lq, j < Lk (every key,
/// no mask). Rows have unit column stride; *_row are row strides in elements. lse: Lq values (the
/// log-sum-exp of the scaled scores), or null.
template <typename E>
struct BlockRows {
  const E* q;
  int64_t q_row;
  const E* k;
  int64_t k_row;
  const E* v;
  int64_t v_row;
  E* out;
  int64_t out_row;
  E* lse;
  E* work;  // work_elements(Lq, Lk, D)
  int64_t Lq, Lk, D;
  E scale;
};

/// The backward of BlockRows for the same (group, head), given out, lse and dout: writes dq (Lq
/// rows), dk and dv (Lk rows; overwritten, not accumulated).
template <typename E>
struct BlockGradRows {
  const E* q;
  int64_t q_row;
  const E* k;
  int64_t k_row;
  const E* v;
  int64_t v_row;
  const E* out;
  int64_t out_row;
  const E* dout;
  int64_t dout_row;
  const E* lse;
  E* dq;
  int64_t dq_row;
  E* dk;
  int64_t dk_row;
  E* dv;
  int64_t dv_row;
  E* work;  // work_elements(Lq, Lk, D)
  int64_t Lq, Lk, D;
  E scale;
};

/// Keys rounded up to a whole number of kVectorBytes vectors (the score rows' padded length).
template <typename E>
constexpr int64_t padded_keys(int64_t Lk) {
  return (Lk + vector_lanes<E>() - 1) / vector_lanes<E>() * vector_lanes<E>();
}

/// Scratch elements of one call, forward or backward; the pointer must be 64-byte aligned.
template <typename E>
int64_t work_elements(int64_t Lq, int64_t Lk, int64_t D) {
  const int64_t P = padded_keys<E>(Lk), Q = padded_keys<E>(Lq);
  return 2 * D * P + 2 * Lq * P + P * Q;
}

MIXLAB_DECLARE_PER_ISA(void block_attention(const BlockRows<float>& r);
                       void block_attention(const BlockRows<double>& r);
                       void block_attention_backward(const BlockGradRows<float>& r);
                       void block_attention_backward(const BlockGradRows<double>& r);)

}  // namespace mixlab::detail::block_attn
