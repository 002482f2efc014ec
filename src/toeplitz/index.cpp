// Winding number / Fredholm index of Toeplitz symbols, and the companion-matrix zero count.
#include "mixlab/toeplitz/index.h"

#include <cmath>
#include <complex>
#include <utility>
#include <vector>

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
               "{}: need 0 < min_samples <= max_samples, got {} and {}", fn, options.min_samples, options.max_samples);
  torch::NoGradGuard no_grad;
  const auto t = lags_check(fn, lags_in);  // (N) double
  const int64_t N = t.size(0);
  const auto k = torch::arange(N, t.options());
  const double l1 = t.abs().sum().item<double>();
  const double l2 = (k * k * t.abs()).sum().item<double>();  // bound on |s''(θ)|
  const double zero_level = options.zero_tol * l1;

  ToeplitzIndex out;
  if (l1 == 0.0) {
    out.degenerate = true;
    out.reason = "all lags are zero: the symbol is identically 0";
    return out;
  }
  // Base grid: s(θ_m) = sum_k t_k e^{2πi k m / M} = M * ifft(t, M)[m], and s' likewise. Grid points
  // cost O(log M) each and refinement points O(N), so the grid doubles while more than 1/64 of its
  // arcs would need refinement (keeping half of the budget for the refinement).
  const auto dt = torch::complex(torch::zeros_like(t), k * t);  // s'(θ) = sum_k i k t_k e^{ikθ}
  int64_t M = next_pow2(std::max(options.min_samples, 8 * N));
  torch::Tensor s_grid, ds_grid;
  while (true) {
    s_grid = (torch::fft::ifft(t, M) * static_cast<double>(M)).contiguous();
    ds_grid = (torch::fft::ifft(dt, M) * static_cast<double>(M)).contiguous();
    const double h = kTwoPi / static_cast<double>(M);
    const int64_t failing = (s_grid.abs() <= h * ds_grid.abs() + 0.5 * h * h * l2).sum().item<int64_t>();
    if (failing * 64 <= M || 4 * M > options.max_samples) break;
    M *= 2;
  }
  const auto* sg = s_grid.data_ptr<c10::complex<double>>();
  const auto* dsg = ds_grid.data_ptr<c10::complex<double>>();

  // Off-grid points (refinement): s and s' by Horner's rule on p(z) = sum t_k z^k, z = e^{iθ};
  // s'(θ) = i z p'(z).
  const double* ta = t.data_ptr<double>();
  auto eval = [&](double theta) {
    const std::complex<double> z(std::cos(theta), std::sin(theta));
    std::complex<double> p(0.0), dp(0.0);
    for (int64_t j = N - 1; j >= 0; --j) {
      dp = dp * z + p;
      p = p * z + ta[j];
    }
    return std::make_pair(p, std::complex<double>(0.0, 1.0) * z * dp);
  };
  struct Arc {
    double a, b;                       // θ range
    std::complex<double> sa, dsa, sb;  // s(a), s'(a), s(b)
  };
  auto to_std = [](c10::complex<double> c) { return std::complex<double>(c.real(), c.imag()); };

  int64_t samples = M;
  double min_abs = INFINITY;
  double turns = 0.0;
  std::vector<Arc> stack;
  const double h0 = kTwoPi / static_cast<double>(M);
  for (int64_t m = 0; m < M; ++m) min_abs = std::min(min_abs, std::abs(to_std(sg[m])));
  bool certified = min_abs > zero_level;
  for (int64_t m = 0; m < M && certified; ++m) {
    stack.push_back({h0 * m, h0 * (m + 1), to_std(sg[m]), to_std(dsg[m]), to_std(sg[(m + 1) % M])});
    while (!stack.empty() && certified) {
      const Arc arc = stack.back();
      stack.pop_back();
      const double h = arc.b - arc.a;
      // The condition of the file header: s stays in a disk around s(a) that excludes 0.
      if (std::abs(arc.sa) > h * std::abs(arc.dsa) + 0.5 * h * h * l2) {
        turns += std::arg(arc.sb * std::conj(arc.sa));
        continue;
      }
      if (samples >= options.max_samples) {
        certified = false;
        break;
      }
      const double mid = 0.5 * (arc.a + arc.b);
      const auto [sm, dsm] = eval(mid);
      ++samples;
      min_abs = std::min(min_abs, std::abs(sm));
      if (std::abs(sm) <= zero_level) {
        certified = false;
        break;
      }
      stack.push_back({mid, arc.b, sm, dsm, arc.sb});
      stack.push_back({arc.a, mid, arc.sa, arc.dsa, sm});
    }
  }
  out.samples = samples;
  out.min_abs = min_abs;
  if (min_abs <= zero_level) {
    out.degenerate = true;
    out.reason = fmt::format("min |s(θ)| = {:.3e} <= zero_tol * sum|t| = {:.3e}: the symbol passes through 0", min_abs,
                             zero_level);
    return out;
  }
  if (!certified) {
    out.degenerate = true;
    out.reason = fmt::format(
        "could not certify the winding number within max_samples = {} points (min |s| = {:.3e} is small for "
        "the symbol's variation): raise max_samples",
        options.max_samples, min_abs);
    return out;
  }
  turns /= kTwoPi;
  const double rounded = std::round(turns);
  MIXLAB_ASSERT(std::abs(turns - rounded) < 1e-6, "certified winding sum {} is not an integer", turns);
  out.winding = static_cast<int64_t>(rounded);
  out.index = -out.winding;
  return out;
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
