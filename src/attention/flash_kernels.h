// Private: the native causal attention of mixlab/attention/causal_attention.h on raw rows of one
// (batch, head), compiled once per instruction set (flash_kernels_*.cpp) and picked at run time
// (causal_attention.cpp). No LibTorch header: the per-ISA objects are built with their own -m
// flags and must not share the precompiled header.
//
// The method is FlashAttention-2's (Dao 2023) on a CPU: query blocks of kQueryRows rows walk
// the key blocks up to their diagonal with an online softmax, so no score row longer than one
// key block exists and the keys above the diagonal are never multiplied; the backward recomputes
// each block's probabilities from the saved row log-sum-exps, key block outermost, so dK and dV
// of a block stay in L1 while the query blocks below it pass. Every product is a register-blocked
// loop over the set's native vectors (flash_kernels_*.cpp: 4 rows by 4 zmm on AVX-512, 4 rows by 2
// ymm or xmm on AVX2 and generic); the layout below (lanes, key block, scratch) is in units of the
// 64-byte kVectorBytes on every set, a whole number of native vectors.
#pragma once

#include <cstdint>

#include "mixlab/core/isa_dispatch.h"

namespace mixlab::detail::flash {

/// Lanes per vector for element type E (16 float, 8 double): the unit of the key blocks.
template <typename E>
constexpr int64_t lanes() {
  return vector_lanes<E>();
}

/// The head dims the kernels take: multiples of one 16-byte vector (4 float, 2 double). A row of
/// D runs in the widest of the set's vectors that divides it: D 8 in float is one ymm under
/// AVX-512, where it took the composed form while the kernels needed whole 64-byte vectors.
template <typename E>
constexpr int64_t row_lanes() {
  return 16 / static_cast<int64_t>(sizeof(E));
}

/// Query rows per block and keys per block (4 vectors of keys).
constexpr int64_t kQueryRows = 32;
template <typename E>
constexpr int64_t key_block() {
  return 4 * lanes<E>();
}

/// One (batch, head). Query row i (0 <= i < T) is position S + i and attends keys 0..S+i of the
/// S + T key rows; with window W > 0 only keys max(0, S+i−W)..S+i (local attention, W + 1 keys).
/// Rows have unit column stride; *_row are row strides in elements.
/// out: T rows of D (row stride D). lse: T values (log-sum-exp of the scaled scores), or null.
template <typename E>
struct AttentionRows {
  const E* q;
  int64_t q_row;
  const E* k;
  int64_t k_row;
  const E* v;
  int64_t v_row;
  E* out;
  E* lse;
  E* work;  // forward_work_elements(T, S, D)
  int64_t T, S, D;
  E scale;
  int64_t window;  // 0: every earlier key; W > 0: the last W keys and the query's own
};

/// The backward of AttentionRows for the same (batch, head), given out and lse of the forward and
/// dout: writes dq (T rows of D), dk and dv (S + T rows of D), all with row stride D.
template <typename E>
struct AttentionGradRows {
  const E* q;
  int64_t q_row;
  const E* k;
  int64_t k_row;
  const E* v;
  int64_t v_row;
  const E* out;
  const E* dout;
  int64_t dout_row;
  const E* lse;
  E* dq;
  E* dk;
  E* dv;
  E* work;  // backward_work_elements(T, S, D)
  int64_t T, S, D;
  E scale;
  int64_t window;  // as AttentionRows::window
};

/// Scratch sizes (elements) of one call; the pointer must be 64-byte aligned.
template <typename E>
int64_t forward_work_elements(int64_t T, int64_t S, int64_t D) {
  const int64_t nk = key_block<E>(), keys = (S + T + nk - 1) / nk * nk;
  return D * keys + kQueryRows * nk + kQueryRows * D + 2 * kQueryRows;
}
template <typename E>
int64_t backward_work_elements(int64_t T, int64_t S, int64_t D) {
  const int64_t nk = key_block<E>(), keys = (S + T + nk - 1) / nk * nk;
  return 2 * D * keys + 2 * kQueryRows * nk + 2 * nk * D + T;
}

MIXLAB_DECLARE_PER_ISA(void attention(const AttentionRows<float>& r); void attention(const AttentionRows<double>& r);
                       void attention_backward(const AttentionGradRows<float>& r);
                       void attention_backward(const AttentionGradRows<double>& r);)

}  // namespace mixlab::detail::flash
