#include "mixlab/attention/kv_cache.h"

#include <algorithm>

#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"

namespace mixlab {

KvCacheState::KvCacheState(int64_t batch, int64_t heads, int64_t head_dim, int64_t window, torch::TensorOptions options)
    : window_(window) {
  const int64_t cap = window > 0 ? window : 16;
  k_ = torch::zeros({batch, heads, cap, head_dim}, options);
  v_ = torch::zeros({batch, heads, cap, head_dim}, options);
}

void KvCacheState::io(StateArchive& ar) {
  ar.scalar("position", pos_);
  ar.tensor("k", k_, window_ > 0);
  ar.tensor("v", v_, window_ > 0);
  MIXLAB_CHECK(k_.defined() && v_.defined() && k_.sizes() == v_.sizes() && k_.size(2) >= cached_positions(),
               "KV cache state: k {} / v {} cannot hold {} positions", k_.defined() ? shape_string(k_) : "undefined",
               v_.defined() ? shape_string(v_) : "undefined", cached_positions());
}

int64_t KvCacheState::cached_positions() const { return window_ > 0 ? std::min(pos_, window_) : pos_; }

torch::Tensor KvCacheState::keys() const { return k_.narrow(2, 0, cached_positions()); }
torch::Tensor KvCacheState::values() const { return v_.narrow(2, 0, cached_positions()); }

int64_t KvCacheState::reserve_slot() {
  if (window_ > 0) return pos_ % window_;  // ring buffer: overwrite the oldest
  if (pos_ == k_.size(2)) {                // grow by doubling: amortised O(1) copies per token
    torch::NoGradGuard no_grad;
    k_ = torch::cat({k_, torch::zeros_like(k_)}, 2);
    v_ = torch::cat({v_, torch::zeros_like(v_)}, 2);
  }
  return pos_;
}

void KvCacheState::push(const torch::Tensor& k_t, const torch::Tensor& v_t) {
  check_shape("KvCacheState::push", "k_t", k_t, {k_.size(0), k_.size(1), k_.size(3)}, "(B,H,D)");
  check_shape("KvCacheState::push", "v_t", v_t, {v_.size(0), v_.size(1), v_.size(3)}, "(B,H,D)");
  const int64_t slot = reserve_slot();
  torch::NoGradGuard no_grad;
  k_.select(2, slot).copy_(k_t);
  v_.select(2, slot).copy_(v_t);
  advance();
}

void KvCacheState::append(const torch::Tensor& k, const torch::Tensor& v) {
  check_shape("KvCacheState::append", "k", k, {k_.size(0), k_.size(1), -1, k_.size(3)}, "(B,H,T,D)");
  check_shape("KvCacheState::append", "v", v, {k.size(0), k.size(1), k.size(2), k.size(3)}, "(B,H,T,D)");
  const int64_t T = k.size(2);
  torch::NoGradGuard no_grad;
  if (window_ > 0) {
    // Only the last W positions of the chunk stay: position p goes to slot p % W.
    const int64_t n = std::min(T, window_);
    auto slots = torch::remainder(torch::arange(pos_ + T - n, pos_ + T, torch::kLong), window_);
    k_.index_copy_(2, slots, k.narrow(2, T - n, n).to(k_.dtype()));
    v_.index_copy_(2, slots, v.narrow(2, T - n, n).to(v_.dtype()));
  } else {
    int64_t capacity = std::max<int64_t>(k_.size(2), 1);
    while (capacity < pos_ + T) capacity *= 2;  // the capacities push would reach
    if (capacity > k_.size(2)) {
      auto grow = [&](const torch::Tensor& t) {
        auto sizes = t.sizes().vec();
        sizes[2] = capacity - t.size(2);
        return torch::cat({t, torch::zeros(sizes, t.options())}, 2);
      };
      k_ = grow(k_);
      v_ = grow(v_);
    }
    k_.narrow(2, pos_, T).copy_(k);
    v_.narrow(2, pos_, T).copy_(v);
  }
  pos_ += T;
}

std::pair<torch::Tensor, torch::Tensor> KvCacheState::window_past() const {
  MIXLAB_ASSERT(window_ > 0, "window_past of a full KV cache");
  const int64_t held = std::min(pos_, window_);
  auto slots = torch::remainder(torch::arange(pos_ - held, pos_, torch::kLong), window_);
  auto front = [&](const torch::Tensor& t) {
    return torch::constant_pad_nd(t.index_select(2, slots), {0, 0, window_ - held, 0});
  };
  return {front(k_), front(v_)};
}

}  // namespace mixlab
