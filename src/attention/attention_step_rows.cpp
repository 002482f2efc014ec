// The decode step of `attention` and `local:W` on raw rows (AttentionMixer::step_rows,
// mixlab/attention/attention.h).
//
// A decode step of the d = 64 compare model's attention layer is a few thousand multiply-adds
// plus, for full attention, O(n D) per head over the cache; the ATen step spent ~20 dispatched ops
// per token on it (projection, views, two RoPEs of ~10 ops each, the scores, softmax, the
// weighted values, the output projection): local:8 decoded at 126 µs/token, nearly all dispatch.
// Here the q, k, v projection is one matrix-vector product per row, RoPE rotates q and k of every
// head with one cos/sin table, each head's scores and weighted values read the cache buffers in
// place (no concatenation, no copy of the cache), and the output projection is one more product.
//
// The formulas are the ATen step's (attention.cpp), so the two agree to float rounding;
// tests/attention/attention_step_test.cpp checks outputs and cache contents token by token in
// float and double, and step against forward row by row.
#include <cmath>
#include <vector>

#include "mixlab/attention/attention.h"
#include "mixlab/core/error.h"
#include "mixlab/core/rope.h"
#include "mixlab/core/row_kernels.h"

namespace mixlab {

bool AttentionMixer::rows_ready(const KvCacheState& state, const torch::Tensor& x_t) const {
  if (torch::GradMode::is_enabled()) return false;
  // The raw loops index the buffers as (B,H,capacity,D): a loaded cache of another shape goes to
  // the ATen step, which reports it.
  const auto& k = state.k_buffer();
  if (k.dim() != 4 || k.size(0) != x_t.size(0) || k.size(1) != dims_.n_heads || k.size(3) != head_dim_) return false;
  return row::raw_rows_ok(x_t, {&qkv_->weight, &out_->weight, &k, &state.v_buffer()});
}

template <typename T>
void AttentionMixer::step_rows_typed(KvCacheState& state, const torch::Tensor& x_t, torch::Tensor& out) {
  const int64_t B = x_t.size(0), C = dims_.d_model, H = dims_.n_heads, D = head_dim_;
  const int64_t pos = state.position();
  // Full attention: the current token's k, v go into the cache first and are read there, as the
  // ATen step does. Window: the ring holds the W past positions and the current token would
  // overwrite the oldest one still read, so its k, v are read from the projected row and written
  // to the ring only after the head has read it.
  const bool window = window_ > 0;
  const int64_t past = state.cached_positions();     // before this token
  const int64_t slot = state.reserve_slot();         // may grow a full cache: read buffers after
  const int64_t n_cached = window ? past : pos + 1;  // scores read from the cache
  T* K = state.k_buffer().data_ptr<T>();
  T* V = state.v_buffer().data_ptr<T>();
  const int64_t cap = state.k_buffer().size(2);
  MIXLAB_ASSERT(slot < cap && n_cached <= cap, "KV cache slot {} / {} positions beyond capacity {}", slot, n_cached,
                cap);
  const T* Wqkv = qkv_->weight.data_ptr<T>();
  const T* Wout = out_->weight.data_ptr<T>();
  const T sqrt_d = static_cast<T>(std::sqrt(static_cast<double>(D)));

  thread_local std::vector<T> buf;
  buf.resize(static_cast<size_t>(4 * C + n_cached + 1));
  T* proj = buf.data();  // (3C) [q | k | v], each (H, D)
  T* y = proj + 3 * C;   // (C) the heads' outputs before the output projection
  T* s = y + C;          // (n_cached + 1) one head's scores, then probabilities
  const T* x = x_t.data_ptr<T>();
  T* o = out.data_ptr<T>();
  for (int64_t r = 0; r < B; ++r) {
    row::linear<T>(Wqkv, nullptr, x + r * C, proj, 3 * C, C);
    rope_rows<T>(proj, 2 * H, D, pos, rope_inv_freq_);  // q and k: 2H consecutive rows of D
    for (int64_t h = 0; h < H; ++h) {
      const T* q = proj + h * D;
      const T* k = proj + C + h * D;
      const T* v = proj + 2 * C + h * D;
      T* Kh = K + (r * H + h) * cap * D;  // this sequence's and head's (cap, D) block
      T* Vh = V + (r * H + h) * cap * D;
      T* yh = y + h * D;
      if (!window) {
        std::copy(k, k + D, Kh + slot * D);
        std::copy(v, v + D, Vh + slot * D);
      }
      row::linear<T>(Kh, nullptr, q, s, n_cached, D);  // s_j = q . k_j over the cached rows
      int64_t n = n_cached;
      if (window) s[n++] = row::dot<T>(q, k, D);  // the current token, last
      for (int64_t j = 0; j < n; ++j) s[j] /= sqrt_d;
      row::softmax<T>(s, n);
      row::combine<T>(s, Vh, D, yh, n_cached, D);
      if (window) {
        row::axpy<T>(s[n_cached], v, yh, D);
        // Only this head of this sequence reads its ring: the slot is free now.
        std::copy(k, k + D, Kh + slot * D);
        std::copy(v, v + D, Vh + slot * D);
      }
    }
    row::linear<T>(Wout, nullptr, y, o + r * C, C, C);
  }
}

torch::Tensor AttentionMixer::step_rows(KvCacheState& state, const torch::Tensor& x_t) {
  auto out = at::empty({x_t.size(0), dims_.d_model}, x_t.options());
  AT_DISPATCH_FLOATING_TYPES(x_t.scalar_type(), "attention step_rows",
                             [&] { step_rows_typed<scalar_t>(state, x_t, out); });
  state.advance();
  return out;
}

}  // namespace mixlab
