// Winding number / Fredholm index of Toeplitz symbols: known operators, additivity under products,
// agreement with the companion-matrix zero count, degenerate symbols, whole-model scan, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/toeplitz/index.h"
#include "mixlab/toeplitz/toeplitz_mixer.h"

namespace toeplitz_index_test {

using mixlab::toeplitz_index;
using mixlab::toeplitz_zeros_inside;

namespace {

torch::Tensor vec(std::vector<double> v) { return torch::tensor(v, torch::kDouble); }

// Full linear convolution of two lag vectors: the product of their symbols.
torch::Tensor convolve(const torch::Tensor& a, const torch::Tensor& b) {
  auto out = torch::zeros({a.size(0) + b.size(0) - 1}, torch::kDouble);
  auto aa = a.accessor<double, 1>();
  auto ba = b.accessor<double, 1>();
  auto oa = out.accessor<double, 1>();
  for (int64_t i = 0; i < a.size(0); ++i)
    for (int64_t j = 0; j < b.size(0); ++j) oa[i + j] += aa[i] * ba[j];
  return out;
}

// A random lag vector whose roots stay at least `margin` away from the unit circle.
torch::Tensor random_lags(int64_t n, double margin) {
  while (true) {
    auto t = torch::randn({n}, torch::kDouble);
    double m = 0;
    toeplitz_zeros_inside(t, &m);
    if (m > margin) return t;
  }
}

}  // namespace

TEST(ToeplitzIndex, IdentityAndShifts) {
  auto id = toeplitz_index(vec({1.0}));
  EXPECT_FALSE(id.degenerate);
  EXPECT_EQ(id.winding, 0);
  EXPECT_EQ(id.index, 0);
  EXPECT_NEAR(id.min_abs, 1.0, 1e-12);
  EXPECT_EQ(toeplitz_index(vec({2.5, 0.0, 0.0, 0.0})).index, 0);  // trailing zeros change nothing
  // One-step shift y_i = x_{i-1}: symbol e^{iθ}, winding 1, index -1 (seed 003 §7.2).
  auto shift = toeplitz_index(vec({0.0, 1.0}));
  EXPECT_FALSE(shift.degenerate);
  EXPECT_EQ(shift.winding, 1);
  EXPECT_EQ(shift.index, -1);
  EXPECT_EQ(toeplitz_index(vec({0.0, 0.0, 0.0, -3.0, 0.0})).index, -3);
  // Dominant diagonal: 1 + 0.5 z has its zero at -2 (outside): index 0; 0.5 + z has it at -0.5: -1.
  EXPECT_EQ(toeplitz_index(vec({1.0, 0.5})).index, 0);
  EXPECT_EQ(toeplitz_index(vec({0.5, 1.0})).index, -1);
  EXPECT_EQ(toeplitz_index(vec({1.0, 0.5}).to(torch::kFloat)).index, 0);  // float32 input
}

TEST(ToeplitzIndex, ProductsAddIndices) {
  torch::manual_seed(11);
  for (int rep = 0; rep < 10; ++rep) {
    auto a = random_lags(3 + rep, 0.05);
    auto b = random_lags(2 + 2 * rep, 0.05);
    auto ia = toeplitz_index(a), ib = toeplitz_index(b), iab = toeplitz_index(convolve(a, b));
    ASSERT_FALSE(ia.degenerate || ib.degenerate || iab.degenerate);
    EXPECT_EQ(iab.index, ia.index + ib.index) << "rep " << rep;
    EXPECT_EQ(iab.winding, ia.winding + ib.winding);
  }
  // Shift composed with itself: index -2.
  EXPECT_EQ(toeplitz_index(convolve(vec({0.0, 1.0}), vec({0.0, 1.0}))).index, -2);
}

TEST(ToeplitzIndex, AgreesWithCompanionZeroCount) {
  torch::manual_seed(12);
  int nonzero = 0;
  for (int64_t n : {2, 3, 5, 8, 13, 21, 34, 64, 100}) {
    for (int rep = 0; rep < 4; ++rep) {
      // Zeros of random polynomials crowd the circle at distance ~1/n: ask for a margin ~0.2/n^2.
      auto t = random_lags(n, 0.2 / static_cast<double>(n * n));
      const int64_t zeros = toeplitz_zeros_inside(t);
      auto r = toeplitz_index(t);
      ASSERT_FALSE(r.degenerate) << r.reason;
      EXPECT_EQ(r.winding, zeros) << "n=" << n << " rep=" << rep;
      EXPECT_EQ(r.index, -zeros);
      nonzero += zeros != 0;
    }
  }
  EXPECT_GT(nonzero, 10);  // the comparison is not all zeros
}

TEST(ToeplitzIndex, ZeroCountByCompanionMatrix) {
  // (z - 0.5)(z + 3) = z^2 + 2.5 z - 1.5: one zero inside. Coefficients lowest degree first.
  double margin = 0;
  EXPECT_EQ(toeplitz_zeros_inside(vec({-1.5, 2.5, 1.0}), &margin), 1);
  EXPECT_NEAR(margin, 0.5, 1e-12);
  EXPECT_EQ(toeplitz_zeros_inside(vec({0.0, 0.0, 1.0})), 2);  // z^2: double zero at 0
  EXPECT_EQ(toeplitz_zeros_inside(vec({4.0})), 0);
  EXPECT_THROW(toeplitz_zeros_inside(vec({0.0, 0.0})), mixlab::Error);
}

TEST(ToeplitzIndex, DegenerateSymbolsAreReported) {
  // 1 - z vanishes at θ = 0 and 1 + z at θ = π: both on the circle, no meaningful index.
  for (auto t : {vec({1.0, -1.0}), vec({1.0, 1.0}), vec({0.0, 0.0})}) {
    auto r = toeplitz_index(t);
    EXPECT_TRUE(r.degenerate);
    EXPECT_FALSE(r.reason.empty());
    EXPECT_LT(r.min_abs, 1e-9);
    EXPECT_EQ(r.index, 0);
  }
  // Zeros just outside the circle, (1 + 1e-4) e^{±i} (between samples): a small sample budget
  // cannot certify the count and says so instead of guessing.
  const double rho = 1.0 + 1e-4;
  auto t = vec({rho * rho, -2.0 * rho * std::cos(1.0), 1.0});  // z^2 - 2 rho cos(1) z + rho^2
  mixlab::ToeplitzIndexOptions small;
  small.min_samples = 64;
  small.max_samples = 64;  // no refinement allowed
  auto r = toeplitz_index(t, small);
  EXPECT_TRUE(r.degenerate);
  EXPECT_NE(r.reason.find("could not certify"), std::string::npos) << r.reason;
  auto full = toeplitz_index(t);  // with the default budget it is certified: both zeros outside
  EXPECT_FALSE(full.degenerate) << full.reason;
  EXPECT_EQ(full.index, 0);
  EXPECT_GT(full.samples, 1024);  // certified by refining the arcs near the zeros
  EXPECT_LT(full.samples, 1024 + 1000);
  // The mirrored pair inside, (1 - 1e-4) e^{±i}: two zeros inside, index -2.
  const double r_in = 1.0 - 1e-4;
  auto inside = toeplitz_index(vec({r_in * r_in, -2.0 * r_in * std::cos(1.0), 1.0}));
  EXPECT_FALSE(inside.degenerate) << inside.reason;
  EXPECT_EQ(inside.index, -2);
}

TEST(ToeplitzIndex, BadArguments) {
  try {
    toeplitz_index(torch::ones({2, 3}));
    ADD_FAILURE();
  } catch (const mixlab::Error& e) {
    EXPECT_NE(std::string(e.what()).find("toeplitz_index: lags must have 1 dimensions (N), got shape [2,3]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(toeplitz_index(torch::ones({3}, torch::kLong)), mixlab::Error);
  EXPECT_THROW(toeplitz_index(torch::ones({0})), mixlab::Error);
}

namespace {
struct TwoLayerModel : torch::nn::Module {
  TwoLayerModel() {
    mixlab::MixerDims d;
    d.d_model = 8;
    d.n_heads = 2;
    d.max_len = 32;
    a = register_module("a", std::make_shared<mixlab::ToeplitzMixer>("heads=2", d));
    block = register_module("block", torch::nn::Sequential());
    b = std::make_shared<mixlab::ToeplitzMixer>("heads=1:kernel=2", d);
    block->push_back("mix", b);
    block->push_back("lin", torch::nn::Linear(8, 8));
  }
  std::shared_ptr<mixlab::ToeplitzMixer> a, b;
  torch::nn::Sequential block{nullptr};
};
}  // namespace

TEST(ToeplitzIndex, ModelScanNamesEveryHead) {
  torch::manual_seed(13);
  TwoLayerModel model;
  {
    torch::NoGradGuard g;
    // Head 0 of `a` becomes the two-step shift (index -2), head 1 the identity (index 0).
    model.a->lags().zero_();
    model.a->lags()[0][0][2] = 1.0;
    model.a->lags()[1][0][0] = 1.0;
  }
  auto entries = mixlab::toeplitz_model_index(model);
  ASSERT_EQ(entries.size(), 4u);  // a: 2 heads x 1 kernel; block.mix: 1 head x 2 kernel elements
  EXPECT_EQ(entries[0].module, "a");
  EXPECT_EQ(entries[0].head, 0);
  EXPECT_EQ(entries[0].result.index, -2);
  EXPECT_EQ(entries[1].module, "a");
  EXPECT_EQ(entries[1].head, 1);
  EXPECT_EQ(entries[1].result.index, 0);
  for (int e = 2; e < 4; ++e) {
    EXPECT_EQ(entries[e].module, "block.mix");
    EXPECT_EQ(entries[e].head, 0);
    EXPECT_EQ(entries[e].kernel, e - 2);
    auto direct = toeplitz_index(model.b->lags()[0][e - 2]);
    EXPECT_EQ(entries[e].result.index, direct.index);
    EXPECT_EQ(entries[e].result.degenerate, direct.degenerate);
  }
  // A ToeplitzMixer given as the root module is found too; a model without one gives nothing.
  EXPECT_EQ(mixlab::toeplitz_model_index(*model.a).size(), 2u);
  EXPECT_TRUE(mixlab::toeplitz_model_index(torch::nn::LinearImpl(3, 3)).empty());
}

}  // namespace toeplitz_index_test
