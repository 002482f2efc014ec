// Dense reference of BRL-Attention, written from Alg. 1 line by line (see brl_reference.h).
#include "mixlab/brl/brl_reference.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "mixlab/core/error.h"
#include "mixlab/core/rope.h"

namespace mixlab {
namespace {

struct Params {
  std::map<std::string, torch::Tensor> p;
  const torch::Tensor& operator[](const std::string& name) const {
    auto it = p.find(name);
    MIXLAB_ASSERT(it != p.end(), "brl reference: no parameter '{}'", name);
    return it->second;
  }
};

// Layer norm over the last dim, written out (eps 1e-5 as torch's default).
torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  auto mean = x.mean(-1, true);
  auto var = (x - mean).pow(2).mean(-1, true);
  return (x - mean) / torch::sqrt(var + 1e-5) * w + b;
}

}  // namespace

MemoryOutput brl_reference_forward(BrlMixer& mixer, const torch::Tensor& x, const torch::Tensor& memory) {
  Params P;
  for (const auto& kv : mixer.named_parameters()) P.p[kv.key()] = kv.value();
  const auto& o = mixer.options();
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), M = o.slots, N = o.block, W = o.window;
  const int64_t H = P["lambda"].size(0), D = C / H, K = mixer.blocks_for(T);

  // F_gen: dense causal band attention, row i sees i-W..i.
  auto qkv = torch::matmul(x, P["local.qkv.weight"].t()).view({B, T, 3, H, D}).permute({2, 0, 3, 1, 4});
  auto q = rope_apply(qkv[0]), k = rope_apply(qkv[1]), v = qkv[2];
  auto scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(D));  // (B,H,T,T)
  auto i = torch::arange(T).unsqueeze(1), j = torch::arange(T).unsqueeze(0);
  auto allowed = (j <= i) & (i - j <= W);
  auto a = torch::matmul(scores.masked_fill(allowed.logical_not(), -INFINITY).softmax(-1), v);
  auto y_gen = torch::matmul(a.permute({0, 2, 1, 3}).reshape({B, T, C}), P["local.out.weight"].t());

  const auto gamma = mixer.gamma();
  std::vector<torch::Tensor> deltas, regs;
  for (int64_t kb = 0; kb < K; ++kb) {
    auto ct = memory.select(1, kb);  // (B,M,C)
    torch::Tensor ct_bar = ct;
    if (kb > 0) {
      // The history: the hist / N blocks before this one, fewer at the start.
      const int64_t hist_blocks = o.hist / N, first = std::max<int64_t>(0, kb - hist_blocks);
      auto hist = x.narrow(1, first * N, (kb - first) * N);  // (B,len,C)
      std::vector<torch::Tensor> heads;
      for (int64_t h = 0; h < H; ++h) {
        auto rows = [&](const char* name) { return P[name].narrow(0, h * D, D).t(); };  // (C,D)
        auto qh = torch::matmul(ct, rows("comp_q.weight"));
        auto k1 = torch::matmul(hist, rows("comp_k1.weight"));
        auto vh = torch::matmul(hist, rows("comp_v.weight"));
        const double scale = static_cast<double>(M) * std::sqrt(static_cast<double>(C));
        auto s = mixer.attn_weights(torch::matmul(qh, k1.transpose(1, 2)) / scale);  // (B,M,len)
        if (o.diff) {
          auto k2 = torch::matmul(hist, rows("comp_k2.weight"));
          s = s - gamma[h] * mixer.attn_weights(torch::matmul(qh, k2.transpose(1, 2)) / scale);
        }
        auto out = torch::matmul(s, vh);  // (B,M,D)
        // Group norm of this head's D channels.
        auto mean = out.mean(-1, true), var = (out - mean).pow(2).mean(-1, true);
        out = (out - mean) / torch::sqrt(var + 1e-5) * P["comp_norm.weight"].narrow(0, h * D, D) +
              P["comp_norm.bias"].narrow(0, h * D, D);
        heads.push_back(out);
      }
      ct_bar = torch::cat(heads, -1);
    }
    auto ct_out = (1.0 - o.beta) * layer_norm(ct_bar, P["evolve_norm.weight"], P["evolve_norm.bias"]) +
                  o.beta * torch::matmul(ct, P["evolve_m.weight"].t());
    deltas.push_back(ct_out);
    // F_prop for the tokens of block kb.
    const int64_t t0 = kb * N, len = std::min(T, t0 + N) - t0;
    auto xs = x.narrow(1, t0, len);
    std::vector<torch::Tensor> heads;
    for (int64_t h = 0; h < H; ++h) {
      auto rows = [&](const char* name) { return P[name].narrow(0, h * D, D).t(); };
      auto zq = torch::matmul(xs, rows("prop_q.weight"));
      auto zk = torch::matmul(ct_out, rows("prop_k.weight"));
      auto zv = torch::matmul(ct_out, rows("prop_v.weight"));
      auto s = mixer.attn_weights(torch::matmul(zq, zk.transpose(1, 2)) / std::sqrt(static_cast<double>(D)));
      heads.push_back(P["lambda"][h] * torch::matmul(s, zv));
    }
    regs.push_back(torch::relu(layer_norm(torch::cat(heads, -1), P["prop_norm.weight"], P["prop_norm.bias"])));
  }
  return {y_gen + torch::cat(regs, 1), torch::stack(deltas, 1)};
}

}  // namespace mixlab
