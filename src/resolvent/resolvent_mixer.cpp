// ResolventMixer: projections, RoPE, pattern scores, gate, the resolvent solve and its decode.
#include "mixlab/resolvent/resolvent_mixer.h"

#include <cmath>
#include <random>

#include "mixlab/core/error.h"
#include "mixlab/core/rope.h"
#include "mixlab/core/spec_args.h"
#include "mixlab/core/split_heads.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/resolvent/pattern_attention.h"
#include "mixlab/resolvent/pattern_scores.h"
#include "resolvent_gate.h"

namespace mixlab {

using torch::Tensor;

ResolventMixer::ResolventMixer(const std::string& pattern_spec, const MixerDims& dims, ResolventOptions options)
    : pattern_(Pattern::parse(pattern_spec)), dims_(dims), options_(options) {
  const char* fn = "ResolventMixer";
  MIXLAB_CHECK(dims.n_heads >= 1 && dims.d_model >= 1 && dims.d_model % dims.n_heads == 0,
               "{}: d_model (C = {}) must be a positive multiple of n_heads (H = {})", fn, dims.d_model, dims.n_heads);
  heads_ = dims.n_heads;
  head_dim_ = dims.d_model / dims.n_heads;
  MIXLAB_CHECK(!options.rope || head_dim_ % 2 == 0,
               "{}: RoPE needs an even head dim D = C/H, got D = {} (C = {}, H = {})", fn, head_dim_, dims.d_model,
               dims.n_heads);
  const int64_t C = dims.d_model;
  n_proj_ = (shared() ? 0 : 2) + (pattern_.recurrent() ? 2 : 0) + 1 + (gated() ? 1 : 0);
  in_proj_ = register_module("in_proj", torch::nn::Linear(C, n_proj_ * C));
  out_proj_ = register_module("out_proj", torch::nn::Linear(C, C));
  torch::NoGradGuard no_grad;
  MIXLAB_CHECK(options.gate_init == kGateInitSpectrum || (options.gate_init > 0 && options.gate_init < 1),
               "{}: gate_init must be in (0, 1) or kGateInitSpectrum, got {}", fn, options.gate_init);
  if (gated()) {
    torch::Tensor g0;
    if (options.gate_init == kGateInitSpectrum) {
      // Mamba-2 decay init: g = exp(−Δ a), Δ log-uniform in [1e-3, 1e-1], a uniform in [1, 16].
      auto dt = torch::exp(torch::rand({C}) * (std::log(1e-1) - std::log(1e-3)) + std::log(1e-3));
      auto a = 1 + 15 * torch::rand({C});
      g0 = torch::exp(-dt * a).clamp(0.01, 0.99);
    } else {
      g0 = torch::full({C}, options.gate_init);
    }
    const int64_t gate_block = n_proj_ - 1;
    in_proj_->bias.narrow(0, gate_block * C, C).copy_(torch::log(g0 / (1 - g0)));
    in_proj_->weight.narrow(0, gate_block * C, C).mul_(0.1);
  }
  if (shared()) {
    delta_proj_ = register_module("delta_proj", torch::nn::Linear(C, heads_));
    delta_proj_->weight.zero_();
    delta_proj_->bias.zero_();
  }
  if (options.rope) {
    rope_inv_ = rope_inv_freq(head_dim_, options.rope_base);  // the raw-row step's RoPE rates
  }
}

void ResolventMixer::check_input(const char* fn, const Tensor& x) const {
  check_dim(fn, "x", x, 3, "(B,T,C)");
  check_floating(fn, "x", x);
  check_cpu(fn, "x", x);
  MIXLAB_CHECK(x.size(2) == dims_.d_model && x.size(1) >= 1,
               "{}: x must have shape (B,T,C) with C = {} and T >= 1, got {}", fn, dims_.d_model, shape_string(x));
  MIXLAB_CHECK(x.scalar_type() == in_proj_->weight.scalar_type(), "{}: x must have the layer's dtype {}, got {}", fn,
               c10::toString(in_proj_->weight.scalar_type()), c10::toString(x.scalar_type()));
}

ResolventCoeffs ResolventMixer::coefficients(const Tensor& x, const ResolventState* past) {
  check_input("ResolventMixer::coefficients", x);
  const int64_t B = x.size(0), T = x.size(1);
  // (B,T,n·C) → n × (B,H,T,D)
  const auto proj = split_heads(in_proj_->forward(x), n_proj_, heads_, head_dim_);
  size_t k = 0;
  auto next = [&] { return proj[k++]; };
  // RoPE, scores and softmax in one op per coefficient matrix (mixlab/resolvent/pattern_attention.h):
  // it reads q and k straight from the strided projection output.
  const double rope_base = options_.rope ? options_.rope_base : 0.0;
  ResolventCoeffs c;
  if (!shared()) {
    auto q = next(), kk = next();
    auto a = pattern_attention(q, kk, pattern_, true, rope_base, past, key_channel_a());
    c.qa = a.queries;
    c.ka = a.keys;
    c.alpha = a.probs;
  }
  if (pattern_.recurrent()) {
    auto q = next(), kk = next();
    auto b = pattern_attention(q, kk, pattern_, false, rope_base, past, key_channel_b());
    c.qb = b.queries;
    c.kb = b.keys;
    c.beta = b.probs;
  } else {
    c.beta = torch::zeros({B, heads_, T, 0}, x.options());
  }
  c.v = next();
  if (gated()) c.gate = torch::sigmoid(next());
  if (shared()) {
    c.delta = delta_proj_->forward(x).permute({0, 2, 1}).unsqueeze(-1);  // (B,H,T,1)
    c.alpha = 1 + c.delta;
  }
  return c;
}

std::vector<Tensor> ResolventMixer::keys_of(const ResolventCoeffs& c) const {
  std::vector<Tensor> keys;
  if (!shared()) keys.push_back(c.ka);
  if (pattern_.recurrent()) keys.push_back(c.kb);
  return keys;
}

Tensor ResolventMixer::output(const Tensor& y_heads) {
  const int64_t B = y_heads.size(0), T = y_heads.size(2);
  return out_proj_->forward(y_heads.permute({0, 2, 1, 3}).reshape({B, T, dims_.d_model}));
}

Tensor ResolventMixer::forward(const Tensor& x) {
  check_input("ResolventMixer::forward", x);
  auto c = coefficients(x);
  auto z = detail::resolvent_forward_sigmoid_gate(c.alpha, c.beta, c.v, pattern_, c.gate);
  if (shared()) z = z - (gated() ? (1 - c.gate) : torch::ones_like(c.v)) * c.delta * c.v;
  return output(z);
}

Tensor ResolventMixer::forward_chunk(const Tensor& x, ResolventState& state) {
  check_input("ResolventMixer::forward_chunk", x);
  MIXLAB_CHECK(state.batch() == x.size(0), "ResolventMixer::forward_chunk: x must have B = {} (the state's), got {}",
               state.batch(), shape_string(x));
  auto c = coefficients(x, &state);
  auto z = detail::resolvent_forward_sigmoid_gate(c.alpha, c.beta, c.v, pattern_, c.gate, &state);
  state.append(state.layout().store_x ? c.v : Tensor(), state.layout().store_y ? z : Tensor(), keys_of(c));
  if (shared()) z = z - (gated() ? (1 - c.gate) : torch::ones_like(c.v)) * c.delta * c.v;
  return output(z);
}

Tensor ResolventMixer::prefill(MixerState& state_in, const Tensor& x) {
  auto* state = dynamic_cast<ResolventState*>(&state_in);
  MIXLAB_CHECK(state != nullptr, "ResolventMixer::prefill: state must come from this mixer's init_state");
  return forward_chunk(x, *state);
}

ResolventStateLayout ResolventMixer::state_layout() const {
  ResolventStateLayout layout;
  layout.store_x = !shared();
  layout.store_y = pattern_.recurrent();
  if (!shared()) layout.extra_dims.push_back(head_dim_);
  if (pattern_.recurrent()) layout.extra_dims.push_back(head_dim_);
  return layout;
}

std::unique_ptr<MixerState> ResolventMixer::init_state(int64_t batch) {
  return std::make_unique<ResolventState>(pattern_, batch, heads_, head_dim_, in_proj_->weight.scalar_type(),
                                          state_layout());
}

Tensor ResolventMixer::step(MixerState& state_in, const Tensor& x_t) {
  const char* fn = "ResolventMixer::step";
  auto* state = dynamic_cast<ResolventState*>(&state_in);
  MIXLAB_CHECK(state != nullptr, "{}: state must come from this mixer's init_state", fn);
  check_shape(fn, "x_t", x_t, {state->batch(), dims_.d_model}, "(B,C)");
  // Decode is dispatch-bound (a few thousand multiply-adds per head and token): without autograd
  // it runs on raw rows. The ATen ops below stay the reference it is tested against.
  if (decodes_on_rows(x_t, *state)) return step_rows(*state, x_t.contiguous());
  torch::NoGradGuard no_grad;
  const int64_t B = x_t.size(0), t = state->position();
  auto proj = in_proj_->forward(x_t).view({B, n_proj_, heads_, head_dim_}).permute({1, 0, 2, 3});  // (n,B,H,D)
  int64_t k = 0;
  auto next = [&] { return proj.select(0, k++); };
  auto rope = [&](const Tensor& v) {
    return options_.rope ? rope_apply(v.unsqueeze(2), t, options_.rope_base).squeeze(2) : v;
  };
  Tensor qa, ka, qb, kb, alpha, beta, gate, delta;
  if (!shared()) {
    qa = rope(next());
    ka = rope(next());
  }
  if (pattern_.recurrent()) {
    qb = rope(next());
    kb = rope(next());
  }
  auto v = next();
  if (gated()) gate = torch::sigmoid(next());
  if (!shared()) {
    alpha = torch::softmax(pattern_scores_step(*state, qa, ka, true, key_channel_a()), -1);
  } else {
    delta = delta_proj_->forward(x_t).unsqueeze(-1);  // (B,H,1)
    alpha = 1 + delta;
  }
  if (pattern_.recurrent()) {
    auto s = pattern_scores_step(*state, qb, kb, false, key_channel_b());
    beta = s.size(2) > 0 ? torch::softmax(s, -1) : s;
  } else {
    beta = torch::zeros({B, heads_, 0}, x_t.options());
  }
  std::vector<Tensor> keys;
  if (!shared()) keys.push_back(ka);
  if (pattern_.recurrent()) keys.push_back(kb);
  auto z = detail::resolvent_step_sigmoid_gate(*state, alpha, beta, v, gate, keys);
  if (shared()) z = z - (gated() ? (1 - gate) : torch::ones_like(v)) * delta * v;
  return out_proj_->forward(z.reshape({B, dims_.d_model}));
}

std::string resolvent_spec_parse(const std::string& spec, const std::string& args, ResolventOptions& options) {
  // The pattern's own items (a kind and its parameter: "band:8", "offsets:1,2,4", a union such as
  // "geom:1.5+power:1.5" with one ':' per operand) are positional; Pattern::parse reads them.
  const SpecArgs a(mixer_spec_context(spec), "resolvent", args, {"gate"}, 16);
  if (a.has("gate")) {
    // "mamba2" is the option's name until 2026-11-27, kept so old specs and checkpoints load.
    if (a.text("gate") == "spectrum" || a.text("gate") == "mamba2") {
      options.gate_init = kGateInitSpectrum;
    } else {
      options.gate_init = a.real("gate", options.gate_init, 0, 1);
      MIXLAB_CHECK(options.gate_init > 0 && options.gate_init < 1,
                   "{} must be strictly between 0 and 1 (or spectrum), got {}", a.key_context("gate"), a.text("gate"));
    }
  }
  return fmt::format("{}", fmt::join(a.positional(), ":"));
}

}  // namespace mixlab
