// Trainer: really learns (attention on copy), checkpoint round trip, bit-exact resume, and
// errors for missing / truncated / corrupt / mismatched checkpoints.
#include "mixlab/train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "mixlab/core/checksum.h"
#include "mixlab/train/checkpoint.h"
#include "mixlab_test_paths.h"
#include "train_test_util.h"

namespace mixlab {
namespace trainer_test {
namespace {

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "mixlab_train_" + name; }

TrainConfig tiny_config() {
  TrainConfig c;
  c.task.name = "copy";
  c.task.vocab = 12;
  c.task.length = 6;
  c.d_model = 16;
  c.layers = 1;
  c.heads = 2;
  c.mlp_ratio = 2;
  c.steps = 8;
  c.warmup = 2;
  c.batch = 4;
  c.eval_batches = 1;
  c.eval_batch = 4;
  c.seed = 3;
  return c;
}

TrainOptions quiet() {
  TrainOptions o;
  o.progress = false;
  return o;
}

std::vector<torch::Tensor> params_of(Trainer& t) {
  std::vector<torch::Tensor> v;
  for (auto& p : t.model().parameters()) v.push_back(p.detach().clone());
  return v;
}

// Trains `t` for `steps` steps and writes its checkpoint to temp_path(name); returns the path.
std::string train_and_save(Trainer& t, int64_t steps, const std::string& name) {
  TrainOptions o = quiet();
  o.until = steps;
  t.run(o);
  const std::string ckpt = temp_path(name);
  t.checkpoint_save(ckpt);
  return ckpt;
}

void expect_bit_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
}

// The acceptance test of the trainer: attention learns to copy 8 tokens.
TEST(TrainTrainer, AttentionLearnsCopy) {
  at::set_num_threads(1);
  TrainConfig c;
  c.task.name = "copy";
  c.task.vocab = 16;
  c.task.length = 8;
  c.task.curriculum = false;
  c.mixer = "attention";
  c.d_model = 32;
  c.layers = 2;
  c.heads = 2;
  c.steps = 500;
  c.warmup = 20;
  c.batch = 64;
  c.lr = 3e-3;
  c.eval_batches = 4;
  c.eval_batch = 64;
  c.seed = 0;
  Trainer t(c);
  const TrainResult r = t.run(quiet());
  EXPECT_EQ(r.step, c.steps);
  EXPECT_GE(r.eval.token_acc, 0.9) << "loss " << r.eval.loss;
  EXPECT_GT(r.tokens_per_s, 0);
}

// make_adamw, the one place the trainer (and bench_train) build the optimiser: weight decay on
// matrices only, in two groups with the config's rate and betas.
TEST(TrainTrainer, OptimiserDecaysMatricesOnly) {
  TrainConfig c;
  c.lr = 2e-3, c.beta1 = 0.8, c.beta2 = 0.9, c.weight_decay = 0.25;
  const std::vector<torch::Tensor> params = {torch::zeros({3, 4}), torch::zeros({4}), torch::zeros({2, 2, 2}),
                                             torch::zeros({1})};
  const auto opt = make_adamw(c, params);
  ASSERT_EQ(opt->param_groups().size(), 2u);
  const auto& decay = opt->param_groups()[0];
  const auto& none = opt->param_groups()[1];
  ASSERT_EQ(decay.params().size(), 2u);
  EXPECT_TRUE(decay.params()[0].is_same(params[0]));
  EXPECT_TRUE(decay.params()[1].is_same(params[2]));
  ASSERT_EQ(none.params().size(), 2u);
  const auto& o = static_cast<const torch::optim::AdamWOptions&>(decay.options());
  EXPECT_EQ(o.lr(), 2e-3);
  EXPECT_EQ(std::get<0>(o.betas()), 0.8);
  EXPECT_EQ(std::get<1>(o.betas()), 0.9);
  EXPECT_EQ(o.weight_decay(), 0.25);
  EXPECT_EQ(static_cast<const torch::optim::AdamWOptions&>(none.options()).weight_decay(), 0.0);
  // Only matrices: one group.
  EXPECT_EQ(make_adamw(c, {torch::zeros({2, 2})})->param_groups().size(), 1u);
}

TEST(TrainTrainer, ScoreCountsAnswers) {
  TaskSpec s;
  s.vocab = 8;
  s.length = 3;
  const Batch b = task_generate(s, 2, 3, 0, 1);
  // Logits that put all mass on the target everywhere except one answer token of row 1.
  auto logits = torch::full({2, 7, 8}, -10.0);
  logits.scatter_(2, b.targets.unsqueeze(2), 10.0);
  logits[1][5][b.targets[1][5].item<int64_t>()] = -20.0;
  const BatchScore sc = batch_score(logits, b);
  EXPECT_EQ(sc.answer_tokens, 6);
  EXPECT_EQ(sc.correct_tokens, 5);
  EXPECT_EQ(sc.answers, 2);
  EXPECT_EQ(sc.correct_answers, 1);
  EXPECT_EQ(sc.batch_tokens, 14);
}

// Multihop link labels are scored tokens but belong to no answer: a wrong label lowers token
// accuracy and leaves whole-answer (query) accuracy alone.
TEST(TrainTrainer, ScoreKeepsLinkLabelsOutOfAnswers) {
  const Batch b = golden_multihop_batch();
  ASSERT_EQ(b.answer[0][10].item<int64_t>(), -1);
  ASSERT_EQ(b.mask[0][10].item<float>(), 1.0f);
  auto logits = torch::full({1, 20, 14}, -10.0);
  logits.scatter_(2, b.targets.unsqueeze(2), 10.0);
  logits[0][10][b.targets[0][10].item<int64_t>()] = -20.0;  // the link label wrong
  BatchScore sc = batch_score(logits, b);
  EXPECT_EQ(sc.answer_tokens, 6);  // the label + 5 queries
  EXPECT_EQ(sc.correct_tokens, 5);
  EXPECT_EQ(sc.answers, 5);
  EXPECT_EQ(sc.correct_answers, 5);
  EXPECT_EQ(sc.chains, 2);  // the two queries for 4 (4 -> 5 -> 9)
  EXPECT_EQ(sc.correct_chains, 2);
  EXPECT_EQ(sc.hop_queries, (std::vector<int64_t>{3, 2}));  // by links: 3 direct, 2 one-link
  EXPECT_EQ(sc.hop_correct, (std::vector<int64_t>{3, 2}));
  logits[0][15][b.targets[0][15].item<int64_t>()] = -20.0;  // and one one-link query wrong
  sc = batch_score(logits, b);
  EXPECT_EQ(sc.correct_tokens, 4);
  EXPECT_EQ(sc.correct_answers, 4);
  EXPECT_EQ(sc.correct_chains, 1);
  EXPECT_EQ(sc.hop_correct, (std::vector<int64_t>{3, 1}));
}

TEST(TrainTrainer, ResumeIsBitExact) {
  at::set_num_threads(1);
  const TrainConfig c = tiny_config();
  Trainer straight(c, test_mixer_factory());
  straight.run(quiet());

  const std::string ckpt = temp_path("resume.ckpt");
  Trainer first(c, test_mixer_factory());
  TrainOptions o = quiet();
  o.checkpoint_path = ckpt;
  o.until = c.steps / 2;
  EXPECT_EQ(first.run(o).step, c.steps / 2);

  Trainer second(c, test_mixer_factory());
  TrainOptions r = quiet();
  r.resume_path = ckpt;
  EXPECT_EQ(second.run(r).step, c.steps);
  expect_bit_equal(params_of(straight), params_of(second));
  // A later run of the first trainer object continues in memory the same way.
  first.run(quiet());
  expect_bit_equal(params_of(straight), params_of(first));
  std::remove(ckpt.c_str());
}

// stop_at ends a run at the first eval_every evaluation whose validation answer accuracy (the
// split apart from the reported one) reaches it, with the weights of an uninterrupted run at that
// step; a bar never reached changes nothing.
TEST(TrainTrainer, StopAtEndsTheRunAtTheFirstEvaluationReachingIt) {
  TrainConfig c = tiny_config();
  c.task.vocab = 8;   // 4 content tokens
  c.task.length = 1;  // one-token answers: copying one token is learned in a few steps
  c.task.curriculum = false;
  c.lr = 1e-2;
  c.steps = 20;
  c.eval_batch = 64;
  c.eval_every = 5;
  c.log_every = 50;  // no log window ends before the stop
  // The probe: the accuracy at each evaluation of an uninterrupted run.
  Trainer probe(c);
  std::vector<double> acc;
  for (int64_t until = 5; until <= 15; until += 5) {
    TrainOptions o = quiet();
    o.until = until;
    probe.run(o);
    EXPECT_EQ(probe.stop_split(), EvalSplit::kValid);
    acc.push_back(probe.stop_metric(probe.evaluate(EvalSplit::kValid)));
  }
  ASSERT_GT(acc[1], 0.0) << "seed 3: the step-10 accuracy is the bar the test stops at";
  const int64_t expected = acc[0] >= acc[1] ? 5 : 10;  // the first evaluation reaching it
  Trainer at(c);
  TrainOptions o = quiet();
  o.until = expected;
  const TrainResult ar = at.run(o);

  TrainConfig stopping = c;
  stopping.stop_at = acc[1];
  Trainer t(stopping);
  const TrainResult r = t.run(quiet());
  EXPECT_TRUE(r.stopped_early);
  EXPECT_EQ(r.step, expected);
  expect_bit_equal(params_of(t), params_of(at));
  // train_loss is the window in progress at the stop (log_every 50 > the stop step), as the run
  // that ended there reports it; it was 0 (no window reported yet).
  ASSERT_GT(c.log_every, expected);
  EXPECT_GT(r.last_loss, 0.0);
  EXPECT_DOUBLE_EQ(r.last_loss, ar.last_loss);
  EXPECT_DOUBLE_EQ(r.last_acc, ar.last_acc);

  TrainConfig never = c;
  never.stop_at = 1.0;
  Trainer full(never);
  const TrainResult f = full.run(quiet());
  if (std::max({acc[0], acc[1], acc[2]}) < 1.0) {
    EXPECT_FALSE(f.stopped_early);
    EXPECT_EQ(f.step, c.steps);
  }
}

// The metrics lines of a file without the wall-clock fields (tokens_per_s, seconds), which differ
// between any two runs.
std::vector<nlohmann::json> metrics_without_timing(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    j.erase("tokens_per_s");
    j.erase("seconds");
    lines.push_back(j);
  }
  return lines;
}

// train_loss (TrainResult::last_loss, last_acc) is the mean over the last log window. A resumed
// run used to start an empty window at the checkpoint, so it averaged only the steps since the
// resume (and a resume at the last step reported 0); the checkpoint now carries the window.
TEST(TrainTrainer, AResumedRunReportsTheTrainLossWindowOfAnUninterruptedOne) {
  at::set_num_threads(1);
  TrainConfig c = tiny_config();
  c.log_every = 4;  // windows: steps 1-4, 5-8
  Trainer straight(c, test_mixer_factory());
  TrainOptions so = quiet();
  so.checkpoint_path = temp_path("window_straight.ckpt");
  so.metrics_path = temp_path("window_straight.jsonl");
  const TrainResult want = straight.run(so);
  ASSERT_EQ(want.step, c.steps);

  const std::string ckpt = temp_path("window.ckpt");
  Trainer first(c, test_mixer_factory());
  TrainOptions o = quiet();
  o.checkpoint_path = ckpt;
  o.metrics_path = temp_path("window.jsonl");
  o.until = 6;  // inside the second window
  first.run(o);
  Trainer second(c, test_mixer_factory());
  o.resume_path = ckpt;
  o.until = 0;
  const TrainResult got = second.run(o);
  EXPECT_EQ(got.step, c.steps);
  EXPECT_EQ(got.last_loss, want.last_loss);  // the mean of steps 5-8, not of 7-8
  EXPECT_EQ(got.last_acc, want.last_acc);
  // The same lines, but for the two that the run to --until 6 ended with (its progress line of
  // steps 5-6 and its final evaluation; the window itself went on in the checkpoint).
  std::vector<nlohmann::json> resumed_lines;
  for (const auto& j : metrics_without_timing(o.metrics_path))
    if (j["step"] != 6) resumed_lines.push_back(j);
  EXPECT_EQ(resumed_lines, metrics_without_timing(so.metrics_path));

  // Resumed at its last step: no step is taken, the last window is still the one reported.
  Trainer again(c, test_mixer_factory());
  TrainOptions a = quiet();
  a.resume_path = so.checkpoint_path;
  const TrainResult last = again.run(a);
  EXPECT_EQ(last.step, c.steps);
  EXPECT_EQ(last.last_loss, want.last_loss);
  EXPECT_EQ(last.last_acc, want.last_acc);
  for (const auto& p : {so.checkpoint_path, so.metrics_path, ckpt, o.metrics_path}) std::remove(p.c_str());
}

// A mixer whose output is NaN in training mode only: every training step is non-finite (and
// skipped under --skip-nonfinite), while the evaluations stay finite.
class NanWhileTrainingMixer : public CumulativeMeanMixer {
 public:
  using CumulativeMeanMixer::CumulativeMeanMixer;
  torch::Tensor forward(const torch::Tensor& x) override {
    const torch::Tensor y = CumulativeMeanMixer::forward(x);
    return is_training() ? y * std::numeric_limits<double>::quiet_NaN() : y;
  }
};

// --skip-nonfinite N is a budget for the whole run: a resumed run used to start counting from 0
// again (so a run resumed often could skip without end) and reported only its own skips in
// skipped_steps. The count is now in the checkpoint.
TEST(TrainTrainer, TheSkipNonfiniteBudgetSpansAResume) {
  const TrainConfig c = tiny_config();  // 8 steps, all non-finite with this mixer
  const MixerFactory nan_factory = [](const MixerDims& d) { return std::make_shared<NanWhileTrainingMixer>(d); };
  {
    Trainer straight(c, nan_factory);
    TrainOptions o = quiet();
    o.skip_nonfinite = c.steps - 1;
    expect_error_contains([&] { straight.run(o); }, "non-finite loss at step 8");
  }
  const std::string ckpt = temp_path("skip_budget.ckpt");
  Trainer first(c, nan_factory);
  TrainOptions o = quiet();
  o.checkpoint_path = ckpt;
  o.skip_nonfinite = c.steps - 1;
  o.until = 4;
  EXPECT_EQ(first.run(o).skipped_steps, 4);
  // The same budget after the resume: 3 more skips, then step 8 stops the run as it stopped the
  // uninterrupted one.
  Trainer second(c, nan_factory);
  o.resume_path = ckpt;
  o.until = 0;
  o.checkpoint_path.clear();
  expect_error_contains([&] { second.run(o); }, "non-finite loss at step 8");
  // A budget that covers every step: skipped_steps counts the steps before the resume too.
  Trainer third(c, nan_factory);
  o.skip_nonfinite = 100;
  EXPECT_EQ(third.run(o).skipped_steps, c.steps);
  std::remove(ckpt.c_str());
}

// A run that stop_at stopped keeps its decision in the checkpoint: resuming it (after a kill
// before its final outputs were written, or afterwards) trains no further step, reports the same
// stopped step, and leaves metrics.jsonl as the uninterrupted run wrote it. Another stop_at on
// the resume is a new decision: the run trains on.
TEST(TrainTrainer, AStoppedRunStaysStoppedOnResume) {
  at::set_num_threads(1);
  TrainConfig c = tiny_config();
  c.task.vocab = 8;
  c.task.length = 1;
  c.task.curriculum = false;
  c.steps = 20;
  c.eval_every = 5;
  c.eval_batch = 64;
  c.stop_at = 1e-6;  // any right answer stops the run at the first evaluation
  const std::string ckpt = temp_path("stopped.ckpt");
  Trainer t(c, test_mixer_factory());
  TrainOptions o = quiet();
  o.checkpoint_path = ckpt;
  o.metrics_path = temp_path("stopped.jsonl");
  const TrainResult r = t.run(o);
  ASSERT_TRUE(r.stopped_early);
  ASSERT_LT(r.step, c.steps);
  const auto metrics = metrics_without_timing(o.metrics_path);

  Trainer resumed(c, test_mixer_factory());
  o.resume_path = ckpt;
  const TrainResult again = resumed.run(o);
  EXPECT_TRUE(again.stopped_early);
  EXPECT_EQ(again.step, r.step);
  EXPECT_EQ(resumed.step(), r.step);
  EXPECT_EQ(again.last_loss, r.last_loss);
  EXPECT_EQ(again.eval.loss, r.eval.loss);
  expect_bit_equal(params_of(resumed), params_of(t));
  EXPECT_EQ(metrics_without_timing(o.metrics_path), metrics);  // the final evaluation once

  TrainConfig other = c;
  other.stop_at = 1.0;
  Trainer on(other, test_mixer_factory());
  TrainOptions p = quiet();
  p.resume_path = ckpt;
  const TrainResult past = on.run(p);
  EXPECT_GT(past.step, r.step);
  for (const auto& path : {ckpt, o.metrics_path}) std::remove(path.c_str());
}

// The loop state is checked against the checkpoint's step when it is read, naming the entry and
// the key.
TEST(TrainTrainer, ATrainStateThatDisagreesWithItsStepIsRefused) {
  const TrainConfig c = tiny_config();
  Trainer t(c, test_mixer_factory());
  const std::string path = temp_path("train_state.ckpt");
  auto write = [&](const TrainLoopState& loop) {
    checkpoint_write(path, c, 3, t.model(), *std::make_unique<torch::optim::AdamW>(t.model().parameters()), loop);
  };
  TrainLoopState loop;
  loop.skipped = 4;
  write(loop);
  expect_error_contains([&] { checkpoint_read(path); },
                        {path, "entry 'train_state'", "key 'skipped' must be an integer in [0, 3], got 4"});
  loop = {};
  loop.stopped_step = 2;
  loop.stop_at = 0.5;
  write(loop);
  expect_error_contains([&] { checkpoint_read(path); },
                        {path, "key 'stopped_step' is 2; expected 0 (not stopped) or the checkpoint's step 3"});
  loop.stopped_step = 3;
  write(loop);
  EXPECT_EQ(checkpoint_read(path).loop.stopped_step, 3);
  std::remove(path.c_str());
}

// A hybrid stack (a per-layer mixer list, mixlab/registry/layer_specs.h) through the registry's
// factory resumes bit-exactly like a single mixer, and its checkpoint is refused by a stack of
// the same members in another order.
TEST(TrainTrainer, HybridResumeIsBitExact) {
  at::set_num_threads(1);
  TrainConfig c = tiny_config();
  c.layers = 2;
  c.mixer = "ssm:4|attention";
  Trainer straight(c);
  EXPECT_EQ(straight.model().blocks()[0]->mixer().spec(), "ssm:4");
  EXPECT_EQ(straight.model().blocks()[1]->mixer().spec(), "attention");
  straight.run(quiet());

  const std::string ckpt = temp_path("hybrid_resume.ckpt");
  Trainer first(c);
  TrainOptions o = quiet();
  o.checkpoint_path = ckpt;
  o.until = c.steps / 2;
  EXPECT_EQ(first.run(o).step, c.steps / 2);
  EXPECT_EQ(checkpoint_read_config(ckpt).mixer, "ssm:4|attention");

  Trainer second(c);
  TrainOptions r = quiet();
  r.resume_path = ckpt;
  EXPECT_EQ(second.run(r).step, c.steps);
  expect_bit_equal(params_of(straight), params_of(second));

  TrainConfig swapped = c;
  swapped.mixer = "attention|ssm:4";
  Trainer other(swapped);
  expect_error_contains([&] { other.checkpoint_load(ckpt); },
                        {"different config", "key 'mixer' is \"ssm:4|attention\" in the checkpoint"});
  std::remove(ckpt.c_str());
}

TEST(TrainTrainer, CheckpointRoundTrip) {
  const TrainConfig c = tiny_config();
  Trainer a(c, test_mixer_factory());
  const std::string ckpt = train_and_save(a, 3, "roundtrip.ckpt");
  EXPECT_FALSE(std::ifstream(ckpt + ".tmp").good());  // the temporary was renamed away
  const TrainConfig stored = checkpoint_read_config(ckpt);
  EXPECT_EQ(config_to_json(stored), config_to_json(c));
  Trainer b(c, test_mixer_factory());
  b.checkpoint_load(ckpt);
  EXPECT_EQ(b.step(), 3);
  expect_bit_equal(params_of(a), params_of(b));

  const EvalResult ea = a.evaluate(), eb = b.evaluate();
  EXPECT_EQ(ea.loss, eb.loss);
  EXPECT_EQ(ea.token_acc, eb.token_acc);
  std::remove(ckpt.c_str());
}

// After a load the optimiser holds the last step's scheduled lr, as the run that wrote the
// checkpoint did: a fresh optimiser holds the config's lr, so a checkpoint saved right after a
// resume at the last step differed from the uninterrupted run's (scripts.soak_short found it).
TEST(TrainTrainer, ALoadedOptimiserHoldsTheLastStepsLearningRate) {
  const TrainConfig c = tiny_config();
  Trainer a(c, test_mixer_factory());
  const std::string ckpt = train_and_save(a, 5, "lr.ckpt");
  ASSERT_NE(config_lr_at(c, 4), c.lr);  // past warmup, on the cosine
  EXPECT_EQ(a.optimizer_lr(), config_lr_at(c, 4));
  Trainer b(c, test_mixer_factory());
  EXPECT_EQ(b.optimizer_lr(), c.lr);
  b.checkpoint_load(ckpt);
  EXPECT_EQ(b.optimizer_lr(), a.optimizer_lr());
  std::remove(ckpt.c_str());
}

// --init-from: another run's weights start a new run (other task length, steps, lr) with a fresh
// optimiser at step 0; the result does not depend on the global generator the scratch model used.
TEST(TrainTrainer, InitWeightsStartsANewRunFromAnotherRunsWeights) {
  at::set_num_threads(1);
  const TrainConfig c = tiny_config();
  Trainer source(c, test_mixer_factory());
  const std::string ckpt = train_and_save(source, 3, "init_from.ckpt");

  TrainConfig longer = c;
  longer.task.length = 9;
  longer.steps = 5;
  longer.lr = 1e-3;
  longer.seed = 11;
  const LoadedCheckpoint loaded = checkpoint_read(ckpt);
  Trainer a(longer, test_mixer_factory());
  const torch::Tensor rng_before = at::detail::getDefaultCPUGenerator().get_state();
  a.init_weights(loaded);
  EXPECT_TRUE(torch::equal(rng_before, at::detail::getDefaultCPUGenerator().get_state()));
  EXPECT_EQ(a.step(), 0);
  expect_bit_equal(params_of(source), params_of(a));
  EXPECT_EQ(a.run(quiet()).step, 5);  // all of its own steps, from 0

  Trainer b(longer, test_mixer_factory());
  b.init_weights(loaded);
  b.run(quiet());
  expect_bit_equal(params_of(a), params_of(b));  // deterministic
  Trainer fresh(longer, test_mixer_factory());
  fresh.run(quiet());
  EXPECT_FALSE(torch::equal(params_of(fresh)[0], params_of(a)[0]));  // the weights did start it
  std::remove(ckpt.c_str());
}

TEST(TrainTrainer, InitWeightsErrorsNameTheKeyOrTensor) {
  TrainConfig c = tiny_config();
  c.mixer = "toeplitz";  // position tables sized by max_len: same keys, other shapes
  const std::string ckpt = temp_path("init_from_errors.ckpt");
  Trainer(c).checkpoint_save(ckpt);
  const LoadedCheckpoint loaded = checkpoint_read(ckpt);

  TrainConfig wider = c;
  wider.d_model = 32;
  Trainer w(wider);
  expect_error_contains([&] { w.init_weights(loaded); },
                        {ckpt, "its weights cannot start this model", "key 'd_model' is 16 in the checkpoint but 32"});
  TrainConfig other_mixer = c;
  other_mixer.mixer = "attention";
  Trainer m(other_mixer);
  expect_error_contains([&] { m.init_weights(loaded); }, "key 'mixer' is \"toeplitz\" in the checkpoint");

  TrainConfig longer = c;
  longer.task.length = 12;  // a longer toeplitz kernel table
  Trainer l(longer);
  const std::vector<torch::Tensor> before = params_of(l);
  expect_error_contains([&] { l.init_weights(loaded); }, {ckpt, "tensor '", "has shape", "but this model's is"});
  expect_bit_equal(before, params_of(l));  // refused before any tensor changed
  std::remove(ckpt.c_str());
}

TEST(TrainTrainer, CheckpointErrors) {
  const TrainConfig c = tiny_config();
  const std::string good = temp_path("good.ckpt");
  {
    Trainer a(c, test_mixer_factory());
    a.checkpoint_save(good);
  }
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 100u);
  Trainer t(c, test_mixer_factory());

  const std::string missing = temp_path("missing.ckpt");
  expect_error_contains([&] { t.checkpoint_load(missing); }, {missing, "cannot open the file"});

  const std::string truncated = temp_path("truncated.ckpt");
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_error_contains([&] { t.checkpoint_load(truncated); }, {truncated, "truncated or corrupt"});

  const std::string corrupt = temp_path("corrupt.ckpt");
  std::ofstream(corrupt, std::ios::binary) << std::string(bytes.size(), 'x');
  expect_error_contains([&] { t.checkpoint_load(corrupt); }, {corrupt, "truncated or corrupt"});

  TrainConfig other = c;
  other.d_model = 32;
  Trainer different(other, test_mixer_factory());
  expect_error_contains([&] { different.checkpoint_load(good); },
                        {good, "different config", "key 'd_model' is 16 in the checkpoint but 32"});

  // A valid torch archive that is not a mixlab checkpoint.
  const std::string foreign = temp_path("foreign.ckpt");
  {
    torch::serialize::OutputArchive ar;
    ar.write("x", torch::ones({2}));
    ar.save_to(foreign);
  }
  expect_error_contains([&] { t.checkpoint_load(foreign); }, {foreign, "not a mixlab checkpoint"});
  expect_error_contains([&] { checkpoint_read_config(foreign); }, {foreign, "not a mixlab checkpoint"});
  for (const auto& p : {good, truncated, corrupt, foreign}) std::remove(p.c_str());
}

TEST(TrainTrainer, MetricsAreJsonLines) {
  TrainConfig c = tiny_config();
  c.log_every = 2;
  c.eval_every = 4;
  Trainer t(c, test_mixer_factory());
  TrainOptions o = quiet();
  o.metrics_path = temp_path("metrics.jsonl");
  t.run(o);
  std::ifstream in(o.metrics_path);
  std::string line;
  int train_lines = 0, eval_lines = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) ++train_lines;
    if (j.contains("eval_token_acc")) ++eval_lines;
  }
  EXPECT_EQ(train_lines, 4);  // steps 2, 4, 6, 8
  EXPECT_EQ(eval_lines, 2);   // step 4 and the final evaluation
  std::remove(o.metrics_path.c_str());
}

// Issue 16 item 3: divergence stops before the weights change; NaN weights are never saved.
TEST(TrainTrainer, NonFiniteStopsAndIsNeverSaved) {
  TrainConfig c = tiny_config();
  c.lr = 1e6;
  c.steps = 40;
  Trainer t(c, test_mixer_factory());
  EXPECT_THROW(t.run(quiet()), NonFiniteError);
  for (auto& p : t.model().parameters()) EXPECT_TRUE(torch::isfinite(p).all().item<bool>());

  TrainOptions skip = quiet();
  skip.skip_nonfinite = 1000;
  Trainer s(c, test_mixer_factory());
  try {
    const TrainResult r = s.run(skip);
    EXPECT_GT(r.skipped_steps, 0);
  } catch (const NonFiniteError&) {
    // The final evaluation may itself be non-finite with weights this large: also an error.
  }
  EXPECT_EQ(s.step(), 40);

  Trainer n(tiny_config(), test_mixer_factory());
  {
    torch::NoGradGuard g;
    n.model().parameters()[0].fill_(std::numeric_limits<float>::quiet_NaN());
  }
  const std::string path = temp_path("nan.ckpt");
  expect_error_contains([&] { n.checkpoint_save(path); }, {path, "non-finite"});
  EXPECT_FALSE(std::ifstream(path).good());
}

// Issue 16 item 4: a flipped bit is a checksum mismatch; the header carries the version.
TEST(TrainTrainer, CheckpointChecksum) {
  const std::string path = temp_path("sum.ckpt");
  Trainer a(tiny_config(), test_mixer_factory());
  a.checkpoint_save(path);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  EXPECT_EQ(bytes.rfind("mixlab-checkpoint 2 ", 0), 0u);
  bytes[bytes.size() - 10] ^= 0x01;
  std::ofstream(path, std::ios::binary) << bytes;
  expect_error_contains([&] { a.checkpoint_load(path); }, {path, "checksum mismatch"});
  std::string v3 = bytes;
  v3[std::string("mixlab-checkpoint ").size()] = '3';
  std::ofstream(path, std::ios::binary) << v3;
  expect_error_contains([&] { checkpoint_read(path); }, {path, "version 3 is not supported"});
  std::remove(path.c_str());
}

// Found by the checkpoint fuzzer (tests/fuzz/corpus/checkpoint/crash-torchscript-error-escapes.ckpt,
// one byte of an archive's code/ file changed and the header's checksum repaired): LibTorch's
// TorchScript compiler threw torch::jit::ErrorReport ("invalid indent level"), which is no
// c10::Error, so it escaped checkpoint_read unwrapped. Every library exception is now one line.
TEST(TrainTrainer, ACheckpointWhoseArchiveCodeDoesNotCompileIsAOneLineError) {
  std::ifstream in(MIXLAB_SOURCE_DIR "/tests/fuzz/corpus/checkpoint/crash-torchscript-error-escapes.ckpt",
                   std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string payload = file.substr(file.find('\n') + 1);
  const std::string path = ::testing::TempDir() + "/mixlab_bad_code.ckpt";
  {
    std::ofstream out(path, std::ios::binary);
    out << fmt::format("mixlab-checkpoint 2 {} {:016x}\n", payload.size(), checksum64(payload)) << payload;
  }
  try {
    (void)checkpoint_read(path);
    ADD_FAILURE() << "a checkpoint whose archive code does not compile was read";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_NE(m.find("checkpoint '" + path + "': not a readable checkpoint"), std::string::npos) << m;
    EXPECT_NE(m.find("invalid indent level"), std::string::npos) << m;
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace trainer_test
}  // namespace mixlab
