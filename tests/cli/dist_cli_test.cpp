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

namespace dist_cli_test {

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
  expect_failure("--nproc 2 --set row_groups=2", "key 'row_groups' = 2 cannot be combined with data parallel");
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

// ---- Failures of a torchrun-style launch (docs/RELIABILITY.md, "Data parallel") ----

// The shell line that starts rank `rank` of `world` in the background as $P<rank>, its output in
// <dir>/log<rank>.
std::string start_rank(int64_t world, int64_t rank, const std::string& port, const std::string& dir,
                       const std::string& args, const std::string& binary = kBinary) {
  return fmt::format(
      "WORLD_SIZE={0} RANK={1} LOCAL_RANK={1} MASTER_ADDR=127.0.0.1 MASTER_PORT={2} {3} --threads 1 train {4} {5} "
      "> {6}/log{1} 2>&1 &\nP{1}=$!\n",
      world, rank, port, binary, kTiny, args, dir);
}

// Shell lines that wait for $P<rank> and print "rank R rc=C secs=S" (S from the time $T0 was taken).
std::string wait_rank(int64_t rank) {
  return fmt::format(
      "wait $P{0}; rc=$?; echo \"rank {0} rc=$rc secs=$(awk \"BEGIN{{print $(date +%s.%N) - $T0}}\")\"\n", rank);
}

std::string run_script(const std::string& dir, const std::string& script) {
  std::ofstream(dir + "/run.sh") << "T0=$(date +%s.%N)\n" << script;
  return run_command("bash " + dir + "/run.sh 2>&1").output;
}

// The exit code and seconds of rank `rank` from a wait_rank line; -1 when absent.
std::pair<int, double> rank_outcome(const std::string& output, int64_t rank) {
  const std::string tag = fmt::format("rank {} rc=", rank);
  const auto at = output.find(tag);
  if (at == std::string::npos) return {-1, -1.0};
  const auto secs = output.find("secs=", at);
  return {std::stoi(output.substr(at + tag.size())), std::stod(output.substr(secs + 5))};
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A rank killed mid-run (SIGKILL) in a torchrun-style launch of `world` ranks: every survivor
// exits with code 3 within the timeout, naming the killed rank; rank 0's last checkpoint (or, when
// rank 0 is the one killed, the last it finished writing) reads back verified, and the same
// launch resumes from it and completes.
void expect_killed_rank_is_named_and_the_run_resumes(int64_t world, int64_t victim) {
  const std::string dir = temp_dir(fmt::format("kill{}of{}", victim, world));
  const std::string out = dir + "/o";
  // 12 rows split 2 or 3 ways; a checkpoint every 10 steps; more steps than will ever run.
  const std::string args = "--set batch=12 --set checkpoint_every=10 --steps 100000 --dist-timeout 10 --out " + out;
  std::string script;
  const std::string port = std::to_string(mixlab::free_local_port());
  for (int64_t r = 0; r < world; ++r) script += start_rank(world, r, port, dir, args);
  // Kill once a checkpoint exists and training has gone on past it.
  script += "for i in $(seq 1 600); do [ -f " + out + "/checkpoint.pt ] && [ \"$(wc -l < " + out +
            "/metrics.jsonl)\" -ge 15 ] && break; sleep 0.05; done\n";
  script += fmt::format("kill -9 $P{0}; wait $P{0} 2>/dev/null; T0=$(date +%s.%N)\n", victim);
  for (int64_t r = 0; r < world; ++r)
    if (r != victim) script += wait_rank(r);
  const std::string output = run_script(dir, script);
  for (int64_t r = 0; r < world; ++r) {
    if (r == victim) continue;
    const std::string log = file_text(fmt::format("{}/log{}", dir, r));
    const auto [code, seconds] = rank_outcome(output, r);
    EXPECT_EQ(code, 3) << "rank " << r << "\n" << output << log;  // DistributedError is an I/O error
    EXPECT_GE(seconds, 0.0) << output;
    EXPECT_LT(seconds, 20.0) << "rank " << r << "\n" << log;  // --dist-timeout 10 at most, plus exit
    EXPECT_NE(log.find(fmt::format("rank {} of {}: ", r, world)), std::string::npos) << log;
    EXPECT_NE(log.find(fmt::format("lost rank {} (", victim)), std::string::npos) << "rank " << r << "\n" << log;
  }

  // The last checkpoint: header, size and checksum verified by checkpoint_read.
  const auto ckpt = mixlab::checkpoint_read(out + "/checkpoint.pt");
  ASSERT_GE(ckpt.step, 10);
  EXPECT_EQ(ckpt.step % 10, 0);
  EXPECT_EQ(ckpt.config.batch, 12);

  // The same launch resumes from it and completes 5 more steps.
  const int64_t until = ckpt.step + 5;
  const std::string resume_dir = dir + "/resume";
  fs::create_directories(resume_dir);
  const std::string resume_args = fmt::format(
      "--set batch=12 --set checkpoint_every=10 --steps 100000 --dist-timeout 10 --resume {0}/checkpoint.pt --until "
      "{1} "
      "--out {0}",
      out, until);
  std::string resume;
  const std::string port2 = std::to_string(mixlab::free_local_port());
  for (int64_t r = 0; r < world; ++r) resume += start_rank(world, r, port2, resume_dir, resume_args);
  for (int64_t r = 0; r < world; ++r) resume += wait_rank(r);
  const std::string resumed = run_script(resume_dir, resume);
  for (int64_t r = 0; r < world; ++r)
    EXPECT_EQ(rank_outcome(resumed, r).first, 0) << "rank " << r << "\n"
                                                 << resumed << file_text(fmt::format("{}/log{}", resume_dir, r));
  const auto result = nlohmann::json::parse(file_text(out + "/result.json"));
  EXPECT_EQ(result["step"], until);
  EXPECT_EQ(result["world_size"], world);
  EXPECT_EQ(mixlab::checkpoint_read(out + "/checkpoint.pt").step, until);
}

TEST(DistCli, KilledRankOfTwoIsNamedAndTheCheckpointResumes) { expect_killed_rank_is_named_and_the_run_resumes(2, 1); }

TEST(DistCli, KilledRankOfThreeIsNamedAndTheCheckpointResumes) {
  expect_killed_rank_is_named_and_the_run_resumes(3, 1);
}

// Rank 0, the writer and the store's server, killed: ranks 1 and 2 name it; its last finished
// checkpoint is intact (written atomically) and resumes.
TEST(DistCli, KilledRankZeroOfThreeIsNamedAndTheCheckpointResumes) {
  expect_killed_rank_is_named_and_the_run_resumes(3, 0);
}

// A rank that never joins: the ranks that came exit with code 3 after --dist-timeout, naming what
// they waited for, and write nothing. Rank 0 alone names rank 1; rank 1 alone names rank 0's
// rendezvous server.
TEST(DistCli, RankThatNeverJoinsIsATimeoutNotAHang) {
  const std::string dir = temp_dir("never");
  const std::string port0 = std::to_string(mixlab::free_local_port());
  const std::string port1 = std::to_string(mixlab::free_local_port());
  const std::string args = "--steps 5 --dist-timeout 3 --out " + dir + "/o";
  const std::string output = run_script(
      dir, start_rank(2, 0, port0, dir, args) + start_rank(2, 1, port1, dir, args) + wait_rank(0) + wait_rank(1));
  const std::string log0 = file_text(dir + "/log0"), log1 = file_text(dir + "/log1");
  for (int64_t r : {0, 1}) {
    const auto [code, seconds] = rank_outcome(output, r);
    EXPECT_EQ(code, 3) << output << log0 << log1;
    EXPECT_GE(seconds, 2.9) << output;   // it did wait for the timeout...
    EXPECT_LT(seconds, 15.0) << output;  // ...and no longer
  }
  EXPECT_NE(log0.find("rank 0 of 2: rank(s) 1 did not join the launch at MASTER_ADDR:MASTER_PORT = 127.0.0.1:" + port0 +
                      " within 3 s"),
            std::string::npos)
      << log0;
  EXPECT_NE(log1.find("rank 1 of 2: cannot reach the rendezvous server (rank 0) at MASTER_ADDR:MASTER_PORT = "
                      "127.0.0.1:" +
                      port1 + " within 3 s"),
            std::string::npos)
      << log1;
  EXPECT_FALSE(fs::exists(dir + "/o")) << "nothing is written before every rank has joined";
}

// Ranks started with different configs are refused by every rank before the first step (exit
// code 2, a user error), each naming the field and both values; nothing is written.
TEST(DistCli, RanksWithDifferentConfigsAreRefusedBeforeTheFirstStep) {
  const std::string dir = temp_dir("configs");
  const std::string d2 = dir + "/two", d3 = dir + "/three";
  fs::create_directories(d2);
  fs::create_directories(d3);
  // Two ranks, rank 1 at another d_model; three ranks, rank 2 with other steps and seed.
  const std::string port2 = std::to_string(mixlab::free_local_port());
  const std::string a2 = "--steps 5 --dist-timeout 20 --out " + d2 + "/o";
  const std::string a3 = "--set batch=12 --steps 5 --seed 1 --dist-timeout 20 --out " + d3 + "/o";
  const std::string output =
      run_script(d2, start_rank(2, 0, port2, d2, a2) + start_rank(2, 1, port2, d2, a2 + " --set d_model=32") +
                         wait_rank(0) + wait_rank(1));
  const std::string port3 = std::to_string(mixlab::free_local_port());
  std::string script3;
  for (int64_t r = 0; r < 3; ++r)
    script3 += start_rank(3, r, port3, d3, r == 2 ? a3 + " --set steps=7 --set seed=9" : a3);
  for (int64_t r = 0; r < 3; ++r) script3 += wait_rank(r);
  const std::string output3 = run_script(d3, script3);

  for (int64_t r = 0; r < 2; ++r) {
    const std::string log = file_text(fmt::format("{}/log{}", d2, r));
    const auto [code, seconds] = rank_outcome(output, r);
    EXPECT_EQ(code, 2) << output << log;
    EXPECT_LT(seconds, 15.0) << output;  // refused at once, not after the 20 s timeout
    EXPECT_NE(log.find(fmt::format("rank {} of 2: refusing to train", r)), std::string::npos) << log;
    const std::string field =
        r == 0 ? "'config.d_model': rank 0 has 16, rank 1 has 32" : "'config.d_model': rank 1 has 32, rank 0 has 16";
    EXPECT_NE(log.find(field), std::string::npos) << log;
  }
  EXPECT_FALSE(fs::exists(d2 + "/o")) << "rank 0 refused before creating --out";

  for (int64_t r = 0; r < 3; ++r) {
    const std::string log = file_text(fmt::format("{}/log{}", d3, r));
    EXPECT_EQ(rank_outcome(output3, r).first, 2) << output3 << log;
    EXPECT_LT(rank_outcome(output3, r).second, 15.0) << output3;
    const std::string steps = r == 2 ? "'config.steps': rank 2 has 7, rank 0 has 5"
                                     : fmt::format("'config.steps': rank {} has 5, rank 2 has 7", r);
    const std::string seed = r == 2 ? "'config.seed': rank 2 has 9, rank 0 has 1"
                                    : fmt::format("'config.seed': rank {} has 1, rank 2 has 9", r);
    EXPECT_NE(log.find(steps), std::string::npos) << log;
    EXPECT_NE(log.find(seed), std::string::npos) << log;
  }
  EXPECT_FALSE(fs::exists(d3 + "/o"));
}

// Ranks running different executables are refused: rank 1 runs a copy of the binary with one byte
// appended (an ELF file runs the same with trailing bytes), so only the build identity differs.
TEST(DistCli, RanksRunningDifferentBinariesAreRefused) {
  const std::string dir = temp_dir("binaries");
  const std::string copy = dir + "/mixlab-copy";
  fs::copy_file(kBinary, copy);
  std::ofstream(copy, std::ios::app | std::ios::binary) << 'x';
  fs::permissions(copy, fs::perms::owner_all);
  const std::string port = std::to_string(mixlab::free_local_port());
  const std::string args = "--steps 5 --dist-timeout 20 --out " + dir + "/o";
  const std::string output = run_script(
      dir, start_rank(2, 0, port, dir, args) + start_rank(2, 1, port, dir, args, copy) + wait_rank(0) + wait_rank(1));
  const auto size = fs::file_size(kBinary);
  for (int64_t r = 0; r < 2; ++r) {
    const std::string log = file_text(fmt::format("{}/log{}", dir, r));
    EXPECT_EQ(rank_outcome(output, r).first, 2) << output << log;
    EXPECT_NE(log.find("refusing to train"), std::string::npos) << log;
    // Both identities, by their sizes: the copy is one byte longer.
    EXPECT_NE(log.find("'executable': rank " + std::to_string(r)), std::string::npos) << log;
    EXPECT_NE(log.find("executable of " + std::to_string(size) + " bytes"), std::string::npos) << log;
    EXPECT_NE(log.find("executable of " + std::to_string(size + 1) + " bytes"), std::string::npos) << log;
    EXPECT_EQ(log.find("'config."), std::string::npos) << "only the binary differs\n" << log;
  }
  EXPECT_FALSE(fs::exists(dir + "/o"));
}

TEST(DistCli, PortInUseIsAClearError) {
  const std::string dir = temp_dir("port");
  const int64_t port_number = mixlab::free_local_port();
  const std::string port = std::to_string(port_number);
  // A lone rank 0 of a 4-process launch holds the port: it waits for ranks that never all come.
  // The launch starts once the holder listens (state 0A in /proc/net/tcp*: a loaded machine may
  // take seconds to start it), and its launcher refuses the port before starting a worker. (When
  // the workers found out, the launch's rank 1 could reach the holder first and fail on its
  // different WORLD_SIZE, a message without the port: this test failed that way in CI.)
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

}  // namespace dist_cli_test
