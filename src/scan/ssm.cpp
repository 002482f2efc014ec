#include "mixlab/scan/ssm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/core/row_kernels.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/scan/selective_scan.h"

namespace mixlab {

SsmMixer::SsmMixer(const MixerDims& dims, int64_t state_size) : dims_(dims), n_(state_size) {
  MIXLAB_CHECK(dims.d_model > 0, "ssm: d_model must be > 0, got {}", dims.d_model);
  MIXLAB_CHECK(state_size > 0 && state_size <= 1024, "ssm: state size N must be in [1, 1024], got {}", state_size);
  const int64_t C = dims.d_model;
  in_proj_ = register_module("in_proj", torch::nn::Linear(torch::nn::LinearOptions(C, 2 * C).bias(false)));
  dt_proj_ = register_module("dt_proj", torch::nn::Linear(C, C));
  bc_proj_ = register_module("bc_proj", torch::nn::Linear(torch::nn::LinearOptions(C, 2 * n_).bias(false)));
  out_proj_ = register_module("out_proj", torch::nn::Linear(torch::nn::LinearOptions(C, C).bias(false)));
  a_log_ = register_parameter("A_log", torch::log(torch::arange(1, n_ + 1, torch::kFloat)).repeat({C, 1}));
  d_skip_ = register_parameter("D", torch::ones({C}));
  torch::NoGradGuard no_grad;
  // Mamba's Δ init: Δ log-uniform in [1e-3, 1e-1]; bias = softplus⁻¹(Δ) = Δ + log(−expm1(−Δ)).
  auto dt = torch::exp(torch::rand({C}) * (std::log(0.1) - std::log(1e-3)) + std::log(1e-3));
  dt_proj_->bias.copy_(dt + torch::log(-torch::expm1(-dt)));
}

SsmMixer::Coefficients SsmMixer::coefficients(const torch::Tensor& x) {
  Coefficients k;
  auto uz = in_proj_->forward(x).chunk(2, -1);
  k.u = uz[0];
  k.z = uz[1];
  k.delta = torch::softplus(dt_proj_->forward(k.u));  // (...,C)
  auto bc = bc_proj_->forward(k.u).chunk(2, -1);      // (...,N) each
  k.b = bc[0];
  k.c = bc[1];
  k.a = -torch::exp(a_log_);  // (C,N), < 0
  return k;
}

torch::Tensor SsmMixer::finish(const Coefficients& k, const torch::Tensor& y) {
  return out_proj_->forward(y * torch::silu(k.z));
}

torch::Tensor SsmMixer::forward(const torch::Tensor& x) {
  check_shape("ssm forward", "x", x, {-1, -1, dims_.d_model}, "(B,T,C)");
  check_floating("ssm forward", "x", x);
  MIXLAB_CHECK(x.size(1) > 0, "ssm forward: x must have T > 0, got shape {}", shape_string(x));
  auto k = coefficients(x);
  // Each (c,n) is an order:1 resolvent row (seed 000 eq. 22); the fused scan runs all of them
  // without building the (B,T,C,N) coefficient tensors (selective_scan.h).
  return finish(k, selective_scan(k.u, k.delta, k.a, k.b, k.c, d_skip_));
}

torch::Tensor SsmMixer::prefill(MixerState& state_base, const torch::Tensor& x) {
  auto* state = dynamic_cast<SsmState*>(&state_base);
  MIXLAB_CHECK(state != nullptr, "ssm prefill: state was not created by this mixer's init_state");
  check_shape("ssm prefill", "x", x, {state->h_.size(0), -1, dims_.d_model}, "(B,T,C)");
  MIXLAB_CHECK(x.size(1) > 0, "ssm prefill: x must have T > 0, got shape {}", shape_string(x));
  torch::NoGradGuard no_grad;  // the state carries no history (as step)
  auto k = coefficients(x);
  torch::Tensor h_final;
  auto y = selective_scan(k.u, k.delta, k.a, k.b, k.c, d_skip_, state->h_, &h_final);
  state->h_ = h_final;
  state->pos_ += x.size(1);
  return finish(k, y);
}

std::unique_ptr<MixerState> SsmMixer::init_state(int64_t batch) {
  MIXLAB_CHECK(batch > 0, "ssm init_state: batch must be > 0, got {}", batch);
  return std::make_unique<SsmState>(torch::zeros({batch, dims_.d_model, n_}, a_log_.options().requires_grad(false)));
}

torch::Tensor SsmMixer::step(MixerState& state_base, const torch::Tensor& x_t) {
  auto* state = dynamic_cast<SsmState*>(&state_base);
  MIXLAB_CHECK(state != nullptr, "ssm step: state was not created by this mixer's init_state");
  check_shape("ssm step", "x_t", x_t, {state->h_.size(0), dims_.d_model}, "(B,C)");
  torch::NoGradGuard no_grad;  // decode: the state is updated in place
  const auto dtype = x_t.scalar_type();
  // A strided x_t (a time slice x[:, t]) is copied once below rather than sent down the ATen path.
  const bool raw = (dtype == torch::kFloat || dtype == torch::kDouble) && x_t.device().is_cpu() &&
                   in_proj_->weight.scalar_type() == dtype && a_log_.scalar_type() == dtype;
  if (!raw) {
    auto k = coefficients(x_t);  // (B,C) / (B,N): no time axis
    auto y = selective_scan_step(state->h_, k.u, k.delta, k.a, k.b, k.c, d_skip_);
    ++state->pos_;
    return finish(k, y);
  }
  // Raw rows: the four projections, softplus and the gate without a dispatch per op (a decode
  // step of the compare model is dispatch-bound); the recurrence is the fused scan's own step.
  const int64_t B = x_t.size(0), C = dims_.d_model, N = n_;
  auto u = at::empty({B, C}, x_t.options()), delta = at::empty({B, C}, x_t.options());
  auto b = at::empty({B, N}, x_t.options()), c = at::empty({B, N}, x_t.options());
  auto z = at::empty({B, C}, x_t.options()), out = at::empty({B, C}, x_t.options());
  torch::Tensor y;
  const auto xc = x_t.contiguous();
  AT_DISPATCH_FLOATING_TYPES(dtype, "ssm step", [&] {
    using T = scalar_t;
    std::vector<T> uz(static_cast<size_t>(2 * C)), bc(static_cast<size_t>(2 * N));
    for (int64_t r = 0; r < B; ++r) {
      row::linear<T>(in_proj_->weight.data_ptr<T>(), nullptr, xc.data_ptr<T>() + r * C, uz.data(), 2 * C, C);
      T* ur = u.data_ptr<T>() + r * C;
      std::copy(uz.begin(), uz.begin() + C, ur);
      std::copy(uz.begin() + C, uz.end(), z.data_ptr<T>() + r * C);
      T* dr = delta.data_ptr<T>() + r * C;
      row::linear<T>(dt_proj_->weight.data_ptr<T>(), dt_proj_->bias.data_ptr<T>(), ur, dr, C, C);
      for (int64_t i = 0; i < C; ++i) dr[i] = row::softplus(dr[i]);
      row::linear<T>(bc_proj_->weight.data_ptr<T>(), nullptr, ur, bc.data(), 2 * N, C);
      std::copy(bc.begin(), bc.begin() + N, b.data_ptr<T>() + r * N);
      std::copy(bc.begin() + N, bc.end(), c.data_ptr<T>() + r * N);
    }
    y = selective_scan_step(state->h_, u, delta, decay_rates(), b, c, d_skip_).contiguous();
    std::vector<T> g(static_cast<size_t>(C));
    for (int64_t r = 0; r < B; ++r) {
      const T* yr = y.data_ptr<T>() + r * C;
      const T* zr = z.data_ptr<T>() + r * C;
      for (int64_t i = 0; i < C; ++i) g[i] = yr[i] * row::silu(zr[i]);
      row::linear<T>(out_proj_->weight.data_ptr<T>(), nullptr, g.data(), out.data_ptr<T>() + r * C, C, C);
    }
  });
  ++state->pos_;
  return out;
}

const torch::Tensor& SsmMixer::decay_rates() {
  // a = -exp(A_log) changes only when A_log does: an optimiser step or a load bumps its version
  // or replaces its storage.
  // (An inference tensor has no version counter: recompute every time.)
  const int64_t version = a_log_.is_inference() ? -1 : a_log_._version();
  const void* data = a_log_.data_ptr();
  if (!a_cache_.defined() || version < 0 || a_cache_version_ != version || a_cache_data_ != data ||
      a_cache_.scalar_type() != a_log_.scalar_type()) {
    torch::NoGradGuard no_grad;
    a_cache_ = -torch::exp(a_log_.detach());
    a_cache_version_ = version;
    a_cache_data_ = data;
  }
  return a_cache_;
}

}  // namespace mixlab
