// mixlab/train/lm_eval.h — perplexity and bits per byte of a DecoderModel on a token stream.
//
// The stream is scored with lm_sliding_windows (mixlab/data/lm_dataset.h): windows of length
// <= T every `stride` tokens, each target scored once, in the first window that holds it.
// Windows of equal length are batched (`batch` rows, the model's forward, no autograd).
//   nll      = sum over scored targets of -log softmax(logits)[target]     (nats)
//   loss     = nll / tokens;  perplexity = exp(loss)
//   bpb      = nll / ln 2 / bytes, bytes = sum of token_bytes[target] over the scored targets
// Cost: about N * T / stride token positions of forward.
//
// Not supported: batches of unequal window lengths (the last, shorter window runs alone).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "mixlab/data/lm_dataset.h"
#include "mixlab/model/model.h"
#include "mixlab/train/config.h"

namespace mixlab {

struct LmEvalOptions {
  int64_t T = 128;      // window length (<= the model's max_len)
  int64_t stride = 64;  // 1 <= stride <= T
  int64_t batch = 32;   // windows per forward
  int64_t limit = 0;    // score only the first `limit` tokens of the stream (0 = all)
};

struct LmEvalResult {
  double nll = 0;       // nats, summed
  int64_t tokens = 0;   // scored targets
  int64_t correct = 0;  // targets that are the argmax
  int64_t bytes = 0;    // text bytes of the scored targets
  double loss() const { return tokens > 0 ? nll / static_cast<double>(tokens) : 0.0; }
  double perplexity() const;
  double bits_per_byte() const { return lm_bits_per_byte(nll, bytes); }
};

/// Scores `stream` (N) int64. `token_bytes` has one entry per vocabulary id. Throws
/// mixlab::Error on bad options (naming them) or a stream id outside the vocabulary.
LmEvalResult lm_evaluate(DecoderModel& model, const torch::Tensor& stream, const std::vector<int64_t>& token_bytes,
                         const LmEvalOptions& options);

/// The trainer's evaluation of an lm config on `split` (eval_tokens, config_eval_stride,
/// eval_batch); `stride` / `limit` override those when >= 1 / >= 0.
LmEvalResult lm_evaluate_split(DecoderModel& model, const TrainConfig& config, LmSplit split, int64_t stride = 0,
                               int64_t limit = -1);

}  // namespace mixlab
