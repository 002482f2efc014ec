// The fused selective scan against its plain reference (forward, backward, with and without an
// initial state), a finite-difference gradient check in double, decode rows, and bad input. The
// backward's block kernel (src/scan/selective_scan_kernels.inc, declared in
// selective_scan_kernels.h and built as selective_scan_kernels_generic.cpp,
// selective_scan_kernels_avx2.cpp and selective_scan_kernels_avx512.cpp) runs below in every
// instruction-set build this CPU runs, through MIXLAB_CPU_ISA; the exp its recompute shares with
// the forward (src/scan/scan_exp.h) is checked against std::exp.
#include "mixlab/scan/selective_scan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "../../src/scan/scan_exp.h"
#include "mixlab/core/error.h"
#include "mixlab/scan/ssm.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/isa_scope.h"

namespace selective_scan_test {

using mixlab::testing::all_close;
using torch::Tensor;

namespace {

struct Inputs {
  Tensor u, delta, a, b, c, d;
  std::vector<Tensor> list() const { return {u, delta, a, b, c, d}; }
};

// Values in the ranges the mixer produces: Δ > 0 (softplus), a < 0.
Inputs random_inputs(int64_t B, int64_t T, int64_t C, int64_t N, torch::Dtype dtype, bool grad) {
  auto o = torch::TensorOptions().dtype(dtype);
  Inputs in{torch::randn({B, T, C}, o),
            torch::softplus(torch::randn({B, T, C}, o)) * 0.5,
            -torch::exp(torch::randn({C, N}, o) * 0.5),
            torch::randn({B, T, N}, o),
            torch::randn({B, T, N}, o),
            torch::randn({C}, o)};
  if (grad)
    for (auto* t : {&in.u, &in.delta, &in.a, &in.b, &in.c, &in.d}) t->requires_grad_(true);
  return in;
}

Tensor fused(const std::vector<Tensor>& v) { return mixlab::selective_scan(v[0], v[1], v[2], v[3], v[4], v[5]); }
Tensor plain(const std::vector<Tensor>& v) {
  return mixlab::selective_scan_reference(v[0], v[1], v[2], v[3], v[4], v[5]);
}

}  // namespace

TEST(SelectiveScan, ForwardAndBackwardEqualTheReference) {
  torch::manual_seed(0);
  for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
    const double tol = dtype == torch::kFloat32 ? 2e-5 : 1e-11;
    // The backward recomputes chunks of 64 steps for blocks of 64 channels (narrower at B = 1 with
    // 2 threads): T = 64, 65 and 150 cross one and two checkpoints (the last chunk short); C = 70
    // and 150 give two and three blocks, the last short; C = 64 at B = 1 splits in two on 2 threads.
    // The walk down a chunk takes a block's channels in groups of four, three, two and one native
    // vectors and then one at a time, and sums dc and db over groups of 16 (float, AVX-512) or 8
    // steps: C = 50 is three vectors and two lanes under AVX-512 (float), six and two under AVX2;
    // the short chunks (T 65, 66, 150) end in part of a group of steps.
    for (auto [B, T, C, N] : std::vector<std::array<int64_t, 4>>{{1, 1, 1, 1},
                                                                 {2, 7, 5, 3},
                                                                 {3, 33, 20, 16},
                                                                 {1, 64, 33, 4},
                                                                 {2, 65, 32, 2},
                                                                 {1, 150, 70, 3},
                                                                 {1, 70, 64, 4},
                                                                 {2, 66, 150, 2},
                                                                 {2, 66, 50, 5}}) {
      auto in = random_inputs(B, T, C, N, dtype, true);
      auto y_ref = plain(in.list());
      auto gy = torch::randn_like(y_ref);
      auto g_ref = torch::autograd::grad({y_ref}, in.list(), {gy});
      for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
        mixlab::testing::IsaScope scope(isa);
        const std::string where = isa + " B=" + std::to_string(B) + " T=" + std::to_string(T) +
                                  " C=" + std::to_string(C) + " N=" + std::to_string(N);
        auto y = fused(in.list());
        EXPECT_TRUE(all_close(y, y_ref, tol, tol)) << where;
        auto g = torch::autograd::grad({y}, in.list(), {gy});
        const char* names[] = {"u", "delta", "a", "b", "c", "d"};
        for (size_t i = 0; i < g.size(); ++i)
          EXPECT_TRUE(all_close(g[i], g_ref[i], 10 * tol, 10 * tol)) << "gradient of " << names[i] << " " << where;
      }
    }
  }
}

TEST(SelectiveScan, GradcheckInDouble) {
  torch::manual_seed(2);
  auto in = random_inputs(2, 5, 3, 2, torch::kFloat64, true);
  for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
    mixlab::testing::IsaScope scope(isa);
    EXPECT_TRUE(mixlab::testing::gradcheck(fused, in.list())) << isa;
  }
}

// The scan's exp (scan_exp.h) against std::exp: float within 1e-6 relative on [-87, 88] (Cephes'
// expf scheme, about 2e-7), the clamp's value below -87 and above 88; double is std::exp.
TEST(SelectiveScan, ScanExpEqualsStdExp) {
  using mixlab::detail::selective_scan::scan_exp;
  double worst = 0;
  for (int i = 0; i <= 175000; ++i) {
    const float x = static_cast<float>(-87.0 + 0.001 * i);  // in double: 88 is the last, not above it
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(static_cast<double>(scan_exp(x)) - want) / want);
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_EQ(scan_exp(-1000.0f), scan_exp(-87.0f));
  EXPECT_GT(scan_exp(-1000.0f), 0.0f);
  EXPECT_EQ(scan_exp(1000.0f), scan_exp(88.0f));
  EXPECT_TRUE(std::isfinite(scan_exp(1000.0f)));
  EXPECT_EQ(scan_exp(0.0f), 1.0f);
  for (double x : {-700.0, -1.5, 0.0, 0.25, 3.0, 700.0}) EXPECT_EQ(scan_exp(x), std::exp(x)) << x;
}

// The backward's chunk 0 starts from h0 and later chunks from the forward's checkpoints: with a
// constant initial state, over three chunks and two channel blocks, every gradient equals the
// reference's.
TEST(SelectiveScan, BackwardFromAnInitialStateAcrossChunks) {
  torch::manual_seed(4);
  const int64_t B = 2, T = 130, C = 40, N = 4;
  auto in = random_inputs(B, T, C, N, torch::kFloat64, true);
  const Tensor h0 = torch::randn({B, C, N}, torch::kFloat64);
  auto y_ref = mixlab::selective_scan_reference(in.u, in.delta, in.a, in.b, in.c, in.d, h0);
  auto gy = torch::randn_like(y_ref);
  auto g_ref = torch::autograd::grad({y_ref}, in.list(), {gy});
  for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
    mixlab::testing::IsaScope scope(isa);
    auto y = mixlab::selective_scan(in.u, in.delta, in.a, in.b, in.c, in.d, h0);
    EXPECT_TRUE(all_close(y, y_ref, 1e-11, 1e-11)) << isa;
    auto g = torch::autograd::grad({y}, in.list(), {gy});
    const char* names[] = {"u", "delta", "a", "b", "c", "d"};
    for (size_t i = 0; i < g.size(); ++i)
      EXPECT_TRUE(all_close(g[i], g_ref[i], 1e-10, 1e-10)) << names[i] << " " << isa;
  }
}

TEST(SelectiveScan, InitialAndFinalStateSplitTheSequence) {
  torch::manual_seed(3);
  torch::NoGradGuard no_grad;
  const int64_t B = 2, T = 12, C = 6, N = 4, cut = 5;
  auto in = random_inputs(B, T, C, N, torch::kFloat32, false);
  Tensor h_all, h_ref, h_mid, h_end;
  auto y_all = mixlab::selective_scan(in.u, in.delta, in.a, in.b, in.c, in.d, {}, &h_all);
  auto y_ref = mixlab::selective_scan_reference(in.u, in.delta, in.a, in.b, in.c, in.d, {}, &h_ref);
  EXPECT_TRUE(all_close(h_all, h_ref, 2e-5, 2e-5));
  auto part = [&](const Tensor& t, int64_t s, int64_t e) { return t.narrow(1, s, e - s); };
  auto y1 = mixlab::selective_scan(part(in.u, 0, cut), part(in.delta, 0, cut), in.a, part(in.b, 0, cut),
                                   part(in.c, 0, cut), in.d, {}, &h_mid);
  auto y2 = mixlab::selective_scan(part(in.u, cut, T), part(in.delta, cut, T), in.a, part(in.b, cut, T),
                                   part(in.c, cut, T), in.d, h_mid, &h_end);
  EXPECT_TRUE(torch::equal(torch::cat({y1, y2}, 1), y_all));  // same operations in the same order
  EXPECT_TRUE(torch::equal(h_end, h_all));
  // The reference with the same initial state agrees.
  auto y2_ref = mixlab::selective_scan_reference(part(in.u, cut, T), part(in.delta, cut, T), in.a, part(in.b, cut, T),
                                                 part(in.c, cut, T), in.d, h_mid);
  EXPECT_TRUE(all_close(y2, y2_ref, 2e-5, 2e-5));
  // Decode: one step per token from h_mid gives the same rows and the same state.
  Tensor h = h_mid.clone();
  for (int64_t t = cut; t < T; ++t) {
    auto y_t = mixlab::selective_scan_step(h, in.u.select(1, t), in.delta.select(1, t), in.a, in.b.select(1, t),
                                           in.c.select(1, t), in.d);
    EXPECT_TRUE(torch::equal(y_t, y_all.select(1, t))) << "t=" << t;
  }
  EXPECT_TRUE(torch::equal(h, h_all));
}

TEST(SelectiveScan, BadInputIsNamed) {
  auto in = random_inputs(2, 4, 3, 2, torch::kFloat32, false);
  auto call = [&](Inputs v) { return [v] { mixlab::selective_scan(v.u, v.delta, v.a, v.b, v.c, v.d); }; };
  Inputs bad = in;
  bad.delta = torch::rand({2, 5, 3});
  expect_error(call(bad), {"selective_scan", "delta", "(B,T,C)", "[2,5,3]"});
  bad = in;
  bad.a = torch::rand({4, 2});
  expect_error(call(bad), {"selective_scan", "a", "(C,N)"});
  bad = in;
  bad.b = bad.b.to(torch::kFloat64);
  expect_error(call(bad), {"selective_scan", "b", "dtype"});
  bad = in;
  bad.c = torch::rand({2, 4});
  expect_error(call(bad), {"selective_scan", "c", "3 dimensions"});
  bad = in;
  bad.u = torch::rand({2, 0, 3});
  bad.delta = torch::rand({2, 0, 3});
  expect_error(call(bad), {"selective_scan", "T >= 1"});
  bad = in;
  bad.u = bad.u.to(torch::kInt64);
  expect_error(call(bad), {"selective_scan", "u", "float32 or float64"});
  expect_error(
      [&] {
        mixlab::selective_scan(in.u, in.delta, in.a, in.b, in.c, in.d, torch::zeros({2, 3, 3}));
      },
      {"selective_scan", "h0", "(B,C,N)"});
  auto h0 = torch::zeros({2, 3, 2}, torch::requires_grad());
  expect_error([&] { mixlab::selective_scan(in.u, in.delta, in.a, in.b, in.c, in.d, h0); }, {"h0", "constant"});
  Tensor h_bad = torch::zeros({2, 3});
  expect_error(
      [&] {
        mixlab::selective_scan_step(h_bad, in.u.select(1, 0), in.delta.select(1, 0), in.a, in.b.select(1, 0),
                                    in.c.select(1, 0), in.d);
      },
      {"selective_scan_step", "h", "(B,C,N)"});
}

// The ssm mixer's prefill (one fused scan from the state) equals its steps and its forward.
TEST(SelectiveScan, SsmPrefillEqualsStepsAndForward) {
  torch::manual_seed(4);
  mixlab::SsmMixer m(mixlab::MixerDims{}, 8);
  auto x = torch::randn({2, 11, mixlab::MixerDims{}.d_model});
  torch::NoGradGuard no_grad;
  auto y = m.forward(x);
  auto st = m.init_state(2);
  auto head = m.prefill(*st, x.narrow(1, 0, 4));
  auto tail = m.prefill(*st, x.narrow(1, 4, 7));
  EXPECT_EQ(st->position(), 11);
  EXPECT_TRUE(all_close(torch::cat({head, tail}, 1), y, 1e-5, 1e-5));
  auto st2 = m.init_state(2);
  for (int64_t t = 0; t < 11; ++t) EXPECT_TRUE(all_close(m.step(*st2, x.select(1, t)), y.select(1, t), 1e-5, 1e-5));
}

}  // namespace selective_scan_test
