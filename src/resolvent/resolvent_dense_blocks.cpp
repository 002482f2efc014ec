// The block-diagonal dense solve of seed 000 B.4: see resolvent_dense_blocks.h.
#include "resolvent_dense_blocks.h"

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/resolvent/resolvent.h"

namespace mixlab {
namespace {

// Defaults measured with bench_resolvent (docs/log/benchmarks-2026-11.md, "The block-diagonal dense solve"):
// from a window of 64 the block solve wins both ways (band:64 forward 1.3-1.7x, forward+backward
// about 2x the row kernel); at 32 the forward is at parity, below it loses (band:16 forward
// 0.6x: the panels of a narrow window are mostly zeros). 128-row blocks keep a 4096-row window's
// panel at 2 MiB.
std::atomic<int64_t> g_min_width{64};
std::atomic<int64_t> g_rows{128};

}  // namespace

ResolventDenseBlocks resolvent_dense_blocks() { return {g_min_width.load(), g_rows.load()}; }

void set_resolvent_dense_blocks(const ResolventDenseBlocks& tuning) {
  MIXLAB_CHECK(tuning.min_width >= 1, "set_resolvent_dense_blocks: min_width must be >= 1, got {}", tuning.min_width);
  MIXLAB_CHECK(tuning.rows >= 1, "set_resolvent_dense_blocks: rows must be >= 1, got {}", tuning.rows);
  g_min_width.store(tuning.min_width);
  g_rows.store(tuning.rows);
}

bool resolvent_uses_dense_blocks(const Pattern& pattern, int64_t T) {
  if (!pattern.translation_invariant() || T < 1) return false;
  const auto offsets = pattern.offsets_upto(T - 1);
  return detail::dense_blocks_for(offsets.data(), static_cast<int64_t>(offsets.size()));
}

namespace detail {
namespace {

template <typename scalar_t>
at::Tensor view(const scalar_t* data, int64_t rows, int64_t cols) {
  return torch::from_blob(const_cast<scalar_t*>(data), {rows, cols},
                          torch::TensorOptions().dtype(c10::CppTypeToScalarType<scalar_t>::value));
}

// The rows [r0, r1) of one block and the first row [lo, ...) any of them reads.
struct Block {
  int64_t r0, r1, lo;
  int64_t m() const { return r1 - r0; }
};

Block block_at(int64_t r0, int64_t rows, int64_t T, int64_t W) {
  return {r0, std::min(T, r0 + rows), std::max<int64_t>(0, r0 - W)};
}

// The block's panel and the row-compressed coefficients it is made of: entry [i − r0][j − lo] of
// an m × (r1 − lo) panel is slot i − j − shift of row i for max(lo, i − W) <= j <= i − shift,
// and 0 elsewhere. shift 0: alpha (slot 0 = the diagonal, so the panel is PA); shift 1: beta
// (PB, with its in-block part: the forward reads it for the triangle, the backward multiplies
// it). `to_panel` copies slots into a zeroed panel; otherwise the panel (a product
// M[i][j] = <z_i, v_j>) is read back into the slots, i.e. the coefficient gradient.
template <typename scalar_t>
void panel_slots(const ResolventParams<scalar_t>& p, const Block& b, int64_t shift, int64_t slots, bool to_panel,
                 const scalar_t* coeffs, scalar_t* panel, scalar_t* grad) {
  const int64_t cols = b.r1 - b.lo;
  if (to_panel) std::fill(panel, panel + b.m() * cols, scalar_t(0));
  for (int64_t i = b.r0; i < b.r1; ++i) {
    scalar_t* row = panel + (i - b.r0) * cols;
    const int64_t j0 = std::max(b.lo, i - p.W), base = i * slots + i - shift;  // slot i − j − shift
    if (to_panel) {
      for (int64_t j = j0; j <= i - shift; ++j) row[j - b.lo] = coeffs[base - j];
    } else {
      for (int64_t j = j0; j <= i - shift; ++j) grad[base - j] = row[j - b.lo];
    }
  }
}

template <typename scalar_t>
void panel_a(const ResolventParams<scalar_t>& p, const Block& b, scalar_t* pa) {
  panel_slots<scalar_t>(p, b, 0, p.WA, true, p.alpha, pa, nullptr);
}

template <typename scalar_t>
void panel_b(const ResolventParams<scalar_t>& p, const Block& b, scalar_t* pb) {
  panel_slots<scalar_t>(p, b, 1, p.WB, true, p.beta, pb, nullptr);
}

template <typename scalar_t>
void scatter_slots(const ResolventParams<scalar_t>& p, const Block& b, const scalar_t* M, int64_t shift, int64_t slots,
                   scalar_t* grad) {
  panel_slots<scalar_t>(p, b, shift, slots, false, nullptr, const_cast<scalar_t*>(M), grad);
}

}  // namespace

bool dense_blocks_for(const int64_t* offsets, int64_t W) {
  // Offsets strictly increase from 1, so they are 1..W exactly when the last one is W.
  return offsets != nullptr && W > 0 && offsets[W - 1] == W && W >= g_min_width.load(std::memory_order_relaxed);
}

template <typename scalar_t>
bool dense_blocks_apply(const ResolventParams<scalar_t>& p) {
  return p.Np == 0 && dense_blocks_for(p.offsets, p.W);
}

// u = A x for the block's rows into u (m × D): one GEMM, or the diagonal alone (W_A = 1).
template <typename scalar_t>
void block_ax(const ResolventParams<scalar_t>& p, const Block& b, scalar_t* panel, scalar_t* u) {
  const int64_t D = p.D, m = b.m(), cols = b.r1 - b.lo;
  if (p.WA > 1) {
    panel_a(p, b, panel);
    auto out = view(u, m, D);
    at::mm_out(out, view(panel, m, cols), view(p.x + b.lo * D, cols, D));
  } else {
    for (int64_t i = b.r0; i < b.r1; ++i)
      for (int64_t d = 0; d < D; ++d) u[(i - b.r0) * D + d] = p.alpha[i * p.WA] * p.x[i * D + d];
  }
}

template <typename scalar_t>
void resolvent_forward_slice_dense(const ResolventParams<scalar_t>& p, scalar_t* y) {
  const int64_t T = p.T, D = p.D, W = p.W, rows = g_rows.load(std::memory_order_relaxed);
  const bool kB = p.WB > 0;
  const int64_t mmax = std::min(rows, T);
  std::vector<scalar_t> panel(static_cast<size_t>(mmax * (mmax + W))), w(static_cast<size_t>(mmax * D));
  for (int64_t r0 = 0; r0 < T; r0 += rows) {
    const Block b = block_at(r0, rows, T, W);
    const int64_t m = b.m(), cols = b.r1 - b.lo, before = b.r0 - b.lo;
    scalar_t* u = y + b.r0 * D;  // y's rows hold u = A x until the row's end below
    block_ax(p, b, panel.data(), u);
    std::fill(w.begin(), w.begin() + m * D, scalar_t(0));
    if (kB) {
      panel_b(p, b, panel.data());
      if (before > 0) {
        auto wv = view(w.data(), m, D);
        at::mm_out(wv, view(panel.data(), m, cols).narrow(1, 0, before), view(y + b.lo * D, before, D));
      }
    }
    // Row by row inside the block: w_i += the in-block triangle (rows j < i are final), then
    // y_i = u_i + w_i, or (1 − g_i) ⊙ u_i + g_i ⊙ w_i gated.
    for (int64_t i = b.r0; i < b.r1; ++i) {
      scalar_t* __restrict wi = w.data() + (i - b.r0) * D;
      if (kB) {
        const scalar_t* pb = panel.data() + (i - b.r0) * cols;
        for (int64_t j = std::max(b.r0, i - W); j < i; ++j) {
          const scalar_t c = pb[j - b.lo];
          const scalar_t* __restrict yj = y + j * D;
          for (int64_t d = 0; d < D; ++d) wi[d] += c * yj[d];
        }
      }
      scalar_t* __restrict yi = y + i * D;
      if (p.gate != nullptr) {
        const scalar_t* __restrict gi = p.gate + i * D;
        for (int64_t d = 0; d < D; ++d) yi[d] = (1 - gi[d]) * yi[d] + gi[d] * wi[d];
      } else {
        for (int64_t d = 0; d < D; ++d) yi[d] += wi[d];
      }
    }
  }
}

template <typename scalar_t>
void resolvent_backward_slice_dense(const ResolventParams<scalar_t>& p, const scalar_t* y,
                                    const ResolventGrads<scalar_t>& gr) {
  const int64_t T = p.T, D = p.D, W = p.W, rows = g_rows.load(std::memory_order_relaxed);
  const bool kA = p.WA > 1, kB = p.WB > 0, gated = p.gate != nullptr;
  const int64_t mmax = std::min(rows, T), cap = mmax * (mmax + W);
  std::vector<scalar_t> panel(static_cast<size_t>(cap)), prod(static_cast<size_t>(cap));
  // Gated: du = (1 − g) ⊙ z and dw = g ⊙ z per row (ungated both are z itself), and u, w
  // recomputed for the gate's gradient (w − u) ⊙ z.
  std::vector<scalar_t> du(gated ? static_cast<size_t>(mmax * D) : 0), dw(du.size()), u(du.size()), w(du.size());
  const int64_t last = ((T - 1) / rows) * rows;
  for (int64_t r0 = last; r0 >= 0; r0 -= rows) {
    const Block b = block_at(r0, rows, T, W);
    const int64_t m = b.m(), cols = b.r1 - b.lo, before = b.r0 - b.lo;
    scalar_t* z = gr.h + b.r0 * D;  // final row by row in the triangle below
    const scalar_t* g = gated ? p.gate + b.r0 * D : nullptr;
    if (kB) panel_b(p, b, panel.data());
    // The triangle, from the block's last row up: z_i is final, then it feeds the rows it read.
    for (int64_t i = b.r1 - 1; i >= b.r0; --i) {
      const int64_t ii = i - b.r0;
      const scalar_t* __restrict zi = z + ii * D;
      const scalar_t* dwi = zi;
      if (gated) {
        for (int64_t d = 0; d < D; ++d) {
          dw[ii * D + d] = g[ii * D + d] * zi[d];
          du[ii * D + d] = (1 - g[ii * D + d]) * zi[d];
        }
        dwi = dw.data() + ii * D;
      }
      if (!kB) continue;
      const scalar_t* pb = panel.data() + ii * cols;
      for (int64_t j = std::max(b.r0, i - W); j < i; ++j) {
        const scalar_t c = pb[j - b.lo];
        scalar_t* __restrict hj = gr.h + j * D;
        for (int64_t d = 0; d < D; ++d) hj[d] += c * dwi[d];
      }
    }
    auto zv = view(z, m, D);
    auto dwv = gated ? view(dw.data(), m, D) : zv, duv = gated ? view(du.data(), m, D) : zv;
    // Gated: dgate_i = (w_i − u_i) ⊙ z_i needs w = B y and u = A x of the block's rows again;
    // w while the panel holds PB, u below from the same PA panel as dx.
    if (gated) {
      std::fill(w.begin(), w.begin() + m * D, scalar_t(0));
      if (kB) {
        auto wv = view(w.data(), m, D);
        at::mm_out(wv, view(panel.data(), m, cols), view(y + b.lo * D, cols, D));
      }
    }
    if (kB) {
      auto PB = view(panel.data(), m, cols);
      if (before > 0) view(gr.h + b.lo * D, before, D).addmm_(PB.narrow(1, 0, before).t(), dwv);
      // dbeta: <dw_i, y_j> for the slots row i reads.
      auto dot_y = view(prod.data(), m, cols);
      at::mm_out(dot_y, dwv, view(y + b.lo * D, cols, D).t());
      scatter_slots(p, b, prod.data(), 1, p.WB, gr.dbeta);
    }
    if (kA) {
      panel_a(p, b, panel.data());
      if (gated) {
        auto uv = view(u.data(), m, D);
        at::mm_out(uv, view(panel.data(), m, cols), view(p.x + b.lo * D, cols, D));
      }
      view(gr.dx + b.lo * D, cols, D).addmm_(view(panel.data(), m, cols).t(), duv);
      auto dot_x = view(prod.data(), m, cols);
      at::mm_out(dot_x, duv, view(p.x + b.lo * D, cols, D).t());
      scatter_slots(p, b, prod.data(), 0, p.WA, gr.dalpha);
    } else {
      const scalar_t* dui = gated ? du.data() : z;
      for (int64_t i = b.r0; i < b.r1; ++i) {
        const int64_t ii = i - b.r0;
        const scalar_t a0 = p.alpha[i * p.WA];
        scalar_t s = 0;
        for (int64_t d = 0; d < D; ++d) {
          gr.dx[i * D + d] += a0 * dui[ii * D + d];
          s += dui[ii * D + d] * p.x[i * D + d];
          if (gated) u[ii * D + d] = a0 * p.x[i * D + d];
        }
        gr.dalpha[i * p.WA] = s;
      }
    }
    if (gated)
      for (int64_t k = 0; k < m * D; ++k) gr.dgate[b.r0 * D + k] = (w[k] - u[k]) * z[k];
  }
}

#define MIXLAB_DENSE_BLOCKS(T)                                                   \
  template bool dense_blocks_apply<T>(const ResolventParams<T>&);                \
  template void resolvent_forward_slice_dense<T>(const ResolventParams<T>&, T*); \
  template void resolvent_backward_slice_dense<T>(const ResolventParams<T>&, const T*, const ResolventGrads<T>&);
MIXLAB_DENSE_BLOCKS(float)
MIXLAB_DENSE_BLOCKS(double)
#undef MIXLAB_DENSE_BLOCKS

}  // namespace detail
}  // namespace mixlab
