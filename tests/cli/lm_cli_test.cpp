// `mixlab train --task lm`, `mixlab eval` on an lm checkpoint and `mixlab generate` end to end:
// the happy paths and every bad input of generate.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "mixlab_test_paths.h"
#include "support/run_command.h"

namespace lm_cli_test {

namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::path(::testing::TempDir()) / ("mixlab_lm_cli_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// The sample corpus and a private cache folder for every command.
std::string env(const std::string& cache) {
  return "MIXLAB_DATA_DIR=" MIXLAB_SOURCE_DIR "/data/sample MIXLAB_CACHE_DIR=" + cache + " ";
}

RunResult run_mixlab(const std::string& cache, const std::string& args) {
  return run_command(env(cache) + MIXLAB_BINARY_DIR "/mixlab --threads 1 " + args + " 2>&1");
}

void expect_failure(const std::string& cache, const std::string& args, const std::string& fragment) {
  const auto r = run_mixlab(cache, args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(fragment), std::string::npos) << args << "\n" << r.output;
}

const char* kTinyLm =
    "train --task lm --mixer attention --steps 30 --set length=32 --set d_model=16 --set heads=2 --set mlp_ratio=2 "
    "--set batch=8 --set warmup=3 --set lr=0.01 --set eval_tokens=300 --quiet";

// One tiny lm checkpoint shared by the tests of this file.
class LmCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Per process: ctest runs each test of this suite in its own process, in parallel.
    dir_ = temp_dir("shared_" + std::to_string(::getpid()));
    const auto r = run_mixlab(dir_, std::string(kTinyLm) + " --out " + dir_ + "/run");
    ASSERT_EQ(r.code, 0) << r.output;
    train_output_ = r.output;
    checkpoint_ = dir_ + "/run/checkpoint.pt";
  }
  static std::string dir_, checkpoint_, train_output_;
};
std::string LmCli::dir_, LmCli::checkpoint_, LmCli::train_output_;

}  // namespace

TEST_F(LmCli, TrainAndEval) {
  EXPECT_NE(train_output_.find("perplexity"), std::string::npos) << train_output_;
  EXPECT_NE(train_output_.find("bits/byte"), std::string::npos) << train_output_;
  const auto e = run_mixlab(dir_, "eval --checkpoint " + checkpoint_ + " --tokens 400 --stride 8");
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("valid split, window 32 stride 8"), std::string::npos) << e.output;
  EXPECT_NE(e.output.find("(399 tokens, "), std::string::npos) << e.output;
  const auto t = run_mixlab(dir_, "eval --checkpoint " + checkpoint_ + " --split test --tokens 100 --json");
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_NE(t.output.find("\"split\": \"test\""), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("\"bits_per_byte\""), std::string::npos) << t.output;
  expect_failure(dir_, "eval --checkpoint " + checkpoint_ + " --stride 0", "--stride");
  expect_failure(dir_, "eval --checkpoint " + checkpoint_ + " --stride 33", "--stride");
  expect_failure(dir_, "eval --checkpoint " + checkpoint_ + " --split train", "--split must be valid or test");
  expect_failure(dir_, "eval --checkpoint " + checkpoint_ + " --split dev", "--split must be train, valid or test");
}

TEST_F(LmCli, GenerateStreamsAndSummarises) {
  const std::string base = "generate --checkpoint " + checkpoint_ + " --max-tokens 12 ";
  const auto a = run_mixlab(dir_, base + "--prompt 'The jury' --seed 5");
  ASSERT_EQ(a.code, 0) << a.output;
  for (const char* part : {"-- 12 tokens in", "tokens/s", "prefill 9 tokens in", "decode state", "bytes"})
    EXPECT_NE(a.output.find(part), std::string::npos) << part << "\n" << a.output;
  const auto b = run_mixlab(dir_, base + "--prompt 'The jury' --seed 5");
  const auto text = [](const std::string& s) { return s.substr(0, s.find("\n-- ")); };
  EXPECT_EQ(text(a.output), text(b.output));                            // same seed, same text
  EXPECT_EQ(text(a.output).size(), 12u);                                // bytes: one byte per token
  const auto g1 = run_mixlab(dir_, base + "--temperature 0 --seed 1");  // greedy: the seed is irrelevant
  const auto g2 = run_mixlab(dir_, base + "--temperature 0 --seed 2");
  ASSERT_EQ(g1.code, 0) << g1.output;
  EXPECT_EQ(text(g1.output), text(g2.output));
  EXPECT_NE(g1.output.find("prefill 1 tokens"), std::string::npos) << g1.output;  // empty prompt: begin token
  const auto k = run_mixlab(dir_, base + "--top-k 5 --top-p 0.9 --temperature 0.7");
  EXPECT_EQ(k.code, 0) << k.output;
  const auto z = run_mixlab(dir_, "generate --checkpoint " + checkpoint_ + " --max-tokens 0");
  EXPECT_EQ(z.code, 0) << z.output;
  EXPECT_NE(z.output.find("-- 0 tokens"), std::string::npos) << z.output;
}

TEST_F(LmCli, GenerateBadInputs) {
  const std::string base = "generate --checkpoint " + checkpoint_ + " ";
  expect_failure(dir_, base + "--temperature -1", "--temperature");
  expect_failure(dir_, base + "--temperature=-0.5", "--temperature");
  expect_failure(dir_, base + "--max-tokens -1", "--max-tokens");
  expect_failure(dir_, base + "--max-tokens=-3", "--max-tokens");
  expect_failure(dir_, base + "--top-k -1", "--top-k");
  expect_failure(dir_, base + "--top-p 0", "--top-p");
  expect_failure(dir_, base + "--top-p 1.5", "--top-p");
  expect_failure(dir_, base + "--seed x", "--seed");
  expect_failure(dir_, base + "--prompt '" + std::string(40, 'a') + "'", "--prompt is 41 tokens");
  expect_failure(dir_, "generate --prompt hi", "--checkpoint");
  const auto missing = run_mixlab(dir_, "generate --checkpoint " + dir_ + "/nope.pt");
  EXPECT_EQ(missing.code, 3) << missing.output;
  EXPECT_NE(missing.output.find("nope.pt"), std::string::npos) << missing.output;
  // A checkpoint of another task.
  const auto copy = run_mixlab(dir_,
                               "train --task copy --steps 2 --set vocab=12 --set length=4 --set d_model=16 "
                               "--set heads=2 --set batch=4 --set eval_batches=1 --set warmup=1 --quiet --out " +
                                   dir_ + "/copy");
  ASSERT_EQ(copy.code, 0) << copy.output;
  expect_failure(dir_, "generate --checkpoint " + dir_ + "/copy/checkpoint.pt",
                 "is a model of task copy, not a language model");
  expect_failure(dir_, "eval --checkpoint " + dir_ + "/copy/checkpoint.pt --split test", "apply to lm checkpoints");
}

TEST_F(LmCli, CtrlCStopsWithTheSummary) {
  // SIGINT after the first output: generation stops cleanly, the summary still comes, exit 0.
  const std::string cmd = env(dir_) + MIXLAB_BINARY_DIR "/mixlab --threads 1 generate --checkpoint " + checkpoint_ +
                          " --max-tokens 100000000 > " + dir_ +
                          "/out.txt 2>&1 & pid=$!; "
                          "for i in $(seq 1 200); do [ -s " +
                          dir_ +
                          "/out.txt ] && break; sleep 0.1; done; sleep 0.3; "
                          "kill -INT $pid; wait $pid; echo \"rc=$?\"; cat " +
                          dir_ + "/out.txt";
  const auto r = run_command("bash -c '" + cmd + "'");
  EXPECT_NE(r.output.find("rc=0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("-- interrupted: "), std::string::npos) << r.output;
}

TEST(LmCliErrors, MissingTokenizerFilesAreNamed) {
  const std::string dir = temp_dir("gpt2");
  const auto r = run_command(env(dir) + "MIXLAB_GPT2_DIR=" + dir +
                             "/no-gpt2 " MIXLAB_BINARY_DIR
                             "/mixlab --threads 1 train --task lm --set tokenizer=gpt2 --steps 1 --set length=8 "
                             "--set d_model=8 --set heads=2 --set batch=1 --quiet --out " +
                             dir + "/o 2>&1");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(dir + "/no-gpt2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("scripts/setup.sh"), std::string::npos) << r.output;
}

}  // namespace lm_cli_test
