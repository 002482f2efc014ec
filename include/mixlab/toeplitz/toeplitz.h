// mixlab/toeplitz/toeplitz.h — causal Toeplitz token mixing Y = T X (+ per-position bias).
//
// Seed 003 §3-4, SPEC-NOTES §3. One weight per lag and head, shared over positions:
//
//   y[b,h,i,:] = sum_{j<=i} t[h, i-j] * x[b,h,j,:]  +  bias[h, i]          (0-based positions)
//
// Shapes (letters: mixlab/core/tensor_checks.h):
//   t     (H, Tmax)   lag weights, t[h,k] multiplies the token k steps back; only t[:, :T] is read
//   x     (B, H, T, D)
//   bias  (H, Tmax)   optional (undefined tensor = none); bias[:, :T] is added per position
//   y     (B, H, T, D)
//
// Two paths, equal up to rounding (tested against the element-by-element reference below):
//   kFft           circulant embedding of size n >= 2T (next power of two). For float32 and
//                  float64 a native kernel (src/toeplitz/fft_conv_kernels.inc): two columns per
//                  complex FFT, the group's sequence kept in cache from the load of x to the
//                  store of y, one build per instruction set; forward and backward native, the
//                  backward not itself differentiable. Under ComposedToeplitzFftGuard: LibTorch's
//                  real FFTs (torch::fft::rfft/irfft along T), differentiable to any order.
//                  O(B H D n log n) time, no T x T tensor anywhere (forward or backward).
//   kMaterialized  builds the lower-triangular (H, T, T) matrix from t (one unfold of the flipped
//                  lag vector) and multiplies with a batched matmul. O(B H T^2 D) time, O(H T^2)
//                  memory; faster for short T (the seed's observation, measured here).
//   kAuto          kMaterialized for T < kToeplitzFftCrossoverT, else kFft.
// Gradients for t, x and bias: the native FFT path has its own backward; the others come from
// LibTorch's autograd through their ops.
//
// Cost per token: O(log T) amortised for a full sequence on the FFT path; decode (one new token
// given the cached past, see ToeplitzMixer::step) is O(T) — the last row of T.
//
// Not supported: non-CPU tensors, dtypes other than float32/float64 (bfloat16/half FFTs are not
// available on LibTorch's CPU build), anti-causal (upper-triangular) lags, T > Tmax.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "mixlab/core/reference_guard.h"

namespace mixlab {

enum class ToeplitzPath { kAuto, kFft, kMaterialized };

/// Sequence length from which kAuto takes the FFT path. Measured on this machine (2-core x86 CPU,
/// LibTorch 1.13.1, float32, one thread, (B,H,D) = (1,2,32)) by bench/toeplitz_bench.cpp (BM_Fft*
/// vs BM_Materialized*, docs/log/benchmarks-2026-11.md, Toeplitz section): with the native FFT kernel the
/// forward ties with the materialised matmul at T = 32 and 64 (0.017 vs 0.016 ms, 0.022 vs 0.021)
/// and wins from 128 (0.028 vs 0.041); forward+backward the FFT path wins at every length (2.9x at
/// T = 32). With LibTorch's FFTs (before the native kernel) the crossover was T = 256.
constexpr int64_t kToeplitzFftCrossoverT = 32;

/// While one is alive on this thread, the FFT path runs LibTorch's rfft/irfft (the form before
/// the native kernel): the reference of the tests and the "composed" rows of the benchmarks.
using ComposedToeplitzFftGuard = ReferenceGuard<struct ToeplitzFftOp>;

/// "fft", "materialized" or "auto".
const char* toeplitz_path_name(ToeplitzPath path);

/// The path kAuto resolves to for sequence length T (the other paths resolve to themselves).
ToeplitzPath toeplitz_path_resolve(ToeplitzPath path, int64_t T);

/// Circulant size used by the FFT path for length T: the smallest power of two >= 2T.
int64_t toeplitz_fft_size(int64_t T);

/// y (B,H,T,D) = causal Toeplitz mix of x (B,H,T,D) with lags t (H,Tmax), plus bias[:, :T] when
/// `bias` (H,Tmax) is defined. Throws mixlab::Error (message names toeplitz_forward and the
/// argument) for: undefined/non-CPU tensors, wrong ranks, T = 0, B = 0 or D = 0, head count of t or
/// bias different from x's H, Tmax < T (lag vector shorter than the sequence), non-floating or
/// mismatched dtypes. Differentiable in t, x and bias.
torch::Tensor toeplitz_forward(const torch::Tensor& t, const torch::Tensor& x, const torch::Tensor& bias = {},
                               ToeplitzPath path = ToeplitzPath::kAuto);

/// Plain reference, no autograd: explicit loops over (b,h,i,j,d) accumulating in double, result in
/// x's dtype. Same checks as toeplitz_forward. For tests; O(B H T^2 D).
torch::Tensor toeplitz_reference_forward(const torch::Tensor& t, const torch::Tensor& x,
                                         const torch::Tensor& bias = {});

/// Gradients of <toeplitz_forward(t, x, bias), g> by explicit loops (double accumulation):
/// dt (H,Tmax) (zero beyond T), dx (B,H,T,D), dbias (H,Tmax) (zero beyond T; undefined when bias is).
struct ToeplitzGrads {
  torch::Tensor dt;
  torch::Tensor dx;
  torch::Tensor dbias;
};
ToeplitzGrads toeplitz_reference_backward(const torch::Tensor& t, const torch::Tensor& x, const torch::Tensor& bias,
                                          const torch::Tensor& grad_y);

}  // namespace mixlab
