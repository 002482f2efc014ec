// mixlab/psm/tpsm.h — the Transformer-PSM (seed 004 §3.4, Alg. 3 and 4) as a token mixer.
//
// Registry spec: "tpsm[:c=C][:d=D][:agg_heads=H][:agg_layers=L][:inf_heads=H][:inf_layers=L]
//                 [:agg_d=D][:inf_d=D][:compress=right_half|linear][:identity=zeros|learned|empty]
//                 [:pos=learned|rope][:init=S][:inf=gpt2|attention][:agg=gpt2|attention]
//                 [:compress_init=right_half|sum]"
// Defaults: c = 4, d = agg_d = inf_d = C (the backbone width), heads = MixerDims::n_heads,
// layers = 1 each, compress = right_half, identity = zeros, pos = learned, inf = gpt2, agg = gpt2,
// compress_init = right_half. The canonical spec
// names every key. pos: how Agg and Inf see position inside their 2c tokens, a learned table
// (GPT-2, the seed's choice) or rotary q/k (mixlab/psm/psm_transformer.h says why). init: the
// std of Agg's and Inf's normal weight init, in [1e-6, 1] (default GPT-2's 0.02).
// inf: gpt2 is the seed's Inf (GPT-2 blocks with MLP and final LayerNorm, output its chunk rows);
// attention drops Inf's MLPs and final LayerNorm and returns what its attention layers add to the
// chunk rows (mixlab/psm/psm_transformer.h, attention_only), so inside a backbone block Inf is an
// attention layer over [s | chunk]. Agg stays GPT-2 either way (its output is a state, not an update).
// agg=attention: Agg's layers lose their MLP and final LayerNorm too, and Agg returns its input
// rows plus what its (bidirectional) attention layers add, x + h_L - h_0 (psm_transformer.h,
// keep_input): a state must carry its input, an update alone would lose it. compress_init=sum
// (compress=linear only) starts W_cmp as [I | I] instead of [0 | I], so that Agg(a, b) starts as
// the row-wise sum of its two blocks' outputs: with the right-half start the older block's rows
// are dropped at init and reach the state only once Agg's attention learns to move them. Both
// are for carrying key-value pairs across chunks (docs/log/results-2026-11.md, "Across chunks").
// The MQAR recipe is inf=attention with identity=empty: with the seed's form, T-PSM with c = 64
// stayed on the MQAR plateau where attention solves it, and removing the Inf MLP and the c empty
// rows of e were each needed to leave it (docs/log/results-2026-11.md, "What held T-PSM back").
//
// As a mixer x (B,T,C) -> y (B,T,C). Enc is the backbone's embedding (plus W_in when d != C);
// the GPT backbone (mixlab/model) adds its own residual, LayerNorm and FFN around this mixer, so a
// model is Embed -> [x + tpsm(LN x), + FFN] x n_layers -> LN -> head. With n_layers = 1 this is
// the seed's Enc -> scan(Agg) -> Inf -> logits, plus the backbone's residual path.
//
//   u      = x W_in (B,T,d)  (identity map when d == C)
//   x_i    = u[:, ic:(i+1)c]  (B,c,d), i < r = ceil(T/c); the last chunk is zero-padded
//   Agg(a, b) = RH(GPT^b([a | b]))   bidirectional over 2c tokens, right half
//               (compress=linear: W_cmp (c,2c) applied over the 2c outputs, init [0 | I], or
//               [I | I] with compress_init=sum)
//   s_{i-1} = P_i = Blelloch prefix of x_0..x_{i-1} (mixlab/scan/scan.h's tree), P_0 = e
//   y_i    = RH(GPT^c([s_{i-1} | x_i])) W_out          causal over 2c tokens
// Identity e (c,d): identity=zeros is a fixed zero buffer; identity=learned is a parameter
// (init normal 0.02). Agg(e, .) is always evaluated (Agg is not associative, e is not neutral).
// identity=empty: e has 0 rows, so Agg(e, b) = Agg's output on b alone (compress=linear: W_cmp's
// right c columns) and chunk 0's output is Inf on the chunk alone, positions from 0. Why: c rows of
// zeros are c keys every query of chunk 0 attends to (k = the qkv bias), diluting its attention
// over the chunk's real keys by up to c / (c + j); at c = 64 that alone kept T-PSM on the MQAR
// plateau. The training forward then runs Inf on chunk 0 and each tree level's Agg(e, .) nodes as
// separate calls (a state of 0 rows cannot be stacked with c-row ones).
//
// Training forward (Alg. 3): the scan engine's blelloch_scan is run once symbolically to record
// its tree (which Agg call needs which), then the recorded calls are executed level by level with
// all nodes of one level stacked into ONE Agg call (batch N = nodes x B), autograd through each.
// Only chunks 0..r-2 enter the scan (the last chunk's aggregate predicts nothing). Agg calls
// <= 2(r-1), batched Agg calls (levels) <= 2 ceil(log2 r) + 1; Inf is one call on (B r, 2c, d).
// Cost O(B T L (c d + d^2)) work, O(log T) depth. tpsm_reference_forward is the plain version:
// every prefix from the definition (block by block, MSB -> LSB), one Inf per chunk.
//
// Streaming (Alg. 4, step): the engine's BinaryCounterScan over completed chunks (roots + the
// cached MSB->LSB folds, popcount(t) each after t chunks) plus the chunk buffer (B,c,d). The
// output of token j of a chunk is row c+j of Inf([s | buf[0:j+1]]), s = the counter's prefix —
// equal to the training forward because Inf is causal. On each completed chunk the counter
// carries: amortised 2 Agg calls per chunk, worst case ceil(log2 t) + 1 at one step.
// Two evaluations of that row:
//   * fast (autograd off, contiguous CPU float/double, one dtype: decode): Inf keeps a key/value
//     cache of [s | buf] per layer (PsmTransformer::step_rows on raw rows). s comes first and
//     Inf is causal, so the keys/values of s's c rows depend on s alone: they are computed once
//     per chunk (at the first step after the prefix changed), and each token then runs one
//     transformer row at position c+j against the c+j cached ones. Per token:
//     O(B L_inf (d^2 + (c + j) d)), plus per chunk the c prefix rows, O(B L_inf c d^2) (amortised
//     O(B L_inf d^2) per token), plus the counter's Agg calls, also on raw rows, O(B L_agg c d^2)
//     each (amortised 2 / c of them per token). Cache memory: B L_inf 2c 2d elements.
//   * reference (otherwise, e.g. autograd on): re-runs the ATen Inf on [s | buf[0:j+1]] (c+j+1
//     <= 2c tokens), O(B L_inf (c d^2 + c^2 d)) per token, no cache. It leaves the fast path's
//     cache marked stale, so the two can alternate on one state.
// State memory: 2 popcount(t) + 1 tensors of (B,c,d), i.e. O(B c d log(T/c)), plus the fast
// path's cache once allocated; TpsmState::bytes() reports both exactly.
//
// Not supported: dropout, agg_d != inf_d (the state Agg produces is Inf's input: rejected).
// T < c is allowed (one zero-padded chunk, predicted from e).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>

#include "mixlab/mixer/mixer.h"
#include "mixlab/psm/psm_transformer.h"
#include "mixlab/scan/scan.h"

namespace mixlab {

enum class TpsmCompress { kRightHalf, kLinear };
enum class TpsmIdentity { kZeros, kLearned, kEmpty };

struct TpsmOptions {
  int64_t chunk = 4;       // c >= 1
  int64_t agg_d = 0;       // 0 = the backbone width C
  int64_t inf_d = 0;       // 0 = the backbone width C; must equal agg_d
  int64_t agg_heads = 0;   // 0 = MixerDims::n_heads
  int64_t inf_heads = 0;   // 0 = MixerDims::n_heads
  int64_t agg_layers = 1;  // L_agg
  int64_t inf_layers = 1;  // L_inf
  TpsmCompress compress = TpsmCompress::kRightHalf;
  TpsmIdentity identity = TpsmIdentity::kZeros;
  bool rope = false;                // pos=rope: rotary positions in Agg and Inf instead of learned tables
  double init_std = 0.02;           // init=S: std of Agg's and Inf's weight init (GPT-2: 0.02)
  bool inf_attention_only = false;  // inf=attention: Inf without MLP and final LN, returning its update
  bool agg_attention_only = false;  // agg=attention: Agg without MLP and final LN, returning its stream
  bool compress_sum = false;        // compress_init=sum: W_cmp starts as [I | I] instead of [0 | I]
};

/// Parses the part after "tpsm:" (may be empty); keys in any order, each at most once. Throws
/// mixlab::Error naming the spec and key for unknown keys, malformed or out-of-range values.
TpsmOptions tpsm_options_parse(const std::string& args_spec);

/// Counts of the last training forward's scan (complexity tests).
struct TpsmScanStats {
  int64_t chunks = 0;          // r
  int64_t agg_calls = 0;       // Agg applications (tree nodes)
  int64_t batched_levels = 0;  // Agg module calls after batching a level
  int64_t max_agg_batch = 0;   // largest N of one batched Agg call, in nodes
};

class TpsmMixer;

/// Decode state of Alg. 4 for B sequences.
class TpsmState : public MixerState {
 public:
  using Counter =
      BinaryCounterScan<torch::Tensor, std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>>;

  int64_t position() const override { return position_; }
  /// Roots + cached folds + the chunk buffer, plus Inf's key/value cache (B, L_inf 2c 2d) once a
  /// fast step has allocated it, in bytes.
  int64_t bytes() const override;
  /// Completed chunks t.
  int64_t chunks() const { return counter_->count(); }
  /// Roots held: popcount(chunks()).
  int64_t roots() const { return counter_->roots(); }
  /// Agg calls made by the counter since init (or restore).
  int64_t agg_calls() const { return counter_->agg_calls(); }
  int64_t batch() const override { return batch_; }
  /// Positions of [s | buf] whose Inf keys/values the fast path's cache holds (0 = none: the
  /// next fast step rebuilds them from s and buf).
  int64_t cached_rows() const { return kv_len_; }
  /// Saved: position, buffer fill, the buffer, and the counter: chunks t, then each root's
  /// level, root and cached fold (the counter's slot levels are checked against t on load).
  /// Derived, not saved: Inf's key/value cache, a function of the prefix s and the buffer; a
  /// loaded or forked state starts without it and its first fast step rebuilds it.
  void io(StateArchive& ar) override;

 private:
  friend class TpsmMixer;
  int64_t batch_ = 0;
  int64_t position_ = 0;
  int64_t fill_ = 0;   // tokens in the buffer, < c
  torch::Tensor buf_;  // (B,c,d), rows [0, fill_) valid
  std::unique_ptr<Counter> counter_;
  // Derived (fast path only): per sequence Inf's keys/values of positions [0, kv_len_) of
  // [s | buf] (PsmTransformer::step_rows' layout), (B, L_inf 2c 2d); undefined until the first
  // fast step. kv_len_ is c + fill_ after a fast step, 0 after a chunk completes (s changed), a
  // reference step (which does not maintain it) or a load. Like the counter's roots (made by the
  // Agg weights of their time), it assumes Inf's weights do not change while the state is used.
  torch::Tensor kv_;
  int64_t kv_len_ = 0;
};

/// The numbers a TpsmMixer with these options holds at `dims`: its parameters and the identity's
/// buffer of c x d zeros (options as parsed: 0 widths and heads mean the backbone's). Counted
/// without allocating (see psm_transformer_parameter_count).
double tpsm_parameter_count(const TpsmOptions& options, const MixerDims& dims);

class TpsmMixer : public Mixer {
 public:
  /// Throws mixlab::Error for chunk 0, agg_d != inf_d, heads not dividing the widths, and sizes
  /// over the mixer parameter budget (mixlab/mixer/parameter_budget.h).
  TpsmMixer(const TpsmOptions& options, const MixerDims& dims);
  TpsmMixer(const std::string& args_spec, const MixerDims& dims);

  /// Alg. 3: x (B,T,C) -> (B,T,C), static scan batched per tree level.
  torch::Tensor forward(const torch::Tensor& x) override;
  std::unique_ptr<MixerState> init_state(int64_t batch) override;
  /// Alg. 4: x_t (B,C) -> y_t (B,C).
  torch::Tensor step(MixerState& state, const torch::Tensor& x_t) override;
  std::string spec() const override;
  std::string cost_class() const override { return "O(1)"; }
  /// Counted from Alg. 3/4 per layer (src/psm/tpsm_cost.cpp).
  MixerCostFigures cost_figures(int64_t T) const override;

  /// Agg_θ(left, right): left (N,c,d) the earlier block, right (N,c,d) -> (N,c,d).
  torch::Tensor agg(const torch::Tensor& left, const torch::Tensor& right);
  /// Inf_φ: state (N,c,d), chunk (N,j,d) with 1 <= j <= c -> (N,j,d) in width d (before W_out).
  torch::Tensor inf(const torch::Tensor& state, const torch::Tensor& chunk);
  /// e expanded to (N,c,d).
  torch::Tensor identity(int64_t n) const;

  /// Plain version of forward: each prefix from the definition, one Inf call per chunk.
  torch::Tensor reference_forward(const torch::Tensor& x);

  /// Saves a decode state: versioned binary with a checksum (format in src/psm/tpsm_state_io.cpp).
  void save_state(const TpsmState& state, const std::string& path) const;
  /// Loads a state saved by save_state for this mixer's spec. Throws mixlab::Error naming the
  /// path for a missing, truncated, corrupt (checksum), wrong-version or mismatched file.
  std::unique_ptr<TpsmState> load_state(const std::string& path);

  const TpsmScanStats& last_scan_stats() const { return stats_; }
  const TpsmOptions& options() const { return options_; }
  int64_t chunk() const { return options_.chunk; }
  int64_t width() const { return d_; }

 private:
  void check_input(const torch::Tensor& x, const char* what) const;
  torch::Tensor encode(const torch::Tensor& x);  // (..., C) -> (..., d)
  torch::Tensor decode(const torch::Tensor& y);  // (..., d) -> (..., C)
  std::unique_ptr<TpsmState::Counter> make_counter(int64_t batch);
  // The fast decode path (src/psm/tpsm_step_rows.cpp): see "Streaming" above.
  bool rows_ready(const TpsmState& s, const torch::Tensor& x_t) const;
  torch::Tensor step_rows(TpsmState& s, const torch::Tensor& x_t);
  template <typename T>
  void step_rows_typed(TpsmState& s, const torch::Tensor& x_t, torch::Tensor& out);
  // The counter's Agg: raw rows when autograd is off and the dtypes allow, else agg().
  torch::Tensor agg_decode(const torch::Tensor& left, const torch::Tensor& right);
  template <typename T>
  void agg_rows_typed(const torch::Tensor& left, const torch::Tensor& right, torch::Tensor& out);

  TpsmOptions options_;
  int64_t C_ = 0, d_ = 0;
  PsmTransformer agg_net_{nullptr}, inf_net_{nullptr};
  torch::Tensor compress_;                            // (c,2c) for compress=linear
  torch::Tensor e_;                                   // (c,d) parameter or buffer
  torch::nn::Linear w_in_{nullptr}, w_out_{nullptr};  // only when d != C
  TpsmScanStats stats_;
};

}  // namespace mixlab
