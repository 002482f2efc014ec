// `mixlab plot`: curves of runs' metrics.jsonl against step, tokens or seconds; a torn last line is
// skipped and named; bad input is one error line. Also: the trainer's cumulative "tokens" and
// "seconds" continue across a resume.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "mixlab_test_paths.h"
#include "support/run_command.h"

namespace plot_cli_test {

namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::path(::testing::TempDir()) / ("mixlab_plot_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

RunResult run_mixlab(const std::string& args) {
  return run_command(MIXLAB_BINARY_DIR "/mixlab --threads 1 " + args + " 2>&1");
}

void expect_failure(const std::string& args, const std::string& fragment) {
  const auto r = run_mixlab(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(fragment), std::string::npos) << args << "\n" << r.output;
}

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST(PlotCli, DrawsRunsAndSkipsATornLine) {
  const std::string dir = temp_dir("runs");
  write(dir + "/a/metrics.jsonl",
        "{\"step\":10,\"loss\":2.0,\"acc\":0.1,\"tokens\":320,\"seconds\":1.5}\n"
        "{\"step\":10,\"eval_loss\":2.1,\"eval_answer_acc\":0.2,\"eval_token_acc\":0.3}\n"
        "{\"step\":20,\"loss\":1.0,\"acc\":0.4,\"tokens\":640,\"seconds\":3.0}\n"
        "{\"step\":20,\"eval_loss\":1.1,\"eval_answer_acc\":0.5,\"eval_token_acc\":0.6}\n"
        "{\"step\":30,\"loss\":0.");  // a run killed mid-write
  write(dir + "/b/metrics.jsonl",
        "{\"step\":10,\"loss\":3.0,\"acc\":0.1,\"tokens\":320,\"seconds\":2.0}\n"
        "{\"step\":10,\"eval_loss\":2.5,\"eval_answer_acc\":0.1,\"eval_token_acc\":0.2}\n");
  for (const std::string x : {"step", "tokens", "seconds"}) {
    const std::string png = dir + "/eval_" + x + ".png";
    const auto r =
        run_mixlab("plot " + dir + "/a " + dir + "/b/metrics.jsonl --metric eval_acc --x " + x + " --out " + png);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("line 5 is not a complete JSON object"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("2 run(s)"), std::string::npos) << r.output;
    EXPECT_GT(fs::file_size(png), 1000u);
  }
  EXPECT_EQ(run_mixlab("plot " + dir + "/a --metric loss --log-y --out " + dir + "/loss.png").code, 0);

  write(dir + "/old/metrics.jsonl", "{\"step\":10,\"loss\":2.0,\"acc\":0.1}\n");  // before tokens/seconds
  expect_failure("plot " + dir + "/old --x tokens --out " + dir + "/x.png", "has no 'tokens' in its metrics");
  EXPECT_EQ(run_mixlab("plot " + dir + "/old --out " + dir + "/old.png").code, 0);  // --x step works
  fs::create_directories(dir + "/empty");
  expect_failure("plot " + dir + "/empty --out " + dir + "/x.png", "has no metrics.jsonl");
  expect_failure("plot " + dir + "/a --metric ppl --out " + dir + "/x.png", "has no 'ppl' point");
  expect_failure("plot " + dir + "/a --metric accuracy --out " + dir + "/x.png", "--metric must be one of");
  expect_failure("plot " + dir + "/a --x epochs --out " + dir + "/x.png", "--x must be step, tokens or seconds");
}

TEST(PlotCli, TokensAndSecondsContinueAcrossAResume) {
  const std::string dir = temp_dir("resume");
  const std::string train =
      "train --task copy --steps 8 --set log_every=2 --set d_model=16 --set heads=2 --quiet --out " + dir + "/run";
  ASSERT_EQ(run_mixlab(train + " --until 4").code, 0);
  ASSERT_EQ(run_mixlab(train + " --resume " + dir + "/run/checkpoint.pt").code, 0);
  std::ifstream in(dir + "/run/metrics.jsonl");
  double last_tokens = 0, last_seconds = 0;
  int lines = 0;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("tokens")) continue;
    ++lines;
    EXPECT_GT(j["tokens"].get<double>(), last_tokens) << line;
    EXPECT_GE(j["seconds"].get<double>(), last_seconds) << line;
    last_tokens = j["tokens"].get<double>();
    last_seconds = j["seconds"].get<double>();
  }
  EXPECT_EQ(lines, 4);  // steps 2, 4 | 6, 8
  EXPECT_EQ(run_mixlab("plot " + dir + "/run --x seconds --out " + dir + "/c.png").code, 0);
}

}  // namespace plot_cli_test
