// KvCacheState: growth by doubling for full caches, a fixed ring for windows, shape checks.
#include "mixlab/attention/kv_cache.h"

#include <gtest/gtest.h>

#include "mixlab/core/error.h"

namespace kv_cache_test {

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

// The raw-row step's access: reserve_slot grows a full cache before its slot and rings a window,
// without advancing; advance moves on.
TEST(KvCache, ReserveSlotGrowsAFullCacheAndRingsAWindow) {
  mixlab::KvCacheState full(1, 2, 3, 0, torch::TensorOptions().dtype(torch::kDouble));
  for (int64_t t = 0; t < 40; ++t) {
    const int64_t slot = full.reserve_slot();
    EXPECT_EQ(slot, t);
    EXPECT_GT(full.k_buffer().size(2), slot);
    EXPECT_EQ(full.v_buffer().sizes(), full.k_buffer().sizes());
    EXPECT_EQ(full.position(), t);
    full.advance();
  }
  EXPECT_EQ(full.k_buffer().size(2), 64);
  mixlab::KvCacheState ring(1, 1, 2, 3, torch::TensorOptions().dtype(torch::kFloat));
  for (int64_t t = 0; t < 7; ++t) {
    EXPECT_EQ(ring.reserve_slot(), t % 3);
    ring.advance();
  }
  EXPECT_EQ(ring.k_buffer().size(2), 3);
  EXPECT_EQ(ring.cached_positions(), 3);
}

}  // namespace kv_cache_test
