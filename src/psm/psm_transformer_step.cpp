// PsmTransformerImpl::step_rows: the transformer of the T-PSM on raw rows, with a per-layer
// key/value cache (see mixlab/psm/psm_transformer.h).
//
// Why: a T-PSM decode step at d = 64 is a few tens of thousands of multiply-adds, yet forward on
// [s | buf] was ~30 ATen ops per layer (LayerNorms, the qkv split and permute, two matmuls, the
// mask, softmax, the MLP) plus the cat around it: dispatch, not arithmetic. And since Inf is
// causal, the keys/values of rows already seen never change, so a new row needs only its own
// projections and one attention row against the cache.
//
// The math is forward's, in its order: h = x + pos; per layer h += proj(MHA(LN1 h)), h +=
// fc2(gelu(fc1(LN2 h))) with the exact (erf) GELU, scores q.k / sqrt(D) per head on the
// d / heads-wide column blocks of qkv's [q | k | v] rows, causal rows attending to positions
// <= their own; y = LN_f h. It equals forward to float rounding (tests/psm/tpsm_step_test.cpp).
//
// The matrix-vector products (nearly all the multiply-adds) use block_linear below, not
// row::linear: row::linear reduces each output row in one vector accumulator, a chain of dependent
// FMAs, then a horizontal sum through memory; eight output rows at a time give eight independent
// chains that share each load of x. Measured on the mixer alone (bench_psm_decode --tpsm tpsm,
// busy machine): 17.7 -> 14.0 µs/token; the float GELU below took it to ~10.5.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/core/row_kernels.h"
#include "mixlab/psm/psm_transformer.h"

// As row_kernels.cpp: AVX2 + FMA where the machine has them, the build's baseline elsewhere; one
// version under ASan (its instrumentation and ifuncs do not mix).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define MIXLAB_PSM_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define MIXLAB_PSM_CLONES
#endif

namespace mixlab {
namespace {

// y = W x (+ bias), W (out, in) row-major (as row::linear). Eight rows of W at a time, each with
// its own 32-byte vector accumulator (GCC vector extensions: one AVX register in the x86-64-v3
// clone, two SSE ones in the baseline), then a horizontal sum per row; the tails of out and in
// are plain loops. The sum order differs from row::linear's, so results differ in the last bits.
template <typename T>
MIXLAB_PSM_CLONES void block_linear(const T* W, const T* bias, const T* x, T* y, int64_t out, int64_t in) {
  typedef T V __attribute__((vector_size(32)));
  typedef T Half __attribute__((vector_size(16)));
  constexpr int64_t kLanes = static_cast<int64_t>(sizeof(V) / sizeof(T));
  constexpr int64_t kHalf = kLanes / 2;
  constexpr int64_t kRows = 8;
  const int64_t in_v = in - in % kLanes;
  int64_t o = 0;
  for (; o + kRows <= out; o += kRows) {
    V acc[kRows] = {};
    for (int64_t c = 0; c < in_v; c += kLanes) {
      V xv;
      std::memcpy(&xv, x + c, sizeof(V));
      for (int64_t k = 0; k < kRows; ++k) {
        V wv;
        std::memcpy(&wv, W + (o + k) * in + c, sizeof(V));
        acc[k] += wv * xv;
      }
    }
    for (int64_t k = 0; k < kRows; ++k) {
      Half lo, hi;
      std::memcpy(&lo, &acc[k], sizeof(Half));
      std::memcpy(&hi, reinterpret_cast<const char*>(&acc[k]) + sizeof(Half), sizeof(Half));
      const Half h = lo + hi;
      T s = h[0];
      for (int64_t l = 1; l < kHalf; ++l) s += h[l];
      const T* wr = W + (o + k) * in;
      for (int64_t c = in_v; c < in; ++c) s += wr[c] * x[c];
      y[o + k] = bias ? s + bias[o + k] : s;
    }
  }
  for (; o < out; ++o) {
    const T* wr = W + o * in;
    T s = 0;
    for (int64_t c = 0; c < in; ++c) s += wr[c] * x[c];
    y[o] = bias ? s + bias[o] : s;
  }
}

bool ok(const torch::Tensor& t, c10::ScalarType dtype) {
  return !t.defined() || (t.device().is_cpu() && t.is_contiguous() && t.scalar_type() == dtype);
}

template <typename T>
const T* ptr(const torch::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// x = gelu(x) = x / 2 (1 + erf(x / sqrt 2)) in place, for float with ATen's own formula: its
// vectorised float GELU (the body of at::gelu's CPU kernel) takes erf from Vectorized<float>::erf,
// Abramowitz-Stegun 7.1.26 (|error| <= 1.5e-7) around exp(-z^2); so does this, 8 lanes at a time
// (exp by Cody-Waite reduction and the Cephes expf polynomial). On 2M floats in [-6, 6] it equals
// at::gelu bitwise for 86 % of them (std::erf: 48 %), both within 4.8e-7. And std::erf (row::gelu)
// cost ~7 ns a value here, 256 values per MLP row.
MIXLAB_PSM_CLONES void gelu_float(float* x, int64_t n) {
  typedef float VF __attribute__((vector_size(32)));
  typedef int32_t VI __attribute__((vector_size(32)));
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
    const VF e = p * (VF)((k + 127) << 23);
    const VF erf = (VF)((VI)(1.0f - e * t * r) | sign);
    v = v * 0.5f * (1.0f + erf);
    if (m == kLanes)
      std::memcpy(x + i, &v, sizeof(VF));
    else
      std::memcpy(x + i, &v, static_cast<size_t>(m) * sizeof(float));
  }
}

template <typename T>
void gelu(T* x, int64_t n) {
  row::gelu<T>(x, n);  // double: std::erf, to double rounding (ATen's double GELU uses Sleef's erf)
}
template <>
void gelu<float>(float* x, int64_t n) {
  gelu_float(x, n);
}

}  // namespace

bool PsmTransformerImpl::rows_ok(c10::ScalarType dtype) const {
  if (dtype != torch::kFloat && dtype != torch::kDouble) return false;
  if (!ok(pos_, dtype) || !ok(ln_f_->weight, dtype) || !ok(ln_f_->bias, dtype)) return false;
  for (const auto& b : blocks_) {
    for (const auto* ln : {&b.ln1, &b.ln2})
      if (!ok((*ln)->weight, dtype) || !ok((*ln)->bias, dtype)) return false;
    for (const auto* lin : {&b.qkv, &b.proj, &b.fc1, &b.fc2})
      if (!ok((*lin)->weight, dtype) || !ok((*lin)->bias, dtype)) return false;
  }
  return true;
}

template <typename T>
void PsmTransformerImpl::step_rows(const T* x, int64_t n, int64_t p, T* cache, T* y, int64_t y_from) {
  const auto& o = options_;
  MIXLAB_ASSERT(n >= 1 && p >= 0 && p + n <= o.max_positions && y_from >= 0 && y_from <= n && (o.causal || p == 0) &&
                    (y != nullptr || y_from == n),
                "PsmTransformer::step_rows: n = {}, p = {}, y_from = {} (max_positions {}, causal {})", n, p, y_from,
                o.max_positions, o.causal);
  const int64_t d = o.d, H = o.heads, D = d / H, P = o.max_positions, L = o.layers;
  const T sqrt_dk = static_cast<T>(std::sqrt(static_cast<double>(D)));  // forward divides the scores by it
  thread_local std::vector<T> work;
  work.resize(static_cast<size_t>(2 * n * d + 6 * d + P));
  T* h = work.data();   // (n,d) the residual stream of the n rows
  T* q = h + n * d;     // (n,d) this layer's queries
  T* a = q + n * d;     // (d) a LayerNorm output, then a projection
  T* att = a + d;       // (d) attention output, heads side by side
  T* mlp = att + d;     // (4d) fc1 / GELU
  T* sc = mlp + 4 * d;  // (P) one head's scores

  const T* pos = pos_.data_ptr<T>() + p * d;
  for (int64_t i = 0; i < n * d; ++i) h[i] = x[i] + pos[i];
  for (int64_t l = 0; l < L; ++l) {
    const Block& b = blocks_[static_cast<size_t>(l)];
    T* kv = cache + l * P * 2 * d;  // (P, [k | v])
    // In the last layer only rows >= y_from are read beyond their keys/values.
    const int64_t first = l + 1 == L ? y_from : 0;
    const T* w_qkv = b.qkv->weight.data_ptr<T>();
    const T* b_qkv = ptr<T>(b.qkv->bias);
    const T *ln1_w = ptr<T>(b.ln1->weight), *ln1_b = ptr<T>(b.ln1->bias);
    for (int64_t i = 0; i < n; ++i) {
      row::layer_norm<T>(h + i * d, a, ln1_w, ln1_b, d, b.ln1->options.eps());
      // qkv's rows [d, 3d) are [k | v]: straight into the cache row of position p + i.
      block_linear<T>(w_qkv + d * d, b_qkv ? b_qkv + d : nullptr, a, kv + (p + i) * 2 * d, 2 * d, d);
      if (i >= first) block_linear<T>(w_qkv, b_qkv, a, q + i * d, d, d);
    }
    const T *w_proj = b.proj->weight.data_ptr<T>(), *b_proj = ptr<T>(b.proj->bias);
    const T *w_fc1 = b.fc1->weight.data_ptr<T>(), *b_fc1 = ptr<T>(b.fc1->bias);
    const T *w_fc2 = b.fc2->weight.data_ptr<T>(), *b_fc2 = ptr<T>(b.fc2->bias);
    const T *ln2_w = ptr<T>(b.ln2->weight), *ln2_b = ptr<T>(b.ln2->bias);
    for (int64_t i = first; i < n; ++i) {
      const int64_t keys = o.causal ? p + i + 1 : n;
      for (int64_t hd = 0; hd < H; ++hd) {
        const T* qh = q + i * d + hd * D;
        for (int64_t j = 0; j < keys; ++j) sc[j] = row::dot<T>(qh, kv + j * 2 * d + hd * D, D) / sqrt_dk;
        row::softmax<T>(sc, keys);
        T* ah = att + hd * D;
        std::fill(ah, ah + D, T(0));
        for (int64_t j = 0; j < keys; ++j) row::axpy<T>(sc[j], kv + j * 2 * d + d + hd * D, ah, D);
      }
      T* hi = h + i * d;
      block_linear<T>(w_proj, b_proj, att, a, d, d);
      row::add<T>(a, hi, d);
      row::layer_norm<T>(hi, a, ln2_w, ln2_b, d, b.ln2->options.eps());
      block_linear<T>(w_fc1, b_fc1, a, mlp, 4 * d, d);
      gelu<T>(mlp, 4 * d);
      block_linear<T>(w_fc2, b_fc2, mlp, a, d, 4 * d);
      row::add<T>(a, hi, d);
    }
  }
  const T *lnf_w = ptr<T>(ln_f_->weight), *lnf_b = ptr<T>(ln_f_->bias);
  for (int64_t i = y_from; i < n; ++i)
    row::layer_norm<T>(h + i * d, y + (i - y_from) * d, lnf_w, lnf_b, d, ln_f_->options.eps());
}

template void PsmTransformerImpl::step_rows<float>(const float*, int64_t, int64_t, float*, float*, int64_t);
template void PsmTransformerImpl::step_rows<double>(const double*, int64_t, int64_t, double*, double*, int64_t);

}  // namespace mixlab
