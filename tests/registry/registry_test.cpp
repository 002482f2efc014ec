// Every registered mixer: creation from its spec, shapes, causality, step == forward row by row,
// state memory reporting; and registry errors.
#include "mixlab/registry/registry.h"

#include <gtest/gtest.h>

#include <random>

#include "mixlab/core/error.h"
#include "mixlab/mixer/parameter_budget.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/mixer_specs.h"

namespace registry_test {

namespace {

std::vector<std::string> specs_under_test() { return mixlab::testing::mixer_specs_under_test(); }
mixlab::MixerDims small_dims() { return mixlab::testing::small_mixer_dims(); }

}  // namespace

TEST(Registry, EveryFamilyIsListedOnce) {
  const auto& fams = mixlab::mixer_families();
  ASSERT_FALSE(fams.empty());
  std::set<std::string> names;
  for (const auto& f : fams) {
    EXPECT_TRUE(names.insert(f.family).second) << "duplicate family " << f.family;
    EXPECT_FALSE(f.description.empty());
  }
  EXPECT_TRUE(names.count("attention") && names.count("local") && names.count("ssm"));
}

TEST(Registry, StepEqualsForwardForEveryMixer) {
  for (const auto& spec : specs_under_test()) {
    SCOPED_TRACE(spec);
    torch::manual_seed(3);
    auto mixer = mixlab::mixer_create(spec, small_dims());
    mixer->eval();
    const int64_t B = 2, T = 19;
    auto x = torch::randn({B, T, 16});
    torch::NoGradGuard no_grad;
    auto y = mixer->forward(x);
    ASSERT_EQ(y.sizes(), x.sizes());
    auto state = mixer->init_state(B);
    for (int64_t t = 0; t < T; ++t) {
      auto yt = mixer->step(*state, x.select(1, t));
      ASSERT_TRUE(mixlab::testing::all_close(yt, y.select(1, t), 1e-4, 1e-5)) << "row " << t;
    }
    EXPECT_EQ(state->position(), T);
    EXPECT_GT(state->bytes(), 0);
  }
}

TEST(Registry, ForwardIsCausal) {
  for (const auto& spec : specs_under_test()) {
    SCOPED_TRACE(spec);
    torch::manual_seed(4);
    auto mixer = mixlab::mixer_create(spec, small_dims());
    torch::NoGradGuard no_grad;
    auto x = torch::randn({1, 12, 16});
    auto x2 = x.clone();
    x2.select(1, 7).add_(torch::randn({1, 16}));
    auto y = mixer->forward(x), y2 = mixer->forward(x2);
    EXPECT_TRUE(mixlab::testing::all_close(y.narrow(1, 0, 7), y2.narrow(1, 0, 7), 1e-5, 1e-6));
    EXPECT_FALSE(torch::allclose(y.select(1, 7), y2.select(1, 7)));
  }
}

TEST(Registry, GradientsReachEveryParameter) {
  for (const auto& spec : specs_under_test()) {
    SCOPED_TRACE(spec);
    torch::manual_seed(5);
    auto mixer = mixlab::mixer_create(spec, small_dims());
    auto y = mixer->forward(torch::randn({2, 9, 16}));
    y.pow(2).sum().backward();
    for (const auto& p : mixer->named_parameters()) {
      ASSERT_TRUE(p.value().grad().defined()) << p.key();
      EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>()) << p.key();
    }
  }
}

TEST(Registry, LocalAttentionCacheIsBounded) {
  auto mixer = mixlab::mixer_create("local:5", small_dims());
  auto state = mixer->init_state(1);
  torch::NoGradGuard no_grad;
  for (int t = 0; t < 40; ++t) mixer->step(*state, torch::randn({1, 16}));
  EXPECT_EQ(state->cached_positions(), 5);
  const int64_t bytes = state->bytes();
  for (int t = 0; t < 40; ++t) mixer->step(*state, torch::randn({1, 16}));
  EXPECT_EQ(state->bytes(), bytes) << "local attention's cache must not grow";
}

TEST(Registry, LongAttentionUsesTilesAndMatchesPlain) {
  // T above the tile size exercises the tiled path; compare against the step (decode) path.
  mixlab::MixerDims d;
  d.d_model = 8;
  d.n_heads = 2;
  auto mixer = mixlab::mixer_create("attention", d);
  torch::NoGradGuard no_grad;
  const int64_t T = 1100;
  auto x = torch::randn({1, T, 8});
  auto y = mixer->forward(x);
  auto state = mixer->init_state(1);
  torch::Tensor last;
  for (int64_t t = 0; t < T; ++t) last = mixer->step(*state, x.select(1, t));
  EXPECT_TRUE(mixlab::testing::all_close(last, y.select(1, T - 1), 1e-4, 1e-5));
  EXPECT_TRUE(mixlab::testing::all_close(mixer->forward(x.narrow(1, 0, 1000)), y.narrow(1, 0, 1000), 1e-4, 1e-5));
}

TEST(Registry, ErrorsNameTheSpec) {
  auto expect_msg = [](const std::string& spec, const std::string& fragment, mixlab::MixerDims dims = small_dims()) {
    try {
      mixlab::mixer_create(spec, dims);
      ADD_FAILURE() << "no error for " << spec;
    } catch (const mixlab::Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_msg("", "empty");
  expect_msg("nope", "unknown family 'nope'");
  expect_msg("attention:3", "takes no arguments");
  expect_msg("local:0", "positive integer");
  expect_msg("local:x", "positive integer");
  expect_msg("ssm:abc", "positive integer");
  expect_msg("resolvent:dense:gate=1",
             "mixer spec 'resolvent:dense:gate=1': resolvent key 'gate' must be strictly between 0 and 1");
  expect_msg("resolvent:gate=0.5", "resolvent needs a pattern");
  expect_msg("resolvent:dense:bogus=1", "unknown resolvent key 'bogus'; known: gate");
  EXPECT_NO_THROW(mixlab::mixer_create("resolvent:pow2+cache:gate=spectrum", small_dims()));
  EXPECT_NO_THROW(mixlab::mixer_create("resolvent:pow2+cache:gate=mamba2", small_dims()));  // the old name
  EXPECT_EQ(mixlab::mixer_create("resolvent:order:4:gate=0.2", small_dims())->spec(), "resolvent:order:4");
  mixlab::MixerDims odd = small_dims();
  odd.n_heads = 3;
  expect_msg("attention", "divisible", odd);
}

TEST(Registry, ForwardRejectsBadShapes) {
  auto mixer = mixlab::mixer_create("attention", small_dims());
  EXPECT_THROW(mixer->forward(torch::randn({2, 5, 15})), mixlab::Error);
  EXPECT_THROW(mixer->forward(torch::randn({5, 16})), mixlab::Error);
  EXPECT_THROW(mixer->forward(torch::randn({1, 0, 16})), mixlab::Error);
}

namespace {

// A mixlab::Error with a one-line, non-empty message; any other exception fails the test.
void expect_clean_rejection_or_success(const std::string& spec) {
  try {
    mixlab::check_mixer_spec(spec);
  } catch (const mixlab::Error& e) {
    const std::string m = e.what();
    EXPECT_FALSE(m.empty()) << "spec '" << spec << "'";
    EXPECT_EQ(m.find('\n'), std::string::npos) << "spec '" << spec << "': " << m;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "spec '" << spec << "' threw a non-mixlab exception: " << e.what();
  }
}

}  // namespace

// Issue 16 item 14: one grammar; issue 10 item 1: check_mixer_spec validates without a model.
TEST(Registry, CheckMixerSpecGrammar) {
  for (const auto& spec : specs_under_test()) EXPECT_NO_THROW(mixlab::check_mixer_spec(spec)) << spec;
  for (const std::string spec :
       {"", ":", ":8", "local:", "ssm:", "toeplitz:", "mamba:", "local:8:", "resolvent:", "resolvent:pwo2", "bogus",
        "local:0", "local:-1", "local:99999999999999999999", "ssm:1e3", "gla:0", "attention:", "Attention"}) {
    EXPECT_THROW(mixlab::check_mixer_spec(spec), mixlab::Error) << "'" << spec << "'";
  }
  try {
    mixlab::check_mixer_spec("local:");
  } catch (const mixlab::Error& e) {
    EXPECT_NE(std::string(e.what()).find("nothing after ':'"), std::string::npos) << e.what();
  }
}

// Fuzz: random strings and mutations of valid specs never crash and are rejected in one line.
TEST(Registry, SpecFuzz) {
  std::mt19937_64 rng(16);
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyz0123456789:+,=-_. \t\n\x01\xff";
  std::vector<std::string> seeds = specs_under_test();
  seeds.insert(seeds.end(), {"toeplitz:heads=2:kernel=3", "resolvent:offsets:1,2,5+cache", "local:8", "gla:16"});
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s;
    if (iter % 3 == 0) {
      const size_t n = rng() % 24;
      for (size_t i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
    } else {
      s = seeds[rng() % seeds.size()];
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) {
        const size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
        switch (rng() % 3) {
          case 0:
            s.insert(pos, 1, alphabet[rng() % alphabet.size()]);
            break;
          case 1:
            if (pos < s.size()) s.erase(pos, 1);
            break;
          default:
            if (pos < s.size()) s[pos] = alphabet[rng() % alphabet.size()];
        }
      }
    }
    expect_clean_rejection_or_success(s);
  }
}

// The mixer parameter budget against its formula, max(2^24, 1024·C²): the floor up to C = 128,
// then 1024·C²; a count at the budget passes, one more is refused with the count, the budget, C
// and the keys; and through the registry, a spec over it is refused before anything is built.
TEST(ParameterBudget, MatchesItsFormulaAndRefusesByKey) {
  for (int64_t C : {1, 16, 64, 128, 129, 512, 4096}) {
    const double c = static_cast<double>(C);
    EXPECT_EQ(mixlab::mixer_parameter_budget(C), std::max(16777216.0, 1024.0 * c * c)) << C;
    EXPECT_NO_THROW(mixlab::check_mixer_parameter_budget("fam", mixlab::mixer_parameter_budget(C), C, "k"));
  }
  EXPECT_EQ(mixlab::mixer_parameter_budget(128), 16777216.0);
  EXPECT_EQ(mixlab::mixer_parameter_budget(256), 67108864.0);
  expect_error([] { mixlab::check_mixer_parameter_budget("fam", 16777217.0, 16, "the key x (got 9)"); },
               {"fam: one mixer layer would hold 1.678e+07 parameters and buffers", "at model width C = 16",
                "max(2^24, 1024·C²)", "lower the key x (got 9)"});
  expect_error(
      [] {
        mixlab::check_mixer_spec("tpsm:d=14993680", mixlab::MixerDims{16, 2, 64});
      },
      {"tpsm", "parameters and buffers", "agg_d = inf_d = 14993680"});
  expect_error(
      [] {
        mixlab::check_mixer_spec("brl:m=9999999", mixlab::MixerDims{16, 2, 64});
      },
      {"brl", "the slot count m (got 9999999)"});
}

}  // namespace registry_test
