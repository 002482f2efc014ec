// MQAR and multi-hop rows (mqar.h): golden rows, the format's invariants over many rows, the
// query and position distributions, and the errors.
//
// Differences from zoology's multiquery_ar generator, each deliberate (mqar.h has the reasons),
// and where the golden rows below show them:
//   1. pairs at random positions among kNoise fillers, not contiguous at the start
//      (GoldenRecallRow: the pairs start at positions 2 and 5, fillers around them);
//   2. queries uniform WITH repeats, back to back after kSep, not each key once at power-law
//      gaps (GoldenRecallRow: key 5 is asked three times, key 7 never);
//   3. fillers are one kNoise token, not random vocabulary tokens;
//   4. 4 special tokens, then keys and values split in halves;
//   5. multi-hop links and their context labels (GoldenMultihopRow).
// Same as zoology: distinct keys, distinct values, disjoint key/value sets, answers only as labels.
#include "mixlab/train/mqar.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "mixlab/train/tasks.h"
#include "train_test_util.h"

namespace mixlab {
namespace mqar_test {
namespace {

std::vector<int64_t> scored_of(const MqarRow& r) { return std::vector<int64_t>(r.scored.begin(), r.scored.end()); }
std::string as_list(const std::vector<int64_t>& v) { return fmt::format("{{{}}}", fmt::join(v, ", ")); }

void expect_row(const MqarRow& r, const std::vector<int64_t>& tokens, const std::vector<int64_t>& targets,
                const std::vector<int64_t>& scored, const std::vector<int64_t>& answer,
                const std::vector<int64_t>& hops) {
  EXPECT_EQ(r.tokens, tokens) << "tokens  " << as_list(r.tokens);
  EXPECT_EQ(r.targets, targets) << "targets " << as_list(r.targets);
  EXPECT_EQ(scored_of(r), scored) << "scored  " << as_list(scored_of(r));
  EXPECT_EQ(r.answer, answer) << "answer  " << as_list(r.answer);
  EXPECT_EQ(r.hops, hops) << "hops    " << as_list(r.hops);
}

TEST(TrainMqar, Layout) {
  // F = S - 2 - 2n free tokens: floor(F/2) fillers, ceil(F/2) queries.
  EXPECT_EQ(mqar_layout(12, 2).fillers, 3);
  EXPECT_EQ(mqar_layout(12, 2).queries, 3);
  EXPECT_EQ(mqar_layout(64, 8).fillers, 23);
  EXPECT_EQ(mqar_layout(64, 8).queries, 23);
  EXPECT_EQ(mqar_layout(256, 64).fillers, 63);  // seed 000 App. C.1: 64 pairs in 256 tokens
  EXPECT_EQ(mqar_layout(256, 64).queries, 63);
  EXPECT_EQ(mqar_layout(5, 1).fillers, 0);  // the shortest row: kBegin k v kSep q
  EXPECT_EQ(mqar_layout(5, 1).queries, 1);
  EXPECT_EQ(mqar_max_pairs(5), 1);
  EXPECT_EQ(mqar_max_pairs(64), 30);
  EXPECT_EQ(mqar_key_count(12), 4);
  EXPECT_EQ(mqar_key_count(13), 4);  // an odd content count gives the values one more token
}

// Vocabulary 12: keys 4..7, values 8..11. S = 12, 2 pairs: 3 fillers, 3 queries.
TEST(TrainMqar, GoldenRecallRow) {
  TaskRng rng(7);
  const MqarRow r = mqar_row(12, 12, 2, 0.0, rng);
  // [kBegin, noise, (7 10), noise, (5 9), noise, kSep, queries 5 5 5]: key 5 is asked three
  // times and key 7 never (uniform with repeats); the answers are labels, never inputs.
  expect_row(r, {1, 3, 7, 10, 3, 5, 9, 3, 2, 5, 5, 5}, {3, 7, 10, 3, 5, 9, 3, 2, 5, 9, 9, 9},
             {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}, {-1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 2},
             {-1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0});
}

// Vocabulary 14: keys 4..8, values 9..13. S = 20, 4 pairs (5 fillers, 5 queries), p = 0.6.
TEST(TrainMqar, GoldenMultihopRow) {
  TaskRng rng(3);
  const MqarRow r = mqar_row(14, 20, 4, 0.6, rng);
  // Context: noise noise (7 10) noise noise (6 7) noise (5 11) (8 12). Pair (6 7) links to key
  // 7, so position 8 (the link key 7) is labelled with 10, the value 6 resolves to. Queries:
  // 5 -> 11, 5 -> 11, 8 -> 12, 6 -> 10 (one link: 6 -> 7 -> 10), 7 -> 10.
  expect_row(r, {1, 3, 3, 7, 10, 3, 3, 6, 7, 3, 5, 11, 8, 12, 2, 5, 5, 8, 6, 7},
             {3, 3, 7, 10, 3, 3, 6, 7, 10, 5, 11, 8, 12, 2, 5, 11, 11, 12, 10, 10},
             {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1},
             {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 2, 3, 4},
             {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 1, 0});
}

// Invariants on many rows of both tasks: the layout, distinct keys and values from disjoint
// sets, queries that name stored keys, answers that resolve through the stored links, labels
// on every link and nowhere else in the context.
TEST(TrainMqar, FormatInvariants) {
  const int64_t V = 41, K = mqar_key_count(V);  // keys 4..21, values 22..40
  for (const double p : {0.0, 0.5, 1.0}) {
    for (uint64_t seed = 0; seed < 60; ++seed) {
      SCOPED_TRACE(fmt::format("p {} seed {}", p, seed));
      const int64_t n = 1 + static_cast<int64_t>(seed % 9), S = 2 * n + 3 + static_cast<int64_t>(seed % 13);
      TaskRng rng(seed);
      const MqarRow r = mqar_row(V, S, n, p, rng);
      const MqarLayout lay = mqar_layout(S, n);
      ASSERT_EQ(static_cast<int64_t>(r.tokens.size()), S);
      EXPECT_EQ(r.tokens[0], kTokenBegin);
      const int64_t sep = S - 1 - lay.queries;
      EXPECT_EQ(r.tokens[sep], kTokenSep);
      auto is_key = [&](int64_t t) { return t >= kFirstContentToken && t < kFirstContentToken + K; };
      auto is_value = [&](int64_t t) { return t >= kFirstContentToken + K && t < V; };
      std::map<int64_t, int64_t> stored;
      std::set<int64_t> values;
      int64_t fillers = 0;
      for (int64_t t = 1; t < sep; ++t) {
        if (r.tokens[t] == kTokenNoise) {
          ++fillers;
          EXPECT_EQ(r.scored[t], 0);
          continue;
        }
        ASSERT_TRUE(is_key(r.tokens[t])) << "context position " << t;
        EXPECT_EQ(stored.count(r.tokens[t]), 0u) << "keys are distinct";
        const int64_t v = r.tokens[t + 1];
        EXPECT_EQ(r.scored[t], 0);
        if (is_key(v)) {
          EXPECT_GT(p, 0.0) << "links only in multihop";
          EXPECT_EQ(stored.count(v), 1u) << "a link names an earlier key";
          EXPECT_EQ(r.scored[t + 1], 1) << "a link carries a label";
        } else {
          ASSERT_TRUE(is_value(v));
          EXPECT_TRUE(values.insert(v).second) << "values are distinct";
          EXPECT_EQ(r.scored[t + 1], 0);
        }
        stored[r.tokens[t]] = v;
        ++t;
      }
      EXPECT_EQ(static_cast<int64_t>(stored.size()), n);
      EXPECT_EQ(fillers, lay.fillers);
      auto resolve = [&](int64_t key, int64_t& links) {
        int64_t v = stored.at(key);
        for (links = 0; is_key(v); ++links) v = stored.at(v);
        return v;
      };
      for (int64_t t = 1; t < sep; ++t) {  // link labels: the resolved value of the pair's key
        if (r.scored[t]) {
          int64_t links;
          EXPECT_EQ(r.targets[t], resolve(r.tokens[t - 1], links));
          EXPECT_EQ(r.answer[t], -1);
        }
      }
      for (int64_t q = 0; q < lay.queries; ++q) {
        const int64_t t = sep + 1 + q;
        ASSERT_EQ(stored.count(r.tokens[t]), 1u) << "a query names a stored key";
        int64_t links;
        EXPECT_EQ(r.targets[t], resolve(r.tokens[t], links));
        EXPECT_TRUE(is_value(r.targets[t]));
        EXPECT_EQ(r.scored[t], 1);
        EXPECT_EQ(r.answer[t], q);
        EXPECT_EQ(r.hops[t], links);
      }
      for (int64_t t = 0; t <= sep; ++t) EXPECT_EQ(r.hops[t], -1);
    }
  }
}

// Queries are uniform with repeats: over many rows every stored pair is asked about equally
// often (zoology asks each key exactly once), and repeats are common.
TEST(TrainMqar, QueriesUniformWithRepeats) {
  const int64_t n = 8, S = 64;
  std::vector<int64_t> per_pair(n, 0);
  int64_t rows_with_repeat = 0, rows_missing_a_key = 0, total = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    TaskRng rng(seed);
    const MqarRow r = mqar_row(32, S, n, 0.0, rng);
    std::vector<int64_t> order;  // keys in context order
    for (int64_t t = 1; r.tokens[t] != kTokenSep; ++t)
      if (r.tokens[t] != kTokenNoise) order.push_back(r.tokens[t]), ++t;
    std::map<int64_t, int64_t> asked;
    for (int64_t t = S - mqar_layout(S, n).queries; t < S; ++t) {
      const auto it = std::find(order.begin(), order.end(), r.tokens[t]);
      ++per_pair[it - order.begin()];
      ++asked[r.tokens[t]];
      ++total;
    }
    rows_with_repeat += std::any_of(asked.begin(), asked.end(), [](auto& kv) { return kv.second > 1; });
    rows_missing_a_key += static_cast<int64_t>(asked.size()) < n;
  }
  EXPECT_EQ(rows_with_repeat, 400);         // 23 queries over 8 keys always repeat
  EXPECT_GT(rows_missing_a_key, 400 / 20);  // P(a key is never asked) ≈ 8 (7/8)^23 ≈ 0.37
  for (int64_t i = 0; i < n; ++i) {         // expected 1150 each; 5 sigma ≈ 160
    EXPECT_NEAR(static_cast<double>(per_pair[i]), total / 8.0, 160.0) << "pair " << i;
  }
}

// Pair positions are randomised: the first key's position takes many values, and a pair may
// start at an even or an odd position (zoology's keys are always at even positions).
TEST(TrainMqar, PairPositionsRandomised) {
  std::set<int64_t> first_key_pos;
  std::set<int64_t> parity;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    TaskRng rng(seed);
    const MqarRow r = mqar_row(32, 64, 8, 0.0, rng);
    int64_t t = 1;
    while (r.tokens[t] == kTokenNoise) ++t;
    first_key_pos.insert(t);
    parity.insert(t % 2);
  }
  EXPECT_GT(first_key_pos.size(), 8u);
  EXPECT_EQ(parity.size(), 2u);
}

// Links: pair 0 never links; every later pair links with probability p.
TEST(TrainMqar, LinkProbability) {
  const int64_t n = 8, K = mqar_key_count(32);
  int64_t links = 0, candidates = 0, max_hops = 0;
  for (uint64_t seed = 0; seed < 500; ++seed) {
    TaskRng rng(seed);
    const MqarRow r = mqar_row(32, 64, n, 0.5, rng);
    int64_t pair = 0;
    for (int64_t t = 1; r.tokens[t] != kTokenSep; ++t) {
      if (r.tokens[t] == kTokenNoise) continue;
      const bool link = r.tokens[t + 1] < kFirstContentToken + K;
      if (pair == 0) EXPECT_FALSE(link);
      if (pair > 0) candidates += 1, links += link;
      ++pair, ++t;
    }
    for (int64_t h : r.hops) max_hops = std::max(max_hops, h);
  }
  EXPECT_NEAR(static_cast<double>(links) / static_cast<double>(candidates), 0.5, 0.03);  // 3500 draws: sigma 0.0085
  EXPECT_GE(max_hops, 4);  // chains of several links occur
}

TEST(TrainMqar, Errors) {
  expect_error_contains([] { mqar_validate("task recall", 64, 20, 9, 0.0); },
                        {"task recall: 9 pairs do not fit length 20", "(length - 3) / 2 = 8"});
  expect_error_contains([] { mqar_validate("task recall", 20, 64, 9, 0.0); },
                        {"task recall: vocab 20 is too small for 9 pairs", "disjoint", "vocab must be >= 22"});
  expect_error_contains([] { mqar_validate("task multihop", 64, 64, 8, 1.5); }, "hop_prob must be in [0, 1], got 1.5");
  expect_error_contains([] { mqar_validate("task recall", 64, 64, 0, 0.0); }, "pairs must be >= 1, got 0");
  TaskRng rng(0);
  expect_error_contains([&] { mqar_row(64, 4, 1, 0.0, rng); }, "mqar_row: 1 pairs do not fit length 4");
}

}  // namespace
}  // namespace mqar_test
}  // namespace mixlab
