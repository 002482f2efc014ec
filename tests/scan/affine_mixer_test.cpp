// The eight affine-recurrence layers: forms agree per member (forward and parameter/input
// gradients), step equals forward row by row, prefill in pieces, gradcheck, registry, errors.
#include "mixlab/scan/affine_mixer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "mixlab/core/error.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"

namespace mixlab {
namespace affine_mixer_test {
namespace {

using testing::all_close;

std::shared_ptr<AffineMixer> make(AffineMember m, int64_t C, int64_t H, int64_t chunk, uint64_t seed) {
  torch::manual_seed(seed);
  MixerDims dims;
  dims.d_model = C;
  dims.n_heads = H;
  return std::make_shared<AffineMixer>(m, dims, chunk);
}

struct LayerRun {
  at::Tensor y;
  std::vector<at::Tensor> grads;  // d/dx then d/dparams
};

LayerRun run_layer(AffineMixer& layer, const at::Tensor& x0, AffineForm form) {
  layer.set_form(form);
  auto x = x0.detach().clone().requires_grad_(true);
  auto y = layer.forward(x);
  torch::manual_seed(42);
  auto w = torch::randn_like(y);
  std::vector<at::Tensor> wrt{x};
  for (auto& p : layer.parameters()) wrt.push_back(p);
  auto grads = torch::autograd::grad({(y * w).sum()}, wrt, {}, false, false, true);
  for (auto& g : grads)
    if (!g.defined()) g = torch::zeros({1}, x0.options());
  return {y.detach(), grads};
}

class AffineMembers : public ::testing::TestWithParam<int> {
 protected:
  AffineMember member() const { return static_cast<AffineMember>(GetParam()); }
};

TEST_P(AffineMembers, FormsAgreeForwardAndBackward) {
  for (int64_t T : {1, 17, 40}) {
    auto layer = make(member(), 8, 2, 16, 1);
    layer->to(torch::kDouble);
    torch::manual_seed(2 + T);
    auto x = torch::randn({2, T, 8}, torch::kDouble);
    auto ref = run_layer(*layer, x, AffineForm::kReference);
    for (auto form : {AffineForm::kChunked, AffineForm::kRecurrent, AffineForm::kScan}) {
      auto r = run_layer(*layer, x, form);
      EXPECT_TRUE(all_close(r.y, ref.y, 1e-8, 1e-8)) << "T " << T << " form " << int(form);
      ASSERT_EQ(r.grads.size(), ref.grads.size());
      for (size_t i = 0; i < r.grads.size(); ++i)
        EXPECT_TRUE(all_close(r.grads[i], ref.grads[i], 1e-7, 1e-7))
            << "T " << T << " form " << int(form) << " grad " << i;
    }
  }
}

TEST_P(AffineMembers, StepEqualsForwardRowByRow) {
  auto layer = make(member(), 12, 3, 8, 3);
  torch::manual_seed(4);
  auto x = torch::randn({2, 21, 12});
  torch::NoGradGuard no_grad;
  auto y = layer->forward(x);
  auto state = layer->init_state(2);
  EXPECT_EQ(state->bytes(), 2 * 3 * layer->state_dk() * layer->state_dv() * 4);
  for (int64_t t = 0; t < 21; ++t) {
    auto yt = layer->step(*state, x.select(1, t));
    ASSERT_TRUE(all_close(yt, y.select(1, t), 1e-4, 1e-5)) << affine_member_info(member()).name << " t " << t;
  }
  EXPECT_EQ(state->position(), 21);
}

// Decode without autograd takes the raw-row step (affine_mixer_step_rows.cpp); with autograd on,
// the ATen step. Both must give the same outputs and states, token after token, in float and
// double, on odd sizes (C 12, H 3: Dv 3; mamba Dk 16) and after the weights change.
TEST_P(AffineMembers, RawRowStepEqualsAtenStep) {
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    auto layer = make(member(), 12, 3, 8, 11);
    layer->to(dtype);
    const double tol = dtype == torch::kFloat ? 1e-5 : 1e-12;
    torch::manual_seed(12);
    auto x = torch::randn({3, 9, 12}, dtype);
    auto fast = layer->init_state(3), aten = layer->init_state(3);
    for (int64_t t = 0; t < 9; ++t) {
      if (t == 5) {  // the packed weights must follow an optimizer step
        torch::NoGradGuard no_grad;
        for (auto& p : layer->parameters()) p.add_(0.01);
      }
      at::Tensor y_fast, y_aten;
      {
        torch::NoGradGuard no_grad;
        // The raw step updates the state in place (the ATen step replaces it): this is how the
        // test knows it compared the two paths, not one path with itself.
        const void* before = dynamic_cast<AffineState&>(*fast).s_.data_ptr();
        y_fast = layer->step(*fast, x.select(1, t));
        ASSERT_EQ(dynamic_cast<AffineState&>(*fast).s_.data_ptr(), before) << "the raw-row path was not taken";
      }
      y_aten = layer->step(*aten, x.select(1, t)).detach();
      ASSERT_TRUE(all_close(y_fast, y_aten, tol, tol))
          << affine_member_info(member()).name << " dtype " << dtype << " t " << t << " max diff "
          << (y_fast - y_aten).abs().max().item<double>();
      auto& sf = dynamic_cast<AffineState&>(*fast);
      auto& sa = dynamic_cast<AffineState&>(*aten);
      ASSERT_TRUE(all_close(sf.s_, sa.s_.detach(), tol, tol)) << "state, t " << t;
      EXPECT_EQ(sf.position(), t + 1);
    }
  }
}

TEST_P(AffineMembers, PrefillInPiecesEqualsOneForward) {
  auto layer = make(member(), 8, 2, 8, 5);
  layer->to(torch::kDouble);
  torch::manual_seed(6);
  auto x = torch::randn({2, 30, 8}, torch::kDouble);
  at::Tensor final_whole, state;
  auto whole = layer->forward_from(x, {}, &final_whole);
  std::vector<at::Tensor> ys;
  int64_t start = 0;
  for (int64_t len : {7, 1, 22}) {
    at::Tensor next;
    ys.push_back(layer->forward_from(x.narrow(1, start, len), state, &next));
    state = next;
    start += len;
  }
  EXPECT_TRUE(all_close(torch::cat(ys, 1), whole, 1e-9, 1e-9));
  EXPECT_TRUE(all_close(state, final_whole, 1e-9, 1e-9));
}

TEST_P(AffineMembers, GradcheckInput) {
  auto layer = make(member(), 4, 2, 2, 7);
  layer->to(torch::kDouble);
  torch::manual_seed(8);
  auto x = torch::randn({1, 5, 4}, torch::kDouble).requires_grad_(true);
  auto fn = [&](const std::vector<at::Tensor>& in) { return layer->forward(in[0]); };
  EXPECT_TRUE(testing::gradcheck(fn, {x}));
}

TEST_P(AffineMembers, FactoryAndSpec) {
  // The registry (src/registry/registry.cpp) forwards "<name>[:chunk]" to affine_mixer_create.
  const std::string name = affine_member_info(member()).name;
  MixerDims dims;
  dims.d_model = 8;
  dims.n_heads = 2;
  auto m = affine_mixer_create(name, name, "", dims);
  EXPECT_EQ(m->spec(), name);
  EXPECT_EQ(affine_mixer_create(name, name + ":16", "16", dims)->spec(), name + ":16");
  EXPECT_EQ(m->cost_class(), "O(1)");
  EXPECT_THROW(affine_mixer_create(name, name + ":x", "x", dims), Error);
  auto y = m->forward(torch::randn({1, 3, 8}));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{1, 3, 8}));
}

INSTANTIATE_TEST_SUITE_P(All, AffineMembers, ::testing::Range(0, static_cast<int>(AffineMember::kCount)),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(affine_members()[static_cast<size_t>(info.param)].name);
                         });

TEST(AffineMixerErrors, BadInputs) {
  auto layer = make(AffineMember::kGla, 8, 2, 16, 1);
  expect_error(
      [&] {
        layer->forward(torch::randn({2, 5, 7}));
      },
      "gla forward: x must have shape (B,T,C) = [*,*,8], got [2,5,7]");
  expect_error(
      [&] {
        layer->forward_from(torch::randn({2, 5, 8}), torch::zeros({2, 2, 4, 5}), nullptr);
      },
      "gla forward: initial_state must have shape (B,H,Dk,Dv) = [2,2,4,4], got [2,2,4,5]");
  auto state = layer->init_state(2);
  expect_error(
      [&] {
        layer->step(*state, torch::randn({3, 8}));
      },
      "gla step: x_t must have shape (B,C) = [2,8], got [3,8]");
  expect_error(
      [&] {
        layer->step(*state, torch::randn({2, 8}, torch::kDouble));
      },
      "x_t must have the dtype of the state");
  struct Other : MixerState {
    int64_t position() const override { return 0; }
    int64_t bytes() const override { return 0; }
    int64_t batch() const override { return 2; }
  } other;
  expect_error([&] { layer->step(other, torch::randn({2, 8})); }, "state was not created by this mixer's init_state");
  MixerDims dims;
  dims.d_model = 10;
  dims.n_heads = 4;
  expect_error([&] { AffineMixer(AffineMember::kRetNet, dims); },
               "retnet: d_model (10) must be a positive multiple of n_heads (4)");
  dims.d_model = 8;
  expect_error([&] { AffineMixer(AffineMember::kGla, dims, 24); }, "gla: chunk must be a power of two, got 24");
  AffineMixer delta(AffineMember::kDeltaNet, dims, 24);  // the delta rule takes any chunk
  EXPECT_EQ(delta.spec(), "deltanet:24");
}

}  // namespace
}  // namespace affine_mixer_test
}  // namespace mixlab
