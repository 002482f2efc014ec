// `mixlab design` end to end: runs the built binary, checks exit codes, messages and output.
// The metrics themselves are checked against brute force in tests/analysis/design_test.cpp.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "mixlab_test_paths.h"
#include "support/run_command.h"

namespace design_cli_test {

namespace {

RunResult run_mixlab(const std::string& args, bool with_stderr = true) {
  const std::string binary = MIXLAB_BINARY_DIR "/mixlab";
  EXPECT_TRUE(std::filesystem::exists(binary)) << binary << " is missing: build the mixlab_cli target first";
  return run_command(binary + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

void expect_failure(const std::string& args, const std::string& fragment) {
  auto r = run_mixlab(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.output;  // a user error
  EXPECT_NE(r.output.find(fragment), std::string::npos) << args << "\n" << r.output;
}

}  // namespace

TEST(DesignCli, BadArgumentsFailBeforeAnyWork) {
  expect_failure("design", "--T is required");
  expect_failure("design --T 1", "--T must be");
  expect_failure("design --T 99999999", "--T must be");
  expect_failure("design --T 64 --max-time 0", "--max-time must be a positive integer");
  expect_failure("design --T 64 --max-cache -3", "--max-cache");
  expect_failure("design --T 64 --max-path x", "--max-path");
  expect_failure("design --T 64 --objective speed", "--objective must be one of path, congestion, cost");
  expect_failure("design --T 64 --plot out.svg", "--plot must name a .png file");
  expect_failure("design --T 64 --also bogus", "unknown kind 'bogus'");
  expect_failure("design --T 64 --check copy,nosuchtask", "--check task 'nosuchtask' does not exist");
  expect_failure("design --T 64 --steps 10", "--steps applies to --check");
  expect_failure("design --T 64 --check copy --json", "use it without --json");
}

TEST(DesignCli, NothingFitsSaysWhichLimitAndTheClosest) {
  auto r = run_mixlab("design --T 128 --max-time 4 --max-path 1");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("nothing fits at T = 128"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--max-path 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("closest"), std::string::npos) << r.output;
}

TEST(DesignCli, TableFrontRecommendationAndJson) {
  auto t = run_mixlab("design --T 256 --max-time 8 --top 5");
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_NE(t.output.find("Ranked by path (top 5 of"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("Pareto front over (time max, cache max, path max)"), std::string::npos);
  EXPECT_NE(t.output.find("Recommendation: "), std::string::npos);
  EXPECT_NE(t.output.find("mixlab train --task copy --mixer resolvent:"), std::string::npos);

  auto r = run_mixlab("design --T 256 --max-time 8 --objective cost --json", false);
  ASSERT_EQ(r.code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["T"], 256);
  EXPECT_EQ(j["objective"], "cost");
  EXPECT_EQ(j["limits"]["max_time"], 8);
  EXPECT_TRUE(j["limits"]["max_cache"].is_null());
  EXPECT_GE(j["grid_size"].get<int64_t>(), 1000);
  ASSERT_FALSE(j["table"].empty());
  for (const auto& row : j["table"]) EXPECT_LE(row["time_max"].get<int64_t>(), 8) << row["spec"];
  // Ranked by cost: time max never decreases down the table.
  for (size_t k = 1; k < j["table"].size(); ++k)
    EXPECT_LE(j["table"][k - 1]["time_max"].get<int64_t>(), j["table"][k]["time_max"].get<int64_t>());
  EXPECT_FALSE(j["front"].empty());
  EXPECT_NE(j["recommendation"]["train"].get<std::string>().find(j["recommendation"]["spec"].get<std::string>()),
            std::string::npos);
}

TEST(DesignCli, PlotWritesAPng) {
  const auto png = std::filesystem::temp_directory_path() / "mixlab_design_cli_test.png";
  std::filesystem::remove(png);
  auto r = run_mixlab("design --T 128 --max-cache 32 --plot " + png.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("design: wrote"), std::string::npos);
  EXPECT_GT(std::filesystem::file_size(png), 1000u);
  std::filesystem::remove(png);
}

TEST(DesignCli, NewPatternKindsWorkInAnalyze) {
  auto r = run_mixlab("analyze --pattern band:4+geom:1.5+cache --T 64 --json", false);
  ASSERT_EQ(r.code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["spec"], "band:4+geom:1.5+cache");
  EXPECT_EQ(j["shortest_path"]["method"], "graph");
}

TEST(DesignCli, CheckTrainsTheTopAndTheNearestNamedPatterns) {
  const auto out = std::filesystem::temp_directory_path() / "mixlab_design_check_test";
  std::filesystem::remove_all(out);
  auto r = run_mixlab("design --T 32 --max-time 4 --top 1 --check copy --steps 3 --check-out " + out.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Check: held-out token accuracy (%) after training"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(named)"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("failed"), std::string::npos) << r.output;
  std::filesystem::remove_all(out);
}

}  // namespace design_cli_test
