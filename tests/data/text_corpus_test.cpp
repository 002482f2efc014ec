// Bring-your-own LM data: a plain-text corpus (folder or file, text_corpus.h) through the LM cache,
// and nanoGPT token files (token_bin.h) as LM streams: layout, split, cache key, every refusal.
#include "mixlab/data/text_corpus.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "mixlab/data/lm_dataset.h"
#include "mixlab/data/token_bin.h"
#include "mixlab_test_paths.h"
#include "support/expect_error.h"

namespace text_corpus_test {

using namespace mixlab;

namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::path(::testing::TempDir()) / ("mixlab_text_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

void write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

void write_ids(const fs::path& path, const std::vector<uint16_t>& ids) {
  write(path, std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(uint16_t)));
}

std::vector<std::string> doc_names(const Corpus& c) {
  std::vector<std::string> names;
  for (Split s : {Split::kTrain, Split::kValidation})
    for (const auto& d : c.documents(s)) names.push_back(d.name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST(TextCorpus, FolderIsOneDocumentPerFileInPathOrder) {
  const fs::path dir = temp_dir("folder");
  write(dir / "b.txt", "second\n");
  write(dir / "a.txt", "\n\nfirst line\nsecond line\n\n");
  write(dir / "sub" / "c.md", "third");
  write(dir / ".hidden", "never read");
  write(dir / ".git" / "x", "never read");
  const Corpus c = text_corpus_load(dir.string());
  EXPECT_EQ(doc_names(c), (std::vector<std::string>{"a.txt", "b.txt", "sub/c.md"}));
  EXPECT_EQ(c.source(), dir.string());
  // Line breaks at the ends are dropped, those inside kept.
  for (const auto& d : lm_split_documents(c, LmSplit::kTrain))
    if (d.name == "a.txt") EXPECT_EQ(d.text, "first line\nsecond line");
  EXPECT_EQ(lm_split_documents(c, LmSplit::kValid).at(0).text, "second");  // document 1
  EXPECT_EQ(lm_split_documents(c, LmSplit::kTest).at(0).text, "third");    // document 2
}

TEST(TextCorpus, FileIsDocumentsBetweenBlankLines) {
  const fs::path dir = temp_dir("file");
  write(dir / "book.txt", "one a\none b\n\n  \t\ntwo\r\n\r\nthree\n\n\n\nfour\n");
  const Corpus c = text_corpus_load((dir / "book.txt").string());
  const auto names = doc_names(c);
  ASSERT_EQ(names.size(), 4u);
  EXPECT_EQ(names[0], "book.txt#00000001");
  EXPECT_EQ(names[3], "book.txt#00000004");
  EXPECT_EQ(lm_split_documents(c, LmSplit::kTrain).at(0).text, "one a\none b");
  EXPECT_EQ(lm_split_documents(c, LmSplit::kValid).at(0).text, "two");  // "\r\n" at its end trimmed
  EXPECT_EQ(lm_split_documents(c, LmSplit::kTest).at(0).text, "three");
}

TEST(TextCorpus, RefusesWhatIsNotACorpus) {
  const fs::path dir = temp_dir("bad");
  expect_error([&] { text_corpus_load((dir / "missing").string()); }, {"missing", "does not exist"});
  fs::create_directories(dir / "empty_folder");
  write(dir / "empty_folder" / ".only_hidden", "x");
  expect_error([&] { text_corpus_load((dir / "empty_folder").string()); }, {"empty_folder", "without any file"});
  write(dir / "empty.txt", "");
  expect_error([&] { text_corpus_load((dir / "empty.txt").string()); }, {"empty.txt", "is empty (0 bytes)"});
  write(dir / "blank.txt", "\n \n\t\n");
  expect_error([&] { text_corpus_load((dir / "blank.txt").string()); }, {"blank.txt", "only blank lines"});
  write(dir / "image.png", std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16));
  expect_error([&] { text_corpus_load((dir / "image.png").string()); }, {"image.png", "binary", "offset 8"});
  write(dir / "folder_with_empty" / "a.txt", "text");
  write(dir / "folder_with_empty" / "b.txt", "\n\n");
  expect_error([&] { text_corpus_load((dir / "folder_with_empty").string()); }, {"b.txt", "only line breaks"});
}

TEST(TextCorpus, SplitsNeedEnoughDocuments) {
  const fs::path dir = temp_dir("few");
  write(dir / "two.txt", "first\n\nsecond\n");
  const Corpus c = text_corpus_load((dir / "two.txt").string());
  const LmTokenizer bytes = LmTokenizer::load(LmTokenizerKind::kBytes, "");
  EXPECT_NO_THROW(LmDataset::open(c, LmSplit::kValid, bytes, (dir / "cache").string()));
  expect_error([&] { LmDataset::open(c, LmSplit::kTest, bytes, (dir / "cache").string()); },
               {"two.txt", "has no test document", "2 documents", ">= 3"});
}

TEST(TextCorpus, CacheIsKeyedByTheDocuments) {
  const fs::path dir = temp_dir("key");
  write(dir / "c" / "a.txt", "alpha");
  write(dir / "c" / "b.txt", "beta");
  const LmTokenizer bytes = LmTokenizer::load(LmTokenizerKind::kBytes, "");
  const std::string cache = (dir / "cache").string();
  const LmDataset first = LmDataset::open(text_corpus_load((dir / "c").string()), LmSplit::kTrain, bytes, cache);
  EXPECT_EQ(first.size(), 1 + 5);  // [sep a l p h a]
  EXPECT_EQ(first.tokens()[1], 'a');
  write(dir / "c" / "a.txt", "gamma");  // an edited corpus is another corpus: a new cache file
  const LmDataset second = LmDataset::open(text_corpus_load((dir / "c").string()), LmSplit::kTrain, bytes, cache);
  EXPECT_NE(first.path(), second.path());
  EXPECT_EQ(second.tokens()[1], 'g');
}

TEST(TextCorpus, NonUtf8IsBytesForBytesAndAnErrorForGpt2) {
  const std::string gpt2_dir = std::string(MIXLAB_SOURCE_DIR) + "/data/gpt2";
  const fs::path dir = temp_dir("latin1");
  write(dir / "c" / "a.txt", "caf\xe9 au lait");  // Latin-1, not UTF-8
  write(dir / "c" / "b.txt", "plain");
  const Corpus c = text_corpus_load((dir / "c").string());
  const LmDataset d =
      LmDataset::open(c, LmSplit::kTrain, LmTokenizer::load(LmTokenizerKind::kBytes, ""), (dir / "cache").string());
  EXPECT_EQ(d.tokens()[4], 0xE9);
  if (!fs::exists(gpt2_dir + "/encoder.json")) GTEST_SKIP() << "data/gpt2 not installed (scripts/setup.sh)";
  const LmTokenizer gpt2 = LmTokenizer::load(LmTokenizerKind::kGpt2, gpt2_dir);
  expect_error([&] { LmDataset::open(c, LmSplit::kTrain, gpt2, (dir / "cache").string()); },
               {"document 'a.txt'", "gpt2", "not valid UTF-8 at byte 3"});
}

TEST(TokenBin, MapsTheIdsAndChecksThemWindowByWindow) {
  const fs::path dir = temp_dir("bin");
  std::vector<uint16_t> ids(1000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint16_t>((i * 7) % 300);
  write_ids(dir / "train.bin", ids);
  const LmDataset d = LmDataset::open_bin((dir / "train.bin").string(), 300);
  EXPECT_EQ(d.size(), 1000);
  EXPECT_EQ(d.documents(), 0);
  EXPECT_EQ(d.tokens()[3], 21);
  EXPECT_EQ(d.slice(10, 3)[2].item<int64_t>(), (12 * 7) % 300);
  auto [x, y] = lm_train_windows(d, 4, 16, 1, 0);
  EXPECT_TRUE(torch::equal(x.slice(1, 1, 16), y.slice(1, 0, 15)));
  // The same file with a vocabulary that its ids reach: refused when a window touches one.
  const LmDataset small = LmDataset::open_bin((dir / "train.bin").string(), 100);
  expect_error([&] { small.slice(0, 1000); }, {"train.bin", "token id 105 at offset 15", "vocabulary of 100"});
  EXPECT_NO_THROW(small.slice(0, 14));  // 0, 7, ..., 91: all < 100
  expect_error([&] { lm_train_windows(small, 8, 64, 1, 0); }, {"train.bin", "outside the vocabulary of 100"});
}

TEST(TokenBin, RefusesFilesThatAreNotUint16Ids) {
  const fs::path dir = temp_dir("badbin");
  expect_error([&] { TokenBinFile::open((dir / "val.bin").string()); }, {"val.bin", "cannot open"});
  write(dir / "empty.bin", "");
  expect_error([&] { TokenBinFile::open((dir / "empty.bin").string()); }, {"empty.bin", "is empty"});
  write(dir / "odd.bin", "abc");
  expect_error([&] { TokenBinFile::open((dir / "odd.bin").string()); }, {"odd.bin", "3 bytes, an odd size"});
  expect_error([&] { TokenBinFile::open(dir.string()); }, {"not a regular file"});
  write_ids(dir / "short.bin", {1, 2, 3});
  const LmDataset d = LmDataset::open_bin((dir / "short.bin").string(), 10);
  expect_error([&] { lm_train_windows(d, 1, 8, 0, 0); }, {"short.bin", "3 tokens, fewer than T + 1 = 9"});
}

TEST(TokenBin, OpensWithoutReadingTheFile) {
  // 10^8 tokens (200 MB) as a sparse file: open maps it and touches no page (mincore counts the
  // mapping's resident pages); a window reads only its own pages.
  const fs::path path = fs::path(temp_dir("sparse")) / "train.bin";
  { std::ofstream(path, std::ios::binary).put('\0'); }
  fs::resize_file(path, 200'000'000);
  const LmDataset d = LmDataset::open_bin(path.string(), 50257);
  EXPECT_EQ(d.size(), 100'000'000);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t bytes = 200'000'000, pages = (bytes + page - 1) / page;
  auto resident = [&] {
    std::vector<unsigned char> vec(pages);
    EXPECT_EQ(::mincore(const_cast<uint16_t*>(d.tokens()), bytes, vec.data()), 0);
    return std::count_if(vec.begin(), vec.end(), [](unsigned char v) { return (v & 1) != 0; });
  };
  EXPECT_LE(resident(), 1);  // at most the page the test wrote
  auto [x, y] = lm_train_windows(d, 2, 8, 0, 0);
  EXPECT_EQ(x.sum().item<int64_t>(), 0);
  // Two windows of 9 tokens: their pages and the kernel's read-ahead around them (measured: 16 MB
  // on a sparse file), never the whole file.
  EXPECT_LT(resident(), static_cast<std::ptrdiff_t>(pages / 4));
}

}  // namespace text_corpus_test
