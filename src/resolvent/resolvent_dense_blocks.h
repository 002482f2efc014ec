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
// Ungated only (a gate makes B differ per channel, so there is no shared matrix to multiply).
#pragma once

#include <cstdint>

#include "resolvent_kernel.h"

namespace mixlab::detail {

/// The offsets test of dense_blocks_apply (offsets may be null: not translation-invariant).
bool dense_blocks_for(const int64_t* offsets, int64_t W, bool gated);

/// Whether the block solve applies: translation-invariant rows from position 0 reading the
/// contiguous offsets 1..W, ungated, and W at least dense_block_min_width().
template <typename scalar_t>
bool dense_blocks_apply(const ResolventParams<scalar_t>& p, bool gated);

/// Forward of one slice (p.alpha, p.beta, p.x set): writes y (T,D).
template <typename scalar_t>
void resolvent_forward_slice_dense(const ResolventParams<scalar_t>& p, scalar_t* y);

/// Backward of one slice. gr.h holds the incoming gradient g (T,D) and becomes z = (I − B)^-T g;
/// gr.dalpha, gr.dbeta, gr.dx must be zero on entry.
template <typename scalar_t>
void resolvent_backward_slice_dense(const ResolventParams<scalar_t>& p, const scalar_t* y,
                                    const ResolventGrads<scalar_t>& gr);

}  // namespace mixlab::detail
