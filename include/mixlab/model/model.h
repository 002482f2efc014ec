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
// The decode engine of the mixers (mixlab/mixer/mixer.h) lifts to the model: prefill(state,
// tokens (B,T)) feeds a prompt chunk through every block's Mixer::prefill (logits of every row,
// equal to forward); save/load write the whole DecoderState (every block's state and the memory
// stream) in the one state format (mixlab/mixer/state_io.h) headed by state_spec(); fork copies it.
//
// Memory stream (mixlab/mixer/memory_mixer.h). When some blocks hold a MemoryMixer, the model
// carries a second residual stream beside x: it starts as the first memory mixer's
// memory_init, and every memory block does, after its token update,
//   mem = mem + delta;  mem = mem + W_2m GELU(W_1m LN_m(mem))      (its own LN and MLP, width Dm)
// while blocks with plain mixers pass it through. The memory never reaches the logits directly,
// only through what the mixers read from it. In decode the stream is recomputed only when a
// mixer reports a new delta (a segment boundary) and is kept in DecoderState::memory. The last
// memory block's outgoing memory reaches no later mixer, so that block skips its memory update
// (training forward and decode alike; its mem LN and MLP exist for the checkpoint layout and get no
// gradient) and its DecoderState::memory entry stays undefined.
//
// Hybrid stacks (Griffin, Jamba, Zamba: recurrent layers with a few attention layers): the
// factory builds each block's own mixer, so blocks may hold different families; from a spec,
// mixer_factory_from_spec reads a per-layer list ("ssm*3|attention", mixlab/registry/
// layer_specs.h). Each block keeps its own decode state; state_spec() names every block's spec.
//
// Not supported: dropout, untied heads, key/value sharing across layers.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mixlab/mixer/memory_mixer.h"
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

/// A factory that creates the mixers of a `layers`-block model from a model's mixer spec through
/// the mixer registry: one spec for every block ("ssm"), or a per-layer list for a hybrid stack
/// ("ssm*3|attention", "ssm|attention" repeated; the grammar is mixlab/registry/layer_specs.h).
/// The list is expanded and its grammar checked here, so a bad list throws mixlab::Error before
/// any block is built; the k-th call builds block k mod `layers`.
MixerFactory mixer_factory_from_spec(const std::string& spec, int64_t layers);

class Block : public torch::nn::Module {
 public:
  Block(const ModelDims& dims, MixerPtr mixer);
  torch::Tensor forward(const torch::Tensor& x);                     // (B,T,C) -> (B,T,C)
  torch::Tensor step(MixerState& state, const torch::Tensor& x_t);   // (B,C) -> (B,C)
  torch::Tensor prefill(MixerState& state, const torch::Tensor& x);  // (B,T,C) -> (B,T,C)
  /// With the memory stream: x (B,T,C), memory (B,K,M,Dm) or undefined -> {x', memory'};
  /// a block without a memory mixer passes the memory through.
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, const torch::Tensor& memory);
  /// Decode with the memory stream: `memory_in` (B,M,Dm) enters the block; `memory_out` is this
  /// block's cached outgoing memory, updated only when the mixer reports a delta.
  torch::Tensor step(MixerState& state, const torch::Tensor& x_t, const torch::Tensor& memory_in,
                     torch::Tensor& memory_out);
  /// step for decode: contiguous float/double CPU rows go through raw-row loops (row_kernels.h:
  /// LayerNorm, MLP, residuals without a dispatch per op), other inputs through at:: ops; memory
  /// mixers too (their stream's update at a segment boundary stays in at:: ops). Equal to step
  /// to float rounding.
  torch::Tensor step_fast(MixerState& state, const torch::Tensor& x_t, const torch::Tensor& memory_in,
                          torch::Tensor& memory_out);
  Mixer& mixer() { return *mixer_; }
  /// The mixer as a MemoryMixer, or null when it has no memory.
  MemoryMixer* memory_mixer() { return memory_mixer_.get(); }
  /// Whether a later block reads this block's outgoing memory (DecoderModel sets it; true until
  /// then). Without a reader, forward returns an undefined memory and step leaves memory_out.
  void set_memory_out_read(bool read) { memory_out_read_ = read; }
  bool memory_out_read() const { return memory_out_read_; }

 private:
  torch::Tensor mlp(const torch::Tensor& x);
  torch::Tensor memory_update(const torch::Tensor& memory, const torch::Tensor& delta);
  torch::nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  MixerPtr mixer_;
  std::shared_ptr<MemoryMixer> memory_mixer_;
  torch::nn::Linear fc_{nullptr}, proj_{nullptr};
  torch::nn::LayerNorm mem_ln_{nullptr};                   // memory blocks only
  torch::nn::Linear mem_fc_{nullptr}, mem_proj_{nullptr};  // memory blocks only
  bool memory_out_read_ = true;
};

/// Per-block mixer states of one decode.
struct DecoderState {
  std::vector<std::unique_ptr<MixerState>> blocks;
  /// Memory stream: the initial memory (B,M,Dm) and each block's outgoing memory (undefined for
  /// blocks without a memory mixer, and for all when the model has none).
  torch::Tensor memory_init;
  std::vector<torch::Tensor> memory;
  int64_t position = 0;
  /// Bytes held by all mixer states and the memory stream.
  int64_t bytes() const;
  /// Sequences B held.
  int64_t batch() const;
};

class DecoderModel : public torch::nn::Module {
 public:
  DecoderModel(const ModelDims& dims, const MixerFactory& factory);
  /// tokens (B,T) int64 -> logits (B,T,V) float32.
  torch::Tensor forward(const torch::Tensor& tokens);
  DecoderState init_state(int64_t batch);
  /// tokens_t (B) int64 -> logits (B,V); advances every block's state by one token. The decode
  /// path: runs under c10::InferenceMode (no autograd bookkeeping; decode never trains, and
  /// the logits it returns are inference tensors), the backbone on raw rows (Block::step_fast).
  torch::Tensor step(DecoderState& state, const torch::Tensor& tokens_t);
  /// The same row through the plain modules, in the caller's grad mode: the baseline the fast
  /// path is benchmarked against (bench/decode_bench.cpp) and tested equal to (to float
  /// rounding: the raw-row loops add in another order than ATen's kernels).
  torch::Tensor step_reference(DecoderState& state, const torch::Tensor& tokens_t);
  /// tokens (B,T) int64, T >= 1 -> logits (B,T,V); advances the state by T tokens; equals the
  /// rows of forward over the whole prefix. Runs under InferenceMode like step: a state that
  /// step or prefill touched holds inference tensors; use it through step, prefill, save, load
  /// and fork (fork returns ordinary tensors). Blocks run their mixer's chunked prefill; a model
  /// with a memory stream steps token by token (the stream changes inside a chunk).
  torch::Tensor prefill(DecoderState& state, const torch::Tensor& tokens);
  /// What a saved state is headed by: the dims and every block's mixer spec. A state loads only
  /// into a model with the same one.
  std::string state_spec() const;
  // The module's weight archives (checkpoints) keep their names beside the state's save/load.
  using torch::nn::Module::load;
  using torch::nn::Module::save;
  void save(const DecoderState& state, std::ostream& out);
  void save_file(const DecoderState& state, const std::string& path);
  /// Throws mixlab::Error naming `source` / the path for a corrupt, truncated or other-model state.
  DecoderState load(std::istream& in, const std::string& source = "stream");
  DecoderState load_file(const std::string& path);
  /// A deep copy: two independent continuations.
  DecoderState fork(const DecoderState& state);
  const ModelDims& dims() const { return dims_; }
  int64_t parameter_count() const;
  std::vector<std::shared_ptr<Block>>& blocks() { return blocks_; }

 private:
  void check_state(const DecoderState& state, const char* fn) const;
  void check_step_input(const DecoderState& state, const torch::Tensor& tokens_t) const;
  StateRecord state_record(const DecoderState& state, bool copy);
  DecoderState state_from_record(StateRecord record, const std::string& source);
  ModelDims dims_;
  torch::nn::Embedding embed_{nullptr};
  std::vector<std::shared_ptr<Block>> blocks_;
  MemoryMixer* memory_source_ = nullptr;  // the first memory mixer: the stream's initial memory
  torch::nn::LayerNorm ln_f_{nullptr};
};

}  // namespace mixlab
