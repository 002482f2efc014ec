// The ssm mixer computes through the order:1 resolvent op; these pin its edge lengths.
#include "mixlab/scan/ssm.h"

#include <gtest/gtest.h>

namespace ssm_test {

using mixlab::MixerDims;
using mixlab::SsmMixer;

// T = 1: order:1 has no past slot at length 1 (W = 0), so beta must be 0 wide (issue 10 item 3).
TEST(Ssm, ForwardAtEveryShortLengthEqualsStep) {
  torch::manual_seed(3);
  SsmMixer m(MixerDims{}, 16);
  for (int64_t T : {1, 2, 5}) {
    auto x = torch::randn({2, T, MixerDims{}.d_model});
    torch::NoGradGuard no_grad;
    auto y = m.forward(x);
    ASSERT_EQ(y.sizes(), x.sizes());
    auto st = m.init_state(2);
    for (int64_t t = 0; t < T; ++t)
      EXPECT_TRUE(torch::allclose(m.step(*st, x.select(1, t)), y.select(1, t), 1e-5, 1e-5)) << "T=" << T << " t=" << t;
  }
}

}  // namespace ssm_test
