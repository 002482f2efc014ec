// The CPU block cache (mixlab/core/cpu_block_cache.h): freed large blocks serve the next request
// of their size class, small ones never enter it, the budget bounds it, values are untouched, and
// raw_allocate / raw_deallocate work through it. Installing it is process-wide, so every later
// test of this binary runs on it too.
#include "mixlab/core/cpu_block_cache.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <torch/torch.h>

#include <cstring>

#include "mixlab/core/error.h"
#include "support/expect_error.h"

namespace cpu_block_cache_test {

TEST(CpuBlockCache, ReusesLargeBlocksWithinBudget) {
  ::setenv("MIXLAB_CPU_CACHE_MB", "lots", 1);
  expect_error([] { mixlab::install_cpu_block_cache(); }, "MIXLAB_CPU_CACHE_MB");
  ::unsetenv("MIXLAB_CPU_CACHE_MB");
  EXPECT_FALSE(mixlab::install_cpu_block_cache(0));  // budget 0: nothing installed
  EXPECT_FALSE(mixlab::cpu_block_cache_stats().installed);

  ASSERT_TRUE(mixlab::install_cpu_block_cache(int64_t(16) << 20));  // 16 MiB
  EXPECT_TRUE(mixlab::install_cpu_block_cache());                   // idempotent
  mixlab::cpu_block_cache_release();
  auto before = mixlab::cpu_block_cache_stats();
  EXPECT_TRUE(before.installed);
  EXPECT_EQ(before.budget_bytes, int64_t(16) << 20);

  void* first = nullptr;
  {
    auto t = torch::full({3 << 18}, 2.0f);  // 3 MiB: size class 4 MiB
    first = t.data_ptr();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % (2 << 20), 0u);  // huge-page aligned
  }
  auto freed = mixlab::cpu_block_cache_stats();
  EXPECT_EQ(freed.misses, before.misses + 1);
  EXPECT_EQ(freed.cached_bytes, int64_t(4) << 20);
  {
    auto t = torch::ones({(3 << 18) + 100});  // same class: the same block, values written anew
    EXPECT_EQ(t.data_ptr(), first);
    EXPECT_EQ(t.sum().item<float>(), float((3 << 18) + 100));
  }
  EXPECT_EQ(mixlab::cpu_block_cache_stats().hits, freed.hits + 1);

  // Small tensors never enter the cache.
  { auto s = torch::ones({1000}); }
  EXPECT_EQ(mixlab::cpu_block_cache_stats().cached_bytes, int64_t(4) << 20);

  // Over the budget: blocks beyond 16 MiB go back to the OS.
  {
    std::vector<torch::Tensor> many;
    for (int i = 0; i < 6; ++i) many.push_back(torch::empty({1 << 20}));  // 4 MiB each
  }
  EXPECT_LE(mixlab::cpu_block_cache_stats().cached_bytes, int64_t(16) << 20);

  // raw_allocate / raw_deallocate (small and large) go through the same deleter.
  c10::Allocator* a = c10::GetAllocator(c10::DeviceType::CPU);
  void* small = a->raw_allocate(100);
  void* large = a->raw_allocate(size_t(5) << 20);
  ASSERT_NE(small, nullptr);
  ASSERT_NE(large, nullptr);
  a->raw_deallocate(small);
  a->raw_deallocate(large);

  mixlab::cpu_block_cache_release();
  EXPECT_EQ(mixlab::cpu_block_cache_stats().cached_bytes, 0);
}

// Blocks under 1 MiB stay glibc's, but installing the cache keeps their pages: eight 920 KB
// tensors written and freed 40 times fault their 7.4 MB in once, where glibc's adaptive trim
// threshold (~2x the largest freed block) returned them every round (~1800 faults a round).
TEST(CpuBlockCache, SmallBlocksKeepTheirPages) {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if ((tunables && std::strstr(tunables, "glibc.malloc.")) || std::getenv("MALLOC_MMAP_THRESHOLD_") ||
      std::getenv("MALLOC_TRIM_THRESHOLD_"))
    GTEST_SKIP() << "the user's malloc tunables are in force";
  ASSERT_TRUE(mixlab::install_cpu_block_cache(int64_t(16) << 20));
  EXPECT_TRUE(mixlab::cpu_block_cache_stats().malloc_tuned);
  auto round = [] {
    std::vector<torch::Tensor> blocks;
    for (int i = 0; i < 8; ++i) blocks.push_back(torch::empty({230000}).fill_(1.0f));  // 920 KB each
  };
  round();
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const int rounds = 40;
  for (int r = 0; r < rounds; ++r) round();
  getrusage(RUSAGE_SELF, &after);
  const long faults = after.ru_minflt - before.ru_minflt;
  EXPECT_LT(faults, rounds * 1800 / 20) << "minor page faults over " << rounds << " rounds";
#else
  GTEST_SKIP() << "glibc's thresholds are not tuned under this C library or sanitizer";
#endif
}

}  // namespace cpu_block_cache_test
