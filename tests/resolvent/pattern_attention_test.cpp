// The fused pattern_attention (RoPE + sampled scores + masked softmax in one op) against the
// composed reference rope_apply → pattern_scores → pattern_softmax: forward, the rotated
// queries/keys, both gradients, strided inputs, chunks that continue a state, a finite-difference
// gradient check in double, and the errors.
#include "mixlab/resolvent/pattern_attention.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/core/rope.h"
#include "mixlab/resolvent/pattern_scores.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/isa_scope.h"

namespace pattern_attention_test {

namespace {

using mixlab::ComposedPatternAttentionGuard;
using mixlab::Pattern;
using mixlab::pattern_attention;
using mixlab::PatternAttentionPlainLoopsGuard;
using mixlab::testing::all_close;
using torch::Tensor;

struct Case {
  std::string spec;
  int64_t T, D;
  bool diag;
  double rope_base;  // <= 0: no RoPE
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const std::string spec : {"pow2", "square+cache", "band:3", "dense", "causal", "order:1", "offsets:1,3,4"})
    for (bool diag : {true, false})
      for (double base : {10000.0, 0.0}) {
        out.push_back({spec, 37, 6, diag, base});
        out.push_back({spec, 1, 2, diag, base});
      }
  out.push_back({"pow2+cache", 79, 16, true, 500.0});
  return out;
}

// Forward, queries/keys and both gradients of the fused op equal the composed form's.
void expect_fused_equals_composed(const Case& c, torch::ScalarType dtype, double rtol, double atol) {
  const auto p = Pattern::parse(c.spec);
  const int64_t B = 2, H = 3;
  // q strided like the layer's projection view: (B,T,H,D) memory read as (B,H,T,D).
  auto q = torch::randn({B, c.T, H, c.D}, dtype).permute({0, 2, 1, 3}).requires_grad_(true);
  auto k = torch::randn({B, H, c.T, c.D}, dtype).requires_grad_(true);
  auto fused = pattern_attention(q, k, p, c.diag, c.rope_base);
  mixlab::PatternAttention composed;
  {
    ComposedPatternAttentionGuard guard;
    composed = pattern_attention(q, k, p, c.diag, c.rope_base);
  }
  const std::string what = c.spec + " T=" + std::to_string(c.T) + " D=" + std::to_string(c.D) +
                           (c.diag ? " diag" : "") + (c.rope_base > 0 ? " rope" : "");
  ASSERT_TRUE(all_close(fused.probs, composed.probs, rtol, atol)) << what;
  EXPECT_TRUE(all_close(fused.queries, composed.queries, rtol, atol)) << what;
  EXPECT_TRUE(all_close(fused.keys, composed.keys, rtol, atol)) << what;
  EXPECT_FALSE(fused.keys.requires_grad());
  auto up = torch::randn_like(fused.probs);
  auto g1 = torch::autograd::grad({(fused.probs * up).sum()}, {q, k});
  auto g2 = torch::autograd::grad({(composed.probs * up).sum()}, {q, k});
  EXPECT_TRUE(all_close(g1[0], g2[0], rtol, atol)) << what << " dq";
  EXPECT_TRUE(all_close(g1[1], g2[1], rtol, atol)) << what << " dk";
}

TEST(PatternAttention, FusedEqualsComposedDouble) {
  torch::manual_seed(41);
  for (const auto& c : cases()) expect_fused_equals_composed(c, torch::kDouble, 1e-10, 1e-12);
}

TEST(PatternAttention, FusedEqualsComposedFloat) {
  torch::manual_seed(42);
  for (const auto& c : cases()) expect_fused_equals_composed(c, torch::kFloat, 1e-4, 1e-6);
}

TEST(PatternAttention, RowsWithoutSlotsAreZeroAndFinite) {
  // Row 0 of B reads nothing: all zeros, and its gradient is finite.
  auto q = torch::randn({1, 1, 5, 4}, torch::kDouble).requires_grad_(true);
  auto k = torch::randn({1, 1, 5, 4}, torch::kDouble).requires_grad_(true);
  auto a = pattern_attention(q, k, Pattern::parse("pow2"), false, 10000.0);
  EXPECT_EQ(a.probs.select(2, 0).abs().sum().item<double>(), 0.0);
  // Valid rows sum to 1.
  EXPECT_TRUE(all_close(a.probs.narrow(2, 1, 4).sum(-1), torch::ones({1, 1, 4}, torch::kDouble), 1e-12, 1e-12));
  a.probs.pow(2).sum().backward();
  EXPECT_TRUE(torch::isfinite(q.grad()).all().item<bool>());
}

TEST(PatternAttention, Gradcheck) {
  torch::manual_seed(43);
  for (const std::string spec : {"pow2+cache", "square"}) {
    auto p = Pattern::parse(spec);
    auto q = torch::randn({1, 2, 11, 4}, torch::kDouble).requires_grad_(true);
    auto k = torch::randn({1, 2, 11, 4}, torch::kDouble).requires_grad_(true);
    for (bool diag : {true, false})
      for (double base : {100.0, 0.0}) {
        auto fn = [&](const std::vector<Tensor>& in) { return pattern_attention(in[0], in[1], p, diag, base).probs; };
        EXPECT_TRUE(mixlab::testing::gradcheck(fn, {q, k})) << spec << " diag " << diag << " base " << base;
      }
  }
}

// A chunk that continues a state reads the held (already rotated) keys and rotates its own rows
// from position t0: the same as the composed form, and the same rows as one long call.
TEST(PatternAttention, ChunkAfterStateEqualsComposedAndWhole) {
  torch::manual_seed(44);
  for (const std::string spec : {"pow2+cache", "square", "band:4"}) {
    const auto p = Pattern::parse(spec);
    const int64_t B = 2, H = 2, D = 6, T0 = 13, T1 = 9;
    auto q = torch::randn({B, H, T0 + T1, D}, torch::kDouble);
    auto k = torch::randn({B, H, T0 + T1, D}, torch::kDouble);
    auto whole = pattern_attention(q, k, p, true, 10000.0);
    mixlab::ResolventStateLayout layout;
    layout.extra_dims = {D};
    mixlab::ResolventState state(p, B, H, D, torch::kDouble, layout);
    auto first = pattern_attention(q.narrow(2, 0, T0), k.narrow(2, 0, T0), p, true, 10000.0);
    state.append(torch::zeros({B, H, T0, D}, torch::kDouble), torch::zeros({B, H, T0, D}, torch::kDouble),
                 {first.keys});
    auto qc = q.narrow(2, T0, T1).detach().requires_grad_(true);
    auto kc = k.narrow(2, T0, T1).detach().requires_grad_(true);
    auto chunk = pattern_attention(qc, kc, p, true, 10000.0, &state, 0);
    mixlab::PatternAttention composed;
    {
      ComposedPatternAttentionGuard guard;
      composed = pattern_attention(qc, kc, p, true, 10000.0, &state, 0);
    }
    EXPECT_TRUE(all_close(chunk.probs, composed.probs, 1e-10, 1e-12)) << spec;
    EXPECT_TRUE(all_close(chunk.keys, whole.keys.narrow(2, T0, T1), 1e-12, 1e-12)) << spec;
    // The chunk's slots are numbered like the whole call's rows (same pattern rows).
    const int64_t WS = chunk.probs.size(3);
    EXPECT_TRUE(all_close(chunk.probs, whole.probs.narrow(2, T0, T1).narrow(3, 0, WS), 1e-10, 1e-12)) << spec;
    auto up = torch::randn_like(chunk.probs);
    auto g1 = torch::autograd::grad({(chunk.probs * up).sum()}, {qc, kc});
    auto g2 = torch::autograd::grad({(composed.probs * up).sum()}, {qc, kc});
    EXPECT_TRUE(all_close(g1[0], g2[0], 1e-10, 1e-12)) << spec;
    EXPECT_TRUE(all_close(g1[1], g2[1], 1e-10, 1e-12)) << spec;
  }
}

// The vector loops (src/resolvent/pattern_attention_kernels.inc, head dims of whole 16-byte
// vectors; built as pattern_attention_kernels_generic.cpp, pattern_attention_kernels_avx2.cpp and
// pattern_attention_kernels_avx512.cpp, each run below through MIXLAB_CPU_ISA) against the plain
// loops, for every instruction-set build this CPU runs: forward, the
// rotated rows and both gradients, float and double, head dims of 1, 2 and 3 native vectors (the
// backward's column chunks) and of narrower row vectors (D = 8 floats: a ymm, its halves an xmm
// under AVX-512; D = 4, 12: xmm rows with the plain rotation; D = 20: five xmm rows, two column
// chunks; D = 24: three ymm rows on AVX-512), patterns with and without offsets (+cache reads a (T,W) index), rows with
// more slots than one native vector (dense, T 70: the scores' fold tree in several groups), with and without the
// diagonal and RoPE, strided q, and a chunk that continues a state (keys from the past).
TEST(PatternAttention, VectorLoopsEqualPlainLoopsEveryIsa) {
  torch::manual_seed(45);
  EXPECT_FALSE(mixlab::pattern_attention_runs_vector_loops(6, torch::kFloat));  // 24 bytes: the plain loops
  EXPECT_FALSE(mixlab::pattern_attention_runs_vector_loops(3, torch::kDouble));
  EXPECT_FALSE(mixlab::pattern_attention_runs_vector_loops(16, torch::kBFloat16));
  for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
    mixlab::testing::IsaScope scope(isa);
    for (auto dtype : {torch::kFloat, torch::kDouble}) {
      const double rtol = dtype == torch::kFloat ? 1e-5 : 1e-12, atol = dtype == torch::kFloat ? 1e-6 : 1e-13;
      const std::vector<int64_t> head_dims = dtype == torch::kFloat ? std::vector<int64_t>{4, 8, 12, 16, 20, 24, 32, 48}
                                                                    : std::vector<int64_t>{2, 4, 6, 8, 10, 16, 24};
      for (int64_t D : head_dims) {
        ASSERT_TRUE(mixlab::pattern_attention_runs_vector_loops(D, dtype)) << "D=" << D;
        for (const std::string spec : {"pow2", "square+cache", "dense", "band:3"})
          for (int64_t T : {1, 9, 70})
            for (bool diag : {true, false})
              for (bool past : {false, true}) {
                const double base = diag ? 10000.0 : 0.0;
                const auto p = Pattern::parse(spec);
                const int64_t B = 2, H = 2, T0 = past ? 11 : 0;
                auto q = torch::randn({B, T, H, D}, dtype).permute({0, 2, 1, 3}).requires_grad_(true);
                auto k = torch::randn({B, H, T, D}, dtype).requires_grad_(true);
                std::optional<mixlab::ResolventState> state;
                if (past) {
                  mixlab::ResolventStateLayout layout;
                  layout.extra_dims = {D};
                  state.emplace(p, B, H, D, dtype, layout);
                  auto k0 = torch::randn({B, H, T0, D}, dtype);
                  state->append(torch::zeros({B, H, T0, D}, dtype), torch::zeros({B, H, T0, D}, dtype), {k0});
                }
                const mixlab::ResolventState* st = past ? &*state : nullptr;
                auto fast = pattern_attention(q, k, p, diag, base, st, past ? 0 : -1);
                mixlab::PatternAttention plain;
                {
                  PatternAttentionPlainLoopsGuard guard;
                  plain = pattern_attention(q, k, p, diag, base, st, past ? 0 : -1);
                }
                const std::string what = isa + " " + c10::toString(dtype) + " D=" + std::to_string(D) + " " + spec +
                                         " T=" + std::to_string(T) + (diag ? " diag rope" : "") + (past ? " past" : "");
                ASSERT_TRUE(all_close(fast.probs, plain.probs, rtol, atol)) << what;
                EXPECT_TRUE(all_close(fast.queries, plain.queries, rtol, atol)) << what;
                EXPECT_TRUE(all_close(fast.keys, plain.keys, rtol, atol)) << what;
                auto up = torch::randn_like(fast.probs);
                auto g1 = torch::autograd::grad({(fast.probs * up).sum()}, {q, k});
                std::vector<Tensor> g2;
                {
                  PatternAttentionPlainLoopsGuard guard;
                  g2 = torch::autograd::grad({(plain.probs * up).sum()}, {q, k});
                }
                EXPECT_TRUE(all_close(g1[0], g2[0], rtol, atol)) << what << " dq";
                EXPECT_TRUE(all_close(g1[1], g2[1], rtol, atol)) << what << " dk";
              }
      }
    }
  }
}

// The boundary checks pattern_attention shares with pattern_scores (src/resolvent/pattern_keys.h),
// and its own (RoPE needs an even D, a finite base).
TEST(PatternAttention, ErrorsNameTheArgument) {
  const auto p = Pattern::parse("pow2");
  auto q = torch::randn({1, 2, 5, 4});
  expect_error(
      [&] {
        pattern_attention(torch::randn({1, 2, 5, 5}), torch::randn({1, 2, 5, 5}), p, true, 10000.0);
      },
      "even head dim");
  expect_error(
      [&] {
        pattern_attention(q, torch::randn({1, 2, 6, 4}), p, true, 10000.0);
      },
      {"pattern_attention: k", "[1,2,6,4]"});
  expect_error(
      [&] {
        pattern_attention(q, torch::randn({1, 2, 5, 4}, torch::kDouble), p, true, 10000.0);
      },
      {"k must have the dtype of q", "Double"});
  expect_error(
      [&] {
        pattern_attention(torch::randn({1, 2, 0, 4}), torch::randn({1, 2, 0, 4}), p, true, 0.0);
      },
      "T >= 1");
  expect_error([&] { pattern_attention(torch::randn({2, 5, 4}), torch::randn({2, 5, 4}), p, true, 0.0); }, "(B,H,T,D)");
  expect_error([&] { pattern_attention(q, q, p, true, std::nan("")); }, "rope_base");
  mixlab::ResolventState state(p, 1, 2, 4, torch::kFloat);
  expect_error([&] { pattern_attention(q, q, p, true, 0.0, &state, 0); }, "past_key_channel");
}

}  // namespace

}  // namespace pattern_attention_test
