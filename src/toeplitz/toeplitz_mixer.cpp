// ToeplitzMixer: spec parsing, parameters, forward, decode.
#include "mixlab/toeplitz/toeplitz_mixer.h"

#include <algorithm>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/core/spec_args.h"
#include "mixlab/core/tensor_checks.h"

namespace mixlab {

ToeplitzMixerOptions toeplitz_mixer_options_parse(const std::string& args_spec) {
  const SpecArgs a(mixer_spec_context(args_spec.empty() ? "toeplitz" : "toeplitz:" + args_spec), "toeplitz", args_spec,
                   {"heads", "kernel"});
  ToeplitzMixerOptions opts;
  opts.heads = a.integer("heads", opts.heads, 1, kSpecMaxInt);
  opts.kernel = a.integer("kernel", opts.kernel, 1, kSpecMaxInt);
  return opts;
}

ToeplitzMixer::ToeplitzMixer(const std::string& args_spec, const MixerDims& dims)
    : ToeplitzMixer(toeplitz_mixer_options_parse(args_spec), dims) {}

ToeplitzMixer::ToeplitzMixer(const ToeplitzMixerOptions& options, const MixerDims& dims)
    : d_model_(dims.d_model),
      heads_(options.heads > 0 ? options.heads : dims.n_heads),
      kernel_(options.kernel),
      max_len_(dims.max_len),
      path_(options.path) {
  MIXLAB_CHECK(d_model_ > 0, "ToeplitzMixer: d_model must be positive, got {}", d_model_);
  MIXLAB_CHECK(heads_ > 0, "ToeplitzMixer: heads must be positive, got {}", heads_);
  MIXLAB_CHECK(kernel_ > 0, "ToeplitzMixer: kernel must be positive, got {}", kernel_);
  MIXLAB_CHECK(max_len_ > 0, "ToeplitzMixer: max_len (Tmax) must be positive, got {}", max_len_);
  MIXLAB_CHECK(d_model_ % heads_ == 0, "ToeplitzMixer: d_model C = {} is not divisible by heads H = {}", d_model_,
               heads_);
  head_dim_ = d_model_ / heads_;
  MIXLAB_CHECK(kernel_ <= head_dim_, "ToeplitzMixer: kernel K = {} is wider than the head dim D = C/H = {}", kernel_,
               head_dim_);
  in_proj_ = register_module("in_proj", torch::nn::Linear(d_model_, d_model_));
  out_proj_ = register_module("out_proj", torch::nn::Linear(d_model_, d_model_));
  // Kaiming-normal over the lag axis: every output position reads up to Tmax lags (fan_in).
  auto lags = torch::empty({heads_ * kernel_, max_len_});
  torch::nn::init::kaiming_normal_(lags, 0.0, torch::kFanIn, torch::kReLU);
  lags_ = register_parameter("lags", lags.reshape({heads_, kernel_, max_len_}));
  pos_bias_ = register_parameter("pos_bias", torch::zeros({heads_, max_len_}));
}

MixerCostFigures ToeplitzMixer::cost_figures(int64_t T) const {
  (void)T;
  MixerCostFigures f;
  f.equivalent_pattern = "causal";
  f.structure = "Toeplitz (graph of causal)";
  f.basis = "the graph of causal: row t reads every earlier input through the kernel, decode keeps them all";
  return f;
}

std::string ToeplitzMixer::spec() const { return fmt::format("toeplitz:heads={}:kernel={}", heads_, kernel_); }

torch::Tensor ToeplitzMixer::kernel_combine(const torch::Tensor& zk) const {
  // zk (B,H,K,T,D). z[..., c] = sum_m zk[:, :, m, :, c + m - p], zero outside [0, D).
  if (kernel_ == 1) return zk.select(2, 0);
  const int64_t p = (kernel_ - 1) / 2;
  auto padded = torch::constant_pad_nd(zk, {p, kernel_ - 1 - p});  // (B,H,K,T,D+K-1), padded[q] = zk[q-p]
  torch::Tensor z;
  for (int64_t m = 0; m < kernel_; ++m) {
    auto part = padded.select(2, m).narrow(-1, m, head_dim_);  // channel c reads zk channel c + m - p
    z = z.defined() ? z + part : part;
  }
  return z;
}

torch::Tensor ToeplitzMixer::forward(const torch::Tensor& x) {
  const char* fn = "ToeplitzMixer::forward";
  check_defined(fn, "x", x);
  check_dim(fn, "x", x, 3, "(B,T,C)");
  check_shape(fn, "x", x, {-1, -1, d_model_}, "(B,T,C)");
  check_floating(fn, "x", x);
  const int64_t B = x.size(0), T = x.size(1);
  MIXLAB_CHECK(T > 0, "{}: x must have T > 0 tokens (shape (B,T,C)), got {}", fn, shape_string(x));
  MIXLAB_CHECK(T <= max_len_, "{}: sequence length T = {} exceeds the layer's max_len Tmax = {} (x {})", fn, T,
               max_len_, shape_string(x));
  auto u = in_proj_->forward(x).view({B, T, heads_, head_dim_}).permute({0, 2, 1, 3});  // (B,H,T,D)
  return out_proj_->forward(mix(u).permute({0, 2, 1, 3}).reshape({B, T, d_model_}));
}

torch::Tensor ToeplitzMixer::mix(const torch::Tensor& u) const {
  const int64_t B = u.size(0), T = u.size(2);
  if (kernel_ == 1) return toeplitz_forward(lags_.select(1, 0), u, pos_bias_, path_);  // (B,H,T,D)
  // One Toeplitz op over H*K "heads": head (h,m) sees u[h] and lags[h,m].
  auto uk = u.unsqueeze(2).expand({B, heads_, kernel_, T, head_dim_}).reshape({B, heads_ * kernel_, T, head_dim_});
  auto zk = toeplitz_forward(lags_.reshape({heads_ * kernel_, max_len_}), uk, {}, path_)
                .view({B, heads_, kernel_, T, head_dim_});
  return kernel_combine(zk) + pos_bias_.narrow(1, 0, T).reshape({1, heads_, T, 1});
}

void ToeplitzState::io(StateArchive& ar) {
  ar.scalar("position", position_);
  ar.tensor("cache", cache_, false);
  MIXLAB_CHECK(position_ == 0 ||
                   (cache_.defined() && cache_.dim() == 4 && cache_.size(0) == batch_ && cache_.size(2) >= position_),
               "toeplitz state: cache {} cannot hold {} positions of batch {}",
               cache_.defined() ? shape_string(cache_) : "undefined", position_, batch_);
}

std::unique_ptr<MixerState> ToeplitzMixer::init_state(int64_t batch) {
  MIXLAB_CHECK(batch > 0, "ToeplitzMixer::init_state: batch must be positive, got {}", batch);
  auto state = std::make_unique<ToeplitzState>();
  state->batch_ = batch;
  return state;
}

void ToeplitzMixer::grow_cache(ToeplitzState& state, const torch::TensorOptions& options, int64_t positions) const {
  // Grow by doubling so appends are amortised O(B C).
  const int64_t pos = state.position_;
  auto& cache = state.cache_;
  if (cache.defined() && cache.size(2) >= positions && cache.dtype() == options.dtype()) return;
  const int64_t capacity = std::min(max_len_, std::max<int64_t>(16, 2 * positions));
  auto grown = torch::zeros({state.batch_, heads_, capacity, head_dim_}, options.requires_grad(false));
  if (pos > 0) {
    torch::NoGradGuard no_grad;
    grown.narrow(2, 0, pos).copy_(cache.narrow(2, 0, pos));
  }
  cache = grown;
}

torch::Tensor ToeplitzMixer::prefill(MixerState& state_base, const torch::Tensor& x) {
  const char* fn = "ToeplitzMixer::prefill";
  auto* state = dynamic_cast<ToeplitzState*>(&state_base);
  MIXLAB_CHECK(state != nullptr, "{}: state was not created by ToeplitzMixer::init_state", fn);
  check_defined(fn, "x", x);
  check_shape(fn, "x", x, {state->batch_, -1, d_model_}, "(B,T,C)");
  check_floating(fn, "x", x);
  const int64_t B = state->batch_, T = x.size(1), start = state->position_, P = start + T;
  MIXLAB_CHECK(T > 0, "{}: x must have T > 0 tokens, got shape {}", fn, shape_string(x));
  MIXLAB_CHECK(P <= max_len_, "{}: position {} + T = {} exceeds the layer's max_len Tmax = {}", fn, start, T, max_len_);
  if (T == 1) return step(*state, x.select(1, 0)).unsqueeze(1);  // one row of T: the step is cheaper
  torch::NoGradGuard no_grad;                                    // the cache holds values (as step's)
  auto u = in_proj_->forward(x).view({B, T, heads_, head_dim_}).permute({0, 2, 1, 3});  // (B,H,T,D)
  grow_cache(*state, u.options(), P);
  state->cache_.narrow(2, start, T).copy_(u);
  // The chunk's rows read every cached position: mix the whole prefix and keep the last T rows.
  auto z = mix(state->cache_.narrow(2, 0, P)).narrow(2, start, T);
  state->position_ = P;
  return out_proj_->forward(z.permute({0, 2, 1, 3}).reshape({B, T, d_model_}));
}

torch::Tensor ToeplitzMixer::step(MixerState& state_base, const torch::Tensor& x_t) {
  const char* fn = "ToeplitzMixer::step";
  auto* state = dynamic_cast<ToeplitzState*>(&state_base);
  MIXLAB_CHECK(state != nullptr, "{}: state was not created by ToeplitzMixer::init_state", fn);
  check_defined(fn, "x_t", x_t);
  check_shape(fn, "x_t", x_t, {state->batch_, d_model_}, "(B,C)");
  check_floating(fn, "x_t", x_t);
  const int64_t B = state->batch_, pos = state->position_;
  MIXLAB_CHECK(pos < max_len_, "{}: position {} reached the layer's max_len Tmax = {}", fn, pos, max_len_);

  if (!torch::GradMode::is_enabled()) {
    auto x = x_t.contiguous();  // a slice x[:, t] of a (B,T,C) batch is not: one copy, then raw rows
    if (rows_ready(*state, x)) return step_rows(*state, x);
  }

  auto u = in_proj_->forward(x_t).view({B, heads_, head_dim_});  // (B,H,D)
  grow_cache(*state, u.options(), pos + 1);
  auto& cache = state->cache_;
  {
    torch::NoGradGuard no_grad;  // the cache holds values; gradients of decode are not supported
    cache.select(2, pos).copy_(u);
  }
  const int64_t P = pos + 1;
  auto hist = cache.narrow(2, 0, P);                                                  // (B,H,P,D)
  auto w = lags_.narrow(2, 0, P).flip({2});                                           // (H,K,P): w[..,j] = lag P-1-j
  auto zk = torch::einsum("hkj,bhjd->bhkd", {w, hist}).unsqueeze(3);                  // (B,H,K,1,D)
  auto z = kernel_combine(zk) + pos_bias_.select(1, pos).reshape({1, heads_, 1, 1});  // (B,H,1,D)
  state->position_ = P;
  return out_proj_->forward(z.reshape({B, d_model_}));
}

}  // namespace mixlab
