// src/resolvent/resolvent_gate.h — the resolvent op for a caller whose gate lies in [0, 1] by
// construction (private to the area).
//
// resolvent_forward and resolvent_step (mixlab/resolvent/resolvent.h) refuse a gate outside
// [0, 1], NaN included, with one pass over it. ResolventMixer's gates are sigmoids: in [0, 1]
// by construction, NaN only when a NaN reached the layer's input (a diverging run). It calls
// these instead, which skip that pass: such a NaN then flows into the loss, which the trainer
// reports as divergence (or skips under --skip-nonfinite) as for every other mixer, instead of
// failing as a bad argument. Everything else is checked as in the public entries.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "mixlab/pattern/pattern.h"

namespace mixlab {

class ResolventState;

namespace detail {

/// resolvent_forward without the gate's value check.
torch::Tensor resolvent_forward_sigmoid_gate(const torch::Tensor& alpha, const torch::Tensor& beta,
                                             const torch::Tensor& x, const Pattern& pattern, const torch::Tensor& gate,
                                             const ResolventState* past = nullptr);

/// resolvent_step without the gate's value check.
torch::Tensor resolvent_step_sigmoid_gate(ResolventState& state, const torch::Tensor& alpha_t,
                                          const torch::Tensor& beta_t, const torch::Tensor& x_t,
                                          const torch::Tensor& gate_t, const std::vector<torch::Tensor>& extras_t);

}  // namespace detail
}  // namespace mixlab
