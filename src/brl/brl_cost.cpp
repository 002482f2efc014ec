// BrlMixer::cost_figures — BRL-Attention's figures in the analysis' terms (mixlab/mixer/cost_figures.h),
// counted from the definition of one layer (mixlab/brl/brl_mixer.h), in rows of width d_model.
//
// W = window, m = compressed tokens, N = block, h = hist / N history blocks. Row t is in block
// k = floor(t / N); block k's history is blocks max(0, k-h)..k-1.
//   time(t)  = min(t, W) past rows of the window (F_gen) + m compressed tokens (F_prop)
//              + min(k, h)·N at a block's first row t = kN, k >= 1: F_comp compresses the history
//              once for the whole block (the m queries read the same rows).
//   cache(t) = min(t+1, W) window rows + the inputs the next boundary's F_comp reads that have
//              arrived, min(t+1, (h-1)·N + (t mod N) + 1), + m compressed tokens' keys and values.
//   path     j -> i (j < i): 1 when i - j <= W (the window); 2 when j is in i's block's history
//            (j -> F_comp -> compressed token -> F_prop -> i); otherwise no path inside one layer
//            (the compressed tokens of block k see its history only; they evolve across layers).
//   copy congestion (pairs i -> i+n, n = floor(T/2)): "∞" when a pair has no path; 1 when n <= W
//            (every route one edge, each position in one route); otherwise every route whose
//            target is in block k passes through block k's m compressed tokens, so some token
//            carries >= ceil(routes_k / m) (pigeonhole), and each route has 2 edges, Prop. 4.7's
//            ceil((2+1)/2) = 2: the larger of the two, a lower bound.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "mixlab/brl/brl_mixer.h"
#include "mixlab/core/error.h"

namespace mixlab {

MixerCostFigures BrlMixer::cost_figures(int64_t T) const {
  MIXLAB_CHECK(T >= 1, "brl cost_figures: T must be >= 1, got {}", T);
  const int64_t W = opt_.window, m = opt_.slots, N = opt_.block, h = opt_.hist / N;
  MixerCostFigures f;
  double time_sum = 0;
  bool unreachable = false;
  int64_t longest = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t k = t / N;
    const int64_t time = std::min(t, W) + m + ((k >= 1 && t == k * N) ? std::min(k, h) * N : 0);
    f.time_max = std::max(f.time_max, time);
    time_sum += static_cast<double>(time);
    f.cache_max = std::max(f.cache_max, std::min(t + 1, W) + std::min(t + 1, (h - 1) * N + t % N + 1) + m);
    // Row t reaches [t - W, t) directly and its history through the compressed tokens; every other
    // earlier row is unreachable. Paths: 1 inside the window, 2 through the compressed tokens.
    if (t == 0) continue;
    longest = std::max<int64_t>(longest, 1);
    const int64_t window_lo = std::max<int64_t>(0, t - W);
    if (window_lo == 0) continue;  // the window covers every earlier row
    // [0, window_lo) must lie inside the history [(k-h)N, kN) to be reachable.
    const int64_t lo = (k - h) * N, hi = k * N;
    if (k == 0 || lo > 0 || hi < window_lo) unreachable = true;
    if (k >= 1 && lo < window_lo) longest = std::max<int64_t>(longest, 2);
  }
  f.time_mean = time_sum / static_cast<double>(T);
  f.shortest = unreachable ? "∞" : std::to_string(longest);
  const int64_t n = T / 2;
  if (n == 0) {
    f.congestion = "n/a";
  } else if (n <= W) {
    f.congestion = "1";
  } else {
    std::map<int64_t, int64_t> routes;  // target block -> routes through its compressed tokens
    bool routable = true;
    for (int64_t i = 0; i < n && routable; ++i) {
      const int64_t blocks_apart = (i + n) / N - i / N;
      if (blocks_apart >= 1 && blocks_apart <= h)
        ++routes[(i + n) / N];
      else
        routable = false;
    }
    if (!routable) {
      f.congestion = "∞";
    } else {
      int64_t most = 0;
      for (const auto& [block, count] : routes) most = std::max(most, count);
      f.congestion = fmt::format("≥{}", std::max<int64_t>(2, (most + m - 1) / m));
    }
  }
  f.structure = fmt::format("BRL (window {}, {} tokens, block {}, history {})", W, m, N, opt_.hist);
  f.basis = fmt::format(
      "counted from the definition per layer: window {} + {} compressed tokens (+ history of up to {} at a "
      "boundary) read, window + history + tokens kept; path ∞ beyond the window and the history; congestion a "
      "lower bound",
      W, m, opt_.hist);
  return f;
}

}  // namespace mixlab
