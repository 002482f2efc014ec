// mixlab/mixer/memory_mixer.h — a mixer that also reads and writes a side stream of memory
// tokens (e.g. the compressed tokens of BRL-Attention, seed 001 Alg. 1).
//
// The memory is a second residual stream next to the token stream: M slots of width Dm. A
// memory mixer returns, besides y, an update `delta` of the memory; the backbone (model area)
// owns the rest of the stream generically, exactly as for the token stream:
//     h_mem = mem + delta;   mem' = h_mem + FFN_mem(LN_mem(h_mem))          (Alg. 1 brl_block l.4, 6)
// so nothing in the backbone knows which memory mixer it drives.
//
// Shapes. Training forward: memory (B,K,M,Dm), one memory per segment of the sequence (K =
// segments the mixer splits T into; the memory of segment k may only depend on tokens of
// earlier segments, which keeps training causal). Decode: memory (B,M,Dm) of the current
// segment. The backbone treats the leading dims as opaque: it only adds, normalises and applies
// the FFN over the last dim.
//
// Decode contract: `step_memory` returns a defined `memory_delta` only at tokens where the mixer
// read the incoming memory (a segment boundary); the backbone then recomputes the stream for
// the next block and keeps it until the next defined delta. So the memory FFN costs O(M·Dm²)
// per segment, not per token.
//
// Standalone use (the plain Mixer interface): the memory entering the mixer is its own learned
// initial memory and the update is dropped. In a stack the backbone feeds the first memory
// mixer's initial memory to the stream (the others' stay unused).
#pragma once

#include "mixlab/mixer/mixer.h"

namespace mixlab {

struct MemoryDims {
  int64_t slots = 0;  // M
  int64_t width = 0;  // Dm
};

struct MemoryOutput {
  torch::Tensor y;             // (B,T,C) or (B,C) in step
  torch::Tensor memory_delta;  // same shape as the memory in; undefined in step when not read
};

class MemoryMixer : public Mixer {
 public:
  virtual MemoryDims memory_dims() const = 0;
  /// The memory entering the stack for a training forward over T tokens: (B,K,M,Dm).
  virtual torch::Tensor memory_init(int64_t batch, int64_t T) = 0;
  /// The memory entering the stack for decode: (B,M,Dm).
  virtual torch::Tensor memory_init_step(int64_t batch) = 0;
  /// x (B,T,C), memory (B,K,M,Dm) as from memory_init(B,T) -> {y (B,T,C), delta (B,K,M,Dm)}.
  virtual MemoryOutput forward_memory(const torch::Tensor& x, const torch::Tensor& memory) = 0;
  /// x_t (B,C), memory (B,M,Dm) -> {y_t (B,C), delta (B,M,Dm) or undefined}; advances the state.
  virtual MemoryOutput step_memory(MixerState& state, const torch::Tensor& x_t, const torch::Tensor& memory) = 0;

  torch::Tensor forward(const torch::Tensor& x) override {
    // A malformed x gets no memory; forward_memory's own checks then name the problem.
    return forward_memory(x, x.dim() == 3 ? memory_init(x.size(0), x.size(1)) : torch::Tensor()).y;
  }
  torch::Tensor step(MixerState& state, const torch::Tensor& x_t) override {
    return step_memory(state, x_t, x_t.dim() == 2 ? memory_init_step(x_t.size(0)) : torch::Tensor()).y;
  }
};

}  // namespace mixlab
