// Selective copying; the row layout and its sources are in mixlab/train/task_selective_copy.h.
#include "mixlab/train/task_selective_copy.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/train/task_rng.h"
#include "mixlab/train/task_rows.h"

namespace mixlab {

void selective_copy_validate(const TaskSpec& spec) {
  MIXLAB_CHECK(spec.copy_tokens >= 1, "task selective_copy: copy_tokens must be >= 1, got {}", spec.copy_tokens);
  MIXLAB_CHECK(spec.length > 2 * spec.copy_tokens + 1,
               "task selective_copy: length must be > 2 x copy_tokens + 1 = {} (the tokens, at least one blank among "
               "them, the copy token and the answer), got {}",
               2 * spec.copy_tokens + 1, spec.length);
  MIXLAB_CHECK(spec.vocab >= kFirstContentToken + 1,
               "task selective_copy: vocab must be >= {} (4 special tokens + content), got {}", kFirstContentToken + 1,
               spec.vocab);
}

Batch selective_copy_generate(const TaskSpec& spec, int64_t batch_size, uint64_t seed) {
  selective_copy_validate(spec);
  MIXLAB_CHECK(batch_size >= 1, "task selective_copy: batch_size must be >= 1, got {}", batch_size);
  const int64_t S = spec.length, n = spec.copy_tokens, span = S - n - 1;
  TaskRows rows(batch_size, S);
  for (int64_t b = 0; b < batch_size; ++b) {
    TaskRng rng(task_seed_mix(seed, 30, static_cast<uint64_t>(b)));
    // A uniform n-subset of [0, span): a partial Fisher-Yates, then in order.
    std::vector<int64_t> where(span);
    std::iota(where.begin(), where.end(), 0);
    for (int64_t i = 0; i < n; ++i) std::swap(where[i], where[i + rng.below(span - i)]);
    where.resize(n);
    std::sort(where.begin(), where.end());
    int64_t* tok = rows.tokens_row(b);
    int64_t* tgt = rows.targets_row(b);
    std::fill(tok, tok + S, kTokenNoise);
    for (int64_t i = 0; i < n; ++i) tok[where[i]] = kFirstContentToken + rng.below(spec.vocab - kFirstContentToken);
    tok[span] = kTokenSep;
    for (int64_t t = 0; t + 1 < S; ++t) tgt[t] = tok[t + 1];
    for (int64_t i = 0; i < n; ++i) rows.score(b, span + 1 + i, tok[where[i]], 0);
  }
  return rows.to_batch(S);
}

}  // namespace mixlab
