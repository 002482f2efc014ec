// The `lm` task: windows of the Brown token streams (mixlab/train/task_lm.h).
#include "mixlab/train/task_lm.h"

#include <map>
#include <mutex>

#include "mixlab/core/error.h"

namespace mixlab {

const LmTokenizer& lm_task_tokenizer(LmTokenizerKind kind) {
  static std::mutex mutex;
  static std::map<LmTokenizerKind, LmTokenizer> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(kind);
  if (it == loaded.end()) it = loaded.emplace(kind, LmTokenizer::load(kind, LmTokenizer::default_gpt2_dir())).first;
  return it->second;
}

const LmDataset& lm_task_dataset(const TaskSpec& spec, LmSplit split) {
  const LmTokenizerKind kind = lm_tokenizer_parse(spec.tokenizer, "task lm: tokenizer");
  const LmTokenizer& tok = lm_task_tokenizer(kind);
  static std::mutex mutex;
  static std::map<std::pair<LmTokenizerKind, LmSplit>, LmDataset> opened;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = opened.find({kind, split});
  if (it == opened.end())
    it = opened
             .emplace(std::make_pair(kind, split),
                      LmDataset::open(task_text_corpus(), split, tok, LmDataset::default_cache_dir()))
             .first;
  return it->second;
}

void lm_validate(const TaskSpec& spec) {
  const LmTokenizerKind kind = lm_tokenizer_parse(spec.tokenizer, "task lm: tokenizer");
  MIXLAB_CHECK(spec.vocab == lm_tokenizer_vocab(kind),
               "task lm: vocab must be the {} tokenizer's vocabulary size {}, got {} (leave 'vocab' unset)",
               spec.tokenizer, lm_tokenizer_vocab(kind), spec.vocab);
  MIXLAB_CHECK(spec.length >= 1, "task lm: length (the window T) must be >= 1, got {}", spec.length);
}

Batch lm_batch(const TaskSpec& spec, int64_t batch_size, int64_t step, uint64_t seed, LmSplit split) {
  lm_validate(spec);
  auto [inputs, targets] = lm_train_windows(lm_task_dataset(spec, split), batch_size, spec.length, seed, step);
  Batch out;
  out.tokens = inputs;
  out.targets = targets;
  out.mask = torch::ones(inputs.sizes(), torch::kFloat32);
  out.answer = torch::full_like(inputs, -1);
  out.hops = torch::full_like(inputs, -1);
  out.length = spec.length;
  return out;
}

}  // namespace mixlab
