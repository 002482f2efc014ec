#include "mixlab/attention/attention.h"

#include <cmath>

#include "mixlab/core/error.h"
#include "mixlab/core/rope.h"
#include "mixlab/core/split_heads.h"
#include "mixlab/core/tensor_checks.h"

namespace mixlab {
namespace {

void check_dims(const MixerDims& dims, const char* who) {
  MIXLAB_CHECK(dims.d_model > 0 && dims.n_heads > 0, "{}: d_model and n_heads must be > 0, got {} and {}", who,
               dims.d_model, dims.n_heads);
  MIXLAB_CHECK(dims.d_model % dims.n_heads == 0, "{}: d_model ({}) must be divisible by n_heads ({})", who,
               dims.d_model, dims.n_heads);
  MIXLAB_CHECK((dims.d_model / dims.n_heads) % 2 == 0, "{}: head dim d_model/n_heads = {} must be even (RoPE)", who,
               dims.d_model / dims.n_heads);
}

}  // namespace

AttentionMixer::AttentionMixer(const MixerDims& dims, int64_t window) : dims_(dims), window_(window) {
  check_dims(dims, window > 0 ? "local attention" : "attention");
  head_dim_ = dims.d_model / dims.n_heads;
  qkv_ =
      register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(dims.d_model, 3 * dims.d_model).bias(false)));
  out_ = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(dims.d_model, dims.d_model).bias(false)));
  rope_inv_freq_ = rope_inv_freq(head_dim_);
}

std::string AttentionMixer::spec() const { return window_ > 0 ? "local:" + std::to_string(window_) : "attention"; }

std::string AttentionMixer::pattern_spec() const { return window_ > 0 ? "band:" + std::to_string(window_) : "causal"; }

torch::Tensor AttentionMixer::attend_full(const torch::Tensor& q, const torch::Tensor& k,
                                          const torch::Tensor& v) const {
  return causal_attention(q, k, v);
}

torch::Tensor AttentionMixer::attend_window(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                            const torch::Tensor& past_k, const torch::Tensor& past_v,
                                            int64_t start) const {
  const int64_t T = q.size(2), W = window_;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  // The W positions before the first query in front (zeros in forward), then windows of W+1 rows
  // ending at each position: (B,H,T,D,W+1).
  auto front = [&](const torch::Tensor& x, const torch::Tensor& past) {
    return past.defined() ? torch::cat({past, x}, 2) : torch::constant_pad_nd(x, {0, 0, W, 0});
  };
  auto kw = front(k, past_k).unfold(2, W + 1, 1);
  auto vw = front(v, past_v).unfold(2, W + 1, 1);
  auto scores = torch::einsum("bhtd,bhtdw->bhtw", {q, kw}) * scale;
  // Slot w of row t is position start + t − W + w: invalid when negative (the padding).
  auto t = torch::arange(T).unsqueeze(1), w = torch::arange(W + 1).unsqueeze(0);
  auto invalid = (start + t - W + w) < 0;
  auto p = scores.masked_fill(invalid, -INFINITY).softmax(-1);
  return torch::einsum("bhtw,bhtdw->bhtd", {p, vw});
}

torch::Tensor AttentionMixer::forward(const torch::Tensor& x) {
  const char* fn = window_ > 0 ? "local attention forward" : "attention forward";
  check_shape(fn, "x", x, {-1, -1, dims_.d_model}, "(B,T,C)");
  check_floating(fn, "x", x);
  const int64_t B = x.size(0), T = x.size(1), H = dims_.n_heads, D = head_dim_;
  MIXLAB_CHECK(T > 0, "{}: x must have T > 0, got shape {}", fn, shape_string(x));
  const auto qkv = split_heads(qkv_->forward(x), 3, H, D);  // 3 × (B,H,T,D)
  auto q = rope_apply(qkv[0]), k = rope_apply(qkv[1]), v = qkv[2];
  // The native op takes the window as a band mask over the keys (no (T, W+1, D) windows of k and
  // v are built); head dims it does not take keep the unfolded windows.
  auto y = window_ > 0
               ? (causal_attention_is_native(q, k, v) ? causal_attention(q, k, v, window_) : attend_window(q, k, v))
               : attend_full(q, k, v);
  return out_->forward(y.permute({0, 2, 1, 3}).reshape({B, T, dims_.d_model}));
}

torch::Tensor AttentionMixer::prefill(MixerState& state_base, const torch::Tensor& x) {
  auto* state = dynamic_cast<KvCacheState*>(&state_base);
  MIXLAB_CHECK(state != nullptr, "{} prefill: state was not created by this mixer's init_state", spec());
  const std::string fn = spec() + " prefill";
  check_shape(fn.c_str(), "x", x, {state->batch(), -1, dims_.d_model}, "(B,T,C)");
  check_floating(fn.c_str(), "x", x);
  const int64_t B = x.size(0), T = x.size(1), H = dims_.n_heads, D = head_dim_;
  MIXLAB_CHECK(T > 0, "{}: x must have T > 0, got shape {}", fn, shape_string(x));
  if (T == 1) return step(*state, x.select(1, 0)).unsqueeze(1);  // one token: the step is cheaper
  torch::NoGradGuard no_grad;                                    // the cache carries no history (as step's)
  const int64_t start = state->position();
  const auto qkv = split_heads(qkv_->forward(x), 3, H, D);  // 3 × (B,H,T,D)
  auto q = rope_apply(qkv[0], start), k = rope_apply(qkv[1], start), v = qkv[2];
  torch::Tensor y;
  if (window_ > 0) {
    auto past = state->window_past();  // read before the chunk overwrites the ring
    y = attend_window(q, k, v, past.first, past.second, start);
    state->append(k, v);
  } else {
    state->append(k, v);
    y = attend_full(q, state->keys(), state->values());  // the cache in place: no concatenation
  }
  return out_->forward(y.permute({0, 2, 1, 3}).reshape({B, T, dims_.d_model}));
}

std::unique_ptr<MixerState> AttentionMixer::init_state(int64_t batch) {
  MIXLAB_CHECK(batch > 0, "{}: init_state batch must be > 0, got {}", spec(), batch);
  auto w = qkv_->weight;
  return std::make_unique<KvCacheState>(batch, dims_.n_heads, head_dim_, window_, w.options().requires_grad(false));
}

torch::Tensor AttentionMixer::step(MixerState& state_base, const torch::Tensor& x_t) {
  auto* state = dynamic_cast<KvCacheState*>(&state_base);
  MIXLAB_CHECK(state != nullptr, "{} step: state was not created by this mixer's init_state", spec());
  const int64_t B = x_t.size(0), H = dims_.n_heads, D = head_dim_;
  check_shape("attention step", "x_t", x_t, {state->batch(), dims_.d_model}, "(B,C)");
  if (!torch::GradMode::is_enabled()) {
    auto x = x_t.contiguous();  // a slice x[:, t] of a (B,T,C) batch is not: one copy, then raw rows
    if (rows_ready(*state, x)) return step_rows(*state, x);
  }
  const int64_t pos = state->position();
  auto qkv = qkv_->forward(x_t).view({B, 1, 3, H, D}).permute({2, 0, 3, 1, 4});  // (3,B,H,1,D)
  auto q = rope_apply(qkv[0], pos), k = rope_apply(qkv[1], pos), v = qkv[2];
  // Scores against the cached past plus the current token. Full attention without autograd
  // pushes first and reads the cache in place: concatenating the past with the current token
  // copied the whole cache every token. The window keeps the concatenation (its ring holds only
  // the W past positions, and the current token would overwrite the oldest one still read), and
  // so does a step that autograd records (the cache is written without history).
  const bool in_place = window_ <= 0 && !(torch::GradMode::is_enabled() && k.requires_grad());
  torch::Tensor keys, values;
  if (in_place) {
    state->push(k.squeeze(2), v.squeeze(2));
    keys = state->keys();
    values = state->values();
  } else {
    keys = torch::cat({state->keys(), k}, 2);
    values = torch::cat({state->values(), v}, 2);
  }
  auto p = (torch::matmul(q, keys.transpose(-1, -2)) / std::sqrt(static_cast<double>(D))).softmax(-1);
  auto y = torch::matmul(p, values);  // (B,H,1,D)
  if (!in_place) state->push(k.squeeze(2), v.squeeze(2));
  return out_->forward(y.squeeze(2).reshape({B, dims_.d_model}));
}

}  // namespace mixlab
