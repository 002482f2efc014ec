// The GPT-2-style transformer of the T-PSM; see mixlab/psm/psm_transformer.h.
#include "mixlab/psm/psm_transformer.h"

#include <cmath>
#include <string>

#include "mixlab/attention/block_attention.h"
#include "mixlab/attention/causal_attention.h"
#include "mixlab/core/error.h"
#include "mixlab/core/rope.h"
#include "mixlab/core/tensor_checks.h"

namespace mixlab {

double psm_transformer_parameter_count(const PsmTransformerOptions& o) {
  // The constructor's tensors below, one term each.
  const double d = static_cast<double>(o.d);
  const bool mlp = !o.attention_only;
  double block = 2 * d + (3 * d * d + 3 * d) + (d * d + d);         // ln1, qkv, proj
  if (mlp) block += 2 * d + (4 * d * d + 4 * d) + (4 * d * d + d);  // ln2, fc1, fc2
  return (o.rope ? 0.0 : static_cast<double>(o.max_positions) * d) + static_cast<double>(o.layers) * block +
         (mlp ? 2 * d : 0.0);  // pos, blocks, ln_f
}

PsmTransformerImpl::PsmTransformerImpl(const PsmTransformerOptions& options, const char* what) : options_(options) {
  const auto& o = options_;
  MIXLAB_CHECK(o.d > 0, "{}: width d must be > 0, got {}", what, o.d);
  MIXLAB_CHECK(o.heads > 0 && o.d % o.heads == 0, "{}: heads must divide the width d = {}, got heads = {}", what, o.d,
               o.heads);
  MIXLAB_CHECK(o.layers > 0, "{}: layers must be > 0, got {}", what, o.layers);
  MIXLAB_CHECK(o.max_positions > 0, "{}: max_positions must be > 0, got {}", what, o.max_positions);
  MIXLAB_CHECK(!o.keep_input || o.attention_only, "{}: keep_input needs attention_only", what);
  MIXLAB_CHECK(o.init_std > 0 && o.init_std <= 1, "{}: init std must be in (0, 1], got {}", what, o.init_std);
  if (o.rope) {
    MIXLAB_CHECK((o.d / o.heads) % 2 == 0, "{}: rotary positions (pos=rope) need an even head width d / heads, got {}",
                 what, o.d / o.heads);
    rope_inv_freq_ = rope_inv_freq(o.d / o.heads);
  } else {
    pos_ = register_parameter("pos", torch::randn({o.max_positions, o.d}) * o.init_std);
  }
  const double resid_std = o.init_std / std::sqrt(2.0 * static_cast<double>(o.layers));
  for (int64_t l = 0; l < o.layers; ++l) {
    Block b;
    const std::string p = "block" + std::to_string(l) + "_";
    const bool mlp = !o.attention_only;
    // Registration and init in GPT-2's order (ln1, ln2, qkv, proj, fc1, fc2), so a model without
    // the option draws the same initial weights as before it existed.
    b.ln1 = register_module(p + "ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.d})));
    if (mlp) b.ln2 = register_module(p + "ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.d})));
    b.qkv = register_module(p + "qkv", torch::nn::Linear(o.d, 3 * o.d));
    b.proj = register_module(p + "proj", torch::nn::Linear(o.d, o.d));
    if (mlp) {
      b.fc1 = register_module(p + "fc1", torch::nn::Linear(o.d, 4 * o.d));
      b.fc2 = register_module(p + "fc2", torch::nn::Linear(4 * o.d, o.d));
    }
    torch::NoGradGuard no_grad;
    for (auto* lin : {&b.qkv, &b.fc1})
      if (*lin) (*lin)->weight.normal_(0.0, o.init_std);
    for (auto* lin : {&b.proj, &b.fc2})
      if (*lin) (*lin)->weight.normal_(0.0, resid_std);
    for (auto* lin : {&b.qkv, &b.proj, &b.fc1, &b.fc2})
      if (*lin) (*lin)->bias.zero_();
    blocks_.push_back(b);
  }
  if (!o.attention_only) ln_f_ = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.d})));
}

torch::Tensor PsmTransformerImpl::forward(const torch::Tensor& x) {
  const auto& o = options_;
  // Internal: the T-PSM builds x itself (checked shapes at its boundary).
  MIXLAB_ASSERT(x.dim() == 3 && x.size(2) == o.d && x.size(1) >= 1 && x.size(1) <= o.max_positions,
                "PsmTransformer: x must be (N,S,{}) with 1 <= S <= {}, got {}", o.d, o.max_positions, shape_string(x));
  const int64_t N = x.size(0), S = x.size(1), H = o.heads, D = o.d / o.heads;
  const torch::Tensor h0 = o.rope ? x : x + pos_.narrow(0, 0, S);
  torch::Tensor h = h0;
  for (auto& b : blocks_) {
    auto qkv = b.qkv(b.ln1(h)).view({N, S, 3, H, D}).permute({2, 0, 3, 1, 4});  // (3,N,H,S,D)
    auto q = qkv[0], k = qkv[1], v = qkv[2];
    if (o.rope) q = rope_apply(q), k = rope_apply(k);
    // The attention ops of mixlab/attention, not (N,H,S,S) score matmuls: a T-PSM runs one small
    // transformer per chunk (S = 2c rows, often 8), thousands of tiny matrices a call, where
    // LibTorch's batched matmul paid per matrix (issue 38; docs/BENCHMARKS.md has the step).
    // block_attention reads (N,S,H,D) views and writes the rows the projection takes.
    auto att = o.causal ? causal_attention(q, k, v).transpose(1, 2)  // (N,S,H,D)
                        : block_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                          1.0 / std::sqrt(static_cast<double>(D)));
    h = h + b.proj(att.reshape({N, S, o.d}));
    if (!o.attention_only) h = h + b.fc2(torch::gelu(b.fc1(b.ln2(h))));
  }
  if (!o.attention_only) return ln_f_(h);
  return o.keep_input ? x + (h - h0) : h - h0;
}

}  // namespace mixlab
