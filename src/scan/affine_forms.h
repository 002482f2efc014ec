// Private: the loops the two affine kernels share (mixlab/scan/affine.h). A kernel supplies what
// differs, per token: its decode step, its aggregator element (E_t, f_t), or its dense E_t and
// f_t for one (b,h); these run the token loop, the scan and the literal per-(b,h,t) reference.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

#include "affine_checks.h"
#include "mixlab/scan/affine.h"

namespace mixlab::detail {

/// initial_state, or zeros (B,H,Dk,Dv) in q's options when undefined.
at::Tensor affine_initial_or_zeros(const at::Tensor& initial_state, const AffineDims& d, const at::Tensor& q);

/// Recurrent form: state = s0, then for t = 0..T-1 step(state, t) -> (o_t (B,H,Dv), next state).
AffineResult affine_token_loop(const AffineDims& d, const at::Tensor& q, const at::Tensor& s0,
                               const std::function<AffineStep(const at::Tensor& state, size_t t)>& step);

/// Scan form: prefixes of the per-token elements by blelloch_scan with the affine aggregator,
/// applied to s0; o_t = S_t^T q_t. `qs` is q unbound on T.
AffineResult affine_scan_outputs(const AffineDims& d, const std::vector<at::Tensor>& qs, const at::Tensor& s0,
                                 const std::vector<AffineElement>& elements, const AffineElement& identity);

/// Reference form: for each (b,h) and t, s = E_t s + f_t with E_t a dense (Dk,Dk) matrix and
/// f_t (Dk,Dv) from element(b, h, t); o_t = s^T q_t. The literal transcription of Table 1.
AffineResult affine_reference_loop(
    const AffineDims& d, const at::Tensor& q, const at::Tensor& s0,
    const std::function<std::pair<at::Tensor, at::Tensor>(int64_t b, int64_t h, int64_t t)>& element);

}  // namespace mixlab::detail
