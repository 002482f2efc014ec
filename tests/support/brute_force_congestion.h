// tests/support/brute_force_congestion.h — the congestion of a pattern by enumerating every
// routing of the copy task (tiny n only): the reference the analysis' exact ILP
// (tests/analysis/analysis_test.cpp) and the design search (tests/analysis/design_test.cpp) are
// checked against.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "mixlab/pattern/pattern.h"

namespace mixlab_test {

/// Minimum over routings of the largest number of paths through one node: source c (0 <= c < n)
/// reaches c + n along edges u -> v with u in P(v) (one hop only for non-recurrent patterns).
inline int64_t brute_force_congestion(const mixlab::Pattern& p, int64_t n) {
  std::vector<std::vector<std::vector<int64_t>>> options(static_cast<size_t>(n));
  for (int64_t c = 0; c < n; ++c) {
    std::vector<int64_t> path{c};
    std::function<void()> extend = [&] {
      int64_t u = path.back();
      if (u == c + n) {
        options[c].push_back(path);
        return;
      }
      for (int64_t v = u + 1; v <= c + n; ++v) {
        auto row = p.row(v);
        if (std::find(row.begin(), row.end(), u) == row.end()) continue;
        if (!p.recurrent() && v != c + n) continue;
        path.push_back(v);
        extend();
        path.pop_back();
      }
    };
    extend();
  }
  int64_t best = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> load(static_cast<size_t>(2 * n), 0);
  std::function<void(int64_t)> choose = [&](int64_t c) {
    if (c == n) {
      best = std::min(best, *std::max_element(load.begin(), load.end()));
      return;
    }
    for (const auto& path : options[c]) {
      for (int64_t v : path) ++load[v];
      if (*std::max_element(load.begin(), load.end()) < best) choose(c + 1);
      for (int64_t v : path) --load[v];
    }
  };
  choose(0);
  return best;
}

}  // namespace mixlab_test
