// LM dataset: the fixed document split, the token cache (round trip, corruption), training
// windows (determinism) and evaluation windows (each target once, stated context), bits per byte.
#include "mixlab/data/lm_dataset.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "mixlab/core/checksum.h"
#include "mixlab/core/error.h"
#include "mixlab_test_paths.h"
#include "support/expect_error.h"

namespace lm_dataset_test {

using namespace mixlab;

namespace {

namespace fs = std::filesystem;
const std::string kSample = std::string(MIXLAB_SOURCE_DIR) + "/data/sample";
const std::string kBrown = std::string(MIXLAB_SOURCE_DIR) + "/data/brown";
const std::string kGpt2 = std::string(MIXLAB_SOURCE_DIR) + "/data/gpt2";

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::path(::testing::TempDir()) / ("mixlab_lm_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::set<std::string> names(const std::vector<CorpusDocument>& docs) {
  std::set<std::string> s;
  for (const auto& d : docs) s.insert(d.name);
  return s;
}

void flip_byte(const std::string& path, int64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x5A;
  f.seekp(offset);
  f.write(&c, 1);
}

}  // namespace

TEST(LmSplit, RuleAndSample) {
  EXPECT_EQ(lm_split_of(0), LmSplit::kTrain);
  EXPECT_EQ(lm_split_of(1), LmSplit::kValid);
  EXPECT_EQ(lm_split_of(2), LmSplit::kTest);
  EXPECT_EQ(lm_split_of(12), LmSplit::kTest);
  EXPECT_EQ(lm_split_of(13), LmSplit::kTrain);
  EXPECT_EQ(lm_split_of(19), LmSplit::kTrain);
  // The sample: ca01 cj21 cn01 cp09 cr09 -> train, valid, test, train, train.
  const Corpus c = Corpus::load_brown(kSample);
  EXPECT_EQ(names(lm_split_documents(c, LmSplit::kTrain)), (std::set<std::string>{"ca01", "cp09", "cr09"}));
  EXPECT_EQ(names(lm_split_documents(c, LmSplit::kValid)), (std::set<std::string>{"cj21"}));
  EXPECT_EQ(names(lm_split_documents(c, LmSplit::kTest)), (std::set<std::string>{"cn01"}));
  EXPECT_EQ(lm_split_parse("test", "--split"), LmSplit::kTest);
  expect_error([] { lm_split_parse("validation", "--split"); }, {"--split", "train, valid or test", "validation"});
}

TEST(LmSplit, FullBrownIsDisjointAndDeterministic) {
  if (!fs::exists(kBrown + "/ca01")) GTEST_SKIP() << "data/brown not installed (scripts/setup.sh)";
  const Corpus a = Corpus::load_brown(kBrown), b = Corpus::load_brown(kBrown);
  const auto tr = names(lm_split_documents(a, LmSplit::kTrain)), va = names(lm_split_documents(a, LmSplit::kValid)),
             te = names(lm_split_documents(a, LmSplit::kTest));
  EXPECT_EQ(tr.size(), 400u);
  EXPECT_EQ(va.size(), 50u);
  EXPECT_EQ(te.size(), 50u);
  std::set<std::string> all = tr;
  all.insert(va.begin(), va.end());
  all.insert(te.begin(), te.end());
  EXPECT_EQ(all.size(), 500u);  // disjoint and complete
  EXPECT_EQ(va, names(lm_split_documents(b, LmSplit::kValid)));
  EXPECT_EQ(lm_corpus_id(a), lm_corpus_id(b));
  // Every genre letter (a..r, 15 genres) is in train and valid.
  std::set<char> genres_valid;
  for (const auto& n : va) genres_valid.insert(n[1]);
  EXPECT_EQ(genres_valid.size(), 15u);
}

TEST(LmCache, RoundTripAndCorruption) {
  const std::string dir = temp_dir("cache");
  const std::string path = dir + "/c.tok";
  LmCacheInfo info;
  info.key = {"bytes", "valid", 0x1234abcdULL, 256};
  info.documents = 2;
  info.tokens = 5;
  info.text_bytes = 4;
  const std::vector<uint16_t> toks = {10, 65, 66, 10, 255};
  lm_cache_write(path, info, toks);
  EXPECT_EQ(static_cast<int64_t>(fs::file_size(path)), kLmCacheHeaderBytes + 10);
  {
    auto f = LmTokenFile::open(path, info.key);
    EXPECT_EQ(f->info().tokens, 5);
    EXPECT_EQ(f->info().documents, 2);
    EXPECT_EQ(f->info().text_bytes, 4);
    EXPECT_EQ(std::vector<uint16_t>(f->tokens(), f->tokens() + 5), toks);
  }
  LmCacheKey other = info.key;
  other.tokenizer = "gpt2";
  other.vocab = 50257;
  expect_error([&] { LmTokenFile::open(path, other); }, {path, "built for tokenizer bytes", "expected gpt2"});
  other = info.key;
  other.corpus = 1;
  expect_error([&] { LmTokenFile::open(path, other); }, {"corpus"});

  flip_byte(path, kLmCacheHeaderBytes + 3);  // a payload byte
  expect_error([&] { LmTokenFile::open(path, info.key); }, {path, "checksum mismatch", "corrupt"});
  lm_cache_write(path, info, toks);
  flip_byte(path, 60);  // inside the header's numbers or names
  expect_error([&] { LmTokenFile::open(path, info.key); }, {path});
  lm_cache_write(path, info, toks);
  fs::resize_file(path, kLmCacheHeaderBytes + 6);
  expect_error([&] { LmTokenFile::open(path, info.key); }, {path, "truncated"});
  fs::resize_file(path, 100);
  expect_error([&] { LmTokenFile::open(path, info.key); }, {path, "truncated"});
  std::ofstream(dir + "/junk.tok") << std::string(5000, 'x');
  expect_error([&] { LmTokenFile::open(dir + "/junk.tok", info.key); }, {"not an LM token cache"});
  lm_cache_write(path, info, toks);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(16);  // "mixlab-lm-cache 1" -> version 2
    f.put('2');
  }
  expect_error([&] { LmTokenFile::open(path, info.key); }, {"format version 2 is not supported"});
  info.key.vocab = 100;
  expect_error([&] { lm_cache_write(path, info, toks); }, {"token id 255 outside the vocabulary of 100"});
}

TEST(LmDataset, BuildsReusesAndRebuildsTheCache) {
  const std::string dir = temp_dir("dataset");
  const Corpus c = Corpus::load_brown(kSample);
  const LmTokenizer bytes = LmTokenizer::load(LmTokenizerKind::kBytes, "");
  const LmDataset d = LmDataset::open(c, LmSplit::kTrain, bytes, dir);
  EXPECT_FALSE(d.rebuilt());
  EXPECT_EQ(d.path().find(dir), 0u);
  const auto docs = lm_split_documents(c, LmSplit::kTrain);
  int64_t text = 0;
  for (const auto& doc : docs) text += static_cast<int64_t>(doc.text.size());
  EXPECT_EQ(d.documents(), 3);
  EXPECT_EQ(d.size(), text + 3);                // one separator before each document
  EXPECT_EQ(d.text_bytes(), text + 2);          // documents joined by '\n'
  EXPECT_EQ(d.tokens()[0], bytes.separator());  // [sep d_0 sep d_1 sep d_2]
  EXPECT_EQ(d.tokens()[1], static_cast<unsigned char>(docs[0].text[0]));
  const torch::Tensor content = d.slice(0, d.size());
  const auto mtime = fs::last_write_time(d.path());
  const LmDataset again = LmDataset::open(c, LmSplit::kTrain, bytes, dir);
  EXPECT_FALSE(again.rebuilt());
  EXPECT_EQ(fs::last_write_time(again.path()), mtime);  // reused, not rewritten
  // Corrupt the file in place (the open mappings see the flip: a cache is only ever replaced by
  // rename, never rewritten in place, so this happens only to a damaged file).
  flip_byte(d.path(), kLmCacheHeaderBytes + 100);
  const LmDataset fixed = LmDataset::open(c, LmSplit::kTrain, bytes, dir);
  EXPECT_TRUE(fixed.rebuilt());
  EXPECT_TRUE(torch::equal(fixed.slice(0, fixed.size()), content));
  // Splits and tokenizers have their own files.
  EXPECT_NE(LmDataset::open(c, LmSplit::kValid, bytes, dir).path(), d.path());
}

TEST(LmDataset, Gpt2StreamDecodesToTheText) {
  if (!fs::exists(kGpt2 + "/encoder.json")) GTEST_SKIP() << "data/gpt2 not installed (scripts/setup.sh)";
  const std::string dir = temp_dir("gpt2");
  const Corpus c = Corpus::load_brown(kSample);
  const LmTokenizer gpt2 = LmTokenizer::load(LmTokenizerKind::kGpt2, kGpt2);
  const LmTokenizer bytes = LmTokenizer::load(LmTokenizerKind::kBytes, "");
  const LmDataset g = LmDataset::open(c, LmSplit::kValid, gpt2, dir);
  const LmDataset b = LmDataset::open(c, LmSplit::kValid, bytes, dir);
  EXPECT_EQ(g.text_bytes(), b.text_bytes());
  EXPECT_LT(g.size(), b.size() / 3);  // BPE: several bytes per token
  EXPECT_EQ(g.tokens()[0], 50256);
  std::string text;
  int64_t counted = 0;
  for (int64_t i = 1; i < g.size(); ++i) {
    text += gpt2.decode_token(g.tokens()[i]);
    counted += gpt2.token_bytes()[g.tokens()[i]];
  }
  EXPECT_EQ(text, lm_split_documents(c, LmSplit::kValid)[0].text);
  EXPECT_EQ(counted, g.text_bytes());
}

TEST(LmWindows, TrainingWindowsAreDeterministic) {
  const std::string dir = temp_dir("windows");
  const Corpus c = Corpus::load_brown(kSample);
  const LmDataset d = LmDataset::open(c, LmSplit::kTrain, LmTokenizer::load(LmTokenizerKind::kBytes, ""), dir);
  auto [x1, y1] = lm_train_windows(d, 4, 32, 7, 3);
  auto [x2, y2] = lm_train_windows(d, 4, 32, 7, 3);
  auto [x3, y3] = lm_train_windows(d, 4, 32, 7, 4);
  auto [x4, y4] = lm_train_windows(d, 4, 32, 8, 3);
  EXPECT_TRUE(torch::equal(x1, x2));
  EXPECT_TRUE(torch::equal(y1, y2));
  EXPECT_FALSE(torch::equal(x1, x3));
  EXPECT_FALSE(torch::equal(x1, x4));
  EXPECT_EQ(x1.sizes(), (std::vector<int64_t>{4, 32}));
  EXPECT_TRUE(torch::equal(x1.slice(1, 1, 32), y1.slice(1, 0, 31)));  // targets = next tokens
  // Every row is a contiguous piece of the stream.
  const torch::Tensor all = d.slice(0, d.size());
  for (int64_t b = 0; b < 4; ++b) {
    bool found = false;
    for (int64_t s = 0; s + 33 <= d.size() && !found; ++s)
      found = all[s].item<int64_t>() == x1[b][0].item<int64_t>() && torch::equal(all.slice(0, s, s + 32), x1[b]) &&
              all[s + 32].item<int64_t>() == y1[b][31].item<int64_t>();
    EXPECT_TRUE(found) << "row " << b;
  }
  expect_error([&] { lm_train_windows(d, 1, d.size(), 0, 0); }, {"fewer than T + 1"});
}

TEST(LmWindows, SlidingWindowsScoreEachTargetOnce) {
  for (int64_t n : {2, 3, 17, 64, 65, 100}) {
    for (int64_t T : {1, 4, 16}) {
      for (int64_t stride : {int64_t{1}, std::max<int64_t>(1, T / 2), T}) {
        const auto ws = lm_sliding_windows(n, T, stride);
        std::vector<int> scored(static_cast<size_t>(n), 0);
        for (const auto& w : ws) {
          ASSERT_GE(w.length, 1);
          ASSERT_LE(w.length, T);
          ASSERT_LE(w.begin + w.length, n - 1);
          for (int64_t k = w.score_from; k < w.length; ++k) {
            const int64_t t = w.begin + k + 1;  // target position
            ++scored[static_cast<size_t>(t)];
            // The stated context: target t is predicted from [c(t), t).
            const int64_t c = stride * std::max<int64_t>(0, (t - T + stride - 1) / stride);
            EXPECT_EQ(w.begin, c) << n << " " << T << " " << stride << " t=" << t;
          }
        }
        EXPECT_EQ(scored[0], 0);
        for (int64_t t = 1; t < n; ++t) EXPECT_EQ(scored[static_cast<size_t>(t)], 1) << n << " " << T << " " << stride;
      }
    }
  }
  EXPECT_TRUE(lm_sliding_windows(1, 4, 2).empty());
  EXPECT_EQ(lm_sliding_windows(100, 10, 10).size(), 10u);  // 99 targets, windows of 10
  EXPECT_EQ(lm_sliding_windows(100, 10, 5).size(), 19u);
  expect_error([] { lm_sliding_windows(10, 4, 0); }, {"stride must be in [1, T = 4], got 0"});
  expect_error([] { lm_sliding_windows(10, 4, 5); }, {"stride"});
}

TEST(LmMetrics, BitsPerByte) {
  EXPECT_DOUBLE_EQ(lm_bits_per_byte(std::log(2.0) * 100, 100), 1.0);
  EXPECT_NEAR(lm_bits_per_byte(3.0, 4), 3.0 / std::log(2.0) / 4, 1e-15);
  expect_error([] { lm_bits_per_byte(1.0, 0); }, {"bytes must be > 0"});
}

TEST(LmTokenizer, BytesAndErrors) {
  const LmTokenizer b = LmTokenizer::load(LmTokenizerKind::kBytes, "");
  EXPECT_EQ(b.vocab_size(), 256);
  EXPECT_EQ(b.separator(), 10);
  EXPECT_EQ(b.encode("Hé"), (std::vector<int64_t>{72, 0xC3, 0xA9}));
  EXPECT_EQ(b.decode_token(72), "H");
  EXPECT_EQ(lm_tokenizer_parse("gpt2", "t"), LmTokenizerKind::kGpt2);
  expect_error([] { lm_tokenizer_parse("bpe", "key 'tokenizer'"); },
               {"key 'tokenizer'", "'bytes', 'gpt2' or 'ids'", "bpe"});
  expect_error([] { LmTokenizer::load(LmTokenizerKind::kGpt2, "/nonexistent/gpt2"); },
               {"/nonexistent/gpt2", "scripts/setup.sh"});
  expect_error([&] { b.decode_token(256); }, {"id must be in [0, 256)"});
}

// Found running the lm_cache fuzz target on a hand-made input (tests/fuzz/corpus/lm_cache/
// crash-token-count-overflow.tok): a header saying 2^62 tokens made the size check compute
// 2 * 2^62, a signed overflow (UBSan). The count is now bounded by the file first.
TEST(LmCache, AHugeTokenCountIsTruncatedNotAnOverflow) {
  const std::string path = MIXLAB_SOURCE_DIR "/tests/fuzz/corpus/lm_cache/crash-token-count-overflow.tok";
  LmCacheKey key;
  key.tokenizer = "bytes";
  key.split = "train";
  key.corpus = 0x0123456789abcdefULL;
  key.vocab = 256;
  expect_error([&] { LmTokenFile::open(path, key); },
               {"the header says 4611686018427387904 tokens, the file has 10 bytes of tokens"});
}

// A cache whose checksum is right but which holds an id >= its vocabulary (written by another
// program or an older bug: lm_cache_write refuses such ids) used to be accepted, and the id later
// indexed the embedding out of range. LmTokenFile::open now checks every id once, in the pass
// that verifies the checksum, and LmDataset::open rebuilds such a cache from the corpus.
TEST(LmCache, AnIdOutsideTheVocabularyIsRefusedAtOpen) {
  // The file written by hand, in the layout of lm_cache.h, with a correct checksum.
  auto write_unchecked = [](const std::string& path, const LmCacheInfo& info, const std::vector<uint16_t>& ids) {
    const std::string fields = fmt::format(
        "mixlab-lm-cache 1\ntokenizer {}\nsplit {}\ncorpus {:016x}\nvocab {}\ndocuments {}\ntokens {}\n"
        "text_bytes {}\n",
        info.key.tokenizer, info.key.split, info.key.corpus, info.key.vocab, info.documents, info.tokens,
        info.text_bytes);
    const std::string payload(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(uint16_t));
    std::string file = fields + fmt::format("checksum {:016x}\n", checksum64(payload, checksum64(fields)));
    file.resize(static_cast<size_t>(kLmCacheHeaderBytes), '\0');
    std::ofstream(path, std::ios::binary) << file << payload;
  };
  const std::string dir = temp_dir("cache_ids");
  const std::string path = dir + "/c.tok";
  LmCacheInfo info;
  info.key = {"bytes", "valid", 0x1234abcdULL, 256};
  info.documents = 1;
  info.tokens = 4;
  info.text_bytes = 3;
  write_unchecked(path, info, {10, 65, 300, 66});
  expect_error([&] { LmTokenFile::open(path, info.key); },
               {path, "token id 300 at offset 2 is outside the vocabulary of 256"});
  write_unchecked(path, info, {10, 65, 255, 66});  // the largest id the vocabulary has
  EXPECT_EQ(LmTokenFile::open(path, info.key)->tokens()[2], 255);

  // Through LmDataset: such a cache at the dataset's own path is rebuilt from the corpus.
  const Corpus c = Corpus::load_brown(kSample);
  const LmTokenizer bytes = LmTokenizer::load(LmTokenizerKind::kBytes, "");
  const std::string cache_dir = temp_dir("cache_ids_dataset");
  const LmDataset built = LmDataset::open(c, LmSplit::kValid, bytes, cache_dir);
  const torch::Tensor content = built.slice(0, built.size());
  LmCacheInfo bad;
  bad.key = {"bytes", "valid", lm_corpus_id(c), 256};
  bad.documents = built.documents();
  bad.tokens = built.size();
  bad.text_bytes = built.text_bytes();
  std::vector<uint16_t> ids(built.tokens(), built.tokens() + built.size());
  ids[5] = 1000;
  const std::string cache_path = built.path();
  fs::remove(cache_path);  // a new file (the mapping of `built` keeps the old one)
  write_unchecked(cache_path, bad, ids);
  const LmDataset reopened = LmDataset::open(c, LmSplit::kValid, bytes, cache_dir);
  EXPECT_TRUE(reopened.rebuilt());
  EXPECT_TRUE(torch::equal(reopened.slice(0, reopened.size()), content));
}

}  // namespace lm_dataset_test
