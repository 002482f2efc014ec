// mixlab/train/task_selective_copy.h — selective copying (Gu & Dao 2023, Mamba §3.1 / Fig. 2;
// MAD's version, Poli et al. 2024: athms/mad-lab, mad/data/instances.py).
//
// Row (S = spec.length, n = spec.copy_tokens, content tokens [4, V), blank kNoise, copy token
// kSep):
//   positions 0 .. S-n-2   n content tokens (uniform, with repeats) at uniformly random distinct
//                          positions, in order; kNoise everywhere else
//   position  S-n-1        kSep (MAD's copy token)
//   positions S-n .. S-1   kNoise; the i-th is scored with the i-th content token (a label:
//                          no content token is ever an input after kSep)
// T = S; one answer per row (all n tokens). The model must pick the content tokens out of the
// blanks by their value, not their position (what separates selective, input-dependent mixers
// from time-invariant ones, Mamba §3.1).
// Sizes: MAD vocab 16 (14 content tokens + blank + copy; here vocab 18), S = 256, n = 16; Mamba
// uses n = 16 and S = 4096. mixlab's defaults, scaled to a 2-core CPU: vocab 18, S = 64, n = 8
// (the same 1 : 8 ratio of tokens to length as MAD). Needs S > 2n + 1 (MAD's condition: at
// least one blank among the tokens) and vocab >= 5.
// Difference from MAD's generator: it inserts the blanks at indices drawn from [0, n) of the
// token list, so the last content token always sits just before the copy token and the blanks
// bunch towards the start; here the n positions are a uniform subset (Mamba's "randomly spaced").
// Held-out rows come from a seed stream disjoint from training; no curriculum.
//
// Not supported: MAD's plain copying (selective = False), several copy tokens.
#pragma once

#include <cstdint>

#include "mixlab/train/tasks.h"

namespace mixlab {

/// Throws mixlab::Error naming the field: copy_tokens < 1, length <= 2 copy_tokens + 1, vocab < 5.
void selective_copy_validate(const TaskSpec& spec);

/// A batch at spec.length (T = spec.length), rows drawn from `seed`.
Batch selective_copy_generate(const TaskSpec& spec, int64_t batch_size, uint64_t seed);

}  // namespace mixlab
