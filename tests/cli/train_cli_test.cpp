// `mixlab train`, `mixlab eval`, `mixlab compare` end to end: every error path names the
// problem; tiny successful runs write what they promise.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "mixlab_test_paths.h"
#include "support/run_command.h"

namespace train_cli_test {

namespace {

namespace fs = std::filesystem;

RunResult run_mixlab(const std::string& args) {
  const std::string binary = MIXLAB_BINARY_DIR "/mixlab";
  EXPECT_TRUE(fs::exists(binary)) << binary << " is missing: build the mixlab_cli target first";
  return run_command(binary + " --threads 1 " + args + " 2>&1");
}

void expect_failure(const std::string& args, const std::string& fragment) {
  const auto r = run_mixlab(args);
  EXPECT_NE(r.code, 0) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(fragment), std::string::npos) << args << "\n" << r.output;
}

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::path(::testing::TempDir()) / ("mixlab_train_cli_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A model small enough that a few steps take well under a second.
const char* kTiny =
    "--set vocab=12 --set length=4 --set d_model=16 --set heads=2 --set mlp_ratio=2 --set batch=4 "
    "--set eval_batches=1 --set warmup=1 --quiet";

}  // namespace

TEST(TrainCli, TrainErrors) {
  const std::string dir = temp_dir("errors");
  expect_failure("train", "give --config FILE or --task T");
  expect_failure("train --config " + dir + "/missing.json", "cannot open the file");
  write_file(dir + "/bad.json", "{\"steps\": 3,,}");
  expect_failure("train --config " + dir + "/bad.json", "malformed JSON");
  write_file(dir + "/unknown.json", "{\"stpes\": 3}");
  expect_failure("train --config " + dir + "/unknown.json", "unknown key 'stpes'");
  write_file(dir + "/value.json", "{\"d_model\": -4}");
  expect_failure("train --config " + dir + "/value.json", "key 'd_model' must be >= 1, got -4");
  expect_failure("train --task sort", "key 'task' must be one of copy, recall, multihop");
  expect_failure("train --task copy --mixer nosuchmixer --steps 1 --out " + dir + "/o", "unknown family 'nosuchmixer'");
  expect_failure("train --task copy --set steps", "--set expects KEY=VALUE");
  expect_failure("train --task copy --set lr=\\\"fast\\\"", "key 'lr' must be a number");
  expect_failure("train --task copy --steps 0", "--steps");
  expect_failure("train --task copy --until 0", "--until");
  expect_failure("train --task copy --resume " + dir + "/missing.pt --out " + dir + "/o", "cannot open the file");
}

TEST(TrainCli, TrainResumeEval) {
  const std::string dir = temp_dir("run");
  const std::string common = std::string("train --task copy --mixer attention --steps 4 ") + kTiny;
  auto r = run_mixlab(common + " --until 2 --out " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("step 2/4"), std::string::npos) << r.output;
  ASSERT_TRUE(fs::exists(dir + "/checkpoint.pt"));
  EXPECT_TRUE(fs::exists(dir + "/metrics.jsonl"));
  EXPECT_TRUE(fs::exists(dir + "/config.json"));

  // Resuming with another config is refused, naming the file and the key.
  expect_failure(common + " --set d_model=32 --resume " + dir + "/checkpoint.pt --out " + dir + "/other",
                 "key 'd_model' is 16 in the checkpoint but 32");
  r = run_mixlab(common + " --resume " + dir + "/checkpoint.pt --out " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("step 4/4"), std::string::npos) << r.output;
  const auto result = nlohmann::json::parse(std::ifstream(dir + "/result.json"));
  EXPECT_EQ(result["step"], 4);

  r = run_mixlab("eval --checkpoint " + dir + "/checkpoint.pt --json");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["step"], 4);
  EXPECT_EQ(j["mixer"], "attention");
  EXPECT_DOUBLE_EQ(j["eval_token_acc"].get<double>(), result["eval_token_acc"].get<double>());
  r = run_mixlab("eval --checkpoint " + dir + "/checkpoint.pt");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("attention on copy (step 4/4)"), std::string::npos) << r.output;
}

// --init-from: a new run (longer task, its own steps) starts from another run's weights; it is
// refused with --resume, with other model sizes, and before --out is created.
TEST(TrainCli, InitFromStartsANewRun) {
  const std::string dir = temp_dir("init_from");
  const std::string common = std::string("train --task copy --mixer attention ") + kTiny;
  ASSERT_EQ(run_mixlab(common + " --steps 2 --out " + dir + "/short").code, 0);
  const std::string ckpt = dir + "/short/checkpoint.pt";
  auto r = run_mixlab(common + " --steps 3 --set length=6 --init-from " + ckpt + " --out " + dir + "/long");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("step 3/3"), std::string::npos) << r.output;
  const auto result = nlohmann::json::parse(std::ifstream(dir + "/long/result.json"));
  EXPECT_EQ(result["init_from"], ckpt);
  expect_failure(common + " --steps 3 --set d_model=32 --init-from " + ckpt + " --out " + dir + "/wide",
                 "its weights cannot start this model: key 'd_model' is 16 in the checkpoint but 32");
  EXPECT_FALSE(fs::exists(dir + "/wide"));
  expect_failure(common + " --steps 3 --init-from " + ckpt + " --resume " + ckpt + " --out " + dir + "/both",
                 "--init-from and --resume exclude each other");
  expect_failure(common + " --steps 3 --init-from " + dir + "/missing.pt --out " + dir + "/o", "cannot open the file");
}

TEST(TrainCli, EvalErrors) {
  const std::string dir = temp_dir("eval");
  expect_failure("eval", "--checkpoint is required");
  expect_failure("eval --checkpoint " + dir + "/missing.pt", "cannot open the file");
  write_file(dir + "/garbage.pt", std::string(4096, 'x'));
  expect_failure("eval --checkpoint " + dir + "/garbage.pt", "truncated or corrupt");
  expect_failure("eval --checkpoint " + dir + "/garbage.pt", dir + "/garbage.pt");
  expect_failure("eval --checkpoint " + dir + "/garbage.pt --batches 0", "--batches");
}

TEST(TrainCli, CompareErrors) {
  expect_failure("compare --tasks copy,sorting --steps 1", "unknown task 'sorting'");
  expect_failure("compare --tasks copy,,recall", "--tasks has an empty entry");
  expect_failure("compare --preset huge", "--preset");
  expect_failure("compare --tasks copy --set d_model=0", "key 'd_model' must be >= 1");
  expect_failure("compare --tasks copy --set nonsense=1", "unknown key 'nonsense'");
  expect_failure("compare --steps -1", "--steps");
  expect_failure("compare --tasks copy --steps 10 --set warmup=20", "key 'warmup' must be in [0, steps=10]");
  expect_failure("compare --tasks copy --sweep copy", "--sweep expects TASK=LENGTHS");
  expect_failure("compare --tasks copy --sweep copy=0,4", "--sweep copy item '0'");
  expect_failure("compare --tasks copy --sweep s5=4", "--sweep names task 's5', which is not in --tasks");
  expect_failure("compare --tasks copy --sweep-rows 0", "--sweep-rows");
  // Checked before any training: 8 pairs need rows of at least 19 tokens.
  expect_failure("compare --tasks recall --sweep recall=10,64", "length 10 is below task recall's minimum 19");
  expect_failure("compare --tasks lm --sweep lm=64", "task lm has no length sweep");
  expect_failure("compare --preset psm --tasks copy", "preset psm has the tasks s5 and recall");
  // Learning-rate sweeps: every rate a number > 0, listed once, given once.
  expect_failure("compare --tasks copy --lr 1e-3,,3e-3", "--lr has an empty entry");
  expect_failure("compare --tasks copy --lr 1e-3,-1", "--lr expects learning rates > 0");
  expect_failure("compare --tasks copy --lr 1e-3,fast", "got 'fast'");
  expect_failure("compare --tasks copy --lr 1e-3,0.001", "lists 0.001 twice");
  expect_failure("compare --tasks copy --lr 1e-3,3e-3 --set lr=1e-3,2e-3", "give the learning rates once");
  expect_failure("compare --tasks copy --set lr=1e-3,0", "--set lr expects learning rates > 0");
  expect_failure("compare --tasks copy --lr \"\"", "empty value");
  expect_failure("compare --tasks copy --set lr=1e31", "key 'lr' must be in (0, 1e30]");
}

// Every spec is checked before any training: a typo in the last mixer fails at once, an unknown
// family is an error (not a skipped row), and nothing is written.
TEST(TrainCli, CompareRejectsEveryBadSpecBeforeTraining) {
  const std::string dir = temp_dir("compare_bad_spec");
  const std::string out = " --steps 2000 --out " + dir + "/out";
  expect_failure("compare --tasks copy --mixers attention,resolvent:pwo2" + out, "pwo2");
  expect_failure("compare --tasks copy --mixers attention,nosuchmixer:3" + out, "nosuchmixer");
  expect_failure("compare --tasks copy --mixers bogus,alsobogus" + out, "bogus");
  expect_failure("compare --tasks copy --mixers attention,local:0" + out, "local:0");
  EXPECT_FALSE(fs::exists(dir + "/out")) << "a rejected compare must not create its output directory";
}

TEST(TrainCli, CompareWritesTableCsvJsonPng) {
  const std::string dir = temp_dir("compare");
  auto r = run_mixlab(std::string("compare --tasks copy,multihop --mixers attention,local:4 --steps 2 ") + kTiny +
                      " --set length=12 --set pairs=3 --out " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("| time/tok | cache | path | congestion | copy % | multihop % | chains %"), std::string::npos)
      << r.output;
  for (const char* f : {"compare.csv", "compare.json", "compare.png"}) EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  const auto j = nlohmann::json::parse(std::ifstream(dir + "/compare.json"));
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["mixer"], "attention");
  EXPECT_TRUE(j["rows"][0]["ran"].get<bool>());
  EXPECT_EQ(j["rows"][0]["pattern"], "causal");
  EXPECT_TRUE(j["rows"][0]["eval_token_acc"].contains("multihop"));
  EXPECT_TRUE(j["rows"][0]["eval_loss"].contains("multihop"));
  EXPECT_EQ(j["jobs"], 1);  // the tests run mixlab with --threads 1
  // The figures name the kernels they came from (mixlab/core/blas_info.h), in the file and the footer.
  EXPECT_FALSE(j["native_kernels"].get<std::string>().empty());
  EXPECT_FALSE(j["blas"].get<std::string>().empty());
  EXPECT_NE(r.output.find("Native kernels: " + j["native_kernels"].get<std::string>() +
                          "; BLAS: " + j["blas"].get<std::string>()),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(j["rows"][1]["ran"].get<bool>());
  EXPECT_EQ(j["rows"][1]["shortest_path"], "∞");  // the shared formatter, as in `mixlab analyze`
  std::ifstream csv(dir + "/compare.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_NE(header.find("copy_eval_token_acc"), std::string::npos) << header;
  EXPECT_NE(header.find("multihop_chain_acc"), std::string::npos) << header;
}

// The MAD suite through the CLI: `--preset mad` runs its seven tasks without --tasks, a task-only
// key is refused on another task, and each task trains a step from its defaults.
TEST(TrainCli, PresetMadRunsItsTasks) {
  const std::string dir = temp_dir("compare_mad");
  const std::string small =
      " --set d_model=16 --set heads=2 --set mlp_ratio=2 --set batch=4 --set eval_batches=1 --set eval_batch=4 "
      "--set warmup=1 --quiet";
  auto r = run_mixlab("compare --preset mad --mixers attention --steps 2" + small + " --out " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* task : {"mad_recall", "mad_fuzzy_recall", "mad_noisy_recall", "selective_copy", "mad_compression",
                           "mad_memorization", "induction"})
    EXPECT_NE(r.output.find(std::string("| ") + task + " %"), std::string::npos) << task << "\n" << r.output;
  const auto j = nlohmann::json::parse(std::ifstream(dir + "/compare.json"));
  ASSERT_EQ(j["rows"].size(), 1u);
  EXPECT_TRUE(j["rows"][0]["ran"].get<bool>()) << j["rows"][0]["note"];
  EXPECT_EQ(j["rows"][0]["eval_token_acc"].size(), 7u);
  expect_failure("compare --preset mad --tasks copy", "preset mad has the tasks mad_recall");
  expect_failure("train --task mad_recall --set noise_frac=0.3 --steps 1",
                 "key 'noise_frac' applies to task mad_noisy_recall only (task mad_recall)");
  expect_failure("train --task mad_noisy_recall --set vocab=20 --steps 1", "vocab 20 is too small");
  expect_failure("train --task selective_copy --set length=16 --steps 1", "length must be > 2 x copy_tokens + 1 = 17");
}

// toeplitz-index on a trained Toeplitz model: one row per head; errors for a missing checkpoint
// and for a model without Toeplitz layers.
TEST(ToeplitzIndexCli, IndexesEveryHeadAndRejectsOtherModels) {
  const auto dir = temp_dir("toeplitz_index");
  auto r = run_mixlab("train --task copy --mixer toeplitz --steps 2 --quiet --out " + dir + "/tz");
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_mixlab("toeplitz-index --json --checkpoint " + dir + "/tz/checkpoint.pt");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"index\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("block1.mixer"), std::string::npos) << r.output;
  expect_failure("toeplitz-index --checkpoint " + dir + "/missing.pt", "missing.pt");
  r = run_mixlab("train --task copy --mixer local:4 --steps 2 --quiet --out " + dir + "/local");
  ASSERT_EQ(r.code, 0) << r.output;
  expect_failure("toeplitz-index --checkpoint " + dir + "/local/checkpoint.pt", "has no Toeplitz layer");
}

}  // namespace train_cli_test
