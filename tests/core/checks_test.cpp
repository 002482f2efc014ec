// Boundary checks produce messages that name the function, argument, expected and actual shape.
#include <gtest/gtest.h>

#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/core/threads.h"
#include "support/gradcheck.h"

namespace checks_test {

TEST(Checks, ShapeMessageNamesEverything) {
  auto t = torch::zeros({2, 3});
  try {
    mixlab::check_shape("op", "alpha", t, {2, 4}, "(B,W)");
    FAIL();
  } catch (const mixlab::Error& e) {
    EXPECT_STREQ(e.what(), "op: alpha must have shape (B,W) = [2,4], got [2,3]");
  }
  EXPECT_THROW(mixlab::check_dim("op", "x", t, 3, "(B,T,C)"), mixlab::Error);
  EXPECT_THROW(mixlab::check_floating("op", "x", torch::zeros({1}, torch::kInt)), mixlab::Error);
  EXPECT_THROW(mixlab::check_defined("op", "x", at::Tensor()), mixlab::Error);
  EXPECT_NO_THROW(mixlab::check_shape("op", "x", t, {-1, 3}, "(B,W)"));
}

TEST(Checks, InternalAssertCarriesLocation) {
  try {
    MIXLAB_ASSERT(1 == 2, "value {}", 7);
    FAIL();
  } catch (const mixlab::InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("checks_test.cpp"), std::string::npos);
  }
}

TEST(Threads, ExplicitCountWins) {
  EXPECT_EQ(mixlab::threads_configure(1), 1);
  EXPECT_EQ(at::get_num_threads(), 1);
}

TEST(Gradcheck, CatchesAWrongGradient) {
  // A function whose backward is deliberately wrong must fail the check: the helper can fail.
  struct Wrong : torch::autograd::Function<Wrong> {
    static at::Tensor forward(torch::autograd::AutogradContext*, at::Tensor x) { return x * x; }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                   torch::autograd::variable_list g) {
      return {g[0]};  // should be 2x * g
    }
  };
  auto x = torch::randn({4}, torch::kDouble).requires_grad_();
  EXPECT_FALSE(mixlab::testing::gradcheck([](const std::vector<at::Tensor>& in) { return Wrong::apply(in[0]); }, {x}));
  EXPECT_TRUE(mixlab::testing::gradcheck([](const std::vector<at::Tensor>& in) { return in[0] * in[0]; }, {x}));
}

}  // namespace checks_test
