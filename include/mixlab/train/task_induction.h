// mixlab/train/task_induction.h — induction heads (Olsson et al. 2022) as H3 (Fu et al. 2023,
// HazyResearch/safari synthetics, induction_len 1, one trigger) and Mamba (Gu & Dao 2023, §4.1.2)
// run it.
//
// Row (S = spec.length, content tokens [4, V), the special token kSep):
//   positions 0 .. S-1   content tokens (uniform, with repeats), except one position p drawn
//                        uniformly in [0, S - 2) which holds kSep
//   position  S          kSep again; scored with the token at p + 1 (always a content token)
// T = S + 1; the special token appears exactly twice, one scored position per row. The model must
// find the earlier kSep and copy what followed it (an induction head).
// Sizes: Mamba trains on S = 256 with vocab 16 and tests lengths up to 2^20 (here vocab 20 gives
// the same 16 content tokens). Training rows in H3 and Mamba are scored on every next token;
// here only the final position is (MAD's and H3's test targets), as for every mixlab task.
// Held-out rows come from a seed stream disjoint from training; no curriculum. Needs S >= 3 and
// vocab >= 5.
//
// Not supported: induction_len > 1 (a multi-token pattern), several triggers.
#pragma once

#include <cstdint>

#include "mixlab/train/tasks.h"

namespace mixlab {

/// Throws mixlab::Error naming the field: length < 3, vocab < 5.
void induction_validate(const TaskSpec& spec);

/// A batch at `length` random tokens (T = length + 1), rows drawn from `seed`.
Batch induction_generate(const TaskSpec& spec, int64_t batch_size, int64_t length, uint64_t seed);

}  // namespace mixlab
