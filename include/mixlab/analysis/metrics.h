// mixlab/analysis/metrics.h — exact cost, cache and shortest-path measurements of a pattern.
//
// Everything here is measured on a concrete length T (0-based positions 0..T-1), never read off
// the asymptotic classes of seed 000 Table 1:
//   - cost per token: |P(i)| (the B pattern; the A pattern has |P(i)| + 1 non-zeros in row i);
//   - cache after step i: #{ j <= i : some row r in (i, T) reads j } — what a decoder must keep;
//   - shortest path d(j, i), j < i, on the communication graph (seed 000 Def. 4.3): edge j -> i
//     iff j ∈ P(i). For a non-recurrent pattern (causal, band:W: B = 0) a token reaches row i
//     only directly, so d = 1 for j ∈ P(i) and d = ∞ otherwise.
//
// Cost: row sizes and cache sizes are O(T + |offsets|) for translation-invariant patterns and
// O(T·K) for +cache (K = number of offsets < T). Distances by difference are a coin-change DP,
// O(T·|offsets|) worst case (O(T) for dense/causal). Graph distances (any pattern) cost O(nnz) per
// source; all-pairs costs O(T·nnz) and is capped by a work budget, beyond which evenly spaced
// sources are used and the result says so (exact = false).
//
// Not supported: T <= 0 or T > kAnalysisMaxT (throws mixlab::Error naming T).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "mixlab/pattern/pattern.h"

namespace mixlab {

/// Longest T the analysis accepts (arrays of O(T) ints, +cache rows recomputed per row).
constexpr int64_t kAnalysisMaxT = int64_t{1} << 20;

/// Distance value meaning "no path".
constexpr int32_t kUnreachable = std::numeric_limits<int32_t>::max();

/// Throws mixlab::Error naming `fn` and T unless 1 <= T <= kAnalysisMaxT.
void analysis_check_T(const char* fn, int64_t T);

/// |P(i)| for every row i in [0, T).
std::vector<int64_t> analysis_row_sizes(const Pattern& p, int64_t T);

/// Cache after step i (0-based) for every i in [0, T), by the structural shortcuts (see the .cpp
/// for the proofs): last use j + max{f <= T-1-j} for translation-invariant patterns, |S_{i+1}|
/// (1-based) for +cache. The value after the last step is 0 (no future rows).
std::vector<int64_t> analysis_cache_sizes(const Pattern& p, int64_t T);
/// The same by brute force over every row (O(nnz)); the reference the tests compare against.
std::vector<int64_t> analysis_cache_sizes_reference(const Pattern& p, int64_t T);

/// In-neighbours of every row: pred[start[r] .. start[r+1]) = P(r), nearest first.
struct PatternGraph {
  int64_t T = 0;
  bool recurrent = true;       // false: paths are single edges (B = 0)
  std::vector<int64_t> start;  // (T + 1)
  std::vector<int64_t> pred;   // (nnz)
  int64_t nnz() const { return static_cast<int64_t>(pred.size()); }
};
/// Builds the graph of `p` on T nodes. O(nnz).
PatternGraph pattern_graph_build(const Pattern& p, int64_t T);

/// Distances from `source` to every node r (kUnreachable for r < source and unreachable r;
/// 0 at r = source), by a DP over the DAG in topological order — equal to BFS since all edges
/// point forward. Only nodes in [source, last] are visited. O(nnz of rows source..last).
std::vector<int32_t> graph_distances_from(const PatternGraph& g, int64_t source, int64_t last);

/// The pattern to analyse in place of p at length T: its rows equal p's rows for every i < T, and
/// it is translation-invariant whenever that holds. A +cache pattern whose lattice steps a_k
/// (Prop. 4.12) are all 1 for the offsets below T has S_I = { I - f_k }, the rows of its plain
/// pattern: linear+cache is linear, and so is offsets:1,2,3+cache. The analyses then take the
/// translation-invariant shortcuts (coin change, shifted routing) instead of graph searches,
/// which are O(T^2) for such rows (issue 16 item 10). Any other pattern is returned unchanged.
Pattern analysis_equivalent_pattern(const Pattern& p, int64_t T);

/// Shortest path by difference δ = i - j for a translation-invariant pattern (translation_invariant()
/// true): d[0] = 0, d[δ] = min number of offsets summing to δ (coin change), for δ in [0, T).
/// Non-recurrent patterns: 1 for offsets, kUnreachable otherwise. Throws for +cache.
std::vector<int32_t> analysis_distance_by_difference(const Pattern& p, int64_t T);

/// Shortest-path summary over all pairs j < i < T.
struct ShortestPathStats {
  bool infinite = false;  // some pair has no path (max and mean are then ∞)
  int64_t max = 0;        // max d over pairs (over reachable pairs when infinite)
  double mean = 0;        // mean d over pairs (over reachable pairs when infinite)
  int64_t unreachable_pairs = 0;
  int64_t pairs = 0;    // pairs counted
  bool exact = true;    // false: only `sources` evenly spaced sources were used
  int64_t sources = 0;  // sources used (T when exact)
  std::string method;   // "coin-change" or "graph"
};
/// Translation-invariant patterns: coin change, each difference weighted by its T - δ pairs
/// (always exact). Others: graph distances from every source when T·nnz <= max_work, else from
/// max(1, max_work / nnz) evenly spaced sources (exact = false; max is then a lower bound).
/// The graph is kept in memory up to max_stored_edges edges; beyond, rows are recomputed for
/// every source (same result, O(T) memory).
ShortestPathStats analysis_shortest_path(const Pattern& p, int64_t T, int64_t max_work,
                                         int64_t max_stored_edges = int64_t{1} << 25);

}  // namespace mixlab
