// GradientReducer: the bucketed all-reduce started from autograd hooks gives every rank the sum of
// the ranks' gradients, in several buckets, for parameters that only some ranks (or none) used.
#include "mixlab/dist/gradient_reducer.h"

#include <gtest/gtest.h>

#include "mixlab/dist/data_parallel.h"
#include "mixlab/dist/launch.h"
#include "support/expect_error.h"
#include "support/ranks.h"

namespace gradient_reducer_test {

namespace {

using mixlab::DataParallel;
using mixlab::GradientReducer;
using mixlab::testing::env_for;
using mixlab::testing::on_ranks;
using mixlab::testing::randn_seeded;

// Four parameters: w1 and w2 every rank uses, `odd` only rank 1 uses, `idle` no rank uses.
struct Params {
  torch::Tensor w1, w2, odd, idle;
  std::vector<torch::Tensor> all() const { return {w1, w2, odd, idle}; }
};

Params make_params() {  // equal on every rank, as after DataParallel::broadcast
  auto p = [](at::IntArrayRef shape, uint64_t seed) {
    return randn_seeded(shape, seed, torch::kFloat64).requires_grad_(true);
  };
  return {p({5, 4}, 7), p({4, 3}, 8), p({3}, 9), p({2, 2}, 10)};
}

torch::Tensor input_of(int64_t rank) {
  return randn_seeded({6, 5}, 100 + static_cast<uint64_t>(rank), torch::kFloat64);
}

torch::Tensor loss_of(const Params& p, int64_t rank) {
  auto y = torch::tanh(input_of(rank).mm(p.w1)).mm(p.w2);
  if (rank == 1) y = y + p.odd;
  return y.pow(2).sum();
}

TEST(GradientReducer, SumsTheRanksGradientsInEveryBucket) {
  const int64_t port = mixlab::free_local_port();
  std::vector<Params> got(2);
  std::vector<int64_t> buckets(2), collectives(2);
  on_ranks(2, [&](int64_t r) {
    DataParallel dp(env_for(r, 2, port), std::chrono::seconds(30));
    Params p = make_params();
    // 96 bytes: w2 (12 doubles) and odd (3) and idle (4) and w1 (20) cannot share one bucket.
    GradientReducer reducer(dp, p.all(), 96);
    for (int step = 0; step < 2; ++step) {  // the second step runs on zeroed, defined gradients
      for (auto& t : p.all())
        if (t.grad().defined()) t.mutable_grad().zero_();
      reducer.begin();
      loss_of(p, r).backward();
      reducer.finish();
    }
    got[static_cast<size_t>(r)] = p;
    buckets[static_cast<size_t>(r)] = reducer.bucket_count();
    collectives[static_cast<size_t>(r)] = reducer.collectives();
  });
  // The reference: one process, the sum of the two ranks' losses.
  Params ref = make_params();
  (loss_of(ref, 0) + loss_of(ref, 1)).backward();
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_GE(buckets[r], 3);
    EXPECT_EQ(collectives[r], 2 * buckets[r]);
    EXPECT_TRUE(torch::allclose(got[r].w1.grad(), ref.w1.grad(), 1e-12, 1e-12)) << "rank " << r;
    EXPECT_TRUE(torch::allclose(got[r].w2.grad(), ref.w2.grad(), 1e-12, 1e-12)) << "rank " << r;
    // Rank 0 never used `odd`, yet it gets rank 1's gradient: the optimisers stay equal.
    ASSERT_TRUE(got[r].odd.grad().defined()) << "rank " << r;
    EXPECT_TRUE(torch::allclose(got[r].odd.grad(), ref.odd.grad(), 1e-12, 1e-12)) << "rank " << r;
    // No rank used `idle`: no gradient, as in one process.
    EXPECT_FALSE(got[r].idle.grad().defined()) << "rank " << r;
    for (const auto& [a, b] : {std::pair{got[r].w1, got[0].w1}, {got[r].w2, got[0].w2}, {got[r].odd, got[0].odd}})
      EXPECT_TRUE(torch::equal(a.grad(), b.grad())) << "the ranks' bits differ, rank " << r;
  }
}

TEST(GradientReducer, HooksAreInertOutsideAStepAndGoWithTheReducer) {
  const int64_t port = mixlab::free_local_port();
  on_ranks(2, [&](int64_t r) {
    DataParallel dp(env_for(r, 2, port), std::chrono::seconds(30));
    Params p = make_params();
    {
      GradientReducer reducer(dp, p.all(), 1 << 20);
      loss_of(p, r).backward();  // not armed: a plain local backward, no collective
      EXPECT_EQ(reducer.collectives(), 0);
      const auto local = p.w1.grad().clone();
      EXPECT_TRUE(torch::equal(p.w1.grad(), local));
      expect_error([&] { reducer.finish(); }, "finish() without begin()");
      reducer.begin();
      expect_error([&] { reducer.begin(); }, "begin() twice");
      for (auto& t : p.all())
        if (t.grad().defined()) t.mutable_grad().zero_();
      auto loss = loss_of(p, r);
      loss.backward({}, /*retain_graph=*/true);
      expect_error([&] { loss.backward(); }, "second gradient in one step");
      // Both ranks did the same: finish() still pairs their collectives.
      reducer.finish();
    }
    // The reducer is gone, and so are its hooks: a backward after it touches nothing freed.
    for (auto& t : p.all())
      if (t.grad().defined()) t.mutable_grad().zero_();
    loss_of(p, r).backward();
    EXPECT_TRUE(p.w1.grad().defined());
  });
}

TEST(GradientReducer, InvalidArguments) {
  const int64_t port = mixlab::free_local_port();
  DataParallel dp(env_for(0, 1, port), std::chrono::seconds(5));
  expect_error([&] { GradientReducer(dp, {torch::zeros({2}, torch::requires_grad())}, 0); },
               "bucket_bytes must be > 0, got 0");
}

}  // namespace

}  // namespace gradient_reducer_test
