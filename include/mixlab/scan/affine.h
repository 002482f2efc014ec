// mixlab/scan/affine.h — affine state recurrences s_t = E_t ▸ s_{t-1} + f_t (seed 004 Table 1,
// Def. 3.3, Lemma 3.4) in four forms with identical outputs and final states:
//   *_chunked    training form: intra-chunk dense work + inter-chunk state passing,
//                O(T C D + T D^2) work, no T x T tensor, memory O(T C + T D log C + T D^2 / C);
//   *_recurrent  token loop of *_step (the decode kernel), O(T D^2), autograd through torch ops;
//   *_scan_form  the generic form: per-token elements (E_t, f_t) aggregated by the affine
//                aggregator through blelloch_scan (mixlab/scan/scan.h); E dense or diagonal;
//                a correctness reference for small sizes (dense E costs Dk^3 per Agg);
//   *_reference  a plain loop per (batch, head, token) with E_t as a dense (Dk,Dk) matrix: the
//                literal transcription of Table 1.
// All take an optional initial_state and return the final state; gradients flow through inputs
// and initial state in every form (prefill in pieces equals one long forward).
//
// The chunked and recurrent forms run fused native kernels instead of the LibTorch composition
// (issue 17 item 2), built for AVX-512, AVX2+FMA and plain x86-64 and picked at run time:
//  - without gradients (grad mode off, or no argument requires grad): a token loop per (batch,
//    head) with the (Dk,Dv) state in L1 and 2 multiply-adds per state entry and token (fewer
//    flops than the chunked form's GEMMs, and no temporaries);
//  - with gradients: the same loop, and a fused backward of two more token loops. The diagonal
//    decay's forward saves the state every few hundred tokens (one state per 256 tokens at D 64 in float),
//    and its backward runs both loops chunk by chunk from those; the delta rule's forward saves
//    each token's error v_t - alpha_t S_{t-1}^T k_t, one (T,Dv) tensor, and its backward starts
//    from the initial state. No double backward (create_graph=true is an error that names the
//    guard below).
// Same outputs, final state and gradients to float rounding. A ComposedAffineGuard forces the
// composition (double backward; tests compare the two; benchmarks time both). The scan and
// reference forms are always compositions.
//
// State orientation: S (B,H,Dk,Dv), output o_t = S_t^T q_t (read after the write of token t).
//
// Kernel 1 — diagonal decay on the key dimension ("gated linear attention"):
//   S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T
//   q, k (B,H,T,Dk), v (B,H,T,Dv), g (B,H,T,Dk) log decay, finite and <= 0 (scalar gates are
//   passed expanded over Dk). Serves linear attention (g = 0), RetNet, GLA, Mamba (per-head Δ),
//   mLSTM and gated RFA (see affine_mixer.h for the parametrisations). A scalar gate passed
//   EXPANDED over Dk (g.stride(3) == 0) takes a cheaper chunked path with one (C,C) decay matrix
//   per chunk; a materialised g always takes the per-key path (its gradient is per key).
//   Chunked form: log decays are cumulated from each chunk start; the intra-chunk attention
//   sum_d q_td k_jd exp(b_td - b_jd) is computed by halving the chunk recursively, each pair of
//   halves factorised about their common boundary m (q_t exp(b_t - b_m), k_j exp(b_m - b_j): both
//   exponents <= 0), so no exp ever overflows however strong the decay. Needs chunk a power of
//   two; T need not be a multiple of it (zero padding that neither writes nor decays). Levels
//   with halves of h <= 8 use broadcast products, (B,H,T/2h,h,h,D) temporaries (h/2 times the
//   size of q), because LibTorch's CPU bmm runs one small gemm per batch entry.
//
// Kernel 2 — delta rule (DeltaNet, gated DeltaNet):
//   S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T
//   beta (B,H,T) in [0, 2]; log_alpha (B,H,T) finite and <= 0, or undefined for DeltaNet.
//   The recurrence is contractive when ||k_t|| <= 1 (the layers L2-normalise k).
//   Chunked form: the WY / UT representation. In a chunk with states written as
//   S_t = alpha_t S_{t-1} + k_t u_t^T, the pseudo-values solve the unit lower-triangular system
//   (I + diag(beta) tril(K K^T ⊙ Γ, -1)) U = diag(beta) V - diag(beta γ) K S_0, with
//   γ_t = prod_{i<=t} alpha_i from the chunk start and Γ_tj = γ_t / γ_j; one (C,C) triangular
//   solve per chunk gives W_v, W_k independent of S_0, then U = W_v - W_k S_0.
//
// Dtypes: float32 or float64; all inputs share it; the state has the same dtype (the layers keep
// their decode state in float32 for float inputs). Not supported: CUDA, half precision,
// non-diagonal E other than the delta-rule projector, decays > 1 (log decay > 0).
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "mixlab/core/reference_guard.h"

namespace mixlab {

/// While one is alive on this thread, the chunked and recurrent forms run their LibTorch
/// composition instead of the fused kernels (with or without gradients).
using ComposedAffineGuard = ReferenceGuard<struct FusedAffineOp>;

/// The instruction set the fused kernels run with: "avx512", "avx2" (with FMA) or "generic",
/// the best this CPU has unless the environment variable MIXLAB_CPU_ISA names a lower one (an
/// unknown name, or one the CPU lacks, is an error at the next fused call and here).
const char* fused_affine_isa();

/// Output of an affine recurrence over a sequence.
struct AffineResult {
  at::Tensor out;          // (B,H,T,Dv)
  at::Tensor final_state;  // (B,H,Dk,Dv)
};

/// One decode step.
struct AffineStep {
  at::Tensor out;    // (B,H,Dv)
  at::Tensor state;  // (B,H,Dk,Dv), the new state
};

// ---- Kernel 1: diagonal decay ------------------------------------------------------------
/// Chunked training form; `chunk` a power of two >= 1.
AffineResult diag_decay_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                                const at::Tensor& initial_state = {}, int64_t chunk = 64);
/// Token loop of diag_decay_step.
AffineResult diag_decay_recurrent(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                                  const at::Tensor& initial_state = {});
/// Generic form through blelloch_scan with the affine aggregator (E diagonal).
AffineResult diag_decay_scan_form(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                                  const at::Tensor& initial_state = {});
/// Plain per-(b,h,t) loop with dense E_t = diag(exp(g_t)).
AffineResult diag_decay_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                                  const at::Tensor& initial_state = {});
/// One decode step: q_t, k_t, g_t (B,H,Dk), v_t (B,H,Dv), state (B,H,Dk,Dv).
AffineStep diag_decay_step(const at::Tensor& state, const at::Tensor& q_t, const at::Tensor& k_t, const at::Tensor& v_t,
                           const at::Tensor& g_t);

// ---- Kernel 2: delta rule ----------------------------------------------------------------
/// Chunked WY/UT form; `chunk` >= 1 (any size). log_alpha undefined = DeltaNet.
AffineResult delta_rule_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                                const at::Tensor& log_alpha = {}, const at::Tensor& initial_state = {},
                                int64_t chunk = 64);
AffineResult delta_rule_recurrent(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                                  const at::Tensor& log_alpha = {}, const at::Tensor& initial_state = {});
/// Generic form through blelloch_scan with E_t = alpha_t (I - beta_t k_t k_t^T) dense.
AffineResult delta_rule_scan_form(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                                  const at::Tensor& log_alpha = {}, const at::Tensor& initial_state = {});
AffineResult delta_rule_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                                  const at::Tensor& log_alpha = {}, const at::Tensor& initial_state = {});
/// One decode step: q_t, k_t (B,H,Dk), v_t (B,H,Dv), beta_t and log_alpha_t (B,H) (log_alpha_t
/// may be undefined).
AffineStep delta_rule_step(const at::Tensor& state, const at::Tensor& q_t, const at::Tensor& k_t, const at::Tensor& v_t,
                           const at::Tensor& beta_t, const at::Tensor& log_alpha_t = {});

// ---- The affine aggregator of Lemma 3.4 --------------------------------------------------
/// An element (E, f) for a batch: E (B,H,Dk) diagonal or (B,H,Dk,Dk) dense, f (B,H,Dk,Dv).
struct AffineElement {
  at::Tensor e;
  at::Tensor f;
  bool dense = false;
};
/// (E2,f2) ⊕ (E1,f1) = (E2 ∘ E1, f2 + E2 ▸ f1) with `earlier` = 1, `later` = 2 (the scan
/// engine's agg(left, right) convention).
AffineElement affine_combine(const AffineElement& earlier, const AffineElement& later);
/// Identity (I, 0) shaped like `like`.
AffineElement affine_identity(const AffineElement& like);
/// E ▸ s for a state s (B,H,Dk,Dv).
at::Tensor affine_apply(const AffineElement& element, const at::Tensor& state);

}  // namespace mixlab
