// Private: the fused forward of the two affine recurrences (mixlab/scan/affine.h) for calls that
// keep no gradient. The chunked and recurrent forms call it when fused_affine_applies(); the
// kernels themselves are affine_fused_kernels.inc, one build per instruction set.
#pragma once

#include <torch/torch.h>

#include <initializer_list>

#include "affine_checks.h"
#include "mixlab/scan/affine.h"

namespace mixlab::detail {

/// True when no argument needs a gradient (grad mode off, or no defined tensor requires grad)
/// and no ComposedAffineGuard is alive on this thread. Dtypes are float32/float64 already.
bool fused_affine_applies(std::initializer_list<const at::Tensor*> inputs);
/// True when no ComposedAffineGuard is alive on this thread (the fused path with gradients).
bool fused_affine_allowed();

/// Kernel 1 on checked arguments; g may be a scalar gate expanded over Dk (stride 0).
AffineResult diag_decay_fused(const AffineDims& d, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& g, const at::Tensor& s0);
/// Kernel 1 with gradients: the fused forward saves a checkpoint state every 32 tokens and the
/// fused backward recomputes each chunk's states from it (no double backward).
AffineResult diag_decay_fused_trainable(const AffineDims& d, const at::Tensor& q, const at::Tensor& k,
                                        const at::Tensor& v, const at::Tensor& g, const at::Tensor& s0);
/// Kernel 2 on checked arguments; log_alpha undefined for DeltaNet.
AffineResult delta_rule_fused(const AffineDims& d, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& beta, const at::Tensor& log_alpha, const at::Tensor& s0);
/// Kernel 2 with gradients, checkpointed as diag_decay_fused_trainable.
AffineResult delta_rule_fused_trainable(const AffineDims& d, const at::Tensor& q, const at::Tensor& k,
                                        const at::Tensor& v, const at::Tensor& beta, const at::Tensor& log_alpha,
                                        const at::Tensor& s0);

}  // namespace mixlab::detail
