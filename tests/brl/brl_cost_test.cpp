// BrlMixer::cost_figures (src/brl/brl_cost.cpp) against an explicit graph: inputs, outputs and one node per block's
// compressed tokens, breadth-first distances for the path and the copy routes, and a hand count of time and
// cache for a small case.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "mixlab/brl/brl_mixer.h"
#include "support/graph_hops.h"

namespace mixlab {
namespace brl_cost_test {
namespace {

std::shared_ptr<BrlMixer> make(const std::string& args) {
  MixerDims d;
  d.d_model = 8;
  d.n_heads = 2;
  d.max_len = 512;
  return std::dynamic_pointer_cast<BrlMixer>(brl_mixer_create("brl:" + args, args, d));
}

constexpr int kNone = 1 << 30;

// One layer of BRL as a graph: inputs 0..T-1, outputs T..2T-1 (an output feeds nothing inside
// the layer), then node 2T + k for block k's compressed tokens (fed by every input of blocks
// k-h..k-1, read by every output of block k). dist[j][i]: hops from input j to output i.
std::vector<std::vector<int>> row_distances(int64_t T, int64_t W, int64_t N, int64_t h) {
  const int64_t blocks = (T + N - 1) / N;
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(2 * T + blocks));
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = std::max<int64_t>(0, i - W); j <= i; ++j) out[j].push_back(T + i);
  for (int64_t k = 1; k < blocks; ++k) {
    for (int64_t j = std::max<int64_t>(0, k - h) * N; j < k * N; ++j) out[j].push_back(2 * T + k);
    for (int64_t i = k * N; i < std::min(T, (k + 1) * N); ++i) out[2 * T + k].push_back(T + i);
  }
  std::vector<std::vector<int>> dist(static_cast<size_t>(T), std::vector<int>(static_cast<size_t>(T), kNone));
  for (int64_t s = 0; s < T; ++s) {
    const std::vector<int> d = testing::graph_hops(out, s);
    for (int64_t r = 0; r < T; ++r) dist[s][r] = d[T + r] < 0 ? kNone : d[T + r];
  }
  return dist;
}

TEST(BrlCost, PathAndCongestionMatchTheGraph) {
  for (int64_t W : {1, 2, 4, 8})
    for (int64_t N : {2, 3, 4, 8})
      for (int64_t h : {1, 2, 3})
        for (int64_t T : {1, 2, 5, 9, 16, 17, 33}) {
          SCOPED_TRACE("W " + std::to_string(W) + " N " + std::to_string(N) + " h " + std::to_string(h) + " T " +
                       std::to_string(T));
          const auto f =
              make("w=" + std::to_string(W) + ":m=2:block=" + std::to_string(N) + ":hist=" + std::to_string(h * N))
                  ->cost_figures(T);
          const auto dist = row_distances(T, W, N, h);
          int longest = 0;
          bool unreachable = false;
          for (int64_t j = 0; j < T; ++j)
            for (int64_t i = j + 1; i < T; ++i) {
              if (dist[j][i] == kNone)
                unreachable = true;
              else
                longest = std::max(longest, dist[j][i]);
            }
          EXPECT_EQ(f.shortest, unreachable ? "∞" : std::to_string(longest));
          const int64_t n = T / 2;
          bool routable = true, direct = true;
          for (int64_t i = 0; i < n; ++i) {
            routable = routable && dist[i][i + n] != kNone;
            direct = direct && dist[i][i + n] == 1;
          }
          if (n == 0)
            EXPECT_EQ(f.congestion, "n/a");
          else if (!routable)
            EXPECT_EQ(f.congestion, "∞");
          else if (direct)
            EXPECT_EQ(f.congestion, "1");
          else
            EXPECT_EQ(f.congestion.rfind("≥", 0), 0u) << f.congestion;
        }
}

TEST(BrlCost, TimeAndCacheCountedByHand) {
  // W 2, m 3, N 4, T 10. time(t) = min(t,2) + 3, + 4 at t = 4 and 8:
  // 3 4 5 5 9 5 5 5 9 5 -> max 9, sum 55. cache(t) = min(t+1,2) + t%4 + 1 + 3: max 2 + 4 + 3 = 9.
  const auto f = make("w=2:m=3:block=4")->cost_figures(10);
  EXPECT_TRUE(f.equivalent_pattern.empty());
  EXPECT_EQ(f.time_max, 9);
  EXPECT_DOUBLE_EQ(f.time_mean, 5.5);
  EXPECT_EQ(f.cache_max, 9);
  EXPECT_FALSE(f.basis.empty());
  // Copy congestion at T 16 with W 2, N 8: routes i -> i+8 all cross one block boundary; the 8
  // routes into block 1 share its m = 3 compressed tokens: >= ceil(8/3) = 3.
  EXPECT_EQ(make("w=2:m=3:block=8")->cost_figures(16).congestion, "≥3");
  // hist 8 (h 2): W 2, m 3, N 4, T 10. time(t) = min(t,2) + 3, + 4 at t = 4 and + 8 at t = 8:
  // 3 4 5 5 9 5 5 5 13 5 -> max 13, sum 59. cache(t) = min(t+1,2) + min(t+1, 4 + t%4 + 1) + 3:
  // max at t = 7: 2 + 8 + 3 = 13 (t = 9: min(10, 6) = 6 -> 11).
  const auto g = make("w=2:m=3:block=4:hist=8")->cost_figures(10);
  EXPECT_EQ(g.time_max, 13);
  EXPECT_DOUBLE_EQ(g.time_mean, 5.9);
  EXPECT_EQ(g.cache_max, 13);
  // MAD compression (T 63, answers 31 back) at the registry's w 8, block 8: out of one layer's
  // reach with one history block, reachable with four.
  EXPECT_EQ(make("w=8:m=8")->cost_figures(63).shortest, "∞");
  EXPECT_EQ(make("w=8:m=8:hist=32")->cost_figures(63).congestion.rfind("≥", 0), 0u);
}

}  // namespace
}  // namespace brl_cost_test
}  // namespace mixlab
