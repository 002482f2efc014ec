// Backbone: shapes, decode (step) equals forward row by row, argument checks.
#include "mixlab/model/model.h"

#include <gtest/gtest.h>

#include "mixlab/core/error.h"
#include "mixlab/mixers/registry.h"
#include "support/expect_error.h"
#include "support/test_mixer.h"

namespace mixlab {
namespace {

ModelDims small_dims(int64_t layers = 2) {
  ModelDims d;
  d.vocab = 11;
  d.d_model = 16;
  d.layers = layers;
  d.heads = 2;
  d.mlp_ratio = 2;
  d.max_len = 32;
  return d;
}

void expect_step_equals_forward(DecoderModel& model, int64_t B, int64_t T) {
  torch::NoGradGuard no_grad;
  auto tokens = torch::randint(0, model.dims().vocab, {B, T}, torch::kInt64);
  auto full = model.forward(tokens);  // (B,T,V)
  ASSERT_EQ(full.sizes(), (std::vector<int64_t>{B, T, model.dims().vocab}));
  auto state = model.init_state(B);
  for (int64_t t = 0; t < T; ++t) {
    auto row = model.step(state, tokens.select(1, t));
    ASSERT_EQ(row.sizes(), (std::vector<int64_t>{B, model.dims().vocab}));
    EXPECT_TRUE(torch::allclose(row, full.select(1, t), 1e-4, 1e-5))
        << "t=" << t << " max diff " << (row - full.select(1, t)).abs().max().item<double>();
  }
  EXPECT_EQ(state.position, T);
}

TEST(TrainModel, StepEqualsForwardWithTestMixer) {
  torch::manual_seed(1);
  DecoderModel model(small_dims(), test_mixer_factory());
  for (int64_t B : {1, 3}) expect_step_equals_forward(model, B, 13);
}

TEST(TrainModel, StepEqualsForwardWithRegisteredMixers) {
  for (const char* spec : {"attention", "local:3", "ssm"}) {
    bool registered = false;
    for (const auto& f : mixer_families())
      registered |= f.family == std::string(spec).substr(0, f.family.size()) &&
                    (std::string(spec).size() == f.family.size() || spec[f.family.size()] == ':');
    if (!registered) continue;
    SCOPED_TRACE(spec);
    torch::manual_seed(2);
    DecoderModel model(small_dims(), mixer_factory_from_spec(spec));
    expect_step_equals_forward(model, 2, 9);
  }
}

TEST(TrainModel, ForwardIsCausal) {
  torch::manual_seed(3);
  DecoderModel model(small_dims(1), test_mixer_factory());
  torch::NoGradGuard no_grad;
  auto a = torch::randint(0, 11, {1, 10}, torch::kInt64);
  auto b = a.clone();
  b[0][7] = (a[0][7].item<int64_t>() + 1) % 11;
  auto la = model.forward(a), lb = model.forward(b);
  EXPECT_TRUE(torch::equal(la.narrow(1, 0, 7), lb.narrow(1, 0, 7)));
  EXPECT_FALSE(torch::allclose(la.select(1, 7), lb.select(1, 7)));
}

TEST(TrainModel, TiedHeadAndParameterCount) {
  torch::manual_seed(4);
  auto d = small_dims(1);
  DecoderModel model(d, test_mixer_factory());
  // embedding V*C + 3 LayerNorms (2C each) + MLP (C*rC + rC + rC*C + C) + test mixer (C*C).
  const int64_t C = d.d_model, r = d.mlp_ratio, V = d.vocab;
  EXPECT_EQ(model.parameter_count(), V * C + 3 * 2 * C + (C * r * C + r * C + r * C * C + C) + C * C);
}

TEST(TrainModel, ArgumentErrors) {
  torch::manual_seed(5);
  DecoderModel model(small_dims(), test_mixer_factory());
  expect_error([&] { model.forward(torch::zeros({4}, torch::kInt64)); },
               "DecoderModel::forward: tokens must have 2 dimensions");
  expect_error([&] { model.forward(torch::zeros({1, 4})); }, "tokens must be int64");
  expect_error([&] { model.forward(torch::zeros({1, 33}, torch::kInt64)); }, "exceeds max_len = 32");
  auto state = model.init_state(2);
  expect_error(
      [&] {
        model.step(state, torch::zeros({2, 1}, torch::kInt64));
      },
      "DecoderModel::step: tokens_t must have 1 dimensions");
  expect_error([&] { DecoderModel bad(small_dims(), [](const MixerDims&) { return MixerPtr(); }); },
               "factory returned null");
}

}  // namespace
}  // namespace mixlab
