// Private: the fused kernels of the two affine recurrences (mixlab/scan/affine.h), forward and
// backward. The chunked and recurrent forms call them first; the kernels themselves are
// affine_fused_kernels.inc, one build per instruction set.
#pragma once

#include <torch/torch.h>

#include <optional>

#include "affine_checks.h"
#include "mixlab/scan/affine.h"

namespace mixlab::detail {

/// The fused path of kernel 1 on checked arguments (g may be a scalar gate expanded over Dk,
/// stride 0): nullopt while a ComposedAffineGuard is alive on this thread; else the token loop
/// when no argument needs a gradient, or the forward with the fused backward (from the forward's
/// checkpoints, one state per chunk of tokens).
std::optional<AffineResult> diag_decay_fused(const AffineDims& d, const at::Tensor& q, const at::Tensor& k,
                                             const at::Tensor& v, const at::Tensor& g, const at::Tensor& s0);
/// The same for kernel 2, its backward from S_{-1} and each token's error e_t (saved by the
/// forward, T x Dv per head); log_alpha undefined for DeltaNet.
std::optional<AffineResult> delta_rule_fused(const AffineDims& d, const at::Tensor& q, const at::Tensor& k,
                                             const at::Tensor& v, const at::Tensor& beta, const at::Tensor& log_alpha,
                                             const at::Tensor& s0);

}  // namespace mixlab::detail
