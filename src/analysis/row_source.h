// src/analysis/row_source.h — private: the rows P(i) of a pattern for a fixed T, computed with the
// offsets and lattice steps precomputed once (Pattern::row recomputes them per call, which is
// too slow for the +cache rows of a 2^16-token analysis).
#pragma once

#include <cstdint>
#include <vector>

#include "mixlab/pattern/pattern.h"

namespace mixlab::analysis_detail {

class RowSource {
 public:
  RowSource(const Pattern& p, int64_t T);

  /// P(i), 0-based, nearest first (descending), into `out` (cleared first).
  void row(int64_t i, std::vector<int64_t>& out) const;
  /// |P(i)|.
  int64_t row_size(int64_t i) const;
  /// The oldest position row i reads (the last of row(i)), or -1 when the row is empty. O(log K).
  int64_t oldest(int64_t i) const;

  /// The offsets f(0) < f(1) < ... that are <= T - 1.
  const std::vector<int64_t>& offsets() const { return f_; }
  bool cache_efficient() const { return cache_; }

 private:
  bool cache_ = false;
  std::vector<int64_t> f_;  // offsets <= T - 1
  std::vector<int64_t> a_;  // lattice steps a_k (Prop. 4.12), +cache only
};

}  // namespace mixlab::analysis_detail
