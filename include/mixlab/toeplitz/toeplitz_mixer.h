// mixlab/toeplitz/toeplitz_mixer.h — the multi-head Toeplitz token mixer (seed 003 eq. 1-4).
//
// Registry spec: "toeplitz[:heads=H][:kernel=K]" (defaults: heads = MixerDims::n_heads, kernel = 1;
// canonical form always names both, e.g. "toeplitz:heads=4:kernel=1").
//
//   u     = x W_in                         (B,T,C) -> (B,H,T,D), D = C / H  (eq. 3 input projection)
//   z[h]  = sum_{m<K} S_{m-p} T_{h,m} u[h] + bias[h]                         (eq. 1 and eq. 4)
//   y     = concat_h z[h] W_out            (B,T,C)                          (eq. 3 output projection)
// T_{h,m} is the causal Toeplitz matrix of lag vector lags[h,m,:] (mixlab/toeplitz/toeplitz.h),
// S_s shifts the D channels of head h by s (z[..., c] reads channel c + s, zero outside [0,D)),
// p = (K-1)/2: with K > 1 each output channel mixes K neighbouring channels of its head over time
// like a 1-D convolution with stride 1 and zero "same" padding (eq. 4). bias is one value per head
// and position (broadcast over channels).
//
// Parameters (shapes):
//   in_proj   Linear C -> C (with bias)          out_proj  Linear C -> C (with bias)
//   lags      (H, K, Tmax)   Kaiming-normal, fan_in = Tmax (std sqrt(2/Tmax))
//   pos_bias  (H, Tmax)      zeros
// Tmax = MixerDims::max_len. forward(x) with T > Tmax throws.
//
// Cost: forward O(B K C T log T) (FFT path) or O(B K C T^2) (materialised, short T; kAuto picks by
// kToeplitzFftCrossoverT). Decode: step() keeps every past projected input u (B,H,t,D) and costs
// O(K C t) per token at position t (the last row of each T_{h,m}); state memory O(B C t), reported
// by ToeplitzState::bytes() (the cache grows by doubling, so bytes() <= 2x the positions held).
// Without autograd, on CPU float/double inputs and parameters, step runs on raw rows
// (src/toeplitz/toeplitz_step_rows.cpp: the projections as matrix-vector products, each lag row
// against the cache read in place, newest first); otherwise the ATen step.
//
// Not supported: T > Tmax, C not divisible by H, heads without projections (the seed's
// "non-headed" TMM); the channel shift never crosses head boundaries.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "mixlab/mixer/mixer.h"
#include "mixlab/toeplitz/toeplitz.h"

namespace mixlab {

struct ToeplitzMixerOptions {
  int64_t heads = 0;   // H; 0 = take MixerDims::n_heads
  int64_t kernel = 1;  // K >= 1, channel-mixing width (eq. 4)
  ToeplitzPath path = ToeplitzPath::kAuto;
};

/// Parses the argument part of "toeplitz[:heads=H][:kernel=K]", i.e. "" or "heads=4:kernel=3"
/// (keys in any order, each at most once). Throws mixlab::Error naming the spec on unknown keys,
/// malformed or non-positive values.
ToeplitzMixerOptions toeplitz_mixer_options_parse(const std::string& args_spec);

/// Decode state: the projected inputs seen so far.
class ToeplitzState : public MixerState {
 public:
  int64_t position() const override { return position_; }
  int64_t bytes() const override { return tensor_bytes(cache_); }
  int64_t cached_positions() const override { return position_; }
  int64_t batch() const override { return batch_; }
  void io(StateArchive& ar) override;
  /// The cache (B,H,capacity,D), rows [0, position()) valid; undefined before the first step.
  const torch::Tensor& cache() const { return cache_; }

 private:
  friend class ToeplitzMixer;
  int64_t batch_ = 0;
  int64_t position_ = 0;
  torch::Tensor cache_;  // (B,H,capacity,D), rows [0, position_) valid; capacity doubles
};

class ToeplitzMixer : public Mixer {
 public:
  /// args_spec: the part after "toeplitz:" (may be empty). Throws mixlab::Error when
  /// dims.d_model is not divisible by the heads, or any size is non-positive.
  ToeplitzMixer(const std::string& args_spec, const MixerDims& dims);
  ToeplitzMixer(const ToeplitzMixerOptions& options, const MixerDims& dims);

  torch::Tensor forward(const torch::Tensor& x) override;
  std::unique_ptr<MixerState> init_state(int64_t batch) override;
  torch::Tensor step(MixerState& state, const torch::Tensor& x_t) override;
  /// Chunked prefill: the chunk's projected inputs appended to the cache, then forward's Toeplitz
  /// mix over the whole cached prefix (FFT or materialised, O(P log P) at P positions) of which
  /// the chunk's rows are kept. A one-token chunk is a step.
  torch::Tensor prefill(MixerState& state, const torch::Tensor& x) override;
  std::string spec() const override;
  std::string cost_class() const override { return "O(n)"; }
  /// Row t reads every past input (a dense causal kernel): the graph of `causal`.
  MixerCostFigures cost_figures(int64_t T) const override;

  int64_t heads() const { return heads_; }
  int64_t kernel() const { return kernel_; }
  int64_t head_dim() const { return head_dim_; }
  int64_t max_len() const { return max_len_; }
  /// Forces a path (benchmarks, tests); kAuto by default.
  void set_path(ToeplitzPath path) { path_ = path; }
  ToeplitzPath path() const { return path_; }

  /// (H, K, Tmax) lag weights and (H, Tmax) per-position bias (registered parameters).
  const torch::Tensor& lags() const { return lags_; }
  const torch::Tensor& pos_bias() const { return pos_bias_; }
  torch::nn::Linear& in_proj() { return in_proj_; }
  torch::nn::Linear& out_proj() { return out_proj_; }

 private:
  /// z (B,H,T,D) from the per-kernel-element outputs zk (B,H,K,T,D): channel shifts and sum.
  torch::Tensor kernel_combine(const torch::Tensor& zk) const;
  /// z (B,H,T,D) from the projected inputs u (B,H,T,D) of positions 0..T-1: forward's mix.
  torch::Tensor mix(const torch::Tensor& u) const;
  /// Makes the cache hold `positions` positions (capacity doubling, at most Tmax), with the
  /// dtype of `options`; a cache of another dtype is replaced.
  void grow_cache(ToeplitzState& state, const torch::TensorOptions& options, int64_t positions) const;
  /// Whether step may run on raw rows: no autograd, and x_t, the parameters and the cache
  /// (grown first) contiguous CPU tensors of one float or double dtype.
  bool rows_ready(ToeplitzState& state, const torch::Tensor& x_t);
  /// The decode step on raw rows (src/toeplitz/toeplitz_step_rows.cpp): the ATen step's formulas,
  /// the cache written and read in place.
  torch::Tensor step_rows(ToeplitzState& state, const torch::Tensor& x_t);
  template <typename T>
  void step_rows_typed(ToeplitzState& state, const torch::Tensor& x_t, torch::Tensor& out);

  int64_t d_model_ = 0, heads_ = 0, kernel_ = 1, head_dim_ = 0, max_len_ = 0;
  ToeplitzPath path_ = ToeplitzPath::kAuto;
  torch::nn::Linear in_proj_{nullptr}, out_proj_{nullptr};
  torch::Tensor lags_;      // (H,K,Tmax)
  torch::Tensor pos_bias_;  // (H,Tmax)
};

}  // namespace mixlab
