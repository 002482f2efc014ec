// Private: the resolvent op's forward substitution on one (batch, head) slice with the row's
// accumulators in registers, and its backward in the same layout, compiled once per instruction set
// (resolvent_row_kernels_*.cpp) and picked at run time by resolvent_op.cpp through mixlab/core/cpu_isa.h.
//
// Why a second forward next to resolvent_kernel.h's: the plain row and blocked loops keep u and
// w (one row, or a block of rows) in memory and run one loop over D per slot, so every slot costs
// a load and a store of the accumulators; at T = 65536 pow2 they reached 3 GB/s of real bytes on
// one thread, 10 % of memcpy (docs/log/benchmarks-2026-11.md, resolvent section). Here a row is cut into
// column chunks of kChunkVectors native vectors whose u and w stay in registers while every slot
// of the row is read, so a slot costs its two source rows and two FMAs per vector. Row i's own
// term α_i0 x_i starts u; y_i = u + w, or (1 − g_i) ⊙ u + g_i ⊙ w gated: the same arithmetic as
// resolvent_forward_slice, summed in the same slot order per element, so the results agree with
// it to rounding (same order: bit-identical up to FMA contraction). The backward gathers where
// the plain loops scatter (each row collects the gradient of the later rows that read it), so
// its sums run in another order: equal to the plain backward to rounding, not bit for bit.
//
// Needs D in whole 16-byte vectors (a multiple of 4 floats or 2 doubles): a row runs in the widest
// vector of the set whose lanes divide D (with_row_vector, mixlab/core/native_vectors.h), so MAD's
// head dim of 8 floats runs in ymm registers under AVX-512. The caller falls back to
// resolvent_kernel.h otherwise. No LibTorch header: the per-ISA objects are built with their own
// -m flags.
#pragma once

#include <cstdint>

#include "mixlab/core/isa_dispatch.h"
#include "mixlab/core/native_vectors.h"
#include "resolvent_kernel.h"
#include "resolvent_readers.h"

namespace mixlab::detail::resolvent_rows {

/// Whether forward_slice and backward_slice support head dim D for element type E.
template <typename E>
constexpr bool supports(int64_t D) {
  return D > 0 && D % ::mixlab::native::row_vector_lanes<E>() == 0;
}

/// What forward_slice reads: the flags of resolvent_kernel.h as run-time values (checked once per
/// slice, outside the row loop).
struct RowFlags {
  bool a = false;      // A reads past inputs (WA > 1)
  bool b = false;      // B reads past outputs (WB > 0)
  bool gated = false;  // p.gate set
};

// backward_slice: the transposed solve of one slice in the same layout, gathering (rows from the
// last to the first, see resolvent_readers.h). g as resolvent_backward_slice's in
// resolvent_kernel.h: h holds the upstream gradient on entry and H = (I − B)⁻ᵀ G on exit; dalpha,
// dbeta are zero on entry; dx and dgate (when gated) are written whole. readers: the slice's
// resolvent_readers (empty for offset rows).
MIXLAB_DECLARE_PER_ISA(void forward_slice(const ResolventParams<float>& p, RowFlags flags, float* y);
                       void forward_slice(const ResolventParams<double>& p, RowFlags flags, double* y);
                       void backward_slice(const ResolventParams<float>& p, RowFlags flags,
                                           const ResolventReaders& readers, const float* y,
                                           const ResolventGrads<float>& g);
                       void backward_slice(const ResolventParams<double>& p, RowFlags flags,
                                           const ResolventReaders& readers, const double* y,
                                           const ResolventGrads<double>& g);)

}  // namespace mixlab::detail::resolvent_rows
