// mixlab/data/textcopy.h — the `textcopy` task (seed 003 §6.5): copy a span of natural text.
//
// One example: a span s = (s_0 .. s_{L-1}) of L consecutive byte tokens of one corpus document
// (chosen uniformly among all length-L spans of the split's documents), repeated once without a
// delimiter: q = s ++ s (length 2L). The model reads q[0 .. 2L-2] and predicts the next token:
//
//   inputs   (B, 2L-1) int64   inputs[b, p]  = q[p]
//   targets  (B, 2L-1) int64   targets[b, p] = q[p+1]
//   mask     (B, 2L-1) float32 mask[b, p] = 1 exactly when targets[b, p] lies in the second copy,
//                              i.e. p >= L-1 (L ones per row: the whole second copy, its first
//                              token included — with a fixed L the boundary is known), else 0.
//
// Loss/accuracy on the copy = sum(mask * per-token-loss) / sum(mask).
// Determinism: the same corpus, split, sizes and seed (or generator state) give the same batch
// on every platform (the sampler uses its own integer mapping, not std::uniform_int_distribution).
// Cost: O(B L).
//
// Not supported: spans crossing document boundaries; L longer than the longest document.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <random>

#include "mixlab/data/corpus.h"

namespace mixlab {

struct TextCopyBatch {
  torch::Tensor inputs;   // (B, 2L-1) int64
  torch::Tensor targets;  // (B, 2L-1) int64
  torch::Tensor mask;     // (B, 2L-1) float32
};

/// Draws B spans with `rng`. Throws mixlab::Error naming textcopy_batch when batch <= 0, L <= 0,
/// or no document of the split has L tokens (the message gives the longest document's length).
TextCopyBatch textcopy_batch(const Corpus& corpus, int64_t batch, int64_t L, std::mt19937_64& rng,
                             Split split = Split::kTrain);

/// Same, with a fresh std::mt19937_64 seeded by `seed`.
TextCopyBatch textcopy_batch(const Corpus& corpus, int64_t batch, int64_t L, uint64_t seed,
                             Split split = Split::kTrain);

}  // namespace mixlab
