// The parameterised pattern families (geom:B, power:P, fib, ruler:L, unions A+B) against
// brute-force references: offsets straight from their definitions, rows as sets of i - f, the
// named kinds they generalise (pow2 == geom:2, square == power:2, linear == power:1), the
// cache-efficient recursion against the closed form, and the parse errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "mixlab/core/error.h"
#include "mixlab/pattern/pattern.h"

namespace pattern_families_test {

using mixlab::Pattern;

namespace {

// Offsets <= max straight from a definition: the values g(k), k = 0, 1, ... up to `k_max`, sorted
// and kept once (no jumping, no early exit: the reference for the generators in pattern.cpp).
template <class G>
std::vector<int64_t> offsets_by_definition(G g, int64_t k_max, int64_t max) {
  std::set<int64_t> s;
  for (int64_t k = 0; k <= k_max; ++k) {
    const double v = g(k);
    if (v <= static_cast<double>(max)) s.insert(static_cast<int64_t>(v));
  }
  return {s.begin(), s.end()};
}

// Row i as nearest-first positions i - f for the offsets f <= i.
std::vector<int64_t> row_from_offsets(const std::vector<int64_t>& f, int64_t i) {
  std::vector<int64_t> out;
  for (int64_t v : f)
    if (v <= i) out.push_back(i - v);
  return out;
}

void expect_error(const std::string& spec, const std::string& fragment) {
  try {
    Pattern::parse(spec);
    FAIL() << "expected an error for '" << spec << "'";
  } catch (const mixlab::Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(spec), std::string::npos) << "message must name the spec: " << e.what();
  }
}

constexpr int64_t kRows = 700;  // rows compared per spec

}  // namespace

TEST(PatternFamilies, GeomEqualsItsDefinition) {
  for (double b : {1.01, 1.1, 1.3, 1.5, 1.7, 2.5, 3.0, 4.0, 7.25}) {
    auto p = Pattern::parse(fmt::format("geom:{}", b));
    auto ref =
        offsets_by_definition([&](int64_t k) { return std::ceil(std::pow(b, static_cast<double>(k))); }, 5000, 100000);
    EXPECT_EQ(p.offsets_upto(100000), ref) << p.spec();
    for (int64_t i = 0; i < kRows; ++i) ASSERT_EQ(p.row(i), row_from_offsets(ref, i)) << p.spec() << " i=" << i;
    for (size_t k = 0; k < ref.size(); ++k) ASSERT_EQ(mixlab::pattern_offset(p, static_cast<int64_t>(k)), ref[k]);
  }
  // Known values: ceil(1.5^k) = 1, 2, 3, 4, 6, 8, 12, 18, 26, 39.
  EXPECT_EQ(Pattern::parse("geom:1.5").offsets_upto(40), (std::vector<int64_t>{1, 2, 3, 4, 6, 8, 12, 18, 26, 39}));
  // A base barely above 1 reads every position up to ~1/(B-1) and is still quick to list.
  auto near_one = Pattern::parse("geom:1.000001").offsets_upto(int64_t{1} << 20);
  EXPECT_EQ(near_one.front(), 1);
  EXPECT_TRUE(std::is_sorted(near_one.begin(), near_one.end()));
  EXPECT_EQ(std::adjacent_find(near_one.begin(), near_one.end()), near_one.end());
}

TEST(PatternFamilies, NamedKindsAreMembers) {
  const int64_t T = 5000;
  auto same_rows = [&](const std::string& a, const std::string& b) {
    auto pa = Pattern::parse(a), pb = Pattern::parse(b);
    EXPECT_EQ(pa.offsets_upto(mixlab::kPatternMaxT), pb.offsets_upto(mixlab::kPatternMaxT)) << a << " vs " << b;
    for (int64_t i = 0; i < T; ++i) ASSERT_EQ(pa.row(i), pb.row(i)) << a << " vs " << b << " i=" << i;
  };
  same_rows("geom:2", "pow2");
  same_rows("geom:2+cache", "pow2+cache");
  same_rows("power:2", "square");
  same_rows("power:2+cache", "square+cache");
  same_rows("power:1", "linear");
  same_rows("pow2+pow2", "pow2");
  same_rows("order:5+pow2", "band:5+pow2");
}

TEST(PatternFamilies, PowerEqualsItsDefinition) {
  for (double q : {1.0, 1.25, 1.5, 2.0, 2.5, 3.0}) {
    auto p = Pattern::parse(fmt::format("power:{}", q));
    auto ref = offsets_by_definition([&](int64_t k) { return std::ceil(std::pow(static_cast<double>(k), q)) + 1.0; },
                                     100000, 100000);
    EXPECT_EQ(p.offsets_upto(100000), ref) << p.spec();
    for (int64_t i = 0; i < kRows; ++i) ASSERT_EQ(p.row(i), row_from_offsets(ref, i)) << p.spec() << " i=" << i;
  }
}

TEST(PatternFamilies, FibonacciAndRuler) {
  EXPECT_EQ(Pattern::parse("fib").offsets_upto(100), (std::vector<int64_t>{1, 2, 3, 5, 8, 13, 21, 34, 55, 89}));
  EXPECT_EQ(Pattern::parse("fib").row(9), (std::vector<int64_t>{8, 7, 6, 4, 1}));
  // ruler:6 is the Golomb ruler {0, 1, 4, 6}.
  EXPECT_EQ(Pattern::parse("ruler:6").offsets_upto(100), (std::vector<int64_t>{1, 4, 6}));
  for (int64_t L = 1; L <= 400; ++L) {
    auto p = Pattern::parse(fmt::format("ruler:{}", L));
    auto marks = p.offsets_upto(mixlab::kPatternMaxT);
    marks.insert(marks.begin(), 0);
    ASSERT_EQ(marks[1], 1) << L;
    ASSERT_GE(marks.back(), L) << L;
    ASSERT_EQ(p.last_offset(), marks.back());
    std::set<int64_t> diffs;
    for (size_t a = 0; a < marks.size(); ++a)
      for (size_t b = a + 1; b < marks.size(); ++b) diffs.insert(marks[b] - marks[a]);
    for (int64_t d = 1; d <= marks.back(); ++d) ASSERT_TRUE(diffs.count(d)) << "ruler:" << L << " misses " << d;
    // Sparse: about sqrt(3 L) marks (Wichmann), never more than a few above that.
    ASSERT_LE(static_cast<double>(marks.size()), std::sqrt(3.0 * static_cast<double>(L)) + 4.0) << L;
  }
}

TEST(PatternFamilies, UnionsAreTheUnionOfTheOffsets) {
  for (auto spec : {"band:4+pow2", "order:3+square", "pow2+square", "geom:1.5+power:1.5", "fib+ruler:20",
                    "offsets:1,5,9+geom:3+band:2"}) {
    auto p = Pattern::parse(spec);
    EXPECT_TRUE(p.recurrent()) << spec;
    EXPECT_TRUE(p.translation_invariant_family()) << spec;
    std::set<int64_t> all;
    for (const auto& part : p.union_parts())
      for (int64_t v : part.offsets_upto(100000)) all.insert(v);
    std::vector<int64_t> ref(all.begin(), all.end());
    EXPECT_EQ(p.offsets_upto(100000), ref) << spec;
    for (int64_t i = 0; i < kRows; ++i) ASSERT_EQ(p.row(i), row_from_offsets(ref, i)) << spec << " i=" << i;
    for (size_t k = 0; k < std::min<size_t>(ref.size(), 200); ++k)
      ASSERT_EQ(mixlab::pattern_offset(p, static_cast<int64_t>(k)), ref[k]) << spec << " k=" << k;
  }
  EXPECT_EQ(Pattern::parse("band:8+ruler:10").last_offset(), 12);  // ruler:10 is W(0, 3), length 12
  EXPECT_EQ(Pattern::parse("band:20+ruler:10").last_offset(), 20);
  EXPECT_EQ(Pattern::parse("band:8+pow2").last_offset(), -1);
  EXPECT_EQ(Pattern::parse("band:8+ruler:10").union_parts().size(), 2u);
}

TEST(PatternFamilies, RowSizesAndWidths) {
  for (auto spec : {"geom:1.5", "geom:1.5+cache", "power:1.5", "power:1.5+cache", "fib", "fib+cache", "ruler:30",
                    "ruler:30+cache", "band:3+pow2", "band:3+pow2+cache", "geom:2.5+square+cache"}) {
    auto p = Pattern::parse(spec);
    int64_t w = 0;
    for (int64_t i = 0; i < 400; ++i) {
      auto r = p.row(i);
      ASSERT_EQ(p.row_size(i), static_cast<int64_t>(r.size())) << spec << " i=" << i;
      ASSERT_TRUE(std::is_sorted(r.rbegin(), r.rend())) << spec;
      ASSERT_EQ(std::adjacent_find(r.begin(), r.end()), r.end()) << spec;
      for (int64_t j : r) ASSERT_TRUE(j >= 0 && j < i) << spec;
      w = std::max<int64_t>(w, static_cast<int64_t>(r.size()));
    }
    EXPECT_EQ(p.max_width(400), w) << spec;
  }
}

class FamilyCacheForms : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyCacheForms, RecursionEqualsClosedForm) {
  auto p = Pattern::parse(GetParam() + "+cache");
  const int64_t T = 2000;
  auto rec = mixlab::cache_sets_recursive(p, T);
  for (int64_t i = 1; i <= T; ++i) {
    ASSERT_EQ(rec[i - 1], mixlab::cache_set_closed_form(p, i)) << GetParam() << " i=" << i;
    if (i >= 2)
      for (auto j : rec[i - 1])
        ASSERT_TRUE(j == i - 1 || std::binary_search(rec[i - 2].begin(), rec[i - 2].end(), j)) << "i=" << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyCacheForms,
                         ::testing::Values("geom:1.5", "geom:3", "geom:1.1", "power:1.5", "power:2.5", "fib",
                                           "ruler:50", "band:4+pow2", "order:2+square", "geom:1.5+power:1.5"));

TEST(PatternFamilies, CanonicalSpecRoundTrips) {
  for (auto spec : {"geom:1.5", "geom:2", "geom:1.5+cache", "power:1.5", "power:2+cache", "fib", "fib+cache",
                    "ruler:32", "band:8+pow2", "band:8+pow2+cache", "geom:1.5+power:1.5", "offsets:1,3+fib+cache"}) {
    EXPECT_EQ(Pattern::parse(spec).spec(), spec);
    EXPECT_EQ(Pattern::parse(Pattern::parse(spec).spec()).spec(), spec);
  }
  EXPECT_EQ(Pattern::parse("geom:1.50").spec(), "geom:1.5");
  EXPECT_EQ(Pattern::parse("power:2.0").spec(), "power:2");
}

TEST(PatternFamilies, InvalidSpecsNameTheProblem) {
  expect_error("geom", "needs a real base B > 1");
  expect_error("geom:1", "must be > 1");
  expect_error("geom:0.5", "base B");
  expect_error("geom:x", "base B");
  expect_error("power:0.5", "exponent P");
  expect_error("power:", "needs a real exponent");
  expect_error("fib:3", "takes no parameter");
  expect_error("ruler:0", "ruler length L must be a positive integer");
  expect_error("ruler", "needs a length");
  expect_error("band:4+", "operand of the union is empty");
  expect_error("+pow2", "operand of the union is empty");
  expect_error("pow2+cache+square", "+cache must come last");
  expect_error("pow2+causal", "union operand 'causal'");
  expect_error("pow2+foo", "union operand 'foo'");
  expect_error("pow2+geom:1", "must be > 1");
  expect_error("band:4+cache", "+cache applies only");
}

}  // namespace pattern_families_test
