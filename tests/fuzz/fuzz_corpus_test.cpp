// The fuzz targets in the normal test suite (tests/fuzz/fuzz_target.h): every file of every seed
// corpus (tests/fuzz/corpus/<target>/) runs once through the same entry function the libFuzzer
// binaries call, so the targets build and keep their contract without clang. Files named
// valid-* must be accepted; every other file (a crash the fuzzer found, kept as a regression
// input) must be refused cleanly. The seeds of each format come from mixlab's own writers:
//   MIXLAB_WRITE_FUZZ_CORPUS=1 ./build/tests/test_fuzz --gtest_filter='FuzzCorpus.WritersMakeTheSeeds'
// rewrites the valid-* files; without the variable the test checks the writers' output is
// accepted and, for the formats without floats, equal to the stored seeds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "fuzz/fuzz_target.h"
#include "mixlab/core/error.h"
#include "mixlab/registry/registry.h"
#include "mixlab/train/config.h"
#include "mixlab_test_paths.h"
#include "support/npy_bytes.h"

namespace mixlab::fuzz {
namespace {

namespace fs = std::filesystem;

const fs::path kCorpus = fs::path(MIXLAB_SOURCE_DIR) / "tests" / "fuzz" / "corpus";
// A seed stays small: libFuzzer mutates it byte by byte, and the repository keeps it. The
// checkpoint is the largest (about 15 KB): its torch archive holds the CPU generator's state
// (5 KB) and pads every record to 64 bytes.
constexpr size_t kMaxSeedBytes = 16384;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<fs::path> corpus_files(const std::string& target) {
  std::vector<fs::path> files;
  const fs::path dir = kCorpus / target;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string index_name(size_t i, const std::string& ext) {
  return "valid-" + std::string(i < 10 ? "0" : "") + std::to_string(i) + ext;
}

std::vector<std::pair<std::string, std::string>> text_seeds(const std::vector<std::string>& texts) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < texts.size(); ++i) out.emplace_back(index_name(i, ".txt"), texts[i]);
  return out;
}

// The valid seeds of `target`, as (file name, bytes), each from the writer of its format.
std::vector<std::pair<std::string, std::string>> writer_seeds(const std::string& target) {
  using namespace mixlab_test;
  if (target == "spec_args") return text_seeds({"w=8", "16:2", "w=4:chunk=8:rate=0.25:mode=exact", "c=2:mode=fast:3"});
  if (target == "mixer_spec") {
    std::vector<std::string> specs = fuzz_decode_state_specs();
    // Every family on its own, except those whose usage has a mandatory <argument>.
    for (const MixerInfo& f : mixer_families())
      if (f.usage.find('<') == std::string::npos) specs.push_back(f.family);
    specs.insert(specs.end(), {"ssm:4|attention", "local:8*2|ssm*2", "toeplitz:heads=2:kernel=3",
                               "resolvent:offsets:1,2,5+cache", "gla:16"});
    std::sort(specs.begin(), specs.end());
    specs.erase(std::unique(specs.begin(), specs.end()), specs.end());
    return text_seeds(specs);
  }
  if (target == "pattern")
    return text_seeds({"causal", "band:8", "dense", "order:3", "pow2", "pow2+cache", "square", "linear+cache",
                       "offsets:1,2,5", "geom:1.5", "power:2", "fib", "ruler:16", "band:8+pow2",
                       "offsets:1,3+fib+cache"});
  if (target == "config") {
    TrainConfig defaults;
    TrainConfig hybrid;
    hybrid.mixer = "ssm:4|attention";
    hybrid.layers = 2;
    return {{"valid-00.json", config_to_json(defaults).dump(1)},
            {"valid-01.json", config_to_json(hybrid).dump()},
            {"valid-02.json", R"({"task": "recall", "steps": 20, "lr": 0.001, "seed": 7, "mixer": "local:8"})"},
            {"valid-03.json", R"({"hop_prob": 0.25, "task": "multihop", "pairs": 4, "eval_every": 5})"}};
  }
  if (target == "checkpoint") return {{"valid-00.ckpt", fuzz_checkpoint_seed()}};
  if (target == "decode_state") {
    std::vector<std::pair<std::string, std::string>> out;
    const auto& specs = fuzz_decode_state_specs();
    for (size_t i = 0; i < specs.size(); ++i)
      out.emplace_back(index_name(i, ".state"), fuzz_decode_state_seed(specs[i], 3));
    return out;
  }
  if (target == "lm_cache")
    return {{"valid-00.tok", fuzz_lm_cache_seed({10, 32, 255, 0, 7})}, {"valid-01.tok", fuzz_lm_cache_seed({})}};
  if (target == "npy")
    return {{"valid-00.npy", npy_i64(2, 3, {0, 1, 2, 3, 4, 5})},
            {"valid-01.npy", npy_bytes("|u1", "(4,)", le_bytes<uint8_t>({1, 2, 3, 250}))},
            {"valid-02.npy", npy_bytes("<u2", "()", le_bytes<uint16_t>({7}), 2)},
            {"valid-03.npz", npz_inputs_labels(1, 2, {1, 2}, {2, -100})},
            {"valid-04.npz", zip_bytes({{"inputs.npy", npy_i64(1, 2, {3, 4}), true},
                                        {"labels.npy", npy_bytes("<i4", "(1, 2)", le_bytes<int32_t>({4, 5})), true}})}};
  if (target == "compare_record") return {{"valid-00.json", fuzz_compare_record_seed()}};
  if (target == "token_bin")
    return {{"valid-00.bin", le_bytes<uint16_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})},
            {"valid-01.bin", le_bytes<uint16_t>({999, 0})}};
  throw std::invalid_argument("no seeds for fuzz target '" + target + "'");
}

TEST(FuzzCorpus, EveryTargetHasSmallSeeds) {
  ASSERT_EQ(fuzz_targets().size(), 10u);
  for (const FuzzTarget& t : fuzz_targets()) {
    SCOPED_TRACE(t.name);
    const auto files = corpus_files(t.name);
    EXPECT_FALSE(files.empty()) << "no seed corpus in " << (kCorpus / t.name);
    for (const fs::path& f : files) EXPECT_LE(fs::file_size(f), kMaxSeedBytes) << f;
  }
}

TEST(FuzzCorpus, EveryCorpusFileRunsCleanly) {
  for (const FuzzTarget& t : fuzz_targets()) {
    for (const fs::path& f : corpus_files(t.name)) {
      SCOPED_TRACE(f.string());
      const bool valid = f.filename().string().rfind("valid-", 0) == 0;
      FuzzOutcome outcome = FuzzOutcome::kRejected;
      try {
        outcome = fuzz_run(t, read_bytes(f));
      } catch (const FuzzFinding& e) {
        ADD_FAILURE() << e.what();
        continue;
      }
      EXPECT_EQ(outcome, valid ? FuzzOutcome::kAccepted : FuzzOutcome::kRejected);
    }
  }
}

TEST(FuzzCorpus, WritersMakeTheSeeds) {
  const char* env = std::getenv("MIXLAB_WRITE_FUZZ_CORPUS");
  const bool writing = env != nullptr && std::string(env) == "1";
  for (const FuzzTarget& t : fuzz_targets()) {
    for (const auto& [name, bytes] : writer_seeds(t.name)) {
      SCOPED_TRACE(std::string(t.name) + "/" + name);
      EXPECT_EQ(fuzz_run(t, bytes), FuzzOutcome::kAccepted);
      EXPECT_LE(bytes.size(), kMaxSeedBytes);
      const fs::path path = kCorpus / t.name / name;
      if (writing) {
        fs::create_directories(path.parent_path());
        std::ofstream(path, std::ios::binary) << bytes;
      } else if (std::string(t.name) != "checkpoint" && std::string(t.name) != "decode_state") {
        // Checkpoints and decode states hold floats computed by kernels that differ by ISA (and
        // a torch archive's layout by LibTorch version); every other seed is reproducible.
        EXPECT_EQ(read_bytes(path), bytes) << "the writer's output changed: rewrite the seeds (see the file header)";
      }
    }
  }
}

TEST(FuzzCorpus, BrokenContractsAreFindings) {
  // What fuzz_run reports must be able to fail: another exception type, a multi-line message.
  const FuzzTarget other{"other", [](std::string_view) { throw std::out_of_range("stoull"); }};
  EXPECT_THROW(fuzz_run(other, ""), FuzzFinding);
  const FuzzTarget two_lines{"two_lines", [](std::string_view) { throw Error("first\nsecond"); }};
  EXPECT_THROW(fuzz_run(two_lines, ""), FuzzFinding);
  const FuzzTarget clean{"clean", [](std::string_view) { throw Error("one line"); }};
  EXPECT_EQ(fuzz_run(clean, ""), FuzzOutcome::kRejected);
  try {
    (void)fuzz_target("nope");
    ADD_FAILURE() << "an unknown target was found";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("expected one of spec_args, mixer_spec"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixlab::fuzz
