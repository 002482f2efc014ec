// The fused affine kernels' inputs per work item (affine_item_rows.h).
#include "affine_item_rows.h"

#include <algorithm>
#include <cstring>

#include "mixlab/core/error.h"

namespace mixlab::detail {

bool ItemRows::gatherable(const at::Tensor& x) { return x.dim() == 3 || x.size(3) == 1 || x.stride(3) == 1; }

// No detach() here: an ATen call costs microseconds at these sizes, and the rows are only read
// through raw pointers. The contiguous input itself is what the autograd functions save, as they
// saved q.contiguous() before.
ItemRows::ItemRows(const at::Tensor& x) : source_(x) {
  MIXLAB_ASSERT(x.dim() == 3 || x.dim() == 4, "ItemRows: a (B,H,T) or (B,H,T,D) tensor, got {} dimensions", x.dim());
  MIXLAB_ASSERT(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble, "ItemRows: float or double, got {}",
                std::string(c10::toString(x.scalar_type())));
  H_ = x.size(1);
  T_ = x.size(2);
  D_ = x.dim() == 4 ? x.size(3) : 1;
  if (source_.is_contiguous()) {
    rows_ = source_;
    return;
  }
  if (!gatherable(source_)) {
    rows_ = source_.contiguous();
    return;
  }
  rows_ = torch::empty(source_.sizes(), source_.options());
  gather_ = true;
  stride_b_ = source_.stride(0);
  stride_h_ = source_.stride(1);
  stride_t_ = source_.stride(2);
}

namespace {

// T rows of kBytes each, `stride` bytes apart, to consecutive rows. With the row size a constant the
// compiler inlines each memcpy as a few vector moves; a memmove call per row of 128 bytes (D 32
// floats) cost half again as much as ATen's copy of the same rows (perf, B 1, H 4, T 256).
template <int64_t kBytes>
void copy_rows(const char* from, int64_t stride, char* to, int64_t T) {
  for (int64_t t = 0; t < T; ++t) std::memcpy(to + t * kBytes, from + t * stride, kBytes);
}

void copy_rows(const char* from, int64_t stride, char* to, int64_t T, int64_t bytes) {
  switch (bytes) {
    case 16:
      return copy_rows<16>(from, stride, to, T);
    case 32:
      return copy_rows<32>(from, stride, to, T);
    case 64:
      return copy_rows<64>(from, stride, to, T);
    case 128:
      return copy_rows<128>(from, stride, to, T);
    case 256:
      return copy_rows<256>(from, stride, to, T);
    case 512:
      return copy_rows<512>(from, stride, to, T);
    default:
      for (int64_t t = 0; t < T; ++t) std::memcpy(to + t * bytes, from + t * stride, static_cast<size_t>(bytes));
  }
}

}  // namespace

template <typename E>
void ItemRows::gather_as(int64_t bh) const {
  const int64_t b = bh / H_, h = bh % H_;
  const E* from = source_.data_ptr<E>() + b * stride_b_ + h * stride_h_;
  E* to = rows_.data_ptr<E>() + bh * T_ * D_;
  if (D_ == 1) {
    for (int64_t t = 0; t < T_; ++t) to[t] = from[t * stride_t_];
    return;
  }
  constexpr auto kSize = static_cast<int64_t>(sizeof(E));
  copy_rows(reinterpret_cast<const char*>(from), stride_t_ * kSize, reinterpret_cast<char*>(to), T_, D_ * kSize);
}

void ItemRows::gather(int64_t bh) const {
  if (!gather_) return;
  if (source_.scalar_type() == at::kFloat) {
    gather_as<float>(bh);
  } else {
    gather_as<double>(bh);
  }
}

ItemDecays::ItemDecays(const at::Tensor& log_decay) {
  at::Tensor source = log_decay;
  if (!source.is_contiguous() && !ItemRows::gatherable(source)) source = source.contiguous();
  if (source.is_contiguous()) {
    source_ = source;
    factors_ = torch::empty(source.sizes(), source.options());
  } else {
    gathered_.emplace(source);
    factors_ = gathered_->rows();
  }
  values_per_item_ = source.size(2) * (source.dim() == 4 ? source.size(3) : 1);
}

void ItemDecays::fill(int64_t begin, int64_t end) const {
  if (end <= begin || values_per_item_ == 0) return;
  const int64_t first = begin * values_per_item_, count = (end - begin) * values_per_item_;
  const int64_t bytes = first * static_cast<int64_t>(factors_.element_size());
  // Flat views over raw pointers (from_blob): cheaper than detach() and view(), and they never
  // require grad. The exp below still goes through the dispatcher and its autograd kernel, with
  // the worker thread's own grad mode (on by default): safe only because these views carry no
  // autograd history, so never pass it a tensor that requires grad. The source is only read.
  const auto options = factors_.options();
  auto out = at::from_blob(static_cast<char*>(factors_.data_ptr()) + bytes, {count}, options);
  if (gathered_) {
    for (int64_t bh = begin; bh < end; ++bh) gathered_->gather(bh);
    out.exp_();
  } else {
    auto in = at::from_blob(static_cast<char*>(const_cast<void*>(source_.data_ptr())) + bytes, {count}, options);
    at::exp_out(out, in);
  }
}

}  // namespace mixlab::detail
