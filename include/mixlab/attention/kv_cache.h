// mixlab/attention/kv_cache.h — the decode state of attention-like mixers: keys and values of past
// positions, either all of them (growing by doubling) or the last W (a ring buffer).
//
// Shapes: k, v (B,H,capacity,D). Memory reported = bytes of the held buffers (capacity, not just
// the used part), since that is what the process holds.
#pragma once

#include <utility>

#include "mixlab/mixer/mixer.h"

namespace mixlab {

class KvCacheState : public MixerState {
 public:
  /// window <= 0: keep every position; window W > 0: keep only the last W positions.
  KvCacheState(int64_t batch, int64_t heads, int64_t head_dim, int64_t window, torch::TensorOptions options);

  int64_t position() const override { return pos_; }
  int64_t bytes() const override { return tensor_bytes(k_) + tensor_bytes(v_); }
  int64_t cached_positions() const override;
  int64_t batch() const override { return k_.size(0); }
  /// Position and the whole k, v buffers (capacity included, so a restored cache grows at the
  /// same tokens as the original).
  void io(StateArchive& ar) override;

  /// Keys/values of the cached past positions (B,H,n,D), in no particular order for the window
  /// case (softmax does not care about order).
  torch::Tensor keys() const;
  torch::Tensor values() const;
  /// Appends k_t, v_t (B,H,D) for the current position and advances position().
  void push(const torch::Tensor& k_t, const torch::Tensor& v_t);
  /// Appends a chunk of T positions k, v (B,H,T,D) (prefill): a full cache grows (doubling) to hold
  /// them, a window's ring keeps the last W. Advances position() by T.
  void append(const torch::Tensor& k, const torch::Tensor& v);
  /// A window's past in order: keys and values (B,H,W,D) of positions position()-W ..
  /// position()-1, oldest first, zeros for positions before 0.
  std::pair<torch::Tensor, torch::Tensor> window_past() const;

  // The raw-row step's access (AttentionMixer::step_rows): it writes the current position's rows
  // into the buffers itself, then advances. push() is reserve_slot(), a copy and advance().
  /// The buffer slot of position position(): position() for a full cache, grown (doubling)
  /// first when full; position() % W in a window's ring. Does not advance.
  int64_t reserve_slot();
  /// Advances position() by one, after the slot reserve_slot() gave has been written.
  void advance() { ++pos_; }
  /// The whole k, v buffers (B,H,capacity,D): slot j of a head is row j of its (capacity,D) block.
  const torch::Tensor& k_buffer() const { return k_; }
  const torch::Tensor& v_buffer() const { return v_; }

 private:
  torch::Tensor k_, v_;
  int64_t window_;
  int64_t pos_ = 0;
};

}  // namespace mixlab
