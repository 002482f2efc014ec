// Causal Toeplitz op: FFT and materialised paths against the loop reference, forward and backward,
// awkward lengths, non-contiguous inputs, gradcheck in double, argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/toeplitz/toeplitz.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"

namespace toeplitz_op_test {

using mixlab::ToeplitzPath;
using mixlab::testing::all_close;
using mixlab::testing::gradcheck;

namespace {

struct Case {
  int64_t B, H, T, D, Tmax;
};

const std::vector<Case> kCases = {
    {2, 3, 1, 2, 1}, {1, 2, 2, 3, 5}, {2, 2, 17, 3, 20}, {1, 2, 256, 4, 256}, {1, 1, 1000, 3, 1003},
};

const std::vector<ToeplitzPath> kPaths = {ToeplitzPath::kFft, ToeplitzPath::kMaterialized, ToeplitzPath::kAuto};

std::string label(const Case& c, ToeplitzPath p) {
  return "T=" + std::to_string(c.T) + " path=" + mixlab::toeplitz_path_name(p);
}

// Tolerance of a float path: rounding of a length-T sum grows ~sqrt(T); FFT adds ~log n.
double float_tol(int64_t T) { return 2e-5 * std::sqrt(static_cast<double>(T)) + 1e-5; }

}  // namespace

TEST(ToeplitzReference, SmallHandExample) {
  // t = [1, 2, 3], x = e_0 (impulse): y = t (the first column of T); plus bias.
  auto t = torch::tensor({1.0, 2.0, 3.0}, torch::kDouble).reshape({1, 3});
  auto x = torch::zeros({1, 1, 3, 1}, torch::kDouble);
  x[0][0][0][0] = 1.0;
  auto bias = torch::tensor({10.0, 20.0, 30.0}, torch::kDouble).reshape({1, 3});
  auto y = mixlab::toeplitz_reference_forward(t, x, bias).reshape({3});
  EXPECT_TRUE(torch::equal(y, torch::tensor({11.0, 22.0, 33.0}, torch::kDouble))) << y;
  // x = [1, 1, 1]: y_i = sum_{k<=i} t_k = [1, 3, 6].
  auto y2 = mixlab::toeplitz_reference_forward(t, torch::ones({1, 1, 3, 1}, torch::kDouble)).reshape({3});
  EXPECT_TRUE(torch::equal(y2, torch::tensor({1.0, 3.0, 6.0}, torch::kDouble))) << y2;
}

TEST(ToeplitzOp, ForwardMatchesReferenceFloat) {
  torch::manual_seed(1);
  for (const auto& c : kCases) {
    auto t = torch::randn({c.H, c.Tmax});
    auto x = torch::randn({c.B, c.H, c.T, c.D});
    auto bias = torch::randn({c.H, c.Tmax});
    auto ref = mixlab::toeplitz_reference_forward(t, x, bias);
    for (auto p : kPaths) {
      auto y = mixlab::toeplitz_forward(t, x, bias, p);
      EXPECT_EQ(y.sizes(), x.sizes());
      EXPECT_TRUE(all_close(y, ref, float_tol(c.T), float_tol(c.T))) << label(c, p);
    }
    // Without bias too.
    auto ref_nb = mixlab::toeplitz_reference_forward(t, x);
    for (auto p : kPaths)
      EXPECT_TRUE(all_close(mixlab::toeplitz_forward(t, x, {}, p), ref_nb, float_tol(c.T), float_tol(c.T)))
          << label(c, p);
  }
}

TEST(ToeplitzOp, BackwardMatchesReferenceDouble) {
  torch::manual_seed(2);
  for (const auto& c : kCases) {
    auto t0 = torch::randn({c.H, c.Tmax}, torch::kDouble);
    auto x0 = torch::randn({c.B, c.H, c.T, c.D}, torch::kDouble);
    auto b0 = torch::randn({c.H, c.Tmax}, torch::kDouble);
    auto g = torch::randn({c.B, c.H, c.T, c.D}, torch::kDouble);
    auto ref = mixlab::toeplitz_reference_backward(t0, x0, b0, g);
    for (auto p : kPaths) {
      auto t = t0.clone().requires_grad_(true);
      auto x = x0.clone().requires_grad_(true);
      auto b = b0.clone().requires_grad_(true);
      (mixlab::toeplitz_forward(t, x, b, p) * g).sum().backward();
      EXPECT_TRUE(all_close(t.grad(), ref.dt, 1e-9, 1e-9)) << label(c, p) << " dt";
      EXPECT_TRUE(all_close(x.grad(), ref.dx, 1e-9, 1e-9)) << label(c, p) << " dx";
      EXPECT_TRUE(all_close(b.grad(), ref.dbias, 1e-9, 1e-9)) << label(c, p) << " dbias";
    }
  }
}

TEST(ToeplitzOp, BackwardMatchesReferenceFloat) {
  torch::manual_seed(3);
  const Case c{2, 2, 300, 5, 310};
  auto t0 = torch::randn({c.H, c.Tmax});
  auto x0 = torch::randn({c.B, c.H, c.T, c.D});
  auto b0 = torch::randn({c.H, c.Tmax});
  auto g = torch::randn({c.B, c.H, c.T, c.D});
  auto ref = mixlab::toeplitz_reference_backward(t0, x0, b0, g);
  for (auto p : {ToeplitzPath::kFft, ToeplitzPath::kMaterialized}) {
    auto t = t0.clone().requires_grad_(true);
    auto x = x0.clone().requires_grad_(true);
    auto b = b0.clone().requires_grad_(true);
    (mixlab::toeplitz_forward(t, x, b, p) * g).sum().backward();
    // dt sums B*T*D products: scale the tolerance with the sum length.
    EXPECT_TRUE(all_close(t.grad(), ref.dt, 1e-4, 1e-3)) << label(c, p);
    EXPECT_TRUE(all_close(x.grad(), ref.dx, 1e-4, 1e-3)) << label(c, p);
    EXPECT_TRUE(all_close(b.grad(), ref.dbias, 1e-4, 1e-3)) << label(c, p);
  }
}

TEST(ToeplitzOp, NonContiguousInputs) {
  torch::manual_seed(4);
  const int64_t B = 2, H = 3, T = 19, D = 5;
  // x (B,H,T,D) as a transposed view of (B,H,D,T); t and bias as strided slices.
  auto x = torch::randn({B, H, D, T}, torch::kDouble).transpose(2, 3);
  auto t = torch::randn({H, 2 * (T + 4)}, torch::kDouble).slice(1, 0, 2 * (T + 4), 2);
  auto bias = torch::randn({T + 4, H}, torch::kDouble).t();
  ASSERT_FALSE(x.is_contiguous());
  ASSERT_FALSE(t.is_contiguous());
  ASSERT_FALSE(bias.is_contiguous());
  auto ref = mixlab::toeplitz_reference_forward(t.contiguous(), x.contiguous(), bias.contiguous());
  EXPECT_TRUE(all_close(mixlab::toeplitz_reference_forward(t, x, bias), ref, 1e-12, 1e-12));
  for (auto p : kPaths) EXPECT_TRUE(all_close(mixlab::toeplitz_forward(t, x, bias, p), ref, 1e-10, 1e-10));
}

TEST(ToeplitzOp, GradcheckDoubleBothPaths) {
  torch::manual_seed(5);
  for (auto p : {ToeplitzPath::kFft, ToeplitzPath::kMaterialized}) {
    for (int64_t T : {1, 2, 7}) {
      auto t = torch::randn({2, T + 2}, torch::kDouble).requires_grad_(true);
      auto x = torch::randn({2, 2, T, 3}, torch::kDouble).requires_grad_(true);
      auto b = torch::randn({2, T + 2}, torch::kDouble).requires_grad_(true);
      EXPECT_TRUE(
          gradcheck([p](const std::vector<at::Tensor>& in) { return mixlab::toeplitz_forward(in[0], in[1], in[2], p); },
                    {t, x, b}))
          << "T=" << T << " path=" << mixlab::toeplitz_path_name(p);
    }
  }
}

TEST(ToeplitzOp, FftPathHasNoQuadraticTensor) {
  // T = 2^17: any T x T float tensor would need 64 GiB and fail to allocate; the FFT path needs a
  // few MiB. Forward and backward.
  const int64_t T = int64_t{1} << 17;
  auto t = (torch::randn({1, T}) / std::sqrt(static_cast<double>(T))).requires_grad_(true);
  auto x = torch::randn({1, 1, T, 1}).requires_grad_(true);
  auto y = mixlab::toeplitz_forward(t, x, {}, ToeplitzPath::kFft);
  y.sum().backward();
  EXPECT_EQ(t.grad().sizes(), t.sizes());
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  // Spot-check a few rows against the definition (O(T) each).
  for (int64_t i : {int64_t{0}, int64_t{1}, T / 3, T - 1}) {
    auto lags = t.detach()[0].narrow(0, 0, i + 1).flip({0}).to(torch::kDouble);
    auto xs = x.detach()[0][0].narrow(0, 0, i + 1).reshape({i + 1}).to(torch::kDouble);
    const double expect = (lags * xs).sum().item<double>();
    EXPECT_NEAR(y[0][0][i][0].item<double>(), expect, 1e-3 + 1e-4 * std::abs(expect)) << "row " << i;
  }
}

TEST(ToeplitzOp, PathResolution) {
  using mixlab::kToeplitzFftCrossoverT;
  EXPECT_EQ(mixlab::toeplitz_path_resolve(ToeplitzPath::kAuto, kToeplitzFftCrossoverT - 1),
            ToeplitzPath::kMaterialized);
  EXPECT_EQ(mixlab::toeplitz_path_resolve(ToeplitzPath::kAuto, kToeplitzFftCrossoverT), ToeplitzPath::kFft);
  EXPECT_EQ(mixlab::toeplitz_path_resolve(ToeplitzPath::kFft, 1), ToeplitzPath::kFft);
  EXPECT_EQ(mixlab::toeplitz_path_resolve(ToeplitzPath::kMaterialized, 1 << 20), ToeplitzPath::kMaterialized);
  EXPECT_EQ(mixlab::toeplitz_fft_size(1), 2);
  EXPECT_EQ(mixlab::toeplitz_fft_size(17), 64);
  EXPECT_EQ(mixlab::toeplitz_fft_size(256), 512);
}

TEST(ToeplitzOp, BadArguments) {
  auto t = torch::randn({2, 8});
  auto x = torch::randn({1, 2, 8, 3});
  expect_error(
      [&] {
        mixlab::toeplitz_forward(torch::randn({2, 5}), x);
      },
      "toeplitz_forward: lag vector t (H,Tmax) = [2,5] is shorter than the sequence T = 8");
  expect_error(
      [&] {
        mixlab::toeplitz_forward(torch::randn({3, 8}), x);
      },
      "toeplitz_forward: t must have one lag vector per head");
  expect_error([&] { mixlab::toeplitz_forward(t, torch::randn({1, 2, 0, 3})); }, "toeplitz_forward: x must have T > 0");
  expect_error(
      [&] {
        mixlab::toeplitz_forward(t, torch::ones({1, 2, 8, 3}, torch::kInt));
      },
      "toeplitz_forward: x must be float32 or float64, got Int");
  expect_error([&] { mixlab::toeplitz_forward(t.to(torch::kDouble), x); },
               "toeplitz_forward: t must have the dtype of x (Float), got Double");
  expect_error(
      [&] {
        mixlab::toeplitz_forward(t, torch::randn({2, 8, 3}));
      },
      "toeplitz_forward: x must have 4 dimensions (B,H,T,D), got shape [2,8,3]");
  expect_error(
      [&] {
        mixlab::toeplitz_forward(t, x, torch::randn({2, 7}));
      },
      "toeplitz_forward: bias must have shape (H,Tmax) = [2,8], got [2,7]");
  expect_error([&] { mixlab::toeplitz_forward(t.reshape({16}), x); },
               "toeplitz_forward: t must have 2 dimensions (H,Tmax), got shape [16]");
  expect_error([&] { mixlab::toeplitz_forward(at::Tensor(), x); }, "toeplitz_forward: t must be a defined tensor");
  expect_error(
      [&] {
        mixlab::toeplitz_reference_backward(t, x, {}, torch::randn({1, 2, 7, 3}));
      },
      "toeplitz_reference_backward: grad_y must have shape (B,H,T,D)");
}

}  // namespace toeplitz_op_test
