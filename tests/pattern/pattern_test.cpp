// Pattern kinds, parsing errors, rows, and the cache-efficient sets (recursion vs closed form).
#include "mixlab/pattern/pattern.h"

#include <gtest/gtest.h>

#include "mixlab/core/error.h"

namespace pattern_test {

using mixlab::Pattern;

namespace {

std::vector<int64_t> row(const std::string& spec, int64_t i) { return Pattern::parse(spec).row(i); }

void expect_error(const std::string& spec, const std::string& fragment) {
  try {
    Pattern::parse(spec);
    FAIL() << "expected an error for '" << spec << "'";
  } catch (const mixlab::Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(spec), std::string::npos) << "message must name the spec: " << e.what();
  }
}

}  // namespace

TEST(Pattern, RowsOfEveryKind) {
  // 0-based rows, nearest first.
  EXPECT_EQ(row("causal", 3), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(row("dense", 3), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(row("linear", 3), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(row("band:2", 5), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(row("order:3", 2), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(row("order:1", 7), (std::vector<int64_t>{6}));
  EXPECT_EQ(row("pow2", 19), (std::vector<int64_t>{18, 17, 15, 11, 3}));
  EXPECT_EQ(row("square", 19), (std::vector<int64_t>{18, 17, 14, 9, 2}));
  EXPECT_EQ(row("offsets:1,3,7", 10), (std::vector<int64_t>{9, 7, 3}));
  EXPECT_TRUE(row("pow2", 0).empty());
  EXPECT_TRUE(row("pow2+cache", 0).empty());
}

TEST(Pattern, SeedExamplesOfCacheSets) {
  // SPEC-NOTES §2: f = 2^k, i = 20 (1-based) -> {8,12,16,18,19}; f = k^2+1 -> {12,15,18,19}.
  EXPECT_EQ(mixlab::cache_set_closed_form(Pattern::parse("pow2+cache"), 20), (std::vector<int64_t>{8, 12, 16, 18, 19}));
  EXPECT_EQ(mixlab::cache_set_closed_form(Pattern::parse("square+cache"), 20), (std::vector<int64_t>{12, 15, 18, 19}));
  // Row 19 (0-based) is i = 20 (1-based).
  EXPECT_EQ(row("pow2+cache", 19), (std::vector<int64_t>{18, 17, 15, 11, 7}));
}

class CacheForms : public ::testing::TestWithParam<std::string> {};

TEST_P(CacheForms, RecursionEqualsClosedFormUpTo5000) {
  auto p = Pattern::parse(GetParam() + "+cache");
  const int64_t T = 5000;
  auto rec = mixlab::cache_sets_recursive(p, T);
  // i = 1: both forms give the empty read set of row 1 (it has no past), as Pattern::row(0) does.
  ASSERT_EQ(rec[0], mixlab::cache_set_closed_form(p, 1));
  ASSERT_TRUE(rec[0].empty());
  ASSERT_TRUE(p.row(0).empty());
  for (int64_t i = 2; i <= T; ++i) {
    ASSERT_EQ(rec[i - 1], mixlab::cache_set_closed_form(p, i)) << GetParam() << " i=" << i;
    // Cache-efficiency: S_i ⊆ S_{i-1} ∪ {i-1}.
    for (auto j : rec[i - 1]) {
      ASSERT_TRUE(j == i - 1 || std::binary_search(rec[i - 2].begin(), rec[i - 2].end(), j)) << "i=" << i;
      ASSERT_LT(j, i);
      ASSERT_GE(j, 1);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, CacheForms,
                         ::testing::Values("pow2", "square", "linear",
                                           "offsets:1,2,3,5,8,13,21,34,55,89,144,233,377,"
                                           "610,987,1597,2584,4181"));

TEST(Pattern, PrintedDefinitionDisagreesWithClosedForm) {
  // Documents the correction: rounding within S_{i-1} ∪ {i} (as printed) differs at i = 3 for 2^k.
  auto p = Pattern::parse("pow2+cache");
  std::vector<int64_t> s1 = {1}, s2;
  // i = 2 as printed: candidates {1} ∪ {2}: π(1) = 1 -> S_2 = {1}.
  // i = 3 as printed: candidates S_2 ∪ {3} = {1,3}: π(2) = 3 (not < i), π(1) = 1 -> {1,3}.
  std::vector<int64_t> printed_s3 = {1, 3};
  EXPECT_NE(printed_s3, mixlab::cache_set_closed_form(p, 3));
  EXPECT_EQ(mixlab::cache_set_closed_form(p, 3), (std::vector<int64_t>{1, 2}));
}

TEST(Pattern, RowSizeMatchesProp42) {
  // |P(i)| = 1 + max{k : f(k) < i} (1-based i).
  for (auto spec : {"pow2", "square", "linear"}) {
    auto p = Pattern::parse(spec);
    for (int64_t i = 2; i <= 3000; ++i) {
      int64_t g = -1;
      for (int64_t k = 0; mixlab::pattern_offset(p, k) < i; ++k) g = k;
      ASSERT_EQ(p.row_size(i - 1), 1 + g) << spec << " i=" << i;
      ASSERT_EQ(static_cast<int64_t>(p.row(i - 1).size()), 1 + g);
    }
  }
}

TEST(Pattern, CanonicalSpecRoundTrips) {
  for (auto spec :
       {"causal", "band:8", "dense", "order:4", "pow2", "square+cache", "linear+cache", "offsets:1,2,5+cache"}) {
    EXPECT_EQ(Pattern::parse(spec).spec(), spec);
    EXPECT_EQ(Pattern::parse(Pattern::parse(spec).spec()).spec(), spec);
  }
}

TEST(Pattern, InvalidSpecsNameTheProblem) {
  expect_error("", "empty");
  expect_error("foo", "unknown kind 'foo'");
  expect_error("band:0", "band width W must be a positive integer in [1, ");
  expect_error("band:-3", "positive integer");
  expect_error("band", "needs a width");
  expect_error("order:x", "positive integer");
  expect_error("order:0", "order K must be a positive integer");
  expect_error("offsets:2,3", "must start at 1");
  expect_error("offsets:1,3,3", "strictly increasing");
  expect_error("offsets:1,5,4", "strictly increasing");
  expect_error("offsets:", "needs a list");
  expect_error("offsets:1,,2", "empty");
  expect_error("dense+cache", "+cache applies only");
  expect_error("band:4+cache", "+cache applies only");
  expect_error("pow2:3", "takes no parameter");
  expect_error("band:999999999999", "must be a positive integer in [1, 16777216]");
}

TEST(PatternIndex, SlotsMatchRowsAndAreCached) {
  for (auto spec : {"dense", "band:3", "order:2", "pow2", "square+cache", "pow2+cache"}) {
    auto p = Pattern::parse(spec);
    auto idx = mixlab::pattern_index(p, 37);
    ASSERT_EQ(idx->T, 37);
    EXPECT_EQ(idx->W, p.max_width(37));
    int64_t nnz = 0;
    for (int64_t i = 0; i < 37; ++i) {
      auto r = p.row(i);
      ASSERT_EQ(idx->count[i], static_cast<int64_t>(r.size()));
      nnz += idx->count[i];
      for (int64_t s = 0; s < idx->W; ++s) EXPECT_EQ(idx->row(i)[s], s < idx->count[i] ? r[s] : -1);
    }
    EXPECT_EQ(idx->nnz(), nnz);
    EXPECT_EQ(mixlab::pattern_index(p, 37).get(), idx.get()) << "second call must hit the cache";
  }
}

TEST(PatternIndex, RejectsBadLengths) {
  auto p = Pattern::parse("pow2");
  EXPECT_THROW(mixlab::pattern_index(p, 0), mixlab::Error);
  EXPECT_THROW(mixlab::pattern_index(p, -5), mixlab::Error);
  EXPECT_THROW(mixlab::pattern_index(p, mixlab::kPatternMaxT + 1), mixlab::Error);
  // dense at 2^20 would need 2^40 slots: refused with a message, not an allocation failure.
  EXPECT_THROW(mixlab::pattern_index(Pattern::parse("dense"), int64_t{1} << 20), mixlab::Error);
}

// Found by the pattern fuzzer (tests/fuzz/corpus/pattern/crash-newline-in-spec.txt): "or\ner:r"
// was refused by a message quoting the spec with its newline, two lines.
TEST(Pattern, ControlCharactersAreRefusedOnOneLine) {
  try {
    (void)Pattern::parse("or\ner:r");
    ADD_FAILURE() << "a control character was accepted";
  } catch (const mixlab::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "pattern spec 'or\\x0aer:r': has a control character (byte 0x0a) at offset 2; expected printable text");
  }
}

}  // namespace pattern_test
