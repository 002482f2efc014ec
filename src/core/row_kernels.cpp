// Raw-row loops for the decoder block's decode step (see row_kernels.h).
#include "mixlab/core/row_kernels.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

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
  // Four output rows at a time, over column tiles of one AVX2 register: x is loaded once for the
  // four, and each row's sum is reduced across lanes once, not per loop. A per-row reduction loop
  // cost twice as much (measured: 0.94 against 0.45 us for 192x64; 3.1 against 1.3 us for the
  // 1024x16 of attention scores over a cache).
  constexpr int64_t L = 32 / sizeof(T);
  const int64_t in_tiles = in - in % L;
  int64_t r = 0;
  for (; r + 4 <= out; r += 4) {
    const T* w0 = W + r * in;
    const T *w1 = w0 + in, *w2 = w1 + in, *w3 = w2 + in;
    T v0[L] = {}, v1[L] = {}, v2[L] = {}, v3[L] = {};
    for (int64_t c = 0; c < in_tiles; c += L) {
#pragma omp simd
      for (int64_t i = 0; i < L; ++i) {
        v0[i] += w0[c + i] * x[c + i];
        v1[i] += w1[c + i] * x[c + i];
        v2[i] += w2[c + i] * x[c + i];
        v3[i] += w3[c + i] * x[c + i];
      }
    }
    T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int64_t i = 0; i < L; ++i) {
      s0 += v0[i];
      s1 += v1[i];
      s2 += v2[i];
      s3 += v3[i];
    }
    for (int64_t c = in_tiles; c < in; ++c) {
      s0 += w0[c] * x[c];
      s1 += w1[c] * x[c];
      s2 += w2[c] * x[c];
      s3 += w3[c] * x[c];
    }
    y[r] = bias ? s0 + bias[r] : s0;
    y[r + 1] = bias ? s1 + bias[r + 1] : s1;
    y[r + 2] = bias ? s2 + bias[r + 2] : s2;
    y[r + 3] = bias ? s3 + bias[r + 3] : s3;
  }
  for (; r < out; ++r) {
    const T* wr = W + r * in;
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < in; ++c) s += wr[c] * x[c];
    y[r] = bias ? s + bias[r] : s;
  }
}

// exp(x) for x in [lo, 0] (softmax's logits minus their maximum) as plain arithmetic that
// vectorises: x = n ln2 + r, |r| <= ln2/2, exp(r) by its Taylor series to 1 ulp (degree 7 in
// float, 13 in double), 2^n put into the exponent bits. glibc's exp is a call per element (no
// vector variant without -ffast-math): 5 us of a 1k-key softmax, against 0.4 us here. lo keeps
// 2^n a normal number; exp(lo) ~ 1e-38 (float) / 1e-308 (double) stands for anything smaller.
template <typename T>
struct ExpSeries;
template <>
struct ExpSeries<float> {
  using Bits = int32_t;
  static constexpr float lo = -87.0f, log2e = 1.44269504088896341f, ln2_hi = 0.693145751953125f,
                         ln2_lo = 1.428606765330187045e-06f;
  static constexpr float round = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  static constexpr int mantissa = 23, bias = 127, degree = 7;
  static constexpr float c[degree + 1] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
};
template <>
struct ExpSeries<double> {
  using Bits = int64_t;
  static constexpr double lo = -708.0, log2e = 1.4426950408889634074, ln2_hi = 6.93147180369123816490e-01,
                          ln2_lo = 1.90821492927058770002e-10;
  static constexpr double round = 6755399441055744.0;  // 1.5 * 2^52
  static constexpr int mantissa = 52, bias = 1023, degree = 13;
  static constexpr double c[degree + 1] = {1.0 / 6227020800.0,
                                           1.0 / 479001600.0,
                                           1.0 / 39916800.0,
                                           1.0 / 3628800.0,
                                           1.0 / 362880.0,
                                           1.0 / 40320.0,
                                           1.0 / 5040.0,
                                           1.0 / 720.0,
                                           1.0 / 120.0,
                                           1.0 / 24.0,
                                           1.0 / 6.0,
                                           0.5,
                                           1.0,
                                           1.0};
};

template <typename T>
inline T exp_nonpositive(T x) {
  using E = ExpSeries<T>;
  using Bits = typename E::Bits;
  const T shifted = x * E::log2e + E::round;  // n in the low mantissa bits
  const T n = shifted - E::round;
  const Bits n_bits = __builtin_bit_cast(Bits, shifted) - __builtin_bit_cast(Bits, T(E::round));
  const T r = (x - n * E::ln2_hi) - n * E::ln2_lo;
  T p = E::c[0];
#pragma GCC unroll 16
  for (int k = 1; k <= E::degree; ++k) p = p * r + E::c[k];
  // The exponent is shifted as unsigned: a NaN input gives garbage bits here (and a NaN result
  // through p), and a signed shift of them would be undefined behaviour (UBSan's finding).
  using UBits = std::make_unsigned_t<Bits>;
  return p * __builtin_bit_cast(T, static_cast<Bits>(static_cast<UBits>(n_bits + E::bias) << E::mantissa));
}

template <typename T>
MIXLAB_ROW_CLONES void softmax_impl(T* x, int64_t n) {
  T m = x[0];
#pragma omp simd reduction(max : m)
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  // Clamped in a loop of its own: with the clamp inside the exp loop GCC branched on it and left
  // the loop scalar. NaN stays NaN (d < lo is false), so a NaN logit still poisons the row.
  const T lo = ExpSeries<T>::lo;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T d = x[i] - m;
    x[i] = d < lo ? lo : d;
  }
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) {
    x[i] = exp_nonpositive(x[i]);
    s += x[i];
  }
  const T inv = T(1) / s;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
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

// x = gelu(x) = x / 2 (1 + erf(x / sqrt 2)) in place, for float with ATen's own formula: its
// vectorised float GELU (the body of at::gelu's CPU kernel) takes erf from Vectorized<float>::erf,
// Abramowitz-Stegun 7.1.26 (|error| <= 1.5e-7) around exp(-z^2); so does this, 8 lanes at a time
// (exp by Cody-Waite reduction and the Cephes expf polynomial). On 2M floats in [-6, 6] it equals
// at::gelu bitwise for 86 % of them (std::erf: 48 %), both within 4.8e-7. And std::erf (the double
// version below) cost ~7 ns a value here, 256 values per MLP row of the d = 64 models.
MIXLAB_ROW_CLONES void gelu_float(float* x, int64_t n) {
  typedef float VF __attribute__((vector_size(32)));
  typedef int32_t VI __attribute__((vector_size(32)));
  typedef uint32_t VU __attribute__((vector_size(32)));
  constexpr int64_t kLanes = 8;
  // One loop, no helper: a lambda would be compiled for the baseline only, not for this clone.
  for (int64_t i = 0; i < n; i += kLanes) {
    const int64_t m = std::min(kLanes, n - i);
    VF v{};
    if (m == kLanes)
      std::memcpy(&v, x + i, sizeof(VF));
    else
      std::memcpy(&v, x + i, static_cast<size_t>(m) * sizeof(float));
    const VF z = v * 0.70710678118654752440f;
    const VI sign = (VI)z & static_cast<int32_t>(0x80000000u);
    const VF az = (VF)((VI)z ^ sign);
    const VF t = 1.0f / (0.3275911f * az + 1.0f);
    const VF r = (((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f;
    // e = exp(-z^2); below -87 it is 0 to float precision (clamped so that 2^k stays normal).
    VF w = -(z * z);
    w = w < -87.0f ? VF{} - 87.0f : w;
    const VI k = __builtin_convertvector(w * 1.44269504088896341f - 0.5f, VI);  // round(w log2 e), w <= 0
    const VF kf = __builtin_convertvector(k, VF);
    const VF f = (w - kf * 0.693359375f) + kf * 2.12194440e-4f;  // w - k ln 2, ln 2 in two parts
    const VF p = ((((((1.9875691500e-4f * f + 1.3981999507e-3f) * f + 8.3334519073e-3f) * f + 4.1665795894e-2f) * f +
                    1.6666665459e-1f) *
                       f +
                   5.0000001201e-1f) *
                      (f * f) +
                  f) +
                 1.0f;
    const VF e = p * (VF)((VU)(k + 127) << 23);  // unsigned: no signed overflow for a NaN's k
    const VF erf = (VF)((VI)(1.0f - e * t * r) | sign);
    v = v * 0.5f * (1.0f + erf);
    if (m == kLanes)
      std::memcpy(x + i, &v, sizeof(VF));
    else
      std::memcpy(x + i, &v, static_cast<size_t>(m) * sizeof(float));
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
  // double: std::erf, to double rounding (ATen's double GELU uses Sleef's erf).
  constexpr T kInvSqrt2 = static_cast<T>(0.70710678118654752440);
  for (int64_t i = 0; i < n; ++i) x[i] = T(0.5) * x[i] * (T(1) + std::erf(x[i] * kInvSqrt2));
}
template <>
void gelu<float>(float* x, int64_t n) {
  gelu_float(x, n);
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
  softmax_impl<T>(x, n);
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
