// Backbone: shapes, decode (step) equals forward row by row, argument checks.
#include "mixlab/model/model.h"

#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/registry/registry.h"
#include "support/expect_error.h"
#include "support/test_mixer.h"

namespace mixlab {
namespace model_test {
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
  // These families are always registered: mixer_create throws for an unknown one, so the loop
  // can never pass having checked nothing.
  for (const char* spec : {"attention", "local:3", "ssm"}) {
    SCOPED_TRACE(spec);
    torch::manual_seed(2);
    DecoderModel model(small_dims(), mixer_factory_from_spec(spec, small_dims().layers));
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

// The memory stream: a stack of brl blocks with a plain block in between (which must pass the
// memory through) decodes exactly like the parallel forward, across several block boundaries.
MixerFactory brl_stack_factory() {
  auto n = std::make_shared<int>(0);
  return [n](const MixerDims& d) -> MixerPtr {
    return (*n)++ % 2 == 0 ? mixer_create("brl:w=3:m=2:block=4", d) : std::make_shared<CumulativeMeanMixer>(d);
  };
}

TEST(TrainModel, MemoryStreamStepEqualsForward) {
  torch::manual_seed(6);
  DecoderModel model(small_dims(3), brl_stack_factory());
  for (int64_t B : {1, 2}) expect_step_equals_forward(model, B, 19);
  DecoderModel only_brl(small_dims(2), mixer_factory_from_spec("brl:w=2:m=3:block=5:attn=relu2", 2));
  expect_step_equals_forward(only_brl, 2, 17);
}

TEST(TrainModel, MemoryStreamIsCausalAndTrained) {
  torch::manual_seed(7);
  DecoderModel model(small_dims(3), brl_stack_factory());
  auto a = torch::randint(0, 11, {2, 20}, torch::kInt64);
  for (int64_t t : {2, 9, 13}) {
    torch::NoGradGuard no_grad;
    auto b = a.clone();
    b.select(1, t).add_(1).remainder_(11);
    auto la = model.forward(a), lb = model.forward(b);
    EXPECT_TRUE(torch::equal(la.narrow(1, 0, t), lb.narrow(1, 0, t))) << "t=" << t;
    EXPECT_FALSE(torch::allclose(la.select(1, t), lb.select(1, t))) << "t=" << t;
  }
  // The memory's own LN and MLP exist on memory blocks only and receive gradients, except the
  // last memory block's (its updated memory is read by no later block).
  model.forward(a).pow(2).mean().backward();
  auto params = model.named_parameters();
  ASSERT_TRUE(params.contains("block0.mem_fc.weight"));
  EXPECT_FALSE(params.contains("block1.mem_fc.weight"));
  EXPECT_TRUE(params["block0.mem_fc.weight"].grad().defined());
  EXPECT_GT(params["block0.mem_fc.weight"].grad().abs().sum().item<double>(), 0.0);
  EXPECT_GT(params["block0.mixer.ct0"].grad().abs().sum().item<double>(), 0.0);  // the stream's x_ct^(0)
}

// The last memory block's outgoing memory reaches no mixer: the model skips that update, in the
// training forward and in decode, and the logits are those of the stack that computes it.
TEST(TrainModel, LastMemoryBlockSkipsItsUnreadUpdate) {
  torch::manual_seed(9);
  DecoderModel model(small_dims(3), brl_stack_factory());  // brl, plain, brl
  auto& blocks = model.blocks();
  EXPECT_TRUE(blocks[0]->memory_out_read());
  EXPECT_FALSE(blocks[2]->memory_out_read());
  DecoderModel hybrid(small_dims(2), mixer_factory_from_spec("brl:w=3:m=2:block=4|attention", 2));
  EXPECT_FALSE(hybrid.blocks()[0]->memory_out_read());

  torch::NoGradGuard no_grad;
  const int64_t B = 2, T = 18;
  auto tokens = torch::randint(0, 11, {B, T}, torch::kInt64);
  auto x = torch::randn({B, T, 16});
  auto memory = blocks[0]->memory_mixer()->memory_init(B, T);
  EXPECT_FALSE(blocks[2]->forward(x, memory).second.defined());
  const auto skipped = model.forward(tokens);
  auto skipped_state = model.init_state(B);
  std::vector<torch::Tensor> skipped_rows;
  for (int64_t t = 0; t < T; ++t) skipped_rows.push_back(model.step(skipped_state, tokens.select(1, t)));
  EXPECT_TRUE(skipped_state.memory[0].defined());
  EXPECT_FALSE(skipped_state.memory[2].defined());

  blocks[2]->set_memory_out_read(true);  // the stack as it was: the update computed, then dropped
  EXPECT_TRUE(blocks[2]->forward(x, memory).second.defined());
  EXPECT_TRUE(torch::equal(model.forward(tokens), skipped));
  auto full_state = model.init_state(B);
  for (int64_t t = 0; t < T; ++t)
    EXPECT_TRUE(torch::equal(model.step(full_state, tokens.select(1, t)), skipped_rows[t])) << "t=" << t;
  // The reference decode (Block::step, the plain modules) skips the same update.
  blocks[2]->set_memory_out_read(false);
  auto reference_state = model.init_state(B);
  for (int64_t t = 0; t < T; ++t)
    EXPECT_TRUE(
        torch::allclose(model.step_reference(reference_state, tokens.select(1, t)), skipped_rows[t], 1e-4, 1e-5))
        << "reference t=" << t;
  EXPECT_FALSE(reference_state.memory[2].defined());
  EXPECT_TRUE(reference_state.memory[0].defined());
  blocks[2]->set_memory_out_read(true);
  ASSERT_TRUE(full_state.memory[2].defined());
  EXPECT_EQ(full_state.bytes() - skipped_state.bytes(), full_state.memory[2].numel() * 4);

  // A state saved with that memory (as every state was before the skip) loads without it and
  // decodes on as the skipping model's own state.
  std::stringstream saved;
  model.save(full_state, saved);
  blocks[2]->set_memory_out_read(false);
  auto loaded = model.load(saved, "a state with the unread memory");
  EXPECT_FALSE(loaded.memory[2].defined());
  const auto next = tokens.select(1, 3);
  EXPECT_TRUE(torch::equal(model.step(loaded, next), model.step(skipped_state, next)));
}

TEST(TrainModel, MemoryStreamDecodeStateIsConstant) {
  torch::manual_seed(8);
  auto d = small_dims(2);
  d.max_len = 400;
  DecoderModel model(d, mixer_factory_from_spec("brl:w=3:m=2:block=4", d.layers));
  torch::NoGradGuard no_grad;
  auto state = model.init_state(2);
  int64_t at_short = 0;
  for (int64_t t = 0; t < 320; ++t) {
    model.step(state, torch::randint(0, 11, {2}, torch::kInt64));
    if (t + 1 == 16) at_short = state.bytes();
  }
  EXPECT_EQ(state.bytes(), at_short);
  EXPECT_GT(at_short, 0);
}

TEST(TrainModel, MemoryStreamMismatchIsRejected) {
  auto n = std::make_shared<int>(0);
  expect_error(
      [&] {
        DecoderModel bad(small_dims(2), [n](const MixerDims& d) {
          return mixer_create((*n)++ == 0 ? "brl:w=2:m=2" : "brl:w=2:m=3", d);
        });
      },
      {"block 1", "M=3", "the stream has M=2"});
}

}  // namespace
}  // namespace model_test
}  // namespace mixlab
