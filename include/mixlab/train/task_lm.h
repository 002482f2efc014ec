// mixlab/train/task_lm.h — the `lm` task: next-token prediction on a token stream.
//
// Data (one source per run):
//   default       Brown (task_text_corpus(): $MIXLAB_DATA_DIR, data/brown, data/sample)
//   corpus=PATH   any plain-text corpus: a folder of text files or one file of blank-line separated
//                 documents (mixlab/data/text_corpus.h); the same 80/10/10 split by document as
//                 Brown; tokenised once into the cache, keyed by a checksum of the documents
//   tokens=DIR    nanoGPT's token files: DIR/train.bin is the train stream, DIR/val.bin the valid
//                 stream (DIR/test.bin, if present, the test stream); uint16 ids, memory-mapped
//                 (mixlab/data/token_bin.h)
// Tokeniser and vocabulary (spec.vocab):
//   bytes  V = 256;  gpt2  V = 50257 (with tokens=, any V in [50257, 65536]: nanoGPT pads its
//   vocabulary to 50304; ids past 50257 never occur in GPT-2 text and generate never samples them);
//   ids    tokens= only: the ids are not text (e.g. nanoGPT's character-level data): V is given
//          by vocab= (1..65536); perplexity as usual, "bits per byte" is bits per token, generate
//          refuses (nothing to decode)
// config.cpp sets vocab from the tokeniser, and makes tokens= default to gpt2.
//
// Rows are random windows of T = spec.length tokens of the train stream (every position scored,
// mask = 1; no answers, hops = -1), drawn from (seed, step) so resume is exact. Tokenised streams
// are cached under LmDataset::default_cache_dir() and shared by every thread of the process (the
// mappings are read-only). A token file's ids are checked window by window (an id >= V is an
// error naming the file and the offset).
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
/// The tokeniser of `spec` (its tokenizer, and vocab for ids), loaded once per process (gpt2
/// from LmTokenizer::default_gpt2_dir()).
const LmTokenizer& lm_task_tokenizer(const TaskSpec& spec);
/// The stream of `split` for `spec`'s tokeniser, opened (and cached) once per process.
const LmDataset& lm_task_dataset(const TaskSpec& spec, LmSplit split);
/// Checks the data source, the tokeniser, vocab (above) and length >= 1.
void lm_validate(const TaskSpec& spec);
/// A batch of windows of the train (or, with `split`, another) stream for `step`.
Batch lm_batch(const TaskSpec& spec, int64_t batch_size, int64_t step, uint64_t seed, LmSplit split = LmSplit::kTrain);

}  // namespace mixlab
