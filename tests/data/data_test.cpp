// Brown loader on the committed sample (data/sample), normalisation, split, textcopy properties.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "mixlab/core/error.h"
#include "mixlab/data/corpus.h"
#include "mixlab/data/textcopy.h"
#include "mixlab_test_paths.h"
#include "support/expect_error.h"

namespace data_test {

using mixlab::Corpus;
using mixlab::Split;

namespace {

const std::string kSample = std::string(MIXLAB_SOURCE_DIR) + "/data/sample";

}  // namespace

TEST(BrownNormalize, StripsTagsAndWhitespace) {
  EXPECT_EQ(mixlab::brown_normalize("\n\n\tThe/at Fulton/np-tl County/nn-tl said/vbd ./.\n\n\tIt/pps"),
            "The Fulton County said . It");
  EXPECT_EQ(mixlab::brown_normalize("1/2/cd Atlanta's/np$ ``/`` no/at ''/''"), "1/2 Atlanta's `` no ''");
  EXPECT_EQ(mixlab::brown_normalize("plain  words\r\nhere /cd"), "plain words here");
  EXPECT_EQ(mixlab::brown_normalize(" \n\t "), "");
}

TEST(Corpus, LoadsTheSample) {
  auto c = Corpus::load_brown(kSample);
  EXPECT_EQ(c.source(), kSample);
  // Five documents (ca01 cj21 cn01 cp09 cr09); README is ignored. i % 10 == 0 -> validation.
  ASSERT_EQ(c.documents(Split::kValidation).size(), 1u);
  ASSERT_EQ(c.documents(Split::kTrain).size(), 4u);
  EXPECT_EQ(c.documents(Split::kValidation)[0].name, "ca01");
  EXPECT_EQ(c.documents(Split::kTrain)[0].name, "cj21");
  EXPECT_EQ(c.documents(Split::kTrain)[3].name, "cr09");
  const auto& ca01 = c.documents(Split::kValidation)[0].text;
  EXPECT_EQ(ca01.rfind("The Fulton County Grand Jury said Friday an investigation of Atlanta's recent primary", 0), 0u)
      << ca01.substr(0, 100);
  for (auto split : {Split::kTrain, Split::kValidation}) {
    for (const auto& d : c.documents(split)) {
      EXPECT_GT(d.text.size(), 5000u) << d.name;
      EXPECT_EQ(d.text.find('\n'), std::string::npos) << d.name;
      EXPECT_EQ(d.text.find('\t'), std::string::npos) << d.name;
      EXPECT_EQ(d.text.find("  "), std::string::npos) << d.name;
      EXPECT_EQ(d.text.find("/at "), std::string::npos) << d.name;  // no tag left
      EXPECT_NE(d.text.front(), ' ');
      EXPECT_NE(d.text.back(), ' ');
    }
  }
  auto tok = c.tokens(Split::kTrain);
  EXPECT_EQ(tok.scalar_type(), torch::kLong);
  EXPECT_EQ(tok.numel(), c.bytes(Split::kTrain) + 3);  // 4 documents, 3 separators
  EXPECT_GE(tok.min().item<int64_t>(), 0);
  EXPECT_LT(tok.max().item<int64_t>(), Corpus::kVocabSize);
  EXPECT_EQ((tok == '\n').sum().item<int64_t>(), 3);
  EXPECT_EQ(tok[0].item<int64_t>(), static_cast<unsigned char>(c.documents(Split::kTrain)[0].text[0]));
}

TEST(Corpus, SplitIsDeterministicAndByDocument) {
  std::vector<mixlab::CorpusDocument> docs;
  for (int i = 24; i >= 0; --i) docs.push_back({fmt::format("d{:02d}", i), fmt::format("text {}", i)});
  mixlab::CorpusOptions opt;
  opt.validation_every = 10;
  auto c = Corpus::from_documents(docs, opt);
  ASSERT_EQ(c.documents(Split::kValidation).size(), 3u);  // d00, d10, d20
  EXPECT_EQ(c.documents(Split::kValidation)[1].name, "d10");
  EXPECT_EQ(c.documents(Split::kTrain).size(), 22u);
  std::set<std::string> seen;
  for (auto s : {Split::kTrain, Split::kValidation})
    for (const auto& d : c.documents(s)) EXPECT_TRUE(seen.insert(d.name).second);
  EXPECT_EQ(seen.size(), 25u);
  opt.validation_every = 1;
  expect_error([&] { Corpus::from_documents(docs, opt); }, "validation_every must be >= 2");
}

TEST(Corpus, ErrorsNameThePath) {
  expect_error([] { Corpus::load_brown("/nonexistent/mixlab/brown"); },
               "corpus folder '/nonexistent/mixlab/brown' does not exist");
  const auto empty = std::filesystem::temp_directory_path() / "mixlab_data_test_empty";
  std::filesystem::create_directories(empty);
  std::ofstream(empty / "README") << "not a document";
  expect_error([&] { Corpus::load_brown(empty.string()); }, "folder '" + empty.string() + "' holds no Brown documents");
  expect_error([&] { Corpus::load_brown((empty / "README").string()); }, "is not a folder");
  std::filesystem::remove_all(empty);
}

TEST(TextCopy, GoldenProperties) {
  auto c = Corpus::load_brown(kSample);
  const int64_t B = 6, L = 33;
  auto batch = mixlab::textcopy_batch(c, B, L, uint64_t{42}, Split::kTrain);
  ASSERT_EQ(batch.inputs.sizes(), (std::vector<int64_t>{B, 2 * L - 1}));
  ASSERT_EQ(batch.targets.sizes(), batch.inputs.sizes());
  ASSERT_EQ(batch.mask.sizes(), batch.inputs.sizes());
  EXPECT_EQ(batch.mask.scalar_type(), torch::kFloat);
  // Reassemble q = s ++ s from inputs and the last target.
  auto q = torch::cat({batch.inputs, batch.targets.narrow(1, 2 * L - 2, 1)}, 1);  // (B, 2L)
  EXPECT_TRUE(torch::equal(q.narrow(1, 0, L), q.narrow(1, L, L)));                // second copy = first
  EXPECT_TRUE(torch::equal(batch.targets, q.narrow(1, 1, 2 * L - 1)));            // next-token targets
  // Mask: ones exactly at p >= L-1 (targets of the second copy), L per row.
  auto expected_mask = (torch::arange(2 * L - 1) >= L - 1).to(torch::kFloat).expand({B, 2 * L - 1});
  EXPECT_TRUE(torch::equal(batch.mask, expected_mask));
  EXPECT_EQ(batch.mask.sum().item<double>(), static_cast<double>(B * L));
  // Every span is a substring of a train document.
  std::set<std::string> spans;
  for (int64_t b = 0; b < B; ++b) {
    std::string s;
    for (int64_t p = 0; p < L; ++p) s.push_back(static_cast<char>(q[b][p].item<int64_t>()));
    bool found = false;
    for (const auto& d : c.documents(Split::kTrain)) found = found || d.text.find(s) != std::string::npos;
    EXPECT_TRUE(found) << "'" << s << "'";
    spans.insert(s);
  }
  EXPECT_GT(spans.size(), 1u);  // different rows draw different spans
}

TEST(TextCopy, DeterministicFromSeedAndSplit) {
  auto c = Corpus::load_brown(kSample);
  auto a = mixlab::textcopy_batch(c, 4, 17, uint64_t{7});
  auto b = mixlab::textcopy_batch(c, 4, 17, uint64_t{7});
  EXPECT_TRUE(torch::equal(a.inputs, b.inputs));
  EXPECT_TRUE(torch::equal(a.targets, b.targets));
  auto other = mixlab::textcopy_batch(c, 4, 17, uint64_t{8});
  EXPECT_FALSE(torch::equal(a.inputs, other.inputs));
  // A generator carries on: two draws from one generator differ, and replaying the seed repeats them.
  std::mt19937_64 g1(99), g2(99);
  auto x1 = mixlab::textcopy_batch(c, 2, 9, g1), x2 = mixlab::textcopy_batch(c, 2, 9, g1);
  auto y1 = mixlab::textcopy_batch(c, 2, 9, g2), y2 = mixlab::textcopy_batch(c, 2, 9, g2);
  EXPECT_FALSE(torch::equal(x1.inputs, x2.inputs));
  EXPECT_TRUE(torch::equal(x1.inputs, y1.inputs));
  EXPECT_TRUE(torch::equal(x2.inputs, y2.inputs));
  // Validation spans come from the validation document (ca01) only.
  auto v = mixlab::textcopy_batch(c, 3, 40, uint64_t{5}, Split::kValidation);
  const auto& ca01 = c.documents(Split::kValidation)[0].text;
  for (int64_t b = 0; b < 3; ++b) {
    std::string s;
    for (int64_t p = 0; p < 40; ++p) s.push_back(static_cast<char>(v.inputs[b][p].item<int64_t>()));
    EXPECT_NE(ca01.find(s), std::string::npos);
  }
  // L = 1: inputs (B,1) = the token, targets the same token, mask all ones.
  auto one = mixlab::textcopy_batch(c, 3, 1, uint64_t{1});
  EXPECT_TRUE(torch::equal(one.inputs, one.targets));
  EXPECT_EQ(one.mask.sum().item<double>(), 3.0);
}

TEST(TextCopy, BadArguments) {
  auto c = Corpus::load_brown(kSample);
  expect_error([&] { mixlab::textcopy_batch(c, 0, 8, uint64_t{1}); }, "textcopy_batch: batch must be positive");
  expect_error([&] { mixlab::textcopy_batch(c, 2, 0, uint64_t{1}); }, "span length L must be positive");
  expect_error([&] { mixlab::textcopy_batch(c, 2, 1000000, uint64_t{1}); },
               "no train document of corpus '" + kSample + "' has L = 1000000 tokens (4 documents, longest");
}

TEST(Corpus, FullBrownWhenInstalled) {
  // data/brown comes from scripts/setup.sh (not committed); CI without it skips this check.
  const std::string dir = std::string(MIXLAB_SOURCE_DIR) + "/data/brown";
  if (!std::filesystem::exists(dir + "/ca01")) GTEST_SKIP() << dir << " not installed";
  auto c = Corpus::load_brown(dir);
  EXPECT_EQ(c.documents(Split::kTrain).size() + c.documents(Split::kValidation).size(), 500u);
  EXPECT_EQ(c.documents(Split::kValidation).size(), 50u);  // every 10th of 500
  EXPECT_GT(c.bytes(Split::kTrain), 5'000'000);
  auto batch = mixlab::textcopy_batch(c, 2, 512, uint64_t{3}, Split::kValidation);  // the seed's L = 512
  EXPECT_EQ(batch.inputs.size(1), 1023);
}

}  // namespace data_test
