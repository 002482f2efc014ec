// src/resolvent/resolvent_kernel.h — the plain CPU kernels of the resolvent op (private).
//
// Kernels receive a params struct of raw pointers (all contiguous) and contain no checks: the
// boundary (resolvent_op.cpp) validated and packed everything. One (b,h) slice at a time;
// callers parallelise over slices.
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

// Forward substitution: y (T,D); u, w scratch (D).
template <typename scalar_t>
void resolvent_forward_slice(const ResolventParams<scalar_t>& p, scalar_t* __restrict y, scalar_t* __restrict u,
                             scalar_t* __restrict w) {
  const int64_t D = p.D;
  for (int64_t i = 0; i < p.T; ++i) {
    const scalar_t* __restrict xi = p.x + i * D;
    const scalar_t a0 = p.alpha[i * p.WA];
    for (int64_t d = 0; d < D; ++d) u[d] = a0 * xi[d];
    for (int64_t d = 0; d < D; ++d) w[d] = 0;
    const int64_t* row = p.offsets ? nullptr : p.src + i * p.W;
    for (int64_t s = 0; s < p.count[i]; ++s) {
      const int64_t j = row ? row[s] : i - p.offsets[s];
      if (p.WA > 1) {
        const scalar_t a = p.alpha[i * p.WA + s + 1];
        const scalar_t* __restrict xj = j >= 0 ? p.x + j * D : p.px + (-j - 2) * D;
        for (int64_t d = 0; d < D; ++d) u[d] += a * xj[d];
      }
      if (p.WB > 0) {
        const scalar_t b = p.beta[i * p.WB + s];
        const scalar_t* __restrict yj = j >= 0 ? y + j * D : p.py + (-j - 2) * D;
        for (int64_t d = 0; d < D; ++d) w[d] += b * yj[d];
      }
    }
    scalar_t* __restrict yi = y + i * D;
    if (p.gate) {
      const scalar_t* __restrict gi = p.gate + i * D;
      for (int64_t d = 0; d < D; ++d) yi[d] = (scalar_t(1) - gi[d]) * u[d] + gi[d] * w[d];
    } else {
      for (int64_t d = 0; d < D; ++d) yi[d] = u[d] + w[d];
    }
  }
}

template <typename scalar_t>
inline scalar_t dot(const scalar_t* __restrict a, const scalar_t* __restrict b, int64_t D) {
  scalar_t s = 0;
  for (int64_t d = 0; d < D; ++d) s += a[d] * b[d];
  return s;
}

// Transposed solve. Inputs: p (as in forward), y (T,D) the forward output. In/out: h (T,D)
// holds the upstream gradient on entry and H = (I − B)⁻ᵀ G (gated: the total gradient of y) on
// exit. Outputs (zero on entry): dalpha (T,WA), dbeta (T,WB), dx (T,D), dgate (T,D) or null.
// Scratch: hu, hw, u, w (D).
template <typename scalar_t>
void resolvent_backward_slice(const ResolventParams<scalar_t>& p, const scalar_t* __restrict y, scalar_t* __restrict h,
                              scalar_t* __restrict dalpha, scalar_t* __restrict dbeta, scalar_t* __restrict dx,
                              scalar_t* __restrict dgate, scalar_t* __restrict hu, scalar_t* __restrict hw,
                              scalar_t* __restrict u, scalar_t* __restrict w) {
  const int64_t D = p.D;
  for (int64_t i = p.T - 1; i >= 0; --i) {
    const scalar_t* __restrict hi = h + i * D;  // final: every row r > i has scattered into it
    const scalar_t* __restrict xi = p.x + i * D;
    const scalar_t* __restrict gi = p.gate ? p.gate + i * D : nullptr;
    if (gi) {
      for (int64_t d = 0; d < D; ++d) hu[d] = (scalar_t(1) - gi[d]) * hi[d];
      for (int64_t d = 0; d < D; ++d) hw[d] = gi[d] * hi[d];
    } else {
      for (int64_t d = 0; d < D; ++d) hu[d] = hi[d];
      for (int64_t d = 0; d < D; ++d) hw[d] = hi[d];
    }
    const scalar_t a0 = p.alpha[i * p.WA];
    dalpha[i * p.WA] = dot(hu, xi, D);
    {
      scalar_t* __restrict dxi = dx + i * D;
      for (int64_t d = 0; d < D; ++d) dxi[d] += a0 * hu[d];
    }
    if (gi) {
      for (int64_t d = 0; d < D; ++d) u[d] = a0 * xi[d];
      for (int64_t d = 0; d < D; ++d) w[d] = 0;
    }
    const int64_t* row = p.offsets ? nullptr : p.src + i * p.W;
    for (int64_t s = 0; s < p.count[i]; ++s) {
      const int64_t j = row ? row[s] : i - p.offsets[s];
      if (p.WA > 1) {
        const scalar_t a = p.alpha[i * p.WA + s + 1];
        const scalar_t* __restrict xj = j >= 0 ? p.x + j * D : p.px + (-j - 2) * D;
        dalpha[i * p.WA + s + 1] = dot(hu, xj, D);
        if (j >= 0) {
          scalar_t* __restrict dxj = dx + j * D;
          for (int64_t d = 0; d < D; ++d) dxj[d] += a * hu[d];
        }
        if (gi)
          for (int64_t d = 0; d < D; ++d) u[d] += a * xj[d];
      }
      if (p.WB > 0) {
        const scalar_t b = p.beta[i * p.WB + s];
        const scalar_t* __restrict yj = j >= 0 ? y + j * D : p.py + (-j - 2) * D;
        dbeta[i * p.WB + s] = dot(hw, yj, D);
        if (j >= 0) {
          scalar_t* __restrict hj = h + j * D;
          for (int64_t d = 0; d < D; ++d) hj[d] += b * hw[d];
        }
        if (gi)
          for (int64_t d = 0; d < D; ++d) w[d] += b * yj[d];
      }
    }
    if (gi) {
      scalar_t* __restrict dgi = dgate + i * D;
      for (int64_t d = 0; d < D; ++d) dgi[d] = hi[d] * (w[d] - u[d]);
    }
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
template <typename scalar_t>
void resolvent_forward_slice_blocked(const ResolventParams<scalar_t>& p, scalar_t* __restrict y,
                                     scalar_t* __restrict ubuf, scalar_t* __restrict wbuf) {
  const int64_t D = p.D, T = p.T;
  for (int64_t i0 = 0; i0 < T; i0 += kBlockRows) {
    const int64_t i1 = std::min(T, i0 + kBlockRows);
    for (int64_t r = i0; r < i1; ++r) {
      const scalar_t a0 = p.alpha[r * p.WA];
      const scalar_t* __restrict xr = p.x + r * D;
      scalar_t* __restrict u = ubuf + (r - i0) * D;
      scalar_t* __restrict w = wbuf + (r - i0) * D;
      for (int64_t d = 0; d < D; ++d) u[d] = a0 * xr[d];
      for (int64_t d = 0; d < D; ++d) w[d] = 0;
    }
    // Sources before the block, offset-major. Row r reads offset s iff f <= r (s < count[r]).
    for (int64_t s = 0; s < p.W; ++s) {
      const int64_t f = p.offsets[s];
      if (f > i1 - 1) break;  // ascending offsets: no row of this block reads it
      const int64_t rlo = std::max(i0, f), rhi = std::min(i1, i0 + f);
      for (int64_t r = rlo; r < rhi; ++r) {
        const int64_t j = r - f;
        if (p.WA > 1) {
          const scalar_t a = p.alpha[r * p.WA + s + 1];
          const scalar_t* __restrict xj = p.x + j * D;
          scalar_t* __restrict u = ubuf + (r - i0) * D;
          for (int64_t d = 0; d < D; ++d) u[d] += a * xj[d];
        }
        if (p.WB > 0) {
          const scalar_t b = p.beta[r * p.WB + s];
          const scalar_t* __restrict yj = y + j * D;
          scalar_t* __restrict w = wbuf + (r - i0) * D;
          for (int64_t d = 0; d < D; ++d) w[d] += b * yj[d];
        }
      }
    }
    // Sources inside the block, row by row (their y is final when read).
    for (int64_t r = i0; r < i1; ++r) {
      scalar_t* __restrict u = ubuf + (r - i0) * D;
      scalar_t* __restrict w = wbuf + (r - i0) * D;
      for (int64_t s = 0; s < p.count[r] && p.offsets[s] <= r - i0; ++s) {
        const int64_t j = r - p.offsets[s];
        if (p.WA > 1) {
          const scalar_t a = p.alpha[r * p.WA + s + 1];
          const scalar_t* __restrict xj = p.x + j * D;
          for (int64_t d = 0; d < D; ++d) u[d] += a * xj[d];
        }
        if (p.WB > 0) {
          const scalar_t b = p.beta[r * p.WB + s];
          const scalar_t* __restrict yj = y + j * D;
          for (int64_t d = 0; d < D; ++d) w[d] += b * yj[d];
        }
      }
      scalar_t* __restrict yr = y + r * D;
      if (p.gate) {
        const scalar_t* __restrict gr = p.gate + r * D;
        for (int64_t d = 0; d < D; ++d) yr[d] = (scalar_t(1) - gr[d]) * u[d] + gr[d] * w[d];
      } else {
        for (int64_t d = 0; d < D; ++d) yr[d] = u[d] + w[d];
      }
    }
  }
}

// Backward (same contract as resolvent_backward_slice). Scratch: hu, hw, u, w (kBlockRows·D each).
template <typename scalar_t>
void resolvent_backward_slice_blocked(const ResolventParams<scalar_t>& p, const scalar_t* __restrict y,
                                      scalar_t* __restrict h, scalar_t* __restrict dalpha, scalar_t* __restrict dbeta,
                                      scalar_t* __restrict dx, scalar_t* __restrict dgate, scalar_t* __restrict hubuf,
                                      scalar_t* __restrict hwbuf, scalar_t* __restrict ubuf,
                                      scalar_t* __restrict wbuf) {
  const int64_t D = p.D, T = p.T;
  if (T == 0) return;
  for (int64_t i0 = ((T - 1) / kBlockRows) * kBlockRows; i0 >= 0; i0 -= kBlockRows) {
    const int64_t i1 = std::min(T, i0 + kBlockRows);
    // In-block rows, descending: h_r is final (later blocks scattered into it in their
    // out-of-block phase, later rows of this block just now).
    for (int64_t r = i1 - 1; r >= i0; --r) {
      const scalar_t* __restrict hr = h + r * D;
      const scalar_t* __restrict xr = p.x + r * D;
      const scalar_t* __restrict gr = p.gate ? p.gate + r * D : nullptr;
      scalar_t* __restrict hu = hubuf + (r - i0) * D;
      scalar_t* __restrict hw = hwbuf + (r - i0) * D;
      scalar_t* __restrict u = ubuf + (r - i0) * D;
      scalar_t* __restrict w = wbuf + (r - i0) * D;
      if (gr) {
        for (int64_t d = 0; d < D; ++d) hu[d] = (scalar_t(1) - gr[d]) * hr[d];
        for (int64_t d = 0; d < D; ++d) hw[d] = gr[d] * hr[d];
      } else {
        for (int64_t d = 0; d < D; ++d) hu[d] = hr[d];
        for (int64_t d = 0; d < D; ++d) hw[d] = hr[d];
      }
      const scalar_t a0 = p.alpha[r * p.WA];
      dalpha[r * p.WA] = dot(hu, xr, D);
      scalar_t* __restrict dxr = dx + r * D;
      for (int64_t d = 0; d < D; ++d) dxr[d] += a0 * hu[d];
      for (int64_t d = 0; d < D; ++d) u[d] = a0 * xr[d];
      for (int64_t d = 0; d < D; ++d) w[d] = 0;
      for (int64_t s = 0; s < p.count[r] && p.offsets[s] <= r - i0; ++s) {
        const int64_t j = r - p.offsets[s];
        if (p.WA > 1) {
          const scalar_t a = p.alpha[r * p.WA + s + 1];
          const scalar_t* __restrict xj = p.x + j * D;
          dalpha[r * p.WA + s + 1] = dot(hu, xj, D);
          scalar_t* __restrict dxj = dx + j * D;
          for (int64_t d = 0; d < D; ++d) dxj[d] += a * hu[d];
          for (int64_t d = 0; d < D; ++d) u[d] += a * xj[d];
        }
        if (p.WB > 0) {
          const scalar_t b = p.beta[r * p.WB + s];
          const scalar_t* __restrict yj = y + j * D;
          dbeta[r * p.WB + s] = dot(hw, yj, D);
          scalar_t* __restrict hj = h + j * D;
          for (int64_t d = 0; d < D; ++d) hj[d] += b * hw[d];
          for (int64_t d = 0; d < D; ++d) w[d] += b * yj[d];
        }
      }
    }
    // Sources before the block, offset-major: contiguous target rows.
    for (int64_t s = 0; s < p.W; ++s) {
      const int64_t f = p.offsets[s];
      if (f > i1 - 1) break;
      const int64_t rlo = std::max(i0, f), rhi = std::min(i1, i0 + f);
      for (int64_t r = rlo; r < rhi; ++r) {
        const int64_t j = r - f;
        if (p.WA > 1) {
          const scalar_t a = p.alpha[r * p.WA + s + 1];
          const scalar_t* __restrict hu = hubuf + (r - i0) * D;
          const scalar_t* __restrict xj = p.x + j * D;
          dalpha[r * p.WA + s + 1] = dot(hu, xj, D);
          scalar_t* __restrict dxj = dx + j * D;
          for (int64_t d = 0; d < D; ++d) dxj[d] += a * hu[d];
          if (p.gate) {
            scalar_t* __restrict u = ubuf + (r - i0) * D;
            for (int64_t d = 0; d < D; ++d) u[d] += a * xj[d];
          }
        }
        if (p.WB > 0) {
          const scalar_t b = p.beta[r * p.WB + s];
          const scalar_t* __restrict hw = hwbuf + (r - i0) * D;
          const scalar_t* __restrict yj = y + j * D;
          dbeta[r * p.WB + s] = dot(hw, yj, D);
          scalar_t* __restrict hj = h + j * D;
          for (int64_t d = 0; d < D; ++d) hj[d] += b * hw[d];
          if (p.gate) {
            scalar_t* __restrict w = wbuf + (r - i0) * D;
            for (int64_t d = 0; d < D; ++d) w[d] += b * yj[d];
          }
        }
      }
    }
    if (p.gate) {
      for (int64_t r = i0; r < i1; ++r) {
        const scalar_t* __restrict hr = h + r * D;
        const scalar_t* __restrict u = ubuf + (r - i0) * D;
        const scalar_t* __restrict w = wbuf + (r - i0) * D;
        scalar_t* __restrict dg = dgate + r * D;
        for (int64_t d = 0; d < D; ++d) dg[d] = hr[d] * (w[d] - u[d]);
      }
    }
  }
}

}  // namespace mixlab::detail
