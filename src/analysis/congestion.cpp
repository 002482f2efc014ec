// Routings of the copy task and their congestion (see mixlab/analysis/congestion.h).
// The exact integer program lives in congestion_ilp.cpp.
#include "mixlab/analysis/congestion.h"

#include <algorithm>
#include <utility>

#include "mixlab/analysis/metrics.h"
#include "mixlab/core/error.h"

namespace mixlab {
namespace {

void check_n(const char* fn, int64_t n) {
  MIXLAB_CHECK(n >= 1, "{}: n must be >= 1, got {}", fn, n);
  MIXLAB_CHECK(2 * n <= kAnalysisMaxT, "{}: 2n = {} exceeds the analysis limit {}", fn, 2 * n, kAnalysisMaxT);
}

}  // namespace

void routing_validate(const Pattern& p, const Routing& r) {
  MIXLAB_ASSERT(static_cast<int64_t>(r.paths.size()) == r.n, "routing has {} paths, expected n = {}", r.paths.size(),
                r.n);
  for (int64_t c = 0; c < r.n; ++c) {
    const auto& path = r.paths[c];
    MIXLAB_ASSERT(!path.empty() && path.front() == c && path.back() == c + r.n, "path {} does not join {} to {}", c, c,
                  c + r.n);
    MIXLAB_ASSERT(p.recurrent() || path.size() == 2, "path {} of non-recurrent '{}' has {} nodes", c, p.spec(),
                  path.size());
    for (size_t k = 1; k < path.size(); ++k) {
      auto row = p.row(path[k]);
      MIXLAB_ASSERT(std::find(row.begin(), row.end(), path[k - 1]) != row.end(),
                    "path {}: {} -> {} is not an edge of {}", c, path[k - 1], path[k], p.spec());
    }
  }
}

std::vector<int64_t> routing_loads(const Routing& r) {
  std::vector<int64_t> load(static_cast<size_t>(2 * r.n), 0);
  for (const auto& path : r.paths)
    for (int64_t v : path) ++load[v];
  return load;
}

int64_t routing_congestion(const Routing& r) {
  auto load = routing_loads(r);
  return load.empty() ? 0 : *std::max_element(load.begin(), load.end());
}

namespace {

// One shortest decomposition of n into offsets (the steps of the shifted path), largest first.
std::vector<int64_t> shortest_decomposition(const Pattern& p, int64_t n, const char* fn) {
  check_n(fn, n);
  MIXLAB_CHECK(p.translation_invariant(), "{}: pattern '{}' is not translation-invariant (Prop. 4.8 needs shifts)", fn,
               p.spec());
  auto d = analysis_distance_by_difference(p, n + 1);
  MIXLAB_CHECK(d[n] != kUnreachable, "{}: pattern '{}' has no path of length n = {}", fn, p.spec(), n);
  // Repeatedly take the largest offset that keeps the rest shortest.
  auto f = p.offsets_upto(n);
  std::vector<int64_t> steps;
  for (int64_t rest = n; rest > 0;) {
    int64_t chosen = -1;
    for (auto it = std::upper_bound(f.begin(), f.end(), rest); it != f.begin();) {
      --it;
      if (d[rest - *it] != kUnreachable && d[rest - *it] == d[rest] - 1) {
        chosen = *it;
        break;
      }
    }
    MIXLAB_ASSERT(chosen > 0, "no decomposition step from {}", rest);
    steps.push_back(chosen);
    rest -= chosen;
  }
  return steps;
}

}  // namespace

Routing congestion_shifted_routing(const Pattern& p, int64_t n) {
  auto steps = shortest_decomposition(p, n, "congestion_shifted_routing");
  Routing r;
  r.n = n;
  r.paths.resize(static_cast<size_t>(n));
  for (int64_t c = 0; c < n; ++c) {
    auto& path = r.paths[c];
    path.push_back(c);
    for (int64_t s : steps) path.push_back(path.back() + s);
  }
  return r;
}

int64_t congestion_shifted_value(const Pattern& p, int64_t n) {
  auto steps = shortest_decomposition(p, n, "congestion_shifted_value");
  // Path c visits c + q for every prefix sum q; node v is visited by the paths c = v - q in [0, n).
  std::vector<int64_t> diff(static_cast<size_t>(2 * n) + 1, 0);
  int64_t q = 0;
  for (size_t k = 0; k <= steps.size(); ++k) {
    diff[q] += 1;
    diff[q + n] -= 1;
    if (k < steps.size()) q += steps[k];
  }
  int64_t run = 0, best = 0;
  for (int64_t v = 0; v < 2 * n; ++v) {
    run += diff[v];
    best = std::max(best, run);
  }
  return best;
}

Routing congestion_shortest_routing(const Pattern& p, int64_t n) {
  check_n("congestion_shortest_routing", n);
  PatternGraph g = pattern_graph_build(p, 2 * n);
  Routing r;
  r.n = n;
  r.paths.resize(static_cast<size_t>(n));
  for (int64_t c = 0; c < n; ++c) {
    auto dist = graph_distances_from(g, c, c + n);
    MIXLAB_CHECK(dist[c + n] != kUnreachable, "congestion_shortest_routing: pattern '{}' has no path {} -> {}",
                 p.spec(), c, c + n);
    auto& path = r.paths[c];
    for (int64_t v = c + n;;) {
      path.push_back(v);
      if (v == c) break;
      int64_t next = -1;
      for (int64_t e = g.start[v]; e < g.start[v + 1]; ++e) {
        int64_t q = g.pred[e];
        if (q < c) break;
        if (dist[q] != kUnreachable && dist[q] == dist[v] - 1) {
          next = q;
          break;
        }
      }
      MIXLAB_ASSERT(next >= 0, "no predecessor on a shortest path at {}", v);
      v = next;
    }
    std::reverse(path.begin(), path.end());
  }
  return r;
}

Routing congestion_heuristic(const Pattern& p, const Routing& start, int max_passes, int64_t lower_bound) {
  const int64_t n = start.n;
  check_n("congestion_heuristic", n);
  MIXLAB_CHECK(max_passes >= 0, "congestion_heuristic: max_passes must be >= 0, got {}", max_passes);
  Routing best = start;
  if (!p.recurrent()) return best;  // single-edge paths: the routing is forced
  PatternGraph g = pattern_graph_build(p, 2 * n);
  Routing cur = start;
  auto load = routing_loads(cur);
  // Potential compared between passes: (congestion, nodes at that congestion).
  auto potential = [&](const std::vector<int64_t>& l) {
    int64_t m = *std::max_element(l.begin(), l.end());
    return std::make_pair(m, static_cast<int64_t>(std::count(l.begin(), l.end(), m)));
  };
  auto best_pot = potential(load);
  std::vector<int64_t> key_max(static_cast<size_t>(2 * n)), key_sum(static_cast<size_t>(2 * n)),
      parent(static_cast<size_t>(2 * n));
  for (int pass = 0; pass < max_passes && best_pot.first > lower_bound; ++pass) {
    for (int64_t c = 0; c < n; ++c) {
      for (int64_t v : cur.paths[c]) --load[v];
      // DP over the DAG inside the window [c, c + n]: best (bottleneck, sum of squares) to v.
      key_max[c] = load[c] + 1;
      key_sum[c] = (load[c] + 1) * (load[c] + 1);
      parent[c] = -1;
      for (int64_t v = c + 1; v <= c + n; ++v) {
        key_max[v] = -1;
        int64_t lv = load[v] + 1;
        for (int64_t e = g.start[v]; e < g.start[v + 1]; ++e) {
          int64_t q = g.pred[e];
          if (q < c) break;
          if (key_max[q] < 0) continue;
          int64_t m = std::max(key_max[q], lv), s = key_sum[q] + lv * lv;
          if (key_max[v] < 0 || m < key_max[v] || (m == key_max[v] && s < key_sum[v])) {
            key_max[v] = m;
            key_sum[v] = s;
            parent[v] = q;
          }
        }
      }
      MIXLAB_ASSERT(key_max[c + n] >= 0, "heuristic lost the path {} -> {}", c, c + n);
      auto& path = cur.paths[c];
      path.clear();
      for (int64_t v = c + n; v >= 0; v = parent[v]) path.push_back(v);
      std::reverse(path.begin(), path.end());
      for (int64_t v : path) ++load[v];
    }
    auto pot = potential(load);
    if (pot < best_pot) {
      best_pot = pot;
      best = cur;
    } else {
      break;  // a pass without progress: later passes would repeat the same choices
    }
  }
  return best;
}

}  // namespace mixlab
