// block_attention (mixlab/attention/block_attention.h): argument checks, the composed LibTorch form, and
// the native form: a parallel loop over (group, head) running block_attention_kernels.inc built for
// the instruction set mixlab/core/cpu_isa.h picks, inside an autograd function.
#include "mixlab/attention/block_attention.h"

#include <ATen/Parallel.h>

#include "block_attention_kernels.h"
#include "mixlab/core/error.h"
#include "mixlab/core/isa_dispatch.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/core/thread_scratch.h"

namespace mixlab {
namespace {

namespace bk = detail::block_attn;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Dims {
  int64_t G, Lq, Lk, H, D;
};

Dims check_block_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const char* fn = "block_attention";
  for (const auto& [name, t] : {std::pair<const char*, const torch::Tensor*>{"q", &q}, {"k", &k}, {"v", &v}}) {
    check_defined(fn, name, *t);
    check_cpu(fn, name, *t);
    check_dim(fn, name, *t, 4, "(G,L,H,D)");
    check_floating(fn, name, *t);
  }
  check_same_dtype(fn, "k", k, "q", q);
  check_same_dtype(fn, "v", v, "q", q);
  const int64_t G = q.size(0), Lq = q.size(1), H = q.size(2), D = q.size(3);
  MIXLAB_CHECK(Lq > 0 && D > 0, "{}: q must be (G,Lq,H,D) with Lq > 0 and D > 0, got {}", fn, shape_string(q));
  MIXLAB_CHECK(k.size(0) == G && k.size(2) == H && k.size(3) == D && k.size(1) > 0,
               "{}: k must be (G,Lk,H,D) = ({},>= 1,{},{}) for q {}, got {}", fn, G, H, D, shape_string(q),
               shape_string(k));
  check_shape(fn, "v", v, {k.size(0), k.size(1), k.size(2), k.size(3)}, "(G,Lk,H,D), the shape of k");
  return {G, Lq, k.size(1), H, D};
}

torch::Tensor composed(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale) {
  // (G,L,H,D) -> (G,H,L,D) and back.
  auto s = torch::matmul(q.transpose(1, 2), k.transpose(1, 2).transpose(-1, -2)) * scale;
  return torch::matmul(s.softmax(-1), v.transpose(1, 2)).transpose(1, 2).contiguous();
}

template <typename E>
struct Kernels {
  void (*forward)(const bk::BlockRows<E>&);
  void (*backward)(const bk::BlockGradRows<E>&);
};

template <typename E>
Kernels<E> kernels_for(CpuIsa isa) {
#define MIXLAB_BLOCK_ATTENTION_KERNELS(ns) \
  Kernels<E> { bk::ns::block_attention, bk::ns::block_attention_backward }
  return MIXLAB_ISA_SELECT(isa, MIXLAB_BLOCK_ATTENTION_KERNELS);
#undef MIXLAB_BLOCK_ATTENTION_KERNELS
}

torch::Tensor unit_columns(const torch::Tensor& x) { return x.stride(3) == 1 ? x : x.contiguous(); }

// (group, head) pairs per parallel chunk: about 64k multiply-adds each.
int64_t grain(const Dims& d) {
  return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, d.Lq * d.Lk * d.D));
}

template <typename E>
void forward_impl(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, torch::Tensor& out,
                  torch::Tensor& lse, const Dims& d, double scale) {
  const auto kernels = kernels_for<E>(cpu_isa());  // may throw: outside the parallel region
  const int64_t work = bk::work_elements<E>(d.Lq, d.Lk, d.D);
  const E *qp = q.data_ptr<E>(), *kp = k.data_ptr<E>(), *vp = v.data_ptr<E>();
  E *op = out.data_ptr<E>(), *lp = lse.data_ptr<E>();
  at::parallel_for(0, d.G * d.H, grain(d), [&](int64_t begin, int64_t end) {
    ThreadScratch scratch;
    E* w = scratch.get<E>(static_cast<size_t>(work));
    for (int64_t gh = begin; gh < end; ++gh) {
      const int64_t g = gh / d.H, h = gh % d.H;
      bk::BlockRows<E> r{};
      r.q = qp + g * q.stride(0) + h * q.stride(2);
      r.q_row = q.stride(1);
      r.k = kp + g * k.stride(0) + h * k.stride(2);
      r.k_row = k.stride(1);
      r.v = vp + g * v.stride(0) + h * v.stride(2);
      r.v_row = v.stride(1);
      r.out = op + (g * d.Lq * d.H + h) * d.D;
      r.out_row = d.H * d.D;
      r.lse = lp + gh * d.Lq;
      r.work = w;
      r.Lq = d.Lq;
      r.Lk = d.Lk;
      r.D = d.D;
      r.scale = static_cast<E>(scale);
      kernels.forward(r);
    }
  });
}

template <typename E>
void backward_impl(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& out,
                   const torch::Tensor& lse, const torch::Tensor& dout, torch::Tensor& dq, torch::Tensor& dk,
                   torch::Tensor& dv, const Dims& d, double scale) {
  const auto kernels = kernels_for<E>(cpu_isa());
  const int64_t work = bk::work_elements<E>(d.Lq, d.Lk, d.D);
  const int64_t row = d.H * d.D;
  at::parallel_for(0, d.G * d.H, grain(d), [&](int64_t begin, int64_t end) {
    ThreadScratch scratch;
    E* w = scratch.get<E>(static_cast<size_t>(work));
    for (int64_t gh = begin; gh < end; ++gh) {
      const int64_t g = gh / d.H, h = gh % d.H;
      bk::BlockGradRows<E> r{};
      r.q = q.data_ptr<E>() + g * q.stride(0) + h * q.stride(2);
      r.q_row = q.stride(1);
      r.k = k.data_ptr<E>() + g * k.stride(0) + h * k.stride(2);
      r.k_row = k.stride(1);
      r.v = v.data_ptr<E>() + g * v.stride(0) + h * v.stride(2);
      r.v_row = v.stride(1);
      r.out = out.data_ptr<E>() + (g * d.Lq * d.H + h) * d.D;
      r.out_row = row;
      r.dout = dout.data_ptr<E>() + g * dout.stride(0) + h * dout.stride(2);
      r.dout_row = dout.stride(1);
      r.lse = lse.data_ptr<E>() + gh * d.Lq;
      r.dq = dq.data_ptr<E>() + (g * d.Lq * d.H + h) * d.D;
      r.dq_row = row;
      r.dk = dk.data_ptr<E>() + (g * d.Lk * d.H + h) * d.D;
      r.dk_row = row;
      r.dv = dv.data_ptr<E>() + (g * d.Lk * d.H + h) * d.D;
      r.dv_row = row;
      r.work = w;
      r.Lq = d.Lq;
      r.Lk = d.Lk;
      r.D = d.D;
      r.scale = static_cast<E>(scale);
      kernels.backward(r);
    }
  });
}

class BlockAttentionFunction : public torch::autograd::Function<BlockAttentionFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& q_in, const torch::Tensor& k_in,
                               const torch::Tensor& v_in, double scale) {
    const auto q = unit_columns(q_in), k = unit_columns(k_in), v = unit_columns(v_in);
    const Dims d{q.size(0), q.size(1), k.size(1), q.size(2), q.size(3)};
    auto out = torch::empty({d.G, d.Lq, d.H, d.D}, q.options());
    auto lse = torch::empty({d.G, d.H, d.Lq}, q.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "block_attention",
                               [&] { forward_impl<scalar_t>(q, k, v, out, lse, d, scale); });
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["scale"] = scale;
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    if (!grads[0].defined()) return {torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    const double scale = ctx->saved_data["scale"].toDouble();
    const auto dout = unit_columns(grads[0]);
    const Dims d{q.size(0), q.size(1), k.size(1), q.size(2), q.size(3)};
    auto dq = torch::empty({d.G, d.Lq, d.H, d.D}, q.options());
    auto dk = torch::empty({d.G, d.Lk, d.H, d.D}, q.options());
    auto dv = torch::empty({d.G, d.Lk, d.H, d.D}, q.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "block_attention_backward",
                               [&] { backward_impl<scalar_t>(q, k, v, out, lse, dout, dq, dk, dv, d, scale); });
    return {dq, dk, dv, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor block_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale) {
  check_block_attention(q, k, v);
  if (ComposedBlockAttentionGuard::active()) return composed(q, k, v, scale);
  return BlockAttentionFunction::apply(q, k, v, scale)[0];
}

}  // namespace mixlab
