// Bring your own data through the CLI: `train --task lm` on a plain-text corpus (corpus=) and on
// nanoGPT token files (tokens=, gpt2 and ids), then eval and generate on those checkpoints;
// every task with its defaults; global options after the subcommand; the bad inputs' errors.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "mixlab_test_paths.h"
#include "support/run_command.h"

namespace lm_data_cli_test {

namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::path(::testing::TempDir()) / ("mixlab_lm_data_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// A private cache per test; GPT-2's files from the checkout (scripts/setup.sh).
RunResult run_mixlab(const std::string& dir, const std::string& args) {
  return run_command("MIXLAB_CACHE_DIR=" + dir + "/cache MIXLAB_GPT2_DIR=" MIXLAB_SOURCE_DIR "/data/gpt2 " +
                     MIXLAB_BINARY_DIR "/mixlab " + args + " 2>&1");
}

void expect_failure(const std::string& dir, const std::string& args, const std::string& fragment) {
  const auto r = run_mixlab(dir, args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(fragment), std::string::npos) << args << "\n" << r.output;
}

void write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

void write_ids(const fs::path& path, int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = static_cast<uint16_t>(rng() % static_cast<uint32_t>(vocab));
  write(path, std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 2));
}

// A tiny model, a few steps: these tests check plumbing, not learning.
const std::string kTiny =
    " --threads 1 --mixer attention --steps 3 --set length=16 --set d_model=16 --set heads=2 --set mlp_ratio=2 "
    "--set batch=4 --set warmup=1 --set eval_tokens=200 --quiet";

bool have_gpt2() { return fs::exists(MIXLAB_SOURCE_DIR "/data/gpt2/encoder.json"); }

}  // namespace

TEST(LmDataCli, TextCorpusFolderTrainsEvaluatesAndGenerates) {
  const std::string dir = temp_dir("corpus");
  for (int i = 0; i < 10; ++i)
    write(fs::path(dir) / "texts" / fmt::format("doc{:02d}.txt", i),
          fmt::format("Document {} says hello to the reader, line one.\nAnd line two of it.\n", i));
  const auto t = run_mixlab(dir, "train --task lm --set corpus=" + dir + "/texts" + kTiny + " --out " + dir + "/run");
  ASSERT_EQ(t.code, 0) << t.output;
  // Eval and generate find the corpus from another folder: the config holds its absolute path.
  const auto e = run_command("cd / && MIXLAB_CACHE_DIR=" + dir +
                             "/cache " MIXLAB_BINARY_DIR "/mixlab eval --threads 1 --checkpoint " + dir +
                             "/run/checkpoint.pt --split test 2>&1");
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("test split"), std::string::npos) << e.output;
  const auto g = run_mixlab(dir, "generate --checkpoint " + dir + "/run/checkpoint.pt --max-tokens 5 --prompt Doc");
  EXPECT_EQ(g.code, 0) << g.output;
  // Corpora the split cannot serve, and corpora that are not text.
  write(fs::path(dir) / "one.txt", "a single document");
  expect_failure(dir, "train --task lm --set corpus=" + dir + "/one.txt" + kTiny + " --out " + dir + "/x",
                 "has no valid document");
  write(fs::path(dir) / "two" / "a.txt", "one");
  write(fs::path(dir) / "two" / "b.txt", "two");
  expect_failure(dir, "train --task lm --set corpus=" + dir + "/two" + kTiny + " --out " + dir + "/x",
                 "has 4 tokens, fewer than a window of length + 1 = 17");
  expect_failure(dir, "train --task lm --set corpus=" + dir + "/nothing" + kTiny, "does not exist");
  write(fs::path(dir) / "bin" / "a.txt", std::string("PK\x03\x04\0\0", 6));
  expect_failure(dir, "train --task lm --set corpus=" + dir + "/bin" + kTiny, "looks binary (a NUL byte at offset 4)");
  EXPECT_FALSE(fs::exists(dir + "/x"));  // refused before --out is created
}

TEST(LmDataCli, TokenFilesTrainAndEvaluate) {
  const std::string dir = temp_dir("bin");
  write_ids(fs::path(dir) / "owt" / "train.bin", 4000, 50257, 1);
  write_ids(fs::path(dir) / "owt" / "val.bin", 1000, 50257, 2);
  const auto t = run_mixlab(dir, "train --task lm --set tokens=" + dir + "/owt" + kTiny + " --out " + dir + "/run");
  ASSERT_EQ(t.code, 0) << t.output;
  const auto e = run_mixlab(dir, "eval --threads 1 --checkpoint " + dir + "/run/checkpoint.pt --json");
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("\"tokenizer\": \"gpt2\""), std::string::npos) << e.output;
  expect_failure(dir, "eval --threads 1 --checkpoint " + dir + "/run/checkpoint.pt --split test", "has no test.bin");
  if (have_gpt2()) {
    const auto g = run_mixlab(dir, "generate --checkpoint " + dir + "/run/checkpoint.pt --max-tokens 4 --prompt Hi");
    EXPECT_EQ(g.code, 0) << g.output;
  }
  // Character ids of another vocabulary: tokenizer ids; nothing to generate from.
  write_ids(fs::path(dir) / "chars" / "train.bin", 3000, 65, 3);
  write_ids(fs::path(dir) / "chars" / "val.bin", 500, 65, 4);
  const auto c = run_mixlab(dir, "train --task lm --set tokens=" + dir + "/chars --set tokenizer=ids --set vocab=65" +
                                     kTiny + " --out " + dir + "/chars_run");
  ASSERT_EQ(c.code, 0) << c.output;
  expect_failure(dir, "generate --checkpoint " + dir + "/chars_run/checkpoint.pt", "tokenizer ids");
  // Ids that reach the vocabulary, an odd size, a missing val.bin.
  expect_failure(dir,
                 "train --task lm --set tokens=" + dir + "/chars --set tokenizer=ids --set vocab=10" + kTiny +
                     " --out " + dir + "/y",
                 "outside the vocabulary of 10");
  write(fs::path(dir) / "odd" / "train.bin", "abc");
  write(fs::path(dir) / "odd" / "val.bin", "ab");
  expect_failure(dir, "train --task lm --set tokens=" + dir + "/odd" + kTiny, "an odd size");
  write_ids(fs::path(dir) / "noval" / "train.bin", 100, 50257, 5);
  expect_failure(dir, "train --task lm --set tokens=" + dir + "/noval" + kTiny, "has no val.bin");
  expect_failure(dir, "train --task lm --set tokens=" + dir + "/noval/train.bin" + kTiny, "is not a folder");
}

TEST(LmDataCli, EveryTaskTrainsWithItsDefaults) {
  const std::string dir = temp_dir("defaults");
  // s5 without --set vocab (its vocabulary follows the group), and a global option after the
  // subcommand.
  const auto s = run_mixlab(dir, "train --task s5 --steps 2 --quiet --threads 1 --out " + dir + "/s5");
  EXPECT_EQ(s.code, 0) << s.output;
  const auto c = run_mixlab(dir, "train --task copy --steps 1 --quiet --out " + dir + "/copy --threads 1");
  EXPECT_EQ(c.code, 0) << c.output;
  expect_failure(dir, "train --task copy --steps 1 --threads 0", "--threads");
}

namespace {

// The files of a cache folder, and whether any is a temporary one left by a write.
std::vector<std::string> cache_files(const std::string& dir) {
  std::vector<std::string> names;
  if (!fs::exists(dir)) return names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void write_corpus(const std::string& dir, int documents, int lines) {
  for (int i = 0; i < documents; ++i) {
    std::string text;
    for (int l = 0; l < lines; ++l) text += fmt::format("Document {} line {} carries a few more words.\n", i, l);
    write(fs::path(dir) / fmt::format("doc{:03d}.txt", i), text);
  }
}

}  // namespace

// Issue 37 item 6: several runs that build the same LM token cache at once all succeed and leave
// one intact cache per split (each writer renames a complete file of identical bytes over the
// path; a reader maps whichever complete file it finds), never a torn or temporary file.
TEST(LmDataCli, ConcurrentBuildersLeaveOneIntactCache) {
  const std::string dir = temp_dir("concurrent");
  write_corpus(dir + "/texts", 40, 40);
  std::string script;
  for (int i = 0; i < 4; ++i)
    script += fmt::format(
        "(MIXLAB_CACHE_DIR={0}/cache {1}/mixlab train --task lm --set corpus={0}/texts{2} --out {0}/run{3} "
        "> {0}/log{3}.txt 2>&1; echo $? > {0}/rc{3}) & ",
        dir, MIXLAB_BINARY_DIR, kTiny, i);
  const auto r = run_command(script + "wait");
  ASSERT_EQ(r.code, 0) << r.output;
  for (int i = 0; i < 4; ++i) {
    std::ifstream rc(fmt::format("{}/rc{}", dir, i));
    int code = -1;
    rc >> code;
    std::ifstream log(fmt::format("{}/log{}.txt", dir, i));
    EXPECT_EQ(code, 0) << std::string(std::istreambuf_iterator<char>(log), {});
  }
  const auto files = cache_files(dir + "/cache");
  EXPECT_EQ(files.size(), 2u) << "train and valid caches only";  // train + eval's valid split
  for (const auto& f : files) EXPECT_EQ(f.find(".tmp"), std::string::npos) << f;
  // The caches load (their checksums hold): a fifth run reads them instead of building new ones.
  const auto again =
      run_mixlab(dir, "train --task lm --set corpus=" + dir + "/texts" + kTiny + " --out " + dir + "/run4");
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_EQ(cache_files(dir + "/cache"), files);
}

// A full disk while the cache is written: an I/O error (exit 3) naming the cache file, and no
// partial or temporary cache left; the next run builds it whole.
TEST(LmDataCli, DiskFullDuringCacheBuildLeavesNoPartialCache) {
  const std::string dir = temp_dir("cache_enospc");
  write_corpus(dir + "/texts", 40, 200);  // about 380 KB of text: a cache of about 760 KB
  const auto r = run_command("LD_PRELOAD=" MIXLAB_BINARY_DIR
                             "/libmixlab_enospc_shim.so MIXLAB_ENOSPC_AFTER=65536 "
                             "MIXLAB_CACHE_DIR=" +
                             dir + "/cache " MIXLAB_BINARY_DIR "/mixlab train --task lm --set corpus=" + dir +
                             "/texts" + kTiny + " --out " + dir + "/run 2>&1");
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(dir + "/cache/lm-"), std::string::npos) << r.output;
  EXPECT_TRUE(cache_files(dir + "/cache").empty()) << fmt::format("{}", fmt::join(cache_files(dir + "/cache"), " "));
  const auto ok = run_mixlab(dir, "train --task lm --set corpus=" + dir + "/texts" + kTiny + " --out " + dir + "/run2");
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_EQ(cache_files(dir + "/cache").size(), 2u);
}

}  // namespace lm_data_cli_test
