// mixlab/core/row_kernels.h — decode-time arithmetic on raw rows (LayerNorm, Linear, GELU,
// softmax, dot, axpy, combine), and the test of whether a decode step may take them (raw_rows_ok).
//
// A decode step of the d = 64 compare model is ~0.1 MFLOP, yet its backbone (two pre-LN blocks,
// final LN and head) took 17 ATen calls per token: dispatch, not arithmetic. These loops do the
// same arithmetic on contiguous rows and took 35–40 µs off every mixer's token (measured:
// docs/log/benchmarks-2026-11.md, "Decode: the fused backbone"). They are compiled for x86-64-v3 and the baseline (GCC
// target_clones), and they accumulate like a plain loop, so they match at::layer_norm, at::addmm
// and at::gelu to float rounding, not bitwise.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace at {
class Tensor;
}

namespace mixlab::row {

// Scalar activations as ATen defines them, for the raw-row steps' per-element loops.
/// 1 / (1 + e^-x).
template <typename T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}
/// x sigmoid(x).
template <typename T>
inline T silu(T x) {
  return x / (T(1) + std::exp(-x));
}
/// log(1 + e^x), at::softplus with beta 1 and threshold 20.
template <typename T>
inline T softplus(T x) {
  return x > T(20) ? x : std::log1p(std::exp(x));
}
/// log sigmoid(x) = -softplus(-x), as at::log_sigmoid (stable for large |x|).
template <typename T>
inline T log_sigmoid(T x) {
  return std::min(x, T(0)) - std::log1p(std::exp(-std::abs(x)));
}

/// True when x (dim `dim`) and every defined tensor of `params` are contiguous CPU tensors of x's
/// dtype, float or double: then a decode step may run on raw rows; otherwise it keeps its ATen path.
bool raw_rows_ok(const at::Tensor& x, std::initializer_list<const at::Tensor*> params, int64_t dim = 2);

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

/// y += a x.
template <typename T>
void axpy(T a, const T* x, T* y, int64_t n);

/// sum_i a_i b_i.
template <typename T>
T dot(const T* a, const T* b, int64_t n);

/// x = softmax(x) in place (max subtracted first, as at::softmax); n >= 1. exp is a vectorised
/// series accurate to ~1 ulp; gaps below -87 (float) / -708 (double) give ~1e-38 / 1e-308, not 0;
/// a NaN logit makes the row NaN.
template <typename T>
void softmax(T* x, int64_t n);

/// y = sum_{r < rows} w[r] * A[r*stride .. r*stride + n), overwriting y (zeros when rows = 0): a
/// weighted sum of rows, e.g. attention's p V over cached values, or a Toeplitz row against
/// cached inputs read newest first (a negative stride). y must not alias A.
template <typename T>
void combine(const T* w, const T* A, int64_t stride, T* y, int64_t rows, int64_t n);

}  // namespace mixlab::row
