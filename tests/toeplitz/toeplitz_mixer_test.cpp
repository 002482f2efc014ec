// ToeplitzMixer: forward against a loop reference of eq. 1-4, decode equals forward row by row,
// state memory, spec parsing, init, gradients, errors.
#include "mixlab/toeplitz/toeplitz_mixer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixlab/core/error.h"
#include "support/aten_ops.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"

namespace toeplitz_mixer_test {

using mixlab::MixerDims;
using mixlab::ToeplitzMixer;
using mixlab::ToeplitzPath;
using mixlab::testing::all_close;

namespace {

MixerDims dims(int64_t C, int64_t H, int64_t Tmax) {
  MixerDims d;
  d.d_model = C;
  d.n_heads = H;
  d.max_len = Tmax;
  return d;
}

// Reference of the layer: projections with explicit matmuls, the Toeplitz op by loops
// (toeplitz_reference_forward) per kernel element, the channel shift by an explicit loop.
torch::Tensor mixer_reference(ToeplitzMixer& m, const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  const int64_t B = x.size(0), T = x.size(1), C = m.in_proj()->weight.size(0);
  const int64_t H = m.heads(), K = m.kernel(), D = m.head_dim(), p = (K - 1) / 2;
  auto u = torch::matmul(x, m.in_proj()->weight.t()) + m.in_proj()->bias;  // (B,T,C)
  u = u.reshape({B, T, H, D}).permute({0, 2, 1, 3}).contiguous();          // (B,H,T,D)
  auto z = torch::zeros({B, H, T, D}, x.options());
  for (int64_t k = 0; k < K; ++k) {
    auto zk = mixlab::toeplitz_reference_forward(m.lags().select(1, k).contiguous(), u);
    for (int64_t c = 0; c < D; ++c) {
      const int64_t src = c + k - p;
      if (src >= 0 && src < D) z.select(3, c) += zk.select(3, src);
    }
  }
  z += m.pos_bias().narrow(1, 0, T).reshape({1, H, T, 1});
  auto zc = z.permute({0, 2, 1, 3}).reshape({B, T, C});
  return torch::matmul(zc, m.out_proj()->weight.t()) + m.out_proj()->bias;
}

}  // namespace

TEST(ToeplitzMixer, SpecParsing) {
  auto o = mixlab::toeplitz_mixer_options_parse("");
  EXPECT_EQ(o.heads, 0);
  EXPECT_EQ(o.kernel, 1);
  o = mixlab::toeplitz_mixer_options_parse("kernel=3:heads=2");
  EXPECT_EQ(o.heads, 2);
  EXPECT_EQ(o.kernel, 3);
  EXPECT_EQ(ToeplitzMixer("", dims(12, 3, 16)).spec(), "toeplitz:heads=3:kernel=1");
  EXPECT_EQ(ToeplitzMixer("heads=2:kernel=3", dims(12, 3, 16)).spec(), "toeplitz:heads=2:kernel=3");
  expect_error([] { mixlab::toeplitz_mixer_options_parse("heads=0"); },
               "toeplitz key 'heads' must be a positive integer in [1, ");
  expect_error([] { mixlab::toeplitz_mixer_options_parse("heads=x"); },
               "toeplitz key 'heads' must be a positive integer, got 'x'");
  expect_error([] { mixlab::toeplitz_mixer_options_parse("width=3"); }, "unknown toeplitz key 'width'");
  expect_error([] { mixlab::toeplitz_mixer_options_parse("heads=2:heads=3"); }, "toeplitz key 'heads' is given twice");
  expect_error([] { mixlab::toeplitz_mixer_options_parse("4"); }, "toeplitz arguments are key=value items");
  expect_error([] { mixlab::toeplitz_mixer_options_parse("heads=2:"); }, "empty item");
  expect_error([] { ToeplitzMixer("heads=5", dims(12, 3, 16)); }, "d_model C = 12 is not divisible by heads H = 5");
  expect_error([] { ToeplitzMixer("heads=4:kernel=5", dims(12, 3, 16)); }, "wider than the head dim");
}

TEST(ToeplitzMixer, InitIsKaimingNormalOverLags) {
  torch::manual_seed(6);
  ToeplitzMixer m("heads=4:kernel=2", dims(16, 4, 2048));
  EXPECT_EQ(m.lags().sizes(), (std::vector<int64_t>{4, 2, 2048}));
  EXPECT_EQ(m.pos_bias().sizes(), (std::vector<int64_t>{4, 2048}));
  const double std_expected = std::sqrt(2.0 / 2048.0);
  // 16384 samples: the std estimate is within ~1% (1 sigma); allow 5%.
  EXPECT_NEAR(m.lags().std().item<double>(), std_expected, 0.05 * std_expected);
  EXPECT_NEAR(m.lags().mean().item<double>(), 0.0, 0.05 * std_expected);
  EXPECT_EQ(m.pos_bias().abs().max().item<double>(), 0.0);
  EXPECT_EQ(m.cost_class(), "O(n)");
  EXPECT_EQ(m.pattern_spec(), "");
}

TEST(ToeplitzMixer, ForwardMatchesReference) {
  torch::manual_seed(7);
  struct Cfg {
    int64_t C, H, K, Tmax, T;
  };
  for (auto cfg : {Cfg{6, 1, 1, 9, 9}, Cfg{12, 3, 3, 40, 37}, Cfg{8, 2, 2, 20, 1}, Cfg{10, 2, 5, 80, 70}}) {
    ToeplitzMixer m(fmt::format("heads={}:kernel={}", cfg.H, cfg.K), dims(cfg.C, cfg.H, cfg.Tmax));
    m.to(torch::kDouble);
    {
      torch::NoGradGuard g;
      m.pos_bias().normal_();  // non-zero bias so that it is tested
    }
    auto x = torch::randn({2, cfg.T, cfg.C}, torch::kDouble);
    auto ref = mixer_reference(m, x);
    for (auto p : {ToeplitzPath::kFft, ToeplitzPath::kMaterialized, ToeplitzPath::kAuto}) {
      m.set_path(p);
      EXPECT_TRUE(all_close(m.forward(x), ref, 1e-10, 1e-10)) << "C=" << cfg.C << " H=" << cfg.H << " K=" << cfg.K
                                                              << " T=" << cfg.T << " " << mixlab::toeplitz_path_name(p);
    }
  }
}

TEST(ToeplitzMixer, StepEqualsForwardRowByRow) {
  torch::manual_seed(8);
  for (int64_t K : {1, 3, 4}) {
    const int64_t B = 2, C = 12, H = 3, Tmax = 40, T = 37;  // T > 16: the cache grows twice
    ToeplitzMixer m(fmt::format("heads={}:kernel={}", H, K), dims(C, H, Tmax));
    m.to(torch::kDouble);
    {
      torch::NoGradGuard g;
      m.pos_bias().normal_();
    }
    auto x = torch::randn({B, T, C}, torch::kDouble);
    auto y = m.forward(x);
    auto state = m.init_state(B);
    EXPECT_EQ(state->position(), 0);
    EXPECT_EQ(state->bytes(), 0);
    int64_t last_bytes = 0;
    for (int64_t i = 0; i < T; ++i) {
      auto yi = m.step(*state, x.select(1, i));
      ASSERT_TRUE(all_close(yi, y.select(1, i), 1e-10, 1e-10)) << "K=" << K << " row " << i;
      EXPECT_EQ(state->position(), i + 1);
      EXPECT_EQ(state->cached_positions(), i + 1);
      // Measured bytes: all positions held, at most twice (doubling) and never shrinking.
      const int64_t held = (i + 1) * B * C * static_cast<int64_t>(sizeof(double));
      EXPECT_GE(state->bytes(), held);
      EXPECT_LE(state->bytes(), std::max<int64_t>(2 * held, 16 * B * C * sizeof(double)));
      EXPECT_GE(state->bytes(), last_bytes);
      last_bytes = state->bytes();
    }
  }
}

// Without autograd step runs on raw rows (toeplitz_step_rows.cpp); with autograd on, the ATen
// step. Both give the same outputs and cache contents token by token, in float and double, on
// odd sizes (C = 12, H = 3: D = 4), with K = 1, 3, 4 and a weight change mid-stream.
TEST(ToeplitzMixer, RawRowStepEqualsAtenStepTokenByToken) {
  const std::vector<std::string> reference_ops = {"aten::linear", "aten::einsum"};
  const int64_t B = 3, C = 12, H = 3, Tmax = 40, T = 37;  // the cache grows 16 -> 32 -> 40 (Tmax)
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    const double tol = dtype == torch::kFloat ? 1e-5 : 1e-12;
    for (int64_t K : {1, 3, 4}) {
      SCOPED_TRACE(fmt::format("K={} {}", K, c10::toString(dtype)));
      torch::manual_seed(30 + K);
      ToeplitzMixer m(fmt::format("heads={}:kernel={}", H, K), dims(C, H, Tmax));
      m.to(dtype);
      {
        torch::NoGradGuard g;
        m.pos_bias().normal_();
      }
      auto x = torch::randn({B, T, C}, dtype);
      auto fast_base = m.init_state(B), aten_base = m.init_state(B);
      auto& fast = dynamic_cast<mixlab::ToeplitzState&>(*fast_base);
      auto& aten = dynamic_cast<mixlab::ToeplitzState&>(*aten_base);
      for (int64_t t = 0; t < T; ++t) {
        if (t == 20) {  // an optimiser step mid-stream: both paths read the new weights
          torch::NoGradGuard g;
          for (auto& p : m.parameters()) p.add_(0.05 * torch::randn_like(p));
        }
        const auto x_t = x.select(1, t);  // a slice, not contiguous: the raw path copies it
        at::Tensor y_fast, y_aten;
        const int64_t fast_ops = mixlab::testing::count_aten_ops(reference_ops, [&] {
          torch::NoGradGuard g;
          y_fast = m.step(fast, x_t);
        });
        const int64_t aten_ops =
            mixlab::testing::count_aten_ops(reference_ops, [&] { y_aten = m.step(aten, x_t).detach(); });
        ASSERT_EQ(fast_ops, 0) << "t " << t << ": the step without autograd did not run on raw rows";
        ASSERT_GT(aten_ops, 0) << "t " << t;
        ASSERT_TRUE(all_close(y_fast, y_aten, tol, tol)) << "t " << t;
        ASSERT_EQ(fast.position(), t + 1);
        ASSERT_EQ(fast.cache().sizes(), aten.cache().sizes()) << "t " << t;
        ASSERT_TRUE(all_close(fast.cache().narrow(2, 0, t + 1), aten.cache().narrow(2, 0, t + 1), tol, tol))
            << "cache, t " << t;
      }
    }
  }
}

// Decode's no-autograd modes (NoGradGuard, InferenceMode) take the raw rows and equal forward.
TEST(ToeplitzMixer, RawRowStepEqualsForwardRowByRow) {
  const int64_t B = 2, C = 12, H = 3, Tmax = 40, T = 40;  // up to Tmax
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    const double tol = dtype == torch::kFloat ? 1e-5 : 1e-12;
    for (int64_t K : {1, 3}) {
      for (bool inference : {false, true}) {
        SCOPED_TRACE(fmt::format("K={} {} {}", K, c10::toString(dtype), inference ? "InferenceMode" : "NoGradGuard"));
        torch::manual_seed(40 + K);
        ToeplitzMixer m(fmt::format("heads={}:kernel={}", H, K), dims(C, H, Tmax));
        m.to(dtype);
        torch::NoGradGuard g;
        m.pos_bias().normal_();
        auto x = torch::randn({B, T, C}, dtype);
        auto y = m.forward(x);
        auto state = m.init_state(B);
        for (int64_t t = 0; t < T; ++t) {
          at::Tensor yt;
          const int64_t ops = mixlab::testing::count_aten_ops({"aten::linear", "aten::einsum"}, [&] {
            c10::optional<c10::InferenceMode> mode;
            if (inference) mode.emplace();
            yt = m.step(*state, x.select(1, t));
          });
          ASSERT_EQ(ops, 0) << "t " << t;
          ASSERT_TRUE(all_close(yt, y.select(1, t), tol, tol)) << "row " << t;
        }
      }
    }
  }
}

// Chunked prefill equals forward row by row for any chunking, interleaved with steps, and leaves
// the cache the steps would have; the last chunks mix a prefix past the FFT crossover.
TEST(ToeplitzMixer, PrefillInUnevenChunksEqualsForwardAndSteps) {
  const int64_t B = 2, C = 12, H = 3, Tmax = 300;
  const std::vector<int64_t> chunks = {7, 1, 40, 2, 1, 249};  // 1 = a step
  for (int64_t K : {1, 3}) {
    SCOPED_TRACE(fmt::format("K={}", K));
    torch::manual_seed(50 + K);
    ToeplitzMixer m(fmt::format("heads={}:kernel={}", H, K), dims(C, H, Tmax));
    m.to(torch::kDouble);
    torch::NoGradGuard g;
    m.pos_bias().normal_();
    auto x = torch::randn({B, Tmax, C}, torch::kDouble);
    auto y = m.forward(x);
    auto chunked_base = m.init_state(B), stepped_base = m.init_state(B);
    auto& chunked = dynamic_cast<mixlab::ToeplitzState&>(*chunked_base);
    auto& stepped = dynamic_cast<mixlab::ToeplitzState&>(*stepped_base);
    int64_t t0 = 0;
    for (auto n : chunks) {
      auto yc = n == 1 ? m.step(chunked, x.select(1, t0)).unsqueeze(1) : m.prefill(chunked, x.narrow(1, t0, n));
      ASSERT_TRUE(all_close(yc, y.narrow(1, t0, n), 1e-10, 1e-10)) << "chunk at " << t0 << " of " << n;
      t0 += n;
      ASSERT_EQ(chunked.position(), t0);
    }
    ASSERT_EQ(t0, Tmax);
    for (int64_t t = 0; t < Tmax; ++t) m.step(stepped, x.select(1, t));
    ASSERT_EQ(chunked.cache().sizes(), stepped.cache().sizes());
    EXPECT_TRUE(all_close(chunked.cache(), stepped.cache(), 1e-12, 1e-12));
    expect_error([&] { m.prefill(chunked, x.narrow(1, 0, 2)); }, "exceeds the layer's max_len");
  }
}

TEST(ToeplitzMixer, StepPastMaxLenAndBadInputsThrow) {
  ToeplitzMixer m("heads=2", dims(8, 2, 3));
  auto state = m.init_state(1);
  for (int i = 0; i < 3; ++i) m.step(*state, torch::randn({1, 8}));
  expect_error([&] { m.step(*state, torch::randn({1, 8})); }, "position 3 reached the layer's max_len");
  auto s2 = m.init_state(2);
  expect_error(
      [&] {
        m.step(*s2, torch::randn({1, 8}));
      },
      "ToeplitzMixer::step: x_t must have shape (B,C) = [2,8], got [1,8]");
  expect_error([&] { m.init_state(0); }, "batch must be positive");
}

TEST(ToeplitzMixer, ForwardErrors) {
  ToeplitzMixer m("heads=2:kernel=2", dims(8, 2, 10));
  expect_error(
      [&] {
        m.forward(torch::randn({1, 11, 8}));
      },
      "sequence length T = 11 exceeds the layer's max_len Tmax = 10");
  expect_error([&] { m.forward(torch::randn({1, 0, 8})); }, "x must have T > 0");
  expect_error(
      [&] {
        m.forward(torch::randn({1, 4, 7}));
      },
      "ToeplitzMixer::forward: x must have shape (B,T,C) = [*,*,8], got [1,4,7]");
  expect_error([&] { m.forward(torch::ones({1, 4, 8}, torch::kLong)); }, "must be float32 or float64");
}

TEST(ToeplitzMixer, GradientsReachEveryParameter) {
  torch::manual_seed(9);
  ToeplitzMixer m("heads=2:kernel=3", dims(8, 2, 30));
  auto x = torch::randn({2, 25, 8});
  m.forward(x).pow(2).sum().backward();
  for (const auto& p : m.named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
  }
  // Lags beyond T never touch the output: their gradient is exactly zero.
  EXPECT_EQ(m.lags().grad().narrow(2, 25, 5).abs().max().item<double>(), 0.0);
  EXPECT_EQ(m.pos_bias().grad().narrow(1, 25, 5).abs().max().item<double>(), 0.0);
}

TEST(ToeplitzMixer, GradcheckDouble) {
  torch::manual_seed(10);
  ToeplitzMixer m("heads=2:kernel=3", dims(6, 2, 6));
  m.to(torch::kDouble);
  auto x = torch::randn({1, 5, 6}, torch::kDouble).requires_grad_(true);
  for (auto p : {ToeplitzPath::kFft, ToeplitzPath::kMaterialized}) {
    m.set_path(p);
    EXPECT_TRUE(mixlab::testing::gradcheck([&](const std::vector<at::Tensor>& in) { return m.forward(in[0]); }, {x}))
        << mixlab::toeplitz_path_name(p);
    // Gradient w.r.t. the lags and the bias (parameters): central differences on every entry.
    auto v = torch::randn({1, 5, 6}, torch::kDouble);
    for (auto* param : {&m.lags(), &m.pos_bias()}) {
      auto w = *param;
      if (w.grad().defined()) w.grad().zero_();
      (m.forward(x.detach()) * v).sum().backward();
      auto analytic = w.grad().clone();
      auto flat = w.view(-1);
      for (int64_t e = 0; e < flat.numel(); ++e) {
        torch::NoGradGuard g;
        const double orig = flat[e].item<double>(), eps = 1e-6;
        flat[e] = orig + eps;
        const double fp = (m.forward(x) * v).sum().item<double>();
        flat[e] = orig - eps;
        const double fm = (m.forward(x) * v).sum().item<double>();
        flat[e] = orig;
        EXPECT_NEAR(analytic.view(-1)[e].item<double>(), (fp - fm) / (2 * eps), 1e-6) << "entry " << e;
      }
    }
  }
}

}  // namespace toeplitz_mixer_test
