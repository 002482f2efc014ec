// mixlab/model/model.h — the GPT-2-style decoder every mixer is trained in (seed 000 §5.1).
//
//   tokens (B,T) -> embedding (B,T,C)
//   per block:  x = x + mixer(LN_1(x));  x = x + W_2 GELU(W_1 LN_2(x))   (MLP width r*C)
//   LN_f, then logits = x E^T with E the (tied) embedding matrix          -> (B,T,V)
// There is no positional embedding: mixers that use queries/keys apply RoPE inside (attention),
// recurrent mixers know order from the recurrence. Initialisation follows GPT-2: N(0, 0.02) for
// the embedding and MLP input weights, N(0, 0.02 / sqrt(2 * layers)) for the MLP output weight,
// zero biases; mixers keep their own initialisation.
//
// Decode: `state = model.init_state(B)` then `logits_t = model.step(state, tokens_t (B))` per
// token; equals forward(tokens)[:, t] row by row (each block steps its mixer's own state).
// Cost per token = the mixer's decode cost + O(C^2 r) for the MLP + O(C V) for the head.
//
// Not supported: dropout, untied heads, key/value sharing across layers.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mixlab/mixer/mixer.h"

namespace mixlab {

struct ModelDims {
  int64_t vocab = 64;    // V
  int64_t d_model = 64;  // C
  int64_t layers = 2;
  int64_t heads = 4;       // H, passed to the mixer
  int64_t mlp_ratio = 4;   // r
  int64_t max_len = 4096;  // longest sequence, passed to the mixer
};

/// Builds one mixer per block (called `layers` times, in block order).
using MixerFactory = std::function<MixerPtr(const MixerDims&)>;

/// A factory that creates `spec` through the mixer registry (mixlab/mixers/registry.h).
MixerFactory mixer_factory_from_spec(const std::string& spec);

class Block : public torch::nn::Module {
 public:
  Block(const ModelDims& dims, MixerPtr mixer);
  torch::Tensor forward(const torch::Tensor& x);                    // (B,T,C) -> (B,T,C)
  torch::Tensor step(MixerState& state, const torch::Tensor& x_t);  // (B,C) -> (B,C)
  Mixer& mixer() { return *mixer_; }

 private:
  torch::Tensor mlp(const torch::Tensor& x);
  torch::nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  MixerPtr mixer_;
  torch::nn::Linear fc_{nullptr}, proj_{nullptr};
};

/// Per-block mixer states of one decode.
struct DecoderState {
  std::vector<std::unique_ptr<MixerState>> blocks;
  int64_t position = 0;
  /// Bytes held by all mixer states.
  int64_t bytes() const;
};

class DecoderModel : public torch::nn::Module {
 public:
  DecoderModel(const ModelDims& dims, const MixerFactory& factory);
  /// tokens (B,T) int64 -> logits (B,T,V) float32.
  torch::Tensor forward(const torch::Tensor& tokens);
  DecoderState init_state(int64_t batch);
  /// tokens_t (B) int64 -> logits (B,V); advances every block's state by one token.
  torch::Tensor step(DecoderState& state, const torch::Tensor& tokens_t);
  const ModelDims& dims() const { return dims_; }
  int64_t parameter_count() const;
  std::vector<std::shared_ptr<Block>>& blocks() { return blocks_; }

 private:
  ModelDims dims_;
  torch::nn::Embedding embed_{nullptr};
  std::vector<std::shared_ptr<Block>> blocks_;
  torch::nn::LayerNorm ln_f_{nullptr};
};

}  // namespace mixlab
