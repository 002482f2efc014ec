// Private: pattern_attention's per-slice loops (RoPE, sampled scores, masked softmax, and their
// backward) on raw rows. The plain loops in pattern_attention.cpp run any head dim; the vector
// loops of pattern_attention_kernels.inc, compiled once per instruction set
// (pattern_attention_kernels_*.cpp) and picked per call through mixlab/core/cpu_isa.h, run head
// dims of whole 16-byte vectors (a multiple of 4 floats or 2 doubles): along D in the widest vector
// of the set whose lanes divide it (with_row_vector, mixlab/core/native_vectors.h). The d = 64,
// 4-head models of compare have D = 16, one zmm under AVX-512; MAD's d = 128 over 16 heads has
// D = 8, one ymm.
//
// Why vector loops: at compare's size the plain loops' dots of 16 elements and their one-row
// scatters ran at a few GFLOP/s, and the dense recurrence's two pattern attentions per layer took a
// fifth of its training step (2026-11-28, `perf record build/bench/bench_train --preset default
// --task recall --mixer resolvent:dense`). The vector loops take up to a native vector's worth of
// slots at once (their dots summed by one transposing fold tree, mixlab/core/native_vectors.h),
// the softmax on mixlab::row::softmax's vector exp, and keep a row's dq in registers.
//
// Results equal the plain loops' to rounding, not bit for bit (the dots are summed in another
// order, exp is a series). No LibTorch header: the per-ISA objects are built with their own -m
// flags.
#pragma once

#include <algorithm>
#include <cstdint>

#include "mixlab/core/isa_dispatch.h"
#include "mixlab/core/native_vectors.h"

namespace mixlab::detail::pattern_attention_kernels {

/// The facts of one call, shared by every slice (raw pointers, no checks).
template <typename E>
struct AttentionRows {
  int64_t T = 0;                     // chunk rows
  int64_t D = 0;                     // head dim
  int64_t W = 0;                     // past slots per row in src
  int64_t WS = 0;                    // probs slots per row: W + 1 with the diagonal, W without
  bool diag = false;                 // slot 0 is the row itself
  E scale = 1;                       // 1 / sqrt(D)
  const int64_t* count = nullptr;    // (T) past slots row i reads
  const int64_t* offsets = nullptr;  // (W): past slot s of row i is i − offsets[s]; null: src
  const int64_t* src = nullptr;      // (T,W) >= 0 chunk row, <= −2 past row −(v+2)
  const E* cos = nullptr;            // (T, D/2) RoPE table of the chunk's positions, null: no RoPE
  const E* sin = nullptr;            // (T, D/2)
};

// The row helpers both loops share, in the inline namespace of the including file's vector width
// (mixlab/core/native_vectors.h explains why).
inline namespace MIXLAB_NATIVE_NS {

// Row i's key for slot n (0 = the diagonal when p.diag): a chunk row (>= 0) or a past row (<= −2).
template <typename E>
inline int64_t slot_source(const AttentionRows<E>& p, int64_t i, int64_t n) {
  if (p.diag) {
    if (n == 0) return i;
    --n;
  }
  return p.offsets ? i - p.offsets[n] : p.src[i * p.W + n];
}

// The key row slot_source named: kr's row j, or past key row −(j+2) of pk.
template <typename E>
inline const E* key_row(const E* kr, const E* pk, int64_t j, int64_t D) {
  return j >= 0 ? kr + j * D : pk + (-j - 2) * D;
}

// dst = R_t src: the pairs (d, d + D/2) rotated as rope_apply does; a copy without RoPE.
template <typename E>
inline void rotate_row(const AttentionRows<E>& p, int64_t t, const E* __restrict src, E* __restrict dst) {
  if (!p.cos) {
    std::copy(src, src + p.D, dst);
    return;
  }
  const int64_t half = p.D / 2;
  const E* __restrict c = p.cos + t * half;
  const E* __restrict s = p.sin + t * half;
  for (int64_t d = 0; d < half; ++d) {
    const E a = src[d], b = src[d + half];
    dst[d] = a * c[d] - b * s[d];
    dst[d + half] = a * s[d] + b * c[d];
  }
}

// g = R_tᵀ g in place: the gradient of the rotated row taken back to the raw one.
template <typename E>
inline void rotate_row_back(const AttentionRows<E>& p, int64_t t, E* __restrict g) {
  if (!p.cos) return;
  const int64_t half = p.D / 2;
  const E* __restrict c = p.cos + t * half;
  const E* __restrict s = p.sin + t * half;
  for (int64_t d = 0; d < half; ++d) {
    const E a = g[d], b = g[d + half];
    g[d] = a * c[d] + b * s[d];
    g[d + half] = b * c[d] - a * s[d];
  }
}

}  // namespace MIXLAB_NATIVE_NS

/// Whether the vector loops run head dim D for element type E: with_row_vector has a vector for it
/// on every set.
template <typename E>
constexpr bool supports(int64_t D) {
  return D > 0 && D % ::mixlab::native::row_vector_lanes<E>() == 0;
}

// forward_slice: one (b,h) slice. q, k: row t at q + t·q_stride (D contiguous); pk (Np,D) past
// keys, already rotated (null when none); qr, kr (T,D) out: the rotated rows; probs (T,WS) out,
// written whole. backward_slice: dprobs (T,WS) upstream; dq (T,D) out, written whole; dk (T,D)
// out, zero on entry (rows scatter into the keys they read); scratch: WS elements.
MIXLAB_DECLARE_PER_ISA(
    void forward_slice(const AttentionRows<float>& p, const float* q, int64_t q_stride, const float* k,
                       int64_t k_stride, const float* pk, float* qr, float* kr, float* probs);
    void forward_slice(const AttentionRows<double>& p, const double* q, int64_t q_stride, const double* k,
                       int64_t k_stride, const double* pk, double* qr, double* kr, double* probs);
    void backward_slice(const AttentionRows<float>& p, const float* qr, const float* kr, const float* pk,
                        const float* probs, const float* dprobs, float* dq, float* dk, float* scratch);
    void backward_slice(const AttentionRows<double>& p, const double* qr, const double* kr, const double* pk,
                        const double* probs, const double* dprobs, double* dq, double* dk, double* scratch);)

}  // namespace mixlab::detail::pattern_attention_kernels
