// KvCacheState: growth by doubling for full caches, a fixed ring for windows, shape checks.
#include "mixlab/attention/kv_cache.h"

#include <gtest/gtest.h>

#include "mixlab/core/error.h"

TEST(KvCache, FullCacheKeepsEveryPositionAndGrowsGeometrically) {
  mixlab::KvCacheState s(2, 3, 4, 0, torch::TensorOptions().dtype(torch::kFloat));
  int64_t reallocations = 0, last_bytes = s.bytes();
  for (int t = 0; t < 1000; ++t) {
    s.push(torch::full({2, 3, 4}, float(t)), torch::full({2, 3, 4}, float(-t)));
    if (s.bytes() != last_bytes) ++reallocations, last_bytes = s.bytes();
  }
  EXPECT_EQ(s.cached_positions(), 1000);
  EXPECT_LE(reallocations, 7) << "doubling: log2(1000/16) growths";
  EXPECT_EQ(s.keys().select(2, 999)[0][0][0].item<float>(), 999.f);
  EXPECT_EQ(s.values().select(2, 5)[1][2][3].item<float>(), -5.f);
}

TEST(KvCache, WindowKeepsTheLastW) {
  mixlab::KvCacheState s(1, 1, 1, 4, torch::TensorOptions().dtype(torch::kFloat));
  for (int t = 0; t < 10; ++t) s.push(torch::full({1, 1, 1}, float(t)), torch::full({1, 1, 1}, float(t)));
  EXPECT_EQ(s.cached_positions(), 4);
  auto held = std::get<0>(s.keys().flatten().sort());
  EXPECT_TRUE(torch::equal(held, torch::tensor({6.f, 7.f, 8.f, 9.f})));
  EXPECT_THROW(s.push(torch::zeros({1, 2, 1}), torch::zeros({1, 1, 1})), mixlab::Error);
}
