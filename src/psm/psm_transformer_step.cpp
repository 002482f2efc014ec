// PsmTransformerImpl::step_rows: the transformer of the T-PSM on raw rows, with a per-layer
// key/value cache (see mixlab/psm/psm_transformer.h).
//
// Why: a T-PSM decode step at d = 64 is a few tens of thousands of multiply-adds, yet forward on
// [s | buf] was ~30 ATen ops per layer (LayerNorms, the qkv split and permute, two matmuls, the
// mask, softmax, the MLP) plus the cat around it: dispatch, not arithmetic. And since Inf is
// causal, the keys/values of rows already seen never change, so a new row needs only its own
// projections and one attention row against the cache.
//
// The math is forward's, in its order: h = x + pos (rope: h = x, and q and k rotated by their
// position p + i as they are made, so the cache holds rotated keys); per layer
// h += proj(MHA(LN1 h)), h += fc2(gelu(fc1(LN2 h))) with the exact (erf) GELU, scores
// q.k / sqrt(D) per head on the d / heads-wide column blocks of qkv's [q | k | v] rows, causal
// rows attending to positions <= their own; y = LN_f h (attention_only: no MLP, y = h_L - h_0, or
// with keep_input x + h_L - h_0). It equals forward to float rounding (tests/psm/tpsm_step_test.cpp).
//
// The matrix-vector products (nearly all the multiply-adds) and the GELU are core's row kernels
// (row::linear four output rows at a time, row::gelu's vectorised float erf). Measured on the
// mixer alone (bench_psm_decode --tpsm tpsm, busy machine): ~17.7 µs/token with a one-row
// linear and std::erf, ~10.5 with the blocked products and the vector GELU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/core/rope.h"
#include "mixlab/core/row_kernels.h"
#include "mixlab/psm/psm_transformer.h"

namespace mixlab {
namespace {

bool ok(const torch::Tensor& t, c10::ScalarType dtype) {
  return !t.defined() || (t.device().is_cpu() && t.is_contiguous() && t.scalar_type() == dtype);
}

template <typename T>
const T* ptr(const torch::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

}  // namespace

bool PsmTransformerImpl::rows_ok(c10::ScalarType dtype) const {
  if (dtype != torch::kFloat && dtype != torch::kDouble) return false;
  if (!ok(pos_, dtype)) return false;
  if (ln_f_ && (!ok(ln_f_->weight, dtype) || !ok(ln_f_->bias, dtype))) return false;
  for (const auto& b : blocks_) {
    for (const auto* ln : {&b.ln1, &b.ln2})
      if (*ln && (!ok((*ln)->weight, dtype) || !ok((*ln)->bias, dtype))) return false;
    for (const auto* lin : {&b.qkv, &b.proj, &b.fc1, &b.fc2})
      if (*lin && (!ok((*lin)->weight, dtype) || !ok((*lin)->bias, dtype))) return false;
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

  if (o.rope) {
    std::copy(x, x + n * d, h);
  } else {
    const T* pos = pos_.data_ptr<T>() + p * d;
    for (int64_t i = 0; i < n * d; ++i) h[i] = x[i] + pos[i];
  }
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
      row::linear<T>(w_qkv + d * d, b_qkv ? b_qkv + d : nullptr, a, kv + (p + i) * 2 * d, 2 * d, d);
      if (o.rope) rope_rows<T>(kv + (p + i) * 2 * d, H, D, p + i, rope_inv_freq_);  // k: H rows of D
      if (i >= first) {
        row::linear<T>(w_qkv, b_qkv, a, q + i * d, d, d);
        if (o.rope) rope_rows<T>(q + i * d, H, D, p + i, rope_inv_freq_);
      }
    }
    const T *w_proj = b.proj->weight.data_ptr<T>(), *b_proj = ptr<T>(b.proj->bias);
    const bool mlp_on = !o.attention_only;
    const T* w_fc1 = mlp_on ? b.fc1->weight.data_ptr<T>() : nullptr;
    const T* b_fc1 = mlp_on ? ptr<T>(b.fc1->bias) : nullptr;
    const T* w_fc2 = mlp_on ? b.fc2->weight.data_ptr<T>() : nullptr;
    const T* b_fc2 = mlp_on ? ptr<T>(b.fc2->bias) : nullptr;
    const T* ln2_w = mlp_on ? ptr<T>(b.ln2->weight) : nullptr;
    const T* ln2_b = mlp_on ? ptr<T>(b.ln2->bias) : nullptr;
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
      row::linear<T>(w_proj, b_proj, att, a, d, d);
      row::add<T>(a, hi, d);
      if (!mlp_on) continue;
      row::layer_norm<T>(hi, a, ln2_w, ln2_b, d, b.ln2->options.eps());
      row::linear<T>(w_fc1, b_fc1, a, mlp, 4 * d, d);
      row::gelu<T>(mlp, 4 * d);
      row::linear<T>(w_fc2, b_fc2, mlp, a, d, 4 * d);
      row::add<T>(a, hi, d);
    }
  }
  if (o.attention_only) {  // y = h_L - h_0 (+ x with keep_input), h_0 = x + pos as at the start
    const T* pos = o.rope ? nullptr : pos_.data_ptr<T>() + p * d;
    const T keep = o.keep_input ? T(1) : T(0);
    for (int64_t i = y_from; i < n; ++i)
      for (int64_t k = 0; k < d; ++k) {
        const T update = h[i * d + k] - x[i * d + k] - (pos ? pos[i * d + k] : T(0));
        y[(i - y_from) * d + k] = update + keep * x[i * d + k];
      }
    return;
  }
  const T *lnf_w = ptr<T>(ln_f_->weight), *lnf_b = ptr<T>(ln_f_->bias);
  for (int64_t i = y_from; i < n; ++i)
    row::layer_norm<T>(h + i * d, y + (i - y_from) * d, lnf_w, lnf_b, d, ln_f_->options.eps());
}

template void PsmTransformerImpl::step_rows<float>(const float*, int64_t, int64_t, float*, float*, int64_t);
template void PsmTransformerImpl::step_rows<double>(const double*, int64_t, int64_t, double*, double*, int64_t);

}  // namespace mixlab
