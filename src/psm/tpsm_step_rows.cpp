// The T-PSM's fast decode step (Alg. 4 on raw rows) and the counter's Agg on raw rows; see
// "Streaming" in mixlab/psm/tpsm.h.
//
// Why: the reference step re-ran the ATen Inf on [s | buf] (up to 2c rows, ~30 ops per layer)
// for every token, 226 µs/token for the 2-layer compare model, where the arithmetic is a few
// tens of µs. Here each token is one transformer row against Inf's key/value cache of [s | buf]
// (PsmTransformer::step_rows), and the counter's Agg calls are the same raw-row transformer over
// [left | right] without the cat / narrow / dispatch around it.
//
// The cache is derived state: kv_len_ counts the positions of [s | buf] it holds, and every step
// feeds the rows from kv_len_ up to the new token, so a state whose cache is missing or stale
// (a new chunk's prefix, a load, a fork, a reference step in between) is rebuilt by the same code
// as a normal step. It equals the reference step to float rounding
// (tests/psm/tpsm_step_test.cpp).
#include <algorithm>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/core/row_kernels.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/psm/tpsm.h"

namespace mixlab {
namespace {

bool ok(const torch::Tensor& t, c10::ScalarType dtype) {
  return !t.defined() || (t.device().is_cpu() && t.is_contiguous() && t.scalar_type() == dtype);
}

bool linear_ok(const torch::nn::Linear& lin, c10::ScalarType dtype) {
  return !lin || (ok(lin->weight, dtype) && ok(lin->bias, dtype));
}

template <typename T>
const T* ptr(const torch::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// y = lin(x) for one row, or a copy when the map is the identity (d == C).
template <typename T>
void linear_or_copy(const torch::nn::Linear& lin, const T* x, T* y, int64_t out, int64_t in) {
  if (lin)
    row::linear<T>(lin->weight.data_ptr<T>(), ptr<T>(lin->bias), x, y, out, in);
  else
    std::copy(x, x + out, y);
}

}  // namespace

bool TpsmMixer::rows_ready(const TpsmState& s, const torch::Tensor& x_t) const {
  if (torch::GradMode::is_enabled()) return false;
  const auto dtype = x_t.scalar_type();
  if ((dtype != torch::kFloat && dtype != torch::kDouble) || !x_t.device().is_cpu()) return false;
  if (!agg_net_->rows_ok(dtype) || !inf_net_->rows_ok(dtype)) return false;
  if (!ok(e_, dtype) || !ok(compress_, dtype) || !linear_ok(w_in_, dtype) || !linear_ok(w_out_, dtype)) return false;
  // The state's tensors: the counter's prefix is read as it is (contiguous or not), the buffer in
  // place.
  const auto& prefix = s.counter_->prefix();
  return s.buf_.scalar_type() == dtype && s.buf_.device().is_cpu() && prefix.scalar_type() == dtype &&
         prefix.device().is_cpu();
}

torch::Tensor TpsmMixer::step_rows(TpsmState& s, const torch::Tensor& x_t) {
  const auto dtype = x_t.scalar_type();
  const int64_t kvn = inf_net_->rows_cache_numel();
  if (!s.kv_.defined() || s.kv_.scalar_type() != dtype || s.kv_.size(0) != s.batch_) {
    s.kv_ = at::empty({s.batch_, kvn}, x_t.options());
    s.kv_len_ = 0;
  }
  // The buffer is written in place: a fresh tensor if an earlier autograd step left it in a graph
  // or a view.
  if (s.buf_.requires_grad() || !s.buf_.is_contiguous()) s.buf_ = s.buf_.detach().contiguous().clone();
  auto out = at::empty({s.batch_, C_}, x_t.options());
  const auto x = x_t.contiguous();
  AT_DISPATCH_FLOATING_TYPES(dtype, "tpsm step_rows", [&] { step_rows_typed<scalar_t>(s, x, out); });
  ++s.position_;
  if (++s.fill_ == options_.chunk) {
    // The counter keeps the buffer tensor as a root (or merges it): the next chunk gets a new one,
    // and a new prefix whose keys/values the next step computes.
    s.counter_->insert(s.buf_);
    s.buf_ = at::zeros_like(s.buf_);
    s.fill_ = 0;
    s.kv_len_ = 0;
  }
  return out;
}

template <typename T>
void TpsmMixer::step_rows_typed(TpsmState& s, const torch::Tensor& x_t, torch::Tensor& out) {
  const int64_t B = s.batch_, c = options_.chunk, d = d_, C = C_, fill = s.fill_;
  const int64_t sp = s.counter_->prefix().size(1);  // rows of s: c, or 0 for the empty identity
  const int64_t from = s.kv_len_;                   // positions of [s | buf] already cached
  const int64_t n = sp + fill + 1 - from;           // rows to feed: the uncached ones and the new token
  MIXLAB_ASSERT(from >= 0 && from <= sp + fill, "tpsm step_rows: cache holds {} positions, fill {}", from, fill);
  torch::Tensor prefix;  // (B,sp,d), read only when its keys/values are missing
  if (from < sp) prefix = s.counter_->prefix().contiguous();
  thread_local std::vector<T> work;
  work.resize(static_cast<size_t>((n + 1) * d));
  T* rows = work.data();  // (n,d) positions [from, c + fill] of [s | buf | u]
  T* y = rows + n * d;    // (d) Inf's output row
  const int64_t kvn = inf_net_->rows_cache_numel();
  T* buf = s.buf_.data_ptr<T>();
  for (int64_t b = 0; b < B; ++b) {
    T* bb = buf + b * c * d;
    linear_or_copy<T>(w_in_, x_t.data_ptr<T>() + b * C, bb + fill * d, d, C);  // u = encode(x_t) into the buffer
    for (int64_t pos = from; pos <= sp + fill; ++pos) {
      const T* src = pos < sp ? prefix.data_ptr<T>() + (b * sp + pos) * d : bb + (pos - sp) * d;
      std::copy(src, src + d, rows + (pos - from) * d);
    }
    inf_net_->step_rows<T>(rows, n, from, s.kv_.data_ptr<T>() + b * kvn, y, n - 1);
    linear_or_copy<T>(w_out_, y, out.data_ptr<T>() + b * C, C, d);
  }
  s.kv_len_ = sp + fill + 1;
}

torch::Tensor TpsmMixer::agg_decode(const torch::Tensor& left, const torch::Tensor& right) {
  const auto dtype = left.scalar_type();
  const int64_t c = options_.chunk;
  if (torch::GradMode::is_enabled() || (dtype != torch::kFloat && dtype != torch::kDouble) ||
      right.scalar_type() != dtype || !left.device().is_cpu() || !right.device().is_cpu() ||
      !agg_net_->rows_ok(dtype) || !ok(compress_, dtype))
    return agg(left, right);
  MIXLAB_ASSERT(left.dim() == 3 && (left.size(1) == c || left.size(1) == 0) && left.size(2) == d_ && right.dim() == 3 &&
                    right.size(0) == left.size(0) && right.size(1) == c && right.size(2) == d_,
                "tpsm Agg: left {} must be (N,c,d) or (N,0,d) and right {} (N,c,d)", shape_string(left),
                shape_string(right));
  auto out = at::empty(right.sizes(), right.options());
  const auto l = left.contiguous(), r = right.contiguous();
  AT_DISPATCH_FLOATING_TYPES(dtype, "tpsm agg_rows", [&] { agg_rows_typed<scalar_t>(l, r, out); });
  return out;
}

template <typename T>
void TpsmMixer::agg_rows_typed(const torch::Tensor& left, const torch::Tensor& right, torch::Tensor& out) {
  // l = c, or 0 for the empty identity (then Agg runs on the right block alone).
  const int64_t N = left.size(0), c = options_.chunk, d = d_, l = left.size(1), S = l + c;
  const bool linear = options_.compress == TpsmCompress::kLinear;
  const int64_t y_from = linear ? 0 : l;  // right_half reads only the right half's outputs
  const int64_t kvn = agg_net_->rows_cache_numel();
  thread_local std::vector<T> work;
  work.resize(static_cast<size_t>(2 * S * d + kvn));
  T* x = work.data();  // (l+c,d) [left | right]
  T* y = x + S * d;    // (l+c - y_from, d)
  T* kv = y + S * d;   // Agg's keys/values: scratch, one call at a time
  for (int64_t i = 0; i < N; ++i) {
    std::copy(left.data_ptr<T>() + i * l * d, left.data_ptr<T>() + (i + 1) * l * d, x);
    std::copy(right.data_ptr<T>() + i * c * d, right.data_ptr<T>() + (i + 1) * c * d, x + l * d);
    agg_net_->step_rows<T>(x, S, 0, kv, y, y_from);
    T* o = out.data_ptr<T>() + i * c * d;
    if (!linear) {
      std::copy(y, y + c * d, o);
      continue;
    }
    // compress=linear: W_cmp (c,2c) applied over the l+c outputs (its last l+c columns).
    const T* w = compress_.data_ptr<T>() + (c - l);
    std::fill(o, o + c * d, T(0));
    for (int64_t a = 0; a < c; ++a)
      for (int64_t j = 0; j < S; ++j) row::axpy<T>(w[a * 2 * c + j], y + j * d, o + a * d, d);
  }
}

}  // namespace mixlab
