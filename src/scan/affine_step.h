// Private: the unchecked decode steps of the two affine kernels (mixlab/scan/affine.h).
//
// The public *_step functions check shapes and the data-dependent ranges (log decay <= 0,
// beta in [0, 2]) of every argument, which reads the values back (.item()). AffineMixer::step is
// already a checked boundary whose gates are in range by construction (logsigmoid, sigmoid,
// -exp * softplus), so its per-token hot path calls these instead: the range is checked once,
// where the caller supplies the values, not per token.
#pragma once

#include <torch/torch.h>

#include "mixlab/scan/affine.h"

namespace mixlab::detail {

/// S' = diag(exp(g_t)) S + k_t v_t^T, o = S'^T q_t. Shapes as diag_decay_step; no checks.
AffineStep diag_decay_step_unchecked(const at::Tensor& state, const at::Tensor& q_t, const at::Tensor& k_t,
                                     const at::Tensor& v_t, const at::Tensor& g_t);
/// S' = alpha (I - beta k k^T) S + beta k v^T, o = S'^T q_t. Shapes as delta_rule_step; no checks.
AffineStep delta_rule_step_unchecked(const at::Tensor& state, const at::Tensor& q_t, const at::Tensor& k_t,
                                     const at::Tensor& v_t, const at::Tensor& beta_t, const at::Tensor& log_alpha_t);

}  // namespace mixlab::detail
