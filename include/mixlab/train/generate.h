// mixlab/train/generate.h — text generation from an lm model: prefill the prompt, then decode
// token by token with DecoderModel::step, handing each token's text to a callback as it comes.
//
// The context is [separator] + tokens(prompt): the separator (mixlab/data/lm_tokenizer.h) starts
// every document of the training stream, so a prompt is read as the beginning of a document and
// an empty prompt starts from the separator alone. Each new token is drawn from the last logits
// with mixlab/model/sampling.h (temperature 0 = greedy). When the context reaches the model's
// max_len (the training window T), its last max_len / 2 tokens are prefilled into a fresh state
// and decoding goes on (a "context shift", counted in the stats).
// Generation stops after max_tokens tokens, or when *stop becomes true (Ctrl-C in the CLI).
//
// Not supported: stopping at the separator (it is emitted as "\n"); batches of prompts.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "mixlab/data/lm_tokenizer.h"
#include "mixlab/model/model.h"
#include "mixlab/model/sampling.h"

namespace mixlab {

struct GenerateOptions {
  std::string prompt;
  int64_t max_tokens = 256;  // >= 0
  SamplingOptions sampling;
  uint64_t seed = 0;
};

struct GenerateStats {
  int64_t prompt_tokens = 0;  // including the separator
  int64_t generated = 0;
  double prefill_seconds = 0;  // the prompt's prefill
  double decode_seconds = 0;   // sampling + steps of the generated tokens
  int64_t state_bytes = 0;     // DecoderState::bytes() at the end
  int64_t context_shifts = 0;
  bool interrupted = false;
  double tokens_per_s() const { return decode_seconds > 0 ? static_cast<double>(generated) / decode_seconds : 0.0; }
};

/// Generates from `model` (must have the tokenizer's vocabulary). `emit` gets each token's bytes.
/// Throws mixlab::Error on bad options (naming them).
GenerateStats generate_text(DecoderModel& model, const LmTokenizer& tokenizer, const GenerateOptions& options,
                            const std::function<void(const std::string&)>& emit,
                            const std::atomic<bool>* stop = nullptr);

}  // namespace mixlab
