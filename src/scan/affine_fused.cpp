// The fused affine forward (affine_fused.h): contiguous inputs, one work item per (batch, head)
// over at::parallel_for, each running the raw token loop of affine_fused_kernels.inc built for
// the best instruction set this CPU has.
#include "affine_fused.h"

#include <ATen/Parallel.h>

#include <cstdlib>
#include <string>

#include "affine_fused_kernels.h"
#include "mixlab/core/error.h"

namespace mixlab {

namespace {
thread_local int composed_guards = 0;
}  // namespace

ComposedAffineGuard::ComposedAffineGuard() { ++composed_guards; }
ComposedAffineGuard::~ComposedAffineGuard() { --composed_guards; }

namespace detail {
namespace {

enum class Isa { kGeneric, kAvx2, kAvx512 };

Isa detect_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return Isa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
#endif
  return Isa::kGeneric;
}

const char* isa_name(Isa i) {
  switch (i) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kGeneric:
      break;
  }
  return "generic";
}

// The best set the CPU has, or a lower one named by MIXLAB_CPU_ISA (read per call: tests and
// benchmarks switch it; one getenv is nothing beside a sequence's kernel).
Isa isa() {
  static const Isa best = detect_isa();
  const char* forced = std::getenv("MIXLAB_CPU_ISA");
  if (forced == nullptr || *forced == '\0') return best;
  const std::string name = forced;
  Isa want = Isa::kGeneric;
  if (name == "avx512") {
    want = Isa::kAvx512;
  } else if (name == "avx2") {
    want = Isa::kAvx2;
  } else {
    MIXLAB_CHECK(name == "generic", "MIXLAB_CPU_ISA must be generic, avx2 or avx512, got '{}'", name);
  }
  MIXLAB_CHECK(static_cast<int>(want) <= static_cast<int>(best),
               "MIXLAB_CPU_ISA={} names an instruction set this CPU lacks (the best it has is {})", name,
               isa_name(best));
  return want;
}

template <typename Rows>
void run_diag(const Rows& r) {
  switch (isa()) {
    case Isa::kAvx512:
      return affine_fused::avx512::diag_decay(r);
    case Isa::kAvx2:
      return affine_fused::avx2::diag_decay(r);
    case Isa::kGeneric:
      return affine_fused::generic::diag_decay(r);
  }
}

template <typename Rows>
void run_delta(const Rows& r) {
  switch (isa()) {
    case Isa::kAvx512:
      return affine_fused::avx512::delta_rule(r);
    case Isa::kAvx2:
      return affine_fused::avx2::delta_rule(r);
    case Isa::kGeneric:
      return affine_fused::generic::delta_rule(r);
  }
}

// The output and the state the kernels write: the state starts as s0 (or zeros).
std::pair<at::Tensor, at::Tensor> outputs(const AffineDims& d, const at::Tensor& q, const at::Tensor& s0) {
  auto out = torch::empty({d.B, d.H, d.T, d.Dv}, q.options());
  auto state = s0.defined() ? s0.detach().contiguous().clone() : torch::zeros({d.B, d.H, d.Dk, d.Dv}, q.options());
  return {out, state};
}

}  // namespace

bool fused_affine_applies(std::initializer_list<const at::Tensor*> inputs) {
  if (composed_guards > 0) return false;
  if (!at::GradMode::is_enabled()) return true;
  for (const at::Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return false;
  return true;
}

AffineResult diag_decay_fused(const AffineDims& d, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& g, const at::Tensor& s0) {
  at::NoGradGuard no_grad;
  // A scalar gate passed expanded over Dk (stride 0) stays one factor per token.
  const bool scalar_gate = d.Dk == 1 || g.stride(3) == 0;
  const auto a = (scalar_gate ? g.select(3, 0) : g).exp().contiguous();  // ATen's vectorised exp
  const auto qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  auto [out, state] = outputs(d, q, s0);
  const int64_t T = d.T, Dk = d.Dk, Dv = d.Dv;
  const int64_t a_row = scalar_gate ? T : T * Dk;
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "diag_decay_fused", [&] {
    const scalar_t *qp = qc.data_ptr<scalar_t>(), *kp = kc.data_ptr<scalar_t>(), *vp = vc.data_ptr<scalar_t>(),
                   *ap = a.data_ptr<scalar_t>();
    scalar_t *op = out.data_ptr<scalar_t>(), *sp = state.data_ptr<scalar_t>();
    at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        run_diag(affine_fused::DiagDecayRows<scalar_t>{qp + bh * T * Dk, kp + bh * T * Dk, vp + bh * T * Dv,
                                                       ap + bh * a_row, scalar_gate, op + bh * T * Dv,
                                                       sp + bh * Dk * Dv, T, Dk, Dv});
      }
    });
  });
  return {out, state};
}

AffineResult delta_rule_fused(const AffineDims& d, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& beta, const at::Tensor& log_alpha, const at::Tensor& s0) {
  at::NoGradGuard no_grad;
  const auto qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous(), bc = beta.contiguous();
  const auto alpha = log_alpha.defined() ? log_alpha.exp().contiguous() : at::Tensor();
  auto [out, state] = outputs(d, q, s0);
  const int64_t T = d.T, Dk = d.Dk, Dv = d.Dv;
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "delta_rule_fused", [&] {
    const scalar_t *qp = qc.data_ptr<scalar_t>(), *kp = kc.data_ptr<scalar_t>(), *vp = vc.data_ptr<scalar_t>(),
                   *bp = bc.data_ptr<scalar_t>(), *alp = alpha.defined() ? alpha.data_ptr<scalar_t>() : nullptr;
    scalar_t *op = out.data_ptr<scalar_t>(), *sp = state.data_ptr<scalar_t>();
    at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        run_delta(affine_fused::DeltaRuleRows<scalar_t>{qp + bh * T * Dk, kp + bh * T * Dk, vp + bh * T * Dv,
                                                        bp + bh * T, alp ? alp + bh * T : nullptr, op + bh * T * Dv,
                                                        sp + bh * Dk * Dv, T, Dk, Dv});
      }
    });
  });
  return {out, state};
}

}  // namespace detail

const char* fused_affine_isa() { return detail::isa_name(detail::isa()); }

}  // namespace mixlab
