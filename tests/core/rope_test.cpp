// RoPE: rotations preserve norms, scores depend only on relative position, and applying it to a
// chunk at `start` equals the slice of the whole sequence (what decode relies on).
#include "mixlab/core/rope.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "mixlab/core/error.h"
#include "support/gradcheck.h"

namespace rope_test {

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

// The native pass (forward and backward, an autograd node) against the composed reference
// (ComposedRopeGuard): awkward sizes, a strided view as attention passes it (q of a fused qkv
// projection, permuted), both dtypes; the output contiguous on both paths; the float forward
// bitwise equal (the same products and sums in the same order), the gradient to float rounding.
TEST(Rope, NativeEqualsComposedForwardAndBackward) {
  torch::manual_seed(2);
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    for (auto [B, H, T, D] : std::vector<std::array<int64_t, 4>>{{1, 1, 1, 2}, {2, 3, 7, 6}, {3, 4, 33, 16}}) {
      for (int64_t start : {0, 5}) {
        auto proj = torch::randn({B, T, 3, H, D}, dtype);  // split_heads' layout
        auto go = torch::randn({B, H, T, D}, dtype);
        auto run = [&](bool composed) {
          auto p = proj.clone().requires_grad_(true);
          auto q = p.select(2, 0).permute({0, 2, 1, 3});  // (B,H,T,D), strided
          torch::Tensor y;
          if (composed) {
            mixlab::ComposedRopeGuard g;
            y = mixlab::rope_apply(q, start);
          } else {
            y = mixlab::rope_apply(q, start);
          }
          EXPECT_TRUE(y.is_contiguous());
          (y * go).sum().backward();
          return std::make_pair(y.detach(), p.grad());
        };
        auto [y_ref, g_ref] = run(true);
        auto [y, g] = run(false);
        const std::string at =
            fmt::format("dtype {} B{} H{} T{} D{} start {}", c10::toString(dtype), B, H, T, D, start);
        EXPECT_TRUE(torch::equal(y, y_ref)) << at;
        const double tol = dtype == torch::kFloat ? 1e-6 : 1e-14;
        EXPECT_TRUE(mixlab::testing::all_close(g, g_ref, tol, tol)) << at;
      }
    }
  }
  // Empty T, no autograd (InferenceMode, as prefill runs it).
  EXPECT_EQ(mixlab::rope_apply(torch::randn({1, 2, 0, 4})).sizes(), (std::vector<int64_t>{1, 2, 0, 4}));
  auto x = torch::randn({2, 2, 5, 4});
  torch::Tensor ref;
  {
    mixlab::ComposedRopeGuard g;
    ref = mixlab::rope_apply(x, 3);
  }
  c10::InferenceMode inference;
  EXPECT_TRUE(torch::equal(mixlab::rope_apply(x, 3), ref));
}

// The native node's gradient, and a double backward (create_graph: the composed inverse
// rotation), against finite differences in double.
TEST(Rope, NativeGradcheckAndDoubleBackward) {
  torch::manual_seed(3);
  auto x = torch::randn({2, 3, 5, 6}, torch::dtype(torch::kDouble).requires_grad(true));
  EXPECT_TRUE(
      mixlab::testing::gradcheck([](const std::vector<at::Tensor>& in) { return mixlab::rope_apply(in[0], 2); }, {x}));
  auto y = mixlab::rope_apply(x, 2);
  auto w = torch::randn_like(y);
  auto gx = torch::autograd::grad({(y * y * w).sum()}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
  auto ggx = torch::autograd::grad({gx.sum()}, {x})[0];
  torch::Tensor ggx_ref;
  {
    mixlab::ComposedRopeGuard g;
    auto xr = x.detach().clone().requires_grad_(true);
    auto yr = mixlab::rope_apply(xr, 2);
    auto gr = torch::autograd::grad({(yr * yr * w).sum()}, {xr}, {}, true, true)[0];
    ggx_ref = torch::autograd::grad({gr.sum()}, {xr})[0];
  }
  EXPECT_TRUE(mixlab::testing::all_close(ggx, ggx_ref, 1e-12, 1e-12));
}

}  // namespace rope_test
