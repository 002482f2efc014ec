// src/resolvent/pattern_keys.h — the boundary checks shared by the two score ops
// (pattern_scores.cpp, pattern_attention.cpp) for q, k and a past state's key channel (private).
#pragma once

#include <torch/torch.h>

#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/resolvent/resolvent.h"

namespace mixlab::detail {

// q, k (B,H,T,D) floating CPU of one dtype, T >= 1; `past`, when given, holds keys (B,H,*,D) of
// q's dtype in extra channel `past_key_channel` and runs `pattern`.
inline void check_query_keys(const char* fn, const torch::Tensor& q, const torch::Tensor& k, const Pattern& pattern,
                             const ResolventState* past, int past_key_channel) {
  check_dim(fn, "q", q, 4, "(B,H,T,D)");
  check_floating(fn, "q", q);
  check_cpu(fn, "q", q);
  MIXLAB_CHECK(q.size(2) >= 1, "{}: q must have T >= 1 rows (B,H,T,D), got shape {}", fn, shape_string(q));
  check_cpu(fn, "k", k);
  check_same_dtype(fn, "k", k, "q", q);
  check_shape(fn, "k", k, q.sizes().vec(), "(B,H,T,D)");
  if (!past) return;
  MIXLAB_CHECK(past_key_channel >= 0 && static_cast<size_t>(past_key_channel) < past->layout().extra_dims.size(),
               "{}: past_key_channel must name one of the state's {} extra channels, got {}", fn,
               past->layout().extra_dims.size(), past_key_channel);
  MIXLAB_CHECK(past->layout().extra_dims[past_key_channel] == q.size(3) && past->batch() == q.size(0) &&
                   past->heads() == q.size(1) && past->dtype() == q.scalar_type(),
               "{}: past state keys must be (B,H,*,D) = [{},{},*,{}] of {}, got extra channel [{},{},*,{}] of {}", fn,
               q.size(0), q.size(1), q.size(3), c10::toString(q.scalar_type()), past->batch(), past->heads(),
               past->layout().extra_dims[past_key_channel], c10::toString(past->dtype()));
  MIXLAB_CHECK(past->pattern().spec() == pattern.spec(), "{}: past state has pattern '{}', expected '{}'", fn,
               past->pattern().spec(), pattern.spec());
}

}  // namespace mixlab::detail
