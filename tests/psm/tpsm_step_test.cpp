// T-PSM fast decode step (raw rows, Inf key/value cache; src/psm/tpsm_step_rows.cpp): equal to
// the reference ATen step and to the training forward token by token, for several chunk sizes,
// depths, widths and both dtypes; the derived cache rebuilt after save / load / fork and after a
// reference step in between.
#include <gtest/gtest.h>

#include <sstream>

#include "mixlab/psm/tpsm.h"

namespace tpsm_step_test {

namespace {

using mixlab::TpsmMixer;
using mixlab::TpsmState;

mixlab::MixerDims dims(int64_t C, int64_t H) {
  mixlab::MixerDims d;
  d.d_model = C;
  d.n_heads = H;
  return d;
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.detach() - b.detach()).abs().max().item<double>();
}

struct Config {
  std::string args;
  int64_t C, H;
};

}  // namespace

TEST(TpsmStep, FastStepEqualsReferenceStepAndForward) {
  const std::vector<Config> configs = {
      {"c=1", 16, 2},
      {"c=3:agg_layers=2:inf_layers=2:compress=linear:identity=learned", 16, 4},
      {"c=4", 16, 2},
      {"c=16:agg_layers=1:inf_layers=3:inf_heads=4:agg_heads=1", 16, 2},
      // d != C (W_in / W_out) and 3 heads of width 4.
      {"c=3:d=12:agg_heads=3:inf_heads=3:inf_layers=2:identity=learned", 10, 2},
      // Rotary positions: the cache holds rotated keys, the new row's q and k rotate at c + j.
      {"c=4:pos=rope:inf_layers=2:compress=linear", 16, 2},
      {"c=1:pos=rope", 16, 2},
      // The empty identity (a prefix of 0 rows until the first chunk completes) and the
      // attention-only Inf (no MLP, returns its update).
      {"c=4:identity=empty:inf=attention:inf_layers=2:compress=linear", 16, 2},
      {"c=3:identity=empty:pos=rope:agg_layers=2", 16, 2},
      {"c=1:identity=empty:inf=attention", 16, 2},
      {"c=3:d=12:agg_heads=3:inf_heads=3:inf=attention", 10, 2},
      // The attention-only Agg keeping its input (the counter's raw-row Agg), summing compression.
      {"c=4:agg=attention:agg_layers=2:compress=linear:compress_init=sum:identity=empty:inf=attention", 16, 2},
      {"c=3:agg=attention:compress=linear:compress_init=sum:pos=rope:identity=learned", 16, 2},
  };
  for (const auto& cfg : configs) {
    for (auto dtype : {torch::kFloat, torch::kDouble}) {
      SCOPED_TRACE(cfg.args + (dtype == torch::kFloat ? " float" : " double"));
      torch::manual_seed(31);
      auto m = std::make_shared<TpsmMixer>(cfg.args, dims(cfg.C, cfg.H));
      m->to(dtype);
      const int64_t B = 3, c = m->chunk();
      const int64_t T = 5 * c + c / 2 + 1;  // >= 3 chunks and, for c > 1, a partial one
      auto x = torch::randn({B, T, cfg.C}, dtype);
      const double tol = dtype == torch::kFloat ? 1e-5 : 1e-12;
      torch::Tensor y;
      {
        torch::NoGradGuard no_grad;
        y = m->forward(x);
      }
      auto fast = m->init_state(B), ref = m->init_state(B);
      auto& fs = static_cast<TpsmState&>(*fast);
      for (int64_t t = 0; t < T; ++t) {
        const auto x_t = x.select(1, t).contiguous();
        torch::Tensor y_fast;
        {
          torch::NoGradGuard no_grad;
          y_fast = m->step(*fast, x_t);
        }
        auto y_ref = m->step(*ref, x_t);  // autograd on: the ATen step
        ASSERT_TRUE(y_ref.requires_grad());
        ASSERT_FALSE(y_fast.requires_grad());
        // The fast path ran: its cache holds [s | buf] up to this token, or was reset by a chunk.
        const int64_t fill = (t + 1) % c;
        const int64_t prefix_rows = fs.chunks() == 0 && cfg.args.find("identity=empty") != std::string::npos ? 0 : c;
        ASSERT_EQ(fs.cached_rows(), fill == 0 ? 0 : prefix_rows + fill) << "t = " << t;
        ASSERT_EQ(static_cast<TpsmState&>(*ref).cached_rows(), 0);
        ASSERT_LE(max_abs_diff(y_fast, y_ref), tol) << "t = " << t;
        ASSERT_LE(max_abs_diff(y_fast, y.select(1, t)), tol) << "t = " << t;
      }
      EXPECT_EQ(fast->position(), T);
      EXPECT_EQ(fs.chunks(), T / c);
      // The counter did the same Agg calls on either path.
      EXPECT_EQ(fs.agg_calls(), static_cast<TpsmState&>(*ref).agg_calls());
    }
  }
}

TEST(TpsmStep, CacheIsRebuiltAfterSaveLoadForkAndAReferenceStep) {
  const std::string args = "c=4:inf_layers=2:agg_layers=2:identity=learned";
  torch::manual_seed(32);
  auto m = std::make_shared<TpsmMixer>(args, dims(16, 2));
  torch::manual_seed(32);
  auto fresh = std::make_shared<TpsmMixer>(args, dims(16, 2));  // the same weights, another module
  const int64_t B = 2, T = 61, t0 = 4 * 5 + 2;                  // stop after 5 chunks and 2 tokens
  auto x = torch::randn({B, T, 16});
  torch::NoGradGuard no_grad;
  auto run = [](TpsmMixer& mx, mixlab::MixerState& s, const torch::Tensor& xs) {
    std::vector<torch::Tensor> ys;
    for (int64_t t = 0; t < xs.size(1); ++t) ys.push_back(mx.step(s, xs.select(1, t).contiguous()));
    return torch::stack(ys, 1);
  };
  auto a = m->init_state(B);
  run(*m, *a, x.narrow(1, 0, t0));
  auto& as = static_cast<TpsmState&>(*a);
  ASSERT_EQ(as.cached_rows(), 4 + 2);

  std::stringstream bytes;
  m->save(*a, bytes);
  auto loaded = fresh->load(bytes, "mid-chunk");
  auto forked = m->fork(*a);
  auto& ls = static_cast<TpsmState&>(*loaded);
  auto& fk = static_cast<TpsmState&>(*forked);
  // Neither carries the derived cache: it is rebuilt by the first step.
  EXPECT_EQ(ls.cached_rows(), 0);
  EXPECT_EQ(fk.cached_rows(), 0);
  const int64_t cache_bytes = B * 2 * (2 * 4) * (2 * 16) * static_cast<int64_t>(sizeof(float));  // L_inf 2c 2d
  EXPECT_EQ(ls.bytes(), as.bytes() - cache_bytes);
  EXPECT_EQ(fk.bytes(), as.bytes() - cache_bytes);

  auto ya = run(*m, *a, x.narrow(1, t0, T - t0));  // the uninterrupted run
  auto yl = run(*fresh, *loaded, x.narrow(1, t0, T - t0));
  auto yf = run(*m, *forked, x.narrow(1, t0, T - t0));
  // The rebuild does the same per-row arithmetic as the incremental cache: bitwise equal.
  EXPECT_TRUE(torch::equal(yl, ya)) << max_abs_diff(yl, ya);
  EXPECT_TRUE(torch::equal(yf, ya)) << max_abs_diff(yf, ya);
  EXPECT_EQ(ls.bytes(), as.bytes());

  // A reference step (autograd on) in the middle of a chunk leaves the cache stale; the next fast
  // step rebuilds it.
  auto b = m->init_state(B);
  std::vector<torch::Tensor> yb;
  for (int64_t t = 0; t < T; ++t) {
    const auto x_t = x.select(1, t).contiguous();
    if (t == t0 || t == t0 + 5) {
      torch::AutoGradMode grad(true);
      yb.push_back(m->step(*b, x_t).detach());
      ASSERT_EQ(static_cast<TpsmState&>(*b).cached_rows(), 0);
    } else {
      yb.push_back(m->step(*b, x_t));
    }
  }
  auto y_all = run(*m, *m->init_state(B), x);
  EXPECT_LE(max_abs_diff(torch::stack(yb, 1), y_all), 1e-5);
}

}  // namespace tpsm_step_test
