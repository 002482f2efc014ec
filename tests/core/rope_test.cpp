// RoPE: rotations preserve norms, scores depend only on relative position, and applying it to a
// chunk at `start` equals the slice of the whole sequence (what decode relies on).
#include "mixlab/core/rope.h"

#include <gtest/gtest.h>

#include "mixlab/core/error.h"
#include "support/gradcheck.h"

TEST(Rope, PreservesNormsAndIsRelative) {
  torch::manual_seed(0);
  auto x = torch::randn({2, 3, 11, 8}, torch::kDouble);
  auto r = mixlab::rope_apply(x);
  EXPECT_TRUE(mixlab::testing::all_close(r.norm(2, -1), x.norm(2, -1), 1e-12, 1e-12));
  // Same q, k vectors placed at (i, j) and (i+5, j+5): identical score.
  auto q = torch::randn({1, 1, 1, 8}, torch::kDouble), k = torch::randn({1, 1, 1, 8}, torch::kDouble);
  auto s1 = (mixlab::rope_apply(q, 7) * mixlab::rope_apply(k, 3)).sum();
  auto s2 = (mixlab::rope_apply(q, 12) * mixlab::rope_apply(k, 8)).sum();
  EXPECT_NEAR(s1.item<double>(), s2.item<double>(), 1e-12);
}

TEST(Rope, ChunkAtOffsetEqualsSliceOfWhole) {
  auto x = torch::randn({1, 2, 20, 6});
  auto whole = mixlab::rope_apply(x);
  auto part = mixlab::rope_apply(x.narrow(2, 13, 7), 13);
  EXPECT_TRUE(mixlab::testing::all_close(part, whole.narrow(2, 13, 7), 1e-6, 1e-6));
}

TEST(Rope, RejectsOddHeadDimAndBadRank) {
  EXPECT_THROW(mixlab::rope_apply(torch::randn({1, 1, 4, 5})), mixlab::Error);
  EXPECT_THROW(mixlab::rope_apply(torch::randn({4, 6})), mixlab::Error);
  EXPECT_THROW(mixlab::rope_apply(torch::randn({1, 1, 4, 6}), -1), mixlab::Error);
}

// The decode steps' raw-row RoPE rotates like rope_apply at the same position.
TEST(Rope, RowsEqualRopeApplyAtOnePosition) {
  torch::manual_seed(1);
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    const double tol = dtype == torch::kFloat ? 1e-6 : 1e-13;
    for (int64_t D : {2, 6, 16}) {
      const auto inv = mixlab::rope_inv_freq(D);
      for (int64_t pos : {0, 1, 37, 1023, 70000}) {
        auto x = torch::randn({2, 3, 1, D}, dtype);  // (B,H,1,D): 6 rows of D
        auto expected = mixlab::rope_apply(x, pos);
        auto got = x.clone();
        if (dtype == torch::kFloat)
          mixlab::rope_rows<float>(got.data_ptr<float>(), 6, D, pos, inv);
        else
          mixlab::rope_rows<double>(got.data_ptr<double>(), 6, D, pos, inv);
        EXPECT_TRUE(mixlab::testing::all_close(got, expected, tol, tol)) << "D " << D << " pos " << pos;
      }
    }
  }
  EXPECT_THROW(mixlab::rope_inv_freq(5), mixlab::Error);
}

// The cached tables are the angles rope_apply used to build per call, and a table first built
// under InferenceMode (decode) still serves a training call that saves it for backward.
TEST(Rope, TableIsCachedAndServesTrainingAfterDecode) {
  {
    c10::InferenceMode decode;
    auto t = mixlab::rope_table(3, 17, 8, 10000.0, torch::kFloat);
    EXPECT_EQ(t.cos.sizes(), (std::vector<int64_t>{17, 4}));
  }
  auto again = mixlab::rope_table(3, 17, 8, 10000.0, torch::kFloat);
  EXPECT_FALSE(again.cos.is_inference());
  auto same = mixlab::rope_table(3, 17, 8, 10000.0, torch::kFloat);
  EXPECT_EQ(again.cos.data_ptr(), same.cos.data_ptr());  // served from the cache
  auto pos = torch::arange(3, 20, torch::kDouble).unsqueeze(1);
  auto inv = torch::pow(10000.0, -torch::arange(0, 4, torch::kDouble) * 2.0 / 8);
  EXPECT_TRUE(mixlab::testing::all_close(again.cos, (pos * inv).cos().to(torch::kFloat), 1e-7, 1e-7));
  EXPECT_TRUE(mixlab::testing::all_close(again.sin, (pos * inv).sin().to(torch::kFloat), 1e-7, 1e-7));
  auto x = torch::randn({1, 2, 17, 8}, torch::requires_grad());
  mixlab::rope_apply(x, 3).sum().backward();  // would throw if the table were an inference tensor
  EXPECT_TRUE(x.grad().defined());
  EXPECT_THROW(mixlab::rope_table(0, 4, 5, 10000.0, torch::kFloat), mixlab::Error);
  EXPECT_THROW(mixlab::rope_table(-1, 4, 6, 10000.0, torch::kFloat), mixlab::Error);
}
