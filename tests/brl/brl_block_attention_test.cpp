// BRL's softmax forward, whose F_comp and F_prop run on block_attention
// (mixlab/attention/block_attention.h), against the same forward with the kernel under
// ComposedBlockAttentionGuard, in every instruction-set build this CPU runs: the output, the
// memory and every gradient, with one block of history and with three.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "mixlab/attention/block_attention.h"
#include "mixlab/brl/brl_mixer.h"
#include "support/gradcheck.h"
#include "support/isa_scope.h"

namespace brl_block_attention_test {

using mixlab::testing::all_close;

TEST(BrlBlockAttention, ForwardMatchesComposed) {
  for (const char* args : {"w=8:m=5:block=6", "w=8:m=16:block=16:diff=0", "w=8:m=5:block=6:hist=18"}) {
    SCOPED_TRACE(args);
    torch::manual_seed(33);
    mixlab::MixerDims d;
    d.d_model = 64;
    d.n_heads = 4;
    d.max_len = 128;
    auto mixer = std::make_shared<mixlab::BrlMixer>(d, mixlab::brl_options_parse(args, args));
    const int64_t T = 45;
    auto x = torch::randn({2, T, 64}).requires_grad_(true);
    auto mem = torch::randn({2, mixer->blocks_for(T), mixer->options().slots, 64}).requires_grad_(true);
    std::vector<torch::Tensor> inputs = {x, mem};
    for (const auto& p : mixer->parameters()) inputs.push_back(p);
    auto run_once = [&](bool composed) {
      std::optional<mixlab::ComposedBlockAttentionGuard> guard;
      if (composed) guard.emplace();
      auto out = mixer->forward_memory(x, mem);
      torch::manual_seed(34);
      auto gy = torch::randn_like(out.y), gm = torch::randn_like(out.memory_delta);
      auto grads = torch::autograd::grad({out.y, out.memory_delta}, inputs, {gy, gm}, false, false, true);
      grads.push_back(out.y.detach());
      grads.push_back(out.memory_delta.detach());
      return grads;
    };
    const auto ref = run_once(true);
    for (const auto& isa : mixlab::testing::isas_this_cpu_runs()) {
      mixlab::testing::IsaScope scope(isa);
      const auto got = run_once(false);
      ASSERT_EQ(got.size(), ref.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].defined(), ref[i].defined()) << isa << " output " << i;
        if (got[i].defined()) EXPECT_TRUE(all_close(got[i], ref[i], 2e-4, 2e-5)) << isa << " output " << i;
      }
    }
  }
}

}  // namespace brl_block_attention_test
