// The layer: sampled scores vs dense scores, the whole layer vs a dense reference (forward and
// parameter gradients), decode equals forward, chunked prefill, state round trip, stability at
// T = 65 536, and argument errors.
#include "mixlab/resolvent/resolvent_mixer.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <sstream>

#include "mixlab/core/error.h"
#include "mixlab/resolvent/pattern_attention.h"
#include "mixlab/resolvent/pattern_scores.h"
#include "support/gradcheck.h"

namespace resolvent_mixer_test {

using mixlab::Pattern;
using mixlab::ResolventMixer;
using mixlab::ResolventOptions;
using mixlab::ResolventState;
using mixlab::testing::all_close;
using torch::Tensor;

namespace {

std::string test_name(std::string s) {
  for (auto& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

// Dense (T,T) masks of the pattern: A reads P(i) ∪ {i}, B reads P(i).
std::pair<Tensor, Tensor> dense_masks(const Pattern& p, int64_t T) {
  auto idx = mixlab::pattern_index(p, T);
  auto ma = torch::zeros({T, T}, torch::kBool), mb = torch::zeros({T, T}, torch::kBool);
  auto a = ma.accessor<bool, 2>(), b = mb.accessor<bool, 2>();
  for (int64_t i = 0; i < T; ++i) {
    a[i][i] = true;
    for (int64_t s = 0; s < idx->count[i]; ++s) {
      a[i][idx->row(i)[s]] = true;
      b[i][idx->row(i)[s]] = true;
    }
  }
  return {ma, mb};
}

// Dense masked softmax; rows without any entry are 0.
Tensor dense_softmax(const Tensor& q, const Tensor& k, const Tensor& mask) {
  auto s = torch::matmul(q, k.transpose(2, 3)) / std::sqrt(double(q.size(3)));
  auto w = torch::softmax(s.masked_fill(~mask, -1e30), -1);
  return w * mask.to(w.scalar_type());
}

// The layer computed densely from its coefficients' q/k/v/gate (T×T matrices, per-channel solve).
Tensor dense_layer(ResolventMixer& m, const Tensor& x) {
  // The composed coefficients: their q and k carry the gradient the dense formulas need.
  mixlab::ComposedPatternAttentionGuard composed;
  auto c = m.coefficients(x);
  const auto& p = m.pattern();
  const int64_t T = x.size(1);
  auto [ma, mb] = dense_masks(p, T);
  auto I = torch::eye(T, x.options());
  Tensor z;
  if (!p.recurrent()) {
    z = torch::matmul(dense_softmax(c.qa, c.ka, ma), c.v);
  } else {
    auto Bt = dense_softmax(c.qb, c.kb, mb);  // (B,H,T,T)
    Tensor At;
    if (m.options().share_weights) {
      // A = B·D + D' (per channel below): D' = (1 − g), D = (1 − g)·δ.
      At = torch::Tensor();
    } else {
      At = dense_softmax(c.qa, c.ka, ma);
    }
    auto g = c.gate.defined() ? c.gate : torch::zeros_like(c.v);
    auto gt = g.transpose(2, 3).unsqueeze(-1);  // (B,H,D,T,1)
    auto Bd = (c.gate.defined() ? gt : torch::ones_like(gt)) * Bt.unsqueeze(2);
    Tensor Ad;
    auto one_minus = c.gate.defined() ? (1 - gt) : torch::ones_like(gt);
    if (m.options().share_weights) {
      auto dcol = (one_minus.squeeze(-1) * c.delta.transpose(2, 3)).unsqueeze(-2);  // D_j per column (B,H,D,1,T)
      Ad = Bd * dcol + torch::diag_embed(one_minus.squeeze(-1));
    } else {
      Ad = one_minus * At.unsqueeze(2);
    }
    auto xd = c.v.transpose(2, 3).unsqueeze(-1);
    z = torch::linalg_solve_triangular(I - Bd, torch::matmul(Ad, xd), false).squeeze(-1).transpose(2, 3);
  }
  return m.output(z);
}

struct Variant {
  std::string spec;
  ResolventOptions opt;
  std::string name;
};

std::vector<Variant> variants() {
  ResolventOptions plain, nogate, shared, shared_nogate;
  nogate.gate = false;
  shared.share_weights = true;
  shared_nogate.share_weights = true;
  shared_nogate.gate = false;
  return {{"causal", plain, "causal"},
          {"band:3", plain, "band3"},
          {"dense", plain, "dense"},
          {"order:1", plain, "order1"},
          {"pow2", plain, "pow2"},
          {"square", nogate, "square_nogate"},
          {"pow2+cache", plain, "pow2cache"},
          {"square+cache", plain, "squarecache"},
          {"offsets:1,3,4", plain, "offsets"},
          {"pow2+cache", shared, "pow2cache_shared"},
          {"square", shared_nogate, "square_shared_nogate"}};
}

mixlab::MixerDims dims(int64_t C, int64_t H) {
  mixlab::MixerDims d;
  d.d_model = C;
  d.n_heads = H;
  return d;
}

}  // namespace

TEST(PatternScores, MatchDenseScoresWithGradients) {
  torch::manual_seed(31);
  for (const std::string spec : {"pow2", "square+cache", "band:3", "dense"}) {
    auto p = Pattern::parse(spec);
    const int64_t B = 2, H = 2, T = 37, D = 6;
    auto q = torch::randn({B, T, H, D}, torch::kDouble).permute({0, 2, 1, 3}).requires_grad_(false);
    auto k = torch::randn({B, H, T, D}, torch::kDouble);
    auto [ma, mb] = dense_masks(p, T);
    auto idx = mixlab::pattern_index(p, T);
    for (bool diag : {true, false}) {
      auto qq = q.detach().requires_grad_(true), kk = k.detach().requires_grad_(true);
      auto w = mixlab::pattern_softmax(mixlab::pattern_scores(qq, kk, p, diag), p, diag);
      auto dense = dense_softmax(qq, kk, diag ? ma : mb);
      // Gather the dense weights into slots.
      auto slots = torch::zeros_like(w);
      for (int64_t i = 0; i < T; ++i) {
        if (diag) slots.select(2, i).select(2, 0).copy_(dense.select(2, i).select(2, i));
        for (int64_t s = 0; s < idx->count[i]; ++s)
          slots.select(2, i).select(2, s + (diag ? 1 : 0)).copy_(dense.select(2, i).select(2, idx->row(i)[s]));
      }
      ASSERT_TRUE(all_close(w, slots, 1e-10, 1e-12)) << spec << " diag=" << diag;
      auto up = torch::randn_like(w);
      auto g1 = torch::autograd::grad({(w * up).sum()}, {qq, kk});
      auto g2 = torch::autograd::grad({(slots * up).sum()}, {qq, kk});
      EXPECT_TRUE(all_close(g1[0], g2[0], 1e-9, 1e-11)) << spec << " dq";
      EXPECT_TRUE(all_close(g1[1], g2[1], 1e-9, 1e-11)) << spec << " dk";
      EXPECT_FALSE(torch::isnan(g1[0]).any().item<bool>());
    }
  }
}

TEST(PatternScores, Gradcheck) {
  torch::manual_seed(32);
  auto p = Pattern::parse("pow2+cache");
  auto q = torch::randn({1, 2, 11, 4}, torch::kDouble).requires_grad_(true);
  auto k = torch::randn({1, 2, 11, 4}, torch::kDouble).requires_grad_(true);
  for (bool diag : {true, false}) {
    auto fn = [&](const std::vector<Tensor>& in) { return mixlab::pattern_scores(in[0], in[1], p, diag); };
    EXPECT_TRUE(mixlab::testing::gradcheck(fn, {q, k}));
  }
}

class LayerVsDense : public ::testing::TestWithParam<Variant> {};

TEST_P(LayerVsDense, ForwardAndParameterGradients) {
  const auto& v = GetParam();
  torch::manual_seed(33);
  ResolventMixer m(v.spec, dims(12, 2), v.opt);
  m.to(torch::kDouble);
  if (v.opt.share_weights) {
    // δ = 0 at init; make it non-trivial so the test sees the D term.
    torch::NoGradGuard ng;
    for (auto& kv : m.named_parameters())
      if (kv.key().rfind("delta_proj", 0) == 0) kv.value().normal_(0, 0.3);
  }
  auto x = torch::randn({2, 29, 12}, torch::kDouble);
  auto y = m.forward(x);
  auto yd = dense_layer(m, x);
  ASSERT_TRUE(all_close(y, yd, 1e-9, 1e-11)) << v.name;
  auto up = torch::randn_like(y);
  auto params = m.parameters();
  auto g1 = torch::autograd::grad({(y * up).sum()}, params, {}, false, false, true);
  auto g2 = torch::autograd::grad({(yd * up).sum()}, params, {}, false, false, true);
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(g1[i].defined() && g2[i].defined()) << v.name << " param " << i;
    EXPECT_TRUE(all_close(g1[i], g2[i], 1e-8, 1e-10)) << v.name << " param " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, LayerVsDense, ::testing::ValuesIn(variants()),
                         [](const auto& info) { return info.param.name; });

TEST(ResolventMixer, CausalPatternIsPlainSoftmaxAttention) {
  torch::manual_seed(34);
  ResolventMixer m("causal", dims(16, 4));
  auto x = torch::randn({2, 21, 16});
  auto c = m.coefficients(x);
  auto mask = torch::ones({21, 21}, torch::kBool).tril();
  auto s = torch::matmul(c.qa, c.ka.transpose(2, 3)) / std::sqrt(4.0);
  auto att = torch::matmul(torch::softmax(s.masked_fill(~mask, -INFINITY), -1), c.v);
  EXPECT_TRUE(all_close(m.forward(x), m.output(att), 1e-5, 1e-6));
  EXPECT_FALSE(c.gate.defined());
  EXPECT_EQ(c.beta.size(3), 0);
}

class LayerDecode : public ::testing::TestWithParam<Variant> {};

TEST_P(LayerDecode, StepEqualsForwardAndChunkedPrefill) {
  const auto& v = GetParam();
  torch::manual_seed(35);
  ResolventMixer m(v.spec, dims(16, 2), v.opt);
  const int64_t B = 2, T = 45;
  auto x = torch::randn({B, T, 16});
  auto y = m.forward(x).detach();
  auto st = m.init_state(B);
  for (int64_t t = 0; t < T; ++t) {
    auto yt = m.step(*st, x.select(1, t));
    ASSERT_TRUE(all_close(yt, y.select(1, t), 1e-5, 1e-5)) << v.name << " t=" << t;
  }
  EXPECT_EQ(st->position(), T);
  EXPECT_GT(st->bytes(), 0);
  // Chunked prefill: chunks continue a state; then decode continues after the chunks.
  auto st2 = m.init_state(B);
  auto& rs = dynamic_cast<ResolventState&>(*st2);
  int64_t t0 = 0;
  for (int64_t c : {10, 1, 17}) {
    auto yc = m.forward_chunk(x.narrow(1, t0, c), rs);
    ASSERT_TRUE(all_close(yc, y.narrow(1, t0, c), 1e-5, 1e-5)) << v.name << " t0=" << t0;
    t0 += c;
  }
  for (int64_t t = t0; t < T; ++t) {
    auto yt = m.step(rs, x.select(1, t));
    ASSERT_TRUE(all_close(yt, y.select(1, t), 1e-5, 1e-5)) << v.name << " t=" << t;
  }
  // Serialised state resumes exactly.
  std::stringstream buf;
  rs.save(buf);
  auto restored = ResolventState::load(buf);
  auto x_more = torch::randn({B, 16});
  EXPECT_TRUE(torch::equal(m.step(rs, x_more), m.step(*restored, x_more))) << v.name;
}

INSTANTIATE_TEST_SUITE_P(Variants, LayerDecode, ::testing::ValuesIn(variants()),
                         [](const auto& info) { return info.param.name; });

TEST(ResolventMixer, DecodeCacheOfCacheEfficientPatternsStaysSmall) {
  torch::manual_seed(36);
  ResolventMixer m("pow2+cache", dims(8, 2));
  auto st = m.init_state(1);
  torch::NoGradGuard ng;
  for (int64_t t = 1; t <= 1000; ++t) {
    m.step(*st, torch::randn({1, 8}));
    ASSERT_LE(st->cached_positions(), std::floor(std::log2(double(t))) + 2) << t;
  }
  // (x, y, k^A, k^B) × slots × 2 heads × D=4 floats; slots start at 16 and are reused, so at
  // most one doubling happens for ≤ 11 positions held.
  EXPECT_LE(st->bytes(), 4 * 32 * 2 * 4 * int64_t(sizeof(float)));
}

TEST(ResolventMixer, FiniteAtT65536) {
  torch::manual_seed(37);
  ResolventMixer m("pow2", dims(8, 2));
  auto x = torch::randn({1, 65536, 8}, torch::requires_grad());
  auto y = m.forward(x);
  EXPECT_TRUE(torch::isfinite(y).all().item<bool>());
  EXPECT_LT(y.abs().max().item<float>(), 1e3);
  y.pow(2).mean().backward();
  EXPECT_TRUE(torch::isfinite(x.grad()).all().item<bool>());
}

// The gate's initial value: sigmoid(b_g) at u = 0 (the gate weight multiplies u). The default
// 0.5 in every channel; gate=G sets G; gate=spectrum draws the spectrum of Mamba-2's decay init (values spread
// over (0.01, 0.99)); its old name gate=mamba2 is an alias that draws the same values. Bad values are refused with the
// spec named (the registry's resolvent:<args> goes through resolvent_spec_parse; tests/registry/registry_test.cpp
// checks that path).
// The op refuses gates outside [0, 1] and NaN (resolvent_op_test.cpp); the layer's own gates are
// sigmoids, in [0, 1] by construction, and pass unchecked: a NaN that reaches them (a diverging
// run) flows into the loss, which the trainer reports as divergence (or skips under
// --skip-nonfinite), instead of failing as a bad argument.
TEST(ResolventMixer, NaNReachingItsOwnGatesFlowsThrough) {
  ResolventMixer m("pow2", dims(16, 2));
  Tensor x = torch::randn({1, 6, 16});
  x[0][2][3] = NAN;
  Tensor y;
  ASSERT_NO_THROW(y = m.forward(x));
  EXPECT_TRUE(torch::isnan(y).any().item<bool>());
  auto state = m.init_state(1);
  ASSERT_NO_THROW(m.prefill(*state, x.narrow(1, 0, 3)));  // chunked prefill: the op with a past state
  ASSERT_NO_THROW(y = m.step(*state, x.select(1, 3)));    // grad mode on: the ATen step (resolvent_step)
  EXPECT_TRUE(torch::isnan(y).any().item<bool>());
}

TEST(ResolventMixer, GateInitFromSpec) {
  auto gate_at_zero = [](const std::string& args) {
    ResolventOptions o;
    const std::string pattern = mixlab::resolvent_spec_parse("resolvent:" + args, args, o);
    ResolventMixer m(pattern, dims(16, 2), o);
    return m.coefficients(torch::zeros({1, 3, 16}), nullptr).gate;
  };
  EXPECT_TRUE(all_close(gate_at_zero("dense"), torch::full({1, 2, 3, 8}, 0.5), 1e-6, 0));
  EXPECT_TRUE(all_close(gate_at_zero("order:4:gate=0.3"), torch::full({1, 2, 3, 8}, 0.3), 1e-6, 0));
  torch::manual_seed(7);
  const Tensor g = gate_at_zero("pow2+cache:gate=spectrum");
  torch::manual_seed(7);
  EXPECT_TRUE(torch::equal(gate_at_zero("pow2+cache:gate=mamba2"), g));
  EXPECT_GT(g.max().item<double>() - g.min().item<double>(), 0.05);
  EXPECT_GE(g.min().item<double>(), 0.01 - 1e-6);
  EXPECT_LE(g.max().item<double>(), 0.99 + 1e-6);
  ResolventOptions o;
  EXPECT_EQ(mixlab::resolvent_spec_parse("s", "order:8:gate=0.25", o), "order:8");
  EXPECT_DOUBLE_EQ(o.gate_init, 0.25);
  EXPECT_EQ(mixlab::resolvent_spec_parse("s", "dense", o), "dense");
  for (const auto& [args, frag] : std::vector<std::pair<std::string, std::string>>{
           {"dense:gate=0", "strictly between 0 and 1"},
           {"dense:gate=1", "strictly between 0 and 1"},
           {"dense:gate=1.5", "resolvent key 'gate' must be a number in [0, 1]"},
           {"dense:gate=x", "resolvent key 'gate' must be a number"},
           {"dense:foo=1", "unknown resolvent key 'foo'; known: gate"}}) {
    try {
      ResolventOptions opt;
      mixlab::resolvent_spec_parse("resolvent:" + args, args, opt);
      ADD_FAILURE() << "expected an error for " << args;
    } catch (const mixlab::Error& e) {
      EXPECT_NE(std::string(e.what()).find(frag), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("resolvent:" + args), std::string::npos) << e.what();
    }
  }
  ResolventOptions bad;
  bad.gate_init = 1.0;
  EXPECT_THROW(ResolventMixer("dense", dims(16, 2), bad), mixlab::Error);
}

TEST(ResolventMixer, SpecCostAndErrors) {
  ResolventMixer m("square+cache", dims(8, 2));
  EXPECT_EQ(m.spec(), "resolvent:square+cache");
  EXPECT_EQ(m.pattern_spec(), "square+cache");
  EXPECT_EQ(m.cost_class(), Pattern::parse("square+cache").time_class());
  auto expect = [](const std::function<void()>& f, const std::string& frag) {
    try {
      f();
      ADD_FAILURE() << "expected " << frag;
    } catch (const mixlab::Error& e) {
      EXPECT_NE(std::string(e.what()).find(frag), std::string::npos) << e.what();
    }
  };
  expect([] { ResolventMixer("pow2", dims(10, 4)); }, "multiple of n_heads");
  expect([] { ResolventMixer("pow2", dims(6, 2)); }, "even head dim");
  expect([] { ResolventMixer("nope", dims(8, 2)); }, "nope");
  expect([&] { m.forward(torch::randn({2, 5, 7})); }, "(B,T,C) with C = 8");
  auto st = m.init_state(2);
  expect([&] { m.step(*st, torch::randn({3, 8})); }, "x_t must have shape (B,C) = [2,8], got [3,8]");
}

}  // namespace resolvent_mixer_test
