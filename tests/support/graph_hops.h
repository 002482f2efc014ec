// Breadth-first hop counts on an explicit directed graph (adjacency lists), for tests that check
// a family's path figures against a graph built from its definition (brl, tpsm cost tests).
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

namespace mixlab::testing {

/// Hop count from `source` to every node; -1 where no path.
inline std::vector<int> graph_hops(const std::vector<std::vector<int64_t>>& out, int64_t source) {
  std::vector<int> d(out.size(), -1);
  std::queue<int64_t> q;
  d[static_cast<size_t>(source)] = 0;
  q.push(source);
  while (!q.empty()) {
    const int64_t u = q.front();
    q.pop();
    for (int64_t v : out[static_cast<size_t>(u)])
      if (d[static_cast<size_t>(v)] < 0) d[static_cast<size_t>(v)] = d[static_cast<size_t>(u)] + 1, q.push(v);
  }
  return d;
}

}  // namespace mixlab::testing
