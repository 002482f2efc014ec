// `mixlab train --task file`, `mixlab eval` on its checkpoint from another directory, `mixlab
// compare --tasks file`, and the exit codes of bad data files. The .npz is written here, byte by
// byte (tests/support/npy_bytes.h): no Python needed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "mixlab/core/atomic_file.h"
#include "mixlab_test_paths.h"
#include "support/npy_bytes.h"
#include "support/run_command.h"

namespace task_file_cli_test {

namespace {

namespace fs = std::filesystem;

std::string temp_dir() {
  const fs::path p = fs::path(::testing::TempDir()) / ("mixlab_task_file_cli_" + std::to_string(::getpid()));
  fs::create_directories(p);
  return p.string();
}

RunResult run_mixlab(const std::string& args) {
  return run_command(MIXLAB_BINARY_DIR "/mixlab --threads 1 " + args + " 2>&1");
}

// 24 rows of T = 8: a recall-like toy (the label of position 5 is input 1).
std::string write_data(const std::string& dir) {
  std::vector<int64_t> inputs, labels;
  for (int64_t n = 0; n < 24; ++n)
    for (int64_t t = 0; t < 8; ++t) {
      inputs.push_back((n * 7 + t * 3) % 16);
      labels.push_back(t == 5 ? (n * 7 + 3) % 16 : -100);
    }
  const std::string path = dir + "/rows.npz";
  mixlab::atomic_write_file(path, mixlab_test::npz_inputs_labels(24, 8, inputs, labels, /*deflate=*/true));
  return path;
}

const char* kTiny = "--set d_model=16 --set heads=2 --set layers=1 --set mlp_ratio=2 --set batch=4 --set warmup=1";

}  // namespace

TEST(TaskFileCli, TrainEvalAndCompare) {
  const std::string dir = temp_dir(), data = write_data(dir);
  auto r = run_mixlab("train --task file --mixer attention --steps 3 --quiet " + std::string(kTiny) +
                      " --set data=" + data + " --out " + dir + "/run");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("step 3/3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(2 answers)"), std::string::npos) << r.output;  // the last max(1, 24/10) rows
  const std::string config = mixlab::file_read(dir + "/run/config.json", 1 << 20, "config");
  EXPECT_NE(config.find("\"data\": \"" + data + "\""), std::string::npos) << config;
  // eval from another working directory finds the data through the absolute path in the config.
  r = run_command("cd / && " MIXLAB_BINARY_DIR "/mixlab --threads 1 eval --checkpoint " + dir +
                  "/run/checkpoint.pt 2>&1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("attention on file (step 3/3)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(2 answers, 2 answer tokens)"), std::string::npos) << r.output;
  r = run_mixlab("eval --checkpoint " + dir + "/run/checkpoint.pt --batches 2");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--batches does not apply to task file"), std::string::npos) << r.output;
  // compare passes --set through (the preset's vocab and length give way to the file's; copy
  // ignores data).
  r = run_mixlab("compare --tasks file,copy --mixers attention --steps 2 --quiet --set data=" + data + " " + kTiny +
                 " --out " + dir + "/compare");
  EXPECT_EQ(r.code, 0) << r.output;
  fs::remove_all(dir);
}

TEST(TaskFileCli, BadDataExitsWithAOneLineError) {
  const std::string dir = temp_dir();
  auto r = run_mixlab("train --task file --steps 1 --set data=" + dir + "/missing.npz --out " + dir + "/a");
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_NE(r.output.find(dir + "/missing.npz: cannot open the file"), std::string::npos) << r.output;
  mixlab::atomic_write_file(dir + "/text.npz", "inputs,labels\n1,2\n");
  r = run_mixlab("train --task file --steps 1 --set data=" + dir + "/text.npz --out " + dir + "/b");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("not a NumPy .npy or .npz file"), std::string::npos) << r.output;
  const std::string data = write_data(dir);
  r = run_mixlab("train --task file --steps 1 --set data=" + data + " --set length=16 --out " + dir + "/c");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'length' is 16 but the data"), std::string::npos) << r.output;
  r = run_mixlab("train --task file --steps 1 --out " + dir + "/d");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("task file needs the key 'data'"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir + "/a") || fs::exists(dir + "/b") || fs::exists(dir + "/c") || fs::exists(dir + "/d"))
      << "bad data is refused before --out is created";
  fs::remove_all(dir);
}

}  // namespace task_file_cli_test
