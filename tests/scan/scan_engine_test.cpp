// Tests of the prefix-scan engine: static Blelloch scan vs online binary counter (seed 004 Thm 3.5,
// Cor 3.6), associative folds, Agg call counts, serialisation.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <string>

#include "mixlab/core/error.h"
#include "mixlab/scan/scan.h"
#include "mixlab_test_paths.h"
#include "support/gradcheck.h"

namespace mixlab {
namespace scan_engine_test {
namespace {

// A deliberately non-associative aggregator: a small tanh network on 3-vectors.
struct TanhAgg {
  at::Tensor w1, w2, bias;
  at::Tensor operator()(const at::Tensor& left, const at::Tensor& right) const {
    return torch::tanh(torch::mv(w1, left) + torch::mv(w2, right) + bias);
  }
};

TanhAgg tanh_agg(uint64_t seed) {
  torch::manual_seed(seed);
  return TanhAgg{torch::randn({3, 3}, torch::kFloat32), torch::randn({3, 3}, torch::kFloat32),
                 torch::randn({3}, torch::kFloat32)};
}

std::vector<at::Tensor> random_elements(int64_t r, int64_t dim) {
  std::vector<at::Tensor> x;
  for (int64_t i = 0; i < r; ++i) x.push_back(torch::randn({dim}, torch::kFloat32));
  return x;
}

// Runs the parallel tree with 2 intra-op threads (LibTorch's Debian build starts with 1, which
// would make at::parallel_for serial), restoring the count afterwards.
struct TwoThreads {
  int saved = at::get_num_threads();
  TwoThreads() { at::set_num_threads(2); }
  ~TwoThreads() { at::set_num_threads(saved); }
};

int64_t popcount(int64_t t) { return __builtin_popcountll(static_cast<unsigned long long>(t)); }
int64_t ceil_log2_plus1(int64_t t) {  // ceil(log2(t+1))
  int64_t k = 0;
  while ((int64_t{1} << k) < t + 1) ++k;
  return k;
}

TEST(ScanEngine, NonAssociativeAggIsNonAssociative) {
  auto agg = tanh_agg(1);
  auto x = random_elements(3, 3);
  auto a = agg(agg(x[0], x[1]), x[2]);
  auto b = agg(x[0], agg(x[1], x[2]));
  EXPECT_GT((a - b).abs().max().item<float>(), 1e-3f);
}

TEST(ScanEngine, CounterEqualsStaticScanBitwiseForNonAssociativeAgg) {
  TwoThreads threads;
  auto agg = tanh_agg(2);
  const int64_t r = 1000;
  auto x = random_elements(r, 3);
  const at::Tensor e = torch::zeros({3});
  for (bool parallel : {false, true}) {
    ScanStats stats;
    auto prefix = blelloch_scan(x, agg, e, ScanOptions{parallel}, &stats);
    ASSERT_EQ(static_cast<int64_t>(prefix.size()), r + 1);
    EXPECT_TRUE(torch::equal(prefix[0], e));
    EXPECT_LE(stats.agg_calls, 2 * r);
    BinaryCounterScan<at::Tensor, TanhAgg> counter(agg, e);
    for (int64_t t = 0; t < r; ++t) {
      const at::Tensor& p = counter.insert(x[static_cast<size_t>(t)]);
      ASSERT_TRUE(torch::equal(p, prefix[static_cast<size_t>(t + 1)])) << "t = " << t + 1 << " parallel " << parallel;
      const int64_t inserted = t + 1;
      ASSERT_EQ(counter.roots(), popcount(inserted));
      ASSERT_LE(counter.roots(), ceil_log2_plus1(inserted)) << "Cor. 3.6 at t = " << inserted;
      ASSERT_LE(counter.agg_calls(), 2 * inserted);
    }
  }
}

TEST(ScanEngine, StaticScanOfEveryLengthMatchesCounter) {
  // Every r from 0 to 70 (powers of two and not): P_t of a scan of length r equals the counter.
  auto agg = tanh_agg(3);
  const at::Tensor e = torch::full({3}, 0.25f);
  auto x = random_elements(70, 3);
  BinaryCounterScan<at::Tensor, TanhAgg> counter(agg, e);
  std::vector<at::Tensor> online{e};
  for (const auto& xi : x) online.push_back(counter.insert(xi));
  for (int64_t r = 0; r <= 70; ++r) {
    std::vector<at::Tensor> xr(x.begin(), x.begin() + r);
    auto prefix = blelloch_scan(xr, agg, e);
    for (int64_t t = 0; t <= r; ++t)
      ASSERT_TRUE(torch::equal(prefix[static_cast<size_t>(t)], online[static_cast<size_t>(t)]))
          << "r " << r << " t " << t;
  }
}

TEST(ScanEngine, ParenthesisationIsTheBinaryDecomposition) {
  // With string concatenation under explicit brackets the tree is visible: P_6 = ((e 0123) 45).
  auto agg = [](const std::string& a, const std::string& b) { return "(" + a + " " + b + ")"; };
  std::vector<std::string> x{"0", "1", "2", "3", "4", "5", "6"};
  auto prefix = blelloch_scan(x, agg, std::string("e"), ScanOptions{false});
  EXPECT_EQ(prefix[0], "e");
  EXPECT_EQ(prefix[1], "(e 0)");
  EXPECT_EQ(prefix[3], "((e (0 1)) 2)");
  EXPECT_EQ(prefix[6], "((e ((0 1) (2 3))) (4 5))");
  EXPECT_EQ(prefix[7], "(((e ((0 1) (2 3))) (4 5)) 6)");
}

TEST(ScanEngine, AssociativeAggEqualsLeftToRightFold) {
  // Integer addition mod 2^62 in int64 (exact) and 2x2 matrix products in double (rounding only).
  torch::manual_seed(5);
  const int64_t r = 300;
  std::vector<at::Tensor> xi, xm;
  for (int64_t i = 0; i < r; ++i) {
    xi.push_back(torch::randint(-1000000, 1000000, {4}, torch::kInt64));
    xm.push_back(torch::eye(2, torch::kFloat64) + 0.1 * torch::randn({2, 2}, torch::kFloat64));
  }
  auto add = [](const at::Tensor& a, const at::Tensor& b) { return a + b; };
  auto mul = [](const at::Tensor& a, const at::Tensor& b) { return torch::mm(b, a); };  // later on the left
  auto pi = blelloch_scan(xi, add, torch::zeros({4}, torch::kInt64));
  auto pm = blelloch_scan(xm, mul, torch::eye(2, torch::kFloat64));
  BinaryCounterScan<at::Tensor, decltype(add)> ci(add, torch::zeros({4}, torch::kInt64));
  BinaryCounterScan<at::Tensor, decltype(mul)> cm(mul, torch::eye(2, torch::kFloat64));
  at::Tensor fi = torch::zeros({4}, torch::kInt64), fm = torch::eye(2, torch::kFloat64);
  for (int64_t t = 0; t < r; ++t) {
    fi = fi + xi[static_cast<size_t>(t)];
    fm = torch::mm(xm[static_cast<size_t>(t)], fm);
    ASSERT_TRUE(torch::equal(pi[static_cast<size_t>(t + 1)], fi));
    ASSERT_TRUE(torch::equal(ci.insert(xi[static_cast<size_t>(t)]), fi));
    ASSERT_TRUE(testing::all_close(pm[static_cast<size_t>(t + 1)], fm, 1e-12, 1e-12));
    ASSERT_TRUE(testing::all_close(cm.insert(xm[static_cast<size_t>(t)]), fm, 1e-12, 1e-12));
  }
}

TEST(ScanEngine, AggCallCounts) {
  auto agg = [](const int64_t& a, const int64_t& b) { return a + b; };
  for (int64_t r : {0, 1, 2, 3, 5, 8, 17, 64, 100, 1023, 1024}) {
    std::vector<int64_t> x(static_cast<size_t>(r), 1);
    ScanStats stats;
    auto prefix = blelloch_scan(x, agg, int64_t{0}, ScanOptions{}, &stats);
    for (int64_t t = 0; t <= r; ++t) ASSERT_EQ(prefix[static_cast<size_t>(t)], t);
    EXPECT_LE(stats.agg_calls, 2 * r) << r;
    BinaryCounterScan<int64_t, decltype(agg)> counter(agg, 0);
    for (int64_t t = 1; t <= r; ++t) {
      counter.insert(1);
      // (t - popcount(t)) merges plus one fold per insertion.
      ASSERT_EQ(counter.agg_calls(), 2 * t - popcount(t));
    }
  }
}

TEST(ScanEngine, ScanThroughAutogradMatchesCounterGradients) {
  // Gradients flow through the parallel tree (grad mode is propagated to the workers).
  TwoThreads threads;
  torch::manual_seed(9);
  auto w = torch::randn({3, 3}, torch::kFloat64).requires_grad_(true);
  auto agg = [&](const at::Tensor& a, const at::Tensor& b) { return torch::tanh(torch::mv(w, a) + b); };
  std::vector<at::Tensor> x;
  for (int i = 0; i < 37; ++i) x.push_back(torch::randn({3}, torch::kFloat64));
  auto prefix = blelloch_scan(x, agg, torch::zeros({3}, torch::kFloat64));
  auto gs = torch::autograd::grad({torch::stack(prefix).sum()}, {w})[0];
  BinaryCounterScan<at::Tensor, decltype(agg)> counter(agg, torch::zeros({3}, torch::kFloat64));
  std::vector<at::Tensor> online{torch::zeros({3}, torch::kFloat64)};
  for (auto& xi : x) online.push_back(counter.insert(xi));
  auto gc = torch::autograd::grad({torch::stack(online).sum()}, {w})[0];
  EXPECT_TRUE(testing::all_close(gs, gc, 1e-12, 1e-12));
}

TEST(ScanEngine, CounterRootsSaveAndRestore) {
  auto agg = tanh_agg(4);
  const at::Tensor e = torch::zeros({3});
  auto x = random_elements(45, 3);
  BinaryCounterScan<at::Tensor, TanhAgg> a(agg, e), b(agg, e);
  for (int i = 0; i < 23; ++i) a.insert(x[static_cast<size_t>(i)]);
  const std::string path = std::string(MIXLAB_BINARY_DIR) + "/scan_counter_test.pt";
  scan_counter_save(a, path);
  scan_counter_load(b, path);
  std::remove(path.c_str());
  EXPECT_EQ(b.count(), 23);
  EXPECT_EQ(b.roots(), popcount(23));
  for (int i = 23; i < 45; ++i)
    ASSERT_TRUE(torch::equal(a.insert(x[static_cast<size_t>(i)]), b.insert(x[static_cast<size_t>(i)])));
}

TEST(ScanEngine, RestoreRejectsInconsistentSlots) {
  auto agg = tanh_agg(4);
  BinaryCounterScan<at::Tensor, TanhAgg> c(agg, torch::zeros({3}));
  std::vector<BinaryCounterScan<at::Tensor, TanhAgg>::Slot> slots{{0, torch::zeros({3}), torch::zeros({3})}};
  try {
    c.restore(2, slots);
    FAIL() << "expected mixlab::Error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("has level 0, expected 1"), std::string::npos) << err.what();
  }
  try {
    c.restore(3, slots);
    FAIL() << "expected mixlab::Error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("needs 2 roots, got 1"), std::string::npos) << err.what();
  }
  EXPECT_THROW(scan_counter_load(c, "/nonexistent/dir/counter.pt"), Error);
}

}  // namespace
}  // namespace scan_engine_test
}  // namespace mixlab
