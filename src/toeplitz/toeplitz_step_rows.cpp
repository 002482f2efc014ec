// The toeplitz mixer's decode step on raw rows (ToeplitzMixer::step_rows,
// mixlab/toeplitz/toeplitz_mixer.h).
//
// A decode step at position t is the last row of each T_{h,m}: z[h] = sum_{l<=t} lags[h,m,l] u_{t-l}
// over the cached projected inputs, O(K C t) multiply-adds. The ATen step spent ~15 dispatched
// ops on it plus a flip of the lag rows and an einsum that packed the history: 90 µs/token at 1k
// context for a few tens of thousands of multiply-adds. Here the input projection is one
// matrix-vector product, each lag row is combined with the head's cached rows read in place,
// newest first (row::combine with a negative stride, no flipped copy), and the output projection
// is one more product.
//
// The formulas are the ATen step's (toeplitz_mixer.cpp), so the two agree to float rounding;
// tests/toeplitz/toeplitz_mixer_test.cpp checks outputs and cache contents token by token in float
// and double, and step against forward row by row.
#include <algorithm>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/core/row_kernels.h"
#include "mixlab/toeplitz/toeplitz_mixer.h"

namespace mixlab {

bool ToeplitzMixer::rows_ready(ToeplitzState& state, const torch::Tensor& x_t) {
  if (torch::GradMode::is_enabled()) return false;
  if (!row::raw_rows_ok(x_t,
                        {&in_proj_->weight, &in_proj_->bias, &out_proj_->weight, &out_proj_->bias, &lags_, &pos_bias_}))
    return false;
  grow_cache(state, x_t.options(), state.position_ + 1);  // the ATen step would grow it the same way
  // The raw loops index the cache as (B,H,capacity,D): a loaded cache of another shape goes to
  // the ATen step, which reports it.
  const auto& c = state.cache_;
  if (c.size(0) != x_t.size(0) || c.size(1) != heads_ || c.size(3) != head_dim_) return false;
  return row::raw_rows_ok(x_t, {&c});
}

template <typename T>
void ToeplitzMixer::step_rows_typed(ToeplitzState& state, const torch::Tensor& x_t, torch::Tensor& out) {
  const int64_t B = x_t.size(0), C = d_model_, H = heads_, D = head_dim_, K = kernel_, Tmax = max_len_;
  const int64_t pos = state.position_, P = pos + 1, p = (K - 1) / 2;
  const int64_t cap = state.cache_.size(2);
  MIXLAB_ASSERT(pos < cap, "toeplitz cache of capacity {} cannot take position {}", cap, pos);
  T* cache = state.cache_.data_ptr<T>();
  const T* lags = lags_.data_ptr<T>();  // (H,K,Tmax): lags[h,m,l] weighs the token l steps back
  const T* bias = pos_bias_.data_ptr<T>();
  const T* x = x_t.data_ptr<T>();
  T* o = out.data_ptr<T>();

  thread_local std::vector<T> buf;
  buf.resize(static_cast<size_t>(2 * C + K * D));
  T* u = buf.data();  // (C) projected input, (H, D)
  T* z = u + C;       // (C) the heads' outputs before the output projection
  T* zk = z + C;      // (K, D) one head's per-kernel-element outputs
  for (int64_t r = 0; r < B; ++r) {
    row::linear<T>(in_proj_->weight.data_ptr<T>(), in_proj_->bias.data_ptr<T>(), x + r * C, u, C, C);
    for (int64_t h = 0; h < H; ++h) {
      T* newest = cache + ((r * H + h) * cap + pos) * D;  // row pos of this head's (cap, D) block
      std::copy(u + h * D, u + (h + 1) * D, newest);
      T* zh = z + h * D;
      if (K == 1) {
        row::combine<T>(lags + h * Tmax, newest, -D, zh, P, D);
      } else {
        for (int64_t m = 0; m < K; ++m) row::combine<T>(lags + (h * K + m) * Tmax, newest, -D, zk + m * D, P, D);
        // kernel_combine: channel c sums zk[m] at channel c + m - p, zero outside [0, D).
        for (int64_t c = 0; c < D; ++c) {
          T acc = 0;
          for (int64_t m = 0; m < K; ++m) {
            const int64_t src = c + m - p;
            if (src >= 0 && src < D) acc += zk[m * D + src];
          }
          zh[c] = acc;
        }
      }
      const T b = bias[h * Tmax + pos];
      for (int64_t c = 0; c < D; ++c) zh[c] += b;
    }
    row::linear<T>(out_proj_->weight.data_ptr<T>(), out_proj_->bias.data_ptr<T>(), z, o + r * C, C, C);
  }
}

torch::Tensor ToeplitzMixer::step_rows(ToeplitzState& state, const torch::Tensor& x_t) {
  auto out = at::empty({x_t.size(0), d_model_}, x_t.options());
  AT_DISPATCH_FLOATING_TYPES(x_t.scalar_type(), "toeplitz step_rows",
                             [&] { step_rows_typed<scalar_t>(state, x_t, out); });
  ++state.position_;
  return out;
}

}  // namespace mixlab
