// Task generators: golden batches from a fixed seed, format invariants, curriculum, determinism.
#include "mixlab/train/tasks.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "train_test_util.h"

namespace mixlab {
namespace {

std::vector<int64_t> flat(const torch::Tensor& t) {
  auto c = t.to(torch::kInt64).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

std::string as_list(const std::vector<int64_t>& v) { return fmt::format("{{{}}}", fmt::join(v, ", ")); }

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

// Vocabulary 12: keys 4..7, values 8..11. S = 12, 2 pairs: g = 12 - 2 - 8 = 2 fillers (3).
TEST(TrainTasks, GoldenRecall) {
  TaskSpec s;
  s.name = "recall";
  s.vocab = 12;
  s.length = 12;
  s.pairs = 2;
  const Batch b = task_generate(s, 1, 12, 2, 42);
  // [kBegin, noise, noise, (6 11), (4 9), kSep, query 4 -> 9, query 6 -> 11]
  expect_golden(b, {1, 3, 3, 6, 11, 4, 9, 2, 4, 9, 6, 11}, {3, 3, 6, 11, 4, 9, 2, 4, 9, 6, 11, 0},
                {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0}, {-1, -1, -1, -1, -1, -1, -1, -1, 0, -1, 1, -1});
}

// Vocabulary 14: keys 4..8, values 9..13. S = 20, 4 pairs, 2 fillers, links with probability 0.6.
TEST(TrainTasks, GoldenMultihop) {
  const Batch b = golden_multihop_batch();
  // Context: (5 9) (7 12) (8 12) (4 5): pair 3's value is a link to key 5 (pair 0), so position
  // 10 (the link key 5) is labelled with 9, the value it resolves to, instead of its next token.
  // Queries: 8 -> 12; 5 -> 9; 4 -> 9 (two hops: 4 -> 5 -> 9); 7 -> 12.
  expect_golden(b, {1, 3, 3, 5, 9, 7, 12, 8, 12, 4, 5, 2, 8, 12, 5, 9, 4, 9, 7, 12},
                {3, 3, 5, 9, 7, 12, 8, 12, 4, 5, 9, 8, 12, 5, 9, 4, 9, 7, 12, 0},
                {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0},
                {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, -1, 1, -1, 2, -1, 3, -1});
  // Only the query for 4 follows a link.
  EXPECT_EQ(flat(b.hops),
            (std::vector<int64_t>{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, -1, 0, -1, 1, -1, 0, -1}));
}

// Format invariants on many random batches: targets are the next token, copy answers are the
// copied sequence, recall answers are the values stored for the queried keys, and multihop
// chains resolve through the stored links.
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
      if (name != "multihop") {  // multihop link labels are the exception to both (checked below)
        EXPECT_TRUE(torch::equal(b.targets.narrow(1, 0, T - 1), b.tokens.narrow(1, 1, T - 1)));
        EXPECT_TRUE(torch::equal(b.mask > 0, b.answer >= 0));
      }
      for (int64_t r = 0; r < 3; ++r) {
        auto tok = flat(b.tokens[r]);
        auto tgt = flat(b.targets[r]);
        auto msk = flat(b.mask[r]);
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
        // Context: pairs "k v" (keys distinct), fillers, then kSep. A multihop value may be
        // an earlier key (a link); its position is labelled with the resolved value.
        std::map<int64_t, int64_t> value_of;
        auto resolve = [&](int64_t key) {
          int64_t v = value_of.at(key);
          while (v < kFirstContentToken + 18) v = value_of.at(v);  // a key: follow the link
          return v;
        };
        int64_t t = 1;
        while (tok[t] != kTokenSep) {
          if (tok[t] == kTokenNoise) {
            EXPECT_EQ(msk[t], 0);
            ++t;
            continue;
          }
          EXPECT_GE(tok[t], kFirstContentToken);
          EXPECT_LT(tok[t], kFirstContentToken + 18);  // a key
          EXPECT_EQ(value_of.count(tok[t]), 0u);
          EXPECT_EQ(msk[t], 0);
          value_of[tok[t]] = tok[t + 1];
          const bool link = tok[t + 1] < kFirstContentToken + 18;
          if (link) {
            EXPECT_EQ(name, "multihop") << "only multihop values link to keys";
            ASSERT_EQ(value_of.count(tok[t + 1]), 1u) << "a link must name an earlier key";
            EXPECT_EQ(msk[t + 1], 1);
            EXPECT_EQ(tgt[t + 1], resolve(tok[t]));
            EXPECT_EQ(flat(b.answer[r])[t + 1], -1);
          } else {
            EXPECT_EQ(msk[t + 1], 0);
          }
          t += 2;
        }
        EXPECT_EQ(static_cast<int64_t>(value_of.size()), pairs);
        // After kSep: "k v" queries; the position of k is scored with the resolved value, one
        // answer per query, numbered in order.
        int64_t next_answer = 0;
        for (int64_t u = t + 1; u < T; ++u) {
          if (!msk[u]) continue;
          ASSERT_EQ(value_of.count(tok[u]), 1u) << "scored input is not a stored key";
          EXPECT_EQ(tgt[u], resolve(tok[u]));
          int64_t links = 0;
          for (int64_t v = value_of.at(tok[u]); v < kFirstContentToken + 18; v = value_of.at(v)) ++links;
          EXPECT_EQ(flat(b.hops[r])[u], links);
          EXPECT_GE(tgt[u], kFirstContentToken + 18);  // a value token, never a key
          EXPECT_EQ(flat(b.answer[r])[u], next_answer++);
          if (u + 1 < T) EXPECT_EQ(tok[u + 1], tgt[u]);
        }
        EXPECT_GE(next_answer, 1);
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
  // Link labels: scored positions outside every answer, whose input token is a key.
  auto labels = (b.mask > 0) & (b.answer < 0);
  EXPECT_GT(labels.sum().item<int64_t>(), 0);
  EXPECT_EQ((b.tokens.masked_select(labels) >= kFirstContentToken + 18).sum().item<int64_t>(), 0);
  // Some query needs more than one hop: its key's stored value is another key.
  int64_t multi_hop_queries = 0;
  for (int64_t r = 0; r < 16; ++r) {
    auto tok = flat(b.tokens[r]);
    std::map<int64_t, int64_t> stored;
    int64_t t = 1;
    for (; tok[t] != kTokenSep; ++t)
      if (tok[t] != kTokenNoise) stored[tok[t]] = tok[t + 1], ++t;
    for (int64_t u = t + 1; u < 64; ++u)
      if (flat(b.answer[r])[u] >= 0 && stored.at(tok[u]) < kFirstContentToken + 18) ++multi_hop_queries;
  }
  EXPECT_GT(multi_hop_queries, 0);
  s.name = "recall";
  const Batch r = task_generate(s, 16, 64, 8, 3);
  EXPECT_TRUE(torch::equal(r.mask > 0, r.answer >= 0));
  EXPECT_EQ((r.targets.masked_select(r.mask > 0) < kFirstContentToken + 18).sum().item<int64_t>(), 0);
}

TEST(TrainTasks, CurriculumAndDeterminism) {
  TaskSpec s;
  s.name = "recall";
  s.vocab = 64;
  s.length = 64;
  s.pairs = 16;
  EXPECT_EQ(task_phase(s, 0, 100), 0);
  EXPECT_EQ(task_phase(s, 25, 100), 1);
  EXPECT_EQ(task_phase(s, 99, 100), 3);
  std::set<int64_t> lengths;
  for (int64_t step = 0; step < 100; ++step) {
    const Batch b = task_train_batch(s, 2, step, 100, 5);
    const int64_t div = int64_t{8} >> task_phase(s, step, 100);
    EXPECT_LE(b.length, 64 / div);
    EXPECT_GE(b.length, std::max<int64_t>(6, (64 / div + 1) / 2));
    EXPECT_LE(b.pairs, std::max<int64_t>(1, 16 / div));
    lengths.insert(b.length);
    const Batch again = task_train_batch(s, 2, step, 100, 5);
    EXPECT_TRUE(torch::equal(b.tokens, again.tokens));
  }
  EXPECT_GT(lengths.size(), 4u);  // lengths vary between batches
  s.curriculum = false;
  EXPECT_EQ(task_phase(s, 0, 100), 3);
  // Evaluation batches: full length and pairs, and a stream distinct from training.
  const Batch e = task_eval_batch(s, 2, 0, 5);
  EXPECT_EQ(e.length, 64);
  EXPECT_EQ(e.pairs, 16);
  EXPECT_FALSE(torch::equal(e.tokens, task_eval_batch(s, 2, 1, 5).tokens));
}

TEST(TrainTasks, Errors) {
  TaskSpec s;
  s.name = "sort";
  expect_error_contains([&] { task_validate(s); }, "unknown task 'sort'");
  s.name = "recall";
  s.vocab = 12;
  s.length = 64;
  s.pairs = 5;
  expect_error_contains([&] { task_validate(s); }, "pairs (5) must be <= the number of key tokens");
  s.vocab = 64;
  s.length = 10;
  expect_error_contains([&] { task_validate(s); }, "so that a query fits");
  s.length = 64;
  expect_error_contains([&] { task_generate(s, 1, 65, 1, 0); }, "task_generate: length must be in [6, 64]");
  expect_error_contains([&] { task_generate(s, 0, 64, 1, 0); }, "batch_size must be >= 1");
}

}  // namespace
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
