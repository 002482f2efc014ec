// The file task (mixlab/train/task_file.h): config resolution (length and vocab from the file,
// absolute paths), batches (masking, targets, answers), training rows from (seed, step) (epochs,
// bit-exact resume), evaluation covering the held-out rows once, and every bad input by message.
#include "mixlab/train/task_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "mixlab/core/atomic_file.h"
#include "mixlab/train/config.h"
#include "mixlab/train/trainer.h"
#include "support/expect_error.h"
#include "support/npy_bytes.h"
#include "support/test_mixer.h"

namespace task_file_test {

using namespace mixlab;
using namespace mixlab_test;

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string temp_file(const std::string& name, const std::string& bytes) {
  const fs::path dir = fs::path(::testing::TempDir()) / "mixlab_task_file_test";
  fs::create_directories(dir);
  const std::string path = (dir / name).string();
  atomic_write_file(path, bytes);
  return path;
}

// N rows of T positions: row n's inputs are n*T + t (so a row is known by its first token / T),
// labels score the odd positions with input + 1 and leave the rest -100.
struct Rows {
  int64_t N, T;
  std::vector<int64_t> inputs, labels;
};
Rows rows(int64_t N, int64_t T) {
  Rows r{N, T, {}, {}};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t x = n * T + t;
      r.inputs.push_back(x);
      r.labels.push_back(t % 2 ? x + 1 : kFileTaskIgnoreLabel);
    }
  return r;
}
std::string write_npz(const std::string& name, const Rows& r, bool deflate = false) {
  return temp_file(name, npz_inputs_labels(r.N, r.T, r.inputs, r.labels, deflate));
}

TaskSpec spec_of(const std::string& data, const std::string& eval_data = "") {
  json j = {{"task", "file"}, {"data", data}};
  if (!eval_data.empty()) j["eval_data"] = eval_data;
  return config_from_json(j, "test").task;
}

}  // namespace

TEST(TaskFile, ConfigTakesLengthAndVocabFromTheFile) {
  EXPECT_NE(std::find(task_names().begin(), task_names().end(), "file"), task_names().end());
  const std::string path = write_npz("cfg.npz", rows(20, 6));
  const TaskSpec s = spec_of(path);
  EXPECT_EQ(s.length, 6);
  EXPECT_EQ(s.vocab, 121);  // max(inputs 119, labels 120) + 1
  EXPECT_TRUE(fs::path(s.data).is_absolute());
  // A relative path is stored absolute: a checkpoint's config finds the data from anywhere.
  const fs::path cwd = fs::current_path();
  fs::current_path(fs::path(path).parent_path());
  const TaskSpec rel = spec_of("cfg.npz");
  fs::current_path(cwd);
  EXPECT_EQ(rel.data, fs::path(path).lexically_normal().string());
  // Explicit vocab (larger) and length (equal) are kept; the config round-trips.
  const TrainConfig c = config_from_json({{"task", "file"}, {"data", path}, {"vocab", 128}, {"length", 6}}, "t");
  EXPECT_EQ(c.task.vocab, 128);
  EXPECT_EQ(config_from_json(config_to_json(c), "rt").task.data, c.task.data);
  // Another task's config has no data keys; resuming a file run as a copy run names the key.
  TrainConfig copy;
  EXPECT_FALSE(config_to_json(copy).contains("data"));
  copy.task.length = 6;
  copy.task.vocab = 128;
  EXPECT_NE(config_resume_mismatch(c, copy).find("key 'data' is \"" + c.task.data), std::string::npos)
      << config_resume_mismatch(c, copy);
  expect_error(
      [&] {
        config_from_json({{"task", "file"}, {"data", path}, {"length", 8}}, "t");
      },
      {"config t", "key 'length' is 8", "T = 6", "leave 'length' unset"});
  expect_error(
      [&] {
        config_from_json({{"task", "file"}, {"data", path}, {"vocab", 40}}, "t");
      },
      {"vocab 40 does not cover the data", "array 'labels'", "row 19, column 5", "holds the token id 120", "[0, 40)",
       "max + 1 = 121"});
  expect_error([] { config_from_json({{"task", "file"}}, "t"); }, {"config t", "task file needs the key 'data'"});
  expect_error(
      [&] {
        config_from_json({{"task", "copy"}, {"data", path}}, "t");
      },
      {"'data' and 'eval_data' apply to task file only"});
  expect_error([&] { task_generate(spec_of(path), 2, 6, 0, 1); }, {"task file has no generator"});
}

TEST(TaskFile, BatchesMaskTheIgnoredLabels) {
  const Rows r = rows(20, 6);
  const TaskSpec s = spec_of(write_npz("mask.npz", r, /*deflate=*/true));
  const Batch b = task_train_batch(s, 5, 0, 10, 7);
  ASSERT_EQ(b.tokens.sizes(), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(b.length, 6);
  EXPECT_EQ(b.pairs, 0);
  for (int64_t i = 0; i < 5; ++i) {
    const int64_t n = b.tokens[i][0].item<int64_t>() / 6;  // the row this is (rows() above)
    for (int64_t t = 0; t < 6; ++t) {
      EXPECT_EQ(b.tokens[i][t].item<int64_t>(), r.inputs[n * 6 + t]);
      const int64_t label = r.labels[n * 6 + t];
      EXPECT_EQ(b.mask[i][t].item<float>(), label == kFileTaskIgnoreLabel ? 0.f : 1.f);
      EXPECT_EQ(b.targets[i][t].item<int64_t>(), label == kFileTaskIgnoreLabel ? 0 : label);
      EXPECT_EQ(b.answer[i][t].item<int64_t>(), label == kFileTaskIgnoreLabel ? -1 : 0);  // one answer per row
      EXPECT_EQ(b.hops[i][t].item<int64_t>(), -1);
    }
  }
  EXPECT_EQ(b.mask.scalar_type(), torch::kFloat32);
}

TEST(TaskFile, TrainingRowsAreEpochsDrawnFromSeedAndStep) {
  // 20 rows: the last max(1, 20/10) = 2 are held out, 18 train; batch 6 = 3 steps per epoch.
  const TaskSpec s = spec_of(write_npz("epochs.npz", rows(20, 4)));
  auto row_ids = [&](int64_t step, uint64_t seed) {
    const Batch b = task_train_batch(s, 6, step, 100, seed);
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < 6; ++i) ids.push_back(b.tokens[i][0].item<int64_t>() / 4);
    return ids;
  };
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::multiset<int64_t> seen;
    for (int64_t step = 3 * epoch; step < 3 * epoch + 3; ++step)
      for (int64_t id : row_ids(step, 5)) seen.insert(id);
    EXPECT_EQ(seen.size(), 18u);
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 18u) << "each train row once per epoch";
    EXPECT_LT(*seen.rbegin(), 18) << "held-out rows never train";
  }
  // A pure function of (seed, step): the same from a fresh call order (resume), another seed differs.
  const auto late = row_ids(4, 5);
  EXPECT_EQ(row_ids(0, 5), row_ids(0, 5));
  EXPECT_EQ(row_ids(4, 5), late);
  EXPECT_NE(row_ids(0, 5), row_ids(0, 6));
  EXPECT_NE(row_ids(0, 5), row_ids(3, 5)) << "each epoch has its own order";
  const auto order = file_task_epoch_order(18, 5, 1);
  EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()).size(), 18u);
}

TEST(TaskFile, EvaluationCoversTheHeldOutRowsOnce) {
  // 70 rows: the last 7 are held out, in batches of 3: 3 + 3 + 1.
  const TaskSpec s = spec_of(write_npz("eval.npz", rows(70, 4)));
  EXPECT_EQ(task_eval_batch_count(s, 3, 99), 3);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 3; ++i) {
    const Batch b = task_eval_batch(s, 3, i, 123);
    EXPECT_EQ(b.tokens.size(0), i < 2 ? 3 : 1);
    for (int64_t k = 0; k < b.tokens.size(0); ++k) ids.push_back(b.tokens[k][0].item<int64_t>() / 4);
  }
  EXPECT_EQ(ids, (std::vector<int64_t>{63, 64, 65, 66, 67, 68, 69}));
  expect_error([&] { task_eval_batch(s, 3, 3, 0); }, {"eval batch index must be in [0, 3)", "7 held-out rows"});
  // One held-out set: it is the test split, and there is no validation split to choose on.
  EXPECT_EQ(task_report_split(s), EvalSplit::kTest);
  expect_error([&] { task_eval_batch(s, 3, 0, 0, EvalSplit::kValid); },
               {"task file has one held-out set", "no separate validation split"});
  // Other tasks keep eval_batches.
  TaskSpec copy;
  EXPECT_EQ(task_eval_batch_count(copy, 3, 99), 99);
  // A separate eval file: all its rows are held out, all of data trains.
  const Rows held = rows(4, 4);
  const TaskSpec sep = spec_of(write_npz("train2.npz", rows(5, 4)), write_npz("test2.npz", held));
  EXPECT_EQ(task_eval_batch_count(sep, 3, 1), 2);
  EXPECT_EQ(file_task_data(sep.data, sep.eval_data)->train_inputs.size(0), 5);
}

TEST(TaskFile, NpyIsNextTokenPrediction) {
  // (20, 5) sequences -> T = 4: inputs columns 0..3, labels columns 1..4, every position scored.
  const std::string path = temp_file("seq.npy", npy_bytes("<i2", "(20, 5)", le_bytes<int16_t>([] {
                                                            std::vector<int64_t> v;
                                                            for (int64_t i = 0; i < 100; ++i) v.push_back(i % 7);
                                                            return v;
                                                          }())));
  const TaskSpec s = spec_of(path);
  EXPECT_EQ(s.length, 4);
  EXPECT_EQ(s.vocab, 7);
  const Batch b = task_eval_batch(s, 8, 0, 0);  // the last 2 rows: 90..99
  EXPECT_EQ(b.tokens[0][0].item<int64_t>(), 90 % 7);
  EXPECT_EQ(b.targets[0][0].item<int64_t>(), 91 % 7);
  EXPECT_EQ(b.mask.sum().item<float>(), 8.f);
}

TEST(TaskFile, TrainerEvaluatesEveryHeldOutRow) {
  at::set_num_threads(1);
  TrainConfig c = config_from_json({{"task", "file"},
                                    {"data", write_npz("trainer.npz", rows(40, 6))},
                                    {"d_model", 16},
                                    {"layers", 1},
                                    {"heads", 2},
                                    {"mlp_ratio", 2},
                                    {"steps", 4},
                                    {"warmup", 1},
                                    {"batch", 4},
                                    {"eval_batch", 3},
                                    {"eval_batches", 1}},
                                   "t");
  Trainer straight(c, test_mixer_factory());
  TrainOptions o;
  o.progress = false;
  const TrainResult r = straight.run(o);
  EXPECT_EQ(r.eval.answers, 4);            // 4 held-out rows, one answer each (eval_batches = 1 ignored)
  EXPECT_EQ(r.eval.answer_tokens, 4 * 3);  // 3 scored positions per row
  EXPECT_GE(r.eval.token_acc, 0.0);
  EXPECT_LE(r.eval.token_acc, 1.0);
  // Resume from the middle gives the same weights (rows from (seed, step)).
  const std::string ckpt = (fs::path(::testing::TempDir()) / "mixlab_task_file_resume.ckpt").string();
  Trainer first(c, test_mixer_factory());
  TrainOptions half = o;
  half.checkpoint_path = ckpt;
  half.until = 2;
  first.run(half);
  Trainer second(c, test_mixer_factory());
  TrainOptions rest = o;
  rest.resume_path = ckpt;
  second.run(rest);
  auto a = straight.model().parameters(), b = second.model().parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << i;
}

TEST(TaskFile, BadDataIsAnErrorNamingTheFile) {
  const Rows ok = rows(20, 4);
  const auto npz = [](int64_t n, int64_t t, std::vector<int64_t> in, std::vector<int64_t> lab) {
    return npz_inputs_labels(n, t, in, lab);
  };
  const auto fails = [](const std::string& name, const std::string& bytes, std::vector<std::string> fragments) {
    const std::string path = temp_file(name, bytes);
    fragments.insert(fragments.begin(), path);
    expect_error([&] { spec_of(path); }, fragments);
  };
  try {
    spec_of("/nonexistent/mixlab/rows.npz");
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/mixlab/rows.npz"), std::string::npos) << e.what();
  }
  fails("magic.npz", "not numpy at all", {"not a NumPy .npy or .npz file"});
  fails("float.npz",
        zip_bytes({{"inputs.npy", npy_bytes("<f4", "(1, 1)", "abcd")}, {"labels.npy", npy_i64(1, 1, {0})}}),
        {"array 'inputs'", "'<f4'", "float"});
  fails(
      "big.npz",
      zip_bytes({{"inputs.npy", npy_bytes(">i8", "(1, 1)", std::string(8, '\0'))}, {"labels.npy", npy_i64(1, 1, {0})}}),
      {"array 'inputs'", "big-endian"});
  fails("fortran.npz",
        zip_bytes({{"inputs.npy", npy_bytes("<i8", "(2, 2)", le_bytes<int64_t>({1, 2, 3, 4}), 1, "True")},
                   {"labels.npy", npy_i64(2, 2, {1, 2, 3, 4})}}),
        {"array 'inputs'", "Fortran"});
  fails("rank.npz",
        zip_bytes({{"inputs.npy", npy_bytes("<i8", "(4,)", le_bytes<int64_t>({1, 2, 3, 4}))},
                   {"labels.npy", npy_bytes("<i8", "(4,)", le_bytes<int64_t>({1, 2, 3, 4}))}}),
        {"array 'inputs'", "must be 2-D", "got shape (4,)"});
  fails("shape.npz",
        zip_bytes({{"inputs.npy", npy_i64(2, 2, {1, 2, 3, 4})}, {"labels.npy", npy_i64(1, 4, {1, 2, 3, 4})}}),
        {"'inputs' (2, 2) and 'labels' (1, 4) must have the same shape"});
  fails("nolabels.npz", zip_bytes({{"inputs.npy", npy_i64(1, 1, {1})}, {"targets.npy", npy_i64(1, 1, {1})}}),
        {"no array 'labels'", "expected arrays 'inputs' and 'labels'", "found inputs, targets"});
  fails("noinputs.npz", zip_bytes({}), {"no array 'inputs'", "found no arrays"});
  fails("zero.npz", npz(0, 4, {}, {}), {"array 'inputs'", "0 rows", "expected at least 1"});
  fails("zerot.npz", npz(3, 0, {}, {}), {"array 'inputs'", "0 positions per row"});
  std::vector<int64_t> bad = ok.labels;
  bad[5] = -1;
  fails("minus1.npz", npz(20, 4, ok.inputs, bad),
        {"array 'labels'", "has -1 at row 1, column 1", "expected -100 (not scored) or a token id >= 0"});
  bad[5] = -101;
  fails("minus101.npz", npz(20, 4, ok.inputs, bad), {"array 'labels'", "-101"});
  std::vector<int64_t> neg = ok.inputs;
  neg[2] = -3;
  fails("neginput.npz", npz(20, 4, neg, ok.labels),
        {"array 'inputs'", "has -3 at row 0, column 2", "expected token ids >= 0"});
  std::vector<int64_t> unscored = ok.labels;
  for (int64_t t = 0; t < 4; ++t) unscored[4 + t] = kFileTaskIgnoreLabel;
  fails("unscored.npz", npz(20, 4, ok.inputs, unscored), {"row 1 has no scored position"});
  fails("one.npz", npz(1, 4, {1, 2, 3, 4}, {1, 2, 3, 4}), {"has 1 row(s)", "leaves no training row", "eval_data"});
  fails("short.npy", npy_bytes("<i8", "(3, 1)", le_bytes<int64_t>({1, 2, 3})), {"the .npy array", "T+1 >= 2"});
  // Labels or inputs beyond an explicit vocab: named by array, row and column.
  const std::string path = write_npz("vocab.npz", ok);
  expect_error(
      [&] {
        config_from_json({{"task", "file"}, {"data", path}, {"vocab", 80}}, "t");
      },
      {"vocab 80 does not cover", "array 'labels'", "token id 80"});
  // An eval file of another T.
  const std::string other = write_npz("otherT.npz", rows(3, 5));
  expect_error([&] { spec_of(path, other); }, {other, "T = 5", "T = 4", "expected the same T"});
}

}  // namespace task_file_test
