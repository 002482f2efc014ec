// TpsmMixer::cost_figures — the Transformer-PSM's figures in the analysis' terms
// (mixlab/mixer/cost_figures.h), counted from Alg. 3/4 for one layer, in rows of width d.
//
// c = chunk, e = the identity's rows (c, or 0 for identity=empty). Row t is row j = t mod c of
// chunk b = floor(t / c); before it, b chunks are complete and the counter (scan.h's
// BinaryCounterScan) holds one root and one cached fold per set bit of b.
//   time(t)  = Inf over [s | chunk rows 0..j]: the prefix's rows (e when b = 0, else c) + j earlier
//              rows; at the chunk's last row (j = c-1) the counter inserts the chunk: one merge of
//              2c rows per trailing one bit of b, then one fold of (the fold above: c, or e when
//              no root is left) + c rows.
//   cache(t) = the chunk buffer ((t+1) mod c rows) + 2c rows per root (root and fold) of the
//              counter after step t. Inf's key/value cache is derived from these and not counted.
//   path     j -> i in one chunk: 1 (Inf is causal over the chunk). From chunk a to chunk b > a:
//            a lies in the complete block of b's binary decomposition at some set bit l; x_a
//            reaches that block's root through l merges, the prefix P_b through the fold of bit l
//            and one fold per lower set bit, then Inf: l + 1 + (set bits of b below l) + 1 Agg/Inf
//            calls, each one hop. The longest is the top bit: msb(b) + popcount(b) + 1.
//   copy congestion (pairs i -> i+n, n = floor(T/2)): a route between chunks has one way only,
//            through the root of the block that holds its source chunk in the target's
//            decomposition; that root has c rows, so some row carries >= ceil(routes / c) of the
//            routes through its busiest root (pigeonhole): a lower bound. Routes inside one chunk
//            are single edges.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "mixlab/core/error.h"
#include "mixlab/psm/tpsm.h"

namespace mixlab {

namespace {

// v >= 0 (msb: v >= 1).
int64_t trailing_ones(int64_t v) { return __builtin_ctzll(~static_cast<uint64_t>(v)); }
int64_t popcount(int64_t v) { return __builtin_popcountll(static_cast<uint64_t>(v)); }
int64_t msb(int64_t v) { return 63 - __builtin_clzll(static_cast<uint64_t>(v)); }

}  // namespace

MixerCostFigures TpsmMixer::cost_figures(int64_t T) const {
  MIXLAB_CHECK(T >= 1, "tpsm cost_figures: T must be >= 1, got {}", T);
  const int64_t c = options_.chunk;
  const int64_t e = options_.identity == TpsmIdentity::kEmpty ? 0 : c;
  MixerCostFigures f;
  double time_sum = 0;
  int64_t longest = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t b = t / c, j = t % c;
    int64_t time = (b == 0 ? e : c) + j;
    int64_t roots_after = popcount(b);
    if (j == c - 1) {
      const int64_t merges = trailing_ones(b);
      const bool none_left = popcount(b) == merges;  // every root merged into the new one
      time += merges * 2 * c + (none_left ? e : c) + c;
      roots_after = popcount(b + 1);
    }
    f.time_max = std::max(f.time_max, time);
    time_sum += static_cast<double>(time);
    f.cache_max = std::max(f.cache_max, (t + 1) % c + 2 * c * roots_after);
    if (j > 0) longest = std::max<int64_t>(longest, 1);
    if (b > 0) longest = std::max(longest, msb(b) + popcount(b) + 1);
  }
  f.time_mean = time_sum / static_cast<double>(T);
  f.shortest = std::to_string(longest);
  const int64_t n = T / 2;
  if (n == 0) {
    f.congestion = "n/a";
  } else {
    std::map<std::pair<int64_t, int64_t>, int64_t> through;  // (level, first chunk) of a root -> routes
    bool direct_only = true;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t a = i / c, b = (i + n) / c;
      if (a == b) continue;
      direct_only = false;
      // The set bit l of b whose block [base, base + 2^l) holds a: blocks from the top bit down.
      int64_t base = 0;
      for (int64_t l = msb(b); l >= 0; --l) {
        if (!((b >> l) & 1)) continue;
        if (a < base + (int64_t{1} << l)) {
          ++through[{l, base}];
          break;
        }
        base += int64_t{1} << l;
      }
    }
    int64_t most = 0;
    for (const auto& [root, count] : through) most = std::max(most, count);
    f.congestion = direct_only ? "1" : fmt::format("≥{}", std::max<int64_t>(1, (most + c - 1) / c));
  }
  f.structure = fmt::format("Transformer-PSM (c = {})", c);
  f.basis = fmt::format(
      "counted from Alg. 3/4 per layer: Inf over state + chunk (c = {}) plus the counter's Agg calls at a "
      "chunk's end; buffer + roots and folds kept; Agg/Inf calls as hops; congestion a lower bound",
      c);
  return f;
}

}  // namespace mixlab
