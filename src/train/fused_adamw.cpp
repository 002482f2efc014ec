// The trainer's AdamW update with gradient clipping folded in, on raw memory (fused_adamw.h).
#include "mixlab/train/fused_adamw.h"

#include <cmath>

#include "mixlab/core/error.h"

namespace mixlab {
namespace {

bool fused_ok(const torch::Tensor& t, torch::ScalarType dtype) {
  return t.defined() && t.device().is_cpu() && t.layout() == torch::kStrided && t.scalar_type() == dtype &&
         t.is_contiguous();
}

template <typename T>
double sum_squares(const T* g, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  return s;
}

// One tensor's update, LibTorch's AdamW::step formulas in its order (scalars rounded to T as its
// kernels round them), the gradient scaled first as clip_grad_norm_ scales it.
struct AdamWScalars {
  double scale, decay, beta1, beta2, one_minus_beta1, one_minus_beta2, sqrt_bias2, eps, neg_step_size;
};

template <typename T>
void adamw_tensor(T* p, T* g, T* m, T* v, int64_t n, const AdamWScalars& s) {
  const T scale = static_cast<T>(s.scale), decay = static_cast<T>(s.decay);
  const T b1 = static_cast<T>(s.beta1), b2 = static_cast<T>(s.beta2);
  const T a1 = static_cast<T>(s.one_minus_beta1), a2 = static_cast<T>(s.one_minus_beta2);
  const T sb2 = static_cast<T>(s.sqrt_bias2), eps = static_cast<T>(s.eps), step = static_cast<T>(s.neg_step_size);
  const bool do_decay = s.decay != 1.0;
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i] * scale;
    g[i] = gi;
    T pi = p[i];
    if (do_decay) pi = pi * decay;
    const T mi = m[i] * b1 + a1 * gi;
    const T vi = v[i] * b2 + a2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const T denom = std::sqrt(vi) / sb2 + eps;
    p[i] = pi + step * (mi / denom);
  }
}

}  // namespace

double grad_norm(const std::vector<torch::Tensor>& params) {
  double sq = 0;
  for (const auto& p : params) {
    const auto& grad = p.grad();
    if (!grad.defined()) continue;
    if (fused_ok(grad, torch::kFloat32)) {
      sq += sum_squares(grad.data_ptr<float>(), grad.numel());
    } else if (fused_ok(grad, torch::kFloat64)) {
      sq += sum_squares(grad.data_ptr<double>(), grad.numel());
    } else {
      const double n = grad.detach().norm().item<double>();
      sq += n * n;
    }
  }
  return std::sqrt(sq);
}

double grad_clip_coef(double norm, double max_norm) {
  MIXLAB_CHECK(max_norm > 0, "grad_clip_coef: max_norm must be > 0, got {}", max_norm);
  return std::min(1.0, max_norm / (norm + 1e-6));
}

void adamw_fused_step(torch::optim::AdamW& optimizer, double grad_scale) {
  MIXLAB_CHECK(std::isfinite(grad_scale) && grad_scale > 0,
               "adamw_fused_step: grad_scale must be finite and > 0, got {}", grad_scale);
  torch::NoGradGuard no_grad;
  // Every tensor on the fused path, or none: a mix would be correct too, but one rule is simpler
  // to test. The state of a tensor the library has not stepped yet is created as AdamW creates it.
  bool fused = true;
  for (auto& group : optimizer.param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    if (o.amsgrad()) fused = false;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto dtype = p.scalar_type();
      if ((dtype != torch::kFloat32 && dtype != torch::kFloat64) || !fused_ok(p, dtype) || !fused_ok(p.grad(), dtype))
        fused = false;
    }
  }
  if (!fused) {
    for (auto& group : optimizer.param_groups())
      for (auto& p : group.params())
        if (p.grad().defined()) p.grad().mul_(grad_scale);
    optimizer.step();
    return;
  }
  auto& states = optimizer.state();
  for (auto& group : optimizer.param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const std::string key = c10::guts::to_string(p.unsafeGetTensorImpl());
      auto it = states.find(key);
      if (it == states.end()) {
        auto fresh = std::make_unique<torch::optim::AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        it = states.emplace(key, std::move(fresh)).first;
      }
      auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
      // A state loaded from a checkpoint may hold other strides or dtype than p: make it p's.
      const auto dtype = p.scalar_type();
      if (!fused_ok(st.exp_avg(), dtype)) st.exp_avg(st.exp_avg().to(dtype).contiguous());
      if (!fused_ok(st.exp_avg_sq(), dtype)) st.exp_avg_sq(st.exp_avg_sq().to(dtype).contiguous());
      MIXLAB_CHECK(st.exp_avg().numel() == p.numel() && st.exp_avg_sq().numel() == p.numel(),
                   "adamw_fused_step: the optimizer state (exp_avg, exp_avg_sq) of a parameter of {} elements "
                   "has {} and {} elements",
                   p.numel(), st.exp_avg().numel(), st.exp_avg_sq().numel());
      st.step(st.step() + 1);
      const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
      const double bias1 = 1 - std::pow(beta1, static_cast<double>(st.step()));
      const double bias2 = 1 - std::pow(beta2, static_cast<double>(st.step()));
      const AdamWScalars s{grad_scale,
                           1 - o.lr() * o.weight_decay(),
                           beta1,
                           beta2,
                           1 - beta1,
                           1 - beta2,
                           std::sqrt(bias2),
                           o.eps(),
                           -(o.lr() / bias1)};
      torch::Tensor grad = p.grad();
      AT_DISPATCH_FLOATING_TYPES(dtype, "adamw_fused_step", [&] {
        adamw_tensor<scalar_t>(p.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(), st.exp_avg().data_ptr<scalar_t>(),
                               st.exp_avg_sq().data_ptr<scalar_t>(), p.numel(), s);
      });
    }
  }
}

}  // namespace mixlab
