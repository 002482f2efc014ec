// mixlab/attention/attention.h — causal softmax attention (`attention`) and sliding-window
// attention (`local:W`), the two attention rows of seed 000 Table 1.
//
// Both: x (B,T,C) → qkv projection → H heads of D = C/H → RoPE on q, k → softmax(q kᵀ/√D + mask)
// v → output projection. In the Y = (I−B)⁻¹ A X view: B = 0, A = the attention matrix,
// pattern `causal` / `band:W`.
//
// Cost: attention O(T) per decoded token, cache O(T) (keys and values). Forward and prefill run
// causal_attention (mixlab/attention/causal_attention.h): the native blocked kernel, no T×T
// tensor, keys above the diagonal skipped; where it does not apply, LibTorch ops in query tiles of
// kAttentionTile rows (peak memory O(kAttentionTile·T)).
// local:W: row i attends positions i−W..i (W past + itself); O(W) per token, cache W positions;
// forward costs O(T·W·D) time and memory (windows gathered with unfold), never O(T²).
// Decode: without autograd, on CPU float/double inputs and weights, step runs on raw rows
// (src/attention/attention_step_rows.cpp: one matrix-vector product for q, k, v, the scores and
// the weighted values read from the cache in place, the output product); otherwise the ATen step.
// Not supported: dropout, ALiBi, grouped-query heads.
#pragma once

#include <vector>

#include "mixlab/attention/causal_attention.h"
#include "mixlab/attention/kv_cache.h"
#include "mixlab/mixer/mixer.h"

namespace mixlab {

class AttentionMixer : public Mixer {
 public:
  /// window <= 0: full causal attention; window W > 0: local attention over W past positions.
  AttentionMixer(const MixerDims& dims, int64_t window = 0);

  torch::Tensor forward(const torch::Tensor& x) override;
  std::unique_ptr<MixerState> init_state(int64_t batch) override;
  torch::Tensor step(MixerState& state, const torch::Tensor& x_t) override;
  /// Chunked prefill: the chunk's q, k, v in one pass, its rows attending the cache and the chunk
  /// (causal inside it) through forward's attention, then the chunk appended to the cache.
  torch::Tensor prefill(MixerState& state, const torch::Tensor& x) override;
  std::string spec() const override;
  std::string cost_class() const override { return window_ > 0 ? "O(k)" : "O(n)"; }
  std::string pattern_spec() const override;

 private:
  /// q (B,H,T,D) of positions S..S+T-1 against k, v (B,H,S+T,D) of positions 0..S+T-1, causal
  /// (S = 0 in forward, the cached positions in prefill).
  torch::Tensor attend_full(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) const;
  /// q, k, v (B,H,T,D) of positions start..start+T-1; past_k, past_v (B,H,W,D) the W positions
  /// before start, oldest first (window_past), or undefined for zeros (forward, start = 0).
  torch::Tensor attend_window(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& past_k = {}, const torch::Tensor& past_v = {},
                              int64_t start = 0) const;
  /// Whether step may run on raw rows: no autograd, and x_t, the weights and the cache buffers
  /// contiguous CPU tensors of one float or double dtype.
  bool rows_ready(const KvCacheState& state, const torch::Tensor& x_t) const;
  /// The decode step on raw rows (src/attention/attention_step_rows.cpp): the ATen step's
  /// formulas, the cache read and written in place.
  torch::Tensor step_rows(KvCacheState& state, const torch::Tensor& x_t);
  template <typename T>
  void step_rows_typed(KvCacheState& state, const torch::Tensor& x_t, torch::Tensor& out);

  MixerDims dims_;
  int64_t window_;
  int64_t head_dim_;
  torch::nn::Linear qkv_{nullptr}, out_{nullptr};
  std::vector<double> rope_inv_freq_;  // RoPE rates of the raw-row step (core/rope.h)
};

}  // namespace mixlab
