// The T-PSM's transformer on the attention kernels (block_attention for the bidirectional Agg,
// causal_attention for the causal Inf) against the same module with both ops in their composed
// LibTorch form (ComposedBlockAttentionGuard, ComposedAttentionGuard), in every instruction-set
// build this CPU runs: output and the gradients of the input and of every parameter, float and
// double, learned positions and RoPE, the GPT-2 form and attention_only, head dims 6 (the
// composed causal form: not whole 16-byte vectors in float), 4, 8 and 16.
#include "mixlab/psm/psm_transformer.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "mixlab/attention/block_attention.h"
#include "mixlab/attention/causal_attention.h"
#include "support/gradcheck.h"
#include "support/isa_scope.h"

namespace psm_transformer_test {

using mixlab::testing::all_close;

namespace {

std::vector<torch::Tensor> run(mixlab::PsmTransformer& net, const torch::Tensor& x0, const torch::Tensor& g,
                               bool composed) {
  std::optional<mixlab::ComposedAttentionGuard> causal_guard;
  std::optional<mixlab::ComposedBlockAttentionGuard> block_guard;
  if (composed) causal_guard.emplace(), block_guard.emplace();
  auto x = x0.detach().clone().requires_grad_(true);
  auto y = net->forward(x);
  std::vector<torch::Tensor> inputs = {x};
  for (const auto& p : net->parameters()) inputs.push_back(p);
  auto grads = torch::autograd::grad({y}, inputs, {g}, false, false, true);
  grads.insert(grads.begin(), y.detach());
  return grads;
}

}  // namespace

TEST(PsmTransformer, AttentionKernelsMatchTheComposedForm) {
  struct Case {
    int64_t d, heads;
  };
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    const double tol = dtype == torch::kFloat ? 2e-4 : 1e-11;  // float: two layers, sums over 65 rows
    for (const Case c : {Case{12, 2}, Case{8, 2}, Case{32, 4}, Case{32, 2}})
      for (const bool causal : {false, true})
        for (const bool rope : {false, true})
          for (const bool attention_only : {false, true}) {
            const std::string where = "d " + std::to_string(c.d) + " heads " + std::to_string(c.heads) +
                                      (causal ? " causal" : " bidirectional") + (rope ? " rope" : "") +
                                      (attention_only ? " attention_only" : "") + " " +
                                      std::string(c10::toString(dtype));
            SCOPED_TRACE(where);
            torch::manual_seed(41);
            mixlab::PsmTransformerOptions o;
            o.d = c.d;
            o.heads = c.heads;
            o.layers = 2;
            o.max_positions = 16;
            o.causal = causal;
            o.rope = rope;
            o.init_std = 0.3;  // scores well away from uniform
            o.attention_only = attention_only;
            mixlab::PsmTransformer net(o, "test");
            net->to(dtype);
            auto x = torch::randn({5, 13, c.d}, torch::dtype(dtype));
            auto g = torch::randn({5, 13, c.d}, torch::dtype(dtype));
            const auto ref = run(net, x, g, true);
            for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
              mixlab::testing::IsaScope scope(isa);
              const auto got = run(net, x, g, false);
              ASSERT_EQ(got.size(), ref.size());
              for (size_t i = 0; i < got.size(); ++i) {
                ASSERT_EQ(got[i].defined(), ref[i].defined()) << isa << " output " << i;
                if (got[i].defined()) EXPECT_TRUE(all_close(got[i], ref[i], tol, tol)) << isa << " output " << i;
              }
            }
          }
  }
}

}  // namespace psm_transformer_test
