// Induction heads; the row layout and its sources are in mixlab/train/task_induction.h.
#include "mixlab/train/task_induction.h"

#include "mixlab/core/error.h"
#include "mixlab/train/task_rng.h"
#include "mixlab/train/task_rows.h"

namespace mixlab {

constexpr int64_t kInductionMinLength = 3;  // p in [0, S - 2) must exist

void induction_validate(const TaskSpec& spec) {
  MIXLAB_CHECK(spec.length >= kInductionMinLength, "task induction: length must be >= {}, got {}", kInductionMinLength,
               spec.length);
  MIXLAB_CHECK(spec.vocab >= kFirstContentToken + 1,
               "task induction: vocab must be >= {} (4 special tokens + content), got {}", kFirstContentToken + 1,
               spec.vocab);
}

Batch induction_generate(const TaskSpec& spec, int64_t batch_size, int64_t length, uint64_t seed) {
  induction_validate(spec);
  MIXLAB_CHECK(batch_size >= 1, "task induction: batch_size must be >= 1, got {}", batch_size);
  MIXLAB_CHECK(length >= kInductionMinLength, "task induction: length must be >= {}, got {}", kInductionMinLength,
               length);
  const int64_t S = length, T = S + 1;
  TaskRows rows(batch_size, T);
  for (int64_t b = 0; b < batch_size; ++b) {
    TaskRng rng(task_seed_mix(seed, 40, static_cast<uint64_t>(b)));
    int64_t* tok = rows.tokens_row(b);
    int64_t* tgt = rows.targets_row(b);
    for (int64_t t = 0; t < S; ++t) tok[t] = kFirstContentToken + rng.below(spec.vocab - kFirstContentToken);
    const int64_t p = rng.below(S - 2);
    tok[p] = kTokenSep;
    tok[S] = kTokenSep;
    for (int64_t t = 0; t < S; ++t) tgt[t] = tok[t + 1];
    rows.score(b, S, tok[p + 1], 0);
  }
  return rows.to_batch(S);
}

}  // namespace mixlab
