// causal_attention (mixlab/attention/causal_attention.h): argument checks, the composed LibTorch
// form, and the native form: a parallel loop over (batch, head) running flash_kernels.inc built
// for the instruction set mixlab/core/cpu_isa.h picks, inside an autograd function.
//
// Why native: the composed form writes the (tile, S+T) scores, their mask, their softmax and
// their gradients as LibTorch tensors, each a pass through memory larger than the caches, and
// computes the scores above the diagonal only to mask them; it was at parity with the same code
// written in Python (issue 17). The blocked form keeps a block's scores in L1.
#include "mixlab/attention/causal_attention.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <vector>

#include "flash_kernels.h"
#include "mixlab/core/error.h"
#include "mixlab/core/isa_dispatch.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/core/thread_scratch.h"

namespace mixlab {

namespace {

namespace fk = detail::flash;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Dims {
  int64_t B, H, T, S, D;
};

Dims check_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const char* fn = "causal_attention";
  for (const auto& [name, t] : {std::pair<const char*, const torch::Tensor*>{"q", &q}, {"k", &k}, {"v", &v}}) {
    check_defined(fn, name, *t);
    check_cpu(fn, name, *t);
    check_dim(fn, name, *t, 4, "(B,H,T,D)");
    check_floating(fn, name, *t);
  }
  check_same_dtype(fn, "k", k, "q", q);
  check_same_dtype(fn, "v", v, "q", q);
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  MIXLAB_CHECK(T > 0, "{}: q must have T > 0 queries (B,H,T,D), got {}", fn, shape_string(q));
  // D = 0 scaled its scores by 1/sqrt(0) and the native kernels have no vector for an empty row.
  MIXLAB_CHECK(D > 0, "{}: q must have a head dim D > 0 (B,H,T,D), got {}", fn, shape_string(q));
  MIXLAB_CHECK(k.size(0) == B && k.size(1) == H && k.size(3) == D && k.size(2) >= T,
               "{}: k must be (B,H,S+T,D) = ({},{},>= {},{}) for q {}, got {}", fn, B, H, T, D, shape_string(q),
               shape_string(k));
  check_shape(fn, "v", v, {k.size(0), k.size(1), k.size(2), k.size(3)}, "(B,H,S+T,D), the shape of k");
  return {B, H, T, k.size(2) - T, D};
}

torch::Tensor composed(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const Dims& d,
                       int64_t window) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.D));
  // Query tiles: rows [s, e) only see keys [k0, S + e), k0 = 0 without a window and
  // max(0, S + s − W) with one: (tile, S + e − k0) scores at a time.
  std::vector<torch::Tensor> outs;
  for (int64_t s = 0; s < d.T; s += kAttentionTile) {
    const int64_t e = std::min(d.T, s + kAttentionTile);
    const int64_t k0 = window > 0 ? std::max<int64_t>(d.S + s - window, 0) : 0;
    auto qs = q.narrow(2, s, e - s);
    auto ks = k.narrow(2, k0, d.S + e - k0), vs = v.narrow(2, k0, d.S + e - k0);
    auto scores = torch::matmul(qs, ks.transpose(-1, -2)) * scale;
    auto pos = torch::arange(d.S + s, d.S + e).unsqueeze(1), key = torch::arange(k0, d.S + e).unsqueeze(0);
    auto mask = key > pos;  // the future
    if (window > 0) mask = mask.logical_or(key < pos - window);
    outs.push_back(torch::matmul(scores.masked_fill(mask, -INFINITY).softmax(-1), vs));
  }
  return outs.size() == 1 ? outs[0] : torch::cat(outs, 2);
}

template <typename E>
struct Kernels {
  void (*forward)(const fk::AttentionRows<E>&);
  void (*backward)(const fk::AttentionGradRows<E>&);
};

template <typename E>
Kernels<E> kernels_for(CpuIsa isa) {
#define MIXLAB_FLASH_KERNELS(ns) \
  Kernels<E> { fk::ns::attention, fk::ns::attention_backward }
  return MIXLAB_ISA_SELECT(isa, MIXLAB_FLASH_KERNELS);
#undef MIXLAB_FLASH_KERNELS
}

// Unit column stride (any batch, head and row strides).
torch::Tensor unit_columns(const torch::Tensor& x) { return x.stride(3) == 1 ? x : x.contiguous(); }

template <typename E>
void forward_impl(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, torch::Tensor& out,
                  torch::Tensor& lse, const Dims& d, int64_t window) {
  const auto kernels = kernels_for<E>(cpu_isa());  // may throw: outside the parallel region
  const E scale = static_cast<E>(1.0 / std::sqrt(static_cast<double>(d.D)));
  const int64_t work = fk::forward_work_elements<E>(d.T, d.S, d.D);
  const E *qp = q.data_ptr<E>(), *kp = k.data_ptr<E>(), *vp = v.data_ptr<E>();
  E* op = out.data_ptr<E>();
  E* lp = lse.defined() ? lse.data_ptr<E>() : nullptr;
  at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
    ThreadScratch scratch;
    E* w = scratch.get<E>(static_cast<size_t>(work));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / d.H, h = bh % d.H;
      fk::AttentionRows<E> r{};
      r.q = qp + b * q.stride(0) + h * q.stride(1);
      r.q_row = q.stride(2);
      r.k = kp + b * k.stride(0) + h * k.stride(1);
      r.k_row = k.stride(2);
      r.v = vp + b * v.stride(0) + h * v.stride(1);
      r.v_row = v.stride(2);
      r.out = op + bh * d.T * d.D;
      r.lse = lp ? lp + bh * d.T : nullptr;
      r.work = w;
      r.T = d.T;
      r.S = d.S;
      r.D = d.D;
      r.scale = scale;
      r.window = window;
      kernels.forward(r);
    }
  });
}

template <typename E>
void backward_impl(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& out,
                   const torch::Tensor& lse, const torch::Tensor& dout, torch::Tensor& dq, torch::Tensor& dk,
                   torch::Tensor& dv, const Dims& d, int64_t window) {
  const auto kernels = kernels_for<E>(cpu_isa());
  const E scale = static_cast<E>(1.0 / std::sqrt(static_cast<double>(d.D)));
  const int64_t work = fk::backward_work_elements<E>(d.T, d.S, d.D);
  const int64_t keys = d.S + d.T;
  at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
    ThreadScratch scratch;
    E* w = scratch.get<E>(static_cast<size_t>(work));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / d.H, h = bh % d.H;
      fk::AttentionGradRows<E> r{};
      r.q = q.data_ptr<E>() + b * q.stride(0) + h * q.stride(1);
      r.q_row = q.stride(2);
      r.k = k.data_ptr<E>() + b * k.stride(0) + h * k.stride(1);
      r.k_row = k.stride(2);
      r.v = v.data_ptr<E>() + b * v.stride(0) + h * v.stride(1);
      r.v_row = v.stride(2);
      r.out = out.data_ptr<E>() + bh * d.T * d.D;
      r.dout = dout.data_ptr<E>() + b * dout.stride(0) + h * dout.stride(1);
      r.dout_row = dout.stride(2);
      r.lse = lse.data_ptr<E>() + bh * d.T;
      r.dq = dq.data_ptr<E>() + bh * d.T * d.D;
      r.dk = dk.data_ptr<E>() + bh * keys * d.D;
      r.dv = dv.data_ptr<E>() + bh * keys * d.D;
      r.work = w;
      r.T = d.T;
      r.S = d.S;
      r.D = d.D;
      r.scale = scale;
      r.window = window;
      kernels.backward(r);
    }
  });
}

class CausalAttentionFunction : public torch::autograd::Function<CausalAttentionFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& q_in, const torch::Tensor& k_in,
                               const torch::Tensor& v_in, int64_t window) {
    const auto q = unit_columns(q_in), k = unit_columns(k_in), v = unit_columns(v_in);
    const Dims d{q.size(0), q.size(1), q.size(2), k.size(2) - q.size(2), q.size(3)};
    auto out = torch::empty({d.B, d.H, d.T, d.D}, q.options());
    // The rows' log-sum-exps (B H T values) are kept for the backward whether or not one runs:
    // grad mode is off inside a custom function's forward, so it cannot tell.
    auto lse = torch::empty({d.B, d.H, d.T}, q.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "causal_attention",
                               [&] { forward_impl<scalar_t>(q, k, v, out, lse, d, window); });
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["window"] = window;
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    if (!grads[0].defined()) return {torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    const int64_t window = ctx->saved_data["window"].toInt();
    const auto dout = unit_columns(grads[0]);
    const Dims d{q.size(0), q.size(1), q.size(2), k.size(2) - q.size(2), q.size(3)};
    auto dq = torch::empty({d.B, d.H, d.T, d.D}, q.options());
    auto dk = torch::empty({d.B, d.H, d.S + d.T, d.D}, q.options());
    auto dv = torch::empty({d.B, d.H, d.S + d.T, d.D}, q.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "causal_attention_backward",
                               [&] { backward_impl<scalar_t>(q, k, v, out, lse, dout, dq, dk, dv, d, window); });
    return {dq, dk, dv, torch::Tensor()};
  }
};

}  // namespace

bool causal_attention_is_native(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const auto dtype = q.scalar_type();
  if (dtype != torch::kFloat && dtype != torch::kDouble) return false;
  const int64_t lanes = dtype == torch::kFloat ? fk::row_lanes<float>() : fk::row_lanes<double>();
  return q.size(3) > 0 && q.size(3) % lanes == 0;
}

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t window) {
  const Dims d = check_attention(q, k, v);
  MIXLAB_CHECK(window >= 0, "causal_attention: window must be >= 0 (0: every earlier key; W: the last W keys), got {}",
               window);
  if (ComposedAttentionGuard::active() || !causal_attention_is_native(q, k, v)) return composed(q, k, v, d, window);
  return CausalAttentionFunction::apply(q, k, v, window)[0];
}

}  // namespace mixlab
