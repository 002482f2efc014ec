// The decode engine (mixlab/mixer/mixer.h) for every registered mixer: chunked prefill equals
// forward; a state saved mid-stream and loaded into a mixer rebuilt from its spec (in this process
// and in a fresh child process) continues bitwise like the uninterrupted run; fork gives two
// independent continuations; corrupt, truncated and other-spec states are refused with messages
// that say what is wrong.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "mixlab/core/checksum.h"
#include "mixlab/core/error.h"
#include "mixlab/mixer/state_io.h"
#include "mixlab/registry/registry.h"
#include "mixlab_test_paths.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/mixer_specs.h"
#include "support/run_command.h"

namespace decode_engine_test {

namespace {

using mixlab::MixerPtr;
using mixlab::MixerState;
using mixlab::testing::all_close;
using mixlab::testing::mixer_specs_under_test;
using mixlab::testing::small_mixer_dims;

constexpr int64_t kB = 2, kT = 29, kCut = 13;  // prefix [0,kCut) then continuation [kCut,kT)

// Weights and inputs from one seed: the same in every process (the CPU generator is deterministic).
struct Case {
  MixerPtr mixer;
  torch::Tensor x;  // (B,T,C)
};

Case make_case(const std::string& spec, int64_t seed) {
  torch::manual_seed(seed);
  Case c;
  c.mixer = mixlab::mixer_create(spec, small_mixer_dims());
  c.mixer->eval();
  c.x = torch::randn({kB, kT, small_mixer_dims().d_model});
  return c;
}

// The prefix, fed as a prefill chunk, two steps and another chunk (so both paths build the state).
void run_prefix(mixlab::Mixer& m, MixerState& s, const torch::Tensor& x) {
  m.prefill(s, x.narrow(1, 0, 6));
  m.step(s, x.select(1, 6));
  m.step(s, x.select(1, 7));
  m.prefill(s, x.narrow(1, 8, kCut - 8));
}

// The continuation: steps and a chunk, outputs concatenated over time.
torch::Tensor run_rest(mixlab::Mixer& m, MixerState& s, const torch::Tensor& x) {
  std::vector<torch::Tensor> ys;
  for (int64_t t = kCut; t < kCut + 5; ++t) ys.push_back(m.step(s, x.select(1, t)).unsqueeze(1));
  ys.push_back(m.prefill(s, x.narrow(1, kCut + 5, kT - kCut - 5)));
  return torch::cat(ys, 1);
}

std::string temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("mixlab_decode_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

}  // namespace

TEST(DecodeEngine, PrefillInUnevenChunksEqualsForward) {
  for (const auto& spec : mixer_specs_under_test()) {
    SCOPED_TRACE(spec);
    auto c = make_case(spec, 11);
    torch::NoGradGuard no_grad;
    auto y = c.mixer->forward(c.x);
    auto state = c.mixer->init_state(kB);
    int64_t t0 = 0;
    for (int64_t len : {5, 1, 9, 2, 11}) {
      auto yc = c.mixer->prefill(*state, c.x.narrow(1, t0, len));
      ASSERT_EQ(yc.sizes(), (std::vector<int64_t>{kB, len, small_mixer_dims().d_model}));
      ASSERT_TRUE(all_close(yc, y.narrow(1, t0, len), 1e-4, 1e-5)) << "chunk at " << t0 << " of " << len;
      t0 += len;
      ASSERT_EQ(state->position(), t0);
    }
    // Step after a prefill continues the same rows.
    auto more = c.mixer->step(*state, c.x.select(1, t0));
    EXPECT_TRUE(all_close(more, y.select(1, t0), 1e-4, 1e-5));
  }
}

TEST(DecodeEngine, SaveMidStreamLoadIntoRebuiltMixerContinuesBitwise) {
  for (const auto& spec : mixer_specs_under_test()) {
    SCOPED_TRACE(spec);
    torch::NoGradGuard no_grad;
    auto a = make_case(spec, 21);
    auto sa = a.mixer->init_state(kB);
    run_prefix(*a.mixer, *sa, a.x);
    std::stringstream buf;
    a.mixer->save(*sa, buf);
    const auto bytes_before = sa->bytes();

    // A separate mixer object rebuilt from the spec, same seed: same weights.
    auto b = make_case(spec, 21);
    auto pa = a.mixer->named_parameters(), pb = b.mixer->named_parameters();
    for (const auto& p : pa) ASSERT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
    auto sb = b.mixer->load(buf);
    EXPECT_EQ(sb->position(), kCut);
    EXPECT_EQ(sb->batch(), kB);
    EXPECT_GT(sb->bytes(), 0);
    EXPECT_EQ(sb->cached_positions(), sa->cached_positions());
    EXPECT_EQ(sa->bytes(), bytes_before) << "save must not change the state";

    auto ya = run_rest(*a.mixer, *sa, a.x);
    auto yb = run_rest(*b.mixer, *sb, b.x);
    EXPECT_TRUE(torch::equal(ya, yb)) << "max diff " << (ya - yb).abs().max().item<double>();
    EXPECT_EQ(sa->position(), kT);
    EXPECT_EQ(sb->position(), kT);
  }
}

// The child half of the fresh-process test: runs only when the parent sets the directory.
TEST(DecodeEngineChild, ContinueSavedStates) {
  const char* dir = std::getenv("MIXLAB_DECODE_CHILD_DIR");
  if (dir == nullptr) GTEST_SKIP() << "runs as the child of FreshProcessContinuesBitwise";
  torch::NoGradGuard no_grad;
  const auto specs = mixer_specs_under_test();
  for (size_t i = 0; i < specs.size(); ++i) {
    auto c = make_case(specs[i], 31);
    const std::string base = std::string(dir) + "/" + std::to_string(i);
    auto s = c.mixer->load_file(base + ".state");
    mixlab::StateRecord out;
    out.spec = "test-output";
    out.batch = kB;
    out.entries.push_back({"y", mixlab::StateEntry::Kind::kTensor, 0, run_rest(*c.mixer, *s, c.x)});
    mixlab::state_write_file(base + ".out", out);
  }
}

TEST(DecodeEngine, FreshProcessContinuesBitwise) {
  const std::string dir = temp_dir("child");
  const auto specs = mixer_specs_under_test();
  std::vector<torch::Tensor> expected;
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < specs.size(); ++i) {
      auto c = make_case(specs[i], 31);
      auto s = c.mixer->init_state(kB);
      run_prefix(*c.mixer, *s, c.x);
      c.mixer->save_file(*s, dir + "/" + std::to_string(i) + ".state");
      expected.push_back(run_rest(*c.mixer, *s, c.x));
    }
  }
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  // The child runs one case whole: not a shard of it (ctest runs this executable in shards).
  auto r = run_command("env -u GTEST_TOTAL_SHARDS -u GTEST_SHARD_INDEX -u GTEST_BRIEF MIXLAB_DECODE_CHILD_DIR='" + dir +
                       "' '" + self + "' --gtest_filter=DecodeEngineChild.ContinueSavedStates 2>&1");
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_NE(r.output.find("[  PASSED  ] 1 test"), std::string::npos) << r.output;
  for (size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE(specs[i]);
    auto rec = mixlab::state_read_file(dir + "/" + std::to_string(i) + ".out");
    ASSERT_EQ(rec.entries.size(), 1u);
    EXPECT_TRUE(torch::equal(rec.entries[0].tensor, expected[i]));
  }
  std::filesystem::remove_all(dir);
}

TEST(DecodeEngine, ForkGivesTwoIndependentContinuations) {
  for (const auto& spec : mixer_specs_under_test()) {
    SCOPED_TRACE(spec);
    torch::NoGradGuard no_grad;
    auto c = make_case(spec, 41);
    auto x2 = torch::randn_like(c.x);  // another continuation
    auto s = c.mixer->init_state(kB);
    run_prefix(*c.mixer, *s, c.x);
    auto f = c.mixer->fork(*s);
    EXPECT_EQ(f->position(), kCut);
    EXPECT_EQ(f->cached_positions(), s->cached_positions());
    EXPECT_LE(f->bytes(), s->bytes()) << "a fork holds what the state holds, allocated tight or equal";
    // Continue the fork first on x2: the original must be untouched by it.
    auto yf = run_rest(*c.mixer, *f, x2);
    auto ys = run_rest(*c.mixer, *s, c.x);
    // References: fresh runs of prefix + each continuation.
    auto r1 = c.mixer->init_state(kB), r2 = c.mixer->init_state(kB);
    run_prefix(*c.mixer, *r1, c.x);
    run_prefix(*c.mixer, *r2, c.x);
    EXPECT_TRUE(torch::equal(ys, run_rest(*c.mixer, *r1, c.x)));
    EXPECT_TRUE(torch::equal(yf, run_rest(*c.mixer, *r2, x2)));
    EXPECT_FALSE(torch::equal(ys, yf));
  }
}

TEST(DecodeEngine, CorruptTruncatedAndOtherSpecStatesAreRefused) {
  const auto specs = mixer_specs_under_test();
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& spec = specs[i];
    SCOPED_TRACE(spec);
    torch::NoGradGuard no_grad;
    auto c = make_case(spec, 51);
    auto s = c.mixer->init_state(kB);
    run_prefix(*c.mixer, *s, c.x);
    std::stringstream buf;
    c.mixer->save(*s, buf);
    const std::string bytes = buf.str();
    auto load = [&](const std::string& b) {
      std::stringstream in(b);
      c.mixer->load(in, "st.bin");
    };
    // Any single flipped byte is caught; in the payload the checksum names it.
    for (size_t pos : {size_t{2}, size_t{9}, size_t{20}, bytes.size() / 2, bytes.size() - 30, bytes.size() - 1}) {
      SCOPED_TRACE(pos);
      std::string bad = bytes;
      bad[pos] ^= 0x20;
      EXPECT_THROW(load(bad), mixlab::Error);
    }
    std::string bad = bytes;
    bad[bytes.size() / 2] ^= 1;
    expect_error([&] { load(bad); }, {"st.bin", "checksum mismatch", "corrupt"});
    expect_error([&] { load(bytes.substr(0, bytes.size() - 9)); }, {"st.bin", "truncated"});
    expect_error([&] { load(bytes.substr(0, 30)); }, {"st.bin", "truncated"});
    expect_error([&] { load("hello, not a state"); }, {"st.bin", "not a mixlab decode state"});
    expect_error([&] { load(bytes + "x"); }, {"st.bin", "unexpected bytes"});
    // Another mixer's state (the next spec in the list) is refused by name.
    const auto& other_spec = specs[(i + 1) % specs.size()];
    auto other = mixlab::mixer_create(other_spec, small_mixer_dims());
    std::stringstream in(bytes);
    expect_error([&] { other->load(in, "st.bin"); }, {"saved for mixer '" + c.mixer->spec() + "'", other->spec()});
  }
}

TEST(DecodeEngine, FileFormErrorsNameThePath) {
  const std::string dir = temp_dir("file");
  auto c = make_case("gla", 61);
  auto s = c.mixer->init_state(1);
  const std::string path = dir + "/s.state";
  c.mixer->save_file(*s, path);
  EXPECT_EQ(c.mixer->load_file(path)->position(), 0);
  expect_error([&] { c.mixer->load_file(dir + "/missing.state"); }, {"missing.state", "cannot open"});
  // A version from the future is named as such (the version field follows the magic).
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  bytes[8] = 9;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  expect_error([&] { c.mixer->load_file(path); }, {"s.state", "version 9", "reads version 1"});
  std::filesystem::remove_all(dir);
}

// Found by the decode_state fuzzer (tests/fuzz/corpus/decode_state/crash-entry-name-with-newline.state):
// an entry name with a newline was quoted in the loader's message, two lines. The spec and the
// entry names are refused at decode when they hold a control byte.
TEST(DecodeEngine, ControlCharactersInNamesAreRefusedOnOneLine) {
  mixlab::StateRecord record;
  record.spec = "ssm:4";
  record.batch = 1;
  mixlab::StateEntry entry;
  entry.name = "p\nosition";
  record.entries.push_back(entry);
  expect_error([&] { mixlab::state_decode(mixlab::state_encode(record), "n.state"); },
               {"n.state", "entry 0 has the name 'p\\x0aosition' with a control character at offset 1"});
  record.entries.clear();
  record.spec = "ssm\t4";
  expect_error([&] { mixlab::state_decode(mixlab::state_encode(record), "n.state"); },
               {"n.state", "the spec 'ssm\\x094' has a control character at offset 3"});
}

// Found by the decode_state fuzzer (tests/fuzz/corpus/decode_state/crash-batch-of-2-to-the-54.state,
// checksum repaired by the fuzzer): a state of batch 2^54 made the loader build init_state(2^54).
// The header's batch is bounded before anything is allocated.
TEST(DecodeEngine, AnAbsurdBatchIsRefusedBeforeTheStateIsBuilt) {
  auto c = mixlab::mixer_create("ssm:4", small_mixer_dims());
  auto state = c->init_state(1);
  mixlab::StateRecord record = c->state_record(*state);
  record.batch = int64_t{1} << 54;
  expect_error([&] { c->state_from_record(mixlab::state_decode(mixlab::state_encode(record), "b.state"), "b.state"); },
               {"b.state", "batch 18014398509481984", "expected a batch in [1, 65536]"});
}

// Found by the decode_state fuzzer (tests/fuzz/corpus/decode_state/oom-tensor-larger-than-file.state):
// a 366-byte state whose header (checksum intact) gives a tensor of 6 GB was allocated before its
// bytes were looked for. Now the bytes must be in the file first: "truncated", no allocation.
TEST(DecodeEngine, ATensorLargerThanTheFileIsTruncatedNotAllocated) {
  const std::string path = MIXLAB_SOURCE_DIR "/tests/fuzz/corpus/decode_state/oom-tensor-larger-than-file.state";
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.size(), 366u);
  // The fuzzer repaired the checksum (tests/fuzz/file_targets.cpp); so does this test.
  const uint64_t sum = mixlab::checksum64(std::string_view(bytes.data(), bytes.size() - 8));
  std::memcpy(bytes.data() + bytes.size() - 8, &sum, sizeof(sum));
  expect_error([&] { mixlab::state_decode(bytes, "big.state"); }, {"big.state", "truncated while reading tensor data"});
}

}  // namespace decode_engine_test
