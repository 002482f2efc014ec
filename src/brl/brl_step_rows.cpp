// BRL's decode step on raw rows (BrlMixer::step_memory without autograd, mixlab/brl/brl_mixer.h).
//
// A decode token of the d = 64 compare model costs F_prop (m·C multiply-adds per head) and, once
// per block, F_comp + the evolution + F_prop's keys/values (a few hundred thousand
// multiply-adds over m = 8 slots and N = 8 history rows). Through ATen that was ~12 dispatched ops
// per token and ~50 per block boundary per layer: ~20 µs per token, ~95 µs per boundary, all
// dispatch. Here the same formulas run on contiguous rows (row_kernels.h): per token one
// matrix-vector product, the m scores and the weighted sum per head, LayerNorm and relu; per
// boundary the projections row by row, the (differential) cross-attention per head, the group
// norm as a LayerNorm per head segment, the evolution and the keys/values written per head.
// F_gen (the local mixer's step) and the memory stream's own LN + FFN (model area) are not here.
//
// Same formulas in the same order as compress(), evolve(), prop_keys_values(), propagate() and
// attn_weights() (brl_mixer.cpp), so equal to them to float rounding: tests/brl/brl_test.cpp
// checks outputs, memory deltas and states against the ATen step across block boundaries.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "mixlab/brl/brl_mixer.h"
#include "mixlab/core/row_kernels.h"

namespace mixlab {
namespace {

// σ_attn (attn_weights) over one row of n scores, in place.
template <typename T>
void attn_weights_row(BrlAttn attn, T* s, int64_t n) {
  const T count = static_cast<T>(n);
  switch (attn) {
    case BrlAttn::kSoftmax:
      row::softmax<T>(s, n);
      return;
    case BrlAttn::kLaplace: {
      const double mu = std::sqrt(0.5), sigma = std::sqrt(1.0 / (4.0 * M_PI));
      const T m = static_cast<T>(mu), den = static_cast<T>(sigma * std::sqrt(2.0));
      for (int64_t i = 0; i < n; ++i) s[i] = T(0.5) * (T(1) + std::erf((s[i] - m) / den)) / count;
      return;
    }
    case BrlAttn::kRelu2:
      for (int64_t i = 0; i < n; ++i) s[i] = s[i] > T(0) ? s[i] * s[i] / count : T(0);
      return;
  }
}

template <typename T>
const T* data_or_null(const torch::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// rows (n, in) → out (n, W.size(0)) through a bias-free Linear weight W (out, in).
template <typename T>
void linear_rows(const torch::Tensor& W, const T* rows, T* out, int64_t n) {
  const int64_t o = W.size(0), in = W.size(1);
  for (int64_t r = 0; r < n; ++r) row::linear<T>(W.data_ptr<T>(), nullptr, rows + r * in, out + r * o, o, in);
}

}  // namespace

bool BrlMixer::decodes_on_rows(const torch::Tensor& x_t, const BrlState& state) const {
  if (torch::GradMode::is_enabled()) return false;
  if (x_t.dim() != 2 || !x_t.device().is_cpu() || x_t.scalar_type() != prop_q_->weight.scalar_type()) return false;
  // raw_rows_ok wants a contiguous row: x_t may be a strided time slice (a contiguous copy is taken).
  if (!row::raw_rows_ok(prop_q_->weight, {&lambda_, &prop_norm_->weight, &prop_norm_->bias}, 2)) return false;
  const int64_t B = x_t.size(0);
  const std::vector<int64_t> kv = {B, dims_.n_heads, opt_.slots, head_dim_}, inputs = {B, opt_.hist, dims_.d_model};
  auto fits = [&](const torch::Tensor& t, const std::vector<int64_t>& shape) {
    return t.defined() && row::raw_rows_ok(t, {}, t.dim()) && t.scalar_type() == x_t.scalar_type() &&
           t.sizes() == shape;
  };
  return fits(state.prop_k, kv) && fits(state.prop_v, kv) && fits(state.block_inputs, inputs);
}

bool BrlMixer::boundary_on_rows(const torch::Tensor& memory, const BrlState& state) const {
  if (torch::GradMode::is_enabled()) return false;
  const auto dtype = comp_q_->weight.scalar_type();
  if (!memory.defined() || memory.dim() != 3 || !memory.device().is_cpu() || memory.scalar_type() != dtype)
    return false;
  if (!row::raw_rows_ok(state.block_inputs, {}, 3) || state.block_inputs.scalar_type() != dtype) return false;
  // The ring the boundary reads: (B,hist,C) for this memory's batch.
  if (state.block_inputs.size(0) != memory.size(0) || state.block_inputs.size(1) != opt_.hist ||
      state.block_inputs.size(2) != dims_.d_model)
    return false;
  // Every parameter the boundary reads: contiguous CPU tensors of the memory's dtype.
  const auto& g = comp_norm_;
  const auto& e = evolve_norm_;
  return row::raw_rows_ok(comp_q_->weight, {&comp_k1_->weight, &comp_v_->weight, &g->weight, &g->bias, &e->weight,
                                            &e->bias, &evolve_m_->weight, &prop_k_->weight, &prop_v_->weight}) &&
         (!opt_.diff || row::raw_rows_ok(comp_q_->weight, {&comp_k2_->weight, &gamma_q_, &gamma_k1_, &gamma_k2_}));
}

torch::Tensor BrlMixer::boundary_rows(const torch::Tensor& memory, BrlState& state) {
  const int64_t B = memory.size(0), H = dims_.n_heads, M = opt_.slots, D = head_dim_;
  auto delta = at::empty_like(memory);
  state.prop_k = at::empty({B, H, M, D}, memory.options());
  state.prop_v = at::empty({B, H, M, D}, memory.options());
  AT_DISPATCH_FLOATING_TYPES(memory.scalar_type(), "brl boundary",
                             [&] { boundary_rows_typed<scalar_t>(memory, state, delta); });
  return delta;
}

template <typename T>
void BrlMixer::boundary_rows_typed(const torch::Tensor& memory, BrlState& state, torch::Tensor& delta) {
  // N: the history rows, the last min(pos, hist) inputs (slots 0..N-1 of the ring, in any order).
  const int64_t B = memory.size(0), C = dims_.d_model, H = dims_.n_heads, M = opt_.slots;
  const int64_t N = std::min(state.pos, opt_.hist), D = head_dim_, stride = opt_.hist;
  const bool history = state.pos > 0, diff = opt_.diff;
  const T scale = static_cast<T>(1.0 / (static_cast<double>(M) * std::sqrt(static_cast<double>(C))));
  thread_local std::vector<T> buf;
  buf.resize(static_cast<size_t>(2 * M * C + 3 * N * C + 2 * N + H + C));
  T* q = buf.data();   // (M, C) F_comp queries; then ct̄
  T* kv = q + M * C;   // (M, C) f^M(ct); then W_k ct', W_v ct' rows
  T* k1 = kv + M * C;  // (N, C)
  T* k2 = k1 + N * C;  // (N, C) diff only
  T* v = k2 + N * C;   // (N, C)
  T* s1 = v + N * C;   // (N) one slot's weights against the history
  T* s2 = s1 + N;      // (N)
  T* gamma = s2 + N;   // (H)
  T* tmp = gamma + H;  // (C)
  if (diff)
    for (int64_t h = 0; h < H; ++h) {
      const T gq = gamma_q_.data_ptr<T>()[h];
      gamma[h] = std::exp(gq * gamma_k1_.data_ptr<T>()[h]) - std::exp(gq * gamma_k2_.data_ptr<T>()[h]);
    }
  const T one_minus_beta = static_cast<T>(1.0 - opt_.beta), beta = static_cast<T>(opt_.beta);
  for (int64_t b = 0; b < B; ++b) {
    const T* ct = memory.data_ptr<T>() + b * M * C;
    T* ct_bar = q;  // F_comp's output overwrites the queries row by row (each slot's q is read first)
    if (history) {
      // F_comp (compress): the slots query this layer's inputs of the block's history.
      const T* hist = state.block_inputs.data_ptr<T>() + b * stride * C;
      linear_rows<T>(comp_q_->weight, ct, q, M);
      linear_rows<T>(comp_k1_->weight, hist, k1, N);
      linear_rows<T>(comp_v_->weight, hist, v, N);
      if (diff) linear_rows<T>(comp_k2_->weight, hist, k2, N);
      for (int64_t m = 0; m < M; ++m) {
        T* qm = q + m * C;
        for (int64_t h = 0; h < H; ++h) {
          for (int64_t n = 0; n < N; ++n) s1[n] = row::dot<T>(qm + h * D, k1 + n * C + h * D, D) * scale;
          attn_weights_row<T>(opt_.attn, s1, N);
          if (diff) {
            for (int64_t n = 0; n < N; ++n) s2[n] = row::dot<T>(qm + h * D, k2 + n * C + h * D, D) * scale;
            attn_weights_row<T>(opt_.attn, s2, N);
            for (int64_t n = 0; n < N; ++n) s1[n] = s1[n] - gamma[h] * s2[n];
          }
          T* oh = tmp + h * D;
          std::fill(oh, oh + D, T(0));
          for (int64_t n = 0; n < N; ++n) row::axpy<T>(s1[n], v + n * C + h * D, oh, D);
        }
        // Group norm, one group per head: a LayerNorm over each head's D channels with its affine slice.
        const T* gw = data_or_null<T>(comp_norm_->weight);
        const T* gb = data_or_null<T>(comp_norm_->bias);
        for (int64_t h = 0; h < H; ++h)
          row::layer_norm<T>(tmp + h * D, qm + h * D, gw ? gw + h * D : nullptr, gb ? gb + h * D : nullptr, D,
                             comp_norm_->options.eps());
      }
    } else {
      std::copy_n(ct, M * C, ct_bar);  // block 0: no history, ct̄ = the incoming memory
    }
    // Evolution: ct' = (1 − β) LN(ct̄) + β f^M(ct).
    T* out = delta.data_ptr<T>() + b * M * C;
    linear_rows<T>(evolve_m_->weight, ct, kv, M);
    for (int64_t m = 0; m < M; ++m) {
      row::layer_norm<T>(ct_bar + m * C, tmp, data_or_null<T>(evolve_norm_->weight),
                         data_or_null<T>(evolve_norm_->bias), C, evolve_norm_->options.eps());
      for (int64_t i = 0; i < C; ++i) out[m * C + i] = one_minus_beta * tmp[i] + beta * kv[m * C + i];
    }
    // F_prop's keys and values of ct', split per head: (B,H,M,D).
    auto split_heads = [&](const torch::Tensor& W, torch::Tensor& dst) {
      linear_rows<T>(W, out, kv, M);
      T* d = dst.data_ptr<T>() + b * H * M * D;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t h = 0; h < H; ++h) std::copy_n(kv + m * C + h * D, D, d + (h * M + m) * D);
    };
    split_heads(prop_k_->weight, state.prop_k);
    split_heads(prop_v_->weight, state.prop_v);
  }
}

torch::Tensor BrlMixer::token_rows(const torch::Tensor& x, const torch::Tensor& y_gen, BrlState& state, int64_t slot) {
  auto y = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "brl step",
                             [&] { token_rows_typed<scalar_t>(x, y_gen, state, slot, y); });
  return y;
}

template <typename T>
void BrlMixer::token_rows_typed(const torch::Tensor& x, const torch::Tensor& y_gen, BrlState& state, int64_t slot,
                                torch::Tensor& y) {
  // F_prop (propagate): q = W_q x; per head the scores q·k_m / √D through σ_attn, λ_h Σ_m s_m v_m;
  // LayerNorm, relu; then y = F_gen + F_prop, and x into the inputs ring (slot = pos mod hist).
  const int64_t B = x.size(0), C = dims_.d_model, H = dims_.n_heads, M = opt_.slots, D = head_dim_, ring = opt_.hist;
  const T root_d = static_cast<T>(std::sqrt(static_cast<double>(D)));
  thread_local std::vector<T> buf;
  buf.resize(static_cast<size_t>(2 * C + M));
  T* q = buf.data();  // (C)
  T* o = q + C;       // (C) the heads' outputs, merged
  T* s = o + C;       // (M) one head's weights
  const T* lam = lambda_.data_ptr<T>();
  for (int64_t r = 0; r < B; ++r) {
    const T* xr = x.data_ptr<T>() + r * C;
    row::linear<T>(prop_q_->weight.data_ptr<T>(), nullptr, xr, q, C, C);
    for (int64_t h = 0; h < H; ++h) {
      const T* kh = state.prop_k.data_ptr<T>() + (r * H + h) * M * D;
      const T* vh = state.prop_v.data_ptr<T>() + (r * H + h) * M * D;
      for (int64_t m = 0; m < M; ++m) s[m] = row::dot<T>(q + h * D, kh + m * D, D) / root_d;
      attn_weights_row<T>(opt_.attn, s, M);
      T* oh = o + h * D;
      std::fill(oh, oh + D, T(0));
      for (int64_t m = 0; m < M; ++m) row::axpy<T>(s[m], vh + m * D, oh, D);
      for (int64_t d = 0; d < D; ++d) oh[d] *= lam[h];
    }
    T* yr = y.data_ptr<T>() + r * C;
    row::layer_norm<T>(o, yr, data_or_null<T>(prop_norm_->weight), data_or_null<T>(prop_norm_->bias), C,
                       prop_norm_->options.eps());
    const T* g = y_gen.data_ptr<T>() + r * C;
    for (int64_t i = 0; i < C; ++i) yr[i] = g[i] + std::max(yr[i], T(0));
    std::copy_n(xr, C, state.block_inputs.data_ptr<T>() + (r * ring + slot) * C);
  }
}

}  // namespace mixlab
