// The Toeplitz op's native FFT kernel (src/toeplitz/fft_conv_kernels.inc, built as
// fft_conv_kernels_generic.cpp, fft_conv_kernels_avx2.cpp and
// fft_conv_kernels_avx512.cpp, each run below through MIXLAB_CPU_ISA) against the composed
// LibTorch FFT path (ComposedToeplitzFftGuard) and the loop reference, in every instruction-set
// build this CPU runs: several lane groups, partial groups, odd D, lengths on both sides of the
// L1 leaf of the depth-first transform, strided rows, partial gradients, float and double.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "mixlab/toeplitz/toeplitz.h"
#include "support/gradcheck.h"
#include "support/isa_scope.h"

namespace toeplitz_fft_native_test {

using mixlab::ToeplitzPath;
using mixlab::testing::all_close;

namespace {

struct Grads {
  torch::Tensor y, dt, dx, dbias;
};

// Forward and the gradients of <y, g> on the FFT path, native or composed.
Grads run(const torch::Tensor& t0, const torch::Tensor& x0, const torch::Tensor& b0, const torch::Tensor& g,
          bool composed) {
  auto t = t0.detach().clone().requires_grad_(true);
  auto x = x0.detach().clone().requires_grad_(true);
  auto b = b0.defined() ? b0.detach().clone().requires_grad_(true) : torch::Tensor();
  std::optional<mixlab::ComposedToeplitzFftGuard> guard;
  if (composed) guard.emplace();
  auto y = mixlab::toeplitz_forward(t, x, b, ToeplitzPath::kFft);
  (y * g).sum().backward();
  return {y.detach(), t.grad(), x.grad(), b.defined() ? b.grad() : torch::Tensor()};
}

}  // namespace

TEST(ToeplitzFftNative, EveryBuildMatchesComposedPath) {
  torch::manual_seed(11);
  struct Shape {
    int64_t B, H, T, D;
  };
  // D = 1..70: one lane used, a partial group, exactly one group (float), two groups, odd D with a
  // missing imaginary column, three groups. T = 1 (n = 2), around the 128/256-point leaves, and
  // n = 2048.
  const std::vector<Shape> shapes = {{1, 1, 1, 1},    {2, 1, 3, 2},    {1, 2, 64, 31},  {1, 1, 128, 32},
                                     {2, 2, 129, 33}, {1, 1, 300, 64}, {1, 2, 1000, 70}};
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    const double tol = dtype == torch::kFloat ? 2e-4 : 1e-10;
    for (const auto& s : shapes) {
      auto opts = torch::TensorOptions().dtype(dtype);
      auto t = torch::randn({s.H, s.T + 3}, opts) / std::sqrt(static_cast<double>(s.T));
      // x with a row stride of H*D (a (B,T,H,D) tensor seen as (B,H,T,D)), as the mixer's
      // projections deliver it.
      auto x = torch::randn({s.B, s.T, s.H, s.D}, opts).permute({0, 2, 1, 3});
      auto bias = torch::randn({s.H, s.T + 3}, opts);
      auto g = torch::randn({s.B, s.H, s.T, s.D}, opts);
      const auto ref = run(t, x, bias, g, true);
      for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
        mixlab::testing::IsaScope scope(isa);
        const auto got = run(t, x, bias, g, false);
        const std::string where =
            isa + " T=" + std::to_string(s.T) + " D=" + std::to_string(s.D) + " " + std::string(c10::toString(dtype));
        EXPECT_TRUE(all_close(got.y, ref.y, tol, tol)) << where << " y";
        EXPECT_TRUE(all_close(got.dt, ref.dt, tol * 10, tol)) << where << " dt";
        EXPECT_TRUE(all_close(got.dx, ref.dx, tol, tol)) << where << " dx";
        EXPECT_TRUE(all_close(got.dbias, ref.dbias, tol, tol)) << where << " dbias";
      }
    }
  }
}

TEST(ToeplitzFftNative, MatchesLoopReferenceWithoutBias) {
  torch::manual_seed(12);
  auto t = torch::randn({2, 520}, torch::kDouble);
  auto x = torch::randn({2, 2, 513, 40}, torch::kDouble);
  auto y = mixlab::toeplitz_forward(t, x, {}, ToeplitzPath::kFft);
  EXPECT_TRUE(all_close(y, mixlab::toeplitz_reference_forward(t, x), 1e-10, 1e-10));
}

TEST(ToeplitzFftNative, PartialGradientsAndNoGrad) {
  torch::manual_seed(13);
  auto t0 = torch::randn({2, 200});
  auto x0 = torch::randn({1, 2, 200, 48});
  auto g = torch::randn({1, 2, 200, 48});
  auto ref = mixlab::toeplitz_reference_backward(t0, x0, {}, g);
  {  // only x needs a gradient
    auto x = x0.clone().requires_grad_(true);
    (mixlab::toeplitz_forward(t0, x, {}, ToeplitzPath::kFft) * g).sum().backward();
    EXPECT_TRUE(all_close(x.grad(), ref.dx, 1e-4, 1e-3));
  }
  {  // only t needs a gradient
    auto t = t0.clone().requires_grad_(true);
    (mixlab::toeplitz_forward(t, x0, {}, ToeplitzPath::kFft) * g).sum().backward();
    EXPECT_TRUE(all_close(t.grad(), ref.dt, 1e-3, 1e-3));
  }
  {  // inference mode: no graph, the same values
    c10::InferenceMode inference;
    auto y = mixlab::toeplitz_forward(t0, x0, {}, ToeplitzPath::kFft);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(all_close(y, mixlab::toeplitz_reference_forward(t0, x0), 1e-4, 1e-4));
  }
}

TEST(ToeplitzFftNative, ComposedGuardIsScoped) {
  // Under the guard the FFT path is LibTorch's (differentiable twice); without it, the native
  // backward, which is not differentiable again.
  auto t = torch::randn({1, 8}, torch::kDouble).requires_grad_(true);
  auto x = torch::randn({1, 1, 8, 2}, torch::kDouble).requires_grad_(true);
  {
    mixlab::ComposedToeplitzFftGuard guard;
    auto y = mixlab::toeplitz_forward(t, x, {}, ToeplitzPath::kFft);
    auto gx = torch::autograd::grad({y.pow(2).sum()}, {x}, {}, true, true)[0];
    EXPECT_TRUE(gx.requires_grad());
  }
  auto y = mixlab::toeplitz_forward(t, x, {}, ToeplitzPath::kFft);
  auto gx = torch::autograd::grad({y.pow(2).sum()}, {x}, {}, true, true)[0];
  EXPECT_TRUE(
      all_close(gx, 2 * mixlab::toeplitz_reference_backward(t.detach(), x.detach(), {}, y.detach()).dx, 1e-10, 1e-10));
}

}  // namespace toeplitz_fft_native_test
