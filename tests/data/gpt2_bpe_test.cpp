// GPT-2 BPE: token for token against the reference JavaScript encoder of the npm package
// gpt-3-encoder (run with node when present), round trips, the pre-tokeniser, and errors.
// Skipped when data/gpt2 is missing (scripts/setup.sh fetches it).
#include "mixlab/data/gpt2_bpe.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mixlab/core/error.h"
#include "mixlab/data/corpus.h"
#include "mixlab_test_paths.h"
#include "support/expect_error.h"

namespace mixlab {
namespace gpt2_bpe_test {
namespace {

namespace fs = std::filesystem;

const std::string kGpt2Dir = std::string(MIXLAB_SOURCE_DIR) + "/data/gpt2";

const Gpt2Bpe* tokenizer() {
  static const Gpt2Bpe* t = fs::exists(kGpt2Dir + "/encoder.json") ? new Gpt2Bpe(Gpt2Bpe::load(kGpt2Dir)) : nullptr;
  return t;
}

#define REQUIRE_TOKENIZER() \
  if (tokenizer() == nullptr) GTEST_SKIP() << kGpt2Dir << " is missing (scripts/setup.sh fetches it)"

// Unicode, runs of whitespace, contractions, the empty string, digits of other scripts, specials.
std::vector<std::string> edge_cases() {
  return {"",
          " ",
          "   ",
          "\n\n",
          "Hello world",
          "Hello  world   again    ",
          "it's I'll we've they're she'd I'm don't 'S 'sss ''s",
          "   leading spaces and trailing   ",
          "tabs\t\tand\nnewlines\r\nmixed \t \n end",
          "unicode: café naïve façade 日本語のテキスト Ωμέγα Привет мир",
          "emoji 😀🎉 and combining e\xcc\x81 marks",
          "numbers 12345 3.14159 ½ Ⅻ ٣٤٥ 2nd",
          "punctuation!!! ... ?! -- (parens) [brackets] {braces} @#$%^&*",
          "no\u00a0break\u2009thin\u3000ideographic spaces",
          "<|endoftext|> is plain text here",
          "a  b   c    d",
          "x",
          "'",
          "''",
          " '",
          "The/at jury/nn said/vbd"};
}

std::vector<std::string> brown_documents() {
  std::vector<std::string> docs;
  for (const char* dir : {"/data/sample", "/data/brown"}) {
    const std::string path = std::string(MIXLAB_SOURCE_DIR) + dir;
    if (!fs::exists(path)) continue;
    const Corpus c = Corpus::load_brown(path);
    for (Split s : {Split::kTrain, Split::kValidation})
      for (const auto& d : c.documents(s))
        if (docs.size() < 40) docs.push_back(d.text);
  }
  return docs;
}

TEST(Gpt2Bpe, MatchesTheReferenceEncoderTokenForToken) {
  REQUIRE_TOKENIZER();
  if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
  std::vector<std::string> inputs = edge_cases();
  for (auto& d : brown_documents()) inputs.push_back(d);
  ASSERT_GT(inputs.size(), edge_cases().size()) << "no Brown document found (data/sample ships with the repo)";
  const fs::path dir = fs::path(::testing::TempDir()) / "mixlab_gpt2_reference";
  fs::create_directories(dir);
  std::ofstream(dir / "inputs.json") << nlohmann::json(inputs).dump();
  const std::string cmd = "node " + std::string(MIXLAB_SOURCE_DIR) + "/tests/data/gpt2_reference.js " + kGpt2Dir + " " +
                          (dir / "inputs.json").string() + " > " + (dir / "ids.json").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto expected = nlohmann::json::parse(std::ifstream(dir / "ids.json"));
  ASSERT_EQ(expected.size(), inputs.size());
  int64_t tokens = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE(inputs[i].substr(0, 80));
    const auto ids = tokenizer()->encode(inputs[i]);
    ASSERT_EQ(ids, expected[i].get<std::vector<int64_t>>());
    tokens += static_cast<int64_t>(ids.size());
  }
  EXPECT_GT(tokens, 10000) << "the comparison should cover real text";
}

TEST(Gpt2Bpe, KnownIdsWithoutNode) {
  REQUIRE_TOKENIZER();
  // Fixed points of GPT-2's vocabulary: "Hello" = 15496, " world" = 995, end of text = 50256.
  EXPECT_EQ(tokenizer()->encode("Hello world"), (std::vector<int64_t>{15496, 995}));
  EXPECT_EQ(tokenizer()->vocab_size(), 50257);
  EXPECT_EQ(tokenizer()->end_of_text(), 50256);
  EXPECT_TRUE(tokenizer()->encode("").empty());
}

TEST(Gpt2Bpe, DecodeInvertsEncode) {
  REQUIRE_TOKENIZER();
  for (const auto& s : edge_cases()) EXPECT_EQ(tokenizer()->decode(tokenizer()->encode(s)), s);
  for (const auto& s : brown_documents()) EXPECT_EQ(tokenizer()->decode(tokenizer()->encode(s)), s);
}

TEST(Gpt2Bpe, PretokenizerFollowsGpt2Pattern) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(Gpt2Bpe::pretokenize("Hello  world"), (V{"Hello", " ", " world"}));
  EXPECT_EQ(Gpt2Bpe::pretokenize("it's"), (V{"it", "'s"}));
  EXPECT_EQ(Gpt2Bpe::pretokenize("a 123!!"), (V{"a", " 123", "!!"}));
  EXPECT_EQ(Gpt2Bpe::pretokenize("end  "), (V{"end", "  "}));
  EXPECT_EQ(Gpt2Bpe::pretokenize("\n\nx"), (V{"\n", "\n", "x"}));
  EXPECT_TRUE(Gpt2Bpe::pretokenize("").empty());
}

TEST(Gpt2Bpe, Errors) {
  expect_error([] { Gpt2Bpe::load("/nonexistent/gpt2"); }, "/nonexistent/gpt2/encoder.json");
  expect_error([] { Gpt2Bpe::pretokenize("bad \xff byte"); }, "not valid UTF-8 at byte 4");
  expect_error([] { Gpt2Bpe::pretokenize("cut \xe6\x97"); }, "not valid UTF-8 at byte 4");
  const fs::path dir = fs::path(::testing::TempDir()) / "mixlab_gpt2_bad";
  fs::create_directories(dir);
  std::ofstream(dir / "encoder.json") << "{not json";
  expect_error([&] { Gpt2Bpe::load(dir.string()); }, "is not valid JSON");
  if (tokenizer() == nullptr) return;
  expect_error([] { tokenizer()->decode({50257}); }, "token id 50257 is outside [0, 50257)");
  expect_error([] { tokenizer()->decode({-1}); }, "token id -1");
}

}  // namespace
}  // namespace gpt2_bpe_test
}  // namespace mixlab
