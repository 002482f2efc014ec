// The resolvent op against the dense triangular-solve reference: forward and every gradient,
// every pattern kind, awkward sizes, non-contiguous inputs, the gated form, gradcheck in double,
// the special cases of SPEC-NOTES §1, and the boundary errors.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <string>
#include <tuple>

#include "../../src/resolvent/resolvent_gate.h"
#include "mixlab/core/cpu_isa.h"
#include "mixlab/core/error.h"
#include "mixlab/resolvent/resolvent.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/isa_scope.h"

namespace resolvent_op_test {

using mixlab::Pattern;
using mixlab::testing::all_close;
using torch::Tensor;

namespace {

const std::vector<std::string> kPatterns = {"causal", "band:3", "dense",         "order:1",    "order:3",     "pow2",
                                            "square", "linear", "offsets:1,3,4", "pow2+cache", "square+cache"};

struct Coeffs {
  Tensor alpha, beta, x, gate;
};

// Random coefficients for `spec` at length T. beta rows sum to < 1 so that outputs stay O(1)
// even for the dense recurrence. Non-contiguous tensors when `strided` (views of larger ones).
Coeffs random_coeffs(const Pattern& p, int64_t B, int64_t H, int64_t T, int64_t D, torch::ScalarType dtype,
                     bool strided, bool gated, bool diagonal_alpha = false) {
  auto opts = torch::TensorOptions().dtype(dtype);
  const int64_t W = mixlab::pattern_index(p, T)->W;
  const int64_t WA = diagonal_alpha ? 1 : W + 1, WB = p.recurrent() ? W : 0;
  Coeffs c;
  if (strided) {
    c.x = torch::randn({B, T, H, D}, opts).permute({0, 2, 1, 3});      // non-contiguous
    c.alpha = torch::randn({B, H, T, WA + 2}, opts).narrow(3, 1, WA);  // sliced
    c.beta = (torch::rand({B, H, WB + 1, T}, opts) * (0.9 / std::max<int64_t>(W, 1)))
                 .narrow(2, 0, WB)
                 .transpose(2, 3);  // transposed
    if (gated) c.gate = torch::rand({B, H, D, T}, opts).transpose(2, 3);
  } else {
    c.x = torch::randn({B, H, T, D}, opts);
    c.alpha = torch::randn({B, H, T, WA}, opts);
    c.beta = torch::rand({B, H, T, WB}, opts) * (0.9 / std::max<int64_t>(W, 1));
    if (gated) c.gate = torch::rand({B, H, T, D}, opts);
  }
  return c;
}

std::vector<Tensor> grads_of(const Tensor& y, const Tensor& g, const std::vector<Tensor>& inputs) {
  auto loss = (y * g).sum();
  return torch::autograd::grad({loss}, inputs, {}, /*retain_graph=*/false, /*create_graph=*/false,
                               /*allow_unused=*/true);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Op vs reference: forward and all gradients, float64 (tight) and float32 (forward).

class OpVsReference : public ::testing::TestWithParam<std::tuple<std::string, int64_t, int64_t, bool>> {};

TEST_P(OpVsReference, ForwardAndGradients) {
  const auto& [spec, T, D, gated] = GetParam();
  torch::manual_seed(17 + T * 31 + D);
  auto p = Pattern::parse(spec);
  const int64_t B = 2, H = 2;
  auto c = random_coeffs(p, B, H, T, D, torch::kDouble, /*strided=*/true, gated);
  std::vector<Tensor> inputs = {c.alpha, c.beta, c.x};
  if (gated) inputs.push_back(c.gate);
  for (auto& t : inputs) t.requires_grad_(true);
  auto y = mixlab::resolvent_forward(c.alpha, c.beta, c.x, p, c.gate);
  auto y_ref = mixlab::resolvent_reference(c.alpha, c.beta, c.x, p, c.gate);
  ASSERT_TRUE(all_close(y, y_ref, 1e-9, 1e-10)) << spec;
  auto g = torch::randn_like(y_ref);
  auto grads = grads_of(y, g, inputs);
  auto grads_ref = grads_of(y_ref, g, inputs);
  const char* names[] = {"alpha", "beta", "x", "gate"};
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!grads_ref[k].defined() || grads_ref[k].numel() == 0) continue;
    ASSERT_TRUE(grads[k].defined()) << names[k];
    // Unused slots: the reference leaves them at 0 too (masked coefficients).
    EXPECT_TRUE(all_close(grads[k], grads_ref[k], 1e-8, 1e-9)) << spec << " d" << names[k];
  }
  // float32: same forward within float tolerance (accumulation in float32).
  auto yf = mixlab::resolvent_forward(c.alpha.detach().to(torch::kFloat), c.beta.detach().to(torch::kFloat),
                                      c.x.detach().to(torch::kFloat), p,
                                      gated ? c.gate.detach().to(torch::kFloat) : Tensor());
  EXPECT_EQ(yf.scalar_type(), torch::kFloat);
  EXPECT_TRUE(all_close(yf.to(torch::kDouble), y_ref.detach(), 1e-4, 1e-4)) << spec;
}

INSTANTIATE_TEST_SUITE_P(AllPatterns, OpVsReference,
                         ::testing::Combine(::testing::ValuesIn(kPatterns), ::testing::Values(1, 2, 17, 64, 257),
                                            ::testing::Values(1, 8, 33), ::testing::Values(false)),
                         [](const auto& info) {
                           auto s = std::get<0>(info.param);
                           for (auto& ch : s)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s + "_T" + std::to_string(std::get<1>(info.param)) + "_D" +
                                  std::to_string(std::get<2>(info.param));
                         });

// The op's plain row and blocked loops are built once per instruction set
// (src/resolvent/resolvent_plain_loops_generic.cpp, resolvent_plain_loops_avx2.cpp,
// resolvent_plain_loops_avx512.cpp, picked per call by mixlab/core/cpu_isa.h): every build this
// CPU runs against the reference, forward and every gradient, on the row kernel (pow2+cache), the
// blocked one (pow2 at T >= 130 reads offsets past one 64-row block), gated and not, float64 and
// float32. D = 33 keeps the forward off the register kernels, so both directions run these loops.
TEST(Resolvent, EveryInstructionSetBuildMatchesReference) {
  const std::vector<std::string> isas = mixlab::testing::isas_this_cpu_runs();
  for (const std::string spec : {"pow2+cache", "pow2", "square"})
    for (bool gated : {false, true})
      for (const auto& isa : isas) {
        mixlab::testing::IsaScope scope(isa);
        torch::manual_seed(71);
        auto p = Pattern::parse(spec);
        const int64_t T = gated ? 130 : 257, D = 33;
        auto c = random_coeffs(p, 1, 2, T, D, torch::kDouble, /*strided=*/false, gated);
        std::vector<Tensor> inputs = {c.alpha, c.beta, c.x};
        if (gated) inputs.push_back(c.gate);
        for (auto& t : inputs) t.requires_grad_(true);
        auto y = mixlab::resolvent_forward(c.alpha, c.beta, c.x, p, c.gate);
        auto y_ref = mixlab::resolvent_reference(c.alpha, c.beta, c.x, p, c.gate);
        const std::string what = spec + (gated ? " gated " : " ") + isa;
        ASSERT_TRUE(all_close(y, y_ref, 1e-9, 1e-10)) << what;
        auto g = torch::randn_like(y_ref);
        auto grads = grads_of(y, g, inputs);
        auto grads_ref = grads_of(y_ref, g, inputs);
        for (size_t k = 0; k < inputs.size(); ++k)
          if (grads_ref[k].defined() && grads_ref[k].numel() > 0)
            EXPECT_TRUE(all_close(grads[k], grads_ref[k], 1e-8, 1e-9)) << what << " grad " << k;
        auto yf = mixlab::resolvent_forward(c.alpha.detach().to(torch::kFloat), c.beta.detach().to(torch::kFloat),
                                            c.x.detach().to(torch::kFloat), p,
                                            gated ? c.gate.detach().to(torch::kFloat) : Tensor());
        EXPECT_TRUE(all_close(yf.to(torch::kDouble), y_ref.detach(), 1e-4, 1e-4)) << what << " float";
      }
}

// The gated form builds a (B,H,D,T,T) reference: keep T·D moderate.
INSTANTIATE_TEST_SUITE_P(Gated, OpVsReference,
                         ::testing::Combine(::testing::ValuesIn(kPatterns), ::testing::Values(1, 2, 17, 64),
                                            ::testing::Values(1, 8, 33), ::testing::Values(true)),
                         [](const auto& info) {
                           auto s = std::get<0>(info.param);
                           for (auto& ch : s)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s + "_T" + std::to_string(std::get<1>(info.param)) + "_D" +
                                  std::to_string(std::get<2>(info.param));
                         });

TEST(Resolvent, DiagonalAlphaMatchesReference) {
  torch::manual_seed(3);
  for (const std::string spec : {"pow2", "square+cache", "band:3"}) {
    auto p = Pattern::parse(spec);
    for (bool gated : {false, true}) {
      auto c = random_coeffs(p, 1, 3, 40, 5, torch::kDouble, false, gated, /*diagonal_alpha=*/true);
      c.alpha.requires_grad_(true);
      c.beta.requires_grad_(true);
      auto y = mixlab::resolvent_forward(c.alpha, c.beta, c.x, p, c.gate);
      auto y_ref = mixlab::resolvent_reference(c.alpha, c.beta, c.x, p, c.gate);
      EXPECT_TRUE(all_close(y, y_ref, 1e-9, 1e-10)) << spec;
      auto g = torch::randn_like(y);
      auto a = grads_of(y, g, {c.alpha}), b = grads_of(y_ref, g, {c.alpha});
      EXPECT_TRUE(all_close(a[0], b[0], 1e-8, 1e-9)) << spec;
    }
  }
}

namespace {

// gradcheck of the op over `specs` at length T, ungated and gated.
void gradcheck_patterns(std::initializer_list<const char*> specs, int64_t T) {
  for (const std::string spec : specs) {
    auto p = Pattern::parse(spec);
    for (bool gated : {false, true}) {
      // Contiguous here (tests/support/gradcheck perturbs through view(-1)); strides are covered above.
      auto c = random_coeffs(p, 1, 2, T, 3, torch::kDouble, /*strided=*/false, gated);
      std::vector<Tensor> inputs = {c.alpha, c.beta, c.x};
      if (gated) inputs.push_back(c.gate);
      for (auto& t : inputs) t = t.detach().requires_grad_(true);
      auto fn = [&](const std::vector<Tensor>& in) {
        return mixlab::resolvent_forward(in[0], in[1], in[2], p, gated ? in[3] : Tensor());
      };
      EXPECT_TRUE(mixlab::testing::gradcheck(fn, inputs)) << spec << (gated ? " gated" : "");
    }
  }
}

}  // namespace

TEST(Resolvent, GradcheckInDouble) {
  torch::manual_seed(5);
  gradcheck_patterns({"pow2", "square+cache", "band:2", "dense", "offsets:1,3,4"}, 9);
}

// ---------------------------------------------------------------------------------------------
// The block-diagonal dense solve (seed 000 B.4). Small blocks and a small width threshold reach
// it at test sizes; every result is compared with the reference and with the row kernel.

namespace {

using DenseBlocksGuard = mixlab::ResolventDenseBlocksScope;

constexpr int64_t kOff = int64_t(1) << 40;  // a min_width no pattern reaches: the row kernel

}  // namespace

TEST(ResolventDenseBlocks, TakenOnlyForContiguousWidePatterns) {
  DenseBlocksGuard guard({/*min_width=*/8, /*rows=*/5});
  for (const std::string spec : {"dense", "causal", "linear", "band:9", "offsets:1,2,3,4,5,6,7,8"})
    EXPECT_TRUE(mixlab::resolvent_uses_dense_blocks(Pattern::parse(spec), 40)) << spec;
  for (const std::string spec : {"band:7", "order:3", "pow2", "square", "offsets:1,2,4,5,6,7,8,9", "linear+cache"})
    EXPECT_FALSE(mixlab::resolvent_uses_dense_blocks(Pattern::parse(spec), 40)) << spec;
  EXPECT_FALSE(mixlab::resolvent_uses_dense_blocks(Pattern::parse("dense"), 8));  // W = 7 < 8
  mixlab::set_resolvent_dense_blocks({kOff, 5});
  EXPECT_FALSE(mixlab::resolvent_uses_dense_blocks(Pattern::parse("dense"), 40));
  expect_error([] { mixlab::set_resolvent_dense_blocks({0, 5}); }, "min_width must be >= 1, got 0");
  expect_error([] { mixlab::set_resolvent_dense_blocks({8, 0}); }, "rows must be >= 1, got 0");
}

TEST(ResolventDenseBlocks, MatchesReferenceAndRowKernel) {
  // rows 5 with T up to 41: partial last blocks, a window narrower than the sequence (band:9) and
  // wider than a block, diagonal A, gated, strided inputs, float64 and float32.
  for (const std::string spec : {"dense", "causal", "band:9", "offsets:1,2,3,4,5,6,7,8"}) {
    auto p = Pattern::parse(spec);
    for (int64_t T : {9, 23, 41})
      for (int64_t D : {1, 8})
        for (int variant = 0; variant < 4; ++variant) {
          const bool diagonal_alpha = variant & 1, gated = variant & 2;
          torch::manual_seed(T * 7 + D + variant);
          auto c = random_coeffs(p, 2, 2, T, D, torch::kDouble, /*strided=*/true, gated, diagonal_alpha);
          std::vector<Tensor> inputs = {c.alpha, c.beta, c.x};
          if (gated) inputs.push_back(c.gate);
          for (auto& t : inputs) t.requires_grad_(true);
          auto g = torch::randn({2, 2, T, D}, torch::kDouble);
          auto run = [&](int64_t min_width) {
            DenseBlocksGuard guard({min_width, 5});
            EXPECT_EQ(mixlab::resolvent_uses_dense_blocks(p, T), min_width == 8) << spec << " T " << T;
            auto y = mixlab::resolvent_forward(c.alpha, c.beta, c.x, p, c.gate);
            auto grads = grads_of(y, g, inputs);
            grads.insert(grads.begin(), y);
            return grads;
          };
          const auto blocks = run(8), rows = run(kOff);
          auto y_ref = mixlab::resolvent_reference(c.alpha, c.beta, c.x, p, c.gate);
          auto ref = grads_of(y_ref, g, inputs);
          ref.insert(ref.begin(), y_ref);
          const char* names[] = {"y", "dalpha", "dbeta", "dx", "dgate"};
          const std::string where = spec + " T " + std::to_string(T) + " D " + std::to_string(D) +
                                    (diagonal_alpha ? " diagonal A" : "") + (gated ? " gated" : "");
          for (size_t k = 0; k < ref.size(); ++k) {
            if (!ref[k].defined() || ref[k].numel() == 0) continue;
            EXPECT_TRUE(all_close(blocks[k], ref[k], 1e-8, 1e-9)) << where << " " << names[k] << " vs reference";
            EXPECT_TRUE(all_close(blocks[k], rows[k], 1e-9, 1e-10)) << where << " " << names[k] << " vs row kernel";
          }
          DenseBlocksGuard guard({8, 5});
          auto yf = mixlab::resolvent_forward(c.alpha.detach().to(torch::kFloat), c.beta.detach().to(torch::kFloat),
                                              c.x.detach().to(torch::kFloat), p,
                                              gated ? c.gate.detach().to(torch::kFloat) : Tensor());
          EXPECT_TRUE(all_close(yf.to(torch::kDouble), y_ref.detach(), 1e-4, 1e-4)) << where << " float32";
        }
  }
}

TEST(ResolventDenseBlocks, GradcheckInDouble) {
  DenseBlocksGuard guard({/*min_width=*/2, /*rows=*/3});
  for (const char* spec : {"dense", "causal", "band:4"})
    ASSERT_TRUE(mixlab::resolvent_uses_dense_blocks(Pattern::parse(spec), 10)) << spec;
  torch::manual_seed(6);
  gradcheck_patterns({"dense", "causal", "band:4"}, 10);
}

// ---------------------------------------------------------------------------------------------
// Special cases of SPEC-NOTES §1.

TEST(ResolventSpecialCases, ZeroBIsSoftmaxAttention) {
  torch::manual_seed(11);
  const int64_t B = 2, H = 3, T = 23, D = 8;
  auto q = torch::randn({B, H, T, D}, torch::kDouble), k = torch::randn({B, H, T, D}, torch::kDouble);
  auto v = torch::randn({B, H, T, D}, torch::kDouble);
  auto mask = torch::ones({T, T}, torch::kBool).tril();
  auto scores = torch::matmul(q, k.transpose(2, 3)) / std::sqrt(double(D));
  auto attn = torch::softmax(scores.masked_fill(~mask, -INFINITY), -1);
  auto expected = torch::matmul(attn, v);
  for (const std::string spec : {"causal", "band:4"}) {
    auto p = Pattern::parse(spec);
    auto idx = mixlab::pattern_index(p, T);
    // Local attention = softmax over the band only.
    auto band_mask = torch::zeros({T, T}, torch::kBool);
    auto alpha = torch::zeros({B, H, T, idx->W + 1}, torch::kDouble);
    for (int64_t i = 0; i < T; ++i) {
      band_mask[i][i] = true;
      for (int64_t s = 0; s < idx->count[i]; ++s) band_mask[i][idx->row(i)[s]] = true;
    }
    auto a = torch::softmax(scores.masked_fill(~band_mask, -INFINITY), -1);
    for (int64_t i = 0; i < T; ++i) {
      alpha.select(2, i).select(2, 0).copy_(a.select(2, i).select(2, i));
      for (int64_t s = 0; s < idx->count[i]; ++s)
        alpha.select(2, i).select(2, s + 1).copy_(a.select(2, i).select(2, idx->row(i)[s]));
    }
    auto y = mixlab::resolvent_forward(alpha, torch::zeros({B, H, T, 0}, torch::kDouble), v, p);
    auto want = spec == "causal" ? expected : torch::matmul(a, v);
    EXPECT_TRUE(all_close(y, want, 1e-10, 1e-12)) << spec;
  }
}

TEST(ResolventSpecialCases, OrderOneIsGatedLinearRecurrence) {
  // y_t = a_t x_t + b_t y_{t-1} (seed 000 eq. 15), and the per-channel form of eq. 14 through
  // the gate: h_t = r_t ⊙ h_{t-1} + i_t ⊙ x_t with r = g b, i = (1 − g) a.
  torch::manual_seed(12);
  const int64_t B = 2, H = 2, T = 31, D = 5;
  auto p = Pattern::parse("order:1");
  auto a = torch::randn({B, H, T}, torch::kDouble), b = torch::rand({B, H, T}, torch::kDouble);
  auto x = torch::randn({B, H, T, D}, torch::kDouble), g = torch::rand({B, H, T, D}, torch::kDouble);
  auto alpha = torch::stack({a, torch::zeros_like(a)}, -1);
  auto beta = b.unsqueeze(-1);
  auto y = mixlab::resolvent_forward(alpha, beta, x, p);
  auto yg = mixlab::resolvent_forward(alpha, beta, x, p, g);
  auto h = torch::zeros({B, H, D}, torch::kDouble), hg = torch::zeros({B, H, D}, torch::kDouble);
  for (int64_t t = 0; t < T; ++t) {
    auto at = a.select(2, t).unsqueeze(-1), bt = t > 0 ? b.select(2, t).unsqueeze(-1) : torch::zeros_like(at);
    auto gt = g.select(2, t);
    h = at * x.select(2, t) + bt * h;
    hg = (1 - gt) * at * x.select(2, t) + gt * bt * hg;
    ASSERT_TRUE(all_close(y.select(2, t), h, 1e-12, 1e-12)) << "t=" << t;
    ASSERT_TRUE(all_close(yg.select(2, t), hg, 1e-12, 1e-12)) << "t=" << t;
  }
}

TEST(ResolventSpecialCases, MambaEquations21And22) {
  // h_i = exp(Δ_i a) h_{i−1} + Δ_i b_i x_i, scalar per channel (D = 1, channels as heads).
  torch::manual_seed(13);
  const int64_t H = 6, T = 40;
  auto p = Pattern::parse("order:1");
  auto delta = torch::softplus(torch::randn({1, H, T}, torch::kDouble));
  auto a = -torch::rand({1, H, 1}, torch::kDouble);
  auto bi = torch::randn({1, H, T}, torch::kDouble);
  auto x = torch::randn({1, H, T, 1}, torch::kDouble);
  auto alpha = torch::stack({delta * bi, torch::zeros_like(bi)}, -1);  // A = diag(Δ_i b_i)
  auto beta = torch::exp(delta * a).unsqueeze(-1);                     // B sub-diagonal exp(Δ_i a)
  auto y = mixlab::resolvent_forward(alpha, beta, x, p);
  auto h = torch::zeros({1, H}, torch::kDouble);
  for (int64_t i = 0; i < T; ++i) {
    auto decay = i > 0 ? torch::exp(delta.select(2, i) * a.squeeze(-1)) : torch::zeros({1, H}, torch::kDouble);
    h = decay * h + delta.select(2, i) * bi.select(2, i) * x.select(2, i).squeeze(-1);
    ASSERT_TRUE(all_close(y.select(2, i).squeeze(-1), h, 1e-12, 1e-12)) << "i=" << i;
  }
}

TEST(Resolvent, NaNPropagatesWithoutCrash) {
  auto p = Pattern::parse("pow2");
  auto c = random_coeffs(p, 1, 2, 20, 4, torch::kFloat, false, false);
  c.x[0][1][5][2] = NAN;
  auto y = mixlab::resolvent_forward(c.alpha, c.beta, c.x, p);
  EXPECT_TRUE(std::isnan(y[0][1][5][2].item<float>()));
  EXPECT_FALSE(torch::isnan(y[0][0]).any().item<bool>());                  // other heads untouched
  EXPECT_FALSE(torch::isnan(y[0][1].narrow(0, 0, 5)).any().item<bool>());  // earlier rows untouched
}

// The gate is a probability per row and channel (seed 000 B.2: g in [0, 1]^d, A = (1 - diag g)Ã,
// B = diag(g) B̃). Values outside [0, 1], NaN and inf included, used to be taken as they came; the
// public entries (forward, prefill with a past state, decode step, the reference) now refuse
// them, naming the value and its index. The closed ends 0 and 1 are valid gates.
TEST(Resolvent, GateOutsideTheUnitIntervalIsRefused) {
  auto p = Pattern::parse("pow2");
  const int64_t B = 1, H = 2, T = 9, D = 4;
  auto c = random_coeffs(p, B, H, T, D, torch::kDouble, /*strided=*/false, /*gated=*/true);
  auto with = [&](double v) {
    Tensor g = c.gate.clone();
    g[0][1][3][2] = v;
    return g;
  };
  auto forward = [&](const Tensor& g) {
    return [&c, &p, g] { mixlab::resolvent_forward(c.alpha, c.beta, c.x, p, g); };
  };
  expect_error(forward(with(1.5)), {"resolvent_forward", "gate", "[0, 1]", "got 1.5 at [0,1,3,2]"});
  expect_error(forward(with(-1e-3)), {"resolvent_forward", "gate", "got -0.001 at [0,1,3,2]"});
  expect_error(forward(with(NAN)), {"resolvent_forward", "gate", "got nan at [0,1,3,2]"});
  expect_error(forward(with(INFINITY)), {"resolvent_forward", "gate", "got inf at [0,1,3,2]"});
  // Non-contiguous: the index is the tensor's own (b,h,t,d), not a position in memory.
  expect_error(forward(with(2.0).transpose(2, 3).contiguous().transpose(2, 3)), {"gate", "got 2 at [0,1,3,2]"});
  expect_error(forward(with(2.0).to(torch::kFloat)), {"gate"});  // float32 too (dtype named first)
  expect_error(
      [&] {
        mixlab::resolvent_forward(c.alpha.to(torch::kFloat), c.beta.to(torch::kFloat), c.x.to(torch::kFloat), p,
                                  with(-2.0).to(torch::kFloat));
      },
      {"gate", "got -2 at [0,1,3,2]"});
  expect_error([&] { mixlab::resolvent_reference(c.alpha, c.beta, c.x, p, with(1.5)); },
               {"resolvent_reference", "gate", "got 1.5 at [0,1,3,2]"});
  // The ends of the interval are gates the definition allows: taken, and equal to the reference.
  Tensor ends = c.gate.clone();
  ends.select(3, 0).fill_(0.0);
  ends.select(3, 1).fill_(1.0);
  EXPECT_TRUE(all_close(mixlab::resolvent_forward(c.alpha, c.beta, c.x, p, ends),
                        mixlab::resolvent_reference(c.alpha, c.beta, c.x, p, ends), 1e-9, 1e-10));

  // Chunked prefill (a past state) and the decode step check the same way.
  mixlab::ResolventState state(p, B, H, D, torch::kDouble);
  const int64_t W4 = mixlab::resolvent_width(p, 4);
  auto y0 =
      mixlab::resolvent_forward(c.alpha.narrow(2, 0, 4).narrow(3, 0, W4 + 1), c.beta.narrow(2, 0, 4).narrow(3, 0, W4),
                                c.x.narrow(2, 0, 4), p, c.gate.narrow(2, 0, 4));
  state.append(c.x.narrow(2, 0, 4), y0);
  Tensor chunk_gate = c.gate.narrow(2, 4, 5).clone();
  chunk_gate[0][1][2][2] = 1.5;
  expect_error(
      [&] {
        mixlab::resolvent_forward(c.alpha.narrow(2, 4, 5), c.beta.narrow(2, 4, 5), c.x.narrow(2, 4, 5), p, chunk_gate,
                                  &state);
      },
      {"resolvent_forward", "gate", "got 1.5 at [0,1,2,2]"});
  const int64_t n = static_cast<int64_t>(state.next_row().size());
  Tensor gate_t = c.gate.select(2, 4).clone();
  gate_t[0][0][1] = NAN;
  expect_error(
      [&] {
        mixlab::resolvent_step(state, c.alpha.select(2, 4).narrow(2, 0, n + 1), c.beta.select(2, 4).narrow(2, 0, n),
                               c.x.select(2, 4), gate_t);
      },
      {"resolvent_step", "gate_t", "got nan at [0,0,1]"});
  EXPECT_EQ(state.position(), 4);  // refused before the state moved
}

// src/resolvent/resolvent_gate.h: the layer's entries without the gate's value check. On gates in
// [0, 1] they equal the public entries and the dense reference; a NaN gate flows through them
// where the public entries refuse it; every other check stays.
TEST(Resolvent, SigmoidGateEntriesEqualThePublicOnesAndSkipOnlyTheValueCheck) {
  namespace d = mixlab::detail;
  auto p = Pattern::parse("pow2");
  const int64_t B = 1, H = 2, T = 9, D = 4;
  auto c = random_coeffs(p, B, H, T, D, torch::kDouble, /*strided=*/false, /*gated=*/true);
  const Tensor y = d::resolvent_forward_sigmoid_gate(c.alpha, c.beta, c.x, p, c.gate);
  EXPECT_TRUE(torch::equal(y, mixlab::resolvent_forward(c.alpha, c.beta, c.x, p, c.gate)));
  EXPECT_TRUE(all_close(y, mixlab::resolvent_reference(c.alpha, c.beta, c.x, p, c.gate), 1e-9, 1e-10));

  Tensor nan_gate = c.gate.clone();
  nan_gate[0][1][3][2] = NAN;
  Tensor y_nan;
  ASSERT_NO_THROW(y_nan = d::resolvent_forward_sigmoid_gate(c.alpha, c.beta, c.x, p, nan_gate));
  EXPECT_TRUE(torch::isnan(y_nan).any().item<bool>());
  expect_error([&] { d::resolvent_forward_sigmoid_gate(c.alpha, c.beta, c.x, p, nan_gate.narrow(2, 0, 4)); },
               {"resolvent_forward", "gate", "(B,H,T,D)"});

  // The step: the same rows as the public step, from equal states; a NaN gate is taken.
  mixlab::ResolventState a(p, B, H, D, torch::kDouble), b(p, B, H, D, torch::kDouble);
  const int64_t W4 = mixlab::resolvent_width(p, 4);
  auto y0 =
      mixlab::resolvent_forward(c.alpha.narrow(2, 0, 4).narrow(3, 0, W4 + 1), c.beta.narrow(2, 0, 4).narrow(3, 0, W4),
                                c.x.narrow(2, 0, 4), p, c.gate.narrow(2, 0, 4));
  a.append(c.x.narrow(2, 0, 4), y0);
  b.append(c.x.narrow(2, 0, 4), y0);
  const int64_t n = static_cast<int64_t>(a.next_row().size());
  const Tensor at = c.alpha.select(2, 4).narrow(2, 0, n + 1), bt = c.beta.select(2, 4).narrow(2, 0, n);
  EXPECT_TRUE(torch::equal(d::resolvent_step_sigmoid_gate(a, at, bt, c.x.select(2, 4), c.gate.select(2, 4), {}),
                           mixlab::resolvent_step(b, at, bt, c.x.select(2, 4), c.gate.select(2, 4))));
  Tensor gate_t = c.gate.select(2, 5).clone();
  gate_t[0][0][1] = NAN;
  const int64_t n5 = static_cast<int64_t>(a.next_row().size());
  ASSERT_NO_THROW(d::resolvent_step_sigmoid_gate(a, c.alpha.select(2, 5).narrow(2, 0, n5 + 1),
                                                 c.beta.select(2, 5).narrow(2, 0, n5), c.x.select(2, 5), gate_t, {}));
  EXPECT_EQ(a.position(), 6);
}

TEST(Resolvent, BadInputsNameArgumentExpectedAndActual) {
  auto p = Pattern::parse("pow2");
  const int64_t T = 17;  // W = 5 for pow2 at T = 17
  auto x = torch::randn({2, 3, T, 4});
  auto alpha = torch::randn({2, 3, T, 6}), beta = torch::randn({2, 3, T, 5});
  auto f = [&](const Tensor& a, const Tensor& b, const Tensor& xx, const Pattern& pp, const Tensor& g = {}) {
    return [=] { mixlab::resolvent_forward(a, b, xx, pp, g); };
  };
  expect_error(f(torch::randn({2, 3, T, 5}), beta, x, p),
               {"resolvent_forward", "alpha", "(B,H,T,W_A) = [2,3,17,6]", "got [2,3,17,5]", "pow2"});
  expect_error(f(torch::randn({1, 3, T, 6}), beta, x, p), {"alpha", "[2,3,17,6]", "got [1,3,17,6]"});
  expect_error(f(torch::randn({2, 2, T, 6}), beta, x, p), {"alpha", "got [2,2,17,6]"});
  expect_error(f(torch::randn({2, 3, T - 1, 6}), beta, x, p), {"alpha", "got [2,3,16,6]"});
  expect_error(f(alpha, torch::randn({2, 3, T, 4}), x, p),
               {"resolvent_forward", "beta", "(B,H,T,W_B) = [2,3,17,5]", "got [2,3,17,4]"});
  expect_error(f(torch::randn({2, 3, T, 4}), torch::randn({2, 3, T, 3}), x, Pattern::parse("band:3")),
               {"beta", "[2,3,17,0]", "non-recurrent", "got [2,3,17,3]"});
  expect_error(f(alpha.to(torch::kDouble), beta, x, p), {"alpha", "dtype of x", "Float", "Double"});
  expect_error(f(alpha, beta, x.to(torch::kInt), p), {"x", "float32 or float64", "Int"});
  expect_error(f(alpha, beta, torch::randn({2, 3, T}), p), {"x", "4 dimensions", "(B,H,T,D)", "[2,3,17]"});
  expect_error(f(alpha, beta, x, p, torch::rand({2, 3, T, 5})), {"gate", "(B,H,T,D)", "[2,3,17,4]", "got [2,3,17,5]"});
  expect_error(f(torch::empty({2, 3, 0, 1}), torch::empty({2, 3, 0, 0}), torch::empty({2, 3, 0, 4}), p),
               {"x", "T >= 1", "[2,3,0,4]"});
  expect_error(f(alpha, beta, torch::empty({2, 3, T, 4}, torch::TensorOptions().device(torch::kMeta)), p),
               {"x", "CPU", "meta"});
  expect_error(f(alpha.to(torch::kMeta), beta, x, p), {"alpha", "CPU", "meta"});
}

}  // namespace resolvent_op_test
