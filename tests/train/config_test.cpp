// Training config: defaults, round trip, and an error naming the key for every bad input.
#include "mixlab/train/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "mixlab/train/compare.h"
#include "mixlab/train/tasks.h"
#include "mixlab_test_paths.h"
#include "train_test_util.h"

namespace mixlab {
namespace config_test {
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

TEST(TrainConfig, EveryTaskValidatesWithItsDefaults) {
  // `mixlab train --task X` trains every built-in task without --set (s5's vocabulary follows
  // its group: 4 + 5! = 124; S3's 4 + 3! = 10).
  for (const std::string& task : task_names()) {
    if (task == "file") continue;  // needs data=PATH: its own tests
    SCOPED_TRACE(task);
    EXPECT_NO_THROW(parse(fmt::format(R"({{"task": "{}"}})", task)));
  }
  const TrainConfig s5 = parse(R"({"task": "s5"})");
  EXPECT_EQ(s5.task.vocab, 124);
  EXPECT_EQ(s5.task.length, 18);
  EXPECT_EQ(parse(R"({"task": "s5", "elements": 3})").task.vocab, 10);
  EXPECT_EQ(parse(R"({"task": "s5", "vocab": 200})").task.vocab, 200);
}

// compare --lr and stop_at choose on the validation split and report the test split: for every
// generated task the two are different rows (the MAD suite, selective copying and induction read
// the test stream for both until 2026-11-27).
TEST(TrainConfig, EveryGeneratedTaskHasDistinctValidationAndTestRows) {
  for (const std::string& task : task_names()) {
    if (task == "file" || task == "lm" || task == "textcopy") continue;  // data files: their own tests
    SCOPED_TRACE(task);
    const TaskSpec spec = parse(fmt::format(R"({{"task": "{}"}})", task)).task;
    const Batch test = task_eval_batch(spec, 4, 0, 5, EvalSplit::kTest);
    const Batch valid = task_eval_batch(spec, 4, 0, 5, EvalSplit::kValid);
    EXPECT_TRUE(torch::equal(test.tokens, task_eval_batch(spec, 4, 0, 5).tokens)) << "the reported split";
    EXPECT_FALSE(torch::equal(valid.tokens, test.tokens));
  }
}

TEST(TrainConfig, LmDataSources) {
  const TrainConfig brown = parse(R"({"task": "lm"})");
  EXPECT_FALSE(config_to_json(brown).contains("corpus"));  // a Brown run's config reads as before
  const TrainConfig text = parse(R"({"task": "lm", "corpus": "some/dir/../texts"})");
  EXPECT_TRUE(std::filesystem::path(text.task.corpus).is_absolute());
  EXPECT_EQ(std::filesystem::path(text.task.corpus).filename(), "texts");
  EXPECT_EQ(text.task.vocab, 256);
  EXPECT_EQ(config_from_json(config_to_json(text), "rt").task.corpus, text.task.corpus);
  const TrainConfig bin = parse(R"({"task": "lm", "tokens": "/data/owt"})");
  EXPECT_EQ(bin.task.tokenizer, "gpt2");  // nanoGPT's token files are GPT-2 ids
  EXPECT_EQ(bin.task.vocab, 50257);
  EXPECT_EQ(parse(R"({"task": "lm", "tokens": "/d", "vocab": 50304})").task.vocab, 50304);
  const TrainConfig chars = parse(R"({"task": "lm", "tokens": "/d", "tokenizer": "ids", "vocab": 65})");
  EXPECT_EQ(chars.task.vocab, 65);
  // Resuming with another data source is another run.
  EXPECT_NE(config_resume_mismatch(brown, text).find("key 'corpus'"), std::string::npos);
  EXPECT_NE(config_resume_mismatch(text, brown).find("key 'corpus'"), std::string::npos);
  EXPECT_EQ(config_resume_mismatch(text, text), "");

  expect_error_contains([] { parse(R"({"task": "copy", "corpus": "x"})"); }, "key 'corpus' applies to task lm only");
  expect_error_contains([] { parse(R"({"task": "lm", "corpus": "x", "tokens": "y"})"); },
                        "corpus and tokens are two sources of data");
  expect_error_contains([] { parse(R"({"task": "lm", "tokens": "/d", "tokenizer": "ids"})"); },
                        "tokenizer 'ids' needs key 'vocab'");
  expect_error_contains([] { parse(R"({"task": "lm", "tokenizer": "ids", "vocab": 65})"); },
                        "tokenizer ids reads token files");
  expect_error_contains([] { parse(R"({"task": "lm", "tokens": "/d", "vocab": 1000})"); },
                        "vocab must be in [50257, 65536] for the gpt2 tokenizer");
  expect_error_contains([] { parse(R"({"task": "lm", "tokens": "/d", "tokenizer": "ids", "vocab": 70000})"); },
                        "vocab must be in [1, 65536]");
  expect_error_contains([] { parse(R"({"task": "lm", "corpus": "/d", "vocab": 300})"); },
                        "vocab must be the bytes tokenizer's vocabulary size 256");
}

TEST(TrainConfig, Schedules) {
  // warmup 10 of 100 steps, lr 1.
  const TrainConfig cos = parse(R"({"steps": 100, "warmup": 10, "lr": 1})");
  EXPECT_EQ(cos.schedule, "cosine");
  EXPECT_DOUBLE_EQ(config_lr_at(cos, 0), 0.1);
  EXPECT_DOUBLE_EQ(config_lr_at(cos, 9), 1.0);
  EXPECT_DOUBLE_EQ(config_lr_at(cos, 10), 1.0);
  EXPECT_NEAR(config_lr_at(cos, 55), 0.5, 1e-12);
  const TrainConfig con = parse(R"({"steps": 100, "warmup": 10, "lr": 1, "schedule": "constant"})");
  EXPECT_DOUBLE_EQ(config_lr_at(con, 5), 0.6);
  EXPECT_DOUBLE_EQ(config_lr_at(con, 99), 1.0);
  // wsd with decay_frac 0.2: constant through step 79, then linear to 0 at step 100.
  const TrainConfig wsd = parse(R"({"steps": 100, "warmup": 10, "lr": 1, "schedule": "wsd", "decay_frac": 0.2})");
  EXPECT_DOUBLE_EQ(config_lr_at(wsd, 10), 1.0);
  EXPECT_DOUBLE_EQ(config_lr_at(wsd, 79), 1.0);
  EXPECT_DOUBLE_EQ(config_lr_at(wsd, 80), 1.0);
  EXPECT_DOUBLE_EQ(config_lr_at(wsd, 90), 0.5);
  EXPECT_NEAR(config_lr_at(wsd, 99), 0.05, 1e-12);
  EXPECT_EQ(config_from_json(config_to_json(wsd), "rt").schedule, "wsd");
  expect_error_contains([] { parse(R"({"schedule": "linear"})"); },
                        "key 'schedule' must be cosine, wsd or constant, got 'linear'");
  expect_error_contains([] { parse(R"({"decay_frac": 0})"); }, "key 'decay_frac' must be in (0, 1]");
  expect_error_contains([] { parse(R"({"stop_at": 1.5, "eval_every": 10})"); }, "key 'stop_at' must be in (0, 1]");
  expect_error_contains([] { parse(R"({"stop_at": 0.9})"); }, "'stop_at' needs 'eval_every' > 0");
  // stop_at only decides where a run ends: a resume may change it.
  EXPECT_EQ(config_resume_mismatch(parse(R"({"eval_every": 5})"), parse(R"({"eval_every": 5, "stop_at": 0.5})")), "");
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
  EXPECT_EQ(d.task.elements, 5);  // s5's group: S5 unless the config names another
  const TrainConfig s3 = parse(R"({"task": "s5", "vocab": 16, "length": 18, "elements": 3})");
  EXPECT_EQ(s3.task.elements, 3);
  EXPECT_EQ(config_from_json(config_to_json(s3), "roundtrip").task.elements, 3);
  EXPECT_EQ(d.task.curriculum_phases, 4);  // the seed's schedule unless the config names another
  const TrainConfig two = parse(R"({"task": "recall", "length": 256, "curriculum_phases": 2})");
  EXPECT_EQ(two.task.curriculum_phases, 2);
  EXPECT_EQ(config_from_json(config_to_json(two), "roundtrip").task.curriculum_phases, 2);
  // min_length is written only when set, so configs without it read as before.
  EXPECT_FALSE(j.contains("min_length"));
  const TrainConfig full = parse(R"({"task": "copy", "length": 16, "min_length": 16})");
  EXPECT_EQ(full.task.min_length, 16);
  EXPECT_EQ(config_from_json(config_to_json(full), "roundtrip").task.min_length, 16);
  EXPECT_NE(config_resume_mismatch(parse(R"({"task": "copy"})"), full).find("key 'min_length'"), std::string::npos);
}

TEST(TrainConfig, ErrorsNameTheKey) {
  expect_error_contains([] { parse(R"({"d_modle": 64})"); }, {"test.json", "unknown key 'd_modle'"});
  expect_error_contains([] { parse(R"({"steps": "many"})"); }, {"key 'steps' must be an integer", "\"many\""});
  expect_error_contains([] { parse(R"({"steps": 0})"); }, "key 'steps' must be >= 1, got 0");
  expect_error_contains([] { parse(R"({"lr": -1})"); }, "key 'lr' must be in (0, 1e30], got -1");
  // Overflow is named at its key, not deep in the optimiser's float arithmetic.
  expect_error_contains([] { parse(R"({"lr": 1e300})"); }, "key 'lr' must be in (0, 1e30], got 1e+300");
  expect_error_contains([] { parse(R"({"weight_decay": 1e300})"); }, "key 'weight_decay' must be in [0, 1e30]");
  expect_error_contains([] { parse(R"({"grad_clip": 1e300})"); }, "key 'grad_clip' must be in (0, 1e30]");
  expect_error_contains([] { parse(R"({"heads": 3})"); }, "key 'heads' must divide d_model (64), got 3");
  expect_error_contains([] { parse(R"({"task": "sort"})"); }, "key 'task' must be one of copy, recall, multihop");
  expect_error_contains([] { parse(R"({"curriculum": 1})"); }, "key 'curriculum' must be true or false");
  expect_error_contains([] { parse(R"({"warmup": 500, "steps": 100})"); }, "key 'warmup' must be in [0, steps=100]");
  expect_error_contains([] { parse(R"({"beta2": 1.0})"); }, "key 'beta2' must be in [0, 1)");
  expect_error_contains([] { parse(R"({"task": "recall", "pairs": 40})"); }, "40 pairs do not fit length 64");
  expect_error_contains([] { parse("[1, 2]"); }, "expected a JSON object");
  expect_error_contains([] { parse(R"({"curriculum_phases": 0})"); }, "key 'curriculum_phases' must be >= 1, got 0");
  expect_error_contains([] { parse(R"({"min_length": -1})"); }, "key 'min_length' must be >= 0, got -1");
  expect_error_contains([] { parse(R"({"task": "copy", "min_length": 17})"); }, "min_length must be 0");
  expect_error_contains([] { parse(R"({"task": "s5", "min_length": 4})"); }, "min_length applies to copy");
  expect_error_contains([] { parse(R"({"curriculum_phases": 9})"); },
                        "key 'curriculum_phases' must be <= 8 (out of range), got 9");
  expect_error_contains([] { parse(R"({"task": "s5", "vocab": 128, "length": 18, "elements": 6})"); },
                        {"elements", "[2, 5]", "got 6"});
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
  // Fewer steps keep the preset's warmup fraction (200 / 2000) unless warmup is given.
  EXPECT_EQ(compare_config("default", "copy", "attention", {{"steps", 100}}).warmup, 10);
  EXPECT_EQ(compare_config("default", "copy", "attention", {{"steps", 100}, {"warmup", 3}}).warmup, 3);
  const TrainConfig p = compare_config("paper", "multihop", "attention", json::object());
  EXPECT_EQ(p.d_model, 256);
  EXPECT_EQ(p.steps, 20000);
  EXPECT_EQ(p.batch, 1024);
  EXPECT_EQ(p.task.vocab, 8192);
  EXPECT_EQ(p.task.pairs, 64);
  EXPECT_DOUBLE_EQ(p.beta2, 0.98);
  // table1: the default's model and tasks; copy at d_model 128 for 14000 steps at 3e-3 (2000 for the
  // two mixers that solve it there), recall 8000 and multihop 16000 at 1e-3.
  const TrainConfig t1 = compare_config("table1", "recall", "resolvent:dense", json::object());
  EXPECT_EQ(t1.d_model, 64);
  EXPECT_EQ(t1.task.length, 64);
  EXPECT_EQ(t1.task.pairs, 8);
  EXPECT_EQ(t1.steps, 8000);
  EXPECT_DOUBLE_EQ(t1.lr, 1e-3);
  EXPECT_FALSE(t1.task.curriculum);
  EXPECT_EQ(compare_config("table1", "multihop", "attention", json::object()).steps, 16000);
  const TrainConfig t1c = compare_config("table1", "copy", "resolvent:square", json::object());
  EXPECT_EQ(t1c.d_model, 128);
  EXPECT_EQ(t1c.steps, 14000);
  EXPECT_DOUBLE_EQ(t1c.lr, 3e-3);
  EXPECT_EQ(t1c.eval_every, 2000);
  for (const char* solved : {"attention", "resolvent:dense"})
    EXPECT_EQ(compare_config("table1", "copy", solved, json::object()).steps, 2000) << solved;
  for (const char* climbing : {"ssm", "local:8"})
    EXPECT_EQ(compare_config("table1", "copy", climbing, json::object()).steps, 14000) << climbing;
  EXPECT_EQ(compare_config("table1", "copy", "attention", {{"steps", 500}}).steps, 500);
  // Overriding steps scales warmup by the mixer's own plan: its preset budget gives its preset run.
  EXPECT_EQ(compare_config("table1", "copy", "attention", {{"steps", 2000}}).warmup, t1c.warmup);
  EXPECT_EQ(compare_config("table1", "copy", "resolvent:square", {{"steps", 7000}}).warmup, t1c.warmup / 2);
  EXPECT_EQ(compare_config("table1", "recall", "local:8", {{"steps", 600}}).warmup,
            compare_config("table1", "recall", "local:8", json::object()).warmup);
  EXPECT_EQ(compare_config("default", "copy", "attention", json::object()).steps, 2000);
  EXPECT_EQ(compare_config("default", "multihop", "attention", json::object()).steps, 600);
  expect_error_contains([] { compare_config("table1", "s5", "attention", json::object()); },
                        "preset table1 has the tasks copy, recall and multihop, got 's5'");
  expect_error_contains([] { compare_config("huge", "copy", "attention", json::object()); }, "unknown preset 'huge'");
  EXPECT_EQ(compare_default_mixers().size(), 9u);
}

// The main job's recall: a rate and a step budget per mixer, written in the preset and shown in
// the table; an explicit lr or steps applies to every mixer; table1 keeps its own schedule.
TEST(TrainConfig, ComparePresetPerMixerSettings) {
  const TrainConfig att = compare_config("default", "recall", "attention", json::object());
  EXPECT_DOUBLE_EQ(att.lr, 1e-3);
  EXPECT_EQ(att.steps, 5000);
  EXPECT_EQ(att.schedule, "wsd");
  EXPECT_DOUBLE_EQ(att.stop_at, 0.95);
  EXPECT_EQ(att.eval_every, 250);
  EXPECT_DOUBLE_EQ(compare_config("default", "recall", "resolvent:dense", json::object()).lr, 2e-3);
  EXPECT_DOUBLE_EQ(compare_config("default", "recall", "resolvent:pow2", json::object()).lr, 1e-3);
  EXPECT_DOUBLE_EQ(compare_config("default", "recall", "resolvent:pow2+cache", json::object()).lr, 7e-4);
  EXPECT_DOUBLE_EQ(compare_config("default", "recall", "resolvent:square+cache", json::object()).lr, 7e-4);
  EXPECT_DOUBLE_EQ(compare_config("default", "recall", "resolvent:order:8", json::object()).lr, 7e-4);
  EXPECT_DOUBLE_EQ(compare_config("default", "copy", "resolvent:pow2+cache", json::object()).lr, 3e-3);
  EXPECT_EQ(compare_config("default", "recall", "local:8", json::object()).steps, 600);
  EXPECT_EQ(compare_config("default", "recall", "ssm", json::object()).steps, 600);
  EXPECT_EQ(compare_config("default", "recall", "resolvent:pow2", json::object()).steps, 5000);
  EXPECT_DOUBLE_EQ(compare_config("default", "recall", "attention", {{"lr", 3e-3}}).lr, 3e-3);
  EXPECT_EQ(compare_config("default", "recall", "local:8", {{"steps", 100}}).steps, 100);
  // copy and multihop are as before.
  const TrainConfig copy = compare_config("default", "copy", "attention", json::object());
  EXPECT_DOUBLE_EQ(copy.lr, 3e-3);
  EXPECT_EQ(copy.schedule, "cosine");
  EXPECT_DOUBLE_EQ(copy.stop_at, 0.0);
  EXPECT_EQ(compare_config("default", "multihop", "local:8", json::object()).steps, 600);
  const TrainConfig t1 = compare_config("table1", "recall", "attention", json::object());
  EXPECT_EQ(t1.steps, 8000);
  EXPECT_EQ(t1.schedule, "cosine");
  EXPECT_DOUBLE_EQ(t1.stop_at, 0.0);
  EXPECT_EQ(t1.eval_every, 2000);
  EXPECT_EQ(compare_config("table1", "recall", "local:8", json::object()).steps, 600);
  EXPECT_EQ(compare_config("table1", "recall", "ssm", json::object()).steps, 600);
  EXPECT_EQ(compare_config("table1", "recall", "resolvent:pow2", json::object()).steps, 8000);
  EXPECT_EQ(compare_config("table1", "multihop", "local:8", json::object()).steps, 600);
  // The mixers that stay on multihop's plateau get 4000 steps; order:8 (it creeps) keeps 16000.
  EXPECT_EQ(compare_config("table1", "multihop", "ssm", json::object()).steps, 4000);
  EXPECT_EQ(compare_config("table1", "multihop", "resolvent:square+cache", json::object()).steps, 4000);
  EXPECT_EQ(compare_config("table1", "multihop", "resolvent:order:8", json::object()).steps, 16000);
  // table1's multihop keeps its rate until the late plateau break (wsd); recall and copy stay cosine.
  const TrainConfig t1m = compare_config("table1", "multihop", "resolvent:dense", json::object());
  EXPECT_EQ(t1m.schedule, "wsd");
  EXPECT_EQ(t1m.steps, 16000);
  EXPECT_DOUBLE_EQ(t1m.stop_at, 0.0);
  EXPECT_EQ(compare_config("table1", "copy", "resolvent:dense", json::object()).schedule, "cosine");
  EXPECT_EQ(compare_preset_tasks("default"), (std::vector<std::string>{"copy", "recall"}));
  EXPECT_EQ(compare_preset_tasks("table1"), (std::vector<std::string>{"copy", "recall", "multihop"}));
  EXPECT_EQ(compare_preset_tasks("psm"), (std::vector<std::string>{"s5", "recall"}));
}

}  // namespace
}  // namespace config_test
}  // namespace mixlab

namespace mixlab {
namespace config_test {
namespace {

// Issue 16 items 5, 8, 12: out-of-range numbers are errors (never clamped or wrapped); seeds are
// uint64; absurd sizes are refused by the memory estimate before anything is allocated.
TEST(TrainConfig, NumbersOutOfRangeAreErrors) {
  EXPECT_EQ(parse(R"({"seed": 18446744073709551615})").seed, 18446744073709551615ULL);
  const TrainConfig round = config_from_json(config_to_json(parse(R"({"seed": 18446744073709551615})")), "rt");
  EXPECT_EQ(round.seed, 18446744073709551615ULL);
  expect_error_contains([] { parse(R"({"seed": -1})"); }, "key 'seed'");
  expect_error_contains([] { parse(R"({"seed": 18446744073709551616})"); }, "key 'seed'");
  expect_error_contains([] { parse(R"({"steps": 18446744073709551615})"); }, "key 'steps' must be <=");
  expect_error_contains([] { parse(R"({"batch": 2199023255552})"); }, "key 'batch' must be <=");
}

// A per-layer mixer list (mixlab/registry/layer_specs.h) must fit `layers`; the config says so
// naming the key, before any model is built. The attention scores count per attention layer.
TEST(TrainConfig, HybridMixerListMustFitLayers) {
  EXPECT_EQ(parse(R"({"mixer": "ssm*3|attention", "layers": 4})").mixer, "ssm*3|attention");
  EXPECT_NO_THROW(parse(R"({"mixer": "ssm|attention", "layers": 4})"));
  expect_error_contains([] { parse(R"({"mixer": "ssm|attention", "layers": 3})"); },
                        {"config test.json: key 'mixer': mixer spec 'ssm|attention': the list names 2 layers",
                         "does not divide the model's layers = 3"});
  expect_error_contains([] { parse(R"({"mixer": "ssm*0", "layers": 2})"); },
                        {"key 'mixer'", "repeat count N of layer item 'ssm*0'"});
  const TrainConfig a = parse(R"({"mixer": "attention", "layers": 4, "length": 256})");
  const TrainConfig s = parse(R"({"mixer": "ssm", "layers": 4, "length": 256})");
  const TrainConfig h = parse(R"({"mixer": "ssm*3|attention", "layers": 4, "length": 256})");
  const TrainConfig h2 = parse(R"({"mixer": "ssm|attention", "layers": 4, "length": 256})");
  EXPECT_NEAR(config_memory_bytes(h) - config_memory_bytes(s), (config_memory_bytes(a) - config_memory_bytes(s)) / 4,
              1.0);
  EXPECT_NEAR(config_memory_bytes(h2) - config_memory_bytes(s), (config_memory_bytes(a) - config_memory_bytes(s)) / 2,
              1.0);
}

TEST(TrainConfig, MemoryEstimateRefusesAbsurdConfigs) {
  const TrainConfig small = parse("{}");
  EXPECT_LT(config_memory_bytes(small), 1e9);
  EXPECT_NO_THROW(config_check_memory(small, 1e9, "t", "--max-memory"));
  for (const char* text : {R"({"batch": 1000000000})", R"({"length": 1000000000})", R"({"layers": 1000000000})",
                           R"({"vocab": 1000000000000})", R"({"d_model": 1099511627776, "heads": 1})"}) {
    expect_error_contains([&] { config_check_memory(parse(text), machine_memory_bytes(), "t", "this machine"); },
                          "memory");
  }
  expect_error_contains([&] { config_check_memory(small, 1000, "t", "--max-memory"); }, "--max-memory");
  // The shipped configs fit in 8 GB, except the paper-scale ones (seed 000 App. C.3: batch 1024,
  // vocab 8192 — GPU budgets), which the estimate must flag rather than let run out of memory.
  for (const auto& entry : std::filesystem::directory_iterator(MIXLAB_SOURCE_DIR "/configs")) {
    if (entry.path().extension() != ".json") continue;
    const double bytes = config_memory_bytes(config_load(entry.path().string()));
    if (entry.path().filename().string().find("paper") != std::string::npos) {
      EXPECT_GT(bytes, 8e9) << entry.path();
    } else {
      EXPECT_LT(bytes, 8e9) << entry.path();
    }
  }
}

TEST(TrainConfig, FileSizeIsBounded) {
  expect_error_contains([] { config_load("/dev/zero"); }, "not a regular file");
  // A regular file over the limit is refused by its size, before it is read.
  const std::string big = ::testing::TempDir() + "/mixlab_big_config.json";
  {
    std::ofstream out(big);
    out << std::string(static_cast<size_t>(kConfigMaxBytes) + 1, ' ');
  }
  expect_error_contains([&] { config_load(big); }, "larger than the limit");
  std::remove(big.c_str());
}

// Found by the config fuzzer (tests/fuzz/corpus/config/crash-newline-in-a-value.json): a text
// value with an escaped newline ("rec\nall") was quoted raw by the message refusing it, two lines.
// Keys and text values with a control byte are refused first, on one line.
TEST(TrainConfig, ControlCharactersInKeysAndValuesAreRefusedOnOneLine) {
  expect_error_contains([] { config_from_json(json::parse(R"({"task": "rec\nall"})"), "c.json"); },
                        "config c.json: key 'task' has a control character at offset 3 of its value 'rec\\x0aall'");
  expect_error_contains([] { config_from_json(json::parse(R"({"ta\tsk": "recall"})"), "c.json"); },
                        "config c.json: key 'ta\\x09sk' has a control character at offset 2");
}

// Found by the config fuzzer (tests/fuzz/corpus/config/crash-number-beyond-double.json): a
// number beyond double's range is nlohmann::json's out_of_range, not a parse_error, and escaped
// config_load unwrapped. Every JSON error of the file is now "malformed JSON" naming the path.
TEST(TrainConfig, ANumberBeyondDoubleIsMalformedJson) {
  const std::string path = ::testing::TempDir() + "/mixlab_huge_number.json";
  {
    std::ofstream out(path);
    out << R"({"lr": 1e99999})";
  }
  expect_error_contains([&] { config_load(path); }, "config " + path + ": malformed JSON: ");
  expect_error_contains([&] { config_load(path); }, "number overflow parsing '1e99999'");
  std::remove(path.c_str());
}

// Fuzz: random and mutated JSON never crashes config_from_json; every rejection is a
// mixlab::Error with one line naming the origin.
TEST(TrainConfig, Fuzz) {
  std::mt19937_64 rng(1616);
  const std::vector<std::string> seeds = {
      R"({"task": "recall", "steps": 20, "lr": 0.001, "seed": 7, "mixer": "local:8"})",
      R"({"vocab": 32, "length": 8, "d_model": 16, "heads": 2, "batch": 4, "curriculum": false})",
      R"({"hop_prob": 0.25, "task": "multihop", "pairs": 4, "eval_every": 5, "log_every": 1})"};
  const std::string alphabet = "{}[]\":,0123456789-+.eE truefalsnl\\abc_\n";
  int accepted = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % (text.size() + 1);
      switch (rng() % 3) {
        case 0:
          text.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 1:
          if (pos < text.size()) text.erase(pos, 1);
          break;
        default:
          if (pos < text.size()) text[pos] = alphabet[rng() % alphabet.size()];
      }
    }
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) continue;  // not JSON: the file reader reports that
    try {
      (void)config_from_json(j, "fuzz.json");
      ++accepted;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.find('\n'), std::string::npos) << text << "\n" << m;
      EXPECT_NE(m.find("fuzz.json"), std::string::npos) << text << "\n" << m;
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "non-mixlab exception for " << text << ": " << e.what();
    }
  }
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace config_test
}  // namespace mixlab
