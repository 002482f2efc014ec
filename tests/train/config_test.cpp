// Training config: defaults, round trip, and an error naming the key for every bad input.
#include "mixlab/train/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "mixlab/train/compare.h"
#include "train_test_util.h"

namespace mixlab {
namespace {

using json = nlohmann::json;

TrainConfig parse(const std::string& text) { return config_from_json(json::parse(text), "test.json"); }

TEST(TrainConfig, DefaultsAndTaskDefaults) {
  const TrainConfig c = parse("{}");
  EXPECT_EQ(c.task.name, "copy");
  EXPECT_EQ(c.task.length, 16);
  EXPECT_EQ(c.mixer, "attention");
  EXPECT_EQ(c.eval_batch, c.batch);
  const TrainConfig r = parse(R"({"task": "recall"})");
  EXPECT_EQ(r.task.length, 64);
  EXPECT_EQ(r.task.pairs, 8);
}

TEST(TrainConfig, RoundTrip) {
  const TrainConfig c = parse(R"({"task": "multihop", "length": 48, "pairs": 6, "mixer": "local:8", "steps": 50,
                                  "warmup": 5, "lr": 0.001, "seed": 7, "curriculum": false})");
  const json j = config_to_json(c);
  const TrainConfig d = config_from_json(j, "roundtrip");
  EXPECT_EQ(config_to_json(d), j);
  EXPECT_EQ(d.task.length, 48);
  EXPECT_EQ(d.seed, 7u);
  EXPECT_FALSE(d.task.curriculum);
}

TEST(TrainConfig, ErrorsNameTheKey) {
  expect_error_contains([] { parse(R"({"d_modle": 64})"); }, {"test.json", "unknown key 'd_modle'"});
  expect_error_contains([] { parse(R"({"steps": "many"})"); }, {"key 'steps' must be an integer", "\"many\""});
  expect_error_contains([] { parse(R"({"steps": 0})"); }, "key 'steps' must be >= 1, got 0");
  expect_error_contains([] { parse(R"({"lr": -1})"); }, "key 'lr' must be > 0");
  expect_error_contains([] { parse(R"({"heads": 3})"); }, "key 'heads' must divide d_model (64), got 3");
  expect_error_contains([] { parse(R"({"task": "sort"})"); }, "key 'task' must be one of copy, recall, multihop");
  expect_error_contains([] { parse(R"({"curriculum": 1})"); }, "key 'curriculum' must be true or false");
  expect_error_contains([] { parse(R"({"warmup": 500, "steps": 100})"); }, "key 'warmup' must be in [0, steps=100]");
  expect_error_contains([] { parse(R"({"beta2": 1.0})"); }, "key 'beta2' must be in [0, 1)");
  expect_error_contains([] { parse(R"({"task": "recall", "pairs": 40})"); }, "40 pairs do not fit length 64");
  expect_error_contains([] { parse("[1, 2]"); }, "expected a JSON object");
}

TEST(TrainConfig, FileErrors) {
  const std::string path = ::testing::TempDir() + "mixlab_bad_config.json";
  {
    std::ofstream out(path);
    out << "{\"steps\": 10,,}";
  }
  expect_error_contains([&] { config_load(path); }, {path, "malformed JSON"});
  std::remove(path.c_str());
  expect_error_contains([&] { config_load(path); }, {path, "cannot open"});
}

TEST(TrainConfig, ResumeMismatchNamesTheKey) {
  const TrainConfig a = parse("{}");
  TrainConfig b = a;
  EXPECT_EQ(config_resume_mismatch(a, b), "");
  b.log_every = 99;  // cadence keys may differ
  EXPECT_EQ(config_resume_mismatch(a, b), "");
  b.d_model = 32;
  EXPECT_NE(config_resume_mismatch(a, b).find("key 'd_model' is 64 in the checkpoint but 32"), std::string::npos);
}

TEST(TrainConfig, LearningRateSchedule) {
  TrainConfig c = parse(R"({"steps": 100, "warmup": 10, "lr": 1.0})");
  EXPECT_DOUBLE_EQ(config_lr_at(c, 0), 0.1);
  EXPECT_DOUBLE_EQ(config_lr_at(c, 9), 1.0);
  EXPECT_DOUBLE_EQ(config_lr_at(c, 10), 1.0);
  EXPECT_NEAR(config_lr_at(c, 55), 0.5, 1e-12);
  EXPECT_NEAR(config_lr_at(c, 100), 0.0, 1e-12);
  for (int64_t s = 11; s < 100; ++s) EXPECT_LE(config_lr_at(c, s), config_lr_at(c, s - 1));
}

TEST(TrainConfig, ComparePresets) {
  const TrainConfig d = compare_config("default", "recall", "local:8", json::object());
  EXPECT_EQ(d.task.length, 64);
  EXPECT_EQ(d.task.pairs, 8);
  EXPECT_EQ(d.mixer, "local:8");
  EXPECT_FALSE(d.task.curriculum);
  // Fewer steps keep the preset's warmup fraction (60 / 600) unless warmup is given.
  EXPECT_EQ(compare_config("default", "copy", "attention", {{"steps", 100}}).warmup, 10);
  EXPECT_EQ(compare_config("default", "copy", "attention", {{"steps", 100}, {"warmup", 3}}).warmup, 3);
  const TrainConfig p = compare_config("paper", "multihop", "attention", json::object());
  EXPECT_EQ(p.d_model, 256);
  EXPECT_EQ(p.steps, 20000);
  EXPECT_EQ(p.batch, 1024);
  EXPECT_EQ(p.task.vocab, 8192);
  EXPECT_EQ(p.task.pairs, 64);
  EXPECT_DOUBLE_EQ(p.beta2, 0.98);
  expect_error_contains([] { compare_config("huge", "copy", "attention", json::object()); }, "unknown preset 'huge'");
  EXPECT_EQ(compare_default_mixers().size(), 9u);
}

}  // namespace
}  // namespace mixlab
