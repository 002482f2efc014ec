// mixlab/mixer/mixer.h — the one interface every token mixer implements.
//
// A mixer maps x (B,T,C) -> y (B,T,C) causally, and can decode one token at a time:
//   auto state = mixer->init_state(B);
//   for t: y_t = mixer->step(*state, x_t (B,C));   // equals forward(x)[:, t] (tested per mixer)
// Mixers are created from spec strings through the registry (mixlab/mixers/registry.h).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

namespace mixlab {

/// Decode state of one mixer for a batch of B sequences.
class MixerState {
 public:
  virtual ~MixerState() = default;
  /// Tokens consumed so far.
  virtual int64_t position() const = 0;
  /// Bytes held by the state's tensors (the decode cache), measured, not estimated.
  virtual int64_t bytes() const = 0;
  /// Number of past positions held (for attention-like caches), or 0 for a fixed-size state.
  virtual int64_t cached_positions() const { return 0; }
};

/// Model width and heads a mixer is built for.
struct MixerDims {
  int64_t d_model = 64;    // C
  int64_t n_heads = 4;     // H
  int64_t max_len = 4096;  // longest sequence forward/step must support (for position tables)
};

class Mixer : public torch::nn::Module {
 public:
  /// x (B,T,C) -> (B,T,C), causal.
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
  /// A fresh decode state for B sequences (position 0).
  virtual std::unique_ptr<MixerState> init_state(int64_t batch) = 0;
  /// x_t (B,C) -> y_t (B,C); advances the state by one token.
  virtual torch::Tensor step(MixerState& state, const torch::Tensor& x_t) = 0;
  /// The spec string this mixer was created from (canonical form).
  virtual std::string spec() const = 0;
  /// Asymptotic decode cost per token, e.g. "O(log2 n)".
  virtual std::string cost_class() const = 0;
  /// The sparsity pattern (mixlab/pattern/pattern.h spec) this mixer realises in the
  /// Y = (I-B)^-1 A X view, for the analysis columns of `mixlab compare`; "" when the mixer is
  /// not a pattern mixer (Toeplitz, affine recurrences with matrix state).
  virtual std::string pattern_spec() const { return ""; }
};

using MixerPtr = std::shared_ptr<Mixer>;

/// Number of bytes of a tensor's elements (0 for an undefined tensor).
inline int64_t tensor_bytes(const torch::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

}  // namespace mixlab
