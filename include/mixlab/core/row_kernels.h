// mixlab/core/row_kernels.h — decode-time arithmetic on raw rows (LayerNorm, Linear, GELU).
//
// A decode step of the d = 64 compare model is ~0.1 MFLOP, yet its backbone (two pre-LN blocks,
// final LN and head) took 17 ATen calls per token: dispatch, not arithmetic. These loops do the
// same arithmetic on contiguous rows and took 35–40 µs off every mixer's token (measured:
// docs/BENCHMARKS.md, "Decode: the fused backbone"). They are compiled for x86-64-v3 and the baseline (GCC
// target_clones), and they accumulate like a plain loop, so they match at::layer_norm, at::addmm
// and at::gelu to float rounding, not bitwise.
#pragma once

#include <cstdint>

namespace mixlab::row {

/// y = (x - mean) / sqrt(var + eps) * w + b over one row of n (biased variance, as LayerNorm);
/// w or b null means 1 or 0. x and y may alias.
template <typename T>
void layer_norm(const T* x, T* y, const T* w, const T* b, int64_t n, double eps);

/// y = W x (+ bias) for one row: W is (out, in) row-major, as torch::nn::Linear's weight. bias
/// may be null. y must not alias x.
template <typename T>
void linear(const T* W, const T* bias, const T* x, T* y, int64_t out, int64_t in);

/// x = gelu(x) (the exact, erf form: torch's default), in place.
template <typename T>
void gelu(T* x, int64_t n);

/// y += x.
template <typename T>
void add(const T* x, T* y, int64_t n);

}  // namespace mixlab::row
