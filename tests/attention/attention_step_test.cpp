// AttentionMixer's decode step on raw rows (src/attention/attention_step_rows.cpp): without
// autograd it equals the ATen step (autograd on) token by token, outputs and cache contents, and
// forward row by row, for full attention and windows W = 1, 3 and wider than the sequence, in
// float and double, on odd sizes (C = 12, H = 3: D = 4) with batch > 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "mixlab/attention/attention.h"
#include "mixlab/core/error.h"
#include "support/aten_ops.h"
#include "support/gradcheck.h"

namespace attention_step_test {

namespace {

using mixlab::AttentionMixer;
using mixlab::KvCacheState;
using mixlab::testing::all_close;
using mixlab::testing::count_aten_ops;

// Ops of the ATen step that the raw-row step never calls.
const std::vector<std::string> kReferenceOps = {"aten::linear", "aten::matmul", "aten::softmax"};

mixlab::MixerDims dims(int64_t C, int64_t H) {
  mixlab::MixerDims d;
  d.d_model = C;
  d.n_heads = H;
  d.max_len = 128;
  return d;
}

std::string name(int64_t window, torch::ScalarType dtype) {
  return (window > 0 ? "local:" + std::to_string(window) : std::string("attention")) + " " +
         std::string(c10::toString(dtype));
}

TEST(AttentionStep, RawRowStepEqualsAtenStepTokenByToken) {
  const int64_t B = 3, C = 12, H = 3, T = 37;  // T > 32: the full cache grows twice (16 -> 32 -> 64)
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    const double tol = dtype == torch::kFloat ? 1e-5 : 1e-12;
    for (int64_t window : {0, 1, 3, 50}) {
      SCOPED_TRACE(name(window, dtype));
      torch::manual_seed(21 + window);
      AttentionMixer m(dims(C, H), window);
      m.to(dtype);
      auto x = torch::randn({B, T, C}, dtype) * 2;
      auto fast_base = m.init_state(B), aten_base = m.init_state(B);
      auto& fast = dynamic_cast<KvCacheState&>(*fast_base);
      auto& aten = dynamic_cast<KvCacheState&>(*aten_base);
      for (int64_t t = 0; t < T; ++t) {
        if (t == 20) {  // a weight change mid-stream (an optimiser step): both paths must follow it
          torch::NoGradGuard no_grad;
          for (auto& p : m.parameters()) p.add_(0.05 * torch::randn_like(p));
        }
        const auto x_t = x.select(1, t);  // a slice, not contiguous: the raw path copies it
        at::Tensor y_fast, y_aten;
        const int64_t fast_ops = count_aten_ops(kReferenceOps, [&] {
          torch::NoGradGuard no_grad;
          y_fast = m.step(fast, x_t);
        });
        const int64_t aten_ops = count_aten_ops(kReferenceOps, [&] { y_aten = m.step(aten, x_t).detach(); });
        ASSERT_EQ(fast_ops, 0) << "t " << t << ": the step without autograd did not run on raw rows";
        ASSERT_GT(aten_ops, 0) << "t " << t;
        ASSERT_TRUE(all_close(y_fast, y_aten, tol, tol)) << "t " << t;
        ASSERT_EQ(fast.position(), t + 1);
        ASSERT_EQ(aten.position(), t + 1);
        ASSERT_EQ(fast.k_buffer().sizes(), aten.k_buffer().sizes()) << "t " << t;
        ASSERT_TRUE(all_close(fast.k_buffer(), aten.k_buffer(), tol, tol)) << "keys, t " << t;
        ASSERT_TRUE(all_close(fast.v_buffer(), aten.v_buffer(), tol, tol)) << "values, t " << t;
      }
      EXPECT_EQ(fast.cached_positions(), window > 0 ? std::min(window, T) : T);
    }
  }
}

// Decode's two no-autograd modes (NoGradGuard, and the InferenceMode of DecoderModel::step) both
// take the raw rows, and equal forward row by row.
TEST(AttentionStep, RawRowStepEqualsForwardRowByRow) {
  const int64_t B = 2, C = 12, H = 3, T = 29;
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    const double tol = dtype == torch::kFloat ? 1e-5 : 1e-12;
    for (int64_t window : {0, 1, 3, 50}) {
      for (bool inference : {false, true}) {
        SCOPED_TRACE(name(window, dtype) + (inference ? " InferenceMode" : " NoGradGuard"));
        torch::manual_seed(5 + window);
        AttentionMixer m(dims(C, H), window);
        m.to(dtype);
        auto x = torch::randn({B, T, C}, dtype);
        torch::NoGradGuard no_grad;
        auto y = m.forward(x);
        std::unique_ptr<mixlab::MixerState> state;
        for (int64_t t = 0; t < T; ++t) {
          at::Tensor yt;
          const int64_t ops = count_aten_ops(kReferenceOps, [&] {
            c10::optional<c10::InferenceMode> mode;
            if (inference) mode.emplace();
            if (!state) state = m.init_state(B);
            yt = m.step(*state, x.select(1, t).contiguous());
          });
          ASSERT_EQ(ops, 0) << "t " << t;
          ASSERT_TRUE(all_close(yt, y.select(1, t), tol, tol)) << "row " << t;
        }
      }
    }
  }
}

// Chunked prefill (one batched pass per chunk against the cache) equals forward row by row for
// any chunking, interleaved with steps, and leaves the cache the steps would have: the same
// positions in the same slots. Chunks longer than W, and a chunk past kAttentionTile (query tiles
// with cached positions in front).
TEST(AttentionStep, PrefillInUnevenChunksEqualsForwardAndSteps) {
  const int64_t B = 2, C = 12, H = 3;
  struct Case {
    int64_t window;
    std::vector<int64_t> chunks;  // 1 = a step
  };
  const std::vector<Case> cases = {{0, {7, 1, 12, 2, 1, 30}},
                                   {1, {7, 1, 12, 2, 1, 30}},
                                   {3, {2, 1, 1, 9, 3, 1, 17}},
                                   {50, {7, 1, 12, 2, 1, 30}},
                                   {0, {5, 1030}},
                                   {4, {3, 1030}}};
  for (const auto& c : cases) {
    int64_t T = 0;
    for (auto n : c.chunks) T += n;
    SCOPED_TRACE(name(c.window, torch::kDouble) + " T " + std::to_string(T));
    torch::manual_seed(9 + c.window);
    AttentionMixer m(dims(C, H), c.window);
    m.to(torch::kDouble);
    auto x = torch::randn({B, T, C}, torch::kDouble);
    torch::NoGradGuard no_grad;
    auto y = m.forward(x);
    auto chunked_base = m.init_state(B), stepped_base = m.init_state(B);
    auto& chunked = dynamic_cast<KvCacheState&>(*chunked_base);
    auto& stepped = dynamic_cast<KvCacheState&>(*stepped_base);
    int64_t t0 = 0;
    for (auto n : c.chunks) {
      auto yc = n == 1 ? m.step(chunked, x.select(1, t0)).unsqueeze(1) : m.prefill(chunked, x.narrow(1, t0, n));
      ASSERT_TRUE(all_close(yc, y.narrow(1, t0, n), 1e-10, 1e-10)) << "chunk at " << t0 << " of " << n;
      t0 += n;
      ASSERT_EQ(chunked.position(), t0);
    }
    for (int64_t t = 0; t < T; ++t) m.step(stepped, x.select(1, t));
    ASSERT_EQ(chunked.k_buffer().sizes(), stepped.k_buffer().sizes());
    EXPECT_TRUE(all_close(chunked.k_buffer(), stepped.k_buffer(), 1e-10, 1e-10));
    EXPECT_TRUE(all_close(chunked.v_buffer(), stepped.v_buffer(), 1e-10, 1e-10));
  }
}

// A step with autograd on records history through the ATen path (training through decode).
TEST(AttentionStep, StepWithAutogradKeepsTheAtenPath) {
  AttentionMixer m(dims(12, 3), 3);
  auto state = m.init_state(2);
  auto y = m.step(*state, torch::randn({2, 12}));
  EXPECT_TRUE(y.requires_grad());
  EXPECT_THROW(m.step(*state, torch::randn({3, 12})), mixlab::Error);  // batch other than the state's
}

}  // namespace

}  // namespace attention_step_test
