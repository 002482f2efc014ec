// The MAD suite, selective copying and induction heads (task_mad.h, task_selective_copy.h,
// task_induction.h): shapes, every scored label re-derived from the tokens by a brute-force
// checker written from the definitions, determinism and disjoint seed streams, bad input.
#include "mixlab/train/task_mad.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

#include "mixlab/registry/registry.h"
#include "mixlab/train/compare.h"
#include "mixlab/train/config.h"
#include "mixlab/train/tasks.h"
#include "train_test_util.h"

namespace mixlab {
namespace task_mad_test {
namespace {

std::vector<int64_t> flat(const torch::Tensor& t) {
  auto c = t.to(torch::kInt64).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// One row of a batch as plain vectors.
struct Row {
  std::vector<int64_t> tok, tgt, mask, ans;
};
std::vector<Row> rows_of(const Batch& b) {
  const int64_t B = b.tokens.size(0), T = b.tokens.size(1);
  const auto tok = flat(b.tokens), tgt = flat(b.targets), mask = flat(b.mask), ans = flat(b.answer);
  std::vector<Row> out(B);
  for (int64_t r = 0; r < B; ++r) {
    auto cut = [&](const std::vector<int64_t>& v) {
      return std::vector<int64_t>(v.begin() + r * T, v.begin() + (r + 1) * T);
    };
    out[r] = {cut(tok), cut(tgt), cut(mask), cut(ans)};
  }
  return out;
}

TaskSpec spec_of(const std::string& task) {
  // The config's defaults for the task (vocab, length, task-only fields).
  return config_from_json({{"task", task}}, "test").task;
}

void expect_format(const Batch& b, int64_t B, int64_t T) {
  ASSERT_EQ(b.tokens.sizes(), (std::vector<int64_t>{B, T}));
  for (const auto& t : {b.targets, b.answer, b.hops}) {
    ASSERT_EQ(t.sizes(), b.tokens.sizes());
    EXPECT_EQ(t.scalar_type(), torch::kInt64);
  }
  EXPECT_EQ(b.tokens.scalar_type(), torch::kInt64);
  EXPECT_EQ(b.mask.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::all(b.hops == -1).item<bool>());
  // An answer index exactly on the scored positions; every row has one.
  EXPECT_TRUE(torch::equal(b.mask > 0, b.answer >= 0));
  EXPECT_TRUE(torch::all(b.mask.sum(1) > 0).item<bool>());
}

bool same(const Batch& a, const Batch& b) {
  return torch::equal(a.tokens, b.tokens) && torch::equal(a.targets, b.targets) && torch::equal(a.mask, b.mask);
}

// ---- brute-force checkers: each re-derives mask and labels from the tokens alone ----------------

// mad_recall / mad_noisy_recall. Keys [4, 4 + K), values [4 + K, 4 + C), noise above.
void check_recall_row(const Row& r, const TaskSpec& s, int64_t* noise_slots, int64_t* slots) {
  const int64_t noise = s.name == "mad_noisy_recall" ? s.noise_vocab : 0;
  const int64_t C = s.vocab - 4 - noise, K = C / 2, first_noise = 4 + C;
  const int64_t T = static_cast<int64_t>(r.tok.size());
  ASSERT_EQ(T, s.length - 1);
  std::vector<int64_t> seq = r.tok;
  seq.push_back(r.tgt[T - 1]);  // the probe's value is only a target
  std::map<int64_t, int64_t> value_of;
  std::vector<int64_t> mask(T, 0), label(T, -1);
  for (int64_t i = 0; 2 * i < s.length; ++i) {
    const int64_t k = seq[2 * i], v = seq[2 * i + 1];
    ++*slots;
    if (k >= first_noise) {
      ASSERT_GE(v, first_noise) << "a noise slot holds two noise tokens";
      ASSERT_LT(v, s.vocab);
      ++*noise_slots;
      continue;
    }
    ASSERT_GE(k, 4);
    ASSERT_LT(k, 4 + K) << "slot " << i << " starts with a key";
    ASSERT_GE(v, 4 + K);
    ASSERT_LT(v, first_noise);
    const auto it = value_of.find(k);
    if (it != value_of.end()) {
      EXPECT_EQ(v, it->second) << "a repeated key shows its first value";
      mask[2 * i] = 1, label[2 * i] = v;
    }
    value_of.emplace(k, v);
  }
  EXPECT_EQ(mask[T - 1], 1) << "the probe asks for a key shown before";
  for (int64_t t = 0; t < T; ++t) {
    EXPECT_EQ(r.mask[t], mask[t]) << "position " << t;
    EXPECT_EQ(r.tgt[t], seq[t + 1]) << "position " << t;  // next token, and on scored ones the value
  }
}

// mad_fuzzy_recall: a key is a maximal run of key tokens, its value the run of value tokens after.
void check_fuzzy_row(const Row& r, const TaskSpec& s, bool eval, std::set<int64_t>* key_sizes) {
  const int64_t C = s.vocab - 4, K = C / 2;
  const int64_t T = static_cast<int64_t>(r.tok.size());
  ASSERT_EQ(T, s.length);
  std::vector<int64_t> seq = r.tok;
  seq.push_back(r.tgt[T - 1]);
  auto is_key = [&](int64_t t) { return t >= 4 && t < 4 + K; };
  auto is_value = [&](int64_t t) { return t >= 4 + K && t < s.vocab; };
  int64_t p = 0;
  while (p < static_cast<int64_t>(seq.size()) && seq[p] == kTokenPad) ++p;
  ASSERT_GE(p, 1) << "at least one pad";
  std::map<std::vector<int64_t>, std::vector<int64_t>> value_of;
  std::vector<int64_t> mask(T, 0), ans(T, -1);
  std::vector<int64_t> last_key;
  int64_t answers = 0;
  const int64_t n = static_cast<int64_t>(seq.size());
  while (p < n) {
    std::vector<int64_t> k, v;
    while (p < n && is_key(seq[p])) k.push_back(seq[p++]);
    const int64_t v_start = p;
    while (p < n && is_value(seq[p])) v.push_back(seq[p++]);
    ASSERT_FALSE(k.empty()) << "a key at " << v_start;
    ASSERT_FALSE(v.empty()) << "a value at " << v_start;
    ASSERT_LE(static_cast<int64_t>(k.size()), s.key_len);
    ASSERT_LE(static_cast<int64_t>(v.size()), s.value_len);
    EXPECT_EQ(std::set<int64_t>(k.begin(), k.end()).size(), k.size()) << "distinct tokens within a key";
    EXPECT_EQ(std::set<int64_t>(v.begin(), v.end()).size(), v.size()) << "distinct tokens within a value";
    key_sizes->insert(static_cast<int64_t>(k.size()));
    if (eval) EXPECT_EQ(static_cast<int64_t>(k.size()), s.key_len) << "held-out keys have key_len tokens";
    const auto it = value_of.find(k);
    if (it != value_of.end()) {
      EXPECT_EQ(v, it->second) << "a repeated key shows its first value";
      for (int64_t q = v_start; q < v_start + static_cast<int64_t>(v.size()); ++q)
        mask[q - 1] = 1, ans[q - 1] = answers;
      ++answers;
    }
    value_of.emplace(k, v);
    last_key = k;
  }
  EXPECT_EQ(mask[T - 1], 1) << "the final probe's key was shown before";
  for (int64_t t = 0; t < T; ++t) {
    EXPECT_EQ(r.mask[t], mask[t]) << "position " << t;
    EXPECT_EQ(r.ans[t], ans[t]) << "position " << t;
    EXPECT_EQ(r.tgt[t], seq[t + 1]) << "position " << t;
  }
}

// ---- per task ------------------------------------------------------------------------------------

TEST(TrainTasksMad, RecallLabelsFollowFromTheTokens) {
  for (const std::string task : {"mad_recall", "mad_noisy_recall"}) {
    SCOPED_TRACE(task);
    const TaskSpec s = spec_of(task);
    int64_t noise = 0, slots = 0;
    for (int64_t i = 0; i < 3; ++i) {
      const Batch b = i == 0 ? task_eval_batch(s, 16, 0, 5) : task_train_batch(s, 16, i, 100, 5);
      expect_format(b, 16, s.length - 1);
      for (const Row& r : rows_of(b)) check_recall_row(r, s, &noise, &slots);
    }
    if (task == "mad_recall") EXPECT_EQ(noise, 0);
    // noise_frac of the S/2 - 2 slots that may be noise (not the probe, not the one kept pair).
    const double expected = s.noise_frac * static_cast<double>(s.length / 2 - 2) / static_cast<double>(s.length / 2);
    if (task == "mad_noisy_recall") EXPECT_NEAR(static_cast<double>(noise) / slots, expected, 0.04);
  }
  // Odd vocab and small sizes; a noise_frac of 0 is plain recall.
  TaskSpec s = spec_of("mad_noisy_recall");
  s.vocab = 4 + 3 + 2;  // 2 noise tokens, 1 key, 2 values
  s.noise_vocab = 2;
  s.length = 6;
  int64_t noise = 0, slots = 0;
  for (const Row& r : rows_of(task_eval_batch(s, 32, 0, 1))) check_recall_row(r, s, &noise, &slots);
  s.noise_frac = 0;
  noise = 0;
  for (const Row& r : rows_of(task_eval_batch(s, 32, 0, 1))) check_recall_row(r, s, &noise, &slots);
  EXPECT_EQ(noise, 0);
}

TEST(TrainTasksMad, FuzzyRecallLabelsFollowFromTheTokens) {
  const TaskSpec s = spec_of("mad_fuzzy_recall");
  std::set<int64_t> train_sizes, eval_sizes;
  for (int64_t i = 0; i < 2; ++i) {
    const Batch train = task_train_batch(s, 16, i, 100, 3);
    const Batch eval = task_eval_batch(s, 16, i, 3);
    expect_format(train, 16, s.length);
    expect_format(eval, 16, s.length);
    for (const Row& r : rows_of(train)) check_fuzzy_row(r, s, false, &train_sizes);
    for (const Row& r : rows_of(eval)) check_fuzzy_row(r, s, true, &eval_sizes);
  }
  EXPECT_EQ(train_sizes, (std::set<int64_t>{1, 2, 3})) << "training keys have 1..key_len tokens";
  EXPECT_EQ(eval_sizes, (std::set<int64_t>{3}));
  // The shortest length and odd sizes.
  TaskSpec t = s;
  t.key_len = 2;
  t.value_len = 1;
  t.length = 9;
  t.vocab = 4 + 4;  // 2 key tokens, 2 value tokens
  for (const Row& r : rows_of(task_eval_batch(t, 64, 0, 9))) check_fuzzy_row(r, t, true, &eval_sizes);
  for (const Row& r : rows_of(task_train_batch(t, 64, 0, 1, 9))) check_fuzzy_row(r, t, false, &train_sizes);
}

TEST(TrainTasksMad, MemorizationLabelIsAFixedFunctionOfTheKey) {
  const TaskSpec s = spec_of("mad_memorization");
  const int64_t K = (s.vocab - 4) / 2;
  std::map<int64_t, int64_t> seen;  // built from the batches alone
  for (int64_t i = 0; i < 4; ++i) {
    const Batch b = i % 2 ? task_eval_batch(s, 32, i, 8) : task_train_batch(s, 32, i, 10, 8 + i);
    expect_format(b, 32, s.length);
    for (const Row& r : rows_of(b)) {
      for (int64_t t = 0; t < s.length; t += 2) {
        ASSERT_GE(r.tok[t], 4);
        ASSERT_LT(r.tok[t], 4 + K);
        EXPECT_EQ(r.tok[t + 1], kTokenSep);
        EXPECT_EQ(r.mask[t], 0);
        EXPECT_EQ(r.mask[t + 1], 1);
        EXPECT_EQ(r.ans[t + 1], t / 2);
        const int64_t v = r.tgt[t + 1];
        ASSERT_GE(v, 4 + K);
        ASSERT_LT(v, s.vocab);
        const auto [it, fresh] = seen.emplace(r.tok[t], v);
        EXPECT_EQ(it->second, v) << "key " << r.tok[t] << " has one value in training and evaluation";
      }
    }
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), K) << "every key appears in 4 x 32 x 16 draws";
  std::set<int64_t> values;
  for (const auto& kv : seen) values.insert(kv.second);
  EXPECT_EQ(values.size(), seen.size()) << "the map is one-to-one";
  const auto map = mad_memorization_map(s);
  for (const auto& [k, v] : seen) EXPECT_EQ(map[k - 4], v);
  TaskSpec other = s;
  other.map_seed = 1;
  EXPECT_NE(mad_memorization_map(other), map) << "map_seed picks the map";
}

TEST(TrainTasksMad, CompressionReconstructsTheTokensAfterTheCompressionToken) {
  TaskSpec s = spec_of("mad_compression");
  for (int64_t length : {s.length, int64_t{2}, int64_t{5}}) {
    s.length = length;
    const int64_t m = length - 1;
    const Batch b = task_eval_batch(s, 8, 0, 4);
    expect_format(b, 8, 2 * m);
    for (const Row& r : rows_of(b)) {
      for (int64_t i = 0; i < m; ++i) {
        ASSERT_GE(r.tok[i], 4);
        EXPECT_EQ(r.mask[i], 0);
        EXPECT_EQ(r.tgt[m + i], r.tok[i]) << "position " << m + i << " reconstructs x_" << i + 1;
        EXPECT_EQ(r.mask[m + i], 1);
        EXPECT_EQ(r.ans[m + i], 0);
      }
      EXPECT_EQ(r.tok[m], kTokenSep);
      for (int64_t t = m + 1; t < 2 * m; ++t) EXPECT_EQ(r.tok[t], kTokenNoise) << "no content after kSep";
    }
  }
}

TEST(TrainTasksMad, SelectiveCopyAnswersAreTheContentTokensInOrder) {
  TaskSpec s = spec_of("selective_copy");
  // (copy tokens, length): the default, the smallest, and one blank among 5 tokens.
  for (const auto& [n, length] : std::vector<std::pair<int64_t, int64_t>>{{s.copy_tokens, s.length}, {1, 4}, {5, 12}}) {
    s.copy_tokens = n;
    s.length = length;
    const Batch b = task_train_batch(s, 16, 3, 10, 2);
    expect_format(b, 16, s.length);
    std::set<int64_t> first_positions;
    for (const Row& r : rows_of(b)) {
      const int64_t sep = s.length - n - 1;
      EXPECT_EQ(r.tok[sep], kTokenSep);
      std::vector<int64_t> content;
      for (int64_t t = 0; t < sep; ++t) {
        if (r.tok[t] == kTokenNoise) continue;
        ASSERT_GE(r.tok[t], 4);
        content.push_back(r.tok[t]);
        if (content.size() == 1) first_positions.insert(t);
      }
      ASSERT_EQ(static_cast<int64_t>(content.size()), n);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(r.tok[sep + 1 + i], kTokenNoise);
        EXPECT_EQ(r.mask[sep + 1 + i], 1);
        EXPECT_EQ(r.tgt[sep + 1 + i], content[i]);
      }
      for (int64_t t = 0; t <= sep; ++t) EXPECT_EQ(r.mask[t], 0);
    }
    EXPECT_GT(first_positions.size(), n == 5 ? 1u : n == 1 ? 1u : 3u) << "the tokens sit at random positions";
  }
}

TEST(TrainTasksMad, InductionAnswerIsTheTokenAfterTheFirstTrigger) {
  TaskSpec s = spec_of("induction");
  for (int64_t length : {s.length, int64_t{3}, int64_t{17}}) {
    s.length = length;
    const Batch b = task_eval_batch(s, 32, 1, 6);
    expect_format(b, 32, length + 1);
    for (const Row& r : rows_of(b)) {
      std::vector<int64_t> triggers;
      for (int64_t t = 0; t <= length; ++t) {
        if (r.tok[t] == kTokenSep) {
          triggers.push_back(t);
        } else {
          ASSERT_GE(r.tok[t], 4);
        }
      }
      ASSERT_EQ(triggers.size(), 2u) << "the special token appears twice";
      EXPECT_LT(triggers[0], length - 2);
      EXPECT_EQ(triggers[1], length);
      EXPECT_EQ(r.mask[length], 1);
      EXPECT_EQ(std::accumulate(r.mask.begin(), r.mask.end(), int64_t{0}), 1);
      EXPECT_EQ(r.tgt[length], r.tok[triggers[0] + 1]);
    }
  }
}

// ---- streams, errors, config, preset -------------------------------------------------------------

TEST(TrainTasksMad, DeterministicAndEvalStreamDisjointFromTraining) {
  for (const std::string& task : compare_preset_tasks("mad")) {
    SCOPED_TRACE(task);
    const TaskSpec s = spec_of(task);
    EXPECT_TRUE(same(task_train_batch(s, 4, 7, 100, 1), task_train_batch(s, 4, 7, 100, 1)));
    EXPECT_TRUE(same(task_eval_batch(s, 4, 2, 1), task_eval_batch(s, 4, 2, 1)));
    EXPECT_FALSE(same(task_train_batch(s, 4, 0, 100, 1), task_eval_batch(s, 4, 0, 1)));
    EXPECT_FALSE(same(task_train_batch(s, 4, 0, 100, 1), task_train_batch(s, 4, 1, 100, 1)));
    EXPECT_FALSE(same(task_eval_batch(s, 4, 0, 1), task_eval_batch(s, 4, 1, 1)));
    EXPECT_FALSE(same(task_eval_batch(s, 4, 0, 1), task_eval_batch(s, 4, 0, 2)));
    // No curriculum: step 0 of many trains at the full length.
    EXPECT_EQ(task_train_batch(s, 2, 0, 1000, 1).tokens.size(1), task_sequence_length(s, s.length));
  }
}

TEST(TrainTasksMad, BadInputIsAnErrorNamingTheField) {
  TaskSpec s = spec_of("mad_recall");
  s.length = 127;
  expect_error_contains([&] { task_validate(s); }, {"task mad_recall", "length must be even", "127"});
  s.length = 2;
  expect_error_contains([&] { task_validate(s); }, {"length must be >= 4", "got 2"});
  s = spec_of("mad_noisy_recall");
  s.vocab = 21;  // 16 noise tokens leave 1 for keys and values
  expect_error_contains([&] { task_validate(s); }, {"vocab 21 is too small", "16 noise tokens", "vocab must be >= 22"});
  s = spec_of("mad_noisy_recall");
  s.noise_frac = 1.0;
  expect_error_contains([&] { task_validate(s); }, "noise_frac must be in [0, 1), got 1");
  s = spec_of("mad_fuzzy_recall");
  s.key_len = 4;
  s.vocab = 4 + 7;  // 3 key tokens: no key of 4 distinct tokens
  expect_error_contains([&] { task_validate(s); },
                        {"task mad_fuzzy_recall", "vocab 11 is too small", "vocab must be >= 12"});
  s = spec_of("mad_fuzzy_recall");
  s.length = 17;
  expect_error_contains([&] { task_validate(s); }, {"length must be >= 18", "3 x (key_len + value_len)"});
  s.value_len = 0;
  expect_error_contains([&] { task_validate(s); }, "value_len must be >= 1, got 0");
  s = spec_of("mad_memorization");
  s.vocab = 5;
  expect_error_contains([&] { task_validate(s); }, {"task mad_memorization", "vocab must be >= 6"});
  s = spec_of("mad_compression");
  s.length = 1;
  expect_error_contains([&] { task_validate(s); }, {"task mad_compression", "length must be >= 2, got 1"});
  s = spec_of("selective_copy");
  s.copy_tokens = 16;
  s.length = 33;
  expect_error_contains([&] { task_validate(s); }, {"length must be > 2 x copy_tokens + 1 = 33", "got 33"});
  s.copy_tokens = 0;
  expect_error_contains([&] { task_validate(s); }, "copy_tokens must be >= 1, got 0");
  s = spec_of("induction");
  s.vocab = 4;
  expect_error_contains([&] { task_validate(s); },
                        {"task induction", "vocab must be >= 5 (4 special tokens + content), got 4"});
  s = spec_of("induction");
  expect_error_contains([&] { task_generate(s, 2, 2, 0, 1); }, "length must be in [3, 64]");
  expect_error_contains([&] { task_eval_batch(s, 0, 0, 1); }, "batch_size must be >= 1, got 0");
}

TEST(TrainTasksMad, ConfigKeysAndDefaults) {
  EXPECT_EQ(spec_of("mad_recall").vocab, 20);
  EXPECT_EQ(spec_of("mad_memorization").vocab, 259);
  EXPECT_EQ(spec_of("selective_copy").length, 64);
  EXPECT_EQ(spec_of("selective_copy").copy_tokens, 8);
  const TrainConfig c = config_from_json(
      {{"task", "mad_noisy_recall"}, {"noise_frac", 0.4}, {"noise_vocab", 8}, {"vocab", 28}, {"length", 64}}, "t");
  EXPECT_EQ(c.task.noise_frac, 0.4);
  EXPECT_EQ(c.task.noise_vocab, 8);
  const TrainConfig back = config_from_json(config_to_json(c), "round trip");
  EXPECT_EQ(back.task.noise_frac, 0.4);
  EXPECT_EQ(back.task.noise_vocab, 8);
  EXPECT_EQ(config_from_json({{"task", "mad_fuzzy_recall"}, {"key_len", 2}}, "t").task.key_len, 2);
  EXPECT_EQ(config_from_json({{"task", "selective_copy"}, {"copy_tokens", 4}}, "t").task.copy_tokens, 4);
  EXPECT_EQ(config_from_json({{"task", "mad_memorization"}, {"map_seed", 7}}, "t").task.map_seed, 7u);
  // Another task's config neither takes nor writes them.
  expect_error_contains(
      [] {
        config_from_json({{"task", "mad_recall"}, {"noise_frac", 0.4}}, "cfg.json");
      },
      {"config cfg.json", "key 'noise_frac' applies to task mad_noisy_recall only (task mad_recall)"});
  expect_error_contains(
      [] {
        config_from_json({{"key_len", 2}}, "cfg.json");
      },
      "key 'key_len' applies to task mad_fuzzy_recall only (task copy)");
  EXPECT_FALSE(config_to_json(config_from_json({{"task", "recall"}}, "t")).contains("noise_frac"));
  expect_error_contains(
      [] {
        config_from_json({{"task", "selective_copy"}, {"copy_tokens", 0}}, "cfg.json");
      },
      "key 'copy_tokens' must be >= 1, got 0");
  expect_error_contains(
      [] {
        config_from_json({{"task", "mad_recall"}, {"length", 33}}, "cfg.json");
      },
      {"config cfg.json", "task mad_recall: length must be even"});
}

TEST(TrainTasksMad, PresetMadHasEveryTaskAndOneMixerPerFamily) {
  const auto mixers = compare_preset_mixers("mad");
  std::map<std::string, int> per_family;
  for (const auto& m : mixers) {
    check_mixer_spec(m);
    ++per_family[m.substr(0, m.find(':'))];
  }
  for (const auto& f : mixer_families()) EXPECT_EQ(per_family[f.family], 1) << f.family;
  EXPECT_EQ(mixers.size(), mixer_families().size());
  EXPECT_EQ(compare_preset_mixers("default"), compare_default_mixers());
  EXPECT_EQ(compare_preset_tasks("default"), (std::vector<std::string>{"copy", "recall"}));
  for (const auto& task : compare_preset_tasks("mad")) {
    SCOPED_TRACE(task);
    const TrainConfig c = compare_config("mad", task, "attention", nlohmann::json::object());
    EXPECT_EQ(c.task.vocab, config_default_vocab(task));
    EXPECT_EQ(c.task.length, config_default_length(task));
    EXPECT_FALSE(c.task.curriculum);
    // MAD's model (mad-lab: dim 128, 16 heads, no weight decay), with which attention leaves
    // the recall plateau; warmup and evaluations fit the shortest budgets.
    EXPECT_EQ(c.d_model, 128);
    EXPECT_EQ(c.heads, 16);
    EXPECT_EQ(c.weight_decay, 0.0);
    EXPECT_LE(c.warmup, c.steps / 10);
    EXPECT_GT(c.eval_every, 0);
    EXPECT_LE(c.eval_every, c.steps / 4);
    EXPECT_EQ(c.stop_at, 0.99);
    // The budgets: long enough for the recurrent families on compression and induction (mamba
    // and gla were near their start after attention's 500 steps), 500 for memorization.
    if (task == "mad_compression" || task == "induction") EXPECT_EQ(c.steps, 4000);
    if (task == "mad_memorization") EXPECT_EQ(c.steps, 500);
    // A task-only override reaches its task only.
    const TrainConfig o = compare_config("mad", task, "attention", {{"noise_frac", 0.4}});
    EXPECT_EQ(o.task.noise_frac, task == "mad_noisy_recall" ? 0.4 : TaskSpec{}.noise_frac);
  }
  expect_error_contains([] { compare_config("mad", "copy", "attention", nlohmann::json::object()); },
                        "preset mad has the tasks mad_recall");
}

}  // namespace
}  // namespace task_mad_test
}  // namespace mixlab
