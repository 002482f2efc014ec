// Private: the inputs of the fused affine kernels (affine_fused.cpp) as their work items read
// them, one (batch, head) each: T contiguous rows of D values.
//
// Issue 38 item 4: the layers pass q, k, v and the gates as heads-first views of (B,T,H,D)
// projections (affine_member.h's heads_first), and the kernels read contiguous rows. One
// contiguous() per input and one exp() of the gates before the parallel region were serial work
// that the second thread waited through: at B 1, H 4, T 256, D 32 they were about a third of a
// forward call, and that forward ran barely faster at 2 threads than at 1. Here each work item
// copies its own rows inside the parallel region just before its kernel reads them, and each
// thread takes the decay factors of its own items.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>

namespace mixlab::detail {

/// One (B,H,T,D) or (B,H,T) float or double input as contiguous rows: item bh = b H + h at
/// bh T D of rows(). A contiguous input is read where it lies. Any other layout whose D values
/// per token lie side by side (inner stride 1) is gathered item by item (gather) into a
/// contiguous tensor; the rest is made contiguous here, up front, as before.
class ItemRows {
 public:
  explicit ItemRows(const at::Tensor& x);

  /// (B,H,T,D) or (B,H,T), contiguous: what the kernels read (the input itself when it was
  /// contiguous). Its values are complete once gather ran for every item.
  const at::Tensor& rows() const { return rows_; }
  /// Copies item bh's rows into rows() (nothing when the input is read in place). Safe to call
  /// for different items from different threads.
  void gather(int64_t bh) const;
  bool gathers() const { return gather_; }
  /// Values per item: T D.
  int64_t item_values() const { return T_ * D_; }
  /// Whether gather() can collect x's rows: a token's D values side by side.
  static bool gatherable(const at::Tensor& x);

 private:
  template <typename E>
  void gather_as(int64_t bh) const;

  at::Tensor source_, rows_;
  bool gather_ = false;
  int64_t H_ = 1, T_ = 0, D_ = 1, stride_b_ = 0, stride_h_ = 0, stride_t_ = 0;
};

/// The decay factors exp(log_decay) of a (B,H,T,Dk) or (B,H,T) log decay, as contiguous rows,
/// taken per range of items inside the parallel region (fill: one call per thread, as an ATen call
/// costs microseconds) with ATen's exp, so that they are bit for bit the factors one exp() over
/// the whole tensor gave.
class ItemDecays {
 public:
  explicit ItemDecays(const at::Tensor& log_decay);

  /// exp(log_decay), contiguous, complete once fill covered every item.
  const at::Tensor& rows() const { return factors_; }
  /// Writes the factors of items [begin, end) into rows(), with ATen's exp on flat views of the
  /// raw rows (an OpenMP worker thread does not inherit the caller's grad mode, and views made by
  /// from_blob carry no autograd history).
  void fill(int64_t begin, int64_t end) const;
  int64_t item_values() const { return values_per_item_; }

 private:
  at::Tensor source_, factors_;       // source_: the contiguous log decay, when it is read in place
  std::optional<ItemRows> gathered_;  // gathers the log decays into factors_, then exp in place
  int64_t values_per_item_ = 0;
};

}  // namespace mixlab::detail
