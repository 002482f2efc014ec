// Length sweeps (seed 004 Fig. 3 / 4): error against length beyond the training length, the
// max_len config key that allows it, the length-list syntax, and compare's sweep outputs.
#include "mixlab/train/length_sweep.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "mixlab/train/compare_report.h"
#include "mixlab/train/trainer.h"
#include "train_test_util.h"

namespace mixlab {
namespace length_sweep_test {
namespace {

using json = nlohmann::json;

TrainConfig s5_config(int64_t max_len) {
  return config_from_json(json{{"task", "s5"},
                               {"vocab", 128},
                               {"length", 8},
                               {"d_model", 16},
                               {"heads", 2},
                               {"layers", 1},
                               {"steps", 2},
                               {"batch", 4},
                               {"max_len", max_len}},
                          "test");
}

TEST(TrainConfig, MaxLenSetsTheModelsLongestSequence) {
  EXPECT_EQ(model_dims_for(s5_config(0)).max_len, 8) << "0 = the task's longest training sequence";
  EXPECT_EQ(model_dims_for(s5_config(40)).max_len, 40);
  const TrainConfig c = s5_config(40);
  EXPECT_EQ(config_from_json(config_to_json(c), "round trip").max_len, 40);
  expect_error_contains([] { s5_config(7); }, {"max_len", "[8,", "got 7"});
  expect_error_contains([] { s5_config(int64_t{1} << 21); }, {"max_len"});
  // A checkpoint written before the key existed has no max_len: it reads as 0.
  json old = config_to_json(c);
  old.erase("max_len");
  EXPECT_EQ(config_from_json(old, "old checkpoint").max_len, 0);
}

TEST(LengthSweep, EvaluatesBeyondTheTrainingLengthOnFixedRows) {
  torch::manual_seed(0);
  Trainer trainer(s5_config(40));
  DecoderModel& model = trainer.model();
  const TaskSpec& spec = trainer.config().task;
  const std::vector<int64_t> lengths = {1, 8, 40};
  const auto a = length_sweep(model, spec, lengths, 24, 64, 5);
  ASSERT_EQ(a.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].length, lengths[i]);
    EXPECT_EQ(a[i].rows, 24);
    EXPECT_GE(a[i].token_error, 0.0);
    EXPECT_LE(a[i].token_error, 1.0);
    // s5 scores every position as its own answer.
    EXPECT_DOUBLE_EQ(a[i].token_error, a[i].answer_error);
  }
  // With one permutation the last position is the only one.
  EXPECT_DOUBLE_EQ(a[0].final_error, a[0].token_error);
  // An untrained model is near chance (119/120 wrong) on long rows, not exactly right anywhere.
  EXPECT_GT(a[2].token_error, 0.8);
  // The rows depend on the seed and the length only, not on how they are batched.
  const auto b = length_sweep(model, spec, lengths, 24, 5, 5);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i].token_error, b[i].token_error, 1e-9);
  const auto again = length_sweep(model, spec, lengths, 24, 64, 5);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].token_error, again[i].token_error);
}

TEST(LengthSweep, RecallKeepsThePairCountAtEveryLength) {
  torch::manual_seed(0);
  TrainConfig c = config_from_json(json{{"task", "recall"},
                                        {"vocab", 32},
                                        {"length", 24},
                                        {"pairs", 4},
                                        {"d_model", 16},
                                        {"heads", 2},
                                        {"layers", 1},
                                        {"steps", 2},
                                        {"batch", 4},
                                        {"max_len", 64}},
                                   "test");
  Trainer trainer(c);
  const auto e = length_sweep(trainer.model(), c.task, {11, 24, 64}, 8, 8, 1);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[2].length, 64);
  // 2 pairs + 3 positions is the shortest row holding 4 pairs.
  expect_error_contains([&] { length_sweep(trainer.model(), c.task, {10}, 8, 8, 1); },
                        {"length 10", "minimum 11", "4 pairs"});
}

TEST(LengthSweep, BadArgumentsAreNamed) {
  torch::manual_seed(0);
  Trainer trainer(s5_config(40));
  DecoderModel& model = trainer.model();
  const TaskSpec spec = trainer.config().task;
  expect_error_contains([&] { length_sweep(model, spec, {41}, 4, 4, 0); },
                        {"length 41", "max_len 40", "max_len >= 41"});
  expect_error_contains([&] { length_sweep(model, spec, {}, 4, 4, 0); }, "lengths is empty");
  expect_error_contains([&] { length_sweep(model, spec, {4}, 0, 4, 0); }, {"rows", "got 0"});
  expect_error_contains([&] { length_sweep(model, spec, {4}, 4, 0, 0); }, {"batch_size", "got 0"});
  TaskSpec lm = spec;
  lm.name = "lm";
  expect_error_contains([&] { length_sweep(model, lm, {4}, 4, 4, 0); }, "task lm has no length sweep");
}

TEST(LengthSweep, ListSyntax) {
  const auto l = length_list_parse("1-18,24-180/12", "test");
  EXPECT_EQ(l.size(), 18u + 14u);
  EXPECT_EQ(l.front(), 1);
  EXPECT_EQ(l.back(), 180);
  EXPECT_EQ(length_list_parse("8,4,4", "test"), (std::vector<int64_t>{4, 8})) << "sorted, distinct";
  EXPECT_EQ(length_list_parse("10-25/10", "test"), (std::vector<int64_t>{10, 20, 25})) << "the end is included";
  expect_error_contains([] { length_list_parse("0", "--sweep s5"); }, {"--sweep s5", "'0'"});
  expect_error_contains([] { length_list_parse("9-3", "--sweep s5"); }, {"--sweep s5", "'9-3'", "end"});
  expect_error_contains([] { length_list_parse("4,,8", "--sweep s5"); }, {"--sweep s5", "''"});
  expect_error_contains([] { length_list_parse("4-8/0", "--sweep s5"); }, {"step"});
  expect_error_contains([] { length_list_parse("x", "--sweep s5"); }, {"'x'"});
}

TEST(TrainCompare, SweepWritesCurvesPerMixerAndSeed) {
  const auto dir = std::filesystem::temp_directory_path() / "mixlab_compare_sweep_test";
  std::filesystem::remove_all(dir);
  CompareOptions o;
  o.tasks = {"copy"};
  o.mixers = {"attention", "local:2"};
  o.overrides = {{"steps", 3}, {"d_model", 16}, {"heads", 2},        {"layers", 1},
                 {"batch", 4}, {"length", 6},   {"eval_batches", 1}, {"eval_batch", 8}};
  o.out_dir = dir.string();
  o.progress = false;
  o.seeds = 2;
  o.sweep_lengths = {{"copy", {2, 6, 12}}};  // 12 is beyond the training length 6
  o.sweep_rows = 16;
  const CompareReport rep = compare_run(o);
  ASSERT_EQ(rep.rows.size(), 2u);
  EXPECT_EQ(rep.trained_length.at("copy"), 6);
  for (const auto& r : rep.rows) {
    ASSERT_TRUE(r.ran) << r.note;
    ASSERT_EQ(r.sweep.at("copy").size(), 2u) << "one curve per seed";
    EXPECT_EQ(r.sweep.at("copy")[0].back().length, 12);
  }
  compare_write(rep, o.out_dir);
  std::ifstream csv(dir / "by_length.csv");
  std::string header, line;
  std::getline(csv, header);
  EXPECT_EQ(header, "mixer,task,seed,length,rows,token_error,answer_error,final_error");
  int lines = 0;
  while (std::getline(csv, line)) ++lines;
  EXPECT_EQ(lines, 2 * 2 * 3) << "mixers x seeds x lengths";
  EXPECT_TRUE(std::filesystem::exists(dir / "by_length_copy.png"));
  const std::string table = compare_table_text(rep);
  EXPECT_NE(table.find("copy: token error (%) by length"), std::string::npos) << table;
  // A run whose sweep ends beyond the rows' answers: every final error is a fraction of rows.
  for (const auto& e : rep.rows[0].sweep.at("copy")[0]) {
    EXPECT_GE(e.final_error, 0.0);
    EXPECT_LE(e.final_error, 1.0);
  }
  EXPECT_NE(table.find("lengths > 6"), std::string::npos) << table;
  // A sweep for a task that does not run is named.
  o.sweep_lengths = {{"s5", {4}}};
  expect_error_contains([&] { compare_run(o); }, {"--sweep", "'s5'", "not in --tasks"});
  std::filesystem::remove_all(dir);
}

TEST(TrainConfig, PsmPresetSweepsItsTasks) {
  const TrainConfig s5 = compare_config("psm", "s5", "tpsm:c=1", json::object());
  EXPECT_EQ(s5.task.length, 18);
  EXPECT_TRUE(s5.task.curriculum);
  const TrainConfig r = compare_config("psm", "recall", "tpsm:c=64", json::object());
  EXPECT_EQ(r.task.length, 256);
  EXPECT_EQ(r.task.pairs, 8);
  const auto sweeps = compare_preset_sweeps("psm", {"s5", "recall"});
  EXPECT_EQ(sweeps.at("s5").back(), 180);
  EXPECT_EQ(sweeps.at("recall").back(), 256);
  EXPECT_TRUE(compare_preset_sweeps("default", {"recall"}).empty());
  // default and table1 sweep copy over the lengths it trains on: [L/2, L], or [min_length, L].
  const std::vector<int64_t> trained = {8, 9, 10, 11, 12, 13, 14, 15, 16};
  EXPECT_EQ(compare_preset_sweeps("default", {"copy", "recall"}).at("copy"), trained);
  EXPECT_EQ(compare_preset_sweeps("table1", {"copy"}).at("copy"), trained);
  EXPECT_EQ(compare_preset_sweeps("default", {"copy"}, json{{"length", 24}, {"min_length", 20}}).at("copy"),
            (std::vector<int64_t>{20, 21, 22, 23, 24}));
  expect_error_contains([] { compare_config("psm", "copy", "attention", json::object()); },
                        {"preset psm", "s5 and recall", "'copy'"});
}

}  // namespace
}  // namespace length_sweep_test
}  // namespace mixlab
