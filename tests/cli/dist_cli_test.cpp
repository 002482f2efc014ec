// `mixlab train --nproc N` and torchrun-style launches, end to end: 2 processes at global batch B
// follow 1 process at batch B; bad launches, a killed worker and a taken port are clear errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "mixlab/dist/launch.h"
#include "mixlab/train/trainer.h"
#include "mixlab_test_paths.h"
#include "support/run_command.h"

namespace {

namespace fs = std::filesystem;

const std::string kBinary = MIXLAB_BINARY_DIR "/mixlab";

// A model small enough that a step takes milliseconds; a loss line every step.
const char* kTiny =
    "--task copy --mixer attention --set vocab=12 --set length=4 --set d_model=16 --set heads=2 --set mlp_ratio=2 "
    "--set batch=8 --set eval_batches=1 --set warmup=1 --set log_every=1 --quiet";

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::path(::testing::TempDir()) / ("mixlab_dist_cli_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::vector<double> losses(const std::string& metrics) {
  std::vector<double> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(j["loss"].get<double>());
  }
  return out;
}

TEST(DistCli, TwoProcessesFollowOneProcess) {
  const std::string dir = temp_dir("equal");
  const auto one = run_command(kBinary + " --threads 1 train " + kTiny + " --steps 12 --out " + dir + "/one 2>&1");
  ASSERT_EQ(one.code, 0) << one.output;
  const auto two =
      run_command(kBinary + " --threads 1 train " + kTiny + " --steps 12 --nproc 2 --out " + dir + "/two 2>&1");
  ASSERT_EQ(two.code, 0) << two.output;

  // The same loss curve, step by step, up to float rounding (the two halves of the batch are
  // summed in another order): stated tolerance 1e-4 relative.
  const auto a = losses(dir + "/one/metrics.jsonl"), b = losses(dir + "/two/metrics.jsonl");
  ASSERT_EQ(a.size(), 12u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-4 * std::abs(a[i])) << "step " << i + 1;

  // Rank 0 alone wrote the run directory, and its checkpoint equals the one-process one.
  const auto result = nlohmann::json::parse(std::ifstream(dir + "/two/result.json"));
  EXPECT_EQ(result["world_size"], 2);
  // The time from backward's end to the reduced gradients, split into the all-reduce and the wait
  // for the slower rank: both measured, neither more than the training time.
  const double reduce = result["all_reduce_seconds"].get<double>(), wait = result["peer_wait_seconds"].get<double>();
  EXPECT_GT(reduce, 0.0);
  EXPECT_GE(wait, 0.0);
  EXPECT_LT(reduce + wait, result["seconds"].get<double>());
  const auto ca = mixlab::checkpoint_read(dir + "/one/checkpoint.pt");
  const auto cb = mixlab::checkpoint_read(dir + "/two/checkpoint.pt");
  EXPECT_EQ(ca.step, 12);
  EXPECT_EQ(cb.step, 12);
  mixlab::Trainer ta(ca.config), tb(cb.config);
  ta.checkpoint_load(ca);
  tb.checkpoint_load(cb);
  const auto pa = ta.model().named_parameters(), pb = tb.model().named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& item : pa) {
    EXPECT_TRUE(torch::allclose(pb[item.key()], item.value(), 1e-4, 1e-5)) << item.key();
  }
}

TEST(DistCli, BadLaunchesAreRejected) {
  const std::string dir = temp_dir("bad");
  auto expect_failure = [&](const std::string& args, const std::string& fragment) {
    const auto r =
        run_command(kBinary + " --threads 1 train " + kTiny + " --steps 2 --out " + dir + "/o " + args + " 2>&1");
    EXPECT_NE(r.code, 0) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(fragment), std::string::npos) << args << "\n" << r.output;
  };
  expect_failure("--nproc 0", "--nproc must be a positive integer");
  expect_failure("--nproc -2", "--nproc must be a positive integer");
  expect_failure("--nproc 3", "key 'batch' = 8 must be divisible by --nproc 3");
  expect_failure("--master-port 29999", "--master-port goes with --nproc");
  expect_failure("--nproc 2 --master-port 70000", "--master-port must be an integer in [1, 65535]");
  const auto r =
      run_command("WORLD_SIZE=2 RANK=5 " + kBinary + " train " + kTiny + " --steps 2 --out " + dir + "/o 2>&1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("environment variable RANK"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir + "/o/checkpoint.pt"));
}

// Runs `script` in bash and returns its output; the script prints "rc=<code> secs=<seconds>".
RunResult bash(const std::string& script) { return run_command("bash -c '" + script + "' 2>&1"); }

TEST(DistCli, KilledWorkerStopsTheLaunchAndIsNamed) {
  const std::string dir = temp_dir("killed");
  const std::string port = std::to_string(mixlab::free_local_port());
  // The worker of rank 1 is found by its environment (no procps on a bare machine).
  const auto r = bash(kBinary + " --threads 1 train " + kTiny + " --steps 1000000 --nproc 2 --master-port " + port +
                      " --out " + dir + "/o > " + dir +
                      "/log 2>&1 & L=$!; "
                      "for i in $(seq 1 600); do [ -s " +
                      dir +
                      "/o/metrics.jsonl ] && break; sleep 0.1; done; "
                      "for e in /proc/[0-9]*/environ; do "
                      "  v=$(tr \"\\0\" \"\\n\" < $e 2>/dev/null) || continue; "
                      "  echo \"$v\" | grep -qx MASTER_PORT=" +
                      port +
                      " && echo \"$v\" | grep -qx RANK=1 || continue; "
                      "  p=${e#/proc/}; p=${p%/environ}; kill -9 $p && echo killed $p; done; "
                      "t0=$(date +%s.%N); wait $L; rc=$?; t1=$(date +%s.%N); "
                      "echo rc=$rc secs=$(awk \"BEGIN{print $t1 - $t0}\"); cat " +
                      dir + "/log");
  EXPECT_NE(r.output.find("killed "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("worker rank 1 (pid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("was killed by signal 9"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rc=137"), std::string::npos) << r.output;
  const auto at = r.output.find("secs=");
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_LT(std::stod(r.output.substr(at + 5)), 15.0) << r.output;  // the launcher's 5 s grace at most
}

TEST(DistCli, TorchrunStyleWorkerWhosePeerDiesFailsWithinTheTimeout) {
  const std::string dir = temp_dir("peer");
  const std::string port = std::to_string(mixlab::free_local_port());
  const std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " ";
  const std::string cmd = kBinary + " --threads 1 train " + kTiny + " --steps 1000000 --dist-timeout 10 --out " + dir;
  const auto r =
      bash(env + "RANK=0 " + cmd + "/o > " + dir + "/log0 2>&1 & R0=$!; " + env + "RANK=1 " + cmd + "/o1 > " + dir +
           "/log1 2>&1 & R1=$!; "
           "for i in $(seq 1 600); do [ -s " +
           dir +
           "/o/metrics.jsonl ] && break; sleep 0.1; done; "
           "kill -9 $R1; t0=$(date +%s.%N); wait $R0; rc=$?; t1=$(date +%s.%N); "
           "echo rc=$rc secs=$(awk \"BEGIN{print $t1 - $t0}\"); cat " +
           dir + "/log0");
  EXPECT_NE(r.output.find("rc=3 "), std::string::npos) << r.output;  // DistributedError is an I/O error
  EXPECT_NE(r.output.find("rank 0 of 2"), std::string::npos) << r.output;
  const auto at = r.output.find("secs=");
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_LT(std::stod(r.output.substr(at + 5)), 20.0) << r.output;  // --dist-timeout 10 at most, plus exit
  EXPECT_FALSE(fs::exists(dir + "/o1")) << "rank 1 must not write a run directory";
}

TEST(DistCli, PortInUseIsAClearError) {
  const std::string dir = temp_dir("port");
  const int64_t port_number = mixlab::free_local_port();
  const std::string port = std::to_string(port_number);
  // A lone rank 0 of a 4-process launch holds the port: it waits for ranks that never all come.
  // (With a 2-process holder the launch's own rank 1 could join it, train the two steps with it
  // and free the port before the launch's rank 0 tried it: a flaky test.) The launch starts once
  // the holder listens (state 0A in /proc/net/tcp*: a loaded machine may take seconds to start it).
  std::ofstream(dir + "/run.sh") << "WORLD_SIZE=4 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" << port << " " << kBinary
                                 << " --threads 1 train " << kTiny << " --steps 2 --dist-timeout 20 --out " << dir
                                 << "/holder > /dev/null 2>&1 &\nH=$!\n"
                                 << "for i in $(seq 1 600); do\n"
                                 << "  awk '{print $2, $4}' /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -qi ':"
                                 << fmt::format("{:04X}", port_number) << " 0A' && break; sleep 0.1\ndone\n"
                                 << kBinary << " --threads 1 train " << kTiny
                                 << " --steps 2 --nproc 2 --dist-timeout 10 --master-port " << port << " --out " << dir
                                 << "/o 2>&1\necho rc=$?\nkill -9 $H\n";
  const auto r = run_command("bash " + dir + "/run.sh 2>&1");
  EXPECT_NE(r.output.find("already in use"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(port), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("rc=0"), std::string::npos) << r.output;
}

}  // namespace
