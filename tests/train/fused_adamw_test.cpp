// fused_adamw.h: grad_norm + grad_clip_coef + adamw_fused_step against LibTorch's
// clip_grad_norm_ + torch::optim::AdamW::step over several steps (two weight-decay groups,
// clipping on and off, float and double, awkward sizes, a parameter without a gradient), the
// state it leaves readable by the library optimiser (save/load, the checkpoint's format), the
// library fallback for strided parameters, and the argument errors.
#include "mixlab/train/fused_adamw.h"

#include <gtest/gtest.h>

#include <sstream>

#include "mixlab/core/error.h"
#include "support/gradcheck.h"

namespace mixlab {
namespace fused_adamw_test {
namespace {

struct OptimizerRig {
  std::vector<torch::Tensor> params;  // decay group first, then the no-decay group
  std::unique_ptr<torch::optim::AdamW> opt;
};

// Two groups as the trainer builds them (weight decay on dim >= 2 only), betas 0.9 / 0.98.
OptimizerRig make_rig(torch::ScalarType dtype, uint64_t seed, bool strided = false) {
  torch::manual_seed(static_cast<int64_t>(seed));
  OptimizerRig s;
  const std::vector<std::vector<int64_t>> shapes = {{7, 5}, {3, 1, 9}, {1, 1}, {13}, {1}, {4}};
  for (const auto& shape : shapes) {
    auto p = torch::randn(shape, dtype);
    if (strided && shape.size() == 2 && shape[0] > 1) p = torch::randn({shape[1], shape[0]}, dtype).t();
    s.params.push_back(p.requires_grad_(true));
  }
  std::vector<torch::Tensor> decay(s.params.begin(), s.params.begin() + 3),
      no_decay(s.params.begin() + 3, s.params.end());
  auto o = torch::optim::AdamWOptions(3e-2).betas(std::make_tuple(0.9, 0.98)).eps(1e-8).weight_decay(0.1);
  auto o_nd = o;
  o_nd.weight_decay(0.0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(o));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(o_nd));
  s.opt = std::make_unique<torch::optim::AdamW>(std::move(groups), o);
  return s;
}

// The same gradients on both setups: a loss of the parameters, so they change with the weights.
void set_grads(OptimizerRig& s, int step, double grad_size) {
  s.opt->zero_grad();
  torch::Tensor loss = torch::zeros({}, s.params[0].options());
  for (size_t i = 0; i < s.params.size(); ++i) {
    if (i == 4 && step % 2 == 1) {  // no gradient at odd steps (zero_grad keeps a zeroed one): skipped by both
      s.params[i].mutable_grad().reset();
      continue;
    }
    loss = loss + (s.params[i] * s.params[i]).sum() * (0.5 + static_cast<double>(i)) + s.params[i].sum() * step;
  }
  (loss * grad_size).backward();
}

TEST(FusedAdamW, EqualsClipGradNormAndLibraryAdamWOverSeveralSteps) {
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    for (double max_norm : {0.5, 1e6}) {  // clipping on every step / never
      OptimizerRig lib = make_rig(dtype, 1), fused = make_rig(dtype, 1);
      const double tol = dtype == torch::kFloat ? 2e-6 : 1e-13;
      for (int step = 0; step < 6; ++step) {
        const double lr = 3e-2 * (step + 1) / 6.0;  // a schedule: lr changes every step
        for (auto* s : {&lib, &fused})
          for (auto& g : s->opt->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
        set_grads(lib, step, 3.0);
        set_grads(fused, step, 3.0);
        const double n_lib = torch::nn::utils::clip_grad_norm_(lib.params, max_norm);
        lib.opt->step();
        const double n_fused = grad_norm(fused.params);
        EXPECT_NEAR(n_fused, n_lib, 1e-5 * n_lib);
        adamw_fused_step(*fused.opt, grad_clip_coef(n_fused, max_norm));
        for (size_t i = 0; i < lib.params.size(); ++i) {
          const std::string at =
              fmt::format("{} max_norm {} step {} param {}", c10::toString(dtype), max_norm, step, i);
          EXPECT_TRUE(testing::all_close(fused.params[i], lib.params[i], tol, tol)) << at;
          if (lib.params[i].grad().defined())
            EXPECT_TRUE(testing::all_close(fused.params[i].grad(), lib.params[i].grad(), tol, tol)) << at;
        }
      }
      // The moments and step counts sit where the library keeps them.
      for (size_t i = 0; i < lib.params.size(); ++i) {
        const auto key_l = c10::guts::to_string(lib.params[i].unsafeGetTensorImpl());
        const auto key_f = c10::guts::to_string(fused.params[i].unsafeGetTensorImpl());
        auto& sl = static_cast<torch::optim::AdamWParamState&>(*lib.opt->state().at(key_l));
        auto& sf = static_cast<torch::optim::AdamWParamState&>(*fused.opt->state().at(key_f));
        EXPECT_EQ(sf.step(), sl.step()) << "param " << i;
        EXPECT_TRUE(testing::all_close(sf.exp_avg(), sl.exp_avg(), tol, tol)) << "param " << i;
        EXPECT_TRUE(testing::all_close(sf.exp_avg_sq(), sl.exp_avg_sq(), tol, tol)) << "param " << i;
      }
    }
  }
}

// The checkpoint stores optimizer.save: a fused run's state saved and loaded into a fresh library
// optimiser continues as the fused one does, and a library-stepped state continues fused.
TEST(FusedAdamW, StateRoundTripsThroughTheLibraryFormatBothWays) {
  OptimizerRig a = make_rig(torch::kFloat, 2), b = make_rig(torch::kFloat, 2);
  for (int step = 0; step < 3; ++step) {
    set_grads(a, step, 1.0);
    adamw_fused_step(*a.opt, 1.0);
    set_grads(b, step, 1.0);
    b.opt->step();  // b: the library's steps
  }
  std::stringstream saved_a;
  {
    torch::serialize::OutputArchive ar;
    a.opt->save(ar);
    ar.save_to(saved_a);
  }
  OptimizerRig c = make_rig(torch::kFloat, 2);  // same initial weights; copy a's current ones
  {
    torch::NoGradGuard ng;
    for (size_t i = 0; i < c.params.size(); ++i) c.params[i].copy_(a.params[i]);
    torch::serialize::InputArchive ar;
    ar.load_from(saved_a);
    c.opt->load(ar);
  }
  set_grads(a, 3, 1.0);
  set_grads(c, 3, 1.0);
  adamw_fused_step(*a.opt, 0.5);
  for (auto& p : c.params)
    if (p.grad().defined()) p.grad().mul_(0.5);
  c.opt->step();
  for (size_t i = 0; i < a.params.size(); ++i)
    EXPECT_TRUE(testing::all_close(c.params[i], a.params[i], 2e-6, 2e-6)) << "param " << i;
  // b (library steps so far) goes on fused; a library copy of b goes on with the library.
  OptimizerRig d = make_rig(torch::kFloat, 2);
  {
    std::stringstream saved_b;
    torch::serialize::OutputArchive out;
    b.opt->save(out);
    out.save_to(saved_b);
    torch::NoGradGuard ng;
    for (size_t i = 0; i < d.params.size(); ++i) d.params[i].copy_(b.params[i]);
    torch::serialize::InputArchive in;
    in.load_from(saved_b);
    d.opt->load(in);
  }
  set_grads(b, 3, 1.0);
  set_grads(d, 3, 1.0);
  adamw_fused_step(*b.opt, 1.0);
  d.opt->step();
  for (size_t i = 0; i < b.params.size(); ++i)
    EXPECT_TRUE(testing::all_close(b.params[i], d.params[i], 2e-6, 2e-6)) << "param " << i;
}

// A strided parameter takes the library step (after the same scaling): still equal.
TEST(FusedAdamW, StridedParametersTakeTheLibraryStep) {
  OptimizerRig lib = make_rig(torch::kFloat, 4, /*strided=*/true), fused = make_rig(torch::kFloat, 4, true);
  ASSERT_FALSE(fused.params[0].is_contiguous());
  for (int step = 0; step < 3; ++step) {
    set_grads(lib, step, 2.0);
    set_grads(fused, step, 2.0);
    const double n = torch::nn::utils::clip_grad_norm_(lib.params, 0.7);
    lib.opt->step();
    adamw_fused_step(*fused.opt, grad_clip_coef(grad_norm(fused.params), 0.7));
    EXPECT_NEAR(grad_norm(fused.params), 0.7 * std::min(1.0, n / 0.7), 1e-4);  // the clipped gradients
    for (size_t i = 0; i < lib.params.size(); ++i)
      EXPECT_TRUE(testing::all_close(fused.params[i], lib.params[i], 2e-6, 2e-6)) << "step " << step << " param " << i;
  }
}

TEST(FusedAdamW, NormIsNonFiniteForABadGradientAndErrorsNameTheArgument) {
  OptimizerRig s = make_rig(torch::kFloat, 5);
  set_grads(s, 0, 1.0);
  EXPECT_EQ(grad_norm({torch::zeros({3})}), 0.0);  // no gradient: skipped
  s.params[1].grad().view(-1)[4] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(std::isfinite(grad_norm(s.params)));
  EXPECT_EQ(grad_clip_coef(0.5, 1.0), 1.0);
  EXPECT_NEAR(grad_clip_coef(4.0, 1.0), 1.0 / (4.0 + 1e-6), 1e-15);
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message([] { grad_clip_coef(1.0, 0.0); }).find("max_norm must be > 0, got 0"), std::string::npos);
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN()}) {
    const std::string m = message([&] { adamw_fused_step(*s.opt, bad); });
    EXPECT_NE(m.find("grad_scale must be finite and > 0, got"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace fused_adamw_test
}  // namespace mixlab
