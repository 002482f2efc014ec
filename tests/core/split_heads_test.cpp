// split_heads (mixlab/core/split_heads.h): the same per-head views as select() on the permuted
// projection, the same gradient, one UnbindBackward node instead of n SelectBackward nodes.
#include "mixlab/core/split_heads.h"

#include <gtest/gtest.h>

#include "mixlab/core/error.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"

namespace split_heads_test {

TEST(SplitHeads, EqualsSelectOfThePermutedProjectionWithGradients) {
  torch::manual_seed(5);
  const int64_t B = 2, T = 7, n = 3, H = 2, D = 5;
  auto proj = torch::randn({B, T, n * H * D}, torch::kDouble).requires_grad_(true);
  auto parts = mixlab::split_heads(proj, n, H, D);
  ASSERT_EQ(parts.size(), size_t(n));
  auto ref = proj.view({B, T, n, H, D}).permute({2, 0, 3, 1, 4});
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(parts[i].sizes(), (std::vector<int64_t>{B, H, T, D}));
    EXPECT_EQ(parts[i].stride(3), 1);
    EXPECT_TRUE(torch::equal(parts[i], ref.select(0, i)));
  }
  auto w = torch::randn({n, B, H, T, D}, torch::kDouble);
  auto loss = (parts[0] * w[0]).sum() + (parts[2] * w[2]).sum();  // block 1 gets no gradient
  auto g = torch::autograd::grad({loss}, {proj})[0];
  auto g_ref = torch::autograd::grad({(ref.select(0, 0) * w[0]).sum() + (ref.select(0, 2) * w[2]).sum()}, {proj})[0];
  EXPECT_TRUE(torch::equal(g, g_ref));
  EXPECT_EQ(parts[0].grad_fn()->next_edges()[0].function->name(), "UnbindBackward0");
}

TEST(SplitHeads, RejectsAProjectionOfTheWrongWidth) {
  expect_error([] { mixlab::split_heads(torch::zeros({2, 7, 29}), 3, 2, 5); }, {"split_heads: proj", "3*2*5 = 30"});
  expect_error([] { mixlab::split_heads(torch::zeros({7, 30}), 3, 2, 5); }, "(B,T,n*H*D)");
}

}  // namespace split_heads_test
