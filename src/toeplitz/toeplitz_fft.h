// Private: the Toeplitz op's native FFT path (toeplitz.cpp calls it for float32 and float64):
// the fused FFT convolution of fft_conv_kernels.h over at::parallel_for, and its autograd function.
#pragma once

#include <torch/torch.h>

namespace mixlab::detail {

/// y (B,H,T,D) = causal Toeplitz mix of x (B,H,T,D) with lags t[:, :T] (t is (H,Tmax)), plus
/// bias[:, :T] when defined; n = toeplitz_fft_size(T). Differentiable in t, x and bias (first
/// order: the backward runs the native kernels and is not itself differentiable). Arguments are
/// checked by the caller (toeplitz_check); x and t must be float32 or float64.
torch::Tensor toeplitz_fft_native(const torch::Tensor& t, const torch::Tensor& x, const torch::Tensor& bias, int64_t n);

}  // namespace mixlab::detail
