// src/resolvent/resolvent_dense_blocks.h — the block-diagonal dense solve of seed 000 B.4
// (private to the resolvent op).
//
// For patterns whose row i reads every earlier row within a window (offsets 1, 2, ..., W:
// `dense`, `causal`, `band:W` with a wide W, `offsets:1,2,...,n`), the row-by-row kernels do
// T·W AXPYs of length D and are latency bound (13-16 GF/s forward, far less backward). The same
// solve in blocks of rows is BLAS-3: for a block of m rows, the reads of earlier blocks are one
// (m × ≤W+m) panel times the rows they read, i.e. a GEMM, and only the m×m triangle inside the
// block is solved row by row.
//
// The panels are built from the op's row-compressed coefficients (slot s of row i is column
// i − s − 1), one block at a time: memory O(m·(W + m)) per thread, never T×T.
//
//   forward   rhs = PA·X[lo, r1)  (+ PB·Y[lo, r0)), then the in-block triangle
//   backward  z = (I − B)^-T g by blocks from the last, right-looking: after block J is solved,
//             h[lo, r0) += PB_J^T z_J, dx[lo, r1) += PA_J^T z_J, and the coefficient gradients
//             dalpha_J = z_J X^T, dbeta_J = z_J Y^T read back into the row-compressed slots.
// Gated (y = (1 − g) ⊙ Ax + g ⊙ By): the gate scales each product's rows elementwise, so the
// same GEMMs serve; the backward multiplies by du = (1 − g) ⊙ z and dw = g ⊙ z and recomputes
// u = Ax, w = By per block for the gate's gradient (w − u) ⊙ z.
#pragma once

#include <cstdint>

#include "resolvent_kernel.h"

namespace mixlab::detail {

/// The offsets test of dense_blocks_apply (offsets may be null: not translation-invariant).
bool dense_blocks_for(const int64_t* offsets, int64_t W);

/// Whether the block solve applies: translation-invariant rows from position 0 reading the
/// contiguous offsets 1..W with W >= ResolventDenseBlocks::min_width (gated or not).
template <typename scalar_t>
bool dense_blocks_apply(const ResolventParams<scalar_t>& p);

/// Forward of one slice (p.alpha, p.beta, p.x set): writes y (T,D).
template <typename scalar_t>
void resolvent_forward_slice_dense(const ResolventParams<scalar_t>& p, scalar_t* y);

/// Backward of one slice. gr.h holds the incoming gradient (T,D) and becomes z, the gradient
/// of y's rows; gr.dalpha, gr.dbeta, gr.dx must be zero on entry; gr.dgate is written when gated.
template <typename scalar_t>
void resolvent_backward_slice_dense(const ResolventParams<scalar_t>& p, const scalar_t* y,
                                    const ResolventGrads<scalar_t>& gr);

}  // namespace mixlab::detail
