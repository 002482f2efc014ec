// mixlab/train/task_rows.h — the row buffers a synthetic task generator fills, and the Batch
// they become (tasks.h has the batch format).
//
// A generator writes B rows of T tokens into flat int64 vectors (row b at [b*T, (b+1)*T)) and
// calls to_batch once; hops is -1 everywhere (only recall/multihop have hops). Used by the MAD
// suite (task_mad.h), selective copying (task_selective_copy.h) and induction heads
// (task_induction.h).
//
// Not thread-safe; one instance per batch.
#pragma once

#include <cstdint>
#include <vector>

#include "mixlab/train/tasks.h"

namespace mixlab {

struct TaskRows {
  int64_t B = 0, T = 0;
  std::vector<int64_t> tokens;   // (B,T) inputs, kPad until written
  std::vector<int64_t> targets;  // (B,T) next token or label, kPad until written
  std::vector<int64_t> mask;     // (B,T) 1 on scored positions
  std::vector<int64_t> answer;   // (B,T) answer index within the row, -1 outside answers

  TaskRows(int64_t b, int64_t t);
  int64_t* tokens_row(int64_t b) { return tokens.data() + b * T; }
  int64_t* targets_row(int64_t b) { return targets.data() + b * T; }
  /// Scores position t of row b with `label`, part of answer `answer_index`.
  void score(int64_t b, int64_t t, int64_t label, int64_t answer_index);
  /// The batch (hops -1, pairs 0, length = `length`).
  Batch to_batch(int64_t length) const;
};

}  // namespace mixlab
