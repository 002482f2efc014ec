// Raw-row loops for the decoder block's decode step (see row_kernels.h).
#include "mixlab/core/row_kernels.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cmath>

// The same clones as the selective scan: AVX2 + FMA where the machine has them, the build's
// baseline elsewhere; one version under ASan (its instrumentation and ifuncs do not mix).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define MIXLAB_ROW_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define MIXLAB_ROW_CLONES
#endif

namespace mixlab::row {
namespace {

template <typename T>
MIXLAB_ROW_CLONES void layer_norm_impl(const T* x, T* y, const T* w, const T* b, int64_t n, T eps) {
  T mean = 0;
#pragma omp simd reduction(+ : mean)
  for (int64_t i = 0; i < n; ++i) mean += x[i];
  mean /= static_cast<T>(n);
  T var = 0;
#pragma omp simd reduction(+ : var)
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<T>(n);
  const T rstd = T(1) / std::sqrt(var + eps);
  for (int64_t i = 0; i < n; ++i) {
    const T z = (x[i] - mean) * rstd;
    y[i] = (w ? z * w[i] : z) + (b ? b[i] : T(0));
  }
}

template <typename T>
MIXLAB_ROW_CLONES void linear_impl(const T* W, const T* bias, const T* x, T* y, int64_t out, int64_t in) {
  for (int64_t r = 0; r < out; ++r) {
    const T* wr = W + r * in;
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < in; ++c) s += wr[c] * x[c];
    y[r] = bias ? s + bias[r] : s;
  }
}

template <typename T>
MIXLAB_ROW_CLONES T dot_impl(const T* a, const T* b, int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

template <typename T>
MIXLAB_ROW_CLONES void axpy_impl(T a, const T* x, T* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

template <typename T>
MIXLAB_ROW_CLONES void combine_impl(const T* w, const T* A, int64_t stride, T* y, int64_t rows, int64_t n) {
  // Column tiles of two AVX2 registers with four row accumulators each: the sums stay in
  // registers across the (long) row loop, and four independent FMA chains hide their latency.
  // A plain "y += w[r] * row" loop stored y back every row: latency-bound at 1k rows.
  constexpr int64_t L = 64 / sizeof(T);
  int64_t c = 0;
  for (; c + L <= n; c += L) {
    T a0[L] = {}, a1[L] = {}, a2[L] = {}, a3[L] = {};
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      const T* x0 = A + r * stride + c;
      const T *x1 = x0 + stride, *x2 = x1 + stride, *x3 = x2 + stride;
      const T w0 = w[r], w1 = w[r + 1], w2 = w[r + 2], w3 = w[r + 3];
#pragma omp simd
      for (int64_t i = 0; i < L; ++i) {
        a0[i] += w0 * x0[i];
        a1[i] += w1 * x1[i];
        a2[i] += w2 * x2[i];
        a3[i] += w3 * x3[i];
      }
    }
    for (; r < rows; ++r) {
      const T* x0 = A + r * stride + c;
      const T w0 = w[r];
#pragma omp simd
      for (int64_t i = 0; i < L; ++i) a0[i] += w0 * x0[i];
    }
#pragma omp simd
    for (int64_t i = 0; i < L; ++i) y[c + i] = (a0[i] + a1[i]) + (a2[i] + a3[i]);
  }
  if (c == n) return;
  // The last n - c < L columns: accumulate in y.
  std::fill(y + c, y + n, T(0));
  for (int64_t r = 0; r < rows; ++r) {
    const T* x0 = A + r * stride;
    const T w0 = w[r];
#pragma omp simd
    for (int64_t i = c; i < n; ++i) y[i] += w0 * x0[i];
  }
}

}  // namespace

bool raw_rows_ok(const at::Tensor& x, std::initializer_list<const at::Tensor*> params, int64_t dim) {
  if (!x.defined() || !x.device().is_cpu() || !x.is_contiguous() || x.dim() != dim) return false;
  if (x.scalar_type() != at::kFloat && x.scalar_type() != at::kDouble) return false;
  for (const auto* p : params)
    if (p->defined() && (!p->is_contiguous() || p->scalar_type() != x.scalar_type() || !p->device().is_cpu()))
      return false;
  return true;
}

template <typename T>
void layer_norm(const T* x, T* y, const T* w, const T* b, int64_t n, double eps) {
  layer_norm_impl<T>(x, y, w, b, n, static_cast<T>(eps));
}

template <typename T>
void linear(const T* W, const T* bias, const T* x, T* y, int64_t out, int64_t in) {
  linear_impl<T>(W, bias, x, y, out, in);
}

template <typename T>
void gelu(T* x, int64_t n) {
  constexpr T kInvSqrt2 = static_cast<T>(0.70710678118654752440);
  for (int64_t i = 0; i < n; ++i) x[i] = T(0.5) * x[i] * (T(1) + std::erf(x[i] * kInvSqrt2));
}

template <typename T>
void add(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

template <typename T>
void axpy(T a, const T* x, T* y, int64_t n) {
  axpy_impl<T>(a, x, y, n);
}

template <typename T>
T dot(const T* a, const T* b, int64_t n) {
  return dot_impl<T>(a, b, n);
}

template <typename T>
void softmax(T* x, int64_t n) {
  const T m = *std::max_element(x, x + n);
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += (x[i] = std::exp(x[i] - m));
  const T inv = T(1) / s;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

template <typename T>
void combine(const T* w, const T* A, int64_t stride, T* y, int64_t rows, int64_t n) {
  combine_impl<T>(w, A, stride, y, rows, n);
}

#define MIXLAB_ROW_INSTANTIATE(T)                                                 \
  template void layer_norm<T>(const T*, T*, const T*, const T*, int64_t, double); \
  template void linear<T>(const T*, const T*, const T*, T*, int64_t, int64_t);    \
  template void gelu<T>(T*, int64_t);                                             \
  template void add<T>(const T*, T*, int64_t);                                    \
  template void axpy<T>(T, const T*, T*, int64_t);                                \
  template T dot<T>(const T*, const T*, int64_t);                                 \
  template void softmax<T>(T*, int64_t);                                          \
  template void combine<T>(const T*, const T*, int64_t, T*, int64_t, int64_t);
MIXLAB_ROW_INSTANTIATE(float)
MIXLAB_ROW_INSTANTIATE(double)
#undef MIXLAB_ROW_INSTANTIATE

}  // namespace mixlab::row
