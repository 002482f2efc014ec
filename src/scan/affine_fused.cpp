// The fused affine kernels (affine_fused.h): one work item per (batch, head) over
// at::parallel_for, each gathering its own contiguous rows (affine_item_rows.h) and running the raw
// loops of affine_fused_kernels.inc built for the instruction set mixlab/core/cpu_isa.h picks (once
// per call, before the parallel region); the autograd functions that pair the forward with the
// fused backward.
#include "affine_fused.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "affine_fused_kernels.h"
#include "affine_item_rows.h"
#include "mixlab/core/error.h"
#include "mixlab/core/isa_dispatch.h"

namespace mixlab {

namespace detail {
namespace {

using Isa = CpuIsa;

// The four kernels of one instruction set, for element type E.
template <typename E>
struct Kernels {
  void (*diag)(const affine_fused::DiagDecayRows<E>&);
  void (*diag_backward)(const affine_fused::DiagDecayGradRows<E>&);
  void (*delta)(const affine_fused::DeltaRuleRows<E>&);
  void (*delta_backward)(const affine_fused::DeltaRuleGradRows<E>&);
};

template <typename E>
Kernels<E> kernels_for(Isa chosen) {
  namespace f = affine_fused;
#define MIXLAB_AFFINE_KERNELS(ns) \
  Kernels<E> { f::ns::diag_decay, f::ns::diag_decay_backward, f::ns::delta_rule, f::ns::delta_rule_backward }
  return MIXLAB_ISA_SELECT(chosen, MIXLAB_AFFINE_KERNELS);
#undef MIXLAB_AFFINE_KERNELS
}

// The output and the state the kernels write: the state starts as s0 (or zeros).
std::pair<at::Tensor, at::Tensor> outputs(const AffineDims& d, const at::Tensor& q, const at::Tensor& s0) {
  auto out = torch::empty({d.B, d.H, d.T, d.Dv}, q.options());
  auto state = s0.defined() ? s0.detach().clone(at::MemoryFormat::Contiguous)
                            : torch::zeros({d.B, d.H, d.Dk, d.Dv}, q.options());
  return {out, state};
}

// Issue 38 item 4: when several threads share the work items, each item runs its recurrence on a
// state buffer that its own thread allocated and copies it into the state tensor at the end. In
// place, the items' states lie side by side in the (B,H,Dk,Dv) tensor; in a plain C++ probe of two
// heads of the diagonal decay on two threads (docs/log/benchmarks-2026-12.md, "Threads at B·H = 2"),
// one of the two heads then ran 1.3x slower than alone, while with separately allocated states
// both ran as fast as alone. Which hardware structure the adjacent states share was not found. One
// thread keeps the state in place (no copies).
template <typename E>
class ItemState {
 public:
  // n: values per item's state, 0 to run in place.
  explicit ItemState(int64_t n)
      : n_(n), storage_(n > 0 ? static_cast<size_t>(n) + kLineValues : 0), buffer_(line_aligned(storage_.data())) {}
  // The buffer the item runs on: a copy of its `state` in this thread's storage, or `state` itself.
  E* hold(E* state) {
    if (n_ == 0) return state;
    std::copy(state, state + n_, buffer_);
    return buffer_;
  }
  // Writes what the item left in its buffer back into `state`.
  void release(E* state) {
    if (n_ > 0) std::copy(buffer_, buffer_ + n_, state);
  }

 private:
  static constexpr int64_t kLineBytes = 64;  // the kernels' rows start on cache lines, as in a tensor
  static constexpr int64_t kLineValues = kLineBytes / static_cast<int64_t>(sizeof(E));
  static E* line_aligned(E* p) {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    return reinterpret_cast<E*>((address + kLineBytes - 1) & ~static_cast<std::uintptr_t>(kLineBytes - 1));
  }
  int64_t n_;
  std::vector<E> storage_;
  E* buffer_;  // storage_'s first cache line boundary
};

// Whether the items of a forward run on ItemState buffers of their own: more than one item and
// more than one thread to share them.
bool items_need_own_state(const AffineDims& d) { return d.B * d.H > 1 && at::get_num_threads() > 1; }

// True when no argument needs a gradient: grad mode off, or no defined tensor requires grad.
bool needs_no_gradient(std::initializer_list<const at::Tensor*> inputs) {
  if (!at::GradMode::is_enabled()) return true;
  for (const at::Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return false;
  return true;
}

// Tokens per checkpoint of the diagonal decay's training forward (affine_fused::checkpoint_every),
// the same rule for the forward that saves them and the backward that reads them.
int64_t checkpoint_chunk(const AffineDims& d, const at::Tensor& q) {
  return affine_fused::checkpoint_every(d.Dk, d.Dv, static_cast<int64_t>(q.element_size()));
}

// The diagonal decay's inputs as its work items read them (affine_item_rows.h): q, k (B,H,T,Dk),
// v (B,H,T,Dv) and the decay factors a = exp(g) ((B,H,T) for a scalar gate, else (B,H,T,Dk)).
struct DiagItems {
  ItemRows q, k, v;
  ItemDecays a;
  bool scalar_gate;
  DiagItems(const at::Tensor& q_, const at::Tensor& k_, const at::Tensor& v_, const at::Tensor& g)
      : q(q_), k(k_), v(v_), a(g), scalar_gate(g.dim() == 3) {}
};

// The forward over the items' rows (DiagItems: each thread takes the decay factors of its range
// of items in one exp call, then each item gathers its rows right before its kernel reads them);
// with `checkpoints` it also returns there the state before each chunk of tokens,
// (B, H, chunks, Dk, Dv), which the backward starts from.
std::pair<at::Tensor, at::Tensor> diag_forward_raw(const AffineDims& d, const DiagItems& in, const at::Tensor& s0,
                                                   at::Tensor* checkpoints = nullptr) {
  const at::Tensor& q = in.q.rows();
  auto [out, state] = outputs(d, q, s0);
  const int64_t T = d.T, Dk = d.Dk, Dv = d.Dv;
  const int64_t chunk = checkpoint_chunk(d, q), chunks = affine_fused::checkpoint_count(T, chunk);
  if (checkpoints) *checkpoints = torch::empty({d.B, d.H, chunks, Dk, Dv}, q.options());
  const bool scalar_gate = in.scalar_gate;
  const int64_t a_row = scalar_gate ? 1 : Dk;
  const Isa chosen = cpu_isa();  // may throw (MIXLAB_CPU_ISA): outside the parallel region
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "diag_decay_fused", [&] {
    const scalar_t *qp = q.data_ptr<scalar_t>(), *kp = in.k.rows().data_ptr<scalar_t>(),
                   *vp = in.v.rows().data_ptr<scalar_t>(), *ap = in.a.rows().data_ptr<scalar_t>();
    scalar_t *op = out.data_ptr<scalar_t>(), *sp = state.data_ptr<scalar_t>();
    scalar_t* cp = checkpoints ? checkpoints->data_ptr<scalar_t>() : nullptr;
    const bool own_state = items_need_own_state(d);
    at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
      ItemState<scalar_t> item_state(own_state ? Dk * Dv : 0);
      in.a.fill(begin, end);
      for (int64_t bh = begin; bh < end; ++bh) {
        in.q.gather(bh);
        in.k.gather(bh);
        in.v.gather(bh);
        scalar_t* state_rows = item_state.hold(sp + bh * Dk * Dv);
        affine_fused::DiagDecayRows<scalar_t> rows{qp + bh * T * Dk,
                                                   kp + bh * T * Dk,
                                                   vp + bh * T * Dv,
                                                   ap + bh * T * a_row,
                                                   scalar_gate,
                                                   op + bh * T * Dv,
                                                   state_rows,
                                                   T,
                                                   Dk,
                                                   Dv,
                                                   cp ? cp + bh * chunks * Dk * Dv : nullptr,
                                                   chunk};
        kernels_for<scalar_t>(chosen).diag(rows);
        item_state.release(sp + bh * Dk * Dv);
      }
    });
  });
  return {out, state};
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Kernel 1 with gradients: the fused forward (saving its checkpoints) and the fused backward (from
// them). g is the log decay as the kernel reads it ((B,H,T) for a scalar gate, else (B,H,T,Dk));
// s0 an empty tensor when there is no initial state (autograd's apply takes defined tensors).
class DiagDecayFusedFunction : public torch::autograd::Function<DiagDecayFusedFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& g, const at::Tensor& s0) {
    const AffineDims d{q.size(0), q.size(1), q.size(2), q.size(3), v.size(3)};
    const DiagItems in(q, k, v, g);
    // The backward needs the state before each chunk of tokens (affine_fused_kernels.h).
    const at::Tensor init = s0.numel() > 0 ? s0.contiguous() : at::Tensor();
    at::Tensor checkpoints;
    auto [out, state] = diag_forward_raw(d, in, init, &checkpoints);
    ctx->save_for_backward({in.q.rows(), in.k.rows(), in.v.rows(), in.a.rows(), checkpoints});
    ctx->saved_data["has_s0"] = s0.numel() > 0;
    return {out, state};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    MIXLAB_CHECK(!at::GradMode::is_enabled(),
                 "diag_decay (fused): double backward (create_graph=true) is not supported by the fused kernel; "
                 "run the call under mixlab::ComposedAffineGuard");
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &a = saved[3], &checkpoints = saved[4];
    const bool scalar_gate = a.dim() == 3, has_s0 = ctx->saved_data["has_s0"].toBool();
    const int64_t B = q.size(0), H = q.size(1), T = q.size(2), Dk = q.size(3), Dv = v.size(3);
    const int64_t chunk = checkpoint_chunk(AffineDims{B, H, T, Dk, Dv}, q), chunks = checkpoints.size(2);
    // The upstream gradient of a layer's output arrives heads-first over (B,T,H,Dv): each item
    // gathers its own rows (affine_item_rows.h).
    const ItemRows grad_rows(grads[0].defined() ? grads[0] : torch::zeros({B, H, T, Dv}, q.options()));
    const at::Tensor& grad_out = grad_rows.rows();
    auto grad_state = grads[1].defined() ? grads[1].contiguous().clone() : torch::zeros({B, H, Dk, Dv}, q.options());
    auto dq = torch::empty_like(q), dk = torch::empty_like(k), dv = torch::empty_like(v), dg = torch::empty_like(a);
    const Isa chosen = cpu_isa();  // may throw (MIXLAB_CPU_ISA): outside the parallel region
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "diag_decay_fused_backward", [&] {
      using E = scalar_t;
      const int64_t a_row = scalar_gate ? 1 : Dk;
      at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
        std::vector<E> P(static_cast<size_t>(Dk * Dv)), dstate(static_cast<size_t>(Dk * Dv)),
            running(static_cast<size_t>(Dk)), dv_lanes(static_cast<size_t>(Dv * (kVectorBytes / sizeof(E))));
        for (int64_t bh = begin; bh < end; ++bh) {
          grad_rows.gather(bh);
          kernels_for<E>(chosen).diag_backward(
              affine_fused::DiagDecayGradRows<E>{q.data_ptr<E>() + bh * T * Dk,
                                                 k.data_ptr<E>() + bh * T * Dk,
                                                 v.data_ptr<E>() + bh * T * Dv,
                                                 a.data_ptr<E>() + bh * T * a_row,
                                                 scalar_gate,
                                                 checkpoints.data_ptr<E>() + bh * chunks * Dk * Dv,
                                                 chunk,
                                                 grad_out.data_ptr<E>() + bh * T * Dv,
                                                 grad_state.data_ptr<E>() + bh * Dk * Dv,
                                                 dq.data_ptr<E>() + bh * T * Dk,
                                                 dk.data_ptr<E>() + bh * T * Dk,
                                                 dv.data_ptr<E>() + bh * T * Dv,
                                                 dg.data_ptr<E>() + bh * T * a_row,
                                                 P.data(),
                                                 dstate.data(),
                                                 running.data(),
                                                 dv_lanes.data(),
                                                 T,
                                                 Dk,
                                                 Dv});
        }
      });
    });
    return {dq, dk, dv, dg, has_s0 ? grad_state : at::Tensor()};
  }
};

// g as the kernels read it: (B,H,T) for a scalar gate, else (B,H,T,Dk).
AffineResult diag_decay_no_grad(const AffineDims& d, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const at::Tensor& g, const at::Tensor& s0) {
  at::NoGradGuard no_grad;
  auto [out, state] = diag_forward_raw(d, DiagItems(q, k, v, g), s0);
  return {out, state};
}

// The delta rule's inputs as its work items read them (affine_item_rows.h): q, k (B,H,T,Dk),
// v (B,H,T,Dv), beta (B,H,T) and, for gated DeltaNet, alpha = exp(log_alpha) (B,H,T).
struct DeltaItems {
  ItemRows q, k, v, beta;
  std::optional<ItemDecays> alpha;  // none for DeltaNet (no decay)
  DeltaItems(const at::Tensor& q_, const at::Tensor& k_, const at::Tensor& v_, const at::Tensor& beta_,
             const at::Tensor& log_alpha)
      : q(q_), k(k_), v(v_), beta(beta_) {
    if (log_alpha.defined()) alpha.emplace(log_alpha);
  }
};

// Kernel 2's forward over the items' rows (DeltaItems, prepared as in diag_forward_raw); with `errors` it also writes
// each token's e_t = v_t - alpha_t S_{t-1}^T k_t (B,H,T,Dv) there, which is all the backward needs besides the inputs
// and S_{-1}.
std::pair<at::Tensor, at::Tensor> delta_forward_raw(const AffineDims& d, const DeltaItems& in, const at::Tensor& s0,
                                                    at::Tensor* errors) {
  const at::Tensor& q = in.q.rows();
  auto [out, state] = outputs(d, q, s0);
  const int64_t T = d.T, Dk = d.Dk, Dv = d.Dv;
  if (errors) *errors = torch::empty({d.B, d.H, T, Dv}, q.options());
  const Isa chosen = cpu_isa();  // may throw (MIXLAB_CPU_ISA): outside the parallel region
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "delta_rule_fused", [&] {
    const scalar_t *qp = q.data_ptr<scalar_t>(), *kp = in.k.rows().data_ptr<scalar_t>(),
                   *vp = in.v.rows().data_ptr<scalar_t>(), *bp = in.beta.rows().data_ptr<scalar_t>(),
                   *alp = in.alpha ? in.alpha->rows().data_ptr<scalar_t>() : nullptr;
    scalar_t *op = out.data_ptr<scalar_t>(), *sp = state.data_ptr<scalar_t>();
    scalar_t* ep = errors ? errors->data_ptr<scalar_t>() : nullptr;
    const bool own_state = items_need_own_state(d);
    at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
      ItemState<scalar_t> item_state(own_state ? Dk * Dv : 0);
      if (in.alpha) in.alpha->fill(begin, end);
      for (int64_t bh = begin; bh < end; ++bh) {
        in.q.gather(bh);
        in.k.gather(bh);
        in.v.gather(bh);
        in.beta.gather(bh);
        scalar_t* state_rows = item_state.hold(sp + bh * Dk * Dv);
        kernels_for<scalar_t>(chosen).delta(affine_fused::DeltaRuleRows<scalar_t>{
            qp + bh * T * Dk, kp + bh * T * Dk, vp + bh * T * Dv, bp + bh * T, alp ? alp + bh * T : nullptr,
            op + bh * T * Dv, ep ? ep + bh * T * Dv : nullptr, state_rows, T, Dk, Dv});
        item_state.release(sp + bh * Dk * Dv);
      }
    });
  });
  return {out, state};
}

// Kernel 2 with gradients (as DiagDecayFusedFunction); log_alpha and s0 empty when absent.
class DeltaRuleFusedFunction : public torch::autograd::Function<DeltaRuleFusedFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& beta, const at::Tensor& log_alpha, const at::Tensor& s0) {
    const AffineDims d{q.size(0), q.size(1), q.size(2), q.size(3), v.size(3)};
    const bool gated = log_alpha.numel() > 0;  // an empty tensor stands for DeltaNet (no decay)
    const DeltaItems in(q, k, v, beta, gated ? log_alpha : at::Tensor());
    const at::Tensor init = s0.numel() > 0 ? s0.contiguous() : at::Tensor();
    at::Tensor errors;
    auto [out, state] = delta_forward_raw(d, in, init, &errors);
    const auto none = torch::empty({0}, q.options());
    ctx->save_for_backward({in.q.rows(), in.k.rows(), in.v.rows(), in.beta.rows(), gated ? in.alpha->rows() : none,
                            init.defined() ? init : none, errors, out, state});
    ctx->saved_data["has_s0"] = s0.numel() > 0;
    ctx->saved_data["gated"] = gated;
    return {out, state};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    MIXLAB_CHECK(!at::GradMode::is_enabled(),
                 "delta_rule (fused): double backward (create_graph=true) is not supported by the fused kernel; "
                 "run the call under mixlab::ComposedAffineGuard");
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &beta = saved[3], &alpha = saved[4], &init = saved[5],
               &errors = saved[6], &out = saved[7], &state = saved[8];
    const bool has_s0 = ctx->saved_data["has_s0"].toBool(), gated = ctx->saved_data["gated"].toBool();
    const int64_t B = q.size(0), H = q.size(1), T = q.size(2), Dk = q.size(3), Dv = v.size(3);
    // The upstream gradient of a layer's output arrives heads-first over (B,T,H,Dv): each item
    // gathers its own rows (affine_item_rows.h).
    const ItemRows grad_rows(grads[0].defined() ? grads[0] : torch::zeros({B, H, T, Dv}, q.options()));
    const at::Tensor& grad_out = grad_rows.rows();
    auto grad_state = grads[1].defined() ? grads[1].contiguous().clone() : torch::zeros({B, H, Dk, Dv}, q.options());
    auto dq = torch::empty_like(q), dk = torch::empty_like(k), dv = torch::empty_like(v),
         dbeta = torch::empty_like(beta);
    auto dlog_alpha = gated ? torch::empty_like(beta) : at::Tensor();
    const Isa chosen = cpu_isa();  // may throw (MIXLAB_CPU_ISA): outside the parallel region
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "delta_rule_fused_backward", [&] {
      using E = scalar_t;
      at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
        std::vector<E> scratch(static_cast<size_t>(Dk * Dv));
        for (int64_t bh = begin; bh < end; ++bh) {
          grad_rows.gather(bh);
          kernels_for<E>(chosen).delta_backward(
              affine_fused::DeltaRuleGradRows<E>{q.data_ptr<E>() + bh * T * Dk,
                                                 k.data_ptr<E>() + bh * T * Dk,
                                                 v.data_ptr<E>() + bh * T * Dv,
                                                 errors.data_ptr<E>() + bh * T * Dv,
                                                 beta.data_ptr<E>() + bh * T,
                                                 gated ? alpha.data_ptr<E>() + bh * T : nullptr,
                                                 out.data_ptr<E>() + bh * T * Dv,
                                                 has_s0 ? init.data_ptr<E>() + bh * Dk * Dv : nullptr,
                                                 state.data_ptr<E>() + bh * Dk * Dv,
                                                 grad_out.data_ptr<E>() + bh * T * Dv,
                                                 grad_state.data_ptr<E>() + bh * Dk * Dv,
                                                 dq.data_ptr<E>() + bh * T * Dk,
                                                 dk.data_ptr<E>() + bh * T * Dk,
                                                 dv.data_ptr<E>() + bh * T * Dv,
                                                 dbeta.data_ptr<E>() + bh * T,
                                                 gated ? dlog_alpha.data_ptr<E>() + bh * T : nullptr,
                                                 scratch.data(),
                                                 T,
                                                 Dk,
                                                 Dv});
        }
      });
    });
    return {dq, dk, dv, dbeta, dlog_alpha, has_s0 ? grad_state : at::Tensor()};
  }
};

AffineResult delta_rule_no_grad(const AffineDims& d, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const at::Tensor& beta, const at::Tensor& log_alpha, const at::Tensor& s0) {
  at::NoGradGuard no_grad;
  auto [out, state] = delta_forward_raw(d, DeltaItems(q, k, v, beta, log_alpha), s0, /*errors=*/nullptr);
  return {out, state};
}

}  // namespace

std::optional<AffineResult> diag_decay_fused(const AffineDims& d, const at::Tensor& q, const at::Tensor& k,
                                             const at::Tensor& v, const at::Tensor& g, const at::Tensor& s0) {
  if (ComposedAffineGuard::active()) return std::nullopt;
  // A scalar gate passed expanded over Dk (stride 0) stays one factor per token; with gradients
  // it flows back through select and expand.
  const auto g_eff = d.Dk == 1 || g.stride(3) == 0 ? g.select(3, 0) : g;
  if (needs_no_gradient({&q, &k, &v, &g, &s0})) return diag_decay_no_grad(d, q, k, v, g_eff, s0);
  auto r = DiagDecayFusedFunction::apply(q, k, v, g_eff, s0.defined() ? s0 : torch::empty({0}, q.options()));
  return AffineResult{r[0], r[1]};
}

std::optional<AffineResult> delta_rule_fused(const AffineDims& d, const at::Tensor& q, const at::Tensor& k,
                                             const at::Tensor& v, const at::Tensor& beta, const at::Tensor& log_alpha,
                                             const at::Tensor& s0) {
  if (ComposedAffineGuard::active()) return std::nullopt;
  if (needs_no_gradient({&q, &k, &v, &beta, &log_alpha, &s0}))
    return delta_rule_no_grad(d, q, k, v, beta, log_alpha, s0);
  const auto none = torch::empty({0}, q.options());
  auto r =
      DeltaRuleFusedFunction::apply(q, k, v, beta, log_alpha.defined() ? log_alpha : none, s0.defined() ? s0 : none);
  return AffineResult{r[0], r[1]};
}

}  // namespace detail

const char* fused_affine_isa() { return cpu_isa_name(cpu_isa()); }

}  // namespace mixlab
