// mixlab/analysis/congestion.h — congestion of the copy routing (seed 000 Def. 4.6, Props. 4.7-4.8).
//
// The copy task on 2n nodes (0-based positions 0..2n-1) routes input c to output c + n along the
// communication graph (edge u -> v iff u ∈ P(v)), for c = 0..n-1. The node congestion of a routing
// is the largest number of paths visiting one node, endpoints included. For a non-recurrent
// pattern (causal, band:W: B = 0) a path is a single edge c -> c + n, so the routing is forced.
//
//   - lower bound (Prop. 4.7): ceil((d + 1) / 2), d = min over c of d(c, c + n);
//   - shifted routing (Prop. 4.8, translation-invariant only): the path of c is one shortest
//     decomposition of n shifted by c;
//   - shortest-path routing (any pattern): each path a shortest path, found on the graph;
//   - heuristic: rip-up-and-reroute from a start routing; each commodity in turn is removed and
//     re-routed by a DP over the DAG minimising (max load on the path, sum of squared loads).
//     Never returns a routing worse than its start. O(passes · n · nnz of the 2n-node window);
//   - exact: an integer program (GLPK): binary unit flows per commodity on the edges inside its
//     window [c, c + n], node loads <= C, minimise C. Meant for n <= 32; a time limit stops it
//     and the result then says it is not proven optimal.
//
// Not supported: n < 1 (throws), or a pattern with no path from c to c + n (routings throw; the
// analysis reports congestion ∞ instead of calling them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixlab/pattern/pattern.h"

namespace mixlab {

/// n paths; path c lists the nodes from c to c + n in increasing order.
struct Routing {
  int64_t n = 0;
  std::vector<std::vector<int64_t>> paths;
};

/// Checks that every path of `r` starts at c, ends at c + n and follows edges of `p`; throws
/// mixlab::InternalError otherwise (routings are built by mixlab, so a bad one is a bug).
void routing_validate(const Pattern& p, const Routing& r);
/// Number of paths visiting each node 0..2n-1.
std::vector<int64_t> routing_loads(const Routing& r);
/// max over nodes of routing_loads.
int64_t routing_congestion(const Routing& r);

/// Shifted routing of Prop. 4.8. Requires p.translation_invariant() and a path of length d(n).
Routing congestion_shifted_routing(const Pattern& p, int64_t n);
/// Congestion of the shifted routing counted without building it (a difference array over the
/// D + 1 prefix sums of the decomposition): O(n + D). Same requirements as above.
int64_t congestion_shifted_value(const Pattern& p, int64_t n);
/// Each path a shortest path (any pattern). O(n · nnz of the window).
Routing congestion_shortest_routing(const Pattern& p, int64_t n);
/// Rip-up-and-reroute from `start`; stops after `max_passes` passes, when a pass gives no
/// improvement, or when the congestion reaches `lower_bound`. Returns the best routing seen.
Routing congestion_heuristic(const Pattern& p, const Routing& start, int max_passes, int64_t lower_bound);

struct ExactCongestion {
  int64_t value = -1;    // best congestion found (-1: none found)
  bool optimal = false;  // proven optimal by the solver
  std::string status;    // "optimal", "not proven optimal (time limit)", "no solution found"
  Routing routing;       // the routing achieving `value`
};
/// Exact minimum congestion by the integer program above. `lower` and `upper` are known bounds
/// (upper: congestion of a known routing; pass n if none). Throws mixlab::Error for n > 64.
ExactCongestion congestion_exact_ilp(const Pattern& p, int64_t n, int64_t lower, int64_t upper, double time_limit_s);

}  // namespace mixlab
