// Hybrid stacks on the command line (a per-layer mixer list, mixlab/registry/layer_specs.h):
// `mixlab train` a tiny ssm|attention model, resume it, eval it; a list that does not fit
// --layers is refused before --out exists; `mixlab compare` reports a hybrid as one row whose
// analysis columns are per item of its list.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "mixlab_test_paths.h"
#include "support/run_command.h"

namespace hybrid_cli_test {

namespace {

namespace fs = std::filesystem;

RunResult run_mixlab(const std::string& args) {
  const std::string binary = MIXLAB_BINARY_DIR "/mixlab";
  EXPECT_TRUE(fs::exists(binary)) << binary << " is missing: build the mixlab_cli target first";
  return run_command(binary + " --threads 1 " + args + " 2>&1");
}

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::path(::testing::TempDir()) / ("mixlab_hybrid_cli_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// A model small enough that a few steps take well under a second.
const char* kTiny =
    "--set vocab=12 --set length=4 --set d_model=16 --set heads=2 --set mlp_ratio=2 --set batch=4 "
    "--set eval_batches=1 --set warmup=1 --quiet";

}  // namespace

TEST(HybridCli, TrainResumeEvalAndABadList) {
  const std::string dir = temp_dir("train");
  const std::string common = std::string("train --task copy --mixer 'ssm:4|attention' --layers 2 --steps 3 ") + kTiny;
  auto r = run_mixlab(common + " --until 2 --out " + dir + "/run");
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_mixlab(common + " --resume " + dir + "/run/checkpoint.pt --out " + dir + "/run");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto config = nlohmann::json::parse(std::ifstream(dir + "/run/config.json"));
  EXPECT_EQ(config["mixer"], "ssm:4|attention");
  EXPECT_EQ(config["layers"], 2);
  r = run_mixlab("eval --checkpoint " + dir + "/run/checkpoint.pt --json");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["step"], 3);
  EXPECT_EQ(j["mixer"], "ssm:4|attention");
  // A list that does not divide --layers: one line naming the spec, and nothing written.
  r = run_mixlab("train --task copy --mixer 'ssm|attention' --layers 3 --steps 1 --out " + dir + "/bad");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("key 'mixer': mixer spec 'ssm|attention': the list names 2 layers, which does not divide "
                          "the model's layers = 3"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir + "/bad"));
}

TEST(HybridCli, CompareReportsAHybridRow) {
  const std::string dir = temp_dir("compare");
  auto r = run_mixlab(std::string("compare --tasks copy --mixers 'ssm:4*3|local:4',local:4 --steps 2 --set layers=4 ") +
                      kTiny + " --out " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("hybrid rows (a per-layer mixer list)"), std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(std::ifstream(dir + "/compare.json"));
  ASSERT_EQ(j["rows"].size(), 2u);
  const auto& hybrid = j["rows"][0];
  EXPECT_EQ(hybrid["mixer"], "ssm:4*3|local:4");
  EXPECT_TRUE(hybrid["ran"].get<bool>()) << hybrid["note"];
  EXPECT_TRUE(hybrid["analysis_per_layer"].get<bool>());
  const std::string structure = hybrid["structure"], local = j["rows"][1]["structure"];
  EXPECT_EQ(structure.substr(structure.find("*3|")), "*3|" + local) << structure;
  EXPECT_EQ(hybrid["pattern"], "order:1*3|band:4");  // ssm's pattern is the first-order recurrence
  EXPECT_EQ(hybrid["cost_class"], "O(1)*3|" + j["rows"][1]["cost_class"].get<std::string>());
  // time/tok and cache: the worst layer's, here the local layer's.
  EXPECT_EQ(hybrid["time_per_token"], j["rows"][1]["time_per_token"]);
  EXPECT_EQ(hybrid["cache"], j["rows"][1]["cache"]);
  EXPECT_FALSE(j["rows"][1]["analysis_per_layer"].get<bool>());
}

}  // namespace hybrid_cli_test
