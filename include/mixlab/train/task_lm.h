// mixlab/train/task_lm.h — the `lm` task: next-token prediction on Brown (mixlab/data/lm_dataset.h).
//
// Rows are random windows of T = spec.length tokens of the train stream (every position scored,
// mask = 1; no answers, hops = -1), drawn from (seed, step) so resume is exact. The vocabulary
// is the tokeniser's (bytes 256, gpt2 50257): spec.vocab must equal it (config.cpp sets it).
// The corpus is task_text_corpus()'s (tasks.h: $MIXLAB_DATA_DIR, data/brown, data/sample);
// tokenised streams are cached under LmDataset::default_cache_dir() and shared by every thread
// of the process (the mappings are read-only).
//
// Not supported: curriculum (ignored: a window has no "length" to grow).
#pragma once

#include <cstdint>

#include "mixlab/data/corpus.h"
#include "mixlab/data/lm_dataset.h"
#include "mixlab/data/lm_tokenizer.h"
#include "mixlab/train/tasks.h"

namespace mixlab {

/// The corpus of the text tasks (textcopy, lm), loaded once per process.
const Corpus& task_text_corpus();
/// The tokeniser of `kind`, loaded once per process (gpt2 from LmTokenizer::default_gpt2_dir()).
const LmTokenizer& lm_task_tokenizer(LmTokenizerKind kind);
/// The stream of `split` for `spec`'s tokeniser, opened (and cached) once per process.
const LmDataset& lm_task_dataset(const TaskSpec& spec, LmSplit split);
/// Checks vocab == the tokeniser's vocabulary and length >= 1.
void lm_validate(const TaskSpec& spec);
/// A batch of windows of the train (or, with `split`, another) stream for `step`.
Batch lm_batch(const TaskSpec& spec, int64_t batch_size, int64_t step, uint64_t seed, LmSplit split = LmSplit::kTrain);

}  // namespace mixlab
