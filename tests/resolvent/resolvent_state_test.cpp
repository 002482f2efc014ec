// Decode of the resolvent op: step equals forward row by row, cache sizes of the cache-efficient
// patterns, serialisation round trip, and chunked prefill (a state as the initial state of a
// parallel forward) equal to one long forward, gradients included.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <sstream>

#include "mixlab/core/error.h"
#include "mixlab/resolvent/resolvent.h"
#include "support/gradcheck.h"

namespace resolvent_state_test {

using mixlab::Pattern;
using mixlab::ResolventState;
using mixlab::testing::all_close;
using torch::Tensor;

namespace {

const std::vector<std::string> kPatterns = {"causal", "band:3", "dense",         "order:1",    "order:3",     "pow2",
                                            "square", "linear", "offsets:1,3,4", "pow2+cache", "square+cache"};

struct Seq {
  Tensor alpha, beta, x, gate;  // (B,H,T,·), float32
};

Seq random_seq(const Pattern& p, int64_t B, int64_t H, int64_t T, int64_t D, bool gated) {
  const int64_t W = mixlab::pattern_index(p, T)->W;
  Seq s;
  s.alpha = torch::randn({B, H, T, W + 1});
  s.beta = torch::rand({B, H, T, p.recurrent() ? W : 0}) * (0.9 / std::max<int64_t>(W, 1));
  s.x = torch::randn({B, H, T, D});
  if (gated) s.gate = torch::rand({B, H, T, D});
  return s;
}

// Row t's coefficients for the step: 1 + |P(t)| alpha slots, |P(t)| beta slots.
Tensor step_row(const Seq& s, const Pattern& p, ResolventState& st, int64_t t) {
  const int64_t c = p.row_size(t);
  auto a = s.alpha.select(2, t).narrow(2, 0, c + 1);
  auto b = s.beta.select(2, t).narrow(2, 0, p.recurrent() ? c : 0);
  return mixlab::resolvent_step(st, a, b, s.x.select(2, t), s.gate.defined() ? s.gate.select(2, t) : Tensor());
}

std::string test_name(std::string s) {
  for (auto& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

}  // namespace

class StepEqualsForward : public ::testing::TestWithParam<std::string> {};

TEST_P(StepEqualsForward, RowByRow) {
  auto p = Pattern::parse(GetParam());
  torch::manual_seed(21);
  const int64_t B = 2, H = 3, T = 70, D = 9;
  for (bool gated : {false, true}) {
    auto s = random_seq(p, B, H, T, D, gated);
    auto y = mixlab::resolvent_forward(s.alpha, s.beta, s.x, p, s.gate);
    ResolventState st(p, B, H, D, torch::kFloat, {true, p.recurrent(), {}});
    if (gated) {
      st.reserve(T);  // preallocated slots: same results, no growth
      EXPECT_EQ(st.bytes(), (p.recurrent() ? 2 : 1) * B * H * std::max<int64_t>(T, 16) * D * int64_t(sizeof(float)));
    }
    for (int64_t t = 0; t < T; ++t) {
      auto yt = step_row(s, p, st, t);
      // float32: the forward of dense windows (dense, linear, causal at T >= 65) sums by BLAS
      // blocks, the step row by row, so the order differs: a few ulps of |y| (up to ~20 here).
      ASSERT_TRUE(all_close(yt, y.select(2, t), 2e-6, 1e-5)) << GetParam() << " t=" << t << " gated=" << gated;
      ASSERT_EQ(st.position(), t + 1);
    }
    EXPECT_GT(st.bytes(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllPatterns, StepEqualsForward, ::testing::ValuesIn(kPatterns),
                         [](const auto& info) { return test_name(info.param); });

TEST(ResolventState, HoldsOnlyWhatFutureRowsRead) {
  // band:W keeps W, order:K keeps K, offsets keep the largest offset, dense keeps everything.
  const int64_t T = 50;
  for (auto [spec, held] : std::vector<std::pair<std::string, int64_t>>{
           {"band:3", 3}, {"order:2", 2}, {"offsets:1,3,4", 4}, {"dense", T}, {"pow2", T}, {"causal", T}}) {
    auto p = Pattern::parse(spec);
    ResolventState st(p, 1, 1, 1, torch::kFloat, {true, p.recurrent(), {}});
    st.append(torch::randn({1, 1, T, 1}), p.recurrent() ? torch::randn({1, 1, T, 1}) : Tensor());
    EXPECT_EQ(st.cached_positions(), held) << spec;
    EXPECT_EQ(st.position(), T);
  }
}

TEST(ResolventState, CacheEfficientSizesUpTo4096) {
  // After t steps the state holds what row t reads: for pow2+cache ≤ ⌊log2 t⌋ + 2 positions,
  // for square+cache ≤ ⌈√t⌉ + 3, for every t ≤ 4096 (D = 1: cheap).
  for (const std::string spec : {"pow2+cache", "square+cache"}) {
    auto p = Pattern::parse(spec);
    ResolventState st(p, 1, 1, 1, torch::kFloat, {true, true, {}});
    auto zero = torch::zeros({1, 1, 1, 1});
    int64_t max_held = 0;
    for (int64_t t = 1; t <= 4096; ++t) {
      st.append(zero, zero);
      const int64_t held = st.cached_positions();
      const double bound =
          spec == "pow2+cache" ? std::floor(std::log2(double(t))) + 2 : std::ceil(std::sqrt(double(t))) + 3;
      ASSERT_LE(held, bound) << spec << " t=" << t;
      // And it holds exactly the next row's pattern.
      auto want = p.row(t);
      std::sort(want.begin(), want.end());
      ASSERT_EQ(st.held_positions(), want) << spec << " t=" << t;
      max_held = std::max(max_held, held);
    }
    // Memory follows the positions held (slots are reused), not t.
    EXPECT_LE(st.bytes(), 2 * 2 * (max_held + 1) * int64_t(sizeof(float)) * 2) << spec;
  }
}

TEST(ResolventState, SaveLoadResumesExactly) {
  torch::manual_seed(22);
  for (const std::string spec : {"pow2+cache", "square", "band:3", "order:1"}) {
    auto p = Pattern::parse(spec);
    const int64_t B = 2, H = 2, T = 60, D = 5, cut = 37;
    auto s = random_seq(p, B, H, T, D, true);
    ResolventState st(p, B, H, D, torch::kFloat, {true, p.recurrent(), {3}});
    auto step = [&](ResolventState& state, int64_t t) {
      const int64_t c = p.row_size(t);
      return mixlab::resolvent_step(state, s.alpha.select(2, t).narrow(2, 0, c + 1),
                                    s.beta.select(2, t).narrow(2, 0, p.recurrent() ? c : 0), s.x.select(2, t),
                                    s.gate.select(2, t), {torch::full({B, H, 3}, float(t))});
    };
    for (int64_t t = 0; t < cut; ++t) step(st, t);
    std::stringstream buf;
    st.save(buf);
    auto restored = ResolventState::load(buf);
    EXPECT_EQ(restored->position(), cut);
    EXPECT_EQ(restored->held_positions(), st.held_positions());
    for (auto pos : st.held_positions())
      EXPECT_EQ(restored->extra_slots(0)[0][0][restored->slot_of(pos)][1].item<float>(), float(pos));
    for (int64_t t = cut; t < T; ++t) {
      auto a = step(st, t), b = step(*restored, t);
      ASSERT_TRUE(torch::equal(a, b)) << spec << " t=" << t;
    }
  }
  std::stringstream junk("not a state");
  try {
    ResolventState::load(junk);
    ADD_FAILURE() << "expected an error";
  } catch (const mixlab::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ResolventState::load"), std::string::npos) << e.what();
  }
}

class ChunkedPrefill : public ::testing::TestWithParam<std::string> {};

TEST_P(ChunkedPrefill, EqualsOneLongForwardWithGradients) {
  auto p = Pattern::parse(GetParam());
  torch::manual_seed(23);
  const int64_t B = 2, H = 2, D = 6;
  const std::vector<int64_t> chunks = {13, 1, 20, 30};
  int64_t T = 0;
  for (auto c : chunks) T += c;
  for (bool gated : {false, true}) {
    Seq s;
    {
      auto f = random_seq(p, B, H, T, D, gated);
      s = Seq{f.alpha.to(torch::kDouble), f.beta.to(torch::kDouble), f.x.to(torch::kDouble),
              gated ? f.gate.to(torch::kDouble) : Tensor()};
    }
    auto y_full = mixlab::resolvent_forward(s.alpha, s.beta, s.x, p, s.gate);
    ResolventState st(p, B, H, D, torch::kDouble, {true, p.recurrent(), {}});
    int64_t t0 = 0;
    for (auto c : chunks) {
      const int64_t W = mixlab::pattern_index(p, t0 + c)->W;
      auto a = s.alpha.narrow(2, t0, c).narrow(3, 0, W + 1).clone().requires_grad_(true);
      auto b = s.beta.narrow(2, t0, c).narrow(3, 0, p.recurrent() ? W : 0).clone().requires_grad_(true);
      auto x = s.x.narrow(2, t0, c).clone().requires_grad_(true);
      auto g = gated ? s.gate.narrow(2, t0, c).clone().requires_grad_(true) : Tensor();
      auto y = mixlab::resolvent_forward(a, b, x, p, g, &st);
      ASSERT_TRUE(all_close(y, y_full.narrow(2, t0, c), 1e-10, 1e-12)) << GetParam() << " t0=" << t0;
      // Gradients of a loss on this chunk's rows, the past held fixed, equal those of the long
      // forward restricted to the chunk.
      auto up = torch::randn_like(y);
      std::vector<Tensor> in = {a, b, x};
      if (gated) in.push_back(g);
      auto gc = torch::autograd::grad({(y * up).sum()}, in, {}, false, false, true);
      std::vector<Tensor> full_in = {s.alpha.clone().requires_grad_(true), s.beta.clone().requires_grad_(true),
                                     s.x.clone().requires_grad_(true)};
      if (gated) full_in.push_back(s.gate.clone().requires_grad_(true));
      auto yf = mixlab::resolvent_forward(full_in[0], full_in[1], full_in[2], p, gated ? full_in[3] : Tensor());
      auto gf = torch::autograd::grad({(yf.narrow(2, t0, c) * up).sum()}, full_in, {}, false, false, true);
      ASSERT_TRUE(all_close(gc[0], gf[0].narrow(2, t0, c).narrow(3, 0, W + 1), 1e-9, 1e-11)) << "dalpha";
      if (p.recurrent()) ASSERT_TRUE(all_close(gc[1], gf[1].narrow(2, t0, c).narrow(3, 0, W), 1e-9, 1e-11)) << "dbeta";
      ASSERT_TRUE(all_close(gc[2], gf[2].narrow(2, t0, c), 1e-9, 1e-11)) << "dx";
      if (gated) ASSERT_TRUE(all_close(gc[3], gf[3].narrow(2, t0, c), 1e-9, 1e-11)) << "dgate";
      st.append(x.detach(), p.recurrent() ? y.detach() : Tensor());
      t0 += c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllPatterns, ChunkedPrefill, ::testing::ValuesIn(kPatterns),
                         [](const auto& info) { return test_name(info.param); });

TEST(ResolventState, StepErrorsNameArguments) {
  auto p = Pattern::parse("pow2");
  ResolventState st(p, 2, 3, 4, torch::kFloat, {true, true, {}});
  st.append(torch::zeros({2, 3, 5, 4}), torch::zeros({2, 3, 5, 4}));  // row 5 reads 3 positions
  auto x = torch::randn({2, 3, 4});
  try {
    mixlab::resolvent_step(st, torch::randn({2, 3, 3}), torch::randn({2, 3, 3}), x);
    ADD_FAILURE();
  } catch (const mixlab::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("resolvent_step: alpha_t"), std::string::npos) << m;
    EXPECT_NE(m.find("[2,3,4]"), std::string::npos) << m;
    EXPECT_NE(m.find("got [2,3,3]"), std::string::npos) << m;
  }
  try {
    mixlab::resolvent_step(st, torch::randn({2, 3, 4}), torch::randn({2, 3, 3}), torch::randn({2, 3, 5}));
    ADD_FAILURE();
  } catch (const mixlab::Error& e) {
    EXPECT_NE(std::string(e.what()).find("x_t must have shape (B,H,D) = [2,3,4], got [2,3,5]"), std::string::npos)
        << e.what();
  }
  try {
    auto y = mixlab::resolvent_forward(torch::randn({1, 3, 2, 4}), torch::randn({1, 3, 2, 3}),
                                       torch::randn({1, 3, 2, 4}), p, {}, &st);
    ADD_FAILURE();
  } catch (const mixlab::Error& e) {
    EXPECT_NE(std::string(e.what()).find("past state"), std::string::npos) << e.what();
  }
}

// W_A = 1 and non-recurrent: the layout stores neither x nor y, yet chunked prefill must advance
// the state (issue 10 item 3): by append with the unstored x, or by advance(T).
TEST(ResolventState, StateStoringNothingAdvancesByChunks) {
  for (const std::string spec : {"causal", "band:3"}) {
    auto p = Pattern::parse(spec);
    ASSERT_FALSE(p.recurrent());
    const int64_t B = 2, H = 1, T = 7, D = 3;
    auto alpha = torch::randn({B, H, T, 1}, torch::kDouble), x = torch::randn({B, H, T, D}, torch::kDouble);
    auto none = [&](int64_t n) { return torch::zeros({B, H, n, 0}, torch::kDouble); };
    auto full = mixlab::resolvent_forward(alpha, none(T), x, p);
    for (bool by_advance : {false, true}) {
      ResolventState st(p, B, H, D, torch::kDouble, {false, false, {}});
      std::vector<Tensor> parts;
      for (int64_t t0 : {0, 3, 4}) {
        const int64_t n = t0 == 0 ? 3 : (t0 == 3 ? 1 : 3);
        auto xi = x.narrow(2, t0, n);
        parts.push_back(mixlab::resolvent_forward(alpha.narrow(2, t0, n), none(n), xi, p, {}, &st));
        if (by_advance)
          st.advance(n);
        else
          st.append(xi, Tensor());
        ASSERT_EQ(st.position(), t0 + n) << spec;
      }
      EXPECT_TRUE(all_close(torch::cat(parts, 2), full, 1e-12, 1e-12)) << spec;
    }
  }
  ResolventState stores_x(Pattern::parse("causal"), 1, 1, 1, torch::kFloat, {true, false, {}});
  EXPECT_THROW(stores_x.advance(1), mixlab::Error);
}

}  // namespace resolvent_state_test
