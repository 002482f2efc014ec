// Row groups (mixlab/train/row_groups.h): a step's batch split by rows over threads gives the
// one-group gradient to rounding, the same bits for every thread count, follows parameters a
// checkpoint load replaced, leaves the generator alone, reports a group's error, and the trainer
// resumes bit-exactly with it; the config key's bad values are errors.
#include "mixlab/train/row_groups.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>

#include "mixlab/dist/data_parallel.h"
#include "mixlab/dist/launch.h"
#include "mixlab/registry/layer_specs.h"
#include "mixlab/train/trainer.h"
#include "support/ranks.h"
#include "train_test_util.h"

namespace mixlab {
namespace row_groups_test {
namespace {

TrainConfig small_config(const std::string& mixer) {
  TrainConfig c;
  c.task.name = "recall";
  c.task.vocab = 24;
  c.task.length = 24;
  c.task.pairs = 4;
  c.task.curriculum = false;
  c.mixer = mixer;
  c.d_model = 16;
  c.layers = 2;
  c.heads = 2;
  c.mlp_ratio = 2;
  c.steps = 6;
  c.warmup = 1;
  c.batch = 7;  // groups of 3 rows over 7: uneven on purpose
  c.eval_batches = 1;
  c.eval_batch = 4;
  c.seed = 5;
  return c;
}

struct StepSetup {
  TrainConfig config;
  MixerFactory factory;
  std::shared_ptr<DecoderModel> model;
  Batch batch;
};

StepSetup make_setup(const std::string& mixer) {
  StepSetup s;
  s.config = small_config(mixer);
  s.factory = mixer_factory_from_spec(mixer, s.config.layers);
  torch::manual_seed(s.config.seed);
  s.model = std::make_shared<DecoderModel>(model_dims_for(s.config), s.factory);
  s.model->train();
  s.batch = task_train_batch(s.config.task, s.config.batch, 0, s.config.steps, s.config.seed);
  return s;
}

RowGroups::ModelFactory replica_maker(const StepSetup& s) {
  return [&s] { return std::make_shared<DecoderModel>(model_dims_for(s.config), s.factory); };
}

std::vector<torch::Tensor> grads_of(DecoderModel& m) {
  std::vector<torch::Tensor> g;
  for (auto& p : m.parameters()) g.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  return g;
}

void clear_grads(DecoderModel& m) {
  for (auto& p : m.parameters()) p.mutable_grad().reset();
}

// The gradient and score of the whole batch in one group: what the trainer computes without rows
// groups.
BatchScore one_group(StepSetup& s) {
  clear_grads(*s.model);
  BatchScore score = batch_score(s.model->forward(s.batch.tokens), s.batch);
  score.loss.backward();
  return score;
}

TEST(RowGroupRange, SplitsTheRowsInOrderWithTheRemainderFirst) {
  EXPECT_EQ(row_group_range(7, 3, 0), std::make_pair(int64_t{0}, int64_t{3}));
  EXPECT_EQ(row_group_range(7, 3, 1), std::make_pair(int64_t{3}, int64_t{2}));
  EXPECT_EQ(row_group_range(7, 3, 2), std::make_pair(int64_t{5}, int64_t{2}));
  for (int64_t rows : {1, 5, 16, 33})
    for (int64_t groups = 1; groups <= rows && groups <= 9; ++groups) {
      int64_t next = 0;
      for (int64_t g = 0; g < groups; ++g) {
        const auto [begin, count] = row_group_range(rows, groups, g);
        EXPECT_EQ(begin, next);
        EXPECT_GE(count, rows / groups);
        EXPECT_LE(count, rows / groups + 1);
        next = begin + count;
      }
      EXPECT_EQ(next, rows);
    }
  expect_error_contains([] { row_group_range(3, 4, 0); }, "needs 1 <= groups <= rows");
  expect_error_contains([] { row_group_range(8, 2, 2); }, "group 2 of 2");
}

TEST(RowGroups, GradientIsTheOneGroupGradientToRounding) {
  at::set_num_threads(1);
  for (const std::string mixer : {"attention", "gla", "resolvent:pow2", "brl:w=4:m=2", "ssm"}) {
    SCOPED_TRACE(mixer);
    StepSetup s = make_setup(mixer);
    const BatchScore want = one_group(s);
    const auto want_grads = grads_of(*s.model);
    clear_grads(*s.model);
    RowGroups rg(s.model, replica_maker(s), 3, 2);
    EXPECT_EQ(rg.groups(), 3);
    EXPECT_EQ(rg.threads(), 2);
    const BatchScore got = rg.forward_backward(s.batch);
    EXPECT_NEAR(got.loss.item<double>(), want.loss.item<double>(), 1e-5);
    EXPECT_EQ(got.correct_tokens, want.correct_tokens);
    EXPECT_EQ(got.answer_tokens, want.answer_tokens);
    EXPECT_EQ(got.correct_answers, want.correct_answers);
    EXPECT_EQ(got.answers, want.answers);
    EXPECT_EQ(got.batch_tokens, want.batch_tokens);
    const auto got_grads = grads_of(*s.model);
    ASSERT_EQ(got_grads.size(), want_grads.size());
    for (size_t i = 0; i < got_grads.size(); ++i) {
      ASSERT_EQ(got_grads[i].defined(), want_grads[i].defined()) << "parameter " << i;
      if (want_grads[i].defined())
        EXPECT_TRUE(torch::allclose(got_grads[i], want_grads[i], 1e-4, 1e-6)) << "parameter " << i;
    }
  }
}

// The groups fix the arithmetic; the threads only run them.
TEST(RowGroups, SameBitsForEveryThreadCount) {
  at::set_num_threads(1);
  StepSetup s = make_setup("attention");
  std::vector<std::vector<torch::Tensor>> runs;
  std::vector<double> losses;
  for (int64_t threads : {1, 2, 4}) {
    RowGroups rg(s.model, replica_maker(s), 4, threads);
    EXPECT_EQ(rg.threads(), threads);
    for (int rep = 0; rep < 2; ++rep) {
      losses.push_back(rg.forward_backward(s.batch).loss.item<double>());
      runs.push_back(grads_of(*s.model));
    }
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    EXPECT_EQ(losses[r], losses[0]);
    for (size_t i = 0; i < runs[0].size(); ++i) EXPECT_TRUE(torch::equal(runs[r][i], runs[0][i])) << r << " " << i;
  }
}

// torch::load replaces a parameter's storage (set_); the replicas must follow, not keep training
// the old weights.
TEST(RowGroups, FollowsParametersWhoseStorageWasReplaced) {
  at::set_num_threads(1);
  StepSetup s = make_setup("attention");
  RowGroups rg(s.model, replica_maker(s), 2, 2);
  rg.forward_backward(s.batch);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : s.model->parameters()) p.set_(p.detach().clone().mul_(0.5));
  }
  const BatchScore got = rg.forward_backward(s.batch);
  const auto got_grads = grads_of(*s.model);
  const BatchScore want = one_group(s);
  EXPECT_NEAR(got.loss.item<double>(), want.loss.item<double>(), 1e-5);
  const auto want_grads = grads_of(*s.model);
  for (size_t i = 0; i < want_grads.size(); ++i)
    EXPECT_TRUE(torch::allclose(got_grads[i], want_grads[i], 1e-4, 1e-6)) << "parameter " << i;
}

TEST(RowGroups, BuildingReplicasLeavesTheGlobalGeneratorAlone) {
  StepSetup s = make_setup("gla");
  torch::manual_seed(77);
  const auto before = torch::rand({4});
  torch::manual_seed(77);
  RowGroups rg(s.model, replica_maker(s), 3, 1);
  EXPECT_TRUE(torch::equal(torch::rand({4}), before));
}

TEST(RowGroups, AGroupsErrorReachesTheCaller) {
  at::set_num_threads(1);
  StepSetup s = make_setup("attention");
  RowGroups rg(s.model, replica_maker(s), 2, 2);
  Batch bad = s.batch;
  bad.tokens = bad.tokens.clone();
  bad.tokens[6][0] = 1000;  // out of the vocabulary, in the second group's rows
  EXPECT_ANY_THROW(rg.forward_backward(bad));
  // The groups are usable afterwards.
  EXPECT_NO_THROW(rg.forward_backward(s.batch));
  expect_error_contains([&] { rg.forward_backward(batch_rows(s.batch, 0, 1)); }, "2 row groups need at least 2 rows");
}

TEST(RowGroups, ReplicaOfAnotherModelIsRefused) {
  StepSetup s = make_setup("attention");
  StepSetup other = make_setup("gla");
  expect_error_contains([&] { RowGroups rg(s.model, replica_maker(other), 2, 1); },
                        "the replica's tensors are not the model's");
  expect_error_contains([&] { RowGroups rg(s.model, replica_maker(s), 1, 1); }, "groups must be in [2, 256]");
}

// The trainer's own check, for programs that call set_data_parallel without the launcher (which
// refuses the same key earlier, tests/cli/dist_cli_test.cpp): two ranks as threads.
TEST(RowGroups, TrainerUnderDataParallelRefusesGroupsAndKeepsOne) {
  at::set_num_threads(2);
  const int64_t port = mixlab::free_local_port();
  std::mutex building;  // the ranks' Trainers seed and draw from the one global generator
  mixlab::testing::on_ranks(2, [&](int64_t rank) {
    mixlab::DataParallel dp(mixlab::testing::env_for(rank, 2, port), std::chrono::seconds(30));
    TrainConfig c = small_config("attention");
    c.batch = 8;  // divisible by the 2 processes
    c.row_groups = 2;
    std::unique_ptr<Trainer> grouped, automatic;
    {
      std::lock_guard<std::mutex> lock(building);
      grouped = std::make_unique<Trainer>(c);
      c.row_groups = 0;
      automatic = std::make_unique<Trainer>(c);
    }
    expect_error_contains([&] { grouped->set_data_parallel(&dp); },
                          {"key 'row_groups' = 2", "data parallel (2 processes)", "leave it at 0 or 1"});
    EXPECT_EQ(automatic->row_groups(), 2);  // alone: one group per intra-op thread
    automatic->set_data_parallel(&dp);
    EXPECT_EQ(automatic->row_groups(), 1);  // each process trains its rows on its own threads
  });
  at::set_num_threads(1);
}

TEST(RowGroups, TrainerResolvesTheKeyAndResumesBitExact) {
  at::set_num_threads(1);
  TrainConfig c = small_config("attention");
  EXPECT_EQ(Trainer(c).row_groups(), 1);  // 0: one per intra-op thread
  at::set_num_threads(3);
  EXPECT_EQ(Trainer(c).row_groups(), 3);
  c.batch = 2;
  EXPECT_EQ(Trainer(c).row_groups(), 2);  // at most one group per row
  at::set_num_threads(1);
  c = small_config("attention");
  c.row_groups = 3;
  EXPECT_EQ(Trainer(c).row_groups(), 3);

  TrainOptions quiet;
  quiet.progress = false;
  Trainer straight(c);
  straight.run(quiet);
  const std::string ckpt = ::testing::TempDir() + "mixlab_row_groups_resume.ckpt";
  Trainer first(c);
  TrainOptions o = quiet;
  o.checkpoint_path = ckpt;
  o.until = c.steps / 2;
  first.run(o);
  Trainer second(c);
  TrainOptions r = quiet;
  r.resume_path = ckpt;
  EXPECT_EQ(second.run(r).step, c.steps);
  const auto a = straight.model().parameters(), b = second.model().parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
  // Without groups the run differs by rounding only.
  c.row_groups = 1;
  Trainer plain(c);
  plain.run(quiet);
  const auto p = plain.model().parameters();
  bool all_equal = true;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a[i], p[i], 1e-3, 1e-3)) << "parameter " << i;
    all_equal = all_equal && torch::equal(a[i], p[i]);
  }
  EXPECT_FALSE(all_equal) << "the groups ran: their sums round differently somewhere";
  std::remove(ckpt.c_str());
}

TEST(RowGroups, ConfigKeyIsChecked) {
  nlohmann::json j = {{"batch", 8}};
  j["row_groups"] = -1;
  expect_error_contains([&] { config_from_json(j, "t.json"); }, {"row_groups", ">= 0"});
  j["row_groups"] = 257;
  expect_error_contains([&] { config_from_json(j, "t.json"); }, {"row_groups", "[1, 256]", "257"});
  j["row_groups"] = 9;
  expect_error_contains([&] { config_from_json(j, "t.json"); }, {"row_groups", "at least one row per group", "8"});
  j["row_groups"] = "2";
  expect_error_contains([&] { config_from_json(j, "t.json"); }, {"row_groups", "integer"});
  j["row_groups"] = 2;
  const TrainConfig c = config_from_json(j, "t.json");
  EXPECT_EQ(c.row_groups, 2);
  EXPECT_EQ(config_to_json(c).at("row_groups"), 2);
  EXPECT_FALSE(config_to_json(config_from_json(nlohmann::json::object(), "t.json")).contains("row_groups"));
}

}  // namespace
}  // namespace row_groups_test
}  // namespace mixlab
