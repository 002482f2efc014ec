// Winding number / Fredholm index of Toeplitz symbols, and the companion-matrix zero count.
#include "mixlab/toeplitz/index.h"

#include <cmath>

#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/toeplitz/toeplitz_mixer.h"

namespace mixlab {

namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

torch::Tensor lags_check(const char* fn, const torch::Tensor& lags) {
  check_defined(fn, "lags", lags);
  check_cpu(fn, "lags", lags);
  check_dim(fn, "lags", lags, 1, "(N)");
  check_floating(fn, "lags", lags);
  MIXLAB_CHECK(lags.size(0) > 0, "{}: lags must have N >= 1 entries, got {}", fn, shape_string(lags));
  return lags.detach().to(torch::kDouble).contiguous();
}

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

ToeplitzIndex toeplitz_index(const torch::Tensor& lags_in, const ToeplitzIndexOptions& options) {
  const char* fn = "toeplitz_index";
  MIXLAB_CHECK(options.min_samples > 0 && options.max_samples >= options.min_samples,
               "{}: need 0 < min_samples <= max_samples, got {} and {}", fn, options.min_samples,
               options.max_samples);
  torch::NoGradGuard no_grad;
  const auto t = lags_check(fn, lags_in);  // (N) double
  const int64_t N = t.size(0);
  const auto k = torch::arange(N, t.options());
  const double l1 = t.abs().sum().item<double>();
  const double l2 = (k * k * t.abs()).sum().item<double>();  // bound on |s''(θ)|
  const auto dt = torch::complex(torch::zeros_like(t), k * t);  // coefficients of s'(θ) = sum i k t_k e^{ikθ}

  ToeplitzIndex out;
  if (l1 == 0.0) {
    out.degenerate = true;
    out.reason = "all lags are zero: the symbol is identically 0";
    return out;
  }
  int64_t M = next_pow2(std::max(options.min_samples, 8 * N));
  while (true) {
    // s(θ_m) = sum_k t_k e^{2πi k m / M} = M * ifft(t, M)[m]
    auto s = torch::fft::ifft(t, M) * static_cast<double>(M);   // (M) complex
    auto ds = torch::fft::ifft(dt, M) * static_cast<double>(M); // (M) complex
    auto abs_s = s.abs();
    out.samples = M;
    out.min_abs = abs_s.min().item<double>();
    if (out.min_abs <= options.zero_tol * l1) {
      out.degenerate = true;
      out.reason = fmt::format("min |s(θ)| = {:.3e} <= zero_tol * sum|t| = {:.3e}: the symbol passes through 0",
                               out.min_abs, options.zero_tol * l1);
      return out;
    }
    const double h = kTwoPi / static_cast<double>(M);
    const bool certified = (abs_s > h * ds.abs() + 0.5 * h * h * l2).all().item<bool>();
    if (certified) {
      // Principal phase increments s_{m+1} / s_m (cyclic), summed.
      auto next = torch::roll(s, -1);
      const double turns = torch::angle(next * s.conj()).sum().item<double>() / kTwoPi;
      const double rounded = std::round(turns);
      MIXLAB_ASSERT(std::abs(turns - rounded) < 1e-6, "certified winding sum {} is not an integer", turns);
      out.winding = static_cast<int64_t>(rounded);
      out.index = -out.winding;
      return out;
    }
    if (M * 2 > options.max_samples) {
      out.degenerate = true;
      out.reason = fmt::format(
          "could not certify the winding number with {} samples (min |s| = {:.3e} is too small for the "
          "symbol's variation): raise max_samples",
          M, out.min_abs);
      return out;
    }
    M *= 2;
  }
}

int64_t toeplitz_zeros_inside(const torch::Tensor& lags_in, double* margin) {
  const char* fn = "toeplitz_zeros_inside";
  torch::NoGradGuard no_grad;
  const auto t = lags_check(fn, lags_in);
  auto ta = t.accessor<double, 1>();
  int64_t d = t.size(0) - 1;
  while (d >= 0 && ta[d] == 0.0) --d;
  MIXLAB_CHECK(d >= 0, "{}: all coefficients are zero (the zero polynomial has no finite root set)", fn);
  if (margin) *margin = INFINITY;
  if (d == 0) return 0;
  // Companion matrix of the monic p(z)/t_d: first row -t_{d-1}/t_d ... -t_0/t_d, ones below the diagonal.
  auto C = torch::zeros({d, d}, t.options());
  auto ca = C.accessor<double, 2>();
  for (int64_t j = 0; j < d; ++j) ca[0][j] = -ta[d - 1 - j] / ta[d];
  for (int64_t i = 1; i < d; ++i) ca[i][i - 1] = 1.0;
  auto mod = torch::linalg_eigvals(C).abs();  // (d)
  if (margin) *margin = (mod - 1.0).abs().min().item<double>();
  return (mod < 1.0).sum().item<int64_t>();
}

std::vector<ToeplitzIndexEntry> toeplitz_model_index(const torch::nn::Module& model,
                                                     const ToeplitzIndexOptions& options) {
  std::vector<ToeplitzIndexEntry> out;
  auto visit = [&](const std::string& path, const torch::nn::Module& m) {
    const auto* mixer = dynamic_cast<const ToeplitzMixer*>(&m);
    if (!mixer) return;
    const auto lags = mixer->lags().detach();  // (H,K,Tmax)
    for (int64_t h = 0; h < mixer->heads(); ++h)
      for (int64_t kk = 0; kk < mixer->kernel(); ++kk)
        out.push_back({path, h, kk, toeplitz_index(lags[h][kk], options)});
  };
  // The root is checked directly: named_modules(include_self) needs the root held by a shared_ptr.
  visit("", model);
  for (const auto& item : model.named_modules("", /*include_self=*/false)) visit(item.key(), *item.value());
  return out;
}

}  // namespace mixlab
