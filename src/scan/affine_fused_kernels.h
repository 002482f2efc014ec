// Private: the fused forward kernels of the two affine recurrences (mixlab/scan/affine.h) on raw
// rows of one (batch, head), compiled once per instruction set (affine_fused_kernels_*.cpp) and
// picked at run time (affine_fused.cpp). No LibTorch header: the per-ISA objects are built with
// their own -m flags and must not share the precompiled header.
#pragma once

#include <algorithm>
#include <cstdint>

#include "mixlab/core/isa_dispatch.h"

namespace mixlab::detail::affine_fused {

/// Tokens per chunk of the diagonal decay's backward: its training forward saves the state before
/// every `checkpoint_every` tokens, and the backward runs its two token walks chunk by chunk, last
/// chunk first, so that the rows the first walk brings in are still in L2 when the second reads
/// them. Over the whole sequence the second walk reads them back from L3 or memory: per token that
/// backward cost 8-12 % more at T 4096 and 17-24 % more at T 16384 than at T 1024 (bench_scan's
/// BM_DiagBackwardChunks, whole-sequence rows), and by chunks of 256 tokens it runs 1.00-1.03x as
/// fast at T 1024-4096 and 1.11-1.12x at T 16384 (the same benchmark; AMD EPYC with a 1 MiB L2 per
/// core; chunks of 64 were slower at T <= 4096).
/// The chunk's rows (about 6 Dk + 3 Dv values per token) are kept within 640 KiB, as a power of two
/// from 16 to 256 tokens: 256 at Dk = Dv = 64 in float. The delta rule's backward keeps its
/// whole-sequence walks: chunked the same way it measured 0.96-0.99x through the Python module
/// (DeltaNet, T 1024-16384), its walk 1 reading more rows than walk 2 could reuse (issue 38,
/// 2026-11-29).
inline int64_t checkpoint_every(int64_t Dk, int64_t Dv, int64_t element_bytes) {
  const int64_t row_bytes = std::max<int64_t>(1, (6 * Dk + 3 * Dv) * element_bytes);
  int64_t chunk = 16;
  while (chunk < 256 && 2 * chunk * row_bytes <= (int64_t{640} << 10)) chunk *= 2;
  return chunk;
}

/// Checkpoints for a sequence of T tokens: one state per started chunk.
inline int64_t checkpoint_count(int64_t T, int64_t chunk) { return (T + chunk - 1) / chunk; }

/// One (batch, head) of S_t = diag(a_t) S_{t-1} + k_t v_t^T, o_t = S_t^T q_t, t = 0..T-1.
/// q, k, a: T rows of Dk (a: T scalars when scalar_gate); v, out: T rows of Dv; state: Dk rows of
/// Dv, read as S_{-1} and left as S_{T-1}. All contiguous. With `checkpoints` non-null (the
/// training forward) the state before token c chunk is copied to checkpoints + c Dk Dv.
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
  E* checkpoints = nullptr;  // checkpoint_count(T, chunk) states of Dk rows of Dv, or null
  int64_t chunk = 0;
};

/// The backward of DiagDecayRows for one (batch, head), from the forward's checkpoints (the state
/// before each chunk of `chunk` tokens), chunk by chunk, last first: a forward pass over the chunk
/// recomputes the states in `P` (Dv Dk values, S^T) for dq, a backward pass carries dL/dS^T in
/// `dstate` (Dv Dk values), and the gate's gradient is a running sum (`running`, Dk values); see
/// affine_fused_kernels.inc.
/// grad_state: in dL/dS_{T-1}, out dL/dS_{-1} (Dk rows of Dv). dg = dL/dg = a dL/da: T rows of Dk,
/// or T scalars with scalar_gate.
template <typename E>
struct DiagDecayGradRows {
  const E* q;
  const E* k;
  const E* v;
  const E* a;
  bool scalar_gate;
  const E* checkpoints;  // checkpoint_count(T, chunk) states of Dk rows of Dv
  int64_t chunk;
  const E* grad_out;
  E* grad_state;
  E* dq;
  E* dk;
  E* dv;
  E* dg;
  E* P;
  E* dstate;
  E* running;
  E* dv_lanes;  // Dv rows of one register's lanes: at most Dv kVectorBytes / sizeof(E) values
  int64_t T, Dk, Dv;
};

/// One (batch, head) of S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,
/// o_t = S_t^T q_t; alpha null means alpha = 1 (DeltaNet). With `e` non-null (the training
/// forward) it also writes each token's error e_t = v_t - alpha_t S_{t-1}^T k_t (T rows of Dv), so
/// that the backward needs no saved state but S_{-1}.
template <typename E>
struct DeltaRuleRows {
  const E* q;
  const E* k;
  const E* v;
  const E* beta;   // T scalars
  const E* alpha;  // T scalars (decay factors exp(log_alpha)) or null
  E* out;
  E* e;  // T rows of Dv, or null
  E* state;
  int64_t T, Dk, Dv;
};

/// The backward of DeltaRuleRows for one (batch, head), in two token walks that read no saved
/// state but S_{-1} (`init`, Dk rows of Dv; null for zero) and the forward's errors e, outputs and
/// final state S_{T-1}: last token first, D_t = dL/dS_t gives dv, dbeta, dlog_alpha (null when
/// alpha is null), part of dk and grad_state (in dL/dS_{T-1}, out dL/dS_{-1}; Dk rows of Dv);
/// then first token first, the states rebuilt from S_{-1} give dq and the rest of dk. `scratch`:
/// Dv Dk values. See affine_fused_kernels.inc.
template <typename E>
struct DeltaRuleGradRows {
  const E* q;
  const E* k;
  const E* v;
  const E* e;
  const E* beta;
  const E* alpha;
  const E* out;
  const E* init;
  const E* final_state;
  const E* grad_out;
  E* grad_state;
  E* dq;
  E* dk;
  E* dv;
  E* dbeta;
  E* dlog_alpha;
  E* scratch;
  int64_t T, Dk, Dv;
};

// One set per instruction set; the names are the namespaces of affine_fused_kernels_*.cpp.
MIXLAB_DECLARE_PER_ISA(void diag_decay(const DiagDecayRows<float>&); void diag_decay(const DiagDecayRows<double>&);
                       void diag_decay_backward(const DiagDecayGradRows<float>&);
                       void diag_decay_backward(const DiagDecayGradRows<double>&);
                       void delta_rule(const DeltaRuleRows<float>&); void delta_rule(const DeltaRuleRows<double>&);
                       void delta_rule_backward(const DeltaRuleGradRows<float>&);
                       void delta_rule_backward(const DeltaRuleGradRows<double>&);)

}  // namespace mixlab::detail::affine_fused
