// mixlab/brl/brl_reference.h — the plain, obviously right BRL forward the tests hold the fast
// path to: dense (T,T) banded-masked attention for F_gen, a loop over blocks and heads with 2-D
// matmuls for F_comp / evolution / F_prop, norms written out. O(T²) memory: tests only.
#pragma once

#include "mixlab/brl/brl_mixer.h"

namespace mixlab {

/// Same contract as BrlMixer::forward_memory: x (B,T,C), memory (B,K,M,C) -> {y, delta}.
MemoryOutput brl_reference_forward(BrlMixer& mixer, const torch::Tensor& x, const torch::Tensor& memory);

}  // namespace mixlab
