// The fused affine kernels (mixlab/scan/affine.h): the forward without gradients equals the plain
// loop reference and the LibTorch composition, and the training forward + fused backward equal the
// composition's autograd, for every instruction set this CPU has, across lengths (short and long,
// 1 to 2000 tokens), widths that leave vector tails, gate kinds and strengths; which path runs
// is checked; the thread count does not change the result. (The double-precision gradchecks and
// reference comparisons of tests/scan/affine_kernel_test.cpp run through the fused path too.)
//
// Under test: src/scan/affine_fused.cpp / affine_fused.h (dispatch, the training forward, the two
// autograd functions), src/scan/affine_fused_kernels.h and .inc through its three builds,
// affine_fused_kernels_avx512.cpp, affine_fused_kernels_avx2.cpp and affine_fused_kernels_generic.cpp
// (every set this CPU has: IsaScope, tests/support/isa_scope.h), each against diag_decay_reference /
// delta_rule_reference and against the LibTorch composition (ComposedAffineGuard).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "../../src/scan/affine_fused_kernels.h"
#include "mixlab/core/error.h"
#include "mixlab/scan/affine.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/isa_scope.h"

namespace mixlab {
namespace affine_fused_test {
namespace {

using testing::all_close;

using testing::IsaScope;

struct Case {
  at::Tensor q, k, v, gate, beta, init;
};

// q, k, v non-contiguous (made (B,T,H,D), then transposed). kind 0: no decay, 1: a scalar gate
// expanded over Dk, 2: per key.
Case diag_case(int64_t T, int64_t Dk, int64_t Dv, int kind, double strength, at::ScalarType dtype, uint64_t seed) {
  torch::manual_seed(seed);
  const int64_t B = 2, H = 3;
  auto o = torch::TensorOptions().dtype(dtype);
  Case c;
  c.q = torch::randn({B, T, H, Dk}, o).transpose(1, 2);
  c.k = (torch::randn({B, T, H, Dk}, o) / std::sqrt(double(Dk))).transpose(1, 2);
  c.v = torch::randn({B, T, H, Dv}, o).transpose(1, 2);
  if (kind == 0) {
    c.gate = torch::zeros({B, H, T, Dk}, o);
  } else if (kind == 1) {
    c.gate = (-strength * torch::rand({B, H, T, 1}, o)).expand({B, H, T, Dk});
  } else {
    c.gate = -strength * torch::rand({B, H, T, Dk}, o);
  }
  c.init = torch::randn({B, H, Dk, Dv}, o);
  return c;
}

Case delta_case(int64_t T, int64_t Dk, int64_t Dv, bool gated, double strength, at::ScalarType dtype, uint64_t seed) {
  torch::manual_seed(seed);
  const int64_t B = 2, H = 3;
  auto o = torch::TensorOptions().dtype(dtype);
  Case c;
  c.q = torch::randn({B, T, H, Dk}, o).transpose(1, 2);
  auto k = torch::randn({B, T, H, Dk}, o);
  c.k = (k / (k.norm(2, -1, true) + 1e-6)).transpose(1, 2);
  c.v = torch::randn({B, T, H, Dv}, o).transpose(1, 2);
  c.beta = 2 * torch::rand({B, H, T}, o);
  if (gated) c.gate = -strength * torch::rand({B, H, T}, o);
  c.init = torch::randn({B, H, Dk, Dv}, o);
  return c;
}

// Tolerances: against the double reference, float rounding of a T-token recurrence.
double tol_for(at::ScalarType dtype) { return dtype == torch::kFloat64 ? 1e-10 : 2e-4; }

void expect_result(const AffineResult& got, const AffineResult& want, double tol, const std::string& what) {
  EXPECT_TRUE(all_close(got.out.to(torch::kFloat64), want.out.to(torch::kFloat64), tol, tol)) << what << " out";
  EXPECT_TRUE(all_close(got.final_state.to(torch::kFloat64), want.final_state.to(torch::kFloat64), tol, tol))
      << what << " final state";
}

// Widths: Dv 83 = 64 + 16 + 3 leaves a full block, a one-vector block and a scalar tail with
// 16 floats a vector; Dv 1 is only the tail; Dk 1 makes every gate a scalar gate; Dv 28 = 16 + 8
// + 4 floats takes a native, a half and a quarter vector under AVX-512, Dv 8 (MAD's head dim) one
// half vector.
TEST(FusedAffine, DiagDecayEqualsReferenceAndCompositionOnEveryIsa) {
  at::NoGradGuard no_grad;
  uint64_t seed = 0;
  for (const auto& isa : testing::isas_this_cpu_runs()) {
    IsaScope scope(isa);
    for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
      for (int64_t T : {0, 1, 19, 150}) {
        for (auto [Dk, Dv] : std::vector<std::pair<int64_t, int64_t>>{{5, 83}, {1, 19}, {16, 1}, {8, 28}, {12, 8}}) {
          for (int kind : {0, 1, 2}) {
            for (double strength : {0.05, 20.0}) {
              if (kind == 0 && strength > 1) continue;
              const std::string what = isa + " " + std::string(c10::toString(dtype)) + " T=" + std::to_string(T) +
                                       " Dk=" + std::to_string(Dk) + " Dv=" + std::to_string(Dv) +
                                       " kind=" + std::to_string(kind) + " strength=" + std::to_string(strength);
              const auto c = diag_case(T, Dk, Dv, kind, strength, dtype, ++seed);
              const auto d = [](const at::Tensor& t) { return t.to(torch::kFloat64); };
              const auto ref = diag_decay_reference(d(c.q), d(c.k), d(c.v), d(c.gate), d(c.init));
              const auto chunked = diag_decay_chunked(c.q, c.k, c.v, c.gate, c.init, 16);
              const auto recurrent = diag_decay_recurrent(c.q, c.k, c.v, c.gate, c.init);
              expect_result(chunked, ref, tol_for(dtype), what + " chunked");
              expect_result(recurrent, ref, tol_for(dtype), what + " recurrent");
              ASSERT_EQ(chunked.out.scalar_type(), dtype);
              ASSERT_EQ(chunked.final_state.scalar_type(), dtype);
              ComposedAffineGuard composed;
              expect_result(chunked, diag_decay_chunked(c.q, c.k, c.v, c.gate, c.init, 16), tol_for(dtype),
                            what + " vs composition");
            }
          }
        }
      }
    }
  }
}

TEST(FusedAffine, DeltaRuleEqualsReferenceAndCompositionOnEveryIsa) {
  at::NoGradGuard no_grad;
  uint64_t seed = 100;
  for (const auto& isa : testing::isas_this_cpu_runs()) {
    IsaScope scope(isa);
    for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
      for (int64_t T : {0, 1, 19, 150}) {
        for (auto [Dk, Dv] : std::vector<std::pair<int64_t, int64_t>>{{5, 83}, {1, 19}, {16, 1}, {8, 28}, {12, 8}}) {
          for (bool gated : {false, true}) {
            const std::string what = isa + " " + std::string(c10::toString(dtype)) + " T=" + std::to_string(T) +
                                     " Dk=" + std::to_string(Dk) + " Dv=" + std::to_string(Dv) +
                                     (gated ? " gated" : " plain");
            const auto c = delta_case(T, Dk, Dv, gated, 0.5, dtype, ++seed);
            const auto d = [](const at::Tensor& t) { return t.defined() ? t.to(torch::kFloat64) : t; };
            const auto ref = delta_rule_reference(d(c.q), d(c.k), d(c.v), d(c.beta), d(c.gate), d(c.init));
            const auto chunked = delta_rule_chunked(c.q, c.k, c.v, c.beta, c.gate, c.init, 16);
            const auto recurrent = delta_rule_recurrent(c.q, c.k, c.v, c.beta, c.gate, c.init);
            expect_result(chunked, ref, tol_for(dtype), what + " chunked");
            expect_result(recurrent, ref, tol_for(dtype), what + " recurrent");
            ComposedAffineGuard composed;
            expect_result(chunked, delta_rule_chunked(c.q, c.k, c.v, c.beta, c.gate, c.init, 16), tol_for(dtype),
                          what + " vs composition");
          }
        }
      }
    }
  }
}

// Which path ran is observable through MIXLAB_CPU_ISA: only the fused path reads it, so a bad
// value makes exactly the fused calls fail.
TEST(FusedAffine, TakenExactlyWhenNoGradientIsNeeded) {
  const auto c = diag_case(9, 4, 4, 2, 1.0, torch::kFloat32, 7);
  const auto dc = delta_case(9, 4, 4, true, 1.0, torch::kFloat32, 8);
  IsaScope bad("bogus");
  {
    at::NoGradGuard no_grad;
    expect_error([&] { diag_decay_chunked(c.q, c.k, c.v, c.gate, c.init); }, "MIXLAB_CPU_ISA must be generic");
    expect_error([&] { diag_decay_recurrent(c.q, c.k, c.v, c.gate); }, "MIXLAB_CPU_ISA must be generic");
    expect_error([&] { delta_rule_chunked(dc.q, dc.k, dc.v, dc.beta, dc.gate); }, "MIXLAB_CPU_ISA must be generic");
    expect_error([&] { delta_rule_recurrent(dc.q, dc.k, dc.v, dc.beta); }, "MIXLAB_CPU_ISA must be generic");
    ComposedAffineGuard composed;
    EXPECT_NO_THROW(diag_decay_chunked(c.q, c.k, c.v, c.gate, c.init));
    EXPECT_NO_THROW(delta_rule_recurrent(dc.q, dc.k, dc.v, dc.beta));
  }
  // Grad mode on but nothing requires grad: fused.
  expect_error([&] { diag_decay_chunked(c.q, c.k, c.v, c.gate); }, "MIXLAB_CPU_ISA must be generic");
  // With an input that requires grad (here only the initial state, or beta) both kernels take
  // their fused forward and backward; under the guard, the composition.
  auto init = c.init.clone().requires_grad_(true);
  auto beta = dc.beta.clone().requires_grad_(true);
  expect_error([&] { diag_decay_recurrent(c.q, c.k, c.v, c.gate, init); }, "MIXLAB_CPU_ISA must be generic");
  expect_error([&] { delta_rule_chunked(dc.q, dc.k, dc.v, beta, dc.gate); }, "MIXLAB_CPU_ISA must be generic");
  ComposedAffineGuard composed;
  AffineResult r;
  EXPECT_NO_THROW(r = diag_decay_chunked(c.q, c.k, c.v, c.gate, init));
  EXPECT_TRUE(r.out.requires_grad());
  EXPECT_NO_THROW(r = delta_rule_recurrent(dc.q, dc.k, dc.v, beta, dc.gate));
  EXPECT_TRUE(r.out.requires_grad());
}

// d loss / d leaves, zeros for a leaf the loss does not reach (an empty key or value width leaves
// the composition's graph without some of them).
std::vector<at::Tensor> leaf_grads(const at::Tensor& loss, const std::vector<at::Tensor>& leaves) {
  auto grads = torch::autograd::grad({loss}, leaves, {}, c10::nullopt, false, /*allow_unused=*/true);
  for (size_t i = 0; i < grads.size(); ++i)
    if (!grads[i].defined()) grads[i] = torch::zeros_like(leaves[i]);
  return grads;
}

// Output, final state and the gradients of <out, wo> + <final, wf> w.r.t. q, k, v, the gate
// leaf ((B,H,T,1) expanded for a scalar gate) and the initial state (when given).
std::vector<at::Tensor> diag_grads(const Case& c, bool with_init, int64_t chunk) {
  auto leaf = [](const at::Tensor& t) { return t.detach().clone().requires_grad_(true); };
  auto q = leaf(c.q), k = leaf(c.k), v = leaf(c.v), init = leaf(c.init);
  const bool scalar = c.gate.stride(3) == 0;
  auto g_leaf = leaf(scalar ? c.gate.narrow(3, 0, 1) : c.gate);
  auto g = scalar ? g_leaf.expand_as(c.gate) : g_leaf;
  auto r = diag_decay_chunked(q, k, v, g, with_init ? init : at::Tensor(), chunk);
  torch::manual_seed(5);
  auto loss = (r.out * torch::randn_like(r.out)).sum() + (r.final_state * torch::randn_like(r.final_state)).sum();
  std::vector<at::Tensor> leaves{q, k, v, g_leaf};
  if (with_init) leaves.push_back(init);
  auto grads = leaf_grads(loss, leaves);
  grads.insert(grads.begin(), {r.out.detach(), r.final_state.detach()});
  return grads;
}

// The fused backward against the composition's autograd, in float on every instruction set:
// lengths around 32 tokens, lane tails (Dk 83 = 64 + 16 + 3), value widths 1, 5, 8, 19 and 40,
// gate kinds. dv sums its rows' lanes a vector's lanes of rows at a time: Dv 19 and 40 at Dk 16
// and 32 give whole groups and a tail at 8 and 16 lanes. The delta rule's backward keeps a block
// of rows of D^T in registers when Dk is 1, 2, 4 or 8 whole vectors: Dk 16, 32, 64 and 128 reach
// each of those on some instruction set, with value widths that leave whole blocks and a tail.
// Key widths that are not whole native vectors take half and quarter vectors (AVX-512 floats: Dk 8
// one half vector, which also holds dv's row sums, as does Dk 4 a quarter one; Dk 12 a half and
// a quarter, dv's sums in the half one's lanes; Dk 28 and 24 a native vector first, whose lanes
// hold the sums, the narrower ones summed straight into dv; the delta rule's walk 1 keeps Dk 8
// and 4 in registers, Dk 12 and 24 row by row).
TEST(FusedAffine, DiagDecayBackwardEqualsCompositionOnEveryIsa) {
  uint64_t seed = 300;
  for (const auto& isa : testing::isas_this_cpu_runs()) {
    IsaScope scope(isa);
    for (int64_t T : {1, 31, 32, 33, 100}) {
      for (auto [Dk, Dv] : std::vector<std::pair<int64_t, int64_t>>{
               {83, 5}, {1, 19}, {16, 1}, {9, 8}, {16, 19}, {32, 40}, {8, 8}, {4, 3}, {12, 28}, {28, 12}, {24, 5}}) {
        for (int kind : {0, 1, 2}) {
          for (bool with_init : {false, true}) {
            const std::string what = isa + " T=" + std::to_string(T) + " Dk=" + std::to_string(Dk) +
                                     " Dv=" + std::to_string(Dv) + " kind=" + std::to_string(kind) +
                                     (with_init ? " init" : "");
            const auto c = diag_case(T, Dk, Dv, kind, kind == 0 ? 0.0 : 2.0, torch::kFloat32, ++seed);
            const auto fused = diag_grads(c, with_init, 16);
            std::vector<at::Tensor> composed;
            {
              ComposedAffineGuard guard;
              composed = diag_grads(c, with_init, 16);
            }
            ASSERT_EQ(fused.size(), composed.size());
            for (size_t i = 0; i < fused.size(); ++i)
              EXPECT_TRUE(all_close(fused[i], composed[i], 2e-4, 2e-4)) << what << " tensor " << i;
          }
        }
      }
    }
  }
}

// grads() on the fused path, then under a ComposedAffineGuard.
template <typename F>
std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> fused_and_composed(F&& grads) {
  auto fused = grads();
  ComposedAffineGuard guard;
  return {fused, grads()};
}

// Each tensor within 1e-3 (float) or 1e-9 (double) of its largest entry (at least 1) of want's.
void expect_within_rounding(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want,
                            at::ScalarType dtype, const std::string& what) {
  const double tol = dtype == torch::kFloat32 ? 1e-3 : 1e-9;
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double scale = std::max(1.0, want[i].abs().max().item<double>());
    EXPECT_LT((got[i] - want[i]).abs().max().item<double>() / scale, tol) << what << " tensor " << i;
  }
}

// The fused backward takes the gate's gradient as a running sum over the tokens after it (q ⊙ dq
// - k ⊙ dk, affine_fused_kernels.inc) instead of per-token state products: over a long sequence
// it stays within rounding of the composition's autograd (float: 1e-3 of each tensor's largest
// entry; double: 1e-9), for both gate kinds, weak and strong decay, with and without an initial
// state.
TEST(FusedAffine, DiagDecayGateGradientOverALongSequenceStaysWithinRounding) {
  uint64_t seed = 400;
  for (const auto& isa : testing::isas_this_cpu_runs()) {
    IsaScope scope(isa);
    for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
      for (int kind : {1, 2}) {
        for (double strength : {0.01, 2.0}) {
          for (bool with_init : {false, true}) {
            const std::string what = isa + " " + std::string(c10::toString(dtype)) + " kind=" + std::to_string(kind) +
                                     " strength=" + std::to_string(strength) + (with_init ? " init" : "");
            const auto c = diag_case(2000, 16, 8, kind, strength, dtype, ++seed);
            const auto [fused, want] = fused_and_composed([&] { return diag_grads(c, with_init, 16); });
            // out, final state, dq, dk, dv, dg (index 5), dS_{-1}.
            expect_within_rounding(fused, want, dtype, what);
          }
        }
      }
    }
  }
}

// The diagonal decay's training forward saves the state before every chunk of tokens and its
// backward runs chunk by chunk, last first (affine_fused_kernels.h): 256 tokens at the usual 64 x 64
// head in float, 128 in double, fewer for wide heads, never under 16. At Dk = Dv = 64 over 2 chunks
// and a short third one, every gradient stays within rounding of the composition's autograd, on
// every instruction set, for both gate kinds, with and without an initial state. (A backward that
// restarts a chunk from its neighbour's checkpoint fails this test and the long-sequence one.)
TEST(FusedAffine, DiagDecayBackwardOverSeveralChunksAtAFullHeadStaysWithinRounding) {
  namespace f = detail::affine_fused;
  EXPECT_EQ(f::checkpoint_every(64, 64, 4), 256);
  EXPECT_EQ(f::checkpoint_every(64, 64, 8), 128);
  EXPECT_EQ(f::checkpoint_every(16, 8, 4), 256);
  EXPECT_EQ(f::checkpoint_every(1024, 1024, 4), 16);
  EXPECT_EQ(f::checkpoint_count(0, 256), 0);
  EXPECT_EQ(f::checkpoint_count(513, 256), 3);
  uint64_t seed = 450;
  for (const auto& isa : testing::isas_this_cpu_runs()) {
    IsaScope scope(isa);
    for (int kind : {1, 2}) {
      for (bool with_init : {false, true}) {
        const std::string what = isa + " kind=" + std::to_string(kind) + (with_init ? " init" : "");
        const auto c = diag_case(2 * 256 + 37, 64, 64, kind, 0.5, torch::kFloat32, ++seed);
        const auto [fused, want] = fused_and_composed([&] { return diag_grads(c, with_init, 64); });
        expect_within_rounding(fused, want, torch::kFloat32, what);
      }
    }
  }
}

// As diag_grads for kernel 2: w.r.t. q, k, v, beta, log_alpha (gated) and the initial state.
std::vector<at::Tensor> delta_grads(const Case& c, bool with_init, int64_t chunk) {
  auto leaf = [](const at::Tensor& t) { return t.detach().clone().requires_grad_(true); };
  auto q = leaf(c.q), k = leaf(c.k), v = leaf(c.v), beta = leaf(c.beta), init = leaf(c.init);
  std::vector<at::Tensor> leaves{q, k, v, beta};
  at::Tensor log_alpha;
  if (c.gate.defined()) {
    log_alpha = leaf(c.gate);
    leaves.push_back(log_alpha);
  }
  if (with_init) leaves.push_back(init);
  auto r = delta_rule_chunked(q, k, v, beta, log_alpha, with_init ? init : at::Tensor(), chunk);
  torch::manual_seed(6);
  auto loss = (r.out * torch::randn_like(r.out)).sum() + (r.final_state * torch::randn_like(r.final_state)).sum();
  auto grads = leaf_grads(loss, leaves);
  grads.insert(grads.begin(), {r.out.detach(), r.final_state.detach()});
  return grads;
}

TEST(FusedAffine, DeltaRuleBackwardEqualsCompositionOnEveryIsa) {
  uint64_t seed = 500;
  for (const auto& isa : testing::isas_this_cpu_runs()) {
    IsaScope scope(isa);
    for (int64_t T : {1, 31, 32, 33, 100}) {
      for (auto [Dk, Dv] : std::vector<std::pair<int64_t, int64_t>>{
               {83, 5}, {1, 19}, {16, 1}, {9, 8}, {32, 9}, {64, 6}, {128, 3}, {8, 8}, {4, 6}, {12, 5}, {24, 7}}) {
        for (bool gated : {false, true}) {
          for (bool with_init : {false, true}) {
            const std::string what = isa + " T=" + std::to_string(T) + " Dk=" + std::to_string(Dk) +
                                     " Dv=" + std::to_string(Dv) + (gated ? " gated" : " plain") +
                                     (with_init ? " init" : "");
            const auto c = delta_case(T, Dk, Dv, gated, 0.5, torch::kFloat32, ++seed);
            const auto fused = delta_grads(c, with_init, 16);
            std::vector<at::Tensor> composed;
            {
              ComposedAffineGuard guard;
              composed = delta_grads(c, with_init, 16);
            }
            ASSERT_EQ(fused.size(), composed.size());
            for (size_t i = 0; i < fused.size(); ++i)
              EXPECT_TRUE(all_close(fused[i], composed[i], 5e-4, 5e-4)) << what << " tensor " << i;
          }
        }
      }
    }
  }
}

// The delta rule's fused backward takes dlog_alpha from a running inner product <D_t, S_t>
// (affine_fused_kernels.inc) and dq and part of dk from chunk products of its checkpoints: over a
// long sequence (62 checkpoints, a short last chunk) every gradient stays within rounding of the
// composition's autograd (float: 1e-3 of each tensor's largest entry; double: 1e-9), for weak and
// strong decay, with and without an initial state.
// The narrower-vector tiers in double (AVX-512: Dk 4 a half vector and 2 a quarter one; AVX2: Dk 2
// a half one, whose lanes also hold dv's row sums; Dk 6 a half or a 16-byte vector and a tail),
// both kernels against the composition's autograd on every instruction set. An empty key or value
// width is refused by both paths with the argument named (the delta rule's walk 1 once took a
// whole vector of an empty row).
TEST(FusedAffine, NarrowerVectorsInDoubleEqualCompositionAndEmptyWidthsAreRefused) {
  uint64_t seed = 700;
  for (const auto& isa : testing::isas_this_cpu_runs()) {
    IsaScope scope(isa);
    for (int64_t T : {1, 33}) {
      for (auto [Dk, Dv] : std::vector<std::pair<int64_t, int64_t>>{{2, 3}, {4, 5}, {6, 4}, {3, 2}}) {
        const std::string what =
            isa + " T=" + std::to_string(T) + " Dk=" + std::to_string(Dk) + " Dv=" + std::to_string(Dv);
        for (int kind : {0, 1, 2}) {
          const auto c = diag_case(T, Dk, Dv, kind, kind == 0 ? 0.0 : 2.0, torch::kFloat64, ++seed);
          const auto [fused, want] = fused_and_composed([&] { return diag_grads(c, true, 16); });
          ASSERT_EQ(fused.size(), want.size()) << what;
          for (size_t i = 0; i < fused.size(); ++i)
            EXPECT_TRUE(all_close(fused[i], want[i], 1e-10, 1e-10)) << what << " diag kind=" << kind << " tensor " << i;
        }
        for (bool gated : {false, true}) {
          const auto c = delta_case(T, Dk, Dv, gated, 0.5, torch::kFloat64, ++seed);
          const auto [fused, want] = fused_and_composed([&] { return delta_grads(c, true, 16); });
          ASSERT_EQ(fused.size(), want.size()) << what;
          for (size_t i = 0; i < fused.size(); ++i)
            EXPECT_TRUE(all_close(fused[i], want[i], 1e-10, 1e-10))
                << what << " delta" << (gated ? " gated" : "") << " tensor " << i;
        }
      }
    }
  }
  for (bool composed : {false, true}) {
    std::optional<ComposedAffineGuard> guard;
    if (composed) guard.emplace();
    for (auto [Dk, Dv] : std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {5, 0}}) {
      const auto c = diag_case(3, Dk, Dv, 2, 1.0, torch::kFloat32, ++seed);
      const auto dc = delta_case(3, Dk, Dv, true, 0.5, torch::kFloat32, ++seed);
      expect_error([&] { diag_decay_chunked(c.q, c.k, c.v, c.gate, c.init); }, {"Dk > 0", "Dv > 0"});
      expect_error([&] { delta_rule_chunked(dc.q, dc.k, dc.v, dc.beta, dc.gate, dc.init); }, {"Dk > 0", "Dv > 0"});
    }
  }
}

TEST(FusedAffine, DeltaRuleGradientsOverALongSequenceStayWithinRounding) {
  uint64_t seed = 600;
  for (const auto& isa : testing::isas_this_cpu_runs()) {
    IsaScope scope(isa);
    for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
      for (double strength : {0.01, 2.0}) {
        for (bool with_init : {false, true}) {
          const std::string what = isa + " " + std::string(c10::toString(dtype)) +
                                   " strength=" + std::to_string(strength) + (with_init ? " init" : "");
          const auto c = delta_case(1990, 16, 8, true, strength, dtype, ++seed);
          const auto [fused, want] = fused_and_composed([&] { return delta_grads(c, with_init, 16); });
          expect_within_rounding(fused, want, dtype, what);
        }
      }
    }
  }
}

// A decay of e^-1e30 (the range check's floor) closes the state: the gradients equal those of a
// sequence cut there, with the state before the cut unable to reach anything after it.
TEST(FusedAffine, DeltaRuleBackwardWithAVanishingDecay) {
  auto c = delta_case(70, 8, 8, true, 0.5, torch::kFloat64, 45);
  c.gate.select(2, 40).fill_(-1e30);
  const auto fused = delta_grads(c, true, 16);
  // Against the composition with the same cut as a decay of exactly zero in its state: the
  // recurrent reference with alpha_40 = 0 (log alpha -inf is outside the range check, so build
  // the same sequence from two calls: tokens 0..39, then 40..69 from a zero state).
  auto leaf = [](const at::Tensor& t) { return t.detach().clone().requires_grad_(true); };
  auto q = leaf(c.q), k = leaf(c.k), v = leaf(c.v), beta = leaf(c.beta), la = leaf(c.gate), init = leaf(c.init);
  std::vector<at::Tensor> want;
  {
    ComposedAffineGuard guard;
    auto part = [](const at::Tensor& t, int64_t a, int64_t n) { return t.narrow(2, a, n); };
    auto first =
        delta_rule_recurrent(part(q, 0, 40), part(k, 0, 40), part(v, 0, 40), part(beta, 0, 40), part(la, 0, 40), init);
    auto zero = torch::zeros_like(c.init);
    // Token 40 with alpha = 0 starts from a zero state; its own log alpha gets no gradient.
    auto second = delta_rule_recurrent(part(q, 40, 30), part(k, 40, 30), part(v, 40, 30), part(beta, 40, 30),
                                       torch::cat({torch::zeros_like(part(la, 40, 1)), part(la, 41, 29)}, 2), zero);
    auto out = torch::cat({first.out, second.out}, 2);
    torch::manual_seed(6);
    auto loss =
        (out * torch::randn_like(out)).sum() + (second.final_state * torch::randn_like(second.final_state)).sum();
    want = torch::autograd::grad({loss}, {q, k, v, beta, la, init});
    want.insert(want.begin(), {out.detach(), second.final_state.detach()});
  }
  ASSERT_EQ(fused.size(), want.size());
  for (size_t i = 0; i < fused.size(); ++i) EXPECT_TRUE(all_close(fused[i], want[i], 1e-9, 1e-9)) << "tensor " << i;
}

// A loss on the final state alone (no gradient reaches `out`) and one on `out` alone.
TEST(FusedAffine, DiagDecayBackwardWithOneOutputUnused) {
  const auto c = diag_case(70, 8, 8, 2, 1.0, torch::kFloat64, 41);
  for (int which : {0, 1}) {
    std::vector<at::Tensor> grads[2];
    for (int composed : {0, 1}) {
      std::optional<ComposedAffineGuard> guard;
      if (composed) guard.emplace();
      // (k and g: the final state does not depend on q)
      auto k = c.k.detach().clone().requires_grad_(true), g = c.gate.detach().clone().requires_grad_(true);
      auto r = diag_decay_chunked(c.q, k, c.v, g, c.init);
      auto loss = which == 0 ? r.final_state.pow(2).sum() : r.out.pow(2).sum();
      grads[composed] = torch::autograd::grad({loss}, {k, g});
    }
    for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(all_close(grads[0][i], grads[1][i], 1e-10, 1e-10)) << which << " " << i;
  }
}

TEST(FusedAffine, DoubleBackwardIsAnError) {
  const auto c = diag_case(5, 4, 4, 2, 1.0, torch::kFloat64, 43);
  auto q = c.q.detach().clone().requires_grad_(true);
  auto r = diag_decay_chunked(q, c.k, c.v, c.gate);
  expect_error([&] { torch::autograd::grad({r.out.sum()}, {q}, {}, true, /*create_graph=*/true); },
               {"diag_decay (fused): double backward", "ComposedAffineGuard"});
  const auto dc = delta_case(5, 4, 4, true, 1.0, torch::kFloat64, 44);
  auto dq = dc.q.detach().clone().requires_grad_(true);
  r = delta_rule_recurrent(dq, dc.k, dc.v, dc.beta, dc.gate);
  expect_error([&] { torch::autograd::grad({r.out.sum()}, {dq}, {}, true, /*create_graph=*/true); },
               {"delta_rule (fused): double backward", "ComposedAffineGuard"});
}

TEST(FusedAffine, IsaNamesAreChecked) {
  {
    IsaScope bogus("sse9");
    expect_error([&] { fused_affine_isa(); }, "MIXLAB_CPU_ISA must be generic, avx2 or avx512, got 'sse9'");
  }
  IsaScope generic("generic");
  EXPECT_STREQ(fused_affine_isa(), "generic");
  if (testing::isas_this_cpu_runs().front() != "avx512") {
    IsaScope wide("avx512");
    expect_error([&] { fused_affine_isa(); }, "names an instruction set this CPU lacks");
  }
}

// One work item per (batch, head): the thread count splits them, it never changes the arithmetic.
// At one thread each item's state is updated in place in the state tensor; at two, in a buffer its
// thread allocated, copied in and out (ItemState, affine_fused.cpp): both forwards, with an initial
// state, and the training forward whose checkpoints the backward reads, on 6 items.
TEST(FusedAffine, ThreadCountDoesNotChangeTheResult) {
  const int threads = at::get_num_threads();
  auto at_threads = [&](int n, auto&& f) {
    at::set_num_threads(n);
    auto r = f();
    at::set_num_threads(threads);
    return r;
  };
  auto expect_equal = [](const std::vector<at::Tensor>& one, const std::vector<at::Tensor>& two, const char* what) {
    ASSERT_EQ(one.size(), two.size()) << what;
    for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(torch::equal(one[i], two[i])) << what << " tensor " << i;
  };
  const auto diag = diag_case(200, 32, 48, 2, 0.3, torch::kFloat32, 11);
  const auto delta = delta_case(200, 32, 48, true, 0.3, torch::kFloat32, 12);
  auto diag_forward = [&] {
    at::NoGradGuard no_grad;
    const auto r = diag_decay_chunked(diag.q, diag.k, diag.v, diag.gate, diag.init);
    return std::vector<at::Tensor>{r.out, r.final_state};
  };
  auto delta_forward = [&] {
    at::NoGradGuard no_grad;
    const auto r = delta_rule_chunked(delta.q, delta.k, delta.v, delta.beta, delta.gate, delta.init);
    return std::vector<at::Tensor>{r.out, r.final_state};
  };
  expect_equal(at_threads(1, diag_forward), at_threads(2, diag_forward), "diagonal decay");
  expect_equal(at_threads(1, delta_forward), at_threads(2, delta_forward), "delta rule");
  expect_equal(at_threads(1, [&] { return diag_grads(diag, true, 16); }),
               at_threads(2, [&] { return diag_grads(diag, true, 16); }), "diagonal decay, training");
  expect_equal(at_threads(1, [&] { return delta_grads(delta, true, 16); }),
               at_threads(2, [&] { return delta_grads(delta, true, 16); }), "delta rule, training");
}

// Prefill in two pieces through the fused path equals one call (the state carries everything).
TEST(FusedAffine, PrefillInPiecesEqualsOneCall) {
  at::NoGradGuard no_grad;
  const auto c = delta_case(120, 8, 24, true, 0.2, torch::kFloat64, 21);
  const auto whole = delta_rule_chunked(c.q, c.k, c.v, c.beta, c.gate, c.init);
  auto part = [&](const at::Tensor& t, int64_t a, int64_t n) { return t.narrow(2, a, n); };
  const auto first = delta_rule_chunked(part(c.q, 0, 50), part(c.k, 0, 50), part(c.v, 0, 50), part(c.beta, 0, 50),
                                        part(c.gate, 0, 50), c.init);
  const auto second = delta_rule_recurrent(part(c.q, 50, 70), part(c.k, 50, 70), part(c.v, 50, 70),
                                           part(c.beta, 50, 70), part(c.gate, 50, 70), first.final_state);
  EXPECT_TRUE(all_close(torch::cat({first.out, second.out}, 2), whole.out, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(second.final_state, whole.final_state, 1e-12, 1e-12));
}

}  // namespace
}  // namespace affine_fused_test
}  // namespace mixlab
