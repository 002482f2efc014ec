// causal_attention: the native blocked kernel (src/attention/flash_kernels.inc, built as
// flash_kernels_generic.cpp, flash_kernels_avx2.cpp and
// flash_kernels_avx512.cpp, each run below through MIXLAB_CPU_ISA) against the
// composed LibTorch form (ComposedAttentionGuard) in every instruction-set build this CPU runs:
// forward and the three gradients, float and double, head dims that use 4, 3, 2 and 1 vectors and
// narrower ones (D 4, 8, 12, 24: a half or a quarter of a zmm),
// query counts around the 32-row blocks, cached positions before the queries (prefill), strided
// inputs; a finite-difference check in double; the fallback for other head dims; bad arguments.
// The same for a window (local attention): every window size against the block sizes, with the
// written-out band definition.
#include "mixlab/attention/causal_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "mixlab/attention/attention.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/isa_scope.h"

namespace causal_attention_test {

using mixlab::testing::all_close;

namespace {

struct Result {
  torch::Tensor y, dq, dk, dv;
};

Result run(const torch::Tensor& q0, const torch::Tensor& k0, const torch::Tensor& v0, const torch::Tensor& g,
           bool composed, int64_t window = 0) {
  auto q = q0.detach().clone().requires_grad_(true);
  auto k = k0.detach().clone().requires_grad_(true);
  auto v = v0.detach().clone().requires_grad_(true);
  std::optional<mixlab::ComposedAttentionGuard> guard;
  if (composed) guard.emplace();
  auto y = mixlab::causal_attention(q, k, v, window);
  (y * g).sum().backward();
  return {y.detach(), q.grad(), k.grad(), v.grad()};
}

// q, k, v as the mixer makes them: (B,H,T,D) views of one (B,T,3,H,D) projection.
std::vector<torch::Tensor> split_projection(int64_t B, int64_t H, int64_t T, int64_t D, torch::Dtype dtype) {
  auto qkv = torch::randn({B, T, 3, H, D}, torch::dtype(dtype)).permute({2, 0, 3, 1, 4});
  return {qkv[0], qkv[1], qkv[2]};
}

}  // namespace

TEST(CausalAttention, EveryBuildMatchesComposed) {
  torch::manual_seed(21);
  struct Case {
    int64_t B, H, T, S, D;
  };
  const std::vector<Case> cases = {{1, 1, 1, 0, 16},   {2, 3, 5, 0, 64},  {1, 2, 32, 0, 48}, {1, 2, 33, 0, 32},
                                   {2, 1, 100, 0, 80}, {1, 2, 70, 7, 64}, {1, 1, 3, 70, 16}, {1, 1, 200, 33, 64},
                                   {2, 4, 65, 0, 8},   {1, 2, 70, 5, 24}, {1, 1, 33, 0, 4},  {2, 1, 50, 3, 12},
                                   {1, 2, 40, 3, 2},   {2, 1, 50, 0, 6}};
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    const double tol = dtype == torch::kFloat ? 3e-5 : 1e-11;
    for (const auto& c : cases) {
      if (dtype == torch::kFloat && c.D % 4 != 0) continue;  // D 2 and 6: double's 16-byte vectors only
      // Queries are the last T of S + T positions.
      auto qkv = split_projection(c.B, c.H, c.S + c.T, c.D, dtype);
      auto q = qkv[0].narrow(2, c.S, c.T), k = qkv[1], v = qkv[2];
      auto g = torch::randn({c.B, c.H, c.T, c.D}, torch::dtype(dtype));
      const auto ref = run(q, k, v, g, true);
      for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
        mixlab::testing::IsaScope scope(isa);
        ASSERT_TRUE(mixlab::causal_attention_is_native(q, k, v));
        const auto got = run(q, k, v, g, false);
        const std::string where = isa + " T=" + std::to_string(c.T) + " S=" + std::to_string(c.S) +
                                  " D=" + std::to_string(c.D) + " " + std::string(c10::toString(dtype));
        EXPECT_TRUE(all_close(got.y, ref.y, tol, tol)) << where << " y";
        EXPECT_TRUE(all_close(got.dq, ref.dq, tol, tol)) << where << " dq";
        EXPECT_TRUE(all_close(got.dk, ref.dk, tol, tol)) << where << " dk";
        EXPECT_TRUE(all_close(got.dv, ref.dv, tol, tol)) << where << " dv";
      }
    }
  }
}

TEST(CausalAttention, GradcheckDouble) {
  torch::manual_seed(22);
  auto q = torch::randn({1, 2, 5, 8}, torch::kDouble).requires_grad_(true);
  auto k = torch::randn({1, 2, 8, 8}, torch::kDouble).requires_grad_(true);
  auto v = torch::randn({1, 2, 8, 8}, torch::kDouble).requires_grad_(true);
  ASSERT_TRUE(mixlab::causal_attention_is_native(q, k, v));
  EXPECT_TRUE(mixlab::testing::gradcheck(
      [](const std::vector<at::Tensor>& in) { return mixlab::causal_attention(in[0], in[1], in[2]); }, {q, k, v}));
}

TEST(CausalAttention, MatchesDenseDefinition) {
  // The definition written out: (T, S+T) scores, -inf above the diagonal, softmax, product.
  torch::manual_seed(23);
  const int64_t T = 40, S = 9, D = 16;
  auto q = torch::randn({1, 1, T, D}, torch::kDouble), k = torch::randn({1, 1, S + T, D}, torch::kDouble);
  auto v = torch::randn({1, 1, S + T, D}, torch::kDouble);
  auto scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(D));
  auto i = torch::arange(T).unsqueeze(1), j = torch::arange(S + T).unsqueeze(0);
  auto expect = torch::matmul(scores.masked_fill(j > i + S, -INFINITY).softmax(-1), v);
  EXPECT_TRUE(all_close(mixlab::causal_attention(q, k, v), expect, 1e-12, 1e-12));
}

TEST(CausalAttention, OtherHeadDimsTakeTheComposedForm) {
  torch::manual_seed(24);
  auto q = torch::randn({1, 2, 9, 6}), k = torch::randn({1, 2, 9, 6}), v = torch::randn({1, 2, 9, 6});
  EXPECT_FALSE(mixlab::causal_attention_is_native(q, k, v));
  auto y = mixlab::causal_attention(q, k, v);
  mixlab::ComposedAttentionGuard guard;
  EXPECT_TRUE(torch::equal(y, mixlab::causal_attention(q, k, v)));
}

TEST(CausalAttention, NoGradAndInferenceMode) {
  torch::manual_seed(25);
  auto q = torch::randn({1, 1, 50, 32}), k = torch::randn({1, 1, 50, 32}), v = torch::randn({1, 1, 50, 32});
  torch::Tensor ref;
  {
    mixlab::ComposedAttentionGuard guard;
    ref = mixlab::causal_attention(q, k, v);
  }
  c10::InferenceMode inference;
  auto y = mixlab::causal_attention(q, k, v);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(all_close(y, ref, 3e-5, 3e-5));
}

TEST(CausalAttention, BadArguments) {
  auto q = torch::randn({1, 2, 4, 16}), k = torch::randn({1, 2, 6, 16});
  expect_error(
      [&] {
        mixlab::causal_attention(q, torch::randn({1, 2, 3, 16}), torch::randn({1, 2, 3, 16}));
      },
      "causal_attention: k must be (B,H,S+T,D) = (1,2,>= 4,16)");
  expect_error(
      [&] {
        mixlab::causal_attention(q, k, torch::randn({1, 2, 5, 16}));
      },
      "causal_attention: v must have shape");
  expect_error([&] { mixlab::causal_attention(q, k.to(torch::kDouble), k); },
               "causal_attention: k must have the dtype of q");
  expect_error(
      [&] {
        mixlab::causal_attention(q.reshape({2, 4, 16}), k, k);
      },
      "causal_attention: q must have 4 dimensions");
  expect_error(
      [&] {
        mixlab::causal_attention(torch::randn({1, 2, 0, 16}), k, k);
      },
      "causal_attention: q must have T > 0");
  expect_error(
      [&] {
        auto empty = torch::randn({1, 2, 4, 0});
        mixlab::causal_attention(empty, empty, empty);
      },
      "causal_attention: q must have a head dim D > 0");
  EXPECT_FALSE(mixlab::causal_attention_is_native(torch::randn({1, 2, 4, 0}), torch::randn({1, 2, 4, 0}),
                                                  torch::randn({1, 2, 4, 0})));
  expect_error([&] { mixlab::causal_attention(q, torch::Tensor(), k); }, "causal_attention: k");
  expect_error([&] { mixlab::causal_attention(q, k, k, -1); }, "causal_attention: window must be >= 0");
}

// Local attention: query i sees keys max(0, S+i-W)..S+i. Windows below, at and above the 32-row
// query and 64-key blocks (rows whose window starts past a whole key block, blocks that no row
// of a query block sees), cached positions, every build, forward and the three gradients.
TEST(CausalAttention, WindowEveryBuildMatchesComposed) {
  torch::manual_seed(26);
  struct Case {
    int64_t T, S, D, W;
  };
  const std::vector<Case> cases = {{1, 0, 16, 1},      {40, 0, 16, 1},    {100, 0, 64, 5},  {130, 0, 32, 31},
                                   {200, 0, 64, 32},   {200, 0, 48, 63},  {300, 0, 64, 64}, {300, 0, 16, 65},
                                   {150, 20, 64, 100}, {70, 7, 64, 1000}, {5, 70, 16, 3},   {65, 0, 8, 8},
                                   {100, 0, 24, 5},    {40, 3, 12, 9},    {70, 0, 4, 40},   {50, 0, 6, 5}};
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    const double tol = dtype == torch::kFloat ? 3e-5 : 1e-11;
    for (const auto& c : cases) {
      if (dtype == torch::kFloat && c.D % 4 != 0) continue;  // D 6: double's 16-byte vectors only
      auto qkv = split_projection(2, 2, c.S + c.T, c.D, dtype);
      auto q = qkv[0].narrow(2, c.S, c.T), k = qkv[1], v = qkv[2];
      auto g = torch::randn({2, 2, c.T, c.D}, torch::dtype(dtype));
      const auto ref = run(q, k, v, g, true, c.W);
      for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
        mixlab::testing::IsaScope scope(isa);
        const auto got = run(q, k, v, g, false, c.W);
        const std::string where = isa + " T=" + std::to_string(c.T) + " S=" + std::to_string(c.S) +
                                  " D=" + std::to_string(c.D) + " W=" + std::to_string(c.W) + " " +
                                  std::string(c10::toString(dtype));
        EXPECT_TRUE(all_close(got.y, ref.y, tol, tol)) << where << " y";
        EXPECT_TRUE(all_close(got.dq, ref.dq, tol, tol)) << where << " dq";
        EXPECT_TRUE(all_close(got.dk, ref.dk, tol, tol)) << where << " dk";
        EXPECT_TRUE(all_close(got.dv, ref.dv, tol, tol)) << where << " dv";
      }
    }
  }
}

TEST(CausalAttention, WindowMatchesBandDefinitionAndFullAttention) {
  torch::manual_seed(27);
  const int64_t T = 90, S = 11, D = 16;
  auto q = torch::randn({1, 1, T, D}, torch::kDouble), k = torch::randn({1, 1, S + T, D}, torch::kDouble);
  auto v = torch::randn({1, 1, S + T, D}, torch::kDouble);
  auto scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(D));
  auto i = torch::arange(T).unsqueeze(1) + S, j = torch::arange(S + T).unsqueeze(0);
  for (int64_t W : {1, 7, 64, 70}) {
    auto band = (j > i).logical_or(j < i - W);
    auto expect = torch::matmul(scores.masked_fill(band, -INFINITY).softmax(-1), v);
    EXPECT_TRUE(all_close(mixlab::causal_attention(q, k, v, W), expect, 1e-12, 1e-12)) << "W=" << W;
    mixlab::ComposedAttentionGuard guard;
    EXPECT_TRUE(all_close(mixlab::causal_attention(q, k, v, W), expect, 1e-12, 1e-12)) << "composed W=" << W;
  }
  // A window covering every earlier key is full causal attention.
  EXPECT_TRUE(all_close(mixlab::causal_attention(q, k, v, S + T), mixlab::causal_attention(q, k, v), 1e-12, 1e-12));
}

TEST(CausalAttention, WindowGradcheckDouble) {
  torch::manual_seed(28);
  auto q = torch::randn({1, 2, 6, 8}, torch::kDouble).requires_grad_(true);
  auto k = torch::randn({1, 2, 9, 8}, torch::kDouble).requires_grad_(true);
  auto v = torch::randn({1, 2, 9, 8}, torch::kDouble).requires_grad_(true);
  EXPECT_TRUE(mixlab::testing::gradcheck(
      [](const std::vector<at::Tensor>& in) { return mixlab::causal_attention(in[0], in[1], in[2], 2); }, {q, k, v}));
}

// The mixer's local:W forward takes the window op at a native head dim (D = 32 here): it equals
// the decode step row by row (the step reads its ring of the last W keys, a separate path).
TEST(CausalAttention, LocalMixerForwardEqualsStepRowByRow) {
  mixlab::MixerDims dims;
  dims.d_model = 64;
  dims.n_heads = 2;
  dims.max_len = 256;
  for (int64_t window : {3, 40, 100}) {
    torch::manual_seed(29 + window);
    mixlab::AttentionMixer m(dims, window);
    const int64_t B = 2, T = 150;
    auto x = torch::randn({B, T, dims.d_model});
    torch::NoGradGuard no_grad;
    auto y = m.forward(x);
    auto state = m.init_state(B);
    for (int64_t t = 0; t < T; ++t)
      ASSERT_TRUE(all_close(m.step(*state, x.select(1, t)), y.select(1, t), 2e-5, 2e-5))
          << "local:" << window << " t=" << t;
  }
}

}  // namespace causal_attention_test
