// The S5 task: permutation tables, the running composition, the length curriculum, errors.
#include "mixlab/train/task_s5.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "support/expect_error.h"

namespace task_s5_test {

namespace {

mixlab::TaskSpec s5_spec(int64_t length = 18) {
  mixlab::TaskSpec s;
  s.name = "s5";
  s.vocab = 128;
  s.length = length;
  return s;
}

// Checks that every token of `batch` is an element of S_n and every target the running
// composition of its row's tokens (sn_compose); returns the elements the rows use.
std::set<int64_t> expect_running_composition(const mixlab::Batch& batch, int64_t n) {
  std::set<int64_t> used;
  for (int64_t b = 0; b < batch.tokens.size(0); ++b) {
    int64_t p = 0;
    for (int64_t t = 0; t < batch.tokens.size(1); ++t) {
      const int64_t g = batch.tokens[b][t].item<int64_t>() - mixlab::kFirstContentToken;
      EXPECT_TRUE(g >= 0 && g < mixlab::sn_order(n)) << g;
      used.insert(g);
      p = mixlab::sn_compose(n, p, g);
      EXPECT_EQ(batch.targets[b][t].item<int64_t>() - mixlab::kFirstContentToken, p);
    }
  }
  return used;
}

}  // namespace

TEST(TaskS5, TablesAreTheGroup) {
  std::set<mixlab::S5Perm> seen;
  for (int64_t r = 0; r < mixlab::kS5Elements; ++r) {
    auto p = mixlab::s5_permutation(r);
    EXPECT_EQ(mixlab::s5_rank(p), r);
    seen.insert(p);
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), 120);
  EXPECT_EQ(mixlab::s5_permutation(0), (mixlab::S5Perm{0, 1, 2, 3, 4}));
  // Identity, inverses, associativity, and non-commutativity (S5 is not abelian).
  bool commutes = true;
  for (int64_t a = 0; a < 120; a += 7)
    for (int64_t b = 0; b < 120; b += 5) {
      EXPECT_EQ(mixlab::s5_compose(0, a), a);
      EXPECT_EQ(mixlab::s5_compose(a, 0), a);
      for (int64_t c = 0; c < 120; c += 31)
        EXPECT_EQ(mixlab::s5_compose(mixlab::s5_compose(a, b), c), mixlab::s5_compose(a, mixlab::s5_compose(b, c)));
      commutes &= mixlab::s5_compose(a, b) == mixlab::s5_compose(b, a);
    }
  EXPECT_FALSE(commutes);
  // a · b applies a first: the transposition (0 1) then the 3-cycle (0 1 2) maps 0 -> 1 -> 2.
  const int64_t swap01 = mixlab::s5_rank({1, 0, 2, 3, 4}), cycle = mixlab::s5_rank({1, 2, 0, 3, 4});
  EXPECT_EQ(mixlab::s5_permutation(mixlab::s5_compose(swap01, cycle))[0], 2);
}

TEST(TaskS5, TargetsAreTheRunningComposition) {
  auto spec = s5_spec();
  auto batch = mixlab::task_generate(spec, 3, 11, 0, 42);  // through the task table
  ASSERT_EQ(batch.tokens.sizes(), (std::vector<int64_t>{3, 11}));
  EXPECT_EQ(batch.mask.sum().item<double>(), 33.0);
  expect_running_composition(batch, 5);
  // The direct definition of the prefix: apply the row's permutations in order to each element.
  for (int64_t b = 0; b < 3; ++b) {
    mixlab::S5Perm direct = {0, 1, 2, 3, 4};
    for (int64_t t = 0; t < 11; ++t) {
      auto g = mixlab::s5_permutation(batch.tokens[b][t].item<int64_t>() - mixlab::kFirstContentToken);
      for (auto& v : direct) v = g[v];
      EXPECT_EQ(mixlab::s5_rank(direct), batch.targets[b][t].item<int64_t>() - mixlab::kFirstContentToken);
      EXPECT_EQ(batch.answer[b][t].item<int64_t>(), t);
    }
  }
  // Deterministic in the seed; different seeds give different rows.
  EXPECT_TRUE(torch::equal(batch.tokens, mixlab::task_generate(spec, 3, 11, 0, 42).tokens));
  EXPECT_FALSE(torch::equal(batch.tokens, mixlab::task_generate(spec, 3, 11, 0, 43).tokens));
}

TEST(TaskS5, CurriculumGrowsFromFourToTheFullLength) {
  auto spec = s5_spec(18);
  const int64_t total = 400;
  int64_t lo = 1000, hi = 0, first_phase_hi = 0;
  for (int64_t step = 0; step < total; ++step) {
    auto b = mixlab::task_train_batch(spec, 1, step, total, 7);
    lo = std::min(lo, b.length);
    hi = std::max(hi, b.length);
    if (mixlab::task_phase(spec, step, total) == 0) first_phase_hi = std::max(first_phase_hi, b.length);
  }
  EXPECT_EQ(lo, 4);
  EXPECT_EQ(hi, 18);
  EXPECT_LE(first_phase_hi, 4 + (18 - 4) / 4);
  // Two phases: the first half draws lengths up to 4 + 14 / 2 = 11, the second up to 18.
  spec.curriculum_phases = 2;
  int64_t longest[2] = {0, 0};
  for (int64_t step = 0; step < total; ++step) {
    int64_t& phase_longest = longest[mixlab::task_phase(spec, step, total)];
    phase_longest = std::max(phase_longest, mixlab::task_train_batch(spec, 1, step, total, 7).length);
  }
  EXPECT_EQ(longest[0], 11);
  EXPECT_EQ(longest[1], 18);
  // Evaluation at the full length, and at any length for length generalisation.
  EXPECT_EQ(mixlab::task_eval_batch(spec, 2, 0, 7).tokens.size(1), 18);
  EXPECT_EQ(mixlab::s5_eval_batch(spec, 2, 180, 0, 7).tokens.size(1), 180);
}

TEST(TaskS5, ErrorsNameTheField) {
  auto spec = s5_spec();
  spec.vocab = 64;
  expect_error([&] { mixlab::task_validate(spec); }, {"task s5", "vocab must be >= 124", "got 64"});
  expect_error([&] { mixlab::task_generate(spec, 1, 4, 0, 1); }, "vocab must be >= 124");
  spec = s5_spec();
  expect_error([&] { mixlab::s5_generate(spec, 1, 0, 1); }, {"length must be >= 1", "got 0"});
}

TEST(TaskS5, ErrorByLengthScoresAnOracleAndAForgetfulOne) {
  auto spec = s5_spec();
  // The oracle recomputes the running composition; the forgetful one stops composing after 10.
  auto predictor = [](int64_t memory) {
    return [memory](const torch::Tensor& tokens) {
      auto logits = torch::zeros({tokens.size(0), tokens.size(1), 128});
      for (int64_t b = 0; b < tokens.size(0); ++b) {
        int64_t p = 0;
        for (int64_t t = 0; t < tokens.size(1); ++t) {
          if (t < memory) p = mixlab::s5_compose(p, tokens[b][t].item<int64_t>() - mixlab::kFirstContentToken);
          logits[b][t][mixlab::kFirstContentToken + p] = 1.0;
        }
      }
      return logits;
    };
  };
  auto oracle = mixlab::s5_error_by_length(predictor(1 << 20), spec, {4, 18, 40}, 5, 2, 3);
  ASSERT_EQ(oracle.size(), 3u);
  for (const auto& e : oracle) {
    EXPECT_EQ(e.rows, 5);
    EXPECT_EQ(e.final_error, 0.0);
    EXPECT_EQ(e.token_error, 0.0);
  }
  auto forgetful = mixlab::s5_error_by_length(predictor(10), spec, {4, 10, 40}, 20, 8, 3);
  EXPECT_EQ(forgetful[0].final_error, 0.0);
  EXPECT_EQ(forgetful[1].final_error, 0.0);
  EXPECT_GT(forgetful[2].final_error, 0.8);  // a random extra permutation is the identity 1/120
  EXPECT_GT(forgetful[2].token_error, 0.6);
  EXPECT_LT(forgetful[2].token_error, 0.76);  // 30 of 40 positions can be wrong
  const std::string path = ::testing::TempDir() + "s5_errors.csv";
  mixlab::s5_error_csv_write(path, forgetful);
  std::ifstream in(path);
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header, "length,rows,final_error,token_error");
}

TEST(TaskS5, SmallerSymmetricGroups) {
  // S_n for n = 2..5: n! distinct permutations of the first n entries, a group under composition
  // (identity rank 0, associative), abelian only for n = 2; S5's tables are the S5 functions'.
  for (int64_t n = mixlab::kSnMinElements; n <= mixlab::kSnMaxElements; ++n) {
    SCOPED_TRACE(n);
    const int64_t order = mixlab::sn_order(n);
    EXPECT_EQ(order, n == 2 ? 2 : n == 3 ? 6 : n == 4 ? 24 : 120);
    std::set<mixlab::S5Perm> seen;
    for (int64_t r = 0; r < order; ++r) {
      auto p = mixlab::sn_permutation(n, r);
      for (int64_t i = n; i < 5; ++i) EXPECT_EQ(p[static_cast<size_t>(i)], i);  // fixed beyond n
      seen.insert(p);
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), order);
    bool commutes = true;
    for (int64_t a = 0; a < order; ++a)
      for (int64_t b = 0; b < order; ++b) {
        EXPECT_EQ(mixlab::sn_compose(n, 0, a), a);
        // a · b applies a first: element 0 goes to b(a(0)).
        const auto pa = mixlab::sn_permutation(n, a), pb = mixlab::sn_permutation(n, b);
        EXPECT_EQ(mixlab::sn_permutation(n, mixlab::sn_compose(n, a, b))[0], pb[static_cast<size_t>(pa[0])]);
        commutes &= mixlab::sn_compose(n, a, b) == mixlab::sn_compose(n, b, a);
        if (n == 5) EXPECT_EQ(mixlab::sn_compose(n, a, b), mixlab::s5_compose(a, b));
      }
    EXPECT_EQ(commutes, n == 2);
  }
  expect_error([] { mixlab::sn_order(6); }, {"elements must be in [2, 5]", "got 6"});
  expect_error([] { mixlab::sn_compose(3, 0, 6); }, {"ranks must be in [0, 6)", "6"});
}

TEST(TaskS5, ElementsPicksTheGroupOfTheRows) {
  auto spec = s5_spec();
  spec.elements = 3;
  spec.vocab = 10;  // 4 specials + 3! permutations
  mixlab::task_validate(spec);
  const auto used = expect_running_composition(mixlab::task_generate(spec, 4, 30, 0, 5), 3);
  EXPECT_EQ(used.size(), 6u);  // 120 draws cover all six
  spec.vocab = 9;
  expect_error([&] { mixlab::task_validate(spec); }, {"task s5", "vocab must be >= 10", "S3", "got 9"});
  spec.vocab = 128;
  spec.elements = 6;
  expect_error([&] { mixlab::task_validate(spec); }, {"task s5", "elements", "[2, 5]", "got 6"});
  spec.elements = 1;
  expect_error([&] { mixlab::task_validate(spec); }, {"elements", "got 1"});
}

}  // namespace task_s5_test
