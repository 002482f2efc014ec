// The transposed read table of the resolvent op's gathering backward
// (src/resolvent/resolvent_readers.h) against a plain search of the (T,W) table: for every chunk
// row j, every (row, slot) that reads it, in ascending row order, and nothing else (unused slots,
// slots past a row's count and past rows of a state have no entry); empty for offset rows.
#include "../../src/resolvent/resolvent_readers.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "mixlab/pattern/pattern.h"

namespace resolvent_readers_test {

namespace {

using mixlab::detail::ResolventParams;
using mixlab::detail::ResolventReaders;
using Entry = std::pair<int64_t, int64_t>;  // (reader row, slot)

// The readers of row j by a search of the whole table, row by row and slot by slot.
std::vector<Entry> readers_by_search(const int64_t* src, const int64_t* count, int64_t T, int64_t W, int64_t j) {
  std::vector<Entry> out;
  for (int64_t i = 0; i < T; ++i)
    for (int64_t s = 0; s < count[i]; ++s)
      if (src[i * W + s] == j) out.emplace_back(i, s);
  return out;
}

std::vector<Entry> readers_of(const ResolventReaders& r, int64_t j) {
  std::vector<Entry> out;
  for (int64_t e = r.start[j]; e < r.start[j + 1]; ++e) out.emplace_back(r.row[e], r.slot[e]);
  return out;
}

void expect_transpose_of(const int64_t* src, const int64_t* count, int64_t T, int64_t W, const char* what) {
  ResolventParams<float> p;
  p.T = T;
  p.W = W;
  p.src = src;
  p.count = count;
  const ResolventReaders r = mixlab::detail::resolvent_readers(p);
  ASSERT_EQ(static_cast<int64_t>(r.start.size()), T + 1) << what;
  ASSERT_EQ(r.row.size(), r.slot.size()) << what;
  EXPECT_EQ(r.start.front(), 0) << what;
  EXPECT_EQ(r.start.back(), static_cast<int64_t>(r.row.size())) << what;
  for (int64_t j = 0; j < T; ++j)
    EXPECT_EQ(readers_of(r, j), readers_by_search(src, count, T, W, j)) << what << " row " << j;
}

}  // namespace

TEST(ResolventReaders, TransposeTheIndexOfCachePatterns) {
  for (const char* spec : {"pow2+cache", "square+cache", "fib+cache"}) {
    const auto p = mixlab::Pattern::parse(spec);
    for (int64_t T : {1, 2, 7, 200}) {
      const auto index = mixlab::pattern_index(p, T);
      expect_transpose_of(index->past.data(), index->count.data(), T, index->W, spec);
    }
  }
}

// A chunk that continues a state: past rows (-2, -3) and unused slots (-1) have no entry, nor
// does a chunk row in a slot at or past its row's count.
TEST(ResolventReaders, SkipPastRowsUnusedSlotsAndSlotsPastTheCount) {
  const int64_t T = 4, W = 3;
  const std::vector<int64_t> src = {-2, -1, -1,  //
                                    0,  -3, -1,  //
                                    1,  0,  -2,  //
                                    2,  1,  0};
  const std::vector<int64_t> count = {1, 2, 3, 2};  // row 3's slot 2 (row 0) is past its count
  expect_transpose_of(src.data(), count.data(), T, W, "hand-made chunk");
  ResolventParams<float> p;
  p.T = T;
  p.W = W;
  p.src = src.data();
  p.count = count.data();
  const ResolventReaders r = mixlab::detail::resolvent_readers(p);
  EXPECT_EQ(readers_of(r, 0), (std::vector<Entry>{{1, 0}, {2, 1}}));
  EXPECT_EQ(readers_of(r, 1), (std::vector<Entry>{{2, 0}, {3, 1}}));
  EXPECT_EQ(readers_of(r, 2), (std::vector<Entry>{{3, 0}}));
  EXPECT_TRUE(readers_of(r, 3).empty());
}

// Offset rows derive their readers from the offsets: no table is built.
TEST(ResolventReaders, EmptyForOffsetRows) {
  const std::vector<int64_t> offsets = {1, 2, 4}, count = {0, 1, 2, 2, 3};
  ResolventParams<float> p;
  p.T = 5;
  p.W = 3;
  p.offsets = offsets.data();
  p.count = count.data();
  EXPECT_TRUE(mixlab::detail::resolvent_readers(p).empty());
}

}  // namespace resolvent_readers_test
