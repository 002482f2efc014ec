// src/resolvent/resolvent_kernel.h — the plain CPU kernels of the resolvent op (private).
//
// Kernels receive a params struct of raw pointers (all contiguous) and contain no checks: the
// boundary (resolvent_op.cpp) validated and packed everything. One (b,h) slice at a time;
// callers parallelise over slices. The facts fixed for a whole call are template flags (picked
// once per call by resolvent_kernel_flags, static_switch.h), not tests in the inner loops:
//   kA        A reads past inputs (W_A > 1; else A is diagonal, W_A = 1)
//   kB        B reads past outputs (W_B > 0; else B = 0, a non-recurrent pattern)
//   kOffsets  row i reads i − offsets[s] (translation-invariant) instead of src (T,W)
//   kGated    y = (1 − g) ⊙ Ax + g ⊙ By instead of Ax + By
#pragma once

#include <algorithm>
#include <cstdint>

namespace mixlab::detail {

template <typename scalar_t>
struct ResolventParams {
  int64_t T = 0;                   // chunk rows
  int64_t D = 0;                   // head dim
  int64_t W = 0;                   // past slots per row in src
  int64_t WA = 0;                  // alpha slots per row: W+1 or 1 (diagonal A)
  int64_t WB = 0;                  // beta slots per row: W or 0 (B = 0)
  int64_t Np = 0;                  // rows of px/py per slice
  const int64_t* src = nullptr;    // (T,W) >=0 chunk row, <=-2 past row -(v+2), -1 unused
  const int64_t* count = nullptr;  // (T) true |P(i)|
  // Translation-invariant fast path: when set, past slot s of row i is i − offsets[s] and src is
  // unused (no (T,W) index is built or read).
  const int64_t* offsets = nullptr;
  // Per-slice pointers (set by the caller for slice bh).
  const scalar_t* alpha = nullptr;  // (T,WA)
  const scalar_t* beta = nullptr;   // (T,WB)
  const scalar_t* gate = nullptr;   // (T,D) or null (ungated)
  const scalar_t* x = nullptr;      // (T,D)
  const scalar_t* px = nullptr;     // (Np,D) past inputs (may be null when unread)
  const scalar_t* py = nullptr;     // (Np,D) past outputs
};

// Gradients of one row, grouped so that the kernels pass them as one argument.
template <typename scalar_t>
struct ResolventGrads {
  scalar_t* h = nullptr;       // (T,D) in: upstream gradient (unless dy is set); out: H = (I − B)⁻ᵀ G
  scalar_t* dalpha = nullptr;  // (T,WA)
  scalar_t* dbeta = nullptr;   // (T,WB)
  scalar_t* dx = nullptr;      // (T,D)
  scalar_t* dgate = nullptr;   // (T,D) or null
  // (T,D) the upstream gradient G where h starts unwritten, or null where h holds G on entry. The
  // register kernel reads row j of G only when it writes row j of H, so it can take G from here and
  // save the copy of G into h: a read and a write of the whole (T,D), a quarter of order:1's
  // backward traffic (resolvent_op.cpp, reads_gradient_in_place, says for which patterns). The
  // plain loops scatter into h and need it to hold G (dy null).
  const scalar_t* dy = nullptr;

  /// The same gradients of slice bh, where these point at slice 0 of (BH,T,·) tensors.
  ResolventGrads slice(int64_t bh, int64_t T, int64_t D, int64_t WA, int64_t WB) const {
    const int64_t off = bh * T * D;
    ResolventGrads s;
    s.h = h + off;
    s.dalpha = dalpha + bh * T * WA;
    s.dbeta = dbeta + bh * T * WB;
    s.dx = dx + off;
    s.dgate = dgate ? dgate + off : nullptr;
    s.dy = dy ? dy + off : nullptr;
    return s;
  }
};

// The loops below are compiled by every file that includes this header, and by the per-ISA objects
// of resolvent_plain_loops.inc with their own -m flags. The inline namespace gives each build its
// own mangled names (kernel_baseline here, kernel_avx2 ... there), so the linker can never hand an
// AVX2 instantiation to a caller on a CPU without AVX2 (the One Definition Rule would otherwise
// let it pick either). The params structs above are shared: they cross between the builds.
#ifndef MIXLAB_RESOLVENT_KERNEL_NS
#define MIXLAB_RESOLVENT_KERNEL_NS kernel_baseline
#endif
inline namespace MIXLAB_RESOLVENT_KERNEL_NS {

// In 16 running sums (lanes of a vector register or two), added as a tree at the end: one
// running sum is an in-order chain GCC may not reorder, and the backward's dα and dβ dots spent
// most of their time in its scalar adds (issue 38).
template <typename scalar_t>
inline scalar_t dot(const scalar_t* __restrict a, const scalar_t* __restrict b, int64_t D) {
  constexpr int64_t kLanes = 16;
  scalar_t acc[kLanes] = {};
  int64_t d = 0;
  for (; d + kLanes <= D; d += kLanes)
#pragma GCC unroll 16
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += a[d + l] * b[d + l];
#pragma GCC unroll 8
  for (int64_t l = 0; l < 8; ++l) acc[l] += acc[l + 8];
#pragma GCC unroll 4
  for (int64_t l = 0; l < 4; ++l) acc[l] += acc[l + 4];
  scalar_t s = (acc[0] + acc[2]) + (acc[1] + acc[3]);
  for (; d < D; ++d) s += a[d] * b[d];
  return s;
}

// Row j of a chunk tensor (j >= 0) or past row −(j+2) of its snapshot (j <= −2).
template <typename scalar_t>
inline const scalar_t* source_row(const scalar_t* chunk, const scalar_t* past, int64_t j, int64_t D) {
  return j >= 0 ? chunk + j * D : past + (-j - 2) * D;
}

// ---- the per-row and per-slot steps every kernel below is made of ---------------------------
// Row i starts: u = α_i0 x_i, w = 0.
template <typename scalar_t>
inline void row_start(const ResolventParams<scalar_t>& p, int64_t i, scalar_t* __restrict u, scalar_t* __restrict w) {
  const scalar_t a0 = p.alpha[i * p.WA];
  const scalar_t* __restrict xi = p.x + i * p.D;
  for (int64_t d = 0; d < p.D; ++d) u[d] = a0 * xi[d];
  for (int64_t d = 0; d < p.D; ++d) w[d] = 0;
}

// Slot s of row i reads source j: u += α_i,s+1 x_j (kA), w += β_i,s y_j (kB).
template <typename scalar_t, bool kA, bool kB>
inline void slot_forward(const ResolventParams<scalar_t>& p, const scalar_t* y, int64_t i, int64_t s, int64_t j,
                         scalar_t* __restrict u, scalar_t* __restrict w) {
  if constexpr (kA) {
    const scalar_t a = p.alpha[i * p.WA + s + 1];
    const scalar_t* __restrict xj = source_row(p.x, p.px, j, p.D);
    for (int64_t d = 0; d < p.D; ++d) u[d] += a * xj[d];
  }
  if constexpr (kB) {
    const scalar_t b = p.beta[i * p.WB + s];
    const scalar_t* __restrict yj = source_row(y, p.py, j, p.D);
    for (int64_t d = 0; d < p.D; ++d) w[d] += b * yj[d];
  }
}

// Row i ends: y_i = u + w, or (1 − g_i) ⊙ u + g_i ⊙ w gated.
template <typename scalar_t, bool kGated>
inline void row_finish(const ResolventParams<scalar_t>& p, int64_t i, const scalar_t* __restrict u,
                       const scalar_t* __restrict w, scalar_t* __restrict yi) {
  if constexpr (kGated) {
    const scalar_t* __restrict gi = p.gate + i * p.D;
    for (int64_t d = 0; d < p.D; ++d) yi[d] = (scalar_t(1) - gi[d]) * u[d] + gi[d] * w[d];
  } else {
    for (int64_t d = 0; d < p.D; ++d) yi[d] = u[d] + w[d];
  }
}

// Backward of row i's own terms, once h_i is final: hu = ∂/∂u, hw = ∂/∂w; dα_i0, dx_i; and, for
// the gate gradient, u and w restarted as in the forward.
template <typename scalar_t, bool kGated>
inline void row_backward_start(const ResolventParams<scalar_t>& p, const ResolventGrads<scalar_t>& g, int64_t i,
                               scalar_t* __restrict hu, scalar_t* __restrict hw, scalar_t* __restrict u,
                               scalar_t* __restrict w) {
  const int64_t D = p.D;
  const scalar_t* __restrict hi = g.h + i * D;
  if constexpr (kGated) {
    const scalar_t* __restrict gi = p.gate + i * D;
    for (int64_t d = 0; d < D; ++d) hu[d] = (scalar_t(1) - gi[d]) * hi[d];
    for (int64_t d = 0; d < D; ++d) hw[d] = gi[d] * hi[d];
  } else {
    for (int64_t d = 0; d < D; ++d) hu[d] = hi[d];
    for (int64_t d = 0; d < D; ++d) hw[d] = hi[d];
  }
  const scalar_t a0 = p.alpha[i * p.WA];
  const scalar_t* __restrict xi = p.x + i * D;
  g.dalpha[i * p.WA] = dot(hu, xi, D);
  scalar_t* __restrict dxi = g.dx + i * D;
  for (int64_t d = 0; d < D; ++d) dxi[d] += a0 * hu[d];
  if constexpr (kGated) row_start(p, i, u, w);
}

// Backward of slot s of row i (source j): dα, dβ, scatter into dx_j and h_j for chunk sources
// (j >= 0), and u, w re-accumulated for the gate gradient.
template <typename scalar_t, bool kA, bool kB, bool kGated>
inline void slot_backward(const ResolventParams<scalar_t>& p, const scalar_t* y, const ResolventGrads<scalar_t>& g,
                          int64_t i, int64_t s, int64_t j, const scalar_t* __restrict hu, const scalar_t* __restrict hw,
                          scalar_t* __restrict u, scalar_t* __restrict w) {
  const int64_t D = p.D;
  if constexpr (kA) {
    const scalar_t a = p.alpha[i * p.WA + s + 1];
    const scalar_t* __restrict xj = source_row(p.x, p.px, j, D);
    g.dalpha[i * p.WA + s + 1] = dot(hu, xj, D);
    if (j >= 0) {
      scalar_t* __restrict dxj = g.dx + j * D;
      for (int64_t d = 0; d < D; ++d) dxj[d] += a * hu[d];
    }
    if constexpr (kGated)
      for (int64_t d = 0; d < D; ++d) u[d] += a * xj[d];
  }
  if constexpr (kB) {
    const scalar_t b = p.beta[i * p.WB + s];
    const scalar_t* __restrict yj = source_row(y, p.py, j, D);
    g.dbeta[i * p.WB + s] = dot(hw, yj, D);
    if (j >= 0) {
      scalar_t* __restrict hj = g.h + j * D;
      for (int64_t d = 0; d < D; ++d) hj[d] += b * hw[d];
    }
    if constexpr (kGated)
      for (int64_t d = 0; d < D; ++d) w[d] += b * yj[d];
  }
}

// dg_i = h_i ⊙ (w − u) once row i's u, w are complete.
template <typename scalar_t>
inline void row_backward_gate(const ResolventParams<scalar_t>& p, const ResolventGrads<scalar_t>& g, int64_t i,
                              const scalar_t* __restrict u, const scalar_t* __restrict w) {
  const scalar_t* __restrict hi = g.h + i * p.D;
  scalar_t* __restrict dgi = g.dgate + i * p.D;
  for (int64_t d = 0; d < p.D; ++d) dgi[d] = hi[d] * (w[d] - u[d]);
}

// ---- row kernels --------------------------------------------------------------------------
// Forward substitution: y (T,D); u, w scratch (D).
template <typename scalar_t, bool kA, bool kB, bool kOffsets, bool kGated>
void resolvent_forward_slice(const ResolventParams<scalar_t>& p, scalar_t* __restrict y, scalar_t* __restrict u,
                             scalar_t* __restrict w) {
  for (int64_t i = 0; i < p.T; ++i) {
    row_start(p, i, u, w);
    const int64_t* row = kOffsets ? nullptr : p.src + i * p.W;
    for (int64_t s = 0; s < p.count[i]; ++s)
      slot_forward<scalar_t, kA, kB>(p, y, i, s, kOffsets ? i - p.offsets[s] : row[s], u, w);
    row_finish<scalar_t, kGated>(p, i, u, w, y + i * p.D);
  }
}

// Transposed solve. Inputs: p (as in forward), y (T,D) the forward output. g.h holds the
// upstream gradient on entry and H = (I − B)⁻ᵀ G (gated: the total gradient of y) on exit; the
// other gradients are zero on entry. Scratch: hu, hw, u, w (D).
template <typename scalar_t, bool kA, bool kB, bool kOffsets, bool kGated>
void resolvent_backward_slice(const ResolventParams<scalar_t>& p, const scalar_t* __restrict y,
                              const ResolventGrads<scalar_t>& g, scalar_t* __restrict hu, scalar_t* __restrict hw,
                              scalar_t* __restrict u, scalar_t* __restrict w) {
  for (int64_t i = p.T - 1; i >= 0; --i) {  // h_i is final: every row r > i has scattered into it
    row_backward_start<scalar_t, kGated>(p, g, i, hu, hw, u, w);
    const int64_t* row = kOffsets ? nullptr : p.src + i * p.W;
    for (int64_t s = 0; s < p.count[i]; ++s)
      slot_backward<scalar_t, kA, kB, kGated>(p, y, g, i, s, kOffsets ? i - p.offsets[s] : row[s], hu, hw, u, w);
    if constexpr (kGated) row_backward_gate(p, g, i, u, w);
  }
}

// ---------------------------------------------------------------------------------------------
// Blocked forward substitution for translation-invariant rows (p.offsets set, no past): seed 000
// B.4 on a CPU. Rows go in blocks [i0, i1) of kBlockRows. For one offset f the rows of a block
// whose source lies before the block read the *contiguous* rows [max(i0,f) − f, min(i1,i0+f) − f),
// so those contributions are accumulated offset by offset (streaming reads instead of one far,
// cache-missing row per (row, slot)); then the sources inside the block go row by row. The
// backward mirrors it: in-block rows descending, then the out-of-block scatter offset by offset.
constexpr int64_t kBlockRows = 64;

// Forward. Scratch: u, w (kBlockRows·D).
template <typename scalar_t, bool kA, bool kB, bool kGated>  // rows are always offsets here
void resolvent_forward_slice_blocked(const ResolventParams<scalar_t>& p, scalar_t* __restrict y,
                                     scalar_t* __restrict ubuf, scalar_t* __restrict wbuf) {
  const int64_t D = p.D, T = p.T;
  for (int64_t i0 = 0; i0 < T; i0 += kBlockRows) {
    const int64_t i1 = std::min(T, i0 + kBlockRows);
    for (int64_t r = i0; r < i1; ++r) row_start(p, r, ubuf + (r - i0) * D, wbuf + (r - i0) * D);
    // Sources before the block, offset-major. Row r reads offset s iff f <= r (s < count[r]).
    for (int64_t s = 0; s < p.W; ++s) {
      const int64_t f = p.offsets[s];
      if (f > i1 - 1) break;  // ascending offsets: no row of this block reads it
      const int64_t rlo = std::max(i0, f), rhi = std::min(i1, i0 + f);
      for (int64_t r = rlo; r < rhi; ++r)
        slot_forward<scalar_t, kA, kB>(p, y, r, s, r - f, ubuf + (r - i0) * D, wbuf + (r - i0) * D);
    }
    // Sources inside the block, row by row (their y is final when read).
    for (int64_t r = i0; r < i1; ++r) {
      scalar_t* __restrict u = ubuf + (r - i0) * D;
      scalar_t* __restrict w = wbuf + (r - i0) * D;
      for (int64_t s = 0; s < p.count[r] && p.offsets[s] <= r - i0; ++s)
        slot_forward<scalar_t, kA, kB>(p, y, r, s, r - p.offsets[s], u, w);
      row_finish<scalar_t, kGated>(p, r, u, w, y + r * D);
    }
  }
}

// Backward (same contract as resolvent_backward_slice). Scratch: hu, hw, u, w (kBlockRows·D each).
template <typename scalar_t, bool kA, bool kB, bool kGated>  // rows are always offsets here
void resolvent_backward_slice_blocked(const ResolventParams<scalar_t>& p, const scalar_t* __restrict y,
                                      const ResolventGrads<scalar_t>& g, scalar_t* __restrict hubuf,
                                      scalar_t* __restrict hwbuf, scalar_t* __restrict ubuf,
                                      scalar_t* __restrict wbuf) {
  const int64_t D = p.D, T = p.T;
  if (T == 0) return;
  for (int64_t i0 = ((T - 1) / kBlockRows) * kBlockRows; i0 >= 0; i0 -= kBlockRows) {
    const int64_t i1 = std::min(T, i0 + kBlockRows);
    // In-block rows, descending: h_r is final (later blocks scattered into it in their
    // out-of-block phase, later rows of this block just now).
    for (int64_t r = i1 - 1; r >= i0; --r) {
      scalar_t* __restrict hu = hubuf + (r - i0) * D;
      scalar_t* __restrict hw = hwbuf + (r - i0) * D;
      scalar_t* __restrict u = ubuf + (r - i0) * D;
      scalar_t* __restrict w = wbuf + (r - i0) * D;
      row_backward_start<scalar_t, kGated>(p, g, r, hu, hw, u, w);
      for (int64_t s = 0; s < p.count[r] && p.offsets[s] <= r - i0; ++s)
        slot_backward<scalar_t, kA, kB, kGated>(p, y, g, r, s, r - p.offsets[s], hu, hw, u, w);
    }
    // Sources before the block, offset-major: contiguous target rows.
    for (int64_t s = 0; s < p.W; ++s) {
      const int64_t f = p.offsets[s];
      if (f > i1 - 1) break;
      const int64_t rlo = std::max(i0, f), rhi = std::min(i1, i0 + f);
      for (int64_t r = rlo; r < rhi; ++r)
        slot_backward<scalar_t, kA, kB, kGated>(p, y, g, r, s, r - f, hubuf + (r - i0) * D, hwbuf + (r - i0) * D,
                                                ubuf + (r - i0) * D, wbuf + (r - i0) * D);
    }
    if constexpr (kGated)
      for (int64_t r = i0; r < i1; ++r) row_backward_gate(p, g, r, ubuf + (r - i0) * D, wbuf + (r - i0) * D);
  }
}

}  // namespace MIXLAB_RESOLVENT_KERNEL_NS
}  // namespace mixlab::detail
