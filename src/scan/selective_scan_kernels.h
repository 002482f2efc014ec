// Private: the selective scan's backward over one block of channels of one batch row, written once
// (selective_scan_kernels.inc), compiled once per instruction set (selective_scan_kernels_*.cpp)
// and picked at run time by selective_scan.cpp. No LibTorch header: the per-ISA objects are built
// with their own -m flags and must not share the precompiled header.
#pragma once

#include <cstdint>

#include "mixlab/core/isa_dispatch.h"

namespace mixlab::detail::selective_scan {

/// Steps per checkpoint chunk of the backward pass: the forward under autograd keeps the state
/// entering every chunk ((T / kScanChunk)·N·C values per row, N/64 of an input at N = 16), and
/// the backward recomputes one chunk at a time.
constexpr int64_t kScanChunk = 64;

/// One batch row's operands and gradients, channels [c0, c1), pointers at the row's start:
/// u, dl, gy, du, ddl (T,C); bm, cm, db, dc (T,N); at, da_row (N,C) (a transposed); d, dd_row (C);
/// h0 (C,N) or null; ckpt the forward's checkpoints ((chunks, N, C), slot 0 unused); work
/// backward_work(N, c1 − c0) elements. da_row, dd_row, db and dc are added to (da_row and dd_row
/// are this row's shares, its blocks own disjoint channels; db and dc this block's share of the
/// sums across channels); du and ddl are written.
template <typename S>
struct ScanBackwardBlock {
  int64_t T = 0, C = 0, N = 0, c0 = 0, c1 = 0;
  const S *u = nullptr, *dl = nullptr, *at = nullptr, *bm = nullptr, *cm = nullptr, *d = nullptr;
  const S *h0 = nullptr, *ckpt = nullptr, *gy = nullptr;
  S *du = nullptr, *ddl = nullptr, *db = nullptr, *dc = nullptr, *da_row = nullptr, *dd_row = nullptr;
  S* work = nullptr;
};

/// Scratch elements the backward needs for a block of W channels: the chunk's states and decay
/// factors (2·kScanChunk·N·W), the carried gradient and the chunk's entry state (2·N·W) and three
/// rows of W per step of the chunk (3·kScanChunk·W).
inline int64_t backward_work(int64_t N, int64_t W) { return (2 * kScanChunk * N + 2 * N + 3 * kScanChunk) * W; }

MIXLAB_DECLARE_PER_ISA(void backward_block(const ScanBackwardBlock<float>& p);
                       void backward_block(const ScanBackwardBlock<double>& p);)

}  // namespace mixlab::detail::selective_scan
