// Private: the fused forward kernels of the two affine recurrences (mixlab/scan/affine.h) on raw
// rows of one (batch, head), compiled once per instruction set (affine_fused_kernels_*.cpp) and
// picked at run time (affine_fused.cpp). No LibTorch header: the per-ISA objects are built with
// their own -m flags and must not share the precompiled header.
#pragma once

#include <cstdint>

namespace mixlab::detail::affine_fused {

/// One (batch, head) of S_t = diag(a_t) S_{t-1} + k_t v_t^T, o_t = S_t^T q_t, t = 0..T-1.
/// q, k, a: T rows of Dk (a: T scalars when scalar_gate); v, out: T rows of Dv; state: Dk rows of
/// Dv, read as S_{-1} and left as S_{T-1}. All contiguous.
template <typename E>
struct DiagDecayRows {
  const E* q;
  const E* k;
  const E* v;
  const E* a;  // decay factors exp(g), not log decays
  bool scalar_gate;
  E* out;
  E* state;
  int64_t T, Dk, Dv;
};

/// One (batch, head) of S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,
/// o_t = S_t^T q_t; alpha null means alpha = 1 (DeltaNet).
template <typename E>
struct DeltaRuleRows {
  const E* q;
  const E* k;
  const E* v;
  const E* beta;   // T scalars
  const E* alpha;  // T scalars (decay factors exp(log_alpha)) or null
  E* out;
  E* state;
  int64_t T, Dk, Dv;
};

// One set per instruction set; the names are the namespaces of affine_fused_kernels_*.cpp.
#define MIXLAB_AFFINE_FUSED_DECLARE(isa)         \
  namespace isa {                                \
  void diag_decay(const DiagDecayRows<float>&);  \
  void diag_decay(const DiagDecayRows<double>&); \
  void delta_rule(const DeltaRuleRows<float>&);  \
  void delta_rule(const DeltaRuleRows<double>&); \
  }
MIXLAB_AFFINE_FUSED_DECLARE(generic)
MIXLAB_AFFINE_FUSED_DECLARE(avx2)
MIXLAB_AFFINE_FUSED_DECLARE(avx512)
#undef MIXLAB_AFFINE_FUSED_DECLARE

}  // namespace mixlab::detail::affine_fused
