// The resolvent op's register-accumulator forward and backward (src/resolvent/resolvent_row_kernels.inc, built
// as resolvent_row_kernels_generic.cpp, resolvent_row_kernels_avx2.cpp and
// resolvent_row_kernels_avx512.cpp, each run below through MIXLAB_CPU_ISA) against the plain
// loops it replaces (ResolventPlainLoopsGuard) and against the dense
// reference: every instruction-set build this CPU runs, float and double, head dims of 1 to 8
// native vectors (column chunks of 1, 2 and 4 vectors and a partial last chunk) and of narrower
// row vectors (a quarter, a half, three quarters and one and a half of a 64-byte vector: D = 4, 8,
// 12 and 24 floats), every pattern kind
// (offset lists, the (T,W) index of +cache, a diagonal A, B = 0), gated and not, T on both sides
// of the plain loops' 64-row blocks, strided inputs, chunked prefill (rows reading a past
// state) and the decode step. The existing op tests run it too (D = 8 in double).
#include "../../src/resolvent/resolvent_row_kernels.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "mixlab/resolvent/resolvent.h"
#include "support/gradcheck.h"
#include "support/isa_scope.h"

namespace resolvent_row_kernels_test {

using mixlab::Pattern;
using mixlab::ResolventState;
using mixlab::testing::all_close;
using torch::Tensor;

namespace {

struct Inputs {
  Tensor alpha, beta, x, gate;
};

Inputs random_inputs(const Pattern& p, int64_t B, int64_t H, int64_t T, int64_t D, torch::ScalarType dtype, bool gated,
                     bool diagonal_alpha, bool strided) {
  auto o = torch::TensorOptions().dtype(dtype);
  const int64_t W = mixlab::pattern_index(p, T)->W;
  const int64_t WA = diagonal_alpha ? 1 : W + 1, WB = p.recurrent() ? W : 0;
  Inputs in;
  in.x = strided ? torch::randn({B, T, H, D}, o).permute({0, 2, 1, 3}) : torch::randn({B, H, T, D}, o);
  in.alpha = torch::randn({B, H, T, WA}, o);
  in.beta = torch::rand({B, H, T, WB}, o) * (0.9 / std::max<int64_t>(W, 1));
  if (gated) in.gate = torch::rand({B, H, T, D}, o);
  return in;
}

Tensor plain(const Inputs& in, const Pattern& p) {
  mixlab::ResolventPlainLoopsGuard guard;
  return mixlab::resolvent_forward(in.alpha, in.beta, in.x, p, in.gate);
}

// Both kernels sum the same terms in the same order; they may differ by FMA contraction only.
double tolerance(torch::ScalarType dtype) { return dtype == torch::kFloat ? 2e-5 : 1e-12; }

const std::vector<std::string> kPatterns = {"causal", "band:3", "order:1",        "order:3",    "pow2",
                                            "square", "linear", "offsets:1,3,70", "pow2+cache", "square+cache"};

// One case of the grid the forward and backward comparisons share.
struct GridCase {
  std::string isa;
  torch::ScalarType dtype;
  int64_t units, D, T;  // D = units 16-byte vectors (4 units: one 64-byte vector)
  std::string spec;
  Pattern pattern;
  std::string what;  // isa, dtype, D, pattern and T, for the failure message
};

// Calls f(case) for every instruction-set build this CPU runs (under its scope), float and double,
// head dims of `unit_counts` 16-byte vectors (multiples of 4: whole 64-byte vectors; others: the
// narrower row vectors), every pattern of kPatterns and T 1, 5 and 130; stops at the first fatal
// failure, as an ASSERT in the loop body would.
template <typename F>
void for_each_grid_case(std::initializer_list<int64_t> unit_counts, F&& f) {
  for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
    mixlab::testing::IsaScope scope(isa);
    for (auto dtype : {torch::kFloat, torch::kDouble}) {
      const int64_t unit_lanes = dtype == torch::kFloat ? 4 : 2;
      for (int64_t units : unit_counts) {
        const int64_t D = units * unit_lanes;
        // The grid's head dims all take the register kernels (else it would test the plain loops twice).
        ASSERT_TRUE(dtype == torch::kFloat ? mixlab::detail::resolvent_rows::supports<float>(D)
                                           : mixlab::detail::resolvent_rows::supports<double>(D))
            << "D=" << D;
        for (const auto& spec : kPatterns)
          for (int64_t T : {1, 5, 130}) {
            const std::string what =
                isa + " " + c10::toString(dtype) + " D=" + std::to_string(D) + " " + spec + " T=" + std::to_string(T);
            f(GridCase{isa, dtype, units, D, T, spec, Pattern::parse(spec), what});
            if (::testing::Test::HasFatalFailure()) return;
          }
      }
    }
  }
}

}  // namespace

TEST(ResolventRowKernels, EqualPlainLoopsEveryIsaDtypeAndWidth) {
  for_each_grid_case({1, 2, 3, 6, 4, 8, 12, 16, 20, 32}, [](const GridCase& c) {
    const bool gated = (c.units / 4 + c.T) % 2 == 0, strided = c.units == 12 || c.units == 6;
    torch::manual_seed(5 + c.units * 7 + c.T);
    const auto in = random_inputs(c.pattern, 1, 2, c.T, c.D, c.dtype, gated, /*diagonal_alpha=*/false, strided);
    const auto y = mixlab::resolvent_forward(in.alpha, in.beta, in.x, c.pattern, in.gate);
    ASSERT_TRUE(all_close(y, plain(in, c.pattern), tolerance(c.dtype), tolerance(c.dtype)))
        << c.what << (gated ? " gated" : "");
  });
}

TEST(ResolventRowKernels, DiagonalAlphaAndGatedMatchTheReference) {
  for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
    mixlab::testing::IsaScope scope(isa);
    for (const std::string spec : {"pow2", "order:2", "causal", "square+cache"}) {
      const auto p = Pattern::parse(spec);
      for (bool diagonal : {false, true})
        for (bool gated : {false, true}) {
          torch::manual_seed(11);
          const auto in = random_inputs(p, 2, 1, 40, 16, torch::kDouble, gated, diagonal, /*strided=*/false);
          const auto y = mixlab::resolvent_forward(in.alpha, in.beta, in.x, p, in.gate);
          const auto ref = mixlab::resolvent_reference(in.alpha, in.beta, in.x, p, in.gate);
          EXPECT_TRUE(all_close(y, ref, 1e-10, 1e-11))
              << isa << " " << spec << (diagonal ? " diagonal" : "") << (gated ? " gated" : "");
        }
    }
  }
}

// Gradients through the register kernels (forward and gathering backward): gradcheck in double
// at D = 8, one vector.
TEST(ResolventRowKernels, GradcheckInDouble) {
  for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
    mixlab::testing::IsaScope scope(isa);
    for (const std::string spec : {"pow2", "square+cache"}) {
      const auto p = Pattern::parse(spec);
      torch::manual_seed(3);
      auto in = random_inputs(p, 1, 1, 9, 8, torch::kDouble, /*gated=*/true, false, false);
      std::vector<Tensor> args = {in.alpha, in.beta, in.x, in.gate};
      for (auto& t : args) t.requires_grad_(true);
      EXPECT_TRUE(mixlab::testing::gradcheck(
          [&](const std::vector<Tensor>& a) { return mixlab::resolvent_forward(a[0], a[1], a[2], p, a[3]); }, args))
          << isa << " " << spec;
    }
  }
}

// Chunked prefill reads past rows from the state (negative source indices) and decode runs one
// row per call: both through the register kernel, both equal to one long forward.
TEST(ResolventRowKernels, PrefillAndStepEqualOneLongForward) {
  for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
    mixlab::testing::IsaScope scope(isa);
    for (const std::string spec : {"pow2", "pow2+cache", "square", "order:3"}) {
      const auto p = Pattern::parse(spec);
      for (bool gated : {false, true}) {
        torch::manual_seed(29);
        const int64_t B = 2, H = 2, D = 32, T = 75;
        const auto in = random_inputs(p, B, H, T, D, torch::kFloat, gated, false, false);
        const auto y_full = mixlab::resolvent_forward(in.alpha, in.beta, in.x, p, in.gate);
        const std::string what = isa + " " + spec + (gated ? " gated" : "");
        // Prefill in chunks of 20, 1, 54 rows.
        ResolventState st(p, B, H, D, torch::kFloat, {true, p.recurrent(), {}});
        int64_t t0 = 0;
        for (int64_t c : {20, 1, 54}) {
          const int64_t W = mixlab::pattern_index(p, t0 + c)->W;
          auto a = in.alpha.narrow(2, t0, c).narrow(3, 0, W + 1);
          auto b = in.beta.narrow(2, t0, c).narrow(3, 0, p.recurrent() ? W : 0);
          auto x = in.x.narrow(2, t0, c);
          auto g = gated ? in.gate.narrow(2, t0, c) : Tensor();
          auto y = mixlab::resolvent_forward(a, b, x, p, g, &st);
          ASSERT_TRUE(all_close(y, y_full.narrow(2, t0, c), 1e-5, 1e-5)) << what << " prefill t0=" << t0;
          st.append(x, p.recurrent() ? y : Tensor());
          t0 += c;
        }
        // Decode row by row from the start.
        ResolventState ds(p, B, H, D, torch::kFloat, {true, p.recurrent(), {}});
        for (int64_t t = 0; t < T; ++t) {
          const int64_t c = p.row_size(t);  // |P(t)|
          auto a = in.alpha.select(2, t).narrow(2, 0, c + 1);
          auto b = in.beta.select(2, t).narrow(2, 0, p.recurrent() ? c : 0);
          auto g = gated ? in.gate.select(2, t) : Tensor();
          auto y = mixlab::resolvent_step(ds, a, b, in.x.select(2, t), g);
          ASSERT_TRUE(all_close(y, y_full.select(2, t), 1e-5, 1e-5)) << what << " step t=" << t;
        }
      }
    }
  }
}

// The backward in the register layout gathers where the plain loops scatter: every gradient
// (alpha, beta, x, gate) equal to theirs to rounding, on every instruction-set build this CPU
// runs, float and double, column chunks of 1, 2, 3 (partial) and 4+ vectors, every pattern kind
// (offset rows; the transposed (T,W) table of +cache), diagonal A and B = 0, gated or not, T on
// both sides of 64, and a chunk that continues a state (rows reading past rows, which receive
// no gradient).
namespace {

std::vector<Tensor> op_grads(const Inputs& in, const Pattern& p, const Tensor& upstream, bool plain_loops,
                             const ResolventState* past = nullptr) {
  std::optional<mixlab::ResolventPlainLoopsGuard> guard;
  if (plain_loops) guard.emplace();
  std::vector<Tensor> args = {in.alpha.detach().clone(), in.beta.detach().clone(), in.x.detach().clone()};
  if (in.gate.defined()) args.push_back(in.gate.detach().clone());
  for (auto& t : args) t.requires_grad_(true);
  const auto y = mixlab::resolvent_forward(args[0], args[1], args[2], p, in.gate.defined() ? args[3] : Tensor(), past);
  (y * upstream).sum().backward();
  std::vector<Tensor> out;
  for (auto& t : args) out.push_back(t.grad().defined() ? t.grad() : torch::zeros_like(t));
  return out;
}

void expect_same_grads(const std::vector<Tensor>& fast, const std::vector<Tensor>& plain, double tol,
                       const std::string& what) {
  const char* names[] = {"alpha", "beta", "x", "gate"};
  ASSERT_EQ(fast.size(), plain.size()) << what;
  for (size_t k = 0; k < fast.size(); ++k)
    EXPECT_TRUE(all_close(fast[k], plain[k], tol, tol)) << what << " d" << names[k];
}

}  // namespace

TEST(ResolventRowKernels, BackwardEqualsPlainLoopsEveryIsaDtypeAndWidth) {
  for_each_grid_case({1, 2, 6, 4, 8, 12, 20}, [](const GridCase& c) {
    const bool gated = (c.units / 2 + c.T) % 2 == 0, diagonal = c.units % 8 == 0 && c.T == 5;
    torch::manual_seed(7 + c.units * 5 + c.T);
    const auto in = random_inputs(c.pattern, 1, 2, c.T, c.D, c.dtype, gated, diagonal, /*strided=*/c.units == 12);
    const auto upstream = torch::randn({1, 2, c.T, c.D}, torch::TensorOptions().dtype(c.dtype));
    // Float sums of up to 130 terms in another order: relative 1e-4.
    expect_same_grads(op_grads(in, c.pattern, upstream, false), op_grads(in, c.pattern, upstream, true),
                      c.dtype == torch::kFloat ? 1e-4 : 1e-11,
                      c.what + (gated ? " gated" : "") + (diagonal ? " diagonal" : ""));
  });
}

TEST(ResolventRowKernels, BackwardOfAChunkThatContinuesAState) {
  for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
    mixlab::testing::IsaScope scope(isa);
    for (const std::string spec : {"pow2", "pow2+cache", "square", "order:3"}) {
      const auto p = Pattern::parse(spec);
      for (bool gated : {false, true}) {
        torch::manual_seed(31);
        const int64_t B = 1, H = 2, D = 16, T0 = 37, T = 50;
        const auto in = random_inputs(p, B, H, T0 + T, D, torch::kDouble, gated, false, false);
        ResolventState st(p, B, H, D, torch::kDouble, {true, p.recurrent(), {}});
        const int64_t W0 = mixlab::pattern_index(p, T0)->W;
        auto y0 = mixlab::resolvent_forward(in.alpha.narrow(2, 0, T0).narrow(3, 0, W0 + 1),
                                            in.beta.narrow(2, 0, T0).narrow(3, 0, p.recurrent() ? W0 : 0),
                                            in.x.narrow(2, 0, T0), p, gated ? in.gate.narrow(2, 0, T0) : Tensor());
        st.append(in.x.narrow(2, 0, T0), p.recurrent() ? y0 : Tensor());
        const int64_t W = mixlab::pattern_index(p, T0 + T)->W;
        Inputs chunk{in.alpha.narrow(2, T0, T).narrow(3, 0, W + 1).contiguous(),
                     in.beta.narrow(2, T0, T).narrow(3, 0, p.recurrent() ? W : 0).contiguous(),
                     in.x.narrow(2, T0, T).contiguous(), gated ? in.gate.narrow(2, T0, T).contiguous() : Tensor()};
        const auto upstream = torch::randn({B, H, T, D}, torch::kDouble);
        expect_same_grads(op_grads(chunk, p, upstream, false, &st), op_grads(chunk, p, upstream, true, &st), 1e-11,
                          isa + " " + spec + (gated ? " gated" : ""));
      }
    }
  }
}

// Head dims that are not a whole number of 16-byte vectors keep the plain loops: same results.
TEST(ResolventRowKernels, OtherHeadDimsTakeThePlainLoops) {
  const auto p = Pattern::parse("pow2");
  for (int64_t D : {1, 6, 7, 18, 33}) {
    ASSERT_FALSE(mixlab::detail::resolvent_rows::supports<float>(D)) << "D=" << D;
    torch::manual_seed(D);
    const auto in = random_inputs(p, 1, 2, 70, D, torch::kFloat, /*gated=*/false, false, false);
    const auto y = mixlab::resolvent_forward(in.alpha, in.beta, in.x, p, in.gate);
    EXPECT_TRUE(torch::equal(y, plain(in, p))) << "D=" << D;
  }
}

}  // namespace resolvent_row_kernels_test
