// Issue 16, one test per class of failure: full disk (LD_PRELOAD ENOSPC shim), divergence,
// checkpoint checksums, resource bounds, validation before the output dir is touched, strict
// numbers, thread bounds, the +cache analysis at T = 2^20, run-dir locking, one-line errors with
// documented exit codes, metrics after resume, and the spec grammar. docs/RELIABILITY.md maps
// each promise to the test here that shows it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "mixlab_test_paths.h"
#include "support/run_command.h"

namespace reliability_cli_test {

namespace {

namespace fs = std::filesystem;

#define MIXLAB_ENOSPC_SHIM MIXLAB_BINARY_DIR "/libmixlab_enospc_shim.so"
#define MIXLAB_KILL_SHIM MIXLAB_BINARY_DIR "/libmixlab_kill_shim.so"

constexpr int kExitUser = 2, kExitIo = 3, kExitDiverged = 4;

// Runs `env mixlab args`; `env` is a prefix of VAR=value words (may be empty).
RunResult run_env(const std::string& env, const std::string& args, bool threads = true) {
  const std::string binary = MIXLAB_BINARY_DIR "/mixlab";
  return run_command(env + " " + binary + (threads ? " --threads 1 " : " ") + args + " 2>&1");
}
RunResult run(const std::string& args) { return run_env("", args); }

// A failure is exactly one line "mixlab: error: ..." containing `fragment`, with exit `code`.
void expect_error(const RunResult& r, int code, const std::string& fragment, const std::string& what) {
  EXPECT_EQ(r.code, code) << what << "\n" << r.output;
  EXPECT_NE(r.output.find(fragment), std::string::npos) << what << "\n" << r.output;
  // The error is the last line; progress lines may precede it, nothing follows it.
  const auto pos = r.output.rfind("mixlab: error: ");
  ASSERT_NE(pos, std::string::npos) << what << "\n" << r.output;
  EXPECT_TRUE(pos == 0 || r.output[pos - 1] == '\n') << what << "\n" << r.output;
  EXPECT_EQ(r.output.find('\n', pos), r.output.size() - 1) << what << ": more than one line\n" << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
}

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::path(::testing::TempDir()) / ("mixlab_rel_cli_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool has_tmp_files(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos) return true;
  return false;
}

const std::string kTiny =
    "train --task copy --set vocab=12 --set length=4 --set d_model=16 --set heads=2 "
    "--set mlp_ratio=2 --set batch=4 --set eval_batches=1 --set warmup=1 --quiet ";

}  // namespace

// Item 1: a full disk during a checkpoint save is a clear I/O error (exit 3), not an abort; the
// earlier checkpoint survives and loads; no temporary file is left behind.
TEST(ReliabilityCli, DiskFullDuringCheckpointKeepsTheLastOne) {
  const std::string dir = temp_dir("enospc_ckpt");
  auto ok = run(kTiny + "--steps 2 --out " + dir + "/probe");
  ASSERT_EQ(ok.code, 0) << ok.output;
  const auto ckpt_size = static_cast<long long>(fs::file_size(dir + "/probe/checkpoint.pt"));
  // Room for config.json, a few metrics lines and one checkpoint, not two.
  const std::string env =
      "LD_PRELOAD=" MIXLAB_ENOSPC_SHIM " MIXLAB_ENOSPC_AFTER=" + std::to_string(ckpt_size + ckpt_size / 2);
  auto r = run_env(env, kTiny + "--steps 8 --set checkpoint_every=2 --set log_every=100 --out " + dir + "/full");
  expect_error(r, kExitIo, "No space left on device", "full disk");
  EXPECT_NE(r.output.find("checkpoint.pt"), std::string::npos) << r.output;
  EXPECT_FALSE(has_tmp_files(dir + "/full"));
  auto e = run("eval --json --checkpoint " + dir + "/full/checkpoint.pt");
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_EQ(nlohmann::json::parse(e.output.substr(e.output.find('{')))["step"], 2);
}

// Item 2: metrics/config/result writes are checked: a full disk is an error naming the file.
TEST(ReliabilityCli, DiskFullForMetricsAndConfigIsAnError) {
  const std::string dir = temp_dir("enospc_small");
  const std::string shim = "LD_PRELOAD=" MIXLAB_ENOSPC_SHIM " MIXLAB_ENOSPC_AFTER=";
  auto r = run_env(shim + "10", kTiny + "--steps 2 --out " + dir + "/a");
  expect_error(r, kExitIo, "config.json", "config.json on a full disk");
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
  // Enough for config.json (about 600 bytes), not for the first metrics line and checkpoint.
  r = run_env(shim + "700", kTiny + "--steps 2 --set log_every=1 --out " + dir + "/b");
  EXPECT_EQ(r.code, kExitIo) << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
  EXPECT_FALSE(has_tmp_files(dir + "/b"));
}

// Item 3: divergence stops the run (exit 4) with a message naming lr; the checkpoint on disk is
// finite and evaluates; --skip-nonfinite skips instead of stopping.
TEST(ReliabilityCli, DivergenceStopsAndKeepsTheFiniteCheckpoint) {
  const std::string dir = temp_dir("nan");
  auto r = run(kTiny + "--steps 40 --set lr=1e6 --set checkpoint_every=1 --out " + dir);
  expect_error(r, kExitDiverged, "non-finite", "lr=1e6");
  EXPECT_NE(r.output.find("'lr'"), std::string::npos) << r.output;
  ASSERT_TRUE(fs::exists(dir + "/checkpoint.pt")) << r.output;
  // Its parameters are finite; they may still give a non-finite loss (the step after them
  // diverged), which eval reports as an error instead of printing "loss nan" with exit 0.
  auto e = run("eval --checkpoint " + dir + "/checkpoint.pt");
  EXPECT_TRUE(e.code == 0 || e.code == kExitDiverged) << e.output;
  if (e.code == 0) EXPECT_EQ(e.output.find("nan"), std::string::npos) << e.output;

  auto s = run_env("",
                   "train --task copy --mixer attention --set vocab=12 --set length=4 --set d_model=16 --set "
                   "heads=2 --set mlp_ratio=2 --set batch=4 --set eval_batches=1 --set warmup=1 --steps 40 "
                   "--set lr=1e6 --skip-nonfinite 100 --out " +
                       dir + "/skip");
  EXPECT_NE(s.output.find("step skipped"), std::string::npos) << s.output;
}

// Item 4: a flipped bit anywhere in a checkpoint is detected by the checksum.
TEST(ReliabilityCli, CorruptCheckpointIsRejected) {
  const std::string dir = temp_dir("flip");
  ASSERT_EQ(run(kTiny + "--steps 2 --out " + dir).code, 0);
  std::string bytes = slurp(dir + "/checkpoint.pt");
  bytes[bytes.size() * 2 / 3] ^= 0x40;
  std::ofstream(dir + "/flipped.pt", std::ios::binary) << bytes;
  expect_error(run("eval --checkpoint " + dir + "/flipped.pt"), kExitUser, "checksum mismatch", "bit flip");
  expect_error(run(kTiny + "--steps 4 --resume " + dir + "/flipped.pt --out " + dir + "/r"), kExitUser,
               "checksum mismatch", "resume from a flipped checkpoint");
  EXPECT_FALSE(fs::exists(dir + "/r"));
}

// Item 5: absurd sizes are refused before allocating; config files are read up to a limit.
TEST(ReliabilityCli, ResourceBounds) {
  const std::string dir = temp_dir("bounds");
  for (const std::string& set :
       {"batch=1000000000", "length=1000000000", "layers=1000000000", "vocab=1000000000000", "d_model=1099511627776"}) {
    expect_error(run(kTiny + "--steps 1 --set " + set + " --out " + dir + "/o"), kExitUser, "memory", set);
  }
  expect_error(run(kTiny + "--steps 1 --set d_model=2199023255552 --out " + dir + "/o"), kExitUser, "'d_model'",
               "d_model above 2^40");
  expect_error(run("train --config /dev/zero --out " + dir + "/o"), kExitUser, "not a regular file", "/dev/zero");
  expect_error(run(kTiny + "--steps 1 --max-memory 1K --out " + dir + "/o"), kExitUser, "--max-memory", "1K");
  EXPECT_FALSE(fs::exists(dir + "/o"));
}

// Item 6: a failing command leaves an existing run dir as it was.
TEST(ReliabilityCli, FailedCommandLeavesTheRunDirAlone) {
  const std::string dir = temp_dir("untouched");
  ASSERT_EQ(run(kTiny + "--steps 2 --out " + dir).code, 0);
  const std::string config = slurp(dir + "/config.json"), metrics = slurp(dir + "/metrics.jsonl");
  expect_error(run(kTiny + "--steps 2 --mixer bogus --out " + dir), kExitUser, "unknown family 'bogus'", "bogus");
  expect_error(run(kTiny + "--steps 2 --mixer resolvent:pwo2 --out " + dir), kExitUser, "pwo2", "pwo2");
  expect_error(run(kTiny + "--steps 4 --set d_model=32 --resume " + dir + "/checkpoint.pt --out " + dir), kExitUser,
               "different config", "resume mismatch");
  EXPECT_EQ(slurp(dir + "/config.json"), config);
  EXPECT_EQ(slurp(dir + "/metrics.jsonl"), metrics);
  expect_error(run(kTiny + "--steps 2 --mixer local:0 --out " + dir + "/new"), kExitUser, "local:0", "local:0");
  EXPECT_FALSE(fs::exists(dir + "/new"));
}

// Items 8 and 12: numbers are never clamped; seeds are uint64; range errors are short.
TEST(ReliabilityCli, NumbersAreStrict) {
  const std::string dir = temp_dir("numbers");
  expect_error(run(kTiny + "--steps 99999999999999999999 --out " + dir + "/o"), kExitUser, "--steps", "huge steps");
  expect_error(run(kTiny + "--steps 0 --out " + dir + "/o"), kExitUser, "--steps", "steps 0");
  EXPECT_EQ(run(kTiny + "--steps 0 --out " + dir + "/o").output.find("179769"), std::string::npos);
  expect_error(run(kTiny + "--seed -1 --out " + dir + "/o"), kExitUser, "--seed", "seed -1");
  expect_error(run(kTiny + "--until 1e3 --out " + dir + "/o"), kExitUser, "--until", "until 1e3");
  expect_error(run(kTiny + "--set seed=18446744073709551616 --out " + dir + "/o"), kExitUser, "'seed'", "seed 2^64");
  auto r = run(kTiny + "--steps 1 --seed 18446744073709551615 --out " + dir + "/s");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(slurp(dir + "/s/config.json").find("18446744073709551615"), std::string::npos);
  expect_error(run("eval --batches 99999999999999999999 --checkpoint " + dir + "/s/checkpoint.pt"), kExitUser,
               "--batches", "eval --batches");
}

// Issue 37 item 1: an empty option value is an error naming the option (it used to keep the
// default silently); a file that is not a regular file is refused before it is read (a checkpoint
// "from" /dev/zero used to grow memory without end); an overflowing number names its key.
TEST(ReliabilityCli, EmptyValuesDevicesAndOverflowAreErrors) {
  const std::string dir = temp_dir("empty");
  expect_error(run(kTiny + "--steps \"\" --out " + dir + "/o"), kExitUser, "--steps", "train --steps ''");
  expect_error(run(kTiny + "--steps \"\" --out " + dir + "/o"), kExitUser, "empty value", "train --steps ''");
  expect_error(run_env("", "--threads \"\" mixers", false), kExitUser, "--threads", "--threads ''");
  expect_error(run("compare --tasks \"\" --mixers attention"), kExitUser, "--tasks", "compare --tasks ''");
  expect_error(run("analyze --pattern \"\" --T 16"), kExitUser, "--pattern", "analyze --pattern ''");
  expect_error(run("eval --checkpoint /dev/zero"), kExitUser, "not a regular file", "eval /dev/zero");
  expect_error(run("generate --checkpoint /dev/zero --prompt a"), kExitUser, "not a regular file",
               "generate /dev/zero");
  expect_error(run(kTiny + "--steps 1 --set lr=1e300 --out " + dir + "/o"), kExitUser, "key 'lr' must be in (0, 1e30]",
               "lr 1e300");
  EXPECT_FALSE(fs::exists(dir + "/o"));
}

// Item 9: thread counts are bounded (4 x cores) and checked, from the flag and the environment.
TEST(ReliabilityCli, ThreadCountsAreBounded) {
  expect_error(run_env("", "--threads 2147483647 mixers", false), kExitUser, "--threads", "--threads huge");
  expect_error(run_env("", "--threads 0 mixers", false), kExitUser, "--threads", "--threads 0");
  for (const std::string& v : {"99999999999", "2147483648", "-3", "4x"}) {
    expect_error(run_env("MIXLAB_THREADS=" + v, "mixers", false), kExitUser, "MIXLAB_THREADS", v);
  }
  EXPECT_EQ(run_env("MIXLAB_THREADS=1", "mixers", false).code, 0);
}

// Item 10: analyze linear+cache at T = 2^20 ran for hours (O(T^2) graph search over rows of
// size i). Its lattice steps are all 1, so its rows are linear's and the analysis takes linear's
// O(T) shortcuts (analysis_equivalent_pattern): about 1.4 s on the 2-core machine.
TEST(ReliabilityCli, AnalyzeLinearCacheAtTheLongestTFinishes) {
  auto r = run("analyze --pattern linear+cache --T 1048576 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"coin-change\""), std::string::npos) << r.output;
}

// Item 11: a second run on a locked --out gets "in use by pid N" and changes nothing.
TEST(ReliabilityCli, RunDirIsLocked) {
  const std::string dir = temp_dir("lock");
  const int fd = ::open((dir + "/.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string pid = std::to_string(::getpid());
  ASSERT_EQ(::write(fd, pid.data(), pid.size()), static_cast<ssize_t>(pid.size()));
  expect_error(run(kTiny + "--steps 2 --out " + dir), kExitIo, "in use by pid " + pid, "locked dir");
  EXPECT_FALSE(fs::exists(dir + "/config.json"));
  ::close(fd);  // released: the next run proceeds
  EXPECT_EQ(run(kTiny + "--steps 2 --out " + dir).code, 0);
}

// compare --resume: a compare SIGKILLed at its K-th file operation (inside a metrics line, a
// checkpoint or a record, by the kill shim) and then run again with --resume gives the cells of
// the compare that was never killed; its directory is locked while it runs.
TEST(ReliabilityCli, KilledCompareResumesToTheSameTable) {
  const std::string base = temp_dir("compare_resume");
  const std::string args =
      "compare --tasks copy,recall --mixers attention,local:4 --jobs 1 --quiet --set steps=12 --set d_model=16 "
      "--set heads=2 --set layers=1 --set batch=4 --set length=12 --set pairs=3 --set eval_batches=1 "
      "--set eval_batch=8 --set eval_every=4 --set stop_at=0 --out ";
  ASSERT_EQ(run(args + base + "/whole").code, 0);
  // Compare checkpoints each run at its evaluations (checkpoint_every = eval_every) unless told.
  const auto record = nlohmann::json::parse(slurp(base + "/whole/runs/attention_copy.result.json"));
  EXPECT_EQ(record["record"]["config"]["checkpoint_every"], 4);
  // The cells, without what is measured anew each time (seconds, rates, decode speed).
  auto cells = [](const std::string& dir) {
    auto doc = nlohmann::json::parse(slurp(dir + "/compare.json"));
    for (auto& row : doc["rows"])
      for (const char* k : {"decode_us_per_token", "train_seconds", "train_tokens_per_s"}) row.erase(k);
    return doc["rows"];
  };
  const auto whole = cells(base + "/whole");
  ASSERT_EQ(whole.size(), 2u);
  for (int kill_at : {9, 23, 41, 67}) {
    SCOPED_TRACE("killed at file operation " + std::to_string(kill_at));
    const std::string out = base + "/cut" + std::to_string(kill_at);
    const RunResult killed =
        run_env("MIXLAB_KILL_AT_FILE_OP=" + std::to_string(kill_at) + " LD_PRELOAD=" MIXLAB_KILL_SHIM, args + out);
    ASSERT_NE(killed.output.find("kill_shim: SIGKILL in"), std::string::npos) << killed.output;
    ASSERT_NE(killed.code, 0);
    // --plan lists what --resume will do and changes nothing.
    const RunResult plan = run(args + out + " --resume --plan");
    ASSERT_EQ(plan.code, 0) << plan.output;
    EXPECT_NE(plan.output.find("compare --plan: 4 run(s) into " + out + "/runs with --resume: "), std::string::npos)
        << plan.output;
    EXPECT_FALSE(fs::exists(out + "/compare.json"));
    const RunResult resumed = run(args + out + " --resume");
    ASSERT_EQ(resumed.code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("compare --resume: of 4 runs"), std::string::npos) << resumed.output;
    EXPECT_EQ(cells(out), whole);
    EXPECT_FALSE(has_tmp_files(out + "/runs"));
  }
  // Locked: a second compare into a directory in use is an I/O error naming the holder.
  const std::string dir = base + "/whole";
  const int fd = ::open((dir + "/.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string pid = std::to_string(::getpid());
  ASSERT_EQ(::write(fd, pid.data(), pid.size()), static_cast<ssize_t>(pid.size()));
  expect_error(run(args + dir + " --resume"), kExitIo, "in use by pid " + pid, "locked compare dir");
  // --plan takes no lock: it may look into a compare that is running.
  const RunResult plan = run(args + dir + " --resume --plan");
  EXPECT_EQ(plan.code, 0) << plan.output;
  EXPECT_NE(plan.output.find("4 kept, 0 resumed from a checkpoint, 0 trained from the start; 0 of 48 planned steps"),
            std::string::npos)
      << plan.output;
  ::close(fd);
  fs::remove_all(base);
}

// Item 12: CLI11 parse errors are one "mixlab: error:" line with the user-error code.
TEST(ReliabilityCli, ParseErrorsAreOneLine) {
  expect_error(run("train --no-such-flag"), kExitUser, "--no-such-flag", "unknown flag");
  expect_error(run("nosuchcommand"), kExitUser, "nosuchcommand", "unknown command");
  expect_error(run("eval"), kExitUser, "--checkpoint", "missing required");
  EXPECT_EQ(run("--help").code, 0);
}

// Item 13: after a resume, metrics.jsonl has each training step once, in order.
TEST(ReliabilityCli, ResumeDoesNotDuplicateMetrics) {
  const std::string dir = temp_dir("resume_metrics");
  const std::string common = kTiny + "--steps 6 --set log_every=1 --out " + dir;
  ASSERT_EQ(run(common + " --until 2").code, 0);
  fs::copy_file(dir + "/checkpoint.pt", dir + "/step2.pt");
  ASSERT_EQ(run(common + " --until 4 --resume " + dir + "/checkpoint.pt").code, 0);
  // As after a crash at step 4 with the last good checkpoint at step 2.
  auto r = run(common + " --resume " + dir + "/step2.pt");
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream in(dir + "/metrics.jsonl");
  std::string line;
  int64_t last = 0;
  int train_lines = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("loss")) continue;
    EXPECT_EQ(j["step"].get<int64_t>(), last + 1) << line;
    last = j["step"].get<int64_t>();
    ++train_lines;
  }
  EXPECT_EQ(train_lines, 6);
}

// Issue 37 item 5 (found by scripts/soak.sh): a run killed after its final evaluation line but
// before it exited (while writing result.json) resumes from its last-step checkpoint and evaluates
// again; that line must then replace the first, not follow it. Resuming a finished run is the
// same state.
TEST(ReliabilityCli, ResumeAtTheLastStepWritesTheFinalEvaluationOnce) {
  const std::string dir = temp_dir("resume_final_eval");
  const std::string common = kTiny + "--steps 4 --set log_every=1 --set eval_every=2 --out " + dir;
  ASSERT_EQ(run(common).code, 0);
  auto r = run(common + " --resume " + dir + "/checkpoint.pt");
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream in(dir + "/metrics.jsonl");
  std::string line;
  std::vector<int64_t> eval_steps;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("eval_loss")) eval_steps.push_back(j["step"].get<int64_t>());
  }
  EXPECT_EQ(eval_steps, (std::vector<int64_t>{2, 4}));
}

// Item 14: one spec grammar: empty specs and a ':' with nothing after it are errors.
TEST(ReliabilityCli, SpecGrammarIsStrict) {
  const std::string dir = temp_dir("specs");
  expect_error(run(kTiny + "--steps 1 --mixer '' --out " + dir + "/o"), kExitUser, "empty", "empty spec");
  for (const std::string& spec : {"local:", "ssm:", "toeplitz:", "mamba:", "local:8:", "resolvent:"}) {
    expect_error(run(kTiny + "--steps 1 --mixer " + spec + " --out " + dir + "/o"), kExitUser, spec, spec);
  }
  EXPECT_FALSE(fs::exists(dir + "/o"));
}

}  // namespace reliability_cli_test
