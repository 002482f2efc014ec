// mixlab/model/sampling.h — choosing the next token from logits: greedy, temperature, top-k, top-p.
//
// sampling_distribution(logits, o), in this order:
//   temperature 0      greedy: all mass on the argmax (the lowest id among ties); top-k/top-p
//                      are then irrelevant
//   temperature t > 0  p = softmax(logits / t) (in double)
//   top_k k >= 1       keep the k most probable ids (ties broken by the lower id), 0 = all
//   top_p p in (0, 1]  then keep the smallest set of most probable ids whose mass is >= p
//                      (at least one id), 1 = all
//   the kept ids are renormalised; every other id gets exactly 0.
// Sampler draws u uniform in [0, 1) from a splitmix64 stream of its seed and returns the first id
// whose cumulative probability exceeds u: the same seed and logits give the same tokens on every
// platform.
// Not supported: repetition penalties, min-p, beam search.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace mixlab {

struct SamplingOptions {
  double temperature = 1.0;  // >= 0; 0 = greedy
  int64_t top_k = 0;         // >= 0; 0 = off
  double top_p = 1.0;        // (0, 1]; 1 = off
};

/// Throws mixlab::Error naming --temperature / --top-k / --top-p when out of range.
void sampling_validate(const SamplingOptions& o);
/// The distribution the next token is drawn from; logits (V) of any floating dtype.
std::vector<double> sampling_distribution(const torch::Tensor& logits, const SamplingOptions& o);
/// The first id whose cumulative probability exceeds u (u in [0, 1)); the last non-zero id when
/// rounding leaves u above the total.
int64_t sampling_pick(const std::vector<double>& probs, double u);

class Sampler {
 public:
  explicit Sampler(uint64_t seed) : state_(seed) {}
  /// Draws the next token from `logits` (V).
  int64_t next(const torch::Tensor& logits, const SamplingOptions& o);
  /// Uniform in [0, 1) (53 bits).
  double uniform();

 private:
  uint64_t state_;
};

}  // namespace mixlab
