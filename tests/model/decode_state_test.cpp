// DecoderModel's decode engine for a model of every registered mixer: prefill in chunks equals
// forward, the whole DecoderState (memory stream included) saves and loads bitwise, fork, and
// a state of another model is refused.
#include <gtest/gtest.h>

#include <sstream>

#include "mixlab/core/error.h"
#include "mixlab/model/model.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/mixer_specs.h"

namespace decode_state_test {

namespace {

mixlab::ModelDims tiny_dims() {
  mixlab::ModelDims d;
  d.vocab = 23;
  d.d_model = 16;
  d.layers = 2;
  d.heads = 2;
  d.mlp_ratio = 2;
  d.max_len = 64;
  return d;
}

std::shared_ptr<mixlab::DecoderModel> make_model(const std::string& spec, int64_t seed) {
  torch::manual_seed(seed);
  auto m =
      std::make_shared<mixlab::DecoderModel>(tiny_dims(), mixlab::mixer_factory_from_spec(spec, tiny_dims().layers));
  m->eval();
  return m;
}

}  // namespace

TEST(ModelDecode, PrefillSaveLoadForkForEveryMixer) {
  for (const auto& spec : mixlab::testing::mixer_specs_under_test()) {
    SCOPED_TRACE(spec);
    torch::NoGradGuard no_grad;
    auto m = make_model(spec, 7);
    const int64_t B = 2, T = 21, cut = 11;
    auto tokens = torch::randint(0, tiny_dims().vocab, {B, T}, torch::kLong);
    auto logits = m->forward(tokens);

    // Prefill in uneven chunks, then step: equals forward.
    auto st = m->init_state(B);
    auto l1 = m->prefill(st, tokens.narrow(1, 0, 4));
    auto l2 = m->prefill(st, tokens.narrow(1, 4, cut - 4));
    ASSERT_TRUE(mixlab::testing::all_close(torch::cat({l1, l2}, 1), logits.narrow(1, 0, cut), 1e-4, 1e-5));
    EXPECT_EQ(st.position, cut);

    // Save, load into a rebuilt model, fork; all continue identically.
    std::stringstream buf;
    m->save(st, buf);
    auto m2 = make_model(spec, 7);
    auto st2 = m2->load(buf);
    auto st3 = m->fork(st);
    EXPECT_EQ(st2.position, cut);
    EXPECT_GT(st2.bytes(), 0);
    EXPECT_LE(st2.bytes(), st.bytes());  // capacity may be tighter than the original's
    for (int64_t t = cut; t < T; ++t) {
      auto a = m->step(st, tokens.select(1, t));
      auto b = m2->step(st2, tokens.select(1, t));
      auto c = m->step(st3, tokens.select(1, t));
      ASSERT_TRUE(torch::equal(a, b)) << "t=" << t;
      ASSERT_TRUE(torch::equal(a, c)) << "t=" << t;
      ASSERT_TRUE(mixlab::testing::all_close(a, logits.select(1, t), 1e-4, 1e-5)) << "t=" << t;
    }
  }
}

TEST(ModelDecode, StateOfAnotherModelIsRefused) {
  auto a = make_model("gla", 1), b = make_model("retnet", 1);
  auto st = a->init_state(1);
  std::stringstream buf;
  a->save(st, buf);
  expect_error([&] { b->load(buf, "m.state"); }, {"m.state", "saved for model", "|gla|gla", "|retnet|retnet"});
  // A mixer state is not a model state either.
  auto mix = mixlab::mixer_create("gla", {16, 2, 64});
  std::stringstream mbuf;
  mix->save(*mix->init_state(1), mbuf);
  expect_error([&] { a->load(mbuf, "x.state"); }, {"x.state", "saved for model 'gla'"});
  expect_error([&] { a->prefill(st, torch::zeros({1, 0}, torch::kLong)); }, "T >= 1");
}

TEST(ModelDecode, FastStepEqualsReferenceStep) {
  for (const auto& spec : mixlab::testing::mixer_specs_under_test()) {
    SCOPED_TRACE(spec);
    auto m = make_model(spec, 9);
    auto tokens = torch::randint(0, tiny_dims().vocab, {2, 12}, torch::kLong);
    auto fast = m->init_state(2);
    auto ref = m->init_state(2);
    torch::NoGradGuard no_grad;
    for (int64_t t = 0; t < tokens.size(1); ++t) {
      auto a = m->step(fast, tokens.select(1, t));
      auto b = m->step_reference(ref, tokens.select(1, t));
      // The backbone's raw-row loops add in another order than ATen: equal to float rounding.
      ASSERT_TRUE(torch::allclose(a, b, 1e-4, 1e-5)) << "t=" << t << " max diff " << (a - b).abs().max().item<double>();
    }
    // A state the fast path wrote forks into ordinary tensors the reference path can continue.
    auto f = m->fork(fast);
    EXPECT_TRUE(
        torch::allclose(m->step_reference(f, tokens.select(1, 0)), m->step(fast, tokens.select(1, 0)), 1e-4, 1e-5));
  }
}

// Memory mixers take the raw-row backbone too (Block::step_fast): a model of brl blocks, and one
// that mixes a brl block with a resolvent block, over several segment boundaries, in float and
// double, against the reference step with autograd on (every mixer's ATen step as well).
TEST(ModelDecode, FastStepEqualsReferenceStepWithMemoryStream) {
  const std::vector<std::vector<std::string>> stacks = {
      {"brl:w=3:m=2:block=4", "brl:w=3:m=2:block=4:hist=12"},
      {"brl:w=2:m=3:block=5:attn=laplace:diff=0", "resolvent:pow2+cache"}};
  for (const auto& stack : stacks) {
    for (auto dtype : {torch::kFloat, torch::kDouble}) {
      SCOPED_TRACE(stack[0] + " | " + stack[1] + (dtype == torch::kFloat ? " float" : " double"));
      torch::manual_seed(10);
      size_t next = 0;
      auto factory = [&](const mixlab::MixerDims& d) { return mixlab::mixer_create(stack[next++], d); };
      auto m = std::make_shared<mixlab::DecoderModel>(tiny_dims(), factory);
      m->to(dtype);
      m->eval();
      ASSERT_NE(m->blocks()[0]->memory_mixer(), nullptr);
      const double rtol = dtype == torch::kFloat ? 1e-4 : 1e-10, atol = dtype == torch::kFloat ? 1e-5 : 1e-12;
      auto tokens = torch::randint(0, tiny_dims().vocab, {2, 17}, torch::kLong);
      auto fast = m->init_state(2);
      auto ref = m->init_state(2);
      for (int64_t t = 0; t < tokens.size(1); ++t) {
        auto a = m->step(fast, tokens.select(1, t));
        auto b = m->step_reference(ref, tokens.select(1, t)).detach();
        ASSERT_EQ(a.scalar_type(), dtype);
        ASSERT_TRUE(torch::allclose(a, b, rtol, atol))
            << "t=" << t << " max diff " << (a - b).abs().max().item<double>();
      }
    }
  }
}

}  // namespace decode_state_test
