// mixlab/mixer/cost_figures.h — a family's cost figures in the analysis' terms (seed 000 §4:
// time per token, cache, shortest path, congestion) when the family is not a pattern of
// Y = (I - B)^-1 A X, so that `mixlab compare` prints figures for every row, not "—".
//
// Two kinds (Mixer::cost_figures):
//   - the family's dependency graph IS a pattern's: `equivalent_pattern` names it and the caller
//     measures that pattern with the analysis (Toeplitz mixing: every past position, `causal`;
//     an affine recurrence S_t = A_t S_{t-1} + ...: one predecessor, `order:1`, whose one cached
//     "position" is the d_k x d_v matrix state);
//   - otherwise the family counts its own figures from its definition, per row t in [0, T), in
//     rows of width d_model (BRL: window, compressed tokens, block buffer; T-PSM: chunk buffer,
//     counter roots, Agg and Inf reads). A figure known only as a bound is printed with its
//     relation ("≥3"); one the definition does not give is "n/a".
// `basis` is one line saying which kind and what is counted; compare prints it under the table.
#pragma once

#include <cstdint>
#include <string>

namespace mixlab {

struct MixerCostFigures {
  /// Non-empty: measure this pattern spec with the analysis (the figures below are unused).
  std::string equivalent_pattern;
  int64_t time_max = -1;   // max rows read to produce one output row, over t in [0, T)
  double time_mean = -1;   // their mean
  int64_t cache_max = -1;  // max rows held by the decode state after a step
  std::string shortest;    // longest shortest path: "2", "∞", "≥5"
  std::string congestion;  // copy congestion: "3", "≥2", "∞", "n/a"
  std::string basis;       // what these figures are, one line
  std::string structure;   // a short name for the structure column ("Transformer-PSM (c = 4)")
  bool empty() const { return equivalent_pattern.empty() && time_max < 0; }
};

}  // namespace mixlab
