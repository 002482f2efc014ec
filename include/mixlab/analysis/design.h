// mixlab/analysis/design.h — seed 000's design procedure as a search: from a budget (reads per
// token, decode cache, shortest path) at a length T to a recommended pattern.
//
// The search space is a documented grid of pattern specs (design_grid; docs/DESIGN.md lists it):
// the named patterns of seed 000 Table 1, band:W and order:W, geom:B, power:P, fib, ruler:L and
// unions order:W+<family> and geom:B+power:P, each translation-invariant family with and without
// +cache. Candidates whose rows are identical for every i < T (e.g. geom:2 and pow2, or a +cache
// variant whose lattice steps are all 1 and its plain pattern) are measured once, under the first
// spec in grid order (named patterns first).
//
// Every candidate is measured exactly at T by analyze_pattern (mixlab/analysis/analyze.h):
//   time   max and mean |P(i)| over i < T (past positions read per token);
//   cache  max and mean positions kept after a decode step;
//   path   max and mean shortest path d(j, i) over pairs j < i < T (∞ when a pair is unreachable).
//          Translation-invariant patterns: coin change, exact. +cache patterns: graph distances,
//          exact while T · nnz fits the per-candidate work (always for T <= 256), otherwise from
//          evenly spaced sources (path_exact = false: max is then a lower bound);
//   congestion  of the copy task on 2n = T nodes: lower bound (Prop. 4.7 and its counting form),
//          upper bound (shifted routing of Prop. 4.8, shortest-path routing, rip-up heuristic),
//          and the exact integer program when n <= DesignOptions::exact_max_n.
// With --max-time, a candidate whose last row alone reads more than the limit is screened out
// before the measurement (the cost of a search at large T is then that of the candidates near the
// budget, not of the densest patterns of the grid).
// A candidate is within the budget when every limit given holds for its max over every position
// < T; a candidate whose path max is only a lower bound is not counted as meeting a path limit.
// The Pareto front is over (time max, cache max, path max), all minimised, among the candidates
// within the budget. The recommendation is the best-ranked front member for the objective.
//
// Cost: O(grid · T · K) for the translation-invariant candidates (K offsets below T) plus the
// graph work of the +cache candidates, capped in total by DesignOptions::graph_work.
//
// Not supported: T outside [2, kAnalysisMaxT]; limits <= 0 (each throws mixlab::Error naming the
// argument before any measurement).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mixlab {

enum class DesignObjective { kPath, kCongestion, kCost };

/// "path", "congestion", "cost" -> the objective; throws mixlab::Error naming the text otherwise.
DesignObjective design_objective_parse(const std::string& text);
const char* design_objective_name(DesignObjective o);

/// A limit of -1 means "no limit".
struct DesignOptions {
  int64_t T = 0;
  int64_t max_time = -1;   // max |P(i)| over i < T
  int64_t max_cache = -1;  // max positions cached after a step
  int64_t max_path = -1;   // max shortest path over pairs
  DesignObjective objective = DesignObjective::kPath;
  int64_t top = 10;                      // rows of the printed table
  int64_t graph_work = 2000000000;       // edge visits for all graph searches together (+cache paths)
  int64_t exact_max_n = 8;               // congestion ILP when n = T/2 <= this
  double exact_time_limit_s = 2.0;       // per integer program
  std::vector<std::string> extra_specs;  // measured besides the grid (e.g. the user's own)
};

struct DesignCandidate {
  std::string spec;
  std::string family;  // "named", "band", "order", "geom", "power", "fib", "ruler", "union"
  bool named = false;  // a pattern of seed 000 Table 1 (analysis_table1_specs)
  bool recurrent = true;
  int64_t time_max = 0;
  double time_mean = 0;
  int64_t cache_max = 0;
  double cache_mean = 0;
  bool path_infinite = false;  // some pair unreachable
  int64_t path_max = 0;        // over reachable pairs
  double path_mean = 0;
  bool path_exact = true;           // false: from sampled sources, path_max is a lower bound
  int64_t congestion_lower = -1;    // -1: not known
  int64_t congestion_upper = -1;    // -1: not known; kAnalysisInf (-2) never appears here
  int64_t congestion_exact = -1;    // -1: not run
  bool congestion_optimal = false;  // congestion_exact proven optimal
  /// false: screened out before measuring, because a cheap lower bound on time max (|P(T-1)|,
  /// exact for plain patterns, whose rows only grow) exceeds --max-time; time_max is that bound
  /// and the other metrics are not measured.
  bool measured = true;
  bool within_budget = false;
  std::string misses;  // the limits it misses, e.g. "--max-time 8 (time 12)"
  bool on_front = false;
};

struct DesignResult {
  DesignOptions options;
  int64_t grid_size = 0;                    // specs enumerated (grid + extra)
  std::vector<DesignCandidate> candidates;  // distinct at T, in grid order
  std::vector<size_t> ranked;               // within the budget, best first (indices into candidates)
  std::vector<size_t> front;                // Pareto front, by time then cache then path
  int64_t recommended = -1;                 // index into candidates
  std::string why;                          // one sentence
  std::string train_command;                // mixlab train ... --mixer resolvent:<spec>
  double seconds = 0;                       // wall time of the search
};

/// The grid of specs searched at any T (documented in docs/DESIGN.md), named patterns first.
std::vector<std::string> design_grid();

/// Runs the search. Throws mixlab::Error for bad options (before any measurement) and when no
/// candidate fits the budget: the message names the limit that excludes everything and the
/// candidate closest to meeting it.
DesignResult design_search(const DesignOptions& opt);

/// Whether a dominates b on (time max, cache max, path max): <= in all, < in one.
bool design_dominates(const DesignCandidate& a, const DesignCandidate& b);

/// The ranked table (top rows), the front and the recommendation, as printed by `mixlab design`.
std::string design_text(const DesignResult& r);
/// The same as JSON: {T, limits, objective, grid_size, distinct, within_budget, table: [...]
/// (ranked, every candidate within the budget), front: [specs], recommendation: {...}}.
nlohmann::json design_json(const DesignResult& r);
/// One candidate as a JSON object (the rows of design_json's table).
nlohmann::json design_candidate_json(const DesignCandidate& c);

/// Draws every candidate within the budget (time max against path max, cache max as colour), the
/// Pareto front as a line, and the named patterns labelled, into a PNG. Throws mixlab::Error when
/// the file cannot be written.
void design_plot(const DesignResult& r, const std::string& path);

}  // namespace mixlab
