// ThreadScratch (mixlab/core/thread_scratch.h): 64-byte alignment, one kept buffer per thread
// reused between calls (the point: no fresh pages per kernel call), large requests not kept.
#include "mixlab/core/thread_scratch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

namespace thread_scratch_test {

TEST(ThreadScratch, AlignedAndReusedOnOneThread) {
  float* first = nullptr;
  {
    mixlab::ThreadScratch scratch;
    first = scratch.get<float>(1000);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first) % 64, 0u);
    first[999] = 1.0f;  // the whole range is usable
  }
  mixlab::ThreadScratch again;
  EXPECT_EQ(again.get<double>(100), reinterpret_cast<double*>(first)) << "a smaller request reuses the kept buffer";
}

TEST(ThreadScratch, ThreadsHaveTheirOwnBuffers) {
  mixlab::ThreadScratch scratch;
  float* here = scratch.get<float>(256);
  float* there = nullptr;
  std::thread other([&] {
    mixlab::ThreadScratch s;
    there = s.get<float>(256);
  });
  other.join();
  EXPECT_NE(here, there);
}

TEST(ThreadScratch, LargeRequestsAreNotKept) {
  const size_t large = mixlab::kThreadScratchKeepBytes / sizeof(float) + 16;
  mixlab::ThreadScratch small_first;
  float* kept = small_first.get<float>(64);
  {
    mixlab::ThreadScratch big;
    float* p = big.get<float>(large);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
    EXPECT_NE(p, kept);
    p[large - 1] = 2.0f;
  }
  mixlab::ThreadScratch after;
  EXPECT_EQ(after.get<float>(64), kept) << "the kept buffer is still the small one";
}

}  // namespace thread_scratch_test
