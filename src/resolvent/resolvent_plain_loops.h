// Private: the resolvent op's plain loops (resolvent_kernel.h's row and blocked kernels, and the
// dense block solve where it applies) over a range of (batch, head) slices, built once per
// instruction set (resolvent_plain_loops_*.cpp, from resolvent_plain_loops.inc) and picked per
// call by resolvent_op.cpp with MIXLAB_ISA_SELECT (mixlab/core/isa_dispatch.h), like every other
// native kernel. The forward and the backward run here when the register kernels of
// resolvent_row_kernels.h do not apply (D not a multiple of the vector lanes, the dense block
// solve, or the plain loops forced by ResolventPlainLoopsGuard). No LibTorch header: the per-ISA
// objects are built with their own -m flags.
#pragma once

#include <cstdint>

#include "mixlab/core/isa_dispatch.h"
#include "resolvent_kernel.h"

namespace mixlab::detail::resolvent_loops {

/// Where slice 0 of each input starts; slice bh of a (BH,T,·) input is offset by bh·T·width, of
/// the past snapshots by bh·np·D. gate, px, py may be null.
template <typename E>
struct SlicePointers {
  const E* alpha = nullptr;  // (BH,T,WA)
  const E* beta = nullptr;   // (BH,T,WB)
  const E* gate = nullptr;   // (BH,T,D) or null
  const E* x = nullptr;      // (BH,T,D)
  const E* px = nullptr;     // (BH,npx,D) or null
  const E* py = nullptr;     // (BH,npy,D) or null
  int64_t npx = 0, npy = 0;  // rows per slice of px / py

  /// `base` with slice bh's pointers set.
  ResolventParams<E> at(ResolventParams<E> p, int64_t bh) const {
    p.alpha = alpha + bh * p.T * p.WA;
    p.beta = beta + bh * p.T * p.WB;
    p.gate = gate ? gate + bh * p.T * p.D : nullptr;
    p.x = x + bh * p.T * p.D;
    p.px = px ? px + bh * npx * p.D : nullptr;
    p.py = py ? py + bh * npy * p.D : nullptr;
    return p;
  }
};

// forward_slices: y (BH,T,D) rows of slices [begin, end). backward_slices: g holds slice 0's
// gradient pointers (h in/out, dalpha, dbeta, dx zero on entry, dgate when gated); y is the
// forward's output. use_blocked: the offset-by-offset blocked kernels (rows reading far back).
MIXLAB_DECLARE_PER_ISA(void forward_slices(const ResolventParams<float>& base, const SlicePointers<float>& in,
                                           bool use_blocked, float* y, int64_t begin, int64_t end);
                       void forward_slices(const ResolventParams<double>& base, const SlicePointers<double>& in,
                                           bool use_blocked, double* y, int64_t begin, int64_t end);
                       void backward_slices(const ResolventParams<float>& base, const SlicePointers<float>& in,
                                            bool use_blocked, const float* y, const ResolventGrads<float>& g,
                                            int64_t begin, int64_t end);
                       void backward_slices(const ResolventParams<double>& base, const SlicePointers<double>& in,
                                            bool use_blocked, const double* y, const ResolventGrads<double>& g,
                                            int64_t begin, int64_t end);)

}  // namespace mixlab::detail::resolvent_loops
