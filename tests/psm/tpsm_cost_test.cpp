// TpsmMixer::cost_figures (src/psm/tpsm_cost.cpp) against the mixer itself and an explicit graph: time and cache from
// the decode state's own counter (agg calls and roots after every step), the longest path by breadth-first search over
// the counter's Agg DAG, the congestion bound for a case counted by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "mixlab/psm/tpsm.h"
#include "support/graph_hops.h"

namespace tpsm_cost_test {

namespace {

using mixlab::TpsmMixer;
using mixlab::TpsmState;

std::shared_ptr<TpsmMixer> make(const std::string& args) {
  mixlab::MixerDims d;
  d.d_model = 8;
  d.n_heads = 2;
  return std::make_shared<TpsmMixer>(args, d);
}

TEST(TpsmCost, TimeAndCacheFollowTheDecodeCounter) {
  torch::NoGradGuard no_grad;
  for (int64_t c : {1, 2, 3, 4}) {
    for (int64_t T : {1, 5, 12, 23}) {
      SCOPED_TRACE("c " + std::to_string(c) + " T " + std::to_string(T));
      auto m = make("c=" + std::to_string(c));  // identity = zeros: e has c rows
      auto state = m->init_state(1);
      auto& s = static_cast<TpsmState&>(*state);
      int64_t time_max = 0, time_sum = 0, cache_max = 0, calls = 0;
      for (int64_t t = 0; t < T; ++t) {
        m->step(s, torch::randn({1, 8}));
        // Inf read c prefix rows + j earlier chunk rows; each Agg call made at this step read 2c.
        const int64_t time = c + t % c + 2 * c * (s.agg_calls() - calls);
        calls = s.agg_calls();
        time_max = std::max(time_max, time);
        time_sum += time;
        cache_max = std::max(cache_max, (t + 1) % c + 2 * c * s.roots());
      }
      const auto f = m->cost_figures(T);
      EXPECT_EQ(f.time_max, time_max);
      EXPECT_DOUBLE_EQ(f.time_mean, static_cast<double>(time_sum) / static_cast<double>(T));
      EXPECT_EQ(f.cache_max, cache_max);
    }
  }
}

// The counter's DAG: nodes 0..T-1 are input rows, T..2T-1 output rows (an output feeds nothing
// inside the layer); an Agg node gets edges from its inputs (a chunk's input rows when the input
// is a leaf); output i reads the prefix node of its chunk and the chunk's inputs up to i.
int longest_path(int64_t T, int64_t c) {
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(2 * T));
  auto node = [&]() {
    out.emplace_back();
    return static_cast<int64_t>(out.size()) - 1;
  };
  auto feed = [&](int64_t from, int64_t to) {
    if (from >= 0) out[from].push_back(to);
  };
  auto leaf_feed = [&](int64_t chunk, int64_t to) {
    for (int64_t j = chunk * c; j < (chunk + 1) * c; ++j) out[j].push_back(to);
  };
  struct Slot {
    int64_t level, root, fold;
  };
  std::vector<Slot> slots;  // root -1 with leaf = chunk index encoded as -(chunk + 2)
  std::vector<int64_t> prefix_of_chunk;
  const int64_t chunks = (T + c - 1) / c;
  for (int64_t b = 0; b < chunks; ++b) {
    prefix_of_chunk.push_back(slots.empty() ? -1 : slots.back().fold);
    if ((b + 1) * c > T) break;  // an incomplete chunk is never inserted
    int64_t carry = -(b + 2), level = 0;
    auto feed_value = [&](int64_t v, int64_t to) {
      if (v <= -2)
        leaf_feed(-v - 2, to);
      else
        feed(v, to);
    };
    while (!slots.empty() && slots.back().level == level) {
      const int64_t merged = node();
      feed_value(slots.back().root, merged);
      feed_value(carry, merged);
      carry = merged;
      slots.pop_back();
      ++level;
    }
    const int64_t fold = node();
    if (!slots.empty()) feed(slots.back().fold, fold);
    feed_value(carry, fold);
    slots.push_back({level, carry, fold});
  }
  for (int64_t i = 0; i < T; ++i) {
    const int64_t b = i / c;
    feed(prefix_of_chunk[b], T + i);
    for (int64_t j = b * c; j <= i; ++j) out[j].push_back(T + i);
  }
  int longest = 0;
  for (int64_t s = 0; s < T; ++s) {
    const std::vector<int> d = mixlab::testing::graph_hops(out, s);
    for (int64_t r = s + 1; r < T; ++r) {
      EXPECT_GE(d[T + r], 1) << "output " << r << " does not see input " << s;
      longest = std::max(longest, d[T + r]);
    }
  }
  return longest;
}

TEST(TpsmCost, LongestPathMatchesTheAggGraph) {
  for (int64_t c : {1, 2, 3})
    for (int64_t T : {2, 7, 16, 29, 40}) {
      SCOPED_TRACE("c " + std::to_string(c) + " T " + std::to_string(T));
      EXPECT_EQ(make("c=" + std::to_string(c))->cost_figures(T).shortest, std::to_string(longest_path(T, c)));
    }
}

TEST(TpsmCost, CongestionBoundCountedByHand) {
  // c 2, T 16: routes i -> i+8 go from chunks 0..3 to chunks 4..7; every target's decomposition
  // starts with the block of chunks 0..3, one root of 2 rows carrying all 8 routes: >= 4.
  EXPECT_EQ(make("c=2")->cost_figures(16).congestion, "≥4");
  // c 4, T 6: n 3, routes 0->3 inside chunk 0 and 1->4, 2->5 through chunk 0's fold (2 routes, 4
  // rows): >= 1.
  EXPECT_EQ(make("c=4")->cost_figures(6).congestion, "≥1");
  EXPECT_EQ(make("c=4")->cost_figures(1).congestion, "n/a");
  EXPECT_EQ(make("c=4")->cost_figures(4).congestion, "1");
}

}  // namespace

}  // namespace tpsm_cost_test
