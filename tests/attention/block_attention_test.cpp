// block_attention: the native kernel (src/attention/block_attention_kernels.inc, built as
// block_attention_kernels_generic.cpp, block_attention_kernels_avx2.cpp and
// block_attention_kernels_avx512.cpp, each this CPU has run below through IsaScope)
// against the composed LibTorch form (ComposedBlockAttentionGuard) and the definition written out,
// in every instruction-set build this CPU runs: forward and the three gradients, float and double,
// head dims of whole and partial vectors, key counts around the vector widths, strided views of
// one projection (as BRL passes them); a finite-difference check in double; bad arguments.
// BRL's forward on the kernel: tests/brl/brl_block_attention_test.cpp.
#include "mixlab/attention/block_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/isa_scope.h"

namespace block_attention_test {

using mixlab::testing::all_close;

namespace {

struct Result {
  torch::Tensor y, dq, dk, dv;
};

Result run(const torch::Tensor& q0, const torch::Tensor& k0, const torch::Tensor& v0, const torch::Tensor& g,
           double scale, bool composed) {
  auto q = q0.detach().clone().requires_grad_(true);
  auto k = k0.detach().clone().requires_grad_(true);
  auto v = v0.detach().clone().requires_grad_(true);
  std::optional<mixlab::ComposedBlockAttentionGuard> guard;
  if (composed) guard.emplace();
  auto y = mixlab::block_attention(q, k, v, scale);
  (y * g).sum().backward();
  return {y.detach(), q.grad(), k.grad(), v.grad()};
}

// Per group and head: softmax(scale q k^T) v, written out with one loop.
torch::Tensor definition(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale) {
  auto out = torch::empty_like(q, at::MemoryFormat::Contiguous);
  for (int64_t g = 0; g < q.size(0); ++g)
    for (int64_t h = 0; h < q.size(2); ++h) {
      auto qh = q[g].select(1, h), kh = k[g].select(1, h), vh = v[g].select(1, h);  // (L,D)
      out[g].select(1, h).copy_(torch::softmax(torch::mm(qh, kh.t()) * scale, -1).mm(vh));
    }
  return out;
}

}  // namespace

TEST(BlockAttention, EveryBuildMatchesComposedAndDefinition) {
  torch::manual_seed(31);
  struct Case {
    int64_t G, Lq, Lk, H, D;
  };
  const std::vector<Case> cases = {{1, 1, 1, 1, 1},   {3, 64, 16, 4, 16}, {2, 16, 64, 4, 16}, {2, 5, 3, 2, 4},
                                   {1, 7, 17, 3, 6},  {2, 9, 33, 1, 32},  {1, 4, 8, 2, 64},   {4, 2, 100, 2, 8},
                                   {1, 70, 1, 2, 20}, {2, 3, 16, 1, 5},   {2, 8, 8, 16, 8},   {1, 6, 9, 2, 28},
                                   {1, 5, 12, 2, 12}};
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    const double tol = dtype == torch::kFloat ? 3e-5 : 1e-11;
    for (const auto& c : cases) {
      // q, k, v as BRL passes them: strided (G,L,H,D) views of wider projections.
      auto pq = torch::randn({c.G, c.Lq, 2 * c.H * c.D}, torch::dtype(dtype));
      auto pkv = torch::randn({c.G, c.Lk, 3 * c.H * c.D}, torch::dtype(dtype));
      auto q = pq.narrow(-1, c.H * c.D, c.H * c.D).view({c.G, c.Lq, c.H, c.D});
      auto k = pkv.narrow(-1, 0, c.H * c.D).view({c.G, c.Lk, c.H, c.D});
      auto v = pkv.narrow(-1, 2 * c.H * c.D, c.H * c.D).view({c.G, c.Lk, c.H, c.D});
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.D)) * (c.Lk % 2 ? 2.0 : 1.0);
      auto g = torch::randn({c.G, c.Lq, c.H, c.D}, torch::dtype(dtype));
      const auto ref = run(q, k, v, g, scale, true);
      EXPECT_TRUE(all_close(ref.y, definition(q, k, v, scale), tol, tol));
      for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
        mixlab::testing::IsaScope scope(isa);
        const auto got = run(q, k, v, g, scale, false);
        const std::string where = isa + " G=" + std::to_string(c.G) + " Lq=" + std::to_string(c.Lq) +
                                  " Lk=" + std::to_string(c.Lk) + " H=" + std::to_string(c.H) +
                                  " D=" + std::to_string(c.D) + " " + std::string(c10::toString(dtype));
        EXPECT_TRUE(got.y.is_contiguous()) << where;
        EXPECT_TRUE(all_close(got.y, ref.y, tol, tol)) << where << " y";
        EXPECT_TRUE(all_close(got.dq, ref.dq, tol, tol)) << where << " dq";
        EXPECT_TRUE(all_close(got.dk, ref.dk, tol, tol)) << where << " dk";
        EXPECT_TRUE(all_close(got.dv, ref.dv, tol, tol)) << where << " dv";
      }
    }
  }
}

// Large scores: the softmax must subtract the row maximum (no overflow), and a key far below the
// others gets probability 0, not NaN.
TEST(BlockAttention, LargeScoresStayFinite) {
  auto q = torch::full({1, 3, 1, 8}, 30.0), k = torch::randn({1, 5, 1, 8}) * 10, v = torch::randn({1, 5, 1, 8});
  for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
    mixlab::testing::IsaScope scope(isa);
    auto y = mixlab::block_attention(q, k, v, 1.0);
    EXPECT_TRUE(torch::isfinite(y).all().item<bool>()) << isa;
    EXPECT_TRUE(all_close(y, definition(q, k, v, 1.0), 1e-4, 1e-5)) << isa;
  }
}

TEST(BlockAttention, GradcheckDouble) {
  torch::manual_seed(32);
  auto q = torch::randn({2, 3, 2, 4}, torch::kDouble).requires_grad_(true);
  auto k = torch::randn({2, 5, 2, 4}, torch::kDouble).requires_grad_(true);
  auto v = torch::randn({2, 5, 2, 4}, torch::kDouble).requires_grad_(true);
  for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
    mixlab::testing::IsaScope scope(isa);
    EXPECT_TRUE(mixlab::testing::gradcheck(
        [](const std::vector<at::Tensor>& in) { return mixlab::block_attention(in[0], in[1], in[2], 0.7); }, {q, k, v}))
        << isa;
  }
}

TEST(BlockAttention, ErrorsNameTheArgument) {
  auto q = torch::randn({2, 4, 2, 8}), k = torch::randn({2, 5, 2, 8});
  expect_error(
      [&] {
        mixlab::block_attention(q, torch::randn({3, 5, 2, 8}), k, 1.0);
      },
      {"block_attention: k must be (G,Lk,H,D) = (2,>= 1,2,8)", "got [3,5,2,8]"});
  expect_error(
      [&] {
        mixlab::block_attention(q, k, torch::randn({2, 6, 2, 8}), 1.0);
      },
      {"block_attention: v must have shape", "[2,6,2,8]"});
  expect_error([&] { mixlab::block_attention(q, k.to(torch::kDouble), k, 1.0); },
               "block_attention: k must have the dtype of q");
  expect_error(
      [&] {
        mixlab::block_attention(q.reshape({2, 4, 16}), k, k, 1.0);
      },
      "block_attention: q must have 4 dimensions");
  expect_error(
      [&] {
        mixlab::block_attention(torch::randn({2, 0, 2, 8}), k, k, 1.0);
      },
      {"block_attention: q must be (G,Lq,H,D) with Lq > 0", "[2,0,2,8]"});
  expect_error([&] { mixlab::block_attention(q, torch::Tensor(), k, 1.0); }, "block_attention: k");
  expect_error([&] { mixlab::block_attention(q.to(torch::kInt), k, k, 1.0); }, "block_attention: q");
}

}  // namespace block_attention_test
