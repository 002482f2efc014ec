// mixlab/analysis/analyze.h — one report per (pattern, T): the left half of seed 000 Table 1,
// measured exactly at that T next to the paper's asymptotic classes.
//
// Columns (positions are 0-based everywhere in code and output):
//   cost      |P(i)| for i in [0, T): past positions row i reads (the B pattern). The A pattern
//             reads one more (the current token); JSON gives both.
//   cache     positions j <= i that some row r in (i, T) reads, after step i (max and mean).
//   shortest  d(j, i) over pairs j < i < T on the communication graph (max and mean; ∞ when a
//             pair is unreachable, as for band:W beyond W).
//   congestion for the copy task on 2n nodes, n = floor(T / 2): lower bound (Prop. 4.7),
//             shifted routing (Prop. 4.8, translation-invariant patterns), heuristic
//             rip-up-and-reroute, exact integer program (on request, n <= exact_max_n).
// Cost: see metrics.h and congestion.h; the whole report at T = 65536 takes seconds because the
// expensive parts (graph all-pairs, heuristic, ILP) are capped by the options.
//
// Not supported: T < 1 or T > kAnalysisMaxT; congestion needs T >= 2 (reported "n/a" for T = 1).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mixlab/analysis/metrics.h"
#include "mixlab/pattern/pattern.h"

namespace mixlab {

struct AnalyzeOptions {
  bool exact_congestion = false;       // run the integer program (when n <= exact_max_n)
  int64_t exact_max_n = 32;            // largest n given to the integer program
  double exact_time_limit_s = 30.0;    // GLPK time limit; beyond it the result is not proven
  int64_t heuristic_max_n = 2048;      // skip the heuristic beyond this n
  int heuristic_passes = 8;            // rip-up-and-reroute passes
  int64_t max_graph_work = 300000000;  // edge visits allowed for graph all-pairs / routings
};

/// Sentinel for "infinite" (no path / no routing) in the integer fields below.
constexpr int64_t kAnalysisInf = -2;
/// Sentinel for "not computed" in the integer fields below.
constexpr int64_t kAnalysisNone = -1;

struct CongestionReport {
  int64_t n = 0;                   // commodities: i -> i + n, i in [0, n)
  int64_t d_min = kAnalysisNone;   // min_i d(i, i + n) (kAnalysisInf: some pair unroutable)
  int64_t prop47 = kAnalysisNone;  // ceil((d_min + 1) / 2), Prop. 4.7 as printed
  /// Best lower bound known: max(prop47, ceil(Σ_i (d(i, i + n) + 1) / 2n)) — the counting of the
  /// proof of Prop. 4.7 with every path's own length, stronger when the d(i, i + n) differ.
  int64_t lower_bound = kAnalysisNone;
  std::string lower_bound_source;    // which argument gave lower_bound
  int64_t shifted = kAnalysisNone;   // Prop. 4.8 routing (translation-invariant only)
  int64_t shortest = kAnalysisNone;  // shortest-path routing (non translation-invariant)
  int64_t heuristic = kAnalysisNone;
  std::string heuristic_status;  // "done", "skipped (...)", "not needed (...)"
  int64_t exact = kAnalysisNone;
  std::string exact_status;  // "optimal", "not proven optimal (time limit)", "not run", ...
  /// Best upper bound known (min of shifted/shortest/heuristic/exact), or kAnalysisNone.
  int64_t upper_bound() const;
};

struct PatternReport {
  std::string spec, structure, time_class, cache_class;
  int64_t T = 0;
  bool recurrent = true;
  bool translation_invariant = true;
  int64_t cost_max = 0;   // max |P(i)|
  double cost_mean = 0;   // mean |P(i)|
  int64_t cache_max = 0;  // max over i of the cache after step i
  double cache_mean = 0;
  ShortestPathStats shortest_path;
  CongestionReport congestion;
};

/// Measures everything above. Throws mixlab::Error for T outside [1, kAnalysisMaxT] (naming T)
/// and for invalid options.
PatternReport analyze_pattern(const Pattern& p, int64_t T, const AnalyzeOptions& opt = {});

/// The patterns of seed 000 Table 1, in its row order.
std::vector<std::string> analysis_table1_specs();

nlohmann::json analysis_report_json(const PatternReport& r);
/// A multi-line description of one report.
std::string analysis_report_text(const PatternReport& r);
/// The Table 1 style table of several reports (fits 110 columns).
std::string analysis_table_text(const std::vector<PatternReport>& reports);

/// Draws the A and B sparsity pictures (seed 000 Fig. 2) of `p` at length T side by side into a
/// .png or .svg file (by extension). Non-zeros red. Throws mixlab::Error for T > kPlotMaxT, for an
/// unknown extension, or when the file cannot be written.
constexpr int64_t kPlotMaxT = 256;
void analysis_plot(const Pattern& p, int64_t T, const std::string& path);

}  // namespace mixlab
