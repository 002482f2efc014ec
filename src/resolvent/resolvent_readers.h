// Private: the transposed read table of a chunk, for the resolvent op's gathering backward
// (resolvent_row_kernels.inc). Row i reads source j in slot s; the backward walks the rows from
// the last to the first and gathers, into row j, the gradient of every later row that read it:
// h_j = g_j + Σ β_{i,s} hw_i and dx_j = α_j0 hu_j + Σ α_{i,s+1} hu_i over those (i, s). For
// translation-invariant rows (p.offsets set) the readers of j are i = j + f_s, found from the
// offsets alone; every other table (+cache patterns, chunks that continue a state) is transposed
// here once per call, O(T·W), into lists in ascending reader order. Past rows (j <= −2) have no
// entry: no gradient flows into a state. No LibTorch header: the per-ISA objects include it.
#pragma once

#include <cstdint>
#include <vector>

#include "resolvent_kernel.h"

namespace mixlab::detail {

/// Readers of chunk row j: entries [start[j], start[j + 1]) of (row, slot).
struct ResolventReaders {
  std::vector<int64_t> start;  // (T + 1)
  std::vector<int64_t> row;    // reader row i, ascending within each j
  std::vector<int64_t> slot;   // the slot s of row i that reads j

  bool empty() const { return start.empty(); }
};

/// The readers of every chunk row of p's (T,W) table (p.src); empty for translation-invariant
/// rows (p.offsets), whose readers the kernel derives from the offsets.
template <typename E>
ResolventReaders resolvent_readers(const ResolventParams<E>& p) {
  ResolventReaders r;
  if (p.offsets != nullptr || p.T == 0) return r;
  r.start.assign(static_cast<size_t>(p.T + 1), 0);
  for (int64_t i = 0; i < p.T; ++i)
    for (int64_t s = 0; s < p.count[i]; ++s)
      if (const int64_t j = p.src[i * p.W + s]; j >= 0) ++r.start[j + 1];
  for (int64_t j = 0; j < p.T; ++j) r.start[j + 1] += r.start[j];
  r.row.resize(static_cast<size_t>(r.start[p.T]));
  r.slot.resize(r.row.size());
  std::vector<int64_t> fill(r.start.begin(), r.start.end() - 1);
  for (int64_t i = 0; i < p.T; ++i)  // ascending i: each list comes out in reader order
    for (int64_t s = 0; s < p.count[i]; ++s)
      if (const int64_t j = p.src[i * p.W + s]; j >= 0) {
        r.row[fill[j]] = i;
        r.slot[fill[j]++] = s;
      }
  return r;
}

}  // namespace mixlab::detail
