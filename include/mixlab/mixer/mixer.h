// mixlab/mixer/mixer.h — the one interface every token mixer implements.
//
// A mixer maps x (B,T,C) -> y (B,T,C) causally, and can decode one token at a time:
//   auto state = mixer->init_state(B);
//   for t: y_t = mixer->step(*state, x_t (B,C));   // equals forward(x)[:, t] (tested per mixer)
// Mixers are created from spec strings through the registry (mixlab/registry/registry.h).
//
// The decode engine (the same five calls for every mixer; tests/registry/decode_engine_test.cpp
// runs each on every registered spec):
//   prefill(state, x (B,T,C)) -> y (B,T,C)   a chunk of T tokens at once; equals forward over the
//                                            whole prefix, so a prompt can be fed in chunks of any
//                                            size. Default: a loop of step; mixers with a real
//                                            chunked path override it.
//   step(state, x_t)                         one token.
//   save(state, out) / load(in)              one versioned binary format (mixer/state_io.h):
//                                            header with the spec, entries, checksum. The state
//                                            lists its fields in MixerState::io; load builds
//                                            init_state(batch) and reads them back.
//   fork(state)                              a deep copy: two independent continuations.
#pragma once

#include <torch/torch.h>

#include <iosfwd>
#include <memory>
#include <string>

#include "mixlab/mixer/cost_figures.h"
#include "mixlab/mixer/state_io.h"

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
  /// Sequences B held.
  virtual int64_t batch() const = 0;
  /// Lists the state's scalars and tensors, in a fixed order, to `ar` (mixer/state_io.h); the
  /// same code writes and reads. The default refuses (a state that cannot be saved or forked).
  virtual void io(StateArchive& ar);
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
  /// For a mixer that is not a pattern mixer: its figures at length T from its own definition,
  /// or the pattern its dependency graph equals (mixlab/mixer/cost_figures.h). Default: none.
  virtual MixerCostFigures cost_figures(int64_t T) const {
    (void)T;
    return {};
  }

  /// x (B,T,C), T >= 1 -> y (B,T,C); advances the state by T tokens. Equals forward over the
  /// whole prefix (rows of this chunk), whatever the chunking. Default: a loop of step.
  virtual torch::Tensor prefill(MixerState& state, const torch::Tensor& x);
  // The state save/load below overload, not hide, the module's own weight save/load.
  using torch::nn::Module::load;
  using torch::nn::Module::save;
  /// Writes `state` (made by this mixer) in the state format, headed by spec().
  void save(const MixerState& state, std::ostream& out) const;
  void save_file(const MixerState& state, const std::string& path) const;
  /// Reads a state saved by a mixer of the same spec. Throws mixlab::Error naming `source` (or the
  /// path) for a corrupt, truncated, wrong-version or other-spec state.
  std::unique_ptr<MixerState> load(std::istream& in, const std::string& source = "stream");
  std::unique_ptr<MixerState> load_file(const std::string& path);
  /// A deep copy of `state`: stepping one never changes the other.
  std::unique_ptr<MixerState> fork(const MixerState& state);
  /// The record save writes, and the state load builds from one (the model saves its blocks so).
  StateRecord state_record(const MixerState& state) const;
  std::unique_ptr<MixerState> state_from_record(StateRecord record, const std::string& source);
};

using MixerPtr = std::shared_ptr<Mixer>;

/// Number of bytes of a tensor's elements (0 for an undefined tensor).
inline int64_t tensor_bytes(const torch::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

}  // namespace mixlab
