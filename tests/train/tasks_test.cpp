// Task generators: golden batches from a fixed seed, format invariants, curriculum, determinism.
#include "mixlab/train/tasks.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "mixlab/train/mqar.h"
#include "mixlab_test_paths.h"
#include "train_test_util.h"

namespace mixlab {
namespace tasks_test {
namespace {

std::vector<int64_t> flat(const torch::Tensor& t) {
  auto c = t.to(torch::kInt64).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

std::string as_list(const std::vector<int64_t>& v) { return fmt::format("{{{}}}", fmt::join(v, ", ")); }

TaskSpec recall_spec(int64_t vocab, int64_t length, int64_t pairs) {
  TaskSpec s;
  s.name = "recall";
  s.vocab = vocab;
  s.length = length;
  s.pairs = pairs;
  return s;
}

void expect_golden(const Batch& b, const std::vector<int64_t>& tokens, const std::vector<int64_t>& targets,
                   const std::vector<int64_t>& mask, const std::vector<int64_t>& answer) {
  EXPECT_EQ(flat(b.tokens), tokens) << "tokens  " << as_list(flat(b.tokens));
  EXPECT_EQ(flat(b.targets), targets) << "targets " << as_list(flat(b.targets));
  EXPECT_EQ(flat(b.mask), mask) << "mask    " << as_list(flat(b.mask));
  EXPECT_EQ(flat(b.answer), answer) << "answer  " << as_list(flat(b.answer));
}

// Vocabulary 8: specials 0..3, content 4..7. Two rows, n = 3: [1 x1 x2 x3 2 x1 x2], T = 7.
TEST(TrainTasks, GoldenCopy) {
  TaskSpec s;
  s.name = "copy";
  s.vocab = 8;
  s.length = 3;
  const Batch b = task_generate(s, 2, 3, 0, 42);
  ASSERT_EQ(b.tokens.sizes(), (std::vector<int64_t>{2, 7}));
  expect_golden(b, {1, 6, 4, 7, 2, 6, 4, /**/ 1, 4, 4, 5, 2, 4, 4}, {6, 4, 7, 2, 6, 4, 7, /**/ 4, 4, 5, 2, 4, 4, 5},
                {0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1}, {-1, -1, -1, -1, 0, 0, 0, -1, -1, -1, -1, 0, 0, 0});
}

// Vocabulary 12: keys 4..7, values 8..11. S = 12, 2 pairs: 3 fillers (3), 3 queries. The row
// format is mqar.h's (golden rows and the differences from zoology: mqar_test.cpp); this pins
// the batch assembly and the seed streams.
TEST(TrainTasks, GoldenRecall) {
  TaskSpec s = recall_spec(12, 12, 2);
  const Batch b = task_generate(s, 1, 12, 2, 42);
  // [kBegin, (6 11), (4 10), noise x3, kSep, queries 4 4 4]
  expect_golden(b, {1, 6, 11, 4, 10, 3, 3, 3, 2, 4, 4, 4}, {6, 11, 4, 10, 3, 3, 3, 2, 4, 10, 10, 10},
                {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}, {-1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 2});
}

// Vocabulary 14: keys 4..8, values 9..13. S = 20, 4 pairs (5 fillers, 5 queries), links with
// probability 0.6.
TEST(TrainTasks, GoldenMultihop) {
  const Batch b = golden_multihop_batch();
  // Context: (5 9) noise noise (7 13) (8 12) (4 5) noise x3: pair (4 5) links to key 5, so
  // position 10 (the link key 5) is labelled with 9. Queries: 4 -> 9 (one link), 7 -> 13,
  // 8 -> 12, 8 -> 12, 4 -> 9 (one link).
  expect_golden(b, {1, 5, 9, 3, 3, 7, 13, 8, 12, 4, 5, 3, 3, 3, 2, 4, 7, 8, 8, 4},
                {5, 9, 3, 3, 7, 13, 8, 12, 4, 5, 9, 3, 3, 2, 4, 9, 13, 12, 12, 9},
                {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1},
                {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 2, 3, 4});
  EXPECT_EQ(flat(b.hops),
            (std::vector<int64_t>{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 0, 0, 0, 1}));
}

// Batch-level invariants on many random batches: copy answers are the copied sequence; recall
// and multihop rows carry mqar.h's rows (tested there) with queries after kSep, one answer per
// query, hops on queries only, and link labels (multihop only) as the only scored positions
// outside answers.
TEST(TrainTasks, FormatInvariants) {
  for (const std::string name : {"copy", "recall", "multihop"}) {
    SCOPED_TRACE(name);
    TaskSpec s;
    s.name = name;
    s.vocab = 40;
    s.length = name == "copy" ? 9 : 37;
    s.pairs = 7;
    for (uint64_t seed = 0; seed < 20; ++seed) {
      const int64_t pairs = name == "copy" ? 0 : 1 + static_cast<int64_t>(seed % 7);
      const Batch b = task_generate(s, 3, s.length, pairs, seed);
      const int64_t T = b.tokens.size(1);
      EXPECT_EQ(T, task_sequence_length(s, s.length));
      EXPECT_TRUE(b.mask.sum().item<double>() > 0);
      const auto unscored = (b.mask == 0).narrow(1, 0, T - 1);
      EXPECT_TRUE(torch::equal(b.targets.narrow(1, 0, T - 1).masked_select(unscored),
                               b.tokens.narrow(1, 1, T - 1).masked_select(unscored)));
      EXPECT_TRUE(
          torch::equal(b.hops >= 0, name == "copy" ? torch::zeros_like(b.mask).to(torch::kBool) : b.answer >= 0));
      if (name != "multihop") EXPECT_TRUE(torch::equal(b.mask > 0, b.answer >= 0));
      for (int64_t r = 0; r < 3; ++r) {
        auto tok = flat(b.tokens[r]);
        auto tgt = flat(b.targets[r]);
        auto msk = flat(b.mask[r]);
        auto ans = flat(b.answer[r]);
        EXPECT_EQ(tok[0], kTokenBegin);
        if (name == "copy") {
          const int64_t n = s.length;
          EXPECT_EQ(tok[n + 1], kTokenSep);
          for (int64_t i = 0; i < n; ++i) {
            EXPECT_EQ(tgt[n + 1 + i], tok[1 + i]);
            EXPECT_EQ(msk[n + 1 + i], 1);
          }
          continue;
        }
        const int64_t Q = mqar_layout(s.length, pairs).queries;
        EXPECT_EQ(tok[T - Q - 1], kTokenSep);
        for (int64_t q = 0; q < Q; ++q) {
          EXPECT_EQ(ans[T - Q + q], q);
          EXPECT_GE(tgt[T - Q + q], kFirstContentToken + 18);  // a value token, never a key
        }
        for (int64_t t = 0; t < T - Q; ++t) {
          if (msk[t]) {
            EXPECT_EQ(name, "multihop") << "only multihop scores context positions (link labels)";
            EXPECT_LT(tok[t], kFirstContentToken + 18) << "a link label sits on a key";
          }
        }
      }
    }
  }
}

TEST(TrainTasks, MultihopHasLinksAndRecallHasNone) {
  TaskSpec s;
  s.name = "multihop";
  s.vocab = 40;
  s.length = 64;
  s.pairs = 8;
  const Batch b = task_generate(s, 16, 64, 8, 3);
  auto labels = (b.mask > 0) & (b.answer < 0);
  EXPECT_GT(labels.sum().item<int64_t>(), 0);
  EXPECT_GT((b.hops >= 1).sum().item<int64_t>(), 0);
  EXPECT_GT((b.hops >= 2).sum().item<int64_t>(), 0);
  s.name = "recall";
  const Batch r = task_generate(s, 16, 64, 8, 3);
  EXPECT_TRUE(torch::equal(r.mask > 0, r.answer >= 0));
  EXPECT_EQ((r.hops >= 1).sum().item<int64_t>(), 0);
  EXPECT_EQ((r.targets.masked_select(r.mask > 0) < kFirstContentToken + 18).sum().item<int64_t>(), 0);
}

TEST(TrainTasks, CurriculumAndDeterminism) {
  TaskSpec s = recall_spec(64, 64, 16);
  EXPECT_EQ(task_phase(s, 0, 100), 0);
  EXPECT_EQ(task_phase(s, 25, 100), 1);
  EXPECT_EQ(task_phase(s, 99, 100), 3);
  std::set<int64_t> lengths;
  for (int64_t step = 0; step < 100; ++step) {
    const Batch b = task_train_batch(s, 2, step, 100, 5);
    const int64_t div = int64_t{8} >> task_phase(s, step, 100);
    EXPECT_LE(b.length, 64 / div);
    EXPECT_GE(b.length, std::max<int64_t>(5, (64 / div + 1) / 2));
    EXPECT_LE(b.pairs, std::max<int64_t>(1, 16 / div));
    lengths.insert(b.length);
    const Batch again = task_train_batch(s, 2, step, 100, 5);
    EXPECT_TRUE(torch::equal(b.tokens, again.tokens));
  }
  EXPECT_GT(lengths.size(), 4u);  // lengths vary between batches
  s.curriculum = false;
  EXPECT_EQ(task_phase_count(s), 1);
  EXPECT_EQ(task_phase(s, 0, 100), 0);
  // Evaluation batches: full length and pairs, and a stream distinct from training.
  const Batch e = task_eval_batch(s, 2, 0, 5);
  EXPECT_EQ(e.length, 64);
  EXPECT_EQ(e.pairs, 16);
  EXPECT_FALSE(torch::equal(e.tokens, task_eval_batch(s, 2, 1, 5).tokens));
}

// min_length moves the shortest training length: min_length = L trains every row at L (copy at one
// fixed offset), a value between widens or narrows [min_length, L]; 0 keeps [ceil(L/2), L] with the
// same draws (so runs without the key are unchanged); bad values and other tasks are refused.
TEST(TrainTasks, MinLengthSetsTheShortestTrainingLength) {
  TaskSpec s;
  s.name = "copy", s.vocab = 32, s.length = 16, s.curriculum = false;
  std::vector<Batch> base;
  for (int64_t step = 0; step < 40; ++step) base.push_back(task_train_batch(s, 2, step, 40, 7));
  s.min_length = 8;  // the default range, named: the same batches
  for (int64_t step = 0; step < 40; ++step)
    EXPECT_TRUE(torch::equal(base[static_cast<size_t>(step)].tokens, task_train_batch(s, 2, step, 40, 7).tokens));
  s.min_length = 16;
  for (int64_t step = 0; step < 40; ++step) EXPECT_EQ(task_train_batch(s, 2, step, 40, 7).length, 16);
  s.min_length = 2;
  std::set<int64_t> lengths;
  for (int64_t step = 0; step < 200; ++step) lengths.insert(task_train_batch(s, 2, step, 200, 7).length);
  EXPECT_EQ(*lengths.begin(), 2);
  EXPECT_EQ(*lengths.rbegin(), 16);
  // With the curriculum a phase shorter than min_length trains at its own length.
  s.curriculum = true, s.min_length = 16;
  EXPECT_EQ(task_train_batch(s, 2, 0, 40, 7).length, 2);
  EXPECT_EQ(task_train_batch(s, 2, 39, 40, 7).length, 16);
  // Evaluation is always at the full length.
  EXPECT_EQ(task_eval_batch(s, 2, 0, 7).length, 16);
  s.min_length = 17;
  expect_error_contains([&] { task_validate(s); },
                        "min_length must be 0 (half the length) or in [1, length = 16], got 17");
  TaskSpec r = recall_spec(64, 64, 8);
  r.min_length = 4;
  expect_error_contains([&] { task_validate(r); },
                        "min_length must be 0 (half the length) or in [5, length = 64], got 4");
  TaskSpec lm;
  lm.name = "lm", lm.min_length = 8;
  expect_error_contains([&] { task_validate(lm); }, "min_length applies to copy, recall, multihop and textcopy only");
}

// Two held-out splits: the test split is the stream every run has always reported (the one-split
// call reads it), the validation split other rows of the same distribution (compare --lr, stop_at).
TEST(TrainTasks, ValidationAndTestSplitsDiffer) {
  const TaskSpec s = recall_spec(64, 64, 16);
  EXPECT_EQ(task_report_split(s), EvalSplit::kTest);
  const Batch test = task_eval_batch(s, 4, 0, 5, EvalSplit::kTest);
  EXPECT_TRUE(torch::equal(test.tokens, task_eval_batch(s, 4, 0, 5).tokens));
  const Batch valid = task_eval_batch(s, 4, 0, 5, EvalSplit::kValid);
  EXPECT_EQ(valid.length, test.length);
  EXPECT_EQ(valid.pairs, test.pairs);
  EXPECT_FALSE(torch::equal(valid.tokens, test.tokens));
  EXPECT_TRUE(torch::equal(valid.tokens, task_eval_batch(s, 4, 0, 5, EvalSplit::kValid).tokens));
  for (int64_t i = 0; i < 3; ++i)  // no training batch is a validation batch
    EXPECT_FALSE(torch::equal(valid.tokens, task_train_batch(s, 4, i, 10, 5).tokens));
  TaskSpec lm;
  lm.name = "lm";
  EXPECT_EQ(task_report_split(lm), EvalSplit::kValid);
  EXPECT_STREQ(eval_split_name(EvalSplit::kValid), "valid");
  EXPECT_STREQ(eval_split_name(EvalSplit::kTest), "test");
}

// curriculum_phases = P: P equal phases at length and pairs / 2^(P-1-p). P = 2 trains the first
// half at S/2 (so a T-PSM of chunk S/4 already meets its state) and the second at S.
TEST(TrainTasks, CurriculumPhasesSetTheSchedule) {
  TaskSpec s = recall_spec(64, 256, 8);
  for (const int64_t phases : {1, 2, 3}) {
    s.curriculum_phases = phases;
    EXPECT_EQ(task_phase_count(s), phases);
    const int64_t total = 60;
    std::vector<int64_t> longest(static_cast<size_t>(phases), 0), shortest(static_cast<size_t>(phases), 1 << 20);
    std::vector<int64_t> most_pairs(static_cast<size_t>(phases), 0);
    for (int64_t step = 0; step < total; ++step) {
      const int p = task_phase(s, step, total);
      ASSERT_EQ(p, step * phases / total) << "equal phases, step " << step;
      const Batch b = task_train_batch(s, 1, step, total, 3);
      longest[p] = std::max(longest[p], b.length);
      shortest[p] = std::min(shortest[p], b.length);
      most_pairs[p] = std::max(most_pairs[p], b.pairs);
    }
    for (int64_t p = 0; p < phases; ++p) {
      const int64_t div = int64_t{1} << (phases - 1 - p);
      EXPECT_LE(longest[p], 256 / div) << "P " << phases << " phase " << p;
      EXPECT_GE(shortest[p], 128 / div) << "P " << phases << " phase " << p;
      EXPECT_GT(longest[p], 3 * 256 / div / 4) << "the draw reaches near the phase's length";
      EXPECT_LE(most_pairs[p], 8 / div);
    }
  }
  // The last step of any schedule trains at the full length; off = one phase.
  s.curriculum_phases = 8;
  EXPECT_EQ(task_phase(s, 59, 60), 7);
  s.curriculum = false;
  EXPECT_EQ(task_phase(s, 0, 60), 0);
  s.curriculum = true;
  for (const int64_t bad : {0, 9}) {
    s.curriculum_phases = bad;
    expect_error_contains([&] { task_validate(s); },
                          "task recall: curriculum_phases must be in [1, 8], got " + std::to_string(bad));
  }
}

TEST(TrainTasks, Errors) {
  TaskSpec s;
  s.name = "sort";
  expect_error_contains([&] { task_validate(s); }, "unknown task 'sort'");
  s.name = "recall";
  s.vocab = 12;
  s.length = 64;
  s.pairs = 5;
  expect_error_contains([&] { task_validate(s); }, {"task recall: vocab 12 is too small for 5 pairs", "disjoint"});
  s.vocab = 64;
  s.length = 10;
  expect_error_contains([&] { task_validate(s); }, "task recall: 5 pairs do not fit length 10");
  s.name = "multihop";
  s.length = 64;
  s.hop_prob = -0.1;
  expect_error_contains([&] { task_validate(s); }, "task multihop: hop_prob must be in [0, 1]");
  s.hop_prob = 0.5;
  expect_error_contains([&] { task_generate(s, 1, 65, 1, 0); }, "task_generate: length must be in [5, 64]");
  expect_error_contains([&] { task_generate(s, 1, 12, 5, 0); }, "task_generate: pairs must be in [1, 4] at length 12");
  expect_error_contains([&] { task_generate(s, 0, 64, 1, 0); }, "batch_size must be >= 1");
}

}  // namespace
}  // namespace tasks_test
}  // namespace mixlab

// textcopy through the task table: the documented format, from the sample corpus shipped in the
// repository (MIXLAB_DATA_DIR points at it so the test does not depend on the npm download).
TEST(TaskTextCopy, BatchFormatAndHeldOutEvaluation) {
  setenv("MIXLAB_DATA_DIR", MIXLAB_SOURCE_DIR "/data/sample", 1);
  mixlab::TaskSpec spec;
  spec.name = "textcopy";
  spec.vocab = 256;
  spec.length = 12;
  spec.curriculum = false;
  auto b = mixlab::task_train_batch(spec, 3, 5, 10, 42);
  const int64_t L = b.length, T = 2 * L - 1;  // training draws L in [6, 12] (tasks.h)
  ASSERT_GE(L, 6);
  ASSERT_LE(L, 12);
  ASSERT_EQ(b.tokens.sizes(), (std::vector<int64_t>{3, T}));
  EXPECT_EQ(mixlab::task_sequence_length(spec, L), T);
  EXPECT_TRUE(torch::equal(b.tokens.narrow(1, 0, L - 1), b.tokens.narrow(1, L, L - 1)));  // repeated span
  EXPECT_TRUE(torch::equal(b.targets.narrow(1, 0, T - 1), b.tokens.narrow(1, 1, T - 1)));
  EXPECT_EQ(b.mask.sum().item<float>(), 3.f * L);
  EXPECT_EQ(b.mask.narrow(1, L - 1, L).sum().item<float>(), 3.f * L);
  EXPECT_TRUE(torch::equal(b.answer.eq(0), b.mask.gt(0)));
  EXPECT_TRUE(torch::equal(b.tokens, mixlab::task_train_batch(spec, 3, 5, 10, 42).tokens)) << "deterministic";
  auto e = mixlab::task_eval_batch(spec, 2, 0, 42);
  EXPECT_EQ(e.tokens.size(1), 2 * 12 - 1);  // evaluation always uses the full length
  spec.vocab = 64;
  EXPECT_THROW(mixlab::task_validate(spec), mixlab::Error);
}
