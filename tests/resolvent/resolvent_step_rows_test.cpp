// ResolventMixer's decode step on raw rows (src/resolvent/resolvent_step_rows.cpp) against the ATen
// step it replaces: without autograd step takes the raw rows, with autograd on the ATen ops. Token
// by token the outputs and the whole decode state (held positions and their x, y and key rows)
// must agree, in float and double, for every kind of pattern (cache-efficient ones long enough to
// evict), gated, ungated, shared-weight and RoPE-less layers, on odd sizes (C = 12, H = 3, B = 3).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sstream>
#include <string>
#include <vector>

#include "mixlab/resolvent/resolvent_mixer.h"
#include "support/gradcheck.h"

namespace resolvent_step_rows_test {

using mixlab::ResolventMixer;
using mixlab::ResolventOptions;
using mixlab::ResolventState;
using mixlab::testing::all_close;
using torch::Tensor;

namespace {

struct Variant {
  std::string spec;
  ResolventOptions opt;
  std::string name;
};

std::vector<Variant> variants() {
  ResolventOptions plain, nogate, shared, shared_nogate, norope;
  nogate.gate = false;
  shared.share_weights = true;
  shared_nogate.share_weights = true;
  shared_nogate.gate = false;
  norope.rope = false;
  return {{"pow2", plain, "pow2"},
          {"pow2+cache", plain, "pow2cache"},
          {"square+cache", plain, "squarecache"},
          {"order:2", plain, "order2"},
          {"band:3", plain, "band3"},
          {"causal", plain, "causal"},
          {"dense", plain, "dense"},
          {"offsets:1,3,4", plain, "offsets"},
          {"square", nogate, "square_nogate"},
          {"pow2+cache", shared, "pow2cache_shared"},
          {"square", shared_nogate, "square_shared_nogate"},
          {"pow2+cache", norope, "pow2cache_norope"}};
}

mixlab::MixerDims dims(int64_t C, int64_t H) {
  mixlab::MixerDims d;
  d.d_model = C;
  d.n_heads = H;
  return d;
}

// The rows a state holds, per channel, in position order (slot numbers may differ between states).
std::vector<Tensor> held_rows(const ResolventState& s) {
  const auto held = s.held_positions();
  std::vector<Tensor> rows;
  if (s.layout().store_x) rows.push_back(s.gather(s.x_slots(), held));
  if (s.layout().store_y) rows.push_back(s.gather(s.y_slots(), held));
  for (size_t k = 0; k < s.layout().extra_dims.size(); ++k) rows.push_back(s.gather(s.extra_slots(k), held));
  return rows;
}

class RawRowStep : public ::testing::TestWithParam<Variant> {};

}  // namespace

TEST_P(RawRowStep, EqualsAtenStepTokenByToken) {
  const auto& v = GetParam();
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    SCOPED_TRACE(v.name + (dtype == torch::kFloat ? " float" : " double"));
    torch::manual_seed(41);
    ResolventMixer m(v.spec, dims(12, 3), v.opt);
    m.to(dtype);
    {
      // Non-trivial δ (zero at init) and gate/score weights off their init.
      torch::NoGradGuard ng;
      for (auto& p : m.parameters()) p.add_(torch::randn_like(p) * 0.2);
    }
    const double tol = dtype == torch::kFloat ? 1e-5 : 1e-12;
    const int64_t B = 3, T = 48;
    auto x = torch::randn({B, T, 12}, dtype);
    auto fast = m.init_state(B), aten = m.init_state(B);
    auto& sf = dynamic_cast<ResolventState&>(*fast);
    auto& sa = dynamic_cast<ResolventState&>(*aten);
    for (int64_t t = 0; t < T; ++t) {
      // x.select(1, t) is a strided time slice, as a decode loop over a prompt passes it.
      Tensor y_fast;
      {
        torch::NoGradGuard no_grad;
        ASSERT_TRUE(m.decodes_on_rows(x.select(1, t), sf)) << "the raw-row path would not be taken";
        y_fast = m.step(sf, x.select(1, t));
      }
      ASSERT_FALSE(m.decodes_on_rows(x.select(1, t), sa)) << "autograd on: the ATen path";
      auto y_aten = m.step(sa, x.select(1, t));
      ASSERT_EQ(y_fast.sizes(), y_aten.sizes());
      ASSERT_EQ(y_fast.scalar_type(), dtype);
      ASSERT_TRUE(all_close(y_fast, y_aten.detach(), tol, tol))
          << "t " << t << " max diff " << (y_fast - y_aten).abs().max().item<double>();
      ASSERT_EQ(sf.position(), t + 1);
      ASSERT_EQ(sf.held_positions(), sa.held_positions()) << "t " << t;
      const auto rf = held_rows(sf), ra = held_rows(sa);
      ASSERT_EQ(rf.size(), ra.size());
      for (size_t k = 0; k < rf.size(); ++k)
        ASSERT_TRUE(all_close(rf[k], ra[k], tol, tol)) << "t " << t << " row " << k;
    }
    // The cache-efficient sets evicted on the way: the state holds O(log T) positions, not T.
    if (m.pattern().cache_efficient()) EXPECT_LT(sf.cached_positions(), 12);
    // A raw-row state saves and loads like an ATen one and continues the same.
    std::stringstream buf;
    sf.save(buf);
    auto restored = ResolventState::load(buf);
    auto x_more = torch::randn({B, 12}, dtype);
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::equal(m.step(sf, x_more), m.step(*restored, x_more)));
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, RawRowStep, ::testing::ValuesIn(variants()),
                         [](const auto& info) { return info.param.name; });

// Under NoGrad the raw rows equal forward row by row, from a fresh state and after a chunked
// prefill (the state the ATen chunk path built).
TEST(RawRowStepDecode, EqualsForwardAfterPrefill) {
  for (const std::string spec : {"pow2+cache", "square+cache", "pow2", "band:3"}) {
    SCOPED_TRACE(spec);
    torch::manual_seed(42);
    ResolventMixer m(spec, dims(12, 3));
    m.to(torch::kDouble);
    torch::NoGradGuard no_grad;
    const int64_t B = 2, T = 50, T0 = 21;
    auto x = torch::randn({B, T, 12}, torch::kDouble);
    auto y = m.forward(x);
    auto st = m.init_state(B);
    m.prefill(*st, x.narrow(1, 0, T0));
    for (int64_t t = T0; t < T; ++t)
      ASSERT_TRUE(all_close(m.step(*st, x.select(1, t)), y.select(1, t), 1e-10, 1e-12)) << "t " << t;
  }
}

}  // namespace resolvent_step_rows_test
