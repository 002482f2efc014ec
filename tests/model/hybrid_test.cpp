// Hybrid stacks: a model built from a per-layer mixer list (mixlab/registry/layer_specs.h). Each
// block holds its own member; decode (step row by row, prefill in uneven chunks) equals forward;
// the DecoderState (one state per block, the memory stream of a memory member) saves, loads into
// a rebuilt model and forks bitwise; and a list of one member builds the same model as the plain
// spec.
#include <gtest/gtest.h>

#include <sstream>

#include "mixlab/model/model.h"
#include "mixlab/registry/layer_specs.h"
#include "mixlab/registry/registry.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"

namespace hybrid_test {

namespace {

mixlab::ModelDims hybrid_dims(int64_t layers) {
  mixlab::ModelDims d;
  d.vocab = 23;
  d.d_model = 16;
  d.layers = layers;
  d.heads = 2;
  d.mlp_ratio = 2;
  d.max_len = 64;
  return d;
}

std::shared_ptr<mixlab::DecoderModel> make_hybrid(const std::string& spec, int64_t layers, int64_t seed) {
  torch::manual_seed(seed);
  auto m = std::make_shared<mixlab::DecoderModel>(hybrid_dims(layers), mixlab::mixer_factory_from_spec(spec, layers));
  m->eval();
  return m;
}

struct Hybrid {
  std::string spec;
  int64_t layers;
};

const std::vector<Hybrid>& hybrids() {
  static const std::vector<Hybrid> h = {
      {"ssm:4*3|attention", 4},                         // Jamba/Zamba: SSM layers with one attention layer
      {"gla|local:3", 4},                               // a list of two repeated twice
      {"brl:w=3:m=2:block=4|attention", 2},             // a memory member keeps the memory stream
      {"attention|resolvent:pow2+cache|toeplitz", 3}};  // members with a chunked prefill each
  return h;
}

}  // namespace

TEST(ModelHybrid, EachBlockHoldsItsMember) {
  for (const auto& h : hybrids()) {
    SCOPED_TRACE(h.spec);
    auto m = make_hybrid(h.spec, h.layers, 1);
    const auto specs = mixlab::mixer_layer_specs(h.spec, h.layers);
    std::string state_spec;
    for (int64_t l = 0; l < h.layers; ++l) {
      // The block's canonical spec is its member's, as a model of that member alone would have.
      const auto alone = mixlab::mixer_create(specs[l], {16, 2, 64});
      EXPECT_EQ(m->blocks()[l]->mixer().spec(), alone->spec()) << "block " << l;
      EXPECT_EQ(m->blocks()[l]->memory_mixer() != nullptr, specs[l].rfind("brl", 0) == 0) << "block " << l;
      state_spec += "|" + alone->spec();
    }
    // The decode state's header names every block's member, so it loads only into this stack.
    EXPECT_NE(m->state_spec().find(state_spec), std::string::npos) << m->state_spec();
  }
  expect_error([] { (void)mixlab::mixer_factory_from_spec("ssm|attention", 3); },
               {"mixer spec 'ssm|attention': the list names 2 layers, which does not divide the model's layers = 3"});
  expect_error([] { mixlab::DecoderModel bad(hybrid_dims(2), mixlab::mixer_factory_from_spec("ssm|bogus", 2)); },
               {"mixer spec 'bogus': unknown family 'bogus'"});
}

TEST(ModelHybrid, StepAndPrefillEqualForward) {
  for (const auto& h : hybrids()) {
    SCOPED_TRACE(h.spec);
    torch::NoGradGuard no_grad;
    auto m = make_hybrid(h.spec, h.layers, 2);
    for (int64_t B : {1, 2}) {
      const int64_t T = 19;
      auto tokens = torch::randint(0, 23, {B, T}, torch::kLong);
      auto logits = m->forward(tokens);
      auto stepped = m->init_state(B);
      auto referenced = m->init_state(B);
      for (int64_t t = 0; t < T; ++t) {
        auto a = m->step(stepped, tokens.select(1, t));
        auto r = m->step_reference(referenced, tokens.select(1, t));
        ASSERT_TRUE(mixlab::testing::all_close(a, logits.select(1, t), 1e-4, 1e-5)) << "B=" << B << " t=" << t;
        ASSERT_TRUE(torch::allclose(a, r, 1e-4, 1e-5)) << "B=" << B << " t=" << t;
      }
      auto chunked = m->init_state(B);
      std::vector<torch::Tensor> rows;
      for (auto [from, n] : {std::pair<int64_t, int64_t>{0, 5}, {5, 1}, {6, 13}})
        rows.push_back(m->prefill(chunked, tokens.narrow(1, from, n)));
      ASSERT_TRUE(mixlab::testing::all_close(torch::cat(rows, 1), logits, 1e-4, 1e-5)) << "B=" << B;
      EXPECT_EQ(chunked.position, T);
      EXPECT_EQ(chunked.blocks.size(), static_cast<size_t>(h.layers));
    }
  }
}

TEST(ModelHybrid, StateSavesLoadsAndForksBitwise) {
  for (const auto& h : hybrids()) {
    SCOPED_TRACE(h.spec);
    torch::NoGradGuard no_grad;
    auto m = make_hybrid(h.spec, h.layers, 3);
    const int64_t B = 2, T = 17, cut = 9;
    auto tokens = torch::randint(0, 23, {B, T}, torch::kLong);
    auto st = m->init_state(B);
    m->prefill(st, tokens.narrow(1, 0, cut));
    std::stringstream buf;
    m->save(st, buf);
    auto rebuilt = make_hybrid(h.spec, h.layers, 3);
    auto loaded = rebuilt->load(buf, "hybrid.state");
    auto forked = m->fork(st);
    EXPECT_EQ(loaded.position, cut);
    for (int64_t t = cut; t < T; ++t) {
      auto a = m->step(st, tokens.select(1, t));
      ASSERT_TRUE(torch::equal(a, rebuilt->step(loaded, tokens.select(1, t)))) << "t=" << t;
      ASSERT_TRUE(torch::equal(a, m->step(forked, tokens.select(1, t)))) << "t=" << t;
    }
  }
  // Another stack's state is refused by its spec: same members, other order.
  auto a = make_hybrid("ssm:4|attention", 2, 4), b = make_hybrid("attention|ssm:4", 2, 4);
  std::stringstream buf;
  a->save(a->init_state(1), buf);
  expect_error([&] { b->load(buf, "ab.state"); }, {"ab.state", "saved for model", "|ssm:4|attention'"});
}

TEST(ModelHybrid, AListOfOneMemberIsThePlainModel) {
  // The same parameters (names, shapes, values) and state spec: lists change nothing for a
  // model whose layers all hold one member.
  for (const auto& [plain, list] :
       {std::pair<std::string, std::string>{"ssm:4", "ssm:4*2"}, {"attention", "attention|attention"}}) {
    SCOPED_TRACE(list);
    auto p = make_hybrid(plain, 2, 5), l = make_hybrid(list, 2, 5);
    EXPECT_EQ(p->state_spec(), l->state_spec());
    const auto pp = p->named_parameters(), lp = l->named_parameters();
    ASSERT_EQ(pp.size(), lp.size());
    for (const auto& item : pp) {
      const torch::Tensor* other = lp.find(item.key());
      ASSERT_NE(other, nullptr) << item.key();
      EXPECT_TRUE(torch::equal(item.value(), *other)) << item.key();
    }
  }
}

}  // namespace hybrid_test
