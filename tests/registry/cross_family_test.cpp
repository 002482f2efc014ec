// Identities between families that live in different areas, so they can only be checked here
// (the registry's tests link every mixer area): the fused selective scan (scan/) is the order:1
// resolvent op (resolvent/) it replaced in the ssm mixer.
#include <gtest/gtest.h>

#include "mixlab/resolvent/resolvent.h"
#include "mixlab/scan/selective_scan.h"
#include "support/gradcheck.h"

namespace cross_family_test {

using mixlab::testing::all_close;
using torch::Tensor;

// The recurrence is the order:1 resolvent row of seed 000 eq. 22 (the ssm mixer's former path):
// heads C·N of dim 1, α_tt = Δ_t b_t[n], β_{t,t-1} = exp(Δ_t a[c,n]), x_t = u_t[c].
TEST(CrossFamily, SelectiveScanEqualsTheOrder1ResolventOp) {
  torch::manual_seed(1);
  const int64_t B = 2, T = 9, C = 4, N = 3;
  auto o = torch::TensorOptions().dtype(torch::kFloat64);
  struct {
    Tensor u, delta, a, b, c, d;
  } in{torch::randn({B, T, C}, o),
       torch::softplus(torch::randn({B, T, C}, o)) * 0.5,
       -torch::exp(torch::randn({C, N}, o) * 0.5),
       torch::randn({B, T, N}, o),
       torch::randn({B, T, N}, o),
       torch::randn({C}, o)};
  auto decay = torch::exp(in.delta.unsqueeze(-1) * in.a);   // (B,T,C,N)
  auto input = in.delta.unsqueeze(-1) * in.b.unsqueeze(2);  // (B,T,C,N)
  auto rows = [&](const Tensor& t) { return t.permute({0, 2, 3, 1}).reshape({B, C * N, T, 1}); };
  auto xs = in.u.transpose(1, 2).unsqueeze(2).expand({B, C, N, T}).reshape({B, C * N, T, 1});
  auto h = mixlab::resolvent_forward(rows(input), rows(decay), xs, mixlab::Pattern::parse("order:1"));
  auto y_op = (h.view({B, C, N, T}).permute({0, 3, 1, 2}) * in.c.unsqueeze(2)).sum(-1) + in.d * in.u;
  EXPECT_TRUE(all_close(mixlab::selective_scan(in.u, in.delta, in.a, in.b, in.c, in.d), y_op, 1e-11, 1e-11));
}

}  // namespace cross_family_test
